"""The simulated cluster: real worker functions on a virtual clock.

Each worker is a machine: it serves one evaluation at a time from its own FIFO
queue, for the injected service time; a cancelled request's evaluation in service
is abandoned (the worker is free at the cancellation) and its queued evaluations
are dropped. ``queueing=False`` gives every worker unlimited capacity instead (each
request finds its workers idle: the model of :func:`simulate_latency`). The
queues and the clock are ``_events``' :class:`EventQueues`, the model
:func:`simulate_load` and :func:`simulate_latency` run too; this module computes
the workers' answers.
"""

from __future__ import annotations

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
from ._events import EventQueues
from ._faults import HANG, Injector, apply_fault


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
    own time. :meth:`submit_part` offers some of a request's rows now and the
    others later (a streamed query sent to its own workers when it arrives):
    each evaluation joins its worker's queue when its row is offered.

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
    can_submit_part = True  # submit_part: a request's rows in parts

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
        self.functions: WorkerFunctions | None = None
        self._row_fns: list[list[Callable]] = []
        self._vmapped: dict[int, Callable] = {}
        self._events = EventQueues(0, queueing=self.queueing)
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
        events = EventQueues(m, queueing=self.queueing)
        events.now = self._events.now
        self._events = events

    @property
    def busy_time(self) -> np.ndarray:
        """float [M] seconds each worker has spent serving evaluations."""
        return self._events.queues.busy_time

    def now(self) -> float:
        return self._events.now

    def _compute(self, rows: np.ndarray, round: int, at=None) -> list:
        """Every worker's answer to ``rows`` in round ``round`` (an exception for
        the workers whose function raised on their own row); ``at`` [n]: the
        answers of those workers only, to their rows ``rows`` [n, ...]. A
        fault is its worker's alone: when the vmapped call of a role group
        raises, the group's rows are computed again one by one, so only the
        rows that raise fail. A part of a group is computed in a call of the
        group's size (the part's rows padded with its first): one program
        for every part."""
        m = self.num_workers
        pos = np.arange(m) if at is None else np.full(m, -1)
        if at is not None:
            pos[np.asarray(at)] = np.arange(len(at))
        values: list = [None] * len(rows)
        for f, workers in self.functions.groups(round):
            mine = workers[pos[workers] >= 0]
            if not len(mine):
                continue
            idx = pos[mine]
            if self.vectorize:
                full = np.r_[idx, np.full(len(workers) - len(idx), idx[0])]
                part = rows if len(full) == len(rows) and at is None else rows[full]
                try:
                    outs = np.asarray(self._vmapped[id(f)](part))
                except Exception:  # some row raised: find which, row by row
                    pass
                else:
                    for k, j in enumerate(idx):
                        values[j] = outs[k]
                    continue
            for i, j in zip(mine, idx, strict=True):
                try:
                    values[j] = np.asarray(self._row_fns[round][i](rows[j]))
                except Exception as exc:
                    values[j] = exc
        return values

    def warmup(self, rows: np.ndarray, *, round: int = 0) -> None:
        """Compiles round ``round``'s functions for requests like ``rows``."""
        self._compute(rows, round)

    def advance(self, seconds: float) -> None:
        """Moves the virtual clock forward (time spent at the master)."""
        self._events.advance(seconds)

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
        values = [
            v if isinstance(v, BaseException) else _faulty(v, int(faults[i]), scale, i)
            for i, v in enumerate(values)
        ]
        self._events.submit(request_id, self.compute_time + delays,
                            faults == HANG, values)  # fmt: skip

    def submit_part(
        self,
        request_id: int,
        rows: np.ndarray,
        workers: np.ndarray,
        *,
        round: int = 0,
        draw: int | None = None,
        work: float = 1.0,
    ) -> None:
        """Offers ``rows[j]`` to worker ``workers[j]`` now (a part of the
        request; :meth:`BackendBase.submit_part`): each joins its worker's
        queue at this time, with its entry of the request's draws."""
        if self._closed:
            raise RuntimeError("SimulatedCluster.submit_part: the cluster is closed")
        ws = np.asarray(workers, np.int64)
        delays, faults = round_draws(self.injector, request_id, draw, work,
                                     self.num_workers)  # fmt: skip
        delays, faults = np.asarray(delays)[ws], np.asarray(faults)[ws]
        scale = self.injector.corrupt_scale if self.injector is not None else 0.0
        values = self._compute(np.asarray(rows), round, at=ws)
        values = [
            v if isinstance(v, BaseException) else _faulty(v, int(f), scale, int(i))
            for v, f, i in zip(values, faults, ws, strict=True)
        ]
        self._events.submit(request_id, self.compute_time + delays,
                            faults == HANG, values, workers=ws)  # fmt: skip

    def next_completed(self, timeout: float | None) -> Completion | None:
        e = self._events.pop(timeout)
        if e is None:
            if timeout is None:
                raise NoMoreAnswers(
                    "SimulatedCluster.next_completed: no answer will ever arrive and "
                    "no deadline was given (a hung worker without a deadline)",
                    self._events.hung(),
                )
            return None
        return Completion(e.rid, e.worker, e.value, self._events.now)

    def cancel(self, request_id: int) -> None:
        """Drops the request's queued evaluations and abandons those in service
        (their workers start their next evaluation now)."""
        self._events.cancel(request_id)

    def work(self, request_id: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of a request: how many of its evaluations began
        service and the worker-seconds they took (to their answer, or to the
        cancellation); queued evaluations that were dropped count for nothing.
        Final once the request is cancelled (the server cancels it when it
        decodes); forgotten after this call."""
        return self._events.work(request_id)

    def close(self) -> None:
        self._closed = True
        self._events.clear()


def _faulty(value: np.ndarray, fault: int, scale: float, worker: int):
    """Worker ``worker``'s answer after its fault; its own failure, whatever its
    answer (an exception the fault raises is the answer)."""
    try:
        return apply_fault(value, fault, scale, worker)
    except Exception as exc:
        return exc
