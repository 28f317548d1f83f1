"""Memoise a batched function by the bytes of its input (repeated model runs)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["CachedFn"]


class CachedFn:
    """Memoise a batched function by the exact bytes of its input.

    An experiment that runs the model on the same coded inputs more than once (NeRCC's
    tuning for every straggler count of a (K, M) pair; two schemes sharing an
    encoding) gets the stored outputs back instead of recomputing them. Keys are
    SHA-1 digests of the input's bytes with its shape and dtype, so only an identical
    input is served from the cache.

    Attributes:
        fn: the wrapped function, input [B, ...] -> output [B, ...].
        images_run: rows the wrapped function has computed (cache misses).
    """

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn
        self.cache: dict[tuple, Any] = {}
        self.images_run = 0

    def __call__(self, x) -> Any:
        arr = np.ascontiguousarray(np.asarray(x))
        key = (arr.shape, arr.dtype.str, hashlib.sha1(arr.tobytes()).hexdigest())
        hit = self.cache.get(key)
        if hit is None:
            hit = self.fn(arr)
            self.cache[key] = hit
            self.images_run += arr.shape[0]
        return hit
