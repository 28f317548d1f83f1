"""Square-system kernels of the threshold decoder: interpolation through D points.

At most D workers are selected per mask (the first D responders in arrival order),
so the system U_S c = y_S is square: polynomial interpolation through the D selected
points. Its decoding matrix is the Lagrange basis at the data points, computed by
the first (modified Lagrange) barycentric form in float32 (no factorisation, no
LAPACK call) and by LU with partial pivoting in float64 (the reference precision).
The least-squares kernels of ChebyLS are in ``codedjax._lagrange_lsq``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._batched_linalg import HI, SQUARINGS, after, bmm, each, lambda_max_bounds, mT
from ._chebyshev import (
    chebyshev_vandermonde,
    equilibrated_vandermondes,
    orthonormal_column_scale,
    points_f64,
)
from ._dtypes import points_valid


def _log_node_factors(x, alpha, sel):
    """log|prod_{i in S} (x_k - alpha_i)| and its sign, for B selections at once.

    Returns (logs [B, X], negative [B, X] count of factors < 0, lg [X, M],
    hit [X, M], neg [X, M]); a point x_k equal to a worker point (``hit``) leaves
    that factor out (its log counted as 0), so a hit never produces 0 * log 0.
    """
    acc = alpha.dtype
    diff = x[:, None] - alpha[None, :]
    hit = diff == 0
    lg = jnp.log(jnp.abs(jnp.where(hit, jnp.ones_like(diff), diff)))
    neg = diff < 0
    s = sel.astype(acc)
    logs = jnp.matmul(s, lg.T, precision=HI)
    count = jnp.matmul(s, neg.T.astype(acc), precision=HI)
    return logs, count, diff, hit


def _lagrange_factors(x, alpha, sel, logw, signw, shift):
    """The factors of l_m(x_k) exp(-shift_b) = lx[b, k] wt[b, m] / (x_k - alpha_m).

    The first (modified Lagrange) form l_m(x) = l(x) w_m / (x - alpha_m),
    l(x) = prod_{i in S} (x - alpha_i): every value is a product of |S| + 1
    factors (computed as a sum of logs), so it carries a relative error of a few
    |S| u whatever the conditioning (no cancellation; the second, true barycentric
    form cancels and loses every digit once cond ~ 1/(|S| u)). ``shift`` [B] is
    subtracted from every exponent (0 for values, a per-mask scale for the
    condition number).

    Returns:
        lx [B, X] (signed l(x_k) max|w| exp(-shift)), wt [B, M] (signed
        w_m / max|w|, zero for unselected workers), and diff [X, M] and hit [X, M]
        (x_k equal to a worker point: that factor is left out of l(x_k)).
    """
    logs, count, diff, hit = _log_node_factors(x, alpha, sel)
    top = jnp.max(jnp.where(sel, logw, -jnp.inf), axis=1)  # [B]
    top = jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))
    wt = jnp.where(sel, signw * jnp.exp(logw - top[:, None]), 0)  # [B, M], |wt| <= 1
    lx = jnp.exp(logs + (top - shift)[:, None]) * (1 - 2 * jnp.mod(count, 2))
    return lx, wt, diff, hit


def _lagrange_values(x, alpha, sel, logw, signw, shift):
    """l_m(x_k) exp(-shift_b) for the selected workers m, as [B, X, M].

    See :func:`_lagrange_factors`; x_k equal to a selected worker point gives the
    unit row.
    """
    lx, wt, diff, hit = _lagrange_factors(x, alpha, sel, logw, signw, shift)
    inv = 1 / jnp.where(hit, jnp.ones_like(diff), diff)
    e = lx[:, :, None] * wt[:, None, :] * inv[None]
    hits = hit[None] & sel[:, None, :]
    unit = hits.astype(e.dtype) * jnp.exp(-shift)[:, None, None]
    return jnp.where(jnp.any(hits, axis=2, keepdims=True), unit, e)


def _barycentric_weights(alpha, sel):
    """log|w_m| and sign(w_m) of w_m = 1 / prod_{i in S, i != m} (alpha_m - alpha_i)."""
    m = alpha.shape[0]
    eye = jnp.eye(m, dtype=bool)
    diff = alpha[:, None] - alpha[None, :]
    lg = jnp.where(eye, 0, jnp.log(jnp.abs(jnp.where(eye, 1, diff))))
    s = sel.astype(alpha.dtype)
    logw = -jnp.matmul(s, lg.T, precision=HI)  # [B, M]
    count = jnp.matmul(s, ((diff < 0) & ~eye).T.astype(alpha.dtype), precision=HI)
    return logw, 1 - 2 * jnp.mod(count, 2)


def square_decoding_matrices(sel, alpha, beta, num_coeffs, acc):
    r"""Decoding matrices of B square systems (at most D rows selected), as [B, K, M].

    The batched kernel of the threshold decoder. The D x D system U_S c = y_S is
    polynomial interpolation through the D selected points, so its decoding matrix
    is the Lagrange basis at the data points, A_S = T_beta U_S^{-1} =
    [l_j(beta_k)]: float32 accumulation evaluates it directly by the first
    (modified Lagrange) barycentric form, with no factorisation and no LAPACK call
    (a few matrix products and elementwise passes over [B, K, M]):

    .. math::
        l_j(x) = \frac{w_j\,\ell(x)}{x - \alpha_j},\quad
        \ell(x) = \prod_{i\in S}(x - \alpha_i),\quad
        w_j = \prod_{i\in S, i\ne j}(\alpha_j - \alpha_i)^{-1},

    every entry a product of D + 1 factors (summed as logs: one matrix product
    with the 0/1 selection for all masks), hence accurate to a relative O(D u)
    whatever the conditioning, and A_S y_S is backward stable in y (Higham 2004).
    Measured against numpy's float64 solve (M = 40, N = D = 22, 4096 masks,
    ``python -m benchmarks.decode --only vmap_threshold``): every mask with
    cond eps <= 1e-2 within 5 cond eps (LU with partial pivoting: 1 cond eps).

    ``cond``: float64 accumulation, the exact 2-norm condition number of U_S (an
    SVD, after an LU solve; the reference precision). float32, the certified
    estimate of :func:`qr_decoding_matrices` (within D^(+-1/32) of kappa up to
    rounding), from G = U_S^T U_S and H = U_S^{-1} U_S^{-T}, where H is formed
    without an inverse: with z the D first-kind Chebyshev points (whose
    equilibrated Vandermonde V_z is orthogonal) and E = [l_j(z_k)] [D, D],
    U_S^{-1} = sqrt(M/D) V_z^T E, so H has the eigenvalues of (M/D) E E^T. E is
    computed entrywise like A (relative O(D u)) and scaled by its largest factor
    (put back in logs), so the estimate holds far beyond 1/eps (cond = inf only
    past the float32 range). Measured (as above): ratio to numpy's cond 0.9986 to
    1.0000 on the masks with cond eps <= 1e-2, and every mask with cond >= 1/eps
    flagged; a mask of cond 1.0009e8 (numpy float64) is estimated 1.0009e8.

    Args:
        sel: bool [B, M], at most D selected workers per mask (the first D
            responders in arrival order).
        alpha: [M]; beta: [K] (in ``acc``); num_coeffs: D (static); acc: float32
            or float64.

    Returns:
        (A [B, K, M], ok [B], cond [B], num_used [B]); A is zero where fewer than D
        rows were selected or the system is numerically singular (then ``ok`` is
        False and ``cond`` is inf).

    References:
        N. J. Higham, The numerical stability of barycentric Lagrange
        interpolation, IMA J. Numer. Anal. 24 (2004) 547-556; J.-P. Berrut and
        L. N. Trefethen, Barycentric Lagrange interpolation, SIAM Rev. 46 (2004)
        501-517; N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd
        ed., SIAM 2002, ch. 9 (LU with partial pivoting, float64 path).
    """
    if jnp.dtype(acc) == jnp.dtype(jnp.float64):
        return _square_decoding_matrices_lu(sel, alpha, beta, num_coeffs, acc)
    b, m = sel.shape
    d = num_coeffs
    num_used = jnp.sum(sel, axis=1, dtype=jnp.int32)
    enough = num_used >= d
    scale = orthonormal_column_scale(m, d, acc)
    u = chebyshev_vandermonde(alpha, d) * scale[None, :]  # [M, D]
    logw, signw = _barycentric_weights(alpha, sel)
    zero = jnp.zeros((b,), acc)
    a = _lagrange_values(beta, alpha, sel, logw, signw, zero)  # [B, K, M]

    # H ~ (M/D) E E^T with E = [l_j(z_k)]; E is formed scaled by exp(-shift) (its
    # largest exponent) so that E E^T cannot overflow, and the shift is put back
    # into the estimate in logs
    z = jnp.asarray(points_f64(d, 1), acc)  # D first-kind points
    logs_z = _log_node_factors(z, alpha, sel)[0]
    top = jnp.max(jnp.where(sel, logw, -jnp.inf), axis=1)
    shift = jnp.max(logs_z, axis=1) + top  # >= the log of E's entries, roughly
    shift = jnp.where(jnp.isfinite(shift), shift, zero)
    lz, wt, _, _ = _lagrange_factors(z, alpha, sel, logw, signw, shift)
    # E on the D selected columns only (rank order; past num_used a repeated
    # worker, such a mask is not usable anyway), so E E^T contracts D, not M
    rank = jnp.cumsum(sel, axis=1, dtype=jnp.int32) - 1  # [B, M]
    slot = jnp.where(sel & (rank < d), rank, d)  # D: not among the first D
    col = jnp.zeros((b, d + 1), jnp.int32)  # col[b, r]: the worker of rank r
    col = col.at[jnp.arange(b)[:, None], slot].set(
        jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), (b, m))
    )[:, :d]
    wt = jnp.take_along_axis(wt, col, axis=1)  # [B, D]
    diff = z[None, :, None] - alpha[col][:, None, :]  # [B, D, D]
    hit = diff == 0
    e = lz[:, :, None] * wt[:, None, :] / jnp.where(hit, jnp.ones_like(diff), diff)
    unit = hit.astype(acc) * jnp.exp(-shift)[:, None, None]
    e = jnp.where(jnp.any(hit, axis=2, keepdims=True), unit, e)  # [B, D, D]
    h = (m / d) * bmm(e, mT(e))  # eigenvalues of U_S^{-1} U_S^{-T} exp(-2 shift)
    outer = (u[:, :, None] * u[:, None, :]).reshape(m, d * d)
    g = jnp.matmul(sel.astype(acc), outer, precision=HI).reshape(b, d, d)
    unorm2 = jnp.linalg.norm(u, 2) ** 2  # >= ||U_S||_2^2
    lam_g = jnp.minimum(unorm2, lambda_max_bounds(g, SQUARINGS)[1])
    lam_h = lambda_max_bounds(h, SQUARINGS)[0]
    cond = jnp.exp(0.5 * (jnp.log(lam_g) + jnp.log(lam_h)) + shift)
    cond = jnp.where(jnp.isnan(cond), jnp.asarray(jnp.inf, acc), cond)
    usable = enough & jnp.isfinite(cond) & jnp.all(jnp.isfinite(a), axis=(1, 2))
    cond = jnp.where(usable, cond, jnp.asarray(jnp.inf, acc)).astype(acc)
    a = jnp.where(usable[:, None, None] & sel[:, None, :], a, jnp.zeros_like(a))
    eps = jnp.finfo(acc).eps
    ok = usable & (cond * eps < 1) & points_valid(alpha) & points_valid(beta)
    return a, ok, cond, num_used


def _square_decoding_matrices_lu(sel, alpha, beta, num_coeffs, acc):
    r"""The float64 path of :func:`square_decoding_matrices`: LU per mask.

    The D selected rows of the equilibrated basis U are gathered into U_S
    [B, D, D] and factored by LU with partial pivoting one mask at a time (no
    LAPACK call with a batch axis, see :func:`each`), then A_S = T_beta U_S^{-1}
    by two triangular solves with the K right-hand sides T_beta^T, scattered back
    to the M worker columns; ``cond`` is the exact 2-norm condition number of U_S
    (an SVD per mask).

    Args/returns: as :func:`square_decoding_matrices` (``acc`` float64 here).

    References:
        N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM
        2002, ch. 9 (LU with partial pivoting).
    """
    b, m = sel.shape
    d = num_coeffs
    k = beta.shape[0]
    u, tb = equilibrated_vandermondes(alpha, beta, d, acc)  # [M, D], [K, D]
    num_used = jnp.sum(sel, axis=1, dtype=jnp.int32)
    enough = num_used >= d
    # the selected workers first (index order among them; the order of the rows
    # of a square system does not change its solution): row r of U_S is the
    # selected worker of rank r, gathered by ONE exact matrix product with 0/1
    # weights (one nonzero term per entry) instead of a sort and a gather
    rank = jnp.cumsum(sel, axis=1, dtype=jnp.int32) - 1  # [B, M]
    pick = sel[:, None, :] & (
        rank[:, None, :] == jnp.arange(d, dtype=jnp.int32)[None, :, None]
    )
    us = jnp.matmul(pick.astype(acc).reshape(b * d, m), u, precision=HI)
    us = us.reshape(b, d, d)  # U_S [B, D, D], zero rows past num_used
    rows = jnp.any(pick, axis=2)  # [B, D] False past num_used
    # worker of row r (0 past num_used: those masks are not usable)
    idx = jnp.sum(jnp.where(pick, jnp.arange(m, dtype=jnp.int32), 0), axis=2)
    # a mask with too few rows gets the identity (ok is False for it anyway), so
    # that no LAPACK call sees a singular matrix
    eye = jnp.eye(d, dtype=acc)
    us = jnp.where(enough[:, None, None], us, eye)
    rhs = tb.T  # [D, K], shared

    def factor(us1):  # one mask: P U_S = L R, and W^T = L^{-T} R^{-T} T_b^T
        lu1, _, perm1 = jax.lax.linalg.lu(us1)
        w1 = solve_triangular(lu1, rhs, trans="T", lower=False)
        w1 = solve_triangular(lu1, w1, trans="T", lower=True, unit_diagonal=True)
        return perm1, w1

    perm, w = each(factor, us)
    # P U_S = L R, so T_b U_S^{-1} = W P with W = T_b R^{-1} L^{-1}: W^T by two
    # triangular solves (R^T, then L^T), and the permutation is folded into the
    # scatter to the M worker columns (no scatter of the solution)
    wt = mT(w)  # W [B, K, D]: column i belongs to row perm[i] of U_S
    worker = jnp.take_along_axis(idx, perm, axis=1)  # [B, D] worker of column i
    live = jnp.take_along_axis(rows, perm, axis=1)
    slot = jnp.full((b, m), d, jnp.int32)  # column of W for each worker, D: none
    slot = slot.at[jnp.arange(b)[:, None], worker].set(
        jnp.where(live, jnp.arange(d, dtype=jnp.int32), d)
    )
    wpad = jnp.concatenate([wt, jnp.zeros((b, k, 1), acc)], axis=2)
    a = jnp.take_along_axis(wpad, jnp.broadcast_to(slot[:, None, :], (b, k, m)), 2)

    sv = each(lambda m1: jnp.linalg.svd(m1, compute_uv=False), after(us, w))
    cond = sv[:, 0] / sv[:, -1]
    cond = jnp.where(jnp.isnan(cond), jnp.asarray(jnp.inf, acc), cond)
    usable = enough & jnp.isfinite(cond) & jnp.all(jnp.isfinite(a), axis=(1, 2))
    cond = jnp.where(usable, cond, jnp.asarray(jnp.inf, acc)).astype(acc)
    a = jnp.where(usable[:, None, None], a, jnp.zeros_like(a))
    eps = jnp.finfo(acc).eps
    ok = usable & (cond * eps < 1) & points_valid(alpha) & points_valid(beta)
    return a, ok, cond, num_used
