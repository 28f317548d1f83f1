"""Locating corrupted workers: the robust decoders against corrupted answers.

    python -m theory.robust --out results/robust

The bf16 cross-tower setting of :mod:`theory.demo` (K = 8, M = 40, D = 22, N = 30):
every request draws fresh queries and a uniformly random set of N responders; A of
the responders (chosen uniformly) add +-size x RMS(answers) to their answer. Reported:

* Lagrange-coded answers, :func:`codedjax.chebyls_decode_robust` (``max_corrupted``
  = 4, the most N = 30 = D + 2 * 4 allows), with two noise models: ``noise_sd``
  from a first-order rounding analysis of the bf16 tower at each coded input
  (:func:`cross_tower_rounding_sd`), and the dtype-only model (no ``noise_sd``).
  Reported: the rate at which exactly the corrupted workers are located (also
  among the requests whose corrupted workers have leverage below 0.9), the
  false-alarm rate on clean requests, the UNDECIDABLE rate and the decoded error
  after exclusion relative to the clean decode of the same request, against the
  number of corrupted workers (1-4, at 1 x RMS) and against the error size
  (0.01-10 x RMS, one corrupted worker).
* Berrut-coded answers (BACC points): a leave-one-out locator (each answer against
  the Berrut interpolant of the others, robust scale, remove the worst, repeat)
  side by side with ApproxIFER's locator reimplemented from its description (a
  rational fit P(z_i) = y_i Q(z_i) with deg Q = A, the A responders with the
  smallest |Q(z_i)| excluded), both followed by Berrut decoding of the rest.

The maths is in ``docs/decoding.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import time
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from .demo import cross_params, cross_tower


@dataclasses.dataclass(frozen=True)
class RobustConfig:
    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    cross_layers: int = 2
    features: int = 16
    num_responses: int = 30  # N
    num_requests: int = 2000
    max_corrupted: int = 4  # A the decoders look for
    counts: tuple[int, ...] = (1, 2, 3, 4)  # corrupted workers at size 1 x RMS
    sizes: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    false_alarm: float = 0.01
    seed: int = 0
    progress: bool = True
    berrut: bool = True  # also the Berrut-coded locators
    rounding_model: bool = True  # the decoder with noise_sd from the rounding analysis
    dtype_model: bool = True  # also run the decoder with the dtype-only noise model
    leverage_cut: float = 0.9  # locate rate also among corrupted workers below it
    oracle: bool = True  # the maximum-likelihood locator told the count (reference)


def cross_tower_rounding_sd(params, x0, unit: float):
    """Standard deviation of a low-precision cross tower's rounding error, per answer.

    A first-order rounding analysis of :func:`theory.demo.cross_tower` as a bf16
    worker runs it: every rounded quantity v (the coded input, each matrix product,
    each sum and product of the layers, the head) carries an independent relative
    error delta_v, |delta_v| <= unit, taken uniform: standard deviation
    unit / sqrt(3) (an upper bound: with logarithmically distributed significands
    it is unit / sqrt(8 ln 2), 0.74 times less). So the answer's error has variance
    (unit^2 / 3) sum_v (v d out / d v)^2. The master
    knows the coded inputs and the weights, so this is a per-answer noise level
    from the dtype and the computation's structure, not from the answers.

    Args:
        params: the (already rounded) weights of :func:`theory.demo.cross_params`.
        x0: [M, F] coded inputs.
        unit: the unit roundoff of the worker dtype (2^-8 for bf16).

    Returns:
        [M] standard deviations.
    """

    def tower(x, d):
        it = iter(d)
        x = x * (1 + next(it))
        xl = x
        for w, b in zip(params["w"], params["b"], strict=True):
            t = (xl @ w.T) * (1 + next(it))
            t = (t + b) * (1 + next(it))
            t = (x * t) * (1 + next(it))
            xl = (t + xl) * (1 + next(it))
        return (xl @ params["head"]) * (1 + next(it))

    def one(x):
        n = 1 + 4 * len(params["w"])
        d0 = [jnp.zeros_like(x)] * n + [jnp.zeros((), x.dtype)]
        g = jax.grad(lambda d: tower(x, d))(d0)
        return jnp.sqrt(sum(jnp.sum(gi * gi) for gi in g) / 3.0) * unit

    return jax.vmap(one)(x0)


def _answers(cfg: RobustConfig, kind: str):
    """Queries, bf16 answers [B, M] (float32), float64 truths [B, K] and the
    first-order rounding standard deviation of every answer [B, M]."""
    k, m = cfg.num_inputs, cfg.num_workers
    if kind == "lagrange":
        alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
        enc = cj.lagrange_encode
    else:
        beta, alpha = cj.bacc_points(k, m)
        enc = cj.berrut_encode
    kp, kx = jax.random.split(jax.random.key(cfg.seed), 2)
    params = cross_params(kp, cfg.features, cfg.cross_layers)
    x = jax.random.normal(kx, (cfg.num_requests, k, cfg.features))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(
            jax.vmap(lambda xx: cross_tower(p64, xx))(jnp.asarray(x, jnp.float64))
        )
    coded = jax.vmap(lambda xx: enc(xx, beta, alpha))(x)
    worker = cj.low_precision_worker(cross_tower, jnp.bfloat16)
    y = jax.vmap(lambda c: worker(params, c))(coded).astype(jnp.float32)
    rounded = jax.tree_util.tree_map(
        lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), params
    )
    unit = 2.0 ** -(jnp.finfo(jnp.bfloat16).nmant + 1)
    sd = jax.jit(
        jax.vmap(lambda c: cross_tower_rounding_sd(rounded, c, unit))
    )(coded)  # fmt: skip
    return alpha, beta, np.asarray(y), truth, np.asarray(sd)


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


def leverages(alpha, masks, num_coeffs: int) -> np.ndarray:
    """[B, M] leverage of each responder in its request's degree < D fit (0 off)."""
    a = np.asarray(alpha, np.float64)
    t = np.polynomial.chebyshev.chebvander(a, num_coeffs - 1)
    out = np.zeros(masks.shape)
    for i, mk in enumerate(np.asarray(masks)):
        q, _ = np.linalg.qr(t[mk])
        out[i, mk] = np.sum(q * q, axis=1)
    return out


