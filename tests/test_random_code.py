"""Random (Gaussian) codes for linear workloads, decoded by least squares.

Oracles: numpy.linalg.lstsq and cond on the responders' rows of the generator in
float64. Known truths: a linear workload encoded, workers dropped, recovered exactly;
the draw is the same numbers with and without float64; the entries have variance
1/K (a chi-square interval).
"""

from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import codedjax as cj
from codedjax import _random_kernels as rc

K, M, F = 3, 7, 2
EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def code():
    """The generator (float32 draw) and a linear workload, built once."""
    g = rc.gaussian_encoding_matrix(jax.random.key(5), num_inputs=K, num_workers=M)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((K, 4))
    a = rng.standard_normal((4, F))
    return np.asarray(g), x, a


def test_draw_is_reproducible_float32_and_n01k():
    key = jax.random.key(11)
    g = rc.gaussian_encoding_matrix(key, num_inputs=50, num_workers=400)
    assert g.dtype == jnp.float32 and g.shape == (400, 50)
    with jax.enable_x64(True):
        g64 = rc.gaussian_encoding_matrix(key, num_inputs=50, num_workers=400)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(g64))
    other = rc.gaussian_encoding_matrix(
        jax.random.key(12), num_inputs=50, num_workers=400
    )
    assert not np.array_equal(np.asarray(g), np.asarray(other))
    # variance 1/K: 20,000 draws, a 99.9% chi-square interval on K * sum g^2
    n = g.size
    s = float(np.sum(np.asarray(g, np.float64) ** 2)) * 50
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], n)
    assert lo <= s <= hi


def test_least_squares_against_numpy_and_exact(x64, code):
    g, x, a = code
    enc = np.asarray(rc.random_encode(jnp.asarray(x), jnp.asarray(g, jnp.float64)))
    np.testing.assert_allclose(enc, g.astype(np.float64) @ x, atol=1e-13)
    y = enc @ a  # a linear worker
    gg = jnp.asarray(g, jnp.float64)
    for mk in ([1, 1, 0, 1, 0, 0, 0], [1, 0, 1, 1, 1, 0, 1], [1] * M):
        mk = np.array(mk, bool)
        r = rc.random_decode(jnp.asarray(y), jnp.asarray(mk), gg)
        ref = np.linalg.lstsq(g[mk].astype(np.float64), y[mk], rcond=None)[0]
        kappa = np.linalg.cond(g[mk].astype(np.float64))
        assert bool(r.ok) and int(r.num_used) == mk.sum()
        assert float(r.cond) == pytest.approx(kappa, rel=64 * K * EPS64 * kappa)
        tol = 64 * K * EPS64 * kappa * np.abs(y).max()
        np.testing.assert_allclose(np.asarray(r.value), ref, atol=tol)
        np.testing.assert_allclose(np.asarray(r.value), x @ a, atol=tol)
        # the decoding matrix of the same mask (exactly K = 3 responders included)
        mat = rc.random_decoding_matrix(jnp.asarray(mk), gg, accum_dtype=jnp.float64)
        assert bool(mat.ok) and int(mat.status) == int(cj.Status.SUCCESS)
        np.testing.assert_allclose(np.asarray(mat.value) @ y, x @ a, atol=tol)


def test_predicted_error_is_the_library_model(x64, code, np_rng):
    g, x, a = code
    g64 = g.astype(np.float64)
    y = g64 @ x @ a + 1e-6 * np_rng.standard_normal((M, F))
    mk = np.array([1, 0, 1, 1, 1, 0, 1], bool)
    r = rc.random_decode(jnp.asarray(y), jnp.asarray(mk), jnp.asarray(g64))
    pinv = np.zeros((K, M))
    pinv[:, mk] = np.linalg.pinv(g64[mk])
    res = y[mk] - g64[mk] @ (pinv @ y)
    sigma = np.maximum(
        EPS64 / 2 * np.sqrt(np.mean(y[mk] ** 2, axis=0)),
        np.sqrt(np.sum(res**2, axis=0) / (mk.sum() - K)),
    )
    z = NormalDist().inv_cdf(1 - 0.01 / (2 * K * F))
    gain = np.max(np.sum(pinv**2, axis=1))
    assert float(r.error) == pytest.approx(
        z * np.sqrt(gain + 1) * sigma.max(), rel=1e-6
    )


