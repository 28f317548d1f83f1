"""Check the condition-number and RepApprox recovery bounds against Monte Carlo.

    python -m theory.verify --quick --out results/theory     # about a minute, 2 cores
    python -m theory.verify --out results/theory             # 100,000 trials each
    python -m theory.verify --workers 64 --inputs 5 --degree 2 --out DIR
    python -m theory.verify --workers 40 100 --inputs 8 --degree 3 \\
        --points first second --eta 0.01 --trials 20000 --out DIR
    python -m theory.verify --config grid.toml --out DIR     # TOML or JSON

Your own configuration: ``--workers`` M, ``--inputs`` K and ``--degree`` d (each
may be a list; every combination runs) give D = d (K - 1) + 1 coefficients, printed
for each; ``--points`` first | second (Chebyshev points of the first or second
kind), ``--eta`` the failure probability of the probabilistic bounds (default
0.05), ``--trials`` the random straggler sets per (M, D, N). Such a run checks the
condition-number bounds only (add ``recovery_grid`` etc. in a config file for the
other sections). A config file holds the same keys (``workers``, ``inputs``,
``degree``, ``points``, ``eta``, ``trials``, ``seed``) and any field of
:class:`VerifyConfig`; flags given on the command line override it. For example::

    # grid.toml
    workers = [40, 100]
    inputs = 8
    degree = [2, 3]
    points = ["first", "second"]
    eta = 0.01
    trials = 20000
    recovery_grid = [[8, 4, 40]]     # (K, c, M): also check RepApprox

What it does (maths in ``docs/theory.md``, functions in :mod:`codedjax.bounds`):

1. Condition numbers. For each (points, M, D) of the grid and N from D to M,
   uniformly random responding sets (first N of a uniform arrival order),
   cond(T_S) raw and cond(U_S) of the orthonormal basis U of T (first-kind points:
   the column equilibration T Lambda^{-1/2}; second kind: the QR factor), in float64
   (batched SVD, singular values only): median, p95, p99, the (1 - eta) quantile,
   max. Every bound is a bound on cond(U_S); cond(T_S) is within the factor cond(T)
   (sqrt(2) at first-kind points) of it, reported with the bounds. Every bound is
   compared with every trial:

   - deterministic bounds (Prop. B, and Prop. D's gap bound evaluated on each
     trial's own responding set; also cond(T_S) within cond(T) of cond(U_S)) must
     never be exceeded;
   - probabilistic bounds at confidence 1 - eta (generic Chernoff, Chernoff on the
     missing rows, probabilistic gap bound capped by Prop. B): the exceedance rate
     gets a Clopper-Pearson interval, and the bound is *violated* only when the
     whole interval lies above eta; the report gives each check's power, the
     smallest exceedance rate it could have flagged;
   - the exact complement identity (Prop. A, from the missing rows alone) against
     the SVD, wherever float64 can resolve it (tolerance from eps and cond^2).

   A bound that is infinite (vacuous) is not a check that held: it is counted as
   vacuous, and the headline counts only informative (finite) checks. Second-kind
   points get the coherence-based bounds (Prop. B, C and the generic Chernoff bound,
   with the leverage scores of :func:`codedjax.bounds.leverage_scores`); the gap
   bounds assume first-kind points and are "not applicable" there.

2. The exhaustive worst case over all straggler sets for small M (M <= 24, s <= 3)
   for ChebyLS at first-kind points, next to the threshold decoder's worst case (the
   worst D-subset: any D responders can arrive first), cross-checked with
   ``threshold_decode``.
3. First-kind, second-kind and equispaced points, Chebyshev against monomial basis,
   at the threshold N = D.
4. RepApprox: the Monte Carlo rate of exact recovery against the exact formula, the
   union bound and the seed's bound, with intervals; the exact formula against an
   exhaustive enumeration of all subsets.

Intervals: every Clopper-Pearson interval is taken at the per-interval level
1 - (1 - family_confidence) / (number of intervals) (Bonferroni over the informative
probabilistic checks and the RepApprox rows), so that all of them hold together with
probability >= family_confidence (0.99).

Trials are vmapped in chunks and sharded over every device (``jax.shard_map`` over a
1-D mesh); trial t uses the key ``fold_in(key, t)``, so the numbers do not depend on
the device count or the chunk size. Several hosts: run the same command on every
host with ``--distributed`` (Slurm, Open MPI and Cloud TPU are detected, elsewhere
add ``--coordinator host:port --num-processes P --process-id i``); process 0 writes
the outputs. The speed of the Monte Carlo against numpy is measured by
``python -m benchmarks.mc_speed``.

Outputs in ``--out``: ``summary.json`` (``checks``: one ``{"name", "holds", ...}`` per
bound and configuration, ``holds`` null for a vacuous bound; ``headline``;
``bounds``: the per-bound verdicts; ``recovery``: rows ``{"K", "c", "M", "N",
"exact", "union", "seed_bound", "monte_carlo", "ci_low", "ci_high"}``), ``report.md``
and PNG plots. Non-finite numbers (vacuous bounds) are written as ``null``.
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

from . import _common as C
from . import _mc, _report

EPS = C.EPS
BASES = C.BASES

CondEntry = tuple  # (M, (D, ...)) or (M, (D, ...), points)


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    """Everything the verification run depends on (the full mode by default).

    ``cond_grid`` entries are (M, (D, ...)) for first-kind points or
    (M, (D, ...), "second"); an empty grid (or tuple) skips a section.
    """

    cond_grid: tuple[CondEntry, ...] = (
        (40, (7, 13, 20, 30)),
        (100, (13, 25)),
        (200, (20, 40)),
        (40, (7, 13, 20, 30), "second"),
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
    )
    base.update(overrides)
    return VerifyConfig(**base)


def user_config(
    *,
    workers: tuple[int, ...],
    inputs: tuple[int, ...],
    degree: tuple[int, ...],
    points: tuple[str, ...] = ("first",),
    **overrides: Any,
) -> VerifyConfig:
    """The condition-number section for every (M, K, d, points) combination.

    D = d (K - 1) + 1. The other sections are off unless ``overrides`` set them.

    Raises:
        ValueError: D > M, sizes below 1, an unknown point kind (message names the
        command-line flag).
    """
    for flag, vals in (("--workers", workers), ("--inputs", inputs)):
        for v in vals:
            if int(v) < 1:
                raise ValueError(f"argument {flag}: must be >= 1, got {v}")
    for v in degree:
        if int(v) < 1:
            raise ValueError(f"argument --degree: must be >= 1, got {v}")
    for p in points:
        if p not in C.POINT_KINDS:
            raise ValueError(
                f"argument --points: must be one of {', '.join(C.POINT_KINDS)}, "
                f"got {p!r}"
            )
    grid = []
    for p in dict.fromkeys(points):
        for m in dict.fromkeys(int(v) for v in workers):
            ds = []
            for k in inputs:
                for d in degree:
                    dd = coefficients(int(k), int(d))
                    if dd > m:
                        raise ValueError(
                            f"argument --workers: D = d(K-1)+1 = {dd} for --inputs "
                            f"{k} --degree {d} exceeds --workers {m} (need D <= M)"
                        )
                    if p == "second" and m < 2:
                        raise ValueError(
                            "argument --workers: second-kind points need M >= 2"
                        )
                    ds.append(dd)
            grid.append((m, tuple(sorted(set(ds))), p))
    base = dict(
        cond_grid=tuple(grid),
        trials=10_000,
        exhaustive_workers=(),
        points_coeffs=(),
        recovery_grid=(),
        enumeration_grid=(),
    )
    base.update(overrides)
    return VerifyConfig(**base)


def coefficients(num_inputs: int, degree: int) -> int:
    """D = d (K - 1) + 1: the coefficients of f(u(z)) for K inputs, degree d."""
    return degree * (num_inputs - 1) + 1


def cond_blocks(cfg: VerifyConfig) -> list[tuple[str, int, int]]:
    """(points, M, D) of every block of the condition-number section."""
    out = []
    for entry in cfg.cond_grid:
        m, ds = int(entry[0]), entry[1]
        p = entry[2] if len(entry) > 2 else "first"
        out += [(C.check_points(p), m, int(d)) for d in ds]
    return out


def validate(cfg: VerifyConfig) -> None:
    """Raise ValueError for a configuration the run cannot do."""
    if not 0.0 < cfg.eta < 1.0:
        raise ValueError(f"argument --eta: must lie in (0, 1), got {cfg.eta}")
    if not 0.0 < cfg.family_confidence < 1.0:
        raise ValueError(
            f"family_confidence must lie in (0, 1), got {cfg.family_confidence}"
        )
    for name in ("trials", "points_trials", "recovery_trials"):
        if int(getattr(cfg, name)) < 1:
            raise ValueError(
                f"argument --trials: {name} must be >= 1, got {getattr(cfg, name)}"
            )
    for _p, m, d in cond_blocks(cfg):
        if not 1 <= d <= m:
            raise ValueError(f"cond_grid: need 1 <= D <= M, got M={m}, D={d}")
    for k, c, m in cfg.recovery_grid:
        if k * c > m:
            raise ValueError(f"recovery_grid: need K c <= M, got K={k} c={c} M={m}")


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
    ms = [m for _, m, _ in cond_blocks(cfg)]
    trials = [cfg.trials] if ms else []
    if cfg.points_coeffs:
        ms.append(cfg.points_workers)
        trials.append(cfg.points_trials)
    if cfg.recovery_grid:
        ms += [m for _, _, m in cfg.recovery_grid]
        trials.append(cfg.recovery_trials)
    if not ms:
        return 1, _mc.fit_chunk(cfg.chunk, 1, mesh)
    return max(ms), _mc.fit_chunk(cfg.chunk, min(trials), mesh)


def _num_intervals(cfg: VerifyConfig) -> int:
    """Bonferroni family: informative probabilistic checks and RepApprox rows."""
    n = 0
    for p, m, d in cond_blocks(cfg):
        for b in C.BOUNDS:
            if b.kind != "probabilistic":
                continue
            for nn in response_grid(m, d):
                v = C.bound_value(b.name, p, m, d, nn, cfg.eta)
                n += v is not None and math.isfinite(v)
    n += sum(len(recovery_rows(*g)) for g in cfg.recovery_grid)
    return max(n, 1)


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


def _stats(a: np.ndarray, eta: float = 0.05) -> dict:
    # order statistics (no interpolation): defined when some trials are inf
    def q(p):
        return _num(np.quantile(a, p, method="inverted_cdf"))

    big = ~np.isfinite(a) | (a > C.COND_UNRESOLVED)
    return {
        "median": q(0.5),
        "p95": q(0.95),
        "p99": q(0.99),
        "q_eta": q(1.0 - eta),
        "max": _num(np.max(a)),
        "unresolved_fraction": float(np.mean(big)),
    }


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
    points: str = "first",
) -> tuple[list[dict], list[dict]]:
    """Statistics and checks of one (points, M, D) block; returns (rows, checks)."""
    rows, checks = [], []
    t = samples.eq.shape[0]
    factor = C.raw_factor(points, m, d)
    na = [b.name for b in C.BOUNDS + C.PER_TRIAL_BOUNDS if points not in b.points]
    u_full = None
    if points != "first":
        with jax.enable_x64(True):
            u_full = np.asarray(_mc.bases(m, d, points)[1])
    for j, n in enumerate(responses):
        raw, eq = samples.raw[:, j], samples.eq[:, j]
        # cond computed by a backward-stable SVD: relative error <~ sqrt(N D) eps cond
        tol = 8.0 * math.sqrt(n * d) * EPS * np.where(np.isfinite(eq), eq, 0.0)
        kind_tag = "" if points == "first" else f" {points}-kind"
        tag = f"M={m} D={d} N={n}{kind_tag}"
        base = {"points": points, "M": m, "D": d, "N": n, "trials": t}
        row = dict(
            base,
            raw=_stats(raw, eta),
            eq=_stats(eq, eta),
            eta=eta,
            raw_factor=factor,
            bounds={},
            exceed={},
            not_applicable=na,
        )

        det = C.bound_value("prop_b", points, m, d, n, eta)
        vac = not math.isfinite(det)
        k = _exceed(eq, det, tol)
        checks.append(
            dict(
                base,
                name=f"deterministic (Prop. B) {tag}",
                kind="deterministic",
                bound="prop_b",
                value=_num(det),
                vacuous=vac,
                exceed=k,
                holds=None if vac else k == 0,
            )
        )
        row["bounds"]["prop_b"] = _num(det)
        row["exceed"]["prop_b"] = k

        if points == "first":
            g, wr = samples.gap[:, j].astype(np.float64), samples.wratio[:, j]
            rho = g * (d - 1) / m
            with np.errstate(invalid="ignore", divide="ignore"):
                gb = np.where(
                    rho < 1.0, np.sqrt(wr) * (1.0 + rho) / (1.0 - rho), np.inf
                )
            k = _exceed(eq, gb, tol)
            inf_trials = int(np.isfinite(gb).sum())
            checks.append(
                dict(
                    base,
                    name=f"gap bound per trial (Prop. D) {tag}",
                    kind="deterministic",
                    bound="gap_deterministic",
                    informative_trials=inf_trials,
                    vacuous=inf_trials == 0,
                    exceed=k,
                    holds=None if inf_trials == 0 else k == 0,
                )
            )
            row["exceed"]["gap_deterministic"] = k
            row["gap_bound_informative"] = inf_trials

        # a claim relating two computed cond values is testable only where float64
        # resolves both (tol < 1/2); beyond that (cond ~ 1/eps, e.g. N = D = 40 at
        # M = 200, where cond reaches 1e20) the SVD gives noise or inf for either
        worst = np.maximum(
            np.where(np.isfinite(raw), raw, np.inf),
            np.where(np.isfinite(eq), eq, np.inf),
        )
        resolved = 8.0 * math.sqrt(n * d) * EPS * worst < 0.5
        k = _exceed(raw[resolved], factor * eq[resolved], tol[resolved]) + _exceed(
            eq[resolved], factor * raw[resolved], tol[resolved]
        )
        checks.append(
            dict(
                base,
                name=f"raw within cond(T) = {factor:.4g} of equilibrated {tag}",
                kind="deterministic",
                bound="equilibration",
                factor=factor,
                exceed=k,
                unresolved_trials=int(t - resolved.sum()),
                holds=k == 0,
            )
        )

        for b in C.BOUNDS:
            if b.kind != "probabilistic" or points not in b.points:
                continue
            val = C.bound_value(b.name, points, m, d, n, eta)
            row["bounds"][b.name] = _num(val)
            chk = dict(
                base,
                name=f"{b.label} at eta={eta} {tag}",
                kind="probabilistic",
                bound=b.name,
                value=_num(val),
                eta=eta,
            )
            if not math.isfinite(val):
                checks.append(dict(chk, vacuous=True, holds=None))
                continue
            k = _exceed(eq, val, tol)
            lo, hi = cb.clopper_pearson(k, t, confidence=level)
            checks.append(
                dict(
                    chk,
                    vacuous=False,
                    exceed=k,
                    rate=k / t,
                    ci_low=lo,
                    ci_high=hi,
                    confidence=level,
                    detectable_rate=C.detectable_rate(t, eta, level),
                    holds=not lo > eta,
                )
            )
            row["exceed"][b.name] = k

        # Prop. A from the missing rows alone, on the first trials' responding sets
        orders = samples.orders[:identity_trials]
        worst_err, tested = 0.0, 0
        for i, order in enumerate(orders):
            kappa = float(eq[i])
            s = m - n
            tol_id = 8.0 * (s * d * kappa**2 + math.sqrt(n * d) * kappa) * EPS
            if not math.isfinite(kappa) or tol_id > 0.1:
                continue
            mask = np.zeros(m, bool)
            mask[order[:n]] = True
            if points == "first":
                k_id = cb.complement_condition_number(mask, num_coeffs=d)
            else:
                k_id = C.complement_identity(u_full, mask)
            worst_err = max(worst_err, abs(k_id / kappa - 1.0) / tol_id)
            tested += 1
        checks.append(
            dict(
                base,
                name=f"complement identity (Prop. A) {tag}",
                kind="identity",
                bound="prop_a",
                tested=tested,
                max_error_over_tolerance=worst_err,
                holds=worst_err <= 1.0,
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
            "points": "first",
            "M": m,
            "D": d,
            "cond_raw": c_raw,
            "cond_eq": c_eq,
            "holds": bool(ok),
        }
    ]


def informative_ranges(points: str, m: int, d: int, eta: float) -> dict:
    """Per bound: [first N, last N] where it is finite on N = D..M, or None."""
    curves = C.bound_curves(points, m, d, eta)
    out = {}
    for b in C.BOUNDS:
        if b.name in curves:
            r = C.informative_range(curves[b.name], d)
            out[b.name] = list(r) if r else None
    return out


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
                    base = {
                        "points": "first",
                        "M": m,
                        "D": d,
                        "s": s,
                        "N": n,
                        "kind": "deterministic",
                    }
                    checks.append(
                        dict(
                            base,
                            name=f"worst case <= Prop. B {tag}",
                            bound="prop_b",
                            worst=kap,
                            value=_num(pb),
                            vacuous=not math.isfinite(pb),
                            holds=(
                                None
                                if not math.isfinite(pb)
                                else not kap > pb * (1 + tol)
                            ),
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
                            holds=(
                                None
                                if not math.isfinite(gb)
                                else not kap > gb * (1 + tol)
                            ),
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
        ci = [cb.clopper_pearson(int(x), t, confidence=level) for x in counts]
        curves.append(
            {
                "K": k,
                "c": c,
                "M": m,
                "exact": exact,
                "union": union,
                "seed_bound": seed,
                "monte_carlo": (counts / t).tolist(),
                "ci_low": [lo for lo, _ in ci],
                "ci_high": [hi for _, hi in ci],
                "confidence": level,
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
# ----------------------------------------------------------------------------------
# the run


def run(cfg: VerifyConfig, out: str) -> dict:
    """Run every section, write ``summary.json``, ``report.md`` and plots to ``out``."""
    from tqdm.auto import tqdm

    validate(cfg)
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
    cond_rows, checks, speed, blocks = [], [], [], []
    sections: dict[str, float] = {}
    t_sec = time.perf_counter()
    todo = cond_blocks(cfg)
    bar = new_bar(len(todo) * cfg.trials, "cond(T_S) trials")
    for points, m, d in todo:
        resp = response_grid(m, d)
        bar.set_postfix_str(f"cond {points} M={m} D={d}")
        smp = _mc.cond_monte_carlo(
            _key(cfg.seed, 1, m, d) if points == "first" else _key(cfg.seed, 5, m, d),
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
            **({} if points == "first" else {"points": points}),
        )
        rows, chk = analyse_cond(
            smp,
            m=m,
            d=d,
            responses=resp,
            eta=cfg.eta,
            level=level,
            identity_trials=cfg.identity_trials,
            points=points,
        )
        cond_rows += rows
        checks += (orthogonality_checks(m, d) if points == "first" else []) + chk
        blocks.append(
            {
                "points": points,
                "M": m,
                "D": d,
                "raw_factor": C.raw_factor(points, m, d),
                "coherence": C.max_leverage_times_m(points, m, d) / d,
                "informative_N": informative_ranges(points, m, d, cfg.eta),
                "not_applicable": rows[0]["not_applicable"] if rows else [],
            }
        )
        speed.append(
            {
                "points": points,
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
    point_rows, rec_rows, curves, ex_rows = [], [], [], []
    if cfg.points_coeffs:
        t_sec = time.perf_counter()
        bar = new_bar(len(cfg.points_coeffs) * cfg.points_trials, "points and bases")
        point_rows, chk = points_comparison(
            cfg, bar.update, chunk=chunk, width=width, mesh=mesh
        )
        bar.close()
        checks += chk
        sections["points and bases"] = time.perf_counter() - t_sec
    if cfg.recovery_grid or cfg.enumeration_grid:
        t_sec = time.perf_counter()
        bar = new_bar(len(cfg.recovery_grid) * cfg.recovery_trials, "RepApprox trials")
        rec_rows, chk, curves = recovery_section(
            cfg, level, bar.update, chunk=chunk, width=width, mesh=mesh
        )
        bar.close()
        checks += chk
        sections["RepApprox"] = time.perf_counter() - t_sec
    if cfg.exhaustive_workers:
        t_sec = time.perf_counter()
        ex_rows, chk = exhaustive_worst_case(cfg)
        checks += chk
        sections["exhaustive worst case"] = time.perf_counter() - t_sec
    seconds = time.perf_counter() - t_start
    verdict = _report.verdict(checks)
    summary = {
        "config": dataclasses.asdict(cfg),
        "devices": [str(dv) for dv in jax.devices()],
        "backend": jax.default_backend(),
        "interval_confidence": level,
        "family_confidence": cfg.family_confidence,
        "eta": cfg.eta,
        # every check, vacuous ones included (their ``holds`` is null)
        "num_checks": len(checks),
        "num_holding": sum(c["holds"] is True for c in checks),
        **verdict,
        "all_hold": verdict["num_informative_holding"] == verdict["num_informative"],
        "seconds": seconds,
        "section_seconds": sections,
        "chunk": chunk,
        "width": width,
        "blocks": blocks,
        "bounds": _report.bound_summary(checks, blocks),
        "checks": [_clean(c) for c in checks],
        "recovery": [_clean(r) for r in rec_rows],
        "cond": [_clean(r) for r in cond_rows],
        "points": [_clean(r) for r in point_rows],
        "exhaustive": [_clean(r) for r in ex_rows],
        "speed": [_clean(s) for s in speed],
    }
    summary = _clean(summary)
    if _mc.is_writer():
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, allow_nan=False)
        plots = []
        if cfg.plots:
            from . import _plots

            plots = _plots.write_plots(out, summary, curves)
        text = _report.report(summary, plots)
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


# ----------------------------------------------------------------------------------
# command line

_USER_KEYS = ("workers", "inputs", "degree", "points", "eta", "trials", "seed")


def load_config_file(path: str) -> dict:
    """Read a TOML (``.toml``) or JSON file of run settings.

    Keys: ``workers``, ``inputs``, ``degree``, ``points`` (each a value or a list),
    ``eta``, ``trials``, ``seed``, and any :class:`VerifyConfig` field (lists become
    tuples).

    Raises:
        ValueError: unreadable file or an unknown key (naming ``--config``).
    """
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as f:
                data = tomllib.load(f)
        else:
            with open(path) as f:
                data = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"argument --config: cannot read {path!r}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"argument --config: {path!r} must hold a table of settings")
    fields = {f.name for f in dataclasses.fields(VerifyConfig)}
    unknown = sorted(set(data) - fields - set(_USER_KEYS))
    if unknown:
        raise ValueError(
            f"argument --config: unknown key(s) {', '.join(unknown)} in {path!r}; "
            f"allowed: {', '.join(_USER_KEYS)} and the VerifyConfig fields"
        )
    return data


def _tuples(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    return x


def _listify(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def build_config(a: argparse.Namespace) -> tuple[VerifyConfig, list[str]]:
    """The run configuration from the parsed flags (and ``--config``).

    Returns (config, lines to print: the D of each (K, d)). Raises ValueError with a
    message that names the flag.
    """
    data = load_config_file(a.config) if a.config else {}
    for key in ("workers", "inputs", "degree", "points", "eta", "trials", "seed"):
        val = getattr(a, key)
        if val is not None:
            data[key] = val
    user = {k: data.pop(k) for k in ("workers", "inputs", "degree") if k in data}
    points = data.pop("points", None)
    over: dict[str, Any] = {k: _tuples(v) for k, v in data.items()}
    over.update(plots=not a.no_plots, progress=not a.no_progress)
    trials = over.pop("trials", None)
    if trials is not None:
        over.update(
            trials=trials,
            points_trials=over.get("points_trials", trials),
            recovery_trials=over.get("recovery_trials", max(trials, 1)),
        )
    if "eta" in over and not 0.0 < float(over["eta"]) < 1.0:
        raise ValueError(f"argument --eta: must lie in (0, 1), got {over['eta']}")
    lines = []
    if user:
        missing = [f"--{k}" for k in ("workers", "inputs", "degree") if k not in user]
        if missing:
            raise ValueError(
                f"argument {missing[0]}: required with "
                + " and ".join(f"--{k}" for k in user)
                + " (give --workers, --inputs and --degree together)"
            )
        ws, ks, dg = (_listify(user[k]) for k in ("workers", "inputs", "degree"))
        if a.quick and "trials" not in over:
            over["trials"] = 2000
        cfg = user_config(
            workers=tuple(int(v) for v in ws),
            inputs=tuple(int(v) for v in ks),
            degree=tuple(int(v) for v in dg),
            points=_listify(points if points is not None else "first"),
            **over,
        )
        for k in dict.fromkeys(ks):
            for d in dict.fromkeys(dg):
                lines.append(
                    f"K = {k} inputs, degree d = {d}: D = d(K-1)+1 = "
                    f"{coefficients(int(k), int(d))} coefficients"
                )
    else:
        if points is not None:
            pts = _listify(points)
            for p in pts:
                if p not in C.POINT_KINDS:
                    raise ValueError(
                        f"argument --points: must be one of "
                        f"{', '.join(C.POINT_KINDS)}, got {p!r}"
                    )
            base = quick_config() if a.quick else VerifyConfig()
            grid = tuple(
                (e[0], e[1], p)
                for p in dict.fromkeys(pts)
                for e in base.cond_grid
                if len(e) == 2
            )
            over.setdefault("cond_grid", grid)
        cfg = quick_config(**over) if a.quick else VerifyConfig(**over)
    validate(cfg)
    return cfg, lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m theory.verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--quick",
        action="store_true",
        help="2,000 trials per configuration (about a minute on 2 cores)",
    )
    p.add_argument(
        "--workers", type=int, nargs="+", default=None, metavar="M", help="M workers"
    )
    p.add_argument(
        "--inputs", type=int, nargs="+", default=None, metavar="K", help="K inputs"
    )
    p.add_argument(
        "--degree",
        type=int,
        nargs="+",
        default=None,
        metavar="d",
        help="degree d of the computed polynomial (D = d(K-1)+1)",
    )
    p.add_argument(
        "--points",
        nargs="+",
        default=None,
        metavar="KIND",
        help="Chebyshev points of the first and/or second kind (default first)",
    )
    p.add_argument(
        "--eta",
        type=float,
        default=None,
        help="failure probability of the probabilistic bounds (default 0.05)",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="random straggler sets per (M, D, N) (default 100,000; --quick "
        "2,000; with --workers 10,000)",
    )
    p.add_argument(
        "--config", default=None, metavar="FILE", help="TOML or JSON run settings"
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run first (one process per host, all running "
        "this command; Slurm, Open MPI and Cloud TPU are detected; elsewhere give "
        "the three options below)",
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
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    a = p.parse_args(argv)
    try:
        cfg, lines = build_config(a)
    except ValueError as err:
        p.error(str(err))
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # must precede backend initialisation; affects the CPU platform only
        jax.config.update("jax_num_cpu_devices", a.cpu_devices or os.cpu_count() or 1)
    if a.distributed:
        _mc.initialize_distributed(a.coordinator, a.num_processes, a.process_id)
    for line in lines:
        print(line)
    summary = run(cfg, a.out)
    _report.print_table(summary)  # every process: the same numbers
    return 0 if summary["all_hold"] else 1


if __name__ == "__main__":
    sys.exit(main())
