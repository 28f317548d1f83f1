"""Bad and edge inputs across the public API: no silent wrong answer, no crash.

Every case of the table is run in the modes where it is meaningful (``eager``: the
public function; ``jit``: traced, as under ``jax.jit``; ``vmap``: traced under
``jax.vmap`` over two copies of the arrays; the traced programs are evaluated
equation by equation, so the library's jitted kernels in them are the programs the
eager calls compiled, see ``_traced``) and must end in the outcome the table names:

* ``error``: a ValueError or TypeError whose message starts with the public
  function's name (static mistakes; concrete values the function can check);
* ``ok_false``: a result with ``ok`` False, ``status`` not SUCCESS, ``value`` all
  zeros and ``error`` inf (value-dependent trouble as data);
* ``correct``: ``ok`` True and ``value`` within a tolerance of a float64 numpy
  reference, derived from the dtype and the conditioning.

A case whose outcome differs from the table (a NaN with ``ok`` True, a value off
the reference, an exception of another type or naming another function) fails.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import CubicSpline

import codedjax as cj

M, K, DEG = 8, 3, 2
D = cj.recovery_threshold(K, DEG)  # 5
F = 2
F32 = np.float32

# ----------------------------------------------------------------------------------
# float64 references


def _cheBBETAnp(n, kind=1):
    den = 2.0 * n if kind == 1 else 2.0 * (n - 1)
    return np.sin(np.pi * (n - 1 - 2 * np.arange(n)) / den)


def _usable(y, mask):
    yy = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    return np.asarray(mask) & np.all(np.isfinite(yy), axis=1)


def ref_chebyls(y, mask, alpha, beta, d):
    sel = _usable(y, mask)
    a = np.asarray(alpha, np.float64)
    yy = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    t = np.polynomial.chebyshev.chebvander(a[sel], d - 1)
    c, *_ = np.linalg.lstsq(t, yy[sel], rcond=None)
    tb = np.polynomial.chebyshev.chebvander(np.asarray(beta, np.float64), d - 1)
    scale = np.full(d, np.sqrt(2.0 / a.size))
    scale[0] = np.sqrt(1.0 / a.size)
    kappa = np.linalg.cond(t * scale)
    return (tb @ c).reshape((len(beta),) + y.shape[1:]), kappa


def ref_threshold(y, mask, alpha, beta, d, order):
    sel = _usable(y, mask)
    chosen = [int(i) for i in order if sel[int(i)]][:d]
    m2 = np.zeros(len(alpha), bool)
    m2[chosen] = True
    return ref_chebyls(y, m2, alpha, beta, d)


def ref_berrut(y, mask, nodes, z):
    """Berrut over the distinct usable nodes (lowest index kept), exact at nodes."""
    sel = _usable(y, mask)
    x = np.asarray(nodes, np.float64)
    yy = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    keep, seen = [], set()
    for i in range(len(x)):
        if sel[i] and x[i] not in seen:
            seen.add(x[i])
            keep.append(i)
    keep = sorted(keep, key=lambda i: x[i])
    xs, ys = x[keep], yy[keep]
    out = []
    for zq in np.asarray(z, np.float64):
        hit = np.flatnonzero(xs == zq)
        if hit.size:
            out.append(ys[hit[0]])
            continue
        w = (-1.0) ** np.arange(len(xs)) / (zq - xs)
        out.append(w @ ys / w.sum())
    lam = 0.0
    for zq in np.asarray(z, np.float64):
        if np.any(xs == zq):
            lam = max(lam, 1.0)
            continue
        w = (-1.0) ** np.arange(len(xs)) / (zq - xs)
        lam = max(lam, np.sum(np.abs(w)) / abs(w.sum()))
    return np.array(out).reshape((len(z),) + y.shape[1:]), lam


def ref_nercc(y, mask, nodes, z):
    sel = _usable(y, mask)
    x = np.asarray(nodes, np.float64)
    yy = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    idx, seen = [], set()
    for i in np.flatnonzero(sel):  # merge repeated nodes: the lowest index is kept
        if x[i] not in seen:
            seen.add(x[i])
            idx.append(i)
    idx = sorted(idx, key=lambda i: x[i])
    s = CubicSpline(x[idx], yy[idx], bc_type="natural")
    return s(np.asarray(z, np.float64)).reshape((len(z),) + y.shape[1:]), 4.0


# ----------------------------------------------------------------------------------
# inputs: numpy arrays while the table is built (a jax.numpy operation compiles a
# program per shape and dtype, in every process that collects this file); each
# becomes a jax array once, where the table stores it (_jx)

ALPHA = np.asarray(cj.chebyshev_points(M))
BETA = np.asarray(cj.chebyshev_points(K))
BBETA, BALPHA = (np.asarray(p) for p in cj.bacc_points(K, M))
LAYOUT = cj.repapprox_layout(2, 2, 6)


def _payload(alpha, scale=1.0, dtype=F32):
    """y [M, F]: polynomials of degree < D at the points (exact for ChebyLS)."""
    a = np.asarray(alpha, np.float64)
    y = np.stack([1 + a - 0.5 * a**4, 0.25 - a**2 + a**3], axis=1) * scale
    with np.errstate(over="ignore"):  # a huge scale rounds to inf, as in jax
        return np.asarray(y, dtype)


ALL = np.ones(M, bool)
SOME = np.array([1, 1, 0, 1, 1, 0, 1, 1], bool)  # 6 responders
EXACT_D = np.array([1, 0, 1, 1, 0, 1, 0, 1], bool)  # 5 = D responders
FEW = np.array([1, 0, 0, 1, 0, 1, 0, 1], bool)  # 4 < D
NONE = np.zeros(M, bool)
ONE = np.array([0, 0, 0, 1, 0, 0, 0, 0], bool)


def _subnormal(y, scale):
    """y * scale rounded once in numpy (jax.numpy arithmetic on CPU flushes
    subnormal results to zero)."""
    return (np.asarray(y, np.float64) * scale).astype(np.float32)


def _subnormal_payloads(payload, points, mask):
    """(tag, y, mask): the magnitudes at the low edge of float32, from
    ``payload(points, scale)`` (its columns are the features): every answer
    subnormal, the smallest subnormals (a few spacings), the largest answers just
    above the normal range (the smaller ones and their products below it), and
    one feature of normal answers beside one of subnormal answers."""
    one = np.asarray(payload(points), np.float64)

    def scaled(sc):
        return _subnormal(one, sc)

    mixed = scaled(1.0)
    mixed[..., 1] = scaled(1e-40)[..., 1]
    return (
        ("subnormal", scaled(1e-40), np.ones(len(mask), bool)),
        ("smallest", scaled(1e-44), mask),
        ("near_subnormal", scaled(2.0**-124), mask),
        ("mixed_features", mixed, mask),
    )


def _set(a, i, v):
    """A copy of the numpy array ``a`` with ``a[i] = v``."""
    out = np.array(a, copy=True)
    out[i] = v
    return out


def _with_row(y, i, v):
    return _set(y, i, v)


_JAX: dict = {}


def _jx(a):
    """The jax array of a numpy input, made once per input (a device copy:
    ``jax.device_put`` compiles nothing, ``jnp.asarray`` a program per shape), so
    that every case given the same input passes the same array."""
    if a is None or isinstance(a, jax.Array):
        return a
    hit = _JAX.get(id(a))
    if hit is None or hit[0] is not a:
        hit = _JAX[id(a)] = (a, jax.device_put(a))
    return hit[1]


# ----------------------------------------------------------------------------------
# runner


def _traced(fn, arrays):
    """Trace ``fn(*arrays)`` (every array a tracer, as under ``jax.jit``: no
    concrete-value check can run) and evaluate the traced program one equation at a
    time. The library's own jitted kernels are equations of it, run as the eager
    call runs them: the compiled programs of the eager mode serve this mode too (a
    ``jax.jit`` around them would compile each decoder once more as a new outer
    program). The equations are bound in the caller's context (as an eager call;
    ``jax.core.eval_jaxpr`` would enter each equation's recorded mesh context, a
    different compile-cache key)."""
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*arrays)
    jaxpr, env = closed.jaxpr, {}

    def read(v):
        return v.val if isinstance(v, jax.extend.core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, closed.consts, strict=True))
    env.update(zip(jaxpr.invars, jax.tree_util.tree_leaves(arrays), strict=True))
    for eqn in jaxpr.eqns:
        params = eqn.primitive.get_bind_params(eqn.params)
        out = eqn.primitive.bind(*map(read, eqn.invars), **params)
        out = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, out, strict=True))
    leaves = [read(v) for v in jaxpr.outvars]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), leaves)


def _run(mode, fn, arrays, static):
    def call(*a):
        return fn(*a, **dict(static))

    if mode == "eager":
        return call(*arrays)
    if mode == "jit":
        return _traced(call, arrays)
    # two copies of every array (points included: a batched basis, so the
    # decoder's vmap rule runs a plain vmap of its one-mask kernel), stacked in
    # numpy (no program per shape); the first copy's result, as numpy
    stacked = [jax.device_put(np.stack([np.asarray(a)] * 2)) for a in arrays]
    r = _traced(jax.vmap(call), stacked)
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[0], r)


def _check_ok_false(r, name):
    assert not bool(np.any(np.asarray(r.ok))), f"{name}: ok True, expected False"
    assert np.all(np.asarray(r.status) != int(cj.Status.SUCCESS)), name
    v = np.asarray(r.value)
    exact = np.asarray(getattr(r, "exact", np.zeros(v.shape[0], bool)))
    assert np.all(v[~exact] == 0), f"{name}: value not zeroed when not ok"
    assert np.all(np.isinf(np.asarray(r.error))), f"{name}: error not inf"


def _check_correct(
    r,
    ref,
    name,
    *,
    worker=jnp.float32,
    acc=np.float32,
    floor=0.0,
    covered=False,
    per_column=False,
):
    """``ok`` and ``value`` within a tolerance of the reference: relative to the
    largest reference value (of each payload column with ``per_column``: a column
    of subnormal answers beside normal ones is held to its own size), plus
    ``floor`` times max(1, gain) in units of the accumulation dtype's smallest
    subnormal number where ``floor`` is "spacing" (a value in the subnormal range
    is rounded to that spacing; the answers' own rounding is in the reference)."""
    expect, gain = ref
    assert bool(np.all(np.asarray(r.ok))), (
        f"{name}: ok False (status {np.asarray(r.status)}), expected a value"
    )
    v = np.asarray(r.value, np.float64)
    assert v.shape == expect.shape, f"{name}: shape {v.shape} != {expect.shape}"
    assert np.all(np.isfinite(v)), f"{name}: non-finite value with ok True"
    if floor == "spacing":
        floor = 4 * max(1.0, gain) * float(np.finfo(acc).smallest_subnormal)
    u_w, u_a = cj.unit_roundoff(worker), float(np.finfo(acc).eps) / 2
    rel = 16 * (u_w + 64 * M * u_a) * max(1.0, gain)
    cols = v.reshape(v.shape[0], -1) if per_column else v.reshape(-1, 1)
    want = expect.reshape(cols.shape)
    big = np.max(np.abs(want), axis=0, initial=0.0)
    tol = rel * np.maximum(big, 1e-300) + floor
    errs = np.max(np.abs(cols - want), axis=0, initial=0.0)
    j = int(np.argmax(errs - tol))
    err = float(np.max(errs))
    assert np.all(errs <= tol), (
        f"{name}: error {errs[j]:.3g} > tol {tol[j]:.3g} (column {j}, values "
        f"up to {big[j]:.3g})"
    )
    # ok comes with a finite prediction (answers near the top of the range
    # included); where the error is bounded deterministically (subnormal answers
    # flushed to zero: at most the flush floor) it must cover it
    pred = np.asarray(r.error, np.float64)
    assert np.all(np.isfinite(pred)), f"{name}: predicted error {pred} with ok True"
    if covered:
        assert err <= float(np.min(pred)), f"{name}: error {err:.3g} > predicted {pred}"


def _check_error(exc, fname, name):
    assert isinstance(exc, (ValueError, TypeError)), (
        f"{name}: {type(exc).__name__}: {exc}"
    )
    assert str(exc).startswith(f"{fname}:"), f"{name}: unclear message: {exc}"


# ----------------------------------------------------------------------------------
# the table: (name, public function name, callable, arrays, static kwargs,
#             expected outcome per mode, reference or None)

CASES = []


def case(name, fname, fn, arrays, static, expect, ref=None, **check):
    if isinstance(expect, str):
        expect = {"eager": expect, "jit": expect, "vmap": expect}
    if fname == "chebyls_decode_batched":
        # already batched and jitted inside: eager only (each extra mode would only
        # recompile the same batched program around it)
        expect = {k: v for k, v in expect.items() if k == "eager"}
    arrays = [_jx(a) for a in arrays]
    CASES.append((name, fname, fn, arrays, static, expect, ref, check))


EAGER_ERR = {"eager": "error", "jit": "ok_false", "vmap": "ok_false"}

# ---- least-squares decoders: chebyls_decode and threshold_decode ----------------
ORDER = np.arange(M, dtype=np.int32)[::-1]


def _ls_cases(fname, fn, extra, ref_fn):
    st = {"num_coeffs": D}
    y = _payload(ALPHA)

    def add(tag, arrays, expect, **kw):
        case(f"{fname}/{tag}", fname, fn, list(arrays) + extra, st, expect, **kw)

    def refd(yv, mk, **kw):
        return ref_fn(yv, mk, ALPHA, BETA, D, *[np.asarray(e) for e in extra])

    add("all", (y, ALL, ALPHA, BETA), "correct", ref=refd(y, ALL))
    add("some", (y, SOME, ALPHA, BETA), "correct", ref=refd(y, SOME))
    add("exactly_D", (y, EXACT_D, ALPHA, BETA), "correct", ref=refd(y, EXACT_D))
    add("too_few", (y, FEW, ALPHA, BETA), "ok_false")
    add("none", (y, NONE, ALPHA, BETA), "ok_false")
    yn = _with_row(y, 0, np.nan)
    add("nan_row", (yn, ALL, ALPHA, BETA), "correct", ref=refd(yn, ALL))
    yi = _with_row(y, 3, np.inf)
    add("inf_row", (yi, ALL, ALPHA, BETA), "correct", ref=refd(yi, ALL))
    ym = _with_row(y, 2, -np.inf)
    add("inf_missing_row", (ym, SOME, ALPHA, BETA), "correct", ref=refd(ym, SOME))
    yall = np.full_like(y, np.nan)
    add("all_nan", (yall, ALL, ALPHA, BETA), "ok_false")
    y4 = _set(_set(_set(y, (0, 0), np.nan), (1, 1), np.inf), (4, 0), np.nan)
    # 3 bad rows of 8 leave exactly D = 5 usable: decodable
    add("nan_inf_mix", (y4, ALL, ALPHA, BETA), "correct", ref=refd(y4, ALL))
    big = _payload(ALPHA, 1e38)
    add("huge", (big, ALL, ALPHA, BETA), "correct", ref=refd(big, ALL))
    add("huge_some", (big, SOME, ALPHA, BETA), "correct", ref=refd(big, SOME))
    tiny = _payload(ALPHA, 1e-30)
    add("tiny", (tiny, ALL, ALPHA, BETA), "correct", ref=refd(tiny, ALL))
    # magnitudes in and near the subnormal range decode as accurately as any
    # other, to the spacing of the subnormal numbers (exact scaling through the
    # bits), column by column, with a prediction that covers the error
    edge = dict(floor="spacing", covered=True, per_column=True)
    for tag, yv, mk in _subnormal_payloads(_payload, ALPHA, SOME):
        add(tag, (yv, mk, ALPHA, BETA), "correct", ref=refd(yv, mk), **edge)
    ybs = _payload(ALPHA, 1e-39).astype(jnp.bfloat16)  # bf16 subnormal answers
    add("bf16_subnormal", (ybs, SOME, ALPHA, BETA), "correct",
        ref=refd(ybs.astype(F32), SOME), worker=jnp.bfloat16, **edge)  # fmt: skip
    zero = np.zeros_like(y)
    add("zeros", (zero, ALL, ALPHA, BETA), "correct", ref=refd(zero, ALL))
    y1 = y[:, 0]
    add("y_1d", (y1, SOME, ALPHA, BETA), "correct", ref=refd(y1, SOME))
    y3 = np.stack([y, 2 * y], axis=2)
    add("y_3d", (y3, SOME, ALPHA, BETA), "correct", ref=refd(y3, SOME))
    ybf = y.astype(jnp.bfloat16)
    add(
        "bf16",
        (ybf, SOME, ALPHA, BETA),
        "correct",
        ref=refd(ybf.astype(jnp.float32), SOME),
        worker=jnp.bfloat16,
    )
    yf16 = (y * 3e4).astype(jnp.float16)  # |y| <= 4.5e4 < 65504
    add(
        "f16_near_max",
        (yf16, SOME, ALPHA, BETA),
        "correct",
        ref=refd(yf16.astype(jnp.float32), SOME),
        worker=jnp.float16,
    )
    add("y_int", (y.astype(jnp.int32), ALL, ALPHA, BETA), "error")
    add("y_short", (y[:-1], ALL[:-1], ALPHA, BETA), "error")
    add("mask_int", (y, ALL.astype(jnp.int32), ALPHA, BETA), "error")
    add("mask_short", (y, ALL[:-1], ALPHA, BETA), "error")
    add("mask_2d", (y, ALL[None], ALPHA, BETA), "error")
    add("alpha_short", (y, ALL, ALPHA[:-1], BETA), "error")
    add("alpha_2d", (y, ALL, ALPHA[None], BETA), "error")
    add("alpha_int", (y, ALL, np.arange(M, dtype=np.int32), BETA), "error")
    dup = _set(ALPHA, 1, ALPHA[0])
    add("alpha_dup", (y, ALL, dup, BETA), EAGER_ERR)
    add("alpha_nan", (y, ALL, _set(ALPHA, 2, np.nan), BETA), EAGER_ERR)
    add("alpha_inf", (y, ALL, _set(ALPHA, 2, np.inf), BETA), EAGER_ERR)
    add("beta_nan", (y, ALL, ALPHA, _set(BETA, 0, np.nan)), EAGER_ERR)
    add("beta_dup", (y, ALL, ALPHA, _set(BETA, 1, BETA[0])), EAGER_ERR)
    add("beta_2d", (y, ALL, ALPHA, BETA[None]), "error")


_ls_cases("chebyls_decode", cj.chebyls_decode, [], ref_chebyls)


def _thr(y, mask, alpha, beta, order, **kw):
    return cj.threshold_decode(y, mask, alpha, beta, order=order, **kw)


_ls_cases("threshold_decode", _thr, [ORDER], ref_threshold)


def _st_cases():
    y = _payload(ALPHA)
    base = [y, ALL, ALPHA, BETA]
    for fname, fn, extra in (
        ("chebyls_decode", cj.chebyls_decode, []),
        ("threshold_decode", _thr, [ORDER]),
    ):
        for tag, st in (
            ("D_gt_M", {"num_coeffs": M + 1}),
            ("D_zero", {"num_coeffs": 0}),
            ("D_float", {"num_coeffs": 3.0}),
            ("D_bool", {"num_coeffs": True}),
            ("acc_bf16", {"num_coeffs": D, "accum_dtype": jnp.bfloat16}),
            ("acc_int", {"num_coeffs": D, "accum_dtype": jnp.int32}),
            ("acc_f64_no_x64", {"num_coeffs": D, "accum_dtype": jnp.float64}),
            ("acc_bad", {"num_coeffs": D, "accum_dtype": "nonsense"}),
        ):
            case(f"{fname}/{tag}", fname, fn, base + extra, st, "error")
        case(
            f"{fname}/acc_str_f32",
            fname,
            fn,
            base + extra,
            {"num_coeffs": D, "accum_dtype": "float32"},
            "correct",
            ref=(ref_chebyls if not extra else ref_threshold)(
                y, ALL, ALPHA, BETA, D, *[np.asarray(e) for e in extra]
            ),
        )
        case(
            f"{fname}/y_none",
            fname,
            fn,
            [None, ALL, ALPHA, BETA] + extra,
            {"num_coeffs": D},
            {"eager": "error"},
        )
    # threshold order rules
    f, fn = "threshold_decode", _thr
    st = {"num_coeffs": D}
    rep = np.array([0, 0, 1, 2, 3, 4, 5, 6], np.int32)
    case(f"{f}/order_repeated", f, fn, base + [rep], st, EAGER_ERR)
    neg = _set(ORDER, 0, -1)
    case(f"{f}/order_negative", f, fn, base + [neg], st, EAGER_ERR)
    big = _set(ORDER, 0, M)
    case(f"{f}/order_out_of_range", f, fn, base + [big], st, EAGER_ERR)
    short = ORDER[:3]
    case(f"{f}/order_short", f, fn, base + [short], st, "ok_false")
    case(f"{f}/order_float", f, fn, base + [ORDER.astype(jnp.float32)], st, "error")
    long = np.arange(M + 1, dtype=np.int32)
    case(f"{f}/order_long", f, fn, base + [long], st, "error")
    case(f"{f}/order_2d", f, fn, base + [ORDER[None]], st, "error")
    spread = np.asarray(cj.spread_order(_jx(SOME), num_coeffs=D))
    case(
        f"{f}/spread_order",
        f,
        fn,
        [y, SOME, ALPHA, BETA, spread],
        st,
        "correct",
        ref=ref_threshold(y, SOME, ALPHA, BETA, D, np.asarray(spread)),
    )


_st_cases()

# ---- interpolating decoders: berrut_decode, nercc_decode -------------------------


def _interp_cases(fname, fn, ref_fn, static, min_nodes):
    y = np.asarray(np.sin(3 * np.asarray(BALPHA, np.float64))[:, None] * [1, 2], F32)

    def add(tag, arrays, expect, **kw):
        case(f"{fname}/{tag}", fname, fn, arrays, static, expect, **kw)

    def refd(yv, mk, nodes=BALPHA):
        return ref_fn(yv, mk, nodes, BBETA)

    add("all", (y, ALL, BALPHA, BBETA), "correct", ref=refd(y, ALL))
    add("some", (y, SOME, BALPHA, BBETA), "correct", ref=refd(y, SOME))
    add("few", (y, FEW, BALPHA, BBETA), "correct", ref=refd(y, FEW))
    if min_nodes == 1:
        add("one", (y, ONE, BALPHA, BBETA), "correct", ref=refd(y, ONE))
        add("none", (y, NONE, BALPHA, BBETA), "ok_false")
    else:
        add("one", (y, ONE, BALPHA, BBETA), EAGER_ERR)
        add("none", (y, NONE, BALPHA, BBETA), EAGER_ERR)
    yn = _with_row(y, 0, np.nan)
    add("nan_row", (yn, ALL, BALPHA, BBETA), "correct", ref=refd(yn, ALL))
    yi = _with_row(y, 5, -np.inf)
    add("inf_row", (yi, SOME, BALPHA, BBETA), "correct", ref=refd(yi, SOME))
    yall = np.full_like(y, np.inf)
    add(
        "all_inf",
        (yall, ALL, BALPHA, BBETA),
        "ok_false" if min_nodes == 1 else EAGER_ERR,
    )
    with np.errstate(over="ignore"):  # rows of inf, as a jax product
        big = y * F32(3e38)
    add("huge", (big, ALL, BALPHA, BBETA), "correct", ref=refd(big, ALL))
    # built in numpy: a jax.numpy product would flush the subnormals to zero
    edge = dict(floor="spacing", covered=True, per_column=True)
    for tag, yv, mk in _subnormal_payloads(lambda a, sc=1.0: y * sc, BALPHA, SOME):
        add(tag, (yv, mk, BALPHA, BBETA), "correct", ref=refd(yv, mk), **edge)
    ybs = _subnormal(y, 1e-39).astype(jnp.bfloat16)  # bf16 subnormal answers
    add("bf16_subnormal", (ybs, SOME, BALPHA, BBETA), "correct",
        ref=refd(ybs.astype(F32), SOME), worker=jnp.bfloat16, **edge)  # fmt: skip
    dup = _set(BALPHA, 1, BALPHA[0])
    ydup = _set(y, 1, y[0])
    add("alpha_repeated", (ydup, ALL, dup, BBETA), "correct", ref=refd(ydup, ALL, dup))
    ybeta = np.asarray(np.sin(3 * np.asarray(BALPHA, np.float64))[:, None], F32)
    at_node = BALPHA[np.array([1, 3, 6])]
    add(
        "beta_at_nodes",
        (ybeta, ALL, BALPHA, at_node),
        "correct",
        ref=ref_fn(ybeta, ALL, BALPHA, at_node),
    )
    add("alpha_nan", (y, ALL, _set(BALPHA, 2, np.nan), BBETA), EAGER_ERR)
    add("beta_inf", (y, ALL, BALPHA, _set(BBETA, 0, np.inf)), EAGER_ERR)
    add("y_int", (y.astype(jnp.int32), ALL, BALPHA, BBETA), "error")
    add("y_short", (y[:-1], ALL, BALPHA, BBETA), "error")
    add("mask_float", (y, ALL.astype(F32), BALPHA, BBETA), "error")
    add("mask_2d", (y, ALL[None], BALPHA, BBETA), "error")
    add("alpha_2d", (y, ALL, BALPHA[None], BBETA), "error")
    add("beta_scalar", (y, ALL, BALPHA, BBETA[0]), "error")
    ybf = y.astype(jnp.bfloat16)
    add(
        "bf16",
        (ybf, SOME, BALPHA, BBETA),
        "correct",
        ref=refd(ybf.astype(F32), SOME),
        worker=jnp.bfloat16,
    )
    add("y_none", (None, ALL, BALPHA, BBETA), {"eager": "error"})
    for tag, st in (
        ("acc_bf16", {"accum_dtype": jnp.bfloat16}),
        ("acc_f64_no_x64", {"accum_dtype": jnp.float64}),
    ):
        case(
            f"{fname}/{tag}",
            fname,
            fn,
            [y, ALL, BALPHA, BBETA],
            {**static, **st},
            "error",
        )


_interp_cases("berrut_decode", cj.berrut_decode, ref_berrut, {}, 1)
_interp_cases("nercc_decode", cj.nercc_decode, ref_nercc, {"smoothing": 0.0}, 2)


def _nercc_lam(y, mask, alpha, beta, lam):
    return cj.nercc_decode(y, mask, alpha, beta, smoothing=lam)


for tag, lam in (("neg", -1.0), ("nan", float("nan")), ("inf", float("inf"))):
    # a concrete smoothing is checked; a traced one gives ok False (BAD_POINTS)
    case(
        f"nercc_decode/smoothing_{tag}",
        "nercc_decode",
        _nercc_lam,
        [_payload(BALPHA), ALL, BALPHA, BBETA, np.asarray(lam, F32)],
        {},
        EAGER_ERR,
    )
case(
    "nercc_decode/smoothing_vector",
    "nercc_decode",
    cj.nercc_decode,
    [_payload(BALPHA), ALL, BALPHA, BBETA],
    {"smoothing": (0.1, 0.2)},
    "error",
)

# ---- RepApprox -------------------------------------------------------------------


def _rep(y, mask, smoothing=0.0, **kw):
    return cj.repapprox_decode(y, mask, LAYOUT, smoothing=smoothing, **kw)


def _rep_cases():
    nodes = np.asarray(LAYOUT.nodes)
    beta = np.asarray(LAYOUT.beta)
    x = np.asarray([[0.3, -1.0], [2.0, 0.5]], F32)
    y = np.asarray(cj.repapprox_encode(jnp.asarray(x), LAYOUT)) ** 2
    m6 = np.ones(6, bool)
    f = "repapprox_decode"

    def add(tag, arrays, expect, static=None, **kw):
        case(f"{f}/{tag}", f, _rep, arrays, static or {}, expect, **kw)

    add("all", (y, m6), "correct", ref=ref_berrut(y, m6, nodes, beta))
    lost = np.array([0, 0, 1, 1, 1, 1], bool)
    add("group_lost", (y, lost), "correct", ref=ref_berrut(y, lost, nodes, beta))
    add("none", (y, np.zeros(6, bool)), "ok_false")
    yn = _set(y, 2, np.nan)
    add("nan_replica", (yn, m6), "correct", ref=ref_berrut(yn, m6, nodes, beta))
    with np.errstate(over="ignore"):  # entries of inf, as a jax product
        big = y * F32(1e38)
    add("huge", (big, m6), "correct", ref=ref_berrut(big, m6, nodes, beta))
    edge = dict(floor="spacing", covered=True, per_column=True)
    for tag, yv, mk in _subnormal_payloads(lambda a, sc=1.0: y * sc, nodes, lost):
        add(tag, (yv, mk), "correct", ref=ref_berrut(yv, mk, nodes, beta), **edge)
    add("y_int", (y.astype(jnp.int32), m6), "error")
    add("y_short", (y[:-1], m6[:-1]), "error")
    add("mask_2d", (y, m6[None]), "error")
    add("fallback_bad", (y, m6), "error", static={"fallback": "lagrange"})
    add(
        "smoothing_neg",
        (y, m6, np.asarray(-1.0, F32)),
        EAGER_ERR,
        static={"fallback": "nercc"},
    )
    add("acc_f64", (y, m6), "error", static={"accum_dtype": jnp.float64})


_rep_cases()

# ---- the learned-parity code (ParM): a Code's decode, K = 6 in groups of 3, M = 8 --

# its parity model is the identity (exact): a stated parity error of 0
PARITY = cj.parity_code(num_inputs=6, group=3, parity_error=0.0)


def ref_parity(y, mask, k=3):
    """A rebuilt answer is its group's parity minus the group's other answers."""
    sel = _usable(y, mask)
    yy = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    kk = 6
    out = yy[:kk].copy()
    for g in range(kk // k):
        rows = list(range(g * k, g * k + k))
        lost = [i for i in rows if not sel[i]]
        assert len(lost) <= 1 and (not lost or sel[kk + g]), "not decodable"
        for i in lost:
            out[i] = yy[kk + g] - sum(yy[j] for j in rows if j != i)
    return out.reshape((kk,) + y.shape[1:]), float(k)


def _parity_cases():
    f = "ParityCode.decode"
    x = np.asarray(np.linspace(-1, 1, 12).reshape(6, 2), F32)
    y = np.asarray(
        PARITY.encode(jnp.asarray(x))
    )  # the identity as base model and parity model: exact
    m8 = np.ones(8, bool)

    def add(tag, arrays, expect, **kw):
        case(f"{f}/{tag}", f, PARITY.decode, arrays, {}, expect, **kw)

    one_each = np.array([1, 0, 1, 1, 1, 0, 1, 1], bool)  # one lost per group
    par_lost = np.array([1, 1, 1, 1, 1, 1, 0, 0], bool)
    for tag, mk in (
        ("all", m8),
        ("one_lost_each", one_each),
        ("parity_lost", par_lost),
    ):
        add(tag, (y, mk), "correct", ref=ref_parity(y, mk))
    add("two_lost", (y, np.array([0, 0, 1, 1, 1, 1, 1, 1], bool)), "ok_false")
    add("base_and_parity", (y, np.array([1, 1, 1, 0, 1, 1, 1, 0], bool)), "ok_false")
    add("none", (y, np.zeros(8, bool)), "ok_false")
    yn = _with_row(y, 4, np.nan)
    add("nan_row", (yn, m8), "correct", ref=ref_parity(yn, m8))
    yi = _with_row(y, 0, -np.inf)
    add("inf_row", (yi, one_each), "ok_false")  # rows 0 and 1 of group 0 lost
    add("nan_parity", (_with_row(y, 7, np.nan), one_each), "ok_false")
    big = np.asarray(
        PARITY.encode(jnp.asarray(x * F32(1e38)))
    )  # parity answers up to 3e38: representable
    add("huge", (big, one_each), "correct", ref=ref_parity(big, one_each))
    tiny = y * F32(1e-30)
    add("tiny", (tiny, one_each), "correct", ref=ref_parity(tiny, one_each))
    # rebuilt as accurately as any other (exact scaling); copied bit for bit
    edge = dict(floor="spacing", covered=True, per_column=True)
    for tag, yv, mk in _subnormal_payloads(lambda a, sc=1.0: y * sc, y, one_each):
        add(tag, (yv, mk), "correct", ref=ref_parity(yv, mk), **edge)
    add("zeros", (np.zeros_like(y), one_each), "correct",
        ref=ref_parity(np.zeros((8, 2)), one_each))  # fmt: skip
    # other payload shapes and dtypes compile another program: eager only
    y3 = np.stack([y, 2 * y], axis=2)
    eager = {"eager": "correct"}
    add("y_3d", (y3, one_each), eager, ref=ref_parity(y3, one_each))
    ybf = y.astype(jnp.bfloat16)
    add(
        "bf16",
        (ybf, one_each),
        eager,
        ref=ref_parity(ybf.astype(jnp.float32), one_each),
        worker=jnp.bfloat16,
    )
    add("y_int", (y.astype(jnp.int32), m8), "error")
    add("y_short", (y[:-1], m8), "error")
    add("mask_int", (y, m8.astype(jnp.int32)), "error")
    add("mask_short", (y, m8[:-1]), "error")


_parity_cases()

# ---- batched ChebyLS -------------------------------------------------------------


def _batched_cases():
    f = "chebyls_decode_batched"
    fn = cj.chebyls_decode_batched
    y = _payload(ALPHA)
    masks = np.stack([ALL, SOME, EXACT_D, FEW])
    st = {"num_coeffs": D}
    refs = [ref_chebyls(y, m, ALPHA, BETA, D)[0] for m in (ALL, SOME, EXACT_D)]

    def batched_ref(yv, ms):
        out = [ref_chebyls(yv, m, ALPHA, BETA, D) for m in ms]
        return np.stack([o[0] for o in out]), max(o[1] for o in out)

    good = masks[:3]
    case(
        f"{f}/shared",
        f,
        fn,
        [y, good, ALPHA, BETA],
        st,
        "correct",
        ref=batched_ref(y, good),
    )
    yb = np.stack([y, 2 * y, -y])
    ref_b = (np.stack([refs[0], 2 * refs[1], -refs[2]]), batched_ref(y, good)[1])
    case(f"{f}/per_mask", f, fn, [yb, good, ALPHA, BETA], st, "correct", ref=ref_b)
    few = np.stack([FEW, NONE, FEW])
    case(f"{f}/too_few", f, fn, [y, few, ALPHA, BETA], st, "ok_false")
    big = _payload(ALPHA, 1e38)
    case(
        f"{f}/huge",
        f,
        fn,
        [big, good, ALPHA, BETA],
        st,
        "correct",
        ref=batched_ref(big, good),
    )
    yn = _with_row(y, 1, np.nan)
    case(
        f"{f}/nan_row",
        f,
        fn,
        [yn, good, ALPHA, BETA],
        st,
        "correct",
        ref=batched_ref(yn, good),
    )
    case(f"{f}/zero_masks", f, fn, [y, masks[:0], ALPHA, BETA], st, "error")
    case(f"{f}/masks_1d", f, fn, [y, ALL, ALPHA, BETA], st, "error")
    case(
        f"{f}/masks_int", f, fn, [y, masks.astype(jnp.int32), ALPHA, BETA], st, "error"
    )
    amb = np.ones((M, M), bool)
    ysq = np.ones((M, M, 2), F32)
    case(f"{f}/ambiguous", f, fn, [ysq, amb, ALPHA, BETA], st, "error")
    case(
        f"{f}/shared_y_wrong",
        f,
        fn,
        [yb, good, ALPHA, BETA],
        {**st, "shared_y": True},
        "error",
    )
    case(
        f"{f}/shared_y_str",
        f,
        fn,
        [y, good, ALPHA, BETA],
        {**st, "shared_y": "yes"},
        "error",
    )
    case(f"{f}/y_bad", f, fn, [y[:-1], good, ALPHA, BETA], st, "error")
    case(
        f"{f}/acc_f64",
        f,
        fn,
        [y, good, ALPHA, BETA],
        {**st, "accum_dtype": jnp.float64},
        "error",
    )


_batched_cases()

# ---- codes whose answers are pairs or whose basis is dense: the circle codes'
# decode (answers [M, 2, F], real and imaginary part) and the random code's


CIRCLE = cj.circle_code(num_inputs=K, num_workers=M, degree=DEG)
CIRCLE_T = cj.circle_code(num_inputs=K, num_workers=M, degree=DEG, decoder="threshold")
RANDOM = cj.random_code(num_inputs=K, num_workers=M, seed=3)


def ref_circle(y, mask, d=D, order=None):
    """float64 least squares in the monomial basis at the M-th roots of unity."""
    sel = _usable(y, mask)
    if order is not None:
        chosen = [int(i) for i in order if sel[int(i)]][:d]
        sel = np.zeros(M, bool)
        sel[chosen] = True
    yy = np.asarray(y, np.float64).reshape(M, 2, -1)
    yy = np.where(sel[:, None, None], yy, 0.0)  # rows outside sel hold anything
    yc = yy[:, 0] + 1j * yy[:, 1]
    v = np.exp(2j * np.pi * np.outer(np.arange(M), np.arange(d)) / M)
    c, *_ = np.linalg.lstsq(v[sel], yc[sel], rcond=None)
    vb = np.exp(2j * np.pi * np.outer(np.arange(K), np.arange(d)) / K)
    out = np.real(vb @ c).reshape((K,) + y.shape[2:])
    return out, np.linalg.cond(v[sel])


def ref_random(y, mask):
    sel = _usable(y, mask)
    g = np.asarray(RANDOM.generator(), np.float64)
    yy = np.where(sel[:, None], np.asarray(y, np.float64).reshape(M, -1), 0.0)
    z, *_ = np.linalg.lstsq(g[sel], yy[sel], rcond=None)
    return z.reshape((K,) + y.shape[1:]), np.linalg.cond(g[sel])


def _circle_dec(y, mask):
    return CIRCLE.decode(y, mask)


def _circle_thr(y, mask):
    return CIRCLE_T.decode(y, mask, order=ORDER)


def _random_dec(y, mask):
    return RANDOM.decode(y, mask)


def _code_cases():
    x = np.asarray(np.random.default_rng(4).uniform(-1, 1, (K, F)), F32)
    e = CIRCLE.encode(jnp.asarray(x))
    w = jax.lax.complex(e[:, 0], e[:, 1])
    w = np.asarray(w**2 - 0.5 * w)  # a degree-2 worker, in complex arithmetic
    yc = np.stack([np.real(w), np.imag(w)], axis=1)  # [M, 2, F]
    yr = np.asarray(1.5 * RANDOM.encode(jnp.asarray(x)))  # a linear worker
    for fname, fn, y, ref_fn, few in (
        ("CircleCode.decode", _circle_dec, yc, ref_circle, FEW),
        (
            "CircleThresholdCode.decode",
            _circle_thr,
            yc,
            lambda yv, mk: ref_circle(yv, mk, order=np.asarray(ORDER)),
            FEW,
        ),
        ("RandomCode.decode", _random_dec, yr, ref_random, ONE),
    ):

        def add(tag, arrays, expect, fname=fname, fn=fn, **kw):
            case(f"{fname}/{tag}", fname, fn, list(arrays), {}, expect, **kw)

        for tag, mk in (("all", ALL), ("some", SOME), ("exactly_D", EXACT_D)):
            add(tag, (y, mk), "correct", ref=ref_fn(y, mk))
        add("too_few", (y, few), "ok_false")
        add("none", (y, NONE), "ok_false")
        yn = _with_row(y, 0, np.nan)
        add("nan_row", (yn, ALL), "correct", ref=ref_fn(yn, ALL))
        yi = _with_row(y, 3, np.inf)
        add("inf_row", (yi, SOME), "correct", ref=ref_fn(yi, SOME))
        add("all_nan", (np.full_like(y, np.nan), ALL), "ok_false")
        big = y * F32(1e30)
        add("huge", (big, SOME), "correct", ref=ref_fn(big, SOME))
        tiny = y * F32(1e-30)
        add("tiny", (tiny, ALL), "correct", ref=ref_fn(tiny, ALL))
        sub = _subnormal(y, 1e-40)
        add("subnormal", (sub, SOME), "correct", ref=ref_fn(sub, SOME),
            floor="spacing", covered=True, per_column=True)  # fmt: skip
        add("zeros", (np.zeros_like(y), ALL), "correct", ref=ref_fn(0 * y, ALL))
        ybf = y.astype(jnp.bfloat16)
        ref_bf = ref_fn(ybf.astype(F32), SOME)
        # eager only: the other modes would compile the same program for bf16
        add("bf16", (ybf, SOME), {"eager": "correct"}, ref=ref_bf, worker=jnp.bfloat16)
        add("y_int", (y.astype(jnp.int32), ALL), "error")
        add("y_short", (y[:-1], ALL), "error")
        add("mask_int", (y, ALL.astype(jnp.int32)), "error")
        add("mask_2d", (y, ALL[None]), "error")
    # a circle code's answers are (real, imaginary) pairs on axis 1
    add = functools.partial(case, fn=_circle_dec, static={}, expect="error")
    add("CircleCode.decode/not_pairs", "CircleCode.decode", arrays=[yr[:, :1], ALL])


_code_cases()

# the helpers and the tests below call the library with the same inputs as jax
# arrays (those of the table)
ALPHA, BETA, BBETA, BALPHA, ALL, SOME, EXACT_D, FEW, NONE, ONE, ORDER = map(
    _jx, (ALPHA, BETA, BBETA, BALPHA, ALL, SOME, EXACT_D, FEW, NONE, ONE, ORDER)
)

# ---- decoding matrices, encoders and helpers (eager only: they take Python
# sizes or return plain arrays) -----------------------------------------------------

EAGER = {"eager": "error"}


def helper(name, fname, thunk, expect="error", check=None):
    """A call whose outcome is an error, or a value that ``check`` verifies."""
    CASES.append((name, fname, thunk, None, None, {"eager": expect}, check, {}))


def _helper_cases():
    pts = cj.chebyshev_points
    helper(
        "chebyshev_points/int_dtype",
        "chebyshev_points",
        lambda: pts(5, dtype=jnp.int32),
    )
    helper(
        "chebyshev_points/bool_dtype", "chebyshev_points", lambda: pts(5, dtype=bool)
    )
    helper("chebyshev_points/bad_dtype", "chebyshev_points", lambda: pts(5, dtype="x"))
    helper("chebyshev_points/n0", "chebyshev_points", lambda: pts(0))
    helper("chebyshev_points/n_float", "chebyshev_points", lambda: pts(3.0))
    helper("chebyshev_points/kind3", "chebyshev_points", lambda: pts(3, kind=3))
    helper("chebyshev_points/kind2_n1", "chebyshev_points", lambda: pts(1, kind=2))
    helper(
        "chebyshev_points/bf16",
        "chebyshev_points",
        lambda: pts(5, dtype=jnp.bfloat16),
        "correct",
        lambda v: np.allclose(np.asarray(v, np.float64), _cheBBETAnp(5), atol=4e-3),
    )
    helper(
        "chebyshev_points/n1",
        "chebyshev_points",
        lambda: pts(1),
        "correct",
        lambda v: np.asarray(v).tolist() == [0.0],
    )
    cv = cj.chebyshev_vandermonde
    helper("chebyshev_vandermonde/D0", "chebyshev_vandermonde", lambda: cv(ALPHA, 0))
    helper(
        "chebyshev_vandermonde/int_x",
        "chebyshev_vandermonde",
        lambda: cv(jnp.arange(3), 2),
    )
    helper(
        "chebyshev_vandermonde/nan_x",
        "chebyshev_vandermonde",
        lambda: cv(jnp.array([0.5, jnp.nan]), 3),
        "correct",
        lambda v: np.isnan(np.asarray(v)[1, 1]) and np.asarray(v)[0, 2] == -0.5,
    )
    key = jax.random.key(0)
    sm = cj.sample_masks
    helper(
        "sample_masks/N_gt_M",
        "sample_masks",
        lambda: sm(key, num_workers=3, num_responses=4),
    )
    helper(
        "sample_masks/M0",
        "sample_masks",
        lambda: sm(key, num_workers=0, num_responses=0),
    )
    helper(
        "sample_masks/N_neg",
        "sample_masks",
        lambda: sm(key, num_workers=3, num_responses=-1),
    )
    helper(
        "sample_masks/int_key",
        "sample_masks",
        lambda: sm(0, num_workers=3, num_responses=1),
    )
    helper(
        "sample_masks/neg_shape",
        "sample_masks",
        lambda: sm(key, num_workers=3, num_responses=1, shape=(-1,)),
    )
    helper(
        "sample_masks/shape_str",
        "sample_masks",
        lambda: sm(key, num_workers=3, num_responses=1, shape="ab"),
    )
    helper(
        "sample_masks/N0",
        "sample_masks",
        lambda: sm(key, num_workers=4, num_responses=0, shape=(3,)),
        "correct",
        lambda v: not np.any(np.asarray(v)),
    )
    helper(
        "sample_masks/NM",
        "sample_masks",
        lambda: sm(key, num_workers=4, num_responses=4, shape=(3,)),
        "correct",
        lambda v: np.all(np.asarray(v)),
    )
    sa = cj.sample_arrivals
    kw = {"num_workers": 6, "num_responses": 3}
    sexp, par = cj.ShiftedExponential, cj.Pareto
    for tag, fname, make in (
        ("shift_inf", "ShiftedExponential", lambda: sexp(float("inf"), 1.0)),
        ("shift_nan", "ShiftedExponential", lambda: sexp(float("nan"), 1.0)),
        ("shift_neg", "ShiftedExponential", lambda: sexp(-1.0, 1.0)),
        ("shift_overflows", "ShiftedExponential", lambda: sexp(1e39, 1.0)),
        ("mean_inf", "ShiftedExponential", lambda: sexp(0.0, float("inf"))),
        ("mean_zero", "ShiftedExponential", lambda: sexp(0.0, 0.0)),
        ("mean_str", "ShiftedExponential", lambda: sexp(0.0, "fast")),
        ("scale_zero", "Pareto", lambda: par(0.0, 2.0)),
        ("shape_zero", "Pareto", lambda: par(1.0, 0.0)),
        ("shape_nan", "Pareto", lambda: par(1.0, float("nan"))),
        # every worker's latency would overflow float32 (the median 2^1000)
        ("tiny_shape", "Pareto", lambda: par(1.0, 1e-3)),
        ("model_bad", "sample_arrivals", lambda: sa(key, **kw, model="weibull")),
        ("N_gt_M", "sample_arrivals", lambda: sa(key, **{**kw, "num_responses": 7})),
        ("N0", "sample_arrivals", lambda: sa(key, **{**kw, "num_responses": 0})),
        ("spec_tiny_shape", "parse_latency", lambda: cj.parse_latency("pareto:1,1e-3")),
        ("spec_bad", "parse_latency", lambda: cj.parse_latency("weibull:1,2")),
        (
            "traced_shift",
            "ShiftedExponential",
            lambda: jax.jit(lambda s: sa(key, model=sexp(s, 1.0), **kw).time)(1.0),
        ),
    ):
        helper(f"sample_arrivals/{tag}", fname, make)

    def varies(model):
        masks = sa(key, **kw, model=model, shape=(64,)).mask
        return len({tuple(r) for r in np.asarray(masks).tolist()}) > 8

    for tag, model in (
        ("huge_shift_varies", sexp(1e30, 1.0)),
        ("tiny_mean_varies", sexp(1.0, 1e-30)),
        ("small_shape_varies", par(1.0, 0.05)),  # most latencies finite, many inf
        ("huge_scale_varies", par(1e38, 2.0)),
    ):
        helper(
            f"sample_arrivals/{tag}",
            "sample_arrivals",
            lambda m=model: m,
            "correct",
            varies,
        )
    fa = cj.first_arrivals
    helper(
        "first_arrivals/nan_latency",
        "first_arrivals",
        lambda: fa(jnp.array([jnp.nan, 1.0, 2.0, 3.0]), num_responses=2),
        "correct",
        lambda a: float(a.time) == 2.0 and np.asarray(a.mask).tolist() == [0, 1, 1, 0],
    )
    helper(
        "first_arrivals/too_many_nan",
        "first_arrivals",
        lambda: fa(jnp.array([jnp.nan, 1.0, jnp.nan]), num_responses=2),
        "correct",
        lambda a: np.isinf(float(a.time)),
    )
    helper(
        "first_arrivals/inf_latency",
        "first_arrivals",
        lambda: fa(jnp.array([jnp.inf, 1.0, 2.0]), num_responses=3),
        "correct",
        lambda a: np.isinf(float(a.time)) and int(np.asarray(a.order)[-1]) == 0,
    )
    helper(
        "first_arrivals/int",
        "first_arrivals",
        lambda: fa(jnp.arange(3), num_responses=1),
    )
    helper(
        "first_arrivals/N0", "first_arrivals", lambda: fa(jnp.ones(3), num_responses=0)
    )
    helper(
        "first_arrivals/N_gt_M",
        "first_arrivals",
        lambda: fa(jnp.ones(3), num_responses=4),
    )
    helper(
        "first_arrivals/scalar",
        "first_arrivals",
        lambda: fa(jnp.ones(()), num_responses=1),
    )
    helper("first_arrivals/none", "first_arrivals", lambda: fa(None, num_responses=1))
    wc = cj.worst_case_mask
    helper(
        "worst_case_mask/chunk0",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=5, chunk=0),
    )
    helper(
        "worst_case_mask/chunk_neg",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=5, chunk=-1),
    )
    helper(
        "worst_case_mask/nan_points",
        "worst_case_mask",
        lambda: wc(ALPHA.at[0].set(jnp.nan), num_coeffs=3, num_responses=5),
    )
    helper(
        "worst_case_mask/N_lt_D",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=5, num_responses=4),
    )
    helper(
        "worst_case_mask/N_gt_M",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=9),
    )
    helper(
        "worst_case_mask/max_neg",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=5, max_candidates=-1),
    )
    helper(
        "worst_case_mask/greedy",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=5, max_candidates=0),
        "correct",
        lambda w: (not w.exhaustive) and int(w.mask.sum()) == 5 and np.isfinite(w.cond),
    )
    helper(
        "worst_case_mask/chunk1",
        "worst_case_mask",
        lambda: wc(ALPHA, num_coeffs=3, num_responses=7, chunk=1),
        "correct",
        lambda w: w.exhaustive and w.num_examined == 8,
    )
    so = cj.spread_order
    helper("spread_order/D0", "spread_order", lambda: so(ALL, num_coeffs=0))
    helper(
        "spread_order/mask_int",
        "spread_order",
        lambda: so(ALL.astype(int), num_coeffs=2),
    )
    helper(
        "spread_order/none",
        "spread_order",
        lambda: so(NONE, num_coeffs=3),
        "correct",
        lambda o: sorted(np.asarray(o).tolist()) == list(range(M)),
    )
    rt = cj.recovery_threshold
    helper("recovery_threshold/K0", "recovery_threshold", lambda: rt(0, 2))
    helper("recovery_threshold/d_neg", "recovery_threshold", lambda: rt(3, -1))
    helper("recovery_threshold/float", "recovery_threshold", lambda: rt(3.0, 2))
    helper(
        "recovery_threshold/d0",
        "recovery_threshold",
        lambda: rt(5, 0),
        "correct",
        lambda v: v == 1,
    )
    ad = cj.accumulation_dtype
    helper("accumulation_dtype/int", "accumulation_dtype", lambda: ad(jnp.int32))
    helper(
        "accumulation_dtype/f64_no_x64",
        "accumulation_dtype",
        lambda: ad(jnp.float32, jnp.float64),
    )
    helper("accumulation_dtype/bad", "accumulation_dtype", lambda: ad("nonsense"))
    bp = cj.bacc_points
    helper("bacc_points/M1", "bacc_points", lambda: bp(2, 1))
    helper("bacc_points/K0", "bacc_points", lambda: bp(0, 5))
    # encoders
    le, be, ne = cj.lagrange_encode, cj.berrut_encode, cj.nercc_encode
    x = jnp.asarray([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]], F32)
    for fname, enc, kw2 in (
        ("lagrange_encode", le, {}),
        ("berrut_encode", be, {}),
        ("nercc_encode", ne, {"smoothing": 0.0}),
    ):
        helper(
            f"{fname}/beta_dup",
            fname,
            lambda e=enc, k=kw2: e(x, BBETA.at[1].set(BBETA[0]), BALPHA, **k),
        )
        helper(
            f"{fname}/beta_nan",
            fname,
            lambda e=enc, k=kw2: e(x, BBETA.at[1].set(jnp.nan), BALPHA, **k),
        )
        helper(
            f"{fname}/alpha_inf",
            fname,
            lambda e=enc, k=kw2: e(x, BBETA, BALPHA.at[1].set(jnp.inf), **k),
        )
        helper(
            f"{fname}/x_int",
            fname,
            lambda e=enc, k=kw2: e(x.astype(int), BBETA, BALPHA, **k),
        )
        helper(
            f"{fname}/x_scalar",
            fname,
            lambda e=enc, k=kw2: e(x[0, 0], BBETA, BALPHA, **k),
        )
        helper(
            f"{fname}/beta_len",
            fname,
            lambda e=enc, k=kw2: e(x, BBETA[:2], BALPHA, **k),
        )
        helper(
            f"{fname}/jit_dup_poisoned",
            fname,
            # traced as the table's jit mode (the encoder's own program)
            lambda e=enc, k=kw2: _traced(
                lambda b: e(x, b, BALPHA, **k), [BBETA.at[1].set(BBETA[0])]
            ),
            "correct",
            lambda v: bool(np.all(np.isnan(np.asarray(v)))),
        )
        helper(
            f"{fname}/huge",
            fname,
            lambda e=enc, k=kw2: (
                e(x * 1e38, BBETA, BALPHA, **k),
                e(x, BBETA, BALPHA, **k),
            ),
            "correct",
            lambda p: (
                np.allclose(
                    np.asarray(p[0], np.float64) / 1e38,
                    np.asarray(p[1], np.float64),
                    rtol=1e-5,
                    atol=1e-5,
                )
                and np.all(np.isfinite(np.asarray(p[0])))
            ),
        )
    helper(
        "nercc_encode/jit_negative_smoothing",
        "nercc_encode",
        lambda: _traced(lambda s: ne(x, BBETA, BALPHA, smoothing=s), [-1.0]),
        "correct",
        lambda v: bool(np.all(np.isnan(np.asarray(v)))),
    )
    helper("nercc_encode/K1", "nercc_encode", lambda: ne(x[:1], BBETA[:1], BALPHA))
    helper(
        "repapprox_encode/bad_layout",
        "repapprox_encode",
        lambda: cj.repapprox_encode(x, "layout"),
    )
    helper(
        "repapprox_layout/M_small",
        "repapprox_layout",
        lambda: cj.repapprox_layout(3, 2, 5),
    )
    helper(
        "repapprox_layout/c0", "repapprox_layout", lambda: cj.repapprox_layout(3, 0, 5)
    )
    # decoding matrices
    for fname, fn, args, kw3 in (
        (
            "chebyls_decoding_matrix",
            cj.chebyls_decoding_matrix,
            (ALPHA, BETA),
            {"num_coeffs": D},
        ),
        ("berrut_decoding_matrix", cj.berrut_decoding_matrix, (BALPHA, BBETA), {}),
        ("nercc_decoding_matrix", cj.nercc_decoding_matrix, (BALPHA, BBETA), {}),
    ):
        helper(
            f"{fname}/none_ok_false",
            fname,
            lambda f_=fn, a=args, k=kw3: f_(NONE, *a, **k),
            "correct",
            lambda r: (
                (not bool(r.ok))
                and np.all(np.asarray(r.value) == 0)
                and np.isinf(float(r.error))
            ),
        )
        helper(
            f"{fname}/mask_int",
            fname,
            lambda f_=fn, a=args, k=kw3: f_(ALL.astype(int), *a, **k),
        )
        helper(
            f"{fname}/acc_bf16",
            fname,
            lambda f_=fn, a=args, k=kw3: f_(ALL, *a, **k, accum_dtype=jnp.bfloat16),
        )
        helper(
            f"{fname}/acc_f64",
            fname,
            lambda f_=fn, a=args, k=kw3: f_(ALL, *a, **k, accum_dtype=jnp.float64),
        )
        helper(
            f"{fname}/rows_sum_one",
            fname,
            lambda f_=fn, a=args, k=kw3: f_(SOME, *a, **k),
            "correct",
            lambda r: (
                bool(r.ok) and np.allclose(np.asarray(r.value).sum(1), 1.0, atol=1e-4)
            ),
        )


