r"""Polynomial codes on the unit circle: rotation embeddings (Ramamoorthy and Tang).

Worker j sits at the M-th root of unity alpha_j = exp(2 pi i j / M), data point i at
the K'-th root of unity beta_i = exp(2 pi i i / K'). The Lagrange basis at the K'-th
roots has the closed form

.. math::
    \ell_i(z) = \frac{1}{K'} \sum_{m=0}^{K'-1} (z / \beta_i)^m,

so worker j is sent u(alpha_j) = sum_i Z_i l_i(alpha_j) (|l_i(alpha_j)| <= 1: coded
queries do not grow), and answers h(alpha_j) with h = f o u, a polynomial of degree
D - 1 = d (K' - 1) in z. The decoders fit its D monomial coefficients c from the
responders, either by the square solve on the first D responders in arrival order
(the papers' decoder) or by least squares over every responder (ChebyLS's idea on
the circle), and return f(Z_i) = h(beta_i) = sum_m c_m beta_i^m.

**Complex numbers as real pairs.** Every complex number travels as its real and
imaginary parts (the 2 x 2 rotation embedding of the papers acts on exactly these
pairs), so workers compute in real arithmetic in any dtype, bfloat16 included: a coded
query is ``[2, ...]`` (axis 0: real, imaginary part), the encoder returns ``[M, 2,
...]``, and the decoders take answers ``[M, 2, ...]``.

**Two real queries per complex query (``pack=True``, linear workloads only).** For a
real-linear f, Z_i = X_i + i X_{K'+i} (K' = K / 2) gives f(Z_i) = f(X_i) + i
f(X_{K'+i}): the worker applies f to the real and to the imaginary part of its coded
query (two real evaluations) and the decoder returns both halves, so K real outputs
cost a threshold of D = K / 2 workers. Without packing (``pack=False``, any degree)
K' = K, the data are real and only the real part of h(beta_i) is returned.

**Worker calling convention and cost.** The worker function receives the pair
``x[2, ...]`` and returns the pair of f(x[0] + i x[1]): for a linear f it is
``(f(x[0]), f(x[1]))``, two real evaluations; for degree d > 1 it evaluates f in
complex arithmetic written on pairs. A matrix product with real weights costs two real
products ((W a, W b)); an elementwise complex product (a + ib)(c + id) costs four real
multiplications and two additions. For a network dominated by its matrix products one
complex evaluation therefore costs about two real ones, and a worker's answer is two
real numbers per output. Equal work per worker against a real code thus means the
real code evaluating two coded queries per worker.

**Condition number.** ``DecodeResult.cond`` is the 2-norm condition number of the
responders' rows of the generator V = [alpha_j^m] (N x D) in the monomial basis, the
figure the papers tabulate; with the data points at the K'-th roots it equals the
condition number of the responders' encoding rows E_S (E[j, i] = l_i(alpha_j)) when
D = K'. With every worker responding V^H V = M I (a DFT for D <= M), so cond = 1.

References:
    A. Ramamoorthy and L. Tang, Numerically stable coded matrix computations via
    circulant and rotation matrix embeddings, arXiv:1910.06515 (IEEE Trans. Inf.
    Theory, 2022); Q. Yu et al., Lagrange coded computing, arXiv:1806.00939;
    docs/theory.md and docs/decoding.md for the error model.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_floating, check_int, check_one_mask
from ._basis_lsq import (
    check_exact_cond,
    complex_dtype,
    dense_ls_matrices,
    dense_ls_matrix,
)
from ._batching import batching_decoder
from ._dtypes import finite_rows, resolve_accum_dtype, unit_roundoff
from ._errors import payload_scale, solve_rounding
from ._lagrange_threshold import check_order, threshold_selection
from ._result import DecodeResult, apply_decoding, finish, predicted_error, status_of

# ----------------------------------------------------------------------------------
# sizes and tables


def _check_pack(fname: str, pack: Any) -> bool:
    if not isinstance(pack, bool):
        raise TypeError(f"{fname}: pack must be True or False, got {pack!r}")
    return pack


def _data_points(fname: str, num_inputs: int, pack: bool) -> int:
    """K' (complex data points): K / 2 when packing (K even), else K."""
    if not pack:
        return num_inputs
    if num_inputs % 2:
        raise ValueError(
            f"{fname}: pack=True packs two real inputs into one complex input and "
            f"needs an even num_inputs (K), got K={num_inputs}; pass pack=False or "
            f"pad the inputs to an even count"
        )
    return num_inputs // 2


