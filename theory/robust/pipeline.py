"""The corrupted-worker experiment: every setting, both codes, every locator."""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

from .answers import answers
from .config import RobustConfig
from .locators import (
    approxifer_locate,
    berrut_denominator,
    leverages,
    loo_locate,
    ml_located,
)

__all__ = ["RobustSummary", "run_berrut", "run_lagrange", "run_robust"]


def _cases(cfg, rng, y, masks):
    """(count, size, answers, corrupted mask) for every setting of the experiment:
    clean, each count at 1 x RMS, then one corrupted worker at each size."""
    settings = [(0, 0.0)] + [(c, 1.0) for c in cfg.counts]
    settings += [(1, s) for s in cfg.sizes if (1, s) not in settings]
    for count, size in settings:
        if count:
            yc, bad = _corrupt(rng, y, masks, count, size)
        else:
            yc, bad = y, np.zeros_like(masks)
        yield count, size, yc, bad


def _corrupt(rng, y, masks, count, size):
    """Add +-size x RMS(answers of the responders) to ``count`` random responders."""
    b, m = y.shape
    bad = np.zeros((b, m), bool)
    yc = y.copy()
    rms = np.sqrt(np.sum(np.where(masks, y * y, 0.0), axis=1) / masks.sum(axis=1))
    for i in range(b):
        idx = rng.choice(np.flatnonzero(masks[i]), size=count, replace=False)
        bad[i, idx] = True
        yc[i, idx] += rng.choice([-1.0, 1.0], size=count) * size * rms[i]
    return yc, bad


def _chunked(fn, *arrays, chunk=250):
    parts = [
        fn(*(a[i : i + chunk] for a in arrays))
        for i in range(0, arrays[0].shape[0], chunk)
    ]
    return jax.tree_util.tree_map(lambda *p: np.concatenate(p), *parts)


def _err(value, truth):
    return np.abs(np.asarray(value, np.float64) - truth).max(axis=1)


def _rates(sus, bad, ok, err, err_clean, status, lev=None, cut=0.9) -> dict:
    exact = np.all(sus == bad, axis=1)
    covered = np.all(~bad | sus, axis=1)
    good = ok & (err_clean > 0)
    ratio = err[good] / err_clean[good]
    out = {
        "located": float(exact.mean()),
        "all_corrupted_flagged": float(covered.mean()),
        "clean_flagged": float(np.mean(np.any(sus & ~bad, axis=1))),
        "undecidable": float(np.mean(status == int(cj.Status.UNDECIDABLE))),
        "ok": float(ok.mean()),
        "error_ratio_median": float(np.median(ratio)) if ratio.size else float("nan"),
        "error_median_over_clean_median": float(
            np.median(err[ok]) / np.median(err_clean)
        )
        if ok.any()
        else float("nan"),
    }
    if lev is not None and bad.any():
        low = np.all(~bad | (lev < cut), axis=1)  # every corrupted worker below cut
        out["share_below_cut"] = float(low.mean())
        out["located_below_cut"] = float(exact[low].mean()) if low.any() else 0.0
    return out


# ------------------------------------------------------------------ Lagrange


def _robust_decoder(cfg: RobustConfig, alpha, beta, d: int, *, per_answer: bool):
    """jit(vmap) of the robust decoder of bf16 answers over requests: called as
    ``f(y, masks, noise_sd)`` with a level per answer, else ``f(y, masks)``."""

    def one(yy, mk, sd=None):
        return cj.robust_decode(
            yy, mk, alpha, beta, num_coeffs=d, max_corrupted=cfg.max_corrupted,
            worker_dtype=jnp.bfloat16, false_alarm=cfg.false_alarm, noise_sd=sd,
        )  # fmt: skip

    return jax.jit(jax.vmap(one if per_answer else (lambda yy, mk: one(yy, mk))))


def run_lagrange(cfg: RobustConfig, bar=None) -> dict:
    k, m, n = cfg.num_inputs, cfg.num_workers, cfg.num_responses
    d = cj.recovery_threshold(k, cfg.cross_layers + 1)
    alpha, beta, y, truth, sd = answers(cfg, "lagrange")
    masks = np.asarray(
        cj.sample_masks(
            jax.random.fold_in(jax.random.key(cfg.seed), 11),
            num_workers=m, num_responses=n, shape=(cfg.num_requests,),
        )
    )  # fmt: skip
    robust = _robust_decoder(cfg, alpha, beta, d, per_answer=True)
    dtype_only = _robust_decoder(cfg, alpha, beta, d, per_answer=False)
    plain = jax.jit(
        jax.vmap(lambda yy, mk: cj.chebyls_decode(yy, mk, alpha, beta, num_coeffs=d))
    )
    clean = _chunked(plain, y.astype(jnp.bfloat16), masks)
    lev = leverages(alpha, masks, d)
    err_clean = _err(clean.value, truth)
    rng = np.random.default_rng(cfg.seed)
    rows = []
    for count, size, yc, bad in _cases(cfg, rng, y, masks):
        # the corrupted answers are bf16 answers plus an error: decode them as
        # float32 numbers with the workers' dtype given explicitly
        row = {"corrupted": count, "size_x_rms": size}
        if count and cfg.oracle:
            row["ml_located"] = ml_located(alpha, masks, yc, sd, bad, d)
        for name in ("rounding", "dtype"):
            if name == "rounding" and cfg.rounding_model:
                r = _chunked(robust, yc, masks, sd)
            elif name == "rounding":
                continue
            elif cfg.dtype_model:
                r = _chunked(dtype_only, yc, masks)
            else:
                continue
            row[name] = _rates(
                np.asarray(r.suspects), bad, np.asarray(r.ok), _err(r.value, truth),
                err_clean, np.asarray(r.status), lev, cfg.leverage_cut,
            )  # fmt: skip
        rows.append(row)
        if bar is not None:
            bar.update(1)
    return {"D": d, "rows": rows}