def test_value_dependent_trouble_is_data(code):
    """(jit, vmap and one program per mask: the Code contract, tests/test_codes.py)"""
    g, x, a = code
    gj = jnp.asarray(g)
    y = jnp.asarray((g.astype(np.float64) @ x @ a).astype(np.float32))
    four = jnp.asarray(np.array([1, 0, 1, 1, 1, 0, 1], bool))
    three = jnp.asarray(np.array([1, 1, 0, 1, 0, 0, 0], bool))

    def dec(yy, mk, gg=gj):
        return rc.random_decode(yy, mk, gg)

    # a NaN answer is treated as missing
    r = dec(y.at[0, 1].set(jnp.nan), four)
    assert bool(r.ok) and int(r.num_used) == 4
    np.testing.assert_allclose(np.asarray(r.value), x @ a, atol=1e-4)
    r = dec(y.at[0, 1].set(jnp.nan), three)
    assert int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
    assert not np.any(np.asarray(r.value)) and float(r.error) == np.inf
    # a non-finite generator (an argument of the same program) is BAD_POINTS
    r = dec(y, four, gj.at[2, 1].set(jnp.nan))
    assert int(r.status) == int(cj.Status.BAD_POINTS)


def test_the_code_holds_its_seed(code):
    g, _, _ = code  # drawn from jax.random.key(5)
    rcode = cj.random_code(num_inputs=K, num_workers=M, seed=5)
    np.testing.assert_array_equal(np.asarray(rcode.generator()), g)
    other = cj.random_code(num_inputs=K, num_workers=M, seed=6)
    assert rcode != other and hash(rcode) != hash(other)
    assert not np.array_equal(np.asarray(other.generator()), g)
    assert rcode.threshold == K and rcode.name == "random"
    with pytest.raises(ValueError, match="random_code: seed must be >= 0"):
        cj.random_code(num_inputs=K, num_workers=M, seed=-1)
    with pytest.raises(ValueError, match="random_code: a random code needs"):
        cj.random_code(num_inputs=K, num_workers=K - 1)


def test_every_int_seed_draws_one_generator_with_and_without_float64():
    """Any int >= 0 is a seed (jax.random.key overflows from 2^63 and, without
    float64, drops the bits above 32): the same draw with float64 on and off,
    distinct draws for seeds that agree in their low 32 bits, jax.random.key's
    own draw below 2^32; a negative or non-int seed is refused by name."""
    seeds = (0, 2**32, 2**40 + 5, 2**63, 2**64, 2**70, np.uint64(2**63 + 1))
    draws = [
        np.asarray(cj.random_code(num_inputs=2, num_workers=3, seed=s).generator())
        for s in seeds
    ]
    with jax.enable_x64(True):
        for s, g in zip(seeds, draws, strict=True):
            again = rc.gaussian_encoding_matrix(
                rc.seed_key(s), num_inputs=2, num_workers=3
            )
            np.testing.assert_array_equal(np.asarray(again), g)
    assert len({g.tobytes() for g in draws}) == len(seeds)
    small = rc.gaussian_encoding_matrix(jax.random.key(7), num_inputs=2, num_workers=3)
    np.testing.assert_array_equal(
        np.asarray(cj.random_code(num_inputs=2, num_workers=3, seed=7).generator()),
        np.asarray(small),
    )
    code = cj.random_code(num_inputs=2, num_workers=3, seed=np.int64(9))
    assert code.seed == 9 and type(code.seed) is int and hash(code)
    for fn, make in (
        ("random_code", lambda s: cj.random_code(num_inputs=2, num_workers=3, seed=s)),
        ("RandomCode", lambda s: cj.RandomCode(2, 3, seed=s)),
        ("seed_key", rc.seed_key),
    ):
        with pytest.raises(ValueError, match=f"^{fn}: seed must be >= 0, got -1"):
            make(-1)
        for bad in (1.5, True, "3", None):
            with pytest.raises(TypeError, match=f"^{fn}: seed must be a Python int"):
                make(bad)


