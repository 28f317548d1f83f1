r"""Condition-number and recovery bounds for ChebyLS and RepApprox.

Plain float64 functions on the host (numpy and scipy; nothing here is traced). They
state, for M workers at first-kind Chebyshev points, D Chebyshev coefficients and a
responding set S of N workers (s = M - N missing), how large the condition number of
the decoding system can be, and for RepApprox how likely exact recovery is.

Notation. T [M, D] is the Chebyshev-Vandermonde matrix T_ij = T_j(alpha_i) at the
first-kind points alpha_i = cos(theta_i), theta_i = (2i+1) pi / (2M), ordered as
``chebyshev_points(M, kind=1)`` (theta increasing with the worker index). Its columns
are exactly orthogonal, T^T T = diag(M, M/2, ..., M/2), so U = T Lambda^{-1/2} has
orthonormal columns. ``cond`` below always means cond(U_S) = cond(T~_S), the condition
number of the *equilibrated* rows of the responders (the matrix ChebyLS factorises);
the raw matrix satisfies cond(U_S) / sqrt(2) <= cond(T_S) <= sqrt(2) cond(U_S).
Every bound below is a bound on cond(U_S); multiply it by sqrt(2) for a bound on the
raw cond(T_S) that published tables (Fahim and Cadambe) quote.
:func:`raw_condition_number` gives cond(T_S) itself, and
:func:`worst_case_condition` the exact worst case over every missing set of a given
size in either scaling.
Leverage scores l_i = ||u_i||^2 sum to D; the coherence is mu = (M/D) max_i l_i, and
L = M max_i l_i = mu D.

What is in here, with its source (derivations in ``docs/theory.md``):

- leverage scores and coherence, closed form at first-kind points;
- :func:`complement_condition_number`, the exact identity from the missing rows
  (Prop. A): cond(U_S)^2 = (1 - lambda_min(G_miss)) / (1 - lambda_max(K_miss));
- :func:`deterministic_condition_bound`, (1 - s L / M)^{-1/2} (Prop. B);
- :func:`sampling_condition_bound`, the generic coherence / matrix-Chernoff bound on
  the N sampled rows (Tropp 2012, Thm 1.1, the with-replacement form; it also holds
  without replacement by Tropp 2011, Thm 2.2), and
  :func:`missing_rows_condition_bound`, the without-replacement matrix Chernoff bound
  on the s missing rows (Prop. C);
- :func:`gap_condition_bound` (deterministic) and
  :func:`gap_condition_bound_probabilistic` (run-length tail of the missing set),
  Prop. D, from the Marcinkiewicz-Zygmund inequality of Groechenig;
- :func:`clopper_pearson` intervals for Monte Carlo rates;
- the RepApprox recovery probabilities (exact, union bound, seed bound).

References:
    J. A. Tropp, User-friendly tail bounds for sums of random matrices, Found.
    Comput. Math. 12, 2012, arXiv:1004.4389 (Thm 1.1).
    J. A. Tropp, Improved analysis of the subsampled randomized Hadamard transform,
    Adv. Adapt. Data Anal. 3, 2011, arXiv:1011.1595 (Thm 2.2, without replacement).
    I. C. F. Ipsen and T. Wentworth, The effect of coherence on sampling from
    matrices with orthonormal columns, and preconditioned least squares problems,
    SIAM J. Matrix Anal. Appl. 35(4), 2014, arXiv:1203.4809.
    K. Groechenig, Reconstruction algorithms in irregular sampling, Math. Comp. 59,
    1992; H. G. Feichtinger, K. Groechenig and T. Strohmer, Efficient numerical
    methods in non-uniform sampling theory, Numer. Math. 69, 1995.
    C. J. Clopper and E. S. Pearson, The use of confidence or fiducial limits
    illustrated in the case of the binomial, Biometrika 26(4), 1934.
    M. Fahim and V. R. Cadambe, Numerically stable polynomially coded computing,
    arXiv:1903.08326.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

from ._argchecks import check_int, check_number
from ._repapprox_kernels import exact_recovery_probability as exact_recovery_probability
from ._repapprox_kernels import recovery_probability_bound as recovery_probability_bound
from ._repapprox_kernels import recovery_probability_union as recovery_probability_union

__all__ = [
    "BASES",
    "BASIS",
    "chebyshev_coherence",
    "chebyshev_leverage_scores",
    "chernoff_delta",
    "clopper_pearson",
    "coherence",
    "complement_condition_number",
    "deterministic_condition_bound",
    "exhaustive_condition",
    "ExhaustiveCondition",
    "exact_recovery_probability",
    "gap_condition_bound",
    "gap_condition_bound_probabilistic",
    "gap_quantile",
    "gap_tail_bound",
    "generator_matrix",
    "leverage_scores",
    "max_gap",
    "missing_rows_condition_bound",
    "raw_condition_number",
    "recovery_probability_bound",
    "recovery_probability_union",
    "sampling_condition_bound",
    "sufficient_responses",
    "worst_case_condition",
    "WorstCaseCondition",
]


# ----------------------------------------------------------------------------------
# argument checks


def _sizes(fname: str, num_workers: Any, num_coeffs: Any) -> tuple[int, int]:
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    d = check_int(fname, "num_coeffs", num_coeffs, minimum=1)
    if d > m:
        raise ValueError(
            f"{fname}: num_coeffs (D) must be at most num_workers (M={m}), got {d}"
        )
    return m, d


def _responses(fname: str, num_responses: Any, m: int) -> int:
    n = check_int(fname, "num_responses", num_responses, minimum=0)
    if n > m:
        raise ValueError(
            f"{fname}: num_responses (N) must be at most num_workers (M={m}), got {n}"
        )
    return n


def _eta(fname: str, eta: Any, name: str = "eta") -> float:
    try:
        e = float(eta)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{fname}: {name} must be a float in (0, 1), got {eta!r}"
        ) from err
    if not 0.0 < e < 1.0:
        raise ValueError(f"{fname}: {name} must lie in (0, 1), got {e}")
    return e


def _float_vector(fname: str, name: str, value: Any) -> np.ndarray:
    """A 1-D array of finite real numbers, as float64; raise naming ``fname``
    (strings, booleans and other non-numeric entries are a TypeError, NaN and
    +-inf a ValueError)."""
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(
            f"{fname}: {name} must be an array of real numbers, got dtype {arr.dtype}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{fname}: {name} must be 1-D, got shape {tuple(arr.shape)}")
    x = arr.astype(np.float64)
    if not np.all(np.isfinite(x)):
        bad = x[~np.isfinite(x)][0]
        raise ValueError(f"{fname}: {name} must be finite, got an entry {bad}")
    return x


def _seeds(fname: str, seeds: Any) -> tuple[int, ...]:
    """A non-empty tuple or list of seeds (ints >= 0); raise naming ``fname``."""
    if not isinstance(seeds, (tuple, list)):
        raise TypeError(
            f"{fname}: seeds must be a tuple of ints >= 0, got "
            f"{type(seeds).__name__} {seeds!r}"
        )
    draws = tuple(check_int(fname, "seeds", v, minimum=0) for v in seeds)
    if not draws:
        raise ValueError(f"{fname}: seeds must hold at least one seed, got ()")
    return draws


def _mask(fname: str, mask: Any) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(f"{fname}: mask must be boolean, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] < 1:
        raise ValueError(
            f"{fname}: mask must have shape [M] with M >= 1, got {tuple(arr.shape)}"
        )
    return arr


def _theta(m: int) -> np.ndarray:
    """theta_i = (2i+1) pi / (2M): first-kind points are cos(theta_i)."""
    return (2.0 * np.arange(m) + 1.0) * np.pi / (2.0 * m)


# ----------------------------------------------------------------------------------
# leverage scores and coherence


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
    m, d = _sizes("chebyshev_leverage_scores", num_workers, num_coeffs)
    th = _theta(m)
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
    x = _float_vector(fname, "alpha", alpha)
    m, d = _sizes(fname, x.shape[0], num_coeffs)
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
    s = _float_vector("coherence", "scores", scores)
    # a leverage score is the squared norm of a row of an orthonormal basis: in
    # [0, 1] (up to the rounding of the factorisation that computed it)
    if s.size == 0 or np.min(s) < 0 or np.max(s) > 1 + 1e-12 or not np.sum(s) >= 0.5:
        lo, hi = (float(np.min(s)), float(np.max(s))) if s.size else (None, None)
        raise ValueError(
            "coherence: scores must be a non-empty 1-D array of leverage scores in "
            f"[0, 1] summing to D >= 1, got {s.size} entries in [{lo}, {hi}] "
            f"summing to {float(np.sum(s))}"
        )
    d = round(float(np.sum(s)))
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
    m, d = _sizes("chebyshev_coherence", num_workers, num_coeffs)
    lev = chebyshev_leverage_scores(m, num_coeffs=d)
    return float(m * np.max(lev) / d)


def _max_leverage_times_m(m: int, d: int) -> float:
    """L = M max_i l_i at first-kind points."""
    return float(m * np.max(chebyshev_leverage_scores(m, num_coeffs=d)))


# ----------------------------------------------------------------------------------
# Prop. A: the exact complement identity


def _dirichlet(n: int, phi: np.ndarray) -> np.ndarray:
    """D_n(phi) = 1/2 + sum_{j=1}^n cos(j phi) = sin((n+1/2) phi) / (2 sin(phi/2))."""
    half = np.sin(phi / 2.0)
    small = np.abs(half) < 1e-300
    safe = np.where(small, 1.0, half)
    return np.where(small, n + 0.5, np.sin((n + 0.5) * phi) / (2.0 * safe))


def _missing_kernel(missing: np.ndarray, m: int, d: int) -> np.ndarray:
    """K_miss = U_miss U_miss^T [s, s] from the Christoffel-Darboux kernel."""
    th = _theta(m)[missing]
    diff = th[:, None] - th[None, :]
    summ = th[:, None] + th[None, :]
    return (_dirichlet(d - 1, diff) + _dirichlet(d - 1, summ)) / m


def complement_condition_number(mask: ArrayLike, *, num_coeffs: int) -> float:
    r"""cond(U_S) from the *missing* rows only (exact identity, Prop. A).

    Since U^T U = I, U_S^T U_S = I - U_miss^T U_miss, so

    .. math::
        \kappa(U_S)^2 = \frac{1 - \lambda_{\min}(U_\mathrm{miss}^T U_\mathrm{miss})}
                             {1 - \lambda_{\max}(U_\mathrm{miss} U_\mathrm{miss}^T)},

    where the s x s kernel matrix is given in closed form by the Christoffel-Darboux
    (Dirichlet) kernel, K_ab = (1/M) [D_{D-1}(theta_a - theta_b) +
    D_{D-1}(theta_a + theta_b)], D_n(phi) = sin((n + 1/2) phi) / (2 sin(phi / 2)).
    The numerator is 1 when s < D (lambda_min of the D x D Gram is 0). The
    eigenvalues come from K_miss (s x s) when s <= D and from the D x D Gram
    U_miss^T U_miss (u_aj = cos(j theta_a) scaled) when s > D: the same nonzero
    spectrum, from the smaller matrix. No SVD of the responding rows is used.
    Accuracy: 1 - lambda_max cancels, so the relative error is about
    s D eps cond^2 (float64: exact to 1e-7 for cond below 1e4).

    Args:
        mask: bool [M], True for the responding workers (first-kind points).
        num_coeffs: D with 1 <= D <= M.

    Returns:
        cond(U_S) as a float (inf when fewer than D workers respond, or when the
        missing rows carry all the energy of some direction).

    Raises:
        ValueError: D > M or a mask that is not 1-D. TypeError: non-boolean mask.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> mask = np.ones(40, bool); mask[0] = False     # the end worker is missing
        >>> round(cb.complement_condition_number(mask, num_coeffs=13), 3)
        1.538

    References:
        docs/theory.md section 4 (Prop. A, derived); Christoffel-Darboux:
        G. Szego, Orthogonal Polynomials, AMS, 1939, section 3.2.
    """
    fname = "complement_condition_number"
    mk = _mask(fname, mask)
    m, d = _sizes(fname, mk.shape[0], num_coeffs)
    missing = np.flatnonzero(~mk)
    s = missing.size
    if m - s < d:
        return math.inf
    if s == 0:
        return 1.0
    if s <= d:  # the s x s kernel matrix, closed form
        ev = np.linalg.eigvalsh(_missing_kernel(missing, m, d))  # ascending
    else:  # the D x D Gram of the missing rows, u_aj = scale_j cos(j theta_a)
        th = _theta(m)[missing]
        scale = np.full(d, math.sqrt(2.0 / m))
        scale[0] = math.sqrt(1.0 / m)
        u_miss = np.cos(th[:, None] * np.arange(d)[None, :]) * scale[None, :]
        ev = np.linalg.eigvalsh(u_miss.T @ u_miss)
    lam_max = min(float(ev[-1]), 1.0)
    lam_min = max(float(ev[0]), 0.0) if s >= d else 0.0
    den = 1.0 - lam_max
    if den <= 0.0:
        return math.inf
    return math.sqrt((1.0 - lam_min) / den)


# ----------------------------------------------------------------------------------
# the raw condition number and the exact worst case


def _scaling(fname: str, scaling: Any) -> str:
    if scaling not in ("equilibrated", "raw"):
        raise ValueError(
            f"{fname}: scaling must be 'equilibrated' or 'raw', got {scaling!r}"
        )
    return scaling


def _basis(m: int, d: int, scaling: str) -> np.ndarray:
    """T [M, D] (raw, T_ij = cos(j theta_i)) or U = T Lambda^{-1/2} (equilibrated)."""
    t = np.cos(_theta(m)[:, None] * np.arange(d)[None, :])
    if scaling == "raw":
        return t
    scale = np.full(d, math.sqrt(2.0 / m))
    scale[0] = math.sqrt(1.0 / m)
    return t * scale[None, :]


def _batched_cond(rows: np.ndarray) -> np.ndarray:
    """cond of each [N, D] block of rows [B, N, D] (float64 SVD; inf if singular)."""
    sv = np.linalg.svd(rows, compute_uv=False)
    with np.errstate(divide="ignore"):
        return np.where(sv[:, -1] > 0, sv[:, 0] / sv[:, -1], np.inf)


def raw_condition_number(
    mask: ArrayLike, *, num_coeffs: int, scaling: str = "raw"
) -> float:
    r"""cond(T_S) of the *unscaled* Chebyshev-Vandermonde rows of the responders.

    T_ij = T_j(alpha_i) at the first-kind points, as published tables use it
    (Fahim and Cadambe quote this one). Every bound in this module is a bound on the
    equilibrated cond(U_S) (U = T Lambda^{-1/2}, the matrix ChebyLS factorises);
    the two differ by at most a factor sqrt(2):

    .. math::
        \kappa(U_S)/\sqrt2 \le \kappa(T_S) \le \sqrt2\,\kappa(U_S),

    because T_S = U_S Lambda^{1/2} and Lambda = diag(M, M/2, ..., M/2) has
    condition number 2 (its square root sqrt(2)). ``scaling="equilibrated"`` returns
    cond(U_S) instead (by an SVD, unlike :func:`complement_condition_number`).

    Args:
        mask: bool [M], True for the responding workers (first-kind points).
        num_coeffs: D with 1 <= D <= M.
        scaling: "raw" (default, cond(T_S)) or "equilibrated" (cond(U_S)).

    Returns:
        The condition number from a float64 SVD (``inf`` when fewer than D workers
        respond). Values above about 1e15 are not resolved by float64.

    Raises:
        ValueError: D > M, a mask that is not 1-D, an unknown scaling.
        TypeError: non-boolean mask.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> round(cb.raw_condition_number(np.ones(40, bool), num_coeffs=13), 4)
        1.4142

    References:
        docs/theory.md sections 2 and 8; M. Fahim and V. R. Cadambe,
        arXiv:1903.08326.
    """
    fname = "raw_condition_number"
    mk = _mask(fname, mask)
    m, d = _sizes(fname, mk.shape[0], num_coeffs)
    sc = _scaling(fname, scaling)
    if int(mk.sum()) < d:
        return math.inf
    return float(_batched_cond(_basis(m, d, sc)[mk][None])[0])


class WorstCaseCondition(NamedTuple):
    """Result of :func:`worst_case_condition`.

    Attributes:
        cond: the largest condition number over every missing set of the size.
        mask: bool [M], a responding set that attains it.
        num_examined: how many missing sets were evaluated (all of them).
    """

    cond: float
    mask: np.ndarray
    num_examined: int


def worst_case_condition(
    *,
    num_workers: int,
    num_coeffs: int,
    num_missing: int,
    scaling: str = "equilibrated",
    max_sets: int = 2_000_000,
    chunk: int = 20_000,
) -> WorstCaseCondition:
    r"""Exact worst-case condition number over *every* set of s missing workers.

    .. math::
        \max_{|S| = M - s} \kappa(U_S) \quad\text{or}\quad
        \max_{|S| = M - s} \kappa(T_S)

    at first-kind points, by enumerating all C(M, s) missing sets and batched float64
    SVDs (vectorised in chunks; C(40, 3) = 9,880 sets take about a second).
    This is the exact answer that :func:`codedjax.worst_case_mask`'s greedy search
    approximates from below when C(M, N) is too large to enumerate; the reflection
    i -> M - 1 - i maps a set to one of the same condition number (T_j(-x) =
    (-1)^j T_j(x)), so worst sets come in mirror pairs.

    With M = 31, D = 29 and s = 2 (the square 29 x 29 submatrices of the 31-point
    grid) the raw worst case is 1.22e4, the figure Fahim and Cadambe publish; the
    equilibrated one is 8.87e3 on the same set (missing workers 29 and 30 or 0 and
    1, the two workers next to an end).

    Args:
        num_workers: M. num_coeffs: D <= M - s. num_missing: s >= 0.
        scaling: "equilibrated" (default, cond(U_S), what the bounds bound) or
            "raw" (cond(T_S), as published).
        max_sets: refuse (ValueError) when C(M, s) exceeds it.
        chunk: missing sets per batched SVD.

    Returns:
        WorstCaseCondition(cond, mask, num_examined).

    Raises:
        ValueError: s < 0, M - s < D, C(M, s) > max_sets, an unknown scaling.

    Examples:
        >>> import codedjax.bounds as cb
        >>> w = cb.worst_case_condition(num_workers=40, num_coeffs=13, num_missing=1)
        >>> round(w.cond, 3), w.num_examined
        (1.538, 40)

    References:
        M. Fahim and V. R. Cadambe, Numerically stable polynomially coded computing,
        arXiv:1903.08326; docs/theory.md section 8.
    """
    fname = "worst_case_condition"
    m, d = _sizes(fname, num_workers, num_coeffs)
    s = check_int(fname, "num_missing", num_missing, minimum=0)
    sc = _scaling(fname, scaling)
    max_sets = check_int(fname, "max_sets", max_sets, minimum=1)
    chunk = check_int(fname, "chunk", chunk, minimum=1)
    if m - s < d:
        raise ValueError(
            f"{fname}: need num_coeffs (D={d}) <= M - num_missing = {m - s}, got "
            f"num_missing={s}"
        )
    total = math.comb(m, s)
    if total > max_sets:
        raise ValueError(
            f"{fname}: C(M, s) = {total} missing sets exceed max_sets={max_sets}"
        )
    u = _basis(m, d, sc)
    best, best_miss, examined = -1.0, (), 0
    for block, c in _blocks_cond(u, s, chunk):
        examined += block.shape[0]
        i = int(np.argmax(c))
        if c[i] > best:
            best, best_miss = float(c[i]), tuple(block[i])
    mask = np.ones(m, bool)
    mask[list(best_miss)] = False
    return WorstCaseCondition(best, mask, examined)


# ----------------------------------------------------------------------------------
# the exhaustive worst and average case of the literature's codes

#: The evaluation bases of the condition-number study: the generator matrices
#: :func:`generator_matrix` builds and :func:`exhaustive_condition` examines. They
#: are the bases of the catalogue's codes whose decoders solve a system
#: (``codedjax.catalogue``; :data:`BASIS` maps each such code family to its
#: basis), ``"chebyshev"`` (the Lagrange codes), ``"circle"`` and ``"random"``,
#: and two references: ``"monomial"`` (the real Vandermonde baseline of
#: polynomial codes) and ``"chebyshev_equilibrated"`` (the Chebyshev rows scaled
#: as ChebyLS factorises them). Bases, not serving schemes: which schemes exist
#: and where they apply is the catalogue's.
BASES = ("circle", "chebyshev", "chebyshev_equilibrated", "monomial", "random")

#: The basis of :data:`BASES` in which each code family of the catalogue
#: (``codedjax.Scheme.family``) decodes; the other families (uncoded,
#: replication, Berrut, NeRCC, RepApprox, parity) solve no such system.
BASIS = {"lagrange": "chebyshev", "circle": "circle", "random": "random"}


class ExhaustiveCondition(NamedTuple):
    """Result of :func:`exhaustive_condition`.

    Attributes:
        worst: the largest condition number over every responding set of the size
            (for ``"random"``: over every set of every draw).
        mean: the average over every responding set (for ``"random"``: over every
            set of every draw, each draw weighted equally).
        mask: bool [M], a responding set that attains ``worst`` (in the draw that
            attains it).
        num_examined: responding sets evaluated, C(M, N) per draw.
        draws_worst: per draw, its worst case (one entry for a deterministic code).
        draws_mean: per draw, its average.
    """

    worst: float
    mean: float
    mask: np.ndarray
    num_examined: int
    draws_worst: tuple[float, ...]
    draws_mean: tuple[float, ...]


def _scheme(fname: str, scheme: Any) -> str:
    if scheme not in BASES:
        raise ValueError(
            f"{fname}: scheme must be one of the bases {BASES}, got {scheme!r}"
        )
    return scheme


def generator_matrix(
    *, scheme: str, num_workers: int, num_coeffs: int, seed: int = 0
) -> np.ndarray:
    r"""The float64 generator rows [M, D] whose responding rows a decoder solves.

    - ``"circle"``: V[j, m] = alpha_j^m, alpha_j = exp(2 pi i j / M) (complex; the
      circle code of Ramamoorthy and Tang, whose rotation embedding realises each
      entry as a 2 x 2 rotation with the same condition numbers);
    - ``"chebyshev"``: T[j, m] = T_m(cos((2j + 1) pi / (2M))), the raw
      Chebyshev-Vandermonde matrix at first-kind points (Fahim and Cadambe);
      ``"chebyshev_equilibrated"``: its columns scaled to unit norm over all M
      workers, the matrix ChebyLS factorises (docs/theory.md section 2);
    - ``"monomial"``: x_j^m at M equispaced points x = linspace(-1, 1, M) (the real
      Vandermonde baseline of polynomial codes);
    - ``"random"``: :func:`codedjax._random_kernels.gaussian_encoding_matrix` with
      ``jax.random.key(seed)`` (N(0, 1/K) entries, D = K; drawn in float32, so the
      same numbers with or without float64).

    Args:
        scheme: the basis, one of :data:`BASES`.
        num_workers: M. num_coeffs: D <= M (K for ``"random"``).
        seed: the draw of ``"random"`` (ignored otherwise).

    Returns:
        [M, D] float64 (complex128 for ``"circle"``).

    Raises:
        ValueError: an unknown basis, D > M. TypeError: non-int sizes or seed.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> v = cb.generator_matrix(scheme="circle", num_workers=8, num_coeffs=3)
        >>> bool(np.allclose(v.conj().T @ v, 8 * np.eye(3)))
        True
    """
    fname = "generator_matrix"
    sc = _scheme(fname, scheme)
    m, d = _sizes(fname, num_workers, num_coeffs)
    s = check_int(fname, "seed", seed, minimum=0)
    if sc == "circle":
        t = 2.0 * np.pi * np.mod(np.arange(m)[:, None] * np.arange(d)[None, :], m) / m
        return np.cos(t) + 1j * np.sin(t)
    if sc == "chebyshev":
        return _basis(m, d, "raw")
    if sc == "chebyshev_equilibrated":
        return _basis(m, d, "equilibrated")
    if sc == "monomial":
        return np.vander(np.linspace(-1.0, 1.0, m), d, increasing=True)
    import jax  # the draw itself: codedjax's Gaussian encoding matrix

    from ._random_kernels import gaussian_encoding_matrix

    g = gaussian_encoding_matrix(jax.random.key(s), num_inputs=d, num_workers=m)
    return np.asarray(g, dtype=np.float64)


def _all_sets_cond(v: np.ndarray, n: int, chunk: int) -> tuple[np.ndarray, int]:
    """cond of every N-row subset of v [M, D] (missing sets in lexicographic order)
    and the index of the first worst set's missing tuple; float64 batched SVDs."""
    s = v.shape[0] - n
    return np.concatenate([c for _, c in _blocks_cond(v, s, chunk)]), s


