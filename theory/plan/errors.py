"""The predicted decode error of each responding set, and the responding sets.

Three error models, all per unit of the largest answer among the responders
(``max_{i in S} |y_i|``):

- ``decoder`` (default): the decoder's own prediction. Each trial is one request: a
  polynomial of degree < D with i.i.d. standard normal coefficients in the
  equilibrated Chebyshev basis (its answers at the M workers are an isotropic
  Gaussian in the code's range), evaluated in float64, rounded to the worker dtype,
  and decoded by the library's ChebyLS code (:func:`codedjax.lagrange_code`) on the
  trial's mask; the error is ``DecodeResult.error``, the same number a served
  decode reports. The actual error of the same decode against the float64
  polynomial is returned next to it.
- ``cond``: cond(U_S) u_w, the first-order model of ``docs/theory.md`` section 9;
  the proven bounds of :mod:`codedjax.bounds` bound exactly this cond.
- ``rowsum``: ||T_beta T_S^+||_inf u_w, every answer off by up to u_w relative and
  row k of the decoding matrix adding them up (a worst case, no probability).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from .config import ERROR_MODELS, PlanConfig, unit_roundoff

__all__ = [
    "ERROR_MODELS",
    "all_masks",
    "arrival_ranks",
    "decode_errors",
    "decoder_errors",
    "request_answers",
    "worker_points",
]

_CHUNK = 2048  # masks per decode call: one compiled program for every N


def worker_points(m: int, kind: str) -> np.ndarray:
    """The M worker points of a kind (``codedjax.chebyshev_points``), float64."""
    with jax.enable_x64(True):
        x = cj.chebyshev_points(m, kind=1 if kind == "first" else 2, dtype=jnp.float64)
        return np.asarray(x, np.float64)


def _bases(cfg: PlanConfig) -> tuple[np.ndarray, np.ndarray]:
    """Equilibrated T [M, D] (unit-norm columns over all M) and T_beta [K, D]."""
    d = cfg.num_coeffs
    t = np.polynomial.chebyshev.chebvander(
        worker_points(cfg.workers, cfg.points), d - 1
    )
    scale = 1.0 / np.linalg.norm(t, axis=0)
    tb = np.polynomial.chebyshev.chebvander(worker_points(cfg.inputs, "first"), d - 1)
    return t * scale, tb * scale


def request_answers(
    cfg: PlanConfig, count: int, *, seed: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The decoder model's requests: ``count`` random polynomials of degree < D.

    Each has i.i.d. standard normal coefficients in the equilibrated Chebyshev basis
    (so its answers at the M workers are an isotropic Gaussian in the code's range).

    Returns:
      ``(answers [count, M], values [count, K])`` in float64: the polynomial at the
      worker points and at the K first-kind data points.
    """
    u, tb = _bases(cfg)
    rng = np.random.default_rng(cfg.seed + 2 if seed is None else seed)
    coef = rng.standard_normal((count, u.shape[1]))
    return coef @ u.T, coef @ tb.T


def decoder_errors(
    cfg: PlanConfig, masks: np.ndarray, *, seed: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ChebyLS decoder's predicted and actual relative errors, per mask.

    Args:
      cfg: the plan (M, K, d, worker dtype, point kind).
      masks: bool [B, M] responding sets.
      seed: of the requests' polynomials (:func:`request_answers`, default
        ``cfg.seed + 2``); mask b is decoded on the b-th request.

    Returns:
      ``(predicted, actual)`` [B] float64: ``DecodeResult.error`` and
      ``max_k |value_k - f(beta_k)|``, both over ``max_{i in S} |y_i|``; ``inf``
      for a decode that is not ``ok``.
    """
    b, m = masks.shape
    y64, truth = request_answers(cfg, b, seed=seed)  # [B, M], [B, K] float64
    pred, act = np.empty(b), np.empty(b)
    x64 = cfg.worker_dtype == "float64"
    with jax.enable_x64(x64):
        dtype = jnp.dtype(cfg.worker_dtype)
        code = cj.lagrange_code(
            num_inputs=cfg.inputs,
            num_workers=m,
            degree=cfg.degree,
            kind=1 if cfg.points == "first" else 2,
        )
        for lo in range(0, b, _CHUNK):
            hi = min(lo + _CHUNK, b)
            pad = _CHUNK - (hi - lo)
            mk = np.concatenate([masks[lo:hi], np.repeat(masks[:1], pad, axis=0)])
            yy = np.concatenate([y64[lo:hi], np.repeat(y64[:1], pad, axis=0)])
            yw = jnp.asarray(yy[..., None]).astype(dtype)  # the workers' answers
            r = code.decode_batched(yw, jnp.asarray(mk))
            size = np.max(
                np.where(mk, np.abs(np.asarray(yw[..., 0], np.float64)), 0.0), axis=1
            )
            size = np.where(size > 0, size, 1.0)[: hi - lo]
            ok = np.asarray(r.ok)[: hi - lo]
            err = np.asarray(r.error, np.float64)[: hi - lo]
            val = np.asarray(r.value, np.float64)[: hi - lo, :, 0]
            diff = np.abs(val - truth[lo:hi]).max(axis=1)
            pred[lo:hi] = np.where(ok, err / size, np.inf)
            act[lo:hi] = np.where(ok, diff / size, np.inf)
    return pred, act


def decode_errors(cfg: PlanConfig, masks: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Predicted relative decode error of ChebyLS for each responding set [B, M].

    decoder model: :func:`decoder_errors` (``DecodeResult.error``); cond model:
    cond(U_S) u_w; rowsum model: ||T_beta T_S^+||_inf u_w (float64 SVD). Every row
    of ``masks`` must hold the same number N >= D of responders for the cond and
    rowsum models.
    """
    if cfg.error_model == "decoder":
        return decoder_errors(cfg, masks)[0]
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
    """Every N-subset of M workers, bool [C(M, N), M]."""
    idx = np.array(list(itertools.combinations(range(m), n)), dtype=np.int64)
    masks = np.zeros((idx.shape[0], m), bool)
    np.put_along_axis(masks, idx.reshape(idx.shape[0], n), True, axis=1)
    return masks


def arrival_ranks(cfg: PlanConfig) -> np.ndarray:
    """rank[t, i]: worker i's place in trial t's uniform random arrival order."""
    rng = np.random.default_rng(cfg.seed)
    order = np.argsort(rng.random((cfg.trials, cfg.workers)), axis=1)
    return np.argsort(order, axis=1)
