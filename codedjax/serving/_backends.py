"""Cluster backends: where the M coded rows of a request are computed.

Every backend has the same small interface (:class:`Backend`): the server calls
``start(worker_fn, num_workers)`` once, then ``submit(request_id, rows)``,
``next_completed(timeout)`` (one answer, or None when ``timeout`` seconds passed),
``cancel(request_id)`` and finally ``close()``; ``now()`` is the backend's clock.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from ._faults import HANG, Injector, apply_fault


class Completion(NamedTuple):
    """One worker's answer to one request.

    Attributes:
        request_id: the request it answers.
        worker: the worker index i (row i of the coded request).
        value: the answer (numpy array), or the exception the worker raised.
        time: when it arrived, on the backend's clock (seconds).
    """

    request_id: int
    worker: int
    value: Any
    time: float


@runtime_checkable
class Backend(Protocol):
    """The interface a cluster backend implements."""

    def start(self, worker_fn: Callable, num_workers: int) -> None: ...

    def now(self) -> float: ...

    def submit(self, request_id: int, rows: np.ndarray) -> None: ...

    def next_completed(self, timeout: float | None) -> Completion | None: ...

    def cancel(self, request_id: int) -> None: ...

    def close(self) -> None: ...


class _Task(NamedTuple):
    request_id: int
    row: np.ndarray
    delay: float
    fault: int
    cancel: threading.Event


class ThreadCluster:
    """M worker threads in this process (the default backend).

    Worker i runs ``worker_fn`` (jitted once, shared) on row i of each request, in
    the order requests were submitted, then holds its answer until its injected
    service time (counted from when it started the task) has passed. The wait is on
    the request's cancellation event, so :meth:`cancel` releases a straggler at once;
    a cancelled task still queued is skipped. JAX releases the GIL while it computes,
    so the workers overlap.

    Args:
        injector: the seeded delay and fault plan (:class:`Injector`); None injects
            nothing (answers are released as soon as they are computed).
        jit: jit ``worker_fn`` (default True).

    Attributes:
        release_delays: seconds from :meth:`cancel` to the moment each straggler
            that was running (waiting out its service time) was released (the
            last 100,000).
    """

    def __init__(self, *, injector: Injector | None = None, jit: bool = True):
        if injector is not None and not isinstance(injector, Injector):
            raise TypeError(
                f"ThreadCluster: injector must be an Injector or None, got "
                f"{type(injector).__name__}"
            )
        self.injector = injector
        self.jit = jit
        self.release_delays: deque[float] = deque(maxlen=100_000)
        self._threads: list[threading.Thread] = []
        self._queues: list[queue.SimpleQueue] = []
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._events: dict[int, threading.Event] = {}
        self._cancelled_at: dict[int, float] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._fn = None
        self.num_workers = 0

    def start(self, worker_fn: Callable, num_workers: int) -> None:
        if self._threads:
            raise RuntimeError("ThreadCluster.start: already started (one server each)")
        if self._closed:
            raise RuntimeError("ThreadCluster.start: the cluster is closed")
        self._fn = jax.jit(worker_fn) if self.jit else worker_fn
        self.num_workers = int(num_workers)
        for i in range(self.num_workers):
            q = queue.SimpleQueue()
            t = threading.Thread(
                target=self._work, args=(i, q), name=f"codedjax-worker-{i}", daemon=True
            )
            self._queues.append(q)
            self._threads.append(t)
            t.start()

    def now(self) -> float:
        return time.perf_counter()

    def warmup(self, rows: np.ndarray) -> None:
        """Compiles ``worker_fn`` for rows like ``rows[0]`` (outside any timing)."""
        np.asarray(self._fn(rows[0]))

    def submit(self, request_id: int, rows: np.ndarray) -> None:
        if self._closed:
            raise RuntimeError("ThreadCluster.submit: the cluster is closed")
        m = self.num_workers
        if self.injector is not None:
            delays, faults = self.injector.plan_one(request_id, m)
        else:
            delays, faults = np.zeros(m), np.zeros(m, np.int8)
        ev = threading.Event()
        with self._lock:
            self._events[request_id] = ev
        for i in range(m):
            self._queues[i].put(
                _Task(request_id, rows[i], float(delays[i]), int(faults[i]), ev)
            )

    def next_completed(self, timeout: float | None) -> Completion | None:
        if self._closed:
            return None
        try:
            c = self._done.get(timeout=timeout)
        except queue.Empty:
            return None
        if c is None:  # close() woke us
            self._done.put(None)
        return c

    def cancel(self, request_id: int) -> None:
        with self._lock:
            ev = self._events.pop(request_id, None)
            if ev is not None:
                self._cancelled_at[request_id] = time.perf_counter()
                if len(self._cancelled_at) > 4096:  # keep the bookkeeping bounded
                    for k in list(self._cancelled_at)[:2048]:
                        del self._cancelled_at[k]
        if ev is not None:
            ev.set()

    def _released(self, request_id: int) -> None:
        t = time.perf_counter()
        with self._lock:
            t0 = self._cancelled_at.get(request_id)
            if t0 is not None:
                self.release_delays.append(t - t0)

    def _work(self, i: int, q: queue.SimpleQueue) -> None:
        scale = self.injector.corrupt_scale if self.injector is not None else 0.0
        while True:
            task = q.get()
            if task is None:
                return
            if task.cancel.is_set():
                continue
            start = time.perf_counter()
            try:
                value = np.asarray(self._fn(task.row))
                value = apply_fault(value, task.fault, scale, i)
            except Exception as exc:  # a failing worker answers with its exception
                value = exc
            if task.fault == HANG:
                task.cancel.wait()
                cancelled = True
            else:
                remaining = start + task.delay - time.perf_counter()
                if remaining > 0:
                    cancelled = task.cancel.wait(remaining)
                else:
                    cancelled = task.cancel.is_set()
            if cancelled:
                self._released(task.request_id)
                continue
            self._done.put(Completion(task.request_id, i, value, time.perf_counter()))

    def close(self) -> None:
        """Stops every worker thread (hung ones included) and waits for them."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            events = list(self._events.values())
            self._events.clear()
        for ev in events:
            ev.set()
        for q in self._queues:
            q.put(None)
        self._done.put(None)  # wakes a server blocked in next_completed
        deadline = time.perf_counter() + 5.0
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.perf_counter()))

    @property
    def alive_threads(self) -> int:
        """How many worker threads are still running."""
        return sum(t.is_alive() for t in self._threads)