def _blocks_cond(v: np.ndarray, s: int, chunk: int):
    """(missing sets [b, s], cond [b]) over every s-subset of v's rows left out,
    ``chunk`` sets at a time in lexicographic order (one block when s = 0)."""
    m, d = v.shape
    if s == 0:  # the one responding set: every worker
        yield np.zeros((1, 0), np.int64), _batched_cond(v[None])
        return
    it = itertools.combinations(range(m), s)
    while True:
        block = np.fromiter(
            itertools.chain.from_iterable(itertools.islice(it, chunk)), dtype=np.int64
        ).reshape(-1, s)
        if block.shape[0] == 0:
            return
        keep = np.ones((block.shape[0], m), bool)
        np.put_along_axis(keep, block, False, axis=1)
        rows = np.broadcast_to(v, (block.shape[0], m, d))[keep]
        yield block, _batched_cond(rows.reshape(block.shape[0], m - s, d))


def _mask_of(index: int, m: int, s: int) -> np.ndarray:
    """The responding mask of the ``index``-th missing s-set (lexicographic)."""
    miss = next(itertools.islice(itertools.combinations(range(m), s), index, None))
    mask = np.ones(m, bool)
    mask[list(miss)] = False
    return mask


def exhaustive_condition(
    *,
    scheme: str,
    num_workers: int,
    num_coeffs: int,
    num_responses: int | None = None,
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    max_sets: int = 1_000_000,
    chunk: int = 20_000,
) -> ExhaustiveCondition:
    r"""Exhaustive worst-case and average condition number over every responding set.

    .. math::
        \max_{|S| = N} \kappa(B_S), \qquad
        \binom{M}{N}^{-1} \sum_{|S| = N} \kappa(B_S),

    for the generator rows B of :func:`generator_matrix` (every N-subset of the M
    rows, N = D by default: the square systems that the papers' threshold decoders
    solve). Batched float64 SVDs over chunks of sets (C(31, 29) = 465 sets take a
    few milliseconds, C(20, 16) = 4,845 about 0.1 s). For ``"random"`` every set of
    every draw in ``seeds`` is evaluated; ``worst`` and ``mean`` pool the draws and
    ``draws_worst`` / ``draws_mean`` give each draw.

    Known values (docs/theory.md section 8): at M = 31, D = 29 the raw Chebyshev
    worst case is 1.22e4 (the figure Fahim and Cadambe publish) and the
    equilibrated one 8.87e3; with every worker responding the circle and the
    equilibrated Chebyshev matrices have cond 1 (their columns are orthogonal and of
    equal norm).

    Args:
        scheme: the basis, one of :data:`BASES`.
        num_workers: M. num_coeffs: D <= M (K for ``"random"``).
        num_responses: N with D <= N <= M (default D).
        seeds: the draws of ``"random"`` (ignored otherwise), at least one.
        max_sets: refuse (ValueError) when C(M, N) exceeds it.
        chunk: sets per batched SVD.

    Returns:
        ExhaustiveCondition(worst, mean, mask, num_examined, draws_worst,
        draws_mean). Values above about 1e15 are not resolved by float64.

    Raises:
        ValueError: an unknown basis, D > M, N outside [D, M], C(M, N) > max_sets,
            no seeds.
        TypeError: non-int sizes or seeds.

    Examples:
        >>> import codedjax.bounds as cb
        >>> r = cb.exhaustive_condition(scheme="circle", num_workers=8, num_coeffs=6)
        >>> round(r.worst, 3), r.num_examined
        (7.249, 28)

    References:
        A. Ramamoorthy and L. Tang, Numerically stable coded matrix computations via
        circulant and rotation matrix embeddings, arXiv:1910.06515; M. Fahim and
        V. R. Cadambe, Numerically stable polynomially coded computing,
        arXiv:1903.08326.
    """
    fname = "exhaustive_condition"
    sc = _scheme(fname, scheme)
    m, d = _sizes(fname, num_workers, num_coeffs)
    n = d if num_responses is None else _responses(fname, num_responses, m)
    if n < d:
        raise ValueError(
            f"{fname}: num_responses (N) must be at least num_coeffs (D={d}), got {n}"
        )
    max_sets = check_int(fname, "max_sets", max_sets, minimum=1)
    chunk = check_int(fname, "chunk", chunk, minimum=1)
    # checked for every scheme (a bad value is a mistake even where it is unused)
    seeds = _seeds(fname, seeds)
    total = math.comb(m, n)
    if total > max_sets:
        raise ValueError(
            f"{fname}: C(M, N) = C({m}, {n}) = {total} responding sets exceed "
            f"max_sets={max_sets}; pass a larger max_sets or a smaller configuration"
        )
    draws = seeds if sc == "random" else (0,)
    worst, mean, best_mask = [], [], None
    for s in draws:
        v = generator_matrix(scheme=sc, num_workers=m, num_coeffs=d, seed=s)
        c, miss = _all_sets_cond(v, n, chunk)
        i = int(np.argmax(c))
        if not worst or c[i] > max(worst):
            best_mask = _mask_of(i, m, miss)
        worst.append(float(c[i]))
        mean.append(float(np.mean(c)))
    return ExhaustiveCondition(
        max(worst),
        float(np.mean(mean)),
        best_mask,
        total * len(draws),
        tuple(worst),
        tuple(mean),
    )


