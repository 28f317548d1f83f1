"""The engine's streaming side: a group's request sent in parts and each of its
queries answered when it can be.

A :class:`~codedjax.serving.StreamingServer` drives a one-round server's engine
group by group: :meth:`StreamedRequests.begin` opens a group's request (its
number, the injector's draw) when the group's first query arrives (with
dispatch on arrival) or when it closes; :meth:`StreamedRequests.send_query`
sends a query to its own workers when it arrives (a systematic code, a backend
with ``submit_part``); :meth:`StreamedRequests.fan_out` sends every other
worker its coded row when the group closes (full, or at its deadline: padding
rows go to their own workers then), from when the policy's deadline counts.
The engine answers each query by the rules of ``_per_query.py`` and the
frontend takes the answers with :meth:`StreamedRequests.take_answers`.

The per-answer work stays a copy: an own worker's answer is its query's value
(case (a)); the engine decodes for a query only when ``decodable_queries``
gives one that no own answer gave (case (b), under :class:`FirstDecodable`),
and at the decision (case (c)).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._arguments import noise_levels
from ._per_query import SUCCESS, QueryAnswer, QueryPlan, QueryState, answered_rows
from ._request import Request


class StreamedRequests:
    """The engine's members for a streaming frontend (a mixin of
    :class:`~codedjax.serving._engine.Engine`, whose attributes it uses)."""

    @property
    def query_plan(self) -> QueryPlan | None:
        """What the code allows a streamed group's queries (a one-round server,
        once warm; None otherwise), found once."""
        if self._query_plan is None and self.warm and self.one_shot:
            st = self.stages[0]
            self._query_plan = QueryPlan(st.code, self.warm_spec, st.out,
                                         self.final_out, "StreamingServer")  # fmt: skip
        return self._query_plan

    def take_answers(self) -> list[tuple[Request, QueryAnswer]]:
        """The queries answered since the last call, in order: ``(request,
        answer)``; each query once."""
        out, self._answers = self._answers, []
        return out

    @property
    def arrival_dispatch(self) -> bool:
        """A query may be sent to its own workers when it arrives: a one-round
        server (warm), a code whose own workers are sent the queries as they
        are, a backend that takes a request in parts."""
        plan = self.query_plan
        return plan is not None and plan.on_arrival and self.cluster.can_submit_part

    def prepare(self, x, fname: str) -> None:
        """Warms up (once) on a request of K copies of the query ``x`` [...]."""
        if not self.warm:
            self.warmup(self.check_input(fname, np.stack([x] * self.num_inputs)), fname)

    def begin(self, index, x, fname: str) -> Request:
        """Opens the request of a streamed group whose first query is ``x``
        [...] (warming up first): its number, nothing sent yet.

        Raises:
            RuntimeError: a server in rounds (a pipeline's request is sent
                whole, with :meth:`open`).
        """
        if not self.one_shot:
            raise RuntimeError(f"{fname}: a pipeline's requests are sent whole")
        self.prepare(x, fname)
        st, now = self.stages[0], self.cluster.now()
        k, m = self.num_inputs, self.num_workers
        r = self.new_request(index, None)
        r.task = r.rid
        r.new_round(m, now, now, math.inf, st.out)
        r.stream = QueryState(self.query_plan, st.policy, st.code, k, m)
        self.track(r)
        return r

    def send_query(self, r: Request, slot: int, x) -> bool:
        """Sends query ``slot`` of ``r`` (``x`` [...]) to its own workers now
        (:attr:`arrival_dispatch`); False when it has none (its row goes out
        at the close)."""
        q = r.stream
        ws = q.plan.own_list[slot]
        q.live[slot] = True
        if not len(ws):
            return False
        row = np.asarray(x).astype(q.plan.row_dtype, copy=False)
        self.cluster.submit_part(r.task, np.repeat(row[None], len(ws), 0), ws)
        q.sent[ws] = True
        return True

    def fan_out(self, r: Request, x, size: int, fname: str) -> list:
        """The group of ``r`` closed with ``size`` real queries, ``x`` [K, ...]
        padded: encodes it, sends every worker not sent yet its row, and starts
        the policy's deadline; the policy is asked about the answers already
        in hand (a decision now ends the round).

        Returns:
            ``[(request, result or exception)]`` when the round ended here.

        Raises:
            The encode's or the backend's error (the request is discarded).
        """
        st, backend, q = self.stages[0], self.cluster, r.stream
        m = self.num_workers
        t_round = backend.now()
        try:
            x = self.check_input(fname, x)
            rest = np.flatnonzero(~q.sent)
            rows, dt = None, 0.0
            if len(rest) or st.noise_fn is not None:  # else no row is wanted
                t0 = time.perf_counter()
                rows = np.asarray(st.code.encode(x))
                dt = time.perf_counter() - t0
                self.charge(dt)
            r.encode_time[0] = dt
            r.x0 = r.x = x
            t_sub = backend.now()
            r.times -= t_sub - r.t_sub  # answers before the close: from the close
            r.t_round, r.t_sub = t_round, t_sub
            dl = st.policy.deadline
            r.deadline_at = math.inf if dl is None else t_sub + dl
            r.sent_at[0] = t_sub - r.t_start
            q.live[:size] = True
            if len(rest) == m:
                backend.submit(r.task, rows)
            elif len(rest):
                backend.submit_part(r.task, rows[rest], rest)
            q.sent[:] = True
            q.closed = True
            r.noise = noise_levels(fname, st.noise_fn, rows, m)
        except BaseException:
            self.discard(r)
            raise
        done: list = []
        try:
            decode = lambda n: self.decode(r, st, n)  # noqa: E731
            if r.num_ok and self.decisions.ask(
                st.policy, st.code, r, r.num_ok, backend.now(), decode
            ):
                self.end_round(r, False, done, fname)
            elif r.answered == m:
                self.end_round(r, False, done, fname)
            else:
                self.answer_gained(r, st)
        except Exception as exc:
            self.drop(r, exc, done)
        return done

    # ------------------------------------------------------------ the answers

    def _answer(self, r: Request, slot: int, value, ok, status, error, result):
        q = r.stream
        if q.done[slot]:
            raise RuntimeError(
                f"StreamingServer: internal error: query {slot} of request "
                f"{r.rid} answered twice"
            )
        q.done[slot] = True
        self._answers.append(
            (r, QueryAnswer(slot, value, bool(ok), int(status), float(error), result))
        )

    def answer_own(self, r: Request, lo: int, hi: int) -> None:
        """Case (a): the successful answers ``lo .. hi - 1`` of the round, in
        arrival order, answer the live queries whose own workers gave them."""
        q = r.stream
        plan = q.plan
        if not plan.copy:
            return
        for w in r.order[lo:hi].tolist():
            for slot, part in plan.owners[w]:
                if q.live[slot] and not q.done[slot]:
                    value = plan.copy_of(r.y[w], part)
                    self._answer(r, slot, value, True, SUCCESS, 0.0, None)

    def answer_first(self, r: Request, before: int) -> None:
        """Case (a) for the first successful answer of a batch that came after
        the close (answer ``before`` of the round, never cut by the decision):
        its query is answered and settled now (:attr:`on_answers`), before the
        policy's decision and its decode."""
        self.answer_own(r, before, before + 1)
        if self._answers and self.on_answers is not None:
            self.on_answers()

    def answer_gained(self, r: Request, st) -> None:
        """Case (b): under a policy that decodes at the first ``ok`` (from its
        ``need``-th answer on), the live queries the answers in hand give
        (``decodable_queries``) and no own answer gave, from a decode (the
        round's, kept; or a stand-in)."""
        q = r.stream
        if not q.first or q.plan.own is None or r.num_ok < q.need:
            return
        want = q.wanted
        if not want.any():
            return
        give = np.asarray(st.code.decodable_queries(r.mask), bool).reshape(-1)
        if not (give & want).any():
            return
        # every query given: the round's own decode (kept, the policy's); else
        # it cannot be ok (decodable_queries is necessary): a stand-in
        res = self.decode(r, st) if give.all() else None
        good, value, err = answered_rows(
            q.plan, st.code, res, r.decode_inputs(), give & want, self._timed(st),
            give,
        )  # fmt: skip
        for slot in np.flatnonzero(good).tolist():
            self._answer(r, slot, value[slot], True, SUCCESS, err, None)

    def answer_decided(self, r: Request, st, res, stalled: bool) -> None:
        """Case (c): at the round's decision (its :class:`ServeResult` ``res``)
        every live query not answered yet: the decode's row where the answers
        give it, else an answer that is not ok, with the decode's status."""
        q = r.stream
        want = q.wanted
        if not want.any():
            return
        good, value, err = np.zeros_like(want), None, math.inf
        if not stalled:
            inputs = (res.responses, res.mask, res.order, r.noise)
            good, value, err = answered_rows(q.plan, st.code, res, inputs, want,
                                             self._timed(st))  # fmt: skip
        for slot in np.flatnonzero(want).tolist():
            if good[slot]:
                self._answer(r, slot, value[slot], True, SUCCESS, err, res)
            else:
                self._answer(r, slot, res.value[slot], False, res.status, math.inf,
                             res)  # fmt: skip

    def _timed(self, st):
        """``decode(y, mask, order, noise)`` of ``st``, timed and charged to the
        master as the round's own decodes are."""

        def decode(*inputs):
            t0 = time.perf_counter()
            out = st.decode(*inputs)
            np.asarray(out.ok)
            self.charge(time.perf_counter() - t0)
            return out

        return decode
