"""Lagrange (polynomial) coded computing: encoding, threshold and ChebyLS decoders.

Workers i = 0..M-1 evaluate f(u(alpha_i)), where u is the degree K-1 polynomial with
u(beta_k) = X_k. The answers are samples of h = f o u, a polynomial of degree
D - 1 = d (K - 1), which the decoders fit in the Chebyshev basis and evaluate at beta.
Missing workers are a fixed-shape boolean mask, so one compiled program serves every
straggler pattern.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argcache import DECODE_CHECKS
from ._argchecks import (
    check_chebyshev_decode,
    check_floating,
    check_int,
    check_mask,
    check_payload,
    check_return_ok,
    check_vector,
    concrete_points,
    is_concrete,
)
from ._basis_lsq import check_exact_cond
from ._batching import batching_decoder
from ._dtypes import (
    encoder_points_ok,
    finite_rows,
    ldexp_exact,
    points_valid,
    resolve_accum_dtype,
    unit_roundoff,
)
from ._errors import payload_exponent, solve_rounding
from ._lagrange_lsq import ls_decoding_matrices, ls_residual_sq
from ._lagrange_lsq import ls_decoding_matrix as _ls_decoding_matrix
from ._lagrange_square import square_decoding_matrices
from ._result import (
    DecodeResult,
    apply_decoding,
    finish,
    predicted_error,
    scale_columns,
    status_of,
)
from ._threads import serialised_call


def recovery_threshold(num_inputs: int, degree: int) -> int:
    """Recovery threshold D = d (K - 1) + 1 of Lagrange coded computing.

    Args:
        num_inputs: K >= 1, the number of inputs coded together.
        degree: d >= 0, the total degree of the polynomial f the workers compute.

    Returns:
        D, the number of Chebyshev coefficients of h = f o u.

    Raises:
        ValueError: for K < 1 or d < 0.

    Examples:
        >>> recovery_threshold(8, 3)
        22

    References:
        Q. Yu et al., Lagrange Coded Computing, AISTATS 2019, arXiv:1806.00939.
    """
    k = check_int("recovery_threshold", "num_inputs", num_inputs, minimum=1)
    d = check_int("recovery_threshold", "degree", degree, minimum=0)
    return d * (k - 1) + 1


def _barycentric_matrix(nodes: jax.Array, z: jax.Array) -> jax.Array:
    """L[i, k] = l_k(z_i), Lagrange basis on ``nodes`` (second barycentric form).

    Exact unit rows where z_i coincides with a node (no 0/0).
    """
    diff = nodes[:, None] - nodes[None, :]
    k = nodes.shape[0]
    diff = jnp.where(jnp.eye(k, dtype=bool), jnp.ones_like(diff), diff)
    # weights w_k = 1 / prod_{j != k} (beta_k - beta_j), scaled for range safety
    logw = -jnp.sum(jnp.log(jnp.abs(diff)), axis=1)
    sign = jnp.prod(jnp.sign(diff), axis=1)
    w = sign * jnp.exp(logw - jnp.max(logw))
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    any_hit = jnp.any(hit, axis=1, keepdims=True)
    safe = jnp.where(hit, jnp.ones_like(dz), dz)
    t = w[None, :] / safe
    basis = t / jnp.sum(t, axis=1, keepdims=True)
    return jnp.where(any_hit, hit.astype(dz.dtype), basis)


def lagrange_encode(
    x: Any, beta: Any, alpha: Any, *, return_ok: bool = False
) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""Lagrange encoding: worker i receives u(alpha_i), u(beta_k) = X_k, deg u = K-1.

    .. math::
        \tilde X_i = \sum_k \ell_k(\alpha_i) X_k, \qquad
        \ell_k(z) = \frac{w_k / (z - \beta_k)}{\sum_j w_j / (z - \beta_j)}.

    Computed in the barycentric form (stable on Chebyshev points; never through
    monomials), in the accumulation dtype of ``x``. The inputs are scaled by a power
    of two per column before the product, so the result overflows only where the
    exact answer does.

    Under ``jit`` the points cannot be checked (nothing traced can raise); there,
    invalid points (repeated or non-finite data points, non-finite worker points)
    make every coded input NaN, so every worker's answer is NaN and a decoder
    reports ``ok`` False (``TOO_FEW_RESPONSES``) instead of a silently wrong
    value; ``return_ok=True`` also returns the points' validity as data.

    Args:
        x: [K, ...] the K inputs, any floating dtype.
        beta: [K] distinct data points.
        alpha: [M] worker evaluation points.
        return_ok: also return ``ok``, a bool scalar: False when the (traced)
            points are invalid, and then every coded row is NaN.

    Returns:
        [M, ...] coded inputs in the accumulation dtype (float32 for bf16/f16/f32
        input, float64 for float64); with ``return_ok``, the pair (coded, ok).

    Raises:
        ValueError: on shape mismatch, or duplicate / non-finite concrete points.
        TypeError: non-floating x or points, a ``return_ok`` that is not a bool.

    Examples:
        >>> import jax, codedjax as cj
        >>> beta, alpha = cj.chebyshev_points(2), cj.chebyshev_points(4)
        >>> enc = cj.lagrange_encode(beta[:, None], beta, alpha)  # u(z) = z
        >>> bool(jax.numpy.allclose(enc[:, 0], alpha))
        True

    References:
        Q. Yu et al., Lagrange Coded Computing, AISTATS 2019, arXiv:1806.00939;
        J.-P. Berrut and L. N. Trefethen, Barycentric Lagrange interpolation,
        SIAM Review 46(3), 2004.
    """
    fname = "lagrange_encode"
    want_ok = check_return_ok(fname, return_ok)
    points = (beta, alpha)
    key = DECODE_CHECKS.key(fname, (x,), points, ())
    acc = DECODE_CHECKS.get(key, points)  # the checks memoised per code (_argcache)
    if acc is None:
        x = check_floating(fname, "x", x)
        if x.ndim < 1:
            raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
        k = x.shape[0]
        beta = check_vector(fname, "beta", beta, length=k)
        alpha = check_vector(fname, "alpha", alpha)
        concrete_points(fname, "beta", beta)
        concrete_points(fname, "alpha", alpha)
        acc = resolve_accum_dtype(fname, x.dtype)
        DECODE_CHECKS.put(key, points, acc)
    # one program: the casts, the M x K matrix and the product (every value made
    # in the caller's trace, if any, stays in it)
    coded = _lagrange_encode(x, beta, alpha, acc=acc)
    if want_ok:
        return coded, encoder_points_ok(beta.astype(acc), alpha.astype(acc))
    return coded


