"""Dtype policy and exact floating-point helpers shared by every module of codedjax.

Workers may answer in any floating dtype (bf16 and f16 simulate low-precision
hardware); decoding accumulates in at least float32 and never runs a factorisation
in bf16 or f16. Besides the policy (the accumulation dtype, unit roundoff, matmul
precision), this holds the exact power-of-two arithmetic the decoders scale by and
the traced predicates on points and rows; the argument checks are in
``codedjax._argchecks``.
"""

from __future__ import annotations

import functools
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


# ----------------------------------------------------------------------------------
# Exact scaling by powers of two, subnormal numbers included. XLA flushes subnormal
# operands and results of floating-point arithmetic to zero on CPU and on most
# accelerators (a subnormal times 2 is 0, a float32 subnormal cast to float64 is 0,
# and so is a product whose result is subnormal), so these helpers read and write
# such numbers through their bits: integer operations, selects and conversions of
# small integers, which nothing flushes.

_UINT = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}


def _uint(dt: jnp.dtype):
    return _UINT[dt.itemsize]


def _magnitude_bits(x: jax.Array) -> jax.Array:
    """The bits of |x| as an unsigned integer (ordered as |x| is, NaN aside)."""
    ut = _uint(x.dtype)
    mask = np.array((1 << (8 * x.dtype.itemsize - 1)) - 1).astype(ut)
    return jax.lax.bitcast_convert_type(x, ut) & mask