_helper_cases()


def _zero_size_cases():
    """Zero-size axes refused by name (K = 0 inputs or data points, M = 0 workers,
    V = 0 validation queries), and errors once raised by an internal function."""
    x = jnp.ones((3, 2), F32)
    none = jnp.ones(0, F32)
    y = jnp.asarray(_payload(ALPHA))
    for fname, call in (
        ("lagrange_encode", lambda: cj.lagrange_encode(x[:0], none, ALPHA)),
        ("lagrange_encode", lambda: cj.lagrange_encode(x, BETA, none)),
        ("berrut_encode", lambda: cj.berrut_encode(x[:0], none, BALPHA)),
        ("berrut_encode", lambda: cj.berrut_encode(x, BBETA, none)),
        ("chebyls_decode", lambda: cj.chebyls_decode(y, ALL, ALPHA, none, D)),
        ("graceful_decode", lambda: cj.graceful_decode(y, ALL, ALPHA, none, D)),
        ("berrut_decode", lambda: cj.berrut_decode(y, ALL, BALPHA, none)),
        ("nercc_decode", lambda: cj.nercc_decode(y, ALL, BALPHA, none)),
        (
            "chebyls_decoding_matrix",
            lambda: cj.chebyls_decoding_matrix(ALL, ALPHA, none, num_coeffs=D),
        ),
        (
            "nercc_code",
            lambda: cj.nercc_code(num_inputs=1, num_workers=4, smoothing=(0.0, 0.0)),
        ),  # fmt: skip
        (
            "repapprox_code",
            lambda: cj.repapprox_code(num_inputs=3, num_workers=5, replication=2),
        ),  # fmt: skip
        ("unit_roundoff", lambda: cj.unit_roundoff(jnp.int32)),
    ):
        helper(f"{fname}/zero_size_or_name_{len(CASES)}", fname, call)
    key = jax.random.key(0)
    for tag, kw in (
        ("N_gt_M", dict(x_val=jnp.ones((3, 2)), num_workers=4, num_responses=5)),
        ("V0", dict(x_val=jnp.ones((0, 2)), num_workers=8, num_responses=5)),
        (
            "grid_nan",
            dict(
                x_val=jnp.ones((3, 2)),
                num_workers=8,
                num_responses=5,
                grid=[float("nan")],
            ),
        ),  # fmt: skip
    ):
        helper(
            f"tune_nercc/{tag}",
            "tune_nercc",
            lambda kw=kw: cj.tune_nercc(key, lambda v: v, **kw),
        )


