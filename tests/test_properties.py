"""Property-based tests of the decoder contract (hypothesis).

hypothesis draws the straggler mask, which workers return NaN or +-Inf (and in which
entries), the worker dtype, the payload shape and the data, and shrinks a failure to
a minimal case. The properties hold for every code:

- the result's shapes and dtypes: value [K, ...] in the accumulation dtype, scalar
  ok / status / cond / num_used / error; ``ok == (status == SUCCESS)``;
- not ok: value all zeros (never NaN), error inf, a known status code; ok: value,
  error and cond finite, and at least ``threshold`` usable workers;
- fewer usable (responding and finite) workers than ``threshold``:
  TOO_FEW_RESPONSES;
- a worker with any non-finite entry counts as missing: decoding with it equals
  decoding without it;
- decoding is linear and the decoder's scaling is a power of two, so scaling the
  responses by 2^k scales the value by exactly 2^k and changes nothing else;

and for ChebyLS, over random (K, d, M), payload shapes and masks: the value equals a
float64 numpy least-squares oracle within its condition number times float32 eps.

Settings: few examples, no deadline (compilation is slow and varies with load),
``derandomize=True`` and no example database, so a CI run is deterministic.
"""

import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EPS32 = float(np.finfo(np.float32).eps)
# the codes and payload width of tests/test_codes.py (equal codes are one static
# argument of jit): their float32 decode programs compiled there serve these too
K, M, F = 3, 12, 3  # D = 5 for degree 2

# one code per decoder (second-kind points and the uncoded baseline share a decoder
# with chebyls and replication)
CODES = {
    "chebyls": cj.lagrange_code(num_inputs=K, num_workers=M, degree=2),
    "threshold": cj.lagrange_code(
        num_inputs=K, num_workers=M, degree=2, decoder="threshold"
    ),
    "bacc": cj.bacc_code(num_inputs=K, num_workers=M),
    "nercc": cj.nercc_code(num_inputs=K, num_workers=M, smoothing=(1e-4, 1e-3)),
    "repapprox": cj.repapprox_code(num_inputs=K, num_workers=M, replication=3),
    "replication": cj.replication_code(num_inputs=K, num_workers=M),
}
STATUS = {int(s) for s in cj.Status}


def _worker(v):
    return v * v - 0.5 * v  # degree 2: inside the Lagrange codes' function class


@st.composite
def decode_cases(draw):
    name = draw(st.sampled_from(sorted(CODES)))
    code = CODES[name]
    m = code.num_workers
    dtype = draw(st.sampled_from([jnp.bfloat16, jnp.float32]))
    mask = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    bad = draw(
        st.lists(
            st.tuples(
                st.integers(0, m - 1),
                st.integers(0, F - 1),
                st.sampled_from([np.nan, np.inf, -np.inf]),
            ),
            max_size=3,
        )
    )
    seed = draw(st.integers(0, 2**16))
    k = draw(st.integers(-6, 6))
    return name, dtype, mask, bad, seed, k


@SETTINGS
@given(decode_cases())
def test_decoder_contract(case):
    name, dtype, mask, bad, seed, k = case
    code = CODES[name]
    x = np.random.default_rng(seed).uniform(-1, 1, (K, F)).astype(np.float32)
    clean = _worker(code.encode(jnp.asarray(x))).astype(dtype)
    y = np.asarray(clean).copy()
    for row, col, val in bad:
        y[row, col] = val
    y = jnp.asarray(y, dtype)
    finite = np.isfinite(np.asarray(y, np.float32)).all(axis=1)
    usable = mask & finite

    r = code.decode(y, jnp.asarray(mask))
    assert r.value.shape == (K, F) and r.value.dtype == jnp.float32
    for f in (r.ok, r.cond, r.num_used, r.status, r.error):
        assert f.shape == ()
    status, ok = int(r.status), bool(r.ok)
    assert status in STATUS and ok == (status == int(cj.Status.SUCCESS))
    value = np.asarray(r.value)
    if ok:
        assert np.isfinite(value).all()
        assert np.isfinite(float(r.error)) and np.isfinite(float(r.cond))
        assert usable.sum() >= code.threshold
        assert 1 <= int(r.num_used) <= usable.sum()
    else:
        assert (value == 0).all() and np.isinf(float(r.error))
    if usable.sum() < code.threshold:
        assert status == int(cj.Status.TOO_FEW_RESPONSES)

    # a non-finite worker is a missing worker
    r_missing = code.decode(clean, jnp.asarray(usable))
    assert int(r_missing.status) == status
    assert int(r_missing.num_used) == int(r.num_used)
    np.testing.assert_allclose(
        np.asarray(r_missing.value), value, rtol=4 * EPS32, atol=4 * EPS32
    )

    # scaling by 2^k is exact (a linear decoder, power-of-two internal scaling)
    r_scaled = code.decode(y * jnp.asarray(2.0**k, dtype), jnp.asarray(mask))
    assert int(r_scaled.status) == status
    np.testing.assert_array_equal(np.asarray(r_scaled.value), value * 2.0**k)


# ChebyLS against a float64 oracle: random K, d, M, payload shape and mask
LAGRANGE = [(2, 1, 5), (4, 2, 12)]  # (K, d, M): D = 2, 7


@st.composite
def chebyls_cases(draw):
    k, d, m = draw(st.sampled_from(LAGRANGE))
    shape = draw(st.sampled_from([(), (2, 3)]))
    mask = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    seed = draw(st.integers(0, 2**16))
    return k, d, m, shape, mask, seed


@settings(SETTINGS, max_examples=15)
@given(chebyls_cases())
def test_chebyls_matches_float64_lstsq(case):
    k, d, m, shape, mask, seed = case
    code = cj.lagrange_code(num_inputs=k, num_workers=m, degree=d)
    big_d = code.num_coeffs
    x = np.random.default_rng(seed).uniform(-1, 1, (k,) + shape).astype(np.float32)
    y = np.asarray(code.encode(jnp.asarray(x))) ** d  # degree d: decodable exactly
    r = code.decode(jnp.asarray(y), jnp.asarray(mask))
    assert r.value.shape == (k,) + shape and r.value.dtype == jnp.float32
    alpha = np.cos((2 * np.arange(m) + 1) * np.pi / (2 * m))
    beta = np.cos((2 * np.arange(k) + 1) * np.pi / (2 * k))
    if mask.sum() < big_d:
        assert int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
        return
    scale = np.r_[np.sqrt(1 / m), np.full(big_d - 1, np.sqrt(2 / m))]
    u = npcheb.chebvander(alpha, big_d - 1) * scale
    cond = np.linalg.cond(u[mask])
    if not bool(r.ok):  # only a numerically singular system may fail
        assert cond * EPS32 > 1e-3
        return
    np.testing.assert_allclose(float(r.cond), cond, rtol=1e-2)
    y64 = y.astype(np.float64).reshape(m, -1)
    coef = np.linalg.lstsq(u[mask], y64[mask], rcond=None)[0]
    ref = (npcheb.chebvander(beta, big_d - 1) * scale) @ coef
    # backward-stable least squares: error ~ cond * eps32 relative to max |y|
    tol = 10 * big_d * cond * EPS32 * np.abs(y64).max()
    err = np.abs(np.asarray(r.value, np.float64).reshape(k, -1) - ref).max()
    assert err <= tol, (err, tol, cond)