def float_parts(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(negative, significand, exponent) with |x| = significand * 2**exponent.

    Read from the bits, so exact for subnormal x too. The significand is an int32
    (int64 for float64) below 2**(nmant + 1), zero for x = 0; the exponent an
    int32. Meaningless for infinities and NaN.
    """
    dt = jnp.dtype(x.dtype)
    fi = jnp.finfo(dt)
    nm, bias = int(fi.nmant), int(fi.maxexp) - 1
    it = jnp.int64 if dt.itemsize == 8 else jnp.int32
    ut = _uint(dt)
    bits = jax.lax.bitcast_convert_type(x, ut)
    w = 8 * dt.itemsize
    neg = (bits >> np.array(w - 1).astype(ut)) != np.array(0).astype(ut)
    mag = _magnitude_bits(x)
    field = (mag >> np.array(nm).astype(ut)).astype(jnp.int32)
    frac = (mag & np.array((1 << nm) - 1).astype(ut)).astype(it)
    hidden = np.array(1 << nm).astype(it)
    sig = jnp.where(field > 0, frac | hidden, frac)
    ex = jnp.maximum(field, 1) - np.int32(bias + nm)
    return neg, sig, ex


def pow2_pair(e: jax.Array, dt: jnp.dtype) -> tuple[jax.Array, jax.Array]:
    """2**e as two normal powers of two (exact), e clipped to twice the normal
    exponent range of ``dt`` (beyond it a product with them over- or underflows
    whatever the first factor)."""
    fi = jnp.finfo(dt)
    e = jnp.clip(e, 2 * int(fi.minexp), 2 * (int(fi.maxexp) - 1))
    lo = jax.lax.shift_right_arithmetic(e, np.int32(1))  # floor(e / 2), one op
    return exact_pow2(lo, dt), exact_pow2(e - lo, dt)


def ldexp_exact(
    x: jax.Array,
    k: jax.Array | int,
    dtype: Any = None,
    *,
    round_up: bool = False,
    subnormal_in: bool = True,
    subnormal_out: bool = True,
) -> jax.Array:
    """x * 2**k in ``dtype`` (default x's), rounded once, subnormal numbers included.

    Subnormal x are read exactly (from their bits) and a result in the subnormal
    range of ``dtype`` is rounded to its spacing (to nearest even, or up in
    magnitude with ``round_up``) and written through its bits: XLA, which flushes
    subnormal operands and results to zero, never sees one. A normal x scaled to a
    normal result is exact (one rounding when ``dtype`` is narrower than x's);
    beyond the range the result is +-inf; infinities and NaN pass through.
    Differentiable in x (a linear map: its derivative is the plain product with
    2**k, in which only tangents, never values, may be flushed).

    Args:
        x: any floating array.
        k: integer exponents, broadcastable to x (the powers of two are made on
            k's own shape, e.g. one per column, never per entry of x).
        dtype: the floating dtype of the result.
        round_up: round a subnormal result up in magnitude (a bound stays a bound).
        subnormal_in: False where the caller knows x holds no subnormal number
            (a product's result: XLA has flushed them already), a cheaper program.
        subnormal_out: False where a result below the normal range may be
            flushed to zero (the caller has bounded what that costs).
    """
    out = jnp.dtype(x.dtype if dtype is None else dtype)
    k = jnp.asarray(k, jnp.int32)
    k = k.reshape((1,) * (jnp.ndim(x) - k.ndim) + k.shape)  # (leading axes added)
    if not (subnormal_in or subnormal_out):  # a plain product: exact where normal
        return _plain_ldexp(x, k, out)
    return _ldexp(x, k, out, round_up, subnormal_in, subnormal_out)


# arrays of at least this many entries take the plain product where it is exact
# (see _ldexp); below it the bit-level path alone is cheaper to compile and to run
_PLAIN_FIRST = 1024


def _plain_ldexp(x, k, out):
    """x * 2**k in ``out``: exact where operand and result are normal."""
    src = jnp.dtype(x.dtype)
    wide = src if src.itemsize > out.itemsize else out
    p1, p2 = pow2_pair(k, wide)
    return (x.astype(wide) * p1 * p2).astype(out)


def _plain_is_exact(x, k, out, subnormal_in, subnormal_out):
    """Whether :func:`_plain_ldexp` is the bit-level result (bool scalar): no
    subnormal operand (where they may come) and no nonzero operand's result below
    the normal range (where results may be subnormal): the smallest nonzero
    finite operand of each entry of k, over the axes k is broadcast along."""
    src = jnp.dtype(x.dtype)
    fine = ~any_subnormal(x) if subnormal_in else jnp.asarray(True)
    if subnormal_out:  # (NaN and inf pass: the plain product keeps them too)
        axes = tuple(i for i, n in enumerate(k.shape) if n == 1 and x.shape[i] > 1)
        nz = (x != 0) & jnp.isfinite(x)
        least = jnp.where(nz, jnp.abs(x), np.array(np.inf).astype(src))
        least = jnp.min(least, axis=axes, keepdims=True)
        fine = fine & ~jnp.any(_plain_ldexp(least, k, out) < jnp.finfo(out).tiny)
    return fine


def any_subnormal(x: jax.Array) -> jax.Array:
    """Whether any entry of x is subnormal (bool scalar), from the bits (where
    XLA flushes subnormal numbers, they compare equal to 0)."""
    mag = _magnitude_bits(x)
    ut = mag.dtype
    tiny = np.array(1 << int(jnp.finfo(x.dtype).nmant)).astype(ut)
    return jnp.any((mag < tiny) & (mag != np.array(0).astype(ut)))


def _etiny(dt: jnp.dtype) -> int:
    """The exponent of the smallest subnormal number of ``dt`` (float32: -149)."""
    fi = jnp.finfo(dt)
    return int(fi.minexp) - int(fi.nmant)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4, 5))
def _ldexp(x, k, out, round_up, subnormal_in, subnormal_out):
    # On a large array the bit-level path runs only when a subnormal operand or
    # result is present (lax.cond runs one branch): from about a thousand entries
    # its elementwise work is costly enough that XLA's CPU backend splits it over
    # threads, which costs more than the work; elsewhere the plain product is its
    # result. A small array (error bounds, scales) keeps the one path.
    if x.size < _PLAIN_FIRST:
        return _ldexp_bits(x, k, out, round_up, subnormal_in, subnormal_out)
    return jax.lax.cond(
        _plain_is_exact(x, k, out, subnormal_in, subnormal_out),
        lambda: _plain_ldexp(x, k, out),
        lambda: _ldexp_bits(x, k, out, round_up, subnormal_in, subnormal_out),
    )


def _ldexp_bits(x, k, out, round_up, subnormal_in, subnormal_out):
    lax = jax.lax
    src = jnp.dtype(x.dtype)
    # the work runs in the wider of the two dtypes (x's significand is exact there)
    wide = src if src.itemsize > out.itemsize else out
    ut, uo = _uint(src), _uint(out)
    bits = lax.bitcast_convert_type(x, ut)
    mag = bits & np.array((1 << (8 * src.itemsize - 1)) - 1).astype(ut)
    a = lax.bitcast_convert_type(mag, src).astype(wide)  # |x| (normal x exact)
    if subnormal_in:
        # a subnormal x is its magnitude bits (an integer, exact in ``wide``) times
        # 2^etiny of its dtype: scaled by 2^(k + etiny) instead of 2^k
        sub_in = mag < np.array(1 << int(jnp.finfo(src).nmant)).astype(ut)
        a = lax.select(sub_in, mag.astype(wide), a)

    def scaled(offset):  # |x| 2^(k + offset), exact where the result is normal
        p1, p2 = pow2_pair(k + np.int32(offset), wide)  # on k's shape, not x's
        if subnormal_in:
            s1, s2 = pow2_pair(k + np.int32(offset + _etiny(src)), wide)
            p1, p2 = jnp.where(sub_in, s1, p1), jnp.where(sub_in, s2, p2)
        return a * p1 * p2

    res = lax.bitcast_convert_type(scaled(0).astype(out), uo)
    if subnormal_out:
        # the result in units of out's smallest subnormal, rounded to an integer:
        # its bit pattern (2^nmant, the smallest normal number, included)
        r = scaled(-_etiny(out))
        even = lax.RoundingMethod.TO_NEAREST_EVEN
        q = lax.ceil(r) if round_up else lax.round(r, even)
        sub_out = r < np.array(2.0 ** int(jnp.finfo(out).nmant)).astype(wide)
        res = lax.select(sub_out, q.astype(uo), res)
    w, wo = 8 * src.itemsize, 8 * out.itemsize
    sign = bits & np.array(1 << (w - 1)).astype(ut)  # the sign bit of x
    if w > wo:
        sign = (sign >> np.array(w - wo).astype(ut)).astype(uo)
    elif w < wo:
        sign = sign.astype(uo) << np.array(wo - w).astype(uo)
    return lax.bitcast_convert_type(res | sign, out)


@_ldexp.defjvp
def _ldexp_jvp(out, round_up, subnormal_in, subnormal_out, primals, tangents):
    x, k = primals
    dx, _ = tangents
    p1, p2 = pow2_pair(k, out)
    y = _ldexp(x, k, out, round_up, subnormal_in, subnormal_out)
    return y, dx.astype(out) * p1 * p2


def cast_exact(x: jax.Array, dtype: Any) -> jax.Array:
    """x in ``dtype``, subnormal numbers included (a plain cast flushes a float32
    subnormal to zero on its way to float64); the identity when x has it. One
    small jitted program per shape and pair of dtypes (so that an eager call is
    one dispatch)."""
    if jnp.dtype(x.dtype) == jnp.dtype(dtype):
        return x
    return _cast_exact(x, jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=1)
def _cast_exact(x, dtype):
    return ldexp_exact(x, 0, dtype)


def nonzero(x: jax.Array) -> jax.Array:
    """x != 0, from the bits (a subnormal x compares equal to 0 where XLA flushes
    it)."""
    return _magnitude_bits(x) != np.array(0).astype(_uint(jnp.dtype(x.dtype)))


def hypot_exact(a: jax.Array, b: jax.Array) -> jax.Array:
    """sqrt(a^2 + b^2) of two error bounds (>= 0), subnormal ones included.

    A bound in the subnormal range (the predicted error of a subnormal payload)
    would be flushed to zero by any arithmetic on it: both are scaled by the
    power of two of the larger (exactly, through the bits), combined, and scaled
    back, rounded up.
    """
    big = jnp.where(_magnitude_bits(a) >= _magnitude_bits(b), a, b)  # (bits)
    e = max_exponent(big[..., None], axis=-1)
    sa = ldexp_exact(a, -e, subnormal_out=False)
    sb = ldexp_exact(b, -e, subnormal_out=False)
    return ldexp_exact(jnp.hypot(sa, sb), e, round_up=True, subnormal_in=False)


def max_exponent(
    x: jax.Array,
    where: jax.Array | None = None,
    axis: Any = None,
    keepdims=False,
    empty: int = 0,
) -> jax.Array:
    """floor(log2 max |x|) over the finite entries of x (where ``where``), int32.

    Read from the bits (exact for subnormal x, which a float max would flush): the
    largest magnitude is the largest of the magnitudes' bit patterns, and its
    exponent field (or, below the normal range, its leading bit) is the exponent;
    ``empty`` where no such entry is nonzero (default 0: an all-zero payload needs
    no scaling).
    """
    lax = jax.lax
    dt = jnp.dtype(x.dtype)
    fi = jnp.finfo(dt)
    nm, w = int(fi.nmant), 8 * dt.itemsize
    ut = _uint(dt)
    mag = _magnitude_bits(x)
    inf_bits = np.array((2 ** (w - 1 - nm) - 1) << nm).astype(ut)
    ok = mag < inf_bits if where is None else (mag < inf_bits) & where
    zero = np.array(0).astype(ut)
    top = jnp.max(lax.select(ok, mag, jnp.full_like(mag, zero)), axis=axis,
                  keepdims=keepdims)  # fmt: skip
    field = (top >> np.array(nm).astype(ut)).astype(jnp.int32)
    lead = np.int32(w - 1) - lax.clz(top).astype(jnp.int32)  # top's leading bit
    e = jnp.where(
        field > 0, field - np.int32(int(fi.maxexp) - 1), lead + np.int32(_etiny(dt))
    )
    return jnp.where(top > zero, e, np.int32(empty))


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
# Traced predicates: facts about values inside a program (for the ``ok`` flag and the
# selection of rows), never a raise; the argument checks are in codedjax._argchecks.


def points_valid(x: jax.Array) -> jax.Array:
    """Traced check: all finite and pairwise distinct (for the ``ok`` flag)."""
    finite = jnp.all(jnp.isfinite(x))
    n = x.shape[0]
    same = x[:, None] == x[None, :]
    distinct = ~jnp.any(same & ~jnp.eye(n, dtype=bool))
    return finite & distinct


@jax.jit
def encoder_points_ok(beta: jax.Array, alpha: jax.Array) -> jax.Array:
    """Traced check of an encoder's points: data points finite and distinct,
    worker points finite (repeats allowed). An encoder given points that fail it
    under ``jit`` returns every coded row NaN; with ``return_ok=True`` it also
    returns this flag (docs/design.md, "Encoders")."""
    return points_valid(beta) & jnp.all(jnp.isfinite(alpha))


def finite_rows(y: jax.Array) -> jax.Array:
    """[M] bool: rows of y [M, ...] with every entry finite."""
    return jnp.all(jnp.isfinite(y.reshape(y.shape[0], -1)), axis=1)
