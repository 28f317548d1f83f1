"""runkit.stats: the one treatment of empty, infinite and NaN samples, against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runkit import l2_rel_err, max_rel_err, percentile
from runkit.stats import accuracy_target


@pytest.mark.parametrize("q", [0, 10, 50, 95, 99, 100])
def test_percentile_of_finite_samples_is_numpy_linear(q):
    a = np.random.default_rng(0).standard_normal(37)
    assert percentile(a, q) == float(np.percentile(a, q))
    assert percentile(a, q, order_statistic=True) == float(
        np.percentile(a, q, method="higher")
    )
    # an order statistic is a sample
    assert percentile(a, q, order_statistic=True) in set(a.tolist())


def test_percentile_next_to_infinity_is_an_order_statistic():
    a = [1.0, 2.0, 3.0, math.inf]
    # linear interpolation would give inf - inf = nan between 3 and inf
    assert percentile(a, 99) == math.inf
    assert percentile(a, 50) == 3.0
    assert percentile(a, 0) == 1.0
    assert percentile([-math.inf, 0.0, 1.0], 10) == 0.0


def test_percentile_of_empty_and_nan_samples_is_nan():
    assert math.isnan(percentile([], 50))
    assert math.isnan(percentile(np.zeros((0, 3)), 99))
    assert math.isnan(percentile([1.0, math.nan, 2.0], 50))
    assert math.isnan(percentile([1.0, math.nan, math.inf], 50))


def test_relative_errors_against_a_float64_reference():
    rng = np.random.default_rng(1)
    t = rng.standard_normal((4, 3, 5))
    v = (t + 1e-3 * rng.standard_normal(t.shape)).astype(np.float32)
    want = np.array(
        [
            np.abs(v[i].astype(np.float64) - t[i]).max() / np.abs(t[i]).max()
            for i in range(4)
        ]
    )
    np.testing.assert_allclose(max_rel_err(v, t), want, rtol=1e-12)
    want2 = np.linalg.norm(v.astype(np.float64) - t, axis=-1) / np.linalg.norm(
        t, axis=-1
    )
    np.testing.assert_allclose(l2_rel_err(v, t), want2, rtol=1e-12)
    assert max_rel_err(t, t).tolist() == [0.0] * 4


def test_the_accuracy_target_is_a_factor_times_the_uncoded_median():
    errs = np.random.default_rng(2).uniform(1e-3, 4e-3, 64)
    assert accuracy_target(errs, 2.0) == 2.0 * float(np.percentile(errs, 50))
    # an uncoded decode that failed (inf) counts as larger than every error
    assert accuracy_target([1e-3, 2e-3, math.inf], 3.0) == 3.0 * 2e-3
    for factor in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="accuracy_target: factor"):
            accuracy_target(errs, factor)
    with pytest.raises(ValueError, match="finite median"):
        accuracy_target([1e-3, math.inf, math.inf], 2.0)
