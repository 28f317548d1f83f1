"""The one-mask least-squares decode: the batched kernel's cheap route for one mask.

float32: corrected semi-normal equations (Cholesky of T_S^T T_S, two refinement steps
through the rows) with a certified cond estimate; Householder QR for a mask whose
upper bound on cond breaks cond^2 eps <= 1/32 (cond <= 512); ``exact_cond=True``:
QR and the exact cond. Oracles: numpy float64 (lstsq, cond). Tolerances: a
backward-stable solve errs by about its backward error in the rows, D u_32, times
kappa; the tests allow twice that, D eps32 kappa (relative, in the 2-norm).

One small code (K = 4, M = 16, degree 2: D = 7) and one payload shape, so that each
program compiles once for the file.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
from codedjax import _basis_lsq, _batched_linalg, _chebyshev
from codedjax import _circle_kernels as circ
from codedjax import _random_kernels as rc

EPS32 = float(np.finfo(np.float32).eps)
K, M, DEG, F = 4, 16, 2, 3
D = DEG * (K - 1) + 1
ALPHA, BETA = cj.chebyshev_points(M), cj.chebyshev_points(K)
T64 = npcheb.chebvander(np.asarray(ALPHA, np.float64), D - 1)
TB64 = npcheb.chebvander(np.asarray(BETA, np.float64), D - 1)
SCALE = np.where(np.arange(D) == 0, np.sqrt(1.0 / M), np.sqrt(2.0 / M))
# the semi-normal route holds up to this cond (cond^2 eps <= 1/32: 512 in float32)
LIMIT = float(np.sqrt(_batched_linalg.NE_COND_SQ_EPS / EPS32))


def _mask(rows):
    m = np.zeros(M, bool)
    m[list(rows)] = True
    return m


# N = D, D + 2 and M spread responders (cond 1.9, 1.3, 1), responders in one block
# (cond 1.5e3 to 9e3: QR), a block and one far responder (cond 911: QR, just past
# the limit) and a block with one or two responders at the far end (cond 461 and
# 68: the semi-normal route, the first near its edge)
SPREAD = [_mask(np.linspace(0, M - 1, n).round().astype(int)) for n in (D, D + 2, M)]
BLOCK = [_mask(range(s, s + n)) for s, n in ((0, 9), (2, 8), (0, 10))]
BLOCK.append(_mask(list(range(8)) + [12]))
EDGE = [_mask(list(range(8)) + [M - 1]), _mask(list(range(7)) + [M - 2, M - 1])]


def _kappa(mask):
    """2-norm condition number of the equilibrated responders' rows (float64)."""
    return float(np.linalg.cond(T64[mask] * SCALE))


def _reference(y, mask):
    c, *_ = np.linalg.lstsq(T64[mask], np.asarray(y, np.float64)[mask], rcond=None)
    return TB64 @ c


@pytest.fixture(scope="module")
def payload():
    """Answers of a degree D - 1 polynomial (consistent), in float32."""
    coef = np.random.default_rng(3).standard_normal((D, F))
    return jnp.asarray(T64 @ coef, jnp.float32)


_decode = jax.jit(
    lambda y, m, exact: cj.chebyls_decode(
        y, m, ALPHA, BETA, num_coeffs=D, exact_cond=exact
    ),
    static_argnums=2,
)


@jax.jit
def _route(mask):
    """Whether the semi-normal route holds for the mask (the tier decision)."""
    u, tb = _chebyshev.equilibrated_vandermondes(ALPHA, BETA, D, jnp.float32)
    return _basis_lsq._seminormal(mask, u, tb, jnp.float32, None)[1]


def _check_accurate(r, y, mask):
    kappa = _kappa(mask)
    ref = _reference(y, mask)
    err = np.linalg.norm(np.asarray(r.value) - ref) / np.linalg.norm(ref)
    assert bool(r.ok)
    assert err <= D * EPS32 * kappa, (err / (EPS32 * kappa), kappa)
    return kappa


def test_cheap_route_against_float64_lstsq(payload):
    for mask in SPREAD + EDGE:
        assert bool(_route(jnp.asarray(mask)))  # cond <= 512: semi-normal
        r = _decode(payload, jnp.asarray(mask), False)
        kappa = _check_accurate(r, payload, mask)
        # the certified bracket on cond (rounding of the computed inverse aside:
        # relative kappa^2 eps, at most 1/32 here)
        lo, hi = D ** (-1 / 64), D ** (1 / 64)
        ratio = float(r.cond) / kappa
        assert lo * (1 - kappa**2 * EPS32) <= ratio <= hi * (1 + kappa**2 * EPS32)
    # the edge mask: close to the limit, still on the semi-normal route
    assert LIMIT / 2 < _kappa(EDGE[0]) < LIMIT


