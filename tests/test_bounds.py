"""codedjax.bounds against independent float64 computations and known truths.

Every bound is checked against a direct computation that does not share its code
path: leverage closed form against a QR, the complement identity against the SVD of
the responding rows, the deterministic and gap bounds against the SVD on random and
exhaustive straggler sets, Chernoff deltas against their defining equation, the gap
tail against an exhaustive enumeration, Clopper-Pearson against scipy's binomtest,
and the recovery probabilities against an enumeration of all responding sets.
"""

import itertools
import math

import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb
from scipy import stats

import codedjax.bounds as cb

EPS = np.finfo(np.float64).eps


def _theta(m):
    return (2 * np.arange(m) + 1) * np.pi / (2 * m)


def _u(m, d):
    """Orthonormal U = T Lambda^{-1/2} at first-kind points, built independently."""
    t = npcheb.chebvander(np.cos(_theta(m)), d - 1)
    scale = np.full(d, np.sqrt(2.0 / m))
    scale[0] = np.sqrt(1.0 / m)
    return t * scale


def _random_mask(rng, m, n):
    mask = np.zeros(m, bool)
    mask[rng.choice(m, n, replace=False)] = True
    return mask


def _cond_tol(kappa, n, d):
    """Relative error of a float64 SVD condition number: ~ sqrt(N D) eps cond."""
    return 8.0 * math.sqrt(n * d) * EPS * kappa


# ---------------------------------------------------------------------- leverage


@pytest.mark.parametrize("m,d", [(40, 1), (40, 13), (40, 30), (40, 40), (101, 17)])
def test_closed_form_leverage_matches_qr(m, d):
    closed = cb.chebyshev_leverage_scores(m, num_coeffs=d)
    numeric = cb.leverage_scores(np.cos(_theta(m)), num_coeffs=d)
    # independent oracle: row norms of the explicitly orthonormal U
    direct = np.sum(_u(m, d) ** 2, axis=1)
    np.testing.assert_allclose(closed, numeric, rtol=0, atol=16 * d * EPS)
    np.testing.assert_allclose(closed, direct, rtol=0, atol=16 * d * EPS)
    assert abs(closed.sum() - d) <= 16 * d * EPS  # leverages sum to the rank


def test_leverage_known_truths():
    # D = M: U is square orthogonal, every leverage is 1; D = 1: all 1/M
    np.testing.assert_allclose(
        cb.chebyshev_leverage_scores(12, num_coeffs=12), 1.0, atol=64 * EPS
    )
    np.testing.assert_allclose(
        cb.chebyshev_leverage_scores(12, num_coeffs=1), 1 / 12, atol=4 * EPS
    )
    # the largest leverage sits at the ends and is below (2D - 1) / M
    lev = cb.chebyshev_leverage_scores(40, num_coeffs=13)
    assert np.argmax(lev) in (0, 39)
    assert lev.max() < (2 * 13 - 1) / 40
    mu = cb.chebyshev_coherence(40, num_coeffs=13)
    assert 1.0 <= mu < (2 * 13 - 1) / 13
    assert mu == pytest.approx(cb.coherence(lev), rel=1e-15)


def test_leverage_at_other_points_matches_projector_diagonal(np_rng):
    x = np.sort(np_rng.uniform(-1, 1, 25))
    t = npcheb.chebvander(x, 7)
    proj = t @ np.linalg.pinv(t)  # orthogonal projector onto range(T)
    np.testing.assert_allclose(
        cb.leverage_scores(x, num_coeffs=8), np.diag(proj), rtol=0, atol=1e-12
    )
    # equispaced points are more coherent than Chebyshev points
    eq = cb.coherence(cb.leverage_scores(np.linspace(-1, 1, 40), num_coeffs=13))
    assert eq > cb.chebyshev_coherence(40, num_coeffs=13)


# ------------------------------------------------------------ complement identity