_zero_size_cases()

MODES = ("eager", "jit", "vmap")
PARAMS = [
    pytest.param(i, mode, id=f"{c[0]}-{mode}")
    for i, c in enumerate(CASES)
    for mode in MODES
    if mode in c[5]
]


def test_table_is_large():
    # distinct inputs, and runs over the modes where they are meaningful
    assert len(CASES) >= 200, len(CASES)
    assert len(PARAMS) >= 450, len(PARAMS)


def _outcome(i, mode):
    name, fname, fn, arrays, static, expect, ref, check = CASES[i]
    want = expect[mode]
    if arrays is None:  # helper: a thunk
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - classified below
            if want != "error":
                raise
            _check_error(exc, fname, name)
            return
        assert want == "correct", f"{name}: returned {out!r}, expected an error"
        assert ref(out), f"{name}: wrong result {out!r}"
        return
    try:
        r = _run(mode, fn, arrays, static)
        r = jax.block_until_ready(r)
    except Exception as exc:  # noqa: BLE001 - classified below
        if want != "error":
            raise
        _check_error(exc, fname, name)
        return
    assert want != "error", f"{name} [{mode}]: returned, expected an error"
    if want == "ok_false":
        _check_ok_false(r, f"{name} [{mode}]")
    else:
        _check_correct(r, ref, f"{name} [{mode}]", **check)


