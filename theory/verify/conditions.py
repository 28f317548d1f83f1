"""Section 1: cond(T_S) and cond(U_S) of random responding sets against every bound.

:func:`analyse_cond` turns the Monte Carlo samples of one (points, M, D) block into
rows of statistics and one check per bound and N: deterministic bounds must never be
exceeded, probabilistic ones are judged by a Clopper-Pearson interval, and the
complement identity (Prop. A) is compared with the SVD.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import numpy as np

import codedjax.bounds as cb

from .. import _common as C
from .. import montecarlo as mc

EPS = C.EPS


def key(seed: int, *parts: int) -> jax.Array:
    """The Monte Carlo key of one section and configuration: fold_in of each part."""
    k = jax.random.key(seed)
    for p in parts:
        k = jax.random.fold_in(k, p)
    return k


def num(x: Any) -> Any:
    """JSON-safe number: non-finite floats become None."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else None


def stats(a: np.ndarray, eta: float = 0.05) -> dict:
    """Median, p95, p99, the (1 - eta) quantile and max of a sample of cond values."""

    # order statistics (no interpolation): defined when some trials are inf
    def q(p):
        return num(np.quantile(a, p, method="inverted_cdf"))

    big = ~np.isfinite(a) | (a > C.COND_UNRESOLVED)
    return {
        "median": q(0.5),
        "p95": q(0.95),
        "p99": q(0.99),
        "q_eta": q(1.0 - eta),
        "max": num(np.max(a)),
        "unresolved_fraction": float(np.mean(big)),
    }


def _exceed(values: np.ndarray, bound: np.ndarray | float, tol: np.ndarray) -> int:
    """Trials above the bound by more than the float64 error of cond itself."""
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), values.shape)
    over = np.isfinite(b) & (values > b * (1.0 + tol))
    return int(np.count_nonzero(over))


class _At(NamedTuple):
    """One N of a block: what every check of it needs."""

    points: str
    m: int
    d: int
    n: int
    eta: float
    tag: str  # "M=.. D=.. N=..[ second-kind]"
    base: dict  # the keys every check and row of this N starts with
    tol: np.ndarray  # per trial: the float64 error of the computed cond(U_S)