# ----------------------------------------------------------------------------------
# Prop. B: deterministic


def deterministic_condition_bound(
    *, num_workers: int, num_coeffs: int, num_responses: int
) -> float:
    r"""Worst-case bound over every responding set of size N (Prop. B).

    .. math::
        \kappa(U_S) \le (1 - sL/M)^{-1/2}, \qquad s = M - N,\ L = M\max_i \ell_i,

    because lambda_max(K_miss) <= trace K_miss = sum of the missing leverages
    <= s L / M. Tight for s = 1 (missing the end worker attains it); infinite once
    s L >= M. It bounds the equilibrated cond(U_S); the raw cond(T_S) is at most
    sqrt(2) times it.

    Args:
        num_workers: M. num_coeffs: D <= M. num_responses: N with 0 <= N <= M.

    Returns:
        The bound (float; ``inf`` when vacuous).

    Raises:
        ValueError: D > M, N > M or negative sizes. TypeError: non-int sizes.

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.deterministic_condition_bound(num_workers=40, num_coeffs=30,
        ...                                        num_responses=39), 3)
        5.903

    References:
        docs/theory.md section 5 (Prop. B, derived).
    """
    fname = "deterministic_condition_bound"
    m, d = _sizes(fname, num_workers, num_coeffs)
    n = _responses(fname, num_responses, m)
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    t = s * _max_leverage_times_m(m, d) / m
    return 1.0 / math.sqrt(1.0 - t) if t < 1.0 else math.inf


