"""A streaming frontend's queries and their futures: what a query's answer
is (:class:`QueryResult`), the refusal of one too many (:class:`QueueFull`),
and the ledger of every query accepted and not yet answered
(:class:`Ledger`), which resolves each future once, with its answer or with
an error naming the cause.

The frontend itself (``_stream.py``) and its grouping of queries
(``_grouping.py``) use these; no query leaves the ledger unresolved.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


class QueueFull(RuntimeError):
    """:meth:`StreamingServer.submit` refused a query: ``max_pending`` queries are
    already waiting for their answers (back-pressure: retry later)."""


class QueryResult(NamedTuple):
    """The answer to one query of a :class:`StreamingServer`.

    A query of a one-round :class:`Server` is answered when it can be: at its
    own worker's answer (a systematic code's, or a replica's), at the answer
    after which a decode gives it (under :class:`FirstDecodable`: a ParM group
    rebuilt before the others), else at its group's decision. A
    :class:`PipelineServer`'s queries are answered at their group's end.

    Attributes:
        value: the query's output [...] (its row of the decode, or its own
            worker's answer as the decode would copy it; zeros when not ok).
        ok: it was answered: its own worker's answer, or a decode that gives
            it (``code.decodable_queries``: a ParM group decodes on its own
            while another is lost); a pipeline's, its group decoded.
        status: ``codedjax.Status`` (0 = success; else its group's decode's).
        error: the predicted absolute error of the decode that gave it (0.0
            for an own worker's answer, which no decode touched; inf when not
            ok).
        latency: seconds from the query's arrival to its answer.
        waited: seconds from its arrival to the first evaluation sent for it:
            its own workers' (dispatch on arrival, a systematic code: about 0)
            or its group's close (the wait for the group to fill, or for its
            group deadline).
        arrival: its arrival time on the backend's clock.
        group: its group's request number on the server (the injector's draw).
        slot: its row in the group (0 .. K - 1).
        group_size: the real queries in its group (K minus the padding); for a
            query answered before its group closed, those it had then.
        evaluations: the evaluations its group's request began at the workers
            (every round's, for a pipeline), per real query of the group: the
            work this query cost (nan when the backend does not count, and for
            a query answered before its group's decision, when it is not
            known yet: ``StreamingServer(on_group=...)`` gets every group's).
        busy: worker-seconds of those evaluations, per real query (nan as
            ``evaluations``, or when the backend does not measure them).
        result: the group's :class:`ServeResult` (or ``PipelineResult``) for a
            query answered at its group's decision; None for one answered
            before it (its group is not decided yet).
    """

    value: np.ndarray
    ok: bool
    status: int
    error: float
    latency: float
    waited: float
    arrival: float
    group: int
    slot: int
    group_size: int
    evaluations: float
    busy: float
    result: Any


class Query:
    """One query accepted: its row ``x``, its ``arrival`` time, its
    ``future`` and its number ``seq`` (in submission order); ``offered`` when
    its first evaluation was sent (None before), ``answered`` whether its
    group's request has answered it."""

    __slots__ = ("x", "arrival", "future", "seq", "offered", "answered")

    def __init__(self, x, arrival, future, seq):
        self.x, self.arrival, self.future, self.seq = x, arrival, future, seq
        self.offered: float | None = None
        self.answered = False


class VirtualFuture(concurrent.futures.Future):
    """A future of a virtual-clock frontend: asking for its result runs the
    simulation until it is answered (``drive(future)``, the frontend's)."""

    def __init__(self, drive: Callable[[concurrent.futures.Future], None]):
        super().__init__()
        self._drive = drive

    def result(self, timeout=None):
        if not self.done():
            self._drive(self)
        return super().result(timeout)

    def exception(self, timeout=None):
        if not self.done():
            self._drive(self)
        return super().exception(timeout)


def checked_query(fname: str, query: Any, spec: tuple | None, engine) -> tuple:
    """``(query as an array, spec)``: a floating array shaped like the server's
    queries, ``spec`` their ``(shape, dtype)`` (None: from the engine's first
    request, else this query's).

    Raises:
        TypeError: a query that is not floating.
        ValueError: a query shaped unlike the others.
    """
    x = np.asarray(query)
    if not np.issubdtype(x.dtype, np.floating) and x.dtype.name != "bfloat16":
        raise TypeError(
            f"{fname}: a query must be a floating array (one row of the code's "
            f"input [K, ...]), got dtype {x.dtype}"
        )
    if spec is None:
        first = engine.input_spec
        spec = (first[0][1:], np.dtype(first[1])) if first else (x.shape, x.dtype)
    if x.shape != spec[0] or x.dtype != spec[1]:
        raise ValueError(
            f"{fname}: every query must have the shape and dtype of the server's "
            f"queries, {spec[0]} {spec[1]}, got {x.shape} {x.dtype}"
        )
    return x, spec


def outcome(res) -> tuple:
    """(evaluations, busy) of a group's result (a pipeline: every round's)."""
    rounds = getattr(res, "rounds", None)
    parts = rounds if rounds is not None else (res,)
    ev = [getattr(p, "evaluations", -1) for p in parts]
    busy = [getattr(p, "busy", math.nan) for p in parts]
    total = math.nan if any(e < 0 for e in ev) else float(sum(ev))
    return total, float(sum(busy))


def query_results(rid: int, res, group: list, now: float) -> list:
    """The :class:`QueryResult` of each query of a group answered together
    (request ``rid``, its result ``res`` in hand at ``now``: a pipeline's), in
    slot order."""
    evals, busy = outcome(res)
    n = len(group)
    value = np.asarray(res.value)
    return [
        QueryResult(
            value=value[slot],
            ok=bool(res.ok),
            status=int(res.status),
            error=float(res.error),
            latency=now - q.arrival,
            waited=max(0.0, q.offered - q.arrival),
            arrival=q.arrival,
            group=rid,
            slot=slot,
            group_size=n,
            evaluations=evals / n,
            busy=busy / n,
            result=res,
        )
        for slot, q in enumerate(group)
    ]


def query_result(rid: int, a, q: Query, size: int, now: float) -> QueryResult:
    """Query ``q``'s :class:`QueryResult` from its request's answer ``a``
    (``_per_query.QueryAnswer``; request ``rid``, its group of ``size`` real
    queries, in hand at ``now``)."""
    if a.result is None:
        evals = busy = math.nan
    else:
        evals, busy = outcome(a.result)
        evals, busy = evals / size, busy / size
    return QueryResult(a.value, a.ok, a.status, a.error, now - q.arrival,
                       max(0.0, q.offered - q.arrival), q.arrival, rid, a.slot,
                       size, evals, busy, a.result)  # fmt: skip


class Ledger:
    """Every query accepted and not yet answered, wherever it is (waiting to
    be grouped, in a group being filled, sent): an error anywhere resolves
    all of them.

    ``lock`` guards the ledger and the frontend's state beside it; ``cv``
    (on ``lock``) is notified when a query is answered or arrives.

    Attributes:
        pending: queries accepted and not yet answered.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.live: dict[int, Query] = {}
        self.pending = 0

    def add(self, q: Query) -> None:
        """Accepts ``q`` (under ``lock``)."""
        self.pending += 1
        self.live[q.seq] = q

    def waiting(self) -> list[Query]:
        """The queries not yet answered (under ``lock``)."""
        return list(self.live.values())

    def settle(self, q: Query, *, result=None, error=None) -> None:
        """Resolves one query's future (once; a future its caller cancelled
        stays cancelled)."""
        with self.lock:
            if self.live.pop(q.seq, None) is None:
                return
            self.pending -= 1
            self.cv.notify_all()
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if error is None:
                q.future.set_result(result)
            else:
                q.future.set_exception(error)

    def reject(self, queries: list, exc: BaseException, what: str) -> None:
        """Ends ``queries`` with an error naming the cause (one exception each,
        chained to ``exc``)."""
        for q in queries:
            err = RuntimeError(f"StreamingServer: {what}: {exc!r}")
            err.__cause__ = exc
            self.settle(q, error=err)
