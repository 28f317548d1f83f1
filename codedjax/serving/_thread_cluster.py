"""The thread cluster: the default backend, M workers computed by threads here.

:class:`ThreadCluster` implements the :class:`~codedjax.serving.Backend`
interface (``_backends.py``) with a pool of threads in this process; its
optional members (``warmup``, ``work``, ``wake``) are its own, its clock is the
real one (``time.perf_counter``).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ._backends import (
    BackendBase,
    Completion,
    NoMoreAnswers,
    WorkerFunctions,
    captured_config,
    round_draws,
)
from ._checks import integer
from ._faults import HANG, Injector, apply_fault
from ._pool import STUCK, Pool, cores


class _Task(NamedTuple):
    request_id: int
    round: int
    row: np.ndarray
    sent: float
    delay: float
    fault: int
    cancel: threading.Event


_SKIPPED = object()  # a worker thread skipped a task cancelled before it began


class ThreadCluster(BackendBase):
    """M workers computed by threads in this process (the default backend).

    Worker i runs its function (``worker_fn``, or its role's function in a
    :class:`WorkerFunctions` table; each distinct function jitted once) on row i of
    each request, one row at a time. The threads take the rows of all workers from
    one queue ordered by due time (when each answer is due: send time plus
    injected service time), so the answers a decision waits for are computed
    first; JAX releases the GIL while it computes, so the threads overlap. A
    worker's answer is delivered when its injected service time has passed,
    counted from when the request was sent to it (or from when it finished its
    previous task, if it was still busy, so queueing shows), and never before its
    computation has returned. The wait is not spent in the
    worker's thread: a worker thread computes and deposits its answer, and
    :meth:`next_completions` (the server's thread) delivers the answers at
    their times, every answer due at one wake-up together. So the server's
    thread wakes once for all the answers due, not once per answer (nor do the
    workers' threads wait out the delays), and :meth:`cancel` releases a
    worker waiting out its service time at once (bookkeeping, nothing has to run); a
    hung worker is released the same way, a cancelled task still queued is skipped,
    and a worker whose thread is inside its jitted call when its request is
    cancelled is free when the call returns. ``submit``, ``next_completed`` and
    ``cancel`` are called from one thread (the server's); ``close`` may come from
    any.

    Args:
        injector: the seeded delay and fault plan (:class:`Injector`); None injects
            nothing (answers are released as soon as they are computed).
        jit: jit ``worker_fn`` (default True).
        threads: how many threads compute the workers' rows. Default None: as
            many as the cores this process may run on (at most M), and one more
            for each worker whose call has run for over 20 ms, so a worker
            function that blocks (a stuck call, I/O that never returns) holds up
            its own worker and no other: the others answer and the request
            decodes without it. The extra threads end when the calls return. An
            int n: n threads and no more; a blocked call then holds one of them.

    Attributes:
        release_delays: seconds from :meth:`cancel` to the moment each straggler
            that had begun its task was free (the last 100,000): the bookkeeping of
            ``cancel`` for a worker waiting out its service time, the rest of the
            call for one inside its jitted call.
        release_delays_in_call: the second kind alone (workers whose jitted call
            was running when their request was cancelled).
    """

    can_wake = True  # wake() interrupts a waiting next_completed
    can_submit_part = True  # submit_part: a request's rows in parts

    def __init__(
        self,
        *,
        injector: Injector | None = None,
        jit: bool = True,
        threads: int | None = None,
    ):
        if injector is not None and not isinstance(injector, Injector):
            raise TypeError(
                f"ThreadCluster: injector must be an Injector or None, got "
                f"{type(injector).__name__}"
            )
        if threads is not None:
            threads = integer("ThreadCluster", "threads", threads, minimum=1)
        self.injector = injector
        self.jit = jit
        self.threads = None if threads is None else int(threads)
        self.release_delays: deque[float] = deque(maxlen=100_000)
        self.release_delays_in_call: deque[float] = deque(maxlen=100_000)
        self._pool: Pool | None = None  # the computing threads, once started
        self._seq = itertools.count()
        self._cv = threading.Condition(threading.Lock())
        self._deposits: list = []  # (worker, task, value, t_done), under _cv
        self._lines: list[deque[_Task]] = []  # per worker: tasks not yet delivered
        self._free_at: list[float] = []  # when each worker finished its last task
        self._work: dict[int, list] = {}  # request: [evaluations begun, busy seconds]
        self._woken = False
        self._values: dict[tuple[int, int], tuple[Any, float]] = {}
        self._computing: set[tuple[int, int]] = set()  # (request, worker) in a call
        self._pending: dict[tuple[int, int], float] = {}  # in-call cancels: t_cancel
        self._events: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._fns: list[list[Callable]] = []
        self._compiled: list[dict[int, tuple]] = []
        self.functions: WorkerFunctions | None = None
        self.num_workers = 0

    def start(self, worker_fn: Callable | WorkerFunctions, num_workers: int) -> None:
        if self._pool is not None:
            raise RuntimeError("ThreadCluster.start: already started (one server each)")
        if self._closed:
            raise RuntimeError("ThreadCluster.start: the cluster is closed")
        table = WorkerFunctions.of(worker_fn, num_workers, fname="ThreadCluster.start")
        self.functions = table
        self._fns = table.compiled(jax.jit if self.jit else (lambda f: f))
        self._compiled = [{} for _ in range(table.num_rounds)]  # by warmup
        self._config = captured_config()  # the worker threads compute like this one
        m = self.num_workers = int(num_workers)
        self._lines = [deque() for _ in range(m)]
        self._free_at = [-math.inf] * m
        # threads=None: as many threads as cores, and one more for each worker
        # stuck in a call; threads=k: k threads, no more
        size = cores() if self.threads is None else self.threads
        self._pool = Pool(min(m, size), grow=self.threads is None)
        # the threads hold the cluster weakly: one that is dropped without close()
        # is collected, and its finaliser stops them
        self._pool.spawn(weakref.WeakMethod(self._serve), self._config)
        self._finalizer = weakref.finalize(self, self._pool.stop)

    def now(self) -> float:
        return time.perf_counter()

    def warmup(self, rows: np.ndarray, *, round: int = 0) -> None:
        """Compiles round ``round``'s functions for rows like ``rows`` (outside
        any timing), without running them: each distinct function is compiled
        ahead of time (``lower(row).compile()``) and its workers call that
        executable on rows of this shape and dtype. No worker's function runs in
        the caller's thread, and no first call of a jitted function (which holds
        up every other call of it until it returns) happens in a worker thread:
        a function that blocks or raises on a row holds up or fails its own
        worker only."""
        if not self.jit:
            return  # nothing to compile
        for _, workers in self.functions.groups(round):
            i = int(workers[0])
            row = np.asarray(rows[i])
            exe = self._fns[round][i].lower(row).compile()
            for w in workers:
                self._compiled[round][int(w)] = (row.shape, row.dtype, exe)

    def submit(
        self,
        request_id: int,
        rows: np.ndarray,
        *,
        round: int = 0,
        draw: int | None = None,
        work: float = 1.0,
    ) -> None:
        """Sends row i to worker i, to run with its function of round ``round``;
        its service time is request ``draw``'s (default ``request_id``) draw at
        the fraction ``work`` of the work (:meth:`Injector.plan_one`)."""
        self._send("submit", request_id, rows, None, round, draw, work)

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
        """Sends ``rows[j]`` to worker ``workers[j]`` now, a part of the request
        (:meth:`BackendBase.submit_part`), as :meth:`submit` sends its rows."""
        self._send("submit_part", request_id, rows, workers, round, draw, work)

    def _send(self, fname, request_id, rows, workers, round, draw, work) -> None:
        if self._closed:
            raise RuntimeError(f"ThreadCluster.{fname}: the cluster is closed")
        m = self.num_workers
        delays, faults = round_draws(self.injector, request_id, draw, work, m)
        dl, fl = np.asarray(delays, float).tolist(), np.asarray(faults).tolist()
        ws = range(m) if workers is None else np.asarray(workers).tolist()
        with self._lock:
            ev = self._events.setdefault(request_id, threading.Event())
            self._work.setdefault(request_id, [0, 0.0])
        sent, seq = time.perf_counter(), self._seq
        tasks = [(i, _Task(request_id, round, row, sent, dl[i], fl[i], ev))
                 for i, row in zip(ws, list(rows), strict=True)]  # fmt: skip
        for i, task in tasks:
            self._lines[i].append(task)
        # the soonest-due answers are computed first
        self._pool.put([(sent + t.delay, next(seq), i, t) for i, t in tasks])

    def _take_deposits(self) -> None:
        """Moves the answers the worker threads computed into ``_values`` (under
        ``_cv``); answers of cancelled requests are dropped."""
        items, self._deposits = self._deposits, []
        for i, task, value, t_done in items:
            key = (task.request_id, i)
            t0 = self._pending.pop(key, None)
            if t0 is not None:  # its request was cancelled during the call
                self.release_delays.append(t_done - t0)
                self.release_delays_in_call.append(t_done - t0)
            if not task.cancel.is_set() and value is not _SKIPPED:
                self._values[key] = (value, t_done)

    def _scan(self, workers, now: float) -> tuple[list, float, float]:
        """The heads of ``workers``' lines (under ``_cv``): ``(ready, soon,
        computing)``: ``[(due, worker)]`` of the answers due by ``now`` (their
        delay passed and their computation returned), the earliest due time of
        an answer computed but not yet due, the earliest of one still being
        computed (its thread will notify); hung workers are skipped."""
        ready, soon, computing = [], math.inf, math.inf
        lines, free_at, values = self._lines, self._free_at, self._values
        for i in workers:
            line = lines[i]
            if not line:
                continue
            task = line[0]
            if task.fault == HANG:
                continue
            due = max(task.sent, free_at[i]) + task.delay
            got = values.get((task.request_id, i))
            if got is None:
                computing = min(computing, due)
            else:
                t = max(due, got[1])
                if t <= now:
                    ready.append((t, i))
                else:
                    soon = min(soon, t)
        return ready, soon, computing

    def _deliver(self, t: float, i: int, now: float) -> Completion:
        """Worker ``i``'s answer to the head of its line, due at ``t`` (under
        ``_cv``)."""
        task = self._lines[i].popleft()
        value, _ = self._values.pop((task.request_id, i))
        self._account(task, i, t)
        self._free_at[i] = t
        return Completion(task.request_id, i, value, now)

    def _wait(self, end, first: bool) -> list[Completion]:
        """The answers due now, soonest first (``first``: the soonest alone),
        waiting until ``end`` (None: no limit) for one (under ``_cv``)."""
        while True:
            if self._closed:
                return []
            if self._woken:
                self._woken = False
                return []
            self._take_deposits()
            now = time.perf_counter()
            ready, soon, computing = self._scan(range(self.num_workers), now)
            if ready:
                if first:
                    return [self._deliver(*min(ready), now)]
                out: list = []
                while ready:  # a worker's next task may be due right after
                    ready.sort()
                    out += [(t, self._deliver(t, i, now)) for t, i in ready]
                    ready, _, _ = self._scan([i for _, i in ready], now)
                out.sort(key=lambda e: e[0])
                return [c for _, c in out]
            if end is not None and now >= end:
                return []
            if end is None and math.isinf(soon) and math.isinf(computing):
                hung = {ln[0].request_id for ln in self._lines if ln}
                if hung:  # every worker with a task is hung: none will answer
                    raise NoMoreAnswers(
                        "ThreadCluster.next_completed: every task still out is "
                        "at a hung worker and no deadline was given",
                        sorted(hung),
                    )
            wake = soon if computing <= now else min(soon, computing)
            if end is not None:
                wake = min(wake, end)
            if self._pool.waiting():  # tasks wait for a thread: look again soon
                self._pool.unstick(now)
                wake = min(wake, now + STUCK)
            self._cv.wait(None if math.isinf(wake) else wake - now)

    def next_completed(self, timeout: float | None) -> Completion | None:
        end = None if timeout is None else time.perf_counter() + timeout
        with self._cv:
            got = self._wait(end, True)
        return got[0] if got else None

    def next_completions(self, timeout: float | None) -> list[Completion]:
        """Every answer due now, soonest first, in one wake-up (waiting up to
        ``timeout`` for the first): see :meth:`BackendBase.next_completions`.
        A subclass that overrides :meth:`next_completed` is read through it:
        its first answer, then every one it has ready."""
        if type(self).next_completed is not ThreadCluster.next_completed:
            out: list[Completion] = []
            c = self.next_completed(timeout)
            while c is not None:
                out.append(c)
                c = self.next_completed(0.0)
            return out
        end = None if timeout is None else time.perf_counter() + timeout
        with self._cv:
            return self._wait(end, False)

    def cancel(self, request_id: int) -> None:
        with self._lock:
            ev = self._events.pop(request_id, None)
        if ev is None:
            return
        t0 = time.perf_counter()
        ev.set()
        with self._cv:
            self._take_deposits()
            for i, line in enumerate(self._lines):
                if not line:
                    continue
                if line[0].request_id == request_id:  # worker i was serving it
                    self._account(line.popleft(), i, t0)
                    self._free_at[i] = t0
                    if self._values.pop((request_id, i), None) is not None:
                        self.release_delays.append(time.perf_counter() - t0)
                    elif (request_id, i) in self._computing:  # inside its call
                        self._pending[(request_id, i)] = t0
                elif any(t.request_id == request_id for t in line):
                    # queued behind another request's task: never begun
                    kept = [t for t in line if t.request_id != request_id]
                    line.clear()
                    line.extend(kept)
                    self._values.pop((request_id, i), None)
            self._cv.notify_all()

    def _account(self, task: _Task, worker: int, t_end: float) -> None:
        """Worker ``worker`` served ``task`` from the later of its send and the
        end of the worker's previous task, to ``t_end`` (under ``_cv``)."""
        w = self._work.get(task.request_id)
        if w is not None:
            w[0] += 1
            w[1] += max(0.0, t_end - max(task.sent, self._free_at[worker]))

    def work(self, request_id: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of a request: how many of its evaluations
        began service (in the workers' queue discipline: each worker serves one
        at a time, in submission order) and the worker-seconds they took, to
        their answer or to the cancellation; queued evaluations that were dropped
        count for nothing. Final once the request is cancelled (a call still
        running then finishes on its thread, outside this count); forgotten after
        this call."""
        with self._cv:
            got = self._work.pop(request_id, None)
        if got is None:
            return 0, 0.0
        return int(got[0]), float(got[1])

    def wake(self) -> None:
        """Makes a :meth:`next_completed` that is waiting (or the next one)
        return None at once: a frontend thread has new work for the server's
        thread. Callable from any thread."""
        with self._cv:
            self._woken = True
            self._cv.notify_all()

    def _serve(self, i: int, task: _Task) -> None:
        """Worker ``i`` computes ``task`` (in one of the cluster's threads)."""
        scale = self.injector.corrupt_scale if self.injector is not None else 0.0
        key = (task.request_id, i)
        self._computing.add(key)
        if task.cancel.is_set():
            value = _SKIPPED
        else:
            fn = self._fns[task.round][i]
            aot = self._compiled[task.round].get(i)
            row = task.row
            if aot is not None and (row.shape, row.dtype) == aot[:2]:
                fn = aot[2]  # compiled by warmup for rows like this one
            try:
                value = np.asarray(fn(row))
                if task.fault:  # an injected fault (0: none)
                    value = apply_fault(value, task.fault, scale, i)
            except BaseException as exc:  # noqa: BLE001 - a failing worker
                value = exc  # answers its exception (a SystemExit too): never lost
        t_done = time.perf_counter()
        with self._cv:
            self._computing.discard(key)
            self._deposits.append((i, task, value, t_done))
            # wake the server only when this answer may be due already
            if t_done >= task.sent + task.delay or task.cancel.is_set():
                self._cv.notify_all()

    def close(self) -> None:
        """Stops every worker thread and waits for them, 5 s at most in all: a
        worker stuck inside its function (a call that never returns) does not
        hold up ``close``; its thread is a daemon thread, which ends with its
        call or with the process. A cluster dropped without ``close`` stops its
        threads when it is garbage-collected (they hold it weakly)."""
        if self._closed:
            return
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        with self._lock:
            events = list(self._events.values())
            self._events.clear()
        for ev in events:
            ev.set()
        if self._pool is not None:
            self._finalizer()  # stops the threads, once
            deadline = time.perf_counter() + 5.0
            for t in self._pool.started():
                t.join(timeout=max(0.0, deadline - time.perf_counter()))
        with self._cv:
            self._take_deposits()

    @property
    def alive_threads(self) -> int:
        """How many worker threads are still running."""
        if self._pool is None:
            return 0
        return sum(t.is_alive() for t in self._pool.started())
