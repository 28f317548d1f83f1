"""benchmarks.schemes: every code on the same masks, through the generic interface.

One small run (K = 4 on M = 6 = K + K/2 workers, ParM's count, so one panel; three
schemes, float32 workers, 4 requests per N) checks the command line end to end
against known truths: with every worker responding the exact codes decode the
linear map to float32 rounding and the circle code's cond is 1; below a code's
threshold the decode is not ok and its error inf (null in the JSON); ParM's
queries are counted one by one (the counting itself, on every mask:
tests/test_parity_experiment.py).
"""

import json
import math

import pytest

from benchmarks import schemes as bs


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("schemes")
    argv = ["--out", str(out), "--no-progress", "--trials", "4", "--n-step", "20"]
    argv += ["--inputs", "4", "--workers", "6", "--dtypes", "float32"]
    argv += ["--schemes", "chebyls,circle-packed,parity", "--workloads", "linear"]
    return bs.main(argv + ["--no-exhaustive"]), out


def test_the_panel_and_the_known_truths(small_run):
    summary, out = small_run
    (p,) = summary["panels"]
    assert bs.panel_key(p) == "linear-M6-float32"
    # the first N is the lowest threshold: the packed circle code's K/2 = 2
    assert [r["N"] for r in p["rows"]] == [2, 6]
    assert p["schemes"]["circle-packed"]["threshold_workers"] == 2
    assert p["schemes"]["circle-packed"]["work"] == 2
    full = p["rows"][-1]
    for name in ("chebyls", "circle-packed"):
        assert full[name]["ok"] == 1.0 and full[name]["err_median"] < 1e-5, name
    assert full["circle-packed"]["cond_worst"] == pytest.approx(1.0, abs=1e-5)
    assert p["rows"][0]["circle-packed"]["ok"] == 1.0
    assert summary["parity_code"] == hasattr(bs.cj, "parity_code")
    text = (out / "report.md").read_text()
    assert "## linear-M6-float32" in text and "Which scheme wins where" in text
    on_disk = json.loads((out / "summary.json").read_text())
    err = on_disk["panels"][0]["rows"][0]["chebyls"]["err_median"]
    # below chebyls' threshold (4) a failed decode is inf, written as null
    first = p["rows"][0]["chebyls"]
    assert err is None and math.isinf(first["err_median"]) and first["ok"] == 0.0


def test_parm_is_counted_per_query(small_run):
    """ParM (k = 2, M = 6): no request is whole from N = 2 answers (a whole one
    needs each group to lose at most one of its three workers: 4 answers), yet
    every request in which a base worker answered has an answered query; at N = M
    every query is answered, exactly (the linear map is its own parity model)."""
    summary, out = small_run
    (p,) = summary["panels"]
    assert p["schemes"]["parity"]["decoding"] == "per group"
    assert p["schemes"]["chebyls"]["decoding"] == "all or nothing"
    low, full = p["rows"][0]["parity"], p["rows"][-1]["parity"]
    assert low["whole"] == low["ok"] == 0.0 and math.isinf(low["err_median"])
    assert 0.0 < low["answered"] < 1.0
    assert full["answered"] == full["whole"] == 1.0 and full["err_median"] < 1e-5
    for row in p["rows"]:  # a code decoding all or nothing: answered = whole = ok
        c = row["chebyls"]
        assert c["answered"] == c["whole"] == c["ok"], row["N"]
    text = (out / "report.md").read_text()
    assert "parity (thr 4, work 1, per-group decoding)" in text
    assert "queries answered (in brackets" in text
    assert f"| 2 | 0 (0) | 1 | {bs.report._fmt(low['answered'])} (0) |" in text
    assert "Answered per query: parity (per group)" in summary["verdict"]


def test_schemes_follow_the_function_class_and_the_worker_count():
    lin = {s.name for s in bs.schemes(8, 40, 1, "bfloat16")}
    cubic = {s.name for s in bs.schemes(8, 40, 3, "bfloat16")}
    assert {"circle-packed", "random", "chebyls-2q", "replication"} <= lin
    assert "random" not in cubic and "circle-packed" not in cubic
    assert {"circle", "circle-threshold", "chebyls", "threshold"} <= cubic
    # at ParM's M = 12 the degree-3 Lagrange codes (D = 22) do not fit
    assert not {"chebyls", "circle"} & {s.name for s in bs.schemes(8, 12, 3, "float32")}


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--dtypes", "int8"], "--dtypes"),
        (["--schemes", "nothing"], "--schemes"),
        (["--trials", "x"], "--trials"),
    ],
)
def test_bad_options_exit_with_one_line(tmp_path, capsys, argv, flag):
    with pytest.raises(SystemExit) as exc:
        bs.main(["--out", str(tmp_path), "--no-exhaustive", "--inputs", "2"] + argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err