@pytest.mark.parametrize("i,mode", PARAMS)
def test_edge_input(i, mode):
    _outcome(i, mode)


def test_one_simulated_cluster_shared_by_two_servers_is_refused():
    """A second Server on the same SimulatedCluster would silently swap the first
    one's worker functions (a wrong value with ok=True): refused at start."""
    from codedjax.serving import FixedN, Server, SimulatedCluster

    code = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1)
    backend = SimulatedCluster()
    with Server(code, lambda v: v, backend=backend, policy=FixedN(4)):
        with pytest.raises(RuntimeError, match="SimulatedCluster.start: already"):
            Server(code, lambda v: 2 * v, backend=backend, policy=FixedN(4))


def _zero_size_calls():
    """(name, call) of every public decoder and Code decode with y [M, 0] (the
    arrays made by device copies of numpy arrays: collecting compiles nothing)."""
    from test_codes import CODES

    m, k, d = 12, 3, 5
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    alpha2 = cj.chebyshev_points(m, kind=2)
    mask = jax.device_put(np.ones(m, bool))
    y = jax.device_put(np.zeros((m, 0), F32))
    calls = {
        "chebyls_decode": lambda: cj.chebyls_decode(y, mask, alpha, beta, d),
        "chebyls_decode_batched": lambda: cj.chebyls_decode_batched(
            y, jax.device_put(np.ones((1, m), bool)), alpha, beta, d, shared_y=True
        ),
        "threshold_decode": lambda: cj.threshold_decode(
            y, mask, alpha, beta, d, order=jnp.arange(m)
        ),
        "graceful_decode": lambda: cj.graceful_decode(y, mask, alpha, beta, d),
        "smooth_chebyshev_decode": lambda: cj.smooth_chebyshev_decode(
            y, mask, alpha, beta, d
        ),
        "robust_decode": lambda: cj.robust_decode(
            y, mask, alpha, beta, d, max_corrupted=1
        ),
        "berrut_decode": lambda: cj.berrut_decode(y, mask, alpha2, beta),
        "nercc_decode": lambda: cj.nercc_decode(y, mask, alpha2, beta),
        "repapprox_decode": lambda: cj.repapprox_decode(
            y, mask, cj.repapprox_layout(k, 2, m)
        ),
    }
    for name, code in CODES.items():
        n = code.num_workers
        yc = jax.device_put(np.zeros((n, 0), F32))
        mc, mcs = (jax.device_put(np.ones(s, bool)) for s in (n, (1, n)))
        cls = type(code).__name__
        calls[f"{cls}.decode[{name}]"] = functools.partial(code.decode, yc, mc)
        calls[f"{cls}.decode_batched[{name}]"] = functools.partial(
            code.decode_batched, yc, mcs, shared_y=True
        )
    return calls


