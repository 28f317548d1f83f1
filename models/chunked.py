"""Running a jitted model over any batch size with few compiled programs."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["chunked_apply"]


def chunked_apply(run: Callable, state, x: jax.Array, chunk: int) -> jax.Array:
    """``run(state, part)`` over x [B, ...] in chunks, concatenated.

    A batch of at least ``chunk`` rows goes in chunks of ``chunk``, a smaller one in
    one chunk of the next power of two; a short chunk is padded with zeros and its
    padded rows dropped, so one compiled program serves every chunk of a size.
    """
    b = x.shape[0]
    size = chunk if b >= chunk else 1 << max(b - 1, 0).bit_length()
    outs = []
    for start in range(0, b, size):
        part = x[start : start + size]
        pad = size - part.shape[0]
        if pad:
            part = jnp.concatenate([part, jnp.zeros((pad, *part.shape[1:]), x.dtype)])
        outs.append(run(state, part)[: size - pad])
    return jnp.concatenate(outs) if len(outs) > 1 else outs[0]
