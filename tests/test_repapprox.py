"""RepApprox: replica layout, encode, decode and the exact recovery probabilities.

Oracles: brute-force enumeration of every responding set (probabilities); for lost
tasks, scipy's FloaterHormannInterpolator(d=0) (Berrut) and make_smoothing_spline
(NeRCC, continued linearly outside the knots) in float64 over the distinct
responding nodes. Known truths: a task with a responding replica comes back bit for
bit; the all-exact rate over random masks lies in a 99%
Clopper-Pearson interval around the exact probability. The design measurement of
docs/theory.md section 10 (K = 8, c = 4, M = 40, ReLU MLP 32-64-10) is reproduced.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import FloaterHormannInterpolator, make_smoothing_spline
from scipy.stats import beta as beta_dist

import codedjax as cj

K, C, M = 8, 4, 40


def _mlp(seed, sizes=(32, 64, 10)):
    """A ReLU MLP with random weights (numpy draws: nothing to compile)."""
    rng = np.random.default_rng(seed)
    w1 = jnp.asarray(rng.standard_normal(sizes[:2]) / np.sqrt(sizes[0]), jnp.float32)
    b1 = jnp.asarray(0.1 * rng.standard_normal(sizes[1:2]), jnp.float32)
    w2 = jnp.asarray(rng.standard_normal(sizes[1:]) / np.sqrt(sizes[1]), jnp.float32)
    b2 = jnp.asarray(0.1 * rng.standard_normal(sizes[2:]), jnp.float32)

    def add(a, b):  # explicit broadcast (the tests run with rank promotion 'raise')
        return a + jnp.broadcast_to(b, a.shape)

    return lambda x: add(jax.nn.relu(add(x @ w1, b1)) @ w2, b2)


def _masks(np_rng, m, n, trials):
    """trials uniformly random responding sets of exactly n of m (numpy)."""
    rank = np.argsort(np_rng.random((trials, m)), axis=1).argsort(axis=1)
    return rank < n


# ----------------------------------------------------------------------------------
# layout and encoding


def test_layout():
    lay = cj.repapprox_layout(K, C, M)
    assert (lay.num_inputs, lay.replication, lay.num_workers, lay.num_extra) == (
        K,
        C,
        M,
        M - K * C,
    )
    np.testing.assert_array_equal(lay.task[: K * C], np.repeat(np.arange(K), C))
    assert np.all(lay.task[K * C :] == -1)
    # float64 on the host; the same values as chebyshev_points rounds to float32
    assert lay.beta.dtype == np.float64 and lay.nodes.dtype == np.float64
    np.testing.assert_array_equal(
        lay.beta.astype(np.float32), cj.chebyshev_points(K, kind=1, dtype=jnp.float32)
    )
    np.testing.assert_allclose(
        lay.beta, np.cos((2 * np.arange(K) + 1) * np.pi / (2 * K)), rtol=0, atol=1e-15
    )
    np.testing.assert_array_equal(lay.nodes[: K * C], np.repeat(lay.beta, C))
    np.testing.assert_array_equal(
        lay.nodes[K * C :].astype(np.float32),
        cj.chebyshev_points(M - K * C, kind=2, dtype=jnp.float32),
    )
    assert cj.repapprox_layout(2, 1, 3).nodes[-1] == 0.0  # E = 1: the point 0
    assert cj.repapprox_layout(2, 2, 4).num_extra == 0  # pure repetition
    custom = cj.repapprox_layout(2, 1, 4, beta=[-0.5, 0.5], extra_nodes=[0.1, 0.2])
    np.testing.assert_array_equal(custom.nodes, [-0.5, 0.5, 0.1, 0.2])


def test_layout_errors():
    with pytest.raises(
        ValueError,
        match=r"repapprox_layout: num_workers \(M\) must "
        r"be at least num_inputs \* replication \(K c = 8 \* 4 = 32\), "
        "got 30",
    ):
        cj.repapprox_layout(8, 4, 30)
    with pytest.raises(ValueError, match="repapprox_layout: replication must be >= 1"):
        cj.repapprox_layout(8, 0, 30)
    with pytest.raises(
        TypeError, match="repapprox_layout: num_inputs must be a Python"
    ):
        cj.repapprox_layout(8.0, 4, 40)
    with pytest.raises(ValueError, match="repapprox_layout: beta must have shape"):
        cj.repapprox_layout(2, 1, 3, beta=[0.0])
    with pytest.raises(ValueError, match="repapprox_layout: beta must be 2 distinct"):
        cj.repapprox_layout(2, 1, 3, beta=[0.0, 0.0])
    with pytest.raises(ValueError, match="repapprox_layout: extra_nodes must have"):
        cj.repapprox_layout(2, 1, 3, extra_nodes=[0.0, 1.0])


def test_encode_replicas_bit_for_bit(np_rng):
    lay = cj.repapprox_layout(K, C, M)
    beta, _ = cj.bacc_points(K, 2)
    for dt in (jnp.bfloat16, jnp.float32):
        x = jnp.asarray(np_rng.standard_normal((K, 3, 2)), dt)
        u = cj.repapprox_encode(x, lay)
        assert u.shape == (M, 3, 2) and u.dtype == jnp.float32
        np.testing.assert_array_equal(
            np.asarray(u[: K * C]), np.asarray(x.astype(jnp.float32))[lay.task[:32]]
        )
        extra = cj.berrut_encode(x, beta, jnp.asarray(lay.nodes[K * C :], jnp.float32))
        np.testing.assert_allclose(
            np.asarray(u[K * C :]),
            np.asarray(extra),
            rtol=0,
            atol=1e-5 * float(jnp.abs(extra).max()),
        )
    with pytest.raises(ValueError, match=r"repapprox_encode: x must have shape \[K"):
        cj.repapprox_encode(jnp.ones((K + 1, 2)), lay)
    with pytest.raises(TypeError, match="repapprox_encode: layout must be a"):
        cj.repapprox_encode(jnp.ones((K, 2)), (K, C, M))


# ----------------------------------------------------------------------------------
# decoding


GROUPS, TRIALS = 4, 400  # every decode test shares these shapes (one compilation)


def _setup(masks, dtype=jnp.float32):
    """ReLU MLP outputs of the RepApprox servers: y [M, GROUPS, 10]."""
    lay = cj.repapprox_layout(K, C, M)
    f = _mlp(2024)
    x = jnp.asarray(
        np.random.default_rng(7).standard_normal((K, GROUPS, 32)), jnp.float32
    )  # GROUPS sets of K inputs
    y = f(cj.repapprox_encode(x, lay)).astype(dtype)
    return lay, f, x, y, jnp.asarray(masks)


def _vdecode(y, masks, lay, **kw):
    return jax.vmap(lambda mk: cj.repapprox_decode(y, mk, lay, **kw))(masks)


def _oracle(fallback, lay, y, mask, lam):
    """float64 reference over the distinct responding nodes, at beta [K, ...]."""
    idx = np.flatnonzero(mask)
    nodes, first = np.unique(lay.nodes[idx], return_index=True)  # sorted
    vals = np.asarray(y, np.float64)[idx[first]]
    if fallback == "berrut":
        return FloaterHormannInterpolator(nodes, vals, d=0)(lay.beta), nodes.size
    spl = make_smoothing_spline(nodes, vals, lam=lam)
    ends = np.clip(lay.beta, nodes[0], nodes[-1])  # natural spline: linear outside
    dz = (lay.beta - ends).reshape((-1,) + (1,) * (vals.ndim - 1))
    return spl(ends) + dz * spl.derivative()(ends), nodes.size


@pytest.mark.parametrize(
    "fallback,dtype", [("berrut", jnp.bfloat16), ("nercc", jnp.float32)]
)
def test_exact_tasks_are_bit_for_bit_and_lost_tasks_use_the_fallback(
    np_rng, fallback, dtype
):
    lay, _, _, y, masks = _setup(_masks(np_rng, M, 20, TRIALS), dtype)
    lam = 1e-4
    r = _vdecode(y, masks, lay, fallback=fallback, smoothing=lam)
    assert r.value.dtype == jnp.float32
    mk = np.asarray(masks)
    yf = np.asarray(y.astype(jnp.float32))
    replied = mk[:, : K * C].reshape(-1, K, C)
    np.testing.assert_array_equal(np.asarray(r.exact), replied.any(-1))
    val = np.asarray(r.value)
    b, k = np.nonzero(replied.any(-1))
    first = k * C + np.argmax(replied[b, k], axis=-1)
    np.testing.assert_array_equal(val[b, k], yf[first])  # bit for bit
    assert np.all(np.asarray(r.ok)) and np.all(np.isfinite(val))
    # lost tasks: the float64 oracle of the fallback over the same nodes
    lost = ~np.asarray(r.exact)
    assert lost.sum() > 50 and (~lost).sum() > 50
    u = cj.unit_roundoff(jnp.float32)
    checked = 0
    for t in np.flatnonzero(lost.any(1))[:40]:
        ref, n = _oracle(fallback, lay, yf, mk[t], lam)
        assert int(r.num_used[t]) == n
        # Berrut: the barycentric bound (3n + 4) u Lambda max|y|; the spline
        # smoother: the O(n^2 u) backward error of its Householder QR
        bound = (3 * n + 4) * float(r.cond[t]) if fallback == "berrut" else 4 * n**2
        err = np.abs(val[t][lost[t]] - ref[lost[t]]).max()
        assert err <= bound * u * np.abs(yf).max(), (t, err)
        checked += 1
    assert checked == 40


def test_all_false_mask_few_responders_and_faulty_replicas(np_rng):
    special = _masks(np_rng, M, 20, TRIALS)
    special[0] = False  # nobody answered
    special[1] = False
    special[1, [4, 5]] = True  # two replicas of task 1 only
    lay, _, _, y, masks = _setup(special)
    for fallback in ("berrut", "nercc"):
        r = _vdecode(y, masks, lay, fallback=fallback, smoothing=1e-4)
        assert not bool(r.ok[0]) and not bool(jnp.any(r.exact[0]))
        assert bool(jnp.all(r.value[0] == 0)) and float(r.cond[0]) == np.inf
        assert r.exact[1].tolist() == [i == 1 for i in range(K)]
        np.testing.assert_array_equal(np.asarray(r.value[1, 1]), np.asarray(y[4]))
        assert bool(jnp.all(jnp.isfinite(r.value)))
        if fallback == "berrut":  # the constant through one node
            assert bool(r.ok[1])
            np.testing.assert_array_equal(
                np.asarray(r.value[1]),
                np.broadcast_to(np.asarray(y[4]), (K,) + y.shape[1:]),
            )
        else:  # a spline needs two distinct nodes: lost tasks are zero, ok False
            assert not bool(r.ok[1])
            assert bool(jnp.all(r.value[1][jnp.arange(K) != 1] == 0))
    # eagerly: an all-false mask, and a faulty replica counts as missing (the next
    # replica of its group is used)
    r = cj.repapprox_decode(y, jnp.zeros(M, bool), lay)
    assert not bool(r.ok) and bool(jnp.all(r.value == 0))
    bad = cj.repapprox_decode(y.at[0, 3].set(jnp.nan), jnp.ones(M, bool), lay)
    assert bool(bad.ok) and bool(jnp.all(bad.exact))
    np.testing.assert_array_equal(np.asarray(bad.value[0]), np.asarray(y[1]))
    assert float(bad.cond) == 1.0


def test_layout_is_a_pytree_through_jit(np_rng):
    lay, _, _, y, masks = _setup(_masks(np_rng, M, 20, 2))
    f = jax.jit(lambda yy, mk, ll: cj.repapprox_decode(yy, mk, ll))
    for mk in list(masks[:2]):
        j, e = f(y, mk, lay), cj.repapprox_decode(y, mk, lay)
        np.testing.assert_array_equal(np.asarray(j.exact), np.asarray(e.exact))
        np.testing.assert_allclose(
            np.asarray(j.value), np.asarray(e.value), rtol=1e-6, atol=1e-6
        )


def test_decode_errors(np_rng):
    lay, _, _, y, masks = _setup(_masks(np_rng, M, 20, 1))
    with pytest.raises(ValueError, match="repapprox_decode: fallback must be"):
        cj.repapprox_decode(y, masks[0], lay, fallback="lagrange")
    with pytest.raises(ValueError, match="repapprox_decode: smoothing must be a fin"):
        cj.repapprox_decode(y, masks[0], lay, fallback="nercc", smoothing=-1.0)
    with pytest.raises(ValueError, match=r"repapprox_decode: y must have shape \[M"):
        cj.repapprox_decode(y[:-1], masks[0], lay)
    with pytest.raises(ValueError, match="repapprox_decode: mask must have shape"):
        cj.repapprox_decode(y, masks[0, :-1], lay)


# ----------------------------------------------------------------------------------
# recovery probabilities


def _brute(k, c, m, n):
    """Fraction of N-subsets of M servers that hit every replica group."""
    groups = [set(range(j * c, (j + 1) * c)) for j in range(k)]
    hits = total = 0
    for s in itertools.combinations(range(m), n):
        s = set(s)
        hits += all(g & s for g in groups)
        total += 1
    return hits / total


@pytest.mark.parametrize(
    "k,c,m", [(2, 2, 5), (3, 2, 7), (4, 3, 12), (3, 1, 3), (2, 3, 9), (1, 1, 4)]
)
def test_probabilities_against_brute_force(k, c, m):
    for n in range(m + 1):
        exact = cj.exact_recovery_probability(k, c, m, n)
        assert abs(exact - _brute(k, c, m, n)) <= 1e-12
        union = cj.recovery_probability_union(k, c, m, n)
        ref_union = 1 - k * math.comb(m - c, n) / math.comb(m, n)
        assert abs(union - ref_union) <= 1e-12
        bound = cj.recovery_probability_bound(k, c, m, n)
        assert abs(bound - (1 - k * (1 - n / m) ** c)) <= 1e-12
        assert bound <= union + 1e-15 and union <= exact + 1e-15
        if n > m - c:
            assert exact == 1.0  # every group must have a responder


def test_probabilities_design_values_and_errors():
    assert cj.exact_recovery_probability(4, 3, 12, 6) == pytest.approx(0.642857, 1e-5)
    assert cj.exact_recovery_probability(8, 4, 40, 30) == pytest.approx(0.981634, 1e-5)
    assert cj.recovery_probability_bound(8, 4, 40, 20) == 0.5
    # large binomials stay exact (no overflow): C(400, 200) ~ 1e119
    p = cj.exact_recovery_probability(80, 5, 400, 200)
    assert 0.0 < p < 1.0
    with pytest.raises(ValueError, match="exact_recovery_probability: num_responses"):
        cj.exact_recovery_probability(8, 4, 40, 41)
    with pytest.raises(ValueError, match="recovery_probability_bound: num_workers"):
        cj.recovery_probability_bound(8, 4, 31, 20)
    with pytest.raises(ValueError, match="recovery_probability_union: replication"):
        cj.recovery_probability_union(8, 0, 40, 20)


def _clopper_pearson(hits, n, level=0.99):
    a = (1 - level) / 2
    lo = 0.0 if hits == 0 else beta_dist.ppf(a, hits, n - hits + 1)
    hi = 1.0 if hits == n else beta_dist.ppf(1 - a, hits + 1, n - hits)
    return lo, hi


@pytest.mark.parametrize(
    "k,c,m,n", [(8, 4, 40, 28), (4, 3, 12, 6), (16, 2, 40, 34), (8, 2, 20, 14)]
)
def test_empirical_all_exact_rate_matches_exact_probability(np_rng, k, c, m, n):
    trials = 20_000
    lay = cj.repapprox_layout(k, c, m)
    masks = jnp.asarray(_masks(np_rng, m, n, trials))
    y = jnp.zeros((m, 1))
    exact = jax.jit(jax.vmap(lambda mk: cj.repapprox_decode(y, mk, lay).exact))(masks)
    hits = int(jnp.sum(jnp.all(exact, axis=1)))
    lo, hi = _clopper_pearson(hits, trials)
    p = cj.exact_recovery_probability(k, c, m, n)
    assert lo <= p <= hi, (hits / trials, p, lo, hi)


# ----------------------------------------------------------------------------------
# the design measurement


def test_design_measurement_repapprox_beats_bacc(key):
    """K = 8, c = 4, M = 40, ReLU MLP 32-64-10, N = 28 (docs/theory.md section 10)."""
    masks = cj.sample_masks(key, num_workers=M, num_responses=28, shape=(TRIALS,))
    lay, f, x, y_rep, masks = _setup(masks)
    ref = f(x)  # [K, GROUPS, 10]
    beta, alpha = cj.bacc_points(K, M)
    y_bacc = f(cj.berrut_encode(x, beta, alpha))
    rep = _vdecode(y_rep, masks, lay).value
    bac = jax.vmap(lambda mk: cj.berrut_decode(y_bacc, mk, alpha, beta).value)(masks)

    def rel(v):
        return (
            jnp.linalg.norm(v - ref[None], axis=-1)
            / jnp.linalg.norm(ref, axis=-1)[None]
        )

    e_rep, e_bacc = float(jnp.mean(rel(rep))), float(jnp.mean(rel(bac)))
    assert e_rep <= 1e-2, e_rep
    assert e_bacc >= 5 * e_rep, (e_rep, e_bacc)
