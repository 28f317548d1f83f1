"""Least-squares kernels behind the Chebyshev decoders (mask formulation).

Every kernel takes a boolean selection over all M workers (fixed shape, so one
compiled program serves every straggler pattern) and returns the decoding matrix
A [K, M] with A @ y = T_beta c, c the least-squares Chebyshev fit to the selected
rows, plus ``ok``, ``cond`` and the number of rows used.

Kernels:

* :func:`ls_decoding_matrix` (one mask): the dense one-mask kernel of
  ``codedjax._basis_lsq`` on the equilibrated rows. float32: corrected
  semi-normal equations (Cholesky, two refinement steps through the rows) with
  the tiers of the batched kernel (cond <= 512 by a certified estimate, else
  Householder QR); float64 or ``exact_cond``: Householder QR and the exact 2-norm
  condition number (an SVD of R).
* :func:`ls_decoding_matrices` (B masks at once): the batched path. With float32
  accumulation and at least ``NE_MIN_MASKS`` masks :func:`ne_decoding_matrices`:
  corrected semi-normal equations (packed Gram matrices by one matrix product,
  sweep-operator inverses vectorised across the batch, one refinement step
  through the rows) for the masks with cond <= 512, Householder QR
  (``codedjax._lagrange_qr``) for the rest; ``cond`` an estimate (Lanczos,
  ``codedjax._batched_linalg.lanczos_lambda_max``). Smaller float32 batches:
  :func:`qr_decoding_matrices` for every mask (several times cheaper to compile,
  as fast to run there), ``cond`` a certified estimate. With float64
  accumulation (the reference precision), or ``exact_cond``: QR and the exact
  condition number. :func:`batched_kernel` makes the choice.
* :func:`ls_residual_sq`: the residual of the batched fits, for the predicted
  error, in the form of the kernel that ran (semi-normal or QR).

The square systems of the threshold decoder (at most D rows) are interpolation,
not least squares: their kernels are in ``codedjax._lagrange_square``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._basis_lsq import DenseLs, dense_ls_matrix
from ._batched_linalg import NE_COND_SQ_EPS, lanczos_lambda_max, two_column_start
from ._batched_linalg import tridiagonal_lambda_max as tridiagonal_lambda_max
from ._chebyshev import (
    chebyshev_vandermonde,
    equilibrated_vandermondes,
    orthonormal_column_scale,
)
from ._dtypes import matmul_precision, points_valid
from ._lagrange_qr import qr_decoding_matrices, qr_tier

# the names under which the tests and tools reach the kernels' parts
_NE_COND_SQ_EPS = NE_COND_SQ_EPS
_lanczos_lambda_max = lanczos_lambda_max
_tridiagonal_lambda_max = tridiagonal_lambda_max


def ls_decoding_matrix(
    sel, alpha, beta, num_coeffs, acc, *, y=None, exact_cond=False
) -> DenseLs:
    """A [K, M] with A @ y = T_beta c, c the LS fit to the selected rows (one mask).

    The dense one-mask kernel (``codedjax._basis_lsq.dense_ls_matrix``) on the
    equilibrated Chebyshev-Vandermonde rows U and T_beta: in float32 the
    semi-normal route of the batched kernel (QR where its certified cond estimate
    exceeds 512), in float64 or with ``exact_cond`` Householder QR and the exact
    cond. ``y`` (optional, [M, F], finite, zero off the selection): the residual
    sum of squares of its fit is returned too (``rss``), for the predicted error.

    Returns:
        ``DenseLs(a, ok, cond, num_used, rss)``: A is zero when fewer than D rows
        are selected or the system is numerically singular (then ``ok`` is False
        and ``cond`` is inf); ``ok`` also False for invalid points.
    """
    u, tb = equilibrated_vandermondes(alpha, beta, num_coeffs, acc)
    ls = dense_ls_matrix(sel, u, tb, acc, y=y, exact_cond=exact_cond)
    return ls._replace(ok=ls.ok & points_valid(alpha) & points_valid(beta))


# ----------------------------------------------------------------------------------
# batched kernel, float32: corrected semi-normal equations, QR for the hard masks

# A mask is decoded by the normal equations while its estimated cond^2 eps <= 1/32
# (NE_COND_SQ_EPS, codedjax._batched_linalg).
# Lanczos steps (matrix-vector products) of the cond estimate: on H^{-1} (for
# sigma_min) and on H (for sigma_max, whose top eigenvalue is usually a large
# cluster, 1 for first-kind points with fewer than D stragglers).
_LANCZOS_STEPS = 8
_LANCZOS_STEPS_GRAM = 6
# At most 1/_QR_TIER_FRACTION of the masks per QR call of the fallback tier (it
# loops when more need it): a call costs its whole batch (about 25 us a mask on
# CPU) however few masks need it, so the batch is kept small (16 at B = 4096, where
# about 1% of the masks need QR at M = 40, N = 30).
_QR_TIER_FRACTION = 256
# Masks per chunk of the sweep: the batch is split into chunks of this many masks
# (the last axis of the sweep's arrays), so that each of its D passes and the
# transposition of the inverses to one matrix per mask work on a block that stays in
# cache (measured 36% faster for the inverses at B = 4096, M = 40, D = 22).
_SWEEP_CHUNK = 128
# Largest D served by the normal-equations kernel. The sweep is unrolled over D, so
# its compile time grows with D (7 s at D = 46, 9 s at D = 91 on 2 cores); it was
# 4x faster than the QR kernel at both sizes (M = 100 and 200, float32, CPU).
NE_MAX_COEFFS = 128
# Fewest masks (the static batch size) served by the normal-equations kernel; smaller
# float32 batches use the QR kernel (see batched_kernel). The normal-equations
# program takes 2.1-2.9 times the CPU time to compile (4-10 s against 1.5-4 s at
# M = 12 and 40); it ran slower than QR up to 4 masks, about as fast at 12, as
# fast or faster from 16 on (3.4-6 times at 128); the measured table and its
# command are in docs/decoding.md ("The batched kernels").
NE_MIN_MASKS = 16


def _precision():
    """Matmul precision for float32 work (the shared policy, see matmul_precision)."""
    return matmul_precision()


def _packed_index(d):
    """Row-major upper-triangle storage of a symmetric D x D matrix.

    Returns (i, j, pos): entry p of the packed vector is (i[p], j[p]) with
    i[p] <= j[p], and pos[a, b] is the packed position of (a, b) or (b, a).
    """
    i, j = np.triu_indices(d)
    pos = np.empty((d, d), np.int32)
    pos[i, j] = np.arange(i.size)
    pos[j, i] = pos[i, j]
    return i, j, pos


def _sweep_inverse(hp, d):
    """Inverses of B symmetric positive definite matrices by the sweep operator.

    ``hp`` [..., P, C] holds the matrices in packed upper-triangle storage (see
    :func:`_packed_index`) with the batch (or a chunk of it) last, so every step is
    one elementwise pass that vectorises across the batch (no per-matrix LAPACK
    call, whose fixed cost dominates at D ~ 20). Sweeping pivot k maps
    a_kk -> -1/a_kk, a_ik -> a_ik / a_kk and a_ij -> a_ij - a_ik a_kj / a_kk, which
    keeps the matrix symmetric; sweeping every pivot gives -H^{-1}. This is
    Gauss-Jordan elimination without pivoting, stable for SPD matrices: the inverse
    is within a small multiple of cond(H) * eps of the exact one.

    Returns:
        H^{-1} packed, shaped like ``hp``. A matrix that meets a pivot <= 0 (not
        numerically positive definite) gets NaN in every entry of its inverse.
    """
    ii, jj, pos = _packed_index(d)
    nan = jnp.asarray(jnp.nan, hp.dtype)
    x = hp  # [..., P, C]: packed axis second to last, batch (or a chunk of it) last
    for k in range(d):
        col = x[..., pos[:, k], :]  # [..., D, C] column k
        # read the pivot from x, not from col, and return nothing but x: either
        # change makes XLA:CPU recompute the whole chain (3-10x slower)
        piv = x[..., pos[k, k], :]
        piv = jnp.where(piv > 0, piv, nan)  # not positive definite: NaN, flagged later
        ratio = col / piv[..., None, :]
        touches = (ii == k) | (jj == k)
        other = np.where(ii == k, jj, ii)
        x = jnp.where(
            touches[:, None],
            ratio[..., other, :],
            x - col[..., ii, :] * ratio[..., jj, :],
        )
        x = x.at[..., pos[k, k], :].set(-1.0 / piv)
    return -x


def _ne_inverses(u, w, d):
    """H_b^{-1} for H_b = U^T diag(w_b) U, as [D, D, B] and [B, D, D].

    Packed Gram matrices by one matrix product [P, M] x [M, B], then the sweep
    (:func:`_sweep_inverse`) on chunks of ``_SWEEP_CHUNK`` masks ([C, P, chunk]: every
    pass of the sweep, and the transposition to one matrix per mask, on a block that
    stays in cache; the batch is padded with identity matrices to whole chunks).
    Shared by the decoding kernel and the residual of the fit
    (:func:`ls_residual_sq`): identical operations on identical inputs, so a jitted
    decoder computes them once.
    """
    ii, jj, pos = _packed_index(d)
    b = w.shape[0]
    with jax.named_scope("gram"):
        gram = jnp.matmul((u[:, ii] * u[:, jj]).T, w.T, precision=_precision())
    chunk = min(b, _SWEEP_CHUNK)
    n = -(-b // chunk)
    with jax.named_scope("sweep"):
        if n * chunk > b:  # pad with identity matrices (a harmless sweep), cut below
            eye = jnp.asarray((ii == jj).astype(np.float32), gram.dtype)
            pad = jnp.broadcast_to(eye[:, None], (eye.shape[0], n * chunk - b))
            gram = jnp.concatenate([gram, pad], axis=1)
        x = _sweep_inverse(jnp.transpose(gram.reshape(-1, n, chunk), (1, 0, 2)), d)
    with jax.named_scope("layout"):
        x = x[:, pos]  # [C, D, D, chunk]
        hinv_last = jnp.transpose(x, (1, 2, 0, 3)).reshape(d, d, n * chunk)[..., :b]
        hinv = jnp.transpose(x, (0, 3, 1, 2)).reshape(n * chunk, d, d)[:b]
    return hinv_last, hinv


def ne_decoding_matrices(sel, alpha, beta, num_coeffs, acc):
    r"""Decoding matrices of B masks at once (float32), as [B, K, M].

    Corrected semi-normal equations with a QR fallback. With U the equilibrated
    Chebyshev-Vandermonde matrix, w_b the 0/1 selection and H_b = U^T diag(w_b) U:

    1. all Gram matrices in packed storage by ONE matrix product
       [P, M] x [M, B] (P = D(D+1)/2), then all inverses H_b^{-1} by the symmetric
       sweep operator vectorised across the batch (:func:`_sweep_inverse`);
    2. Z_b = T_beta H_b^{-1} by one matrix product over the stacked inverses, and
       A_b = Z_b U^T diag(w_b);
    3. one step of iterative refinement with the residual formed through the rows,
       A_b += (T_beta - A_b U) H_b^{-1} U^T diag(w_b). Forming H_b
       squares the condition number (error ~ cond^2 eps); the row residual is a
       backward error in the data U_S, so the refined A_b is as accurate as a QR
       solve while cond^2 eps << 1 (A. Bjorck, BIT 27 (1987) 198-214);
    4. ``cond`` = sqrt(lambda_b * rho_b), the largest Ritz values of H_b and of
       H_b^{-1} after 6 and 8 Lanczos steps (``lanczos_lambda_max``; for
       H_b^{-1} from two of its columns, ``two_column_start``, for H_b from
       the selected rows weighted to the ends of [-1, 1]); lambda_b is
       replaced by its upper bound ||U||_2^2 when within 1% of it (that bound is
       exact for first-kind points with fewer than D stragglers);
    5. masks with cond^2 eps > 1/32 (cond > 512 in float32), a non-positive pivot
       or a non-finite result go to :func:`qr_decoding_matrices` (Householder QR,
       certified cond estimate), ceil(B/64) masks per call, looping when more
       need it (so a batch of hard masks costs what the QR kernel costs).

    Accuracy: every mask is decoded backward stably; measured against numpy's
    float64 least squares (M = 40, N = 30, D = 22, 4096 masks, ``python -m
    benchmarks.decode``) the worst mask is within 1.5 cond eps (the QR kernel
    alone: 1.7 cond eps).

    ``cond`` of a mask of steps 1-4 is an estimate of the 2-norm condition number
    kappa of the equilibrated selected rows, from below up to 0.5%: Ritz values
    never exceed lambda_max(H_b) = sigma_max^2 and lambda_max(H_b^{-1}) =
    1/sigma_min^2 (up to rounding, of relative size cond^2 eps for the computed
    inverse), and ||U||_2^2 is used only within 1% of the Ritz value. It is NOT
    a certified bound from below: a Krylov space of 8 vectors can miss the
    smallest singular direction of a mask (with 4 steps the mask M = 40, D = 22
    missing workers {2, 5, 19, 21, 24, 26, 31, 33, 36, 39} gave 0.67 kappa; 8
    steps give 1.0000 there). Measured against numpy's float64 cond over 4096
    random masks per N (M = 40, D = 22, masks with kappa <= 512, ``python
    tools/cond_estimate_accuracy.py``): first-kind points, N = 30: median ratio
    1.0000, 99.7% within 1e-3, worst 0.997; N = 24, 26, 34: worst 0.970, 0.981,
    0.999; second-kind points (sigma_max needs Lanczos too), N = 24 to 34: 1%
    below 0.974, worst 0.950. The largest ratio seen is 1.004 (kind 1) and 1.010
    (kind 2): the cond^2 eps rounding of the computed inverse near kappa = 512.

    Args/returns: as :func:`ls_decoding_matrices` (``acc`` float32 here).
    """
    b, m = sel.shape
    d = num_coeffs
    k = beta.shape[0]
    prec = _precision()
    u, tb = equilibrated_vandermondes(alpha, beta, d, acc)  # [M, D], [K, D]
    w = sel.astype(acc)  # [B, M]
    num_used = jnp.sum(sel, axis=1, dtype=jnp.int32)
    enough = num_used >= d

    hinv_last, hinv = _ne_inverses(u, w, d)  # [D, D, B] and [B, D, D]

    def rows(z):  # Z_b U^T diag(w_b): [B, K, D] -> [B, K, M]
        return jnp.matmul(z, u.T, precision=prec) * w[:, None, :]

    with jax.named_scope("decoding_matrix"):
        # Z = T_beta H^{-1}: one [K, D] x [D, D B] product on the batch-last inverses
        z = jnp.matmul(tb, hinv_last.reshape(d, d * b), precision=prec)
        z = jnp.transpose(z.reshape(k, d, b), (2, 0, 1))  # [B, K, D]
        a = rows(z)
    with jax.named_scope("refinement"):
        # the correction is added to the computed A, never recomputed from Z + dZ
        # (||Z|| ~ cond^2 ||A|| / cond, so a fresh product would bring back an
        # error of cond^2 eps); the residual sees the rounding of A and corrects it
        resid = tb[None] - jnp.matmul(a, u, precision=prec)  # T_beta - A U_S
        a = a + rows(jnp.matmul(resid, hinv, precision=prec))

    # cond = sqrt(lambda_max(H) lambda_max(H^{-1})), each by a few Lanczos steps.
    # Start vectors with both parities: at symmetric points a mask symmetric about 0
    # makes H block diagonal (even / odd degrees), and a start inside one block
    # never sees the other (it once reported 0.66 kappa for such masks).
    def matvec_h(x):  # H_b x = U^T diag(w_b) U x, by two products with the shared U
        return jnp.matmul(jnp.matmul(x, u.T, precision=prec) * w, u, precision=prec)

    # start weights (1 + x/2) x^8: both parities, and weighted to the ends of
    # [-1, 1], where the top eigenvector of H lives when the points cluster there
    # (second-kind points); (1 + x) instead gave 0.80 kappa at 4 steps there
    xa = alpha.astype(acc)
    t01 = ((1 + 0.5 * xa) * xa**8)[None, :]
    with jax.named_scope("cond_gram"):
        lam_h = lanczos_lambda_max(
            matvec_h, jnp.matmul(w * t01, u, precision=prec), _LANCZOS_STEPS_GRAM
        )
        # ||U||_2^2 bounds lambda_max(H_b) from above and equals it for first-kind
        # points with fewer than D stragglers, where the Lanczos value converges
        # slowly (a large cluster at 1): take the bound when they agree within 1%
        unorm2 = jnp.linalg.norm(u, 2) ** 2
        lam_h = jnp.where(lam_h >= 0.99 * unorm2, unorm2, lam_h)
    with jax.named_scope("cond_inverse"):
        rho = lanczos_lambda_max(
            lambda x: jnp.einsum("bde,be->bd", hinv, x, precision=prec),
            two_column_start(hinv),
            _LANCZOS_STEPS,
        )
    cond = jnp.sqrt(jnp.maximum(lam_h, 0) * jnp.maximum(rho, 0))

    eps = jnp.finfo(acc).eps
    # a NaN or Inf anywhere in H_b^{-1} (a non-positive pivot, an overflow) reaches
    # rho through the Lanczos products (Inf * 0 is NaN), so a finite rho means a
    # finite H_b^{-1} and A_b: no separate finiteness pass over A is needed
    good = (
        enough & (rho > 0) & jnp.isfinite(cond) & (cond * cond * eps <= NE_COND_SQ_EPS)
    )
    need = enough & ~good
    cap = min(b, max(1, -(-b // _QR_TIER_FRACTION)))
    with jax.named_scope("qr_tier"):
        a, ok, cond = qr_tier(sel, need, a, good, cond, alpha, beta, d, acc, cap)

    cond = jnp.where(enough & jnp.isfinite(cond), cond, jnp.asarray(jnp.inf, acc))
    ok = ok & enough & points_valid(alpha) & points_valid(beta)
    a = jnp.where(enough[:, None, None], a, jnp.zeros_like(a))
    return a, ok, cond.astype(acc), num_used


def batched_kernel(num_masks: int, num_coeffs: int, acc) -> str:
    """Which kernel decodes a static batch of ``num_masks`` masks: "ne" or "qr".

    "ne" (:func:`ne_decoding_matrices`) for float32 accumulation, D <=
    NE_MAX_COEFFS and at least NE_MIN_MASKS masks; "qr"
    (:func:`qr_decoding_matrices`) otherwise.
    """
    if (
        jnp.dtype(acc) == jnp.dtype(jnp.float32)
        and num_coeffs <= NE_MAX_COEFFS
        and num_masks >= NE_MIN_MASKS
    ):
        return "ne"
    return "qr"


def ls_decoding_matrices(
    sel, alpha, beta, num_coeffs, acc, *, kernel=None, exact_cond=False
):
    """Decoding matrices of B masks at once: A_b = T_beta (U_{S_b})^+, as [B, K, M].

    ``kernel`` (default :func:`batched_kernel` of the static batch size): "ne",
    :func:`ne_decoding_matrices` (float32 only: semi-normal equations with
    refinement, QR for the ill-conditioned masks), or "qr",
    :func:`qr_decoding_matrices` (Householder QR for every mask; exact cond in
    float64). float64 (the reference precision) and large D always use QR, and so
    do float32 batches of fewer than NE_MIN_MASKS masks: there the semi-normal
    kernel is no faster to run and several times slower to compile.
    ``exact_cond``: QR for every mask and the exact cond (an SVD of each R).

    Returns:
        (A [B, K, M], ok [B], cond [B], num_used [B], q): A is zero where fewer
        than D rows were selected or the system is numerically singular (then
        ``ok`` is False and ``cond`` is inf); ``q`` the QR kernel's factors
        (Q, R^{-T}) (for :func:`ls_residual_sq`), None from the semi-normal kernel.
    """
    if exact_cond:
        kernel = "qr"
    elif kernel is None:
        kernel = batched_kernel(sel.shape[0], num_coeffs, acc)
    if kernel == "ne":
        return (*ne_decoding_matrices(sel, alpha, beta, num_coeffs, acc), None)
    return qr_decoding_matrices(
        sel, alpha, beta, num_coeffs, acc, with_q=True, exact_cond=exact_cond
    )


# ----------------------------------------------------------------------------------
# residual of the batched fit, for the predicted error (docs/decoding.md)

# Columns of the random sketch of a wide payload in the batched residual.
_SKETCH = 4


def ls_residual_sq(
    sel: jax.Array,
    alpha: jax.Array,
    y: jax.Array,
    num_coeffs: int,
    acc,
    usable: jax.Array,
    *,
    per_mask: bool = False,
    q: jax.Array | None = None,
) -> jax.Array:
    """RSS_f [B, F] of the least-squares Chebyshev fits of B masks (float32 path).

    Without ``q``: corrected semi-normal equations on the equilibrated rows U
    (Gram matrices by one matrix product, inverses by the batched sweep of
    ``codedjax._lagrange_lsq``, one refinement step through the rows; the inverses are
    those of :func:`ne_decoding_matrices`, computed once in a jitted decoder):
    accurate while cond^2 eps << 1. With ``q`` = (Q [B, M, D], R^{-T} [B, D, D]),
    the factors of :func:`qr_decoding_matrices` on the same selection: the same
    steps with the solve c = R^{-1} Q^T W y in place of H^{-1} U^T W y (the
    residual through the rows, W (y - U c), after one refinement step, as in the
    semi-normal form: the projection W (y - Q Q^T W y) instead rounds twice as
    often and lifted float32 answers' predictions by up to 1.5x). Masks not
    ``usable`` (the caller passes cond <= 512) get RSS 0, i.e. no residual term.
    A payload with F > 4 columns is fitted through 4 random combinations of its
    columns: every column then gets the mean column RSS (an unbiased estimate).

    Args:
        sel: bool [B, M]; alpha: [M]; y: [M, ...] or [B, M, ...] (``per_mask``).
        num_coeffs: D. acc: float32. usable: bool [B]. q: (Q, R^{-T}) or None.
    """
    b, m = sel.shape
    d = num_coeffs
    prec = _precision()
    u = chebyshev_vandermonde(alpha, d) * orthonormal_column_scale(m, d, acc)[None, :]
    if q is None:
        # the inverses of the decoding kernel, by the same operations on the same
        # selection, so that a jitted decoder computes them once (XLA's common
        # subexpression elimination; the decoder then pays for the residual only
        # its few matrix-vector products). An unusable mask may get NaN there (a
        # non-positive pivot): its weights are zero below and its RSS is zeroed.
        _, hinv = _ne_inverses(u, sel.astype(acc), d)  # [B, D, D]
    with jax.named_scope("residual"):
        w = (sel & usable[:, None]).astype(acc)  # [B, M]
        y = y.reshape((b, m, -1) if per_mask else (m, -1))
        yy = jnp.where(jnp.isfinite(y), y.astype(acc), jnp.zeros((), acc))
        f = yy.shape[-1]
        if f > _SKETCH:
            # wide payloads: the fit of _SKETCH random +-1/sqrt(F) combinations of the
            # columns, whose RSS has the mean column RSS as its expectation (the cost
            # of the fit then does not grow with F)
            g = np.random.default_rng(0).choice([-1.0, 1.0], size=(f, _SKETCH))
            yy = jnp.matmul(yy, jnp.asarray(g / np.sqrt(f), acc), precision=prec)
        # columns first ([..., F, M]): every product below is then a plain product of
        # rows with U, U^T or H^{-1} (symmetric); the same products on [B, D, F]
        # columns made XLA:CPU transpose and ran its slow narrow batched product
        yw = jnp.swapaxes(yy if per_mask else yy[None], 1, 2) * w[:, None, :]

        def resid(c):  # W (y - U c): [B, F, D] -> [B, F, M]
            return yw - jnp.matmul(c, u.T, precision=prec) * w[:, None, :]

        def solve(r):  # (H^{-1} U^T r)^T = r^T U H^{-1}, or r^T Q R^{-T}
            if q is None:
                return jnp.matmul(
                    jnp.matmul(r, u, precision=prec), hinv, precision=prec
                )
            return jnp.matmul(jnp.matmul(r, q[0], precision=prec), q[1], precision=prec)

        c = solve(yw)
        c = c + solve(resid(c))
        r = resid(c)
        rss = jnp.sum(r * r, axis=2)
        if f > _SKETCH:
            rss = jnp.broadcast_to(jnp.mean(rss, axis=1, keepdims=True), (b, f))
        ok = usable[:, None] & jnp.isfinite(rss)
        return jnp.where(ok, rss, jnp.zeros((), acc))
