"""Dtype policy and argument checks shared by every module of codedjax.

Workers may answer in any floating dtype (bf16 and f16 simulate low-precision
hardware); decoding accumulates in at least float32 and never runs a factorisation
in bf16 or f16.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_LOW_PRECISION = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def accumulation_dtype(dtype: Any, accum_dtype: Any = None) -> jnp.dtype:
    """The dtype decoding runs in for responses of ``dtype``.

    float64 responses are decoded in float64; bfloat16, float16 and float32 responses in
    float32. An explicit ``accum_dtype`` overrides the default but must be float32 or
    float64.

    Args:
        dtype: dtype of the worker responses (any floating dtype).
        accum_dtype: optional override (float32 or float64).

    Returns:
        The accumulation dtype.

    Raises:
        TypeError: if ``dtype`` is not floating or ``accum_dtype`` is bf16/f16.
        ValueError: float64 asked for while JAX's float64 is disabled.

    Examples:
        >>> import jax.numpy as jnp
        >>> accumulation_dtype(jnp.bfloat16)
        dtype('float32')
    """
    return resolve_accum_dtype("accumulation_dtype", dtype, accum_dtype)


def x64_enabled() -> bool:
    """True when float64 arrays can be made (``jax_enable_x64`` or its context).

    Read from the configuration (which includes a ``jax.enable_x64`` context):
    a tenth of a microsecond, where canonicalising a dtype costs several (every
    served call reads it)."""
    return bool(jax.config.jax_enable_x64)


def resolve_accum_dtype(fname: str, dtype: Any, accum_dtype: Any = None) -> jnp.dtype:
    """:func:`accumulation_dtype` with errors naming the public function ``fname``.

    float64 (asked for, or as the dtype of the responses) needs float64 enabled:
    otherwise JAX would run the work in float32 while the result would be judged
    against float64's epsilon, so this raises instead.
    """
    try:
        dt = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{fname}: expected a floating dtype, got {dtype!r}") from err
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"{fname}: expected a floating dtype, got {dt}")
    if accum_dtype is not None:
        try:
            acc = jnp.dtype(accum_dtype)
        except TypeError as err:
            raise TypeError(
                f"{fname}: accum_dtype must be float32 or float64, got {accum_dtype!r}"
            ) from err
        if acc not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
            raise TypeError(
                f"{fname}: accum_dtype must be float32 or float64 (no "
                f"factorisation runs in low precision), got {acc}"
            )
    elif dt == jnp.dtype(jnp.float64):
        acc = dt
    else:
        acc = jnp.dtype(jnp.float32)
    if acc == jnp.dtype(jnp.float64) and not x64_enabled():
        raise ValueError(
            f"{fname}: accum_dtype float64 needs float64 enabled in JAX "
            "(JAX_ENABLE_X64=1, jax.config.update('jax_enable_x64', True) or the "
            "jax.enable_x64 context), but it is disabled: the work would silently "
            "run in float32"
        )
    return acc


def unit_roundoff(dtype: Any) -> float:
    """Unit roundoff u = eps / 2 of a floating dtype (bf16: 2**-8, f32: 2**-24).

    Raises:
        TypeError: ``dtype`` is not a floating dtype.
    """
    return float(jnp.finfo(_floating_dtype(dtype)).eps) / 2.0


def exact_pow2(e: jax.Array, dtype: Any) -> jax.Array:
    """2**e, exactly, for integer exponents e in the normal range of ``dtype``.

    Built from the bits of the floating-point number (biased exponent e, zero
    mantissa), not by ``jnp.exp2``: XLA evaluates exp2(x) as exp(x log 2), which is
    not exact at integers (float32: 2**13 and beyond, 2**-13 and below, off by up
    to 3e-6 relative; float64: from 2**3, up to 8e-14), so a "power of two" from it
    makes scaling by it inexact.

    Args:
        e: integer array, each entry in [finfo.minexp, finfo.maxexp - 1] (float32:
            [-126, 127]); outside that range the result is not a power of two.
        dtype: the floating dtype of the result.
    """
    dt = jnp.dtype(dtype)
    fi = jnp.finfo(dt)
    bits = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[dt.itemsize]
    biased = e.astype(bits) + jnp.asarray(fi.maxexp - 1, bits)
    return jax.lax.bitcast_convert_type(biased << jnp.asarray(fi.nmant, bits), dt)


@functools.lru_cache(maxsize=64)
def _floating_dtype(dtype: Any) -> jnp.dtype:
    try:
        dt = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"unit_roundoff: expected a floating dtype, got {dtype!r}"
        ) from err
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"unit_roundoff: expected a floating dtype, got {dt}")
    return dt


def matmul_precision():
    """The matmul precision of every decoding product: full float32 everywhere.

    On CPU the default precision already is full float32 and asking for HIGHEST
    selects a slower code path for some shapes; on GPU/TPU the default may use
    TF32/bf16 passes, so HIGHEST is asked for there.
    """
    return None if jax.default_backend() == "cpu" else jax.lax.Precision.HIGHEST


def low_precision_worker(fn: Callable, dtype: Any = jnp.bfloat16) -> Callable:
    """Wrap ``fn`` so that it runs like a worker computing in ``dtype``.

    Every floating array leaf of the positional and keyword arguments (inputs *and*
    parameters, any pytree, e.g. an ``nnx.State``) is rounded to ``dtype`` before the
    call, so that jax.numpy arithmetic inside ``fn`` runs in ``dtype``. Matrix products
    accumulate as the backend does for that dtype (on CPU, GPU and TPU a bf16 matmul
    accumulates in float32 and rounds its result to bf16, as real bf16 hardware does).
    The result is returned in whatever dtype ``fn`` produces (``dtype`` for
    dtype-following code).

    Args:
        fn: the worker function.
        dtype: a floating dtype, default bfloat16.

    Returns:
        The wrapped function.

    Raises:
        TypeError: if ``dtype`` is not a floating dtype.

    Examples:
        >>> import jax.numpy as jnp
        >>> f = low_precision_worker(lambda w, x: w @ x, jnp.bfloat16)
        >>> f(jnp.ones((2, 2)), jnp.ones(2)).dtype
        dtype(bfloat16)
    """
    dt = jnp.dtype(dtype)
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"low_precision_worker: expected a floating dtype, got {dt}")

    def cast(leaf):
        if isinstance(leaf, (jax.Array, np.ndarray)) and jnp.issubdtype(
            leaf.dtype, jnp.floating
        ):
            return jnp.asarray(leaf).astype(dt)
        return leaf

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        args, kwargs = jax.tree_util.tree_map(cast, (args, kwargs))
        return fn(*args, **kwargs)

    return wrapped


# ----------------------------------------------------------------------------------
# Argument checks. They look at static facts only (shapes, dtypes, Python ints), so
# they work under jit; the value checks in `concrete_points` run only on concrete
# arrays.


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


def points_valid(x: jax.Array) -> jax.Array:
    """Traced check: all finite and pairwise distinct (for the ``ok`` flag)."""
    finite = jnp.all(jnp.isfinite(x))
    n = x.shape[0]
    same = x[:, None] == x[None, :]
    distinct = ~jnp.any(same & ~jnp.eye(n, dtype=bool))
    return finite & distinct


def finite_rows(y: jax.Array) -> jax.Array:
    """[M] bool: rows of y [M, ...] with every entry finite."""
    return jnp.all(jnp.isfinite(y.reshape(y.shape[0], -1)), axis=1)
