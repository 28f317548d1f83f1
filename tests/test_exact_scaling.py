"""Scaling by powers of two is exact (docs/decoding.md, section 1).

The decoders scale payloads by powers of two so that nothing overflows or
underflows; the scaling must be exact, so a decode is homogeneous in the payload
bit for bit. ``jnp.exp2`` is not the tool for this (XLA evaluates exp2(x) as
exp(x log 2), inexact at integers from 2**13 in float32 and 2**3 in float64):
``codedjax._dtypes.exact_pow2`` builds the powers from their bits.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import (  # private kernels: tests may import
    _dtypes,
    _errors,
    _lagrange_robust,
)

# the codes of tests/test_codes.py (K = 3, M = 12, degree 2): the same programs
K, M, DEG = 3, 12, 2


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_exact_pow2_is_ldexp_over_the_whole_normal_range(x64, dtype):
    fi = jnp.finfo(dtype)
    e = np.arange(fi.minexp, fi.maxexp)  # every normal exponent
    got = np.asarray(_dtypes.exact_pow2(jnp.asarray(e, jnp.int32), dtype))
    np.testing.assert_array_equal(got.astype(np.float64), np.ldexp(1.0, e))
    assert got.dtype == jnp.dtype(dtype)


def test_payload_scale_and_robust_scale_are_powers_of_two(x64):
    # magnitudes over float64's range and exactly at powers of two, where a
    # log2/exp2 route is off by one or inexact (one program per function and dtype)
    e = np.arange(-1000, 1001, 37)
    x = np.concatenate([np.ldexp(1.0, e), np.ldexp(1.5, e), np.ldexp(0.75, e)])
    for acc in (jnp.float64, jnp.float32):
        xs = x[(x > np.finfo(acc).tiny) & (x < np.finfo(acc).max / 2)]
        s = np.asarray(
            jax.jit(_lagrange_robust._pow2_scale)(jnp.asarray(xs, acc)), np.float64
        )
        np.testing.assert_array_equal(np.frexp(s)[0], 0.5)  # powers of two, exactly
        ratio = xs.astype(acc) / s
        assert np.all((ratio > 0.5) & (ratio <= 1.0)), ratio
        # payload_scale keeps s within float32's normal range (its contract)
        v = xs[(xs > 2.0**-120) & (xs < 2.0**120)]
        rows = jnp.asarray(np.stack([v, -v / 3], axis=1), acc)
        p = np.asarray(jax.vmap(_errors.payload_scale, in_axes=(0, None))(rows, acc))
        np.testing.assert_array_equal(np.frexp(p.astype(np.float64))[0], 0.5)
        assert np.all((v / p >= 1.0) & (v / p < 2.0)), v / p


def _decodes(dtype):
    """The settings of tests/test_codes.py (the same compiled float32 programs); in
    float64, where jnp.exp2 is inexact from 2^3 on, the reference decoders."""
    kw = dict(num_inputs=K, num_workers=M, degree=DEG)
    codes = {
        "chebyls": cj.lagrange_code(**kw),
        "bacc": cj.bacc_code(num_inputs=K, num_workers=M),
    }
    if dtype == "float32":
        codes["graceful"] = cj.lagrange_code(
            **kw, decoder="graceful", worker_dtype="bfloat16"
        )
        codes["robust"] = cj.lagrange_code(
            **kw, decoder="robust", max_corrupted=1, worker_dtype="bfloat16"
        )
    return codes


@pytest.mark.parametrize(
    "dtype,shifts",
    [
        ("float32", (-90, -40, -13, 13, 40, 90, -124, -140, -146)),
        ("float64", (-700, -9, 3, 9, 300, -1020, -1060, -1070)),
    ],
)
def test_decode_is_homogeneous_bit_for_bit(x64, dtype, shifts):
    """value(2^k y) == 2^k value(y) exactly: the decoders' scaling of the payload
    by powers of two introduces no rounding (the known truth of exact scaling),
    into the subnormal range too: answers there (2^-124 to 2^-146 in float32,
    2^-1020 to 2^-1070 in float64) decode as the same answers scaled up would,
    scaled back and rounded once (XLA flushes subnormal numbers to zero; the
    scaling goes through their bits). The graceful and robust decoders, whose
    noise floors are absolute (a subnormal answer's rounding), agree there within
    their predicted error."""
    rng = np.random.default_rng(0)
    mask = np.ones(M, bool)
    mask[[2, 7]] = False
    fi = np.finfo(dtype)
    for name, code in _decodes(dtype).items():
        x = jnp.asarray(rng.uniform(-1, 1, (K, 3)), dtype)
        y = np.asarray(code.encode(x)) ** 2  # a degree-2 workload
        base = code.decode(jnp.asarray(y), jnp.asarray(mask))
        assert bool(base.ok), name
        for k in shifts:
            small = np.ldexp(y, k)  # rounded once where subnormal (numpy keeps them)
            big = np.ldexp(small, -k)  # the same answers at a normal size: exact
            ref = (
                base
                if np.array_equal(big, y)
                else code.decode(jnp.asarray(big), jnp.asarray(mask))
            )
            r = code.decode(jnp.asarray(small), jnp.asarray(mask))
            assert bool(r.ok), (name, k)
            want = np.ldexp(np.asarray(ref.value), k)  # rounded once
            if name in ("graceful", "robust") and np.abs(small).min() < fi.tiny:
                err = np.abs(np.asarray(r.value, np.float64) - want).max()
                assert err <= float(r.error), (name, k, err, float(r.error))
                continue
            np.testing.assert_array_equal(
                np.asarray(r.value), want, err_msg=f"{name}, payload scaled by 2^{k}"
            )
            assert np.isfinite(float(r.error)) and float(r.error) > 0, (name, k)


def test_exact_pow2_in_a_jitted_program_is_exact():
    # inside jit, fused with other work (the form the decoders use it in)
    e = jnp.arange(-126, 128, dtype=jnp.int32)
    got = jax.jit(lambda e: _dtypes.exact_pow2(e, jnp.float32) * 1.5)(e)
    np.testing.assert_array_equal(
        np.asarray(got, np.float64), 1.5 * np.ldexp(1.0, np.arange(-126, 128))
    )


def _ldexp_payloads(rng, rows):
    """(name, x float32 [rows, 8], k int32 [1, 8]): payloads whose operands and
    results are all normal (on a large array ``ldexp_exact`` takes the plain
    product), and ones with a subnormal operand or result (its bit-level path);
    zeros, inf and NaN in all."""
    shape = (rows, 8)
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-20, 20, shape))
    x[0, 0], x[1, 1], x[2, 2] = 0.0, np.inf, np.nan
    k = rng.integers(-30, 30, (1, 8))
    tiny_in = x.copy()
    tiny_in[3, 3] = np.ldexp(1.0, -140)  # a subnormal float32 operand
    tiny_out = k.copy()
    tiny_out[0, 5] = -120  # results of column 5 fall below the normal range
    return [
        ("normal", x, k),
        ("subnormal in", tiny_in, k),
        ("subnormal out", x, tiny_out),
    ]


@pytest.mark.parametrize(
    "flags,rows",  # above _PLAIN_FIRST entries (a lax.cond of two paths), and below
    [((True, True), 256), ((True, False), 256), ((False, True), 256),
     ((True, True), 16)],
)  # fmt: skip
def test_ldexp_exact_is_numpy_ldexp_rounded_once_on_both_paths(flags, rows):
    # the reference: float64 ldexp (exact), rounded once to float32 by numpy, which
    # keeps subnormal numbers; a path a flag turns off is checked where it applies
    sub_in, sub_out = flags
    f = jax.jit(
        lambda x, k: _dtypes.ldexp_exact(
            x, k, jnp.float32, subnormal_in=sub_in, subnormal_out=sub_out
        )
    )
    tiny = np.finfo(np.float32).tiny
    assert 16 * 8 < _dtypes._PLAIN_FIRST <= 256 * 8
    for name, x, k in _ldexp_payloads(np.random.default_rng(0), rows):
        x32 = x.astype(np.float32)
        if not sub_in and np.any((x32 != 0) & (np.abs(x32) < tiny)):
            continue  # (the caller promises no subnormal operand)
        want = np.ldexp(x32.astype(np.float64), k).astype(np.float32)
        got = np.asarray(f(jnp.asarray(x32), jnp.asarray(k, jnp.int32)))
        check = np.ones(want.shape, bool)
        if not sub_out:  # results below the normal range may be flushed to zero
            check = ~((want != 0) & (np.abs(want) < tiny))
        np.testing.assert_array_equal(got[check], want[check], err_msg=name)
