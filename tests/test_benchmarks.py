"""A tiny run of the benchmark harness: records, checks, report (no timing claims)."""

import json

import numpy as np
import pytest

from benchmarks import cases as bc
from benchmarks.harness import Built, Case, floor_fraction, run_case
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
            "device_name",
            "fraction_of_floor",
            "fraction_of_floor_p25",
            "fraction_of_floor_p75",
            "matmul_rate_flops",
        ):
            assert key in r, key
        assert r["codedjax_ok"] is True
        assert any(k.startswith("ratio_vs_") for k in r)
    # the cond statistics come from the case's own checked output
    cheb = json.loads(lines[0])
    assert 0.0 < cheb["cond_ratio_median"] <= cheb["cond_ratio_max"]
    assert 0.0 <= cheb["cond_within_1e-3"] <= 1.0
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


def test_floor_fraction_is_per_round_so_a_load_change_cancels():
    # round 2 runs under twice the load: the case AND the probe take twice as long,
    # so its floor doubles with its time and the fraction is unchanged
    r = floor_fraction(1e9, [0.01, 0.02, 0.01], [0.001, 0.002, 0.001], 1e8)
    assert r["fraction_of_floor"] == pytest.approx(1.0)
    assert r["fraction_of_floor_min"] == pytest.approx(1.0)
    assert r["fraction_of_floor_max"] == pytest.approx(1.0)
    assert r["matmul_rate_flops"] == pytest.approx(1e11)
    assert r["floor_s"] == pytest.approx(0.01)
    # a case that gets slower while the probe does not: a lower fraction
    r = floor_fraction(1e9, [0.01, 0.04], [0.001, 0.001], 1e8)
    assert r["fraction_of_floor_min"] == pytest.approx(0.25)
    assert r["fraction_of_floor_max"] == pytest.approx(1.0)


def test_profile_charges_nested_spans_once():
    from benchmarks.profile_decode import _self_times

    # a loop (0-100 us) holding two operations, and one more on another thread
    events = [
        {"name": "while.1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
        {"name": "geqrf", "ts": 10, "dur": 30, "pid": 1, "tid": 1},
        {"name": "geqrf", "ts": 50, "dur": 20, "pid": 1, "tid": 1},
        {"name": "dot.2", "ts": 120, "dur": 5, "pid": 1, "tid": 1},
        {"name": "dot.2", "ts": 20, "dur": 7, "pid": 1, "tid": 2},
    ]
    own = _self_times(events)
    assert own == {"while.1": 50.0, "geqrf": 50.0, "dot.2": 12.0}


def test_profile_stages_are_the_kernels_named_scopes():
    # every stage the profiler reports is a named scope of the compiled decode (a
    # renamed scope would silently move its time to "other")
    import jax
    import jax.numpy as jnp

    import codedjax as cj
    from benchmarks.profile_decode import STAGES, _op_scopes

    m, d = 12, 5
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(2)
    masks = cj.sample_masks(
        # 16 masks: the semi-normal kernel whose stages the profiler reports (fewer
        # masks use the QR kernel: docs/decoding.md, "The batched kernels")
        jax.random.key(0),
        num_workers=m,
        num_responses=10,
        shape=(16,),
    )
    y = jnp.ones((m, 8), jnp.float32)
    hlo = (
        jax.jit(
            lambda yy, ms: cj.chebyls_decode_batched(yy, ms, alpha, beta, num_coeffs=d)
        )
        .lower(y, masks)
        .compile()
        .as_text()
    )
    found = set(_op_scopes(hlo).values())
    assert set(STAGES) <= found, set(STAGES) - found
    # the stages' operation counts are the harness's floor, stage by stage
    per_stage = bc.chebyls_flops_per_mask(40, 22, 8, 64)
    assert set(per_stage) <= set(STAGES)
    m, d, k, f, p = 40, 22, 8, 64, 22 * 23 // 2
    whole = (  # the kernel's count written out in one sum (cases.py)
        2 * m * p + 3 * p * d + 4 * k * d * d + 6 * k * d * m + 20 * d * d
        + 26 * m * d + 32 * m * d + 16 * d * d + 2 * m * f + 2 * k * m * f
    )  # fmt: skip
    assert sum(per_stage.values()) == whole


def test_latency_dispatch_modes_and_their_table():
    from benchmarks.latency import LatencyConfig, _case_table

    assert LatencyConfig().modes == ("async", "sync")
    assert LatencyConfig(dispatch="sync").modes == ("sync",)
    with pytest.raises(ValueError, match="LatencyConfig: dispatch must be"):
        LatencyConfig(dispatch="eager")
    # one row per variant, each mode's median and p99 side by side
    res = {
        m: {"case": {"decode/code": {"median_us": v, "p99_us": 2 * v, "max_err": 1e-7},
                     "decode/code_over_numpy": {"median": 1.0, "p99": 1.0}}}
        for m, v in (("async", 100.0), ("sync", 60.0))
    }  # fmt: skip
    lines = _case_table(res, "case", ("async", "sync"))
    assert "async median (us)" in lines[0] and "sync p99 (us)" in lines[0]
    assert lines[2] == "| decode/code | 100 | 200 | 60 | 120 | 1.0e-07 |"
