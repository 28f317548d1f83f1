"""No state leaks from one program into another.

Every public encoder and decoder and every ``Code`` method is called from two
different jitted programs and from eager code, in every kind of order (a
value memoised by the first caller must never reach the second as a tracer of the
first one's program), with float64 off and on and every accumulation dtype,
against the SAME point arrays (the library memoises its checks per point array).

Cost: a program's trace is where a leaked tracer shows, so the second order only
traces (``jax.jit(...).trace``, nothing compiled); the first order runs program A
compiled and compares it with eager, which runs the library's own kernels (compiled
once per configuration and shared by both orders).
"""

from __future__ import annotations

import contextlib
import gc
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_codes import CODES

import codedjax as cj
from codedjax import _argcache

K, M, DEG = 3, 12, 2  # D = 5, as the codes of tests/test_codes.py
D = DEG * (K - 1) + 1
F = 3  # as tests/test_codes.py: its compiled programs are shared

# (x64, points dtype, payload dtype, accum_dtype): every accumulation dtype, with
# the points in the accumulation dtype and in another one
CONFIGS = {
    "x32": (False, "float32", "float32", None),
    "x64-points64-acc32": (True, "float64", "float32", None),
    "x64-points32-acc64": (True, "float32", "float64", None),
}


# The eager caller runs the library's compiled kernels, so it costs compiles: it
# runs in the float32 configuration only, for the Code methods whose programs
# tests/test_codes.py compiles too (same codes, shapes and dtypes) and for the
# functions whose Python path consults the memo of checks (codedjax._argcache).
# The traces run in every configuration, under jax.checking_leaks, which fails on
# any tracer left behind (the cause of every leak into a later caller).
EAGER_CONFIG = "x32"
EAGER_METHODS = ("encode", "decode", "decode_answers")
# with float64: the methods whose programs a payload's dtype changes most cheaply
# (the code's points are made in the payload's accumulation dtype)
X64_METHODS = ("encode", "decode")
EAGER_FUNCTIONS = (
    "lagrange_encode",
    "chebyls_decode",
    "chebyls_decoding_matrix",
    "threshold_decode",
)


def _acc_kw(acc):
    return {} if acc is None else {"accum_dtype": jnp.dtype(acc)}


# name -> fn(points, y, mask, acc_kw): every public encoder and decoder; points is
# the dict of shared arrays of one configuration
FUNCTIONS = {
    "lagrange_encode": lambda p, y, m, kw: cj.lagrange_encode(
        y[:K], p["beta"], p["alpha"]
    ),
    "chebyls_decode": lambda p, y, m, kw: cj.chebyls_decode(
        y, m, p["alpha"], p["beta"], num_coeffs=D, **kw
    ),
    "chebyls_decode_batched": lambda p, y, m, kw: cj.chebyls_decode_batched(
        y, jnp.stack([m, m]), p["alpha"], p["beta"], num_coeffs=D, shared_y=True, **kw
    ),
    "chebyls_decoding_matrix": lambda p, y, m, kw: cj.chebyls_decoding_matrix(
        m, p["alpha"], p["beta"], num_coeffs=D, **kw
    ),
    "threshold_decode": lambda p, y, m, kw: cj.threshold_decode(
        y, m, p["alpha"], p["beta"], num_coeffs=D, order=jnp.arange(M), **kw
    ),
    "graceful_decode": lambda p, y, m, kw: cj.graceful_decode(
        y, m, p["alpha"], p["beta"], num_coeffs=D, **kw
    ),
    "smooth_chebyshev_decode": lambda p, y, m, kw: cj.smooth_chebyshev_decode(
        y, m, p["alpha"], p["beta"], num_coeffs=D, **kw
    ),
    "robust_decode": lambda p, y, m, kw: cj.robust_decode(
        y, m, p["alpha"], p["beta"], num_coeffs=D, max_corrupted=1, **kw
    ),
    "berrut_encode": lambda p, y, m, kw: cj.berrut_encode(
        y[:K], p["beta"], p["alpha2"]
    ),
    "berrut_decode": lambda p, y, m, kw: cj.berrut_decode(
        y, m, p["alpha2"], p["beta"], **kw
    ),
    "berrut_decoding_matrix": lambda p, y, m, kw: cj.berrut_decoding_matrix(
        m, p["alpha2"], p["beta"], **kw
    ),
    "nercc_encode": lambda p, y, m, kw: cj.nercc_encode(
        y[:K], p["beta"], p["alpha2"], smoothing=1e-3
    ),
    "nercc_encoding_matrix": lambda p, y, m, kw: cj.nercc_encoding_matrix(
        p["beta"], p["alpha2"], smoothing=1e-3, **kw
    ),
    "nercc_decode": lambda p, y, m, kw: cj.nercc_decode(
        y, m, p["alpha2"], p["beta"], smoothing=1e-3, **kw
    ),
    "nercc_decoding_matrix": lambda p, y, m, kw: cj.nercc_decoding_matrix(
        m, p["alpha2"], p["beta"], smoothing=1e-3, **kw
    ),
    "repapprox_decode": lambda p, y, m, kw: cj.repapprox_decode(
        y, m, p["layout"], **kw
    ),
}


