"""The robust ChebyLS decoder: locating and excluding corrupted workers."""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj

M, K, DEG = 20, 3, 2
D = DEG * (K - 1) + 1  # 5


def _setup(seed, f=1):
    rng = np.random.default_rng(seed)
    alpha = np.asarray(cj.chebyshev_points(M), np.float64)
    beta = np.asarray(cj.chebyshev_points(K), np.float64)
    c = rng.standard_normal((D, f))
    ya = np.polynomial.chebyshev.chebval(alpha, c).T  # [M, F]
    yb = np.polynomial.chebyshev.chebval(beta, c).T  # [K, F]
    return rng, jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32), ya, yb


# the batched decoders of the statistical tests: B = 200 masks per call (fewer are
# padded), the noise levels an argument, one compiled program per configuration
B = 200


@functools.cache
def _vdec_program(wdt, with_sd):
    def one(yy, mk, sd, alpha, beta):
        return cj.robust_decode(
            yy, mk, alpha, beta, num_coeffs=D, max_corrupted=2, worker_dtype=wdt,
            noise_sd=sd if with_sd else None,
        )  # fmt: skip

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None, None)))


def _vdec(y, masks, alpha, beta, *, wdt=jnp.bfloat16, sd=None):
    """robust_decode of each (y[i], masks[i]), B at a time (numpy result)."""
    y, masks = np.asarray(y, np.float32), np.asarray(masks)
    n = len(y)
    pad = -n % B
    y = np.concatenate([y, np.repeat(y[:1], pad, axis=0)])
    masks = np.concatenate([masks, np.repeat(masks[:1], pad, axis=0)])
    dec = _vdec_program(jnp.dtype(wdt).name, sd is not None)
    sd = jnp.zeros(M, jnp.float32) if sd is None else jnp.asarray(sd, jnp.float32)
    out = [
        dec(jnp.asarray(y[i : i + B]), jnp.asarray(masks[i : i + B]), sd, alpha, beta)
        for i in range(0, n + pad, B)
    ]
    return jax.tree_util.tree_map(lambda *a: np.concatenate(a)[:n], *out)


def _decode(y, mask, alpha, beta, a=2, **kw):
    return cj.robust_decode(
        jnp.asarray(y, jnp.float32), jnp.asarray(mask), alpha, beta,
        num_coeffs=D, max_corrupted=a, worker_dtype=jnp.bfloat16, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("bad", [(7,), (3, 12)])
def test_locates_corrupted_workers_and_decodes_the_rest(bad):
    """Known truth: bf16-rounded polynomial answers, corrupted workers shifted by the
    rms; exactly those are located and the rest decodes to the float64 weighted
    least-squares fit without them."""
    rng, alpha, beta, ya, yb = _setup(1)
    y = np.asarray(jnp.asarray(ya, jnp.bfloat16).astype(jnp.float32), np.float64)
    mask = np.ones(M, bool)
    mask[[0, 19]] = False  # two stragglers
    rms = np.sqrt(np.mean(y[mask] ** 2))
    yc = y.copy()
    yc[list(bad), 0] += rms * np.array([1.0, -1.0])[: len(bad)]
    r = _decode(yc, mask, alpha, beta)
    assert bool(r.ok)
    assert np.flatnonzero(np.asarray(r.suspects)).tolist() == sorted(bad)
    # float64 oracle: weighted least squares on the kept rows, weights 1/s_i,
    # s_i = hypot(|y_i|, rms / 2), rms over the responders
    kept = mask & ~np.asarray(r.suspects)
    yk = yc.astype(np.float32).astype(np.float64)
    mags = np.abs(yk[mask, 0])  # no answer here is 1000 times the median
    s = np.hypot(yk[:, 0], 0.5 * np.sqrt(np.mean(mags**2)))
    a64 = np.asarray(alpha, np.float64)
    t = np.polynomial.chebyshev.chebvander(a64, D - 1)
    coef = np.linalg.lstsq(
        t[kept] / s[kept, None], yk[kept] / s[kept, None], rcond=None
    )[0]
    want = (
        np.polynomial.chebyshev.chebvander(np.asarray(beta, np.float64), D - 1) @ coef
    )
    cond = float(r.cond)
    np.testing.assert_allclose(
        np.asarray(r.value), want, atol=50 * cond * 2.0**-24 * np.abs(yk).max()
    )
    # and the decode is as accurate as the bf16 answers allow
    assert np.abs(np.asarray(r.value, np.float64) - yb).max() <= float(r.error)


def test_clean_answers_flag_nobody_and_match_chebyls():
    _, alpha, beta, ya, _ = _setup(2)
    y = jnp.asarray(ya, jnp.bfloat16)
    mask = jnp.ones(M, bool).at[jnp.array([4, 9])].set(False)
    r = _decode(y.astype(jnp.float32), mask, alpha, beta)
    assert bool(r.ok) and not np.any(np.asarray(r.suspects))
    c = cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=D)
    tol = 20 * float(c.cond) * 2.0**-8 * float(jnp.max(jnp.abs(y.astype(jnp.float32))))
    np.testing.assert_allclose(np.asarray(r.value), np.asarray(c.value), atol=tol)


