"""Berrut interpolation and BACC encode/decode against scipy's Floater-Hormann (d = 0).

Oracle: scipy.interpolate.FloaterHormannInterpolator(d=0) in float64 (its weights are
(-1)^i in the order the nodes are given, so it is fed the sorted distinct nodes).
Known truths: constants are reproduced, the interpolant passes through its nodes, the
error falls as O(h) for a smooth function. Tolerances: the barycentric formula's
forward error is at most about (3n + 4) u Lambda max|y| (Higham 2004), with Lambda the
Lebesgue constant the decoder reports as ``cond``.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import FloaterHormannInterpolator

import codedjax as cj

K, M = 6, 24  # float32 tests
M64, Q64 = 20, 7  # float64 tests: 20 workers, 7 evaluation points


def _mask(np_rng, m, n):
    """Exactly n of m workers respond (numpy: no compilation in the test)."""
    out = np.zeros(m, bool)
    out[np_rng.choice(m, n, replace=False)] = True
    return out


def _fh(nodes, values, z):
    """Reference: Berrut = Floater-Hormann d=0 on the sorted distinct nodes."""
    o = np.argsort(nodes, kind="stable")
    return FloaterHormannInterpolator(nodes[o], values[o], d=0)(z)


def _first_taken(alpha, y, mask):
    """Distinct responding nodes, the lowest-index responder kept at each."""
    idx = np.flatnonzero(mask)
    _, first = np.unique(alpha[idx], return_index=True)
    keep = idx[first]
    return alpha[keep], y[keep]


def _tol(n, cond, scale, dtype=np.float64):
    return 2 * (3 * n + 4) * cj.unit_roundoff(dtype) * cond * scale


def test_bacc_points():
    beta, alpha = cj.bacc_points(K, M)
    np.testing.assert_array_equal(beta, cj.chebyshev_points(K, kind=1))
    np.testing.assert_array_equal(alpha, cj.chebyshev_points(M, kind=2))
    with pytest.raises(ValueError, match="bacc_points: num_workers must be >= 2"):
        cj.bacc_points(3, 1)


def _random_problems(np_rng, trials=40, m=M64, q=Q64):
    """Random node sets (some with repeated nodes), payloads, masks, points."""
    alpha = np_rng.uniform(-1, 1, (trials, m))
    alpha[::4, : m // 3] = alpha[::4, m // 3 : 2 * (m // 3)]  # replicas: merged
    y = np_rng.standard_normal((trials, m, 3))
    mask = np_rng.random((trials, m)) < np_rng.uniform(0.1, 1.0, (trials, 1))
    mask[:, 0] |= ~mask.any(1)
    z = np_rng.uniform(-1.2, 1.2, (trials, q))
    z[:, :2] = np.where(mask[:, :2], alpha[:, :2], z[:, :2])  # some at nodes
    return alpha, y, mask, z


def test_decode_matches_floater_hormann_random_nodes_and_masks(x64, np_rng):
    alpha, y, mask, z = _random_problems(np_rng)
    r = jax.vmap(cj.berrut_decode)(*map(jnp.asarray, (y, mask, alpha, z)))
    assert r.value.dtype == jnp.float64
    worst = 0.0
    for i in range(alpha.shape[0]):
        nodes, vals = _first_taken(alpha[i], y[i], mask[i])
        ref = _fh(nodes, vals, z[i])
        assert bool(r.ok[i]) and int(r.num_used[i]) == nodes.size
        # cond is the Lebesgue constant at z: the inf-norm of the reference matrix
        basis = _fh(nodes, np.eye(nodes.size), z[i])
        np.testing.assert_allclose(
            float(r.cond[i]), np.abs(basis).sum(1).max(), rtol=1e-12
        )
        tol = _tol(nodes.size, float(r.cond[i]), np.abs(y[i]).max())
        err = np.abs(np.asarray(r.value[i]) - ref).max()
        assert err <= tol
        worst = max(worst, err / tol)
    assert worst > 0  # the comparison is not vacuous
    # eager calls agree with the vmapped ones
    for i in (0, 1):
        e = cj.berrut_decode(*map(jnp.asarray, (y[i], mask[i], alpha[i], z[i])))
        np.testing.assert_allclose(
            np.asarray(e.value),
            np.asarray(r.value[i]),
            rtol=0,
            atol=_tol(M64, float(e.cond), 5.0),
        )


def test_signs_follow_sorted_order_not_worker_order(x64, np_rng):
    """Permuting the workers (points and responses together) changes nothing."""
    alpha = np_rng.uniform(-1, 1, M64)
    y = np_rng.standard_normal((M64, 3))
    mask = np_rng.random(M64) < 0.6
    z = np_rng.uniform(-1, 1, Q64)
    r = cj.berrut_decode(
        jnp.asarray(y), jnp.asarray(mask), jnp.asarray(alpha), jnp.asarray(z)
    )
    p = np_rng.permutation(M64)
    rp = cj.berrut_decode(
        jnp.asarray(y[p]), jnp.asarray(mask[p]), jnp.asarray(alpha[p]), jnp.asarray(z)
    )
    np.testing.assert_allclose(
        np.asarray(rp.value),
        np.asarray(r.value),
        atol=_tol(M64, float(r.cond), np.abs(y).max()),
    )


def test_interpolates_at_nodes_exactly_and_no_nan_at_coinciding_points(np_rng):
    alpha = jnp.asarray(np_rng.uniform(-1, 1, M), jnp.float32)
    y = jnp.asarray(np_rng.standard_normal((M, 3)), jnp.bfloat16)
    mask = _mask(np_rng, M, 12)
    mask[:K] = True
    # evaluate at responding nodes: the responses themselves, bit for bit
    r = cj.berrut_decode(y, jnp.asarray(mask), alpha, alpha[:K])
    np.testing.assert_array_equal(
        np.asarray(r.value), np.asarray(y.astype(jnp.float32))[:K]
    )
    # an evaluation point one ulp away from a node: finite, close to the node value
    near = alpha[:K].at[3].set(jnp.nextafter(alpha[3], jnp.float32(2.0)))
    r2 = cj.berrut_decode(y, jnp.asarray(mask), alpha, near)
    assert bool(r2.ok) and bool(jnp.all(jnp.isfinite(r2.value)))
    np.testing.assert_allclose(
        np.asarray(r2.value[3]),
        np.asarray(y[3].astype(jnp.float32)),
        rtol=1e-3,
        atol=1e-3,
    )
    # default BACC points with an odd K and odd M share the point 0
    beta, alpha9 = cj.bacc_points(5, 9)
    yy = jnp.asarray(np_rng.standard_normal((9, 3)), jnp.float32)
    r3 = cj.berrut_decode(yy, jnp.ones(9, bool), alpha9, beta)
    np.testing.assert_array_equal(np.asarray(r3.value[2]), np.asarray(yy[4]))
    assert bool(jnp.all(jnp.isfinite(r3.value)))


def test_encode_matches_reference_and_returns_data_at_data_points(x64, np_rng):
    beta, alpha = cj.bacc_points(Q64, M64)
    x = np_rng.standard_normal((Q64, 3, 2))
    u = cj.berrut_encode(jnp.asarray(x), beta, alpha)
    assert u.shape == (M64, 3, 2) and u.dtype == jnp.float64
    ref = _fh(np.asarray(beta), x, np.asarray(alpha))
    basis = _fh(np.asarray(beta), np.eye(Q64), np.asarray(alpha))
    lam = np.abs(basis).sum(1).max()
    np.testing.assert_allclose(np.asarray(u), ref, atol=_tol(Q64, lam, np.abs(x).max()))
    back = cj.berrut_encode(jnp.asarray(x), beta, beta)
    np.testing.assert_array_equal(np.asarray(back), x)
    # constants are reproduced (partition of unity)
    ones = cj.berrut_encode(jnp.ones((Q64, 3, 2)), beta, alpha)
    np.testing.assert_allclose(np.asarray(ones), 1.0, atol=_tol(Q64, lam, 1.0))
    # a non-finite input is propagated, never silently replaced
    bad = cj.berrut_encode(jnp.asarray(x).at[2, 0, 0].set(jnp.nan), beta, alpha)
    assert bool(jnp.all(jnp.isnan(bad[:, 0, 0]))) and bool(
        jnp.all(jnp.isfinite(bad[:, 1:]))
    )


def test_known_truth_first_order_convergence(x64):
    """Berrut's interpolant converges like O(h) on Chebyshev-like nodes."""
    errs = []
    for m in (M64, 4 * M64):
        beta, alpha = cj.bacc_points(Q64, m)
        y = jnp.broadcast_to(jnp.exp(alpha)[:, None], (m, 3))
        r = cj.berrut_decode(y, jnp.ones(m, bool), alpha, beta)
        errs.append(np.abs(np.asarray(r.value[:, 0]) - np.exp(np.asarray(beta))).max())
    assert errs[0] < 0.2
    assert errs[1] < errs[0] / 3  # h falls 4x