def ml_located(alpha, masks, y, sd, bad, num_coeffs: int) -> float:
    """Share of requests where the maximum-likelihood locator *told the number of
    corrupted workers* finds exactly them (float64 numpy; a reference, not a decoder).

    With Gaussian answer errors of standard deviation ``sd`` and A shifted answers
    at unknown places, the likelihood is highest for the set S of A responders
    whose exclusion lowers the weighted residual sum of squares the most,
    r_S^T P_SS^{-1} r_S (P = I - H of the weighted fit of every responder, r its
    residuals). It needs no threshold and pays nothing for false alarms, so no
    locator that must also decide how many answers are wrong does better on
    average: its rate is what these masks and this noise allow.
    """
    a64 = np.asarray(alpha, np.float64)
    t = np.polynomial.chebyshev.chebvander(a64, num_coeffs - 1)
    hits = 0
    count = int(bad[0].sum())
    for i, mk in enumerate(np.asarray(masks)):
        idx = np.flatnonzero(mk)
        w = 1.0 / np.asarray(sd[i, idx], np.float64)
        q, _ = np.linalg.qr(t[idx] * w[:, None])
        yw = np.asarray(y[i, idx], np.float64) * w
        p = np.eye(idx.size) - q @ q.T
        r = p @ yw
        sets = np.array(list(itertools.combinations(range(idx.size), count)))
        pss = p[sets[:, :, None], sets[:, None, :]]  # [S, A, A]
        rs = r[sets]  # [S, A]
        with np.errstate(all="ignore"):
            drop = np.einsum(
                "sa,sa->s", rs, np.linalg.solve(pss, rs[..., None])[..., 0]
            )
        drop = np.where(np.isfinite(drop), drop, -np.inf)
        hits += set(idx[sets[np.argmax(drop)]]) == set(np.flatnonzero(bad[i]))
    return hits / len(masks)


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
        return cj.chebyls_decode_robust(
            yy, mk, alpha, beta, num_coeffs=d, max_corrupted=cfg.max_corrupted,
            worker_dtype=jnp.bfloat16, false_alarm=cfg.false_alarm, noise_sd=sd,
        )  # fmt: skip

    return jax.jit(jax.vmap(one if per_answer else (lambda yy, mk: one(yy, mk))))


