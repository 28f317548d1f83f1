"""The whole map: every (K, M) and straggler model, the summary, the report."""

from __future__ import annotations

import dataclasses
import time

import runkit

from .config import RegimesConfig, latency_text
from .pipeline import run_block
from .report import winners, write_outputs
from .spotcheck import master_overhead, spot_check

__all__ = ["headline", "run_regimes"]


def headline(summary: dict) -> str:
    """Where coding beats replication at equal workers and equal accuracy, and
    where replication is the better choice (counts of cells, the best margins)."""
    ws = [w for w in winners(summary) if w["winner"]]
    coded = [w for w in ws if w["winner"] not in ("replication", "uncoded")]
    rep = [w for w in ws if w["winner"] == "replication"]
    lines = [
        f"{len(coded)} of {len(ws)} cells won by a coded scheme, {len(rep)} by "
        "replication (lowest p99 at the accuracy target)."
    ]
    best = sorted(coded, key=lambda w: -w["replication_over_coded"])[:3]
    for w in best:
        lines.append(
            f"  {w['winner']} (N = {w['winner_n']}): {w['workload']}, "
            f"{w['straggler']}, K = {w['K']}, M/K = {w['ratio']:g}: replication's "
            f"p99 is {w['replication_over_coded']:.2f}x the coded scheme's"
        )
    for w in sorted(rep, key=lambda w: -w["margin"])[:3]:
        lines.append(
            f"  replication: {w['workload']}, {w['straggler']}, K = {w['K']}, "
            f"M/K = {w['ratio']:g}: runner-up {w['runner_up']}'s p99 is "
            f"{w['margin']:.2f}x replication's"
        )
    return "\n".join(lines)


def run_regimes(
    cfg: RegimesConfig, *, out: str | None = None, show_progress: bool = True
) -> dict:
    """Runs the map; writes ``summary.json``, ``report.md`` and the winner maps to
    ``out`` when given."""
    t0 = time.perf_counter()
    grid = cfg.grid()
    cells = []
    total = len(grid) * len(cfg.stragglers) * len(cfg.workloads)
    with runkit.progress(total=total, desc="regimes", disable=not show_progress) as bar:
        for k, m in grid:
            for st in cfg.stragglers:
                blocks = run_block(cfg, k, m, st, progress=lambda: bar.update(1))
                cells.append(
                    {
                        "K": k,
                        "M": m,
                        "straggler": st,
                        "latency": latency_text(st, m, cfg.seed),
                        "workloads": blocks,
                    }
                )
    summary = {
        "config": dataclasses.asdict(cfg),
        "environment": runkit.environment(),
        "cells": cells,
    }
    if cfg.master_requests:
        summary["master_overhead"] = master_overhead(cfg)
    if cfg.spot_requests and 8 in cfg.num_inputs:
        summary["spot_check"] = spot_check(cfg, cfg.spot_requests)
    summary["winners"] = winners(summary)
    summary["headline"] = headline(summary)
    summary["seconds"] = time.perf_counter() - t0
    if out is not None:
        write_outputs(summary, out)
    return summary
