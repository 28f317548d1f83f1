"""Systematic codes: K workers are sent the queries themselves, and a query whose
own worker answered is decoded as that answer.

The Lagrange codes (every decoder), the circle code and BACC have a
``systematic=True`` variant; ParM, replication and RepApprox are systematic by
construction (tests/test_per_query.py checks ``systematic`` and the per-query rule
for every code of the catalogue). Here: the points, the encoding, the decode (the
copied answers bit for bit, the fit elsewhere, the result's fields), the decoding
matrix, the batched and jitted paths, the robust decoder's rule, and the factories'
and catalogue's handling of the variants.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import _chebyshev

K, M, DEG = 3, 12, 2  # D = 5
EPS32 = float(np.finfo(np.float32).eps)
LAGRANGE = {
    dec: cj.lagrange_code(
        num_inputs=K, num_workers=M, degree=DEG, decoder=dec, systematic=True
    )
    for dec in ("chebyls", "threshold", "graceful")
}
SW = np.asarray(LAGRANGE["chebyls"].systematic_workers)
OTHER = np.setdiff1d(np.arange(M), SW)  # the coded workers


def worker(v):
    return v**2 - 0.5 * v


def _data(code, seed=0, dtype=jnp.float32):
    x = jax.random.uniform(jax.random.key(seed), (K, 2), minval=-1.0, maxval=1.0)
    return x, worker(code.encode(x)).astype(dtype)


def _mask(*off):
    m = np.ones(M, bool)
    m[list(off)] = False
    return jnp.asarray(m)


# ---------------------------------------------------------------------------------
# the points


@pytest.mark.parametrize("k,m,kind", [(8, 12, 1), (8, 16, 1), (3, 12, 1), (3, 7, 2)])
def test_the_points_contain_the_data_points(k, m, kind):
    """The data points bit for bit at the systematic workers, decreasing, every
    other point a Chebyshev point of the kind, symmetric unless K odd and M even."""
    alpha, index = _chebyshev.systematic_points_f64(k, m, kind)
    cheb = _chebyshev.points_f64(m, kind)
    np.testing.assert_array_equal(alpha[list(index)], _chebyshev.points_f64(k, 1))
    assert np.all(np.diff(alpha) < 0)
    rest = np.setdiff1d(np.arange(m), index)
    np.testing.assert_array_equal(alpha[rest], cheb[rest])
    # each data point took the nearest Chebyshev point (in angle): half a spacing
    step = np.pi / m if kind == 1 else np.pi / (m - 1)
    moved = np.abs(np.arccos(alpha[list(index)]) - np.arccos(cheb[list(index)]))
    assert np.all(moved <= step / 2 + 1e-12)
    if not (k % 2 and not m % 2):
        np.testing.assert_array_equal(alpha, -alpha[::-1])


def test_nested_chebyshev_points_are_kept_and_too_few_workers_are_refused():
    """At M an odd multiple of K the first-kind points contain the data points
    already (K = 8, M = 40: worker 5k + 2); too few workers is a ValueError."""
    alpha, index = _chebyshev.systematic_points_f64(8, 40, 1)
    np.testing.assert_array_equal(alpha, _chebyshev.points_f64(40, 1))
    assert index == tuple(5 * k + 2 for k in range(8))
    with pytest.raises(
        ValueError, match=r"need M >= K \+ 1 Chebyshev points of kind 2"
    ):
        _chebyshev.systematic_points_f64(3, 3, 2)
    with pytest.raises(ValueError, match="lagrange_code: systematic=True"):
        cj.lagrange_code(num_inputs=3, num_workers=3, degree=1, kind=2, systematic=True)
    with pytest.raises(ValueError, match="bacc_code: systematic=True"):
        cj.bacc_code(num_inputs=3, num_workers=3, systematic=True)
    for factory, kw in (
        (cj.lagrange_code, dict(degree=1)),
        (cj.circle_code, dict(degree=1)),
        (cj.bacc_code, {}),
    ):
        with pytest.raises(TypeError, match="systematic must be True or False"):
            factory(num_inputs=K, num_workers=M, systematic=1, **kw)


# ---------------------------------------------------------------------------------
# Lagrange codes


def test_encode_sends_the_systematic_workers_their_queries():
    """Worker systematic_workers[k] is sent x_k bit for bit; every decoder of a
    systematic code on the same points encodes alike, and unlike the plain code."""
    x, _ = _data(LAGRANGE["chebyls"])
    keys = {c.encoder_key for c in LAGRANGE.values()}
    assert len(keys) == 1
    plain = cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG)
    assert plain.encoder_key not in keys and not plain.systematic
    enc = np.asarray(LAGRANGE["chebyls"].encode(x))
    np.testing.assert_array_equal(enc[SW], np.asarray(x))
    for c in LAGRANGE.values():
        np.testing.assert_array_equal(np.asarray(c.encode(x)), enc)


def test_chebyls_copies_the_answered_queries_and_fits_the_others_in_float64():
    """Query 0's worker missing (and two others): queries 1, 2 are their workers'
    answers bit for bit, query 0 the float64 least-squares fit at the code's
    points (numpy), to the solve's rounding."""
    code = LAGRANGE["chebyls"]
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 2)))
        y = worker(code.encode(x))
        mask = _mask(SW[0], OTHER[0], OTHER[4])
        r = code.decode(y, mask)
        assert bool(r.ok) and r.value.dtype == jnp.float64
        np.testing.assert_array_equal(np.asarray(r.value[1:]), np.asarray(y)[SW[1:]])
        alpha = np.asarray(code.alpha(jnp.float64))
        v = np.polynomial.chebyshev.chebvander(alpha, code.num_coeffs - 1)
        sel = np.asarray(mask)
        coef = np.linalg.lstsq(v[sel], np.asarray(y)[sel], rcond=None)[0]
        beta = _chebyshev.points_f64(K, 1)
        ref = np.polynomial.chebyshev.chebvander(beta, code.num_coeffs - 1)
        tol = 100 * np.linalg.cond(v[sel]) * np.finfo(np.float64).eps
        np.testing.assert_allclose(np.asarray(r.value[0]), ref[0] @ coef, atol=tol)
        assert int(r.num_used) == sel.sum()