@pytest.mark.parametrize("m,d", [(40, 13), (40, 30), (24, 6), (100, 25)])
def test_complement_identity_matches_svd(np_rng, m, d):
    u = _u(m, d)
    tested = 0
    for n in sorted({d, d + 1, d + 3, (d + m) // 2, m - d, m - 2, m - 1, m}):
        if not d <= n <= m:
            continue
        for _ in range(20):
            mask = _random_mask(np_rng, m, n)
            kappa = np.linalg.cond(u[mask])
            s = m - n
            # 1 - lambda_max cancels: error ~ s D eps cond^2, plus the SVD's own
            tol = 8.0 * (s * d * kappa**2 + math.sqrt(n * d) * kappa) * EPS
            if tol > 1e-2:
                continue
            got = cb.complement_condition_number(mask, num_coeffs=d)
            assert abs(got / kappa - 1.0) <= tol, (n, kappa, got)
            tested += 1
    assert tested >= 60


def test_complement_identity_known_truths():
    m, d = 40, 13
    full = np.ones(m, bool)
    assert cb.complement_condition_number(full, num_coeffs=d) == 1.0
    too_few = np.zeros(m, bool)
    too_few[: d - 1] = True
    assert cb.complement_condition_number(too_few, num_coeffs=d) == math.inf
    # one missing worker: cond = (1 - l_a)^{-1/2} exactly
    lev = cb.chebyshev_leverage_scores(m, num_coeffs=d)
    for a in (0, 7, 20):
        mask = full.copy()
        mask[a] = False
        want = 1.0 / math.sqrt(1.0 - lev[a])
        got = cb.complement_condition_number(mask, num_coeffs=d)
        assert got == pytest.approx(want, rel=32 * d * EPS)


# ----------------------------------------------------------------- Prop. B


@pytest.mark.parametrize("m,d", [(12, 4), (16, 13), (20, 10)])
def test_deterministic_bound_holds_exhaustively_and_is_tight_at_one(m, d):
    u = _u(m, d)
    for s in (1, 2, 3):
        bound = cb.deterministic_condition_bound(
            num_workers=m, num_coeffs=d, num_responses=m - s
        )
        worst = 0.0
        for miss in itertools.combinations(range(m), s):
            mask = np.ones(m, bool)
            mask[list(miss)] = False
            worst = max(worst, np.linalg.cond(u[mask]))
        assert worst <= bound * (1 + _cond_tol(worst, m, d))
        if s == 1:  # tight: missing the end worker attains it
            assert worst == pytest.approx(bound, rel=_cond_tol(worst, m, d) + 64 * EPS)


def test_deterministic_bound_values():
    # docs/theory.md section 5: 1/sqrt(1 - max leverage) = 1.538, 2.268, 5.903
    for d, want in [(13, 1.538), (20, 2.268), (30, 5.903)]:
        got = cb.deterministic_condition_bound(
            num_workers=40, num_coeffs=d, num_responses=39
        )
        assert got == pytest.approx(want, abs=5e-4)
    assert (
        cb.deterministic_condition_bound(
            num_workers=40, num_coeffs=13, num_responses=38
        )
        == math.inf
    )
    assert (
        cb.deterministic_condition_bound(
            num_workers=40, num_coeffs=13, num_responses=40
        )
        == 1.0
    )
    assert (
        cb.deterministic_condition_bound(
            num_workers=40, num_coeffs=13, num_responses=12
        )
        == math.inf
    )


# ----------------------------------------------------------------- Chernoff


@pytest.mark.parametrize("tail", ["upper", "lower"])
@pytest.mark.parametrize(
    "dim,ratio,prob", [(13, 5.0, 0.025), (40, 80.0, 0.05), (2, 0.5, 0.3)]
)
def test_chernoff_delta_solves_its_equation(tail, dim, ratio, prob):
    delta = cb.chernoff_delta(dim, ratio, prob, tail=tail)
    if tail == "upper":
        h = (1 + delta) * math.log1p(delta) - delta
    else:
        if delta == math.inf:  # no delta < 1 reaches prob: even delta -> 1 fails
            assert dim * math.exp(-ratio) > prob
            return
        h = delta + (1 - delta) * math.log1p(-delta)
    assert dim * math.exp(-ratio * h) == pytest.approx(prob, rel=1e-9)
    assert delta > 0


def test_chernoff_delta_monotone_and_errors():
    # a smaller failure probability, or fewer samples, needs a larger deviation
    ds = [cb.chernoff_delta(13, 20.0, p, tail="upper") for p in (0.1, 0.01, 0.001)]
    assert ds[0] < ds[1] < ds[2]
    assert cb.chernoff_delta(13, 10.0, 0.05, tail="lower") > cb.chernoff_delta(
        13, 40.0, 0.05, tail="lower"
    )
    with pytest.raises(ValueError, match="chernoff_delta: tail"):
        cb.chernoff_delta(3, 1.0, 0.1, tail="both")
    with pytest.raises(ValueError, match="prob"):
        cb.chernoff_delta(3, 1.0, 1.5, tail="upper")


def test_sampling_bound_from_its_deltas():
    m, d, n, eta = 5000, 13, 4000, 0.05
    ell = cb.chebyshev_coherence(m, num_coeffs=d) * d
    got = cb.sampling_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=eta
    )
    d1 = cb.chernoff_delta(d, n / ell, eta / 2, tail="lower")
    d2 = cb.chernoff_delta(d, n / ell, eta / 2, tail="upper")
    assert got == pytest.approx(math.sqrt((1 + d2) / (1 - d1)), rel=1e-14)
    assert 1.0 < got < 2.0
    # vacuous at M = 40 (docs/theory.md section 7: needs ~1.7e3 rows for D = 13)
    assert (
        cb.sampling_condition_bound(
            num_workers=40, num_coeffs=13, num_responses=40, eta=eta
        )
        == math.inf
    )
    # the simplified sufficient row count makes the exact form finite
    need = cb.sufficient_responses(num_coeffs=d, coherence=ell / d, eta=eta, eps=0.5)
    k = cb.sampling_condition_bound(
        num_workers=20 * math.ceil(need),
        num_coeffs=d,
        num_responses=math.ceil(need),
        eta=eta,
    )
    assert k <= math.sqrt(1.5 / 0.5) * (1 + 1e-12)


def test_missing_rows_bound_is_a_valid_probability_bound(np_rng):
    # M = 200, D = 20, s = 10: Prop. C is finite where Prop. B is vacuous.
    m, d, n, eta = 200, 20, 190, 0.05
    bound = cb.missing_rows_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=eta
    )
    assert math.isfinite(bound)
    assert (
        cb.deterministic_condition_bound(num_workers=m, num_coeffs=d, num_responses=n)
        == math.inf
    )
    u = _u(m, d)
    trials = 400
    k = sum(
        np.linalg.cond(u[_random_mask(np_rng, m, n)]) > bound for _ in range(trials)
    )
    lo, _ = cb.clopper_pearson(int(k), trials, confidence=0.999)
    assert lo <= eta
    # and at s = 1 it equals Prop. B (capped by the trace bound)
    assert cb.missing_rows_condition_bound(
        num_workers=40, num_coeffs=13, num_responses=39, eta=eta
    ) == pytest.approx(
        cb.deterministic_condition_bound(
            num_workers=40, num_coeffs=13, num_responses=39
        ),
        rel=1e-15,
    )