# every encoder that takes its points (and smoothing) as arrays: traced, they
# cannot be checked; the contract (docs/design.md, "Encoders") is every coded row
# NaN and, with return_ok=True, the validity as data
ENCODERS = {
    "lagrange_encode": lambda x, b, a, s, **kw: cj.lagrange_encode(x, b, a, **kw),
    "berrut_encode": lambda x, b, a, s, **kw: cj.berrut_encode(x, b, a, **kw),
    "nercc_encode": lambda x, b, a, s, **kw: cj.nercc_encode(
        x, b, a, smoothing=s, **kw
    ),
    "nercc_encoding_matrix": lambda x, b, a, s, **kw: cj.nercc_encoding_matrix(
        b, a, smoothing=s, **kw
    ),
}
BAD_POINTS = {
    "beta_nan": lambda b, a, s: (b.at[1].set(jnp.nan), a, s),
    "beta_dup": lambda b, a, s: (b.at[1].set(b[0]), a, s),
    "alpha_inf": lambda b, a, s: (b, a.at[2].set(jnp.inf), s),
    "smoothing_neg": lambda b, a, s: (b, a, -1.0 + 0 * s),
}


@pytest.mark.parametrize(
    "fname,bad",
    [
        (f, b)
        for f in ENCODERS
        for b in BAD_POINTS
        if b != "smoothing_neg" or f.startswith("nercc")  # NeRCC's smoothing
    ],
)
def test_encoders_report_invalid_traced_points_as_data(fname, bad):
    """An invalid point (or smoothing) raises eagerly, naming the encoder; traced
    (jit, vmap) it cannot raise: every coded row is NaN, ``return_ok=True`` says
    so as data (False, per vmapped point set), and a decoder given the workers'
    answers to those rows reports ``ok`` False, never a silent value."""
    enc = ENCODERS[fname]
    x = jnp.asarray([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]], F32)
    good = (BBETA, BALPHA, jnp.asarray(0.0, F32))
    args = BAD_POINTS[bad](*good)

    def run(b, a, s):
        return enc(x, b, a, s, return_ok=True)

    with pytest.raises(ValueError, match=f"^{fname}: "):  # eager: a clear error
        run(*args)
    coded, ok = run(*good)  # valid points: ok, finite rows
    assert bool(ok) and np.all(np.isfinite(np.asarray(coded)))
    coded, ok = _traced(run, list(args))  # jit: no raise; NaN rows, ok False
    assert not bool(ok) and np.all(np.isnan(np.asarray(coded))), (fname, bad)
    both = [jnp.stack([g, b]) for g, b in zip(good, args, strict=True)]
    coded, ok = _traced(jax.vmap(run), both)  # vmap: per point set
    assert np.asarray(ok).tolist() == [True, False], (fname, bad)
    assert np.all(np.isfinite(np.asarray(coded[0])))
    assert np.all(np.isnan(np.asarray(coded[1])))
    if fname != "nercc_encoding_matrix":  # the answers of NaN rows: no decode
        y = jnp.asarray(np.asarray(_traced(run, list(args))[0]) ** 2)
        r = cj.chebyls_decode(y, ALL, ALPHA, BETA, num_coeffs=D)
        assert not bool(r.ok) and int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
        assert np.all(np.asarray(r.value) == 0)
    with pytest.raises(TypeError, match=f"^{fname}: return_ok must be"):
        enc(x, *good, return_ok=1)


