"""Open-loop load: a load generator and a discrete-event simulator.

* :func:`run_open_loop` submits queries to a :class:`StreamingServer` at given
  arrival times (``_arrivals``: :func:`poisson_arrivals`, :func:`bursty_arrivals`;
  open loop: it never waits for an answer before the next arrival) and accounts
  for every query: answered (ok or not, with a status), failed with an error,
  refused (:class:`QueueFull`), or lost (none: a query that has neither an answer
  nor an error by the end is counted, never dropped silently).
* :func:`simulate_load` computes the same frontend's latencies for large sweeps
  without running a model: the same grouping (K queries in arrival order, the
  group deadline), the same worker queues (``_events``: the one model the
  simulated cluster runs too) and the same delay draws (:class:`Injector`, one
  draw per group), in numpy.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ._arrivals import arrival_times, positive
from ._checks import integer
from ._events import WorkerQueues, serve_batch
from ._faults import Injector
from ._simulate import check_flag, check_simulation, decision_times
from ._stream import QueueFull, StreamingServer

# what simulate_load needs of a code
_LOAD_MEMBERS = ("num_inputs", "num_workers", "threshold", "may_decode",
                 "decodable_from")  # fmt: skip


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
    gd = positive(fname, "group_deadline", group_deadline)
    a = arrival_times(fname, "arrivals", arrivals)
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
    queues = WorkerQueues((nsh, m), queueing=queueing)
    # the policy's own rule, on times from the simulation's origin (no deadline:
    # serve_batch applies it from each group's fan-out)
    decide = functools.partial(decision_times, fname, policy, rule)
    if per_query:  # the workers sorted by query, where each query's run starts
        perm = np.argsort(task, kind="stable")
        cuts = np.searchsorted(np.asarray(task)[perm], np.arange(k))
    # the shards are independent queues: groups r S .. r S + S - 1 (one per shard)
    # are served together, a round after the other
    for r0 in range(0, g, nsh):
        js = slice(r0, min(r0 + nsh, g))
        out = serve_batch(queues, slice(0, js.stop - r0), code, decide, sent[js],
                          delays[js], faults[js], dl)  # fmt: skip
        timed[js] = out.timed_out
        decided[js] = out.decided
        in_hand[js] = out.mask
        evals[js] = out.evaluations
        busy[js] = out.busy
        if per_query:
            fq = np.minimum.reduceat(out.success[:, perm], cuts, axis=1)
            first[js] = np.minimum(fq, out.decided[:, None])
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