# ----------------------------------------------------------------- Prop. D


def _gap_bruteforce(mask):
    """Largest gap between responders on the circle (theta and -theta), in pi/M."""
    m = mask.size
    th = _theta(m)[mask]
    pts = np.sort(np.concatenate([th, -th]))
    gaps = np.diff(np.concatenate([pts, pts[:1] + 2 * np.pi]))
    return gaps.max() / (np.pi / m)


def test_max_gap_matches_the_circle(np_rng):
    for _ in range(200):
        m = int(np_rng.integers(2, 50))
        mask = _random_mask(np_rng, m, int(np_rng.integers(1, m + 1)))
        assert cb.max_gap(mask) == round(_gap_bruteforce(mask))
        assert abs(_gap_bruteforce(mask) - cb.max_gap(mask)) < 1e-9


@pytest.mark.parametrize("m,d", [(40, 7), (40, 13), (100, 13), (200, 20)])
def test_gap_bound_is_never_violated(np_rng, m, d):
    u = _u(m, d)
    informative = 0
    for _ in range(150):
        n = int(np_rng.integers(d, m + 1))
        mask = _random_mask(np_rng, m, n)
        bound = cb.gap_condition_bound(mask, num_coeffs=d)
        kappa = np.linalg.cond(u[mask])
        assert kappa <= bound * (1 + _cond_tol(kappa, n, d))
        informative += math.isfinite(bound)
    assert informative >= 20  # the test exercises finite bounds


def _all_gaps(m, n):
    """The largest gap of every N-subset (each subset equally likely)."""
    gaps = []
    for resp in itertools.combinations(range(m), n):
        mask = np.zeros(m, bool)
        mask[list(resp)] = True
        gaps.append(cb.max_gap(mask))
    return np.array(gaps)


@pytest.mark.parametrize("m,n", [(10, 7), (12, 9), (14, 8)])
def test_gap_tail_bound_dominates_the_exact_tail(m, n):
    gaps = _all_gaps(m, n)
    assert gaps.size == math.comb(m, n)
    for big_g in range(1, 2 * m):
        exact = float(np.mean(gaps >= big_g))
        bound = cb.gap_tail_bound(num_workers=m, num_responses=n, gap=big_g)
        assert exact <= bound + 1e-15, (big_g, exact, bound)


