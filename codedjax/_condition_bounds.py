"""Bounds on the condition number of ChebyLS's responding rows from the leverage
scores: the deterministic bound over every responding set (Prop. B), the matrix
Chernoff bounds on sampled and on missing rows (Tropp 2011 / 2012, Prop. C) and
the responses they ask for (docs/theory.md sections 5 and 7)."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ._argchecks import check_int, check_number
from ._bounds_args import check_probability, check_responses, check_sizes
from ._leverage import max_leverage_times_m


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
    m, d = check_sizes(fname, num_workers, num_coeffs)
    n = check_responses(fname, num_responses, m)
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    t = s * max_leverage_times_m(m, d) / m
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
    p = check_probability(fname, prob, "prob")
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
        return max_leverage_times_m(m, d)
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
    m, d = check_sizes(fname, num_workers, num_coeffs)
    n = check_responses(fname, num_responses, m)
    e = check_probability(fname, eta)
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
    m, d = check_sizes(fname, num_workers, num_coeffs)
    n = check_responses(fname, num_responses, m)
    e = check_probability(fname, eta)
    if n < d:
        return math.inf
    s = m - n
    if s == 0:
        return 1.0
    ell = max_leverage_times_m(m, d)
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
    e = check_probability(fname, eta)
    ep = check_probability(fname, eps, "eps")
    mu = check_number(fname, "coherence", coherence)
    if not mu >= 1.0:
        raise ValueError(f"{fname}: coherence must be >= 1, got {mu}")
    return 3.0 * mu * d * math.log(2.0 * d / e) / ep**2
