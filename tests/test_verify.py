"""theory.verify: the sharded Monte Carlo kernels and a tiny end-to-end run.

The kernels are checked against numpy (SVD of the responding rows) and against
codedjax.bounds (gaps, gap bounds) on the responding sets they drew; the RepApprox
counts must match the exact formula; and a shrunken configuration must write every
output with the keys that docs/theory.md and the README describe, with every check
holding. That the numbers do not depend on the chunk size, the number of devices or
of processes is tests/test_distributed.py.
"""

import json
import math
import pathlib

import jax
import numpy as np
import pytest

import codedjax as cj
import codedjax.bounds as cb
from theory import montecarlo as mc
from theory import verify as V
from theory.verify.__main__ import main as verify_main
from theory.verify.__main__ import parser as verify_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
EPS = np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def samples():
    key = jax.random.key(3)
    resp = (6, 7, 10, 19, 20)
    s = mc.cond_monte_carlo(
        key,
        num_workers=20,
        num_coeffs=6,
        responses=resp,
        num_trials=120,
        chunk=48,
        memory_bytes=1 << 16,
    )
    assert s.raw.shape == (120, len(resp))
    return resp, s


def test_cond_kernel_matches_numpy_and_bounds(samples):
    resp, s = samples
    m, d = 20, 6
    t = np.polynomial.chebyshev.chebvander(
        np.cos((2 * np.arange(m) + 1) * np.pi / (2 * m)), d - 1
    )
    u = t * np.r_[np.sqrt(1 / m), np.full(d - 1, np.sqrt(2 / m))]
    assert s.orders.shape == (120, m)
    for i, order in enumerate(s.orders):
        assert sorted(order.tolist()) == list(range(m))  # a permutation
        for j, n in enumerate(resp):
            mask = np.zeros(m, bool)
            mask[order[:n]] = True
            for got, mat in ((s.raw[i, j], t), (s.eq[i, j], u)):
                ref = np.linalg.cond(mat[mask])
                assert abs(got / ref - 1) <= 8 * math.sqrt(n * d) * EPS * ref
            assert s.gap[i, j] == cb.max_gap(mask)
            rho = s.gap[i, j] * (d - 1) / m
            mine = (
                math.sqrt(s.wratio[i, j]) * (1 + rho) / (1 - rho)
                if rho < 1
                else math.inf
            )
            assert mine == pytest.approx(
                cb.gap_condition_bound(mask, num_coeffs=d), rel=1e-14
            )


def test_arrival_orders_are_uniform(samples):
    # every worker is equally likely to be among the first N: a chi-square test
    resp, s = samples
    n = 7
    counts = np.zeros(20)
    for order in s.orders:
        counts[order[:n]] += 1
    expected = s.orders.shape[0] * n / 20
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 45.3  # 0.999 quantile of chi-square with 19 degrees of freedom


def test_recovery_counts_match_exact_formula():
    k, c, m, t = 4, 3, 12, 6000
    counts = mc.recovery_monte_carlo(
        jax.random.key(5),
        num_inputs=k,
        replication=c,
        num_workers=m,
        num_trials=t,
        chunk=48,
        width=20,
    )
    assert counts[0] == 0 and counts[m] == t
    level = 1 - 0.001 / (m + 1)  # Bonferroni over the M + 1 intervals
    for n in range(m + 1):
        lo, hi = cb.clopper_pearson(int(counts[n]), t, confidence=level)
        assert lo <= cb.exact_recovery_probability(k, c, m, n) <= hi, n


def test_enumeration_matches_formula_exactly():
    for k, c, m in ((3, 2, 8), (2, 4, 11)):
        enum = V.enumerate_recovery(k, c, m)
        for n in range(m + 1):
            assert (
                abs(float(enum[n]) - cb.exact_recovery_probability(k, c, m, n)) <= 1e-12
            )


def test_row_buckets_are_optimal():
    import itertools

    ns = (13, 14, 15, 16, 18, 21, 26, 34, 37, 38, 39, 40)
    got = mc.row_buckets(ns)
    assert [n for g in got for n in g] == list(ns) and len(got) <= 3
    cost = sum(len(g) * max(g) for g in got)
    best = min(
        sum(len(g) * max(g) for g in (ns[:a], ns[a:b], ns[b:]) if g)
        for a, b in itertools.combinations(range(len(ns) + 1), 2)
    )
    assert cost == best
    with pytest.raises(ValueError, match="row_buckets"):
        mc.row_buckets((5, 4))


