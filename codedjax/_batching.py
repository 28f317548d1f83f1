"""Decoders whose ``jax.vmap`` runs a batched kernel (``jax.custom_batching``).

A decoder is written for one mask (the library's convention: callers ``jax.vmap``
it). A plain ``vmap`` of the one-mask kernel batches its LAPACK calls one matrix at a
time, which costs several times the batched kernel (one matrix product for every
Gram matrix, inverses vectorised across the batch). :func:`batching_decoder` joins
the two: the returned function runs ``single`` when called on one mask and
``batched`` under ``jax.vmap`` (any number of nested vmaps, over masks, payloads or
both, ``in_axes=None`` for a shared payload or a shared mask), through
``jax.custom_batching.custom_vmap``.

How nested vmaps are flattened: each vmap level adds one leading batch dimension;
the function made for a stack of levels records, per level and per data argument,
whether that argument is batched there (``pattern``). The per-mask arguments (the
mask, an arrival order) are broadcast to every level (booleans and indices: cheap)
and flattened into one batch axis of size B; the payload ``y`` stays shared
(``[M, ...]``) when no level batches it, is reshaped when every level does, and is
broadcast otherwise. Points (``alpha``, ``beta``) are not expected to be batched;
when they are, the level falls back to a plain ``jax.vmap`` of the kernel.

Autodiff: ``custom_vmap`` has no autodiff rule of its own, so the returned function
is also a ``jax.custom_jvp`` whose tangent differentiates the plain kernel (the value
is linear in ``y``: the tangent is A dy, and the cotangent of ``y`` A^T g, which
reverse mode gets by transposing that linear map). ``jax.jvp``, ``jax.grad``,
``jax.jacfwd``, ``jax.jacrev`` and higher orders (``jax.hessian``) all work, also
under ``jax.vmap``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp


def batching_decoder(
    single: Callable,
    batched: Callable,
    statics: tuple,
    pattern: tuple = (),
) -> Callable:
    """``f(data, points) = single(data, points, **statics)``, vmapped by ``batched``.

    Args:
        single: ``single(data, points, **statics) -> DecodeResult`` for one mask;
            ``data = (y [M, ...], mask [M], *per_mask_args)``.
        batched: ``batched(data, points, per_mask, **statics) -> DecodeResult`` with
            a leading B axis on every field, for ``data = (y, masks [B, M],
            *args [B, ...])`` and y [B, M, ...] (``per_mask``) or [M, ...].
        statics: hashable ``((name, value), ...)`` keyword arguments of both.
        pattern: the batching of the data arguments at each enclosing vmap level,
            outermost first (internal; ``()`` for the unbatched function).

    Returns:
        A function of ``(data, points)``, cached per arguments.
    """
    return _make(single, batched, statics, pattern)


def _full_shape(data, pattern):
    """Sizes of the batch levels, from whichever data argument is batched there."""
    pos = [0] * len(data)
    sizes = []
    for level in pattern:
        size = None
        for i, batched in enumerate(level):
            if batched:
                if size is None:
                    size = data[i].shape[pos[i]]
                pos[i] += 1
        sizes.append(size)
    return tuple(sizes)


def _to_full(x, flags, full):
    """Broadcast x [*(batched levels), ...] to [*full, ...] (size-1 axes inserted)."""
    rest = x.shape[sum(flags) :]
    shape, it = [], iter(x.shape)
    for f in flags:
        shape.append(next(it) if f else 1)
    return jnp.broadcast_to(x.reshape(tuple(shape) + rest), tuple(full) + rest)


def _call(single, batched, statics, pattern, data, points):
    kw = dict(statics)
    if not pattern:
        return single(data, points, **kw)
    full = _full_shape(data, pattern)
    b = math.prod(full)
    flags = [tuple(level[i] for level in pattern) for i in range(len(data))]
    y = data[0]
    per_mask = any(flags[0])
    if per_mask:
        y = _to_full(y, flags[0], full)
        y = y.reshape((b,) + y.shape[len(full) :])
    rest = []
    for x, f in zip(data[1:], flags[1:], strict=True):
        x = _to_full(x, f, full)
        rest.append(x.reshape((b,) + x.shape[len(full) :]))
    if b == 0:
        # an empty batch (jax.vmap over zero masks): nothing to decode, an empty
        # result of the shapes and dtypes one decode returns
        one = [
            jax.ShapeDtypeStruct(x.shape[1:] if f else x.shape, x.dtype)
            for x, f in zip((y, *rest), (per_mask,) + (True,) * len(rest), strict=True)
        ]
        spec = jax.eval_shape(lambda *d: single(tuple(d), points, **kw), *one)
        return jax.tree_util.tree_map(
            lambda s: jnp.zeros(full + s.shape, s.dtype), spec
        )
    out = batched((y, *rest), points, per_mask, **kw)
    return jax.tree_util.tree_map(lambda v: v.reshape(full + v.shape[1:]), out)


@functools.lru_cache(maxsize=512)
def _make(single, batched, statics, pattern):
    call = functools.partial(_call, single, batched, statics, pattern)

    @jax.custom_batching.custom_vmap
    def fwd_only(data, points):
        return call(data, points)

    @fwd_only.def_vmap
    def rule(axis_size, in_batched, data, points):
        data_b, points_b = in_batched
        if not any(data_b) and not any(points_b):
            # nothing of ours is batched (a vmap over tangents only, as in
            # jax.hessian): one plain call, its result unbatched
            out = call(data, points)
            return out, jax.tree_util.tree_map(lambda _: False, out)
        if any(points_b):
            # batched points: no batched kernel shares one basis; plain vmap
            axes = (
                tuple(0 if d else None for d in data_b),
                tuple(0 if p else None for p in points_b),
            )
            out = jax.vmap(call, in_axes=axes, axis_size=axis_size)(data, points)
        else:
            level = tuple(bool(d) for d in data_b)
            out = _make(single, batched, statics, (level,) + pattern)(data, points)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    @jax.custom_jvp
    def f(data, points):
        return fwd_only(data, points)

    @f.defjvp
    def f_jvp(primals, tangents):
        # the value from the batched kernel, the tangent from the plain one (the
        # value is linear in y); reverse mode transposes this linear tangent map
        _, tangent = jax.jvp(call, primals, tangents)
        # the primal through f itself, so that a derivative of this rule (second
        # order: jax.hessian, grad of jvp) meets f's rule again, not custom_vmap
        return f(*primals), tangent

    return f
