"""Argument checks shared by the public functions and the codes of codedjax.

Every check looks at static facts only (shapes, dtypes, Python ints), so it works
under ``jit``; the value checks (:func:`concrete_points`, :func:`concrete_finite`)
run only on concrete arrays. A failed check raises a ValueError or TypeError whose
message starts with the name of the public entry point the user called
(:func:`errors_named` renames one raised deeper inside). A code checks each call's
arguments once, in its own method; the traced predicates (``points_valid``,
``finite_rows``) are in ``codedjax._dtypes``.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._dtypes import resolve_accum_dtype


@contextlib.contextmanager
def errors_named(fname: str):
    """Re-raise a ValueError or TypeError from inside a public entry point with the
    name of the entry point the user called (``fname``), not that of the internal
    function that found the mistake: ``"chebyls_decode: x"`` raised while
    ``ChebyLSCode.decode`` runs becomes ``"ChebyLSCode.decode: x"`` (the original
    error is chained as its cause)."""
    try:
        yield
    except (ValueError, TypeError) as err:
        msg = str(err)
        if msg.startswith(f"{fname}:"):
            raise
        head, sep, tail = msg.partition(": ")
        if sep and _NAME.fullmatch(head):
            msg = tail  # the internal function's name, replaced
        cls = TypeError if isinstance(err, TypeError) else ValueError
        raise cls(f"{fname}: {msg}") from err


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def check_int(fname: str, name: str, value: Any, minimum: int | None = None) -> int:
    """A Python int (not bool) at least ``minimum``; raise naming the function."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{fname}: {name} must be a Python int (a static argument), "
            f"got {type(value).__name__} {value!r}"
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{fname}: {name} must be >= {minimum}, got {value}")
    return value


def check_number(
    fname: str,
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """A finite real number (not bool, not an array of several) in [low, high]
    (open ends where asked); raise naming the public function ``fname``. NaN and
    +-inf are refused."""
    try:
        if isinstance(value, (bool, str, bytes)):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: {name} must be a real number, got {type(value).__name__} "
            f"{value!r}"
        ) from None
    lo = "(" if open_low or low is None else "["
    hi = ")" if open_high or high is None else "]"
    lo_v = "-inf" if low is None else low
    hi_v = "inf" if high is None else high
    span = f"{lo}{lo_v}, {hi_v}{hi}"
    bad = not np.isfinite(v)
    if low is not None:
        bad = bad or (v <= low if open_low else v < low)
    if high is not None:
        bad = bad or (v >= high if open_high else v > high)
    if bad:
        raise ValueError(f"{fname}: {name} must be finite and in {span}, got {value!r}")
    return v


def check_worker_dtype(fname: str, worker_dtype: Any) -> jnp.dtype:
    """The workers' dtype as a floating ``jnp.dtype``; raise naming the function."""
    try:
        wdt = jnp.dtype(worker_dtype)
    except TypeError as err:
        raise TypeError(
            f"{fname}: worker_dtype must be a floating dtype, got {worker_dtype!r}"
        ) from err
    if not jnp.issubdtype(wdt, jnp.floating):
        raise TypeError(f"{fname}: worker_dtype must be a floating dtype, got {wdt}")
    return wdt


@functools.lru_cache(maxsize=64)
def _is_floating(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))


def check_floating(fname: str, name: str, x: Any) -> jax.Array:
    """Convert to a jax array and require a floating dtype.

    A ``jax.Array`` (a tracer included) is returned as it is, without a
    conversion: this check runs on every request of a served code."""
    if not isinstance(x, jax.Array):
        try:
            x = jnp.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"{fname}: {name} must be a floating array, got {type(x).__name__}"
            ) from err
    if not _is_floating(x.dtype):
        raise TypeError(f"{fname}: {name} must have a floating dtype, got {x.dtype}")
    return x


def check_payload(fname: str, name: str, y: Any) -> jax.Array:
    """:func:`check_floating` for the answers (or inputs) of a decode: every axis
    must hold at least one entry. A payload with no features ([M, 0]) or no
    workers is refused here with the public function's name, not deep inside a
    reduction."""
    y = check_floating(fname, name, y)
    if 0 in y.shape:
        raise ValueError(
            f"{fname}: {name} must not be empty (every axis at least one entry), "
            f"got shape {tuple(y.shape)}"
        )
    return y


def check_vector(fname: str, name: str, x: Any, length: int | None = None) -> jax.Array:
    """A floating 1-D array of at least one entry (points: K = 0 inputs or M = 0
    workers are refused), optionally of a given length."""
    x = check_floating(fname, name, x)
    if x.ndim != 1:
        raise ValueError(f"{fname}: {name} must be 1-D, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{fname}: {name} must hold at least one point, got none")
    if length is not None and x.shape[0] != length:
        raise ValueError(f"{fname}: {name} must have length {length}, got {x.shape[0]}")
    return x


