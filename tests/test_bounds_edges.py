"""Edges and argument contract of codedjax.bounds that the value tests leave open.

Each test here kills mutants that survived ``tools/mutation.py`` on the bounds
(then one ``codedjax/bounds.py``, now the modules it re-exports): the boundary of
an argument check moved by one, a keyword-only argument made positional, a
validation range narrowed. The smallest valid inputs must be accepted and give
their known values, the first invalid ones rejected with the message naming the
argument.
"""

import inspect
import itertools
import math

import numpy as np
import pytest

import codedjax.bounds as cb


def test_smallest_valid_sizes_are_accepted():
    # one worker, one coefficient: the 1 x 1 system [T_0] = [1] has cond 1
    assert cb.raw_condition_number(np.array([True]), num_coeffs=1) == 1.0
    # D = 1: every leverage score is 1/M, so the coherence is exactly 1
    scores = cb.chebyshev_leverage_scores(7, num_coeffs=1)
    np.testing.assert_allclose(scores, np.full(7, 1 / 7), rtol=1e-15)
    assert cb.coherence(scores) == pytest.approx(1.0, rel=1e-15)
    # N = 1 responder is a valid gap-tail question (docstring: 1 <= N <= M): with
    # one responder of 6 the largest gap is always >= 2, so the bound is 1
    assert cb.gap_tail_bound(num_workers=6, num_responses=1, gap=2) == 1.0
    # N = 0 responses is valid input (nothing can be decoded: inf)
    assert cb.deterministic_condition_bound(
        num_workers=5, num_coeffs=2, num_responses=0
    ) == float("inf")
    # D = 1: 3 mu D log(2 D / eta) / eps^2 = 12 log 4 at mu = 1, eta = eps = 1/2
    assert cb.sufficient_responses(
        num_coeffs=1, coherence=1.0, eta=0.5, eps=0.5
    ) == pytest.approx(12 * math.log(4), rel=1e-15)
    # D = 1 at N = D: rho = g (D - 1) / M = 0, so the gap bound is sqrt(g_eta)
    # (finite), capped by the deterministic bound
    m, n, eta = 8, 1, 0.5
    g = cb.gap_quantile(num_workers=m, num_responses=n, eta=eta)
    kw = dict(num_workers=m, num_coeffs=1, num_responses=n, eta=eta)
    uncapped = cb.gap_condition_bound_probabilistic(**kw, capped=False)
    assert uncapped == pytest.approx(math.sqrt(g), rel=1e-15)
    det = cb.deterministic_condition_bound(num_workers=m, num_coeffs=1, num_responses=n)
    assert cb.gap_condition_bound_probabilistic(**kw) == min(uncapped, det)
    # the largest coherence, M / D (a leverage score of 1), is valid input
    big = cb.sampling_condition_bound(
        num_workers=40, num_coeffs=8, num_responses=40, eta=0.05, coherence=5.0
    )
    assert big >= 1.0


def test_first_invalid_sizes_are_rejected_by_name():
    with pytest.raises(ValueError, match="num_workers must be >= 1, got 0"):
        cb.deterministic_condition_bound(num_workers=0, num_coeffs=1, num_responses=0)
    with pytest.raises(ValueError, match="num_coeffs must be >= 1, got 0"):
        cb.deterministic_condition_bound(num_workers=5, num_coeffs=0, num_responses=3)
    with pytest.raises(ValueError, match="gap_tail_bound: num_responses must be >= 1"):
        cb.gap_tail_bound(num_workers=6, num_responses=0, gap=2)
    with pytest.raises(ValueError, match="gap_quantile: num_responses must be >= 1"):
        cb.gap_quantile(num_workers=6, num_responses=0, eta=0.5)
    with pytest.raises(ValueError, match="coherence must be >= 1, got 0.5"):
        cb.sufficient_responses(num_coeffs=1, coherence=0.5, eta=0.5, eps=0.5)


def test_user_coherence_equal_to_the_computed_one_gives_the_same_bound():
    # mu < 2 at first-kind points: a coherence in [1, 2) is valid input, and
    # passing the computed value must reproduce the default exactly
    m, d, n = 40, 13, 36
    mu = cb.coherence(cb.chebyshev_leverage_scores(m, num_coeffs=d))
    assert 1.0 <= mu < 2.0
    default = cb.sampling_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=0.05
    )
    given = cb.sampling_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=0.05, coherence=mu
    )
    assert given == pytest.approx(default, rel=1e-12)
    with pytest.raises(ValueError, match=r"coherence must lie in \[1, M/D\]"):
        cb.sampling_condition_bound(
            num_workers=m, num_coeffs=d, num_responses=n, eta=0.05, coherence=0.99
        )


@pytest.mark.parametrize(
    "fn",
    [
        cb.gap_condition_bound,
        cb.complement_condition_number,
        cb.raw_condition_number,
        cb.leverage_scores,
    ],
)
def test_settings_after_the_array_are_keyword_only(fn):
    params = list(inspect.signature(fn).parameters.values())
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    with pytest.raises(TypeError):
        fn(np.ones(8, bool), 3)