def test_qr_fallback_on_ill_conditioned_masks(payload):
    for mask in BLOCK:
        kappa = _kappa(mask)
        assert kappa > 1.5 * LIMIT
        assert not bool(_route(jnp.asarray(mask)))  # the QR tier
        r = _decode(payload, jnp.asarray(mask), False)
        _check_accurate(r, payload, mask)
        # the QR route's estimate: within D^(+-1/64) of kappa (the rounding of a
        # factorisation of relative kappa eps aside)
        slack = 4 * D * EPS32 * kappa
        assert D ** (-1 / 64) - slack <= float(r.cond) / kappa <= D ** (1 / 64) + slack
        # and the same factorisation as the exact-cond route: the same value
        e = _decode(payload, jnp.asarray(mask), True)
        np.testing.assert_allclose(
            np.asarray(r.value),
            np.asarray(e.value),
            atol=D * EPS32 * kappa * float(np.abs(np.asarray(e.value)).max()),
        )


def test_exact_cond_on_request(payload):
    for mask in SPREAD + BLOCK:
        kappa = _kappa(mask)
        r = _decode(payload, jnp.asarray(mask), True)
        _check_accurate(r, payload, mask)
        # an SVD of R: exact up to the rounding of the factorisation
        assert float(r.cond) == pytest.approx(kappa, rel=4 * D * EPS32 * kappa)
    with pytest.raises(TypeError, match="chebyls_decode: exact_cond must be"):
        cj.chebyls_decode(payload, SPREAD[0], ALPHA, BETA, num_coeffs=D, exact_cond=1)


def test_exact_cond_of_the_dense_decoders():
    # the circle and random codes take the same route and the same option
    mask = jnp.asarray(np.arange(6) != 2)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 2)), jnp.float32)
    enc = circ.circle_encode(x, num_workers=6, pack=True)
    v = np.exp(2j * np.pi * np.outer(np.arange(6), np.arange(2)) / 6)[np.asarray(mask)]
    kappa = float(np.linalg.cond(v))
    for exact in (False, True):
        r = circ.circle_decode(
            enc, mask, num_inputs=4, degree=1, pack=True, exact_cond=exact
        )
        assert bool(r.ok)
        np.testing.assert_allclose(
            np.asarray(r.value), np.asarray(x), atol=4 * EPS32 * kappa * 4
        )
        rel = 4 * 2 * EPS32 * kappa if exact else (2 * 2) ** (1 / 64) - 1
        assert float(r.cond) == pytest.approx(kappa, rel=rel)
    g = rc.gaussian_encoding_matrix(jax.random.key(1), num_inputs=3, num_workers=8)
    xr = jnp.asarray(np.random.default_rng(1).standard_normal((3, 2)), jnp.float32)
    sel = jnp.asarray(np.arange(8) > 1)
    kappa = float(np.linalg.cond(np.asarray(g, np.float64)[np.asarray(sel)]))
    r = rc.random_decode(rc.random_encode(xr, g), sel, g, exact_cond=True)
    assert float(r.cond) == pytest.approx(kappa, rel=4 * 3 * EPS32 * kappa)
    with pytest.raises(TypeError, match="random_decode: exact_cond must be"):
        rc.random_decode(rc.random_encode(xr, g), sel, g, exact_cond="yes")


def test_vmap_and_batched_run_one_kernel(payload):
    """jax.vmap(chebyls_decode) and chebyls_decode_batched run the same batched
    kernel (the first through its batching rule): the same results."""
    masks = jnp.asarray(np.stack(SPREAD + BLOCK + EDGE))
    bat = cj.chebyls_decode_batched(payload, masks, ALPHA, BETA, num_coeffs=D)
    vm = jax.vmap(lambda m: cj.chebyls_decode(payload, m, ALPHA, BETA, num_coeffs=D))(
        masks
    )
    for a, b in zip(bat, vm, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # and its masks decode as one mask does, to the solves' rounding
    for i, mask in enumerate(SPREAD + BLOCK + EDGE):
        kappa = _kappa(mask)
        ref = _reference(payload, mask)
        err = np.linalg.norm(np.asarray(bat.value[i]) - ref) / np.linalg.norm(ref)
        assert err <= D * EPS32 * kappa
