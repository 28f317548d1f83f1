"""The simulated cluster: real worker functions on a virtual clock.

Each worker is a machine: it serves one evaluation at a time from its own FIFO
queue, for the injected service time; a cancelled request's evaluation in service
is abandoned (the worker is free at the cancellation) and its queued evaluations
are dropped. ``queueing=False`` gives every worker unlimited capacity instead (each
request finds its workers idle: the model of :func:`simulate_latency`).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable

import jax
import numpy as np

from ._backends import (
    BackendBase,
    Completion,
    NoMoreAnswers,
    WorkerFunctions,
    round_draws,
)
from ._checks import number
from ._faults import HANG, Injector, apply_fault


class _Eval:
    """One evaluation: request ``rid`` at worker ``worker``."""

    __slots__ = ("rid", "worker", "value", "service", "hang", "start", "live")

    def __init__(self, rid, worker, value, service, hang):
        self.rid, self.worker, self.value = rid, worker, value
        self.service, self.hang = service, hang
        self.start = None
        self.live = True


class SimulatedCluster(BackendBase):
    """A deterministic cluster on a virtual clock (tests and Monte Carlo).

    The M rows of a request are computed when it is submitted: each distinct
    worker function (one per role, :class:`WorkerFunctions`) ``jax.vmap``-ped over
    the rows of the workers that run it (or row by row with ``vectorize=False``).
    A function that raises on one row fails that worker alone, in both modes
    (a vmapped call that raises is computed again row by row).
    Each worker is a machine: it serves one evaluation at a time, in the order the
    requests were submitted, each for ``compute_time`` plus its injected delay, so
    a request sent while a worker is busy waits in that worker's queue.
    :meth:`cancel` drops a request's queued evaluations and abandons the one in
    service (its worker takes its next evaluation at once). With
    ``queueing=False`` every evaluation starts when it is submitted (workers of
    unlimited capacity: each request finds its workers idle).
    ``next_completed(timeout)`` advances the clock to the next answer, or by
    ``timeout`` when none comes before; :meth:`advance` moves it by the master's
    own time.

    Args:
        injector: the delay and fault plan; None: every answer arrives after
            ``compute_time``.
        compute_time: seconds added to every evaluation's service time.
        vectorize: compute each function's rows with one vmapped call (default
            True).
        queueing: workers serve one evaluation at a time (default True).

    Attributes:
        busy_time: float [M] seconds each worker has spent serving evaluations
            (completed or abandoned).
    """

    virtual_clock = True  # now() moves in next_completed and advance only

    def __init__(
        self,
        *,
        injector: Injector | None = None,
        compute_time: float = 0.0,
        vectorize: bool = True,
        queueing: bool = True,
    ):
        if injector is not None and not isinstance(injector, Injector):
            raise TypeError(
                f"SimulatedCluster: injector must be an Injector or None, got "
                f"{type(injector).__name__}"
            )
        ct = number("SimulatedCluster", "compute_time", compute_time,
                    what="a number of seconds")  # fmt: skip
        self.injector = injector
        self.compute_time = ct
        self.vectorize = vectorize
        self.queueing = bool(queueing)
        self._t = 0.0
        self._heap: list = []
        self._seq = itertools.count()
        self.functions: WorkerFunctions | None = None
        self._row_fns: list[list[Callable]] = []
        self._vmapped: dict[int, Callable] = {}
        self._queues: list[deque] = []
        self._serving: list[list[_Eval]] = []
        self._by_request: dict[int, list[_Eval]] = {}
        self._work: dict[int, list] = {}
        self.busy_time = np.zeros(0)
        self.num_workers = 0
        self._closed = False

    def start(self, worker_fn: Callable | WorkerFunctions, num_workers: int) -> None:
        if self._row_fns:
            # a second server would silently swap the first one's worker functions
            raise RuntimeError(
                "SimulatedCluster.start: already started (one server each; make a "
                "SimulatedCluster per Server)"
            )
        table = WorkerFunctions.of(
            worker_fn, num_workers, fname="SimulatedCluster.start"
        )
        self.functions = table
        m = self.num_workers = int(num_workers)
        self._row_fns = table.compiled(jax.jit)
        self._vmapped = (
            {id(f): jax.jit(jax.vmap(f)) for f in table.distinct()}
            if self.vectorize
            else {}
        )
        self._queues = [deque() for _ in range(m)]
        self._serving = [[] for _ in range(m)]
        self.busy_time = np.zeros(m)

    def now(self) -> float:
        return self._t

    def _compute(self, rows: np.ndarray, round: int) -> list:
        """Every worker's answer to ``rows`` in round ``round`` (an exception for
        the workers whose function raised on their own row). A fault is its
        worker's alone: when the vmapped call of a role group raises, the
        group's rows are computed again one by one, so only the rows that
        raise fail."""
        values: list = [None] * self.num_workers
        for f, workers in self.functions.groups(round):
            if self.vectorize:
                part = rows if len(workers) == len(rows) else rows[workers]
                try:
                    outs = np.asarray(self._vmapped[id(f)](part))
                except Exception:  # some row raised: find which, row by row
                    pass
                else:
                    for k, i in enumerate(workers):
                        values[i] = outs[k]
                    continue
            for i in workers:
                try:
                    values[i] = np.asarray(self._row_fns[round][i](rows[i]))
                except Exception as exc:
                    values[i] = exc
        return values

    def warmup(self, rows: np.ndarray, *, round: int = 0) -> None:
        """Compiles round ``round``'s functions for requests like ``rows``."""
        self._compute(rows, round)

    def advance(self, seconds: float) -> None:
        """Moves the virtual clock forward (time spent at the master)."""
        self._t += max(0.0, float(seconds))

    def _begin(self, e: _Eval) -> None:
        e.start = self._t
        self._serving[e.worker].append(e)
        if not e.hang:  # a hung evaluation ends only when it is cancelled
            heapq.heappush(self._heap, (self._t + e.service, next(self._seq), e))

    def _release(self, e: _Eval, t_end: float, answered: bool) -> None:
        """Worker ``e.worker`` is done with ``e`` at ``t_end``: account its time
        (an evaluation abandoned the instant it began did no work), start its next
        queued evaluation."""
        e.live = False
        i = e.worker
        self._serving[i].remove(e)
        self.busy_time[i] += t_end - e.start
        w = self._work[e.rid]
        w[0] += answered or t_end > e.start
        w[1] += t_end - e.start
        q = self._queues[i]
        while q and not self._serving[i]:
            nxt = q.popleft()
            if nxt.live:
                self._begin(nxt)

    def submit(
        self,
        request_id: int,
        rows: np.ndarray,
        *,
        round: int = 0,
        draw: int | None = None,
        work: float = 1.0,
    ) -> None:
        if self._closed:
            raise RuntimeError("SimulatedCluster.submit: the cluster is closed")
        m = self.num_workers
        delays, faults = round_draws(self.injector, request_id, draw, work, m)
        scale = self.injector.corrupt_scale if self.injector is not None else 0.0
        values = self._compute(rows, round)
        self._work[request_id] = [0, 0.0]
        evals = []
        for i in range(m):
            v = values[i]
            if not isinstance(v, BaseException):
                try:  # worker i's fault is its own, whatever its answer
                    v = apply_fault(v, int(faults[i]), scale, i)
                except Exception as exc:
                    v = exc
            e = _Eval(request_id, i, v, self.compute_time + float(delays[i]),
                      faults[i] == HANG)  # fmt: skip
            evals.append(e)
            if self.queueing and (self._serving[i] or self._queues[i]):
                self._queues[i].append(e)
            else:
                self._begin(e)
        self._by_request[request_id] = evals

    def next_completed(self, timeout: float | None) -> Completion | None:
        while self._heap and not self._heap[0][2].live:
            heapq.heappop(self._heap)
        if not self._heap or (
            timeout is not None and self._heap[0][0] > self._t + timeout
        ):
            if timeout is None:
                hung = {e.rid for q in self._serving for e in q if e.live and e.hang}
                raise NoMoreAnswers(
                    "SimulatedCluster.next_completed: no answer will ever arrive and "
                    "no deadline was given (a hung worker without a deadline)",
                    sorted(hung),
                )
            self._t += timeout
            return None
        t, _, e = heapq.heappop(self._heap)
        self._t = max(self._t, t)
        self._release(e, t, True)
        return Completion(e.rid, e.worker, e.value, self._t)

    def cancel(self, request_id: int) -> None:
        """Drops the request's queued evaluations and abandons those in service
        (their workers start their next evaluation now)."""
        for e in self._by_request.pop(request_id, ()):
            if not e.live:
                continue
            if e.start is None:  # still queued: dropped, never begun
                e.live = False
            else:
                self._release(e, self._t, False)

    def work(self, request_id: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of a request: how many of its evaluations began
        service and the worker-seconds they took (to their answer, or to the
        cancellation); queued evaluations that were dropped count for nothing.
        Final once the request is cancelled (the server cancels it when it
        decodes); forgotten after this call."""
        got = self._work.pop(request_id, None)
        if got is None:
            return 0, 0.0
        return int(got[0]), float(got[1])

    def close(self) -> None:
        self._closed = True
        self._heap.clear()
        self._by_request.clear()
