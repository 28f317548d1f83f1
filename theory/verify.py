"""Check the condition-number and RepApprox recovery bounds against Monte Carlo.

    python -m theory.verify --quick --out results/theory     # < 3 min on 2 cores
    python -m theory.verify --out results/theory             # >= 100,000 trials

What it does (maths in ``notes/theory-notes.md`` sections 2 and 3, functions in
:mod:`codedjax.bounds`):

1. Condition numbers. For each (M, D) of the grid and N from D to M, uniformly random
   responding sets (first N of a uniform arrival order), cond(T_S) raw and
   equilibrated in float64 (batched SVD, singular values only): median, p95, p99,
   max. Every bound is compared with every trial:

   - deterministic bounds (Prop. B, and Prop. D's gap bound evaluated on each
     trial's own responding set; also cond(T_S) within a factor sqrt(2) of
     cond(U_S)) must never be exceeded;
   - probabilistic bounds at confidence 1 - eta (generic Chernoff, Chernoff on the
     missing rows, probabilistic gap bound): the exceedance rate gets a
     Clopper-Pearson interval, and the bound is *violated* only when the whole
     interval lies above eta;
   - the exact complement identity (Prop. A, from the missing rows alone) against
     the SVD, wherever float64 can resolve it (tolerance from eps and cond^2).

2. The exhaustive worst case over all straggler sets for small M (M <= 24, s <= 3)
   for ChebyLS, next to the threshold decoder's worst case (the worst D-subset: any D
   responders can arrive first), cross-checked with ``threshold_decode``.
3. First-kind, second-kind and equispaced points, Chebyshev against monomial basis,
   at the threshold N = D.
4. RepApprox: the Monte Carlo rate of exact recovery against the exact formula, the
   union bound and the seed's bound, with intervals; the exact formula against an
   exhaustive enumeration of all subsets.

Intervals: every Clopper-Pearson interval is taken at the per-interval level
1 - (1 - family_confidence) / (number of intervals) (Bonferroni), so that all of them
hold together with probability >= family_confidence (0.99).

Trials are vmapped in chunks and sharded over every device (``jax.shard_map`` over a
1-D mesh); trial t uses the key ``fold_in(key, t)``, so the numbers do not depend on
the device count or the chunk size: 8 CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8``) give the same numbers as
one. Several hosts: run the same command on every host with ``--distributed``
(``jax.distributed.initialize()``; Slurm, Open MPI and Cloud TPU are detected,
elsewhere add ``--coordinator host:port --num-processes P --process-id i``); the
mesh then spans every host's devices, each process feeds only its own devices,
results are all-gathered, and process 0 writes the outputs.

Outputs in ``--out``: ``summary.json`` (``checks``: one ``{"name", "holds", ...}`` per
bound and configuration; ``recovery``: rows ``{"K", "c", "M", "N", "exact", "union",
"seed_bound", "monte_carlo", "ci_low", "ci_high"}``), ``report.md`` and PNG plots.
Non-finite numbers (vacuous bounds) are written as ``null``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import codedjax.bounds as cb

from . import _mc

EPS = float(np.finfo(np.float64).eps)
PROB_BOUNDS = (
    ("chernoff_sampling", "generic Chernoff (Tropp 2012, sec. 2.2)"),
    ("chernoff_missing", "Chernoff on missing rows (Prop. C)"),
    ("gap_probabilistic", "gap bound, probabilistic (Prop. D)"),
)
BASES = (
    "cheb1/Chebyshev",
    "cheb2/Chebyshev",
    "equispaced/Chebyshev",
    "equispaced/monomial",
    "cheb1/monomial",
)


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    """Everything the verification run depends on (the full mode by default)."""

    cond_grid: tuple[tuple[int, tuple[int, ...]], ...] = (
        (40, (7, 13, 20, 30)),
        (100, (13, 25)),
        (200, (20, 40)),
    )
    trials: int = 100_000
    eta: float = 0.05
    family_confidence: float = 0.99
    identity_trials: int = 256
    exhaustive_workers: tuple[int, ...] = (12, 16, 20, 24)
    exhaustive_missing: int = 3
    exhaustive_max_candidates: int = 1_000_000
    exhaustive_greedy: bool = True
    decoder_check_workers: tuple[int, ...] | None = None  # None: every M
    points_workers: int = 40
    points_coeffs: tuple[int, ...] = (5, 9, 13, 17, 21, 25, 30)
    points_trials: int = 100_000
    recovery_grid: tuple[tuple[int, int, int], ...] = (
        (4, 3, 12),
        (8, 4, 32),
        (8, 4, 40),
        (10, 4, 40),
        (16, 2, 40),
        (8, 4, 100),
    )
    recovery_trials: int = 100_000
    enumeration_grid: tuple[tuple[int, int, int], ...] = (
        (3, 2, 8),
        (4, 3, 12),
        (2, 5, 14),
        (5, 3, 16),
        (6, 3, 20),
    )
    benchmark_case: tuple[int, int] | None = (100, 25)
    benchmark_trials: int = 2000
    benchmark_repeats: int = 3
    seed: int = 0
    chunk: int | None = None  # trials per dispatch (default 1000)
    memory_bytes: int = 128 << 20  # per device, bounds the vmapped step
    plots: bool = True
    progress: bool = True


def quick_config(**overrides: Any) -> VerifyConfig:
    """The ``--quick`` configuration: 2,000 trials per configuration."""
    base = dict(
        trials=2000,
        points_trials=2000,
        recovery_trials=20_000,
        exhaustive_max_candidates=20_000,
        exhaustive_greedy=False,
        decoder_check_workers=(24,),
        benchmark_trials=400,
        benchmark_repeats=2,
    )
    base.update(overrides)
    return VerifyConfig(**base)


# ----------------------------------------------------------------------------------
# grids


def response_grid(m: int, d: int) -> tuple[int, ...]:
    """N values from D to M: dense next to D and M, a few in between."""
    cand = [
        d,
        d + 1,
        d + 2,
        d + 3,
        d + 5,
        d + 8,
        d + (m - d) // 4,
        (d + m) // 2,
        m - (m - d) // 4,
        m - 3,
        m - 2,
        m - 1,
        m,
    ]
    return tuple(sorted({n for n in cand if d <= n <= m}))


def recovery_rows(k: int, c: int, m: int) -> tuple[int, ...]:
    """N values reported in the table (the plots use every N)."""
    cand = [
        0,
        k,
        m // 4,
        m // 2,
        (3 * m) // 4,
        m - 2 * c,
        m - c,
        m - c + 1,
        m - 2,
        m - 1,
        m,
    ]
    return tuple(sorted({n for n in cand if 0 <= n <= m}))


def plan(cfg: VerifyConfig, mesh) -> tuple[int, int]:
    """(width, chunk) shared by every section, so the sampler compiles once.

    width: the largest M of the run (latencies drawn per trial). chunk: trials per
    dispatch (each device vmaps them in memory-bounded steps).
    """
    ms = [m for m, _ in cfg.cond_grid] + [cfg.points_workers]
    ms += [m for _, _, m in cfg.recovery_grid]
    fewest = min(cfg.trials, cfg.points_trials, cfg.recovery_trials)
    return max(ms), _mc.fit_chunk(cfg.chunk, fewest, mesh)


def _num_intervals(cfg: VerifyConfig) -> int:
    n = sum(
        len(response_grid(m, d)) * len(PROB_BOUNDS)
        for m, ds in cfg.cond_grid
        for d in ds
    )
    return n + sum(len(recovery_rows(*g)) for g in cfg.recovery_grid)


def _key(seed: int, *parts: int) -> jax.Array:
    k = jax.random.key(seed)
    for p in parts:
        k = jax.random.fold_in(k, p)
    return k


def _num(x: Any) -> Any:
    """JSON-safe number: non-finite floats become None."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else None