def circle_threshold(num_inputs: int, degree: int, *, pack: bool = False) -> int:
    """Recovery threshold D = d (K' - 1) + 1 of the circle code (in workers).

    Args:
        num_inputs: K >= 1 real inputs (even with ``pack``).
        degree: d >= 1, the degree of the workers' polynomial f (1 with ``pack``).
        pack: two real inputs per complex input (linear f only): K' = K / 2.

    Returns:
        D, the number of monomial coefficients of h = f o u, also the fewest
        responders that decode.

    Raises:
        ValueError: K < 1, d < 1, an odd K or d != 1 with ``pack``.
        TypeError: non-int sizes, non-bool ``pack``.

    Examples:
        >>> circle_threshold(8, 3), circle_threshold(8, 1, pack=True)
        (22, 4)
    """
    k, d, kp = _sizes("circle_threshold", num_inputs, degree, pack)
    return d * (kp - 1) + 1


def _sizes(fname: str, num_inputs: Any, degree: Any, pack: Any) -> tuple[int, int, int]:
    """(K, d, K') after the static checks shared by every circle function."""
    pack = _check_pack(fname, pack)
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    d = check_int(fname, "degree", degree, minimum=1)
    if pack and d != 1:
        raise ValueError(
            f"{fname}: pack=True needs a linear workload (degree 1): f(a + ib) = "
            f"f(a) + i f(b) only for linear f; got degree={d} (pass pack=False)"
        )
    return k, d, _data_points(fname, k, pack)


def _check_decodable(fname: str, k: int, d: int, kp: int, m: int) -> int:
    """D, raising when the circle code cannot decode degree d at M workers."""
    dd = d * (kp - 1) + 1
    if dd > m:
        raise ValueError(
            f"{fname}: degree {d} with K'={kp} complex inputs (K={k}) needs "
            f"D = d (K' - 1) + 1 = {dd} coefficients, more than the M={m} workers "
            f"(the monomials z^m, m < D, are distinct on the M-th roots of unity only "
            f"for D <= M)"
        )
    return dd


def _phase(num: np.ndarray, den: int) -> np.ndarray:
    """exp(2 pi i num / den) for integer ``num``, reduced exactly modulo ``den``."""
    t = 2.0 * np.pi * np.mod(num, den) / den
    return np.cos(t) + 1j * np.sin(t)