@functools.partial(jax.jit, static_argnames=("acc",))
def _lagrange_encode(x, beta, alpha, acc):
    e = _encoding_matrix(beta.astype(acc), alpha.astype(acc))
    x = x.astype(acc)
    return apply_decoding(e, x, x.dtype, zero_nonfinite=False)


def _encoding_matrix(beta, alpha):
    e = _barycentric_matrix(beta, alpha)
    # traced invalid points: every coded input NaN (see the docstring)
    valid = points_valid(beta) & jnp.all(jnp.isfinite(alpha))
    return jnp.where(valid, e, jnp.full_like(e, jnp.nan))


def _check_decode_args(fname, y, mask, alpha, beta, num_coeffs, accum_dtype):
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
    T_S^T T_S and one refinement step through the rows, as accurate as a QR solve
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
    y, mask, alpha, beta, d, acc = _check_decode_args(
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
    y, mask, alpha, beta, d, acc = _check_decode_args(
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
    y0, _, alpha, beta, d, acc = _check_decode_args(
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


def threshold_decode(
    y: Any,
    mask: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: int,
    order: Any,
    *,
    accum_dtype: Any = None,
) -> DecodeResult:
    r"""Threshold (LCC / Fahim-Cadambe) decoder: the first D responders, square solve.

    Takes the first D workers of ``order`` (arrival order) that responded with finite
    values and solves the square Chebyshev-Vandermonde system (by QR). This is the
    classical baseline that discards every response beyond the threshold. Under
    uniform stragglers the arrival order is a random permutation of the responders
    (see :func:`sample_arrivals`); index order would cluster the chosen points at one
    end of [-1, 1] and make a straw man. :func:`spread_order` gives the stronger
    baseline that picks the D responders spread most evenly.

    Args:
        y: [M, ...] responses, any floating dtype.
        mask: bool [M] responders.
        alpha: [M] worker points; beta: [K] data points.
        num_coeffs: D (static).
        order: int [L] worker indices in arrival order (L <= M, distinct, each in
            [0, M)); workers absent from ``order`` are never chosen. A concrete
            order that breaks these rules raises; a traced one gives ``status``
            BAD_POINTS (``ok`` False).
        accum_dtype: as :func:`chebyls_decode`.

    Returns:
        DecodeResult as :func:`chebyls_decode`; ``cond`` is that of the D x D system.
        Under ``jax.vmap`` (masks and orders, payloads, nested) with float32
        accumulation the D x D systems are solved together by the barycentric
        (Lagrange) form, without a factorisation, and ``cond`` is the certified
        estimate of ``codedjax._lagrange_square.square_decoding_matrices`` (within
        D^(+-1/32)); float64 solves each by LU with partial pivoting.

    Raises:
        ValueError, TypeError: as :func:`chebyls_decode`, and for an ``order`` that
            is not a 1-D integer array of at most M entries.

    Examples:
        >>> import jax, jax.numpy as jnp, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(8), cj.chebyshev_points(2)
        >>> r = cj.threshold_decode(alpha[:, None], jnp.ones(8, bool), alpha, beta,
        ...                         num_coeffs=2, order=jnp.arange(8)[::-1])
        >>> int(r.num_used)
        2

    References:
        Q. Yu et al., arXiv:1806.00939; M. Fahim and V. R. Cadambe,
        arXiv:1903.08326.
    """
    fname = "threshold_decode"
    y, mask, alpha, beta, d, acc = _check_decode_args(
        fname, y, mask, alpha, beta, num_coeffs, accum_dtype
    )
    order = check_order(fname, order, y.shape[0])
    return _threshold_decode(y, mask, alpha, beta, order, num_coeffs=d, acc=acc)


def check_order(fname: str, order: Any, m: int) -> jax.Array:
    """An arrival order: a 1-D integer array of at most M distinct worker indices
    in [0, M) (checked when concrete; a traced bad order is data, BAD_POINTS)."""
    order = jnp.asarray(order)
    if order.ndim != 1 or not jnp.issubdtype(order.dtype, jnp.integer):
        raise ValueError(
            f"{fname}: order must be a 1-D integer array of worker indices, got "
            f"shape {tuple(order.shape)} dtype {order.dtype}"
        )
    if order.shape[0] > m:
        raise ValueError(
            f"{fname}: order must list at most M={m} workers, got {order.shape[0]}"
        )
    if is_concrete(order):
        o = np.asarray(order)
        if o.size and (o.min() < 0 or o.max() >= m):
            bad = int(o[(o < 0) | (o >= m)][0])
            raise ValueError(
                f"{fname}: order must hold worker indices in [0, {m}), got {bad}"
            )
        if np.unique(o).size != o.size:
            raise ValueError(
                f"{fname}: order must list distinct workers, got a repeated index"
            )
    return order


def threshold_selection(valid, order, num_coeffs):
    """(sel [M], order_ok): the first D valid workers of ``order`` (one mask)."""
    m = valid.shape[0]
    in_range = (order >= 0) & (order < m)
    safe = jnp.where(in_range, order, 0)
    repeated = jnp.any(
        (safe[:, None] == safe[None, :]) & ~jnp.eye(order.shape[0], dtype=bool)
    )
    order_ok = jnp.all(in_range) & ~repeated
    valid_in_order = valid[safe] & in_range
    chosen = valid_in_order & (jnp.cumsum(valid_in_order) <= num_coeffs)
    sel = jnp.zeros((m,), bool).at[safe].max(chosen)
    return sel & order_ok, order_ok


def _threshold_decode_impl(y, mask, alpha, beta, order, num_coeffs, acc):
    m = y.shape[0]
    sel, order_ok = threshold_selection(mask & finite_rows(y), order, num_coeffs)
    # the square system's exact cond (QR and an SVD of R), as before
    a, ok, cond, n, _ = _ls_decoding_matrix(
        sel, alpha, beta, num_coeffs, acc, exact_cond=True
    )
    value = apply_decoding(a, y, acc, rows=sel)
    # the square solve rounds as the least-squares one (solve_rounding)
    error = predicted_error(
        a, y.reshape(m, -1), sel, y.dtype, solve_factor=solve_rounding(num_coeffs)
    )
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta) & order_ok,
        enough=n >= num_coeffs,
        solved=ok,
    )
    return finish(value, cond, n, status, error)


def _threshold_many(data, points, per_mask, num_coeffs, acc):
    # jax.vmap of threshold_decode (codedjax._batching): selections per mask, then
    # one batched kernel for every D x D system
    y, masks, orders = data
    alpha, beta = points
    fin = jax.vmap(finite_rows)(y) if per_mask else finite_rows(y)[None, :]
    sel, order_ok = jax.vmap(
        functools.partial(threshold_selection, num_coeffs=num_coeffs)
    )(masks & fin, orders)
    a, ok, cond, n = square_decoding_matrices(sel, alpha, beta, num_coeffs, acc)
    m = a.shape[-1]
    lead = y.shape[:1] if per_mask else ()
    rows = sel if per_mask else jnp.any(sel, axis=0)
    value = apply_decoding(a, y, acc, per_mask=per_mask, rows=rows)
    flat = y.reshape(lead + (m, math.prod(y.shape[len(lead) + 1 :])))
    error = predicted_error(
        a, flat, sel, y.dtype, solve_factor=solve_rounding(num_coeffs)
    )
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta) & order_ok,
        enough=n >= num_coeffs,
        solved=ok,
    )
    return finish(value, cond, n, status, error)


