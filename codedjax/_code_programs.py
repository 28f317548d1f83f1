"""The compiled programs behind a code's methods.

Each method of a :class:`~codedjax._code.Code` runs, after its checks, one jitted
program with the code as a static argument: one compilation per code and argument
signature serves every mask. The programs call the code's traced hooks
(``_encode``, ``_decode``, ``_decode_batched``, ``_matrix``); :func:`empty_batch` is
``decode_batched`` of zero masks, shaped as the program's result.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def empty_batch(code, y, masks, shared_y, extras):
    """decode_batched of B = 0 masks: an empty result (as jax.vmap over zero masks
    gives), of the shapes and dtypes one mask's result has, with a leading 0."""

    def one(x):  # an argument with the leading B = 0 axis: shaped as for B = 1
        if x is None or x.ndim == 0 or x.shape[0] != 0:
            return x
        return jax.ShapeDtypeStruct((1,) + x.shape[1:], x.dtype)

    ys = y if shared_y else one(y)
    ex = {k: one(v) for k, v in extras.items()}
    spec = jax.eval_shape(
        lambda yy, mk, e: decode_batched_program(code, yy, mk, shared_y, e),
        ys,
        one(masks),
        ex,
    )
    return jax.tree_util.tree_map(
        lambda s: jnp.zeros((0,) + s.shape[1:], s.dtype), spec
    )


def _drop_none(extras):
    """The extras a caller gave (None: not given, the hook's default)."""
    return {k: v for k, v in extras.items() if v is not None}


@functools.partial(jax.jit, static_argnums=0)
def encode_program(code, x):
    """``code.encode`` after its checks."""
    return code._encode(x)


@functools.partial(jax.jit, static_argnums=0)
def decode_program(code, y, mask, extras):
    """``code.decode`` after its checks (``extras``: the keywords of its hook)."""
    return code._decode(y, mask, **_drop_none(extras))


@functools.partial(jax.jit, static_argnums=(0, 3))
def decode_batched_program(code, y, masks, shared_y, extras):
    """``code.decode_batched`` of B >= 1 masks after its checks."""
    return code._decode_batched(y, masks, shared_y, **_drop_none(extras))


@functools.partial(jax.jit, static_argnums=(0, 2))
def matrix_program(code, mask, dtype):
    """``code.decoding_matrix`` after its checks."""
    return code._matrix(mask, dtype)