# ----------------------------------------------------------------------------------
# matrix Chernoff (Tropp 2011 / 2012)


def _h_upper(delta: float) -> float:
    """(1 + delta) ln(1 + delta) - delta: exponent of the upper Chernoff tail."""
    return (1.0 + delta) * math.log1p(delta) - delta


def _h_lower(delta: float) -> float:
    """delta + (1 - delta) ln(1 - delta): exponent of the lower tail (1 at delta=1)."""
    if delta >= 1.0:
        return 1.0
    return delta + (1.0 - delta) * math.log1p(-delta)


def chernoff_delta(dim: int, ratio: float, prob: float, *, tail: str) -> float:
    r"""Solve the matrix Chernoff tail for its deviation delta (scipy brentq).

    Finds delta with

    .. math::
        d \, \exp(-r\, h(\delta)) = p, \qquad
        h_\mathrm{upper}(\delta) = (1+\delta)\ln(1+\delta) - \delta, \quad
        h_\mathrm{lower}(\delta) = \delta + (1-\delta)\ln(1-\delta),

    i.e. d [e^{delta} / (1+delta)^{1+delta}]^r = p (upper) or
    d [e^{-delta} / (1-delta)^{1-delta}]^r = p (lower), where r = mu / R is the
    expected eigenvalue over the almost-sure bound on one summand.

    Args:
        dim: d >= 1, the matrix dimension.
        ratio: r > 0.
        prob: target tail probability p in (0, 1).
        tail: "upper" (delta >= 0) or "lower" (delta in [0, 1)).

    Returns:
        delta > 0 (``inf`` for the lower tail when no delta < 1 reaches p).

    Raises:
        ValueError: bad tail, dim < 1, ratio <= 0 or not finite, prob outside
            (0, 1). TypeError: a non-int dim, a ratio or prob that is no number.

    Examples:
        >>> import math, codedjax.bounds as cb
        >>> dl = cb.chernoff_delta(10, 50.0, 0.05, tail="lower")
        >>> round(10 * math.exp(-50.0 * (dl + (1 - dl) * math.log(1 - dl))), 6)
        0.05

    References:
        J. A. Tropp, arXiv:1004.4389, Thm 1.1; J. A. Tropp, arXiv:1011.1595,
        Thm 2.2.
    """
    fname = "chernoff_delta"
    if tail not in ("upper", "lower"):
        raise ValueError(f"{fname}: tail must be 'upper' or 'lower', got {tail!r}")
    dim = check_int(fname, "dim", dim, minimum=1)
    p = _eta(fname, prob, "prob")
    r = check_number(fname, "ratio", ratio, low=0.0, open_low=True)
    target = (math.log(dim) - math.log(p)) / r  # h(delta) = target > 0
    if tail == "lower":
        if target >= 1.0:  # h_lower < 1 on [0, 1)
            return math.inf
        return optimize.brentq(
            lambda x: _h_lower(x) - target,
            0.0,
            1.0,
            xtol=1e-15,
            rtol=4 * np.finfo(float).eps,
        )
    hi = 1.0
    while _h_upper(hi) < target:
        hi *= 2.0
    return optimize.brentq(
        lambda x: _h_upper(x) - target,
        0.0,
        hi,
        xtol=1e-15,
        rtol=4 * np.finfo(float).eps,
    )


