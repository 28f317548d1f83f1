"""The predicted error of a decode: noise level, noise gain and coverage factor.

Every decoder returns ``value = A y`` from the responses y of the workers it used
(A [K, M], zero columns for the others). Its ``error`` field is

.. math::
    e = z_{K F} \\; \\sqrt{\\max_k \\lVert A_{k,:} \\rVert_2^2 + 1} \\;
        \\max_f \\sigma_f,

    \\sigma_f = \\max\\Bigl(u \\, \\mathrm{rms}_{i \\in S}(y_{i f}),\\;
        \\sqrt{\\mathrm{RSS}_f / (N - D)}\\Bigr),

with u the unit roundoff of the workers' dtype (at least that of the accumulation
dtype), RSS the least-squares residual where the decoder has one (N > D), and
z_{KF} the two-sided normal quantile at which the largest of the K F outputs exceeds
its prediction with probability at most 1% under the model. The model: every
answer carries an independent error of standard deviation sigma_f (rounding at the
size of the answers, or whatever the residual shows beyond it); row k of A sums them
with weights A_{k,i} (variance ||A_{k,:}||^2 sigma^2), and the rounding the workers
share (their parameters, rounded once) passes through any decoder that reproduces
its function class with gain 1, the "+ 1". The derivation, what it assumes and its
calibration are in ``docs/decoding.md``.
"""

from __future__ import annotations

import functools
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np

from ._dtypes import unit_roundoff

# Columns of the random sketch of a wide payload in the batched residual.
_SKETCH = 4
# Probability, under the Gaussian noise model, that the largest of the K F decoded
# outputs exceeds the predicted error (Bonferroni over the outputs).
_EXCEED = 0.01


@functools.lru_cache(maxsize=128)
def error_quantile(num_outputs: int) -> float:
    """z with P(max of ``num_outputs`` |N(0, 1)| > z) <= 1% (Bonferroni).

    Args:
        num_outputs: K F, how many outputs the decode returns (static).

    Returns:
        The normal quantile at 1 - 0.01 / (2 K F) (3.23 for K F = 8).
    """
    n = max(int(num_outputs), 1)
    return NormalDist().inv_cdf(1.0 - _EXCEED / (2.0 * n))


def rounding_level(worker_dtype, acc) -> float:
    """u: the unit roundoff of the workers' dtype, at least that of ``acc``."""
    return max(unit_roundoff(worker_dtype), unit_roundoff(acc))


def noise_level(
    y: jax.Array,
    sel: jax.Array,
    worker_dtype,
    acc,
    residual_sq: jax.Array | None = None,
    dof: jax.Array | int | None = None,
) -> jax.Array:
    """sigma_f [..., F]: the per-column noise level of the selected answers.

    ``u * rms`` over the selected rows of each column (non-finite entries count as
    zero), raised to ``sqrt(residual_sq / dof)`` where a least-squares residual with
    ``dof`` = N - D > 0 degrees of freedom is given.

    Args:
        y: [M, F] (shared) or [..., M, F] answers.
        sel: bool [..., M] rows used.
        worker_dtype: the dtype the workers computed in.
        acc: the dtype of the result.
        residual_sq: optional [..., F] residual sum of squares of the fit.
        dof: optional int or int array [...], N - D.
    """
    yy = jnp.where(jnp.isfinite(y), y.astype(acc), jnp.zeros((), acc))
    w = sel.astype(acc)[..., :, None]
    n = jnp.maximum(jnp.sum(sel, axis=-1, dtype=jnp.int32), 1).astype(acc)
    ms = jnp.sum(w * yy * yy, axis=-2) / n[..., None]
    sigma = rounding_level(worker_dtype, acc) * jnp.sqrt(ms)
    if residual_sq is not None:
        dof = jnp.asarray(dof)
        dsafe = jnp.maximum(dof, 1).astype(acc)[..., None]
        res = jnp.sqrt(jnp.maximum(residual_sq.astype(acc), 0) / dsafe)
        sigma = jnp.where((dof > 0)[..., None], jnp.maximum(sigma, res), sigma)
    return sigma


def error_from_gain(
    gain_sq: jax.Array, sigma: jax.Array, num_outputs: int
) -> jax.Array:
    """e = z_{KF} sqrt(gain_sq + 1) max_f sigma_f.

    Args:
        gain_sq: [...] max_k ||A_{k,:}||_2^2 (or a posterior variance per unit
            sigma^2).
        sigma: [..., F] noise levels.
        num_outputs: K F (static).
    """
    z = error_quantile(num_outputs)
    smax = jnp.max(sigma, axis=-1)
    return z * jnp.sqrt(gain_sq + 1) * smax


def predicted_error_of(
    a: jax.Array,
    y: jax.Array,
    sel: jax.Array,
    worker_dtype,
    *,
    residual_sq: jax.Array | None = None,
    dof: jax.Array | int | None = None,
) -> jax.Array:
    """The predicted absolute error of ``value = A y`` (max over outputs).

    Args:
        a: [..., K, M] decoding matrices (zero columns for unused workers).
        y: [M, F] (shared) or [..., M, F] flattened answers.
        sel: bool [..., M] rows used.
        worker_dtype: the dtype the workers answered in.
        residual_sq: optional [..., F] least-squares residual sum of squares.
        dof: optional N - D for the residual.

    Returns:
        [...] in the dtype of ``a``.
    """
    dt = a.dtype
    sigma = noise_level(y, sel, worker_dtype, dt, residual_sq, dof)
    gain_sq = jnp.max(jnp.sum(a * a, axis=-1), axis=-1, initial=0.0)
    k, f = a.shape[-2], y.shape[-1]
    return error_from_gain(gain_sq, sigma, k * f).astype(dt)