@pytest.mark.parametrize("name", list(_zero_size_calls()))
def test_zero_size_payload_is_refused_naming_the_function(name):
    """A payload with no features ([M, 0]) raises a ValueError from the public
    function (never from inside a jax.numpy reduction), for every decoder and
    every code."""
    fname = name.split("[")[0]
    with pytest.raises(ValueError, match=rf"^{re.escape(fname)}: y must not be empty"):
        _zero_size_calls()[name]()


@pytest.mark.parametrize("scale", [1e30, 2.0**-60])
def test_predicted_error_is_finite_and_covers_at_the_edge_of_the_range(scale):
    """Answers near the top of float32's range (1e30: their squares overflow) and
    small ones: ChebyLS's prediction is that of the answers at scale 1, times the
    scale (homogeneous), finite, and covers the error; the one-mask kernel (eager;
    the same program as under jit) and the batched one (jax.vmap). The data are
    made in numpy (float64, rounded once to float32): only the decoders compile."""
    m, k, d = 40, 8, 22
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    c = np.asarray(jax.random.normal(jax.random.key(0), (d, 4)), np.float64)
    t = np.polynomial.chebyshev.chebvander(np.asarray(alpha, np.float64), d - 1)
    tb = np.polynomial.chebyshev.chebvander(np.asarray(beta, np.float64), d - 1)
    y = (t @ c).astype(F32)
    ref = tb @ c
    masks = cj.sample_masks(
        jax.random.key(1), num_workers=m, num_responses=30, shape=(2,)
    )
    dec = functools.partial(cj.chebyls_decode, alpha=alpha, beta=beta, num_coeffs=d)
    first = functools.partial(jax.tree_util.tree_map, lambda v: np.asarray(v)[0])
    paths = {
        "eager": lambda yy: dec(yy, masks[0]),
        # jax.vmap runs the batched kernel of chebyls_decode_batched
        "vmap": lambda yy: first(jax.vmap(dec, (None, 0))(yy, masks)),
    }
    ys = jnp.asarray(y * F32(scale))  # rounded once, as a float32 product
    for name, path in paths.items():
        r, base = path(ys), path(jnp.asarray(y))
        assert bool(r.ok), name
        err = np.abs(np.asarray(r.value, np.float64) - ref * scale).max()
        pred = float(r.error)
        assert np.isfinite(pred) and err <= pred, name
        # the same prediction as at scale 1 (y * 1e30 rounds once more: the
        # residual's noise differs by a few tens of percent)
        np.testing.assert_allclose(pred / scale, float(base.error), rtol=0.5)