def _leverage_l(fname: str, m: int, d: int, coherence_: float | None) -> float:
    if coherence_ is None:
        return _max_leverage_times_m(m, d)
    mu = check_number(fname, "coherence", coherence_)
    if not 1.0 <= mu <= m / d + 1e-12:
        raise ValueError(f"{fname}: coherence must lie in [1, M/D], got {mu}")
    return mu * d


def sampling_condition_bound(
    *,
    num_workers: int,
    num_coeffs: int,
    num_responses: int,
    eta: float,
    coherence: float | None = None,
) -> float:
    r"""Generic coherence / matrix-Chernoff bound on cond(U_S) at confidence 1 - eta.

    The N responding rows are treated as N samples of the rank-one matrices
    u_i u_i^T (mean I/M, each at most R = L/M): the with-replacement form of the
    matrix Chernoff inequality (Tropp 2012, Thm 1.1) with mu_min = mu_max = N/M.
    Tropp 2011 (Thm 2.2) shows the same tails hold for sampling without replacement,
    so it bounds a uniformly random N-subset too. With each tail at eta/2,

    .. math::
        \kappa(U_S) \le \sqrt{(1+\delta_2)/(1-\delta_1)}, \quad
        D\,[e^{-\delta_1}/(1-\delta_1)^{1-\delta_1}]^{N/L} = \eta/2, \quad
        D\,[e^{\delta_2}/(1+\delta_2)^{1+\delta_2}]^{N/L} = \eta/2,

    solved numerically (:func:`chernoff_delta`). It uses nothing but the coherence,
    so it needs N of order mu D ln(D/eta) rows: vacuous (``inf``) at M = 40. It
    bounds the equilibrated cond(U_S); the raw cond(T_S) is at most sqrt(2) times it.

    Args:
        num_workers: M. num_coeffs: D <= M. num_responses: N <= M.
        eta: failure probability in (0, 1).
        coherence: mu of the orthonormal basis; default the first-kind closed form.

    Returns:
        The bound (``inf`` when the lower tail cannot reach eta/2).

    Raises:
        ValueError: D > M, N > M, eta outside (0, 1), coherence outside [1, M/D].

    Examples:
        >>> import codedjax.bounds as cb
        >>> cb.sampling_condition_bound(num_workers=40, num_coeffs=13,
        ...                             num_responses=40, eta=0.05)
        inf

    References:
        Tropp, arXiv:1004.4389, Thm 1.1; Tropp, arXiv:1011.1595, Thm 2.2;
        Ipsen and Wentworth, arXiv:1203.4809; docs/theory.md section 7.
    """
    fname = "sampling_condition_bound"
    m, d = _sizes(fname, num_workers, num_coeffs)
    n = _responses(fname, num_responses, m)
    e = _eta(fname, eta)
    ell = _leverage_l(fname, m, d, coherence)
    if n < d:
        return math.inf
    r = n / ell
    d1 = chernoff_delta(d, r, e / 2.0, tail="lower")
    if not d1 < 1.0:
        return math.inf
    d2 = chernoff_delta(d, r, e / 2.0, tail="upper")
    return math.sqrt((1.0 + d2) / (1.0 - d1))