@pytest.mark.parametrize("dec", sorted(LAGRANGE))
def test_every_decoder_copies_the_answered_queries_and_fits_the_others(dec):
    """Each decoder's copied queries are the answers bit for bit, its fitted one
    the polynomial's value to float32 rounding times the fit's condition number;
    the decoding matrix (ChebyLS's branch for the graceful decoder, checked
    with ChebyLS) has unit rows for the copies and is the map decode applies."""
    code = LAGRANGE[dec]
    x, y = _data(code, seed=1)
    mask = _mask(SW[1], OTHER[1], OTHER[5])
    r = code.decode(y, mask)
    assert bool(r.ok)
    keep = np.array([0, 2])
    np.testing.assert_array_equal(np.asarray(r.value[keep]), np.asarray(y[SW[keep]]))
    scale = float(jnp.abs(y).max())
    truth = np.asarray(worker(np.asarray(x, np.float64)))
    tol = 100 * float(r.cond) * EPS32 * scale
    np.testing.assert_allclose(r.value[1], truth[1], atol=tol)
    assert np.isfinite(float(r.error))
    if dec != "graceful":
        mat = np.asarray(code.decoding_matrix(mask))
        np.testing.assert_array_equal(mat[keep], np.eye(M)[SW[keep]])
        np.testing.assert_allclose(mat @ np.asarray(y), r.value, atol=tol)


def test_the_systematic_answers_alone_decode_like_uncoded_workers():
    """N = K < D answers, all systematic (bf16 workers): ok, the answers as they
    are, cond 1, K used, and the error an uncoded code predicts for them."""
    code = LAGRANGE["chebyls"]
    x, y = _data(code, dtype=jnp.bfloat16)
    only = np.zeros(M, bool)
    only[SW] = True
    r = code.decode(y, jnp.asarray(only))
    assert bool(r.ok) and int(r.status) == int(cj.Status.SUCCESS)
    assert float(r.cond) == 1.0 and int(r.num_used) == K
    np.testing.assert_array_equal(np.asarray(r.value), np.asarray(y[SW], np.float32))
    ref = cj.uncoded_code(num_inputs=K).decode(y[SW], jnp.ones(K, bool))
    np.testing.assert_allclose(float(r.error), float(ref.error), rtol=1e-6)
    # one systematic answer fewer: not ok, zeros (the fit has K - 1 < D answers)
    only[SW[0]] = False
    r = code.decode(y, jnp.asarray(only))
    assert not bool(r.ok) and not np.any(np.asarray(r.value))
    assert np.isinf(float(r.error))
    assert not np.any(np.asarray(code.decoding_matrix(jnp.asarray(only))))


