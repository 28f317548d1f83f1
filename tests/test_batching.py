"""jax.vmap of the one-mask decoders runs the batched kernels (codedjax._batching).

Oracles: the batched decoders themselves (same kernel, so equal up to rounding),
numpy float64 least squares and the one-mask decoder in a Python loop. Tolerances:
the kernels are backward stable, forward error a small multiple of cond * eps32.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj

EPS32 = float(np.finfo(np.float32).eps)
K, M, D, F = 2, 12, 5, 3


def _setup(kind=1, seed=0):
    alpha, beta = cj.chebyshev_points(M, kind=kind), cj.chebyshev_points(K)
    rng = np.random.default_rng(seed)
    t = npcheb.chebvander(np.asarray(alpha, np.float64), D - 1)
    y = jnp.asarray(t @ rng.standard_normal((D, F)), jnp.float32)
    return alpha, beta, y


def _masks(seed, b, n_lo=D, n_hi=M):
    rng = np.random.default_rng(seed)
    out = np.zeros((b, M), bool)
    for i in range(b):
        n = rng.integers(n_lo, n_hi + 1)
        out[i, rng.choice(M, n, replace=False)] = True
    return jnp.asarray(out)


def _reference(alpha, beta, y, masks):
    t = npcheb.chebvander(np.asarray(alpha, np.float64), D - 1)
    tb = npcheb.chebvander(np.asarray(beta, np.float64), D - 1)
    y64 = np.asarray(y, np.float64)
    ref = [tb @ np.linalg.lstsq(t[s], y64[s], rcond=None)[0] for s in np.asarray(masks)]
    return np.stack(ref), np.linalg.cond(t[None] * np.asarray(masks)[:, :, None])


def _decode(alpha, beta):
    return lambda y, m: cj.chebyls_decode(y, m, alpha, beta, num_coeffs=D)


def _per_mask_svd(fn, *args):
    """True when the compiled program runs an SVD per mask (the one-mask kernel)."""
    text = jax.jit(fn).lower(*args).as_text()
    b = args[1].shape[0]
    return any("gesdd" in ln and f"tensor<{b}x" in ln for ln in text.splitlines())


def test_vmap_runs_the_batched_kernel_and_matches_it():
    alpha, beta, y = _setup()
    masks = _masks(1, 64)
    dec = _decode(alpha, beta)
    vdec = jax.vmap(dec, in_axes=(None, 0))
    got = jax.jit(vdec)(y, masks)
    want = cj.chebyls_decode_batched(y, masks, alpha, beta, num_coeffs=D)
    # a plain vmap of the one-mask kernel computes an SVD of R per mask; the
    # batched float32 kernel none (only one of the shared basis)
    assert not _per_mask_svd(vdec, y, masks)
    for field in ("ok", "num_used", "status"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    ref, cond = _reference(alpha, beta, y, masks)
    scale = np.abs(ref).max(axis=(1, 2))
    err = np.abs(np.asarray(got.value) - ref).max(axis=(1, 2)) / scale
    okm = np.asarray(got.ok)
    assert okm.sum() > 50
    assert np.all(err[okm] <= 10 * cond[okm] * EPS32), (err / (cond * EPS32)).max()
    np.testing.assert_allclose(np.asarray(got.cond), np.asarray(want.cond), rtol=1e-2)


def test_nested_vmap_over_payloads_and_masks():
    alpha, beta, y = _setup()
    masks = _masks(2, 6, n_lo=D + 2)
    ys = jnp.stack([y, -2 * y, y + 1])  # [P, M, F]
    dec = _decode(alpha, beta)
    # the loop: the eager one-mask decoder (the program of the tests below)
    loop = np.stack([[np.asarray(dec(p, m).value) for m in masks] for p in ys])

    @jax.jit
    def variants(ys, masks):
        nested = jax.vmap(jax.vmap(dec, in_axes=(None, 0)), in_axes=(0, None))
        only_y = jax.vmap(dec, in_axes=(0, None))(ys, masks[0])  # shared mask
        return nested(ys, masks), only_y

    nested, only_y = variants(ys, masks)
    assert nested.value.shape == (3, 6, K, F)
    tol = 1e3 * EPS32 * np.abs(loop).max()  # masks with cond < 30 here
    np.testing.assert_allclose(np.asarray(nested.value), loop, atol=tol)
    np.testing.assert_allclose(np.asarray(only_y.value), loop[:, 0], atol=tol)
    assert np.asarray(nested.ok).all()


def test_batched_points_fall_back_to_a_plain_vmap():
    alpha, beta, y = _setup()
    mask = _masks(3, 1, n_lo=M - 2)[0]
    alphas = jnp.stack([alpha, alpha * 0.5])
    r = jax.jit(jax.vmap(lambda a: cj.chebyls_decode(y, mask, a, beta, num_coeffs=D)))(
        alphas
    )
    for i in range(2):
        want = cj.chebyls_decode(y, mask, alphas[i], beta, num_coeffs=D)
        tol = 1e3 * EPS32 * float(jnp.abs(want.value).max())
        np.testing.assert_allclose(r.value[i], want.value, atol=tol)
        assert bool(r.ok[i]) == bool(want.ok)


# the derivative checks below, in one compiled program (and one for the decoding
# matrices): grad, jvp and their vmaps, the Hessian and the grad of a jvp
_GRAD_MASKS = _masks(4, 3, n_lo=D + 3)
_JVP_MASKS = _masks(3, 4, n_lo=D + 2)
_HESS_MASK = _masks(1, 5, n_lo=D + 2)[0]


@functools.cache
def _derivatives():
    alpha, beta, y = _setup()
    dec = _decode(alpha, beta)
    dy = jax.random.normal(jax.random.key(5), y.shape)
    masks = jnp.concatenate([_GRAD_MASKS, _JVP_MASKS, _HESS_MASK[None]])

    def f(v):  # sum(value^2) of one payload column: Hessian 2 A^T A
        return jnp.sum(dec(jnp.tile(v[:, None], (1, F)), _HESS_MASK).value[:, 0] ** 2)

    @jax.jit
    def run(y, dy, masks):
        gm, jm = masks[:3], masks[3:7]
        v = y[:, 0]
        return dict(
            grad=jax.grad(lambda yy: dec(yy, gm[0]).value[1, 2])(y),
            vsum=jax.grad(
                lambda yy: jnp.sum(jax.vmap(dec, in_axes=(None, 0))(yy, gm).value)
            )(y),
            jvp=jax.jvp(lambda yy: dec(yy, jm[0]).value, (y,), (dy,))[1],
            vjvp=jax.vmap(
                lambda m: jax.jvp(lambda yy: dec(yy, m).value, (y,), (dy,))[1]
            )(jm),
            hessian=jax.hessian(f)(v),
            grad_jvp=jax.grad(lambda u: jax.jvp(f, (u,), (u,))[1])(v),
        )

    mats = jax.jit(
        jax.vmap(
            lambda m: cj.chebyls_decoding_matrix(m, alpha, beta, num_coeffs=D).value
        )
    )(masks)
    out = jax.tree_util.tree_map(np.asarray, run(y, dy, masks))
    return out, np.asarray(mats), np.asarray(y), np.asarray(dy)


def test_grad_through_decode_and_through_its_vmap_is_the_decoding_matrix():
    # the value is linear in y: d value[k, f] / d y[i, f] = A[k, i]
    out, mats, y, _ = _derivatives()
    mats = mats[:3]  # the decoding matrices of the grad masks
    want = np.zeros((M, F), np.float32)
    want[:, 2] = mats[0][1]
    np.testing.assert_allclose(out["grad"], want, atol=1e-5)
    total = sum(a.sum(0) for a in mats)  # sum over masks and outputs
    np.testing.assert_allclose(out["vsum"], np.repeat(total[:, None], F, 1), atol=1e-4)


def test_jvp_through_decode_and_through_its_vmap_is_the_decoding_matrix():
    # forward mode: the tangent of value is A dy, per mask, also under vmap
    out, mats, _, dy = _derivatives()
    mats = mats[3:7]
    np.testing.assert_allclose(out["jvp"], mats[0] @ dy, atol=1e-5)
    want = np.stack([a @ dy for a in mats])
    np.testing.assert_allclose(out["vjvp"], want, atol=1e-5)


def test_second_order_derivatives_are_the_decoding_matrix():
    # jax.hessian of sum(value^2) is 2 A^T A per payload column; grad of a jvp too
    out, mats, y, _ = _derivatives()
    a = mats[7]
    v = y[:, 0]
    np.testing.assert_allclose(
        out["hessian"], 2 * a.T @ a, atol=1e-4 * np.abs(a).max() ** 2
    )
    np.testing.assert_allclose(out["grad_jvp"], 4 * a.T @ a @ v, rtol=1e-4)


def test_vmap_in_float64_reports_the_exact_cond(x64):
    alpha, beta, y = _setup()
    alpha, beta, y = (v.astype(jnp.float64) for v in (alpha, beta, y))
    masks = _masks(5, 8)
    r = jax.jit(jax.vmap(_decode(alpha, beta), in_axes=(None, 0)))(y, masks)
    u_scale = np.r_[np.sqrt(1 / M), np.full(D - 1, np.sqrt(2 / M))]
    t = npcheb.chebvander(np.asarray(alpha), D - 1) * u_scale
    exact = np.linalg.cond(t[None] * np.asarray(masks)[:, :, None])
    np.testing.assert_allclose(np.asarray(r.cond), exact, rtol=1e-10 * exact.max())


def test_threshold_vmap_matches_the_one_mask_decoder_and_float64():
    alpha, beta, y = _setup()
    masks = _masks(6, 24, n_lo=D)
    rng = np.random.default_rng(7)
    orders = jnp.asarray(np.argsort(rng.random((24, M)), axis=1), jnp.int32)
    orders = orders.at[3, 1].set(orders[3, 0])  # a repeated worker: BAD_POINTS

    def dec(yy, m, o):
        return cj.threshold_decode(yy, m, alpha, beta, num_coeffs=D, order=o)

    vdec = jax.vmap(dec, in_axes=(None, 0, 0))
    assert not _per_mask_svd(vdec, y, masks, orders)
    got = jax.jit(vdec)(y, masks, orders)
    one = jax.jit(dec)
    single = [one(y, masks[i], orders[i]) for i in range(24)]
    for field in ("ok", "num_used", "status"):
        np.testing.assert_array_equal(
            getattr(got, field), np.stack([getattr(r, field) for r in single])
        )
    assert int(got.status[3]) == int(cj.Status.BAD_POINTS)
    # float64 oracle: the square system of the D chosen rows (numpy solve)
    t = npcheb.chebvander(np.asarray(alpha, np.float64), D - 1)
    tb = npcheb.chebvander(np.asarray(beta, np.float64), D - 1)
    y64 = np.asarray(y, np.float64)
    u_scale = np.r_[np.sqrt(1 / M), np.full(D - 1, np.sqrt(2 / M))]
    okm = np.asarray(got.ok)
    assert okm.sum() > 15
    for i in np.flatnonzero(okm):
        sel = np.asarray(masks[i]) & np.isfinite(y64).all(1)
        order = np.asarray(orders[i])
        rows = [w for w in order if sel[w]][:D]
        ref = tb @ np.linalg.solve(t[rows], y64[rows])
        cond = np.linalg.cond(t[rows] * u_scale)
        err = np.abs(np.asarray(got.value[i]) - ref).max() / np.abs(ref).max()
        assert err <= 10 * cond * EPS32, (i, err / (cond * EPS32))
        # cond: the certified float32 estimate, within D^(+-1/32) (+ u kappa)
        ratio = float(got.cond[i]) / cond
        assert D ** (-1 / 32) * (1 - 1e-3) <= ratio <= D ** (1 / 32) * (1 + 1e-3)


def test_argument_checks_are_memoised_only_while_safe():
    alpha, beta, y = _setup()
    mask = _masks(8, 1)[0]
    r = cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=D)
    again = cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=D)  # memo hit
    np.testing.assert_array_equal(r.value, again.value)
    # a memo hit never skips a check the new arguments would fail
    with pytest.raises(ValueError, match="num_coeffs"):
        cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=M + 1)
    with pytest.raises(ValueError, match="alpha"):
        cj.chebyls_decode(y[:-1], mask[:-1], alpha, beta, num_coeffs=D)
    with pytest.raises(TypeError):
        cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=float(D))
    # new arrays with bad values (even at a reused id) are checked
    for _ in range(3):
        dup = jnp.asarray(np.r_[np.asarray(alpha)[:-1], np.asarray(alpha)[0]])
        with pytest.raises(ValueError, match="distinct"):
            cj.chebyls_decode(y, mask, dup, beta, num_coeffs=D)
        del dup
    # numpy points (mutable) are never memoised
    a_np = np.asarray(alpha).copy()
    cj.chebyls_decode(y, mask, a_np, beta, num_coeffs=D)
    a_np[1] = a_np[0]
    with pytest.raises(ValueError, match="distinct"):
        cj.chebyls_decode(y, mask, a_np, beta, num_coeffs=D)