# ------------------------------------------------------------------ Berrut


def run_berrut(cfg: RobustConfig, bar=None) -> dict:
    m, n = cfg.num_workers, cfg.num_responses
    alpha, beta, y, truth, sd = answers(cfg, "berrut")
    # the rational view (berrut_denominator): the robust Lagrange decoder on
    # y B(z)^d, noise levels scaled alike, values divided by B(beta)^d
    deg = cfg.cross_layers + 1
    d = cj.recovery_threshold(cfg.num_inputs, deg)
    bz = berrut_denominator(beta, alpha) ** deg
    bb = berrut_denominator(beta, beta) ** deg
    rational = _robust_decoder(cfg, alpha, beta, d, per_answer=True)
    sd_t = (sd * np.abs(bz)[None, :]).astype(np.float32)
    a64 = np.asarray(alpha, np.float64)
    masks = np.asarray(
        cj.sample_masks(
            jax.random.fold_in(jax.random.key(cfg.seed), 12),
            num_workers=m, num_responses=n, shape=(cfg.num_requests,),
        )
    )  # fmt: skip
    decode = jax.jit(
        jax.vmap(lambda yy, mk: cj.berrut_decode(yy, mk, alpha, beta).value)
    )
    err_clean = _err(decode(jnp.asarray(y), jnp.asarray(masks)), truth)
    tau = NormalDist().inv_cdf(1.0 - cfg.false_alarm / (2.0 * m))
    rng = np.random.default_rng(cfg.seed + 1)
    deg_p = n - 2 * cfg.max_corrupted - 1 - 1  # two spare equations
    rows = []
    for count, size, yc, bad in _cases(cfg, rng, y, masks):
        out = {}
        r = _chunked(rational, (yc * bz[None, :]).astype(np.float32), masks, sd_t)
        value = np.asarray(r.value, np.float64) / bb[None, :]
        out["rational"] = _rates(
            np.asarray(r.suspects), bad, np.asarray(r.ok), _err(value, truth),
            err_clean, np.asarray(r.status),
        )  # fmt: skip
        for name in ("loo_berrut", "approxifer"):
            sus = np.zeros_like(masks)
            for i in range(cfg.num_requests):
                idx = np.flatnonzero(masks[i])  # alpha is sorted (second kind)
                order = np.argsort(a64[idx])
                idx = idx[order]
                yy = yc[i, idx].astype(np.float64)
                if name == "loo_berrut":
                    f = loo_locate(a64[idx], yy, cfg.max_corrupted, tau)
                else:
                    f = approxifer_locate(a64[idx], yy, cfg.max_corrupted, deg_p)
                sus[i, idx[f]] = True
            kept = masks & ~sus
            err = _err(decode(jnp.asarray(yc), jnp.asarray(kept)), truth)
            ok = np.ones(cfg.num_requests, bool)
            status = np.zeros(cfg.num_requests, np.int32)
            out[name] = _rates(sus, bad, ok, err, err_clean, status)
        rows.append({"corrupted": count, "size_x_rms": size, **out})
        if bar is not None:
            bar.update(1)
    return {"rows": rows, "approxifer_deg_p": deg_p}


class RobustSummary(TypedDict, total=False):
    """What :func:`run_robust` returns (``summary.json``): per row (number and size
    of the corrupted answers) each locator's rates (``located``,
    ``all_corrupted_flagged``, ``clean_flagged``, ``undecidable``, ``ok``, the
    error ratio), for the Lagrange-coded and (``berrut``) the Berrut-coded
    answers."""

    config: dict[str, Any]
    lagrange: dict[str, Any]
    berrut: dict[str, Any]
    environment: dict[str, Any]
    seconds: float


def run_robust(cfg: RobustConfig) -> RobustSummary:
    """Every row of the experiment; returns the summary."""
    total = (1 + cfg.berrut) * (1 + len(cfg.counts) + len(cfg.sizes))
    bar = runkit.progress(
        total=total, desc="robust", disable=None if cfg.progress else True
    )
    out = RobustSummary(
        config=dataclasses.asdict(cfg),
        lagrange=run_lagrange(cfg, bar),
    )
    if cfg.berrut:
        out["berrut"] = run_berrut(cfg, bar)
    bar.close()
    out["environment"] = runkit.environment()
    return out
