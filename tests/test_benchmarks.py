"""A tiny run of the benchmark harness: records, checks, report (no timing claims)."""

import json

import numpy as np
import pytest

from benchmarks import cases as bc
from benchmarks.harness import Built, Case, run_case
from benchmarks.run import BenchConfig, run

pytestmark = pytest.mark.loose_promotion  # the DCN case runs flax code

TINY = [
    Case(
        "chebyls[tiny]",
        "chebyls",
        lambda: bc.BUILDERS["chebyls"](
            dict(M=12, N=10, D=5, K=2, F=4, B=8, dtype="float32")
        ),
    ),
    Case(
        "encode[tiny]",
        "encode",
        lambda: bc.BUILDERS["encode"](dict(code="berrut", K=4, M=12, F=16)),
    ),
    Case(
        "cond_mc[tiny]",
        "cond_mc",
        lambda: bc.BUILDERS["cond_mc"](dict(M=12, N=10, D=5, B=16)),
    ),
]


def test_harness_writes_records_with_environment_and_ratios(tmp_path):
    records = run(
        BenchConfig(out=str(tmp_path), repeats=1, min_seconds=0.0), case_list=TINY
    )
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(TINY) == len(records)
    for line in lines:
        r = json.loads(line)
        for key in (
            "case",
            "compile_s",
            "median_s",
            "backend",
            "device_kind",
            "jax_version",
            "git_revision",
            "codedjax_ok",
            "floor_s",
        ):
            assert key in r, key
        assert r["codedjax_ok"] is True
        assert any(k.startswith("ratio_vs_") for k in r)
    assert "| `chebyls[tiny]` |" in (tmp_path / "report.md").read_text()


def test_inaccurate_results_are_not_timed():
    def wrong():
        return Built(
            lambda x: x + 1.0,
            (np.zeros(3, np.float32),),
            lambda out: {
                "max_err": float(np.abs(out).max()),
                "ok": bool(np.abs(out).max() < 1e-6),
            },
            {"numpy": lambda: np.zeros(3)},
        )

    r = run_case(
        Case("wrong", "test", wrong), repeats=1, min_seconds=0.0, rate=1e9, env={}
    )
    assert r["median_s"] is None and "not timed" in r["error"]


def test_only_filter_and_case_names_hold_every_parameter():
    names = [c.name for c in bc.cases(quick=False)]
    assert "chebyls[M=40,N=30,D=22,K=8,F=64,B=4096,dtype=float32]" in names
    with pytest.raises(ValueError, match="matches no case"):
        run(BenchConfig(only="no-such-case"), case_list=TINY)
