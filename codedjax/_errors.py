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
its function class with gain 1, the "+ 1". The rms is floored at the workers'
smallest normal number (their rounding is absolute below it), and the flush floor
(:func:`flush_floor`) adds what flushing subnormal numbers to zero can cost. The
derivation, what it assumes and its calibration are in ``docs/decoding.md``.
"""

from __future__ import annotations

import functools
from statistics import NormalDist

import jax
import jax.numpy as jnp

from ._dtypes import exact_pow2, unit_roundoff

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
    scale: jax.Array | float = 1.0,
    solve_factor: float = 1.0,
) -> jax.Array:
    """sigma_f [..., F]: the per-column noise level of the selected answers.

    ``u * max(rms, tiny_w)`` over the selected rows of each column (non-finite
    entries count as zero; tiny_w the smallest normal number of the workers' dtype,
    below which their rounding is absolute), raised to ``sqrt(residual_sq / dof)``
    where a least-squares residual with ``dof`` = N - D > 0 degrees of freedom is
    given.

    Args:
        y: [M, F] (shared) or [..., M, F] answers.
        sel: bool [..., M] rows used.
        worker_dtype: the dtype the workers computed in.
        acc: the dtype of the result.
        residual_sq: optional [..., F] residual sum of squares of the fit.
        dof: optional int or int array [...], N - D.
        scale: the power of two ``y`` was divided by (the workers' subnormal
            floor, ``tiny(worker_dtype) * u``, is expressed in the units of y).
        solve_factor: the decoder's own rounding in units of the accumulation
            dtype's u (u = max(u_w, solve_factor u_acc)): a factorisation of an
            ill-conditioned system perturbs the answers by a few u_acc.
    """
    yy = jnp.where(jnp.isfinite(y), y.astype(acc), jnp.zeros((), acc))
    w = sel.astype(acc)
    n = jnp.maximum(jnp.sum(sel, axis=-1, dtype=jnp.int32), 1).astype(acc)
    if yy.ndim == sel.ndim + 1:  # one payload per mask
        ms = jnp.sum(w[..., :, None] * yy * yy, axis=-2)
    else:  # one payload shared by every mask
        ms = jnp.matmul(w, yy * yy)
    ms = ms / n[..., None]
    # an answer in the workers' subnormal range rounds to their absolute spacing,
    # not relative to its size: the rms is floored at the workers' smallest normal
    # number (in the units of y, which the caller may have divided by ``scale``)
    floor = jnp.asarray(float(jnp.finfo(worker_dtype).tiny), acc) / jnp.asarray(
        scale, acc
    )
    u = max(unit_roundoff(worker_dtype), solve_factor * unit_roundoff(acc))
    sigma = u * jnp.maximum(jnp.sqrt(ms), floor)
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
    residual_scaled: bool = False,
    solve_factor: float = 1.0,
) -> jax.Array:
    """The predicted absolute error of ``value = A y`` (max over outputs).

    Args:
        a: [..., K, M] decoding matrices (zero columns for unused workers).
        y: [M, F] (shared) or [..., M, F] flattened answers.
        sel: bool [..., M] rows used.
        worker_dtype: the dtype the workers answered in.
        residual_sq: optional [..., F] least-squares residual sum of squares.
        dof: optional N - D for the residual.
        residual_scaled: ``residual_sq`` is that of ``y / payload_scale(y)``
            (computed from the scaled answers, so that it cannot overflow).
        solve_factor: the rounding of the decoder's own factorisation as a
            noise level of the answers, in units of the accumulation dtype's u
            (:func:`noise_level`; :func:`solve_rounding` for least squares).

    Returns:
        [...] in the dtype of ``a``.
    """
    dt = a.dtype
    # the prediction is homogeneous of degree 1 in y: computed for y / s (s a power
    # of two, exact) so that squaring answers near the top of the dtype's
    # range (1e30 in float32) cannot overflow, then scaled back
    s = payload_scale(y, dt)
    rs = None
    if residual_sq is not None:
        rs = residual_sq if residual_scaled else residual_sq.astype(dt) / s / s
    sigma = noise_level(
        y.astype(dt) / s, sel, worker_dtype, dt, rs, dof, scale=s,
        solve_factor=solve_factor,
    )  # fmt: skip
    gain_sq = jnp.max(jnp.sum(a * a, axis=-1), axis=-1, initial=0.0)
    k, f = a.shape[-2], y.shape[-1]
    e = error_from_gain(gain_sq, sigma, k * f) * s
    n = jnp.sum(sel, axis=-1, dtype=jnp.int32)
    return (e + flush_floor(gain_sq, n, dt)).astype(dt)


def solve_rounding(num_coeffs: int) -> float:
    """sqrt(D): the rounding of a least-squares solve with D unknowns, as a noise
    level of the answers in units of the accumulation dtype's u.

    The computed fit is the exact fit of perturbed rows T_S + dT (Householder QR
    and the corrected semi-normal equations are backward stable; Higham,
    Accuracy and Stability of Numerical Algorithms, 2002, ch. 19-20): each of the
    D reflections (or refinement products) rounds every entry once, errors of
    size u_acc that add up as a random walk, so a column's relative backward error
    is about sqrt(D) u_acc (the worst-case bound is of order N D u_acc). The value
    T_beta c then errs by A dT c; dT c is an error of about sqrt(D) u_acc times
    the size of the answers in each used row, which the decoding matrix A weighs
    as it weighs the workers' own rounding: the forward error is the noise gain
    times sqrt(D) u_acc rms(y), a cond u_acc term near the threshold. It is the
    whole error for float32 answers decoded in float32 (docs/decoding.md) and
    negligible beside a bf16 worker's rounding (u_w / u_acc = 2^16).
    """
    return float(max(int(num_coeffs), 1)) ** 0.5


def flush_floor(gain_sq: jax.Array, num_used: jax.Array, acc) -> jax.Array:
    """(||A||_inf + 1) tiny: what flushing subnormal numbers to zero can cost.

    XLA flushes subnormal operands and results to zero on CPU and on most
    accelerators (no scaling can recover an operand that is read as zero): each
    used answer below the smallest normal number ``tiny`` of ``acc`` may be lost,
    an error of at most ``tiny`` each, weighted by its row of A
    (``||A_k||_1 <= sqrt(N) ||A_k||_2``), and a decoded value below ``tiny`` may
    be flushed itself (the ``+ 1``). Negligible for any normal payload (1e-38
    absolute in float32); for a subnormal one it is the error the decode makes.

    Args:
        gain_sq: [...] max_k ||A_{k,:}||_2^2.
        num_used: [...] N, the answers used.
        acc: the accumulation dtype.
    """
    tiny = jnp.asarray(float(jnp.finfo(acc).tiny), acc)
    n = jnp.asarray(num_used).astype(acc)
    return (jnp.sqrt(n * jnp.asarray(gain_sq, acc)) + 1) * tiny


def payload_scale(y: jax.Array, acc) -> jax.Array:
    """s: the power of two with max finite |y| / s in [1, 2) (s within float32's
    normal range), a scalar in ``acc``: dividing by it is exact, keeps y * y
    finite for answers near the top of the range and keeps the squares of small
    answers (and of their residuals) from underflowing to zero.
    """
    mag = jnp.where(jnp.isfinite(y), jnp.abs(y.astype(acc)), jnp.zeros((), acc))
    top = jnp.max(mag, initial=0.0)
    _, e = jnp.frexp(jnp.where(top > 0, top, jnp.ones((), acc)))
    return exact_pow2(jnp.clip(e - 1, -126, 127), acc)
