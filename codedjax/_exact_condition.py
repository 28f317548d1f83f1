"""Exact condition numbers of the responders' Chebyshev rows: from the missing rows
alone (the complement identity, Prop. A), by an SVD of the raw or equilibrated
rows, and the exact worst case over every missing set of a size (batched float64
SVDs); docs/theory.md sections 4 and 8."""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._argchecks import check_int
from ._bounds_args import check_bool_mask, check_sizes
from ._leverage import first_kind_angles


def _dirichlet(n: int, phi: np.ndarray) -> np.ndarray:
    """D_n(phi) = 1/2 + sum_{j=1}^n cos(j phi) = sin((n+1/2) phi) / (2 sin(phi/2))."""
    half = np.sin(phi / 2.0)
    small = np.abs(half) < 1e-300
    safe = np.where(small, 1.0, half)
    return np.where(small, n + 0.5, np.sin((n + 0.5) * phi) / (2.0 * safe))


def _missing_kernel(missing: np.ndarray, m: int, d: int) -> np.ndarray:
    """K_miss = U_miss U_miss^T [s, s] from the Christoffel-Darboux kernel."""
    th = first_kind_angles(m)[missing]
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
    mk = check_bool_mask(fname, mask)
    m, d = check_sizes(fname, mk.shape[0], num_coeffs)
    missing = np.flatnonzero(~mk)
    s = missing.size
    if m - s < d:
        return math.inf
    if s == 0:
        return 1.0
    if s <= d:  # the s x s kernel matrix, closed form
        ev = np.linalg.eigvalsh(_missing_kernel(missing, m, d))  # ascending
    else:  # the D x D Gram of the missing rows, u_aj = scale_j cos(j theta_a)
        th = first_kind_angles(m)[missing]
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


def chebyshev_rows(m: int, d: int, scaling: str) -> np.ndarray:
    """T [M, D] (raw, T_ij = cos(j theta_i)) or U = T Lambda^{-1/2} (equilibrated)."""
    t = np.cos(first_kind_angles(m)[:, None] * np.arange(d)[None, :])
    if scaling == "raw":
        return t
    scale = np.full(d, math.sqrt(2.0 / m))
    scale[0] = math.sqrt(1.0 / m)
    return t * scale[None, :]


def batched_cond(rows: np.ndarray) -> np.ndarray:
    """cond of each [N, D] block of rows [B, N, D] (float64 SVD; inf if singular)."""
    sv = np.linalg.svd(rows, compute_uv=False)
    with np.errstate(divide="ignore"):
        return np.where(sv[:, -1] > 0, sv[:, 0] / sv[:, -1], np.inf)


def missing_set_blocks(v: np.ndarray, s: int, chunk: int):
    """(missing sets [b, s], cond [b]) over every s-subset of v's rows left out,
    ``chunk`` sets at a time in lexicographic order (one block when s = 0)."""
    m, d = v.shape
    if s == 0:  # the one responding set: every worker
        yield np.zeros((1, 0), np.int64), batched_cond(v[None])
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
        yield block, batched_cond(rows.reshape(block.shape[0], m - s, d))


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
    mk = check_bool_mask(fname, mask)
    m, d = check_sizes(fname, mk.shape[0], num_coeffs)
    sc = _scaling(fname, scaling)
    if int(mk.sum()) < d:
        return math.inf
    return float(batched_cond(chebyshev_rows(m, d, sc)[mk][None])[0])


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
    m, d = check_sizes(fname, num_workers, num_coeffs)
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
    u = chebyshev_rows(m, d, sc)
    best, best_miss, examined = -1.0, (), 0
    for block, c in missing_set_blocks(u, s, chunk):
        examined += block.shape[0]
        i = int(np.argmax(c))
        if c[i] > best:
            best, best_miss = float(c[i]), tuple(block[i])
    mask = np.ones(m, bool)
    mask[list(best_miss)] = False
    return WorstCaseCondition(best, mask, examined)
