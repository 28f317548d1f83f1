"""The open-loop load generator: queries submitted at their arrival times.

:func:`run_open_loop` submits queries to a :class:`StreamingServer` at given
arrival times (``_arrivals``: :func:`poisson_arrivals`, :func:`bursty_arrivals`;
open loop: it never waits for an answer before the next arrival) and accounts
for every query: answered (ok or not, with a status), failed with an error,
refused (:class:`QueueFull`), or lost (none: a query that has neither an answer
nor an error by the end is counted, never dropped silently). Its simulated
counterpart, for large sweeps without a model, is ``_load.simulate_load``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ._arrivals import arrival_times, positive
from ._stream import QueueFull, StreamingServer


class LoadRun(NamedTuple):
    """What :func:`run_open_loop` measured.

    Attributes:
        results: one :class:`QueryResult` per submitted query, in arrival order
            (None for a query that was refused, failed with an error or is lost).
        latency: float [Q] seconds from arrival to answer (nan without an answer).
        ok: bool [Q] answered and decoded.
        submitted: queries offered (arrivals within the time bound).
        answered: queries with an answer (ok or not: ``results`` has a status).
        errors: queries whose future ended with an exception (the message names
            the cause), e.g. when the frontend stopped.
        rejected: queries refused with :class:`QueueFull` (back-pressure).
        lost: queries with neither an answer nor an error when the run ended
            (0 unless ``timeout`` cut the wait short).
        duration: seconds from the first arrival to the last answer (backend
            clock).
    """

    results: list
    latency: np.ndarray
    ok: np.ndarray
    submitted: int
    answered: int
    errors: int
    rejected: int
    lost: int
    duration: float


def run_open_loop(
    frontend: StreamingServer,
    queries: Any,
    times: Sequence[float],
    *,
    max_seconds: float | None = None,
    timeout: float | None = None,
) -> LoadRun:
    """Submits ``queries[i]`` at ``times[i]`` seconds from now, without waiting for
    answers (open loop), then collects every answer.

    On a real clock the generator sleeps until each arrival (an arrival it is late
    for is submitted at once); on a virtual clock (a :class:`SimulatedCluster`)
    it places the arrivals with ``submit(..., at=)`` and runs the simulation.
    Only the frontend in this process is loaded (no network).

    Args:
        frontend: the :class:`StreamingServer`.
        queries: [Q, ...] queries (or a sequence of Q queries).
        times: [Q] non-decreasing arrival offsets in seconds (e.g.
            :func:`poisson_arrivals`).
        max_seconds: optional bound: arrivals later than this are not submitted.
        timeout: seconds to wait for the answers after the last arrival (real
            clock; default: until every query is answered or failed).

    Returns:
        :class:`LoadRun`.

    Raises:
        ValueError: ``times`` not [Q] non-decreasing finite offsets >= 0 (the
            message names the first offending entry and its value); a bad
            max_seconds or timeout.
        TypeError: frontend not a :class:`StreamingServer`; queries not a
            sequence or array of Q queries; times not numbers.
    """
    fname = "run_open_loop"
    if not isinstance(frontend, StreamingServer):
        raise TypeError(
            f"{fname}: frontend must be a StreamingServer, got "
            f"{'None' if frontend is None else type(frontend).__name__}"
        )
    if (
        not (hasattr(queries, "__len__") and hasattr(queries, "__getitem__"))
        or isinstance(queries, (str, bytes, dict))
        or getattr(queries, "ndim", 1) == 0
    ):
        raise TypeError(
            f"{fname}: queries must be [Q, ...] queries (an array or a sequence "
            f"of Q queries), got {queries!r:.80}"
        )
    n = len(queries)
    t = arrival_times(fname, "times", times, n)
    if max_seconds is not None:
        t = t[t <= positive(fname, "max_seconds", max_seconds)]
    if timeout is not None:
        timeout = positive(fname, "timeout", timeout)
    q = len(t)
    futures: list = [None] * q
    rejected = 0
    backend = frontend.backend
    t0 = backend.now()
    for i in range(q):
        at = t0 + t[i]
        if not frontend.virtual:
            wait = at - backend.now()
            if wait > 0:
                time.sleep(wait)
        try:
            futures[i] = frontend.submit(
                queries[i], at=at if frontend.virtual else None
            )
        except QueueFull:
            rejected += 1
    if frontend.virtual:
        frontend.drain()
    results: list = [None] * q
    errors = lost = 0
    end = None if timeout is None else time.perf_counter() + timeout
    for i, f in enumerate(futures):
        if f is None:
            continue
        left = None if end is None else max(0.0, end - time.perf_counter())
        try:
            results[i] = f.result(left)
        except TimeoutError:
            lost += 1
        except Exception:
            errors += 1
    t_end = backend.now()
    lat = np.array([np.nan if r is None else r.latency for r in results])
    ok = np.array([r is not None and r.ok for r in results], bool)
    answered = sum(r is not None for r in results)
    return LoadRun(results, lat, ok, q, answered, errors, rejected, lost, t_end - t0)
