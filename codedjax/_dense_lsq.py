"""Least squares on a given dense basis (the circle and random codes).

The Chebyshev decoders build their basis from points (``codedjax._lsq``). The circle
code (complex monomials at roots of unity) and the random code (a Gaussian encoding
matrix) instead hand over their basis as a dense matrix B [M, D], real or complex,
and the matrix E [K, D] that evaluates the fitted coefficients at the outputs. The
kernel here is the same mask formulation: rows of missing workers are zeroed, so one
compiled program serves every straggler pattern; Householder QR of the selected rows
(never normal equations), the exact 2-norm condition number from an SVD of R, and
the decoding matrix A = E R^{-1} Q^H [K, M] with zero columns for unused workers.

Batching: :func:`dense_ls_matrices` loops over the masks (``lax.map``) around every
LAPACK call, so no LAPACK call has a batch axis (the CPU deadlock described in
``codedjax._threads`` and README "Concurrency" cannot occur), and the payload
products that follow are batched matrix products.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._linalg import HI, after


class DenseLs(NamedTuple):
    """What the dense kernel returns for one mask (or B masks, leading axis)."""

    a: jax.Array  # [K, M] decoding matrix (real or complex), zero unused columns
    q: jax.Array  # [M, D] orthonormal factor of the selected rows (zero elsewhere)
    ok: jax.Array  # bool: enough rows, finite, cond < 1/eps
    cond: jax.Array  # real: 2-norm condition number of the selected rows (inf if not)
    num_used: jax.Array  # int32: selected rows


def complex_dtype(acc) -> jnp.dtype:
    """complex64 for float32 accumulation, complex128 for float64."""
    return jnp.dtype(jnp.complex128 if jnp.dtype(acc) == jnp.float64 else jnp.complex64)


def dense_ls_matrix(sel, basis, evaluation, acc) -> DenseLs:
    """A = E B_S^+ for one mask, by Householder QR of the selected rows of B.

    Args:
        sel: bool [M] selected (responding, finite) rows.
        basis: [M, D] real (``acc``) or complex (``complex_dtype(acc)``).
        evaluation: [K, D] same dtype as ``basis``.
        acc: the real accumulation dtype (float32 or float64).

    Returns:
        :class:`DenseLs`. ``a`` is zero when fewer than D rows are selected or the
        selected rows are numerically singular (then ``ok`` is False and ``cond``
        inf).
    """
    d = basis.shape[1]
    bs = jnp.where(sel[:, None], basis, jnp.zeros_like(basis))
    q, r = jnp.linalg.qr(bs)
    r = after(r, q)  # one LAPACK call after the other (see codedjax._linalg.after)
    sv = jnp.linalg.svd(r, compute_uv=False).astype(acc)
    num_used = jnp.sum(sel, dtype=jnp.int32)
    enough = num_used >= d
    inf = jnp.asarray(jnp.inf, acc)
    cond = jnp.where(enough, sv[0] / sv[-1], inf)
    cond = jnp.where(jnp.isnan(cond), inf, cond)
    usable = enough & jnp.isfinite(cond)
    r_safe = jnp.where(usable, r, jnp.eye(d, dtype=r.dtype))
    r_safe = after(r_safe, sv)
    # W = E R^{-1}: solve R^T W^T = E^T (plain transpose, also for complex R)
    wt = solve_triangular(r_safe, evaluation.T, trans="T", lower=False)  # [D, K]
    a = jnp.matmul(wt.T, jnp.conj(q).T, precision=HI)  # [K, M]
    usable = usable & jnp.all(jnp.isfinite(a))
    a = jnp.where(usable & sel[None, :], a, jnp.zeros_like(a))
    q = jnp.where(sel[:, None], q, jnp.zeros_like(q))
    eps = jnp.finfo(acc).eps
    ok = usable & (cond * eps < 1)
    return DenseLs(a, q, ok, cond.astype(acc), num_used)


def dense_ls_matrices(sels, basis, evaluation, acc) -> DenseLs:
    """:func:`dense_ls_matrix` for B masks [B, M], one mask at a time (``lax.map``).

    Every LAPACK call runs on one matrix (no batch axis); see the module docstring.
    """
    return jax.lax.map(lambda s: dense_ls_matrix(s, basis, evaluation, acc), sels)


def residual_sq(q, y, sel, acc, *, per_mask: bool = False):
    """RSS_f [..., F] = sum over selected rows of |y - Q Q^H y|^2 per column.

    Args:
        q: [M, D] or [B, M, D] orthonormal factors, zero rows where not selected
            (as :func:`dense_ls_matrix` returns them).
        y: [M, F] (shared) or [B, M, F] (``per_mask``) finite answers in the dtype
            of ``q`` (the caller zeroes non-finite entries).
        sel: bool [..., M] selected rows.
        acc: the real accumulation dtype of the result.
    """
    qh = jnp.conj(q)
    if q.ndim == 2:
        coef = jnp.matmul(qh.T, y, precision=HI)  # [D, F]
        fit = jnp.matmul(q, coef, precision=HI)
    else:
        spec = "bmd,bmf->bdf" if per_mask else "bmd,mf->bdf"
        coef = jnp.einsum(spec, qh, y, precision=HI)
        fit = jnp.einsum("bmd,bdf->bmf", q, coef, precision=HI)
    yb = y[None] if fit.ndim > y.ndim else y  # a payload shared by every mask
    r = jnp.where(sel[..., None], yb - fit, jnp.zeros((), fit.dtype))
    return jnp.sum(jnp.real(r * jnp.conj(r)).astype(acc), axis=-2)