def test_all_false_mask_and_faulty_workers(np_rng):
    beta, alpha = cj.bacc_points(K, M)
    y = jnp.asarray(np_rng.standard_normal((M, 3)), jnp.float32)
    r = cj.berrut_decode(y, jnp.zeros(M, bool), alpha, beta)
    assert not bool(r.ok) and int(r.num_used) == 0 and float(r.cond) == np.inf
    assert bool(jnp.all(r.value == 0))
    mask = _mask(np_rng, M, 15)
    idx = int(np.argmax(mask))
    clean_mask = mask.copy()
    clean_mask[idx] = False
    clean = cj.berrut_decode(y, jnp.asarray(clean_mask), alpha, beta)
    for bad in (jnp.nan, jnp.inf):
        poisoned = cj.berrut_decode(
            y.at[idx, 1].set(bad), jnp.asarray(mask), alpha, beta
        )
        assert bool(poisoned.ok) and int(poisoned.num_used) == 14
        np.testing.assert_array_equal(
            np.asarray(poisoned.value), np.asarray(clean.value)
        )
    allbad = cj.berrut_decode(jnp.full((M, 3), jnp.nan), jnp.asarray(mask), alpha, beta)
    assert not bool(allbad.ok) and not bool(jnp.any(jnp.isnan(allbad.value)))


