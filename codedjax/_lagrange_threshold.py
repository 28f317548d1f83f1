"""The threshold decoder of Lagrange coded computing (LCC / Fahim-Cadambe): the
first D responders of an arrival order, a square solve; and the arrival order
whose first D responders are spread most evenly (:func:`spread_order`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_int, is_concrete
from ._batching import batching_decoder
from ._dtypes import finite_rows, points_valid
from ._errors import solve_rounding
from ._lagrange_chebyls import checked_decode_args
from ._lagrange_lsq import ls_decoding_matrix as _ls_decoding_matrix
from ._lagrange_square import square_decoding_matrices
from ._result import DecodeResult, apply_decoding, finish, predicted_error, status_of


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
    y, mask, alpha, beta, d, acc = checked_decode_args(
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


def threshold_decode_unchecked(y, mask, alpha, beta, order, num_coeffs, acc):
    """:func:`threshold_decode` of checked answers, mask and int32 ``order``."""
    return _threshold_decode(
        y, mask, alpha, beta, order, num_coeffs=num_coeffs, acc=acc
    )


def spread_order_unchecked(mask, num_coeffs):
    """:func:`spread_order` of a checked mask [M] (bool) and D >= 1."""
    return _spread_order(mask, num_coeffs=num_coeffs)