def _threshold_single(data, points, num_coeffs, acc):
    y, mask, order = data
    return _threshold_decode_impl(y, mask, *points, order, num_coeffs, acc)


def _threshold_vmappable(y, mask, alpha, beta, order, num_coeffs, acc):
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    # one mask: the QR kernel; under jax.vmap: the batched kernel (codedjax._batching)
    f = batching_decoder(
        _threshold_single, _threshold_many, (("num_coeffs", num_coeffs), ("acc", acc))
    )
    return f((y, mask, order), (alpha, beta))


_threshold_decode = jax.jit(_threshold_vmappable, static_argnames=("num_coeffs", "acc"))


def spread_order(mask: Any, *, num_coeffs: int) -> jax.Array:
    """An arrival order whose first D responders are spread most evenly by rank.

    Among the N responders sorted by worker index (= by point), the ones at ranks
    round(j (N - 1) / (D - 1)), j = 0..D-1, come first, then the other responders,
    then the missing workers. Passing it to :func:`threshold_decode` gives the
    strongest square-system baseline (still beaten by ChebyLS).

    Args:
        mask: bool [M] responders.
        num_coeffs: D (static).

    Returns:
        int32 [M] permutation of the workers.

    Raises:
        ValueError: num_coeffs < 1 or mask not 1-D boolean.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> cj.spread_order(jnp.ones(5, bool), num_coeffs=3)[:3].tolist()
        [0, 2, 4]
    """
    d = check_int("spread_order", "num_coeffs", num_coeffs, minimum=1)
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_ or mask.ndim != 1:
        raise ValueError(
            f"spread_order: mask must be a 1-D boolean array, got shape "
            f"{tuple(mask.shape)} dtype {mask.dtype}"
        )
    return _spread_order(mask, num_coeffs=d)


