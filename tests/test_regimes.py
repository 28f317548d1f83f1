"""benchmarks.regimes on a tiny grid: every scheme has a row (its best layout, or
a reason where none applies), per-query latencies agree with the delays drawn
directly, the planner chooses what the map chooses in the same cell, bad options
exit with one line."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import runkit
from benchmarks.regimes import (
    RegimesConfig,
    cell_search,
    latency_model,
    merge_summaries,
    run_regimes,
    winners,
    workload,
)
from benchmarks.regimes.__main__ import main
from benchmarks.regimes.config import latency_text
from benchmarks.regimes.pipeline import Cell
from benchmarks.regimes.search import workload_rows
from codedjax.serving import Injector
from theory import plan as tp

pytestmark = pytest.mark.loose_promotion

SCHEMES = [
    "uncoded",
    "replication",
    "chebyls",
    "threshold",
    "graceful",
    "bacc",
    "nercc",
    "repapprox",
    "parity",
    "layerwise",
]


@pytest.fixture(scope="module")
def summary():
    cfg = RegimesConfig(
        num_inputs=(4,),
        ratios=(1.5,),
        workloads=("deep",),
        stragglers=("independent",),
        num_requests=4000,
        error_requests=256,
        master_requests=0,
        spot_requests=0,
        nercc_smoothing=(1e-4, 1e-4),
        n_fractions=(0.0, 0.5, 1.0),
    )
    return run_regimes(cfg, show_progress=False)


def _rows(summary):
    return {r["scheme"]: r for r in summary["cells"][0]["workloads"]["deep"]["rows"]}


def test_every_scheme_has_a_row_in_every_cell(summary):
    assert len(summary["cells"]) == 1
    for cell in summary["cells"]:
        for block in cell["workloads"].values():
            assert [r["scheme"] for r in block["rows"]] == SCHEMES
            for r in block["rows"]:
                if not r["applies"]:
                    assert r["reason"].startswith("does not apply: ")
                    continue
                lat = r["latency_ms"]
                assert 0 < lat[50] <= lat[99] <= lat[99.9] < np.inf
                # a request waits for its last query: never before its p99 query
                assert lat[99] <= r["request_ms"][99] + 1e-9
                assert np.isfinite(r["error_median"])
                assert r["layout"].startswith(r["variant"] + " K'=")
                k, m = r["group_inputs"], r["group_workers"]
                assert r["work_per_query"] == pytest.approx(m / k)
                assert r["groups"] * k >= cell["K"]  # the K queries served at once
            reasons = {r["scheme"]: r.get("reason") for r in block["rows"]}
            assert "not a polynomial" in reasons["chebyls"]
            rows = {r["scheme"]: r for r in block["rows"]}
            assert (
                rows["uncoded"]["meets_target"] and rows["replication"]["meets_target"]
            )
    assert summary["winners"] and summary["headline"]
    # BACC was searched over its systematic variant and K' = 2 (groups of 3)
    tried = {t["layout"] for t in _rows(summary)["bacc"]["tried"]}
    assert "bacc K'=4 M'=6" in tried and len(tried) >= 2
    assert tried <= {"bacc K'=4 M'=6", "bacc systematic K'=4 M'=6",
                     "bacc K'=2 M'=3 x2", "bacc systematic K'=2 M'=3 x2"}  # fmt: skip


def test_half_groups_serve_a_cell_a_whole_lagrange_code_cannot():
    layouts, reasons = cell_search(4, 6, workload("cross1"), (0.0, 0.0))
    # one cross layer: D = 2 (K - 1) + 1 = 7 > M = 6 on the whole cell, but
    # D = 3 = M' for K' = 2 queries on groups of 3 workers
    for name in ("chebyls", "threshold", "graceful"):
        assert name not in reasons
        assert {lay.group_inputs for lay in layouts[name]} == {2}
        assert all(lay.groups == 2 and lay.idle == 0 for lay in layouts[name])
    assert [lay.name for lay in layouts["threshold"]] == ["threshold K'=2 M'=3 x2"]
    layouts, reasons = cell_search(4, 6, workload("cross2"), (0.0, 0.0))
    for name in ("chebyls", "threshold", "graceful"):  # D = 10, and 4 > 3
        assert reasons[name] == "does not apply: M = 6 < D = 10 (degree 3)"
    assert [lay.name for lay in layouts["parity"]] == ["parity k=2 K'=4 M'=6"]
    assert [lay.name for lay in layouts["uncoded"]] == ["uncoded K'=4 M'=4"]


def test_layerwise_coding_is_decoded_round_by_round():
    # one cross layer (one round): the master decodes x0 W and applies the cross
    # term itself; decoding the whole layer as one degree-1 code would miss
    cfg = RegimesConfig(
        num_inputs=(4,), ratios=(1.5,), workloads=("cross1",),
        stragglers=("independent",), num_requests=1000, error_requests=64,
        master_requests=0, spot_requests=0, nercc_smoothing=(1e-4, 1e-4),
        n_fractions=(1.0,),
    )  # fmt: skip
    cell = Cell(cfg, 4, 6, "independent", names=("uncoded", "layerwise"))
    block = workload_rows(cell, "cross1")
    assert [r["scheme"] for r in block["rows"]] == ["uncoded", "layerwise"]
    lw = block["rows"][1]
    assert (lw["layout"], lw["n"]) == ("layerwise K'=4 M'=6", 6)
    assert lw["meets_target"] and lw["error_median"] <= block["target"]


def test_baseline_latencies_are_the_per_query_delays(summary):
    cell = summary["cells"][0]  # independent stragglers, K = 4, M = 6
    delays, _ = Injector(latency=latency_model("independent", 6), seed=0).plan(
        np.arange(4000), 6
    )
    rows = _rows(summary)
    # uncoded: K' = M' = 4 spread over the 6 (Layout.placement: workers 0, 1, 3,
    # 4); replication: query q on workers q and q + 4 (q < 2)
    uncoded = delays[:, [0, 1, 3, 4]]
    repl = np.concatenate(
        [np.minimum(delays[:, :2], delays[:, 4:6]), delays[:, 2:4]], axis=1
    )
    for name, t in (("uncoded", uncoded), ("replication", repl)):
        for q in (50, 99, 99.9):
            np.testing.assert_allclose(
                rows[name]["latency_ms"][q], 1e3 * np.percentile(t, q), rtol=1e-12
            )
        np.testing.assert_allclose(
            rows[name]["request_ms"][99],
            1e3 * np.percentile(t.max(axis=1), 99),
            rtol=1e-12,
        )
    assert cell["latency"] == latency_text("independent", 6, 0)


def test_the_planner_chooses_what_the_map_chooses(summary):
    """The same cell (K = 4, M = 6, the map's independent stragglers, seed 0,
    4,000 requests) in both applications, with the schemes both can judge alike
    (the planner's deep workload is its own ReLU network; ParM's parity model
    misses both targets on a ReLU network): one rule (runkit.choice), the same
    layouts and the same per-query latencies."""
    names = ("uncoded", "replication", "parity")
    piece = copy.deepcopy(summary)
    block = piece["cells"][0]["workloads"]["deep"]
    block["rows"] = [r for r in block["rows"] if r["scheme"] in names]
    (w,) = winners(piece)
    cfg = tp.PlanConfig(
        workers=6, inputs=4, degree=1, workload="deep", target_error=2e-2,
        failure=0.05, latency=latency_text("independent", 6, 0),
        schemes=",".join(names), scheme_requests=4000, progress=False, seed=0,
    )  # fmt: skip
    sc = tp.scheme_table(cfg, None)
    assert (sc["choice"], sc["choice_layout"]) == (w["winner"], w["winner_layout"])
    assert w["winner"] == "replication"  # uncoded is slower, ParM misses
    plan_rows = {r["scheme"]: r for r in sc["rows"]}
    for r in block["rows"]:
        p = plan_rows[r["scheme"]]
        assert p["layout"] == r["layout"]
        assert 1e3 * p["p99"] == pytest.approx(r["latency_ms"][99], rel=1e-12)
        assert p["meets"] == r["meets_target"]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--ratios", "0.5"], "ratios"),
        (["--stragglers", "sunny"], "stragglers"),
        (["--k", "1"], "--k"),
    ],
)
def test_bad_options_exit_with_one_line(argv, flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", str(tmp_path)])
    assert e.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err and "Traceback" not in err


def _piece(summary, straggler):
    """The fixture's run as the piece of a grid with another straggler label (the
    merge only reads the labels; no number of it is claimed for that model)."""
    s = copy.deepcopy(summary)
    s["config"]["stragglers"] = (straggler,)
    for c in s["cells"]:
        c["straggler"] = straggler
    return s


def test_pieces_of_a_grid_merge_into_one_map(summary, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    runkit.write_summary(a / "summary.json", summary)
    runkit.write_summary(b / "summary.json", _piece(summary, "persistent"))
    merged = main(["--merge", str(a), str(b), "--out", str(tmp_path / "m")])
    assert [c["straggler"] for c in merged["cells"]] == ["independent", "persistent"]
    # read back from strict JSON, the winners are those of the runs themselves
    want = winners(summary) + winners(_piece(summary, "persistent"))
    assert [
        (w["straggler"], w["winner"], w["winner_n"]) for w in merged["winners"]
    ] == [(w["straggler"], w["winner"], w["winner_n"]) for w in want]
    for u, v in zip(merged["winners"], want, strict=True):
        np.testing.assert_allclose(u["winner_p99_ms"], v["winner_p99_ms"], rtol=1e-12)
    report = (tmp_path / "m" / "report.md").read_text()
    assert "### deep, persistent" in report and "### deep, independent" in report
    # the same cell twice, or runs with different settings: one line naming why
    for argv, why in (
        (["--merge", str(a), str(a)], "is in run 0 and run 1"),
        (["--merge", str(a)], "at least 2 summaries"),
    ):
        with pytest.raises(SystemExit):
            main([*argv, "--out", str(tmp_path / "x")])
        assert why in capsys.readouterr().err.strip().splitlines()[-1]
    other = _piece(summary, "racks")
    other["config"]["num_requests"] += 1
    with pytest.raises(ValueError, match="differ in num_requests"):
        merge_summaries([summary, other])
