"""ChebyLS: the least-squares decoder of Lagrange coded computing, for one mask, for
a batch of masks and as its decoding matrix.

The answers of the N responding workers are samples of h = f o u (degree D - 1,
see :mod:`codedjax._lagrange_encoding`); ChebyLS fits h in the Chebyshev basis by
least squares over every responder and evaluates it at beta. Missing workers are a
fixed-shape boolean mask, so one compiled program serves every straggler pattern.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ._argcache import DECODE_CHECKS
from ._argchecks import check_chebyshev_decode, check_mask, check_payload, check_vector
from ._basis_lsq import check_exact_cond
from ._batching import batching_decoder
from ._dtypes import (
    finite_rows,
    ldexp_exact,
    points_valid,
    resolve_accum_dtype,
    unit_roundoff,
)
from ._errors import payload_exponent, solve_rounding
from ._lagrange_lsq import ls_decoding_matrices, ls_residual_sq
from ._lagrange_lsq import ls_decoding_matrix as _ls_decoding_matrix
from ._result import (
    DecodeResult,
    apply_decoding,
    finish,
    predicted_error,
    scale_columns,
    status_of,
)
from ._threads import serialised_call


def checked_decode_args(fname, y, mask, alpha, beta, num_coeffs, accum_dtype):
    """(y, mask, alpha, beta, D, acc) after the checks; the points are returned
    as given (converted, not cast): every kernel casts them to ``acc`` inside its
    program, so that the memo (see codedjax._argcache) holds static facts only."""
    key = DECODE_CHECKS.key(fname, (y, mask), (alpha, beta), (num_coeffs, accum_dtype))
    hit = DECODE_CHECKS.get(key, (alpha, beta))
    if hit is not None:
        return (y, mask, alpha, beta) + hit
    y, mask, alpha, beta, d, acc = check_chebyshev_decode(
        fname,
        y,
        mask,
        alpha,
        beta,
        num_coeffs,
        accum_dtype,
        hint="use chebyls_decode_batched or jax.vmap for many masks",
        cast=False,
    )
    DECODE_CHECKS.put(key, (alpha, beta), (d, acc))
    return y, mask, alpha, beta, d, acc


def _ls_result(
    a, ok, cond, n, y, sel, alpha, beta, num_coeffs, acc, per_mask=False,
    scaled=None, rss=None, rss_exp=None,
):  # fmt: skip
    """The DecodeResult of a least-squares decode (shared by the two decoders).

    ``rss``, the residual sum of squares of y / 2^``rss_exp`` (one mask: of
    ``scaled``, the payload's columns each divided by its power of two), adds
    the least-squares residual to the predicted error (docs/decoding.md); the
    solve's own rounding enters as a noise level of sqrt(D) u_acc
    (``codedjax._errors.solve_rounding``).
    """
    m = a.shape[-1]
    lead = y.shape[:1] if per_mask else ()
    flat = y.reshape(lead + (m, math.prod(y.shape[len(lead) + 1 :])))
    with jax.named_scope("payload"):
        if scaled is not None:  # one mask: the scaled payload served the residual
            value = apply_decoding(a, y, acc, scaled=scaled)
        else:
            rows = sel if per_mask else jnp.any(sel, axis=0)
            value = apply_decoding(a, y, acc, per_mask=per_mask, rows=rows)
    with jax.named_scope("error"):
        error = predicted_error(
            a,
            flat,
            sel,
            y.dtype,
            residual_sq=rss,
            dof=n - num_coeffs,
            residual_exp=rss_exp,
            solve_factor=solve_rounding(num_coeffs),
        )
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta),
        enough=n >= num_coeffs,
        solved=ok,
    )
    return finish(value, cond, n, status, error)


def chebyls_decode(
    y: Any,
    mask: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: int,
    *,
    accum_dtype: Any = None,
    exact_cond: bool = False,
) -> DecodeResult:
    r"""ChebyLS: least-squares decoding in the Chebyshev basis from every responder.

    .. math::
        \hat c = \arg\min_c \lVert T_S c - y_S \rVert_2, \qquad
        \hat f(X_k) = \sum_{j<D} \hat c_j T_j(\beta_k),

    solved on the equilibrated rows T_S by the route of the batched kernel: with
    float32 accumulation corrected semi-normal equations (the Cholesky factor of
    T_S^T T_S and two refinement steps through the rows, as accurate as a QR solve
    while cond^2 eps <= 1/32, i.e. cond <= 512) and Householder QR for a mask
    whose certified cond estimate exceeds that; with float64 accumulation (or
    ``exact_cond``) Householder QR. A worker whose response holds a NaN or Inf is
    treated as missing, so a faulty worker cannot poison the result. With N >= D
    responses beyond the threshold the condition number falls from about 1e3
    (median at N = D, M = 40) to O(1..10).

    Args:
        y: [M, ...] worker responses in any floating dtype (rows of missing workers
            are ignored whatever they hold).
        mask: bool [M], True for workers that responded.
        alpha: [M] worker evaluation points.
        beta: [K] data points.
        num_coeffs: D = d (K - 1) + 1 (static).
        accum_dtype: float32 or float64; default float32 for bf16/f16/f32
            responses, float64 for float64.
        exact_cond: report the exact 2-norm condition number instead of the
            estimate: Householder QR and an SVD of R, also in float32.

    Returns:
        DecodeResult: ``value`` [K, ...] in the accumulation dtype; ``ok`` False when
        fewer than D finite responses remain (then ``value`` is all zeros), when the
        points are not finite and distinct, or when ``cond`` >= 1/eps; ``cond`` the
        2-norm condition number of the equilibrated rows used: exact with float64
        accumulation or ``exact_cond``; with float32 accumulation a certified
        estimate (squarings of T_S^T T_S and of its inverse: within D^(+-1/64) of
        the exact value, in practice within 0.6% below it; measured in
        ``tests/test_one_mask_decode.py``); ``num_used``.

    Batching: ``jax.vmap`` of this function (over masks, payloads or both, nested,
    ``in_axes=None`` for a shared payload) runs the batched kernel of
    :func:`chebyls_decode_batched` (``jax.custom_batching.custom_vmap``), not a
    per-mask QR; there, as in that function, ``cond`` is an estimate with float32
    accumulation. ``jax.grad`` and ``jax.jvp`` work (the value is linear in ``y``;
    a ``custom_jvp`` over the plain kernel). The argument checks are memoised per
    code (the same point arrays), so a served call costs about one jitted call.

    Raises:
        ValueError: on shapes that disagree, num_coeffs > M, or duplicate /
            non-finite concrete points.
        TypeError: on non-floating y or a non-boolean mask.

    Examples:
        >>> import jax, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(12), cj.chebyshev_points(3)
        >>> y = alpha[:, None] ** 2           # h(z) = z^2, degree 2, D = 3
        >>> mask = cj.sample_masks(jax.random.key(0), num_workers=12, num_responses=5)
        >>> r = cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=3)
        >>> bool(r.ok), bool(jax.numpy.allclose(r.value[:, 0], beta**2, atol=1e-5))
        (True, True)

    References:
        The more the merrier: numerically accurate coded computing for ML inference
        (seed paper of codedjax); M. Fahim and V. R. Cadambe, Numerically stable
        polynomially coded computing, arXiv:1903.08326.
    """
    y, mask, alpha, beta, d, acc = checked_decode_args(
        "chebyls_decode", y, mask, alpha, beta, num_coeffs, accum_dtype
    )
    exact = check_exact_cond("chebyls_decode", exact_cond)
    return _chebyls_decode(
        y, mask, alpha, beta, num_coeffs=d, acc=acc, exact_cond=exact
    )


def _chebyls_decode_impl(y, mask, alpha, beta, num_coeffs, acc, exact_cond=False):
    sel = mask & finite_rows(y)
    # the payload's columns each divided by its power of two (exact, subnormal
    # answers included), zero off the selection: the decoding matrix and the
    # residual of the fit (for the predicted error) from one factorisation
    flat = y.reshape(y.shape[0], -1)
    scaled = scale_columns(flat, sel, acc)
    ls = _ls_decoding_matrix(
        sel, alpha, beta, num_coeffs, acc, y=scaled[0], exact_cond=exact_cond
    )
    return _ls_result(
        ls.a, ls.ok, ls.cond, ls.num_used, y, sel, alpha, beta, num_coeffs, acc,
        scaled=scaled, rss=ls.rss, rss_exp=scaled[1][0],
    )  # fmt: skip


def _chebyls_single(data, points, num_coeffs, acc, exact_cond):
    return _chebyls_decode_impl(*data, *points, num_coeffs, acc, exact_cond)


def _chebyls_many(data, points, per_mask, num_coeffs, acc, exact_cond):
    return _chebyls_batched_impl(
        *data, *points, num_coeffs, acc, per_mask, exact_cond=exact_cond
    )


def _chebyls_vmappable(y, mask, alpha, beta, num_coeffs, acc, exact_cond=False):
    alpha, beta = alpha.astype(acc), beta.astype(acc)  # in the program: see _argcache
    # one mask: the one-mask kernel; under jax.vmap: the batched kernel
    # (codedjax._batching), which chebyls_decode_batched runs too (_chebyls_batched)
    statics = (("num_coeffs", num_coeffs), ("acc", acc), ("exact_cond", exact_cond))
    f = batching_decoder(_chebyls_single, _chebyls_many, statics)
    return f((y, mask), (alpha, beta))


_chebyls_decode = jax.jit(
    _chebyls_vmappable, static_argnames=("num_coeffs", "acc", "exact_cond")
)


def chebyls_decoding_matrix(
    mask: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: int,
    *,
    accum_dtype: Any = jnp.float32,
    exact_cond: bool = False,
) -> DecodeResult:
    r"""The ChebyLS decoding matrix A_S = T_beta T_S^+ for one mask, as [K, M].

    Columns of missing workers are zero, so ``A @ y`` decodes any payload y [M, F].
    ``||A||_F^2 / K`` is the per-output noise gain for independent worker noise.

    Args:
        mask: bool [M] responders.
        alpha: [M] worker points. beta: [K] data points.
        num_coeffs: D (static).
        accum_dtype: float32 (default) or float64.
        exact_cond: as :func:`chebyls_decode`.

    Returns:
        DecodeResult with ``value`` = A [K, M] (the matrix :func:`chebyls_decode`
        applies, from the same kernel) and ``ok``, ``cond``, ``num_used`` as
        in :func:`chebyls_decode`; ``error`` is the rounding of ``A @ y`` per unit
        of ``max |y|`` for responses in the accumulation dtype: its unit roundoff
        times the largest row sum of ``|A|``.

    Raises:
        ValueError, TypeError: as :func:`chebyls_decode`.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> a = cj.chebyls_decoding_matrix(jnp.ones(6, bool), cj.chebyshev_points(6),
        ...                                cj.chebyshev_points(2), num_coeffs=2).value
        >>> a.shape
        (2, 6)
    """
    fname = "chebyls_decoding_matrix"
    alpha = check_vector(fname, "alpha", alpha)
    m = alpha.shape[0]
    y = jnp.zeros((m,), resolve_accum_dtype(fname, jnp.float32, accum_dtype))
    y, mask, alpha, beta, d, acc = checked_decode_args(
        fname, y, mask, alpha, beta, num_coeffs, accum_dtype
    )
    exact = check_exact_cond(fname, exact_cond)
    return _decoding_matrix(mask, alpha, beta, num_coeffs=d, acc=acc, exact_cond=exact)


def _decoding_matrix_impl(mask, alpha, beta, num_coeffs, acc, exact_cond=False):
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    a, ok, cond, n, _ = _ls_decoding_matrix(
        mask, alpha, beta, num_coeffs, acc, exact_cond=exact_cond
    )
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta),
        enough=n >= num_coeffs,
        solved=ok,
    )
    # error per unit of max |y|, for responses in the accumulation dtype
    gain = jnp.max(jnp.sum(jnp.abs(a), axis=-1), initial=0.0)
    return finish(a, cond, n, status, unit_roundoff(acc) * gain)


_decoding_matrix = jax.jit(
    _decoding_matrix_impl, static_argnames=("num_coeffs", "acc", "exact_cond")
)


def chebyls_decode_batched(
    y: Any,
    masks: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: int,
    *,
    accum_dtype: Any = None,
    shared_y: bool | None = None,
    exact_cond: bool = False,
) -> DecodeResult:
    r"""ChebyLS for B masks at once (and B payloads, or one shared payload).

    One decoding matrix per mask, then one batched product with the payloads; no
    Python loop. Equal to ``jax.vmap(chebyls_decode)`` over the masks up to
    rounding: both run the same batched kernel (``jax.vmap(chebyls_decode)``
    through its batching rule), this function as its own jitted program, so
    that a call pays one dispatch and no tracing. With float32 accumulation and
    at least 16 masks (the static batch size) the masks with cond <= 512 are
    solved by corrected semi-normal equations
    (all B Gram matrices by one matrix product and inverted together, one
    refinement step through the rows: backward stable, about 25 times a per-mask
    lstsq loop at M = 40, D = 22) and the others by Householder QR; fewer masks,
    and float64 throughout, use batched Householder QR, which compiles 2-3 times
    faster and runs as fast there (``docs/decoding.md``, "The batched
    kernels"; ``codedjax._lagrange_lsq``).

    Args:
        y: [M, ...] one payload shared by every mask (``shared_y=True``), or
            [B, M, ...] one per mask (``shared_y=False``).
        masks: bool [B, M].
        alpha: [M]; beta: [K]; num_coeffs: D (static); accum_dtype: as
            :func:`chebyls_decode`.
        shared_y: whether y is one payload shared by every mask. ``None`` (the
            default) infers it from the shape only where exactly one reading
            fits (shared: ``y.shape[0] == M``; per mask: ``y.shape[:2] == (B,
            M)``) and raises a ValueError where both fit (B == M and
            ``y.shape[1] == M``).
        exact_cond: the exact 2-norm condition number of every mask (Householder
            QR and an SVD of each R, also in float32) instead of the estimate.

    Returns:
        DecodeResult with a leading B axis on every field. With float64
        accumulation ``cond`` is the exact 2-norm condition number, as in
        :func:`chebyls_decode`; with float32 accumulation it is an estimate (an
        exact SVD per mask would cost more than the solve): from 16 masks on, for
        cond <= 512 a Lanczos estimate from below (up to 1%; not certified;
        measured over 4096 masks at M = 40, N = 30, D = 22: median ratio to the
        exact value 1.0000, 99.6% within 1e-3, worst 0.994; see
        ``codedjax._lagrange_lsq``); above it, and for every mask of a smaller batch, a
        certified estimate within D^(+-1/32) of the computed factor's kappa.
        ``value`` and ``ok`` are as in :func:`chebyls_decode`.

    Raises:
        ValueError, TypeError: as :func:`chebyls_decode`; a ValueError for zero
            masks (B = 0), a y that fits neither reading, or an ambiguous y with
            ``shared_y=None``.

    Examples:
        >>> import jax, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(10), cj.chebyshev_points(2)
        >>> masks = cj.sample_masks(jax.random.key(1), num_workers=10,
        ...                         num_responses=6, shape=(4,))
        >>> r = cj.chebyls_decode_batched(alpha[:, None], masks, alpha, beta,
        ...                               num_coeffs=2)
        >>> r.value.shape, r.ok.tolist()
        ((4, 2, 1), [True, True, True, True])
    """
    fname = "chebyls_decode_batched"
    y = check_payload(fname, "y", y)
    alpha = check_vector(fname, "alpha", alpha)
    m = alpha.shape[0]
    masks = check_mask(fname, masks, m, name="masks")
    if masks.ndim != 2:
        raise ValueError(
            f"{fname}: masks must have shape [B, M] = [B, {m}], got "
            f"{tuple(masks.shape)}"
        )
    b = masks.shape[0]
    if b == 0:
        raise ValueError(
            f"{fname}: masks must hold at least one mask [B >= 1, M], got "
            f"shape {tuple(masks.shape)}"
        )
    fits_per_mask = y.ndim >= 2 and y.shape[0] == b and y.shape[1] == m
    fits_shared = y.ndim >= 1 and y.shape[0] == m
    if shared_y is None:
        if fits_per_mask and fits_shared:
            raise ValueError(
                f"{fname}: y of shape {tuple(y.shape)} reads both as one shared "
                f"payload [M, ...] and as one payload per mask [B, M, ...] (B = M = "
                f"{m}); pass shared_y=True or shared_y=False"
            )
        shared_y = fits_shared
    if not isinstance(shared_y, bool):
        raise TypeError(
            f"{fname}: shared_y must be True, False or None, got {shared_y!r}"
        )
    per_mask = not shared_y
    if per_mask and not fits_per_mask:
        raise ValueError(
            f"{fname}: y must have shape [B, M, ...] = [{b}, {m}, ...] with "
            f"shared_y=False, got {tuple(y.shape)}"
        )
    if not per_mask and not fits_shared:
        raise ValueError(
            f"{fname}: y must have shape [M, ...] = [{m}, ...] with "
            f"shared_y=True, got {tuple(y.shape)}"
        )
    y0 = y[0] if per_mask else y
    y0, _, alpha, beta, d, acc = checked_decode_args(
        fname, y0, masks[0], alpha, beta, num_coeffs, accum_dtype
    )
    exact = check_exact_cond(fname, exact_cond)
    # batched LAPACK inside (the QR tier): one such program at a time on CPU
    return serialised_call(
        _chebyls_batched,
        y,
        masks,
        alpha,
        beta,
        num_coeffs=d,
        acc=acc,
        per_mask=per_mask,
        exact_cond=exact,
    )


def _chebyls_batched_impl(
    y, masks, alpha, beta, num_coeffs, acc, per_mask, kernel=None, exact_cond=False
):
    # One batched kernel for all B masks (not a vmap of the one-mask kernel): it
    # skips the per-mask SVD and reports an estimate of the condition number
    # instead (see codedjax._lagrange_lsq.ls_decoding_matrices, which also chooses
    # the kernel from the static batch size unless ``kernel`` names one), or the
    # exact one with ``exact_cond``.
    alpha, beta = alpha.astype(acc), beta.astype(acc)

    if per_mask:
        fin = jax.vmap(finite_rows)(y)
    else:
        fin = finite_rows(y)[None, :]
    sel = masks & fin
    a, ok, cond, n, q = ls_decoding_matrices(
        sel, alpha, beta, num_coeffs, acc, kernel=kernel, exact_cond=exact_cond
    )
    rss = rss_exp = None
    if jnp.dtype(acc) == jnp.dtype(jnp.float32):  # the residual of the fit, for
        # the predicted error (docs/decoding.md), of y / 2^e (exact, subnormal
        # answers included): it cannot overflow nor underflow
        flat = y.reshape(y.shape[: 2 if per_mask else 1] + (-1,))
        rss_exp = payload_exponent(flat, sel)  # [B] (per mask) or []
        ys = ldexp_exact(flat, -rss_exp[..., None, None], acc, subnormal_out=False)
        rss = ls_residual_sq(
            sel, alpha, ys, num_coeffs, acc, ok & (cond <= 512), per_mask=per_mask,
            q=q,
        )  # fmt: skip
    return _ls_result(
        a, ok, cond, n, y, sel, alpha, beta, num_coeffs, acc, per_mask=per_mask,
        rss=rss, rss_exp=rss_exp,
    )  # fmt: skip


# chebyls_decode_batched's program: the batched kernel that jax.vmap of the one-mask
# decoder runs too (its batching rule, codedjax._batching), jitted on its own so that
# a call pays one dispatch (an eager jax.vmap of the one-mask program would trace the
# vmap on every call: about 0.5 ms at M = 40)
_chebyls_batched = jax.jit(
    _chebyls_batched_impl,
    static_argnames=("num_coeffs", "acc", "per_mask", "kernel", "exact_cond"),
)


# ----------------------------------------------------------------------------------
# Unchecked entries, for the Lagrange codes (codedjax._lagrange_codes): a code checks
# its settings and points once, when it is built, and each call's arguments once, in
# its own method (Code.encode, Code.decode, ...); inside its jitted program it then
# calls these, which check nothing. ``acc`` is the accumulation dtype, the points are
# arrays of any floating dtype (cast inside), y and mask are one request's.


def chebyls_decode_unchecked(y, mask, alpha, beta, num_coeffs, acc):
    """:func:`chebyls_decode` of checked answers y [M, ...] and mask [M]."""
    return _chebyls_decode(y, mask, alpha, beta, num_coeffs=num_coeffs, acc=acc)


def chebyls_decode_batched_unchecked(y, masks, alpha, beta, num_coeffs, acc, shared_y):
    """:func:`chebyls_decode_batched` of checked masks [B >= 1, M] and answers
    ([M, ...] when ``shared_y``, else [B, M, ...])."""
    return _chebyls_batched(
        y, masks, alpha, beta, num_coeffs=num_coeffs, acc=acc, per_mask=not shared_y
    )


def chebyls_decoding_matrix_unchecked(mask, alpha, beta, num_coeffs, acc):
    """:func:`chebyls_decoding_matrix` of a checked mask [M]."""
    return _decoding_matrix(mask, alpha, beta, num_coeffs=num_coeffs, acc=acc)