def test_decoding_matrix(x64, np_rng):
    beta, alpha = cj.bacc_points(Q64, M64)
    mask = jnp.asarray(_mask(np_rng, M64, 11))
    y = jnp.asarray(np_rng.standard_normal((M64, 3)))
    b = cj.berrut_decoding_matrix(mask, alpha, beta, accum_dtype=jnp.float64)
    r = cj.berrut_decode(y, mask, alpha, beta)
    np.testing.assert_allclose(
        np.asarray(b.value @ y),
        np.asarray(r.value),
        atol=_tol(11, float(r.cond), float(jnp.abs(y).max())),
    )
    assert bool(jnp.all(b.value[:, ~mask] == 0))
    np.testing.assert_allclose(np.asarray(b.value.sum(1)), 1.0, atol=1e-14)
    assert float(b.cond) == float(r.cond) and int(b.num_used) == 11


def test_jit_equals_eager_vmap_equals_loop_no_recompile(np_rng, caplog):
    beta, alpha = cj.bacc_points(K, M)
    y = jnp.asarray(np_rng.standard_normal((M, 3)), jnp.float32)
    masks = [jnp.asarray(_mask(np_rng, M, 12)) for _ in range(5)]
    jitted = jax.jit(lambda yy, mk: cj.berrut_decode(yy, mk, alpha, beta))
    vm = jax.vmap(lambda mk: cj.berrut_decode(y, mk, alpha, beta))(jnp.stack(masks))
    for i, mk in enumerate(masks):
        e = cj.berrut_decode(y, mk, alpha, beta)
        j = jitted(y, mk)
        tol = _tol(12, float(e.cond), float(jnp.abs(y).max()), np.float32)
        for other in (j, jax.tree.map(lambda a, i=i: a[i], vm)):
            np.testing.assert_allclose(
                np.asarray(other.value), np.asarray(e.value), atol=tol
            )
            assert bool(other.ok) == bool(e.ok)
            assert int(other.num_used) == int(e.num_used)
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        caplog.clear()
        for mk in masks[1:]:
            cj.berrut_decode(y, mk, alpha, beta).value.block_until_ready()
        compiles = [r for r in caplog.records if "Compiling" in r.getMessage()]
    assert compiles == []


@pytest.mark.parametrize("dt", [jnp.bfloat16, jnp.float16, jnp.float32])
def test_accumulation_dtype(np_rng, dt):
    beta, alpha = cj.bacc_points(K, M)
    y = jnp.ones((M, 3), dt)
    r = cj.berrut_decode(y, jnp.asarray(_mask(np_rng, M, 9)), alpha, beta)
    assert r.value.dtype == jnp.float32 and r.cond.dtype == jnp.float32
    np.testing.assert_allclose(
        np.asarray(r.value), 1.0, atol=_tol(9, float(r.cond), 1.0, np.float32)
    )
    assert cj.berrut_encode(jnp.ones((K, 3), dt), beta, alpha).dtype == jnp.float32


def test_errors_name_function_and_argument():
    beta, alpha = cj.bacc_points(K, M)
    with pytest.raises(ValueError, match="berrut_encode: beta must have length 5"):
        cj.berrut_encode(jnp.ones((5, 2)), beta, alpha)
    with pytest.raises(ValueError, match="berrut_encode: beta must be distinct"):
        cj.berrut_encode(jnp.ones((K, 2)), beta.at[1].set(beta[0]), alpha)
    with pytest.raises(ValueError, match="berrut_decode: alpha must have length 24"):
        cj.berrut_decode(jnp.ones((M, 2)), jnp.ones(M, bool), alpha[:-1], beta)
    with pytest.raises(ValueError, match=r"berrut_decode: mask must have shape"):
        cj.berrut_decode(jnp.ones((M, 2)), jnp.ones(M - 1, bool), alpha, beta)
    with pytest.raises(TypeError, match="berrut_decode: mask must be boolean"):
        cj.berrut_decode(jnp.ones((M, 2)), jnp.ones(M), alpha, beta)
    with pytest.raises(ValueError, match="berrut_decode: beta must be finite"):
        cj.berrut_decode(
            jnp.ones((M, 2)), jnp.ones(M, bool), alpha, beta.at[0].set(jnp.nan)
        )
    with pytest.raises(TypeError, match="berrut_decode: y must have a floating"):
        cj.berrut_decode(jnp.ones((M, 2), jnp.int32), jnp.ones(M, bool), alpha, beta)
