"""Vectorised latency Monte Carlo: what a zero-overhead server would do.

Given the injected delays and faults of R requests (one :class:`Injector` plan), the
decision time of a wait policy is an order statistic of the successful arrival
times, so 1e5 requests take one sort instead of an event loop per request. Each
policy states its rule itself (its ``decision_times`` method); this module builds
the arrival times and the batched decode the rule asks for.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._result import Status
from ._checks import integer
from ._faults import CORRUPT, HANG, NONE, Injector
from ._policy import ArrivalTimes


class SimulatedLatency(NamedTuple):
    """Per-request outcome of :func:`simulate_latency` (numpy arrays [R]).

    Attributes:
        latency: seconds from submission to the decision (zero engine overhead);
            inf for a request that is never decided (a worker hangs, the policy
            waits for its answer and has no deadline).
        num_used: successful answers in hand at the decision.
        ok: whether the decode at the decision succeeds; False for a request
            that is never decided.
        timed_out: the deadline ended the wait.
        masks: bool [R, M] the answers in hand at the decision (a hung worker's
            is never in hand).
        status: int32 [R] the outcome as a ``codedjax.Status`` code: ``SUCCESS``
            where ``ok``; ``TOO_FEW_RESPONSES`` for a request never decided or
            whose answers the code's structure cannot decode; with
            ``check_ok=True`` the decoder's own status otherwise.
    """

    latency: np.ndarray
    num_used: np.ndarray
    ok: np.ndarray
    timed_out: np.ndarray
    masks: np.ndarray
    status: np.ndarray


def _batched_decode(code, y, masks, chunk=2048, *, status=False):
    """ok and predicted error (and, with ``status``, the status) of every mask, in
    chunks padded to a few fixed sizes (one compiled program per size, whatever
    the number of masks)."""
    oks, errs, sts = [], [], []
    y = np.asarray(y)
    for s in range(0, masks.shape[0], chunk):
        mk = masks[s : s + chunk]
        b = mk.shape[0]
        size = min(chunk, max(64, 1 << (b - 1).bit_length()))
        pad = np.zeros((size, mk.shape[1]), bool)
        pad[:b] = mk
        yb = jnp.broadcast_to(jnp.asarray(y), (size,) + y.shape)
        r = jax.device_get(code.decode_batched(yb, jnp.asarray(pad)))
        oks.append(np.asarray(r.ok)[:b])
        errs.append(np.asarray(r.error).reshape(size, -1).max(axis=1)[:b])
        sts.append(np.asarray(r.status, np.int32)[:b])
    if not oks:
        out = np.zeros(0, bool), np.zeros(0)
        return out + (np.zeros(0, np.int32),) if status else out
    out = np.concatenate(oks), np.concatenate(errs)
    return out + (np.concatenate(sts),) if status else out


def simulate_latency(
    code: Any,
    policy: Any,
    injector: Injector,
    num_requests: int,
    *,
    responses: Any = None,
    first_request: int = 0,
    check_ok: bool = False,
) -> SimulatedLatency:
    """Decision times of ``policy`` on ``num_requests`` requests, vectorised.

    Uses the same draws as the thread and simulated clusters for request numbers
    ``first_request ...`` (``injector.plan``). Workers that raise or answer NaN count
    as failed at their arrival time, hung workers never answer. A request whose
    policy waits for an answer that never comes (a hung worker, no deadline) is
    never decided: ``ok`` False, ``status`` ``TOO_FEW_RESPONSES``, latency inf,
    as a :class:`Server` on a :class:`SimulatedCluster` returns it.

    Args:
        code: the code (``num_workers``, ``threshold``, ``decode_batched``).
        policy: a wait policy with a ``decision_times`` method (every built-in
            one: :class:`FixedN`, :class:`Deadline`, :class:`FirstDecodable`,
            :class:`Adaptive`); for others run a :class:`Server` on a
            :class:`SimulatedCluster`.
        injector: the delay and fault plan.
        num_requests: R.
        responses: [M, ...] representative answers, used for ``ok`` and by a
            policy that decides on their values (``needs_answers``:
            :class:`Adaptive`, whose predicted error depends on their size; it
            needs them); default zeros.
        first_request: the number of the first request.
        check_ok: decode every final mask (``code.decode_batched``) to report
            ``ok``; otherwise ``ok`` is whether the code's structure allows a
            decode of the final mask (``code.may_decode``: at least ``threshold``
            answers; a replica of every input for replication).

    Returns:
        :class:`SimulatedLatency`.

    Raises:
        TypeError: a policy without ``decision_times``; a num_requests or
            first_request that is not an int.
        ValueError: a policy that asks for more answers than M; a negative
            num_requests or first_request; a policy with ``needs_answers`` and no
            ``responses``.
    """
    rule = getattr(policy, "decision_times", None)
    if not callable(rule):
        raise TypeError(
            f"simulate_latency: the policy must state its rule for many requests "
            f"at once (a decision_times(times) method, as FixedN, Deadline, "
            f"FirstDecodable and Adaptive have), got {type(policy).__name__} "
            f"without one; run a Server on a SimulatedCluster to simulate it "
            f"request by request"
        )
    fname = "simulate_latency"
    if getattr(policy, "needs_answers", False) and responses is None:
        raise ValueError(
            f"{fname}: {policy!r} decides on the answers' values (its predicted "
            f"error scales with them), so it needs responses=[M, ...] "
            f"representative answers; got none"
        )
    if callable(getattr(policy, "check", None)):
        policy.check(code)
    num_requests = integer(fname, "num_requests", num_requests)
    first_request = integer(fname, "first_request", first_request)
    m = int(code.num_workers)
    r_ids = np.arange(first_request, first_request + num_requests)
    delays, faults = injector.plan(r_ids, m)
    success = (faults == NONE) | (faults == CORRUPT)
    t_succ = np.where(success, delays, np.inf)
    t_all = np.where(faults == HANG, np.inf, delays).max(axis=1)
    dl = np.inf if policy.deadline is None else float(policy.deadline)
    y = np.zeros((m, 1), np.float32) if responses is None else np.asarray(responses)
    times = ArrivalTimes(
        code, t_succ, t_all, policy.deadline, lambda mk: _batched_decode(code, y, mk)
    )
    t_dec = np.asarray(rule(times), np.float64)
    timed_out = t_dec > dl
    t_dec = np.minimum(t_dec, dl)
    decided = np.isfinite(t_dec)
    masks = np.isfinite(t_succ) & (t_succ <= t_dec[:, None])
    status = np.full(t_dec.shape, int(Status.TOO_FEW_RESPONSES), np.int32)
    if check_ok:
        ok, _, st = _batched_decode(code, y, masks, status=True)
        status = np.where(decided, st, status).astype(np.int32)
    else:
        ok = np.asarray(code.may_decode(masks), bool)
        status[ok] = int(Status.SUCCESS)
    ok = ok & decided
    status[~decided] = int(Status.TOO_FEW_RESPONSES)
    return SimulatedLatency(t_dec, masks.sum(axis=1), ok, timed_out, masks, status)