@functools.lru_cache(maxsize=128)
def _tables(m: int, kp: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 tables (read-only): U [M, D], U_beta [K', D] and E [M, K'].

    U = V / sqrt(M) with V[j, q] = alpha_j^q (orthonormal columns for D <= M),
    U_beta[i, q] = beta_i^q / sqrt(M) (the same column scale, so E_out c_U = h(beta)),
    E[j, i] = l_i(alpha_j) = (1/K') sum_{q<K'} (alpha_j / beta_i)^q. Every phase is
    an exact integer reduced modulo its period before the cosine.
    """
    j = np.arange(m)[:, None]
    q = np.arange(d)[None, :]
    u = _phase(j * q, m) / math.sqrt(m)
    i = np.arange(kp)[:, None]
    ub = _phase(i * q, kp) / math.sqrt(m)
    # (alpha_j / beta_i)^q = exp(2 pi i q (j K' - i M) / (M K'))
    jj = np.arange(m)[:, None, None]
    ii = np.arange(kp)[None, :, None]
    qq = np.arange(kp)[None, None, :]
    e = _phase(qq * (jj * kp - ii * m), m * kp).sum(axis=-1) / kp
    for t in (u, ub, e):
        t.setflags(write=False)
    return u, ub, e


@functools.lru_cache(maxsize=128)
def _encoding_real(m: int, k: int, pack: bool) -> np.ndarray:
    """The encoder as a real matrix [2M, K]: row 2j + p, p = 0 real, 1 imaginary.

    Packed (Z_i = X_i + i X_{K'+i}): Re = Er X_i - Ei X_{K'+i}, Im = Ei X_i + Er
    X_{K'+i}; unpacked (Z_i = X_i): Re = Er X_i, Im = Ei X_i.
    """
    kp = k // 2 if pack else k
    e = _tables(m, kp, 1)[2]
    er, ei = e.real, e.imag
    out = np.zeros((m, 2, k))
    out[:, 0, :kp], out[:, 1, :kp] = er, ei
    if pack:
        out[:, 0, kp:], out[:, 1, kp:] = -ei, er
    out = out.reshape(2 * m, k)
    out.setflags(write=False)
    return out


def _real_map(a: jax.Array, pack: bool) -> jax.Array:
    """The complex decoding matrix A [..., K', M] as a real map [..., K, M, 2].

    value_k = sum_{j, p} R[k, j, p] y[j, p] with y[j] = (Re, Im) of answer j:
    unpacked, the real part of A y; packed, its real part then its imaginary part.
    """
    ar, ai = jnp.real(a), jnp.imag(a)
    top = jnp.stack([ar, -ai], axis=-1)
    if not pack:
        return top
    bottom = jnp.stack([ai, ar], axis=-1)
    return jnp.concatenate([top, bottom], axis=-3)


def circle_generator(num_workers: int, data_points: int, num_coeffs: int) -> np.ndarray:
    """V = [alpha_j^q] [M, D], complex128 (read-only tables scaled back): the
    generator in the monomial basis, for M workers and K' data points."""
    u = _tables(num_workers, data_points, num_coeffs)[0]
    return u * np.sqrt(num_workers)


# ----------------------------------------------------------------------------------
# encoding


def circle_encode(x: Any, *, num_workers: int, pack: bool = False) -> jax.Array:
    r"""Circle-code encoding: worker j receives u(alpha_j) as a (real, imag) pair.

    .. math::
        \tilde X_j = \sum_{i<K'} Z_i\, \ell_i(\alpha_j), \qquad
        \ell_i(z) = \frac{1}{K'}\sum_{m<K'} (z/\beta_i)^m,

    with Z_i = X_i (``pack=False``) or Z_i = X_i + i X_{K'+i} (``pack=True``,
    K' = K / 2). |l_i(alpha_j)| <= 1, and max_j sum_i |l_i(alpha_j)| bounds how
    much larger than the inputs a coded query can be (2.23 at K' = 8, M = 40, the
    same as for first-kind Chebyshev points); since E^H E = (M / K') I the coded
    queries have the inputs' root mean square.

    Args:
        x: [K, ...] real inputs, any floating dtype.
        num_workers: M >= 1 (static).
        pack: two real inputs per complex input (for linear workloads; K even).

    Returns:
        [M, 2, ...] in the accumulation dtype of ``x`` (float32 for bf16, f16 and
        f32 input, float64 for float64): axis 1 holds the real and imaginary parts
        of each coded query. A non-finite input propagates to the coded queries.

    Raises:
        ValueError: a scalar ``x``, M < 1, an odd K with ``pack``.
        TypeError: a non-floating ``x``, non-int M, non-bool ``pack``.

    Examples:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(8.0).reshape(4, 2)
        >>> circle_encode(x, num_workers=6, pack=True).shape  # (real, imag) pairs
        (6, 2, 2)

    References:
        A. Ramamoorthy and L. Tang, arXiv:1910.06515.
    """
    fname = "circle_encode"
    x = check_floating(fname, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    k = x.shape[0]
    pack = _check_pack(fname, pack)
    if k < 1:
        raise ValueError(f"{fname}: x must hold K >= 1 inputs, got shape {x.shape}")
    _data_points(fname, k, pack)
    acc = resolve_accum_dtype(fname, x.dtype)
    return circle_encode_unchecked(x.astype(acc), num_workers=m, pack=pack)


@functools.partial(jax.jit, static_argnames=("num_workers", "pack"))
def circle_encode_unchecked(x, num_workers, pack):
    """:func:`circle_encode` after its checks (a CircleCode's: its sizes checked when
    it was built, x by its ``encode``), in the dtype of ``x``; K even with ``pack``."""
    m, k = num_workers, x.shape[0]
    e = jnp.asarray(_encoding_real(m, k, pack), x.dtype)
    out = apply_decoding(e, x, x.dtype, zero_nonfinite=False)  # [2M, ...]
    return out.reshape((m, 2) + x.shape[1:])


# ----------------------------------------------------------------------------------
# decoding


def _check_answers(fname, y, mask, num_inputs, degree, pack, accum_dtype):
    y = check_floating(fname, "y", y)
    if y.ndim < 2 or y.shape[1] != 2:
        raise ValueError(
            f"{fname}: y must have shape [M, 2, ...] (the real and imaginary part of "
            f"each worker's answer on axis 1), got {tuple(y.shape)}"
        )
    m = y.shape[0]
    mask = check_one_mask(fname, mask, m)
    k, d, kp = _sizes(fname, num_inputs, degree, pack)
    dd = _check_decodable(fname, k, d, kp, m)
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    return y, mask, k, d, dd, acc


def _bases(m, kp, dd, acc):
    u, ub, _ = _tables(m, kp, dd)
    cdt = complex_dtype(acc)
    return jnp.asarray(u, cdt), jnp.asarray(ub, cdt)


def _pairs(y, lead_axes: int, acc):
    """(y2 [..., 2M, ...] for apply_decoding, flat [..., 2M, F], yc [..., M, F])."""
    lead = y.shape[:lead_axes]
    m = y.shape[lead_axes]
    trailing = y.shape[lead_axes + 2 :]
    f = math.prod(trailing)
    y2 = y.reshape(lead + (2 * m,) + trailing)
    flat = y2.reshape(lead + (2 * m, f))
    yy = flat.astype(acc)
    yy = jnp.where(jnp.isfinite(yy), yy, jnp.zeros((), acc)).reshape(lead + (m, 2, f))
    yc = jax.lax.complex(yy[..., 0, :], yy[..., 1, :])
    return y2, flat, yc


def _decode_impl(
    y, sel, batched, per_mask, num_inputs, degree, pack, acc, residual, exact_cond
):
    """Shared body of the least-squares and threshold decoders (one or B masks):
    the one-mask kernel of ``codedjax._basis_lsq`` (semi-normal equations, QR where
    they do not hold; QR and the exact cond with ``exact_cond``), per mask."""
    lead_axes = 1 if per_mask else 0
    m = y.shape[lead_axes]
    kp = num_inputs // 2 if pack else num_inputs
    dd = degree * (kp - 1) + 1
    u, ub = _bases(m, kp, dd, acc)
    y2, flat, yc = _pairs(y, lead_axes, acc)
    yres = None
    if residual:
        # the residual of y / s (s a power of two, exact): it cannot overflow
        yres = yc / payload_scale(flat, acc).astype(yc.dtype)
    if batched:
        ls = dense_ls_matrices(
            sel, u, ub, acc, y=yres, per_mask=per_mask, exact_cond=exact_cond
        )
    else:
        ls = dense_ls_matrix(sel, u, ub, acc, y=yres, exact_cond=exact_cond)
    a = _real_map(ls.a, pack)  # [..., K, M, 2]
    a2 = a.reshape(a.shape[:-2] + (2 * m,))
    value = apply_decoding(a2, y2, acc, per_mask=per_mask)
    sel2 = jnp.repeat(sel, 2, axis=-1)
    rss = ls.rss
    # 2N real answers, 2D real unknowns: 2 (N - D) degrees of freedom; the complex
    # solve rounds as a real one with 2D unknowns (a complex multiply-add rounds
    # each part twice as often as a real one): a noise level of sqrt(2D) u_acc
    error = predicted_error(
        a2, flat, sel2, y.dtype, residual_sq=rss, dof=2 * (ls.num_used - dd),
        residual_scaled=True, solve_factor=solve_rounding(2 * dd),
    )  # fmt: skip
    return value, ls, error, dd


def circle_decode(
    y: Any,
    mask: Any,
    *,
    num_inputs: int,
    degree: int,
    pack: bool = False,
    accum_dtype: Any = None,
    exact_cond: bool = False,
) -> DecodeResult:
    r"""Circle code, least squares over every responder.

    .. math::
        \hat c = \arg\min_c \lVert V_S c - y_S \rVert_2, \qquad
        \hat f(Z_i) = \sum_{m<D} \hat c_m \beta_i^m,

    with V[j, m] = alpha_j^m (complex, in complex64 for float32 accumulation and
    complex128 for float64): with float32 accumulation by corrected semi-normal
    equations (the Cholesky factor of V_S^H V_S, two refinement steps through the
    rows) where a certified estimate puts cond <= 512, by Householder QR of the
    responders' rows elsewhere, with float64 (or ``exact_cond``) by Householder
    QR (``codedjax._basis_lsq``). With N = D responders it is the papers' square
    solve; every answer beyond D lowers the condition number and, once N is well
    above D, averages the workers' rounding. A worker whose answer holds a NaN or
    Inf is treated as missing.

    Args:
        y: [M, 2, ...] answers (real and imaginary part on axis 1) in any floating
            dtype; rows of missing workers are ignored whatever they hold.
        mask: bool [M], True for the workers that responded.
        num_inputs: K real inputs (static). degree: d >= 1 (static).
        pack: the inputs were encoded with ``pack=True`` (linear f only).
        accum_dtype: float32 or float64; default float32 for bf16, f16 and f32
            answers, float64 for float64.
        exact_cond: the exact condition number (Householder QR and an SVD of R)
            also with float32 accumulation, instead of the estimate.

    Returns:
        DecodeResult: ``value`` [K, ...] real, in the accumulation dtype (all zeros
        when not ``ok``); ``cond`` the 2-norm condition number of V_S (the
        responders' generator rows): exact with float64 accumulation or
        ``exact_cond``, else a certified estimate (within (2D)^(+-1/64), in
        practice within 1% below); ``num_used`` N; ``status`` TOO_FEW_RESPONSES
        (N < D), ILL_CONDITIONED (cond >= 1/eps) or NONFINITE; ``error`` the
        predicted absolute error (docs/decoding.md) from the noise gain of the real
        decoding map, the workers' rounding level, the complex solve's own
        rounding (sqrt(2D) u_acc: a complex solve of D unknowns rounds as a real
        one of 2D) and the least-squares residual over 2 (N - D) degrees of
        freedom.

    Batching: ``jax.vmap`` (over masks, answers or both, nested) runs a kernel that
    factors one mask at a time around a batched payload product, so no LAPACK call
    has a batch axis; ``cond`` is as for one mask.

    Raises:
        ValueError: y not [M, 2, ...], a mask not [M], D > M (the degree cannot be
            decoded at this M), an odd K or degree != 1 with ``pack``.
        TypeError: non-floating y, non-boolean mask, non-int sizes.

    Examples:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(8.0).reshape(4, 2)
        >>> enc = circle_encode(x, num_workers=6, pack=True)  # f = identity
        >>> r = circle_decode(enc, jnp.arange(6) != 2, num_inputs=4, degree=1,
        ...                   pack=True)
        >>> bool(r.ok), bool(jnp.allclose(r.value, x, atol=1e-5))
        (True, True)

    References:
        A. Ramamoorthy and L. Tang, arXiv:1910.06515; docs/decoding.md.
    """
    fname = "circle_decode"
    y, mask, k, d, _, acc = _check_answers(
        fname, y, mask, num_inputs, degree, pack, accum_dtype
    )
    exact = check_exact_cond(fname, exact_cond)
    return _circle_ls(
        y, mask, num_inputs=k, degree=d, pack=pack, acc=acc, exact_cond=exact
    )


def _ls_finish(y, sel, batched, per_mask, num_inputs, degree, pack, acc, exact):
    value, ls, error, dd = _decode_impl(
        y, sel, batched, per_mask, num_inputs, degree, pack, acc, True, exact
    )
    status = status_of(enough=ls.num_used >= dd, solved=ls.ok)
    return finish(value, ls.cond, ls.num_used, status, error)


def _ls_single(data, points, num_inputs, degree, pack, acc, exact_cond):
    y, mask = data
    sel = mask & finite_rows(y)
    return _ls_finish(y, sel, False, False, num_inputs, degree, pack, acc, exact_cond)


def _ls_many(data, points, per_mask, num_inputs, degree, pack, acc, exact_cond):
    y, masks = data
    fin = jax.vmap(finite_rows)(y) if per_mask else finite_rows(y)[None, :]
    sel = masks & fin
    return _ls_finish(y, sel, True, per_mask, num_inputs, degree, pack, acc, exact_cond)


def circle_decode_unchecked(y, mask, num_inputs, degree, pack, acc, exact_cond=False):
    """:func:`circle_decode` after its checks (a CircleCode's: its sizes checked when
    it was built, y [M, 2, ...] and mask [M] by its ``decode``); under ``jax.vmap``
    the batched kernel."""
    statics = (("num_inputs", num_inputs), ("degree", degree), ("pack", pack))
    statics += (("acc", acc), ("exact_cond", exact_cond))
    f = batching_decoder(_ls_single, _ls_many, statics)
    return f((y, mask), ())


_circle_ls = jax.jit(
    circle_decode_unchecked,
    static_argnames=("num_inputs", "degree", "pack", "acc", "exact_cond"),
)


def circle_threshold_decode(
    y: Any,
    mask: Any,
    order: Any,
    *,
    num_inputs: int,
    degree: int,
    pack: bool = False,
    accum_dtype: Any = None,
) -> DecodeResult:
    """Circle code, the papers' square solve on the first D responders to arrive.

    Takes the first D workers of ``order`` (arrival order) whose answers are finite
    and solves the square system V_S c = y_S (QR); every answer beyond the
    threshold is discarded. Under uniform stragglers the arrival order is a random
    permutation of the responders (:func:`codedjax.sample_arrivals`).

    Args:
        y: [M, 2, ...] answers; mask: bool [M]; order: int [L] worker indices in
            arrival order (L <= M, distinct, in [0, M); a traced order that breaks
            these rules gives ``status`` BAD_POINTS).
        num_inputs, degree, pack, accum_dtype: as :func:`circle_decode`.

    Returns:
        DecodeResult as :func:`circle_decode`, ``cond`` that of the D x D system;
        ``error`` from the noise gain, the rounding level and the solve's own
        rounding (no residual).

    Raises:
        ValueError, TypeError: as :func:`circle_decode`, and for an ``order`` that is
            not a 1-D integer array of at most M distinct in-range indices.

    Examples:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(8.0).reshape(4, 2)
        >>> enc = circle_encode(x, num_workers=6, pack=True)  # f = identity
        >>> r = circle_threshold_decode(enc, jnp.ones(6, bool), jnp.arange(6)[::-1],
        ...                             num_inputs=4, degree=1, pack=True)
        >>> int(r.num_used), bool(jnp.allclose(r.value, x, atol=1e-5))
        (2, True)

    References:
        A. Ramamoorthy and L. Tang, arXiv:1910.06515.
    """
    fname = "circle_threshold_decode"
    y, mask, k, d, _, acc = _check_answers(
        fname, y, mask, num_inputs, degree, pack, accum_dtype
    )
    order = check_order(fname, order, y.shape[0])
    return _circle_threshold(y, mask, order, num_inputs=k, degree=d, pack=pack, acc=acc)


def _th_finish(y, masks, orders, batched, per_mask, num_inputs, degree, pack, acc):
    kp = num_inputs // 2 if pack else num_inputs
    dd = degree * (kp - 1) + 1
    if batched:
        fin = jax.vmap(finite_rows)(y) if per_mask else finite_rows(y)[None, :]
        pick = functools.partial(threshold_selection, num_coeffs=dd)
        sel, order_ok = jax.vmap(pick)(masks & fin, orders)
    else:
        sel, order_ok = threshold_selection(masks & finite_rows(y), orders, dd)
    # the square system's exact cond (QR and an SVD of R), as before
    value, ls, error, _ = _decode_impl(
        y, sel, batched, per_mask, num_inputs, degree, pack, acc, False, True
    )
    status = status_of(points_ok=order_ok, enough=ls.num_used >= dd, solved=ls.ok)
    return finish(value, ls.cond, ls.num_used, status, error)


def _th_single(data, points, num_inputs, degree, pack, acc):
    y, mask, order = data
    return _th_finish(y, mask, order, False, False, num_inputs, degree, pack, acc)


def _th_many(data, points, per_mask, num_inputs, degree, pack, acc):
    y, masks, orders = data
    return _th_finish(y, masks, orders, True, per_mask, num_inputs, degree, pack, acc)


def circle_threshold_decode_unchecked(y, mask, order, num_inputs, degree, pack, acc):
    """:func:`circle_threshold_decode` after its checks (a CircleThresholdCode's),
    with an int32 arrival ``order``; under ``jax.vmap`` the batched kernel."""
    statics = (("num_inputs", num_inputs), ("degree", degree), ("pack", pack))
    f = batching_decoder(_th_single, _th_many, statics + (("acc", acc),))
    return f((y, mask, order), ())


_circle_threshold = jax.jit(
    circle_threshold_decode_unchecked,
    static_argnames=("num_inputs", "degree", "pack", "acc"),
)


def circle_decoding_matrix(
    mask: Any,
    *,
    num_workers: int,
    num_inputs: int,
    degree: int,
    pack: bool = False,
    accum_dtype: Any = jnp.float32,
    exact_cond: bool = False,
) -> DecodeResult:
    """The real linear map of :func:`circle_decode` for one mask, as [K, M, 2].

    ``value[k] = sum_{j, p} A[k, j, p] y[j, p]`` for answers y [M, 2] (axis 1: real
    and imaginary part); columns of missing workers are zero.

    Args:
        mask: bool [M]. num_workers: M. num_inputs, degree, pack, exact_cond: as
            :func:`circle_decode`. accum_dtype: float32 (default) or float64.

    Returns:
        DecodeResult with ``value`` = A [K, M, 2] and ``ok``, ``cond``, ``num_used``,
        ``status`` as :func:`circle_decode`; ``error`` the predicted error per unit
        of max |y| for answers in the accumulation dtype (u times the largest row
        sum of |A|).

    Raises:
        ValueError, TypeError: as :func:`circle_decode`.

    Examples:
        >>> import jax.numpy as jnp
        >>> a = circle_decoding_matrix(jnp.ones(6, bool), num_workers=6,
        ...                            num_inputs=4, degree=1, pack=True).value
        >>> a.shape
        (4, 6, 2)
    """
    fname = "circle_decoding_matrix"
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    acc = resolve_accum_dtype(fname, jnp.float32, accum_dtype)
    y = jnp.zeros((m, 2), acc)
    _, mask, k, d, _, acc = _check_answers(
        fname, y, mask, num_inputs, degree, pack, accum_dtype
    )
    exact = check_exact_cond(fname, exact_cond)
    return _circle_matrix(
        mask, num_workers=m, num_inputs=k, degree=d, pack=pack, acc=acc,
        exact_cond=exact,
    )  # fmt: skip


_MATRIX_STATICS = ("num_workers", "num_inputs", "degree", "pack", "acc", "exact_cond")


@functools.partial(jax.jit, static_argnames=_MATRIX_STATICS)
def _circle_matrix(mask, num_workers, num_inputs, degree, pack, acc, exact_cond=False):
    m = num_workers
    kp = num_inputs // 2 if pack else num_inputs
    dd = degree * (kp - 1) + 1
    u, ub = _bases(m, kp, dd, acc)
    ls = dense_ls_matrix(mask, u, ub, acc, exact_cond=exact_cond)
    a = _real_map(ls.a, pack)
    status = status_of(enough=ls.num_used >= dd, solved=ls.ok)
    gain = jnp.max(jnp.sum(jnp.abs(a), axis=(-2, -1)), initial=0.0)
    return finish(a, ls.cond, ls.num_used, status, unit_roundoff(acc) * gain)
