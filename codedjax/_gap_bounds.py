"""Gap bounds on the condition number of ChebyLS's responding rows (Prop. D, from
the Marcinkiewicz-Zygmund inequality of Groechenig): the largest gap between
responders, the deterministic bound from it, and the exact tail of the largest
gap of a uniformly random missing set with the bound at its quantile
(docs/theory.md section 6)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from ._argchecks import check_int
from ._bounds_args import (
    check_bool_mask,
    check_probability,
    check_responses,
    check_sizes,
)
from ._condition_bounds import deterministic_condition_bound


def _gaps(mk: np.ndarray) -> tuple[int, np.ndarray]:
    """Largest gap g and Voronoi weights (units pi/M) on the reflected circle."""
    m = mk.shape[0]
    idx = np.flatnonzero(mk)
    inner = np.diff(idx)
    left = np.concatenate([[2 * idx[0] + 1], inner])
    right = np.concatenate([inner, [2 * (m - 1 - idx[-1]) + 1]])
    g = int(max(left.max(), right.max()))
    return g, (left + right) / 2.0


def max_gap(mask: ArrayLike) -> int:
    """Largest gap g between responders on the reflected circle, in units of pi/M.

    Under theta = arccos x the first-kind points are equispaced (h = pi / M). An
    interior run of r missing workers gives a gap of r + 1; a run of r at either
    end gives 2 r + 1, because the gap across theta = 0 (or pi) is doubled by the
    reflection theta -> -theta.

    Args:
        mask: bool [M] responders (worker i at theta_i = (2i+1) pi / (2M)).

    Returns:
        g >= 1 (an int); ``2M + 1`` is never reached; raises on an empty set.

    Raises:
        ValueError: no responder, or a mask that is not 1-D.
        TypeError: non-boolean mask.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> cb.max_gap(np.array([False, True, True, False, False, True]))
        3

    References:
        docs/theory.md section 6 (Prop. D).
    """
    mk = check_bool_mask("max_gap", mask)
    if not mk.any():
        raise ValueError("max_gap: mask must have at least one responder, got none")
    return _gaps(mk)[0]


def gap_condition_bound(mask: ArrayLike, *, num_coeffs: int) -> float:
    r"""Deterministic gap bound on cond(U_S) for one responding set (Prop. D).

    With g the largest gap (:func:`max_gap`), rho = g (D - 1) / M and Voronoi
    weights w_j (half the theta-distance between the neighbouring responders),
    Groechenig's Marcinkiewicz-Zygmund inequality for trigonometric polynomials of
    degree D - 1 gives (1 - rho)^2 ||p||^2 <= sum_j w_j |p(theta_j)|^2 <=
    (1 + rho)^2 ||p||^2, hence

    .. math::
        \kappa(U_S) \le \sqrt{w_{\max}/w_{\min}}\,\frac{1+\rho}{1-\rho}
                   \le \sqrt{g}\,\frac{1+\rho}{1-\rho} \quad (\rho < 1).

    Informative when M is at least 4-5 D. It bounds the equilibrated cond(U_S); the
    raw cond(T_S) is at most sqrt(2) times it.

    Args:
        mask: bool [M] responders (first-kind points).
        num_coeffs: D <= M.

    Returns:
        The bound (``inf`` when rho >= 1 or fewer than D workers respond).

    Raises:
        ValueError: D > M, a mask that is not 1-D. TypeError: non-boolean mask.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> cb.gap_condition_bound(np.ones(40, bool), num_coeffs=5)
        1.2222222222222223

    References:
        K. Groechenig, Math. Comp. 59, 1992; Feichtinger, Groechenig and Strohmer,
        Numer. Math. 69, 1995; docs/theory.md section 6 (Prop. D).
    """
    fname = "gap_condition_bound"
    mk = check_bool_mask(fname, mask)
    m, d = check_sizes(fname, mk.shape[0], num_coeffs)
    if int(mk.sum()) < d:
        return math.inf
    g, w = _gaps(mk)
    rho = g * (d - 1) / m
    if rho >= 1.0:
        return math.inf
    return math.sqrt(w.max() / w.min()) * (1.0 + rho) / (1.0 - rho)


def _missing_block(m: int, s: int, r: int) -> Fraction:
    """P(r given workers are all missing) = C(M - r, s - r) / C(M, s)."""
    if r > s:
        return Fraction(0)
    return Fraction(math.comb(m - r, s - r), math.comb(m, s))


def gap_tail_bound(*, num_workers: int, num_responses: int, gap: int) -> float:
    r"""Union bound on P(max gap >= G) for a uniformly random responding set.

    The s = M - N missing workers are a uniform s-subset. A gap >= G needs an
    interior block of G - 1 consecutive missing workers (M - G + 2 positions) or an
    end block of r_e = ceil((G - 1) / 2) missing workers (two ends), so

    .. math::
        P(g \ge G) \le (M-G+2)\frac{\binom{M-G+1}{s-G+1}}{\binom{M}{s}}
                    + 2\frac{\binom{M-r_e}{s-r_e}}{\binom{M}{s}},

    in exact integer arithmetic, capped at 1.

    Args:
        num_workers: M. num_responses: N with 1 <= N <= M. gap: G (an int).

    Returns:
        The bound in [0, 1].

    Raises:
        ValueError: N > M or N < 1.

    Examples:
        >>> import codedjax.bounds as cb
        >>> cb.gap_tail_bound(num_workers=40, num_responses=39, gap=3)
        0.05

    References:
        docs/theory.md section 6 (Prop. D, derived, union bound).
    """
    fname = "gap_tail_bound"
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    n = check_responses(fname, num_responses, m)
    if n < 1:
        raise ValueError(f"{fname}: num_responses must be >= 1, got {n}")
    big_g = check_int(fname, "gap", gap)
    if big_g <= 1:
        return 1.0
    s = m - n
    r = big_g - 1
    re = -(-(big_g - 1) // 2)  # ceil((G - 1) / 2)
    p = Fraction(0)
    if r <= s and m - r + 1 > 0:
        p += (m - r + 1) * _missing_block(m, s, r)
    p += 2 * _missing_block(m, s, re)
    return float(min(p, Fraction(1)))


def gap_quantile(*, num_workers: int, num_responses: int, eta: float) -> int:
    """The smallest g_eta with P(max gap > g_eta) <= eta by :func:`gap_tail_bound`.

    P(g > g_eta) = P(g >= g_eta + 1) <= gap_tail_bound(G = g_eta + 1) <= eta. (Using
    G_eta = g_eta + 1 in the bound instead is one unit more conservative and also
    valid.)

    Args:
        num_workers: M. num_responses: N with 1 <= N <= M. eta: in (0, 1).

    Returns:
        g_eta >= 1.

    Raises:
        ValueError: N outside [1, M], eta outside (0, 1).

    Examples:
        >>> import codedjax.bounds as cb
        >>> cb.gap_quantile(num_workers=40, num_responses=39, eta=0.05)
        2

    References:
        docs/theory.md section 6 (Prop. D).
    """
    fname = "gap_quantile"
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    n = check_responses(fname, num_responses, m)
    e = check_probability(fname, eta)
    if n < 1:
        raise ValueError(f"{fname}: num_responses must be >= 1, got {n}")
    for g in range(1, 2 * m + 2):
        if gap_tail_bound(num_workers=m, num_responses=n, gap=g + 1) <= e:
            return g
    return 2 * m + 1  # pragma: no cover - the gap never exceeds 2M - 1


def gap_condition_bound_probabilistic(
    *,
    num_workers: int,
    num_coeffs: int,
    num_responses: int,
    eta: float,
    capped: bool = True,
) -> float:
    r"""Gap bound at confidence 1 - eta for a uniformly random responding set.

    With probability >= 1 - eta the largest gap is at most g_eta
    (:func:`gap_quantile`), and then (Prop. D, with w_max / w_min <= g)

    .. math::
        \kappa(U_S) \le \min\Bigl(\sqrt{g_\eta}\,
        \frac{1+\rho_\eta}{1-\rho_\eta},\ (1 - sL/M)^{-1/2}\Bigr),\qquad
        \rho_\eta = g_\eta (D-1)/M < 1.

    The second term is the deterministic bound (Prop. B,
    :func:`deterministic_condition_bound`), which holds for every responding set, so
    the minimum still holds with probability >= 1 - eta. It is the smaller one when
    only a few workers are missing (M = 64, D = 21, N = 63: the gap term alone is
    6.13 at eta = 0.05 and Prop. B gives 1.56). ``capped=False`` returns the gap term
    alone. Like every bound here it bounds the equilibrated cond(U_S); the raw
    cond(T_S) is at most sqrt(2) times it.

    Args:
        num_workers: M. num_coeffs: D <= M. num_responses: N <= M. eta: in (0, 1).
        capped: take the minimum with Prop. B (default True).

    Returns:
        The bound (``inf`` when rho_eta >= 1 and Prop. B is vacuous, or N < D).

    Raises:
        ValueError: D > M, N > M, eta outside (0, 1).

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.gap_condition_bound_probabilistic(num_workers=200,
        ...       num_coeffs=20, num_responses=195, eta=0.05), 3)
        3.113

    References:
        Groechenig, Math. Comp. 59, 1992; docs/theory.md section 6
        (Prop. D, probabilistic part).
    """
    fname = "gap_condition_bound_probabilistic"
    m, d = check_sizes(fname, num_workers, num_coeffs)
    n = check_responses(fname, num_responses, m)
    e = check_probability(fname, eta)
    if n < d:
        return math.inf
    g = gap_quantile(num_workers=m, num_responses=n, eta=e)
    rho = g * (d - 1) / m
    gap = math.sqrt(g) * (1.0 + rho) / (1.0 - rho) if rho < 1.0 else math.inf
    if not capped:
        return gap
    det = deterministic_condition_bound(num_workers=m, num_coeffs=d, num_responses=n)
    return min(gap, det)