def _code_methods(code, x):
    """name -> (fn(points, payload, mask, acc_kw), payload) for every Code method:
    ``encode`` takes the inputs x [K, ...], the decoders the code's own answers
    (``code.encode(x)``, whatever shape the code's answers have); the code's points
    are its own, made in the payload's accumulation dtype."""
    ans = code.encode(x)
    return {
        "encode": (lambda p, v, m, kw: code.encode(v), x),
        "decode": (lambda p, v, m, kw: code.decode(v, m), ans),
        "decode_batched": (
            lambda p, v, m, kw: code.decode_batched(
                v, jnp.stack([m, m]), shared_y=True
            ),
            ans,
        ),
        "decoding_matrix": (
            lambda p, v, m, kw: code.decoding_matrix(m, dtype=v.dtype),
            ans,
        ),
        "decode_answers": (
            lambda p, v, m, kw: code.decode_answers(cj.Answers(v, m)),
            ans,
        ),
    }


@contextlib.contextmanager
def _config(name):
    x64 = CONFIGS[name][0]
    with jax.enable_x64(x64):
        yield CONFIGS[name]


@pytest.fixture(scope="module")
def shared():
    """One set of point arrays and data per configuration, shared by every test
    (the memo keys on the arrays' identity)."""
    out = {}
    for name in CONFIGS:
        with _config(name) as (_, pdt, ydt, _acc):
            pdt = jnp.dtype(pdt)
            pts = {
                "alpha": cj.chebyshev_points(M, dtype=pdt),
                "alpha2": cj.chebyshev_points(M, kind=2, dtype=pdt),
                "beta": cj.chebyshev_points(K, dtype=pdt),
                "layout": cj.repapprox_layout(K, 2, M),
            }
            y = jax.random.normal(jax.random.key(0), (M, F), jnp.dtype(ydt))
            mask = jnp.arange(M) % 4 != 1  # 9 of 12 respond
            out[name] = (pts, y, mask)
    return out


def _leaves(tree):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(tree)]


def _first(tree):
    return jax.tree_util.tree_leaves(tree)[0]


