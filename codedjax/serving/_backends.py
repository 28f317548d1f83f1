"""The backend interface: where the M coded rows of a request are computed.

Every backend has the same small interface (:class:`Backend`): the server calls
``start(worker_fn, num_workers)`` once, then ``submit(request_id, rows)``,
``next_completed(timeout)`` (one answer, or None when ``timeout`` seconds passed),
``cancel(request_id)`` and finally ``close()``; ``now()`` is the backend's clock.
Six optional members (``warmup``, ``work``, ``advance``, ``wake``,
``next_completions``, ``submit_part``) have the defaults of :class:`BackendBase`,
the base class
of the library's clusters (``_thread_cluster.py``, ``_virtual.py``,
``_ray.py``); the engine reads any backend through :meth:`BackendBase.of`,
the one place that looks for them.

``worker_fn`` is one function for every worker, or a :class:`WorkerFunctions`
table: the function of each worker in each round (per-worker roles, multi-round
pipelines); ``submit(..., round=j, draw=r, work=w)`` then runs round j's functions,
with request r's delay draws scaled to the round's fraction w of the work
(:meth:`Injector.plan_one`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from ._checks import integer


class WorkerFunctions:
    """What the workers compute: the function of every worker in every round.

    ``functions[j][i]`` is what worker i computes on its coded row in round j (a
    one-shot server has one round). Workers of one role share one function
    object, and a backend compiles each distinct function once (``jax.jit``; the
    simulated cluster ``jax.vmap``-s it over the rows of the workers that run it).
    The server builds the table from a code's :attr:`~codedjax.Code.roles` and its
    ``{role: function}`` mapping; a backend given a plain callable treats it as
    one round of one function (:meth:`of`).

    Args:
        functions: [L][M] callables.
        roles: [L][M] role names, for messages (default every worker ``"base"``).

    Raises:
        ValueError: no rounds, rounds of different M.
        TypeError: an entry that is not callable.
    """

    def __init__(self, functions, roles=None):
        fns = tuple(tuple(r) for r in functions)
        if not fns or not fns[0]:
            raise ValueError("WorkerFunctions: need at least one round of workers")
        m = len(fns[0])
        if any(len(r) != m for r in fns):
            raise ValueError(
                f"WorkerFunctions: every round must have the same number of workers, "
                f"got {[len(r) for r in fns]}"
            )
        for j, r in enumerate(fns):
            for i, f in enumerate(r):
                if not callable(f):
                    raise TypeError(
                        f"WorkerFunctions: round {j} worker {i} is not callable: {f!r}"
                    )
        self.functions = fns
        self.roles = (
            tuple(("base",) * m for _ in fns)
            if roles is None
            else tuple(tuple(r) for r in roles)
        )
        self.num_workers = m
        self.num_rounds = len(fns)

    @classmethod
    def of(
        cls, worker_fn, num_workers: int, *, fname: str = "WorkerFunctions.of"
    ) -> WorkerFunctions:
        """``worker_fn`` as a table: a table is returned as it is, a callable is
        one round in which every worker runs it (``fname``: the backend method
        that asks, for messages)."""
        num_workers = integer(fname, "num_workers", num_workers, minimum=1)
        if isinstance(worker_fn, WorkerFunctions):
            if worker_fn.num_workers != int(num_workers):
                raise ValueError(
                    f"WorkerFunctions: the table has {worker_fn.num_workers} workers, "
                    f"the backend was started with {num_workers}"
                )
            return worker_fn
        if not callable(worker_fn):
            raise TypeError(
                f"worker_fn must be callable or a WorkerFunctions table, got "
                f"{worker_fn!r}"
            )
        return cls([[worker_fn] * int(num_workers)])

    def function(self, round: int, worker: int) -> Callable:
        """The function worker ``worker`` runs in round ``round``."""
        return self.functions[round][worker]

    def groups(self, round: int) -> tuple[tuple[Callable, np.ndarray], ...]:
        """Round ``round``'s distinct functions, each with the workers [n] that run
        it (in increasing order; the groups in order of their first worker)."""
        seen: dict[int, tuple[Callable, list[int]]] = {}
        for i, f in enumerate(self.functions[round]):
            seen.setdefault(id(f), (f, []))[1].append(i)
        return tuple((f, np.asarray(ws, np.int64)) for f, ws in seen.values())

    def distinct(self) -> tuple[Callable, ...]:
        """Every distinct function of every round, once."""
        seen: dict[int, Callable] = {}
        for r in self.functions:
            for f in r:
                seen.setdefault(id(f), f)
        return tuple(seen.values())

    def compiled(self, wrap: Callable = jax.jit) -> list[list[Callable]]:
        """[L][M] the functions passed through ``wrap`` (default ``jax.jit``), each
        distinct function wrapped once."""
        done = {id(f): wrap(f) for f in self.distinct()}
        return [[done[id(f)] for f in r] for r in self.functions]


def captured_config() -> Callable[[], contextlib.ExitStack]:
    """The calling thread's JAX settings that are thread-local (x64, dtype and
    rank promotion), as a function that enters them in another thread: a worker
    or dispatcher thread then computes in the dtypes of the thread that built the
    server (float64 stays float64) and shares its compiled programs."""
    x64 = bool(jax.config.jax_enable_x64)
    dtype_promotion = jax.config.jax_numpy_dtype_promotion
    rank_promotion = jax.config.jax_numpy_rank_promotion

    def enter() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        stack.enter_context(jax.enable_x64(x64))
        stack.enter_context(jax.numpy_dtype_promotion(dtype_promotion))
        stack.enter_context(jax.numpy_rank_promotion(rank_promotion))
        return stack

    return enter


def round_draws(injector, request_id, draw, work, m):
    """(delays [M], faults [M]) of one round: request ``draw``'s draws (default
    ``request_id``) at the round's fraction ``work`` of the work."""
    if injector is None:
        return np.zeros(m), np.zeros(m, np.int8)
    return injector.plan_one(request_id if draw is None else draw, m, work=work)