def missing_rows_condition_bound(
    *, num_workers: int, num_coeffs: int, num_responses: int, eta: float
) -> float:
    r"""Matrix Chernoff on the missing rows, without replacement (Prop. C).

    The s missing rows are a uniform s-subset drawn without replacement from
    {u_i u_i^T} (mean I/M, each at most L/M). By Tropp 2011, Thm 2.2,

    .. math::
        P\{\lambda_{\max}(G_\mathrm{miss}) \ge t\} \le
        D \exp\bigl(-\tfrac{s}{L}[(1+\delta)\ln(1+\delta) - \delta]\bigr),
        \quad 1 + \delta = tM/s,

    so with probability >= 1 - eta, cond(U_S) <= (1 - t_eta)^{-1/2} with
    t_eta = min((1 + delta_eta) s / M, s L / M) (Prop. B caps it). The numerator of
    Prop. A is at most 1. Vacuous at M = 40 for s >= 2. It bounds the equilibrated
    cond(U_S); the raw cond(T_S) is at most sqrt(2) times it.

    Args:
        num_workers: M. num_coeffs: D <= M. num_responses: N <= M.
        eta: failure probability in (0, 1).

    Returns:
        The bound (``inf`` when t_eta >= 1).

    Raises:
        ValueError: D > M, N > M, eta outside (0, 1).

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.missing_rows_condition_bound(num_workers=40, num_coeffs=13,
        ...                                       num_responses=39, eta=0.05), 3)
        1.538

    References:
        Tropp, arXiv:1011.1595, Thm 2.2; docs/theory.md section 7
        (Prop. C, derived).
    """
    fname = "missing_rows_condition_bound"
    m, d = _sizes(fname, num_workers, num_coeffs)
    n = _responses(fname, num_responses, m)
    e = _eta(fname, eta)
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    ell = _max_leverage_times_m(m, d)
    delta = chernoff_delta(d, s / ell, e, tail="upper")
    t = min((1.0 + delta) * s / m, s * ell / m)
    return 1.0 / math.sqrt(1.0 - t) if t < 1.0 else math.inf