@contextlib.contextmanager
def _young_heap():
    """The leak check's ``gc.collect()`` after every trace, over the objects made
    since the trace began only (``gc.freeze`` sets the rest aside for the while).

    It loses nothing: the check looks for live tracers among the referrers of the
    finished trace, and every tracer is younger than the trace, so it is never
    frozen, whoever holds it (a memo made before the trace included). An old object
    is never collected while frozen, which can only keep a tracer alive that a
    full collection would free: a false alarm, never a missed leak. Without this,
    a collection over the whole test process's heap took most of this file's time.
    (jax's description of a leak looks for the holder of the tracer among the
    referrers, which misses frozen ones: a failed trace is traced again unfrozen.)
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _check_one(fn, pts, y, mask, kw, eager=True):
    """Every kind of ordered pair of callers: program A -> eager -> program B, then
    (memo cleared) eager -> program A', so that a program meets what another
    program left in the library's memos (A -> B), eager meets what a program left
    (A -> eager) and a program meets what eager left (eager -> B, eager -> A'); and
    no trace may leave a tracer behind anywhere (``jax.checking_leaks``: a memo, an
    ``lru_cache``, a global), the cause of a tracer reaching a later program. The
    programs are traced, not compiled (a leaked tracer shows at the trace); eager
    runs the library's own kernels and gives the same result in both orders."""

    def trace(out):
        def run():
            return jax.jit(lambda yy, mm: out(fn(pts, yy, mm, kw))).trace(y, mask)

        with jax.checking_leaks():
            try:
                with _young_heap():
                    return run()
            except Exception:  # noqa: BLE001 - a leak: traced again below
                pass
            return run()  # over the whole heap: jax names what holds the tracer

    _argcache.DECODE_CHECKS.clear()
    info = trace(_first).out_info  # A
    if not eager:
        trace(lambda r: r)  # B
        return
    e = fn(pts, y, mask, kw)
    trace(lambda r: r)  # B
    _argcache.DECODE_CHECKS.clear()
    e2 = fn(pts, y, mask, kw)
    trace(_first)  # A'
    for u, v in zip(_leaves(e), _leaves(e2), strict=True):
        np.testing.assert_array_equal(u, v)
    first = _first(e)
    assert (info.shape, info.dtype) == (first.shape, first.dtype)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("fname", list(FUNCTIONS))
def test_function_from_two_programs_and_eager(shared, config, fname):
    with _config(config) as (_, _pdt, _ydt, acc):
        pts, y, mask = shared[config]
        eager = config == EAGER_CONFIG and fname in EAGER_FUNCTIONS
        _check_one(FUNCTIONS[fname], pts, y, mask, _acc_kw(acc), eager=eager)


@pytest.mark.parametrize("config", ["x32", "x64-points32-acc64"])
@pytest.mark.parametrize("code", list(CODES))
def test_code_methods_from_two_programs_and_eager(shared, config, code):
    # a code's points are its own, in the payload's accumulation dtype
    c = CODES[code]
    with _config(config):
        pts, y, mask = shared[config]
        m = mask[: c.num_workers]
        for name, (method, payload) in _code_methods(c, y[: c.num_inputs]).items():
            if config != EAGER_CONFIG and name not in X64_METHODS:
                continue
            eager = config == EAGER_CONFIG and name in EAGER_METHODS
            _check_one(method, pts, payload, m, {}, eager=eager)


def test_repro_second_program_with_float64_points():
    """The report's repro: with float64 enabled, the second jitted program that
    calls ChebyLS with the same float64 point arrays got the first one's tracer
    (at this file's sizes; the programs are traced, where a leaked tracer shows)."""
    with jax.enable_x64(True):
        alpha, beta = cj.chebyshev_points(M), cj.chebyshev_points(K)
        y = jax.random.normal(jax.random.key(0), (M, F), jnp.float32)
        mask = jnp.arange(M) % 4 != 1
        f = jax.jit(lambda m: cj.chebyls_decode(y, m, alpha, beta, num_coeffs=D).value)
        g = jax.jit(lambda m: cj.chebyls_decode(y, m, alpha, beta, num_coeffs=D).cond)
        f.trace(mask)
        g.trace(mask)
        # and the encoder with x64 off: jitted first, then eager, same points
    b32, a32 = cj.chebyshev_points(K), cj.chebyshev_points(M)
    x = jnp.ones((K, F), jnp.float32)
    jax.jit(lambda x: cj.lagrange_encode(x, b32, a32)).trace(x)
    cj.lagrange_encode(x, b32, a32)


def test_memo_holds_no_arrays():
    key = _argcache.DECODE_CHECKS.key("t", (jnp.ones(2),), (jnp.ones(2),), ())
    with pytest.raises(TypeError, match="no arrays"):
        _argcache.DECODE_CHECKS.put(key, (jnp.ones(2),), (jnp.ones(2), 3))


def test_the_check_catches_a_tracer_kept_in_an_older_memo():
    """The leak check (with its young-heap collection) fails on a function that
    keeps a tracer in a memo made before the trace, and passes a clean one; the
    failure names the memo that holds the tracer.

    The memo is a module's, as the library's memos are (its holder is then found
    in a few steps: jax's description of a leak searches the whole heap for the
    referrers of every object on the way from the tracer to a module)."""
    old = types.ModuleType("an_older_module")
    old.memo = {}

    def leaky(p, y, m, kw):
        old.memo["kept"] = y
        return y + 1

    y, mask = jnp.ones(3), jnp.ones(3, bool)
    with pytest.raises(Exception, match=r"(?s)Leaked trace.*an_older_module\.memo"):
        _check_one(leaky, {}, y, mask, {}, eager=False)
    _check_one(lambda p, y, m, kw: y + 1, {}, y, mask, {}, eager=False)
