"""benchmarks.regimes on a tiny grid: every scheme has a row (a reason where it
does not apply), latencies agree with the delays drawn directly, bad options exit
with one line."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import runkit
from benchmarks.regimes import (
    RegimesConfig,
    cell_schemes,
    latency_model,
    merge_summaries,
    run_regimes,
    winners,
    workload,
)
from benchmarks.regimes.__main__ import main
from codedjax.serving import Injector

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
        stragglers=("persistent",),
        num_requests=4000,
        error_requests=256,
        master_requests=0,
        spot_requests=0,
        nercc_smoothing=(1e-4, 1e-4),
        n_fractions=(0.0, 0.5, 1.0),
    )
    return run_regimes(cfg, show_progress=False)


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
                assert np.isfinite(r["error_median"])
            reasons = {r["scheme"]: r.get("reason") for r in block["rows"]}
            assert "not a polynomial" in reasons["chebyls"]
            rows = {r["scheme"]: r for r in block["rows"]}
            assert (
                rows["uncoded"]["meets_target"] and rows["replication"]["meets_target"]
            )
    assert summary["winners"] and summary["headline"]


def test_a_lagrange_code_below_its_threshold_says_so():
    rows = cell_schemes(4, 6, workload("cross1"), (0.0, 0.0))
    assert [r.name for r in rows] == SCHEMES
    # M = 6 < D = 2 (K - 1) + 1 = 7 for one cross layer
    for r in rows[2:5]:
        assert r.code is None and r.reason == "does not apply: M = 6 < D = 7 (degree 2)"
    assert all(r.reason is None for r in rows[5:])


def test_baseline_latencies_are_the_order_statistics_of_the_delays(summary):
    cell = summary["cells"][0]  # persistent stragglers, K = 4, M = 6
    delays, _ = Injector(latency=latency_model("persistent", 6), seed=0).plan(
        np.arange(4000), 6
    )
    rows = {r["scheme"]: r for r in cell["workloads"]["deep"]["rows"]}
    uncoded = delays[:, :4].max(axis=1)
    # replication: query q on workers q, q + 4; done when every query has one
    repl = np.maximum(
        np.minimum(delays[:, 0], delays[:, 4]), np.minimum(delays[:, 1], delays[:, 5])
    )
    repl = np.maximum(repl, delays[:, 2:4].max(axis=1))
    for name, t in (("uncoded", uncoded), ("replication", repl)):
        for q in (50, 99, 99.9):
            np.testing.assert_allclose(
                rows[name]["latency_ms"][q], 1e3 * np.percentile(t, q), rtol=1e-12
            )


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
    runkit.write_summary(b / "summary.json", _piece(summary, "independent"))
    merged = main(["--merge", str(a), str(b), "--out", str(tmp_path / "m")])
    assert [c["straggler"] for c in merged["cells"]] == ["persistent", "independent"]
    # read back from strict JSON, the winners are those of the runs themselves
    want = winners(summary) + winners(_piece(summary, "independent"))
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
