"""theory.plan against brute force: every responding set of a small configuration.

M = 12 workers, K = 3 inputs, degree 2 (D = 5): every one of the C(12, N) responding
sets is listed here with numpy's own cond / pinv, independently of the plan's code,
and the failure rates, the chosen N, the RepApprox losses, the worst case and the
latency of waiting for N responses are compared. The default error model is the
decoder's own prediction: it is checked against the library's decoder, decode by
decode, and the planner must find the N at which the decoder meets the target.
"""

import itertools
import json
import math

import numpy as np
import pytest
from numpy.polynomial import chebyshev as npcheb
from scipy import stats

import codedjax as cj
from theory import plan as tp
from theory.plan.__main__ import main as plan_main

M, K, DEG = 12, 3, 2
D = DEG * (K - 1) + 1
U_BF16 = 2.0**-8


def _cfg(**kw):
    base = dict(
        workers=M,
        inputs=K,
        degree=DEG,
        worker_dtype="bfloat16",
        target_error=1e-2,
        failure=0.05,
        trials=3000,
        worst_exact=3,
        worst_greedy=4,
        progress=False,
        seed=20261130,
        error_model="cond",
    )
    base.update(kw)
    return tp.PlanConfig(**base)


def _theta(m):
    return (2 * np.arange(m) + 1) * np.pi / (2 * m)


def _brute_errors(model):
    """{N: [predicted relative error of every N-subset]} by numpy, raw basis."""
    t = npcheb.chebvander(np.cos(_theta(M)), D - 1)
    eq = t / np.linalg.norm(t, axis=0)
    tb = npcheb.chebvander(np.cos(_theta(K)), D - 1)
    out = {}
    for n in range(D, M + 1):
        errs = []
        for rows in itertools.combinations(range(M), n):
            rows = list(rows)
            if model == "cond":
                errs.append(np.linalg.cond(eq[rows]) * U_BF16)
            else:  # rowsum; the decoding matrix does not depend on the basis' scaling
                a = tb @ np.linalg.pinv(t[rows])
                errs.append(np.abs(a).sum(axis=1).max() * U_BF16)
        out[n] = np.array(errs)
    return out


def _smallest(rates, level):
    best = None
    for n in sorted(rates, reverse=True):
        if rates[n] <= level:
            best = n
        else:
            break
    return best


@pytest.fixture(scope="module")
def brute():
    return {model: _brute_errors(model) for model in ("cond", "rowsum")}


@pytest.mark.parametrize("model,target", [("cond", 1e-2), ("rowsum", 2e-2)])
def test_exhaustive_plan_equals_brute_force(brute, model, target):
    out = tp.chebyls_table(_cfg(error_model=model, target_error=target))
    rates = {}
    for row in out["rows"]:
        errs = brute[model][row["N"]]
        assert row["exhaustive"] and row["trials"] == math.comb(M, row["N"])
        assert row["failures"] == int(np.sum(errs > target)), row
        np.testing.assert_allclose(row["max_error"], errs.max(), rtol=1e-9)
        rates[row["N"]] = row["failures"] / row["trials"]
    assert 0 < rates[D + 2] < 1  # the target separates the sets: a real test
    assert out["chosen_N"] == _smallest(rates, 0.05)


def test_monte_carlo_plan_agrees_with_brute_force(brute):
    exact = {n: float(np.mean(e > 1e-2)) for n, e in brute["cond"].items()}
    out = tp.chebyls_table(_cfg(exhaustive_limit=0))
    level = 1 - 0.001 / len(exact)  # Bonferroni over the N values
    for row in out["rows"]:
        assert not row["exhaustive"] and row["trials"] == 3000
        ci = stats.binomtest(row["failures"], row["trials"]).proportion_ci(
            confidence_level=level, method="exact"
        )
        assert ci.low <= exact[row["N"]] <= ci.high, row
        assert row["upper"] >= row["rate"]
    # exact rates 0.109 at N = 9 and 0.030 at N = 10: the choice is unambiguous
    assert out["chosen_N"] == _smallest(exact, 0.05) == 10