def test_gap_quantile_and_probabilistic_bound():
    # docs/theory.md section 6 (G_eta = g_eta + 1): 3, 4, 4, 5, 6, 8 at M=40
    got = [
        cb.gap_quantile(num_workers=40, num_responses=40 - s, eta=0.05) + 1
        for s in (1, 2, 3, 5, 8, 12)
    ]
    assert got == [3, 4, 4, 5, 6, 8]
    g = cb.gap_quantile(num_workers=200, num_responses=195, eta=0.05)
    assert cb.gap_tail_bound(num_workers=200, num_responses=195, gap=g + 1) <= 0.05
    assert cb.gap_tail_bound(num_workers=200, num_responses=195, gap=g) > 0.05
    rho = g * 19 / 200
    want = math.sqrt(g) * (1 + rho) / (1 - rho)
    assert cb.gap_condition_bound_probabilistic(
        num_workers=200, num_coeffs=20, num_responses=195, eta=0.05
    ) == pytest.approx(want, rel=1e-15)
    assert (
        cb.gap_condition_bound_probabilistic(
            num_workers=40, num_coeffs=13, num_responses=35, eta=0.05
        )
        == math.inf
    )


# -------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (17, 2000), (999, 1000)])
@pytest.mark.parametrize("conf", [0.95, 0.999])
def test_clopper_pearson_matches_scipy_binomtest(k, n, conf):
    lo, hi = cb.clopper_pearson(k, n, confidence=conf)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=conf, method="exact")
    assert lo == pytest.approx(ref.low, abs=1e-12)
    assert hi == pytest.approx(ref.high, abs=1e-12)
    assert lo <= k / n <= hi


# --------------------------------------------------------------- recovery


def _enumerate(k, c, m, n):
    """P(every replica group has a responder), listing every N-subset."""
    groups = [set(range(g * c, (g + 1) * c)) for g in range(k)]
    good = sum(
        all(g & set(resp) for g in groups)
        for resp in itertools.combinations(range(m), n)
    )
    return good / math.comb(m, n)


@pytest.mark.parametrize("k,c,m", [(3, 2, 8), (4, 3, 12), (2, 5, 13), (5, 2, 10)])
def test_recovery_probabilities_against_enumeration(k, c, m):
    for n in range(m + 1):
        exact = cb.exact_recovery_probability(k, c, m, n)
        assert abs(exact - _enumerate(k, c, m, n)) <= 1e-12
        union = cb.recovery_probability_union(k, c, m, n)
        seed = cb.recovery_probability_bound(k, c, m, n)
        assert seed <= union + 1e-15 <= exact + 2e-15
    # deterministic: more than M - c responders always recover everything
    assert cb.exact_recovery_probability(k, c, m, m - c + 1) == 1.0


def test_recovery_notes_values():
    # docs/theory.md section 10 table
    exact = cb.exact_recovery_probability(8, 4, 40, 20)
    assert exact == pytest.approx(0.6205, abs=5e-5)
    assert cb.recovery_probability_union(8, 4, 40, 20) == pytest.approx(
        0.5759, abs=5e-5
    )
    assert cb.recovery_probability_bound(8, 4, 40, 20) == 0.5


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "call,arg",
    [
        (
            lambda: cb.deterministic_condition_bound(
                num_workers=10, num_coeffs=3, num_responses=11
            ),
            "num_responses",
        ),
        (
            lambda: cb.deterministic_condition_bound(
                num_workers=10, num_coeffs=11, num_responses=10
            ),
            "num_coeffs",
        ),
        (
            lambda: cb.sampling_condition_bound(
                num_workers=10, num_coeffs=3, num_responses=8, eta=1.0
            ),
            "eta",
        ),
        (
            lambda: cb.missing_rows_condition_bound(
                num_workers=10, num_coeffs=3, num_responses=8, eta=0.0
            ),
            "eta",
        ),
        (
            lambda: cb.gap_condition_bound_probabilistic(
                num_workers=10, num_coeffs=3, num_responses=8, eta=-0.1
            ),
            "eta",
        ),
        (lambda: cb.gap_condition_bound(np.ones(5, bool), num_coeffs=6), "num_coeffs"),
        (lambda: cb.chebyshev_leverage_scores(5, num_coeffs=6), "num_coeffs"),
        (
            lambda: cb.complement_condition_number(np.ones(5, bool), num_coeffs=6),
            "num_coeffs",
        ),
        (
            lambda: cb.gap_tail_bound(num_workers=5, num_responses=6, gap=2),
            "num_responses",
        ),
        (lambda: cb.exact_recovery_probability(4, 3, 11, 5), "num_workers"),
        (lambda: cb.recovery_probability_union(4, 3, 12, 13), "num_responses"),
        (lambda: cb.clopper_pearson(5, 4), "successes"),
    ],
)
def test_bad_input_names_the_argument(call, arg):
    with pytest.raises(ValueError, match=arg):
        call()