def run_lagrange(cfg: RobustConfig, bar=None) -> dict:
    k, m, n = cfg.num_inputs, cfg.num_workers, cfg.num_responses
    d = cj.recovery_threshold(k, cfg.cross_layers + 1)
    alpha, beta, y, truth, sd = _answers(cfg, "lagrange")
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


def _berrut_at(nodes, vals, z):
    """Berrut's interpolant through sorted (nodes, vals), at z (float64 numpy)."""
    w = (-1.0) ** np.arange(nodes.size)
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    dz = np.where(hit, 1.0, dz)
    t = w[None, :] / dz
    out = (t @ vals) / t.sum(axis=1)
    rows = hit.any(axis=1)
    out[rows] = vals[np.argmax(hit[rows], axis=1)]
    return out


def _loo_deviation(x, y):
    """y_i minus Berrut's interpolant of the other answers at x_i (x sorted)."""
    n = x.size
    idx = np.arange(n)
    # Berrut weights alternate over the remaining sorted nodes: j > i shifts by one
    sign = np.where(idx[None, :] < idx[:, None], 1.0, -1.0) * (-1.0) ** idx[None, :]
    dz = x[:, None] - x[None, :]
    off = ~np.eye(n, dtype=bool)
    t = np.where(off, sign / np.where(off, dz, 1.0), 0.0)
    return y - (t @ y) / t.sum(axis=1)


def loo_locate(x, y, max_corrupted, tau):
    """Leave-one-out Berrut locator on the responders (x sorted, y answers).

    Each answer against the Berrut interpolant of the other kept answers; the scale
    is 1.4826 times the median absolute deviation of those deleted residuals (robust
    to a few outliers, which spoil only their neighbours' predictions); the worst
    beyond tau scales is excluded and the search repeats, at most max_corrupted
    times. Returns a bool mask over the responders.
    """
    keep = np.ones(x.size, bool)
    for _ in range(max_corrupted):
        idx = np.flatnonzero(keep)
        dev = _loo_deviation(x[idx], y[idx])
        scale = 1.4826 * np.median(np.abs(dev)) + 1e-300
        j = int(np.argmax(np.abs(dev)))
        if np.abs(dev[j]) / scale <= tau:
            break
        keep[idx[j]] = False
    return ~keep


def approxifer_locate(x, y, num_errors, deg_p):
    """ApproxIFER's locator: the rational fit P(x_i) = y_i Q(x_i), deg Q = A.

    The coefficients of P (Chebyshev, degree ``deg_p``) and Q (degree A) are the
    right singular vector of [T_p(x), -diag(y) T_A(x)] of the smallest singular
    value; the A responders with the smallest |Q(x_i)| are flagged. Returns a bool
    mask over the responders.
    """
    tp = np.polynomial.chebyshev.chebvander(x, deg_p)
    tq = np.polynomial.chebyshev.chebvander(x, num_errors)
    mat = np.concatenate([tp, -y[:, None] * tq], axis=1)
    norms = np.maximum(np.linalg.norm(mat, axis=0), 1e-300)  # column equilibration
    _, _, vt = np.linalg.svd(mat / norms, full_matrices=True)
    cq = (vt[-1] / norms)[deg_p + 1 :]
    q = np.abs(tq @ cq)
    flagged = np.zeros(x.size, bool)
    flagged[np.argsort(q)[:num_errors]] = True
    return flagged


def berrut_denominator(beta, z) -> np.ndarray:
    """B(z) = sum_k w_k prod_{j != k} (z - beta_j), w_k = (-1)^(rank of beta_k).

    Berrut's interpolant of the data is u(z) = A(z) / B(z) with A and B polynomials
    of degree K - 1, B fixed by the data points alone. So a worker that computes a
    polynomial f of degree d answers y_i = f(u(z_i)), and y_i B(z_i)^d = P(z_i) with
    P = sum_j c_j A^j B^(d - j) a polynomial of degree d (K - 1) = D - 1: BACC-coded
    answers of a polynomial worker, times B^d, are a Lagrange code's answers, and
    f(x_k) = P(beta_k) / B(beta_k)^d exactly (float64 numpy).
    """
    b = np.asarray(beta, np.float64)
    zz = np.asarray(z, np.float64)
    w = np.empty(b.size)
    w[np.argsort(b)] = (-1.0) ** np.arange(b.size)
    diff = zz[:, None] - b[None, :]  # [Z, K]
    out = np.zeros(zz.size)
    for k in range(b.size):
        out += w[k] * np.prod(np.delete(diff, k, axis=1), axis=1)
    return out