def test_proven_guarantee_is_valid(brute):
    out = tp.chebyls_table(_cfg())
    assert out["proven_N"] is not None
    for row in out["rows"]:
        if row["proven_error"] is not None and row["proven_error"] <= 1e-2:
            # a proven guarantee at confidence 1 - failure holds on the exact rate
            assert np.mean(brute["cond"][row["N"]] > 1e-2) <= 0.05
            assert row["N"] >= out["proven_N"]
    # second-kind points: the bounds do not apply, and the plan says so
    second = tp.chebyls_table(_cfg(points="second"))
    assert second["proven_N"] is None
    assert all(r["proven_by"].startswith("not applicable") for r in second["rows"])


def test_repapprox_plan_equals_enumeration():
    c = 3
    out = tp.repapprox_table(_cfg(replication=c))
    groups = [set(range(g * c, (g + 1) * c)) for g in range(K)]
    exact_lost = {}
    for row in out["rows"]:
        n = row["N"]
        lost = sum(
            not all(g & set(r) for g in groups)
            for r in itertools.combinations(range(M), n)
        )
        assert row["lost"] == lost
        exact_lost[n] = lost / math.comb(M, n)
        assert row["exact"] == pytest.approx(exact_lost[n], abs=1e-12)
        assert row["union"] >= row["exact"] - 1e-12
        assert row["seed"] >= row["union"] - 1e-12
    assert out["chosen_N"]["exact"] == _smallest(exact_lost, 0.05)
    assert (
        out["chosen_N"]["seed"]
        >= out["chosen_N"]["union"]
        >= (out["chosen_N"]["exact"])
    )


def test_worst_case_section_against_every_set():
    t = npcheb.chebvander(np.cos(_theta(M)), D - 1)
    eq = t / np.linalg.norm(t, axis=0)
    rows = tp.worst_case_table(_cfg())
    assert [r["s"] for r in rows] == [1, 2, 3, 4]
    for r in rows:
        if r["exact"] is None:
            assert r["greedy"] is not None  # s = 4: greedy only
            continue
        worst = max(
            np.linalg.cond(eq[list(keep)])
            for keep in itertools.combinations(range(M), M - r["s"])
        )
        tol = 64 * M * np.finfo(float).eps * worst
        assert r["exact"] == pytest.approx(worst, rel=tol)
        assert r["greedy"] <= r["exact"] * (1 + tol)  # greedy is a lower bound


def test_latency_order_statistic_mean():
    # time to the N-th of M shifted exponentials: shift + mean sum_{j<N} 1/(M - j)
    shift, mean, trials = 5e-3, 5e-3, 20_000
    got = tp.latency_percentiles(
        "shifted-exp:5ms,5ms", num_workers=M, responses=[1, D, M], trials=trials, seed=1
    )
    for n, p in got.items():
        inv = 1.0 / (M - np.arange(n))
        want = shift + mean * inv.sum()
        se = mean * math.sqrt(np.sum(inv**2) / trials)
        assert abs(p["mean"] - want) <= 5 * se
        assert p["p50"] <= p["p95"] <= p["p99"]
    # the planner reads the library's latency vocabulary
    assert tp.parse_latency("exp:2ms") == cj.ShiftedExponential(0.0, 2e-3)
    assert tp.parse_latency("pareto:1s,1.5") == cj.Pareto(1.0, 1.5)
    slow = tp.parse_latency("shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5")
    assert slow == cj.parse_latency(slow.spec())


def test_cli_writes_summary_and_names_bad_flags(tmp_path, capsys):
    summary = plan_main(
        [
            "--workers",
            "12",
            "--inputs",
            "3",
            "--degree",
            "2",
            "--failure",
            "0.05",
            "--latency",
            "shifted-exp:5ms,5ms",
            "--worst-greedy",
            "3",
            "--no-progress",
            "--error-model",
            "cond",
            "--quick",
            "--out",
            str(tmp_path),
        ]
    )
    # --quick is PlanConfig.quick(): fewer Monte Carlo trials; at M = 12 every
    # responding set is still listed, so the answer is the exhaustive one
    assert summary["config"]["trials"] == 2_000
    assert all(r["exhaustive"] for r in summary["chebyls"]["rows"])
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["D"] == D and written["chebyls"]["chosen_N"] == 10
    assert summary["chebyls"]["chosen_N"] == 10
    assert "ChebyLS: N = 10" in (tmp_path / "report.md").read_text()
    assert "D = d (K - 1) + 1 = 5" in capsys.readouterr().out
    for argv, flag in [
        (["--workers", "4", "--inputs", "3", "--degree", "2"], "--degree/--inputs"),
        (
            ["--workers", "12", "--inputs", "3", "--degree", "2", "--failure", "1"],
            "--failure",
        ),
        (
            [
                "--workers",
                "12",
                "--inputs",
                "3",
                "--degree",
                "2",
                "--latency",
                "gauss:1",
            ],
            "--latency",
        ),
    ]:
        with pytest.raises(SystemExit):
            plan_main(argv)
        assert flag in capsys.readouterr().err