def test_static_mistakes_raise_naming_the_function(code):
    g, x, _ = code
    gj = jnp.asarray(g)
    fn = "gaussian_encoding_matrix"
    with pytest.raises(TypeError, match=f"{fn}: key must be a typed PRNG key"):
        rc.gaussian_encoding_matrix(jax.random.PRNGKey(0), num_inputs=2, num_workers=3)
    with pytest.raises(TypeError, match=f"{fn}: key must be a typed PRNG key"):
        rc.gaussian_encoding_matrix(0, num_inputs=2, num_workers=3)
    with pytest.raises(ValueError, match=f"{fn}: a random code needs at least K=4"):
        rc.gaussian_encoding_matrix(jax.random.key(0), num_inputs=4, num_workers=3)
    with pytest.raises(ValueError, match="random_encode: x must hold K=3 .* got 2"):
        rc.random_encode(jnp.ones((2, 4)), gj)
    with pytest.raises(ValueError, match=r"random_decode: generator must have M=6"):
        rc.random_decode(jnp.ones((6, 2)), jnp.ones(6, bool), gj)
    with pytest.raises(ValueError, match=r"random_decode: generator must have shape"):
        rc.random_decode(jnp.ones((3, 2)), jnp.ones(3, bool), gj.T)
    with pytest.raises(ValueError, match=r"random_decode: mask must have shape \[M\]"):
        rc.random_decode(jnp.ones((M, 2)), jnp.ones((2, M), bool), gj)
    with pytest.raises(TypeError, match="random_decode: mask must be boolean"):
        rc.random_decode(jnp.ones((M, 2)), jnp.ones(M), gj)
    with pytest.raises(TypeError, match="random_decode: y must have a floating"):
        rc.random_decode(jnp.ones((M, 2), jnp.int32), jnp.ones(M, bool), gj)


# ----------------------------------------------------------------------------------
# the predicted error covers the actual one at the threshold (docs/decoding.md)

COVER_SEEDS = (1, 2, 3, 4, 5, 6)  # the codes' seeds: six generators per setting
COVER_MASKS = 40  # masks per generator and N: 240 per (setting, dtype, N)
P = 4  # the linear workload's payload width


def _wilson_high(successes, trials, z=2.576):
    """The upper end of the 99% Wilson interval of a rate."""
    p = successes / trials
    den = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return centre + half


@pytest.fixture(scope="module")
def cover_decode():
    """One program per (K, M, answers' dtype): B masks, one traced generator."""
    return jax.jit(jax.vmap(rc.random_decode, in_axes=(0, 0, None)))


def _rounded(v, dtype):
    """float32 values rounded once to ``dtype`` (and back, exactly, to float32)."""
    return np.asarray(v, np.float32).astype(dtype).astype(np.float32)


@pytest.mark.parametrize(
    "k,m,dtype", [(4, 10, "float32"), (4, 10, "bfloat16"), (6, 9, "float32")]
)
def test_predicted_error_covers_at_the_threshold_and_one_above(
    cover_decode, np_rng, k, m, dtype
):
    """A statistical claim: ``error`` >= the actual error in at least 95% of the
    ok decodes (docs/decoding.md, section 1) at N = K and N = K + 1, pooled over
    six generators, for a linear worker computing in ``dtype`` (its parameters
    and coded queries rounded to it, its product rounded once) against float64.
    Not significantly below 95% (the 99% Wilson interval), and not uselessly
    loose: the median predicted / actual within the factors docs/decoding.md
    reports for ChebyLS (10 at the threshold, 25 one above)."""
    dt = jnp.dtype(dtype)
    for n, loose in ((k, 10.0), (k + 1, 25.0)):
        covered, ratios = 0, []
        for seed in COVER_SEEDS:
            g = np.asarray(
                cj.random_code(num_inputs=k, num_workers=m, seed=seed).generator()
            )
            x = np_rng.standard_normal((COVER_MASKS, k, P)).astype(np.float32)
            w = (np_rng.standard_normal((P, P)) / 2).astype(np.float32)
            q = _rounded(np.einsum("mk,bkp->bmp", g, x), dt)  # float32 encoding
            y = _rounded(q @ _rounded(w, dt), dt).astype(dt)
            masks = np.zeros((COVER_MASKS, m), bool)
            for mk in masks:
                mk[np_rng.choice(m, n, replace=False)] = True
            r = cover_decode(jnp.asarray(y), jnp.asarray(masks), jnp.asarray(g))
            assert np.all(np.asarray(r.ok))
            truth = x.astype(np.float64) @ w.astype(np.float64)
            diff = np.abs(np.asarray(r.value, np.float64) - truth)
            act = diff.reshape(COVER_MASKS, -1).max(axis=1)
            pred = np.asarray(r.error, np.float64)
            covered += int(np.sum(pred >= act))
            ratios.append(pred / act)
        trials = COVER_MASKS * len(COVER_SEEDS)
        assert _wilson_high(covered, trials) >= 0.95, (n, covered, trials)
        assert np.median(np.concatenate(ratios)) <= loose, n
