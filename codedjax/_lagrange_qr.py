"""Householder QR kernels behind the batched Chebyshev least-squares decoder.

* :func:`qr_decoding_matrices`: B masks at once by Householder QR (one LAPACK
  call per mask, ``lax.map``), ``cond`` a certified estimate in float32 and exact
  in float64 (or on request): the batched kernel of small float32 batches and of
  float64, and the fallback of the semi-normal kernel.
* :func:`qr_tier`: that fallback, the masks the semi-normal kernel
  (``codedjax._lagrange_lsq.ne_decoding_matrices``) flags, a few at a time.

The one-mask kernels (QR and semi-normal) are in ``codedjax._basis_lsq``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._batched_linalg import HI, SQUARINGS, after, bmm, each, lambda_max_bounds, mT
from ._chebyshev import equilibrated_vandermondes
from ._dtypes import points_valid


def qr_decoding_matrices(
    sel, alpha, beta, num_coeffs, acc, *, with_q=False, exact_cond=False
):
    r"""Decoding matrices of B masks at once by Householder QR, as [B, K, M].

    Householder QR of every masked equilibrated basis U_{S_b} = diag(sel_b) U (one
    batched LAPACK geqrf/orgqr call, unconditionally backward stable), then
    A_b = (T_beta R_b^{-1}) Q_b^T: the K x D evaluation is folded into the
    triangular solve before the product with Q, so A costs O(K M D) per mask and the
    payload product A @ y is one large matrix product (the cheap order for F >= K).

    ``cond``: with float64 accumulation (the reference precision), or on request
    (``exact_cond``), the exact 2-norm condition number kappa of the equilibrated
    selected rows (an SVD of R). Otherwise, with float32 accumulation, NOT the
    exact kappa (an SVD per mask costs more than the solve itself) but an
    estimate with certified bounds, computed by a few batched matrix products:

    .. math::
        D^{-1/32}\,\kappa \le \mathrm{cond} \le D^{1/32}\,\kappa
        \quad (0.908\,\kappa \le \mathrm{cond} \le 1.101\,\kappa
        \text{ at } D = 22),

    relative to the kappa of the computed R (which differs from the exact kappa by
    O(u kappa), as for any working-precision method). It is
    cond^2 = min(||U||_2^2, ||G^8||_F^(1/8)) * lambda_lo(H) with G = U_S^T U_S
    (sigma_max^2 = lambda_max(G); the first factor is an upper bound, exact for
    first-kind points with fewer than D stragglers, where U has orthonormal columns)
    and H = R^{-1} R^{-T} (1/sigma_min^2 = lambda_max(H); lambda_lo a certified lower
    bound, a Rayleigh quotient after 8 power steps); see :func:`lambda_max_bounds`.
    Measured against numpy's float64 cond (M = 40, N = 30, D = 22, 4096 masks,
    ``python -m benchmarks.decode``): ratio min 0.986, median 1.0000, max 1.0006,
    96% of masks within 1e-3; with all 40 workers exact to 1e-6.

    Args:
        sel: bool [B, M] selected (responding, finite) workers.
        alpha: [M] worker points; beta: [K] data points (both in ``acc``).
        num_coeffs: D (static).
        acc: accumulation dtype (float32 or float64).
        exact_cond: the exact condition number (an SVD of R per mask) also in
            float32.

    Returns:
        (A [B, K, M], ok [B], cond [B], num_used [B]); A is zero where fewer than D
        rows were selected or the system is numerically singular (then ``ok`` is
        False and ``cond`` is inf). With ``with_q`` a fifth element: the factors
        (Q [B, M, D], R^{-T} [B, D, D]), from which :func:`ls_residual_sq` solves
        the fit of a payload.

    References:
        N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM
        2002, ch. 19-20 (Householder QR and least squares); the bounds on
        lambda_max from ||G^p||_F and the Rayleigh quotient: R. A. Horn and
        C. R. Johnson, Matrix Analysis, 2nd ed., 2013, sec. 4.2 and 5.6; G. H. Golub
        and C. F. Van Loan, Matrix Computations, 4th ed., 2013, sec. 8.2 (power
        method).
    """
    b, m = sel.shape
    d = num_coeffs
    k = beta.shape[0]
    u, tb = equilibrated_vandermondes(alpha, beta, d, acc)  # [M, D], [K, D]
    s = sel.astype(acc)
    num_used = jnp.sum(sel, axis=1, dtype=jnp.int32)
    enough = num_used >= d

    unorm2 = jnp.linalg.norm(u, 2) ** 2  # ||U||_2^2 >= ||U_S||_2^2, shared (an SVD)
    us = after(u[None, :, :] * s[:, :, None], unorm2)
    rhs = jnp.concatenate([tb.T, jnp.eye(d, dtype=acc)], axis=1)  # [D, K + D]

    def factor(us1):  # one mask: Q, R and R^{-T} [T_b^T | I]
        q1, r1 = jnp.linalg.qr(us1)
        return q1, r1, solve_triangular(r1, rhs, trans="T", lower=False)

    q, r, w = each(factor, us)
    a = mT(bmm(q, w[..., :k]))  # (T_b R^{-1}) Q^T  [B, K, M] (Q is not transposed)
    zi = w[..., k:]  # R^{-T}

    if exact_cond or jnp.dtype(acc) == jnp.dtype(jnp.float64):
        # float64 is the reference precision: the exact condition number (an SVD
        # of R, after the triangular solve so that no two LAPACK calls overlap)
        sv = each(lambda r1: jnp.linalg.svd(r1, compute_uv=False), after(r, w))
        cond = sv[:, 0] / sv[:, -1]
    else:
        # sigma_max^2: upper bound (exact for first-kind points and s < D, where it
        # equals ||U||_2^2 = 1); 1/sigma_min^2: lower bound (Rayleigh quotient).
        outer = (u[:, :, None] * u[:, None, :]).reshape(m, d * d)
        g = jnp.matmul(s, outer, precision=HI).reshape(b, d, d)  # U_S^T U_S
        lam_g = jnp.minimum(unorm2, lambda_max_bounds(g, SQUARINGS)[1])
        lam_h = lambda_max_bounds(bmm(mT(zi), zi), SQUARINGS)[0]
        cond = jnp.sqrt(lam_g * lam_h)
    cond = jnp.where(jnp.isnan(cond), jnp.asarray(jnp.inf, acc), cond)

    usable = enough & jnp.isfinite(cond) & jnp.all(jnp.isfinite(a), axis=(1, 2))
    cond = jnp.where(usable, cond, jnp.asarray(jnp.inf, acc)).astype(acc)
    a = jnp.where(usable[:, None, None] & sel[:, None, :], a, jnp.zeros_like(a))
    eps = jnp.finfo(acc).eps
    ok = usable & (cond * eps < 1) & points_valid(alpha) & points_valid(beta)
    if with_q:
        return a, ok, cond, num_used, (q, zi)
    return a, ok, cond, num_used


def qr_tier(sel, need, a, ok, cond, alpha, beta, d, acc, cap):
    """Decode the masks flagged ``need`` with the QR kernel, ``cap`` at a time.

    One compiled QR program of batch ``cap``, run ceil(count / cap) times in a
    while loop (zero times when no mask needs it), so the hard masks cost what they
    cost in the QR kernel and the others nothing.
    """
    count = jnp.sum(need, dtype=jnp.int32)
    # flagged masks first, in index order: O(B) compaction instead of a sort
    rank = jnp.cumsum(need, dtype=jnp.int32) - 1
    slot = jnp.where(need, rank, count + jnp.cumsum(~need, dtype=jnp.int32) - 1)
    index = jnp.arange(slot.shape[0], dtype=slot.dtype)
    order = jnp.zeros_like(slot).at[slot].set(index, unique_indices=True)

    def body(state):
        step, a, ok, cond = state
        idx = jax.lax.dynamic_slice_in_dim(order, step * cap, cap)
        a2, ok2, c2, _ = qr_decoding_matrices(sel[idx], alpha, beta, d, acc)
        take = need[idx]
        a = a.at[idx].set(jnp.where(take[:, None, None], a2, a[idx]))
        ok = ok.at[idx].set(jnp.where(take, ok2, ok[idx]))
        cond = cond.at[idx].set(jnp.where(take, c2, cond[idx]))
        return step + 1, a, ok, cond

    state = (jnp.asarray(0, jnp.int32), a, ok, cond)
    _, a, ok, cond = jax.lax.while_loop(lambda s: s[0] * cap < count, body, state)
    return a, ok, cond