def _predicted_error_oracle(y, mask, truth):
    """float64 numpy: the decoder's predicted error of ``docs/decoding.md`` for one
    bf16 request, and its actual error, both over max |y_S|. e = z_KF sqrt(max_k
    ||A_k||^2 + 1) sigma, sigma = max(u rms(y_S), sqrt(RSS / (N - D))) (the residual
    term where the batched decoder forms it, cond <= 512), A = T_beta T_S^+."""
    from statistics import NormalDist

    t = npcheb.chebvander(np.cos(_theta(M)), D - 1)[mask]
    tb = npcheb.chebvander(np.cos(_theta(K)), D - 1)
    a = tb @ np.linalg.pinv(t)
    ys = y[mask]
    coef = np.linalg.lstsq(t, ys, rcond=None)[0]
    rss = float(np.sum((t @ coef - ys) ** 2))
    sigma = U_BF16 * np.sqrt(np.mean(ys**2))
    eq = t / np.linalg.norm(npcheb.chebvander(np.cos(_theta(M)), D - 1), axis=0)
    if np.linalg.cond(eq) <= 512:
        sigma = max(sigma, np.sqrt(rss / (mask.sum() - D)))
    z = NormalDist().inv_cdf(1 - 0.01 / (2 * K))
    size = np.abs(ys).max()
    pred = z * np.sqrt(np.max(np.sum(a * a, axis=1)) + 1) * sigma
    return pred / size, np.abs(a @ ys - truth).max() / size


def test_decoder_model_is_the_decoders_own_prediction():
    """The default model: the planner's error of a responding set is the decoder's
    own prediction (DecodeResult.error) for that set's request, per unit of max
    |y_S|, against a float64 numpy oracle of the formula; its actual error is the
    same decode against the float64 polynomial."""
    cfg = _cfg(error_model="decoder")
    masks = tp.all_masks(M, 7)[::9]  # 88 of the 792 sets
    pred, act = tp.decoder_errors(cfg, masks)
    y64, truth = tp.request_answers(cfg, len(masks))
    # the answers the workers return: the float64 polynomial rounded to bf16
    yw = y64.astype(np.float32).view(np.uint32)
    yw = ((yw + 0x7FFF + ((yw >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    for i in range(len(masks)):
        want_pred, want_act = _predicted_error_oracle(yw[i], masks[i], truth[i])
        np.testing.assert_allclose(pred[i], want_pred, rtol=2e-3)
        np.testing.assert_allclose(act[i], want_act, rtol=1e-2, atol=1e-6)
    assert np.mean(pred >= act) >= 0.95  # the prediction covers the actual error
    # the truth is the same polynomial at the data points
    fit = npcheb.chebfit(np.cos(_theta(M)), y64[0], D - 1)
    np.testing.assert_allclose(npcheb.chebval(np.cos(_theta(K)), fit), truth[0])


def test_planner_finds_the_n_the_decoder_reaches():
    """bf16 workers, target 1e-2 (the regime where the cond-free row-sum model and
    the old planner found no N at larger sizes): the planner, with the decoder's own
    prediction, chooses an N, and the same decodes' actual errors meet the target
    there and at every larger N at the failure level. (At M = 40, K = 8, d = 3,
    failure 1e-3 it chooses N = 39: ``python -m theory.plan`` in docs.)"""
    cfg = _cfg(error_model="decoder", trials=2000, exhaustive_limit=100)
    out = tp.chebyls_table(cfg)
    n = out["chosen_N"]
    assert n is not None and D < n <= M
    rows = {r["N"]: r for r in out["rows"]}
    for r in rows.values():
        assert 0.0 <= r["covered"] <= 1.0
        if r["N"] >= n:
            assert r["upper"] <= cfg.failure
            assert r["actual_failures"] / r["trials"] <= cfg.failure
    assert rows[n - 1]["upper"] > cfg.failure  # the smallest such N
    assert 0 < rows[D + 2]["failures"] < rows[D + 2]["trials"]  # a real separation
