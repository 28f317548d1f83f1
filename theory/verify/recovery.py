"""Section 4: RepApprox's exact-recovery probability.

The Monte Carlo rate of exact recovery against the exact formula, the union bound and
the seed's bound, with Clopper-Pearson intervals; the exact formula against an
exhaustive enumeration of all subsets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

import codedjax.bounds as cb

from .. import montecarlo as mc
from .conditions import key
from .config import VerifyConfig, recovery_rows


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
    cfg: VerifyConfig, level: float, progress: Callable[[int], object] | None, **plan_kw
) -> tuple[list[dict], list[dict], list[dict]]:
    """(table rows, checks, plot curves) of every (K, c, M) and enumeration check."""
    rows, checks, curves = [], [], []
    for k, c, m in cfg.recovery_grid:
        counts = mc.recovery_monte_carlo(
            key(cfg.seed, 3, k, c, m),
            num_inputs=k,
            replication=c,
            num_workers=m,
            num_trials=cfg.recovery_trials,
            progress=progress,
            **plan_kw,
        )
        r, chk, curve = _recovery_block(k, c, m, counts, cfg.recovery_trials, level)
        rows += r
        checks += chk
        curves.append(curve)
    for k, c, m in cfg.enumeration_grid:
        checks.append(_enumeration_check(k, c, m))
    return rows, checks, curves


def _recovery_block(
    k: int, c: int, m: int, counts: np.ndarray, t: int, level: float
) -> tuple[list[dict], list[dict], dict]:
    exact = [cb.exact_recovery_probability(k, c, m, n) for n in range(m + 1)]
    union = [cb.recovery_probability_union(k, c, m, n) for n in range(m + 1)]
    seed = [cb.recovery_probability_bound(k, c, m, n) for n in range(m + 1)]
    ci = [cb.clopper_pearson(int(x), t, confidence=level) for x in counts]
    curve = {
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
    rows, checks = [], []
    for n in recovery_rows(k, c, m):
        lo, hi = cb.clopper_pearson(int(counts[n]), t, confidence=level)
        rows.append(
            {
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
        )
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
    return rows, checks, curve


def _enumeration_check(k: int, c: int, m: int) -> dict:
    enum = enumerate_recovery(k, c, m)
    err = max(
        abs(cb.exact_recovery_probability(k, c, m, n) - float(enum[n]))
        for n in range(m + 1)
    )
    return {
        "name": f"exact recovery formula = enumeration K={k} c={c} M={m}",
        "kind": "identity",
        "bound": "recovery_exact",
        "K": k,
        "c": c,
        "M": m,
        "max_abs_error": err,
        "holds": err <= 1e-12,
    }