def test_false_alarm_rate_under_the_noise_model():
    """Statistical: Gaussian answer errors at the model's level (sigma_w at every
    answer's own size) flag a clean request at most at the nominal rate 1%; the
    vmapped decoder equals the one-mask decoder."""
    rng, alpha, beta, ya, _ = _setup(3)
    b = 2 * B
    masks = cj.sample_masks(
        jax.random.key(4), num_workers=M, num_responses=16, shape=(b,)
    )
    # the model's noise level: gamma = sqrt((d^2 + 1) / 3) units at each answer's
    # size hypot(|y_i|, rms / 2), rms over the request's responders
    gamma, u = math.sqrt((DEG**2 + 1) / 3), 2.0**-8
    mk = np.asarray(masks)
    rms = np.sqrt(np.sum(np.where(mk, ya[None, :, 0] ** 2, 0), axis=1) / mk.sum(1))
    size = np.hypot(ya[None, :, 0], 0.5 * rms[:, None])
    y = ya[None, :, 0] + gamma * u * size * rng.standard_normal((b, M))
    r = _vdec(y, masks, alpha, beta)
    for i in range(2):  # vmap equals the one-mask decoder
        r1 = _decode(y[i], masks[i], alpha, beta)
        np.testing.assert_array_equal(
            np.asarray(r.suspects[i]), np.asarray(r1.suspects)
        )
        np.testing.assert_allclose(np.asarray(r.value[i]), np.asarray(r1.value), 1e-5)
    flagged = int(np.sum(np.any(np.asarray(r.suspects), axis=1)))
    # one-sided binomial test at 1%: P(X >= flagged | p = 0.01) must not be tiny
    from scipy.stats import binom

    assert binom.sf(flagged - 1, b, 0.01) > 1e-3, flagged


def test_undecidable_without_enough_redundancy():
    _, alpha, beta, ya, _ = _setup(5)
    y = np.asarray(jnp.asarray(ya, jnp.bfloat16).astype(jnp.float32))
    rms = np.sqrt(np.mean(y**2))
    # N = D + 1: one spare answer shows the inconsistency but cannot locate it
    mask = np.zeros(M, bool)
    mask[np.linspace(0, M - 1, D + 1).astype(int)] = True
    yc = y.copy()
    yc[np.flatnonzero(mask)[2], 0] += rms
    r = _decode(yc, mask, alpha, beta)
    assert not bool(r.ok) and int(r.status) == int(cj.Status.UNDECIDABLE)
    assert not np.any(np.isnan(np.asarray(r.value))) and float(r.error) == np.inf
    # more corrupted answers than max_corrupted: still inconsistent after A removals
    yc = y.copy()
    yc[[2, 5, 8, 14], 0] += rms * np.array([1.0, -2.0, 1.5, -1.0])
    r = _decode(yc, np.ones(M, bool), alpha, beta)
    assert int(r.status) == int(cj.Status.UNDECIDABLE)


