"""The predicted error of a decode, the smooth decoder and the graceful decoder."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import codedjax as cj

# the smooth decoder's grids (codedjax._lagrange_graceful), pinned here
PRIOR_DECAYS = (1.0, 0.9, 0.8, 0.7)
PRIOR_SCALES = tuple(float(v) for v in np.logspace(-3, 2, 41))

M, K, DEG = 16, 3, 2
D = DEG * (K - 1) + 1  # 5


def _wilson_low(successes, trials, z=2.576):
    p = successes / trials
    den = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return centre - half


def _poly_answers(rng, m, deg, k, f):
    """Answers of a degree DEG map of a degree K-1 encoding (h of degree D-1)."""
    alpha = np.asarray(cj.chebyshev_points(m), np.float64)
    beta = np.asarray(cj.chebyshev_points(k), np.float64)
    c = rng.standard_normal((deg * (k - 1) + 1, f))
    ya = np.polynomial.chebyshev.chebval(alpha, c).T  # [M, F]
    yb = np.polynomial.chebyshev.chebval(beta, c).T  # [K, F]
    return alpha, beta, ya, yb


def test_predicted_error_matches_float64_formula(x64):
    """ChebyLS's ``error`` equals the formula of docs/decoding.md computed in
    float64 numpy from the decoding matrix, the rounding level and the residual."""
    rng = np.random.default_rng(0)
    alpha, beta, ya, _ = _poly_answers(rng, M, DEG, K, 2)
    y = ya + 1e-3 * rng.standard_normal(ya.shape)
    for n_resp, wdt in ((9, jnp.bfloat16), (D, jnp.float32)):
        sel = np.zeros(M, bool)
        sel[rng.choice(M, n_resp, replace=False)] = True
        yw = np.asarray(jnp.asarray(y, wdt).astype(jnp.float32), np.float64)
        r = cj.chebyls_decode(
            jnp.asarray(yw, wdt), jnp.asarray(sel), jnp.asarray(alpha),
            jnp.asarray(beta), num_coeffs=D, accum_dtype=jnp.float64,
        )  # fmt: skip
        t = np.polynomial.chebyshev.chebvander(alpha, D - 1)
        tb = np.polynomial.chebyshev.chebvander(beta, D - 1)
        a = np.zeros((K, M))
        a[:, sel] = tb @ np.linalg.pinv(t[sel])
        coef = np.linalg.lstsq(t[sel], yw[sel], rcond=None)[0]
        rss = np.sum((yw[sel] - t[sel] @ coef) ** 2, axis=0)
        u = float(jnp.finfo(wdt).eps) / 2
        sigma = u * np.sqrt(np.mean(yw[sel] ** 2, axis=0))
        if n_resp > D:
            sigma = np.maximum(sigma, np.sqrt(rss / (n_resp - D)))
        z = norm.ppf(1 - 0.01 / (2 * K * 2))
        want = z * np.sqrt(np.max(np.sum(a * a, axis=1)) + 1) * sigma.max()
        # the decoder's A is within cond eps of the pinv's
        np.testing.assert_allclose(float(r.error), want, rtol=1e-8 * float(r.cond))


def test_chebyls_error_covers_noise_beyond_rounding():
    """Known truth: answers off by Gaussian noise 30x the float32 rounding level;
    the least-squares residual must lift the prediction to cover it."""
    rng = np.random.default_rng(1)
    alpha, beta, ya, yb = _poly_answers(rng, M, DEG, K, 1)
    b = 200
    rms = np.sqrt(np.mean(ya**2))
    sigma = 30 * 2.0**-24 * rms
    y = (ya[None, :, 0] + sigma * rng.standard_normal((b, M))).astype(np.float32)
    masks = cj.sample_masks(
        jax.random.key(2), num_workers=M, num_responses=12, shape=(b,)
    )
    al, be = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
    # vmapped ChebyLS runs the batched kernel: its predictions are checked here
    r = cj.chebyls_decode_batched(jnp.asarray(y), masks, al, be, num_coeffs=D)
    act = np.abs(np.asarray(r.value, np.float64) - yb[None, :, 0]).max(axis=1)
    pred = np.asarray(r.error, np.float64)
    covered = int(np.sum(pred >= act))
    # nominal exceedance 1%: the covered rate must not be significantly below 95%
    assert _wilson_low(covered, b) > 0.9 or covered / b >= 0.95
    assert np.median(pred / act) < 10


def _smooth_reference(y, sel, alpha, beta, d, u):
    """float64 numpy: the empirical-Bayes posterior mean of the smooth decoder."""
    m = alpha.size
    scale = np.full(d, np.sqrt(2.0 / m))
    scale[0] = np.sqrt(1.0 / m)
    t = np.polynomial.chebyshev.chebvander(alpha, d - 1) * scale
    tb = np.polynomial.chebyshev.chebvander(beta, d - 1) * scale
    ys = y[sel]
    n = ys.shape[0]
    rms = np.sqrt(np.mean(ys**2, axis=0))
    c_ls = np.linalg.lstsq(t[sel], ys, rcond=None)[0]
    rss = np.sum((ys - t[sel] @ c_ls) ** 2, axis=0)
    sigma = u * rms
    if n > d:
        sigma = np.maximum(sigma, np.sqrt(rss / (n - d)))
    rms = np.maximum(rms, sigma)
    best = None
    for rho in PRIOR_DECAYS:
        w = rho ** np.arange(d)
        for s in PRIOR_SCALES:
            sf = s * rms
            ll = 0.0
            for f in range(y.shape[1]):
                cov = sf[f] ** 2 * (t[sel] * w) @ (t[sel] * w).T
                cov += sigma[f] ** 2 * np.eye(n)
                _, logdet = np.linalg.slogdet(cov)
                ll += -0.5 * logdet - 0.5 * ys[:, f] @ np.linalg.solve(cov, ys[:, f])
            if best is None or ll > best[0]:
                best = (ll, w, sf)
    _, w, sf = best
    out = []
    for f in range(y.shape[1]):
        tw = t[sel] * w
        cov = sf[f] ** 2 * tw @ tw.T + sigma[f] ** 2 * np.eye(n)
        coef = sf[f] ** 2 * tw.T @ np.linalg.solve(cov, ys[:, f])
        out.append((tb * w) @ coef)
    return np.stack(out, axis=1)


@pytest.mark.parametrize("num_responses", [5, 7, 12])
def test_smooth_decoder_matches_float64_posterior_mean(x64, num_responses):
    rng = np.random.default_rng(3)
    alpha, beta, ya, _ = _poly_answers(rng, M, DEG, K, 2)
    y = ya + 1e-3 * rng.standard_normal(ya.shape)  # noise beyond float64 rounding
    mask = np.zeros(M, bool)
    mask[rng.choice(M, num_responses, replace=False)] = True
    r = cj.smooth_chebyshev_decode(
        jnp.asarray(y), jnp.asarray(mask), jnp.asarray(alpha), jnp.asarray(beta),
        num_coeffs=D, worker_dtype=jnp.float32,
    )  # fmt: skip
    want = _smooth_reference(y, mask, alpha, beta, D, 2.0**-24)
    assert bool(r.ok)
    # two float64 routes to one posterior mean (SVD against dense solves)
    np.testing.assert_allclose(np.asarray(r.value), want, rtol=1e-6, atol=1e-8)


def test_graceful_is_chebyls_when_well_posed_and_better_near_threshold():
    rng = np.random.default_rng(4)
    alpha, beta, ya, yb = _poly_answers(rng, M, DEG, K, 1)
    al, be = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
    y = jnp.asarray(ya, jnp.bfloat16)
    full = jnp.ones(M, bool)
    g = cj.graceful_decode(y, full, al, be, num_coeffs=D)
    c = cj.chebyls_decode(y, full, al, be, num_coeffs=D)
    np.testing.assert_allclose(np.asarray(g.value), np.asarray(c.value), rtol=1e-5)
    # D responders clustered at one end: ChebyLS extrapolates, graceful must not
    # be worse, and its predicted error must cover its actual error
    mask = jnp.zeros(M, bool).at[:D].set(True)
    g = cj.graceful_decode(y, mask, al, be, num_coeffs=D)
    c = cj.chebyls_decode(y, mask, al, be, num_coeffs=D)
    eg = np.abs(np.asarray(g.value, np.float64) - yb).max()
    ec = np.abs(np.asarray(c.value, np.float64) - yb).max()
    assert bool(g.ok) and eg <= ec * (1 + 1e-6)
    assert float(g.error) >= eg


def test_graceful_vmap_equals_loop_and_code():
    rng = np.random.default_rng(5)
    alpha, beta, ya, _ = _poly_answers(rng, M, DEG, K, 1)
    al, be = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
    y = jnp.asarray(ya[None, :, 0] + 1e-3 * rng.standard_normal((2, M)), jnp.float32)
    masks = cj.sample_masks(
        jax.random.key(6), num_workers=M, num_responses=6, shape=(2,)
    )
    fn = jax.jit(
        jax.vmap(lambda yy, mk: cj.graceful_decode(yy, mk, al, be, num_coeffs=D))
    )
    rv = fn(y, masks)
    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG, decoder="graceful")
    for i in range(2):
        r1 = cj.graceful_decode(y[i], masks[i], al, be, num_coeffs=D)
        np.testing.assert_allclose(np.asarray(rv.value[i]), np.asarray(r1.value), 1e-5)
        rc = code.decode(y[i], masks[i])
        np.testing.assert_allclose(np.asarray(rc.value), np.asarray(r1.value), 1e-5)


def test_graceful_status_and_bad_input():
    al, be = cj.chebyshev_points(M), cj.chebyshev_points(K)
    y = jnp.zeros((M,), jnp.float32)
    r = cj.graceful_decode(y, jnp.zeros(M, bool), al, be, num_coeffs=D)
    assert not bool(r.ok) and int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
    assert float(r.error) == np.inf and not np.any(np.isnan(np.asarray(r.value)))
    with pytest.raises(ValueError, match="graceful_decode"):
        cj.graceful_decode(y, jnp.ones(M - 1, bool), al, be, num_coeffs=D)
    with pytest.raises(ValueError, match="smooth_chebyshev_decode"):
        cj.smooth_chebyshev_decode(y, jnp.ones(M, bool), al, be, num_coeffs=M + 1)
    with pytest.raises(TypeError, match="graceful_decode"):
        cj.graceful_decode(
            y, jnp.ones(M, bool), al, be, num_coeffs=D, worker_dtype=jnp.int32
        )
    with pytest.raises(ValueError, match="lagrange_code"):
        cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG, decoder="nope")


# ----------------------------------------------------------------------------------
# coverage of the decoders without a residual: the square solve and the copies


def _wilson_high(successes, trials, z=2.576):
    """The upper end of the 99% Wilson interval of a rate."""
    p = successes / trials
    den = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return centre + half


def test_threshold_decode_error_covers_float32_answers_at_d():
    """A statistical claim (docs/decoding.md, section 1): the square solve on D
    float32 answers (random degree D - 1 series rounded once) decoded in float32
    rounds as much as the answers do, and ``error`` (its c_solve = sqrt(D),
    added in quadrature) covers the actual error in at least 95% of the decodes;
    not uselessly loose (median predicted / actual at most 10)."""
    b = 240
    rng = np.random.default_rng(8)
    alpha = np.asarray(cj.chebyshev_points(M), np.float64)
    beta = np.asarray(cj.chebyshev_points(K), np.float64)
    c = rng.standard_normal((D, b * 2))  # 2 payload columns per request
    ya = np.polynomial.chebyshev.chebval(alpha, c).reshape(b, 2, M).transpose(0, 2, 1)
    yb = np.polynomial.chebyshev.chebval(beta, c).reshape(b, 2, K).transpose(0, 2, 1)
    order = np.argsort(rng.random((b, M)), axis=1).astype(np.int32)
    al, be = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
    dec = jax.vmap(
        lambda yy, od: cj.threshold_decode(yy, jnp.ones(M, bool), al, be, D, od)
    )
    r = jax.jit(dec)(jnp.asarray(ya, jnp.float32), jnp.asarray(order))
    assert np.all(np.asarray(r.ok))
    act = np.abs(np.asarray(r.value, np.float64) - yb).reshape(b, -1).max(axis=1)
    pred = np.asarray(r.error, np.float64)
    assert _wilson_high(int(np.sum(pred >= act)), b) >= 0.95
    assert np.median(pred / act) <= 10


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_copies_predict_the_workers_rounding(dtype):
    """Replication and uncoded serving copy an answer bit for bit: its error is
    the worker's own rounding, which ``error`` predicts (gain 1, no decoder
    rounding) and covers in at least 95% of the requests (a worker computing
    x W in ``dtype``, against float64); an error of 0 would cover none."""
    b, k, m, f = 240, 3, 7, 4
    rng = np.random.default_rng(9)
    x = rng.standard_normal((b, k, f)).astype(np.float32)
    w = (rng.standard_normal((f, f)) / 2).astype(np.float32)
    dt = jnp.dtype(dtype)
    for code in (
        cj.replication_code(num_inputs=k, num_workers=m),
        cj.uncoded_code(num_inputs=k),
    ):
        q = x[:, code.task]  # the queries each worker is sent
        y = q.astype(dt).astype(np.float32) @ w.astype(dt).astype(np.float32)
        masks = np.ones((b, code.num_workers), bool)
        masks[:, 0] = code.num_workers == k  # replication: input 0 from worker K
        r = code.decode_batched(jnp.asarray(y.astype(dt)), jnp.asarray(masks))
        assert np.all(np.asarray(r.ok))
        truth = x.astype(np.float64) @ w.astype(np.float64)
        act = np.abs(np.asarray(r.value, np.float64) - truth).reshape(b, -1).max(1)
        pred = np.asarray(r.error, np.float64)
        assert _wilson_high(int(np.sum(pred >= act)), b) >= 0.95, code.name
        assert np.median(pred / act) <= 10, code.name


def test_calibration_catalogue_builds_every_code_and_reports(tmp_path):
    """theory.calibration --codes: every name of the catalogue is a library code
    on each workload it serves (the linear-only codes skip the quadratic one),
    and a shrunken run writes its rows and its report (headed by the commit and
    the date)."""
    from theory import calibration as tc

    for setting, (_, _, d) in tc.SETTINGS.items():
        for name in tc.CODES:
            code = tc.catalogue_code(name, setting, "bfloat16")
            linear_only = name in ("random", "parity") or "packed" in name
            assert (code is None) == (linear_only and d != 1), (setting, name)
            assert code is None or isinstance(code, cj.Code)
    cfg = tc.CalibrationConfig(codes=("uncoded",), num_masks=64, progress=False)
    summary = tc.run_catalogue(cfg)
    cells = {(r["setting"], r["worker_dtype"], r["N"]) for r in summary["rows"]}
    assert cells == {
        (s, dt, k) for s, (k, _, _) in tc.SETTINGS.items() for dt in tc.WORKER_DTYPES
    }
    for r in summary["rows"]:  # every uncoded request decodes; rates are rates
        assert r["requests"] == 64 and r["not_ok"] == 0 and 0 <= r["covered"] <= 1
    short = tc.write_catalogue(summary, str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert short in report and "| uncoded |" in short
    assert (
        summary["environment"]["git_revision"] in report and summary["date"] in report
    )
    with pytest.raises(ValueError, match="run_catalogue: codes must name"):
        tc.run_catalogue(tc.CalibrationConfig(codes=("nope",), progress=False))


def test_calibration_premise_covers_every_code():
    """The premise of ``error`` (docs/decoding.md, section 1): answers that are the
    exact f of the coded queries rounded once to the workers' dtype. Under it
    every code of the catalogue covers the actual error (against f(X), or for an
    approximate decode against its decode of float64 answers) in at least 95% of
    the ok decodes within a 99% Wilson interval, bf16 and float32, at its
    threshold, one more answer and M, on the linear workload (which every code
    serves) with float32 answers, where the decoders' own rounding is as large
    as the answers' (bf16 and the quadratic workload: the full table of
    docs/results/calibration.md); BACC at N = 2 needs the rounding of its
    two-node weights (``codedjax._berrut_kernels.weights_rounding``)."""
    from theory import calibration as tc

    def pick(name, code, degree):
        m = code.num_workers
        return sorted({code.threshold, min(code.threshold + 1, m), m})

    cfg = tc.CalibrationConfig(codes=("all",), num_masks=200, progress=False)
    summary = tc.run_catalogue(
        cfg,
        pick_n=pick,
        answers=("premise",),
        dtypes=("float32",),
        settings=("linear",),
    )
    rows = summary["rows"]
    assert {r["code"] for r in rows} == set(tc.CODES)
    for r in rows:
        assert r["answers"] == "premise"
        if not r["requests"]:  # replication below M may lose an input: not ok
            assert r["code"] == "replication", r
            continue
        hit = round(r["covered"] * r["requests"])
        assert _wilson_high(hit, r["requests"]) >= 0.95, r
