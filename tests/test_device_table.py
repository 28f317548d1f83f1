"""benchmarks.device_table: the accelerator table's command, run on CPU.

The quick form runs through ``main(argv)`` at its tiniest sizes (one benchmark
case, one latency call, two training steps, two requests per N); the page and
``summary.json`` must hold every part with status ``ok``, headed by the command.
Asking for a platform jax does not see ends at once in one line naming
``--device``, before any work.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import device_table as dt
from benchmarks import harness

# the DCNv2 training (optax) mixes a Python float with an int32 step count
pytestmark = pytest.mark.loose_promotion

TINIEST = ["--quick", "--no-progress", "--only", "encode", "--calls", "1"]
TINIEST += ["--train-steps", "2", "--trials", "2", "--repeats", "1"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("device")
    page = out / "pages" / "device-cpu.md"
    argv = ["--device", "cpu", "--out", str(out / "run"), *TINIEST]
    summary = dt.main(argv + ["--results-page", str(page)])
    return summary, out, page, argv


def test_every_part_runs_ok_and_is_on_the_page(quick_run):
    summary, out, page, argv = quick_run
    assert [p["part"] for p in summary["parts"]] == list(dt.PARTS)
    bad = {p["part"]: p.get("error") for p in summary["parts"] if p["status"] != "ok"}
    assert not bad and summary["all_ok"]
    on_disk = json.loads((out / "run" / "summary.json").read_text())
    assert [(p["part"], p["status"]) for p in on_disk["parts"]] == [
        (name, "ok") for name in dt.PARTS
    ]
    assert on_disk["device"]["kind"] == "cpu" and on_disk["device"]["count"] >= 1
    assert on_disk["matmul_rate_flops"] > 0
    # the benchmark part ran the one case --only names, checked before timing
    (record,) = on_disk["parts"][0]["records"]
    assert record["case"].startswith("encode[") and record["codedjax_ok"]
    assert any(k.startswith("ratio_vs_") for k in record)
    text = page.read_text()
    assert text == (out / "run" / "report.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# Accelerator table: cpu"
    assert f"`python -m benchmarks.device_table {' '.join(argv)}" in text
    assert "git `" in text and "UTC" in text and "GFLOP/s" in text
    rows = [ln for ln in lines if ln.startswith("| ") and ln.endswith(" ok |")]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == list(dt.PARTS)


def test_a_failing_part_is_a_row_and_the_rest_still_run(monkeypatch):
    def broken(cfg, state):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(dt, "PARTS", {"floor": broken, "schemes": dt.PARTS["schemes"]})
    cfg = dt.DeviceTableConfig.quick(device="cpu", trials=2)
    summary = dt.run_table(cfg)
    floor, schemes = summary["parts"]
    assert floor["status"] == "failed" and "no such kernel" in floor["error"]
    assert schemes["status"] == "ok" and not summary["all_ok"]
    page = dt.format_page(summary, "python -m benchmarks.device_table")
    assert "failed: RuntimeError: no such kernel" in page
    assert "not measured (the floor part failed)" in page


@pytest.mark.parametrize("kind", ["gpu", "tpu"])
def test_a_device_jax_does_not_see_exits_in_one_line(tmp_path, capsys, kind):
    if harness._devices_or_none(kind):
        pytest.skip(
            f"checks the refusal on a machine without a {kind}; this one has one"
        )
    with pytest.raises(SystemExit) as info:
        dt.main(["--device", kind, "--quick", "--out", str(tmp_path / "o")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "error: --device:" in err[0] and f"no {kind} device" in err[0]
    assert harness.WHEELS[kind] in err[0]
    assert not (tmp_path / "o").exists()  # nothing was run or written


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--calls", "0"], "--calls"),
        (["--train-steps", "0"], "--train-steps"),
        (["--only", "no-such-case"], "--only"),
        (["--results-page", "page.txt"], "--results-page"),
    ],
)
def test_bad_options_exit_with_one_line(tmp_path, capsys, argv, flag):
    with pytest.raises(SystemExit) as info:
        dt.main(["--device", "cpu", "--quick", "--out", str(tmp_path), *argv])
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"error: {flag}:" in line
