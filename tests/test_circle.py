"""The circle code (points on the unit circle, rotation embeddings).

Oracles: numpy.linalg.lstsq / solve / cond on the complex Vandermonde rows
V[j, m] = alpha_j^m in float64, and the Lagrange basis at the K'-th roots of unity
by its product formula. Known truths: with every worker responding V^H V = M I, so
cond = 1; a degree-3 polynomial workload evaluated in complex arithmetic is recovered
exactly from any D responders; two real linear queries packed into one complex query
come back exactly. Tolerances are multiples of the unit roundoff scaled by the
condition number the decoder reports.
"""

from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import _circle_kernels as circ

M, K, DEG, F = 12, 3, 3, 4
D = DEG * (K - 1) + 1  # 7
EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)

ALPHA = np.exp(2j * np.pi * np.arange(M) / M)
BETA = np.exp(2j * np.pi * np.arange(K) / K)


def _v(points, d):
    return points[:, None] ** np.arange(d)[None, :]


def _weights(np_rng):
    return np_rng.standard_normal((F, F)) / 2


def cubic(z, w):
    """A degree-3 polynomial of a complex query z [..., F]: z * (z W)^2 (any dtype)."""
    return z * (z @ w) ** 2


def _answers(enc, w):
    """Worker answers [M, 2, F] of the cubic on the coded queries (float64)."""
    e = np.asarray(enc)
    z = e[:, 0] + 1j * e[:, 1]
    h = cubic(z, w)
    return np.stack([h.real, h.imag], axis=1)


def _strict():
    """The promotion rules of conftest.py, for module fixtures (built before the
    autouse fixture applies them): a program compiled here is the tests' own."""
    return jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise")


