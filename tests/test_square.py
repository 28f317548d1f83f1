"""The square-system kernel of the threshold decoder (interpolation through D points).

float32: the first (modified Lagrange) barycentric form and a certified cond
estimate; float64: LU with partial pivoting and the exact cond. Oracle: numpy's
float64 solve of the same D x D systems and numpy's cond. Tolerances: 10 cond eps
for the values (the kernel is backward stable in y), the certified bracket
D^(+-1/32) for cond.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
from codedjax import _lagrange_square

EPS32 = float(np.finfo(np.float32).eps)
K, M, D = 8, 40, 22


def _equilibrated(x, d):
    m = len(x)
    scale = np.r_[np.sqrt(1 / m), np.full(d - 1, np.sqrt(2 / m))]
    return npcheb.chebvander(x, d - 1) * scale


@pytest.mark.parametrize("kind", [1, 2])
def test_square_kernel_float32_against_float64_and_every_ill_conditioned_mask(kind):
    # the barycentric threshold kernel: values against numpy's float64 solve of the
    # same D x D systems, the certified cond against numpy's, and every mask with
    # cond >= 1/eps flagged (first-kind points: data points equal to worker points)
    rng = np.random.default_rng(23)
    alpha, beta = cj.chebyshev_points(M, kind=kind), cj.chebyshev_points(K)
    masks = np.zeros((40, M), bool)
    for i in range(32):  # random D-subsets (cond from ~10 to ~1e9)
        masks[i, rng.permutation(M)[:D]] = True
    masks[32, :D] = True  # D neighbours at one end: cond far beyond 1/eps
    masks[33, M - D :] = True
    masks[34, : D // 2] = masks[34, M - D + D // 2 :] = True  # both ends
    masks[35, ::2][:D] = True  # every other worker
    masks[36, : D - 1] = True  # D - 1 responders: not decodable
    for i in range(37, 40):  # near the middle, a gap at one end
        masks[i, rng.permutation(np.arange(i - 30, M))[:D]] = True
    kernel = jax.jit(_lagrange_square.square_decoding_matrices, static_argnums=(3, 4))
    a, ok, cond, n = kernel(jnp.asarray(masks), alpha, beta, D, jnp.float32)
    a, ok, cond = np.asarray(a, np.float64), np.asarray(ok), np.asarray(cond)
    u = _equilibrated(np.asarray(alpha, np.float64), D)
    t = npcheb.chebvander(np.asarray(alpha, np.float64), D - 1)
    tb = npcheb.chebvander(np.asarray(beta, np.float64), D - 1)
    y = np.asarray(rng.standard_normal((M, 3)), np.float32).astype(np.float64)
    exact = np.full(40, np.inf)
    for i in np.flatnonzero(masks.sum(1) == D):
        exact[i] = np.linalg.cond(u[masks[i]])
    assert np.asarray(n).tolist() == masks.sum(1).tolist()
    clear = (exact * EPS32 < 0.5) | (exact * EPS32 > 2)
    np.testing.assert_array_equal(ok[clear], (exact * EPS32 < 1)[clear])
    assert (~ok[32]) & (~ok[33]) & (~ok[36]) and ok.sum() >= 20
    assert np.isinf(cond[36]) and np.all(a[36] == 0)
    assert np.all(cond[exact * EPS32 >= 1] * EPS32 >= 1)  # flagged, not overflowed
    for i in np.flatnonzero(ok):
        s = masks[i]
        assert np.all(a[i][:, ~s] == 0)
        ref = tb @ np.linalg.solve(t[s], y[s])
        err = np.abs(a[i] @ y - ref).max() / np.abs(ref).max()
        assert err <= 10 * exact[i] * EPS32, (i, err / (exact[i] * EPS32))
        if exact[i] * EPS32 <= 1e-2:  # certified: within D^(+-1/32) up to rounding
            ratio = cond[i] / exact[i]
            assert D ** (-1 / 32) * (1 - 1e-3) <= ratio <= D ** (1 / 32) * (1 + 1e-3)
