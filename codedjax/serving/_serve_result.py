"""What a server returns for one request (one round): :class:`ServeResult`."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .._dtypes import unit_roundoff

_SUCCESS, _TOO_FEW = 0, 1


class ServeResult(NamedTuple):
    """What :meth:`Server.infer` returns for one request (numpy arrays).

    Attributes:
        value: [K, ...] decoded outputs in the accumulation dtype; zeros when not ok.
        ok: whether the decode succeeded (``status == 0``).
        status: the decoder's status code (``codedjax.Status``; 0 = success).
        mask: bool [M] the workers whose answers were decoded.
        order: int [M] worker indices, the decoded ones first in arrival order.
        num_used: how many answers the decoder used.
        cond: condition number of the decoding system (inf when not decodable).
        error: the decoder's predicted absolute error (inf when not ok).
        latency: seconds from the start of :meth:`Server.infer` (encoding included)
            to the decoded value; inf for a request never decided (its policy
            waits for hung workers and has no deadline: ``ok`` False,
            ``TOO_FEW_RESPONSES``).
        decided_at: seconds from the submission to the decision to decode (inf
            when never decided).
        arrival_times: [M] seconds from the submission to each worker's answer
            (failed answers included), inf for workers that never answered. A
            streamed group's submission is its close (its coded rows sent, the
            policy's deadline started): an own worker sent its query when it
            arrived may answer before it (a negative time).
        failed: bool [M] workers whose answer was a failure: an exception, a
            value of another shape or dtype than ``worker_fn``'s on a coded row,
            not an array, or not finite (left out of the mask, like a crash).
        cancelled: bool [M] workers still working when the server decoded.
        timed_out: the deadline, not the policy, ended the wait.
        responses: [M, ...] the answers given to the decoder (zeros where masked).
        suspects: bool [M] workers the decoder located as corrupted and excluded
            (a robust code, ``lagrange_code(..., decoder="robust")``); None for
            codes whose decoder does not look for corrupted answers.
        request_id: the request's number on this server.
        evaluations: how many of the M evaluations began service at a worker
            (answered, or cancelled in service; evaluations still queued when the
            request decoded are dropped and not counted); -1 when the backend
            does not count (no ``work`` method). The work the request cost.
        busy: worker-seconds its evaluations occupied the workers (nan when
            the backend does not measure it).
        failures: ``((worker, what), ...)`` why each failed worker failed, in
            arrival order: the exception it raised, the shape or dtype it
            answered instead of ``worker_fn``'s, or a non-finite value.
    """

    value: np.ndarray
    ok: bool
    status: int
    mask: np.ndarray
    order: np.ndarray
    num_used: int
    cond: float
    error: float
    latency: float
    decided_at: float
    arrival_times: np.ndarray
    failed: np.ndarray
    cancelled: np.ndarray
    timed_out: bool
    responses: np.ndarray
    suspects: np.ndarray | None
    request_id: int
    evaluations: int = -1
    busy: float = math.nan
    failures: tuple = ()

    @property
    def suspect_ids(self) -> np.ndarray:
        """int [S] ids of the workers flagged as corrupted, in increasing order
        (empty when none were, or when the decoder does not look)."""
        if self.suspects is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.suspects)


def round_result(
    res: Any,
    y: np.ndarray,
    mask: np.ndarray,
    order: np.ndarray,
    *,
    times: np.ndarray,
    failed: np.ndarray,
    failures: list,
    timed_out: bool,
    stalled: bool,
    latency: float,
    decided_at: float,
    request_id: int,
    evaluations: int,
    busy: float,
) -> ServeResult:
    """One round's :class:`ServeResult` from the decoder's result ``res`` (on the
    host) and what the engine saw: the decoded answers ``y`` [M, ...] with their
    ``mask`` and ``order``, each worker's arrival ``times`` [M] (inf: no answer),
    the ``failed`` workers and why, and the backend's work count. A decoder
    without a status or an error prediction gets the ones its ``ok`` and ``cond``
    imply. ``stalled``: the round was never decided (hung workers, no
    deadline): ``ok`` False, ``TOO_FEW_RESPONSES``, latency inf."""
    value = np.asarray(res.value)
    ok = bool(np.asarray(res.ok))
    cond = float(np.asarray(res.cond))
    status = getattr(res, "status", None)
    status = (
        int(np.asarray(status))
        if status is not None
        else (_SUCCESS if ok else _TOO_FEW)
    )
    err = getattr(res, "error", None)
    if err is not None:
        err = float(np.max(np.asarray(err)))
    elif ok:  # a decoder without an error prediction: cond * u * max |y|
        used = y[mask].astype(np.float32)
        err = cond * unit_roundoff(y.dtype) * float(np.max(np.abs(used), initial=0.0))
    else:
        err = math.inf
    suspects = getattr(res, "suspects", None)
    cancelled = ~(np.isfinite(times))
    if stalled:
        value, ok, status, err = np.zeros_like(value), False, _TOO_FEW, math.inf
        latency = decided_at = math.inf
    return ServeResult(
        value=value,
        ok=ok,
        status=status,
        mask=mask,
        order=order,
        num_used=int(np.asarray(res.num_used)),
        cond=cond,
        error=err,
        latency=latency,
        decided_at=decided_at,
        arrival_times=times.copy(),
        failed=failed.copy(),
        cancelled=cancelled,
        timed_out=timed_out,
        responses=y,
        suspects=None if suspects is None else np.asarray(suspects),
        request_id=request_id,
        evaluations=int(evaluations),
        busy=float(busy),
        failures=tuple(failures),
    )


def finish_round(engine, r, st, *, timed_out: bool, stalled: bool = False):
    """Request ``r``'s round decided now: its :class:`ServeResult` from the
    decode of its answers (``engine.decode``, kept by the engine), its workers
    cancelled and their work counted at the backend (``engine.cluster``);
    ``stalled``: the policy's answers will never come (hung workers, no
    deadline), so the round is never decided: ``ok`` False,
    ``TOO_FEW_RESPONSES``, latency inf."""
    cluster = engine.cluster
    t_dec = cluster.now()
    # round_result takes each field to the host (np.asarray, leaf by leaf:
    # a fraction of jax.device_get's host time for these few small leaves)
    res = engine.decode(r, st)
    t_end = cluster.now()
    y, mask, order, _ = r.decode_inputs()
    # cancel after decoding, outside the latency: a backend's cancel may take time
    # (Ray sends one cancellation per straggler; ThreadCluster's is bookkeeping)
    cluster.cancel(r.task)
    evaluations, busy = cluster.work(r.task)
    return round_result(
        res,
        y,
        mask,
        order,
        times=r.times,
        failed=r.failed,
        failures=r.failures,
        timed_out=timed_out,
        stalled=stalled,
        latency=t_end - r.t_round,
        decided_at=t_dec - r.t_sub,
        request_id=r.rid,
        evaluations=evaluations,
        busy=busy,
    )