@functools.partial(jax.jit, static_argnames=("num_coeffs",))
def _spread_order(mask, num_coeffs):
    n = jnp.sum(mask, dtype=jnp.int32)
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1
    j = jnp.arange(num_coeffs, dtype=jnp.float32)
    denom = max(num_coeffs - 1, 1)
    targets = jnp.round(j * (n - 1).astype(jnp.float32) / denom).astype(jnp.int32)
    chosen = mask & jnp.any(rank[:, None] == targets[None, :], axis=1)
    key = jnp.where(chosen, 0, jnp.where(mask, 1, 2))
    return jnp.argsort(key, stable=True).astype(jnp.int32)


# ----------------------------------------------------------------------------------
# Unchecked entries, for the Lagrange codes (codedjax._lagrange_codes): a code checks
# its settings and points once, when it is built, and each call's arguments once, in
# its own method (Code.encode, Code.decode, ...); inside its jitted program it then
# calls these, which check nothing. ``acc`` is the accumulation dtype, the points are
# arrays of any floating dtype (cast inside), y and mask are one request's.


def encoding_matrix_constant(beta, alpha, acc) -> np.ndarray:
    """The M x K Lagrange encoding matrix of fixed points (a code's) in ``acc``:
    the second barycentric form of :func:`lagrange_encode`, evaluated on the host
    in float64 (each entry rounded once to ``acc``). A constant of the code's
    encode program, which then runs the product alone (:func:`encode_with_matrix`).
    """
    nodes, z = np.asarray(beta, np.float64), np.asarray(alpha, np.float64)
    k = nodes.size
    diff = nodes[:, None] - nodes[None, :] + np.eye(k)
    logw = -np.sum(np.log(np.abs(diff)), axis=1)
    w = np.prod(np.sign(diff), axis=1) * np.exp(logw - logw.max())
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = w[None, :] / np.where(hit, 1.0, dz)
        basis = t / t.sum(axis=1, keepdims=True)
    basis = np.where(hit.any(axis=1, keepdims=True), hit.astype(np.float64), basis)
    return basis.astype(acc)


def encode_with_matrix(x, e, acc):
    """:func:`lagrange_encode` of checked inputs x [K, ...] by the encoding matrix
    ``e`` [M, K] in ``acc`` (:func:`encoding_matrix_constant`)."""
    return apply_decoding(jnp.asarray(e), x.astype(acc), acc, zero_nonfinite=False)


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


def threshold_decode_unchecked(y, mask, alpha, beta, order, num_coeffs, acc):
    """:func:`threshold_decode` of checked answers, mask and int32 ``order``."""
    return _threshold_decode(
        y, mask, alpha, beta, order, num_coeffs=num_coeffs, acc=acc
    )


def spread_order_unchecked(mask, num_coeffs):
    """:func:`spread_order` of a checked mask [M] (bool) and D >= 1."""
    return _spread_order(mask, num_coeffs=num_coeffs)