def test_bad_types():
    with pytest.raises(TypeError, match="mask must be boolean"):
        cb.max_gap(np.ones(4, int))
    with pytest.raises(TypeError, match="num_workers"):
        cb.deterministic_condition_bound(num_workers=4.0, num_coeffs=2, num_responses=3)


# ------------------------------------------------ bound values, pinned independently
#
# The tests above check that each bound holds; these pin each bound's value against a
# computation that shares no code with codedjax.bounds (hand-derived numbers, scipy's
# root finder on the defining equation, exhaustive enumeration), so that a bound that
# is valid but wrong (too loose by a dropped factor, an off-by-one) is caught.


def _qr_max_leverage_times_m(m, d):
    q, _ = np.linalg.qr(npcheb.chebvander(np.cos(_theta(m)), d - 1))
    return m * np.max(np.sum(q * q, axis=1))


def _root(fun, lo, hi):
    from scipy import optimize

    sol = optimize.root_scalar(fun, bracket=(lo, hi), method="toms748", xtol=1e-14)
    assert sol.converged
    return sol.root


def _h_up(x):
    return (1 + x) * math.log1p(x) - x


def _h_lo(x):
    return x + (1 - x) * math.log1p(-x)


@pytest.mark.parametrize("m,d,n", [(200, 20, 190), (400, 20, 370), (1000, 30, 960)])
def test_missing_rows_bound_value_against_scipy_root(m, d, n):
    eta = 0.05
    s = m - n
    ell = _qr_max_leverage_times_m(m, d)
    # D exp(-(s/L) h(delta)) = eta, solved by scipy on the log of the equation
    delta = _root(lambda x: math.log(d) - (s / ell) * _h_up(x) - math.log(eta), 0, 1e4)
    t = (1 + delta) * s / m
    assert t < s * ell / m  # the Prop. B cap does not bind: the Chernoff term counts
    want = 1 / math.sqrt(1 - t)
    got = cb.missing_rows_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=eta
    )
    assert got == pytest.approx(want, rel=1e-9)


def test_sampling_bound_value_against_scipy_root():
    m, d, n, eta = 5000, 13, 4000, 0.05
    r = n / _qr_max_leverage_times_m(m, d)
    lhs = math.log(d) - math.log(eta / 2)
    d1 = _root(lambda x: lhs - r * _h_lo(x), 0, 1 - 1e-15)
    d2 = _root(lambda x: lhs - r * _h_up(x), 0, 1e4)
    got = cb.sampling_condition_bound(
        num_workers=m, num_coeffs=d, num_responses=n, eta=eta
    )
    assert got == pytest.approx(math.sqrt((1 + d2) / (1 - d1)), rel=1e-9)
    for tail, want in (("lower", d1), ("upper", d2)):
        assert cb.chernoff_delta(d, r, eta / 2, tail=tail) == pytest.approx(
            want, rel=1e-10
        )


def test_gap_tail_bound_hand_value():
    # M = 12, N = 9 (s = 3), G = 4: interior blocks of r = 3 missing at 10 positions,
    # each all-missing with probability C(9, 0)/C(12, 3) = 1/220; end blocks of
    # r_e = ceil(3/2) = 2 at two ends, each with C(10, 1)/C(12, 3) = 10/220.
    assert cb.gap_tail_bound(num_workers=12, num_responses=9, gap=4) == 30 / 220
    # M = 40, N = 39 (s = 1), G = 3: no interior block of 2 fits one missing
    # worker; two end blocks of 1, each missing with probability 1/40.
    assert cb.gap_tail_bound(num_workers=40, num_responses=39, gap=3) == 2 / 40


