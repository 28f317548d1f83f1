"""Chebyshev points and the Chebyshev-Vandermonde matrix against numpy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj


@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_first_kind_points_match_numpy(x64, n):
    got = np.asarray(cj.chebyshev_points(n, kind=1))
    ref = npcheb.chebpts1(n)[::-1]  # numpy: increasing; codedjax: decreasing
    np.testing.assert_allclose(got, ref, rtol=0, atol=4 * np.finfo(float).eps)
    np.testing.assert_array_equal(got, -got[::-1])  # exactly symmetric


@pytest.mark.parametrize("n", [2, 3, 40])
def test_second_kind_points_match_numpy(x64, n):
    got = np.asarray(cj.chebyshev_points(n, kind=2))
    np.testing.assert_allclose(got, npcheb.chebpts2(n)[::-1], atol=4e-16)
    assert got[0] == 1.0 and got[-1] == -1.0


def test_points_dtype_and_errors():
    assert cj.chebyshev_points(4, dtype=jnp.bfloat16).dtype == jnp.bfloat16
    with pytest.raises(ValueError, match="chebyshev_points: kind"):
        cj.chebyshev_points(4, kind=3)
    with pytest.raises(ValueError, match="chebyshev_points: n must be >= 1"):
        cj.chebyshev_points(0)
    with pytest.raises(ValueError, match="kind=2 needs n >= 2"):
        cj.chebyshev_points(1, kind=2)
    with pytest.raises(TypeError, match="chebyshev_points: n must be a Python int"):
        cj.chebyshev_points(4.0)


@pytest.mark.parametrize("d", [1, 2, 5, 22, 40])
def test_vandermonde_matches_chebvander(x64, np_rng, d):
    x = np_rng.uniform(-1, 1, size=(3, 17))
    got = np.asarray(cj.chebyshev_vandermonde(jnp.asarray(x), num_coeffs=d))
    ref = npcheb.chebvander(x, d - 1)
    # the recurrence is stable on [-1, 1]: entries are O(1) with O(j u) error
    np.testing.assert_allclose(got, ref, rtol=0, atol=4 * d * np.finfo(float).eps)


def test_vandermonde_is_cos_of_multiple_angle(x64):
    # known truth: T_j(cos t) = cos(j t)
    t = jnp.linspace(0.0, np.pi, 33)
    v = cj.chebyshev_vandermonde(jnp.cos(t), num_coeffs=12)
    ref = np.cos(np.outer(np.asarray(t), np.arange(12)))
    np.testing.assert_allclose(np.asarray(v), ref, atol=1e-13)


@pytest.mark.parametrize("m,d", [(40, 13), (40, 40), (100, 30)])
def test_first_kind_gram_is_diagonal(x64, m, d):
    t = np.asarray(cj.chebyshev_vandermonde(cj.chebyshev_points(m), num_coeffs=d))
    gram = t.T @ t
    expect = np.diag(np.r_[m, np.full(d - 1, m / 2)])
    np.testing.assert_allclose(gram, expect, atol=m * 1e-14)
    assert np.linalg.cond(t) == pytest.approx(np.sqrt(2), rel=1e-12)


def test_vandermonde_errors():
    with pytest.raises(
        TypeError, match="chebyshev_vandermonde: x must have a floating"
    ):
        cj.chebyshev_vandermonde(jnp.arange(3), num_coeffs=2)
    with pytest.raises(ValueError, match="num_coeffs must be >= 1"):
        cj.chebyshev_vandermonde(jnp.zeros(3), num_coeffs=0)


@pytest.mark.parametrize("m,d", [(7, 1), (7, 5), (40, 22)])
def test_orthonormal_column_scale_makes_u_orthonormal(x64, m, d):
    # U = T diag(scale) has U^T U = I at first-kind points (float64 numpy T); a
    # wrong scale_0 (e.g. sqrt(0/M) or sqrt(2/M)) breaks the first diagonal entry
    from codedjax import _chebyshev  # a private kernel: tests may import it

    s = _chebyshev.orthonormal_column_scale(m, d, jnp.float64)
    assert s.shape == (d,) and s.dtype == jnp.float64
    u = npcheb.chebvander(npcheb.chebpts1(m), d - 1) * np.asarray(s)
    np.testing.assert_allclose(u.T @ u, np.eye(d), atol=8 * m * np.finfo(float).eps)
    assert _chebyshev.orthonormal_column_scale(m, d, jnp.float32).dtype == jnp.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equilibrated_vandermondes_are_the_two_scaled_matrices(x64, np_rng, dtype):
    """One recurrence over both point sets gives, jitted, the bits of the two
    jitted Vandermonde matrices times the column scale, within O(j u) of numpy."""
    from codedjax import _chebyshev  # a private kernel: tests may import it

    x = np_rng.uniform(-1, 1, size=(40 + 8,)).astype(dtype)
    vander = jax.jit(cj.chebyshev_vandermonde, static_argnums=1)
    both = jax.jit(_chebyshev.equilibrated_vandermondes, static_argnums=(2, 3))
    for d in (1, 5, 22):
        s = np.asarray(_chebyshev.orthonormal_column_scale(40, d, dtype))
        u, tb = both(jnp.asarray(x[:40]), jnp.asarray(x[40:]), d, dtype)
        scaled = jax.jit(lambda v, s: v * s[None, :])
        for got, pts in ((u, x[:40]), (tb, x[40:])):
            ref = np.asarray(scaled(vander(jnp.asarray(pts), d), s))
            np.testing.assert_array_equal(np.asarray(got), ref, err_msg=f"D = {d}")
            np.testing.assert_allclose(
                np.asarray(got, np.float64),
                npcheb.chebvander(pts.astype(np.float64), d - 1) * s,
                rtol=0,
                atol=4 * d * np.finfo(dtype).eps,
            )
