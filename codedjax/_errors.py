"""The predicted error of a decode: noise level, noise gain and coverage factor.

Every decoder returns ``value = A y`` from the responses y of the workers it used
(A [K, M], zero columns for the others). Its ``error`` field is

.. math::
    e = z_{K F} \\; \\sqrt{\\max_k \\lVert A_{k,:} \\rVert_2^2 + 1} \\;
        \\max_f \\sigma_f,

    \\sigma_f = \\max\\Bigl(u \\, \\mathrm{rms}_{i \\in S}(y_{i f}),\\;
        \\sqrt{\\mathrm{RSS}_f / (N - D)}\\Bigr),

with u = sqrt(u_w^2 + (c u_acc)^2): u_w the unit roundoff of the workers' dtype
(at least that of the accumulation dtype) and c u_acc the decoder's own rounding,
an independent error (:func:`solve_rounding`), RSS the least-squares residual
where the decoder has one (N > D), and
z_{KF} the two-sided normal quantile at which the largest of the K F outputs exceeds
its prediction with probability at most 1% under the model. The model: every
answer carries an independent error of standard deviation sigma_f (rounding at the
size of the answers, or whatever the residual shows beyond it); row k of A sums them
with weights A_{k,i} (variance ||A_{k,:}||^2 sigma^2), and the rounding the workers
share (their parameters, rounded once) passes through any decoder that reproduces
its function class with gain 1, the "+ 1". The rms is floored at the workers'
smallest normal number (their rounding is absolute below it), and
:func:`rounding_floors` adds what the subnormal range can cost (the spacing a value
there is rounded to; answers far below the largest one that a scaled product may
flush); the prediction is computed for answers scaled exactly by a power of two
(through the bits, subnormal answers included) and scaled back, rounded up. The
derivation, what it assumes and its calibration are in ``docs/decoding.md``.
"""

from __future__ import annotations

import functools
from statistics import NormalDist

import jax
import jax.numpy as jnp

from ._dtypes import (
    exact_pow2,
    ldexp_exact,
    max_exponent,
    pow2_pair,
    unit_roundoff,
)

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
    scale_exp: jax.Array | None = None,
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
            dtype's u, independent of the workers' (u = sqrt(u_w^2 +
            (solve_factor u_acc)^2), u_w at least u_acc): a factorisation of an
            ill-conditioned system perturbs the answers by a few u_acc; 0 for a
            decoder that only copies answers.
        scale_exp: in place of ``scale``, the exponent E (int, broadcastable to
            [..., F]) of the power of two 2^E that ``y`` was divided by; for the
            payloads in or near the subnormal range, whose 2^E is not a number
            of ``acc`` (the floor is then 2^(minexp_w - E), exact).
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
    if scale_exp is None:
        floor = jnp.asarray(float(jnp.finfo(worker_dtype).tiny), acc) / jnp.asarray(
            scale, acc
        )
    else:
        # (capped at 2^(maxexp / 4): a floor that far above the answers says the
        # same, and its square stays finite)
        e = jnp.minimum(
            int(jnp.finfo(worker_dtype).minexp) - scale_exp,
            int(jnp.finfo(acc).maxexp) // 4,
        )
        floor = pow2_clipped(e, acc)
    # the workers' rounding and the decoder's own are independent: they add in
    # quadrature (float32 answers decoded in float32 carry both at one size)
    # (answers finer than ``acc`` are rounded to it when they are cast)
    uw = max(unit_roundoff(worker_dtype), unit_roundoff(acc))
    ud = solve_factor * unit_roundoff(acc)
    u = float((uw * uw + ud * ud) ** 0.5)
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
    residual_exp: jax.Array | None = None,
    solve_factor: float = 1.0,
) -> jax.Array:
    """The predicted absolute error of ``value = A y`` (max over outputs).

    Args:
        a: [..., K, M] decoding matrices (zero columns for unused workers).
        y: [M, F] (shared) or [..., M, F] flattened answers (any floating dtype).
        sel: bool [..., M] rows used.
        worker_dtype: the dtype the workers answered in.
        residual_sq: optional [..., F] least-squares residual sum of squares.
        dof: optional N - D for the residual.
        residual_scaled: ``residual_sq`` is that of ``y / payload_scale(y)``
            (computed from the scaled answers, so that it cannot overflow).
        residual_exp: ``residual_sq`` is that of ``y / 2^residual_exp`` (int
            [...], e.g. :func:`payload_exponent`: exact for subnormal answers).
        solve_factor: the rounding of the decoder's own factorisation as a
            noise level of the answers, in units of the accumulation dtype's u
            (:func:`noise_level`; :func:`solve_rounding` for least squares).

    Returns:
        [...] in the dtype of ``a``.
    """
    dt = jnp.dtype(a.dtype)
    # the prediction is homogeneous of degree 1 in y (its floors aside): it is
    # computed for y / 2^E, 2^E the power of two of the largest used answer (exact,
    # subnormal answers included), so that squaring answers near the top of the
    # dtype's range cannot overflow nor small ones underflow, then scaled back
    # exactly (a prediction in the subnormal range rounded up, never flushed)
    e = payload_exponent(y, sel)  # [...] (one payload per mask) or []
    # y / 2^E by two exact powers of two, a plain product: a subnormal answer is
    # read as zero there (XLA flushes it), which moves no noise level, each at
    # least u times the workers' smallest normal number (the floor below)
    p1, p2 = pow2_pair(-e, dt)
    ys = y.astype(dt) * p1[..., None, None] * p2[..., None, None]
    rs = None
    if residual_sq is not None:
        rss = residual_sq.astype(dt)
        if residual_exp is not None:  # [...] or per column [..., F]
            re = jnp.asarray(residual_exp, jnp.int32)
            shift = 2 * (re - (e[..., None] if re.ndim == rss.ndim else e))
        elif residual_scaled:
            shift = 2 * (max_exponent(payload_scale(y, dt)) - e)
        else:
            shift = -2 * e
        if shift.ndim < rss.ndim:
            shift = shift[..., None]
        rs = ldexp_exact(rss, shift, subnormal_in=False, subnormal_out=False)
    sigma = noise_level(
        ys, sel, worker_dtype, dt, rs, dof, solve_factor=solve_factor,
        scale_exp=e[..., None] if e.ndim else e,
    )  # fmt: skip
    gain_sq = jnp.max(jnp.sum(a * a, axis=-1), axis=-1, initial=0.0)
    k, f = a.shape[-2], y.shape[-1]
    n = jnp.sum(sel, axis=-1, dtype=jnp.int32)
    err = error_from_gain(gain_sq, sigma, k * f) + rounding_floors(gain_sq, n, e, dt)
    return ldexp_exact(err.astype(dt), e, round_up=True, subnormal_in=False)


