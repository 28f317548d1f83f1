"""Ray backend: the workers are slots of Ray actors (optional: ``codedjax[ray]``).

Worker i of a request runs on actor ``i % num_actors``, with the function of its
role (and round) from the :class:`~codedjax.serving.WorkerFunctions` table every
actor holds; each actor is an async actor
with ``slots_per_actor`` concurrent slots, so a straggler's injected delay is an
``asyncio.sleep`` that ``ray.cancel`` interrupts. Answers are collected with a
``ray.wait`` loop that always passes a timeout (a ``ray.wait`` without one can hang),
and a reference that failed (the actor died, the task raised) is ready like any
other: its answer is the exception, which the server counts as a failed worker.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ._backends import BackendBase, Completion, WorkerFunctions, round_draws
from ._checks import integer, number
from ._faults import HANG, Injector, apply_fault


def _import_ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "RayCluster needs Ray: pip install 'codedjax[ray]' (or pip install ray)"
        ) from exc
    return ray


class _WorkerActor:
    """One Ray actor: runs the jitted worker functions (each distinct function of
    the :class:`WorkerFunctions` table jitted once) for several worker slots."""

    def __init__(self, functions, corrupt_scale):
        import jax

        self._fns = functions.compiled(jax.jit)
        self._scale = corrupt_scale
        self._locks: dict[int, asyncio.Lock] = {}

    def ping(self):
        return True

    def warmup(self, row, round, worker):
        np.asarray(self._fns[round][worker](row))
        return True

    async def run(self, row, delay, fault, worker, round=0):
        # each worker is a machine: one evaluation at a time, in submission order
        # (asyncio.Lock is FIFO); a cancelled evaluation still waiting is dropped
        lock = self._locks.setdefault(worker, asyncio.Lock())
        async with lock:
            start = time.perf_counter()
            try:
                value = np.asarray(self._fns[round][worker](row))
                value = apply_fault(value, fault, self._scale, worker)
            except Exception as exc:
                value = exc
            if fault == HANG:
                await asyncio.sleep(1e9)
            remaining = start + delay - time.perf_counter()
            if remaining > 0:
                await asyncio.sleep(remaining)
        if isinstance(value, BaseException):
            raise value
        return value


class RayCluster(BackendBase):
    """Workers as slots of Ray actors, for clusters of many machines.

    Args:
        num_actors: actors to start (default: M, one per worker).
        slots_per_actor: concurrent tasks per actor (``max_concurrency``).
        injector: the delay and fault plan (as :class:`ThreadCluster`).
        init_kwargs: arguments for ``ray.init`` when Ray is not running yet; by
            default an embedded local instance (``num_cpus`` = actors,
            ``include_dashboard=False``, a temporary directory of its own), shut
            down again by :meth:`close`.
        poll: the longest single ``ray.wait`` in seconds.

    The worker function is sent to the actors with Ray's cloudpickle: it must be
    importable there (a module on the actors' path) or picklable by value (a
    closure or lambda).

    Raises:
        ImportError: Ray is not installed.
    """

    can_wake = True  # wake() ends a waiting next_completed within poll seconds

    def __init__(
        self,
        *,
        num_actors: int | None = None,
        slots_per_actor: int = 4,
        injector: Injector | None = None,
        init_kwargs: dict[str, Any] | None = None,
        poll: float = 0.05,
    ):
        if injector is not None and not isinstance(injector, Injector):
            raise TypeError(
                f"RayCluster: injector must be an Injector or None, got "
                f"{type(injector).__name__}"
            )
        fname = "RayCluster"
        if num_actors is not None:
            num_actors = integer(fname, "num_actors", num_actors, minimum=1)
        slots = integer(fname, "slots_per_actor", slots_per_actor, minimum=1)
        poll = number(fname, "poll", poll, positive=True, what="a number of seconds")
        self.ray = _import_ray()
        self.num_actors = num_actors
        self.slots = slots
        self.injector = injector
        self.init_kwargs = init_kwargs
        self.poll = poll
        self.actors: list = []
        self.functions: WorkerFunctions | None = None
        self._refs: dict[Any, tuple[int, int]] = {}
        self._by_request: dict[int, list] = {}
        self._ready: deque = deque()
        self._work: dict[int, list] = {}
        self._wake = threading.Event()
        self._owns_ray = False
        self._tmp = None
        self._closed = False
        self.num_workers = 0

    def start(self, worker_fn: Callable | WorkerFunctions, num_workers: int) -> None:
        ray = self.ray
        table = WorkerFunctions.of(worker_fn, num_workers, fname="RayCluster.start")
        self.functions = table
        self.num_workers = m = int(num_workers)
        a = m if self.num_actors is None else int(self.num_actors)
        if not ray.is_initialized():
            kw = self.init_kwargs
            if kw is None:
                self._tmp = tempfile.mkdtemp(prefix="codedjax-ray-")
                kw = dict(num_cpus=a, include_dashboard=False, _temp_dir=self._tmp,
                          log_to_driver=False)  # fmt: skip
            ray.init(**kw)
            self._owns_ray = True
        scale = self.injector.corrupt_scale if self.injector is not None else 0.0
        cls = ray.remote(num_cpus=0, max_concurrency=self.slots, max_restarts=0)(
            _WorkerActor
        )
        self.actors = [cls.remote(table, scale) for _ in range(a)]
        ray.get([act.ping.remote() for act in self.actors], timeout=120)

    def now(self) -> float:
        return time.perf_counter()

    def warmup(self, rows: np.ndarray, *, round: int = 0) -> None:
        """Compiles round ``round``'s functions on every actor that runs them
        (outside any timing)."""
        n = len(self.actors)
        refs = []
        for a, act in enumerate(self.actors):
            seen = set()
            for i in range(a, self.num_workers, n):
                f = id(self.functions.function(round, i))
                if f not in seen:
                    seen.add(f)
                    refs.append(act.warmup.remote(rows[i], round, i))
        for ref in refs:
            try:
                self.ray.get(ref, timeout=300)
            except Exception:  # a dead actor: its workers will answer as failures
                pass

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
            raise RuntimeError("RayCluster.submit: the cluster is closed")
        m = self.num_workers
        delays, faults = round_draws(self.injector, request_id, draw, work, m)
        refs = []
        for i in range(m):
            act = self.actors[i % len(self.actors)]
            ref = act.run.remote(rows[i], float(delays[i]), int(faults[i]), i, round)
            self._refs[ref] = (request_id, i)
            refs.append(ref)
        self._by_request[request_id] = refs
        self._work[request_id] = [0, math.nan]

    def _collect(self, ready) -> None:
        ray = self.ray
        for ref in ready:
            rid, i = self._refs.pop(ref)
            if rid in self._work:
                self._work[rid][0] += 1
            try:
                value = ray.get(ref, timeout=0)
            except Exception as exc:  # failed refs count as ready: a failed worker
                value = exc
            self._ready.append(Completion(rid, i, value, time.perf_counter()))

    def next_completed(self, timeout: float | None) -> Completion | None:
        ray = self.ray
        end = None if timeout is None else time.perf_counter() + timeout
        while not self._ready:
            if self._wake.is_set():
                self._wake.clear()
                return None
            if not self._refs:
                if end is None:
                    raise RuntimeError(
                        "RayCluster.next_completed: nothing in flight and no timeout"
                    )
                self._wake.wait(max(0.0, end - time.perf_counter()))
                self._wake.clear()
                return None
            left = (
                self.poll if end is None else min(self.poll, end - time.perf_counter())
            )
            if left <= 0:
                return None
            ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=left)
            self._collect(ready)
        return self._ready.popleft()

    def cancel(self, request_id: int) -> None:
        w = self._work.get(request_id)
        for ref in self._by_request.pop(request_id, []):
            if self._refs.pop(ref, None) is not None:
                if w is not None:  # it may have begun: counted as work done
                    w[0] += 1
                try:
                    self.ray.cancel(ref)
                except Exception:  # already finished or its actor is gone
                    pass

    def work(self, request_id: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of a request, from the driver's side: the
        answered evaluations plus every one still unanswered when it was cancelled
        (Ray cannot say whether a cancelled task had begun, so each counts as
        work done: an upper bound); ``busy`` is nan (not measured). Forgotten
        after this call."""
        got = self._work.pop(request_id, None)
        if got is None:
            return 0, math.nan
        return int(got[0]), float(got[1])

    def wake(self) -> None:
        """Makes a waiting :meth:`next_completed` return None within ``poll``
        seconds (at once when nothing is in flight). Callable from any thread."""
        self._wake.set()

    def kill_actor(self, index: int) -> None:
        """Kills actor ``index`` (fault testing): its answers arrive as failures."""
        self.ray.kill(self.actors[index], no_restart=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for rid in list(self._by_request):
            self.cancel(rid)
        for act in self.actors:
            try:
                self.ray.kill(act, no_restart=True)
            except Exception:
                pass
        self.actors = []
        if self._owns_ray:
            self.ray.shutdown()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