def check_mask(
    fname: str, mask: Any, num_workers: int, name: str = "mask"
) -> jax.Array:
    """A boolean array whose last axis has ``num_workers`` entries."""
    if not isinstance(mask, jax.Array):
        mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(f"{fname}: {name} must be boolean, got {mask.dtype}")
    if mask.ndim < 1 or mask.shape[-1] != num_workers:
        raise ValueError(
            f"{fname}: {name} must have shape [..., {num_workers}] (one entry per "
            f"worker), got {tuple(mask.shape)}"
        )
    return mask


def check_one_mask(
    fname: str, mask: Any, num_workers: int, hint: str = "use jax.vmap for many masks"
) -> jax.Array:
    """A boolean mask of shape [M] (one straggler pattern); raise naming ``fname``."""
    mask = check_mask(fname, mask, num_workers)
    if mask.ndim != 1:
        raise ValueError(
            f"{fname}: mask must have shape [M] = [{num_workers}], got "
            f"{tuple(mask.shape)} ({hint})"
        )
    return mask


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values (not a tracer inside jit/vmap)."""
    return not isinstance(x, jax.core.Tracer)


def concrete_finite(fname: str, name: str, x: jax.Array) -> None:
    """Reject non-finite points when the values are known (not traced)."""
    if not is_concrete(x):
        return
    v = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        bad = int(np.flatnonzero(~np.isfinite(v))[0])
        raise ValueError(f"{fname}: {name} must be finite, got {v[bad]} at index {bad}")


def concrete_points(fname: str, name: str, x: jax.Array) -> None:
    """Reject non-finite or duplicate points when the values are known."""
    if not is_concrete(x):
        return
    concrete_finite(fname, name, x)
    s = np.sort(np.asarray(x, dtype=np.float64))
    if s.size > 1 and np.any(np.diff(s) == 0):
        dup = float(s[np.flatnonzero(np.diff(s) == 0)[0]])
        raise ValueError(
            f"{fname}: {name} must be distinct points, got the value {dup} twice"
        )


def check_decode_inputs(
    fname: str,
    y: Any,
    mask: Any,
    alpha: Any,
    beta: Any,
    *,
    min_workers: int = 1,
    hint: str = "use jax.vmap for many masks",
):
    """Shapes shared by every decoder: y [M, ...], mask [M] bool, alpha [M], beta [K].

    Returns (y, mask, alpha, beta) as jax arrays; raises naming ``fname``.
    """
    y = check_payload(fname, "y", y)
    if y.ndim < 1 or y.shape[0] < min_workers:
        raise ValueError(
            f"{fname}: y must have shape [M, ...] with M >= {min_workers} workers, "
            f"got {tuple(y.shape)}"
        )
    m = y.shape[0]
    alpha = check_vector(fname, "alpha", alpha, length=m)
    mask = check_one_mask(fname, mask, m, hint)
    beta = check_vector(fname, "beta", beta)
    return y, mask, alpha, beta


def check_chebyshev_decode(
    fname: str,
    y: Any,
    mask: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: Any,
    accum_dtype: Any,
    *,
    hint: str = "use jax.vmap for many masks",
    cast: bool = True,
):
    """The checks of every Chebyshev-basis decoder (ChebyLS, threshold, graceful).

    Shapes as :func:`check_decode_inputs`, 1 <= D <= M, finite distinct concrete
    points. Returns (y, mask, alpha, beta, D, acc) with the points in ``acc``
    (as given, converted but not cast, when ``cast`` is False).
    """
    y, mask, alpha, beta = check_decode_inputs(fname, y, mask, alpha, beta, hint=hint)
    m = y.shape[0]
    d = check_int(fname, "num_coeffs", num_coeffs, minimum=1)
    if d > m:
        raise ValueError(
            f"{fname}: num_coeffs (D) must be at most the number of workers M={m}, "
            f"got {d}"
        )
    concrete_points(fname, "alpha", alpha)
    concrete_points(fname, "beta", beta)
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    if not cast:
        return y, mask, alpha, beta, d, acc
    return y, mask, alpha.astype(acc), beta.astype(acc), d, acc


def check_return_ok(fname: str, return_ok: Any) -> bool:
    """An encoder's ``return_ok`` flag: a Python bool (it fixes the outputs)."""
    if not isinstance(return_ok, bool):
        raise TypeError(
            f"{fname}: return_ok must be True or False, got "
            f"{type(return_ok).__name__} {return_ok!r}"
        )
    return return_ok