def _union_events(m, s, big_g):
    """E[number of run events]: the union bound's value, by listing every s-subset.

    An event is a window of G - 1 consecutive workers all missing, or an end block of
    ceil((G - 1) / 2) workers all missing; the mean count over all missing sets is the
    sum of the events' probabilities, which is what gap_tail_bound adds up.
    """
    r, re = big_g - 1, -(-(big_g - 1) // 2)
    total = 0
    for miss in itertools.combinations(range(m), s):
        out = np.zeros(m, bool)
        out[list(miss)] = True
        windows = sum(bool(out[i : i + r].all()) for i in range(m - r + 1))
        ends = bool(out[:re].all()) + bool(out[m - re :].all())
        total += windows + ends
    return total / math.comb(m, s)


@pytest.mark.parametrize("m,n", [(10, 6), (12, 9), (13, 8)])
def test_gap_tail_bound_equals_enumerated_union_sum(m, n):
    checked = 0
    for big_g in range(2, 2 * m):
        want = _union_events(m, m - n, big_g)
        got = cb.gap_tail_bound(num_workers=m, num_responses=n, gap=big_g)
        assert got == pytest.approx(min(want, 1.0), rel=1e-12, abs=1e-15), big_g
        checked += 0 < want < 1
    assert checked >= 3  # values strictly inside (0, 1) were compared


def test_gap_condition_bound_hand_values():
    # M = 40, D = 5, worker 10 missing: largest gap g = 2, rho = 2 * 4 / 40 = 0.2;
    # workers 9 and 11 have Voronoi weight (1 + 2) / 2 = 1.5, all others 1.
    mask = np.ones(40, bool)
    mask[10] = False
    want = math.sqrt(1.5 / 1.0) * 1.2 / 0.8
    assert cb.gap_condition_bound(mask, num_coeffs=5) == pytest.approx(want, rel=1e-14)
    # M = 40, D = 3, the even workers respond: interior gaps 2, worker 0's gap to its
    # mirror 1, worker 38's gap across theta = pi is 2 * 1 + 1 = 3, so g = 3,
    # rho = 3 * 2 / 40 = 0.15, w_min = (1 + 2) / 2 = 1.5 and w_max = (2 + 3) / 2 = 2.5.
    mask = np.zeros(40, bool)
    mask[::2] = True
    want = math.sqrt(2.5 / 1.5) * 1.15 / 0.85
    assert cb.gap_condition_bound(mask, num_coeffs=3) == pytest.approx(want, rel=1e-14)
    # here the missing leverages sum above 1: Prop. B's per-set trace bound is
    # vacuous while the gap bound is not, and the bound holds
    lev = cb.chebyshev_leverage_scores(40, num_coeffs=3)
    assert lev[~mask].sum() > 1.0
    assert np.linalg.cond(_u(40, 3)[mask]) <= want


def test_probabilistic_gap_bound_is_capped_by_prop_b():
    # M = 64, D = 21, N = 63: P(g >= 3) <= 2/64 <= 0.05 (two end workers), and
    # P(g >= 2) = 1, so g_eta = 2, rho = 2 * 20 / 64 = 0.625 and the gap term is
    # sqrt(2) * 1.625 / 0.375 = 6.128; Prop. B gives (1 - max leverage)^{-1/2}.
    kw = dict(num_workers=64, num_coeffs=21, num_responses=63, eta=0.05)
    assert cb.gap_quantile(num_workers=64, num_responses=63, eta=0.05) == 2
    gap = cb.gap_condition_bound_probabilistic(**kw, capped=False)
    assert gap == pytest.approx(math.sqrt(2) * 1.625 / 0.375, rel=1e-14)
    prop_b = 1 / math.sqrt(1 - _qr_max_leverage_times_m(64, 21) / 64)
    assert prop_b == pytest.approx(1.5603, abs=5e-5)
    assert cb.gap_condition_bound_probabilistic(**kw) == pytest.approx(
        prop_b, rel=1e-12
    )
    # where the gap term is the smaller one, the cap leaves it alone
    kw = dict(num_workers=200, num_coeffs=20, num_responses=195, eta=0.05)
    assert cb.gap_condition_bound_probabilistic(
        **kw
    ) == cb.gap_condition_bound_probabilistic(**kw, capped=False)


# ------------------------------------------------- raw cond and the exact worst case


def test_raw_condition_number_against_numpy(np_rng):
    m, d = 40, 13
    t = npcheb.chebvander(np.cos(_theta(m)), d - 1)
    u = _u(m, d)
    assert cb.raw_condition_number(np.ones(m, bool), num_coeffs=d) == pytest.approx(
        math.sqrt(2), rel=64 * EPS
    )
    for n in (13, 16, 25, 39):
        mask = _random_mask(np_rng, m, n)
        raw, eq = np.linalg.cond(t[mask]), np.linalg.cond(u[mask])
        tol = _cond_tol(raw, n, d)
        assert cb.raw_condition_number(mask, num_coeffs=d) == pytest.approx(
            raw, rel=tol
        )
        got_eq = cb.raw_condition_number(mask, num_coeffs=d, scaling="equilibrated")
        assert got_eq == pytest.approx(eq, rel=_cond_tol(eq, n, d))
        # the factor between the scalings is at most sqrt(2) either way
        assert eq / math.sqrt(2) * (1 - tol) <= raw <= math.sqrt(2) * eq * (1 + tol)
    few = np.zeros(m, bool)
    few[: d - 1] = True
    assert cb.raw_condition_number(few, num_coeffs=d) == math.inf
    with pytest.raises(ValueError, match="raw_condition_number: scaling"):
        cb.raw_condition_number(np.ones(m, bool), num_coeffs=d, scaling="unit")


def test_fahim_cadambe_worst_case_reproduced():
    # Fahim and Cadambe: every 29 x 29 submatrix of the unscaled Chebyshev-Vandermonde
    # matrix on the 31-point first-kind grid; the worst is about 1.22e4.
    n, d = 31, 29
    t = npcheb.chebvander(np.cos(_theta(n)), d - 1)
    brute = max(
        np.linalg.cond(t[list(rows)]) for rows in itertools.combinations(range(n), d)
    )
    raw = cb.worst_case_condition(
        num_workers=n, num_coeffs=d, num_missing=2, scaling="raw"
    )
    assert raw.num_examined == math.comb(31, 2)
    assert raw.cond == pytest.approx(brute, rel=_cond_tol(brute, d, d))
    assert round(raw.cond, -2) == 1.22e4
    eq = cb.worst_case_condition(num_workers=n, num_coeffs=d, num_missing=2)
    assert round(eq.cond, -1) == 8.87e3  # codedjax's equilibrated cond, same set
    assert sorted(np.flatnonzero(~eq.mask)) in ([0, 1], [29, 30])
    assert cb.raw_condition_number(eq.mask, num_coeffs=d) == pytest.approx(
        raw.cond, rel=_cond_tol(brute, d, d)
    )


@pytest.mark.parametrize("m,d,s", [(12, 4, 3), (14, 9, 2), (40, 13, 1)])
def test_worst_case_condition_against_worst_case_mask(x64, m, d, s):
    import codedjax as cj

    exact = cb.worst_case_condition(num_workers=m, num_coeffs=d, num_missing=s)
    alpha = np.cos(_theta(m))  # float64 points (x64 keeps them float64)
    ref = cj.worst_case_mask(alpha, num_coeffs=d, num_responses=m - s)
    assert ref.exhaustive
    assert exact.num_examined == math.comb(m, s)
    assert exact.cond == pytest.approx(ref.cond, rel=_cond_tol(ref.cond, m - s, d))
    assert np.linalg.cond(_u(m, d)[exact.mask]) == pytest.approx(
        exact.cond, rel=_cond_tol(exact.cond, m - s, d)
    )
    if s == 1:  # Prop. B is tight at one missing worker
        assert exact.cond == pytest.approx(
            cb.deterministic_condition_bound(
                num_workers=m, num_coeffs=d, num_responses=m - 1
            ),
            rel=_cond_tol(exact.cond, m - 1, d) + 64 * EPS,
        )
    with pytest.raises(ValueError, match="num_missing"):
        cb.worst_case_condition(num_workers=m, num_coeffs=d, num_missing=m - d + 1)


# ------------------------------------------------ exhaustive cond of the literature


def _scheme_rows(scheme, m, d, seed=0):
    """Each scheme's generator rows, built independently of codedjax.bounds."""
    if scheme == "circle":
        return np.exp(2j * np.pi * np.arange(m) / m)[:, None] ** np.arange(d)
    if scheme == "chebyshev":
        return npcheb.chebvander(np.cos(_theta(m)), d - 1)
    if scheme == "chebyshev_equilibrated":
        return _u(m, d)
    if scheme == "monomial":
        return np.linspace(-1, 1, m)[:, None] ** np.arange(d)
    import jax  # the draw is the library's own; the loop checks everything after it

    from codedjax import _random_kernels

    key = jax.random.key(seed)
    return np.asarray(
        _random_kernels.gaussian_encoding_matrix(key, num_inputs=d, num_workers=m),
        np.float64,
    )


@pytest.mark.parametrize("scheme", cb.BASES)
@pytest.mark.parametrize("n", [6, 7])
def test_exhaustive_condition_against_a_loop(scheme, n):
    m, d = 9, 6
    seeds = (3, 4)
    r = cb.exhaustive_condition(
        scheme=scheme, num_workers=m, num_coeffs=d, num_responses=n, seeds=seeds
    )
    draws = seeds if scheme == "random" else (0,)
    worst, mean = [], []
    for s in draws:
        v = _scheme_rows(scheme, m, d, s)
        np.testing.assert_allclose(
            cb.generator_matrix(scheme=scheme, num_workers=m, num_coeffs=d, seed=s),
            v,
            rtol=0,
            atol=64 * EPS * np.abs(v).max(),
        )
        c = [
            np.linalg.cond(v[list(rows)])
            for rows in itertools.combinations(range(m), n)
        ]
        worst.append(max(c))
        mean.append(np.mean(c))
    tol = _cond_tol(max(worst), n, d)
    assert r.num_examined == math.comb(m, n) * len(draws)
    assert r.draws_worst == pytest.approx(worst, rel=tol)
    assert r.draws_mean == pytest.approx(mean, rel=tol)
    assert r.worst == pytest.approx(max(worst), rel=tol)
    assert r.mean == pytest.approx(np.mean(mean), rel=tol)
    assert r.mask.sum() == n
    best = _scheme_rows(scheme, m, d, draws[int(np.argmax(worst))])
    assert np.linalg.cond(best[r.mask]) == pytest.approx(r.worst, rel=tol)


def test_rotation_embedding_has_the_circle_condition_numbers():
    # Ramamoorthy and Tang's matrix-vector setting: n = 31 workers, threshold k = 29.
    # Their generator is real: block (i, j) is R^(i j), R the rotation by 2 pi / n;
    # the recovery matrix of k workers is 2k x 2k. Its condition numbers equal those
    # of the complex Vandermonde rows alpha_j^i (R is unitarily similar to
    # diag(alpha, conj(alpha))).
    n, k = 31, 29
    t = 2 * np.pi * np.mod(np.arange(k)[:, None] * np.arange(n)[None, :], n) / n
    g = np.zeros((2 * k, 2 * n))
    g[0::2, 0::2], g[0::2, 1::2] = np.cos(t), -np.sin(t)
    g[1::2, 0::2], g[1::2, 1::2] = np.sin(t), np.cos(t)
    sets = np.array(list(itertools.combinations(range(n), k)))
    cols = np.stack([2 * sets, 2 * sets + 1], axis=-1).reshape(len(sets), 2 * k)
    sv = np.linalg.svd(np.swapaxes(g[:, cols], 0, 1), compute_uv=False)
    c = sv[:, 0] / sv[:, -1]
    r = cb.exhaustive_condition(scheme="circle", num_workers=n, num_coeffs=k)
    assert r.num_examined == len(sets) == math.comb(31, 2)
    assert r.worst == pytest.approx(c.max(), rel=_cond_tol(c.max(), 2 * k, 2 * k))
    assert r.mean == pytest.approx(c.mean(), rel=_cond_tol(c.max(), 2 * k, 2 * k))
    # the published Chebyshev figure on the same configuration (docs/theory.md 8)
    fc = cb.exhaustive_condition(scheme="chebyshev", num_workers=n, num_coeffs=k)
    assert round(fc.worst, -2) == 1.22e4
    eq = cb.exhaustive_condition(
        scheme="chebyshev_equilibrated", num_workers=n, num_coeffs=k
    )
    ref = cb.worst_case_condition(num_workers=n, num_coeffs=k, num_missing=2)
    assert eq.worst == pytest.approx(ref.cond, rel=_cond_tol(ref.cond, k, k))


@pytest.mark.parametrize("scheme", ["circle", "chebyshev_equilibrated"])
def test_every_worker_responding_is_perfectly_conditioned(scheme):
    r = cb.exhaustive_condition(
        scheme=scheme, num_workers=20, num_coeffs=16, num_responses=20
    )
    assert r.num_examined == 1 and r.mask.all()
    assert r.worst == pytest.approx(1.0, abs=_cond_tol(1.0, 20, 16))


def test_exhaustive_condition_static_mistakes():
    fn = "exhaustive_condition"
    with pytest.raises(ValueError, match=rf"{fn}: C\(M, N\) = C\(40, 20\) = .* max_"):
        cb.exhaustive_condition(
            scheme="circle", num_workers=40, num_coeffs=20, num_responses=20
        )
    with pytest.raises(ValueError, match=f"{fn}: scheme must be one of"):
        cb.exhaustive_condition(scheme="vandermonde", num_workers=9, num_coeffs=6)
    with pytest.raises(
        ValueError, match=rf"{fn}: num_responses \(N\) must be at least"
    ):
        cb.exhaustive_condition(
            scheme="circle", num_workers=9, num_coeffs=6, num_responses=5
        )
    with pytest.raises(ValueError, match=f"{fn}: seeds must hold at least one"):
        cb.exhaustive_condition(scheme="random", num_workers=9, num_coeffs=6, seeds=())
    with pytest.raises(ValueError, match=r"generator_matrix: num_coeffs \(D\) must"):
        cb.generator_matrix(scheme="monomial", num_workers=5, num_coeffs=6)
