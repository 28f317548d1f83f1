"""Ray backend: the workers are slots of Ray actors (optional: ``codedjax[ray]``).

Worker i of a request runs on actor ``i % num_actors``, with the function of its
role (and round) from the :class:`~codedjax.serving.WorkerFunctions` table every
actor holds; each actor is an async actor with ``slots_per_actor`` concurrent
evaluations, so a straggler's injected delay is an ``asyncio.sleep`` that
``ray.cancel`` interrupts. A round is one call per actor (a streaming
generator that yields its workers' answers as they end, every answer ready at
the same moment in one object: ``batch_answers``), so a request costs one
submission and one cancellation per actor, not per worker, and one object per
moment an actor has answers, not per answer. Answers are collected with a
``ray.wait`` loop that always passes a timeout (a ``ray.wait`` without one can
hang) and takes every answer ready at once, fetched in one ``ray.get`` (nothing
the engine does not take is fetched); a call that failed (its actor died) fails
every worker it had not answered for: the server counts them as failed workers.

Ray's compiled graphs (shared-memory channels, a static graph) would cut the
per-call cost further, but they do not fit first N of M: their results cannot
be waited on with ``ray.wait``, an execution cannot be cancelled, and an actor
in a compiled graph runs one execution at a time, so a straggler would hold its
actor's next request (docs/serving.md, "Ray").
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

_MAX_CALLS = 1000  # calls an actor serves at once: requests (and rounds) in flight


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

    def __init__(self, functions, corrupt_scale, slots):
        import jax

        # the actor waits for every evaluation it starts: JAX's synchronous CPU
        # dispatch saves a thread hand-off per call (read when JAX starts its CPU
        # client, so before any computation here; no effect on an accelerator)
        jax.config.update("jax_cpu_enable_async_dispatch", False)
        self._fns = functions.compiled(jax.jit)
        self._scale = corrupt_scale
        self._slots = slots
        self._sem: asyncio.Semaphore | None = None  # made in the actor's loop
        self._locks: dict[int, asyncio.Lock] = {}

    def ping(self):
        return True

    def warmup(self, row, round, worker):
        np.asarray(self._fns[round][worker](row))
        return True

    async def _evaluate(self, row, delay, fault, worker, round):
        # at most `slots` evaluations at once; each worker is a machine: one
        # evaluation at a time, in submission order (asyncio.Lock is FIFO); a
        # cancelled evaluation still waiting is dropped
        if self._sem is None:
            self._sem = asyncio.Semaphore(self._slots)
        lock = self._locks.setdefault(worker, asyncio.Lock())
        async with self._sem, lock:
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
        return value

    async def run(self, rows, delays, faults, workers, round=0, batch=True):
        """One call per actor per round: its workers' evaluations, yielded as
        ``(worker, answer or exception)`` pairs when they end (a streaming
        generator: the driver sees each answer as it comes), with ``batch`` a
        list of every pair ready at that moment (one object, not one per
        answer). Cancelling the call cancels the evaluations still running."""
        done: asyncio.Queue = asyncio.Queue()

        async def one(k):
            try:
                v = await self._evaluate(rows[k], delays[k], faults[k], workers[k],
                                         round)  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - the worker's failure
                v = exc
            done.put_nowait((workers[k], v))

        tasks = [asyncio.ensure_future(one(k)) for k in range(len(workers))]
        try:
            left = len(tasks)
            while left:
                got = [await done.get()]
                if batch:
                    while not done.empty():
                        got.append(done.get_nowait())
                    yield got
                else:
                    yield got[0]
                left -= len(got)
        finally:
            for t in tasks:
                t.cancel()


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
        batch_answers: an actor sends every answer it has ready at one moment as
            one object (default); False sends one object per answer (what the
            backend did before; kept to measure the difference:
            ``python -m benchmarks.ray_cost``). Read at each submission.

    The worker function is sent to the actors with Ray's cloudpickle: it must be
    importable there (a module on the actors' path) or picklable by value (a
    closure or lambda).

    Raises:
        ImportError: Ray is not installed.
    """

    can_wake = True  # wake() ends a waiting next_completed within poll seconds
    can_submit_part = True  # submit_part: a request's rows in parts

    def __init__(
        self,
        *,
        num_actors: int | None = None,
        slots_per_actor: int = 4,
        injector: Injector | None = None,
        init_kwargs: dict[str, Any] | None = None,
        poll: float = 0.05,
        batch_answers: bool = True,
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
        self.batch_answers = bool(batch_answers)
        self.actors: list = []
        self.functions: WorkerFunctions | None = None
        # each call still running (one per actor per request and round): its
        # request and the workers it has not answered for yet
        self._calls: dict[Any, tuple[int, set]] = {}
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
        # the slots bound the evaluations at once (in the actor); the calls at
        # once are one per request (and round) in flight
        cls = ray.remote(num_cpus=0, max_concurrency=_MAX_CALLS, max_restarts=0)(
            _WorkerActor
        )
        self.actors = [cls.remote(table, scale, self.slots) for _ in range(a)]
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
        (:meth:`BackendBase.submit_part`): one call per actor that runs some of
        them; :meth:`cancel` cancels every part's calls."""
        self._send("submit_part", request_id, rows, workers, round, draw, work)

    def _send(self, fname, request_id, rows, workers, round, draw, work) -> None:
        if self._closed:
            raise RuntimeError(f"RayCluster.{fname}: the cluster is closed")
        m = self.num_workers
        delays, faults = round_draws(self.injector, request_id, draw, work, m)
        delays, faults = np.asarray(delays, float), np.asarray(faults)
        ws_all = np.arange(m) if workers is None else np.asarray(workers, np.int64)
        rows = np.asarray(rows)
        n = len(self.actors)
        gens = self._by_request.setdefault(request_id, [])
        self._work.setdefault(request_id, [0, math.nan])
        for a, act in enumerate(self.actors):  # one call per actor: its workers
            at = np.flatnonzero(ws_all % n == a)
            if not len(at):
                continue
            ws = ws_all[at]
            gen = act.run.options(num_returns="streaming").remote(
                np.ascontiguousarray(rows[at]), delays[ws].tolist(),
                faults[ws].tolist(), ws.tolist(), round, self.batch_answers,
            )  # fmt: skip
            self._calls[gen] = (request_id, set(ws.tolist()))
            gens.append(gen)

    def _collect(self, ready) -> None:
        """Takes every answer the ready calls have yielded, fetched in one
        ``ray.get`` (one by one only when one failed: a dead actor's call
        fails every worker it had not answered for)."""
        ray = self.ray
        refs, owners = [], []
        for gen in ready:
            call = self._calls.get(gen)
            while call is not None:
                try:
                    ref = next(gen)
                except StopIteration:  # every worker of the call answered
                    del self._calls[gen]
                    break
                refs.append(ref)
                owners.append((gen, call))
                if not gen.next_ready():
                    break
        try:
            values = ray.get(refs, timeout=0)
        except Exception:
            values = []
            for ref in refs:
                try:
                    values.append(ray.get(ref, timeout=0))
                except Exception as exc:  # the call failed: its actor is gone
                    values.append(exc)
        now = time.perf_counter()
        for (gen, (rid, pending)), got in zip(owners, values, strict=True):
            if isinstance(got, BaseException):  # every worker it still had
                answers = [(w, got) for w in sorted(pending)]
                self._calls.pop(gen, None)
            else:  # a list of pairs (batch_answers) or one pair
                answers = got if isinstance(got, list) else [got]
            for w, value in answers:
                pending.discard(w)
                if rid in self._work:
                    self._work[rid][0] += 1
                self._ready.append(Completion(rid, int(w), value, now))

    def _wait(self, timeout: float | None) -> bool:
        """Waits for the answers (at most ``poll`` seconds at a time) until one
        is ready: True; False when ``timeout`` passed or a ``wake`` came. Every
        reference ready by then is collected at once, without fetching the
        others (``fetch_local=False``)."""
        ray = self.ray
        end = None if timeout is None else time.perf_counter() + timeout
        while not self._ready:
            if self._wake.is_set():
                self._wake.clear()
                return False
            if not self._calls:
                if end is None:
                    raise RuntimeError(
                        "RayCluster.next_completed: nothing in flight and no timeout"
                    )
                self._wake.wait(max(0.0, end - time.perf_counter()))
                self._wake.clear()
                return False
            left = (
                self.poll if end is None else min(self.poll, end - time.perf_counter())
            )
            if left < 0:
                return False
            refs = list(self._calls)
            ready, rest = ray.wait(refs, num_returns=1, timeout=left,
                                   fetch_local=False)  # fmt: skip
            # every other call with an answer ready now (a local look, no
            # second ray.wait)
            ready += [g for g in rest if g.next_ready()] if ready else []
            if ready:
                self._collect(ready)
            elif end is not None and time.perf_counter() >= end:
                return False
        return True

    def next_completions(self, timeout: float | None) -> list[Completion]:
        """Every answer ready now, in one look (see
        :meth:`BackendBase.next_completions`)."""
        if not self._wait(timeout):
            return []
        out = list(self._ready)
        self._ready.clear()
        return out

    def next_completed(self, timeout: float | None) -> Completion | None:
        return self._ready.popleft() if self._wait(timeout) else None

    def cancel(self, request_id: int) -> None:
        """Cancels the request's calls still running: one cancellation per
        actor, for all its workers that had not answered."""
        w = self._work.get(request_id)
        for gen in self._by_request.pop(request_id, []):
            call = self._calls.pop(gen, None)
            if call is None:
                continue
            if w is not None:  # they may have begun: counted as work done
                w[0] += len(call[1])
            try:
                self.ray.cancel(gen)
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
