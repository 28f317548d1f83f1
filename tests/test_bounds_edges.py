"""Edges and argument contract of codedjax.bounds that the value tests leave open.

Each test here kills mutants that survived ``tools/mutation.py codedjax/bounds.py``
(the boundary of an argument check moved by one, a keyword-only argument made
positional, a validation range narrowed): the smallest valid inputs must be
accepted and give their known values, the first invalid ones rejected with the
message naming the argument.
"""

import inspect
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