def test_grids():
    assert V.response_grid(40, 13)[0] == 13 and V.response_grid(40, 13)[-1] == 40
    assert all(13 <= n <= 40 for n in V.response_grid(40, 13))
    assert V.recovery_rows(8, 4, 40)[0] == 0 and V.recovery_rows(8, 4, 40)[-1] == 40
    with pytest.raises(ValueError, match="responses"):
        mc.cond_monte_carlo(
            jax.random.key(0),
            num_workers=10,
            num_coeffs=4,
            responses=(3, 10),
            num_trials=4,
        )


TINY = dict(
    cond_grid=((12, (3, 5)), (12, (5,), "second")),
    trials=300,
    points_workers=12,
    points_coeffs=(3, 5),
    points_trials=300,
    recovery_grid=((3, 2, 8), (2, 3, 9)),
    recovery_trials=3000,
    enumeration_grid=((3, 2, 8),),
    exhaustive_workers=(8,),
    exhaustive_missing=2,
    decoder_check_workers=(8,),
    identity_trials=64,
    progress=False,
)


def test_end_to_end_tiny_run(tmp_path):
    cfg = V.VerifyConfig.quick(**TINY)
    summary = V.run(cfg, str(tmp_path))
    for name in (
        "summary.json",
        "report.md",
        "cond_vs_N_M12.png",
        "cond_vs_N_M12_second.png",
        "recovery.png",
        "threshold_points.png",
    ):
        assert (tmp_path / name).stat().st_size > 0, name
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["checks"] and all({"name", "holds"} <= set(c) for c in data["checks"])
    failed = [c["name"] for c in data["checks"] if c["holds"] is False]
    assert not failed, failed
    # a vacuous bound is no verdict: holds is null, and the headline counts it apart
    vac = [c for c in data["checks"] if c.get("vacuous") is True]
    assert vac and all(c["holds"] is None for c in vac)
    informative = [c for c in data["checks"] if c.get("vacuous") is not True]
    assert data["headline"] == (
        f"{len(informative)} of {len(informative)} informative checks hold; "
        f"{len(vac)} bounds vacuous"
    )
    kinds = {c["kind"] for c in data["checks"]}
    assert {"deterministic", "probabilistic", "identity"} <= kinds
    keys = {
        "K",
        "c",
        "M",
        "N",
        "exact",
        "union",
        "seed_bound",
        "monte_carlo",
        "ci_low",
        "ci_high",
    }
    assert data["recovery"] and all(keys <= set(r) for r in data["recovery"])
    for r in data["recovery"]:
        assert r["ci_low"] <= r["monte_carlo"] <= r["ci_high"]
    # every (points, M, D, N) of the grid is reported with its statistics
    want = 2 * len(V.response_grid(12, 5)) + len(V.response_grid(12, 3))
    assert len(data["cond"]) == want
    assert {"median", "p95", "p99", "q_eta", "max"} <= set(data["cond"][0]["eq"])
    second = [r for r in data["cond"] if r["points"] == "second"]
    assert second and all(
        {"gap_probabilistic", "gap_deterministic"} <= set(r["not_applicable"])
        for r in second
    )
    # the second-kind Monte Carlo ran and its Prop. B check is informative at s = 1
    (b11,) = [
        c
        for c in data["checks"]
        if c.get("points") == "second" and c["bound"] == "prop_b" and c["N"] == 11
    ]
    assert b11["holds"] is True and b11["value"] is not None
    # every probabilistic informative check states its power
    prob = [c for c in informative if c["kind"] == "probabilistic" and "eta" in c]
    assert prob and all(0 < c["detectable_rate"] < 1 for c in prob)
    report = (tmp_path / "report.md").read_text()
    assert data["headline"] in report and "not applicable" in report
    assert "| points | M | D | N |" in report and "RepApprox" in report
    assert summary["all_hold"]
    assert "benchmark" not in data  # the speed comparison is benchmarks.mc_speed


def test_mc_speed_benchmark_agrees_with_numpy():
    from benchmarks import mc_speed

    rec = mc_speed.cond_trials_per_second(
        num_workers=12, num_coeffs=5, num_trials=32, repeats=1
    )
    # JAX against numpy's stacked SVD on the same sets: backward-stable SVDs agree
    # to a few eps times cond
    assert rec["max_rel_diff_over_eps_cond"] < 16 * math.sqrt(12 * 5)
    assert rec["responses"] == list(V.response_grid(12, 5))


