"""NeRCC smoothing-spline encoder/decoder and their joint tuning against scipy splines.

Oracle: scipy.interpolate.make_smoothing_spline (same objective: unnormalised sum of
squares + lam * int g''^2; it needs >= 5 knots) and CubicSpline(bc_type="natural")
in float64; inside the knot range both must agree to 1e-10 relative (the project's
figure) for lam in [0, 0.1]. For larger lam on clustered knots scipy's banded solve
itself loses accuracy (2e-10 measured at lam ~ 2, min gap 7e-4, against exact
rational arithmetic), so there the oracle is the Reinsch system solved exactly in
rational arithmetic (fractions), to the O(M^2 u max|y|) backward error of the
Householder QR behind the smoother. Known truths: straight lines are reproduced for
every lam, lam = 0 interpolates, lam -> infinity tends to the least-squares line.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import CubicSpline, make_smoothing_spline

import codedjax as cj

RTOL = 1e-10  # the project's bar for float64 agreement with scipy


def _first_taken(alpha, y, mask):
    idx = np.flatnonzero(mask)
    _, first = np.unique(alpha[idx], return_index=True)
    keep = idx[first]
    o = np.argsort(alpha[keep])
    return alpha[keep][o], y[keep][o]


def _problems(np_rng, trials=30, m=12, q=12):
    alpha = np_rng.uniform(-1, 1, (trials, m))
    alpha[::5, :3] = alpha[::5, 3:6]  # repeated nodes: merged, first taken
    y = np_rng.standard_normal((trials, m, 2))
    mask = np_rng.random((trials, m)) < np_rng.uniform(0.45, 1.0, (trials, 1))
    lam = np.where(
        np.arange(trials) % 3 == 0, 0.0, 10.0 ** np_rng.uniform(-7, -1, trials)
    )
    z = np.empty((trials, q))
    for i in range(trials):
        s = alpha[i][mask[i]]
        z[i] = np_rng.uniform(s.min(), s.max(), q)
        z[i, :2] = s[:2]  # at nodes too
    return alpha, y, mask, lam, z


def _vdecode(y, mask, alpha, z, lam):
    f = jax.vmap(lambda a, b, c, d, e: cj.nercc_decode(a, b, c, d, smoothing=e))
    return f(*map(jnp.asarray, (y, mask, alpha, z, lam)))


def test_decode_matches_make_smoothing_spline(x64, np_rng):
    alpha, y, mask, lam, z = _problems(np_rng)
    r = _vdecode(y, mask, alpha, z, lam)
    assert r.value.dtype == jnp.float64
    checked = 0
    for i in range(alpha.shape[0]):
        t, v = _first_taken(alpha[i], y[i], mask[i])
        assert int(r.num_used[i]) == t.size
        if t.size < 5:  # scipy's lower limit; small cases are tested below
            continue
        ref = make_smoothing_spline(t, v, lam=float(lam[i]))(z[i])
        np.testing.assert_allclose(
            np.asarray(r.value[i]), ref, rtol=0, atol=RTOL * np.abs(ref).max()
        )
        assert bool(r.ok[i])
        checked += 1
    assert checked >= 15
    # eager equals vmapped (no jit difference in float64 beyond rounding)
    for i in (1, 2):
        e = cj.nercc_decode(
            *map(jnp.asarray, (y[i], mask[i], alpha[i], z[i])), smoothing=float(lam[i])
        )
        np.testing.assert_allclose(
            np.asarray(e.value), np.asarray(r.value[i]), rtol=1e-13, atol=1e-13
        )


def _exact_spline(t, y, lam, z):
    """The Reinsch system solved in exact rational arithmetic, evaluated at z."""
    n = len(t)
    t = [Fraction(float(v)) for v in t]
    y = [Fraction(float(v)) for v in y]
    lam = Fraction(float(lam))
    h = [t[i + 1] - t[i] for i in range(n - 1)]
    q = [[Fraction(0)] * (n - 2) for _ in range(n)]
    r = [[Fraction(0)] * (n - 2) for _ in range(n - 2)]
    for j in range(1, n - 1):
        q[j - 1][j - 1], q[j + 1][j - 1] = 1 / h[j - 1], 1 / h[j]
        q[j][j - 1] = -1 / h[j - 1] - 1 / h[j]
        r[j - 1][j - 1] = (h[j - 1] + h[j]) / 3
        if j < n - 2:
            r[j - 1][j] = r[j][j - 1] = h[j] / 6
    a = [
        [r[i][k] + lam * sum(q[p][i] * q[p][k] for p in range(n)) for k in range(n - 2)]
        + [sum(q[p][i] * y[p] for p in range(n))]
        for i in range(n - 2)
    ]
    for c in range(n - 2):  # Gauss-Jordan (SPD: no pivoting needed)
        for rr in range(n - 2):
            if rr != c and a[rr][c] != 0:
                f = a[rr][c] / a[c][c]
                a[rr] = [u - f * v for u, v in zip(a[rr], a[c], strict=True)]
    gam = [Fraction(0)] + [a[i][n - 2] / a[i][i] for i in range(n - 2)] + [Fraction(0)]
    g = [y[i] - lam * sum(q[i][k] * gam[k + 1] for k in range(n - 2)) for i in range(n)]
    out = []
    for zz in z:
        zz = Fraction(float(zz))
        i = max(0, min(n - 2, sum(1 for v in t if v <= zz) - 1))
        aa, bb = zz - t[i], t[i + 1] - zz
        out.append(
            float(
                (aa * g[i + 1] + bb * g[i]) / h[i]
                - aa
                * bb
                / 6
                * ((1 + aa / h[i]) * gam[i + 1] + (1 + bb / h[i]) * gam[i])
            )
        )
    return np.array(out)


def test_decode_matches_exact_arithmetic_for_large_lam_and_clustered_knots(x64, np_rng):
    m = 12
    for lam in (0.0, 2.3, 50.0):
        alpha = np_rng.uniform(-1, 1, m)
        alpha[1] = alpha[0] + 3e-4  # a clustered pair
        y = np_rng.standard_normal(m)
        mask = np.ones(m, bool)
        mask[[4, 7]] = False
        t, v = _first_taken(alpha, y, mask)
        z = np.linspace(t[0], t[-1], m)
        ref = _exact_spline(t, v, lam, z)
        tol = 4 * m**2 * cj.unit_roundoff(jnp.float64) * np.abs(y).max()
        np.testing.assert_allclose(
            np.asarray(_decode12(y, mask, alpha, z, lam)), ref, rtol=0, atol=tol
        )


def _decode12(y, mask, alpha, z, lam):
    """Every small-case check runs at M = 12 workers, 12 points (one compilation)."""
    return cj.nercc_decode(
        jnp.asarray(y).reshape(12, 1),
        jnp.asarray(mask),
        jnp.asarray(alpha),
        jnp.asarray(z),
        smoothing=lam,
    ).value[:, 0]


def test_lam_zero_is_the_natural_interpolating_spline(x64, np_rng):
    m = 12
    for n in (3, 4, 9):
        alpha = np.sort(np_rng.uniform(-1, 1, m))
        y = np_rng.standard_normal(m)
        mask = np.zeros(m, bool)
        mask[np_rng.choice(m, n, replace=False)] = True
        t = alpha[mask]
        z = np.linspace(t[0], t[-1], m)
        ref = CubicSpline(t, y[mask], bc_type="natural")(z)
        np.testing.assert_allclose(
            np.asarray(_decode12(y, mask, alpha, z, 0.0)),
            ref,
            rtol=0,
            atol=RTOL * np.abs(ref).max(),
        )
        # interpolation at the responding nodes
        at_nodes = np.asarray(_decode12(y, mask, alpha, alpha, 0.0))
        np.testing.assert_allclose(at_nodes[mask], y[mask], rtol=0, atol=1e-14)


def test_two_responders_give_the_line_for_every_lam(x64, np_rng):
    alpha = np.sort(np_rng.uniform(-1, 1, 12))
    y = np_rng.standard_normal(12)
    mask = np.zeros(12, bool)
    mask[[3, 8]] = True
    z = np.linspace(-1.5, 1.5, 12)
    slope = (y[8] - y[3]) / (alpha[8] - alpha[3])
    line = y[3] + (z - alpha[3]) * slope
    for lam in (0.0, 1e-3, 1e3):
        np.testing.assert_allclose(
            np.asarray(_decode12(y, mask, alpha, z, lam)),
            line,
            rtol=0,
            atol=1e-13 * np.abs(line).max(),
        )


def test_known_truths_lines_and_large_lam(x64, np_rng):
    m = 12
    alpha = np.sort(np_rng.uniform(-1, 1, m))
    mask = np_rng.random(m) < 0.7
    z = np.linspace(-1.3, 1.3, m)
    line = 0.3 - 2.0 * alpha
    for lam in (0.0, 1e-4, 1.0, 1e4):
        np.testing.assert_allclose(
            np.asarray(_decode12(line, mask, alpha, z, lam)),
            0.3 - 2.0 * z,
            rtol=0,
            atol=1e-13,
        )
    # lam -> infinity: the least-squares line through the responders, O(1/lam) away
    y = np_rng.standard_normal(m)
    coef = np.polyfit(alpha[mask], y[mask], 1)
    np.testing.assert_allclose(
        np.asarray(_decode12(y, mask, alpha, z, 1e8)), np.polyval(coef, z), atol=1e-6
    )


def test_linear_continuation_outside_the_knots(x64, np_rng):
    m = 12
    alpha = np.sort(np_rng.uniform(-0.8, 0.8, m))
    y = np_rng.standard_normal(m)
    mask = np.ones(m, bool)
    mask[[0, 5]] = False
    t = alpha[mask]
    z = np.concatenate(
        [np.linspace(-1.0, t[0] - 0.01, 6), np.linspace(t[-1] + 0.01, 1.0, 6)]
    )
    ends = np.where(z < t[0], t[0], t[-1])
    for lam in (0.0, 1e-3):
        spl = make_smoothing_spline(t, y[mask], lam=lam)
        ref = spl(ends) + (z - ends) * spl.derivative()(ends)
        np.testing.assert_allclose(
            np.asarray(_decode12(y, mask, alpha, z, lam)),
            ref,
            rtol=0,
            atol=RTOL * np.abs(y).max() * 10,
        )


def test_encode_matches_make_smoothing_spline(x64, np_rng):
    k, m = 8, 30
    beta, alpha = cj.bacc_points(k, m)
    x = np_rng.standard_normal((k, 3, 2))
    b = np.asarray(beta)
    o = np.argsort(b)
    a = np.asarray(alpha)
    inside = (a >= b.min()) & (a <= b.max())
    for lam in (0.0, 1e-3, 0.5):
        u = cj.nercc_encode(jnp.asarray(x), beta, alpha, smoothing=lam)
        assert u.shape == (m, 3, 2) and u.dtype == jnp.float64
        ref = make_smoothing_spline(b[o], x[o], lam=lam)(a[inside])
        np.testing.assert_allclose(
            np.asarray(u)[inside], ref, rtol=0, atol=RTOL * np.abs(ref).max()
        )
        e = cj.nercc_encoding_matrix(
            beta, alpha, smoothing=lam, accum_dtype=jnp.float64
        )
        np.testing.assert_allclose(
            np.asarray(u),
            np.einsum("mk,kab->mab", np.asarray(e), x),
            rtol=0,
            atol=1e-13,
        )
    # lam = 0 at the data points returns the inputs
    back = cj.nercc_encode(jnp.asarray(x), beta, beta, smoothing=0.0)
    np.testing.assert_allclose(np.asarray(back), x, rtol=0, atol=1e-14)


def test_too_few_responders_and_bad_input(np_rng):
    beta, alpha = cj.bacc_points(4, 10)
    y = jnp.asarray(np_rng.standard_normal((10, 2)), jnp.float32)
    one = jnp.zeros(10, bool).at[3].set(True)
    with pytest.raises(ValueError, match="nercc_decode: mask must select at least 2"):
        cj.nercc_decode(y, one, alpha, beta)
    dup_alpha = alpha.at[4].set(alpha[3])
    with pytest.raises(ValueError, match="got 1"):  # two responders, one node
        cj.nercc_decode(y, one.at[4].set(True), dup_alpha, beta)
    f = jax.jit(lambda mk, lam: cj.nercc_decode(y, mk, alpha, beta, smoothing=lam))
    for mk, lam in ((one, 0.0), (jnp.zeros(10, bool), 0.0), (jnp.ones(10, bool), -1.0)):
        r = f(mk, lam)
        assert not bool(r.ok) and bool(jnp.all(r.value == 0))
        assert not bool(jnp.any(jnp.isnan(r.value))) and float(r.cond) == np.inf
    j = f(jnp.ones(10, bool), 0.5)  # jit (traced mask and smoothing) equals eager
    e = cj.nercc_decode(y, jnp.ones(10, bool), alpha, beta, smoothing=0.5)
    assert bool(j.ok) and bool(e.ok)
    np.testing.assert_allclose(
        np.asarray(j.value),
        np.asarray(e.value),
        rtol=0,
        atol=64
        * cj.unit_roundoff(jnp.float32)
        * float(e.cond)
        * float(jnp.abs(y).max()),
    )
    with pytest.raises(ValueError, match="nercc_decode: smoothing must be a finite"):
        cj.nercc_decode(y, jnp.ones(10, bool), alpha, beta, smoothing=-1e-3)
    with pytest.raises(ValueError, match="nercc_encode: smoothing must be a finite"):
        cj.nercc_encode(jnp.ones((4, 2)), beta, alpha, smoothing=float("nan"))
    with pytest.raises(ValueError, match="nercc_decode: alpha must have length 10"):
        cj.nercc_decode(y, jnp.ones(10, bool), alpha[:-1], beta)
    with pytest.raises(ValueError, match="nercc_encode: beta must have length 3"):
        cj.nercc_encode(jnp.ones((3, 2)), beta, alpha)
    with pytest.raises(ValueError, match="nercc_encode: x must hold at least K = 2"):
        cj.nercc_encode(jnp.ones((1, 2)), beta[:1], alpha)
    with pytest.raises(ValueError, match="nercc_decode: smoothing must be a scalar"):
        cj.nercc_decode(y, jnp.ones(10, bool), alpha, beta, smoothing=jnp.ones(2))


def test_dtypes_and_faulty_workers(np_rng):
    beta, alpha = cj.bacc_points(4, 10)
    y = jnp.asarray(np_rng.standard_normal((10, 3)), jnp.float32)
    mask = jnp.ones(10, bool)
    for dt in (jnp.bfloat16, jnp.float32):
        r = cj.nercc_decode(y.astype(dt), mask, alpha, beta, smoothing=1e-3)
        assert r.value.dtype == jnp.float32 and r.cond.dtype == jnp.float32
    clean = cj.nercc_decode(y, mask.at[5].set(False), alpha, beta, smoothing=1e-3)
    bad = cj.nercc_decode(y.at[5, 0].set(jnp.inf), mask, alpha, beta, smoothing=1e-3)
    assert int(bad.num_used) == 9
    np.testing.assert_array_equal(np.asarray(bad.value), np.asarray(clean.value))


# ----------------------------------------------------------------------------------
# joint tuning


def _mlp(np_rng, din=3, dh=16, dout=2):
    w1 = jnp.asarray(np_rng.standard_normal((din, dh)) / np.sqrt(din), jnp.float32)
    w2 = jnp.asarray(np_rng.standard_normal((dh, dout)) / np.sqrt(dh), jnp.float32)
    return lambda x: jnp.tanh(x @ w1) @ w2


def test_tune_nercc_grid_is_the_mse_of_public_encode_decode(key, np_rng):
    fn = _mlp(np_rng)
    calls = []

    def counted(x):
        calls.append(x.shape)
        return fn(x)

    k, m, n, v = 4, 10, 7, 6
    x = jnp.asarray(np_rng.standard_normal((v, k, 3)), jnp.float32)
    mkey = key
    t = cj.tune_nercc(
        mkey, counted, x, num_workers=m, num_responses=n, grid=(1e-3, 1e-1), num_masks=8
    )
    np.testing.assert_array_equal(t.encoder_grid, [0.0, 1e-3, 1e-1])
    np.testing.assert_array_equal(t.decoder_grid, [0.0, 1e-3, 1e-1])
    assert t.grid_mse.shape == (3, 3) and np.all(np.isfinite(t.grid_mse))
    assert calls == [(v * k, 3)] + [(v * m, 3)] * 3  # truth, then once per lam_e
    ie, jd = np.unravel_index(np.argmin(t.grid_mse), t.grid_mse.shape)
    assert (t.encoder_smoothing, t.decoder_smoothing) == (
        t.encoder_grid[ie],
        t.decoder_grid[jd],
    )
    assert t.mse == t.grid_mse.min() and t.num_masks == 8 and t.num_responses == n
    # oracle: the same quantity through the public encode/decode, one pair
    beta, alpha = cj.bacc_points(k, m)
    masks = cj.sample_masks(mkey, num_workers=m, num_responses=n, shape=(8,))
    truth = np.asarray(jax.vmap(fn)(x))  # [V, K, F]
    xt = jnp.moveaxis(x, 0, 1)  # [K, V, 3]: one encode for all groups
    for i, j in ((1, 2), (0, 0)):
        lam_e, lam_d = float(t.encoder_grid[i]), float(t.decoder_grid[j])
        y = np.asarray(fn(cj.nercc_encode(xt, beta, alpha, smoothing=lam_e)))
        errs = []
        for mk in list(masks):
            a = np.asarray(
                cj.nercc_decoding_matrix(mk, alpha, beta, smoothing=lam_d).value
            )
            dec = np.einsum("km,mvf->vkf", a, y)
            errs.append((dec - truth) ** 2)
        np.testing.assert_allclose(t.grid_mse[i, j], np.mean(errs), rtol=1e-4)
    # user-supplied straggler patterns
    t2 = cj.tune_nercc(
        key,
        fn,
        x,
        num_workers=m,
        masks=masks,
        grid=(1e-3, 1e-1),
        decoder_grid=(1e-3, 0.5),
    )
    np.testing.assert_array_equal(t2.decoder_grid, [0.0, 1e-3, 0.5])
    np.testing.assert_allclose(t2.grid_mse[:, :2], t.grid_mse[:, :2], rtol=1e-6)
    with pytest.raises(ValueError, match="tune_nercc: grid must be a non-empty"):
        cj.tune_nercc(key, fn, x, num_workers=m, num_responses=n, grid=(-1.0,))
    with pytest.raises(ValueError, match="tune_nercc: give num_responses"):
        cj.tune_nercc(key, fn, x, num_workers=m)
    with pytest.raises(ValueError, match=r"tune_nercc: x_val must have shape \[V, K"):
        cj.tune_nercc(key, fn, x[0, 0], num_workers=m, num_responses=n)
