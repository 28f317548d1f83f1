"""Straggler models: uniform masks, latency-driven arrivals, worst-case search."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb
from scipy import stats

import codedjax as cj


def test_masks_have_exactly_n_and_shape(key):
    m = cj.sample_masks(key, num_workers=40, num_responses=30, shape=(3, 7))
    assert m.shape == (3, 7, 40) and m.dtype == jnp.bool_
    assert np.all(np.asarray(m).sum(-1) == 30)
    assert not bool(jnp.any(cj.sample_masks(key, num_workers=5, num_responses=0)))
    assert bool(jnp.all(cj.sample_masks(key, num_workers=5, num_responses=5)))


def test_masks_are_uniform_over_subsets(key):
    # all C(6, 3) = 20 subsets equally likely: chi-square goodness of fit
    t = 20_000
    m = np.asarray(cj.sample_masks(key, num_workers=6, num_responses=3, shape=(t,)))
    codes = m.astype(int) @ (1 << np.arange(6))
    subsets = [sum(1 << i for i in c) for c in itertools.combinations(range(6), 3)]
    counts = np.array([(codes == s).sum() for s in subsets])
    assert counts.sum() == t
    p = stats.chisquare(counts).pvalue
    assert p > 1e-4, counts  # fails with probability 1e-4 under uniformity


def test_masks_vmap_over_keys_and_differ(key):
    keys = jax.random.split(key, 4)
    m = jax.vmap(lambda k: cj.sample_masks(k, num_workers=10, num_responses=4))(keys)
    assert m.shape == (4, 10)
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(
            np.asarray(m[i]),
            np.asarray(cj.sample_masks(k, num_workers=10, num_responses=4)),
        )
    assert len({tuple(r) for r in np.asarray(m).tolist()}) > 1


def test_mask_errors(key):
    with pytest.raises(
        ValueError,
        match=r"sample_masks: num_responses \(N\) must be "
        r"at most num_workers \(M=4\), got 5",
    ):
        cj.sample_masks(key, num_workers=4, num_responses=5)
    with pytest.raises(TypeError, match="sample_masks: key must be a PRNG key"):
        cj.sample_masks(0, num_workers=4, num_responses=2)
    with pytest.raises(TypeError, match="num_workers must be a Python int"):
        cj.sample_masks(key, num_workers=4.0, num_responses=2)


def test_first_arrivals_against_numpy(np_rng):
    lat = np_rng.exponential(size=(5, 12)).astype(np.float32)
    a = cj.first_arrivals(jnp.asarray(lat), num_responses=4)
    order = np.argsort(lat, axis=-1, kind="stable")
    np.testing.assert_array_equal(np.asarray(a.order), order)
    expect = np.zeros_like(lat, bool)
    np.put_along_axis(expect, order[:, :4], True, axis=-1)
    np.testing.assert_array_equal(np.asarray(a.mask), expect)
    np.testing.assert_array_equal(np.asarray(a.time), np.sort(lat, -1)[:, 3])
    with pytest.raises(ValueError, match="first_arrivals: num_responses"):
        cj.first_arrivals(jnp.asarray(lat), num_responses=13)


def test_latency_models_have_their_laws(key):
    t = 20_000
    a = cj.sample_arrivals(
        key,
        num_workers=1,
        num_responses=1,
        model=cj.ShiftedExponential(shift=2.0, mean=0.25),
        shape=(t,),
    )
    lat = np.asarray(a.latencies[:, 0], np.float64)
    assert lat.min() >= 2.0
    assert stats.kstest(lat - 2.0, stats.expon(scale=0.25).cdf).pvalue > 1e-4
    p = cj.sample_arrivals(
        key,
        num_workers=1,
        num_responses=1,
        model=cj.Pareto(scale=1.5, shape=3.0),
        shape=(t,),
    )
    lat = np.asarray(p.latencies[:, 0], np.float64)
    assert stats.kstest(lat, stats.pareto(b=3.0, scale=1.5).cdf).pvalue > 1e-4
    # the time of the N-th arrival is the N-th order statistic
    a = cj.sample_arrivals(key, num_workers=40, num_responses=30, shape=(3,))
    np.testing.assert_array_equal(
        np.asarray(a.time), np.sort(np.asarray(a.latencies), -1)[:, 29]
    )
    assert np.all(np.asarray(a.mask).sum(-1) == 30)


def test_arrival_errors(key):
    with pytest.raises(TypeError, match="sample_arrivals: model must be a latency"):
        cj.sample_arrivals(key, num_workers=4, num_responses=2, model="gamma")
    with pytest.raises(ValueError, match="ShiftedExponential: mean must be finite"):
        cj.ShiftedExponential(shift=1.0, mean=0.0)


def _brute_worst(alpha, d, n):
    m = len(alpha)
    scale = np.r_[np.sqrt(1 / m), np.full(d - 1, np.sqrt(2 / m))]
    u = npcheb.chebvander(alpha, d - 1) * scale
    best = max(
        itertools.combinations(range(m), n), key=lambda s: np.linalg.cond(u[list(s)])
    )
    return set(best), np.linalg.cond(u[list(best)])


def test_worst_case_exhaustive_matches_brute_force(x64):
    alpha = np.asarray(cj.chebyshev_points(10))
    w = cj.worst_case_mask(jnp.asarray(alpha), num_coeffs=5, num_responses=7)
    best, cond = _brute_worst(alpha, 5, 7)
    assert w.exhaustive and w.num_examined == math.comb(10, 7)
    assert w.cond == pytest.approx(cond, rel=1e-10)
    # the mask returned is a worst set: its own rows (numpy, float64) have the worst
    # condition number; the worst sets drop an end block of 3 (docs/theory.md), two
    # of them by the symmetry x -> -x of the points (31.8 against 10.1 for the next)
    got = set(np.flatnonzero(w.mask))
    assert len(got) == 7
    scale = np.r_[np.sqrt(1 / 10), np.full(4, np.sqrt(2 / 10))]
    rows = npcheb.chebvander(alpha, 4)[sorted(got)] * scale
    assert np.linalg.cond(rows) == pytest.approx(cond, rel=1e-10)
    assert set(range(10)) - got in ({0, 1, 2}, {7, 8, 9})
    assert best in ({3, 4, 5, 6, 7, 8, 9}, set(range(7)))


def test_worst_case_greedy_beyond_budget(x64, key):
    alpha = cj.chebyshev_points(24)
    w = cj.worst_case_mask(alpha, num_coeffs=8, num_responses=20, max_candidates=10)
    assert not w.exhaustive and w.mask.sum() == 20
    ex = cj.worst_case_mask(alpha, num_coeffs=8, num_responses=20)
    assert ex.exhaustive
    # greedy + swaps is a lower bound of the true worst case, and beats random sets
    assert w.cond <= ex.cond * (1 + 1e-9)
    assert w.cond >= 0.5 * ex.cond
    masks = np.asarray(
        cj.sample_masks(key, num_workers=24, num_responses=20, shape=(200,))
    )
    scale = np.r_[np.sqrt(1 / 24), np.full(7, np.sqrt(2 / 24))]
    u = npcheb.chebvander(np.asarray(alpha), 7) * scale
    rand = max(np.linalg.cond(u[mk]) for mk in masks)
    assert w.cond >= rand


def test_worst_case_errors():
    with pytest.raises(ValueError, match=r"worst_case_mask: need num_coeffs \(D=5\)"):
        cj.worst_case_mask(cj.chebyshev_points(8), num_coeffs=5, num_responses=4)


def test_one_program_serves_every_n(key, caplog):
    import logging

    cj.sample_masks(key, num_workers=12, num_responses=3, shape=(4,))
    cj.sample_arrivals(key, num_workers=12, num_responses=3, shape=(4,))
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        caplog.clear()
        for n in range(4, 12):
            m = cj.sample_masks(key, num_workers=12, num_responses=n, shape=(4,))
            a = cj.sample_arrivals(key, num_workers=12, num_responses=n, shape=(4,))
        msgs = [r.getMessage() for r in caplog.records]
    assert not [x for x in msgs if "Compiling" in x and "_sample_masks" in x], msgs
    assert not [x for x in msgs if "Compiling" in x and "_first_arrivals" in x], msgs
    assert np.all(np.asarray(m).sum(-1) == 11) and np.all(
        np.asarray(a.mask).sum(-1) == 11
    )