class SimulatedCluster:
    """A deterministic cluster on a virtual clock (tests and Monte Carlo).

    The M rows of a request are computed at once (``jax.vmap(worker_fn)``, or row by
    row with ``vectorize=False``); answer i arrives at the submit time plus
    ``compute_time`` plus its injected delay. Workers are never busy (each request
    finds them idle), so queueing does not show here; it does on
    :class:`ThreadCluster`. ``next_completed(timeout)`` advances the clock to the
    next arrival, or by ``timeout`` when none comes before.

    Args:
        injector: the delay and fault plan; None: every answer arrives after
            ``compute_time``.
        compute_time: seconds added to every answer.
        vectorize: compute the rows with one vmapped call (default True).
    """

    def __init__(
        self,
        *,
        injector: Injector | None = None,
        compute_time: float = 0.0,
        vectorize: bool = True,
    ):
        if injector is not None and not isinstance(injector, Injector):
            raise TypeError(
                f"SimulatedCluster: injector must be an Injector or None, got "
                f"{type(injector).__name__}"
            )
        self.injector = injector
        self.compute_time = float(compute_time)
        self.vectorize = vectorize
        self._t = 0.0
        self._heap: list = []
        self._seq = itertools.count()
        self._cancelled: set[int] = set()
        self._fn = None
        self.num_workers = 0
        self._closed = False

    def start(self, worker_fn: Callable, num_workers: int) -> None:
        self.num_workers = int(num_workers)
        self._row_fn = jax.jit(worker_fn)
        self._fn = jax.jit(jax.vmap(worker_fn)) if self.vectorize else None

    def now(self) -> float:
        return self._t

    def warmup(self, rows: np.ndarray) -> None:
        """Compiles the worker function for requests like ``rows``."""
        if self._fn is not None:
            np.asarray(self._fn(rows))
        else:
            np.asarray(self._row_fn(rows[0]))

    def advance(self, seconds: float) -> None:
        """Moves the virtual clock forward (time spent at the master)."""
        self._t += max(0.0, float(seconds))

    def submit(self, request_id: int, rows: np.ndarray) -> None:
        if self._closed:
            raise RuntimeError("SimulatedCluster.submit: the cluster is closed")
        m = self.num_workers
        if self.injector is not None:
            delays, faults = self.injector.plan_one(request_id, m)
            scale = self.injector.corrupt_scale
        else:
            delays, faults, scale = np.zeros(m), np.zeros(m, np.int8), 0.0
        try:
            if self._fn is not None:
                outs = np.asarray(self._fn(rows))
                values = [outs[i] for i in range(m)]
            else:
                values = [np.asarray(self._row_fn(rows[i])) for i in range(m)]
        except Exception as exc:
            values = [exc] * m
        for i in range(m):
            if faults[i] == HANG:
                continue
            v = values[i]
            if not isinstance(v, BaseException):
                v = apply_fault(v, int(faults[i]), scale, i)
            t = self._t + self.compute_time + float(delays[i])
            heapq.heappush(self._heap, (t, next(self._seq), request_id, i, v))

    def next_completed(self, timeout: float | None) -> Completion | None:
        while self._heap and self._heap[0][2] in self._cancelled:
            heapq.heappop(self._heap)
        if not self._heap or (
            timeout is not None and self._heap[0][0] > self._t + timeout
        ):
            if timeout is None:
                raise RuntimeError(
                    "SimulatedCluster.next_completed: no answer will ever arrive and "
                    "no deadline was given (a hung worker without a deadline)"
                )
            self._t += timeout
            return None
        t, _, rid, i, v = heapq.heappop(self._heap)
        self._t = max(self._t, t)
        return Completion(rid, i, v, self._t)

    def cancel(self, request_id: int) -> None:
        self._cancelled.add(request_id)
        if len(self._cancelled) > 4096:  # forget requests with nothing left in flight
            self._cancelled &= {e[2] for e in self._heap}

    def close(self) -> None:
        self._closed = True
        self._heap.clear()