def _stats(a: np.ndarray) -> dict:
    # order statistics (no interpolation): defined when some trials are inf
    def q(p):
        return _num(np.quantile(a, p, method="inverted_cdf"))

    return {"median": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": _num(np.max(a))}


# ----------------------------------------------------------------------------------
# 1. condition numbers


def _exceed(values: np.ndarray, bound: np.ndarray | float, tol: np.ndarray) -> int:
    """Trials above the bound by more than the float64 error of cond itself."""
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), values.shape)
    over = np.isfinite(b) & (values > b * (1.0 + tol))
    return int(np.count_nonzero(over))


def analyse_cond(
    samples: _mc.CondSamples,
    *,
    m: int,
    d: int,
    responses: tuple[int, ...],
    eta: float,
    level: float,
    identity_trials: int,
) -> tuple[list[dict], list[dict]]:
    """Statistics and checks of one (M, D) block; returns (rows, checks)."""
    rows, checks = [], []
    t = samples.eq.shape[0]
    for j, n in enumerate(responses):
        raw, eq = samples.raw[:, j], samples.eq[:, j]
        g, wr = samples.gap[:, j].astype(np.float64), samples.wratio[:, j]
        # cond computed by a backward-stable SVD: relative error <~ sqrt(N D) eps cond
        tol = 8.0 * math.sqrt(n * d) * EPS * np.where(np.isfinite(eq), eq, 0.0)
        tag = f"M={m} D={d} N={n}"
        base = {"M": m, "D": d, "N": n, "trials": t}
        row = dict(base, raw=_stats(raw), eq=_stats(eq), bounds={}, exceed={})

        det = cb.deterministic_condition_bound(
            num_workers=m, num_coeffs=d, num_responses=n
        )
        k = _exceed(eq, det, tol)
        checks.append(
            dict(
                base,
                name=f"deterministic (Prop. B) {tag}",
                kind="deterministic",
                bound="prop_b",
                value=_num(det),
                vacuous=not math.isfinite(det),
                exceed=k,
                holds=k == 0,
            )
        )
        row["bounds"]["prop_b"] = _num(det)
        row["exceed"]["prop_b"] = k

        rho = g * (d - 1) / m
        with np.errstate(invalid="ignore", divide="ignore"):
            gb = np.where(rho < 1.0, np.sqrt(wr) * (1.0 + rho) / (1.0 - rho), np.inf)
        k = _exceed(eq, gb, tol)
        checks.append(
            dict(
                base,
                name=f"gap bound per trial (Prop. D) {tag}",
                kind="deterministic",
                bound="gap_deterministic",
                informative_trials=int(np.isfinite(gb).sum()),
                exceed=k,
                holds=k == 0,
            )
        )
        row["exceed"]["gap_deterministic"] = k
        row["gap_bound_informative"] = int(np.isfinite(gb).sum())

        # a claim relating two computed cond values is testable only where float64
        # resolves both (tol < 1/2); beyond that (cond ~ 1/eps, e.g. N = D = 40 at
        # M = 200, where cond reaches 1e20) the SVD gives noise or inf for either
        r2 = math.sqrt(2.0)
        worst = np.maximum(
            np.where(np.isfinite(raw), raw, np.inf),
            np.where(np.isfinite(eq), eq, np.inf),
        )
        resolved = 8.0 * math.sqrt(n * d) * EPS * worst < 0.5
        k = _exceed(raw[resolved], r2 * eq[resolved], tol[resolved]) + _exceed(
            eq[resolved], r2 * raw[resolved], tol[resolved]
        )
        checks.append(
            dict(
                base,
                name=f"raw within sqrt(2) of equilibrated {tag}",
                kind="deterministic",
                bound="equilibration",
                exceed=k,
                unresolved_trials=int(t - resolved.sum()),
                holds=k == 0,
            )
        )

        for name, label in PROB_BOUNDS:
            if name == "chernoff_sampling":
                b = cb.sampling_condition_bound(
                    num_workers=m, num_coeffs=d, num_responses=n, eta=eta
                )
            elif name == "chernoff_missing":
                b = cb.missing_rows_condition_bound(
                    num_workers=m, num_coeffs=d, num_responses=n, eta=eta
                )
            else:
                b = cb.gap_condition_bound_probabilistic(
                    num_workers=m, num_coeffs=d, num_responses=n, eta=eta
                )
            k = _exceed(eq, b, tol)
            lo, hi = cb.clopper_pearson(k, t, confidence=level)
            checks.append(
                dict(
                    base,
                    name=f"{label} at eta={eta} {tag}",
                    kind="probabilistic",
                    bound=name,
                    value=_num(b),
                    vacuous=not math.isfinite(b),
                    eta=eta,
                    exceed=k,
                    rate=k / t,
                    ci_low=lo,
                    ci_high=hi,
                    confidence=level,
                    holds=not lo > eta,
                )
            )
            row["bounds"][name] = _num(b)
            row["exceed"][name] = k

        # Prop. A from the missing rows alone, on the first trials' responding sets
        orders = samples.orders[:identity_trials]
        worst, tested = 0.0, 0
        for i, order in enumerate(orders):
            kappa = float(eq[i])
            s = m - n
            tol_id = 8.0 * (s * d * kappa**2 + math.sqrt(n * d) * kappa) * EPS
            if not math.isfinite(kappa) or tol_id > 0.1:
                continue
            mask = np.zeros(m, bool)
            mask[order[:n]] = True
            k_id = cb.complement_condition_number(mask, num_coeffs=d)
            worst = max(worst, abs(k_id / kappa - 1.0) / tol_id)
            tested += 1
        checks.append(
            dict(
                base,
                name=f"complement identity (Prop. A) {tag}",
                kind="identity",
                bound="prop_a",
                tested=tested,
                max_error_over_tolerance=worst,
                holds=worst <= 1.0,
            )
        )
        rows.append(row)
    return rows, checks


