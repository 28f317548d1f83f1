"""Open-loop load: arrival processes, a load generator, a discrete-event simulator.

* :func:`poisson_arrivals` and :func:`bursty_arrivals` (a two-state
  Markov-modulated Poisson process) draw arrival times, bounded in count and in
  time.
* :func:`run_open_loop` submits queries to a :class:`StreamingServer` at those
  times (open loop: it never waits for an answer before the next arrival) and
  accounts for every query: answered (ok or not, with a status), failed with an
  error, refused (:class:`QueueFull`), or lost (none: a query that has neither an
  answer nor an error by the end is counted, never dropped silently).
* :func:`simulate_load` computes the same frontend's latencies for large sweeps
  without running a model: the same grouping (K queries in arrival order, the group
  deadline), the same worker queues (one evaluation at a time per worker, the
  queued evaluations of a decoded group dropped, the one in service abandoned) and
  the same delay draws (:class:`Injector`, one draw per group), in numpy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ._checks import integer, number
from ._faults import CORRUPT, HANG, NONE, Injector
from ._policy import ArrivalTimes
from ._simulate import check_flag, check_simulation, decision_times
from ._stream import QueueFull, StreamingServer

# what simulate_load needs of a code
_LOAD_MEMBERS = ("num_inputs", "num_workers", "threshold", "may_decode",
                 "decodable_from")  # fmt: skip


def _rate(fname: str, name: str, value: Any) -> float:
    return number(fname, name, value, positive=True)


def _count(fname: str, count: Any) -> int:
    return integer(fname, "count", count)


def _times(fname: str, name: str, value: Any, count: int | None = None) -> np.ndarray:
    """float64 [Q] finite non-decreasing times >= 0 (Q = ``count`` when given), or
    a clear error naming ``fname``, ``name`` and the first offending entry."""
    shape = "[Q]" if count is None else f"[Q] = [{count}] (one per query)"
    what = f"{shape} finite non-decreasing times in seconds >= 0"
    try:
        raw = np.asarray(value)
    except ValueError:  # ragged nesting
        raise ValueError(
            f"{fname}: {name} must be {what}, got a ragged {type(value).__name__}"
        ) from None
    if raw.dtype.kind not in "iuf":
        came = "None" if value is None else f"dtype {raw.dtype} {raw.shape}"
        raise TypeError(f"{fname}: {name} must be {what}, got {came}")
    t = raw.astype(np.float64)
    if t.ndim != 1 or (count is not None and t.size != count):
        raise ValueError(f"{fname}: {name} must be {what}, got shape {t.shape}")
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{fname}: {name} must be finite times >= 0 (seconds), got "
            f"{name}[{i}] = {raw[i].item()!r}"
        )
    down = np.flatnonzero(np.diff(t) < 0)
    if down.size:
        i = int(down[0])
        raise ValueError(
            f"{fname}: {name} must be non-decreasing (arrival order), got "
            f"{name}[{i}] = {raw[i].item()!r} > {name}[{i + 1}] = {raw[i + 1].item()!r}"
        )
    return t


def _bound(fname: str, times: np.ndarray, max_time: Any) -> np.ndarray:
    if max_time is None:
        return times
    return times[times <= _rate(fname, "max_time", max_time)]


def poisson_arrivals(
    rate: float, count: int, *, seed: int = 0, max_time: float | None = None
) -> np.ndarray:
    """Arrival times of a Poisson process: ``count`` of them at ``rate`` per second.

    Args:
        rate: queries per second (finite, > 0).
        count: how many arrivals (>= 0).
        seed: the seed of the exponential gaps.
        max_time: optional: only the arrivals at or before this many seconds.

    Returns:
        float64 [count] (fewer with ``max_time``) increasing times in seconds from
        0 (the first gap included).

    Raises:
        ValueError: a rate (or max_time) that is not finite and > 0, count < 0.

    Examples:
        >>> from codedjax.serving import poisson_arrivals
        >>> t = poisson_arrivals(1000.0, 10_000, seed=1)
        >>> round(len(t) / t[-1])  # about the rate
        995
    """
    fname = "poisson_arrivals"
    lam = _rate(fname, "rate", rate)
    n = _count(fname, count)
    seed = integer(fname, "seed", seed)
    gaps = np.random.default_rng([seed, 1]).exponential(1.0 / lam, n)
    return _bound(fname, np.cumsum(gaps), max_time)


def bursty_arrivals(
    rate: float,
    count: int,
    *,
    peak: float = 3.0,
    duty: float = 0.25,
    burst: float = 0.05,
    seed: int = 0,
    max_time: float | None = None,
) -> np.ndarray:
    """Arrival times of a two-state Markov-modulated Poisson process (bursts).

    The process alternates between a burst state, in which queries arrive at
    ``peak * rate`` per second, and a quiet state at the rate that keeps the mean
    at ``rate``; a burst lasts Exp(mean ``burst``) seconds and bursts take a
    fraction ``duty`` of the time (quiet spells last Exp(mean ``burst * (1 -
    duty) / duty``)). The process starts in its stationary state.

    Args:
        rate: the mean queries per second (finite, > 0).
        count: how many arrivals (>= 0).
        peak: the burst rate as a multiple of ``rate`` (>= 1, ``peak * duty <=
            1`` so the quiet rate is not negative).
        duty: the fraction of the time in bursts (in (0, 1)).
        burst: the mean burst length in seconds (> 0).
        seed: the seed of the draws.
        max_time: optional: only the arrivals at or before this many seconds.

    Returns:
        float64 [count] (fewer with ``max_time``) increasing times in seconds.

    Raises:
        ValueError: parameters outside the ranges above.
    """
    fname = "bursty_arrivals"
    lam = _rate(fname, "rate", rate)
    n = _count(fname, count)
    pk = _rate(fname, "peak", peak)
    q = _rate(fname, "duty", duty)
    b = _rate(fname, "burst", burst)
    if pk < 1 or q >= 1 or pk * q > 1:
        raise ValueError(
            f"{fname}: need peak >= 1, 0 < duty < 1 and peak * duty <= 1 (the "
            f"quiet rate (1 - peak duty) / (1 - duty) x rate must be >= 0), got "
            f"peak={peak!r}, duty={duty!r}"
        )
    rates = (lam * (1 - pk * q) / (1 - q), lam * pk)  # quiet, burst
    means = (b * (1 - q) / q, b)
    rng = np.random.default_rng([integer(fname, "seed", seed), 2])
    state = int(rng.random() < q)
    t, out = 0.0, []
    got = 0
    while got < n:
        length = rng.exponential(means[state])
        lam_s = rates[state]
        if lam_s > 0:
            k = rng.poisson(lam_s * length)
            if k:
                pts = np.sort(t + length * rng.random(k))
                out.append(pts[: n - got])
                got += min(k, n - got)
        t += length
        state = 1 - state
    times = np.concatenate(out) if out else np.zeros(0)
    return _bound(fname, times, max_time)


# ------------------------------------------------------------------ the generator


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
    t = _times(fname, "times", times, n)
    if max_seconds is not None:
        t = t[t <= _rate(fname, "max_seconds", max_seconds)]
    if timeout is not None:
        timeout = _rate(fname, "timeout", timeout)
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


# ------------------------------------------------------------------ the simulator


class SimulatedLoad(NamedTuple):
    """What :func:`simulate_load` computes (numpy arrays).

    Attributes:
        latency: float [Q] seconds from each query's arrival to its group's
            decision (zero engine overhead).
        group: int [Q] each query's group.
        waited: float [Q] seconds from each query's arrival to its group's
            fan-out.
        ok: bool [Q] its group's answers can decode (``code.may_decode``).
        sent: float [G] each group's fan-out time.
        decided: float [G] each group's decision time.
        group_size: int [G] real queries per group.
        num_used: int [G] successful answers in hand at the decision (a
            ServeResult's ``mask.sum()``).
        timed_out: bool [G] the policy's deadline ended the wait.
        evaluations: int [G] evaluations that began service (answered, or
            abandoned in service at the decision).
        busy: float [G] worker-seconds of those evaluations.
    """

    latency: np.ndarray
    group: np.ndarray
    waited: np.ndarray
    ok: np.ndarray
    sent: np.ndarray
    decided: np.ndarray
    group_size: np.ndarray
    num_used: np.ndarray
    timed_out: np.ndarray
    evaluations: np.ndarray
    busy: np.ndarray


def _groups(a: np.ndarray, k: int, deadline: float):
    """(start [G], end [G], sent [G]) of the coding groups of arrivals ``a``."""
    starts, ends, sent = [], [], []
    s, n = 0, len(a)
    while s < n:
        cut = int(np.searchsorted(a, a[s] + deadline, side="right"))
        e = min(s + k, cut)
        starts.append(s)
        ends.append(e)
        sent.append(a[e - 1] if e - s == k else a[s] + deadline)
        s = e
    return (np.asarray(starts, np.int64), np.asarray(ends, np.int64),
            np.asarray(sent, np.float64))  # fmt: skip


def simulate_load(
    code: Any,
    policy: Any,
    injector: Injector,
    arrivals: Sequence[float],
    *,
    group_deadline: float,
    queueing: bool = True,
    first_group: int = 0,
    per_query: bool = False,
    shards: int = 1,
) -> SimulatedLoad:
    """The streaming frontend's latencies under a load, without running a model.

    A discrete-event simulation of :class:`StreamingServer` over a
    :class:`Server` with ``code`` and ``policy``: the queries arriving at
    ``arrivals`` form groups of K in arrival order (a group is sent when full, or
    ``group_deadline`` after its first query); group g's M evaluations join the
    workers' FIFO queues at its fan-out, worker i serving it for group g's draw
    (``injector.plan``, request ``first_group + g``, as the server numbers the
    groups); the policy decides from the successful answers (workers that raise or
    answer NaN fail at their time, hung ones never answer); at the decision the
    group's queued evaluations are dropped and those in service abandoned. With
    ``queueing=False`` every evaluation starts at its fan-out (idle workers). The
    decode and the master's work take no time, so the latencies are those of a
    zero-overhead server; it is the same model the simulated cluster runs with
    the real functions (``tests/test_serving_stream.py`` checks they agree).

    Args:
        code: the code (``num_inputs``, ``num_workers``, ``threshold``,
            ``may_decode``, ``decodable_from``).
        policy: any policy whose ``decision_times`` rule needs no decode (no
            ``needs_answers``): :class:`FixedN`, :class:`FirstDecodable` (it
            decides at the first answer after which ``code.may_decode`` holds:
            the decode is taken to succeed) or :class:`Deadline`; its deadline
            counts from the fan-out.
        injector: the delay and fault plan.
        arrivals: [Q] non-decreasing arrival times (seconds). Q = 0 is an empty
            load: every array of the result has length 0 (as
            :func:`simulate_latency` with ``num_requests=0``).
        group_deadline: seconds (> 0).
        queueing: workers serve one evaluation at a time (default True).
        first_group: the request number of the first group.
        per_query: answer each query at its first successful replica instead of
            at its group's decision (a code with a replica layout ``task``:
            replication and uncoded serving; the workers are still released at
            the group's decision). What replication would gain with a frontend
            that answers queries one by one; the :class:`StreamingServer` answers
            a group together.
        shards: S independent copies of the code's M workers (S M workers in
            all): group g goes to copy g mod S (round robin), e.g. uncoded
            serving of single queries on M workers is
            ``uncoded_code(num_inputs=1)`` with ``shards=M``. The groups r S ..
            r S + S - 1 draw request ``first_group + r``'s plan of the S M
            workers, copy s taking workers s, s + S, s + 2 S, ... (a copy's
            workers spread over the cluster: apart in a rack model).

    Returns:
        :class:`SimulatedLoad`.

    Raises:
        TypeError: a policy without a ``decision_times`` rule, or one that
            decodes the answers (``needs_answers``: :class:`Adaptive`); a rule
            that returns what is not numbers; a code without the members above;
            an injector that is not an :class:`Injector`; a policy deadline that
            is not None or a number; arrivals that are not numbers; queueing or
            per_query not a bool.
        ValueError: a bad group deadline; arrivals not [Q] non-decreasing, finite
            and >= 0 (the first offending entry named); a policy deadline that is
            NaN, infinite or negative; a rule that returns another shape than
            [R] or NaN; a policy without a deadline when workers can hang.
    """
    fname = "simulate_load"
    if getattr(policy, "needs_answers", False):
        raise TypeError(
            f"{fname}: the policy must state its rule for many requests at once "
            f"without decoding answers (a decision_times(times) method and no "
            f"needs_answers, as FixedN, FirstDecodable and Deadline), got "
            f"{type(policy).__name__}; serve on a SimulatedCluster through a "
            f"StreamingServer for others"
        )
    rule, dl = check_simulation(fname, code, policy, injector, _LOAD_MEMBERS)
    gd = _rate(fname, "group_deadline", group_deadline)
    a = _times(fname, "arrivals", arrivals)
    first_group = integer(fname, "first_group", first_group)
    queueing = check_flag(fname, "queueing", queueing)
    per_query = check_flag(fname, "per_query", per_query)
    k, m = int(code.num_inputs), int(code.num_workers)
    task = getattr(code, "task", None)
    if per_query and task is None:
        raise ValueError(
            f"{fname}: per_query needs a code with a replica layout (task: the "
            f"input of each worker), got {type(code).__name__}"
        )
    integer(fname, "shards", shards, minimum=1)
    starts, ends, sent = _groups(a, k, gd)
    g = len(starts)
    nsh = int(shards)
    if nsh == 1:
        delays, faults = injector.plan(first_group + np.arange(g), m)
    else:  # round r: request r's plan of the S M workers, shard s on s, s + S, ...
        rounds = -(-g // nsh)
        d, f = injector.plan(first_group + np.arange(rounds), nsh * m)
        delays = d.reshape(rounds, m, nsh).transpose(0, 2, 1).reshape(-1, m)[:g]
        faults = f.reshape(rounds, m, nsh).transpose(0, 2, 1).reshape(-1, m)[:g]
    success = (faults == NONE) | (faults == CORRUPT)
    hang = faults == HANG
    can_hang = "hang" in injector.fault_kinds or any(
        kind == "hang" for _, kind in injector.failed_workers
    )
    if can_hang and math.isinf(dl):
        raise ValueError(
            f"{fname}: workers can hang (the injector's faults) and the policy has "
            f"no deadline: a group would wait forever; give the policy a deadline"
        )
    decided = np.empty(g)
    timed = np.zeros(g, bool)
    evals = np.empty(g, np.int64)
    busy = np.empty(g)
    in_hand = np.empty((g, m), bool)
    first = np.empty((g, k)) if per_query else None
    free = np.full((nsh, m), -math.inf)
    if per_query:  # the workers sorted by query, where each query's run starts
        perm = np.argsort(task, kind="stable")
        cuts = np.searchsorted(np.asarray(task)[perm], np.arange(k))
    # the shards are independent queues: groups r S .. r S + S - 1 (one per shard)
    # are computed together, in lockstep
    for r0 in range(0, g, nsh):
        js = np.arange(r0, min(r0 + nsh, g))
        b = len(js)
        d = sent[js][:, None]
        start = np.maximum(d, free[:b]) if queueing else np.broadcast_to(d, (b, m))
        done = np.where(hang[js], math.inf, start + delays[js])
        t_ok = np.where(success[js], done, math.inf)
        t_all = done.max(axis=1)
        # the policy's own rule, on times from the simulation's origin (the
        # deadline is applied below, from each group's fan-out)
        c = decision_times(fname, policy, rule, ArrivalTimes(code, t_ok, t_all, None))
        c = np.minimum(c, t_all)
        late = c > d[:, 0] + dl
        c = np.where(late, d[:, 0] + dl, c)
        timed[js] = late
        decided[js] = c
        mask = t_ok <= c[:, None]
        if per_query:
            fq = np.minimum.reduceat(t_ok[:, perm], cuts, axis=1)
            first[js] = np.minimum(fq, c[:, None])
        in_hand[js] = mask
        began = start < c[:, None]
        end = np.minimum(done, c[:, None])
        evals[js] = began.sum(axis=1)
        busy[js] = np.where(began, end - start, 0.0).sum(axis=1)
        if queueing:
            free[:b] = np.where(began, end, free[:b])
    used = in_hand.sum(axis=1)
    okg = np.asarray(code.may_decode(in_hand), bool).reshape(g)
    size = ends - starts
    group = np.repeat(np.arange(g), size)
    if per_query:
        slot = np.arange(len(a)) - np.repeat(starts, size)
        latency = first[group, slot] - a
    else:
        latency = decided[group] - a
    waited = sent[group] - a
    return SimulatedLoad(latency, group, waited, okg[group], sent, decided, size,
                         used, timed, evals, busy)  # fmt: skip
