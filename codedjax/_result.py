"""What every decoder returns, and the steps every decoder shares.

* :class:`DecodeResult` and :class:`Status`: the result type and its failure codes.
* :func:`apply_decoding`: value = A @ y (flatten the payload, zero its non-finite
  entries, scale it by a power of two, exactly and subnormal numbers included, so
  the product cannot overflow when the answer is representable, one matrix product
  with one precision policy, reshape).
* :func:`predicted_error`: the decoder's predicted absolute error of ``value``.
* :func:`status_of` and :func:`finish`: the status code and the final result, built
  the same way by every decoder (``ok == (status == SUCCESS)``; a value that is not
  finite gives ``NONFINITE``; ``value`` zero and ``error`` inf when not ``ok``).
"""

from __future__ import annotations

import enum
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._dtypes import (
    any_subnormal,
    cast_exact,
    ldexp_exact,
    matmul_precision,
    max_exponent,
)
from ._errors import predicted_error_of


class Status(enum.IntEnum):
    """Why a decode failed (the ``status`` field of :class:`DecodeResult`).

    ``ok`` is ``status == Status.SUCCESS``. The codes are int32 data, so they pass
    through ``jit`` and ``vmap``; compare with ``r.status == cj.Status.NONFINITE``.

    Attributes:
        SUCCESS: decoded.
        TOO_FEW_RESPONSES: fewer usable (responding, finite) workers than the code
            needs (D for Lagrange codes, 1 distinct node for Berrut, 2 for NeRCC).
        ILL_CONDITIONED: the system is numerically singular in the accumulation
            dtype (``cond`` >= 1 / eps) or its solve produced non-finite numbers.
        BAD_POINTS: the evaluation points (or the arrival order) are not valid:
            non-finite or repeated points, a repeated or out-of-range worker index
            in ``order``, a negative traced smoothing weight.
        NONFINITE: the decoded value is not finite (the answer overflows the
            accumulation dtype).
        UNDECIDABLE: a robust decoder could not decide which workers are corrupt.
    """

    SUCCESS = 0
    TOO_FEW_RESPONSES = 1
    ILL_CONDITIONED = 2
    BAD_POINTS = 3
    NONFINITE = 4
    UNDECIDABLE = 5


class DecodeResult(NamedTuple):
    """What every decoder returns (a pytree, so it passes through jit and vmap).

    Attributes:
        value: [..., K, ...] decoded outputs in the accumulation dtype; all zeros
            when not ``ok`` (never NaN).
        ok: bool [...], ``status == Status.SUCCESS``.
        cond: [...] the condition number of the system used, inf when the system
            could not be formed. What it measures depends on the decoder:

            * ChebyLS (:func:`chebyls_decode`, :func:`chebyls_decode_batched`) and
              the threshold decoder: the 2-norm condition number of the
              *equilibrated* Chebyshev-Vandermonde rows of the responders used
              (columns scaled to unit norm over all M workers; the unscaled
              matrix of the literature has a larger condition number). The
              batched decoder reports an estimate in float32 (see its docstring).
            * Berrut (BACC), NeRCC and RepApprox: the infinity norm of the
              decoding matrix (max row sum of |A|; for an interpolating decoder
              the Lebesgue constant at the data points), the factor by which an
              error in the responses can grow in max norm.
        num_used: int32 [...], how many worker responses (distinct nodes for the
            interpolating decoders) the decoder used.
        status: int32 [...], a :class:`Status` code.
        error: [...] the predicted absolute error of ``value`` (max over the
            outputs) from rounding in the workers' dtype and in the decoder; inf
            when not ``ok``, finite when ``ok``. For a decoding-matrix function
            (``value`` = A) it is the predicted error per unit of max |y|. For the
            approximate codes (Berrut, NeRCC, RepApprox's approximated outputs)
            it is the rounding part only; the parity code (:func:`parity_code`)
            adds its parity model's stated error to a rebuilt answer's rounding,
            and reports the rounding part only when that error was not stated.
    """

    value: jax.Array
    ok: jax.Array
    cond: jax.Array
    num_used: jax.Array
    status: jax.Array
    error: jax.Array


def scale_columns(
    flat: jax.Array, rows: jax.Array | None, acc
) -> tuple[jax.Array, jax.Array]:
    """(scaled, e): each column of ``flat`` [..., M, F] divided by 2^e_f, e_f the
    exponent of its largest finite magnitude over ``rows`` (bool [..., M]; None:
    every row), so that it lies in [1, 2); the other rows and non-finite entries
    zeroed. Exact both ways, subnormal answers included (read through their bits,
    :func:`codedjax._dtypes.ldexp_exact`); an entry more than 2^126 below its
    column's largest may be flushed. e is int32 [..., 1, F].
    """
    ok = jnp.isfinite(flat)
    if rows is not None:
        ok = ok & rows[..., :, None]
    e = max_exponent(flat, ok, axis=-2, keepdims=True)  # [..., 1, F]
    scaled = ldexp_exact(flat, -e, acc, subnormal_out=False)
    return jnp.where(ok, scaled, jnp.zeros((), acc)), e