def test_theory_reaches_the_library_through_public_names_only():
    # every codedjax name the theory modules use exists and is public: an import
    # of a private module or a renamed public function fails here
    import ast

    public_cj = set(cj.__all__) if hasattr(cj, "__all__") else set(dir(cj))
    public_cb = set(cb.__all__)
    used = []
    for path in sorted((ROOT / "theory").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "codedjax"
            ):
                assert node.module in ("codedjax", "codedjax.bounds"), (
                    path.name,
                    node.module,
                )
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("codedjax"):
                        assert alias.name in ("codedjax", "codedjax.bounds"), (
                            path.name,
                            alias.name,
                        )
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "cj":
                    used.append((path.name, node.attr, node.attr in public_cj))
                elif node.value.id == "cb":
                    used.append((path.name, node.attr, node.attr in public_cb))
    assert used
    bad = [u for u in used if not u[2] or u[1].startswith("_")]
    assert not bad, bad


def test_plots_and_verify_do_not_import_each_other():
    import ast

    def imported(name):
        tree = ast.parse((ROOT / "theory" / name).read_text())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                out |= {f"{node.module or ''}.{a.name}".strip(".") for a in node.names}
                out.add(node.module or "")
        return out

    # the plots and the report read a summary; they never reach back into the run
    run_modules = ("pipeline", "__main__", "conditions", "worst_case", "recovery")
    for leaf in ("verify/plots.py", "verify/report.py", "verify/verdict.py"):
        names = imported(leaf)
        assert not any(r in m for m in names for r in run_modules), (leaf, names)
    assert not any("plots" in m for m in imported("verify/report.py"))
    assert not any("verify" in m or "plots" in m for m in imported("_common.py"))
    # every module of the two packages stays small
    for path in [
        *(ROOT / "theory").glob("verify/*.py"),
        *(ROOT / "theory").glob("plan/*.py"),
    ]:
        assert len(path.read_text().splitlines()) <= 450, path.name


def test_equilibration_claim_skips_trials_float64_cannot_resolve():
    # at cond ~ 1/eps the SVD returns noise or inf for either matrix (the full run
    # met eq = inf beside a finite raw at M = 200, N = D = 40): such trials are
    # counted as unresolved, not as violations; a resolved violation still fails
    t, n = 4, 1
    raw = np.array([[2.0], [3.0], [1e17], [5.0]])
    eq = np.array([[2.1], [np.inf], [1e19], [5.0]])
    samples = mc.CondSamples(
        raw=raw,
        eq=eq,
        gap=np.ones((t, n), np.int32),
        wratio=np.ones((t, n)),
        orders=np.zeros((0, 8), int),
        seconds=0.0,
        compile_seconds=0.0,
    )
    _, checks = V.analyse_cond(
        samples, m=8, d=3, responses=(5,), eta=0.05, level=0.99, identity_trials=0
    )
    (c,) = [c for c in checks if c["bound"] == "equilibration"]
    assert c["holds"] and c["exceed"] == 0 and c["unresolved_trials"] == 2
    bad = samples._replace(eq=np.array([[2.1], [np.inf], [1e19], [50.0]]))
    _, checks = V.analyse_cond(
        bad, m=8, d=3, responses=(5,), eta=0.05, level=0.99, identity_trials=0
    )
    (c,) = [c for c in checks if c["bound"] == "equilibration"]
    assert not c["holds"] and c["exceed"] == 1


# ----------------------------------------------------------------------------------
# verdicts, power, user configuration, second-kind points, plots


def test_power_at_2000_trials_is_a_7_2_percent_exceedance():
    # the quick run before vacuous bounds left the Bonferroni family had 352
    # intervals: at 2,000 trials a 95% bound was flagged only above 7.2%
    from theory import _common as C

    level = 1 - 0.01 / 352
    rate = C.detectable_rate(2000, 0.05, level)
    assert rate == 0.072
    # the definition, directly: 144 exceedances are flagged, 143 are not
    assert cb.clopper_pearson(144, 2000, confidence=level)[0] > 0.05
    assert cb.clopper_pearson(143, 2000, confidence=level)[0] <= 0.05
    # more trials, more power; a bound at eta = 0.5 cannot be flagged below 50%
    assert C.detectable_rate(100_000, 0.05, level) < 0.053
    assert C.detectable_rate(50, 0.5, 0.99) > 0.5


