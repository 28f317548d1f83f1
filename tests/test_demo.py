"""The `make run` demo and the report collector, on a shrunken configuration."""

import json

from theory import collect, demo


def test_demo_runs_and_reports(tmp_path):
    out = tmp_path / "demo"
    summary = demo.main(["--out", str(out), "--masks", "16", "--responses", "22", "40"])
    assert [r["N"] for r in summary["rows"]] == [22, 40]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["D"] == 22
    last = on_disk["rows"][-1]  # N = M = 40: every worker answered
    assert last["chebyls_ok_fraction"] == 1.0
    assert last["chebyls_bf16"]["median"] < last["threshold_bf16"]["median"]
    # float32 workers are decoded to float32 accuracy times a small condition number
    assert last["chebyls_float32"]["median"] < 1e-5
    assert "| 40 |" in (out / "report.md").read_text()

    text = collect.collect(str(tmp_path))
    assert "ChebyLS with all N=40 bf16 answers" in text
    assert "(not run: no `theory/report.md`)" in text
    assert (tmp_path / "report.md").exists()
