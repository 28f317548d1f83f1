"""Vectorised latency Monte Carlo: what a zero-overhead server would do.

Given the injected delays and faults of R requests (one :class:`Injector` plan), the
decision time of the built-in wait policies is an order statistic of the successful
arrival times, so 1e5 requests take one sort instead of an event loop per request.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._faults import CORRUPT, HANG, NONE, Injector
from ._policy import Adaptive, Deadline, FirstDecodable, FixedN, responses_needed


class SimulatedLatency(NamedTuple):
    """Per-request outcome of :func:`simulate_latency` (numpy arrays [R]).

    Attributes:
        latency: seconds from submission to the decision (zero engine overhead).
        num_used: successful answers in hand at the decision.
        ok: whether the decode at the decision succeeds.
        timed_out: the deadline ended the wait.
        masks: bool [R, M] the answers in hand at the decision.
    """

    latency: np.ndarray
    num_used: np.ndarray
    ok: np.ndarray
    timed_out: np.ndarray
    masks: np.ndarray


def _batched_decode(code, y, masks, chunk=2048):
    """ok and predicted error of every mask, in chunks padded to a few fixed sizes
    (one compiled program per size, whatever the number of masks)."""
    oks, errs = [], []
    y = np.asarray(y)
    for s in range(0, masks.shape[0], chunk):
        mk = masks[s : s + chunk]
        b = mk.shape[0]
        size = min(chunk, max(64, 1 << (b - 1).bit_length()))
        pad = np.zeros((size, mk.shape[1]), bool)
        pad[:b] = mk
        yb = jnp.broadcast_to(jnp.asarray(y), (size,) + y.shape)
        r = jax.device_get(code.decode_batched(yb, jnp.asarray(pad), order=None))
        oks.append(np.asarray(r.ok)[:b])
        errs.append(np.asarray(r.error).reshape(size, -1).max(axis=1)[:b])
    if not oks:
        return np.zeros(0, bool), np.zeros(0)
    return np.concatenate(oks), np.concatenate(errs)


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
    as failed at their arrival time, hung workers never answer.

    Args:
        code: the code (``num_workers``, ``threshold``, ``decode_batched``).
        policy: :class:`FixedN`, :class:`Deadline`, :class:`FirstDecodable` or
            :class:`Adaptive` (others: run a :class:`Server` on a
            :class:`SimulatedCluster`).
        injector: the delay and fault plan.
        num_requests: R.
        responses: [M, ...] representative answers, used by :class:`Adaptive` (its
            predicted error depends on their size) and for ``ok``; default zeros.
        first_request: the number of the first request.
        check_ok: decode every final mask (``code.decode_batched``) to report
            ``ok``; otherwise ``ok`` is ``num_used >= code.threshold``.

    Returns:
        :class:`SimulatedLatency`.

    Raises:
        TypeError: a policy of another type.
        ValueError: a policy that asks for more answers than M.
    """
    if callable(getattr(policy, "check", None)):
        policy.check(code)
    m = int(code.num_workers)
    r_ids = np.arange(first_request, first_request + int(num_requests))
    delays, faults = injector.plan(r_ids, m)
    success = (faults == NONE) | (faults == CORRUPT)
    t_succ = np.where(success, delays, np.inf)
    srt = np.sort(t_succ, axis=1)
    t_all = np.where(faults == HANG, np.inf, delays).max(axis=1)
    dl = np.inf if policy.deadline is None else float(policy.deadline)
    y = np.zeros((m, 1), np.float32) if responses is None else np.asarray(responses)
    if isinstance(policy, FixedN):
        n = policy.num_responses or responses_needed(code)
        t_dec = np.minimum(srt[:, n - 1], t_all)
    elif isinstance(policy, Deadline):
        t_dec = t_all
    elif isinstance(policy, FirstDecodable) and getattr(code, "task", None) is not None:
        # replication: the first time every input has an answered replica
        task = np.asarray(code.task)
        first = np.stack(
            [t_succ[:, task == t].min(axis=1) for t in range(code.num_inputs)], axis=1
        )
        t_dec = np.minimum(first.max(axis=1), t_all)
    elif isinstance(policy, (FirstDecodable, Adaptive)):
        t_dec = t_all.copy()
        undecided = np.ones(len(r_ids), bool)
        need = responses_needed(code)
        if isinstance(policy, Adaptive):
            need = max(need, policy.min_responses or 0)
        for n in range(need, m + 1):
            tn = srt[:, n - 1]
            rows = np.nonzero(undecided & np.isfinite(tn) & (tn <= dl))[0]
            if rows.size == 0:
                continue
            masks = t_succ[rows] <= tn[rows, None]
            ok, err = _batched_decode(code, y, masks)
            if isinstance(policy, Adaptive):
                ok = ok & (err <= policy.budget)
            t_dec[rows[ok]] = np.minimum(tn[rows[ok]], t_all[rows[ok]])
            undecided[rows[ok]] = False
    else:
        raise TypeError(
            f"simulate_latency: policy must be FixedN, Deadline, FirstDecodable or "
            f"Adaptive, got {type(policy).__name__}; run a Server on a "
            f"SimulatedCluster for other policies"
        )
    timed_out = t_dec > dl
    t_dec = np.minimum(t_dec, dl)
    masks = t_succ <= t_dec[:, None]
    if check_ok:
        ok, _ = _batched_decode(code, y, masks)
    else:
        ok = masks.sum(axis=1) >= code.threshold
    return SimulatedLatency(t_dec, masks.sum(axis=1), ok, timed_out, masks)