def test_worst_case_is_the_worst_over_every_chunk():
    # the running maximum must survive chunk boundaries: with 7 sets per chunk the
    # worst set (an end block, in the first chunk) must still win; float64 numpy
    # brute force over all C(10, 3) = 120 missing sets
    m, d = 10, 5
    scale = np.r_[np.sqrt(1 / m), np.full(d - 1, np.sqrt(2 / m))]
    u = np.polynomial.chebyshev.chebvander(np.polynomial.chebyshev.chebpts1(m), d - 1)
    u = u * scale
    brute = max(
        np.linalg.cond(np.delete(u, list(miss), axis=0))
        for miss in itertools.combinations(range(m), 3)
    )
    for chunk in (7, 20_000):
        w = cb.worst_case_condition(
            num_workers=m, num_coeffs=d, num_missing=3, chunk=chunk
        )
        assert w.num_examined == 120
        assert w.cond == pytest.approx(brute, rel=1e-10)
        assert np.linalg.cond(u[w.mask]) == pytest.approx(brute, rel=1e-10)


@pytest.mark.parametrize(
    "m,n,eta", [(1, 1, 0.5), (8, 1, 0.05), (10, 1, 0.05), (12, 9, 0.1)]
)
def test_gap_quantile_is_the_smallest_valid_gap(m, n, eta):
    # by definition: the smallest g >= 1 with gap_tail_bound(g + 1) <= eta, even when
    # g is close to its largest possible value 2M - 1
    g = cb.gap_quantile(num_workers=m, num_responses=n, eta=eta)
    assert 1 <= g <= 2 * m - 1
    assert cb.gap_tail_bound(num_workers=m, num_responses=n, gap=g + 1) <= eta
    if g > 1:
        assert cb.gap_tail_bound(num_workers=m, num_responses=n, gap=g) > eta
    # and it is a valid (1 - eta) quantile of the exact largest gap (every N-set)
    gaps = []
    for resp in itertools.combinations(range(m), n):
        mask = np.zeros(m, bool)
        mask[list(resp)] = True
        gaps.append(cb.max_gap(mask))
    assert np.mean(np.array(gaps) > g) <= eta


def test_gap_quantile_rejects_zero_workers_by_name():
    with pytest.raises(ValueError, match="gap_quantile: num_workers must be >= 1"):
        cb.gap_quantile(num_workers=0, num_responses=0, eta=0.5)


def test_the_limits_of_the_arguments_are_inclusive():
    # coherence in [1, M/D]: both ends are valid input, just past either is not
    m, d, n = 40, 8, 36
    kw = dict(num_workers=m, num_coeffs=d, num_responses=n, eta=0.05)
    lowest = cb.sampling_condition_bound(**kw, coherence=1.0)
    assert 1.0 <= lowest <= cb.sampling_condition_bound(**kw, coherence=m / d)
    with pytest.raises(ValueError, match=r"coherence must lie in \[1, M/D\]"):
        cb.sampling_condition_bound(**kw, coherence=m / d + 1e-9)
    # max_sets is the most sets a search may examine: exactly C(M, s) or C(M, N)
    # sets run, one fewer is refused by name
    w = cb.worst_case_condition(num_workers=6, num_coeffs=2, num_missing=2, max_sets=15)
    assert w.num_examined == math.comb(6, 2) == 15
    with pytest.raises(ValueError, match="exceed max_sets=14"):
        cb.worst_case_condition(num_workers=6, num_coeffs=2, num_missing=2, max_sets=14)
    full = cb.exhaustive_condition(
        scheme="circle", num_workers=6, num_coeffs=4, max_sets=15
    )
    assert full.num_examined == math.comb(6, 4) == 15
    with pytest.raises(ValueError, match="exceed max_sets=14"):
        cb.exhaustive_condition(
            scheme="circle", num_workers=6, num_coeffs=4, max_sets=14
        )
    # one set per chunk is the smallest chunk, and examines the same sets
    one = cb.exhaustive_condition(scheme="circle", num_workers=6, num_coeffs=4, chunk=1)
    assert (one.worst, one.mean, one.num_examined) == (
        full.worst,
        full.mean,
        full.num_examined,
    )
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        cb.exhaustive_condition(scheme="circle", num_workers=6, num_coeffs=4, chunk=0)


def test_coherence_takes_scores_in_the_unit_interval_that_sum_to_a_whole_d():
    # D = 1 carried by one row of three: mu = M max_i l_i / D = 3
    assert cb.coherence(np.array([1.0, 0.0, 0.0])) == 3.0
    # a score above 1 is no leverage score; scores summing to 1/2 round to D = 0
    for bad in ([1.5, 0.5], [0.5, 0.0]):
        with pytest.raises(ValueError, match="coherence: scores must be"):
            cb.coherence(np.array(bad))
