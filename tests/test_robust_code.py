"""The robust Lagrange code (``lagrange_code(..., decoder="robust")``).

The Code contract itself (jit, vmap, NaN workers, too few answers, exactness) is
checked with every other code in tests/test_codes.py; here: what the robust code adds
(``suspects``, ``correction_threshold`` D + 2A, the decode equal to
``robust_decode`` with the code's points, what ``decoding_matrix`` means for a
decode that is not linear) and its bad settings.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj

K, M, DEG, A = 3, 12, 2, 2  # D = 5, D + 2A = 9
EPS32 = float(jnp.finfo(jnp.float32).eps)

# float32 answers declared as the answers of bf16 workers: exact polynomial data
# whose rounding (float32) lies far below the noise level the decoder assumes
CODE = cj.lagrange_code(
    num_inputs=K,
    num_workers=M,
    degree=DEG,
    decoder="robust",
    max_corrupted=A,
    worker_dtype="bfloat16",
)


def worker(v):
    return v**2 - 0.5 * v


def _data(seed=0):
    x = jax.random.uniform(jax.random.key(seed), (K, 3), minval=-1.0, maxval=1.0)
    return x, worker(CODE.encode(x))


# Inputs are edited in numpy and device-copied (jax.device_put compiles nothing; a
# jax.numpy update or stack compiles a small program per shape)
def _plus(y, rows, v):
    """A copy of y (numpy, its dtype) with v added to the given rows."""
    out = np.array(y, copy=True)
    out[rows] += v
    return out


def _mask(off=(), on=None, shape=(M,)):
    """A numpy mask: every worker but ``off`` (or only ``on``)."""
    m = np.zeros(shape, bool) if on is not None else np.ones(shape, bool)
    if on is not None:
        m[..., on] = True
    m[..., list(off)] = False
    return m


def test_attributes_and_thresholds():
    assert CODE.name == "robust"
    assert CODE.threshold == 5  # decodes from D answers
    assert CODE.correction_threshold == 5 + 2 * A  # corrects A from D + 2A
    assert CODE.max_corrupted == A and CODE.false_alarm == 0.01
    plain = cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG)
    assert plain.correction_threshold == plain.threshold == 5
    bacc = cj.bacc_code(num_inputs=K, num_workers=M)
    assert bacc.correction_threshold == bacc.threshold


def test_corrupted_workers_are_located_and_the_decode_stays_exact():
    x, y = _data()
    y_bad = jax.device_put(_plus(y, [2, 9], np.array([[1.0], [-0.5]], np.float32)))
    mask = jax.device_put(_mask(off=[6]))
    r = CODE.decode(y_bad, mask)
    assert bool(r.ok) and int(r.status) == int(cj.Status.SUCCESS)
    assert np.flatnonzero(np.asarray(r.suspects)).tolist() == [2, 9]
    assert int(r.num_used) == int(mask.sum()) - 2
    # exact recovery of the degree-2 worker from the 9 clean float32 answers, whose
    # systems (first-kind points) have cond O(1)
    np.testing.assert_allclose(r.value, worker(x), rtol=0, atol=50 * EPS32)
    # not linear: the value is ChebyLS's matrix without the suspects applied to y
    a = CODE.decoding_matrix(mask & ~r.suspects)
    np.testing.assert_allclose(a @ y_bad, r.value, rtol=0, atol=50 * EPS32)
    # clean answers: nobody flagged, ChebyLS's matrix of the mask
    clean = CODE.decode(y, mask)
    assert bool(clean.ok) and not bool(jnp.any(clean.suspects))
    a = CODE.decoding_matrix(mask)
    np.testing.assert_allclose(a @ y, clean.value, rtol=0, atol=50 * EPS32)


def test_decode_is_robust_decode_with_the_codes_points():
    x, y = _data(seed=3)
    y = jax.device_put(_plus(y, 4, 0.25).astype(jnp.bfloat16))
    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG,
                            decoder="robust", max_corrupted=1,
                            false_alarm=0.05, noise_scale=3.0)  # fmt: skip
    mask = jax.device_put(_mask(off=[0]))
    r = code.decode(y, mask)
    ref = cj.robust_decode(y, mask, code.alpha(), code.beta(),
                                   num_coeffs=5, max_corrupted=1,
                                   false_alarm=0.05, noise_scale=3.0)  # fmt: skip
    assert type(r) is cj.RobustDecodeResult
    np.testing.assert_array_equal(r.suspects, ref.suspects)
    assert np.flatnonzero(np.asarray(r.suspects)).tolist() == [4]
    for f in ("ok", "status", "num_used"):
        np.testing.assert_array_equal(getattr(r, f), getattr(ref, f))
    # the code runs robust_decode's program with its points: bit for bit
    np.testing.assert_array_equal(r.value, ref.value)
    np.testing.assert_array_equal(r.error, ref.error)
    # the code's noise level is used: at gamma = 1e4 the same error is rounding
    deaf = dataclasses.replace(code, noise_scale=1e4)
    assert not bool(jnp.any(deaf.decode(y, mask).suspects))


def test_between_d_and_d_plus_2a_answers():
    """N = D: every answer fits, a corrupted one passes unseen (ok, no suspects);
    N = D + 1: it is seen but not correctable (UNDECIDABLE); N = D + 2: corrected."""
    x, y = _data(seed=5)
    y_bad = jax.device_put(_plus(y, 5, 1.0))
    keep = np.array([0, 2, 5, 7, 10, 11, 3])  # worker 5 among them
    for n, status, suspects in (
        (5, cj.Status.SUCCESS, []),
        (6, cj.Status.UNDECIDABLE, []),
        (7, cj.Status.SUCCESS, [5]),
    ):
        mask = jax.device_put(_mask(on=keep[:n]))
        r = CODE.decode(y_bad, mask)
        assert int(r.status) == int(status), n
        assert np.flatnonzero(np.asarray(r.suspects)).tolist() == suspects, n
        assert bool(r.ok) == (status == cj.Status.SUCCESS)
        assert np.all(np.isfinite(np.asarray(r.value)))


def test_batched_suspects_equal_a_loop():
    x, y = _data(seed=7)
    ys = np.stack([_plus(y, i, 1.0) for i in (1, 4, 8)] + [np.asarray(y)])
    masks = _mask(off=[10], shape=(4, M))
    rb = CODE.decode_batched(jax.device_put(ys), jax.device_put(masks))
    for i in range(4):
        ri = CODE.decode(jax.device_put(ys[i]), jax.device_put(masks[i]))
        np.testing.assert_array_equal(rb.suspects[i], ri.suspects)
        assert bool(rb.ok[i]) and bool(ri.ok)
    got = [np.flatnonzero(np.asarray(s)).tolist() for s in rb.suspects]
    assert got == [[1], [4], [8], []]


def test_float64_matches_numpy_least_squares_without_the_suspect():
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 2)))
        y = worker(CODE.encode(x)).at[7].add(0.1)
        mask = jnp.asarray(np.arange(M) % 5 != 3)
        r = CODE.decode(y, mask)
        assert r.value.dtype == jnp.float64
        assert np.flatnonzero(np.asarray(r.suspects)).tolist() == [7]
        alpha = np.cos((2 * np.arange(M) + 1) * np.pi / (2 * M))
        beta = np.cos((2 * np.arange(K) + 1) * np.pi / (2 * K))
        v = np.polynomial.chebyshev.chebvander(alpha, CODE.num_coeffs - 1)
        sel = np.asarray(mask) & (np.arange(M) != 7)
        coef = np.linalg.lstsq(v[sel], np.asarray(y)[sel], rcond=None)[0]
        ref = np.polynomial.chebyshev.chebvander(beta, CODE.num_coeffs - 1) @ coef
        np.testing.assert_allclose(np.asarray(r.value), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(max_corrupted=1), ValueError, "only to decoder='robust'"),
        (dict(decoder="graceful", false_alarm=0.1), ValueError, "false_alarm applies"),
        (dict(decoder="robust"), ValueError, "needs max_corrupted"),
        (dict(decoder="robust", max_corrupted=-1), ValueError, ">= 0"),
        (dict(decoder="robust", max_corrupted=1.0), TypeError, "int"),
        (dict(decoder="robust", max_corrupted=True), TypeError, "int"),
        (dict(decoder="robust", max_corrupted=4), ValueError, r"D \+ 2A = 13"),
        (
            dict(decoder="robust", max_corrupted=1, false_alarm=1.0),
            ValueError,
            r"\(0, 1\)",
        ),
        (
            dict(decoder="robust", max_corrupted=1, false_alarm="x"),
            TypeError,
            "number",
        ),
        (dict(noise_scale=2.0), ValueError, "noise_scale applies"),
        (
            dict(decoder="robust", max_corrupted=1, noise_scale=0.0),
            ValueError,
            "finite and > 0",
        ),
        (
            dict(decoder="robust", max_corrupted=1, noise_scale=[1.0]),
            TypeError,
            "number > 0",
        ),
    ],
)
def test_bad_settings_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match="lagrange_code: .*" + match):
        cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG, **kwargs)


# --- a noise level per answer (decode(..., noise_sd=)) ------------------------------
MASK = jnp.ones(M, bool)


def _levels(seed):
    """[M] noise levels spanning two decades (what a rounding analysis would give)."""
    e = np.random.default_rng(seed).uniform(-4, -2, M)
    return jax.device_put((10.0**e).astype(np.float32))


def test_noise_sd_decode_is_robust_decode_bit_for_bit():
    x, y = _data(seed=11)
    sd = _levels(1)
    y = jax.device_put(_plus(y, 6, 0.2))
    mask = jax.device_put(_mask(off=[1]))
    r = CODE.decode(y, mask, noise_sd=sd)
    ref = cj.robust_decode(y, mask, CODE.alpha(), CODE.beta(),
                                   num_coeffs=CODE.num_coeffs, max_corrupted=A,
                                   worker_dtype="bfloat16", noise_sd=sd)  # fmt: skip
    assert "noise_sd" in CODE.answer_fields and type(r) is cj.RobustDecodeResult
    for f in cj.RobustDecodeResult._fields:
        np.testing.assert_array_equal(getattr(r, f), getattr(ref, f), err_msg=f)
    assert np.flatnonzero(np.asarray(r.suspects)).tolist() == [6]
    # the level is used: a worker whose level is not finite counts as missing
    gone = CODE.decode(y, mask, noise_sd=jax.device_put(_plus(sd, 6, np.inf)))
    assert int(gone.num_used) == int(mask.sum()) - 1
    assert not bool(jnp.any(gone.suspects))


def test_noise_sd_batched_equals_a_loop():
    x, y = _data(seed=12)
    ys = np.stack([_plus(y, i, 0.3) for i in (0, 5, 11)])
    sds = np.stack([_levels(s) for s in (2, 3, 4)])
    masks = _mask(off=[8], shape=(3, M))
    dev = jax.device_put
    rb = CODE.decode_batched(dev(ys), dev(masks), noise_sd=dev(sds))
    rs = CODE.decode_batched(
        dev(_plus(y, 3, 0.3)), dev(masks), shared_y=True, noise_sd=dev(sds[0])
    )
    for i in range(3):
        ri = CODE.decode(dev(ys[i]), dev(masks[i]), noise_sd=dev(sds[i]))
        np.testing.assert_array_equal(rb.suspects[i], ri.suspects)
        np.testing.assert_array_equal(rb.status[i], ri.status)
        tol = 10 * float(ri.cond) * EPS32  # vmapped vs single program, |y| <= 1.5
        np.testing.assert_allclose(rb.value[i], ri.value, rtol=0, atol=tol)
    got = [np.flatnonzero(np.asarray(s)).tolist() for s in rb.suspects]
    assert got == [[0], [5], [11]]
    assert [np.flatnonzero(np.asarray(s)).tolist() for s in rs.suspects] == [[3]] * 3


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda c, y: c.decode(y, MASK, noise_sd=jnp.ones(M - 1)), ValueError,
         r"RobustCode.decode: noise_sd must have shape \[M\] = \[12\]"),
        (lambda c, y: c.decode(y, MASK, noise_sd=jnp.ones((1, M))), ValueError,
         r"RobustCode.decode: noise_sd must have shape"),
        (lambda c, y: c.decode(y, MASK, noise_sd=jnp.ones(M, jnp.int32)), TypeError,
         "RobustCode.decode: noise_sd must have a floating dtype"),
        (lambda c, y: c.decode_batched(y[None], MASK[None], noise_sd=jnp.ones(M)),
         ValueError, r"decode_batched: noise_sd must have shape \[B, M\] = \[1, 12\]"),
        (lambda c, y: c.decode_batched(y, MASK[None], shared_y=True,
                                       noise_sd=jnp.ones((1, M))),
         ValueError, r"decode_batched: noise_sd must have shape \[M\] \(shared_y\)"),
        # a code that takes no noise level refuses one, naming its own method
        # and the codes that take it
        (lambda c, y: cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG
                                       ).decode(y, MASK, noise_sd=jnp.ones(M)),
         TypeError, r"ChebyLSCode.decode: noise_sd .* only by a robust code"),
        (lambda c, y: cj.bacc_code(num_inputs=K, num_workers=M).decode_batched(
            y[None], MASK[None], noise_sd=jnp.ones((1, M))), TypeError,
         r"BaccCode.decode_batched: noise_sd .* only by a robust code"),
    ],
)  # fmt: skip
def test_bad_noise_sd_is_a_clear_error(call, error, match):
    _, y = _data()
    with pytest.raises(error, match=match):
        call(CODE, y)
    assert "noise_sd" not in cj.bacc_code(num_inputs=K, num_workers=M).answer_fields
