"""Leverage scores and coherence of the Chebyshev-Vandermonde rows at first-kind
points (closed form), the quantities every condition bound of
:mod:`codedjax.bounds` is stated in (docs/theory.md section 3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._bounds_args import check_real_vector, check_sizes


def first_kind_angles(m: int) -> np.ndarray:
    """theta_i = (2i+1) pi / (2M): first-kind points are cos(theta_i)."""
    return (2.0 * np.arange(m) + 1.0) * np.pi / (2.0 * m)


def chebyshev_leverage_scores(num_workers: int, *, num_coeffs: int) -> np.ndarray:
    r"""Leverage scores of the Chebyshev-Vandermonde matrix at first-kind points.

    Closed form (Dirichlet kernel), with theta_i = (2i+1) pi / (2M):

    .. math::
        \ell_i = \lVert u_i \rVert^2 = \frac{1}{M}\Bigl[D - \tfrac12 +
        \frac{\sin((2D-1)\theta_i)}{2\sin\theta_i}\Bigr].

    The rows next to x = +-1 have the largest leverage, about (2D - 1) / M, so the
    coherence is below (2D - 1) / D < 2.

    Args:
        num_workers: M >= 1 (points ``chebyshev_points(M, kind=1)``).
        num_coeffs: D with 1 <= D <= M.

    Returns:
        float64 [M] leverage scores, summing to D.

    Raises:
        ValueError: D > M or sizes below 1. TypeError: non-int sizes.

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(float(cb.chebyshev_leverage_scores(40, num_coeffs=13).max()), 4)
        0.5772

    References:
        docs/theory.md section 3 (derived; the discrete orthogonality of
        T_j at Chebyshev-Gauss points is in J. C. Mason and D. C. Handscomb,
        Chebyshev Polynomials, CRC, 2003, section 4.6).
    """
    m, d = check_sizes("chebyshev_leverage_scores", num_workers, num_coeffs)
    th = first_kind_angles(m)
    return (d - 0.5 + np.sin((2 * d - 1) * th) / (2.0 * np.sin(th))) / m


def leverage_scores(alpha: ArrayLike, *, num_coeffs: int) -> np.ndarray:
    """Leverage scores of T = chebvander(alpha, D - 1) at any points, by a QR.

    l_i = ||q_i||^2 for the thin QR factor Q of T (float64 Householder QR), i.e. the
    diagonal of the orthogonal projector onto range(T).

    Args:
        alpha: [M] distinct points.
        num_coeffs: D with 1 <= D <= M.

    Returns:
        float64 [M] leverage scores (they sum to D).

    Raises:
        ValueError: alpha not 1-D or not finite, or D > M. TypeError: alpha not
            an array of real numbers.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> float(np.round(cb.leverage_scores(np.linspace(-1, 1, 4), num_coeffs=4)
        ...                .sum(), 12))
        4.0

    References:
        P. Drineas, M. Magdon-Ismail, M. W. Mahoney and D. P. Woodruff, Fast
        approximation of matrix coherence and statistical leverage, JMLR 13, 2012.
    """
    fname = "leverage_scores"
    x = check_real_vector(fname, "alpha", alpha)
    m, d = check_sizes(fname, x.shape[0], num_coeffs)
    q, _ = np.linalg.qr(np.polynomial.chebyshev.chebvander(x, d - 1))
    return np.sum(q * q, axis=1)


def coherence(scores: ArrayLike) -> float:
    """Coherence mu = (M / D) max_i l_i of leverage scores l [M] summing to D.

    Args:
        scores: [M] leverage scores of a rank-D matrix (D = round(sum)).

    Returns:
        mu in [1, M / D].

    Raises:
        ValueError: scores not a non-empty 1-D array of finite numbers in [0, 1]
            summing to D >= 1 (up to rounding). TypeError: scores not real numbers.

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.coherence(cb.chebyshev_leverage_scores(40, num_coeffs=13)), 4)
        1.7761

    References:
        E. J. Candes and B. Recht, Exact matrix completion via convex optimization,
        Found. Comput. Math. 9, 2009 (coherence); Ipsen and Wentworth 2014.
    """
    s = check_real_vector("coherence", "scores", scores)
    # a leverage score is the squared norm of a row of an orthonormal basis: in
    # [0, 1] (up to the rounding of the factorisation that computed it)
    d = round(float(np.sum(s)))  # D, the sum of the scores up to rounding
    if s.size == 0 or np.min(s) < 0 or np.max(s) > 1 + 1e-12 or d < 1:
        lo, hi = (float(np.min(s)), float(np.max(s))) if s.size else (None, None)
        raise ValueError(
            "coherence: scores must be a non-empty 1-D array of leverage scores in "
            f"[0, 1] summing to D >= 1, got {s.size} entries in [{lo}, {hi}] "
            f"summing to {float(np.sum(s))}"
        )
    return float(s.size * np.max(s) / d)


def chebyshev_coherence(num_workers: int, *, num_coeffs: int) -> float:
    """Coherence of the first-kind Chebyshev-Vandermonde matrix (closed form).

    Args:
        num_workers: M. num_coeffs: D <= M.

    Returns:
        mu = (M / D) max_i l_i, below (2D - 1) / D < 2.

    Raises:
        ValueError, TypeError: as :func:`chebyshev_leverage_scores` (naming
            this function).

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.chebyshev_coherence(40, num_coeffs=30), 4)
        1.2951

    References:
        docs/theory.md section 3.
    """
    m, d = check_sizes("chebyshev_coherence", num_workers, num_coeffs)
    lev = chebyshev_leverage_scores(m, num_coeffs=d)
    return float(m * np.max(lev) / d)


def max_leverage_times_m(m: int, d: int) -> float:
    """L = M max_i l_i at first-kind points."""
    return float(m * np.max(chebyshev_leverage_scores(m, num_coeffs=d)))
