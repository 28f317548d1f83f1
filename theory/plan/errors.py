"""The predicted decode error of one responding set, and the responding sets."""

from __future__ import annotations

import itertools

import numpy as np

from .config import PlanConfig, unit_roundoff


def worker_points(m: int, kind: str) -> np.ndarray:
    if kind == "first":
        return np.cos((2.0 * np.arange(m) + 1.0) * np.pi / (2.0 * m))
    if m == 1:
        return np.zeros(1)
    return np.cos(np.arange(m) * np.pi / (m - 1))


def _bases(cfg: PlanConfig) -> tuple[np.ndarray, np.ndarray]:
    """Equilibrated T [M, D] (unit-norm columns over all M) and T_beta [K, D]."""
    d = cfg.num_coeffs
    t = np.polynomial.chebyshev.chebvander(
        worker_points(cfg.workers, cfg.points), d - 1
    )
    scale = 1.0 / np.linalg.norm(t, axis=0)
    tb = np.polynomial.chebyshev.chebvander(worker_points(cfg.inputs, "first"), d - 1)
    return t * scale, tb * scale


def decode_errors(cfg: PlanConfig, masks: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Predicted relative decode error of ChebyLS for each responding set [B, M].

    cond model: cond(U_S) u_w; decoder model: ||T_beta T_S^+||_inf u_w (float64 SVD).
    Every row of ``masks`` must hold the same number N >= D of responders.
    """
    u, tb = _bases(cfg)
    uw = unit_roundoff(cfg.worker_dtype)
    b, m = masks.shape
    n = int(masks[0].sum()) if b else 0
    out = np.empty(b)
    for lo in range(0, b, chunk):
        mk = masks[lo : lo + chunk]
        rows = np.broadcast_to(u, (mk.shape[0],) + u.shape)[mk]
        rows = rows.reshape(mk.shape[0], n, u.shape[1])
        if cfg.error_model == "cond":
            sv = np.linalg.svd(rows, compute_uv=False)
            with np.errstate(divide="ignore"):
                gain = np.where(sv[:, -1] > 0, sv[:, 0] / sv[:, -1], np.inf)
        else:
            left, sv, vt = np.linalg.svd(rows, full_matrices=False)
            with np.errstate(divide="ignore"):
                inv = np.where(sv > 0, 1.0 / sv, np.inf)
            pinv = np.einsum("bji,bj,bkj->bik", vt, inv, left)  # [B, D, N]
            a = np.einsum("kd,bdn->bkn", tb, pinv)
            gain = np.abs(a).sum(axis=2).max(axis=1)
        out[lo : lo + chunk] = gain * uw
    return out


# ----------------------------------------------------------------------------------
# responding sets: every subset, or nested Monte Carlo


def all_masks(m: int, n: int) -> np.ndarray:
    idx = np.array(list(itertools.combinations(range(m), n)), dtype=np.int64)
    masks = np.zeros((idx.shape[0], m), bool)
    np.put_along_axis(masks, idx.reshape(idx.shape[0], n), True, axis=1)
    return masks


def arrival_ranks(cfg: PlanConfig) -> np.ndarray:
    """rank[t, i]: worker i's place in trial t's uniform random arrival order."""
    rng = np.random.default_rng(cfg.seed)
    order = np.argsort(rng.random((cfg.trials, cfg.workers)), axis=1)
    return np.argsort(order, axis=1)