def test_bad_input_raises_naming_the_function():
    _, alpha, beta, ya, _ = _setup(0)
    y = jnp.asarray(ya, jnp.float32)
    ones = jnp.ones(M, bool)
    name = "robust_decode"
    with pytest.raises(ValueError, match=name):  # D + 2A > M
        _decode(y, ones, alpha, beta, a=(M - D) // 2 + 1)
    with pytest.raises(ValueError, match=name):
        _decode(y, ones, alpha, beta, a=-1)
    with pytest.raises(TypeError, match=name):
        _decode(y, ones, alpha, beta, a=1.5)
    with pytest.raises(ValueError, match=name):
        _decode(y, ones, alpha, beta, false_alarm=0.0)
    with pytest.raises(ValueError, match=name):
        _decode(y, ones[:-1], alpha, beta)
    with pytest.raises(ValueError, match=name):  # one noise level per worker
        _decode(y, ones, alpha, beta, noise_sd=jnp.ones(M - 1))


def test_noise_sd_per_answer_locates_below_the_dtype_level():
    """Known truth: answers whose errors differ by 100x between workers (Gaussian at
    the given noise_sd). With noise_sd the decoder flags a clean request at most at
    the nominal rate and locates a shift of 40 sd at a quiet worker, which the
    dtype-only model (one level at every answer's size) does not; a worker
    without a valid noise level counts as missing."""
    rng, alpha, beta, ya, _ = _setup(6)
    b = B
    rms = np.sqrt(np.mean(ya**2))
    sd = rms * 2.0**-8 * np.where(np.arange(M) % 2 == 0, 0.05, 5.0)
    masks = np.asarray(
        cj.sample_masks(jax.random.key(7), num_workers=M, num_responses=16, shape=(b,))
    )
    y = ya[None, :, 0] + sd * rng.standard_normal((b, M))
    r = _vdec(y, masks, alpha, beta, sd=sd)
    flagged = int(np.sum(np.any(np.asarray(r.suspects), axis=1)))
    from scipy.stats import binom

    assert binom.sf(flagged - 1, b, 0.01) > 1e-3, flagged
    # a shift of 40 sd at a quiet responder of leverage below 0.5
    mask = np.ones(M, bool)
    mask[[1, 3]] = False
    j = 10  # even: quiet; interior Chebyshev point: low leverage
    yc = y[0].copy()
    yc[j] += 40 * sd[j]
    r1 = _decode(yc, mask, alpha, beta, noise_sd=jnp.asarray(sd, jnp.float32))
    assert bool(r1.ok)
    assert np.flatnonzero(np.asarray(r1.suspects)).tolist() == [j]
    r0 = _decode(yc, mask, alpha, beta)  # dtype-only model: below its level
    assert not bool(r0.suspects[j])
    # NaN noise level: that worker counts as missing
    bad_sd = sd.copy()
    bad_sd[0] = np.nan
    r2 = _decode(y[0], mask, alpha, beta, noise_sd=jnp.asarray(bad_sd, jnp.float32))
    assert int(r2.num_used) == int(mask.sum()) - 1 and not bool(r2.suspects[0])


def _reference_search(y, mask, sd, a_max, tau):
    """float64 reference: refit without every set of at most ``a_max`` responders
    (numpy lstsq of the rows weighted by 1/sd), a set consistent when every kept
    studentised residual is at most tau and N >= D + 2|set|; the fewest consistent,
    ties by the smaller residual sum of squares. Returns (suspects, margin): margin is
    the relative gap of that residual sum to the runner-up's among the same size."""
    import itertools

    t = np.polynomial.chebyshev.chebvander(
        np.asarray(cj.chebyshev_points(M), np.float64), D - 1
    )
    idx = np.flatnonzero(mask)
    n = idx.size
    for a in range(a_max + 1):
        if n < D + 2 * a:
            break
        found = []
        for s in itertools.combinations(idx, a):
            keep = np.setdiff1d(idx, s)
            tw, yw = t[keep] / sd[keep, None], y[keep] / sd[keep]
            q, _ = np.linalg.qr(tw)
            h = np.sum(q * q, axis=1)
            res = yw - q @ (q.T @ yw)
            ok = h < 1 - 1e-6
            if np.max(np.abs(res[ok]) / np.sqrt(1 - h[ok]), initial=0.0) <= tau:
                found.append((float(res @ res), s))
        if found:
            found.sort()
            gap = (found[1][0] - found[0][0]) / found[0][0] if len(found) > 1 else 1.0
            sus = np.zeros(M, bool)
            sus[list(found[0][1])] = True
            return sus, gap
    return None, 1.0


@pytest.mark.seed(8)
def test_subset_search_matches_float64_refits(np_rng):
    """The deletion formulas (one Cholesky factor per subset, no refit) choose what
    float64 refits without every set of at most two responders choose: same
    suspects wherever that choice is not a near tie, same UNDECIDABLE verdicts."""
    _, alpha, beta, ya, _ = _setup(9)
    b, a_max = 40, 2
    rms = np.sqrt(np.mean(ya**2))
    sd = rms * 2.0**-8 * (1.0 + np_rng.random(M))
    masks = np.asarray(
        cj.sample_masks(jax.random.key(10), num_workers=M, num_responses=12, shape=(b,))
    )
    y = ya[None, :, 0] + sd * np_rng.standard_normal((b, M))
    for i in range(b):  # 0 to 3 corrupted responders, sizes from 3 sd to rms
        bad = np_rng.choice(np.flatnonzero(masks[i]), size=i % 4, replace=False)
        y[i, bad] += (
            np_rng.choice([-1, 1], bad.size)
            * np.geomspace(3 * sd[bad], rms)[
                np_rng.integers(0, 50, bad.size), np.arange(bad.size)
            ]
        )
    y = y.astype(np.float32)
    fa = 0.01
    tau = NormalDist().inv_cdf(1 - fa / (2 * M))
    assert a_max == 2 and fa == 0.01  # the settings of _vdec
    r = _vdec(y, masks, alpha, beta, sd=sd)
    compared = 0
    for i in range(b):
        want, gap = _reference_search(
            y[i].astype(np.float64), masks[i], sd.astype(np.float32), a_max, tau
        )
        if want is None:
            assert int(r.status[i]) == int(cj.Status.UNDECIDABLE), i
            compared += 1
        elif gap > 1e-3:  # float32 cannot order closer ties
            np.testing.assert_array_equal(np.asarray(r.suspects[i]), want, err_msg=i)
            compared += 1
    assert compared >= b - 4, compared


@pytest.mark.seed(11)
def test_deletion_formulas_equal_refits(np_rng):
    """One subset at a time, in float64: the drop of the residual sum of squares and
    the worst studentised residual (leverages updated) after excluding a set equal a
    refit without it; the set is consistent just above that worst value and not just
    below it."""
    from codedjax import _lagrange_robust

    exclusion = jax.jit(
        _lagrange_robust._exclusion, static_argnums=(6, 7)
    )  # one compile
    t = np.polynomial.chebyshev.chebvander(
        np.asarray(cj.chebyshev_points(M), np.float64), D - 1
    )
    mask = np.ones(M, bool)
    mask[[0, 1, 7]] = False  # a gap at the edge: high leverages nearby
    idx = np.flatnonzero(mask)
    y = np_rng.standard_normal(M)
    q, _ = np.linalg.qr(t[idx])
    p = np.zeros((M, M))
    p[np.ix_(idx, idx)] = np.eye(idx.size) - q @ q.T
    r = np.zeros(M)
    r[idx] = y[idx] - q @ (q.T @ y[idx])
    for s in ([2], [2, 3], [5, 12, 19], [2, 3, 4]):
        keep = np.setdiff1d(idx, s)
        qk, _ = np.linalg.qr(t[keep])
        rk = y[keep] - qk @ (qk.T @ y[keep])
        worst = np.max(np.abs(rk) / np.sqrt(1 - np.sum(qk * qk, axis=1)))
        with jax.enable_x64(True):
            ids = jnp.asarray(s + [-1] * (3 - len(s)))
            args = (jnp.asarray(p), jnp.asarray(r[:, None]), jnp.asarray(mask))
            for tau, want in ((worst * (1 + 1e-9), True), (worst * (1 - 1e-9), False)):
                drop, _, consistent, excluded = exclusion(
                    ids, *args, jnp.ones(1), jnp.zeros(1), idx.size, D, tau
                )
                assert bool(consistent) is want, (s, tau)
        np.testing.assert_allclose(float(drop), r @ r - rk @ rk, rtol=1e-10)
        assert np.flatnonzero(np.asarray(excluded)).tolist() == s


def test_float32_answers_decoded_in_float32():
    """The fit's own float32 rounding (far above a float32 worker's) is part of the
    noise level: clean float32 answers are decided and flagged at most at the
    nominal rate, and a corruption of 1e-3 rms is still located."""
    _, alpha, beta, _, _ = _setup(15)
    rng = np.random.default_rng(16)
    b = 100
    c = rng.standard_normal((b, D))
    a64 = np.asarray(alpha, np.float64)
    y = np.stack([np.polynomial.chebyshev.chebval(a64, ci) for ci in c]).astype(
        np.float32
    )
    masks = np.asarray(
        cj.sample_masks(jax.random.key(17), num_workers=M, num_responses=14, shape=(b,))
    )
    r = _vdec(y, masks, alpha, beta, wdt=jnp.float32)
    assert np.all(np.asarray(r.ok))
    from scipy.stats import binom

    flagged = int(np.sum(np.any(np.asarray(r.suspects), axis=1)))
    assert binom.sf(flagged - 1, b, 0.01) > 1e-3, flagged
    j = [np_j for np_j in range(3, M) if masks[0, np_j]][0]
    yc = y[0].copy()
    yc[j] += 1e-3 * np.sqrt(np.mean(y[0][masks[0]] ** 2))
    r1 = _vdec(yc[None], masks[:1], alpha, beta, wdt=jnp.float32)
    assert np.flatnonzero(np.asarray(r1.suspects[0])).tolist() == [j]


def test_max_corrupted_is_capped_where_the_search_would_not_compile_in_time():
    m = 40
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(K)
    y = jnp.zeros((m, 1))
    with pytest.raises(ValueError, match="robust_decode.*at most 10"):
        cj.robust_decode(
            y, jnp.ones(m, bool), alpha, beta, num_coeffs=D, max_corrupted=11
        )
    with pytest.raises(ValueError, match="lagrange_code.*at most 10"):
        cj.lagrange_code(
            num_inputs=K, num_workers=m, degree=DEG, decoder="robust", max_corrupted=11
        )


@pytest.mark.parametrize(
    "corrupt, noise_sd, factor, want",
    [
        (lambda y: y.at[0].set(1e14), 1e-6, 1.0, [0]),  # y / sd overflows a square
        (lambda y: y.at[0].set(1e20), None, 1.0, [0]),
        (lambda y: y.at[0].set(1.7e38), None, 1.0, [0]),  # a flipped exponent bit
        (lambda y: y.at[5].add(0.05).at[0].add(1e6), None, 1.0, [0, 5]),  # masking
        (lambda y: y * 1e20, None, 1e20, []),  # the whole request, huge or tiny
        (lambda y: y * 1e-20, None, 1e-20, []),
    ],
)
def test_extreme_magnitudes_are_located_or_decoded(corrupt, noise_sd, factor, want):
    """Known truth: a cubic through 20 first-kind points (D = 4), times ``factor``;
    corruptions far beyond the float32 squares' range are located and the rest
    decodes to the truth within the predicted error."""
    a, b = cj.chebyshev_points(20), cj.chebyshev_points(3)
    y = (a**3 - a + 0.5)[:, None]
    sd = None if noise_sd is None else jnp.full(20, noise_sd)
    r = cj.robust_decode(corrupt(y), jnp.ones(20, bool), a, b, 4,
                                 max_corrupted=2, noise_sd=sd)  # fmt: skip
    assert bool(r.ok) and np.isfinite(float(r.error))
    assert np.flatnonzero(np.asarray(r.suspects)).tolist() == want
    b64 = np.asarray(b, np.float64)
    truth = (b64**3 - b64 + 0.5) * factor
    err = np.abs(np.asarray(r.value[:, 0], np.float64) - truth).max()
    assert err <= float(r.error) and err <= 1e-5 * factor
