"""The whole serving benchmark: every table, the targets, the outputs."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, TypedDict

from runkit import environment

from .config import ServingConfig
from .floor import run_engine_floor
from .report import write_outputs
from .simulated import run_simulated, run_simulated_linear
from .threads import run_engine_overhead, run_threads, run_throughput

__all__ = ["ServingSummary", "run_serving", "targets"]


class ServingSummary(TypedDict, total=False):
    """What :func:`run_serving` returns (``summary.json``): per scheme the latency
    percentiles, overheads and decoded errors on the thread cluster (``threads``),
    the throughput, the engine's own cost (and against the fan-out floor at
    several M, every policy: ``engine_floor``), the simulator's tables
    (independent, rack and linear stragglers) and the targets (measured, not
    asserted)."""

    config: dict[str, Any]
    environment: dict[str, Any]
    threads: dict[str, Any]
    throughput: dict[str, Any]
    engine_overhead: dict[str, Any]
    engine_floor: dict[str, Any]
    simulated: dict[str, Any]
    simulated_racks: dict[str, Any]
    simulated_linear: dict[str, Any]
    targets: dict[str, Any]
    seconds: float


def run_serving(
    cfg: ServingConfig,
    *,
    out: str | Path | None = None,
    show_progress: bool | None = None,
    ray: bool = False,
) -> ServingSummary:
    """Runs the whole benchmark and returns (and optionally writes) its summary."""
    t0 = time.perf_counter()
    summary: dict[str, Any] = {"config": dataclasses.asdict(cfg),
                               "environment": environment()}  # fmt: skip
    summary["threads"] = run_threads(cfg, show_progress=show_progress)
    summary["throughput"] = run_throughput(cfg)
    summary["engine_overhead"] = run_engine_overhead(cfg, ray=ray)
    summary["engine_floor"] = run_engine_floor(cfg)
    summary["simulated"] = run_simulated(cfg)
    summary["simulated_racks"] = run_simulated(cfg, rack=True)
    summary["simulated_linear"] = run_simulated_linear(cfg)
    summary["targets"] = targets(summary)
    summary["seconds"] = time.perf_counter() - t0
    if out is not None:
        write_outputs(summary, out)
    return summary


def targets(summary: dict) -> dict:
    """The benchmark's targets, measured (never asserted)."""
    th = summary["threads"]
    n30 = th.get("chebyls-30")
    res = {
        "overhead_p50_ms": max(v["overhead_ms"][50] for v in th.values()),
        "overhead_p50_target_ms": 3.0,
        "release_p99_ms": max(
            v["release_ms"][99] for v in th.values() if v["released"]
        ),  # fmt: skip
        "release_p99_target_ms": 1.0,
    }
    floor = summary.get("engine_overhead", {}).get("fanout_floor")
    if floor is not None:  # for reference: the engine's cost is judged below
        res["fanout_floor_p50_ms"] = floor["latency_ms"][50]
    table = summary.get("engine_floor", {})
    for m, row in table.items():
        # the engine with a no-op worker against the floor of the same M, timed
        # in turns with it: its own cost (latency - the code's encode and
        # decodes), target 2. (Not the jitted workers' overhead over one floor
        # timing: that ratio swung from 1.2 to 7.1 between runs with the floor's
        # one timing, and held the workers' own JAX calls.)
        for name in ("FixedN", "FirstDecodable"):
            if name in row:
                res[f"engine_over_floor_p50_{name}_M{m}"] = row[name][
                    "engine_over_floor"
                ]
    if table:
        res["engine_over_floor_p50_target"] = 2.0
    if n30 is not None:
        ratio = n30["latency_ms"][99] / th["uncoded"]["latency_ms"][99]
        res["chebyls30_over_uncoded_p99"] = ratio
        res["chebyls30_over_uncoded_p99_target"] = 0.15
        sim = summary["simulated"]
        res["simulated_chebyls30_over_uncoded_p99"] = (
            sim["chebyls-30"]["latency_ms"][99] / sim["uncoded"]["latency_ms"][99]
        )
    return res