def analyse_cond(
    samples: mc.CondSamples,
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
            u_full = np.asarray(mc.bases(m, d, points)[1])
    for j, n in enumerate(responses):
        raw, eq = samples.raw[:, j], samples.eq[:, j]
        # cond computed by a backward-stable SVD: relative error <~ sqrt(N D) eps cond
        tol = 8.0 * math.sqrt(n * d) * EPS * np.where(np.isfinite(eq), eq, 0.0)
        kind_tag = "" if points == "first" else f" {points}-kind"
        base = {"points": points, "M": m, "D": d, "N": n, "trials": t}
        at = _At(points, m, d, n, eta, f"M={m} D={d} N={n}{kind_tag}", base, tol)
        row = dict(
            base,
            raw=stats(raw, eta),
            eq=stats(eq, eta),
            eta=eta,
            raw_factor=factor,
            bounds={},
            exceed={},
            not_applicable=na,
        )
        checks.append(_prop_b_check(at, row, eq))
        if points == "first":
            checks.append(_gap_check(at, row, eq, samples, j))
        checks.append(_equilibration_check(at, raw, eq, factor))
        checks += _probabilistic_checks(at, row, eq, level)
        orders = samples.orders[:identity_trials]
        checks.append(_identity_check(at, eq, orders, u_full))
        rows.append(row)
    return rows, checks


def _prop_b_check(at: _At, row: dict, eq: np.ndarray) -> dict:
    det = C.bound_value("prop_b", at.points, at.m, at.d, at.n, at.eta)
    vac = not math.isfinite(det)
    k = _exceed(eq, det, at.tol)
    row["bounds"]["prop_b"] = num(det)
    row["exceed"]["prop_b"] = k
    return dict(
        at.base,
        name=f"deterministic (Prop. B) {at.tag}",
        kind="deterministic",
        bound="prop_b",
        value=num(det),
        vacuous=vac,
        exceed=k,
        holds=None if vac else k == 0,
    )


def _gap_check(
    at: _At, row: dict, eq: np.ndarray, samples: mc.CondSamples, j: int
) -> dict:
    """Prop. D's gap bound evaluated on each trial's own responding set."""
    g, wr = samples.gap[:, j].astype(np.float64), samples.wratio[:, j]
    rho = g * (at.d - 1) / at.m
    with np.errstate(invalid="ignore", divide="ignore"):
        gb = np.where(rho < 1.0, np.sqrt(wr) * (1.0 + rho) / (1.0 - rho), np.inf)
    k = _exceed(eq, gb, at.tol)
    inf_trials = int(np.isfinite(gb).sum())
    row["exceed"]["gap_deterministic"] = k
    row["gap_bound_informative"] = inf_trials
    return dict(
        at.base,
        name=f"gap bound per trial (Prop. D) {at.tag}",
        kind="deterministic",
        bound="gap_deterministic",
        informative_trials=inf_trials,
        vacuous=inf_trials == 0,
        exceed=k,
        holds=None if inf_trials == 0 else k == 0,
    )


def _equilibration_check(
    at: _At, raw: np.ndarray, eq: np.ndarray, factor: float
) -> dict:
    """cond(T_S) and cond(U_S) within the factor cond(T) of each other."""
    # a claim relating two computed cond values is testable only where float64
    # resolves both (tol < 1/2); beyond that (cond ~ 1/eps, e.g. N = D = 40 at
    # M = 200, where cond reaches 1e20) the SVD gives noise or inf for either
    worst = np.maximum(
        np.where(np.isfinite(raw), raw, np.inf),
        np.where(np.isfinite(eq), eq, np.inf),
    )
    resolved = 8.0 * math.sqrt(at.n * at.d) * EPS * worst < 0.5
    tol = at.tol[resolved]
    k = _exceed(raw[resolved], factor * eq[resolved], tol) + _exceed(
        eq[resolved], factor * raw[resolved], tol
    )
    return dict(
        at.base,
        name=f"raw within cond(T) = {factor:.4g} of equilibrated {at.tag}",
        kind="deterministic",
        bound="equilibration",
        factor=factor,
        exceed=k,
        unresolved_trials=int(eq.shape[0] - resolved.sum()),
        holds=k == 0,
    )


def _probabilistic_checks(
    at: _At, row: dict, eq: np.ndarray, level: float
) -> list[dict]:
    """Every probabilistic bound at 1 - eta: violated only if the whole interval of
    its exceedance rate lies above eta."""
    out = []
    t = eq.shape[0]
    for b in C.BOUNDS:
        if b.kind != "probabilistic" or at.points not in b.points:
            continue
        val = C.bound_value(b.name, at.points, at.m, at.d, at.n, at.eta)
        row["bounds"][b.name] = num(val)
        chk = dict(
            at.base,
            name=f"{b.label} at eta={at.eta} {at.tag}",
            kind="probabilistic",
            bound=b.name,
            value=num(val),
            eta=at.eta,
        )
        if not math.isfinite(val):
            out.append(dict(chk, vacuous=True, holds=None))
            continue
        k = _exceed(eq, val, at.tol)
        lo, hi = cb.clopper_pearson(k, t, confidence=level)
        out.append(
            dict(
                chk,
                vacuous=False,
                exceed=k,
                rate=k / t,
                ci_low=lo,
                ci_high=hi,
                confidence=level,
                detectable_rate=C.detectable_rate(t, at.eta, level),
                holds=not lo > at.eta,
            )
        )
        row["exceed"][b.name] = k
    return out


def _identity_check(
    at: _At, eq: np.ndarray, orders: np.ndarray, u_full: np.ndarray | None
) -> dict:
    """Prop. A from the missing rows alone, on the first trials' responding sets."""
    m, n, d = at.m, at.n, at.d
    worst_err, tested = 0.0, 0
    for i, order in enumerate(orders):
        kappa = float(eq[i])
        s = m - n
        tol_id = 8.0 * (s * d * kappa**2 + math.sqrt(n * d) * kappa) * EPS
        if not math.isfinite(kappa) or tol_id > 0.1:
            continue
        mask = np.zeros(m, bool)
        mask[order[:n]] = True
        if at.points == "first":
            k_id = cb.complement_condition_number(mask, num_coeffs=d)
        else:
            k_id = C.complement_identity(u_full, mask)
        worst_err = max(worst_err, abs(k_id / kappa - 1.0) / tol_id)
        tested += 1
    return dict(
        at.base,
        name=f"complement identity (Prop. A) {at.tag}",
        kind="identity",
        bound="prop_a",
        tested=tested,
        max_error_over_tolerance=worst_err,
        holds=worst_err <= 1.0,
    )


def orthogonality_checks(m: int, d: int) -> list[dict]:
    """T^T T = diag(M, M/2, ...) at first-kind points: cond(T) = sqrt 2, cond(U) = 1."""
    with jax.enable_x64(True):
        v, u = (np.asarray(a) for a in mc.bases(m, d))
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
