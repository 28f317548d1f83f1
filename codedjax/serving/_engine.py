"""The engine of the servers: encode, fan out, wait, decode, cancel.

:class:`Engine` is the event loop of :class:`~codedjax.serving.Server` (one
round per request) and :class:`~codedjax.serving.PipelineServer` (several, a
master step between them). A server owns one (``server.engine``) and runs its
``infer`` and ``serve`` on it with :meth:`Engine.run`; a
:class:`~codedjax.serving.StreamingServer` drives its server's engine request
by request with :meth:`Engine.open` (a pipeline's) or the streaming members
of ``_streamed.py`` (a group sent in parts, each query answered when it can
be), :meth:`Engine.step` and :meth:`Engine.abort`. The engine calls its
backend only through the members :class:`~codedjax.serving.Backend` and
``BackendBase`` declare (``_backends.py``).

Answers are taken in batches: at each wake-up the engine takes every answer
the backend has ready (``next_completions``), each request's in one pass on
its arrays (:class:`Request`, ``_request.py``), and asks the policy once per
batch (:class:`Decisions`, ``_decisions.py``), which finds the answer at which
it decides, so a round ends where asking after every answer would have ended
it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._arguments import check_request, noise_levels
from ._backends import BackendBase, NoMoreAnswers, WorkerFunctions
from ._decisions import Decisions
from ._request import Request
from ._roles import Stage
from ._serve_result import finish_round
from ._streamed import StreamedRequests
from ._thread_cluster import ThreadCluster
from ._warmup import warm_up


class Engine(StreamedRequests):
    """The event loop of a server (see the module): encode, fan out, wait,
    decode, cancel; between rounds the master's step and the next encode.

    Every call comes from one thread (the server's caller, or a
    ``StreamingServer``'s dispatcher), except :meth:`close`, which may come
    from any.

    Args:
        stages: the checked rounds (``make_round``, ``_roles.py``), in order;
            every round has the same K and M.
        backend: a :class:`~codedjax.serving.Backend`, or None (a new
            ``ThreadCluster``); started here with the stages' functions.
        name: the server's name, for messages.
        charge: advance a virtual clock by the master's measured work (encode,
            decode, master steps).
        result: ``result(request, value)`` -> the result of a request served
            in rounds, from its :class:`Request` (its rounds' results) and the
            last master step's output (None: a round did not decode); the
            backend gets ``submit(..., round=, draw=, work=)``. None: one round
            per request, whose :class:`ServeResult` is its result, sent with the
            plain ``submit(request_id, rows)``.

    Attributes:
        stages: the rounds.
        backend: the backend as given (or the new ThreadCluster).
        cluster: the same backend with every member the engine calls
            (``BackendBase.of``: the defaults of the optional ones it lacks).
        num_inputs: K.
        num_workers: M.
        frontend: the ``StreamingServer`` that owns the engine, or None (then
            :meth:`run` may serve).
        on_answers: called in a step when own workers' answers have answered
            queries, before the decision's decode (the frontend's settle).
        input_spec: ``(shape, dtype)`` of the first request (None before it);
            every request must match it.
        warm: the warm-up has run.
        final_out: what a request's answer is (shape, dtype), once warm.
        query_plan: what a one-round server's code allows a streamed group's
            queries (``_per_query.QueryPlan``, found when first asked for, once
            warm); None in rounds.
        closed: :meth:`close` was called.
    """

    def __init__(
        self,
        stages: list[Stage],
        backend: Any,
        *,
        name: str,
        charge: bool,
        result: Callable[[Request, Any], Any] | None = None,
    ):
        self.stages = stages
        self._result = result
        first = stages[0].code
        self.num_inputs = int(first.num_inputs)
        self.num_workers = m = int(first.num_workers)
        self._charge_master = bool(charge)
        self._next_id = 0
        self._active: dict[int, Request] = {}  # by the backend's task id
        self._answers: list = []  # a streamed group's queries answered
        self._query_plan, self.warm_spec = None, None
        self.one_shot = result is None  # one round: its ServeResult the result
        self.decisions = Decisions()
        self.frontend: Any = None
        self.on_answers: Callable[[], None] | None = None
        self.closed = False
        self.input_spec: tuple | None = None
        self.warm = False
        self.final_out: jax.ShapeDtypeStruct | None = None
        self.backend = ThreadCluster() if backend is None else backend
        self.cluster = BackendBase.of(self.backend, name)
        fns = [[st.fns[role] for role in st.roles] for st in stages]
        if result is None and len({id(f) for f in fns[0]}) == 1:
            self.cluster.start(fns[0][0], m)  # one function: any backend takes it
        else:
            self.cluster.start(
                WorkerFunctions(fns, roles=[st.roles for st in stages]), m
            )

    def close(self) -> None:
        """Shuts the backend (its threads) down; a request in flight ends with
        an error. Callable from any thread."""
        if not self.closed:
            self.closed = True
            self.cluster.close()

    @property
    def in_flight(self) -> int:
        """How many requests are in flight."""
        return len(self._active)

    def check_input(self, fname: str, x: Any) -> jax.Array:
        """A request x [K, ...] checked (floating, K rows, shaped like the first
        request, whose shape and dtype become :attr:`input_spec`): TypeError
        for x not floating, ValueError for x not [K, ...] or shaped unlike the
        first request."""
        x, self.input_spec = check_request(fname, x, self.num_inputs, self.input_spec)
        return x

    def warmup(self, x: Any, fname: str) -> None:
        """Compiles everything a request like ``x`` [K, ...] (checked) runs,
        outside any timing (:func:`warm_up`); the first :meth:`open` calls it."""
        self.final_out = warm_up(
            self.stages, self.cluster, x, fname, rounds=self._result is not None
        )
        self.warm_spec = (tuple(x.shape), np.dtype(x.dtype))  # for query_plan
        self.warm = True

    def charge(self, seconds: float) -> None:
        """The master's measured work, on a virtual clock (a real clock has
        already moved)."""
        if self._charge_master:
            self.cluster.advance(seconds)

    def run(self, xs: Iterable[Any], *, max_in_flight: int, fname: str) -> list:
        """Serves the requests ``xs`` (each [K, ...]), at most ``max_in_flight``
        at a time: the results in input order (what ``infer`` and ``serve``
        return). An error of a request, or the backend's, cancels every
        request in flight and is raised.

        Raises:
            RuntimeError: the engine is closed (or closes meanwhile), or a
                :class:`~codedjax.serving.StreamingServer` owns it.
        """
        if self.closed:
            raise RuntimeError(f"{fname}: the server is closed")
        if self.frontend is not None or self._active:
            raise RuntimeError(
                f"{fname}: a StreamingServer owns this server; submit through it"
            )
        pending = deque(enumerate(xs))
        results: dict[int, Any] = {}
        try:
            while pending or self._active:
                if self.closed:
                    raise RuntimeError(f"{fname}: the server was closed mid-request")
                while pending and len(self._active) < max_in_flight:
                    index, x = pending.popleft()
                    self.open(index, x, fname)
                for r, res in self.step(fname):
                    if isinstance(res, BaseException):
                        raise res  # that request's own error (decode, policy, ...)
                    results[r.index] = res
        except BaseException:
            self.abort()
            raise
        return [results[i] for i in range(len(results))]

    def abort(self) -> None:
        """Cancels every request in flight (after an error): they are
        forgotten, their workers freed (best effort)."""
        for task in list(self._active):
            self._release(task)
        self._active.clear()
        self.take_answers()

    def _release(self, task: int | None) -> None:
        """Cancels a task at the backend and forgets its work count (best
        effort: this runs after an error)."""
        if task is None:
            return
        with contextlib.suppress(Exception):
            self.cluster.cancel(task)
            self.cluster.work(task)

    def drop(self, r: Request, exc: Exception, done: list) -> None:
        """Ends request ``r`` with its own error ``exc`` (a decode, a policy, a
        master step or a next round's encode that raised): it leaves the
        requests in flight, its workers are released, and ``done`` gets
        ``(r, exc)``; the other requests go on."""
        if self._active.get(r.task) is r:
            del self._active[r.task]
        self._release(r.task)
        done.append((r, exc))

    def _end(self, r: Request, timed_out, done: list, fname, *, stalled=False):
        try:
            self.end_round(r, timed_out, done, fname, stalled=stalled)
        except Exception as exc:
            self.drop(r, exc, done)

    def open(self, index: Any, x: Any, fname: str) -> Request:
        """Checks the request x [K, ...], compiles on the first request
        (:meth:`warmup`), and sends its first round.

        Returns:
            The request's state (``rid`` its number, ``index`` what the caller
            passed).

        Raises:
            What :meth:`check_input` and the warm-up raise; the request's own
            error (its encode, its noise levels, the backend's submit), after
            freeing the workers its rows reached.
        """
        x = self.check_input(fname, x)
        if not self.warm:
            self.warmup(x, fname)
        r = self.new_request(index, x)
        try:
            self._start_round(r, 0, x, fname)
        except BaseException:
            self._release(r.task)  # rows already sent: the workers are freed
            raise
        self._active[r.task] = r
        return r

    def new_request(self, index: Any, x0: Any) -> Request:
        """A new request (the next number) of input ``x0``, started now."""
        self._next_id += 1
        return Request(self._next_id - 1, index, self.cluster.now(), x0,
                       len(self.stages))  # fmt: skip

    def track(self, r: Request) -> None:
        """Request ``r`` (its task id set) is in flight from now."""
        self._active[r.task] = r

    def discard(self, r: Request) -> None:
        """Forgets request ``r`` after its own error; its workers are freed."""
        if self._active.get(r.task) is r:
            del self._active[r.task]
        self._release(r.task)

    def step(self, fname: str, until: float | None = None) -> list:
        """Ends the requests whose deadline has passed (after taking every
        answer already in hand: it may have waited while this thread was late
        to notice the deadline), else waits for answers
        (until the earliest deadline, or ``until`` on the backend's clock, or a
        backend's ``wake``) and takes every answer ready at that wake-up
        (``next_completions``), request by request, in one batch each.

        An error of one request (its decode, its policy, its master step, its
        next round's encode) ends that request alone, with ``(request,
        exception)`` in the list; a worker's bad answer is that worker's
        failure. Only the backend's own errors (``next_completions``) propagate.

        Returns:
            ``[(request, result or exception)]`` for the requests that ended
            (:class:`Request`; a request's result is what :meth:`run` returns
            for it).
        """
        backend = self.cluster
        done: list = []
        now = backend.now()
        expired = [r for r in self._active.values() if r.deadline_at <= now]
        if expired:
            # answers already in hand when a deadline is noticed count: after a
            # stall of this thread (a garbage collection, a busy core) they may
            # have waited here since before the deadline (docs/serving.md,
            # "Late wake-ups")
            batch = backend.next_completions(0.0)
            if not batch:  # a pending wake() may take the first look: once more
                batch = backend.next_completions(0.0)
            while batch:
                self._take_batch(batch, done, fname)
                batch = backend.next_completions(0.0)
            for r in expired:  # still waiting (not decided, not a next round)
                if self._active.get(r.task) is r and r.deadline_at <= now:
                    self._end(r, True, done, fname)
            return done
        due = min((r.deadline_at for r in self._active.values()), default=math.inf)
        if until is not None:
            due = min(due, until)
        if math.isinf(due) and not self._active:
            return done
        timeout = None if math.isinf(due) else max(0.0, due - now)
        try:
            batch = backend.next_completions(timeout)
        except NoMoreAnswers as exc:
            if timeout is not None:
                raise
            # no answer will ever come (hung workers) and no deadline: the
            # requests that hold the hung workers are never decided, which is
            # data, not a hang (ending them frees the workers for the others)
            # (a streamed group still filling is not: its rows are not all out)
            live = {t: r for t, r in self._active.items()
                    if r.stream is None or r.stream.closed}  # fmt: skip
            stuck = [live[t] for t in exc.request_ids if t in live]
            for r in stuck or list(live.values()):
                self._end(r, False, done, fname, stalled=True)
            return done
        self._take_batch(batch, done, fname)
        return done

    def _take_batch(self, batch: list, done: list, fname: str) -> None:
        """Takes one wake-up's answers, request by request (:meth:`_take`)."""
        by_task: dict[Any, list] = {}
        for c in batch:
            by_task.setdefault(c.request_id, []).append(c)
        for task, answers in by_task.items():
            r = self._active.get(task)
            if r is None:  # a request already decided (or never ours)
                continue
            try:
                self._take(r, answers, done, fname)
            except Exception as exc:
                self.drop(r, exc, done)

    def _take(self, r: Request, answers: list, done: list, fname: str) -> None:
        """Takes a batch of answers to request ``r`` (:meth:`Request.take`),
        asks the policy once for the batch (:class:`Decisions`), and ends the
        round when it says so or when nothing more will come. A streamed
        group's own answers answer their queries (``_streamed.py``); before
        its close nothing else happens."""
        st = self.stages[r.stage]
        before = r.num_ok
        added = r.take(answers, st.out)
        q = r.stream
        if q is not None and not q.closed:
            if added:
                self.answer_own(r, before, r.num_ok)
            return
        if added:
            if q is not None:
                self.answer_first(r, before)
            n = self.decisions.decide(
                st.policy, st.code, r, before, added, self.cluster.now(),
                lambda n: self.decode(r, st, n),
            )  # fmt: skip
            if n:
                r.cut(n)  # the answers after the deciding one: not arrived
                if q is not None:
                    self.answer_own(r, before, n)
                self.end_round(r, False, done, fname)
                return
            if q is not None:
                self.answer_own(r, before, r.num_ok)
                self.answer_gained(r, st)
        if r.answered == self.num_workers:  # nothing more will come
            self.end_round(r, False, done, fname)

    def _start_round(self, r: Request, j: int, x, fname: str, t_round=None) -> None:
        """Encodes round j's input (timed), sends it, and resets the request's
        answers for the round."""
        st, backend = self.stages[j], self.cluster
        t_round = backend.now() if t_round is None else t_round
        t0 = time.perf_counter()
        rows = np.asarray(st.code.encode(x))
        dt = time.perf_counter() - t0
        self.charge(dt)
        r.encode_time[j] = dt
        r.stage, r.x = j, x
        single = self._result is None
        r.task = r.rid if single else r.rid * len(self.stages) + j
        t_sub = backend.now()
        dl = st.policy.deadline
        r.new_round(self.num_workers, t_round, t_sub,
                    math.inf if dl is None else t_sub + dl, st.out)  # fmt: skip
        r.sent_at[j] = t_sub - r.t_start
        if single:
            backend.submit(r.task, rows)
        else:
            backend.submit(r.task, rows, round=j, draw=r.rid, work=st.work)
        # the master's share, while the workers compute
        r.noise = noise_levels(fname, st.noise_fn, rows, self.num_workers)

    def end_round(
        self, r: Request, timed_out, done: list, fname, *, stalled=False
    ) -> None:
        del self._active[r.task]
        st = self.stages[r.stage]
        res = finish_round(self, r, st, timed_out=timed_out, stalled=stalled)
        if self._result is None:
            if r.stream is not None:  # every query not answered yet: now
                self.answer_decided(r, st, res, stalled)
            done.append((r, res))
            return
        r.results.append(res)
        j = r.stage
        last = j == len(self.stages) - 1
        if not res.ok:
            done.append((r, self._result(r, None)))
            return
        t_round = self.cluster.now()
        t0 = time.perf_counter()
        value = jnp.asarray(res.value)
        out = value if st.master is None else st.master(value, r.x, r.x0)
        out = jax.block_until_ready(out)
        dt = time.perf_counter() - t0
        self.charge(dt)
        r.step_time[j] = dt
        if last:
            done.append((r, self._result(r, np.asarray(out))))
            return
        self._start_round(r, j + 1, out, fname, t_round=t_round)
        self._active[r.task] = r

    def decode(self, r: Request, st: Stage, n: int | None = None) -> Any:
        """The decode of request ``r``'s first ``n`` successful answers (default
        all), kept for the round (a policy's decode is the server's when it
        decides there), timed: charged to the master and added to the round's
        ``decode_time``."""
        n = r.num_ok if n is None else n
        if r.cached is None:
            r.cached = {}
        if n not in r.cached:
            t0 = time.perf_counter()
            res = jax.block_until_ready(st.decode(*r.decode_inputs(n)))
            dt = time.perf_counter() - t0
            self.charge(dt)
            before = float(r.decode_time[r.stage])
            r.decode_time[r.stage] = dt if math.isnan(before) else before + dt
            r.cached[n] = res
        return r.cached[n]
