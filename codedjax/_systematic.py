"""Systematic codes: a query whose own worker answered is that worker's answer.

A systematic code sends K of its M workers the raw queries (worker ``workers[k]``
is sent query k itself) and the others coded ones. Its decoder fits every answer
as before (least squares for a Lagrange or circle code) and then returns, for each
query whose systematic worker answered with finite values, that answer as it is
(copied bit for bit in the accumulation dtype): the fit interpolates it only
approximately, while the answer is the query's value up to the worker's own
rounding. :func:`copy_systematic` is that step on a decoder's result,
:func:`systematic_matrix` the same on a decoding matrix, and
:func:`decodable_with_copies` the host-side rule of which queries a set of
answers gives (``Code.decodable_queries``).

A Lagrange code at worker points that contain the data points
(``codedjax._chebyshev.systematic_points_f64``), the circle code whose data roots
are among the worker roots and BACC at such points are systematic; ParM,
replication and RepApprox are systematic by construction.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._dtypes import cast_exact, finite_rows
from ._result import Status, finish, predicted_error


def copy_systematic(
    r,
    y: jax.Array,
    mask: jax.Array,
    workers: np.ndarray,
    parts: np.ndarray,
    num_parts: int,
    acc,
    *,
    rescue: bool = True,
    exclude: jax.Array | None = None,
):
    """A decoder's result ``r`` with each query whose systematic worker answered
    replaced by that answer (one mask, traced).

    Args:
        r: the fit's result (a :class:`DecodeResult`, or a NamedTuple whose first
            fields are its fields: a robust code's, whose further fields are kept).
        y: [M, *coded, ...] the answers, as the code's ``decode`` takes them.
        mask: bool [M] responders.
        workers: int [K], the worker sent query k itself.
        parts: int [K], the part of that worker's answer that holds query k's
            (0 for a real code; the circle code's pairs: 0 real, 1 imaginary).
        num_parts: the parts of an answer, ``prod(code.coded_shape)``.
        acc: the accumulation dtype (``r.value``'s).
        rescue: the copies decode on their own: when every query's systematic
            worker answered the result is ``ok`` whatever the fit's status (cond 1,
            the copied answers' own rounding as ``error``). False for a robust
            code, which trusts no answer it could not check against the fit.
        exclude: optional bool [M]: workers whose answer is not copied (a robust
            code's suspects).

    Returns:
        ``r`` with ``value`` the copies where the systematic worker answered and
        the fit elsewhere; ``error`` the larger of the copies' predicted rounding
        (the workers' own, as replication's) and the fit's (which covers all K rows
        of the fit: an upper bound for the queries it still serves); ``ok`` the
        fit's, or (``rescue``) every query copied.
    """
    m, k, nrows = y.shape[0], len(workers), int(num_parts)
    rows = _rows(workers, parts, nrows)
    flat = y.reshape((m * nrows, math.prod(y.shape[1:]) // nrows))
    sel = mask & finite_rows(y)
    usable = sel if exclude is None else sel & ~exclude
    copy = usable[np.asarray(workers)]  # [K]
    copied = cast_exact(flat[rows], acc)  # [K, F]
    old = r.value.reshape((k, -1))
    value = jnp.where(copy[:, None], copied, old).reshape(r.value.shape)
    pick = jnp.asarray(np.arange(m * nrows)[None, :] == rows[:, None])
    pick = pick & copy[:, None]  # [K, M * rows]
    used = jnp.any(pick, axis=0)
    e_copy = predicted_error(
        pick.astype(acc), flat, used, y.dtype, solve_factor=0.0
    ).astype(r.error.dtype)
    any_copy = jnp.any(copy)
    e_copy = jnp.where(any_copy, e_copy, jnp.zeros((), r.error.dtype))
    alone = jnp.all(copy) if rescue else jnp.zeros((), bool)
    status = jnp.where(alone, int(Status.SUCCESS), r.status).astype(jnp.int32)
    error = jnp.where(alone, e_copy, _max_bound(r.error, e_copy))
    cond = jnp.where(alone, jnp.ones((), r.cond.dtype), r.cond)
    n_copy = jnp.sum(jnp.any(used.reshape(m, nrows), axis=1)).astype(jnp.int32)
    num_used = jnp.where(alone, n_copy, r.num_used).astype(jnp.int32)
    out = finish(value, cond, num_used, status, error)
    return r._replace(**out._asdict())


def _max_bound(a: jax.Array, b: jax.Array) -> jax.Array:
    """The larger of two error bounds (>= 0, inf included), chosen through their
    bits: a bound in the subnormal range (a subnormal payload's) compares equal to
    zero where XLA flushes it, and ``jnp.maximum`` would lose it."""
    ut = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(a.dtype).itemsize]
    bits_a = jax.lax.bitcast_convert_type(a, ut)
    bits_b = jax.lax.bitcast_convert_type(b, ut)
    return jnp.where(bits_a >= bits_b, a, b)


def _rows(workers, parts, num_parts: int) -> np.ndarray:
    """int [K]: the row of query k's answer in the answers as [M * num_parts, F]."""
    return np.asarray(workers) * int(num_parts) + np.asarray(parts)


def copy_systematic_batched(r, y, masks, shared_y, *args, **kw):
    """:func:`copy_systematic` (``*args``: its arguments after the mask) over a
    leading B axis of ``r`` and ``masks`` (and of ``y`` unless ``shared_y``)."""

    def one(rr, yy, mk):
        return copy_systematic(rr, yy, mk, *args, **kw)

    return jax.vmap(one, in_axes=(0, None if shared_y else 0, 0))(r, y, masks)


def systematic_matrix(
    a: jax.Array,
    ok: jax.Array,
    mask: jax.Array,
    workers: np.ndarray,
    parts: np.ndarray,
    num_parts: int,
    *,
    rescue: bool = True,
) -> jax.Array:
    """The decoding matrix of a systematic decode from the fit's ``a`` [K, M *
    num_parts] and its ``ok`` (arguments as :func:`copy_systematic`): row k the
    unit row of query k's answer where its systematic worker is in ``mask``, the
    fit's row elsewhere; all zeros where the decode is not ``ok`` (the fit's, or
    every query copied with ``rescue``)."""
    copy = mask[np.asarray(workers)]
    rows = _rows(workers, parts, num_parts)
    unit = jnp.asarray(np.arange(a.shape[1])[None, :] == rows[:, None])
    out = jnp.where(copy[:, None], unit.astype(a.dtype), a)
    good = ok | (jnp.all(copy) if rescue else False)
    return jnp.where(good, out, jnp.zeros_like(out))


def decodable_with_copies(mask: np.ndarray, workers, whole: np.ndarray) -> np.ndarray:
    """bool [..., K]: query k decodable where its systematic worker answered, or
    where ``whole`` [...] (the fit decodes every query)."""
    mask = np.asarray(mask, bool)
    return mask[..., np.asarray(workers)] | np.asarray(whole, bool)[..., None]


def first_per_query(decodable, times) -> np.ndarray:
    """The arrival after which each query first becomes decodable, by the rule
    ``decodable(mask[..., M]) -> bool [..., K]`` (monotone in the mask): float
    [..., K], inf where never."""
    t = np.asarray(times, np.float64)
    ts = np.sort(t, axis=-1)
    masks = t[..., None, :] <= ts[..., :, None]  # [..., n, M]
    can = np.asarray(decodable(masks), bool) & np.isfinite(ts)[..., None]
    first = np.argmax(can, axis=-2)  # [..., K]
    at = np.take_along_axis(ts, first, axis=-1)
    return np.where(can.any(axis=-2), at, np.inf)