def test_verdict_counts_vacuous_bounds_apart():
    from theory.verify.verdict import verdict

    checks = [
        {"holds": True, "vacuous": False},
        {"holds": False, "vacuous": False},
        {"holds": None, "vacuous": True},
        {"holds": True},  # an identity: always informative
    ]
    v = verdict(checks)
    assert v["headline"] == "2 of 3 informative checks hold; 1 bounds vacuous"


def test_unresolved_cond_is_not_printed_as_a_number():
    from theory import _common as C

    assert C.fmt_cond(5.3e18) == "unresolved" and C.fmt_cond(None) == "unresolved"
    assert C.fmt_cond(1.56e3) == "1.56e+03" and C.fmt(math.inf) == "inf"


def test_gap_bound_is_capped_by_prop_b():
    from theory import _common as C

    for m, d, n in ((64, 21, 63), (40, 13, 39), (200, 20, 150)):
        gap = C.bound_value("gap_probabilistic", "first", m, d, n, 0.05)
        raw_gap = cb.gap_condition_bound_probabilistic(
            num_workers=m, num_coeffs=d, num_responses=n, eta=0.05, capped=False
        )
        det = cb.deterministic_condition_bound(
            num_workers=m, num_coeffs=d, num_responses=n
        )
        assert gap == min(raw_gap, det)
    # at M = 64, D = 21, N = 63 the gap term is far above Prop. B's 1.56
    kw = dict(num_workers=64, num_coeffs=21, num_responses=63)
    assert cb.gap_condition_bound_probabilistic(**kw, eta=0.05, capped=False) > 6
    assert C.bound_value("gap_probabilistic", "first", 64, 21, 63, 0.05) == (
        pytest.approx(1.56, abs=0.005)
    )
    # a proposition that assumes first-kind points does not apply to second-kind
    assert C.bound_value("gap_probabilistic", "second", 40, 13, 39, 0.05) is None


def test_coherence_bounds_at_second_kind_points_against_every_missing_set():
    import itertools

    from theory import _common as C

    # the local Prop. B / Prop. C formulas equal the library's at first-kind points
    for m, d in ((12, 5), (40, 13)):
        ell = C.max_leverage_times_m("first", m, d)
        for n in range(d, m + 1):
            kw = dict(num_workers=m, num_coeffs=d, num_responses=n)
            assert C.prop_b(m, d, n, ell) == cb.deterministic_condition_bound(**kw)
            assert C.prop_c(m, d, n, 0.05, ell) == cb.missing_rows_condition_bound(
                **kw, eta=0.05
            )
    # second kind, M = 10, D = 4: every set with s <= 2 missing workers, in float64
    m, d = 10, 4
    x = np.cos(np.arange(m) * np.pi / (m - 1))
    t = np.polynomial.chebyshev.chebvander(x, d - 1)
    q = np.linalg.qr(t)[0]
    lev = np.sum(q * q, axis=1)
    ell = C.max_leverage_times_m("second", m, d)
    assert ell == pytest.approx(m * lev.max(), rel=1e-13)
    factor = C.raw_factor("second", m, d)
    assert factor == pytest.approx(np.linalg.cond(t), rel=1e-13)
    for s in (1, 2):
        worst = 0.0
        bound = C.bound_value("prop_b", "second", m, d, m - s, 0.05)
        for miss in itertools.combinations(range(m), s):
            mask = np.ones(m, bool)
            mask[list(miss)] = False
            k_u, k_t = np.linalg.cond(q[mask]), np.linalg.cond(t[mask])
            tol = 64 * EPS * k_u
            assert C.complement_identity(q, mask) == pytest.approx(k_u, rel=tol)
            assert k_t <= factor * k_u * (1 + tol) and k_u <= factor * k_t * (1 + tol)
            worst = max(worst, k_u)
        assert worst <= bound * (1 + 64 * EPS * worst)
        if s == 1:  # tight: missing the end worker (largest leverage) attains it
            assert worst == pytest.approx(bound, rel=1e-12)


def _parse_error(capsys, argv):
    with pytest.raises(SystemExit) as err:
        verify_main(argv)
    assert err.value.code == 2
    return capsys.readouterr().err


