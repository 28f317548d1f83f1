"""theory.robust, the corrupted-worker experiment: its rounding model of the bf16
cross tower, its reference locators against brute force, the rational view of
Berrut-coded answers, and the experiment end to end on a tiny configuration."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj

M, K, DEG = 20, 3, 2
D = DEG * (K - 1) + 1  # 5


def _setup(seed, f=1):
    """A random polynomial of degree < D through M first-kind worker points: the
    float64 answers at the workers and the values at the K data points."""
    rng = np.random.default_rng(seed)
    alpha = np.asarray(cj.chebyshev_points(M), np.float64)
    beta = np.asarray(cj.chebyshev_points(K), np.float64)
    c = rng.standard_normal((D, f))
    ya = np.polynomial.chebyshev.chebval(alpha, c).T  # [M, F]
    yb = np.polynomial.chebyshev.chebval(beta, c).T  # [K, F]
    return rng, jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32), ya, yb


def test_cross_tower_rounding_sd_bounds_the_bf16_error():
    """Float64 reference: the first-order rounding analysis of the bf16 cross tower
    predicts each answer's error level; the measured errors, in units of it, have
    rms between 0.5 and 1 (u / sqrt(3) is an upper bound of the rounding's standard
    deviation) and no heavy tail (max within the Gaussian range of 4.5)."""
    from theory.demo import cross_params, cross_tower
    from theory.robust import cross_tower_rounding_sd

    f = 8
    params = cross_params(jax.random.key(0), f, 2)
    x = jax.random.normal(jax.random.key(1), (400, f))
    rounded = jax.tree_util.tree_map(
        lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), params
    )
    # the bf16 worker runs op by op, as theory.robust's answers run it (its rounding
    # is what is measured); the float64 truth and the rounding analysis, whose last
    # bits do not matter here, are one program each instead of one per operation
    y = cj.low_precision_worker(cross_tower, jnp.bfloat16)(params, x)
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), rounded)
        truth = np.asarray(jax.jit(cross_tower)(p64, jnp.asarray(x, jnp.float64)))
    rounding_sd = jax.jit(cross_tower_rounding_sd, static_argnums=2)
    sd = np.asarray(rounding_sd(rounded, x, 2.0**-8), np.float64)
    z = (np.asarray(y, np.float64) - truth) / sd
    assert 0.5 < np.sqrt(np.mean(z**2)) < 1.0
    assert np.abs(z).max() < 4.5


@pytest.mark.seed(12)
def test_ml_locator_reference_matches_brute_force_refits(np_rng):
    """theory.robust's maximum-likelihood reference (told the count) picks the set
    whose float64 refit has the smallest residual sum of squares, over every set."""
    import itertools

    from theory.robust import ml_located

    _, alpha, _, ya, _ = _setup(13)
    b, count = 6, 2
    sd = np.full((b, M), 1e-3 * np.sqrt(np.mean(ya**2)))
    masks = np.asarray(
        cj.sample_masks(jax.random.key(14), num_workers=M, num_responses=11, shape=(b,))
    )
    y = ya[None, :, 0] + sd * np_rng.standard_normal((b, M))
    t = np.polynomial.chebyshev.chebvander(np.asarray(alpha, np.float64), D - 1)
    want = []
    for i in range(b):
        idx = np.flatnonzero(masks[i])
        rss = {
            s: np.linalg.lstsq(t[np.setdiff1d(idx, s)], y[i, np.setdiff1d(idx, s)])[1]
            for s in itertools.combinations(idx, count)
        }
        want.append(min(rss, key=lambda s: float(rss[s][0])))
    for i in range(b):  # "corrupted" = the brute-force choice: located in every row
        bad = np.zeros((1, M), bool)
        bad[0, list(want[i])] = True
        assert (
            ml_located(alpha, masks[i : i + 1], y[i : i + 1], sd[i : i + 1], bad, D)
            == 1.0
        )
        bad[0, list(want[i])[0]] = False
        bad[0, [j for j in np.flatnonzero(masks[i]) if j not in want[i]][0]] = True
        assert (
            ml_located(alpha, masks[i : i + 1], y[i : i + 1], sd[i : i + 1], bad, D)
            == 0.0
        )


def test_theory_robust_runs_and_reports(tmp_path):
    """The experiment end to end on a tiny configuration: every row has its rates
    and the ML reference, and the report has one table line per row."""
    from theory.robust import RobustConfig, format_tables, run_robust

    # features = 8 as in the rounding test above: the weights' eager programs
    # (cross_params, the bf16 rounding of the weights) are compiled once
    cfg = RobustConfig(
        num_inputs=4, num_workers=16, num_responses=14, features=8, max_corrupted=1,
        num_requests=12, counts=(1, 2), sizes=(3.0,), berrut=False,
        dtype_model=False, progress=False,
    )  # fmt: skip
    out = run_robust(cfg)
    rows = out["lagrange"]["rows"]
    assert [(r["corrupted"], r["size_x_rms"]) for r in rows] == [
        (0, 0.0), (1, 1.0), (2, 1.0), (1, 3.0)
    ]  # fmt: skip
    assert "ml_located" not in rows[0] and all(
        0 <= r["ml_located"] <= 1 for r in rows[1:]
    )
    table = format_tables(out)
    assert table.count("\n| ") == len(rows) + 1  # the header and one line per row
    from theory.robust import plot_rates

    plot_rates(out, str(tmp_path / "located.png"))
    assert (tmp_path / "located.png").stat().st_size > 10_000


@pytest.mark.seed(18)
def test_berrut_answers_of_a_polynomial_worker_are_a_lagrange_code(np_rng):
    """Known truth (float64): Berrut-coded inputs through a degree-d polynomial, times
    B(z)^d (theory.robust.berrut_denominator), are samples of a polynomial of degree
    d (K - 1), and its values at the data points over B(beta)^d are f(x_k)."""
    from theory.robust import berrut_denominator

    k, m, d = 5, 24, 3
    with jax.enable_x64(True):
        beta, alpha = cj.bacc_points(k, m, dtype=jnp.float64)
        x = jax.device_put(np_rng.standard_normal(k))
        c = np_rng.standard_normal(d + 1)

        @jax.jit  # one program per shape, not one per operation
        def f(v):
            return sum(ci * v**i for i, ci in enumerate(c))

        y = np.asarray(f(cj.berrut_encode(x, beta, alpha)))
        fx = np.asarray(f(x))
    bz = berrut_denominator(beta, alpha) ** d
    deg = d * (k - 1)
    fit = np.polynomial.chebyshev.Chebyshev.fit(np.asarray(alpha), y * bz, deg)
    scale = np.abs(y * bz).max()
    assert np.abs(fit(np.asarray(alpha)) - y * bz).max() <= 1e-10 * scale
    # one degree less does not fit: the degree is exactly d (K - 1)
    low = np.polynomial.chebyshev.Chebyshev.fit(np.asarray(alpha), y * bz, deg - 1)
    assert np.abs(low(np.asarray(alpha)) - y * bz).max() > 1e-6 * scale
    bb = berrut_denominator(beta, beta) ** d
    np.testing.assert_allclose(fit(np.asarray(beta)) / bb, fx, rtol=1e-9, atol=1e-9)
