"""theory.plan --schemes: the scheme choice against the latency simulator's draws.

The p99 of each scheme is recomputed here from the injector's own delay plan
(``Injector.plan``, the draws every cluster and the simulator share) by the
scheme's rule written out in numpy: replication decides when every input has its
first replica, uncoded when all K answered, a code at N when the N-th answer
arrived. The choice must be the lowest such p99 among the schemes that meet the
target, and replication must win where it has 5 replicas per input while a code
must win where replication has a single replica of some input. The search over M
(``--workers LO..HI``) is checked against a fresh draw of the simulator: each
scheme's smallest M meets the targets there, one worker fewer does not.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import serving
from theory import plan as tp
from theory.plan.__main__ import main as plan_main

INDEPENDENT = "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms"
REQ = 500
SCHEMES = "uncoded,replication,chebyls,parity"


def _plan(m, k, deg, **kw):
    base = dict(
        workers=m,
        inputs=k,
        degree=deg,
        target_error=2e-2,
        failure=0.05,
        trials=400,
        exhaustive_limit=2000,
        worst_exact=0,
        worst_greedy=0,
        latency=INDEPENDENT,
        schemes=SCHEMES,
        scheme_requests=REQ,
        error_model="cond",
        progress=False,
        seed=3,
    )
    base.update(kw)
    return tp.plan(tp.PlanConfig(**base))["schemes"]


def _delays(m, requests, seed):
    inj = serving.Injector(latency=cj.parse_latency(INDEPENDENT), seed=seed)
    return inj.plan(np.arange(requests), m)[0]


def _p99(t):
    return float(np.quantile(t, 0.99))


def _check_against_delays(sc, m, k):
    t = _delays(m, REQ, 3)
    want = {
        "uncoded": _p99(_delays(k, REQ, 3).max(axis=1)),
        "replication": _p99(np.max([t[:, j::k].min(axis=1) for j in range(k)], axis=0)),
    }
    rows = {r["scheme"]: r for r in sc["rows"]}
    for name, row in rows.items():
        if row.get("p99") is None:
            continue
        if name in want:
            assert row["p99"] == pytest.approx(want[name], rel=1e-12)
        elif row["policy"].startswith("FixedN"):
            n = row["N"]
            assert row["p99"] == pytest.approx(_p99(np.sort(t, axis=1)[:, n - 1]))
    meets = [r for r in rows.values() if r.get("meets")]
    assert sc["choice"] == min(meets, key=lambda r: r["p99"])["scheme"]
    return rows


@pytest.fixture(scope="module")
def high():  # M/K = 5: every input has 5 replicas; D = 5 needs N well above D
    return _plan(15, 3, 2, target_error=1e-2)


@pytest.fixture(scope="module")
def low():  # M/K = 1.5: inputs 2 and 3 have a single replica
    return _plan(6, 4, 1, schemes="replication,chebyls,parity")


def test_replication_wins_at_five_replicas(high):
    rows = _check_against_delays(high, 15, 3)
    assert high["choice"] == "replication"
    assert rows["replication"]["meets"] and rows["uncoded"]["meets"]
    # ParM's only group size (k = 3) occupies K + K/k = 4 of the 15 workers
    assert rows["parity"]["reason"] == (
        "does not apply: the group sizes that fit occupy K + K/k = 4 workers, "
        "not M = 15 (equal resources)"
    )
    assert rows["chebyls"]["meets"] and rows["chebyls"]["N"] > 5
    assert "replication: p99" in high["ranking"][0]


def test_a_code_wins_at_few_workers(low):
    rows = _check_against_delays(low, 6, 4)
    assert low["choice"] not in (None, "uncoded", "replication")
    assert rows[low["choice"]]["p99"] < rows["replication"]["p99"]


def test_does_not_apply_rows_and_report(tmp_path, capsys):
    s = plan_main(
        [
            "--workers", "10", "--inputs", "8", "--degree", "3",
            "--latency", INDEPENDENT, "--schemes", "chebyls,circle,uncoded",
            "--scheme-requests", "500", "--trials", "200", "--worst-exact", "0",
            "--worst-greedy", "0", "--failure", "0.05", "--target-error", "0.05",
            "--no-progress", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    rows = {r["scheme"]: r for r in s["schemes"]["rows"]}
    assert rows["chebyls"]["reason"] == "does not apply: M = 10 < D = 22 (degree 3)"
    assert rows["circle"]["reason"].startswith("does not apply: circle_code: ")
    assert "needs D = d (K' - 1) + 1 = 22" in rows["circle"]["reason"]
    text = (tmp_path / "report.md").read_text()
    assert "## Which scheme" in text and "M = 10 < D = 22" in text
    assert "**Scheme: uncoded**" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--schemes", "turbo"], "--schemes"),
        (["--schemes", "all", "--latency", ""], "--latency"),
        (["--schemes", "all", "--target-error", "1e-4"], "--target-error"),
        (["--schemes", "all", "--workload", "shallow"], "--workload"),
    ],
)
def test_bad_scheme_options_name_the_flag(extra, flag, capsys):
    argv = ["--workers", "6", "--inputs", "2", "--degree", "1"]
    if "--latency" not in extra:
        argv += ["--latency", INDEPENDENT]
    with pytest.raises(SystemExit) as e:
        plan_main(argv + extra)
    assert e.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err


def test_schemes_need_a_latency_model(capsys):
    with pytest.raises(SystemExit):
        plan_main(
            ["--workers", "6", "--inputs", "2", "--degree", "1", "--schemes", "all"]
        )
    assert "--schemes" in capsys.readouterr().err


def test_deep_workload_rules_out_the_exact_polynomial_codes():
    cfg = tp.PlanConfig(
        workers=10,
        inputs=2,
        degree=1,
        workload="deep",
        latency=INDEPENDENT,
        schemes="chebyls,circle,parity,random",
        progress=False,
    )
    sc = tp.scheme_table(cfg, None)
    assert sc["choice"] is None
    reasons = {r["scheme"]: r["reason"] for r in sc["rows"]}
    assert list(reasons) == ["chebyls", "circle", "random", "parity"]
    assert reasons["chebyls"].startswith(
        "does not apply: the deep workload is not a polynomial"
    )
    assert reasons["circle"] == "does not apply: the deep workload is not a polynomial"
    assert reasons["random"].startswith("does not apply: exact only for a linear")
    assert reasons["parity"].endswith("not M = 10 (equal resources)")


@pytest.fixture(scope="module")
def search():  # K = 2, a linear workload, M = 3..5, p99 at most 60 ms
    cfg = tp.PlanConfig(
        workers=3,
        max_workers=5,
        inputs=2,
        degree=1,
        target_error=2e-2,
        failure=0.05,
        trials=400,
        exhaustive_limit=2000,
        worst_exact=0,
        worst_greedy=0,
        latency=INDEPENDENT,
        schemes="replication,chebyls",
        scheme_requests=2000,
        error_model="cond",
        p99_target=0.060,
        progress=False,
        seed=3,
    )
    return cfg, tp.plan(cfg)["search"]


def test_search_over_m_agrees_with_a_fresh_draw_of_the_simulator(search):
    cfg, se = search
    rows = {r["scheme"]: r for r in se["rows"]}
    rep, cheb = rows["replication"], rows["chebyls"]
    # replication needs a second replica of both inputs; ChebyLS (D = 2) meets
    # both targets from the first M, waiting for 2 of 3
    assert (rep["M"], cheb["M"]) == (4, 3) and se["choice"] == "chebyls"
    n = cheb["N"]
    assert n == 2
    # the rules of both schemes on a fresh delay plan (another seed, 10x the
    # requests): the targets hold at the chosen M and fail one worker below (for
    # ChebyLS, M = 2 is below the searched range: waiting for both workers)
    t = {m: _delays(m, 20_000, 99) for m in (2, 3, 4)}
    rep_p99 = {m: _p99(np.max([t[m][:, j::2].min(1) for j in range(2)], 0))
               for m in (3, 4)}  # fmt: skip
    assert rep_p99[4] <= cfg.p99_target < rep_p99[3]
    cheb_p99 = {m: _p99(np.sort(t[m], axis=1)[:, n - 1]) for m in (2, 3)}
    assert cheb_p99[3] <= cfg.p99_target < cheb_p99[2]
    assert cheb_p99[3] == pytest.approx(cheb["p99"], rel=0.25)
    assert rep_p99[4] == pytest.approx(rep["p99"], rel=0.25)
    # the error target holds on the fresh draw's first N answers (bf16 workers)
    code = cj.lagrange_code(num_inputs=2, num_workers=3, degree=1)
    order = np.argsort(t[3][:500], axis=1)
    masks = np.zeros((500, 3), bool)
    np.put_along_axis(masks, order[:, :n], True, axis=1)
    wl = tp.workload(cfg)
    x = np.random.default_rng(5).uniform(-1, 1, (500, 2, 4))
    enc = np.asarray(jax.vmap(code.encode)(jnp.asarray(x, jnp.float32)), np.float64)
    y = jnp.asarray(wl.truth(enc), jnp.bfloat16)
    val = np.asarray(code.decode_batched(y, jnp.asarray(masks)).value)
    truth = wl.truth(x)
    err = np.abs(val - truth).max(axis=(1, 2)) / np.abs(truth).max(axis=(1, 2))
    assert np.mean(err > cfg.target_error) <= cfg.failure
    assert se["ranking"][0].startswith("chebyls: M = 3, N = 2")
    assert "at M = 3: p99" in se["ranking"][1]  # replication's reason below its M


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--workers", "6..x"], "--workers"),
        (["--workers", "6..4", "--schemes", "all"], "--workers"),
        (["--workers", "4..6"], "--workers"),  # a range needs --schemes
        (["--workers", "4..6", "--schemes", "all", "--p99-target", "-3ms"], "--p99"),
        (["--workers", "6", "--p99-target", "30ms"], "--p99-target"),
    ],
)
def test_bad_search_options_name_the_flag(argv, flag, capsys):
    base = ["--inputs", "2", "--degree", "1", "--latency", INDEPENDENT]
    with pytest.raises(SystemExit) as e:
        plan_main(argv + base)
    assert e.value.code != 0
    assert flag in capsys.readouterr().err.strip().splitlines()[-1]
