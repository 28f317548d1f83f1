"""What ``theory.verify``, its report and its plots share: the bounds per point kind.

Every condition-number bound of :mod:`codedjax.bounds` is a bound on cond(U_S), the
condition number of the responders' rows of a matrix U with orthonormal columns and
the same range as the Chebyshev-Vandermonde matrix T (``docs/theory.md``). At
first-kind points U = T Lambda^{-1/2}, the column equilibration; at second-kind
points, whose Chebyshev columns are not orthogonal, U = Q of the thin QR T = QR. In
both cases T_S = U_S R with cond(R) = cond(T), so

    cond(U_S) / cond(T) <= cond(T_S) <= cond(T) cond(U_S),

and :func:`raw_factor` (cond(T): sqrt(2) at first-kind points for D > 1, about the
same at second-kind points) turns a bound on cond(U_S) into one on the raw cond(T_S)
that published tables quote.

Which bounds hold where:

- the coherence-based bounds (Prop. B, deterministic; Prop. C, matrix Chernoff on the
  missing rows; the generic matrix Chernoff bound on the sampled rows) need only
  orthonormal columns and the largest leverage score, so they hold at either point
  kind: at first-kind points with the closed-form leverage, at second-kind points
  with the leverage scores of :func:`codedjax.bounds.leverage_scores`;
- the gap bounds (Prop. D) assume first-kind points (equispaced in arccos x): "not
  applicable" at second-kind points.

The probabilistic gap bound is capped by Prop. B where Prop. B is smaller (a bound
that holds with probability 1 - eta and one that always holds: their minimum holds
with probability 1 - eta; :func:`codedjax.bounds.gap_condition_bound_probabilistic`
takes the minimum).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

import codedjax as cj
import codedjax.bounds as cb
import runkit

POINT_KINDS = ("first", "second")
EPS = float(np.finfo(np.float64).eps)
# float64 resolves a condition number up to about 1/eps = 4.5e15; above 1e15 the
# computed value only says "huge" (its leading digit is noise), so it is not printed
COND_UNRESOLVED = 1e15


class Bound(NamedTuple):
    name: str  # key in summary.json
    label: str  # legend and report label
    kind: str  # "deterministic" or "probabilistic"
    points: tuple[str, ...]  # point kinds where it holds


BOUNDS = (
    Bound("prop_b", "Prop. B (deterministic)", "deterministic", POINT_KINDS),
    Bound(
        "gap_probabilistic",
        "gap bound at 1 - eta (Prop. D), capped by Prop. B",
        "probabilistic",
        ("first",),
    ),
    Bound(
        "chernoff_missing",
        "Chernoff on missing rows (Prop. C)",
        "probabilistic",
        POINT_KINDS,
    ),
    Bound(
        "chernoff_sampling",
        "generic Chernoff (coherence, Tropp 2012)",
        "probabilistic",
        POINT_KINDS,
    ),
)
PER_TRIAL_BOUNDS = (
    Bound(
        "gap_deterministic",
        "gap bound on each trial's own set (Prop. D)",
        "deterministic",
        ("first",),
    ),
)
BOUND_BY_NAME = {b.name: b for b in BOUNDS + PER_TRIAL_BOUNDS}
BASES = (
    "cheb1/Chebyshev",
    "cheb2/Chebyshev",
    "equispaced/Chebyshev",
    "equispaced/monomial",
    "cheb1/monomial",
)


def check_points(points: str) -> str:
    if points not in POINT_KINDS:
        raise ValueError(f"points must be one of {POINT_KINDS}, got {points!r}")
    return points


@functools.lru_cache(maxsize=256)
def alpha(points: str, m: int) -> np.ndarray:
    """The M worker points of a kind, float64 (``codedjax.chebyshev_points``)."""
    import jax
    import jax.numpy as jnp

    kind = 1 if check_points(points) == "first" else 2
    with jax.enable_x64(True):
        x = cj.chebyshev_points(m, kind=kind, dtype=jnp.float64)
        return np.asarray(x, dtype=np.float64)


@functools.lru_cache(maxsize=256)
def max_leverage_times_m(points: str, m: int, d: int) -> float:
    """L = M max_i l_i of the orthonormal basis of T at the given points."""
    if check_points(points) == "first":
        lev = cb.chebyshev_leverage_scores(m, num_coeffs=d)
    else:
        lev = cb.leverage_scores(alpha(points, m), num_coeffs=d)
    return float(m * np.max(lev))


@functools.lru_cache(maxsize=256)
def raw_factor(points: str, m: int, d: int) -> float:
    """cond(T) of the full matrix: cond(T_S) <= raw_factor * cond(U_S) and back."""
    t = np.polynomial.chebyshev.chebvander(alpha(points, m), d - 1)
    return float(np.linalg.cond(t))


def prop_b(m: int, d: int, n: int, ell: float) -> float:
    """(1 - s L / M)^{-1/2}: Prop. B for an orthonormal basis with M max l_i = L."""
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    t = s * ell / m
    return 1.0 / math.sqrt(1.0 - t) if t < 1.0 else math.inf


def prop_c(m: int, d: int, n: int, eta: float, ell: float) -> float:
    """Prop. C (matrix Chernoff on the s missing rows) for M max l_i = L."""
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    delta = cb.chernoff_delta(d, s / ell, eta, tail="upper")
    t = min((1.0 + delta) * s / m, s * ell / m)
    return 1.0 / math.sqrt(1.0 - t) if t < 1.0 else math.inf


@functools.lru_cache(maxsize=65536)
def bound_value(name: str, points: str, m: int, d: int, n: int, eta: float):
    """A bound on cond(U_S) for N responders at confidence 1 - eta.

    Returns a float (``inf`` when vacuous) or None where the bound does not apply
    to the point kind.
    """
    b = BOUND_BY_NAME[name]
    if points not in b.points:
        return None
    kw = dict(num_workers=m, num_coeffs=d, num_responses=n)
    if points == "first":
        if name == "prop_b":
            return cb.deterministic_condition_bound(**kw)
        if name == "chernoff_missing":
            return cb.missing_rows_condition_bound(**kw, eta=eta)
        if name == "chernoff_sampling":
            return cb.sampling_condition_bound(**kw, eta=eta)
        if name == "gap_probabilistic":  # capped by Prop. B in the library
            return cb.gap_condition_bound_probabilistic(**kw, eta=eta)
        raise ValueError(f"bound_value: no closed value for {name!r}")
    ell = max_leverage_times_m(points, m, d)
    if name == "prop_b":
        return prop_b(m, d, n, ell)
    if name == "chernoff_missing":
        return prop_c(m, d, n, eta, ell)
    if name == "chernoff_sampling":
        mu = min(ell / d, m / d)  # coherence, within [1, M/D] up to rounding
        return cb.sampling_condition_bound(**kw, eta=eta, coherence=max(mu, 1.0))
    raise ValueError(f"bound_value: no closed value for {name!r}")  # pragma: no cover


def bound_curves(points: str, m: int, d: int, eta: float) -> dict[str, np.ndarray]:
    """Every applicable bound at every N = D..M (float64, inf where vacuous)."""
    ns = range(d, m + 1)
    out = {}
    for b in BOUNDS:
        vals = [bound_value(b.name, points, m, d, n, eta) for n in ns]
        if vals and vals[0] is not None:
            out[b.name] = np.asarray(vals, dtype=np.float64)
    return out


def informative_range(values: np.ndarray, d: int) -> tuple[int, int] | None:
    """(first N, last N) where a curve over N = D..M is finite, or None."""
    idx = np.flatnonzero(np.isfinite(values))
    if idx.size == 0:
        return None
    return int(d + idx[0]), int(d + idx[-1])


def complement_identity(u: np.ndarray, mask: np.ndarray) -> float:
    """cond(U_S) from the missing rows of an orthonormal-column U (Prop. A).

    U_S^T U_S = I - U_miss^T U_miss, so cond(U_S)^2 = (1 - lambda_min(G)) /
    (1 - lambda_max(G)), G = U_miss^T U_miss; the general form of
    :func:`codedjax.bounds.complement_condition_number`, for any point set.
    """
    miss = u[~mask]
    if miss.shape[0] == 0:
        return 1.0
    ev = np.linalg.eigvalsh(miss.T @ miss)
    lam_max = min(float(ev[-1]), 1.0)
    lam_min = max(float(ev[0]), 0.0) if miss.shape[0] >= u.shape[1] else 0.0
    den = 1.0 - lam_max
    return math.inf if den <= 0.0 else math.sqrt((1.0 - lam_min) / den)


@functools.lru_cache(maxsize=1024)
def detectable_rate(trials: int, eta: float, confidence: float) -> float:
    """The smallest exceedance rate a probabilistic check can flag (its power).

    A bound at confidence 1 - eta is flagged as violated when the whole
    Clopper-Pearson interval (two-sided, at ``confidence``) of its exceedance rate
    k / T lies above eta. Returns the smallest k / T for which that happens (the
    lower end is increasing in k, so a bisection finds it), ``inf`` when even
    k = T is not flagged.
    """
    t = int(trials)

    def flagged(k: int) -> bool:
        return cb.clopper_pearson(k, t, confidence=confidence)[0] > eta

    if not flagged(t):
        return math.inf
    lo, hi = 0, t  # flagged(hi) is True, flagged(lo) is False (lower end 0 at k=0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if flagged(mid):
            hi = mid
        else:
            lo = mid
    return hi / t


def fmt(x, digits: int = 3) -> str:
    """A number for a table: ``inf`` for None or inf, ``n/a`` for a string n/a."""
    if x is None:
        return "inf"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    return runkit.fmt(x, f".{digits}g", missing="inf")


def fmt_cond(x, digits: int = 3) -> str:
    """A computed condition number: "unresolved" beyond what float64 resolves."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "unresolved"
    if x > COND_UNRESOLVED:
        return "unresolved"
    return fmt(x, digits)