# ----------------------------------------------------------------------------------
# classes across every code: magnitudes at the edge of the dtype, zero-size axes,
# bad arguments of every factory


def test_edge_magnitudes_of_graceful_robust_and_replication():
    """The decoders the table does not run, at its shapes (M = 8, K = 3, D = 5,
    F = 2; one program each, eager and traced as the table's jit mode): subnormal
    answers, the smallest subnormal, answers just above the normal range, a
    feature of subnormal answers beside a normal one, rows of subnormal and normal
    answers, and answers near 1e30 and 1e38 decode as accurately as any other
    (feature by feature, to the spacing of the subnormal numbers: the scaling goes
    through the bits, where XLA would flush them to zero), with a finite predicted
    error that covers the error against float64 least squares on the same
    answers (the robust decoder refuses the mixed rows, which fit no polynomial,
    as UNDECIDABLE)."""
    y = _payload(ALPHA)
    odd = (np.arange(M) % 2 == 1)[:, None]
    cases = {tag: yv for tag, yv, _ in _subnormal_payloads(_payload, ALPHA, ALL)}
    cases.update(
        {
            "mixed_rows": np.where(odd, y, _subnormal(y, 1e-40)),
            "1e30": _subnormal(y, 1e30),
            "1e38": _subnormal(y, 1e38),
        }
    )
    cases = {tag: jnp.asarray(v) for tag, v in cases.items()}
    rep = cj.replication_code(num_inputs=K, num_workers=M)
    decoders = {
        "graceful_decode": lambda v: cj.graceful_decode(v, ALL, ALPHA, BETA, D),
        "robust_decode": lambda v: cj.robust_decode(
            v, ALL, ALPHA, BETA, D, max_corrupted=1
        ),
        "ReplicationCode.decode": lambda v: rep.decode(v, ALL),
    }
    for fname, dec in decoders.items():
        for tag, ys in cases.items():
            if fname == "ReplicationCode.decode":  # the first replica, bit for bit
                ref = (np.asarray(ys, np.float64)[:K], 1.0)
            else:
                ref = ref_chebyls(ys, ALL, ALPHA, BETA, D)
            for mode in ("eager", "jit"):
                r = _run(mode, dec, [ys], {})
                where = f"{fname}/{tag} [{mode}]"
                if (fname, tag) == ("robust_decode", "mixed_rows"):
                    assert int(r.status) == int(cj.Status.UNDECIDABLE), int(r.status)
                    continue
                if tag == "mixed_rows":  # no polynomial: the prediction covers
                    err = float(np.abs(np.asarray(r.value, np.float64) - ref[0]).max())
                    assert bool(r.ok) and err <= float(r.error), (where, err)
                    continue
                _check_correct(r, ref, where, floor="spacing", covered=True,
                               per_column=True)  # fmt: skip
        # a subnormal payload's prediction is that of its answers' rounding (at
        # the workers' subnormal spacing), not the rounding of answers of size 1
        assert float(dec(cases["subnormal"]).error) < 1e-30, fname


def test_every_factory_refuses_bad_arguments_naming_itself():
    """Every code factory codedjax exports, given a zero, negative, float, NaN or
    inf argument, raises a ValueError or TypeError naming the factory."""
    factories = (
        {n for n in cj.__all__ if n.endswith("_code")}
        if hasattr(cj, "__all__")
        else {n for n in dir(cj) if n.endswith("_code") and callable(getattr(cj, n))}
    )
    nan, inf = float("nan"), float("inf")
    base = {
        "lagrange_code": dict(num_inputs=3, num_workers=8, degree=2),
        "bacc_code": dict(num_inputs=3, num_workers=8),
        "nercc_code": dict(num_inputs=3, num_workers=8, smoothing=(0.0, 0.0)),
        "repapprox_code": dict(num_inputs=3, num_workers=8, replication=2),
        "replication_code": dict(num_inputs=3, num_workers=8),
        "uncoded_code": dict(num_inputs=3),
        "parity_code": dict(num_inputs=6, group=3),
        "circle_code": dict(num_inputs=3, num_workers=8, degree=2),
        "random_code": dict(num_inputs=3, num_workers=8),
    }
    assert set(base) == factories, sorted(factories ^ set(base))
    bad = {name: [] for name in base}
    for name, kw in base.items():
        for arg in ("num_inputs", "num_workers", "degree", "replication", "group"):
            if arg in kw:
                for v in (0 if arg not in ("degree",) else -1, -3, 2.5, True, "4"):
                    bad[name].append({**kw, arg: v})
    robust = dict(base["lagrange_code"], decoder="robust", max_corrupted=1)
    for v in (nan, inf, -1.0, 0.0, "x"):
        bad["lagrange_code"].append({**robust, "noise_scale": v})
    for v in (nan, inf, 0.0, 1.0, -0.5, "x"):
        bad["lagrange_code"].append({**robust, "false_alarm": v})
    bad["lagrange_code"].append({**base["lagrange_code"], "worker_dtype": "bfloat16"})
    bad["lagrange_code"].append({**robust, "worker_dtype": "int32"})
    for v in ((nan, 0.0), (0.0, inf), (-1.0, 0.0), "x", (0.0,)):
        bad["nercc_code"].append({**base["nercc_code"], "smoothing": v})
    for v in (nan, inf, -1.0, "x"):
        bad["repapprox_code"].append(
            {**base["repapprox_code"], "fallback": "nercc", "smoothing": v}
        )
        bad["parity_code"].append({**base["parity_code"], "parity_error": v})
    bad["repapprox_code"].append({**base["repapprox_code"], "num_workers": 5})
    for name, cases in bad.items():
        factory = getattr(cj, name)
        for kw in cases:
            with pytest.raises((ValueError, TypeError)) as info:
                factory(**kw)
            assert str(info.value).startswith(f"{name}:"), (name, kw, info.value)