class NoMoreAnswers(RuntimeError):
    """Raised by a backend's ``next_completed(None)`` (no timeout) when it knows
    that no answer will ever arrive: every task still out is at a hung worker
    (an injected ``"hang"`` fault). The server then ends the requests that hold
    the hung workers (``request_ids``) as never decided (``ok`` False,
    ``TOO_FEW_RESPONSES``) instead of waiting forever.

    Args:
        message: what happened.
        request_ids: the requests whose tasks hang at a worker.
    """

    def __init__(self, message: str, request_ids=()):
        super().__init__(message)
        self.request_ids = tuple(int(r) for r in request_ids)


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
    """The interface a cluster backend implements: the six methods below.

    ``start(worker_fn, num_workers)`` once, before anything else; ``now()`` the
    backend's clock (seconds); ``submit(request_id, rows)`` sends row i of
    ``rows`` [M, ...] to worker i (a server whose code has several roles or
    rounds passes ``round=``, ``draw=`` and ``work=``; one with one role and one
    round calls the plain form); ``next_completed(timeout)`` one answer
    (:class:`Completion`) or None when ``timeout`` seconds passed (None: no
    limit; :class:`NoMoreAnswers` when none will ever come); ``cancel(request_id)``
    frees the request's workers; ``close()`` stops the backend. These six are
    what ``isinstance(backend, Backend)`` checks.

    Optional members, with their defaults (declared by :class:`BackendBase`):
    ``warmup(rows, *, round=0)`` compiles ahead of the first request (default:
    nothing), ``work(request_id)`` counts a request's evaluations (default:
    ``(-1, nan)``, not counted), ``advance(seconds)`` moves a virtual clock
    (default: nothing, a real clock) and ``wake()`` interrupts a waiting
    ``next_completed`` (default: nothing, the streaming frontend polls),
    ``next_completions(timeout)`` every answer ready at once (default: the
    first answer alone, ``next_completed``'s, in a list) and
    ``submit_part(request_id, rows, workers)`` a part of a request's rows, to
    some of its workers (``can_submit_part``; default: none, a request is sent
    whole).
    """

    def start(
        self, worker_fn: Callable | WorkerFunctions, num_workers: int
    ) -> None: ...

    def now(self) -> float: ...

    def submit(
        self,
        request_id: int,
        rows: np.ndarray,
        *,
        round: int = 0,
        draw: int | None = None,
        work: float = 1.0,
    ) -> None: ...

    def next_completed(self, timeout: float | None) -> Completion | None: ...

    def cancel(self, request_id: int) -> None: ...

    def close(self) -> None: ...


# the members of the Backend protocol every backend has, and the optional ones
REQUIRED_MEMBERS = ("start", "now", "submit", "next_completed", "cancel", "close")
OPTIONAL_MEMBERS = ("warmup", "work", "advance", "wake", "next_completions",
                    "submit_part")  # fmt: skip