def apply_decoding(
    a: jax.Array,
    y: jax.Array,
    acc,
    *,
    per_mask: bool = False,
    hit: jax.Array | None = None,
    hit_idx: jax.Array | None = None,
    zero_nonfinite: bool = True,
    rows: jax.Array | None = None,
    scaled: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """value = A @ y for every decoder and encoder (one precision policy).

    The payload is flattened to [M, F] (or [B, M, F]) and each column scaled by a
    power of two so that its largest finite magnitude over the rows the product
    uses (``rows``, the decoder's selection) lies in [1, 2) (:func:`scale_columns`);
    the other rows and, for a decoder, non-finite entries are zeroed (decoders
    give unused workers a zero column, and 0 * NaN would be NaN; encoders pass
    ``zero_nonfinite=False`` to propagate a bad input). The product then cannot
    overflow unless the answer itself does, and the scaling is exact both ways,
    subnormal numbers included (:func:`codedjax._dtypes.ldexp_exact` reads and
    writes them through their bits, where XLA would flush them to zero): a
    payload in or near the subnormal range decodes as accurately as any other,
    to the spacing of the subnormal numbers. Where no used answer is subnormal and
    every column's largest lies in [2^-60, 2^61), scaling changes nothing (a power
    of two commutes with every rounding while the numbers stay normal), and the
    product runs on the answers as they are: a ``lax.cond`` picks that branch at
    run time (a product below the normal range may then be flushed, within the
    error model's absolute floor). Rows flagged ``hit`` (an evaluation
    point equal to a node) are copied from that node's response, bit for bit.
    Matrix products use :func:`codedjax._dtypes.matmul_precision`.

    Args:
        a: [K, M] one decoding matrix, or [B, K, M] one per mask.
        y: [M, ...] a payload (shared by every mask when ``a`` is batched), or
            [B, M, ...] with ``per_mask=True``.
        acc: the accumulation dtype.
        per_mask: y carries a leading B axis matching ``a``.
        hit, hit_idx: optional bool [..., K] and int32 [..., K]: output k is the
            response of worker ``hit_idx[k]`` itself where ``hit[k]``.
        zero_nonfinite: zero non-finite payload entries (decoders) or keep them.
        rows: optional bool [M] ([B, M] with ``per_mask``): the rows A uses, whose
            largest answers set the scale (a large answer of an unused worker
            must not push the used ones below the range); None: the rows where
            A has a nonzero column.
        scaled: optional (scaled, e) of :func:`scale_columns` of the flattened
            payload, when the caller has it already.

    Returns:
        [K, ...] or [B, K, ...] in ``acc``.
    """
    acc = jnp.dtype(acc)
    m = a.shape[-1]
    lead = y.shape[:1] if per_mask else ()
    trailing = y.shape[len(lead) + 1 :]
    flat = y.reshape(lead + (m, math.prod(trailing)))  # in the answers' dtype
    if scaled is not None:
        scaled, e = scaled
        out = ldexp_exact(_product(a, scaled, per_mask), e, acc, subnormal_in=False)
    else:
        if not zero_nonfinite:  # (an encoder: every row, non-finite entries stay)
            ok = jnp.isfinite(flat)
        else:
            if rows is None:  # the rows A reads
                rows = jnp.any(a != 0, axis=-2)  # [M] or [B, M]
                if a.ndim == 3 and not per_mask:  # one payload for every mask
                    rows = jnp.any(rows, axis=0)
            ok = jnp.isfinite(flat) & rows[..., :, None]
        e = max_exponent(flat, ok, axis=-2, keepdims=True)

        def direct():
            y = flat.astype(acc)
            return _product(a, jnp.where(ok, y, 0) if zero_nonfinite else y, per_mask)

        def by_scaling():
            if zero_nonfinite:
                s = jnp.where(ok, ldexp_exact(flat, -e, acc, subnormal_out=False), 0)
            else:
                s = ldexp_exact(flat, -e, acc, subnormal_out=False)
            return ldexp_exact(_product(a, s, per_mask), e, acc, subnormal_in=False)

        out = jax.lax.cond(_unscaled_is_exact(flat, e), direct, by_scaling)
    if hit is not None:
        if per_mask:
            copied = jnp.take_along_axis(flat, hit_idx[..., None], axis=-2)
        else:
            copied = flat[hit_idx]
        copied = cast_exact(copied, acc)
        if zero_nonfinite:
            copied = jnp.where(jnp.isfinite(copied), copied, jnp.zeros((), acc))
        out = jnp.where(hit[..., None], copied, out)
    return out.reshape(out.shape[:-1] + trailing)


def _product(a, y, per_mask):
    """A @ y for one matrix [K, M] or a batch [B, K, M] (y [B, M, F] per mask)."""
    prec = matmul_precision()
    if a.ndim == 2:
        return jnp.matmul(a, y, precision=prec)
    if per_mask:
        return jnp.einsum("bkm,bmf->bkf", a, y, precision=prec)
    return jnp.einsum("bkm,mf->bkf", a, y, precision=prec)


# the payload needs no scaling when each column's largest answer lies in
# [2^-_SAFE, 2^_SAFE) and no answer is subnormal (see apply_decoding)
_SAFE = 60


def _unscaled_is_exact(flat, e):
    """Whether A @ y unscaled is the scaled product (bool scalar): no subnormal
    payload entry (XLA would flush it) and every column's exponent ``e`` within
    +-_SAFE, so that neither the product nor its sums leave the normal range."""
    return ~any_subnormal(flat) & (jnp.max(jnp.abs(e)) <= _SAFE)


def predicted_error(
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
    r"""Predicted absolute error of ``value = A y`` (max over outputs), per decode.

    .. math::
        e = z_{KF} \sqrt{\max_k \lVert A_{k,:} \rVert_2^2 + 1} \; \max_f \sigma_f,
        \qquad \sigma_f = \max\bigl(u \,\mathrm{rms}_{i \in S}\, y_{if},\;
        \sqrt{\mathrm{RSS}_f / (N - D)}\bigr),

    u = sqrt(u_w^2 + (c u_acc)^2), u_w the unit roundoff of the workers' dtype (at
    least the accumulation dtype's) and c u_acc the decoder's own rounding: each
    used answer carries an independent error of standard deviation sigma_f
    (rounding at the size of the answers, or what the least-squares residual shows
    beyond it where ``residual_sq`` is given and N > D); row k of A sums them with
    weights A_{k,i}; the rounding the workers share passes through with gain 1 (the
    "+ 1"); z_{KF} is the normal quantile at which the largest of the K F outputs
    exceeds its prediction with probability 1% under that model. Derivation,
    assumptions and calibration: ``docs/decoding.md``.

    Args:
        a: [..., K, M] decoding matrices (zero columns for unused workers).
        y: [M, F] (shared) or [..., M, F] flattened responses (non-finite entries
            may be present; only selected rows count).
        sel: bool [..., M], the workers used.
        worker_dtype: the dtype the workers answered in.
        residual_sq: optional [..., F] least-squares residual sum of squares of the
            used answers.
        dof: N - D for ``residual_sq`` (int or int array [...]).
        residual_scaled: ``residual_sq`` is that of ``y / s``, s the power of
            two of ``codedjax._errors.payload_scale`` (so it cannot overflow).
        residual_exp: ``residual_sq`` is that of ``y / 2^residual_exp`` (int
            [...]; ``codedjax._errors.payload_exponent``, exact for subnormal
            answers).
        solve_factor: the decoder's own rounding as a noise level of the
            answers, in units of the accumulation dtype's u (c above;
            ``codedjax._errors.solve_rounding``; 0 for a decoder that copies).

    Returns:
        [...] in the dtype of ``a``.
    """
    return predicted_error_of(
        a,
        y,
        sel,
        worker_dtype,
        residual_sq=residual_sq,
        dof=dof,
        residual_scaled=residual_scaled,
        residual_exp=residual_exp,
        solve_factor=solve_factor,
    )


def status_of(
    *,
    points_ok: jax.Array | bool = True,
    enough: jax.Array | bool = True,
    solved: jax.Array | bool = True,
) -> jax.Array:
    """int32 status from the checks every decoder makes, first failure first.

    Args:
        points_ok: the points (and order, smoothing) are valid, else BAD_POINTS.
        enough: enough usable responses, else TOO_FEW_RESPONSES.
        solved: the system was solved stably, else ILL_CONDITIONED.
    """
    points_ok, enough, solved = jnp.broadcast_arrays(
        jnp.asarray(points_ok), jnp.asarray(enough), jnp.asarray(solved)
    )
    s = jnp.where(solved, int(Status.SUCCESS), int(Status.ILL_CONDITIONED))
    s = jnp.where(enough, s, int(Status.TOO_FEW_RESPONSES))
    s = jnp.where(points_ok, s, int(Status.BAD_POINTS))
    return s.astype(jnp.int32)


def finish(
    value: jax.Array,
    cond: jax.Array,
    num_used: jax.Array,
    status: jax.Array,
    error: jax.Array,
) -> DecodeResult:
    """The result every decoder returns, built one way.

    A value that is not finite turns SUCCESS into NONFINITE; ``ok`` is
    ``status == SUCCESS``; when not ``ok`` the value is zeroed and ``error`` is inf.
    ``status`` has the batch shape [...]; ``value`` is [..., K, ...].
    """
    nb = status.ndim
    axes = tuple(range(nb, value.ndim))
    finite = jnp.all(jnp.isfinite(value), axis=axes)
    status = jnp.where(
        (status == int(Status.SUCCESS)) & ~finite, int(Status.NONFINITE), status
    ).astype(jnp.int32)
    ok = status == int(Status.SUCCESS)
    okv = ok.reshape(ok.shape + (1,) * (value.ndim - nb))
    value = jnp.where(okv, value, jnp.zeros_like(value))
    error = jnp.where(ok, error, jnp.asarray(jnp.inf, error.dtype))
    return DecodeResult(value, ok, cond, num_used.astype(jnp.int32), status, error)
