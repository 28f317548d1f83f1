"""Section 2: the exhaustive worst case over every straggler set (small M).

ChebyLS's worst cond(U_S) over all N-subsets (N = M - s, s <= 3) at first-kind points,
next to the threshold decoder's worst case (the worst D-subset: any D responders can
arrive first), cross-checked with ``threshold_decode``, and compared with Prop. B, the
gap bound and the complement identity on the worst set.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import codedjax as cj
import codedjax.bounds as cb

from .. import _common as C
from .conditions import num
from .config import VerifyConfig

EPS = C.EPS


def exhaustive_worst_case(cfg: VerifyConfig) -> tuple[list[dict], list[dict]]:
    """ChebyLS worst case over all N-subsets vs the threshold decoder's worst case."""
    rows, checks = [], []
    with jax.enable_x64(True):
        for m in cfg.exhaustive_workers:
            alpha = cj.chebyshev_points(m, kind=1, dtype=jnp.float64)
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
                check = (
                    cfg.decoder_check_workers is None or m in cfg.decoder_check_workers
                )
                if check:
                    checks += _threshold_decoder_check(alpha, thr, m, d)
                for s in range(1, cfg.exhaustive_missing + 1):
                    if m - s < d:
                        continue
                    row, chk = _missing(cfg, alpha, thr, m, d, s)
                    rows.append(row)
                    checks += chk
    return rows, checks


def _threshold_decoder_check(alpha, thr, m: int, d: int) -> list[dict]:
    """The library's threshold decoder on the worst D-set reports the same cond."""
    tol = 32.0 * d * EPS * thr.cond
    if not tol < 0.1:
        return []
    beta = cj.chebyshev_points(2, kind=1, dtype=jnp.float64)
    res = cj.threshold_decode(
        jnp.zeros((m, 1), jnp.float64),
        jnp.asarray(thr.mask),
        alpha,
        beta,
        num_coeffs=d,
        order=jnp.arange(m, dtype=jnp.int32),
    )
    c_dec = float(res.cond)
    return [
        {
            "name": f"threshold_decode cond = worst-case search M={m} D={d}",
            "kind": "identity",
            "M": m,
            "D": d,
            "search": thr.cond,
            "decoder": c_dec,
            "holds": abs(c_dec / thr.cond - 1.0) <= tol,
        }
    ]


def _missing(
    cfg: VerifyConfig, alpha, thr, m: int, d: int, s: int
) -> tuple[dict, list[dict]]:
    """The row and the checks of s missing workers (N = M - s)."""
    n = m - s
    ls = cj.worst_case_mask(
        alpha,
        num_coeffs=d,
        num_responses=n,
        max_candidates=cfg.exhaustive_max_candidates,
    )
    pb = cb.deterministic_condition_bound(num_workers=m, num_coeffs=d, num_responses=n)
    gb = cb.gap_condition_bound(ls.mask, num_coeffs=d)
    ident = cb.complement_condition_number(ls.mask, num_coeffs=d)
    kap = ls.cond
    tol = 8.0 * (math.sqrt(n * d) * kap + s * d * kap**2) * EPS
    tag = f"M={m} D={d} s={s}"
    row = {
        "M": m,
        "D": d,
        "s": s,
        "N": n,
        "chebyls_worst": kap,
        "chebyls_exhaustive": ls.exhaustive,
        "threshold_worst": thr.cond,
        "threshold_exhaustive": thr.exhaustive,
        "prop_b": num(pb),
        "gap_bound_on_worst": num(gb),
        "identity_on_worst": num(ident),
        "worst_over_M_pow_s": kap / m**s,
    }
    base = {"points": "first", "M": m, "D": d, "s": s, "N": n, "kind": "deterministic"}
    checks = [_below(base, f"worst case <= Prop. B {tag}", "prop_b", kap, pb, tol)]
    if s == 1:
        checks.append(
            dict(
                base,
                name=f"Prop. B tight at s=1 {tag}",
                bound="prop_b",
                worst=kap,
                value=num(pb),
                holds=abs(kap / pb - 1.0) <= tol,
            )
        )
    checks.append(
        _below(base, f"gap bound on worst set {tag}", "gap_deterministic", kap, gb, tol)
    )
    if tol < 0.1:
        checks.append(
            dict(
                base,
                kind="identity",
                name=f"complement identity on worst set {tag}",
                bound="prop_a",
                worst=kap,
                value=ident,
                holds=abs(ident / kap - 1.0) <= tol,
            )
        )
    return row, checks


def _below(base: dict, name: str, bound: str, kap: float, b: float, tol: float):
    """The worst cond is at most the bound (no verdict where the bound is vacuous)."""
    vac = not math.isfinite(b)
    return dict(
        base,
        name=name,
        bound=bound,
        worst=kap,
        value=num(b),
        vacuous=vac,
        holds=None if vac else not kap > b * (1 + tol),
    )