def test_a_nonfinite_systematic_answer_is_not_copied():
    """A NaN answer of a systematic worker counts as missing: its query is the
    fit's, as with the worker masked out."""
    code = LAGRANGE["chebyls"]
    _, y = _data(code)
    bad = y.at[SW[2], 0].set(jnp.nan)
    r = code.decode(bad, jnp.ones(M, bool))
    ref = code.decode(y, _mask(SW[2]))
    assert bool(r.ok)
    np.testing.assert_array_equal(np.asarray(r.value), np.asarray(ref.value))


def test_subnormal_answers_are_copied_and_their_error_is_not_flushed():
    """Answers in float32's subnormal range (scaled by 2^-140 in numpy, which
    keeps them): the copies bit for bit, and the error prediction, the larger of
    the copies' and the fit's chosen through the bits, nonzero and covering the
    fitted query."""
    code = LAGRANGE["chebyls"]
    x, y = _data(code)
    tiny = np.ldexp(np.asarray(y), -140).astype(np.float32)
    r = code.decode(jnp.asarray(tiny), _mask(SW[0], OTHER[3]))
    assert bool(r.ok)
    np.testing.assert_array_equal(np.asarray(r.value[1:]), tiny[SW[1:]])
    truth = np.ldexp(worker(np.asarray(x, np.float64)), -140)
    assert 0.0 < np.abs(np.asarray(r.value[0], np.float64) - truth[0]).max()
    assert np.abs(np.asarray(r.value[0], np.float64) - truth[0]).max() <= float(r.error)


def test_batched_decodes_equal_the_loop():
    """decode_batched (shared and per-mask payloads) equals a loop of decode (the
    batched fit rounds apart: to a few roundings), the copies bit for bit."""
    code = LAGRANGE["chebyls"]
    _, y = _data(code)
    only = np.zeros(M, bool)
    only[SW] = True
    masks = jnp.asarray(np.stack([np.asarray(_mask(SW[0], OTHER[2])), only, ~only]))
    loop = [code.decode(y, mk) for mk in masks]
    scale = float(jnp.abs(y).max())
    for got in (
        code.decode_batched(y, masks, shared_y=True),
        code.decode_batched(jnp.stack([y] * 3), masks),
    ):
        np.testing.assert_array_equal(np.asarray(got.ok), [True, True, True])
        for b, ref in enumerate(loop):
            np.testing.assert_allclose(got.value[b], ref.value, atol=16 * EPS32 * scale)
        np.testing.assert_array_equal(np.asarray(got.value[1]), np.asarray(y[SW]))


def test_robust_decoder_copies_only_the_answers_it_checked():
    """A corrupted systematic answer is located and not copied (its query is the
    fit's, near the truth); the clean systematic answers are copied; below D
    nothing decodes."""
    code = cj.lagrange_code(
        num_inputs=K,
        num_workers=M,
        degree=DEG,
        decoder="robust",
        max_corrupted=1,
        worker_dtype="bfloat16",
        systematic=True,
    )
    x, y = _data(code)
    r = code.decode(y.at[SW[1]].add(1.0), jnp.ones(M, bool))
    assert bool(r.ok) and np.flatnonzero(np.asarray(r.suspects)).tolist() == [SW[1]]
    truth = np.asarray(worker(x))
    np.testing.assert_allclose(r.value[1], truth[1], atol=1e-4)
    keep = np.array([0, 2])
    np.testing.assert_array_equal(np.asarray(r.value[keep]), np.asarray(y[SW[keep]]))
    only = np.zeros(M, bool)
    only[SW] = True
    assert not bool(code.decode(y, jnp.asarray(only)).ok)


# ---------------------------------------------------------------------------------
# the circle code and BACC


