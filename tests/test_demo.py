"""The `make run` demo and the report collector, on a shrunken configuration."""

import json

from theory import collect, demo


def test_demo_runs_and_reports(tmp_path):
    # the command line of `make run` on a smaller cluster: K = 4, M = 16, degree 2
    # (D = 7), the same claims
    out = tmp_path / "demo"
    argv = "--inputs 4 --workers 16 --cross-layers 1 --masks 16 --responses 7 16"
    summary = demo.main(["--out", str(out), "--no-progress", *argv.split()])
    assert [r["N"] for r in summary["rows"]] == [7, 16]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["D"] == 7 and on_disk["config"]["num_workers"] == 16
    last = on_disk["rows"][-1]  # N = M = 16: every worker answered
    assert last["chebyls_ok_fraction"] == 1.0
    assert last["chebyls_bf16"]["median"] < last["threshold_bf16"]["median"]
    # float32 workers are decoded to float32 accuracy times a small condition number
    assert last["chebyls_float32"]["median"] < 1e-5
    assert "| 16 |" in (out / "report.md").read_text()

    text = collect.collect(str(tmp_path))
    assert "ChebyLS with all N=16 bf16 answers" in text
    assert "(not run: no `theory/report.md`)" in text
    assert (tmp_path / "report.md").exists()
