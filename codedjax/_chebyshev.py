"""Chebyshev points and the Chebyshev-Vandermonde matrix."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_floating, check_int


@functools.lru_cache(maxsize=512)
def points_f64(n: int, kind: int) -> np.ndarray:
    """Chebyshev points in float64 numpy, decreasing: the one formula of codedjax.

    The sine form, sin(pi (n - 1 - 2i) / (2n)) for the first kind and
    sin(pi (n - 1 - 2i) / (2(n - 1))) for the second, equals the cosine form and is
    exactly symmetric (x_{n-1-i} = -x_i). Every point set of the library (the
    public :func:`chebyshev_points`, the codes' points, the fit nodes of the
    decoders) is this array, cast to the dtype of the work. The result is
    read-only (it is cached per (n, kind)); the arguments are not checked.
    """
    den = 2.0 * n if kind == 1 else 2.0 * (n - 1)
    x = np.sin(np.pi * (n - 1 - 2 * np.arange(n)) / den)
    x.setflags(write=False)
    return x


def chebyshev_points(n: int, kind: int = 1, dtype: Any = None) -> jax.Array:
    r"""Chebyshev points of the first or second kind on [-1, 1], in decreasing order.

    .. math::
        x_i = \cos\frac{(2i+1)\pi}{2n} \ (\text{kind } 1), \qquad
        x_i = \cos\frac{i\pi}{n-1} \ (\text{kind } 2), \qquad i = 0, \dots, n-1.

    First-kind points (roots of T_n) make the full Chebyshev-Vandermonde matrix exactly
    orthogonal: T^T T = diag(n, n/2, ..., n/2). The points are computed in float64 on
    the host through the sine form, so they are exactly symmetric, then cast.

    Args:
        n: number of points (>= 1; >= 2 for the second kind).
        kind: 1 (Chebyshev-Gauss, default) or 2 (Chebyshev-Lobatto extrema).
        dtype: floating dtype of the result (default: JAX's default float).

    Returns:
        [n] array of points.

    Raises:
        ValueError: for n < 1, kind 2 with n < 2, or kind not in {1, 2}.
        TypeError: for a dtype that is not floating.

    Examples:
        >>> chebyshev_points(3, kind=2).tolist()
        [1.0, 0.0, -1.0]

    References:
        J. C. Mason and D. C. Handscomb, Chebyshev Polynomials, CRC, 2003, ch. 4.
    """
    n = check_int("chebyshev_points", "n", n, minimum=1)
    if kind not in (1, 2):
        raise ValueError(f"chebyshev_points: kind must be 1 or 2, got {kind!r}")
    if kind == 2 and n < 2:
        raise ValueError(f"chebyshev_points: kind=2 needs n >= 2 points, got n={n}")
    x = points_f64(n, kind)
    if dtype is None:
        dtype = jnp.zeros(()).dtype
    else:
        try:
            dtype = jnp.dtype(dtype)
        except TypeError as err:
            raise TypeError(
                f"chebyshev_points: dtype must be a floating dtype, got {dtype!r}"
            ) from err
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"chebyshev_points: dtype must be a floating dtype, got {dtype}"
            )
    return jnp.asarray(x, dtype=dtype)


def chebyshev_vandermonde(x: ArrayLike, num_coeffs: int) -> jax.Array:
    r"""Chebyshev-Vandermonde matrix V[..., i, j] = T_j(x_i), j < num_coeffs.

    Built by the three-term recurrence T_{j+1} = 2 x T_j - T_{j-1} in the dtype of
    ``x`` (stable on [-1, 1]); equals ``numpy.polynomial.chebyshev.chebvander(x,
    num_coeffs - 1)``.

    Args:
        x: [..., M] floating points.
        num_coeffs: D, the number of columns (>= 1).

    Returns:
        [..., M, D] in the dtype of ``x``.

    Raises:
        TypeError: if ``x`` is not floating or num_coeffs is not an int.
        ValueError: if num_coeffs < 1.

    Examples:
        >>> import jax.numpy as jnp
        >>> chebyshev_vandermonde(jnp.array([0.5]), num_coeffs=3).tolist()
        [[1.0, 0.5, -0.5]]
    """
    num_coeffs = check_int("chebyshev_vandermonde", "num_coeffs", num_coeffs, 1)
    x = check_floating("chebyshev_vandermonde", "x", x)
    return _vandermonde(x, num_coeffs)


def _vandermonde(x: jax.Array, num_coeffs: int) -> jax.Array:
    # unrolled, not a scan: a scan compiles faster for many columns, but in the
    # codes' programs it rounded differently from this form (measured), and the
    # decoders' results are kept to the bit (docs/design.md, section 4)
    cols = [jnp.ones_like(x), x][:num_coeffs]
    for _ in range(2, num_coeffs):
        cols.append(2 * x * cols[-1] - cols[-2])
    return jnp.stack(cols, axis=-1)


def equilibrated_vandermondes(
    alpha: jax.Array, beta: jax.Array, num_coeffs: int, acc: Any
) -> tuple[jax.Array, jax.Array]:
    """(U [M, D], T_beta [K, D]): the Chebyshev-Vandermonde rows of the worker
    points ``alpha`` and of the data points ``beta``, both with the columns scaled by
    :func:`orthonormal_column_scale` (M, D), as every Chebyshev decoder uses them.

    One recurrence over the M + K points (inside a jitted decoder: half the
    kernels of two), the same values as two calls of
    :func:`chebyshev_vandermonde`.
    """
    m = alpha.shape[0]
    scale = orthonormal_column_scale(m, num_coeffs, acc)
    both = _vandermonde(jnp.concatenate([alpha, beta]), num_coeffs) * scale[None, :]
    return both[:m], both[m:]


def orthonormal_column_scale(num_points: int, num_coeffs: int, dtype: Any) -> jax.Array:
    """Column scaling that makes the first-kind Chebyshev-Vandermonde orthonormal.

    U = T diag(scale) with scale_0 = sqrt(1/M), scale_j = sqrt(2/M): U^T U = I exactly
    at M first-kind points (the equilibrated matrix, docs/theory.md section 2). Scaling
    columns does not change a least-squares fit, only the conditioning of its factors.
    """
    s = np.full(num_coeffs, np.sqrt(2.0 / num_points))
    s[0] = np.sqrt(1.0 / num_points)
    return jnp.asarray(s, dtype=dtype)


@functools.lru_cache(maxsize=256)
def systematic_points_f64(
    num_inputs: int, num_workers: int, kind: int
) -> tuple[np.ndarray, tuple[int, ...]]:
    """Worker points that contain the K data points: (alpha [M], index [K]).

    The M Chebyshev points of ``kind`` (:func:`points_f64`) with, for each data
    point beta_k (the K first-kind points), the worker point nearest to it in angle
    (theta = arccos x, in which Chebyshev points are equispaced) moved onto it:
    ``alpha[index[k]] == beta_k`` bit for bit, so worker ``index[k]`` is sent query
    k itself and a code on these points is systematic. A data point midway between
    two worker points takes the one nearer the centre (every such data point the
    one farther from it where the two middle ones would take the same: second
    kind, M = K + 1), so the set stays symmetric (x -> -x) except when K is odd
    and M even (0 is a data point, M - 1 nonzero points remain). The order stays
    decreasing, and where the Chebyshev points of M contain the data points
    already (first kind, M an odd multiple of K) they are returned unchanged.

    Why this set: it moves K of the M points by at most half a spacing, so the
    other M - K keep the Chebyshev spacing that conditions the least-squares fit
    on any subset, and it is the Chebyshev set itself where that contains the
    data points. Against the alternatives (cond of the equilibrated rows, median
    over random N-subsets, K = 8): the data points with the Chebyshev points of
    the other M - K repeat points at M = 2K, equal this set at M = 12 and are
    worse at M = 40, degree 3 (1.7x at N = D, 1.32 against 1 at N = M;
    ``benchmarks/systematic.py``); spreading the M - K extra points to minimise
    the largest angular gap was worse at most M = 10 .. 24 and N (up to 4x at
    M = 12, N = D) though better at M = 16 near D, and a local optimisation of
    the free points (the sum over D of log cond at N = M) changed the medians by
    under 1.5x either way (measured while choosing). The indices come from
    integer arithmetic on the angles' numerators, so ties are exact.

    Args:
        num_inputs: K >= 1. num_workers: M >= K (first kind) or M >= K + 1
            (second kind, whose angles are spaced by pi / (M - 1)).
        kind: 1 or 2, the Chebyshev points the other workers keep.

    Returns:
        (alpha float64 [M] read-only, decreasing; index, K distinct worker indices).

    Raises:
        ValueError: M too small for K distinct nearest points, or points that are
            not distinct in float32 (the narrowest accumulation dtype).
    """
    k, m = int(num_inputs), int(num_workers)
    # worker i sits at angle (2i + 1) pi / (2M) (first kind) or i pi / (M - 1)
    # (second); data point k at (2k + 1) pi / (2K): its position in worker
    # spacings is num / den
    if kind == 1:
        num = (2 * np.arange(k) + 1) * m - k
    else:
        num = (2 * np.arange(k) + 1) * (m - 1)
    den = 2 * k
    lo, rem = np.divmod(num, den)
    # at a tie, the neighbour nearer the centre (index (M - 1) / 2); where that
    # makes the two middle data points share one (worker spacing = data spacing:
    # second kind, M = K + 1), the one farther from it
    inward = 2 * lo + 1 < m - 1
    near = np.where(2 * rem < den, lo, lo + 1)
    for rule in (inward, ~inward):
        index = np.where(2 * rem == den, np.where(rule, lo + 1, lo), near)
        if np.unique(index).size == k:
            break
    need = "M >= K" if kind == 1 else "M >= K + 1"
    if m < (k if kind == 1 else k + 1) or np.unique(index).size != k:
        raise ValueError(
            f"systematic points: K={k} data points need {need} Chebyshev points "
            f"of kind {kind} to move onto them, got M={m}"
        )
    alpha = points_f64(m, kind).copy()
    alpha[index] = points_f64(k, 1)
    x32 = alpha.astype(np.float32)
    if np.unique(x32).size != m:
        raise ValueError(
            f"systematic points: the {m} worker points with the K={k} data points "
            f"among them are not distinct in float32; use fewer workers"
        )
    alpha.setflags(write=False)
    return alpha, tuple(int(i) for i in index)