def _pairs_worker(q):
    """worker() in complex arithmetic on (real, imaginary) pairs [M, 2, ...]."""
    w = worker(jax.lax.complex(q[:, 0], q[:, 1]))
    return jnp.stack([jnp.real(w), jnp.imag(w)], axis=1)


def test_circle_code_at_the_data_roots_copies_their_answers():
    """K' | M: worker i M / K' is sent complex input i exactly (packed, degree 1:
    queries i and K' + i as its real and imaginary part), and a decode returns
    that answer's real part where it answered, the fit elsewhere."""
    packed = cj.circle_code(num_inputs=4, num_workers=M, degree=1, systematic=True)
    x4 = jax.random.uniform(jax.random.key(2), (4, 2), minval=-1.0, maxval=1.0)
    w4 = np.asarray(packed.systematic_workers)
    assert w4.tolist() == [0, 6, 0, 6] and packed.threshold == 2
    np.testing.assert_array_equal(
        np.asarray(packed.encode(x4)[w4, np.arange(4) // 2]), np.asarray(x4)
    )
    code = cj.circle_code(num_inputs=K, num_workers=M, degree=DEG, systematic=True)
    x = jax.random.uniform(jax.random.key(2), (K, 2), minval=-1.0, maxval=1.0)
    enc = code.encode(x)
    w = np.asarray(code.systematic_workers)
    assert w.tolist() == [0, 4, 8] and code.threshold == K
    np.testing.assert_array_equal(np.asarray(enc[w, 0]), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(enc[w, 1]), 0.0)
    y = _pairs_worker(enc)
    r = code.decode(y, _mask(w[0], 5))
    assert bool(r.ok)
    np.testing.assert_array_equal(np.asarray(r.value[1:]), np.asarray(y[w[1:], 0]))
    truth = np.asarray(worker(np.asarray(x, np.float64)))
    tol = 100 * float(r.cond) * EPS32 * float(jnp.abs(y).max())
    np.testing.assert_allclose(r.value[0], truth[0], atol=tol)


def test_circle_code_refuses_data_roots_that_are_not_worker_roots():
    with pytest.raises(ValueError, match="K'=3 complex data points to divide"):
        cj.circle_code(num_inputs=3, num_workers=10, degree=2, systematic=True)


def test_bacc_at_the_data_points_returns_their_answers():
    """Berrut's interpolant passes through its nodes: with a systematic worker's
    answer in hand, its query is that answer bit for bit."""
    code = cj.bacc_code(num_inputs=K, num_workers=M, systematic=True)
    w = np.asarray(code.systematic_workers)
    x = jax.random.uniform(jax.random.key(3), (K, 2), minval=-1.0, maxval=1.0)
    enc = code.encode(x)
    np.testing.assert_array_equal(np.asarray(enc[w]), np.asarray(x))
    y = jnp.tanh(enc)
    r = code.decode(y, _mask(w[2], np.setdiff1d(np.arange(M), w)[3]))
    assert bool(r.ok) and code.systematic and code.threshold == 1
    np.testing.assert_array_equal(np.asarray(r.value[:2]), np.asarray(y[w[:2]]))


# ---------------------------------------------------------------------------------
# the catalogue


def test_the_catalogue_lists_each_variant_after_its_scheme():
    """systematic=True adds "<name> systematic" right after each scheme that has
    one (threshold's served "first"); the default listing has none."""
    wl = cj.Workload("quadratic", 2)
    plain = [s.name for s in cj.catalogue(wl, K, 10)]
    both = cj.catalogue(wl, K, 10, systematic=True)
    names = [s.name for s in both]
    assert not any("systematic" in n for n in plain)
    assert [n for n in names if "systematic" not in n] == plain
    for base in ("chebyls", "threshold", "graceful", "robust", "circle", "bacc"):
        assert names[names.index(base) + 1] == f"{base} systematic"
    by = {s.name: s for s in both}
    assert by["threshold systematic"].policy == "first"
    assert by["chebyls systematic"].code.systematic
    assert by["chebyls systematic"].min_responses == K
    # K' = 3 does not divide M = 10: the circle variant says why
    assert not by["circle systematic"].applies
    assert "to divide num_workers M=10" in by["circle systematic"].reason
    with pytest.raises(TypeError, match="catalogue: systematic"):
        cj.catalogue(wl, K, 10, systematic="yes")
