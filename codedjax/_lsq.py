"""Least-squares kernels behind the Chebyshev decoders (mask formulation).

Every kernel takes a boolean selection over all M workers (fixed shape, so one
compiled program serves every straggler pattern) and returns the decoding matrix
A [K, M] with A @ y = T_beta c, c the least-squares Chebyshev fit to the selected
rows, plus ``ok``, ``cond`` and the number of rows used.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._chebyshev import chebyshev_vandermonde, orthonormal_column_scale
from ._dtypes import points_valid

_HI = jax.lax.Precision.HIGHEST


def ls_decoding_matrix(sel, alpha, beta, num_coeffs, acc):
    """A [K, M] with A @ y = T_beta c, c the LS fit to the selected rows.

    QR of the equilibrated Chebyshev-Vandermonde rows (zeros for unselected workers),
    then A = T_beta R^{-1} Q^T: the K x D evaluation is folded into the triangular
    solve before the payload product, which is the cheap order for F >= K.
    Returns (A, ok, cond, num_used).
    """
    m = alpha.shape[0]
    d = num_coeffs
    scale = orthonormal_column_scale(m, d, acc)
    t = chebyshev_vandermonde(alpha, d) * scale[None, :]
    ts = jnp.where(sel[:, None], t, jnp.zeros_like(t))
    q, r = jnp.linalg.qr(ts)
    sv = jnp.linalg.svd(r, compute_uv=False)
    num_used = jnp.sum(sel, dtype=jnp.int32)
    enough = num_used >= d
    cond = jnp.where(enough, sv[0] / sv[-1], jnp.asarray(jnp.inf, acc))
    cond = jnp.where(jnp.isnan(cond), jnp.asarray(jnp.inf, acc), cond)
    usable = enough & jnp.isfinite(cond)
    r_safe = jnp.where(usable, r, jnp.eye(d, dtype=acc))
    tb = chebyshev_vandermonde(beta, d) * scale[None, :]
    z = solve_triangular(r_safe, tb.T, trans="T", lower=False)  # R^{-T} T_b^T [D, K]
    a = jnp.matmul(z.T, q.T, precision=_HI)  # [K, M]
    finite = jnp.all(jnp.isfinite(a))
    usable = usable & finite
    a = jnp.where(usable & sel[None, :], a, jnp.zeros_like(a))
    eps = jnp.finfo(acc).eps
    ok = usable & (cond * eps < 1) & points_valid(alpha) & points_valid(beta)
    return a, ok, cond.astype(acc), num_used