def test_code_methods_name_themselves_and_empty_batches(monkeypatch):
    """An error found inside a Code method's program names the method (never the
    decoder function it runs); B = 0 masks (decode_batched, shared or per-mask
    payloads, and jax.vmap of decode) give an empty result."""
    from test_codes import CODES

    for key in ("chebyls", "bacc"):  # the batched kernel; a plain vmap
        code = CODES[key]
        m, shape = code.num_workers, (code.num_workers, *code.coded_shape, 3)
        y, none = jnp.ones(shape), jnp.ones((0, code.num_workers), bool)
        want = (0, code.num_inputs, 3)
        for r in (
            code.decode_batched(y, none, shared_y=True),
            code.decode_batched(jnp.ones((0, *shape)), none),
            jax.vmap(lambda mk, code=code, y=y: code.decode(y, mk))(none),
        ):
            assert r.value.shape == want and r.ok.shape == (0,), (key, m)
    from codedjax import _lagrange_codes as lc

    def broken(*args, **kwargs):
        raise ValueError("chebyls_decode: a mistake found inside")

    monkeypatch.setattr(lc, "chebyls_decode_unchecked", broken)
    fresh = cj.lagrange_code(num_inputs=2, num_workers=5, degree=1)  # not compiled
    with pytest.raises(ValueError, match=r"^ChebyLSCode.decode: a mistake found"):
        fresh.decode(jnp.ones((5, 1)), jnp.ones(5, bool))
    with pytest.raises(ValueError, match=r"^repapprox_code: num_workers"):
        cj.repapprox_code(num_inputs=3, num_workers=5, replication=2)
    with pytest.raises(TypeError, match=r"^unit_roundoff: expected a floating"):
        cj.unit_roundoff(jnp.int32)


@pytest.mark.parametrize(
    "kw",
    [{"false_alarm": float("nan")}, {"false_alarm": "x"}, {"false_alarm": 1.0},
     {"noise_scale": float("inf")}, {"noise_scale": -1.0},
     {"noise_scale": float("nan")}],
)  # fmt: skip
def test_robust_decode_float_arguments_are_checked(kw):
    args = (jnp.ones((M, F)), ALL, ALPHA, BETA, D)
    with pytest.raises((ValueError, TypeError), match=r"^robust_decode: "):
        cj.robust_decode(*args, max_corrupted=1, **kw)


# every public function of codedjax.bounds with arguments that work (small sizes,
# host-side numpy: the whole sweep takes milliseconds); each argument is then given
# the bad values of its kind
_BMASK = np.array([True, False, True, True, False, True, True, True])
_BOUNDS_CALLS = {
    "chebyshev_coherence": ((8,), dict(num_coeffs=3)),
    "chebyshev_leverage_scores": ((8,), dict(num_coeffs=3)),
    "chernoff_delta": ((3, 5.0, 0.05), dict(tail="lower")),
    "clopper_pearson": ((3, 10), dict(confidence=0.95)),
    "coherence": ((np.full(8, 3 / 8),), {}),
    "complement_condition_number": ((_BMASK,), dict(num_coeffs=3)),
    "deterministic_condition_bound": (
        (), dict(num_workers=8, num_coeffs=3, num_responses=6)),
    "exhaustive_condition": ((), dict(
        scheme="random", num_workers=8, num_coeffs=3, num_responses=6, seeds=(0,),
        max_sets=100, chunk=10)),
    "exact_recovery_probability": ((2, 2, 4, 3), {}),
    "gap_condition_bound": ((_BMASK,), dict(num_coeffs=3)),
    "gap_condition_bound_probabilistic": (
        (), dict(num_workers=8, num_coeffs=3, num_responses=6, eta=0.05)),
    "gap_quantile": ((), dict(num_workers=8, num_responses=6, eta=0.05)),
    "gap_tail_bound": ((), dict(num_workers=8, num_responses=6, gap=2)),
    "generator_matrix": ((), dict(scheme="random", num_workers=8, num_coeffs=3,
                                  seed=0)),
    "leverage_scores": ((np.asarray(cj.chebyshev_points(8), np.float64),),
                        dict(num_coeffs=3)),
    "max_gap": ((_BMASK,), {}),
    "missing_rows_condition_bound": (
        (), dict(num_workers=8, num_coeffs=3, num_responses=6, eta=0.05)),
    "raw_condition_number": ((_BMASK,), dict(num_coeffs=3)),
    "recovery_probability_bound": ((2, 2, 4, 3), {}),
    "recovery_probability_union": ((2, 2, 4, 3), {}),
    "sampling_condition_bound": ((), dict(
        num_workers=8, num_coeffs=3, num_responses=6, eta=0.05, coherence=1.5)),
    "sufficient_responses": ((), dict(num_coeffs=3, coherence=1.5, eta=0.05,
                                      eps=0.5)),
    "worst_case_condition": ((), dict(num_workers=8, num_coeffs=3, num_missing=2,
                                      max_sets=100, chunk=10)),
}  # fmt: skip
# arguments for which a negative value is meaningful (a gap of -1 is always
# exceeded: probability 1)
_NEGATIVE_OK = {("gap_tail_bound", "gap")}


def _bad_values(fname, name, good):
    """The bad values of an argument's kind: NaN, +-inf, negative, a string, a
    bool; a fraction for an int; entries of those for an array; a number for a
    string or a tuple."""
    nan, inf = float("nan"), float("inf")
    if isinstance(good, (str, tuple)):
        return [1.0, nan] + ([("x",), (nan,)] if isinstance(good, tuple) else [])
    if isinstance(good, np.ndarray):
        out = []
        for v in (nan, inf, -inf) + ((-1.0,) if good.dtype == np.bool_ else ()):
            a = good.astype(np.float64)
            a[0] = v
            out.append(a)
        if good.dtype != np.bool_ and (fname, name) != ("leverage_scores", "alpha"):
            a = good.astype(np.float64)
            a[0] = -1.0  # a negative leverage score
            out.append(a)
        return out + [np.array(["x"] * good.size)]
    vals = [nan, inf, -inf, "x", True]
    if (fname, name) not in _NEGATIVE_OK:
        vals += [-1.0, -1] if isinstance(good, int) else [-1.0]
    if isinstance(good, int):
        vals.append(2.5)
    return vals


def test_bounds_float_arguments_are_checked():
    """Every public function of codedjax.bounds, each argument given NaN, +-inf, a
    negative value, a string and a bool (a fraction for an int; bad entries for an
    array), raises a ValueError or TypeError that names the function and the
    argument and says what came; the table covers the module's public functions."""
    import inspect

    import codedjax.bounds as cb

    public = {n for n in cb.__all__ if inspect.isfunction(getattr(cb, n))}
    assert set(_BOUNDS_CALLS) == public, sorted(public ^ set(_BOUNDS_CALLS))
    checked = 0
    for fname, (args, kw) in _BOUNDS_CALLS.items():
        fn = getattr(cb, fname)
        fn(*args, **kw)  # the table's arguments work
        names = list(inspect.signature(fn).parameters)
        slots = [(names[i], i) for i in range(len(args))] + [(k, k) for k in kw]
        for name, slot in slots:
            good = args[slot] if isinstance(slot, int) else kw[slot]
            for bad in _bad_values(fname, name, good):
                a2, kw2 = list(args), dict(kw)
                if isinstance(slot, int):
                    a2[slot] = bad
                else:
                    kw2[slot] = bad
                with pytest.raises((ValueError, TypeError)) as info:
                    fn(*a2, **kw2)
                msg = str(info.value)
                assert msg.startswith(f"{fname}: "), (fname, name, bad, msg)
                assert name in msg and "got" in msg, (fname, name, bad, msg)
                checked += 1
    assert checked > 300, checked


def test_graceful_float32_answers_are_calibrated_below_and_at_the_threshold():
    """float32 answers decoded in float32 (no coarser workers to hide the decoder's
    own rounding): ok with a finite prediction that covers the actual error in at
    least 95% of the masks (docs/decoding.md), below D and at N = D; at N = D the
    same for ChebyLS one mask at a time (what ChebyLSCode.decode runs), without
    becoming useless (median predicted / actual at most 10)."""
    m, k, d = 12, 3, 5
    al, be = cj.chebyshev_points(m), cj.chebyshev_points(k)
    rng = np.random.default_rng(7)
    t = np.polynomial.chebyshev.chebvander(np.asarray(al, np.float64), d - 1)
    tb = np.polynomial.chebyshev.chebvander(np.asarray(be, np.float64), d - 1)
    dec = jax.jit(jax.vmap(lambda y, mk: cj.graceful_decode(y, mk, al, be, d)))
    ls = functools.partial(cj.chebyls_decode, alpha=al, beta=be, num_coeffs=d)
    # the one-mask kernel (lax.map, not vmap: vmap runs the batched kernel, whose
    # float32 coverage theory.calibration measures; docs/decoding.md)
    ls_dec = {
        "one": jax.jit(lambda y, mk: jax.lax.map(lambda a: ls(a[0], a[1]), (y, mk))),
    }
    b = 200
    for n in (3, 5):
        c = rng.standard_normal((b, d, 2)) * (0.8 ** np.arange(d))[None, :, None]
        y = jnp.asarray(np.einsum("md,bdf->bmf", t, c), jnp.float32)
        truth = np.einsum("kd,bdf->bkf", tb, c)
        masks = cj.sample_masks(
            jax.random.key(n), num_workers=m, num_responses=n, shape=(b,)
        )
        r = dec(y, masks)
        assert bool(np.all(np.asarray(r.ok))), n
        pred = np.asarray(r.error, np.float64)
        err = np.abs(np.asarray(r.value, np.float64) - truth).max(axis=(1, 2))
        assert np.all(np.isfinite(pred)), n
        assert np.mean(err <= pred) >= 0.95, (n, np.mean(err <= pred))
        if n < d:
            continue
        for name, ls_fn in ls_dec.items():
            r = ls_fn(y, masks)
            assert bool(np.all(np.asarray(r.ok))), name
            pred = np.asarray(r.error, np.float64)
            err = np.abs(np.asarray(r.value, np.float64) - truth).max(axis=(1, 2))
            assert np.mean(err <= pred) >= 0.95, (name, np.mean(err <= pred))
            assert np.median(pred / err) <= 10, (name, np.median(pred / err))
