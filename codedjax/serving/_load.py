"""Open-loop load simulated: the streaming frontend's latencies without a model.

:func:`simulate_load` computes what ``_open_loop.run_open_loop`` measures on a
:class:`StreamingServer`, for large sweeps: the same grouping (K queries in
arrival order, the group deadline), the same worker queues (``_events``: the
one model the simulated cluster runs too) and the same delay draws
(:class:`Injector`, one draw per group), in numpy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._layouts import spread_workers
from ._arrivals import arrival_times, positive
from ._checks import integer
from ._deadlines import FillDeadline
from ._deadlines import group_deadline as group_deadline_rule
from ._events import WorkerQueues, answer_times, serve_batch
from ._faults import Injector
from ._per_query import rows_are_queries
from ._policy import decode_need, decodes_first
from ._simulate import check_flag, check_simulation, decision_times

# what simulate_load needs of a code
_LOAD_MEMBERS = ("num_inputs", "num_workers", "threshold", "may_decode",
                 "decodable_from", "decodable_from_per_query")  # fmt: skip


class SimulatedLoad(NamedTuple):
    """What :func:`simulate_load` computes (numpy arrays).

    Attributes:
        latency: float [Q] seconds from each query's arrival to its answer (its
            own worker's, or the decode that gives it: zero engine overhead); a
            query without an answer counts to its group's decision.
        group: int [Q] each query's group.
        waited: float [Q] seconds from each query's arrival to the first
            evaluation offered for it (0 with dispatch on arrival for a
            systematic code; its group's fan-out otherwise).
        ok: bool [Q] the query was answered (per query: its own answer or a
            decode, ``code.decodable_queries``; all or nothing: its group's
            answers may decode, ``code.may_decode``).
        sent: float [G] each group's fan-out time (when it closed).
        decided: float [G] each group's decision time: its workers are released
            then (with ``per_query``, every query is answered by then).
        group_size: int [G] real queries per group.
        num_used: int [G] successful answers in hand at the decision (a
            ServeResult's ``mask.sum()``).
        timed_out: bool [G] the policy's deadline ended the wait.
        evaluations: int [G] evaluations that began service (answered, or
            abandoned in service at the decision).
        busy: float [G] worker-seconds of those evaluations.
        deadline: float [G] each group's deadline (seconds from its first
            query's arrival): the fixed one, or a :class:`FillDeadline`'s.
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
    deadline: np.ndarray


def _groups(a: np.ndarray, k: int, deadline):
    """(start [G], end [G], sent [G], deadline [G]) of the coding groups of
    arrivals ``a`` under the rule ``deadline(a, start)`` (``_deadlines``)."""
    starts, ends, sent, dls = [], [], [], []
    s, n = 0, len(a)
    while s < n:
        d = deadline(a, s)
        cut = int(np.searchsorted(a, a[s] + d, side="right"))
        e = min(s + k, cut)
        starts.append(s)
        ends.append(e)
        sent.append(a[e - 1] if e - s == k else a[s] + d)
        dls.append(d)
        s = e
    return (np.asarray(starts, np.int64), np.asarray(ends, np.int64),
            np.asarray(sent, np.float64), np.asarray(dls, np.float64))  # fmt: skip


def _offered(own, a, starts, size, sent) -> np.ndarray:
    """float [G, M]: when each group's evaluation is offered to each worker: at
    the group's close, or (``own`` [K, M]: dispatch on arrival for a systematic
    code) at query k's arrival for its own workers (``Code.own_workers``; a
    padding row's at the close)."""
    m = own.shape[1] if own is not None else None
    if own is None:
        return sent[:, None]
    k = own.shape[0]
    slot = np.arange(k)[None, :]
    idx = np.minimum(starts[:, None] + slot, len(a) - 1)
    at = np.where(slot < size[:, None], a[idx], sent[:, None])  # [G, K]
    mine = own.any(axis=0)
    query = own.argmax(axis=0)  # [M] the query a worker answers as it is
    return np.where(mine[None, :], at[:, query], sent[:, None]).reshape(-1, m)


@functools.lru_cache(maxsize=256)
def _sends_queries(code: Any) -> bool:
    """Whether the frontend can send ``code``'s queries to their own workers on
    arrival: each own worker's row is its query as it is and answers one query
    (not a circle code's complex or packed rows), checked as the frontend
    checks it (``_per_query.rows_are_queries``, on a probe [K, 1])."""
    own = np.asarray(code.own_workers)
    probe = ((int(code.num_inputs), 1), np.dtype(np.float32))
    return rows_are_queries(code, probe, own, int(own.sum(axis=0).max()))[0]


def _dispatch(fname: str, value: Any) -> bool:
    if value not in ("arrival", "group"):
        raise ValueError(
            f"{fname}: dispatch must be 'arrival' (a systematic code's own worker "
            f"gets each query when it arrives) or 'group' (every evaluation at "
            f"the group's fan-out), got {value!r:.80}"
        )
    return value == "arrival"


def simulate_load(
    code: Any,
    policy: Any,
    injector: Injector,
    arrivals: Sequence[float],
    *,
    group_deadline: float | FillDeadline,
    queueing: bool = True,
    first_group: int = 0,
    per_query: bool = True,
    dispatch: str = "arrival",
    shards: int = 1,
    cluster: int | None = None,
    work: float = 1.0,
) -> SimulatedLoad:
    """The streaming frontend's latencies under a load, without running a model.

    A discrete-event simulation of :class:`StreamingServer` over a
    :class:`Server` with ``code`` and ``policy``: the queries arriving at
    ``arrivals`` form groups of K in arrival order (a group closes when full, or
    its deadline after its first query: ``group_deadline``, fixed or a
    :class:`FillDeadline` that follows the arrival rate); group g's evaluations
    join the workers' FIFO queues, worker i serving it for group g's draw
    (``injector.plan``, request ``first_group + g``, as the server numbers the
    groups): a systematic code's own worker of query k when k arrives
    (``dispatch="arrival"``), every other one at the group's close. Each query is
    answered at the first moment its own answer or a decode gives it
    (``per_query``; ``_events.answer_times``), the group is decided by the policy
    from the successful answers (workers that raise or answer NaN fail at their
    time, hung ones never answer), and at the decision its queued evaluations
    are dropped and those in service abandoned. With ``queueing=False`` every
    evaluation starts when offered (idle workers). The decode and the master's
    work take no time, so the latencies are those of a zero-overhead server;
    it is the same model the simulated cluster runs with the real functions
    (``tests/test_serving_stream.py`` checks they agree).

    Args:
        code: the code (``num_inputs``, ``num_workers``, ``threshold``,
            ``may_decode``, ``decodable_from``, ``decodable_from_per_query``).
        policy: any policy whose ``decision_times`` rule needs no decode (no
            ``needs_answers``): :class:`FixedN`, :class:`FirstDecodable` (it
            decides at the first answer after which ``code.may_decode`` holds:
            the decode is taken to succeed) or :class:`Deadline`; its deadline
            counts from the group's close.
        injector: the delay and fault plan.
        arrivals: [Q] non-decreasing arrival times (seconds). Q = 0 is an empty
            load: every array of the result has length 0 (as
            :func:`simulate_latency` with ``num_requests=0``).
        group_deadline: seconds (> 0), or a :class:`FillDeadline`.
        queueing: workers serve one evaluation at a time (default True).
        first_group: the request number of the first group.
        per_query: answer each query when it can be (default True): at its own
            worker's (or first replica's) answer, or when the answers give it
            (a ParM group decodes on its own); under :class:`FirstDecodable` at
            the first such moment, under a count (:class:`FixedN`,
            :class:`Deadline`) at the decision. False: a group is answered all
            or nothing at its decision (``ok``: ``code.may_decode``).
        dispatch: ``"arrival"`` (default): a systematic code's own worker of a
            query is sent it when it arrives; ``"group"``: every evaluation at
            the group's close. The same for a code that is not systematic.
        shards: S independent copies of the code's M workers (S M workers in
            all, a layout of S coding groups): group g goes to copy g mod S
            (round robin), e.g. uncoded serving of single queries on M workers
            is ``uncoded_code(num_inputs=1)`` with ``shards=M``. The groups r S
            .. r S + S - 1 draw request ``first_group + r``'s plan of the
            ``cluster``'s workers, copy s taking the workers of row s of
            ``codedjax.Layout.placement`` (s, s + S, s + 2 S, ... when the
            copies fill the cluster; spread evenly over it otherwise: apart in
            a rack model).
        cluster: C, the workers the S copies are spread over (an int >= S M;
            default S M): a layout of S groups that leaves C - S M workers of
            its cluster idle (``codedjax.Layout.num_workers``).
        work: each evaluation's service time in units of the injector's drawn
            delay (finite, > 0; default 1): a scheme whose worker evaluates f
            more than once per request (the circle code's complex query, 2;
            ``Scheme.service_scale``) serves for that multiple of its draw.

    Returns:
        :class:`SimulatedLoad`.

    Raises:
        TypeError: a policy without a ``decision_times`` rule, or one that
            decodes the answers (``needs_answers``: :class:`Adaptive`); a rule
            that returns what is not numbers; a code without the members above;
            an injector that is not an :class:`Injector`; a policy deadline that
            is not None or a number; arrivals that are not numbers; queueing or
            per_query not a bool; a group deadline that is neither seconds nor a
            :class:`FillDeadline`; shards or cluster not an int.
        ValueError: a bad group deadline or dispatch; arrivals not [Q]
            non-decreasing, finite and >= 0 (the first offending entry named); a
            policy deadline that is NaN, infinite or negative; a rule that
            returns another shape than [R] or NaN; a policy without a deadline
            when workers can hang; shards < 1 or a cluster smaller than the
            shards' S M workers.
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
    k, m = int(code.num_inputs), int(code.num_workers)
    gd = group_deadline_rule(fname, group_deadline, k)
    a = arrival_times(fname, "arrivals", arrivals)
    first_group = integer(fname, "first_group", first_group)
    queueing = check_flag(fname, "queueing", queueing)
    per_query = check_flag(fname, "per_query", per_query)
    arrival = _dispatch(fname, dispatch)
    integer(fname, "shards", shards, minimum=1)
    nsh = int(shards)
    c = nsh * m if cluster is None else integer(fname, "cluster", cluster)
    if c < nsh * m:
        raise ValueError(
            f"{fname}: cluster must hold the shards' workers, shards x "
            f"num_workers = {nsh} x {m} = {nsh * m}, got cluster={cluster}"
        )
    scale = positive(fname, "work", work)
    starts, ends, sent, dls = _groups(a, k, gd)
    size = ends - starts
    g = len(starts)
    own = code.own_workers if hasattr(code, "own_workers") else None
    arrival = arrival and own is not None and _sends_queries(code)
    offered = _offered(own if arrival else None, a, starts, size, sent)
    offered = np.broadcast_to(offered, (g, m))
    # round r: request r's plan of the C workers, shard s on its row (one shard
    # filling the cluster: request g's plan, its columns in order)
    rounds = -(-g // nsh)
    d, f = injector.plan(first_group + np.arange(rounds), c)
    cols = spread_workers(nsh, m, c)
    delays = d[:, cols].reshape(-1, m)[:g]
    faults = f[:, cols].reshape(-1, m)[:g]
    if scale != 1.0:
        delays = delays * scale
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
    success = np.empty((g, m)) if per_query else None
    first = decodes_first(policy, code)
    need = decode_need(policy, code)
    queues = WorkerQueues((nsh, m), queueing=queueing)
    # the policy's own rule, on times from the simulation's origin (no deadline:
    # serve_batch applies it from each group's close)
    decide = functools.partial(decision_times, fname, policy, rule)
    # the shards are independent queues: groups r S .. r S + S - 1 (one per shard)
    # are served together, a round after the other
    for r0 in range(0, g, nsh):
        js = slice(r0, min(r0 + nsh, g))
        out = serve_batch(queues, slice(0, js.stop - r0), code, decide, sent[js],
                          delays[js], faults[js], dl, offered=offered[js])  # fmt: skip
        timed[js] = out.timed_out
        decided[js] = out.decided
        in_hand[js] = out.mask
        evals[js] = out.evaluations
        busy[js] = out.busy
        if per_query:
            success[js] = out.success
    used = in_hand.sum(axis=1)
    group = np.repeat(np.arange(g), size)
    slot = np.arange(len(a)) - np.repeat(starts, size)
    if per_query:  # every group's answers at once, after the queues' loop
        answer = answer_times(code, own, success, decided, first, sent, need)
        at = answer[group, slot]
        ok = np.isfinite(at)
        latency = np.where(ok, at, decided[group]) - a
    else:
        ok = np.asarray(code.may_decode(in_hand), bool).reshape(g)[group]
        latency = decided[group] - a
    if own is not None and arrival:  # each query's first offer: its own workers'
        first_offer = np.where(own[None], offered[:, None, :], np.inf).min(axis=-1)
        waited = np.maximum(first_offer[group, slot] - a, 0.0)
    else:
        waited = sent[group] - a
    return SimulatedLoad(latency, group, waited, ok, sent, decided, size, used,
                         timed, evals, busy, dls)  # fmt: skip