def test_command_line_errors_name_the_flag(capsys, tmp_path):
    out = ["--out", str(tmp_path)]
    msg = _parse_error(
        capsys, ["--workers", "40", "--inputs", "12", "--degree", "4"] + out
    )
    assert "--workers" in msg and "D = d(K-1)+1 = 45" in msg
    msg = _parse_error(
        capsys,
        ["--workers", "40", "--inputs", "5", "--degree", "2", "--eta", "1.5"] + out,
    )
    assert "--eta" in msg and "(0, 1)" in msg
    msg = _parse_error(
        capsys,
        ["--workers", "40", "--inputs", "5", "--degree", "2", "--points", "third"]
        + out,
    )
    assert "--points" in msg and "third" in msg
    msg = _parse_error(capsys, ["--workers", "40", "--inputs", "5"] + out)
    assert "--degree" in msg
    bad = tmp_path / "bad.toml"
    bad.write_text("workers = 40\nwrokers = 3\n")
    msg = _parse_error(capsys, ["--config", str(bad)] + out)
    assert "--config" in msg and "wrokers" in msg


def test_user_configuration_from_flags_toml_and_json(tmp_path):
    a = verify_parser().parse_args(
        "--workers 40 100 --inputs 5 --degree 2 3 --points first second "
        "--eta 0.01 --trials 500 --out x".split()
    )
    cfg, lines = V.build_config(a)
    assert cfg.eta == 0.01 and cfg.trials == 500
    assert V.cond_blocks(cfg) == [
        (p, m, d) for p in ("first", "second") for m in (40, 100) for d in (9, 13)
    ]
    assert lines == [
        "K = 5 inputs, degree d = 2: D = d(K-1)+1 = 9 coefficients",
        "K = 5 inputs, degree d = 3: D = d(K-1)+1 = 13 coefficients",
    ]
    assert cfg.recovery_grid == () and cfg.exhaustive_workers == ()
    toml = tmp_path / "grid.toml"
    toml.write_text(
        'workers = [64]\ninputs = 5\ndegree = 2\npoints = "second"\neta = 0.02\n'
        "recovery_grid = [[4, 3, 12]]\n"
    )
    jsn = tmp_path / "grid.json"
    jsn.write_text(json.dumps({"workers": 64, "inputs": [5], "degree": [2]}))
    cfg_t, _ = V.build_config(
        verify_parser().parse_args(["--config", str(toml), "--out", "x"])
    )
    assert V.cond_blocks(cfg_t) == [("second", 64, 9)] and cfg_t.eta == 0.02
    assert cfg_t.recovery_grid == ((4, 3, 12),)
    # a flag overrides the file
    cfg_j, _ = V.build_config(
        verify_parser().parse_args(["--config", str(jsn), "--eta", "0.1", "--out", "x"])
    )
    assert V.cond_blocks(cfg_j) == [("first", 64, 9)] and cfg_j.eta == 0.1


def test_zoom_legend_band_and_caption():
    from theory.verify import plots as _plots

    rng = np.random.default_rng(0)
    m, d, eta = 12, 5, 0.01

    def row(n):
        a = 1 + rng.exponential(size=400) * (m - n + 1)
        return {
            "N": n,
            "trials": 400,
            "eq": V.stats(a, eta),
            "raw": V.stats(a * 1.2, eta),
        }

    rows = [row(n) for n in V.response_grid(m, d)]
    assert rows[0]["eq"]["q_eta"] == rows[0]["eq"]["p99"]  # the band follows eta
    fig, cap = _plots.cond_figure("first", m, [(d, rows)], eta)
    zoom = fig.axes[1]
    labels = [t.get_text() for t in zoom.get_legend().get_texts()]
    assert "median..p99" in labels
    assert not any("generic Chernoff" in t for t in labels)  # vacuous: no entry
    assert "Not drawn, vacuous for every N: generic Chernoff (D = 5)" in cap
    assert any(t.startswith("Prop. B: finite for N >= 11") for t in labels)
    lo, hi = zoom.get_xlim()
    assert lo <= 11 - 0.5 and hi >= m
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_collect_prints_the_informative_verdict(tmp_path):
    from theory import collect

    part = tmp_path / "theory"
    part.mkdir()
    (part / "report.md").write_text("# T\n\n![a.png](a.png)\n")
    checks = [
        {"name": "a", "holds": True, "vacuous": False},
        {"name": "b", "holds": None, "vacuous": True},
        {"name": "c", "holds": True},
    ]
    (part / "summary.json").write_text(json.dumps({"checks": checks}))
    text = collect.collect(str(tmp_path))
    assert "2 of 2 informative checks hold; 1 bounds vacuous." in text
    assert "](theory/a.png)" in text
    (part / "summary.json").write_text(
        json.dumps({"checks": checks, "headline": "9 of 9 informative checks hold"})
    )
    assert "9 of 9 informative checks hold." in collect.collect(str(tmp_path))
