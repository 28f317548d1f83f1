"""Berrut rational interpolation and Berrut approximated coded computing (BACC).

The Berrut interpolant through sorted distinct nodes x_0 < ... < x_{n-1} is

    r(z) = sum_i [(-1)^i / (z - x_i)] y_i / sum_i [(-1)^i / (z - x_i)],

the d = 0 member of the Floater-Hormann family: it interpolates, and has no real poles
for any set of distinct nodes. The alternating signs follow the *sorted* order of the
nodes, so the decoder ranks the distinct responding nodes with array operations
(pairwise comparisons over a fixed-shape mask), and one compiled program serves every
straggler pattern. The decoding matrix is built by a program that sees only the mask
and the points; a second, cheap program applies it, so payloads of any shape reuse it.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._argchecks import (
    check_decode_inputs,
    check_floating,
    check_int,
    check_return_ok,
    check_vector,
    concrete_finite,
    concrete_points,
)
from ._chebyshev import chebyshev_points
from ._dtypes import (
    cast_exact,
    encoder_points_ok,
    hypot_exact,
    points_valid,
    resolve_accum_dtype,
    unit_roundoff,
)
from ._errors import error_quantile
from ._nodes import distinct_representatives, finite_selection
from ._result import (
    DecodeResult,
    apply_decoding,
    finish,
    predicted_error,
    status_of,
)

# ----------------------------------------------------------------------------------
# kernels (shared with _nercc_kernels and _repapprox_kernels)


def berrut_matrix(nodes: jax.Array, sel: jax.Array, z: jax.Array):
    """Berrut basis over the distinct selected nodes, evaluated at z.

    B[q, i] = [(-1)^{r_i} / (z_q - x_i)] / sum_j [(-1)^{r_j} / (z_q - x_j)] for the
    representatives i (rank r_i), 0 for every other worker. Each term is scaled by the
    distance to the nearest node, so no term exceeds 1 in magnitude (no overflow for
    z close to a node); where z_q equals a node the row is the unit vector of that
    node's representative (no 0/0).

    Returns:
        (B [Q, M], hit bool [Q], hit_idx int32 [Q], count int32).
    """
    dt = nodes.dtype
    rep, rank, count = distinct_representatives(nodes, sel)
    sign = jnp.where(rank % 2 == 0, jnp.ones((), dt), -jnp.ones((), dt))
    dz = z[:, None] - nodes[None, :]
    adz = jnp.where(rep[None, :], jnp.abs(dz), jnp.asarray(jnp.inf, dt))
    dmin = jnp.min(adz, axis=1)
    hit_idx = jnp.argmin(adz, axis=1).astype(jnp.int32)
    hit = dmin == 0
    scale = jnp.where(jnp.isfinite(dmin) & ~hit, dmin, jnp.ones_like(dmin))
    safe = jnp.where(rep[None, :] & (dz != 0), dz, jnp.ones_like(dz))
    t = jnp.where(
        rep[None, :], sign[None, :] * (scale[:, None] / safe), jnp.zeros_like(dz)
    )
    den = jnp.sum(t, axis=1, keepdims=True)
    den = jnp.where(den == 0, jnp.ones_like(den), den)
    b = t / den
    cols = jnp.arange(nodes.shape[0], dtype=jnp.int32)
    unit = (cols[None, :] == hit_idx[:, None]).astype(dt)
    b = jnp.where(hit[:, None], unit, b)
    b = jnp.where(count > 0, b, jnp.zeros_like(b))
    return b, hit & (count > 0), hit_idx, count


def lebesgue(b: jax.Array) -> jax.Array:
    """Infinity norm of a decoding matrix (max row sum of |B|)."""
    return jnp.max(jnp.sum(jnp.abs(b), axis=1), initial=0.0)


# ----------------------------------------------------------------------------------
# public API


def bacc_points(num_inputs: int, num_workers: int, *, dtype: Any = None):
    """Default BACC points: first-kind data points, second-kind worker points.

    Args:
        num_inputs: K >= 1, the number of data points beta.
        num_workers: M >= 2, the number of worker points alpha.
        dtype: floating dtype (default: JAX's default float).

    Returns:
        (beta [K], alpha [M]), both in decreasing order as
        :func:`chebyshev_points` returns them.

    Raises:
        ValueError: K < 1 or M < 2. TypeError: non-int sizes.

    Examples:
        >>> import codedjax as cj
        >>> beta, alpha = cj.bacc_points(2, 3)
        >>> alpha.tolist()
        [1.0, 0.0, -1.0]

    References:
        T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
        arXiv:2009.08327.
    """
    k = check_int("bacc_points", "num_inputs", num_inputs, minimum=1)
    m = check_int("bacc_points", "num_workers", num_workers, minimum=2)
    return (
        chebyshev_points(k, kind=1, dtype=dtype),
        chebyshev_points(m, kind=2, dtype=dtype),
    )


def berrut_encode(
    x: ArrayLike, beta: ArrayLike, alpha: ArrayLike, *, return_ok: bool = False
) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""BACC encoding: worker i receives u(alpha_i), the Berrut interpolant of x.

    .. math::
        u(z) = \sum_{j} \frac{(-1)^j / (z - \beta_{(j)})}
                             {\sum_{l} (-1)^l / (z - \beta_{(l)})} X_{(j)},

    with the signs following the sorted order of the data points (any order of
    ``beta`` may be given; :func:`chebyshev_points` returns decreasing points). At a
    worker point equal to a data point the worker receives that input exactly (bit
    for bit in the accumulation dtype).

    Under ``jit`` the points cannot be checked (nothing traced can raise); there,
    invalid points (repeated or non-finite data points, non-finite worker points)
    make every coded input NaN, so every worker's answer is NaN and a decoder
    reports ``ok`` False (``TOO_FEW_RESPONSES``) instead of a silently wrong
    value; ``return_ok=True`` also returns the points' validity as data.

    Args:
        x: [K, ...] inputs, any floating dtype.
        beta: [K] distinct finite data points (default choice: first kind).
        alpha: [M] finite worker points (default choice: second kind; may repeat).
        return_ok: also return ``ok``, a bool scalar: False when the (traced)
            points are invalid, and then every coded row is NaN.

    Returns:
        [M, ...] coded inputs in the accumulation dtype of ``x`` (float32 for
        bf16/f16/f32, float64 for float64); with ``return_ok``, the pair (coded,
        ok).

    Raises:
        ValueError: on shapes that disagree, duplicate or non-finite concrete beta,
            non-finite concrete alpha.
        TypeError: non-floating inputs, a ``return_ok`` that is not a bool.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> beta, alpha = cj.bacc_points(3, 5)
        >>> u = cj.berrut_encode(jnp.ones((3, 2)), beta, alpha)
        >>> u.shape, bool(jnp.allclose(u, 1.0))
        ((5, 2), True)

    References:
        J.-P. Berrut, Rational functions for guaranteed and experimentally
        well-conditioned global interpolation, Comput. Math. Appl. 15(1), 1988;
        T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
        arXiv:2009.08327.
    """
    fname = "berrut_encode"
    want_ok = check_return_ok(fname, return_ok)
    x = check_floating(fname, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
    beta = check_vector(fname, "beta", beta, length=x.shape[0])
    alpha = check_vector(fname, "alpha", alpha)
    concrete_points(fname, "beta", beta)
    concrete_finite(fname, "alpha", alpha)
    acc = resolve_accum_dtype(fname, x.dtype)
    coded = berrut_encode_unchecked(x, beta, alpha, acc)
    if want_ok:
        return coded, encoder_points_ok(beta.astype(acc), alpha.astype(acc))
    return coded


def berrut_encode_unchecked(x, beta, alpha, acc):
    """:func:`berrut_encode` after its checks (a code's: its points checked when it
    was built, x by its ``encode``), in the accumulation dtype ``acc``."""
    # the basis depends on the points only (one compilation per K, M); the product
    # with the inputs is a separate, cheap program for every payload shape
    b, hit, idx, _ = encode_plan(beta.astype(acc), alpha.astype(acc))
    return apply_plan(b, hit, idx, x.astype(acc))


@jax.jit
def encode_plan(beta, alpha):
    """Berrut encoding basis; NaN rows (no copies) when the points are invalid."""
    b, hit, idx, count = berrut_matrix(beta, jnp.ones(beta.shape, bool), alpha)
    valid = points_valid(beta) & jnp.all(jnp.isfinite(alpha))
    b = jnp.where(valid, b, jnp.full_like(b, jnp.nan))
    return b, hit & valid, idx, count


@jax.jit
def apply_plan(b, hit, idx, x):
    """Coded inputs B @ x (non-finite inputs propagate), node rows copied."""
    return apply_decoding(b, x, x.dtype, hit=hit, hit_idx=idx, zero_nonfinite=False)


def _check_decode(fname, y, mask, alpha, beta, accum_dtype):
    y, mask, alpha, beta = check_decode_inputs(fname, y, mask, alpha, beta)
    concrete_finite(fname, "alpha", alpha)
    concrete_finite(fname, "beta", beta)
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    return y, mask, alpha.astype(acc), beta.astype(acc), acc


def berrut_decode(
    y: ArrayLike,
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    *,
    accum_dtype: Any = None,
) -> DecodeResult:
    r"""BACC decoding: the Berrut interpolant of the responses, evaluated at beta.

    .. math::
        \hat f(X_k) = r(\beta_k), \qquad
        r(z) = \frac{\sum_i (-1)^i y_{(i)} / (z - \tilde\alpha_i)}
                    {\sum_i (-1)^i / (z - \tilde\alpha_i)},

    over the distinct responding nodes sorted increasingly,
    :math:`\tilde\alpha_0 < \dots < \tilde\alpha_{n-1}` (signs by rank, not by worker
    index). Several responders at the same node are merged into one node: the
    responder of lowest worker index is taken (so exact replicas stay exact; no
    averaging). A response holding NaN or Inf is treated as missing. Where
    :math:`\beta_k` equals a responding node, the result is that node's response
    itself, bit for bit in the accumulation dtype (no 0/0).

    Args:
        y: [M, ...] worker responses, any floating dtype.
        mask: bool [M], True for the workers that responded.
        alpha: [M] finite worker points (default choice: second kind; may repeat).
        beta: [K] finite evaluation (data) points (default choice: first kind).
        accum_dtype: float32 or float64; default float32 for bf16/f16/f32
            responses, float64 for float64.

    Returns:
        DecodeResult: ``value`` [K, ...] in the accumulation dtype (zeros when no
        finite response arrived); ``ok`` False when no finite response arrived or the
        result is not finite; ``cond`` the infinity norm of the decoding matrix (the
        Lebesgue constant of the interpolant at beta; inf when ``ok`` is False for
        lack of responses); ``num_used`` the number of distinct responding nodes.

    Raises:
        ValueError: shapes that disagree, a mask that is not [M], non-finite concrete
            points.
        TypeError: non-floating y or a non-boolean mask.

    Examples:
        >>> import jax, codedjax as cj
        >>> beta, alpha = cj.bacc_points(4, 20)
        >>> mask = cj.sample_masks(jax.random.key(0), num_workers=20, num_responses=15)
        >>> r = cj.berrut_decode(alpha[:, None] ** 2, mask, alpha, beta)
        >>> bool(r.ok), int(r.num_used), r.value.shape
        (True, 15, (4, 1))

    References:
        T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
        arXiv:2009.08327; M. S. Floater and K. Hormann, Barycentric rational
        interpolation with no poles and high rates of approximation, Numer. Math.
        107, 2007.
    """
    y, mask, alpha, beta, acc = _check_decode(
        "berrut_decode", y, mask, alpha, beta, accum_dtype
    )
    return berrut_decode_unchecked(y, mask, alpha, beta, acc)


def berrut_decode_unchecked(y, mask, alpha, beta, acc):
    """:func:`berrut_decode` after its checks (a code's: its points checked when it
    was built, y and mask by its ``decode``), in the accumulation dtype ``acc``."""
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    # cast first (exact, subnormal answers included, keeps NaN/Inf), so one
    # program serves every worker dtype;
    # the decoding matrix is built by a program that does not see the payload
    # shape, and applied by a cheap one
    worker = y.dtype
    y = cast_exact(y, acc)
    sel = finite_selection(y, mask)
    plan = _decode_plan(sel, alpha, beta)
    return decode_finish(plan, y, sel, worker=worker)


@jax.jit
def _decode_plan(sel, alpha, beta):
    b, hit, idx, count = berrut_matrix(alpha, sel, beta)
    points_ok = jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(alpha))
    status = status_of(
        points_ok=points_ok, enough=count > 0, solved=jnp.all(jnp.isfinite(b))
    )
    cond = jnp.where(count > 0, lebesgue(b), jnp.asarray(jnp.inf, b.dtype))
    return b, hit, idx, count, status, cond


@functools.partial(jax.jit, static_argnames=("worker",))
def decode_finish(plan, y, sel, worker):
    """The DecodeResult of an interpolating decoder from its plan.

    ``plan`` = (A [K, M], hit [K], hit_idx [K], count, status, cond); y [M, ...]
    already in the accumulation dtype; ``worker`` the dtype the workers answered in.
    """
    a, hit, idx, count, status, cond = plan
    value = apply_decoding(a, y, y.dtype, hit=hit, hit_idx=idx, rows=sel)
    flat = y.reshape(y.shape[0], math.prod(y.shape[1:]))
    error = predicted_error(a, flat, sel, worker)
    # (combined through the bits: a prediction in the subnormal range, that of a
    # subnormal payload, must not be flushed to zero by the sum)
    error = hypot_exact(error, weights_rounding(a, value, flat.shape[1]))
    return finish(value, cond, count, status, error)


def weights_rounding(a: jax.Array, value: jax.Array, num_cols: int) -> jax.Array:
    """The rounding of the barycentric weights themselves, as an error of the
    value: row k of A is t_k / sum_i t_ik, whose denominator, a sum of terms of
    both signs, is computed with a relative error of about u_acc sum_i |t_ik| /
    |sum_i t_ik| = u_acc L_k (L_k = sum_i |A_ki|, the row's Lebesgue sum); that
    error is common to the row, so the value is off by about u_acc L_k
    |value_k|, times z_KF as the other terms (docs/decoding.md, section 1).
    Large where few nodes extrapolate (two nodes: L_k up to cond)."""
    dt = a.dtype
    lk = jnp.sum(jnp.abs(a), axis=-1)  # [K]
    vk = jnp.abs(jnp.where(jnp.isfinite(value), value, jnp.zeros((), dt)))
    vk = jnp.max(vk.reshape(vk.shape[0], -1), axis=1, initial=0.0)
    z = error_quantile(a.shape[0] * num_cols)
    # (z u L_k first: L_k |value_k| alone may overflow for huge answers)
    return jnp.max(((z * unit_roundoff(dt)) * lk) * vk, initial=0.0)


def berrut_decoding_matrix(
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    *,
    accum_dtype: Any = jnp.float32,
) -> DecodeResult:
    r"""The BACC decoding matrix B [K, M] for one mask (columns of unused workers 0).

    ``B @ y`` equals :func:`berrut_decode` (up to rounding; the decoder copies node
    values exactly where beta_k is a node). ``||B||_inf`` is the Lebesgue constant at
    beta and ``||B||_F^2 / K`` the per-output noise gain for independent worker noise.

    Args:
        mask: bool [M]. alpha: [M] worker points. beta: [K] data points.
        accum_dtype: float32 (default) or float64.

    Returns:
        DecodeResult with ``value`` = B [K, M] and ``ok``, ``cond``, ``num_used`` as
        in :func:`berrut_decode`.

    Raises:
        ValueError, TypeError: as :func:`berrut_decode`.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> beta, alpha = cj.bacc_points(2, 6)
        >>> b = cj.berrut_decoding_matrix(jnp.ones(6, bool), alpha, beta).value
        >>> b.shape, bool(jnp.allclose(b.sum(1), 1.0))
        ((2, 6), True)

    References:
        T. Jahani-Nezhad and M. A. Maddah-Ali, arXiv:2009.08327.
    """
    fname = "berrut_decoding_matrix"
    alpha = check_vector(fname, "alpha", alpha)
    acc = resolve_accum_dtype(fname, jnp.float32, accum_dtype)
    y = jnp.zeros((alpha.shape[0],), acc)
    y, mask, alpha, beta, acc = _check_decode(fname, y, mask, alpha, beta, accum_dtype)
    return berrut_decoding_matrix_unchecked(mask, alpha, beta, acc)


def berrut_decoding_matrix_unchecked(mask, alpha, beta, acc):
    """:func:`berrut_decoding_matrix` of a checked mask [M] (a code's), in the
    accumulation dtype ``acc``."""
    return _berrut_matrix(mask, alpha.astype(acc), beta.astype(acc))


@jax.jit
def _berrut_matrix(mask, alpha, beta):
    b, _, _, count = berrut_matrix(alpha, mask, beta)
    points_ok = jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(alpha))
    status = status_of(
        points_ok=points_ok, enough=count > 0, solved=jnp.all(jnp.isfinite(b))
    )
    cond = jnp.where(count > 0, lebesgue(b), jnp.asarray(jnp.inf, b.dtype))
    # error per unit of max |y|, for responses in the accumulation dtype
    error = unit_roundoff(b.dtype) * jnp.max(jnp.sum(jnp.abs(b), axis=1), initial=0.0)
    return finish(b, cond, count, status, error)