def sufficient_responses(
    *, num_coeffs: int, coherence: float, eta: float, eps: float
) -> float:
    r"""Rows that make the simplified Chernoff bound hold (Ipsen-Wentworth form).

    .. math::
        N \ge 3\mu D \ln(2D/\eta) / \varepsilon^2 \implies
        \kappa(U_S) \le \sqrt{(1+\varepsilon)/(1-\varepsilon)}
        \text{ with probability} \ge 1 - \eta,

    from e^{-delta}/(1-delta)^{1-delta} <= e^{-delta^2/2} and
    e^{delta}/(1+delta)^{1+delta} <= e^{-delta^2/3} for delta in [0, 1].

    Args:
        num_coeffs: D. coherence: mu >= 1. eta: in (0, 1). eps: in (0, 1).

    Returns:
        The (real) number of rows; about 1.7e3 for D = 13, mu = 1.78, eps = 1/2.

    Raises:
        ValueError: eta or eps outside (0, 1), coherence < 1, D < 1.

    Examples:
        >>> import codedjax.bounds as cb
        >>> round(cb.sufficient_responses(num_coeffs=13, coherence=1.776, eta=0.05,
        ...                               eps=0.5))
        1733

    References:
        Ipsen and Wentworth, arXiv:1203.4809; Tropp, arXiv:1004.4389.
    """
    fname = "sufficient_responses"
    d = check_int(fname, "num_coeffs", num_coeffs, minimum=1)
    e = _eta(fname, eta)
    ep = _eta(fname, eps, "eps")
    mu = check_number(fname, "coherence", coherence)
    if not mu >= 1.0:
        raise ValueError(f"{fname}: coherence must be >= 1, got {mu}")
    return 3.0 * mu * d * math.log(2.0 * d / e) / ep**2


