"""The threads that compute a :class:`~codedjax.serving.ThreadCluster`'s rows."""

from __future__ import annotations

import heapq
import os
import threading
import time
import weakref

STUCK = 0.02  # seconds in one call after which a worker counts as stuck


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Pool:
    """The threads that compute a :class:`ThreadCluster`'s rows: one heap of tasks
    ordered by due time, a worker's tasks one at a time. A thread takes the
    soonest-due task whose worker is not computing; a task of a busy worker waits
    beside the heap until its worker's call returns, so a worker stuck in a call
    holds one thread and none of the others' tasks. With ``grow``, a worker in a
    call for longer than ``STUCK`` seconds stops counting toward ``size``: the
    pool starts a thread in its place (:meth:`unstick`), and a thread beyond
    ``size`` ends when its call returns. Tasks of a cancelled request are dropped
    unrun. The pool holds no reference to its cluster (its threads hold it
    weakly)."""

    def __init__(self, size: int, *, grow: bool):
        self.size = int(size)
        self.grow = bool(grow)
        self.cv = threading.Condition(threading.Lock())
        self.heap: list = []  # (due, seq, worker, task)
        self.held: dict[int, list] = {}  # worker: its entries while it is busy
        self.busy: dict[int, float] = {}  # worker: when its call began
        self.live = 0  # threads running
        self.idle = 0  # threads waiting for a task
        self.stopped = False
        self.threads: list[threading.Thread] = []
        self._spawn_args: tuple = ()

    def spawn(self, ref: weakref.WeakMethod, config) -> None:
        """Starts ``size`` threads that compute the tasks with ``ref()``
        (``serve(worker, task)``, its cluster's, held weakly) in the JAX
        settings ``config()``."""
        self._spawn_args = (ref, config)
        with self.cv:
            self._start(self.size)

    def _start(self, n: int) -> None:  # under cv
        for _ in range(n):
            t = threading.Thread(
                target=_pool_loop, args=(self, *self._spawn_args),
                name=f"codedjax-worker-{len(self.threads)}", daemon=True,
            )  # fmt: skip
            self.threads.append(t)
            self.live += 1
            t.start()

    def started(self) -> list[threading.Thread]:
        with self.cv:
            return list(self.threads)

    def put(self, entries: list) -> None:
        with self.cv:
            if len(entries) > 1:
                self.heap += entries
                heapq.heapify(self.heap)
            else:
                for e in entries:
                    heapq.heappush(self.heap, e)
            if self.idle:
                self.cv.notify(min(self.idle, len(entries)))

    def waiting(self) -> bool:
        """Tasks wait for a thread (an unlocked read: a hint for the server's
        loop, which then calls :meth:`unstick`)."""
        return self.grow and bool(self.heap)

    def unstick(self, now: float) -> None:
        """Starts a thread for each worker stuck in a call that leaves fewer than
        ``size`` threads for the others."""
        with self.cv:
            if self.stopped or not self.heap:
                return
            stuck = sum(now - t0 > STUCK for t0 in self.busy.values())
            short = self.size - (self.live - stuck)
            if short > 0:
                self._start(short)

    def take(self):
        """The next task, (worker, task), or None: the thread is to end."""
        with self.cv:
            return self._next()

    def _next(self):  # under cv
        while True:
            if self.stopped:
                self.live -= 1
                return None
            while self.heap:
                entry = heapq.heappop(self.heap)
                i, task = entry[2], entry[3]
                if task.cancel.is_set():
                    continue  # its request was decided: dropped unrun
                if i in self.busy:
                    self.held.setdefault(i, []).append(entry)
                    continue
                self.busy[i] = time.perf_counter()
                return i, task
            self.idle += 1
            self.cv.wait()
            self.idle -= 1

    def done(self, worker: int):
        """Worker ``worker``'s call returned: the thread's next task, as
        :meth:`take` (one acquisition of the lock for both), or None: this
        thread is to end (stopped, or the pool has more threads than ``size``
        besides those in a call)."""
        with self.cv:
            del self.busy[worker]
            back = self.held.pop(worker, ())
            for e in back:
                heapq.heappush(self.heap, e)
            if back and self.idle:
                self.cv.notify()
            if self.live - len(self.busy) > self.size:
                self.live -= 1
                return None
            return self._next()

    def stop(self) -> None:
        with self.cv:
            self.stopped = True
            self.heap.clear()
            self.held.clear()
            self.cv.notify_all()


def _pool_loop(pool: Pool, ref: weakref.WeakMethod, config) -> None:
    """A thread of a :class:`ThreadCluster`'s pool: ``ref`` is its cluster's
    method that computes one task, held weakly between tasks (so is the
    cluster)."""
    with config():
        job = pool.take()
        while job is not None:
            serve = ref()
            if serve is None:  # its cluster was collected without close()
                pool.stop()
                return
            try:
                serve(*job)
            finally:
                del serve
                job = pool.done(job[0])