def payload_exponent(y: jax.Array, sel: jax.Array | None = None) -> jax.Array:
    """E: floor(log2) of the largest finite |y| over the used rows, int32 (0 for an
    all-zero payload), from the bits (exact for subnormal answers).

    Args:
        y: [M, F] (one payload, shared by every mask of ``sel``) or [..., M, F].
        sel: bool [..., M] the rows used (None: every row).

    Returns:
        int32 [...] for one payload per mask, else a scalar.
    """
    if sel is None:
        return max_exponent(y, axis=(-2, -1))
    if y.ndim == sel.ndim + 1:  # one payload per mask
        return max_exponent(y, sel[..., :, None], axis=(-2, -1))
    rows = jnp.any(sel.reshape((-1, sel.shape[-1])), axis=0)  # used by any mask
    return max_exponent(y, rows[:, None])


def pow2_clipped(e: jax.Array | int, acc) -> jax.Array:
    """2^e in ``acc``, exact, with e clipped to the normal exponent range."""
    fi = jnp.finfo(acc)
    e = jnp.clip(jnp.asarray(e, jnp.int32), int(fi.minexp), int(fi.maxexp) - 1)
    return exact_pow2(e, acc)


def rounding_floors(
    gain_sq: jax.Array, num_used: jax.Array, scale_exp: jax.Array, acc
) -> jax.Array:
    """The absolute parts of a prediction, in units of 2^``scale_exp``.

    :func:`flush_floor` (answers far below the largest one that a scaled product
    may still flush) and half the spacing of ``acc``'s subnormal numbers, u tiny
    (2^-150 in float32: a value in the subnormal range is rounded to it), which in
    the answers' units is 2^(minexp - nmant - 1 - E).
    """
    fi = jnp.finfo(acc)
    spacing = pow2_clipped(int(fi.minexp) - int(fi.nmant) - 1 - scale_exp, acc)
    return flush_floor(gain_sq, num_used, acc) + spacing


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
    accelerators. The decoders scale the answers exactly (through their bits) so
    that the largest is about 1 before any product; in those units an answer or
    a partial value below the smallest normal number ``tiny`` of ``acc`` may
    still be flushed, an error of at most ``tiny`` each, weighted by its row of A
    (``||A_k||_1 <= sqrt(N) ||A_k||_2``), + 1 for the value itself: negligible
    beside the answers' rounding (a relative 2^-126 in float32), kept as a bound.

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