def orthogonality_checks(m: int, d: int) -> list[dict]:
    """T^T T = diag(M, M/2, ...) at first-kind points: cond(T) = sqrt 2, cond(U) = 1."""
    with jax.enable_x64(True):
        v, u = (np.asarray(a) for a in _mc.bases(m, d))
    tol = 8.0 * m * d * EPS
    c_raw, c_eq = np.linalg.cond(v), np.linalg.cond(u)
    want = math.sqrt(2.0) if d > 1 else 1.0
    ok = abs(c_raw - want) <= tol * want and abs(c_eq - 1.0) <= tol
    return [
        {
            "name": f"full-set orthogonality M={m} D={d}",
            "kind": "identity",
            "M": m,
            "D": d,
            "cond_raw": c_raw,
            "cond_eq": c_eq,
            "holds": bool(ok),
        }
    ]


# ----------------------------------------------------------------------------------
# 2. exhaustive worst case


def exhaustive_worst_case(cfg: VerifyConfig) -> tuple[list[dict], list[dict]]:
    """ChebyLS worst case over all N-subsets vs the threshold decoder's worst case."""
    rows, checks = [], []
    with jax.enable_x64(True):
        for m in cfg.exhaustive_workers:
            alpha = cj.chebyshev_points(m, kind=1, dtype=jnp.float64)
            beta = cj.chebyshev_points(2, kind=1, dtype=jnp.float64)
            for d in sorted({m - cfg.exhaustive_missing, m // 2}):
                if (
                    not cfg.exhaustive_greedy
                    and math.comb(m, d) > cfg.exhaustive_max_candidates
                ):
                    continue  # only exhaustive searches in this mode
                thr = cj.worst_case_mask(
                    alpha,
                    num_coeffs=d,
                    num_responses=d,
                    max_candidates=cfg.exhaustive_max_candidates,
                )
                # the library's threshold decoder on that set reports the same cond
                check = (
                    cfg.decoder_check_workers is None or m in cfg.decoder_check_workers
                )
                tol = 32.0 * d * EPS * thr.cond
                if check and tol < 0.1:
                    res = cj.threshold_decode(
                        jnp.zeros((m, 1), jnp.float64),
                        jnp.asarray(thr.mask),
                        alpha,
                        beta,
                        num_coeffs=d,
                        order=jnp.arange(m, dtype=jnp.int32),
                    )
                    c_dec = float(res.cond)
                    checks.append(
                        {
                            "name": (
                                f"threshold_decode cond = worst-case search M={m} D={d}"
                            ),
                            "kind": "identity",
                            "M": m,
                            "D": d,
                            "search": thr.cond,
                            "decoder": c_dec,
                            "holds": abs(c_dec / thr.cond - 1.0) <= tol,
                        }
                    )
                for s in range(1, cfg.exhaustive_missing + 1):
                    n = m - s
                    if n < d:
                        continue
                    ls = cj.worst_case_mask(
                        alpha,
                        num_coeffs=d,
                        num_responses=n,
                        max_candidates=cfg.exhaustive_max_candidates,
                    )
                    pb = cb.deterministic_condition_bound(
                        num_workers=m, num_coeffs=d, num_responses=n
                    )
                    gb = cb.gap_condition_bound(ls.mask, num_coeffs=d)
                    ident = cb.complement_condition_number(ls.mask, num_coeffs=d)
                    kap = ls.cond
                    tol = 8.0 * (math.sqrt(n * d) * kap + s * d * kap**2) * EPS
                    tag = f"M={m} D={d} s={s}"
                    rows.append(
                        {
                            "M": m,
                            "D": d,
                            "s": s,
                            "N": n,
                            "chebyls_worst": kap,
                            "chebyls_exhaustive": ls.exhaustive,
                            "threshold_worst": thr.cond,
                            "threshold_exhaustive": thr.exhaustive,
                            "prop_b": _num(pb),
                            "gap_bound_on_worst": _num(gb),
                            "identity_on_worst": _num(ident),
                            "worst_over_M_pow_s": kap / m**s,
                        }
                    )
                    base = {"M": m, "D": d, "s": s, "N": n, "kind": "deterministic"}
                    checks.append(
                        dict(
                            base,
                            name=f"worst case <= Prop. B {tag}",
                            bound="prop_b",
                            worst=kap,
                            value=_num(pb),
                            vacuous=not math.isfinite(pb),
                            holds=not kap > pb * (1 + tol),
                        )
                    )
                    if s == 1:
                        checks.append(
                            dict(
                                base,
                                name=f"Prop. B tight at s=1 {tag}",
                                bound="prop_b",
                                worst=kap,
                                value=_num(pb),
                                holds=abs(kap / pb - 1.0) <= tol,
                            )
                        )
                    checks.append(
                        dict(
                            base,
                            name=f"gap bound on worst set {tag}",
                            bound="gap_deterministic",
                            worst=kap,
                            value=_num(gb),
                            vacuous=not math.isfinite(gb),
                            holds=not kap > gb * (1 + tol),
                        )
                    )
                    if tol < 0.1:
                        checks.append(
                            dict(
                                base,
                                kind="identity",
                                name=(f"complement identity on worst set {tag}"),
                                bound="prop_a",
                                worst=kap,
                                value=ident,
                                holds=abs(ident / kap - 1.0) <= tol,
                            )
                        )
    return rows, checks


# ----------------------------------------------------------------------------------
# 3. points and bases at the threshold


def basis_matrices(m: int, d: int) -> np.ndarray:
    """[5, M, D] full matrices in the order of ``BASES`` (float64)."""
    c1 = np.asarray(cj.chebyshev_points(m, kind=1, dtype=jnp.float64))
    c2 = np.asarray(cj.chebyshev_points(m, kind=2, dtype=jnp.float64))
    eq = np.linspace(1.0, -1.0, m)
    cheb = np.polynomial.chebyshev.chebvander
    mono = lambda x: np.vander(x, d, increasing=True)  # noqa: E731
    return np.stack(
        [cheb(c1, d - 1), cheb(c2, d - 1), cheb(eq, d - 1), mono(eq), mono(c1)]
    )


def points_comparison(
    cfg: VerifyConfig, progress, **plan_kw
) -> tuple[list[dict], list[dict]]:
    rows, checks = [], []
    m = cfg.points_workers
    for d in cfg.points_coeffs:
        with jax.enable_x64(True):
            mats = jnp.asarray(basis_matrices(m, d))
        conds = _mc.square_cond_monte_carlo(
            _key(cfg.seed, 2, m, d),
            mats,
            num_coeffs=d,
            num_trials=cfg.points_trials,
            progress=progress,
            **plan_kw,
        )
        row = {"M": m, "D": d, "N": d, "trials": cfg.points_trials}
        for b, name in enumerate(BASES):
            row[name] = _stats(conds[:, b])
        rows.append(row)
        med = {name: np.median(conds[:, b]) for b, name in enumerate(BASES)}
        checks.append(
            {
                "name": f"Chebyshev points+basis beat equispaced monomial "
                f"(median) M={m} D={d}",
                "kind": "claim",
                "M": m,
                "D": d,
                "cheb1": med[BASES[0]],
                "equispaced_monomial": med[BASES[3]],
                "holds": bool(med[BASES[0]] < med[BASES[3]]),
            }
        )
    return rows, checks


# ----------------------------------------------------------------------------------
# 4. RepApprox


def enumerate_recovery(k: int, c: int, m: int) -> list[Fraction]:
    """P(every group has a responder) for N = 0..M by listing all 2^M subsets."""
    if m > 22:
        raise ValueError(f"enumerate_recovery: M must be <= 22, got {m}")
    sets = np.arange(1 << m, dtype=np.uint32)
    bits = ((sets[:, None] >> np.arange(m, dtype=np.uint32)) & 1).astype(np.uint8)
    size = bits.sum(axis=1)
    hit = np.ones(sets.shape[0], bool)
    for g in range(k):
        hit &= bits[:, g * c : (g + 1) * c].any(axis=1)
    counts = np.bincount(size[hit], minlength=m + 1)
    return [Fraction(int(counts[n]), math.comb(m, n)) for n in range(m + 1)]


def recovery_section(
    cfg: VerifyConfig, level: float, progress, **plan_kw
) -> tuple[list[dict], list[dict], list[dict]]:
    rows, checks, curves = [], [], []
    for k, c, m in cfg.recovery_grid:
        counts = _mc.recovery_monte_carlo(
            _key(cfg.seed, 3, k, c, m),
            num_tasks=k,
            replication=c,
            num_workers=m,
            num_trials=cfg.recovery_trials,
            progress=progress,
            **plan_kw,
        )
        t = cfg.recovery_trials
        exact = [cb.exact_recovery_probability(k, c, m, n) for n in range(m + 1)]
        union = [cb.recovery_probability_union(k, c, m, n) for n in range(m + 1)]
        seed = [cb.recovery_probability_bound(k, c, m, n) for n in range(m + 1)]
        curves.append(
            {
                "K": k,
                "c": c,
                "M": m,
                "exact": exact,
                "union": union,
                "seed_bound": seed,
                "monte_carlo": (counts / t).tolist(),
                "trials": t,
            }
        )
        for n in recovery_rows(k, c, m):
            lo, hi = cb.clopper_pearson(int(counts[n]), t, confidence=level)
            row = {
                "K": k,
                "c": c,
                "M": m,
                "N": n,
                "exact": exact[n],
                "union": union[n],
                "seed_bound": seed[n],
                "monte_carlo": float(counts[n] / t),
                "ci_low": lo,
                "ci_high": hi,
                "trials": t,
                "confidence": level,
            }
            rows.append(row)
            checks.append(
                {
                    "name": f"RepApprox Monte Carlo interval holds exact "
                    f"K={k} c={c} M={m} N={n}",
                    "kind": "probabilistic",
                    "bound": "recovery_exact",
                    "K": k,
                    "c": c,
                    "M": m,
                    "N": n,
                    "exact": exact[n],
                    "ci_low": lo,
                    "ci_high": hi,
                    "holds": bool(lo <= exact[n] <= hi),
                }
            )
        order_ok = all(
            s <= u + 1e-12 and u <= e + 1e-12
            for s, u, e in zip(seed, union, exact, strict=True)
        )
        checks.append(
            {
                "name": f"seed bound <= union bound <= exact K={k} c={c} M={m}",
                "kind": "deterministic",
                "bound": "recovery_order",
                "K": k,
                "c": c,
                "M": m,
                "holds": bool(order_ok),
            }
        )
    for k, c, m in cfg.enumeration_grid:
        enum = enumerate_recovery(k, c, m)
        err = max(
            abs(cb.exact_recovery_probability(k, c, m, n) - float(enum[n]))
            for n in range(m + 1)
        )
        checks.append(
            {
                "name": (f"exact recovery formula = enumeration K={k} c={c} M={m}"),
                "kind": "identity",
                "bound": "recovery_exact",
                "K": k,
                "c": c,
                "M": m,
                "max_abs_error": err,
                "holds": err <= 1e-12,
            }
        )
    return rows, checks, curves


# ----------------------------------------------------------------------------------
# speed


def cond_trials_per_second(
    *,
    num_workers: int = 100,
    num_coeffs: int = 25,
    responses: tuple[int, ...] | None = None,
    num_trials: int = 2000,
    seed: int = 0,
    repeats: int = 3,
    mesh=None,
) -> dict:
    """Trials per second of the cond Monte Carlo against numpy's stacked SVD.

    Both compute cond(T_S) and cond(U_S) for every N of ``responses`` on the *same*
    responding sets (the arrival orders are drawn once, by the JAX sampler). Timed:
    the JAX kernel from the orders (sharded over every device), the full JAX Monte
    Carlo including sampling, and numpy (``np.linalg.svd`` on the stacked [T, 2, N, D]
    rows, one call per N). Results are compared before timing. Medians of
    ``repeats`` interleaved runs; compilation is timed separately.

    Returns:
        dict with ``jax_trials_per_s``, ``jax_mc_trials_per_s``,
        ``numpy_trials_per_s``, ``ratio`` (JAX kernel over numpy), ``ratio_mc``
        (full Monte Carlo over numpy), ``max_rel_diff_over_eps_cond`` (over trials
        with cond < 1e8), the device count and backend.
    """
    from jax.sharding import PartitionSpec as P

    m, d = num_workers, num_coeffs
    resp = response_grid(m, d) if responses is None else tuple(responses)
    mesh = _mc.make_mesh() if mesh is None else mesh
    ndev = mesh.devices.size
    t = -(-num_trials // ndev) * ndev
    key = _key(seed, 4, m, d)
    with jax.enable_x64(True):
        v, u = _mc.bases(m, d)
        orders_prog = jax.jit(
            jax.shard_map(
                jax.vmap(lambda lat: _mc._arrival_order(lat, m)),
                mesh=mesh,
                in_specs=P(_mc.AXIS),
                out_specs=P(_mc.AXIS),
            )
        )

        seq = _mc.sequential_linalg(mesh)

        def kernel(orders, v, u):
            return _mc._over_trials(
                lambda o: _mc.cond_from_order(
                    o,
                    v,
                    u,
                    num_workers=m,
                    num_coeffs=d,
                    responses=resp,
                    gaps=False,
                    sequential=seq,
                ),
                seq,
            )(orders)

        kern = _mc._shard(kernel, mesh, 2)
        sampler = _mc._sampler_program(m, mesh)
        idx = _mc._indices(0, t, mesh)
        orders = jax.block_until_ready(orders_prog(sampler(key, idx)))
        t0 = time.perf_counter()
        raw, eq = jax.block_until_ready(kern(orders, v, u))
        compile_s = time.perf_counter() - t0
        vn, un, on = np.asarray(v), np.asarray(u), np.asarray(orders)

        def numpy_run():
            out = []
            for n in resp:
                rows = on[:, :n]
                sv = np.linalg.svd(
                    np.stack([vn[rows], un[rows]], axis=1), compute_uv=False
                )
                out.append(sv[..., 0] / sv[..., d - 1])
            return np.stack(out, axis=-1)  # [T, 2, nN]

        ref = numpy_run()
        got = np.stack([np.asarray(raw), np.asarray(eq)], axis=1)
        ok = np.isfinite(ref) & (ref < 1e8)
        rel = np.abs(got[ok] / ref[ok] - 1.0) / (EPS * ref[ok])
        max_rel = float(rel.max()) if rel.size else 0.0

        mc = _mc._cond_program(
            m,
            d,
            resp,
            mesh,
            _mc.vmap_batch(_mc.cond_bytes_per_trial(m, d, resp), 128 << 20),
        )
        jax.block_until_ready(mc(sampler(key, idx), v, u))
        runs = {
            "jax": lambda: jax.block_until_ready(kern(orders, v, u)),
            "mc": lambda: jax.block_until_ready(mc(sampler(key, idx), v, u)),
            "numpy": numpy_run,
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(repeats):  # interleaved, so a change of load hits all three
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        t_jax, t_mc, t_np = (float(np.median(times[k])) for k in ("jax", "mc", "numpy"))
    return {
        "M": m,
        "D": d,
        "responses": list(resp),
        "trials": t,
        "jax_trials_per_s": t / t_jax,
        "jax_mc_trials_per_s": t / t_mc,
        "numpy_trials_per_s": t / t_np,
        "ratio": t_np / t_jax,
        "ratio_mc": t_np / t_mc,
        "compile_s": compile_s,
        "max_rel_diff_over_eps_cond": max_rel,
        "devices": ndev,
        "backend": jax.default_backend(),
        "device_kind": mesh.devices.flat[0].device_kind,
    }


# ----------------------------------------------------------------------------------
# the run


def run(cfg: VerifyConfig, out: str) -> dict:
    """Run every section, write ``summary.json``, ``report.md`` and plots to ``out``."""
    from tqdm.auto import tqdm

    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    level = 1.0 - (1.0 - cfg.family_confidence) / _num_intervals(cfg)
    quiet = (not cfg.progress) or os.environ.get("CODEDJAX_NO_PROGRESS") == "1"

    def new_bar(total: int, desc: str):
        # one bar per section: their trials cost very different amounts
        return tqdm(
            total=total,
            unit="trial",
            unit_scale=True,
            disable=quiet,
            desc=desc,
            file=sys.stderr,
        )

    mesh = _mc.make_mesh()
    width, chunk = plan(cfg, mesh)
    cond_rows, checks, speed = [], [], []
    sections: dict[str, float] = {}
    t_sec = time.perf_counter()
    bar = new_bar(
        sum(len(ds) for _, ds in cfg.cond_grid) * cfg.trials, "cond(T_S) trials"
    )
    for m, ds in cfg.cond_grid:
        for d in ds:
            resp = response_grid(m, d)
            bar.set_postfix_str(f"cond M={m} D={d}")
            smp = _mc.cond_monte_carlo(
                _key(cfg.seed, 1, m, d),
                num_workers=m,
                num_coeffs=d,
                responses=resp,
                num_trials=cfg.trials,
                chunk=chunk,
                width=width,
                mesh=mesh,
                memory_bytes=cfg.memory_bytes,
                keep_orders=cfg.identity_trials,
                progress=bar.update,
            )
            rows, chk = analyse_cond(
                smp,
                m=m,
                d=d,
                responses=resp,
                eta=cfg.eta,
                level=level,
                identity_trials=cfg.identity_trials,
            )
            cond_rows += rows
            checks += orthogonality_checks(m, d) + chk
            speed.append(
                {
                    "M": m,
                    "D": d,
                    "num_N": len(resp),
                    "trials": cfg.trials,
                    "seconds": smp.seconds,
                    "compile_seconds": smp.compile_seconds,
                    "trials_per_s": cfg.trials / smp.seconds,
                    "svds_per_s": 2 * cfg.trials * len(resp) / smp.seconds,
                }
            )
    bar.close()
    sections["condition numbers"] = time.perf_counter() - t_sec
    t_sec = time.perf_counter()
    bar = new_bar(len(cfg.points_coeffs) * cfg.points_trials, "points and bases")
    point_rows, chk = points_comparison(
        cfg, bar.update, chunk=chunk, width=width, mesh=mesh
    )
    bar.close()
    checks += chk
    sections["points and bases"] = time.perf_counter() - t_sec
    t_sec = time.perf_counter()
    bar = new_bar(len(cfg.recovery_grid) * cfg.recovery_trials, "RepApprox trials")
    rec_rows, chk, curves = recovery_section(
        cfg, level, bar.update, chunk=chunk, width=width, mesh=mesh
    )
    bar.close()
    checks += chk
    sections["RepApprox"] = time.perf_counter() - t_sec
    t_sec = time.perf_counter()
    ex_rows, chk = exhaustive_worst_case(cfg)
    checks += chk
    sections["exhaustive worst case"] = time.perf_counter() - t_sec
    t_sec = time.perf_counter()
    bench = None
    if cfg.benchmark_case is not None and jax.process_count() == 1:
        bench = cond_trials_per_second(
            num_workers=cfg.benchmark_case[0],
            num_coeffs=cfg.benchmark_case[1],
            num_trials=cfg.benchmark_trials,
            seed=cfg.seed,
            repeats=cfg.benchmark_repeats,
            mesh=mesh,
        )
        sections["benchmark"] = time.perf_counter() - t_sec
    seconds = time.perf_counter() - t_start
    summary = {
        "config": dataclasses.asdict(cfg),
        "devices": [str(dv) for dv in jax.devices()],
        "backend": jax.default_backend(),
        "interval_confidence": level,
        "family_confidence": cfg.family_confidence,
        "num_checks": len(checks),
        "num_holding": sum(bool(c["holds"]) for c in checks),
        "all_hold": all(bool(c["holds"]) for c in checks),
        "seconds": seconds,
        "section_seconds": sections,
        "chunk": chunk,
        "width": width,
        "checks": [_clean(c) for c in checks],
        "recovery": [_clean(r) for r in rec_rows],
        "cond": [_clean(r) for r in cond_rows],
        "points": [_clean(r) for r in point_rows],
        "exhaustive": [_clean(r) for r in ex_rows],
        "speed": [_clean(s) for s in speed],
        "benchmark": _clean(bench) if bench is not None else None,
    }
    if jax.process_index() == 0:
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, allow_nan=False)
        plots = []
        if cfg.plots:
            from . import _plots

            plots = _plots.write_plots(out, cfg, cond_rows, curves, point_rows)
        text = report(summary, plots)
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write(text)
    return summary


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (bool, np.bool_, int, np.integer, float, np.floating)):
        return _num(obj)
    return obj


def _f(x: Any, digits: int = 3) -> str:
    if x is None:
        return "inf"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}g}"