# ----------------------------------------------------------------------------------
# Prop. D: gap bounds


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
    mk = _mask("max_gap", mask)
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
    mk = _mask(fname, mask)
    m, d = _sizes(fname, mk.shape[0], num_coeffs)
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
    n = _responses(fname, num_responses, m)
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
    n = _responses(fname, num_responses, m)
    e = _eta(fname, eta)
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
    m, d = _sizes(fname, num_workers, num_coeffs)
    n = _responses(fname, num_responses, m)
    e = _eta(fname, eta)
    if n < d:
        return math.inf
    g = gap_quantile(num_workers=m, num_responses=n, eta=e)
    rho = g * (d - 1) / m
    gap = math.sqrt(g) * (1.0 + rho) / (1.0 - rho) if rho < 1.0 else math.inf
    if not capped:
        return gap
    det = deterministic_condition_bound(num_workers=m, num_coeffs=d, num_responses=n)
    return min(gap, det)


# ----------------------------------------------------------------------------------
# intervals


def clopper_pearson(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
    r"""Exact (Clopper-Pearson) two-sided confidence interval for a binomial rate.

    .. math::
        [\,B^{-1}(\alpha/2;\,k,\,n-k+1),\ B^{-1}(1-\alpha/2;\,k+1,\,n-k)\,],
        \quad \alpha = 1 - \text{confidence},

    with B^{-1} the beta quantile (``scipy.stats.beta.ppf``); the lower end is 0
    for k = 0 and the upper end 1 for k = n. Its coverage is at least the
    confidence for every true rate.

    Args:
        successes: k with 0 <= k <= n. trials: n >= 1.
        confidence: in (0, 1), default 0.95.

    Returns:
        (low, high) floats.

    Raises:
        ValueError: k outside [0, n], n < 1, confidence outside (0, 1).

    Examples:
        >>> import codedjax.bounds as cb
        >>> lo, hi = cb.clopper_pearson(0, 100)
        >>> lo, round(hi, 4)
        (0.0, 0.0362)

    References:
        Clopper and Pearson, Biometrika 26(4), 1934.
    """
    fname = "clopper_pearson"
    n = check_int(fname, "trials", trials, minimum=1)
    k = check_int(fname, "successes", successes, minimum=0)
    if k > n:
        raise ValueError(f"{fname}: successes must be at most trials={n}, got {k}")
    conf = _eta(fname, confidence, "confidence")
    a = 1.0 - conf
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2.0, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - a / 2.0, k + 1, n - k))
    return lo, hi
