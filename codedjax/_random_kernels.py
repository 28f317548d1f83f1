r"""Random (Gaussian) codes for linear workloads, decoded by least squares.

The encoding matrix G [M, K] has i.i.d. N(0, 1/K) entries; worker j is sent
sum_i G[j, i] X_i and, for a linear f, answers sum_i G[j, i] f(X_i). Any K responders
determine f(X) (G_S has full column rank with probability one); the decoder solves
the least-squares problem over every responder,

.. math::
    \widehat{f(X)} = \arg\min_Z \lVert G_S Z - y_S \rVert_2 = G_S^+ y_S,

by Householder QR (never normal equations), in the manner of ChebyLS. This is the
unstructured baseline both stable-coding papers compare against: a Gaussian matrix
has no clustered-straggler weakness, but its N x K submatrices are only moderately
well conditioned near N = K (the smallest singular value of a square Gaussian matrix
is of order 1 / sqrt(K)).

The draw is reproducible: :func:`gaussian_encoding_matrix` takes a typed key and
always draws in float32 (so float64 references see exactly the same numbers). A
``Code`` holds the integer seed of its key, which keeps it hashable; any int >= 0
makes a key (:func:`seed_key`).

References:
    Z. Chen and J. Dongarra, Numerically stable real number codes based on random
    matrices, ICCS 2005; A. M. Subramaniam, A. Heidarzadeh and K. R. Narayanan,
    Random Khatri-Rao-product codes for numerically-stable distributed matrix
    multiplication, Allerton 2019; A. Ramamoorthy and L. Tang,
    arXiv:1910.06515.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_floating, check_int, check_one_mask
from ._basis_lsq import check_exact_cond, dense_ls_matrices, dense_ls_matrix
from ._batching import batching_decoder
from ._dtypes import finite_rows, resolve_accum_dtype, unit_roundoff
from ._errors import payload_scale, solve_rounding
from ._result import DecodeResult, apply_decoding, finish, predicted_error, status_of


def gaussian_encoding_matrix(
    key: Any, *, num_inputs: int, num_workers: int
) -> jax.Array:
    """G [M, K] with i.i.d. N(0, 1/K) entries, drawn in float32 from ``key``.

    Args:
        key: a typed PRNG key (``jax.random.key(seed)``).
        num_inputs: K >= 1. num_workers: M >= K.

    Returns:
        float32 [M, K]; the same numbers whether or not float64 is enabled.

    Raises:
        TypeError: ``key`` is not a typed key (a legacy uint32 key or an int).
        ValueError: K < 1 or M < K.

    Examples:
        >>> import jax
        >>> g = gaussian_encoding_matrix(jax.random.key(1), num_inputs=3,
        ...                              num_workers=6)
        >>> g.shape, str(g.dtype)
        ((6, 3), 'float32')
    """
    fname = "gaussian_encoding_matrix"
    if not (
        isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    ):
        raise TypeError(
            f"{fname}: key must be a typed PRNG key (jax.random.key(seed)), got "
            f"{type(key).__name__} {getattr(key, 'dtype', '')}".rstrip()
        )
    k, m = _sizes(fname, num_inputs, num_workers)
    return _draw(key, k=k, m=m)


def seed_key(seed: int) -> jax.Array:
    """The typed PRNG key of an int seed >= 0, the same with and without float64.

    ``jax.random.key(seed)`` for seed < 2^32 (there the key does not depend on
    float64 being enabled); a larger seed, of any size, folds its higher base-2^32
    digits, lowest first, into the key of its lowest digit
    (``jax.random.fold_in``), where ``jax.random.key`` would drop its high bits
    without float64 and overflow from 2^63.

    Args:
        seed: a Python or numpy int >= 0.

    Returns:
        A typed key (the default PRNG implementation).

    Raises:
        TypeError: a seed that is not an int (bool and float included).
        ValueError: a negative seed.

    Examples:
        >>> import jax
        >>> bool((jax.random.key_data(seed_key(7))
        ...       == jax.random.key_data(jax.random.key(7))).all())
        True
        >>> seed_key(2**70).shape
        ()
    """
    s = check_int("seed_key", "seed", seed, minimum=0)
    digits = []
    while True:
        digits.append(s & 0xFFFFFFFF)
        s >>= 32
        if not s:
            break
    key = jax.random.key(digits[0])
    for d in digits[1:]:
        key = jax.random.fold_in(key, np.uint32(d))
    return key


@functools.partial(jax.jit, static_argnames=("k", "m"))
def _draw(key, k, m):
    g = jax.random.normal(key, (m, k), jnp.float32)
    return g * jnp.float32(1.0 / math.sqrt(k))


def _sizes(fname: str, num_inputs: Any, num_workers: Any) -> tuple[int, int]:
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    if m < k:
        raise ValueError(
            f"{fname}: a random code needs at least K={k} workers (num_workers >= "
            f"num_inputs), got M={m}"
        )
    return k, m


def _check_generator(fname: str, generator: Any, m: int | None = None) -> jax.Array:
    g = check_floating(fname, "generator", generator)
    if g.ndim != 2 or g.shape[0] < g.shape[1] or g.shape[1] < 1:
        raise ValueError(
            f"{fname}: generator must have shape [M, K] with M >= K >= 1, got "
            f"{tuple(g.shape)}"
        )
    if m is not None and g.shape[0] != m:
        raise ValueError(
            f"{fname}: generator must have M={m} rows (one per worker), got "
            f"{g.shape[0]}"
        )
    return g


def random_encode(x: Any, generator: Any) -> jax.Array:
    r"""Random-code encoding: worker j receives sum_i G[j, i] X_i.

    Args:
        x: [K, ...] inputs, any floating dtype.
        generator: [M, K] encoding matrix (e.g. :func:`gaussian_encoding_matrix`).

    Returns:
        [M, ...] in the accumulation dtype of ``x`` (float32 for bf16, f16, f32;
        float64 for float64). Non-finite inputs propagate.

    Raises:
        ValueError: shapes that disagree. TypeError: non-floating arrays.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> g = gaussian_encoding_matrix(jax.random.key(1), num_inputs=3,
        ...                              num_workers=6)
        >>> random_encode(jnp.arange(6.0).reshape(3, 2), g).shape
        (6, 2)
    """
    fname = "random_encode"
    x = check_floating(fname, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
    g = _check_generator(fname, generator)
    if g.shape[1] != x.shape[0]:
        raise ValueError(
            f"{fname}: x must hold K={g.shape[1]} inputs (the generator's columns), "
            f"got {x.shape[0]}"
        )
    acc = resolve_accum_dtype(fname, x.dtype)
    return random_encode_unchecked(x.astype(acc), g.astype(acc))


@jax.jit
def random_encode_unchecked(x, g):
    """:func:`random_encode` after its checks (a RandomCode's: its generator drawn
    when it was built, x by its ``encode``): G x in the dtype of ``x``."""
    return apply_decoding(g, x, x.dtype, zero_nonfinite=False)


def _check_decode(fname, y, mask, generator, accum_dtype):
    y = check_floating(fname, "y", y)
    if y.ndim < 1:
        raise ValueError(f"{fname}: y must have shape [M, ...], got a scalar")
    m = y.shape[0]
    mask = check_one_mask(fname, mask, m)
    g = _check_generator(fname, generator, m)
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    return y, mask, g.astype(acc), acc


def random_decode(
    y: Any,
    mask: Any,
    generator: Any,
    *,
    accum_dtype: Any = None,
    exact_cond: bool = False,
) -> DecodeResult:
    r"""Random code, least squares over every responder: value = G_S^+ y_S.

    With float32 accumulation corrected semi-normal equations (the Cholesky factor
    of G_S^T G_S, two refinement steps through the rows) where a certified estimate
    puts cond <= 512, Householder QR of the responders' rows of G elsewhere; with
    float64 (or ``exact_cond``) Householder QR (``codedjax._basis_lsq``). A worker
    whose answer holds a NaN or Inf is treated as missing.

    Args:
        y: [M, ...] answers in any floating dtype.
        mask: bool [M], True for the responders.
        generator: [M, K] the encoding matrix used (traced; the same array as for
            :func:`random_encode`).
        accum_dtype: float32 or float64; default float32 for bf16, f16 and f32
            answers, float64 for float64.
        exact_cond: the exact condition number (Householder QR and an SVD of R)
            also with float32 accumulation, instead of the estimate.

    Returns:
        DecodeResult: ``value`` [K, ...] in the accumulation dtype; ``cond`` the
        2-norm condition number of G_S (exact with float64 accumulation or
        ``exact_cond``, else a certified estimate: within K^(+-1/64), in practice
        within 1% below); ``num_used`` N; ``status``
        TOO_FEW_RESPONSES (N < K), BAD_POINTS (a non-finite generator),
        ILL_CONDITIONED or NONFINITE; ``error`` the predicted error of
        docs/decoding.md with the solve's own rounding (sqrt(K) u_acc) and the
        least-squares residual over N - K degrees of freedom.

    Batching: ``jax.vmap`` over masks and answers runs a kernel that factors one
    mask at a time (no LAPACK call with a batch axis).

    Raises:
        ValueError: shapes that disagree, a mask not [M], a generator not [M, K]
            with M >= K. TypeError: non-floating arrays, a non-boolean mask.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> g = gaussian_encoding_matrix(jax.random.key(1), num_inputs=3,
        ...                              num_workers=6)
        >>> x = jnp.arange(6.0).reshape(3, 2)
        >>> r = random_decode(random_encode(x, g), jnp.arange(6) > 1, g)
        >>> bool(r.ok), bool(jnp.allclose(r.value, x, atol=1e-4))
        (True, True)

    References:
        Z. Chen and J. Dongarra, ICCS 2005; A. Ramamoorthy and L. Tang,
        arXiv:1910.06515.
    """
    fname = "random_decode"
    y, mask, g, acc = _check_decode(fname, y, mask, generator, accum_dtype)
    exact = check_exact_cond(fname, exact_cond)
    return _random_decode(y, mask, g, acc=acc, exact_cond=exact)


def _finish(y, sel, g, batched, per_mask, acc, exact_cond):
    lead_axes = 1 if per_mask else 0
    m, k = g.shape
    eye = jnp.eye(k, dtype=acc)
    lead = y.shape[:lead_axes]
    flat = y.reshape(lead + (m, math.prod(y.shape[lead_axes + 1 :])))
    clean = flat.astype(acc)
    clean = jnp.where(jnp.isfinite(clean), clean, jnp.zeros((), acc))
    # the residual of y / s (s a power of two, exact): it cannot overflow
    ys = clean / payload_scale(flat, acc)
    if batched:
        ls = dense_ls_matrices(
            sel, g, eye, acc, y=ys, per_mask=per_mask, exact_cond=exact_cond
        )
    else:
        ls = dense_ls_matrix(sel, g, eye, acc, y=ys, exact_cond=exact_cond)
    value = apply_decoding(ls.a, y, acc, per_mask=per_mask)
    rss = ls.rss
    # the solve's own rounding: a noise level of sqrt(K) u_acc on the answers
    error = predicted_error(
        ls.a, flat, sel, y.dtype, residual_sq=rss, dof=ls.num_used - k,
        residual_scaled=True, solve_factor=solve_rounding(k),
    )  # fmt: skip
    status = status_of(
        points_ok=jnp.all(jnp.isfinite(g)), enough=ls.num_used >= k, solved=ls.ok
    )
    return finish(value, ls.cond, ls.num_used, status, error)


def _single(data, points, acc, exact_cond):
    y, mask = data
    (g,) = points
    return _finish(y, mask & finite_rows(y), g, False, False, acc, exact_cond)


def _many(data, points, per_mask, acc, exact_cond):
    y, masks = data
    (g,) = points
    fin = jax.vmap(finite_rows)(y) if per_mask else finite_rows(y)[None, :]
    return _finish(y, masks & fin, g, True, per_mask, acc, exact_cond)


def random_decode_unchecked(y, mask, g, acc, exact_cond=False):
    """:func:`random_decode` after its checks (a RandomCode's: its generator drawn
    when it was built, y and mask by its ``decode``); under ``jax.vmap`` the
    batched kernel."""
    f = batching_decoder(_single, _many, (("acc", acc), ("exact_cond", exact_cond)))
    return f((y, mask), (g,))


_random_decode = jax.jit(random_decode_unchecked, static_argnames=("acc", "exact_cond"))


def random_decoding_matrix(
    mask: Any,
    generator: Any,
    *,
    accum_dtype: Any = jnp.float32,
    exact_cond: bool = False,
) -> DecodeResult:
    """The decoding matrix G_S^+ of :func:`random_decode` for one mask, as [K, M].

    Columns of missing workers are zero, so ``A @ y`` decodes any payload y [M, F].

    Args:
        mask: bool [M]. generator: [M, K]. accum_dtype: float32 (default) or
            float64. exact_cond: as :func:`random_decode`.

    Returns:
        DecodeResult with ``value`` = A [K, M], ``ok``, ``cond``, ``num_used``,
        ``status`` as :func:`random_decode`; ``error`` per unit of max |y| (u times
        the largest row sum of |A|).

    Raises:
        ValueError, TypeError: as :func:`random_decode`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> g = gaussian_encoding_matrix(jax.random.key(1), num_inputs=3,
        ...                              num_workers=6)
        >>> random_decoding_matrix(jnp.arange(6) > 1, g).value.shape
        (3, 6)
    """
    fname = "random_decoding_matrix"
    acc0 = resolve_accum_dtype(fname, jnp.float32, accum_dtype)
    g = _check_generator(fname, generator)
    y = jnp.zeros((g.shape[0],), acc0)
    _, mask, g, acc = _check_decode(fname, y, mask, g, accum_dtype)
    exact = check_exact_cond(fname, exact_cond)
    return _random_matrix(mask, g, acc=acc, exact_cond=exact)


@functools.partial(jax.jit, static_argnames=("acc", "exact_cond"))
def _random_matrix(mask, g, acc, exact_cond=False):
    k = g.shape[1]
    ls = dense_ls_matrix(mask, g, jnp.eye(k, dtype=acc), acc, exact_cond=exact_cond)
    status = status_of(
        points_ok=jnp.all(jnp.isfinite(g)), enough=ls.num_used >= k, solved=ls.ok
    )
    gain = jnp.max(jnp.sum(jnp.abs(ls.a), axis=-1), initial=0.0)
    return finish(ls.a, ls.cond, ls.num_used, status, unit_roundoff(acc) * gain)