def fit_nodes(num_coeffs: int, acc) -> jax.Array:
    """D first-kind Chebyshev points; a degree D - 1 fit is fixed by its values."""
    j = jnp.arange(num_coeffs, dtype=acc)
    return jnp.sin(jnp.pi * (num_coeffs - 1 - 2 * j) / (2 * num_coeffs))


def residual_sq_from_fit(
    a_nodes: jax.Array,
    y: jax.Array,
    sel: jax.Array,
    alpha: jax.Array,
    acc,
    *,
    per_mask: bool = False,
) -> jax.Array:
    """RSS_f [..., F] of a least-squares Chebyshev fit, from its values at D nodes.

    ``a_nodes`` [..., D, M] is the fit's decoding matrix to the D nodes of
    :func:`fit_nodes` (the decoder with the data points replaced by those nodes);
    the fitted values at the worker points follow by barycentric interpolation
    from the nodes (Lebesgue constant O(log D) on Chebyshev nodes), and the
    residual counts the selected rows only.

    Args:
        a_nodes: [D, M] or [B, D, M].
        y: [M, F] (shared) or [B, M, F] with ``per_mask``.
        sel: bool [..., M].
        alpha: [M] worker points.
        acc: accumulation dtype.
        per_mask: y has a leading batch axis.
    """
    from ._polynomial import _barycentric_matrix

    d = a_nodes.shape[-2]
    e = _barycentric_matrix(fit_nodes(d, acc), alpha.astype(acc))  # [M, D]
    yy = jnp.where(jnp.isfinite(y), y.astype(acc), jnp.zeros((), acc))
    if a_nodes.ndim == 2:
        vals = a_nodes @ yy
    elif per_mask:
        vals = jnp.einsum("bdm,bmf->bdf", a_nodes, yy)
    else:
        vals = jnp.einsum("bdm,mf->bdf", a_nodes, yy)
    fitted = jnp.einsum("md,...df->...mf", e, vals)
    r = jnp.where(sel[..., None], yy - fitted, jnp.zeros((), acc))
    return jnp.sum(r * r, axis=-2)


def ls_residual_sq_batched(
    sel: jax.Array,
    alpha: jax.Array,
    y: jax.Array,
    num_coeffs: int,
    acc,
    usable: jax.Array,
    *,
    per_mask: bool = False,
) -> jax.Array:
    """RSS_f [B, F] of the least-squares Chebyshev fits of B masks (float32 path).

    Corrected semi-normal equations on the equilibrated rows U (Gram matrices by
    one matrix product, inverses by the batched sweep of ``codedjax._lsq``, one
    refinement step through the rows): accurate while cond^2 eps << 1. Masks not
    ``usable`` (the caller passes cond <= 512) get RSS 0, i.e. no residual term.
    A payload with F > 4 columns is fitted through 4 random combinations of its
    columns: every column then gets the mean column RSS (an unbiased estimate).

    Args:
        sel: bool [B, M]; alpha: [M]; y: [M, ...] or [B, M, ...] (``per_mask``).
        num_coeffs: D. acc: float32. usable: bool [B].
    """
    from ._chebyshev import chebyshev_vandermonde, orthonormal_column_scale
    from ._lsq import _packed_index, _precision, _sweep_inverse

    b, m = sel.shape
    d = num_coeffs
    prec = _precision()
    u = chebyshev_vandermonde(alpha, d) * orthonormal_column_scale(m, d, acc)[None, :]
    w = (sel & usable[:, None]).astype(acc)  # [B, M]
    ii, jj, pos = _packed_index(d)
    gram = jnp.matmul((u[:, ii] * u[:, jj]).T, w.T, precision=prec)  # [P, B]
    # unusable masks get the identity (no pivot trouble); their RSS is zeroed below
    eye_p = jnp.asarray((ii == jj).astype(float), acc)[:, None]
    gram = jnp.where(usable[None, :], gram, eye_p)
    hinv = jnp.transpose(_sweep_inverse(gram, d)[pos], (2, 0, 1))  # [B, D, D]
    y = y.reshape((b, m, -1) if per_mask else (m, -1))
    yy = jnp.where(jnp.isfinite(y), y.astype(acc), jnp.zeros((), acc))
    f = yy.shape[-1]
    if f > _SKETCH:
        # wide payloads: the fit of _SKETCH random +-1/sqrt(F) combinations of the
        # columns, whose RSS has the mean column RSS as its expectation (the cost
        # of the fit then does not grow with F)
        g = np.random.default_rng(0).choice([-1.0, 1.0], size=(f, _SKETCH))
        yy = jnp.matmul(yy, jnp.asarray(g / np.sqrt(f), acc), precision=prec)
    yw = (yy if per_mask else yy[None]) * w[:, :, None]  # [B, M, F or _SKETCH]

    def resid(c):  # W (y - U c): [B, D, F] -> [B, M, F]
        return yw - jnp.einsum("md,bdf->bmf", u, c, precision=prec) * w[:, :, None]

    def solve(r):  # H^{-1} U^T r
        ut_r = jnp.einsum("md,bmf->bdf", u, r, precision=prec)
        return jnp.einsum("bde,bef->bdf", hinv, ut_r, precision=prec)

    c = solve(yw)
    c = c + solve(resid(c))
    r = resid(c)
    rss = jnp.sum(r * r, axis=1)
    if f > _SKETCH:
        rss = jnp.broadcast_to(jnp.mean(rss, axis=1, keepdims=True), (b, f))
    ok = usable[:, None] & jnp.isfinite(rss)
    return jnp.where(ok, rss, jnp.zeros((), acc))