def run_berrut(cfg: RobustConfig, bar=None) -> dict:
    m, n = cfg.num_workers, cfg.num_responses
    alpha, beta, y, truth, sd = _answers(cfg, "berrut")
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


# ------------------------------------------------------------------ report


def format_tables(summary: dict) -> str:
    c = summary["config"]
    lag = summary["lagrange"]["rows"]
    lines = [
        f"K={c['num_inputs']}, M={c['num_workers']}, D={summary['lagrange']['D']}, "
        f"N={c['num_responses']}, bf16 workers, {c['num_requests']} requests per row; "
        f"decoders look for up to A={c['max_corrupted']} corrupted answers; "
        "error ratio = decoded error / the clean decode's (median over requests)",
        "",
    ]
    models = [
        ("rounding", "noise_sd = the first-order rounding analysis of the tower"),
        ("dtype", "dtype-only noise model (no noise_sd)"),
    ]
    cut = c.get("leverage_cut", 0.9)
    for key, title in models:
        if key not in lag[0]:
            continue  # that model was not run
        lines += [
            "",
            f"Lagrange-coded answers, chebyls_decode_robust, {title}:",
            "",
            "| corrupted | size x RMS | located exactly | ML locator told the "
            f"count | located, leverage < {cut:g} (share of requests) | all "
            "corrupted flagged | clean worker flagged | UNDECIDABLE | error ratio |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in lag:
            r = row[key]
            below = (
                f"{r['located_below_cut']:.3f} ({r['share_below_cut']:.2f})"
                if "located_below_cut" in r
                else "-"
            )
            ml = f"{row['ml_located']:.3f}" if "ml_located" in row else "-"
            lines.append(
                f"| {row['corrupted']} | {row['size_x_rms']:g} | {r['located']:.3f} | "
                f"{ml} | {below} | {r['all_corrupted_flagged']:.3f} | "
                f"{r['clean_flagged']:.3f} | {r['undecidable']:.3f} | "
                f"{r['error_ratio_median']:.2f} |"
            )
    if "berrut" not in summary:
        return "\n".join(lines)
    lines += [
        "",
        "Berrut-coded answers (BACC): the leave-one-out locator, ApproxIFER's "
        f"(rational fit, deg P = {summary['berrut']['approxifer_deg_p']}, deg Q = A; "
        "always excludes A workers) and the rational view (the robust decoder on "
        "y B(z)^d, the worker's degree d known):",
        "",
        "| corrupted | size x RMS | located exactly (LOO / ApproxIFER / rational "
        "view) | all corrupted flagged | clean worker flagged | error ratio |",
        "|---|---|---|---|---|---|",
    ]
    names = ("loo_berrut", "approxifer", "rational")
    for r in summary["berrut"]["rows"]:
        present = [r[n] for n in names if n in r]

        def cells(key, fmt, present=present):
            return " / ".join(format(v[key], fmt) for v in present)

        lines.append(
            f"| {r['corrupted']} | {r['size_x_rms']:g} | {cells('located', '.3f')} | "
            f"{cells('all_corrupted_flagged', '.3f')} | "
            f"{cells('clean_flagged', '.3f')} | {cells('error_ratio_median', '.2g')} |"
        )
    return "\n".join(lines)


def plot_rates(summary: dict, path: str) -> None:
    """Located exactly against the error size (one corrupted worker) and against the
    number of corrupted workers (at 1 x RMS): each noise model's decoder next to the
    maximum-likelihood locator told the count, and Berrut's locators when run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["lagrange"]["rows"]
    sized = sorted(
        (r for r in rows if r["corrupted"] == 1), key=lambda r: r["size_x_rms"]
    )
    counted = sorted(
        (r for r in rows if r["corrupted"] and r["size_x_rms"] == 1.0),
        key=lambda r: r["corrupted"],
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    styles = [
        ("rounding", "robust, noise_sd from the rounding analysis", "C0", "o-"),
        ("dtype", "robust, dtype-only noise level", "C1", "s-"),
    ]
    for ax, group, key, label in (
        (axes[0], sized, "size_x_rms", "error size (x RMS of the answers)"),
        (axes[1], counted, "corrupted", "corrupted workers (error 1 x RMS)"),
    ):
        xs = [r[key] for r in group]
        for name, text, color, style in styles:
            if group and name in group[0]:
                ax.plot(xs, [r[name]["located"] for r in group], style, color=color,
                        label=text)  # fmt: skip
        if group and "ml_located" in group[0]:
            ax.plot(xs, [r["ml_located"] for r in group], "k--",
                    label="maximum likelihood, told the count (reference)")  # fmt: skip
        if "berrut" in summary:
            brows = [
                r for r in summary["berrut"]["rows"]
                if (r["corrupted"] == 1 if key == "size_x_rms"
                    else r["corrupted"] and r["size_x_rms"] == 1.0)
            ]  # fmt: skip
            brows.sort(key=lambda r: r[key])
            for name, style, color in (
                ("loo_berrut", "v:", "C2"), ("approxifer", "^:", "C3"),
                ("rational", "d:", "C4"),
            ):  # fmt: skip
                if brows and name in brows[0]:
                    ax.plot([r[key] for r in brows],
                            [r[name]["located"] for r in brows], style, color=color,
                            label=f"Berrut-coded, {name}")  # fmt: skip
        ax.set_xlabel(label)
        ax.set_ylabel("located exactly (share of requests)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_xscale("log")
    axes[1].set_xticks([r["corrupted"] for r in counted])
    axes[0].legend(fontsize=7, loc="center right")
    c = summary["config"]
    fig.suptitle(
        f"Locating corrupted workers: K={c['num_inputs']}, M={c['num_workers']}, "
        f"N={c['num_responses']}, bf16 workers, {c['num_requests']} requests per point",
        fontsize=10,
    )
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_robust(cfg: RobustConfig) -> dict:
    quiet = (not cfg.progress) or os.environ.get("CODEDJAX_NO_PROGRESS") == "1"
    bar = None
    if not quiet:
        try:
            from tqdm import tqdm

            total = (1 + cfg.berrut) * (1 + len(cfg.counts) + len(cfg.sizes))
            bar = tqdm(total=total, desc="robust")
        except ImportError:  # pragma: no cover
            bar = None
    out = {
        "config": dataclasses.asdict(cfg),
        "lagrange": run_lagrange(cfg, bar),
    }
    if cfg.berrut:
        out["berrut"] = run_berrut(cfg, bar)
    if bar is not None:
        bar.close()
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/robust")
    parser.add_argument("--requests", type=int, default=RobustConfig.num_requests)
    parser.add_argument("--seed", type=int, default=RobustConfig.seed)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--no-berrut", action="store_true", help="skip the Berrut-coded locators"
    )
    parser.add_argument(
        "--no-dtype-model",
        action="store_true",
        help="skip the decoder run with the dtype-only noise model",
    )
    parser.add_argument(
        "--no-rounding-model",
        action="store_true",
        help="skip the decoder run with noise_sd from the rounding analysis",
    )
    args = parser.parse_args(argv)
    cfg = RobustConfig(
        num_requests=args.requests,
        seed=args.seed,
        progress=not args.no_progress,
        berrut=not args.no_berrut,
        dtype_model=not args.no_dtype_model,
        rounding_model=not args.no_rounding_model,
    )
    t0 = time.perf_counter()
    summary = run_robust(cfg)
    summary["seconds"] = time.perf_counter() - t0
    os.makedirs(args.out, exist_ok=True)
    table = format_tables(summary)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot_rates(summary, os.path.join(args.out, "located.png"))
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(
            "# Locating corrupted workers\n\n![located](located.png)\n\n" + table + "\n"
        )
    print(table)
    print(f"({summary['seconds']:.0f} s)")
    return summary


if __name__ == "__main__":
    main()