@pytest.fixture(scope="module")
def problem():
    """A float64 degree-3 problem (inputs, weights, answers), built once."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((K, F))
    w = rng.standard_normal((F, F)) / 2
    dtypes, ranks = _strict()
    with jax.enable_x64(True), dtypes, ranks:
        enc = circ.circle_encode(jnp.asarray(x), num_workers=M)
    return x, w, _answers(enc, w)


def _mask(np_rng, n):
    mk = np.zeros(M, bool)
    mk[np_rng.choice(M, n, replace=False)] = True
    return mk


# ----------------------------------------------------------------------------------
# encoding


def _lagrange(m, kp):
    """l_i(alpha_j) [M, K'] by the product formula (independent of the closed form)."""
    beta = np.exp(2j * np.pi * np.arange(kp) / kp)
    alpha = np.exp(2j * np.pi * np.arange(m) / m)
    return np.array(
        [
            [np.prod([(a - beta[q]) / (beta[i] - beta[q]) for q in range(kp) if q != i])
             for i in range(kp)]
            for a in alpha
        ]
    )  # fmt: skip


def test_encoding_matrix_is_the_lagrange_basis_at_roots_of_unity():
    m, kp = 12, 4
    e = circ._tables(m, kp, 1)[2]
    np.testing.assert_allclose(e, _lagrange(m, kp), atol=32 * EPS64)
    assert np.abs(e).max() <= 1 + 8 * EPS64  # coded queries do not grow
    # K' divides M: worker 3 i sits on beta_i and receives Z_i exactly
    np.testing.assert_allclose(e[::3], np.eye(kp), atol=32 * EPS64)


def test_encode_against_numpy(problem, linear):
    x, _, _ = problem  # float64, unpacked: Z_i = X_i
    with jax.enable_x64(True):
        enc = np.asarray(circ.circle_encode(jnp.asarray(x), num_workers=M))
    z = _lagrange(M, K) @ x
    assert enc.shape == (M, 2, F)
    np.testing.assert_allclose(enc[:, 0], z.real, atol=64 * EPS64)
    np.testing.assert_allclose(enc[:, 1], z.imag, atol=64 * EPS64)
    x4 = linear[3]  # float32, packed: Z_i = X_i + i X_{2+i}
    enc = np.asarray(circ.circle_encode(jnp.asarray(x4), num_workers=6, pack=True))
    zp = _lagrange(6, 2) @ (x4[:2] + 1j * x4[2:]).astype(np.complex128)
    np.testing.assert_allclose(enc[:, 0], zp.real, atol=16 * EPS32)
    np.testing.assert_allclose(enc[:, 1], zp.imag, atol=16 * EPS32)


def test_encode_dtypes_and_errors(linear):
    # bf16 inputs are encoded in float32 (the same program as float32 inputs)
    out = circ.circle_encode(jnp.ones((4, 2), jnp.bfloat16), num_workers=6, pack=True)
    assert out.dtype == jnp.float32 and out.shape == (6, 2, 2)
    # partition of unity: constant inputs encode to the constant (1 + i here)
    np.testing.assert_allclose(np.asarray(out), 1.0, atol=16 * EPS32)
    with pytest.raises(ValueError, match="circle_encode: pack=True .* even .* K=5"):
        circ.circle_encode(jnp.ones((5, 2)), num_workers=6, pack=True)
    with pytest.raises(TypeError, match="circle_encode: x must have a floating"):
        circ.circle_encode(jnp.ones((4, 2), jnp.int32), num_workers=6)
    with pytest.raises(TypeError, match="circle_encode: pack must be True or False"):
        circ.circle_encode(jnp.ones((4, 2)), num_workers=6, pack=1)
    with pytest.raises(ValueError, match="circle_encode: num_workers must be >= 1"):
        circ.circle_encode(jnp.ones((4, 2)), num_workers=0)


# ----------------------------------------------------------------------------------
# least squares and the square solve against float64 numpy


@pytest.mark.parametrize("n", [D, D + 1, 10, M])
def test_least_squares_against_numpy_and_exact(x64, problem, np_rng, n):
    x, w, y = problem
    mk = _mask(np_rng, n)
    r = circ.circle_decode(jnp.asarray(y), jnp.asarray(mk), num_inputs=K, degree=DEG)
    yc = y[:, 0] + 1j * y[:, 1]
    v = _v(ALPHA, D)
    c = np.linalg.lstsq(v[mk], yc[mk], rcond=None)[0]
    ref = (_v(BETA, D) @ c).real
    kappa = np.linalg.cond(v[mk])
    assert bool(r.ok) and int(r.status) == int(cj.Status.SUCCESS)
    assert int(r.num_used) == n
    assert float(r.cond) == pytest.approx(kappa, rel=64 * D * EPS64 * kappa)
    tol = 64 * D * EPS64 * kappa * np.abs(y).max()
    np.testing.assert_allclose(np.asarray(r.value), ref, atol=tol)
    # known truth: the workload itself, recovered from any n >= D responders
    np.testing.assert_allclose(np.asarray(r.value), cubic(x, w), atol=tol)
    if n == M:  # V^H V = M I: perfectly conditioned
        assert float(r.cond) == pytest.approx(1.0, abs=64 * D * EPS64)


def test_threshold_decoder_is_the_square_solve_on_the_first_arrivals(
    x64, problem, np_rng
):
    x, w, y = problem
    mk = _mask(np_rng, 10)
    order = np_rng.permutation(M)
    r = circ.circle_threshold_decode(
        jnp.asarray(y), jnp.asarray(mk), jnp.asarray(order), num_inputs=K, degree=DEG
    )
    first = [j for j in order if mk[j]][:D]
    v = _v(ALPHA, D)[first]
    c = np.linalg.solve(v, y[first, 0] + 1j * y[first, 1])
    kappa = np.linalg.cond(v)
    assert bool(r.ok) and int(r.num_used) == D
    assert float(r.cond) == pytest.approx(kappa, rel=64 * D * EPS64 * kappa)
    tol = 64 * D * EPS64 * kappa * np.abs(y).max()
    np.testing.assert_allclose(np.asarray(r.value), (_v(BETA, D) @ c).real, atol=tol)
    np.testing.assert_allclose(np.asarray(r.value), cubic(x, w), atol=tol)


def test_predicted_error_is_the_library_model(x64, problem, np_rng):
    # noise well above float64 rounding: the residual term decides sigma
    _, _, y = problem
    noisy = y + 1e-6 * np_rng.standard_normal(y.shape)
    mk = _mask(np_rng, 10)
    r = circ.circle_decode(
        jnp.asarray(noisy), jnp.asarray(mk), num_inputs=K, degree=DEG
    )
    v = _v(ALPHA, D)
    ac = np.zeros((K, M), complex)
    ac[:, mk] = _v(BETA, D) @ np.linalg.pinv(v[mk])
    a_real = np.stack([ac.real, -ac.imag], axis=-1).reshape(K, 2 * M)
    yc = noisy[:, 0] + 1j * noisy[:, 1]
    res = yc[mk] - v[mk] @ np.linalg.lstsq(v[mk], yc[mk], rcond=None)[0]
    rss = np.sum(np.abs(res) ** 2, axis=0)
    dof = 2 * (10 - D)  # 2N real answers, 2D real unknowns
    sel2 = np.repeat(mk, 2)
    rms = np.sqrt(np.mean(noisy.reshape(2 * M, F)[sel2] ** 2, axis=0))
    sigma = np.maximum(EPS64 / 2 * rms, np.sqrt(rss / dof))
    z = NormalDist().inv_cdf(1 - 0.01 / (2 * K * F))
    gain = np.max(np.sum(a_real**2, axis=1))
    want = z * np.sqrt(gain + 1) * sigma.max()
    assert float(r.error) == pytest.approx(want, rel=1e-6)


# ----------------------------------------------------------------------------------
# transforms: jit, vmap, one program for every mask


@pytest.fixture(scope="module")
def linear():
    """float32, two real queries per complex query: K = 4, M = 6, K' = D = 2."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2)).astype(np.float32)
    a = rng.standard_normal((2, 2)).astype(np.float32)
    dtypes, ranks = _strict()
    with dtypes, ranks:
        enc = circ.circle_encode(jnp.asarray(x), num_workers=6, pack=True)
    y = jnp.asarray(np.asarray(enc) @ a)  # f applied to the real and imaginary part
    masks = np.zeros((4, 6), bool)
    for b, n in enumerate([2, 3, 5, 6]):
        masks[b, rng.choice(6, n, replace=False)] = True
    return x @ a, y, jnp.asarray(masks), x


def _dec(y, mk):
    return circ.circle_decode(y, mk, num_inputs=4, degree=1, pack=True)


def _fields(r):
    """The result's fields as numpy arrays (indexing them on the host is free)."""
    return [
        np.asarray(f) for f in (r.value, r.ok, r.cond, r.num_used, r.status, r.error)
    ]


def test_packing_two_real_linear_queries_is_exact(linear):
    want, y, masks, _ = linear
    for mk in masks:
        r = _dec(y, mk)
        assert bool(r.ok) and r.value.shape == (4, 2)
        kappa = np.linalg.cond(_v(np.exp(2j * np.pi * np.arange(6) / 6), 2)[mk])
        assert float(r.cond) == pytest.approx(kappa, rel=64 * EPS32 * kappa)
        tol = 64 * 2 * EPS32 * kappa * float(jnp.abs(y).max())
        np.testing.assert_allclose(np.asarray(r.value), want, atol=tol)
    assert circ.circle_threshold(4, 1, pack=True) == 2


def test_decoding_matrix_applies_the_decode(linear):
    _, y, masks, _ = linear
    mk = masks[1]
    a = circ.circle_decoding_matrix(
        mk, num_workers=6, num_inputs=4, degree=1, pack=True
    )
    assert a.value.shape == (4, 6, 2) and bool(a.ok)
    assert not np.any(np.asarray(a.value)[:, ~np.asarray(mk)])
    got = np.einsum("kjp,jpf->kf", np.asarray(a.value), np.asarray(y))
    np.testing.assert_allclose(got, np.asarray(_dec(y, mk).value), atol=1e-5)


def test_a_bad_traced_order_is_data(linear):
    """(jit, vmap and one program per mask: the Code contract, tests/test_codes.py)"""
    _, y, masks, _ = linear

    @jax.jit
    def one(mk, od):
        return circ.circle_threshold_decode(
            y, mk, od, num_inputs=4, degree=1, pack=True
        )

    good = one(masks[-1], jnp.arange(6))
    assert bool(good.ok) and int(good.num_used) == 2
    r = one(masks[-1], jnp.array([0, 0, 1, 2, 3, 4]))  # a repeated worker
    assert int(r.status) == int(cj.Status.BAD_POINTS) and not bool(r.ok)


def test_code_cond_is_one_with_every_worker():
    """At N = M the generator's rows are sqrt(M) times orthonormal columns (D <=
    M), so cond = 1: the known truth, for the codes' generators and decodes."""
    for k, m, d in ((3, 12, 3), (8, 40, 3), (8, 22, 3), (5, 5, 1)):
        code = cj.circle_code(num_inputs=k, num_workers=m, degree=d, pack=False)
        v = code.generator()
        assert v.shape == (m, code.num_coeffs)
        np.testing.assert_allclose(
            v.conj().T @ v, m * np.eye(code.num_coeffs), atol=64 * m * EPS64
        )
        assert np.linalg.cond(v) == pytest.approx(1.0, abs=1e-12)
    packed = cj.circle_code(num_inputs=5, num_workers=8, degree=1)  # odd K: padded
    assert (packed.pack, packed.data_points, packed.threshold) == (True, 3, 3)


def test_code_decode_against_numpy(x64, problem, np_rng):
    """CircleCode.decode (float64) is the numpy least-squares fit, cond that of V_S."""
    x, w, y = problem
    code = cj.circle_code(num_inputs=K, num_workers=M, degree=DEG)
    np.testing.assert_allclose(
        np.asarray(code.encode(jnp.asarray(x))),
        np.asarray(circ.circle_encode(jnp.asarray(x), num_workers=M)),
        atol=0,
    )
    v = _v(ALPHA, D)
    for n in (D, M):
        mk = _mask(np_rng, n)
        r = code.decode(jnp.asarray(y), jnp.asarray(mk))
        yc = y[:, 0] + 1j * y[:, 1]
        c = np.linalg.lstsq(v[mk], yc[mk], rcond=None)[0]
        ref = np.real(_v(BETA, D) @ c)
        kappa = np.linalg.cond(v[mk])
        assert float(r.cond) == pytest.approx(kappa, rel=1e-10)
        tol = 64 * D * EPS64 * kappa * np.abs(y).max()
        np.testing.assert_allclose(np.asarray(r.value), ref, atol=tol)
        np.testing.assert_allclose(np.asarray(r.value), cubic(x, w), atol=tol)


# ----------------------------------------------------------------------------------
# precision, value-dependent trouble as data, static mistakes


def test_bf16_workers_decode_in_float32(linear):
    want, y, masks, _ = linear
    r = _dec(y.astype(jnp.bfloat16), masks[-1])
    assert r.value.dtype == jnp.float32 and r.cond.dtype == jnp.float32
    assert bool(r.ok) and float(r.cond) == pytest.approx(1.0, abs=1e-5)
    # every worker answering: no factorisation in bf16, the error is the rounding
    # of the answers, within the predicted error
    err = np.abs(np.asarray(r.value) - want).max()
    assert err <= float(r.error)
    assert err < 4 * cj.unit_roundoff(jnp.bfloat16) * float(jnp.abs(y).max())


def test_too_few_and_nonfinite_answers_are_data(linear):
    _, y, masks, _ = linear
    r = _dec(y, jnp.zeros(6, bool).at[4].set(True))
    assert not bool(r.ok) and int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
    assert not np.any(np.asarray(r.value)) and float(r.error) == np.inf
    assert float(r.cond) == np.inf
    # a NaN answer is treated as missing: two responders, one of them NaN
    two = jnp.zeros(6, bool).at[jnp.array([1, 4])].set(True)
    r = _dec(y.at[1, 1, 0].set(jnp.nan), two)
    assert int(r.num_used) == 1
    assert int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
    r = _dec(y.at[2, 0, 1].set(jnp.inf), masks[-1])
    assert bool(r.ok) and int(r.num_used) == 5
    assert np.all(np.isfinite(np.asarray(r.value)))


def test_static_mistakes_raise_naming_the_function(linear):
    _, y, masks, _ = linear
    mk = masks[-1]
    with pytest.raises(
        ValueError, match=r"circle_decode: degree 2 .* D = .* = 7 .* M=6"
    ):
        circ.circle_decode(y, mk, num_inputs=4, degree=2)
    with pytest.raises(ValueError, match=r"circle_decode: y must have shape \[M, 2, "):
        circ.circle_decode(y[:, :1], mk, num_inputs=4, degree=1, pack=True)
    with pytest.raises(ValueError, match="circle_decode: pack=True needs a linear"):
        circ.circle_decode(y, mk, num_inputs=4, degree=2, pack=True)
    with pytest.raises(ValueError, match="circle_decode: pack=True .* even .* K=3"):
        circ.circle_decode(y, mk, num_inputs=3, degree=1, pack=True)
    with pytest.raises(ValueError, match=r"circle_decode: mask must have shape \[M\]"):
        _dec(y, masks)
    with pytest.raises(TypeError, match="circle_decode: mask must be boolean"):
        _dec(y, mk.astype(jnp.float32))
    with pytest.raises(TypeError, match="circle_decode: y must have a floating"):
        _dec(y.astype(jnp.int32), mk)
    with pytest.raises(TypeError, match="circle_decode: degree must be a Python int"):
        circ.circle_decode(y, mk, num_inputs=4, degree=1.0)
    fn = "circle_threshold_decode"

    def th(order):
        return circ.circle_threshold_decode(
            y, mk, order, num_inputs=4, degree=1, pack=True
        )

    with pytest.raises(ValueError, match=f"{fn}: order must list distinct workers"):
        th(jnp.array([0, 0, 1]))
    with pytest.raises(ValueError, match=f"{fn}: order must hold worker indices"):
        th(jnp.array([6]))
    with pytest.raises(ValueError, match=f"{fn}: order must be a 1-D integer"):
        th(jnp.zeros(3, jnp.float32))
    with pytest.raises(ValueError, match=f"{fn}: order must list at most M=6"):
        th(jnp.arange(7))


def test_names_sizes_at_the_limit_and_one_dimensional_queries():
    """The two names; D = M is the largest degree a code takes (D = M + 1 is
    refused); a systematic code where K' does not divide M is refused, naming the
    nearest M; a query of one feature (x [K]) encodes, a scalar is refused; one
    worker and one input decode."""
    assert cj.circle_code(num_inputs=4, num_workers=6, degree=1).name == "circle-packed"
    kw = dict(num_inputs=3, degree=3, pack=False)  # D = 3 (3 - 1) + 1 = 7
    assert cj.circle_code(num_workers=7, **kw).name == "circle"
    assert cj.circle_code(num_workers=7, **kw).threshold == 7
    with pytest.raises(ValueError, match=r"circle_code: degree 3 .* D = .* = 7 .* M=6"):
        cj.circle_code(num_workers=6, **kw)
    with pytest.raises(ValueError, match="circle_code: degree must be >= 1, got 0"):
        cj.circle_code(num_inputs=3, num_workers=6, degree=0, pack=False)
    fn = "circle_decoding_matrix"
    with pytest.raises(ValueError, match=f"{fn}: degree must be >= 1, got 0"):
        circ.circle_decoding_matrix(jnp.ones(6, bool), num_workers=6, num_inputs=3,
                                    degree=0)  # fmt: skip
    # systematic needs the K'-th roots among the M-th: the message names the two
    # nearest M that have them
    with pytest.raises(ValueError, match=r"K'=3 .* divide .* M=8.*\(use M = 9 or 6\)"):
        cj.circle_code(num_workers=8, num_inputs=3, degree=1, pack=False,
                       systematic=True)  # fmt: skip
    enc = circ.circle_encode(jnp.asarray([1.0, 2.0, 3.0], jnp.float32), num_workers=4)
    assert enc.shape == (4, 2)
    with pytest.raises(ValueError, match=r"circle_encode: x must have shape \[K, "):
        circ.circle_encode(jnp.float32(1.0), num_workers=4)
    one = circ.circle_decoding_matrix(
        jnp.ones(1, bool), num_workers=1, num_inputs=1, degree=1, pack=False
    )
    assert bool(one.ok) and np.asarray(one.value).shape == (1, 1, 2)


def test_float32_decode_takes_the_qr_tier_where_the_normal_equations_fail():
    """The float32 one-mask decode (docs/decoding.md): the semi-normal equations
    with refinement where cond^2 eps <= 1/32, Householder QR beyond. M = 24, D = 9
    (K = 3, degree 4), answers the degree-8 series of random complex coefficients:
    every worker (cond 1), 14 random workers (the first tier) and an arc of 11
    neighbouring workers (cond about 3e3: the QR tier) all decode (ok), within
    cond * eps of float64 least squares, with ``cond`` within 2% of numpy's."""
    m, k, deg = 24, 3, 4
    d = deg * (k - 1) + 1
    rng = np.random.default_rng(11)
    c = rng.standard_normal((d, F)) + 1j * rng.standard_normal((d, F))
    alpha = np.exp(2j * np.pi * np.arange(m) / m)
    va = _v(alpha, d)
    yc = va @ c
    y = jnp.asarray(np.stack([yc.real, yc.imag], axis=1), jnp.float32)
    random14 = np.zeros(m, bool)
    random14[rng.choice(m, 14, replace=False)] = True
    arc = np.arange(m) < 11
    conds = []
    for mk in (np.ones(m, bool), random14, arc):
        r = circ.circle_decode(y, jnp.asarray(mk), num_inputs=k, degree=deg)
        yr = np.asarray(y, np.float64)
        coef = np.linalg.lstsq(va[mk], (yr[:, 0] + 1j * yr[:, 1])[mk], rcond=None)[0]
        ref = (_v(np.exp(2j * np.pi * np.arange(k) / k), d) @ coef).real
        kappa = np.linalg.cond(va[mk])
        conds.append(kappa)
        assert bool(r.ok) and int(r.num_used) == mk.sum(), kappa
        assert float(r.cond) == pytest.approx(kappa, rel=0.02)
        tol = 64 * d * EPS32 * kappa * np.abs(yr).max()
        np.testing.assert_allclose(np.asarray(r.value), ref, atol=tol)
    # the masks span both tiers: cond^2 eps below and above 1/32
    assert conds[1] ** 2 * EPS32 < 1 / 32 < conds[2] ** 2 * EPS32


# ----------------------------------------------------------------------------------
# the predicted error covers the actual one at the threshold (docs/decoding.md)

COVER_DRAWS = 6  # draws of inputs and weights per (setting, dtype, N)
COVER_MASKS = 40  # masks per draw: 240 per (setting, dtype, N)


def _wilson_high(successes, trials, z=2.576):
    """The upper end of the 99% Wilson interval of a rate."""
    p = successes / trials
    den = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return centre + half


def _rounded(v, dtype):
    """float32 values rounded once to ``dtype`` (and back, exactly, to float32)."""
    return np.asarray(v, np.float32).astype(dtype).astype(np.float32)


def _pair_worker(q, w, degree, dtype):
    """(z W)^d on coded pairs q [..., 2, F] in ``dtype``: every operand and result
    rounded to it (products of two float32 numbers rounded once)."""
    r = lambda v: _rounded(v, dtype)  # noqa: E731
    w = r(w)
    a, b = r(r(q[..., 0, :]) @ w), r(r(q[..., 1, :]) @ w)
    re, im = a, b
    for _ in range(degree - 1):
        re, im = r(r(re * a) - r(im * b)), r(r(re * b) + r(im * a))
    return np.stack([re, im], axis=-2)


@pytest.mark.parametrize(
    "k,m,degree,pack,dtype",
    [
        (3, 9, 2, False, "float32"),  # D = 5
        (3, 9, 2, False, "bfloat16"),
        (4, 10, 1, True, "float32"),  # K' = D = 2
    ],
)
def test_predicted_error_covers_at_the_threshold_and_one_above(
    np_rng, k, m, degree, pack, dtype
):
    """A statistical claim: ``error`` >= the actual error in at least 95% of the
    ok decodes (docs/decoding.md, section 1) at N = D and N = D + 1, over six
    draws of inputs and weights, for workers computing f(z) = (z W)^d in complex
    arithmetic on pairs in ``dtype`` (every operation rounded) against float64.
    Not significantly below 95% (the 99% Wilson interval), and not uselessly
    loose: the median predicted / actual within the factors docs/decoding.md
    reports for ChebyLS (10 at the threshold, 25 one above)."""
    dt = jnp.dtype(dtype)
    kp = k // 2 if pack else k
    d = degree * (kp - 1) + 1
    e = circ._encoding_real(m, k, pack).astype(np.float32)  # [2M, K]
    decode = jax.jit(
        jax.vmap(
            lambda yy, mk: circ.circle_decode(
                yy, mk, num_inputs=k, degree=degree, pack=pack
            )
        )
    )
    for n, loose in ((d, 10.0), (d + 1, 25.0)):
        covered, ratios = 0, []
        for _ in range(COVER_DRAWS):
            x = np_rng.standard_normal((COVER_MASKS, k, F)).astype(np.float32)
            w = (np_rng.standard_normal((F, F)) / 2).astype(np.float32)
            q = np.einsum("jk,bkp->bjp", e, x).reshape(COVER_MASKS, m, 2, F)
            y = _pair_worker(q, w, degree, dt).astype(dt)
            masks = np.zeros((COVER_MASKS, m), bool)
            for mk in masks:
                mk[np_rng.choice(m, n, replace=False)] = True
            r = decode(jnp.asarray(y), jnp.asarray(masks))
            assert np.all(np.asarray(r.ok))
            truth = (x.astype(np.float64) @ w.astype(np.float64)) ** degree
            diff = np.abs(np.asarray(r.value, np.float64) - truth)
            act = diff.reshape(COVER_MASKS, -1).max(axis=1)
            pred = np.asarray(r.error, np.float64)
            covered += int(np.sum(pred >= act))
            ratios.append(pred / act)
        trials = COVER_MASKS * COVER_DRAWS
        assert _wilson_high(covered, trials) >= 0.95, (n, covered, trials)
        assert np.median(np.concatenate(ratios)) <= loose, n
