"""A streaming frontend's groups on their way through the engine, and each
query's answer back to its future.

:class:`Sender` takes the grouping's steps in order (``_grouping.py``): with
dispatch on arrival (a systematic code on a backend that takes a request in
parts: ``Engine.arrival_dispatch``) a group's request is opened at its first
query and each query is sent to its own workers when it joins; when a group
closes, every other worker gets its coded row (``Engine.fan_out``, from when
the policy's deadline counts). With dispatch by group (or a code that is not
systematic) the whole group is sent at its close. The engine answers each
query when it can (``_per_query.py``); :meth:`Sender.collect` settles the
answers and the ended groups in the ledger (``_queries.py``), each query once.
A :class:`PipelineServer`'s groups are sent whole at their close and answered
together at their end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._grouping import Group
from ._queries import Ledger, query_result, query_results


class Sender:
    """The frontend's groups to the engine and the answers back (see the
    module); every call comes from the dispatcher (or the virtual clock's
    driver).

    Args:
        engine: the server's engine.
        dispatch: ``"arrival"`` (dispatch on arrival, where the engine allows
            it) or ``"group"``.
        on_group: called with ``(group number, result or exception)`` when a
            group ends, or None.
        fname: the caller, for messages.

    Attributes:
        ledger: the frontend's ledger of the queries not yet answered (set by
            the frontend).

    Raises:
        ValueError: a dispatch not "arrival" or "group".
        TypeError: an on_group that is not callable.
    """

    def __init__(self, engine: Any, *, dispatch: Any, on_group: Any, fname: str):
        if dispatch not in ("arrival", "group"):
            raise ValueError(
                f"{fname}: dispatch must be 'arrival' (a systematic code's query "
                f"goes to its own workers when it arrives) or 'group' (every row "
                f"at the group's close), got {dispatch!r:.80}"
            )
        if on_group is not None and not callable(on_group):
            raise TypeError(
                f"{fname}: on_group must be callable or None, got {on_group!r:.80}"
            )
        self.engine = engine
        self.cluster = engine.cluster
        self.ledger: Ledger | None = None
        self.arrival = dispatch == "arrival"
        self.on_group: Callable | None = on_group
        self.k = engine.num_inputs
        self.per_query = engine.one_shot  # a one-round server: answers per query
        self.groups: dict[int, Group] = {}  # by request number: in flight

    def clear(self) -> None:
        """Forgets the groups in flight (their queries are ended elsewhere)."""
        self.groups.clear()

    def take(self, step: tuple, fname: str) -> None:
        """Takes one step of the grouping: a query joined its group, or a
        group closed. A group whose request cannot be opened or sent fails
        alone (its queries end with the error); a failed warm-up (the model
        cannot serve these queries) is raised: it stops the frontend."""
        if step[0] == "query":
            _, g, slot = step
            q = g.queries[slot]
            if g.error is not None:  # its group already failed
                self._reject(g, [q], g.error)
                return
            if slot == 0 and self.per_query:
                self.engine.prepare(q.x, fname)  # a failed warm-up: raised
            if not (self.per_query and self.arrival and self.engine.arrival_dispatch):
                return
            try:
                if slot == 0:
                    g.request = self.engine.begin(None, q.x, fname)
                    self.groups[g.request.rid] = g
                now = self.cluster.now()
                if self.engine.send_query(g.request, slot, q.x):
                    q.offered = now
            except Exception as exc:
                self._fail_group(g, exc)
            return
        _, g = step
        if g.error is not None:
            return
        self._close(g, fname)

    def _close(self, g: Group, fname: str) -> None:
        rows = [q.x for q in g.queries]
        rows += [rows[-1]] * (self.k - len(rows))
        now = self.cluster.now()
        for q in g.queries:
            if q.offered is None:
                q.offered = now
        engine = self.engine
        try:
            if not self.per_query:
                r = g.request = engine.open(None, np.stack(rows), fname)
                self.groups[r.rid] = g
                return
            if g.request is None:
                g.request = engine.begin(None, rows[0], fname)
                self.groups[g.request.rid] = g
            done = engine.fan_out(g.request, np.stack(rows), len(g.queries), fname)
        except Exception as exc:
            if not engine.warm:  # every group would fail alike: stop
                raise
            self._fail_group(g, exc)
            return
        self.collect(done)

    def _fail_group(self, g: Group, exc: BaseException) -> None:
        """Group ``g`` failed on its own error: its request is forgotten, its
        queries (and those that join it later) end with the error."""
        g.error = exc
        if g.request is not None:
            self.groups.pop(g.request.rid, None)
            self.engine.discard(g.request)
        self._reject(g, g.queries, exc)

    def _reject(self, g: Group, queries: list, exc: BaseException) -> None:
        rid = "" if g.request is None else f" (request {g.request.rid})"
        left = [q for q in queries if not q.answered]
        self.ledger.reject(left, exc, f"its group{rid} failed")

    def collect(self, done: list) -> None:
        """Settles the queries the engine has answered (each once), then the
        groups that ended (``done``: ``(request, result or exception)``): a
        group's own error fails its queries not answered yet.

        Raises:
            RuntimeError: an internal error: a query answered twice, or not at
                all by its group's end.
        """
        self.settle()
        self._end_groups(done)

    def settle(self) -> None:
        """Settles the queries the engine has answered since the last call
        (each once), at this moment: the engine calls it in a step as soon
        as an answer of a query's own worker has answered it, before the
        group's decision (its decode) is taken.

        Raises:
            RuntimeError: an internal error: a query answered twice.
        """
        now = self.cluster.now()
        for r, a in self.engine.take_answers():
            g = self.groups.get(r.rid)
            q = None if g is None else g.queries[a.slot]
            if q is None or q.answered:
                raise RuntimeError(
                    f"StreamingServer: internal error: query {a.slot} of request "
                    f"{r.rid} answered twice, or for no group in flight"
                )
            q.answered = True
            size = len(g.queries)
            self.ledger.settle(q, result=query_result(r.rid, a, q, size, now))

    def _end_groups(self, done: list) -> None:
        """The groups that ended (``done``: ``(request, result or
        exception)``): a group's own error fails its queries not answered yet;
        a group answered together (a pipeline) is answered now."""
        now = self.cluster.now()
        for r, res in done:
            g = self.groups.pop(r.rid, None)
            if g is None:
                continue
            if self.on_group is not None:
                self.on_group(r.rid, res)
            if isinstance(res, BaseException):
                g.error = res
                self._reject(g, g.queries, res)
                continue
            if not self.per_query:
                try:
                    answers = query_results(r.rid, res, g.queries, now)
                except Exception as exc:
                    self._reject(g, g.queries, exc)
                    continue
                for q, qr in zip(g.queries, answers, strict=True):
                    q.answered = True
                    self.ledger.settle(q, result=qr)
                continue
            left = [q.seq for q in g.queries if not q.answered]
            if left:
                raise RuntimeError(
                    f"StreamingServer: internal error: request {r.rid} ended "
                    f"without answering queries {left}"
                )
