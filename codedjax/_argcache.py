"""A memo of argument checks, so that a served decode pays them once per code.

A decoder's public function checks its arguments eagerly: shapes and dtypes (static
facts) and, when the points are concrete, that they are finite and distinct (which
reads them back from the device and sorts them: tens of microseconds, and a device
synchronisation that shows in the tail latency). For one code the points are the
same arrays on every request, so the outcome of the checks is memoised here, keyed
on every static fact the checks read (shapes, dtypes, static arguments, whether
float64 is enabled) and on the *identity* of the point arrays.

Identity is safe because a ``jax.Array`` is immutable: an entry holds weak
references to its point arrays and counts only while they are alive and the very
same objects (an id reused by a new array after the old one died is a miss). Only
concrete ``jax.Array`` points are memoised (numpy arrays are mutable; tracers have no
values to check), and only payloads and masks that are ``jax.Array`` or tracers
(whose conversion is the identity), so a hit returns exactly what the checks would.

An entry holds static facts only (the number of coefficients, the accumulation
dtype), never an array: a value computed by the checks (a cast of the points, an
encoding matrix) may have been created under a trace (``jax.jit``, ``jax.vmap``,
``jax.grad``) of the first caller, and would then leak that trace into every later
program that passed the same points. The jitted kernels cast the points themselves,
inside each program, so a hit needs no array. :meth:`CheckMemo.put` refuses a value
that holds one.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any

import jax
import numpy as np

from ._argchecks import is_concrete
from ._dtypes import x64_enabled

_MAXSIZE = 256


class CheckMemo:
    """An LRU memo: (static key, point arrays) -> the checks' result."""

    def __init__(self, maxsize: int = _MAXSIZE):
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._maxsize = maxsize
        self._lock = threading.Lock()

    @staticmethod
    def key(fname: str, arrays: tuple, points: tuple, statics: tuple) -> tuple | None:
        """The memo key, or None when these arguments may not be memoised.

        Straight-line loops and list comprehensions, no generator: this runs on
        every served call, with the caches cold from the kernel before it."""
        shapes = []
        for x in arrays:
            if not isinstance(x, jax.Array):  # numpy, lists: convert and check
                return None
            shapes.append((x.shape, x.dtype))
        ids = []
        for p in points:
            if not (isinstance(p, jax.Array) and is_concrete(p)):
                return None
            ids.append(id(p))
        static = tuple([(type(s), s) for s in statics])
        try:
            hash(static)
        except TypeError:
            return None
        return (fname, tuple(shapes), tuple(ids), static, x64_enabled())

    def get(self, key: tuple | None, points: tuple) -> Any:
        if key is None:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            refs, value = entry
            for r, p in zip(refs, points, strict=True):
                if r() is not p:
                    del self._entries[key]
                    return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: tuple | None, points: tuple, value: Any) -> None:
        if key is None:
            return
        if any(_is_array(v) for v in jax.tree_util.tree_leaves(value)):
            # never memoise an array: it may be a tracer of the caller's program
            raise TypeError("CheckMemo.put: a memo entry must hold no arrays")
        refs = tuple(weakref.ref(p) for p in points)
        with self._lock:
            self._entries[key] = (refs, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _is_array(v: Any) -> bool:
    return isinstance(v, (jax.Array, np.ndarray, jax.core.Tracer))


DECODE_CHECKS = CheckMemo()