class BackendBase(Backend):
    """A base class for backends: :class:`Backend`'s six required methods (a
    subclass implements them) and its optional members with their defaults (a
    subclass overrides those it does better). :class:`ThreadCluster`,
    :class:`SimulatedCluster` and :class:`RayCluster` are subclasses; the engine
    reads any other backend through :meth:`of`, which gives it these defaults
    for the members it lacks. Every member the engine calls is declared here.

    Attributes:
        virtual_clock: ``now()`` is a virtual clock, moved only by
            ``next_completed`` and :meth:`advance` (a simulation): a
            ``StreamingServer`` then runs no thread and drives the loop when a
            result is asked for (default False: a real clock).
        can_wake: :meth:`wake` makes a waiting ``next_completed`` return at once;
            without it a ``StreamingServer``'s dispatcher looks for new queries
            every ``poll`` seconds (default False).
        can_submit_part: :meth:`submit_part` sends a request's rows in parts
            (a ``StreamingServer`` then sends a systematic code's query to its
            own workers when it arrives); default False: every request is sent
            whole with ``submit``.
    """

    virtual_clock: bool = False
    can_wake: bool = False
    can_submit_part: bool = False

    def warmup(self, rows: np.ndarray, *, round: int = 0) -> None:
        """Compiles round ``round``'s functions for rows like ``rows`` [M, ...]
        before the first request is timed (a server with one role and one round
        calls ``warmup(rows)``). Default: nothing; the first request's calls
        compile."""

    def work(self, request_id: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of a request once it is cancelled: how many
        of its M evaluations began service and the worker-seconds they took;
        forgotten after this call. Default ``(-1, nan)``: not counted."""
        return -1, math.nan

    def advance(self, seconds: float) -> None:
        """Moves a virtual clock by ``seconds`` of the master's measured work.
        Default: nothing (a real clock has moved by itself)."""

    def wake(self) -> None:
        """Makes a waiting ``next_completed`` (or the next one) return None at
        once; callable from any thread (see ``can_wake``). Default: nothing."""

    def next_completions(self, timeout: float | None) -> list[Completion]:
        """The answers ready now, in the order they arrived: waits like
        ``next_completed(timeout)`` for the first, then takes every other one
        already there without waiting (one wake-up of the engine for all of
        them); ``[]`` when ``timeout`` passed (or a ``wake``). Raises
        :class:`NoMoreAnswers` like ``next_completed``.

        Default: the first answer alone (``next_completed``'s), so a backend
        that does not override it is read one answer at a time, as before; a
        virtual clock keeps that default (its simultaneous answers are then
        told apart one by one)."""
        c = self.next_completed(timeout)
        return [] if c is None else [c]

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
        """Sends ``rows[j]`` [n, ...] to worker ``workers[j]`` [n] (distinct): a
        part of request ``request_id``'s M rows. A request is sent in parts by
        several calls, at different times (each worker once), or whole by one
        ``submit``; each worker's service time is its entry of the request's
        draw (``draw``, ``work`` as in ``submit``) counted from when its row was
        sent, and ``cancel(request_id)`` cancels every part. Only called where
        ``can_submit_part``; default: refused.

        Raises:
            NotImplementedError: the backend sends requests whole only.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.submit_part: this backend sends a request's "
            f"rows whole (submit), not in parts (can_submit_part is False)"
        )

    @classmethod
    def of(cls, backend: Any, fname: str) -> BackendBase:
        """``backend`` with every member the engine calls: itself when it is a
        :class:`BackendBase`, else a view of it that has its own members and the
        defaults of the optional ones it lacks (``virtual_clock``: it has
        ``advance``; ``can_wake``: it has ``wake``).

        Raises:
            TypeError: ``backend`` lacks a required method (``fname`` names the
                server that was given it).
        """
        if isinstance(backend, BackendBase):
            return backend
        missing = [
            n for n in REQUIRED_MEMBERS if not callable(getattr(backend, n, None))
        ]
        if missing:
            raise TypeError(
                f"{fname}: backend must implement the Backend interface "
                f"({', '.join(REQUIRED_MEMBERS)}), got {type(backend).__name__} "
                f"without {missing[0]!r}"
            )
        return _Adopted(backend)


class _Adopted(BackendBase):
    """A backend that is not a :class:`BackendBase`, seen as one: its own
    members where it has them (bound once), the defaults elsewhere."""

    def __init__(self, backend: Any):
        for name in REQUIRED_MEMBERS + OPTIONAL_MEMBERS:
            own = getattr(backend, name, None)
            if callable(own):
                setattr(self, name, own)
        self.virtual_clock = callable(getattr(backend, "advance", None))
        self.can_wake = callable(getattr(backend, "wake", None))
        self.can_submit_part = callable(getattr(backend, "submit_part", None))
