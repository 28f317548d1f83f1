"""The Chebyshev points of a code: checked once when the code is built, made in
the dtype of the work (as constants of a program, or once on the device).

A code's points are fixed by its settings (K, M, the kind of the worker points),
so :func:`check_code_points` runs in its ``__post_init__``, and no call checks
them again; :func:`points` makes them inside a program and :func:`device_points`
once per (n, kind, dtype) for a program that takes them as arguments.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._chebyshev import points_f64


def points(n: int, kind: int, dtype: Any) -> jax.Array:
    """Chebyshev points [n] of ``kind`` in ``dtype`` (a constant in a trace)."""
    return jnp.asarray(points_f64(n, kind), dtype=dtype)


@functools.lru_cache(maxsize=256)
def device_points(n: int, kind: int, dtype: Any) -> jax.Array:
    """:func:`points` made once per (n, kind, dtype): points passed as arguments.

    Made outside any trace (``ensure_compile_time_eval``), also when the first
    call comes from inside the caller's ``jit``: the cache must never hold a
    tracer of one program for the next."""
    with jax.ensure_compile_time_eval():
        return points(n, kind, dtype)


@functools.lru_cache(maxsize=256)
def check_code_points(cls: str, name: str, n: int, kind: int) -> None:
    """A code's points are checked once, when the code is built (never per call).

    The Chebyshev points [n] of ``kind`` must be finite and pairwise distinct in
    float32, the narrowest accumulation dtype (distinct in float32 implies distinct
    in float64): then no per-request path needs to check them (the decoders'
    traced ``points_valid`` stays as a guard). Raises a ValueError naming the code.
    """
    x = points_f64(n, kind)
    x32 = x.astype(np.float32)
    if not np.all(np.isfinite(x)):
        raise ValueError(
            f"{cls}: {name} (Chebyshev points of kind {kind}) need n >= 2 for the "
            f"second kind, got n = {n}"
        )
    if np.unique(x32).size != n:
        raise ValueError(
            f"{cls}: {name} ({n} Chebyshev points of kind {kind}) are not distinct "
            f"in float32 (the closest pairs round together); use fewer points"
        )