def cond_table(summary: dict) -> str:
    lines = [
        "| M | D | N | raw med | raw p95 | raw p99 | raw max | eq med | eq p95 | "
        "eq p99 | eq max | Prop B | gap (prob) | Ch-miss | generic | "
        "P(exceed) gap / Ch-miss / generic |",
        "|" + "---|" * 16,
    ]
    for r in summary["cond"]:
        b, e, t = r["bounds"], r["exceed"], r["trials"]
        lines.append(
            f"| {r['M']} | {r['D']} | {r['N']} | "
            + " | ".join(_f(r["raw"][q]) for q in ("median", "p95", "p99", "max"))
            + " | "
            + " | ".join(_f(r["eq"][q]) for q in ("median", "p95", "p99", "max"))
            + f" | {_f(b['prop_b'])} | {_f(b['gap_probabilistic'])} | "
            f"{_f(b['chernoff_missing'])} | {_f(b['chernoff_sampling'])} | "
            f"{e['gap_probabilistic'] / t:.2g} / {e['chernoff_missing'] / t:.2g} / "
            f"{e['chernoff_sampling'] / t:.2g} |"
        )
    return "\n".join(lines)


def report(summary: dict, plots: list[str]) -> str:
    cfg = summary["config"]
    checks = summary["checks"]
    failed = [c for c in checks if not c["holds"]]
    kinds: dict[str, list[int]] = {}
    for c in checks:
        kinds.setdefault(c["kind"], [0, 0])
        kinds[c["kind"]][0] += bool(c["holds"])
        kinds[c["kind"]][1] += 1
    out = [
        "# Theory verification: condition-number and recovery bounds",
        "",
        f"{summary['num_holding']} of {summary['num_checks']} checks hold "
        f"({'all hold' if summary['all_hold'] else 'SOME FAIL'}); "
        f"{cfg['trials']:,} trials per (M, D, N), eta = {cfg['eta']}, run time "
        f"{summary['seconds']:.0f} s on {len(summary['devices'])} "
        f"{summary['backend']} device(s).",
        "",
        "| kind | hold | total |",
        "|---|---|---|",
    ]
    out += [f"| {k} | {v[0]} | {v[1]} |" for k, v in sorted(kinds.items())]
    if failed:
        out += ["", "Failed checks:", ""] + [f"- {c['name']}" for c in failed]
    out += [
        "",
        "How to read: `eq` is cond(U_S) of the equilibrated "
        "Chebyshev-Vandermonde rows (what ChebyLS factorises), `raw` is cond(T_S). "
        "Bounds apply to `eq`; `inf` means vacuous. Deterministic bounds (Prop. B; "
        "the gap bound on each trial's own set) must never be exceeded; a "
        "probabilistic bound at 1 - eta is violated only if the whole "
        "Clopper-Pearson interval of its exceedance rate "
        f"lies above eta (intervals at level {summary['interval_confidence']:.6f}, "
        f"Bonferroni for a family-wise {summary['family_confidence']}).",
        "",
        "## Condition numbers (uniform stragglers, first-kind points)",
        "",
        cond_table(summary),
        "",
    ]
    out += [
        "## Exhaustive worst case (all straggler sets)",
        "",
        "The threshold decoder uses the first D responders, and any D of them can "
        "arrive first, so its worst case is the worst D-subset whatever N is.",
        "",
        "| M | D | s | ChebyLS worst (N = M - s) | exhaustive | threshold worst "
        "(D of N) | exhaustive | Prop B | worst / M^s |",
        "|" + "---|" * 9,
    ]
    for r in summary["exhaustive"]:
        out.append(
            f"| {r['M']} | {r['D']} | {r['s']} | {_f(r['chebyls_worst'])} | "
            f"{_f(r['chebyls_exhaustive'])} | {_f(r['threshold_worst'])} | "
            f"{_f(r['threshold_exhaustive'])} | {_f(r['prop_b'])} | "
            f"{_f(r['worst_over_M_pow_s'])} |"
        )
    out += [
        "",
        "## Points and bases at the threshold N = D "
        f"(M = {cfg['points_workers']}, cond(T_S) median / p95 / max)",
        "",
        "| D | " + " | ".join(BASES) + " |",
        "|" + "---|" * (len(BASES) + 1),
    ]
    for r in summary["points"]:
        out.append(
            f"| {r['D']} | "
            + " | ".join(
                f"{_f(r[b]['median'])} / {_f(r[b]['p95'])} / {_f(r[b]['max'])}"
                for b in BASES
            )
            + " |"
        )
    out += [
        "",
        "## RepApprox: P(all K tasks exact) with N of M responding",
        "",
        "| K | c | M | N | exact | union | seed bound | Monte Carlo | interval |",
        "|" + "---|" * 9,
    ]
    for r in summary["recovery"]:
        out.append(
            f"| {r['K']} | {r['c']} | {r['M']} | {r['N']} | {r['exact']:.6f} | "
            f"{r['union']:.6f} | {r['seed_bound']:.6f} | "
            f"{r['monte_carlo']:.6f} | "
            f"[{r['ci_low']:.6f}, {r['ci_high']:.6f}] |"
        )
    out += [
        "",
        "## Speed",
        "",
        "| M | D | #N | trials | trials/s | SVDs/s | compile s |",
        "|" + "---|" * 7,
    ]
    for s in summary["speed"]:
        out.append(
            f"| {s['M']} | {s['D']} | {s['num_N']} | {s['trials']} | "
            f"{s['trials_per_s']:.4g} | {s['svds_per_s']:.4g} | "
            f"{s['compile_seconds']:.3g} |"
        )
    b = summary.get("benchmark")
    if b:
        out += [
            "",
            f"Benchmark (M={b['M']}, D={b['D']}, {len(b['responses'])} values "
            f"of N, {b['trials']} trials, {b['devices']} {b['backend']} "
            f"device(s)): "
            f"JAX {b['jax_trials_per_s']:.4g} trials/s (with sampling "
            f"{b['jax_mc_trials_per_s']:.4g}), numpy stacked SVD "
            f"{b['numpy_trials_per_s']:.4g} trials/s on the same sets: ratio "
            f"{b['ratio']:.3g} (with sampling {b['ratio_mc']:.3g}); agreement "
            f"max |diff| / (eps cond) = {b['max_rel_diff_over_eps_cond']:.3g}.",
        ]
    if plots:
        out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    out.append("")
    return "\n".join(out)


def print_table(summary: dict) -> None:
    print(
        f"{'M':>4} {'D':>3} {'N':>4} | {'eq med':>9} {'eq p95':>9} {'eq max':>9} | "
        f"{'PropB':>7} {'gap95':>7} {'Chmiss':>7} {'generic':>7}"
    )
    for r in summary["cond"]:
        b = r["bounds"]
        print(
            f"{r['M']:>4} {r['D']:>3} {r['N']:>4} | {_f(r['eq']['median']):>9} "
            f"{_f(r['eq']['p95']):>9} {_f(r['eq']['max']):>9} | "
            f"{_f(b['prop_b']):>7} {_f(b['gap_probabilistic']):>7} "
            f"{_f(b['chernoff_missing']):>7} {_f(b['chernoff_sampling']):>7}"
        )
    print(
        f"{'K':>3} {'c':>2} {'M':>4} {'N':>4} | {'exact':>9} {'union':>9} "
        f"{'seed':>9} {'MC':>9}"
    )
    for r in summary["recovery"]:
        print(
            f"{r['K']:>3} {r['c']:>2} {r['M']:>4} {r['N']:>4} | {r['exact']:9.6f} "
            f"{r['union']:9.6f} {r['seed_bound']:9.6f} {r['monte_carlo']:9.6f}"
        )
    for c in summary["checks"]:
        if not c["holds"]:
            print("FAILED:", c["name"])
    print(
        f"{summary['num_holding']} of {summary['num_checks']} checks hold; "
        f"{summary['seconds']:.0f} s"
    )
    b = summary.get("benchmark")
    if b:
        print(
            f"cond Monte Carlo: JAX {b['jax_trials_per_s']:.4g} trials/s vs numpy "
            f"{b['numpy_trials_per_s']:.4g} trials/s (ratio {b['ratio']:.3g})"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m theory.verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--quick",
        action="store_true",
        help="2,000 trials per configuration (under 3 minutes on 2 cores)",
    )
    p.add_argument(
        "--trials", type=int, default=None, help="override the trials per configuration"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--distributed",
        action="store_true",
        help="call jax.distributed.initialize() first: one process per "
        "host, all running this command (Slurm, Open MPI and Cloud "
        "TPU are detected; elsewhere give the three options below)",
    )
    p.add_argument("--coordinator", default=None, help="host:port of process 0")
    p.add_argument("--num-processes", type=int, default=None)
    p.add_argument("--process-id", type=int, default=None)
    p.add_argument(
        "--cpu-devices",
        type=int,
        default=None,
        help="CPU devices to shard over (default: one per core; ignored "
        "when XLA_FLAGS sets xla_force_host_platform_device_count); "
        "the numbers do not depend on it",
    )
    a = p.parse_args(argv)
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # must precede backend initialisation; affects the CPU platform only
        jax.config.update("jax_num_cpu_devices", a.cpu_devices or os.cpu_count() or 1)
    if a.distributed:
        _mc.initialize_distributed(a.coordinator, a.num_processes, a.process_id)
    over: dict[str, Any] = {
        "seed": a.seed,
        "plots": not a.no_plots,
        "progress": not a.no_progress,
    }
    if a.trials is not None:
        over.update(
            trials=a.trials, points_trials=a.trials, recovery_trials=max(a.trials, 1)
        )
    cfg = quick_config(**over) if a.quick else VerifyConfig(**over)
    summary = run(cfg, a.out)
    print_table(summary)
    return 0 if summary["all_hold"] else 1


if __name__ == "__main__":
    sys.exit(main())
