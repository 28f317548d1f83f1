"""One map from several runs: ``python -m benchmarks.regimes --merge DIR ...``.

A map over the whole grid is long to run on one machine (hours at K = 32). It can be
run in pieces (``--k 32 --ratios 1.25``, ``--k 32 --ratios 1.5``, ...) on one or
several machines and merged: the cells are put together, and the winners, the
headline, the report and the winner maps are recomputed from them. The pieces must
share every setting that changes a cell's numbers (requests, decoded requests,
accuracy target, N grid, NeRCC's tuning, width, seed); their grids must not
overlap.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from .report import winners, write_outputs

__all__ = ["merge_summaries", "merge_dirs"]

# settings that change the numbers of a cell: pieces must agree on them
_SHARED = (
    "width",
    "num_requests",
    "error_requests",
    "error_factor",
    "n_fractions",
    "nercc_responses",
    "nercc_groups",
    "nercc_smoothing",
    "seed",
)


def _ordered_union(seqs):
    out = []
    for s in seqs:
        out += [v for v in s if v not in out]
    return out


def merge_summaries(summaries: list[dict]) -> dict:
    """The summary of the union of several runs' cells (see the module docstring).

    Raises:
        ValueError: fewer than two summaries, a setting of ``_SHARED`` that differs,
            or a cell (K, M, straggler model) present in two of them.
    """
    from .run import headline  # run imports this module's siblings only

    if len(summaries) < 2:
        raise ValueError(
            f"merge_summaries: expected at least 2 summaries, got {len(summaries)}"
        )
    cfgs = [s["config"] for s in summaries]
    for name in _SHARED:
        vals = [c.get(name) for c in cfgs]
        if any(v != vals[0] for v in vals):
            raise ValueError(
                f"merge_summaries: the runs differ in {name} ({vals}); a merged "
                "map needs the same setting in every run"
            )
    seen = {}
    cells = []
    for i, s in enumerate(summaries):
        for c in s["cells"]:
            key = (c["K"], c["M"], c["straggler"])
            if key in seen:
                raise ValueError(
                    f"merge_summaries: cell K = {key[0]}, M = {key[1]}, "
                    f"{key[2]} is in run {seen[key]} and run {i}"
                )
            seen[key] = i
            cells.append(c)
    cells.sort(key=lambda c: (c["K"], c["M"] / c["K"]))
    cfg = dict(cfgs[0])
    cfg["num_inputs"] = sorted({k for c in cfgs for k in c["num_inputs"]})
    cfg["ratios"] = sorted({r for c in cfgs for r in c["ratios"]})
    for name in ("workloads", "stragglers"):
        cfg[name] = _ordered_union(c[name] for c in cfgs)
    cfg["master_requests"] = max(c["master_requests"] for c in cfgs)
    cfg["spot_requests"] = max(c["spot_requests"] for c in cfgs)
    out = {
        "config": cfg,
        "environment": summaries[0]["environment"],
        "merged_from": len(summaries),
        "cells": cells,
    }
    spots = [r for s in summaries for r in s.get("spot_check") or []]
    if spots:
        out["spot_check"] = spots
    master = _master_overhead(
        [r for s in summaries for r in s.get("master_overhead") or []]
    )
    if master:
        out["master_overhead"] = master
    out["winners"] = winners(out)
    out["headline"] = headline(out)
    out["seconds"] = sum(s.get("seconds", 0.0) for s in summaries)
    return out


def _master_overhead(rows: list[dict]) -> list[dict]:
    """One row per (K, M, workload): every run measures the layer-wise master at
    its K's M = 2K, so pieces of one K measure the same thing; the merged row is
    the median of their medians (wall clock, so it varies with the machine's load),
    with ``runs`` saying of how many."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["K"], r["M"], r["workload"]), []).append(r)
    out = []
    for rs in groups.values():
        row = dict(rs[0])
        for name in ("master_ms_median", "master_ms_per_round"):
            row[name] = float(statistics.median(r[name] for r in rs))
        row["runs"] = len(rs)
        out.append(row)
    return out


_PERCENTILES = ("latency_ms", "request_ms", "thread_ms", "simulator_ms")


def _restore(obj):
    """A summary as written to JSON, back in the form the report reads: percentile
    tables keyed by float (50, 99, 99.9), a latency or error written as ``null``
    (infinite or NaN: strict JSON has neither) back as inf or NaN."""
    if isinstance(obj, list):
        return [_restore(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if k in _PERCENTILES and isinstance(v, dict):
            v = {float(q): math.inf if t is None else t for q, t in v.items()}
        elif isinstance(k, str) and k.startswith("error_") and v is None:
            v = math.nan
        out[k] = _restore(v)
    return out


def merge_dirs(dirs: list[str], out: str) -> dict:
    """Reads ``DIR/summary.json`` of every run, merges them and writes the merged
    ``summary.json``, ``report.md`` and winner maps to ``out``."""
    summaries = []
    for d in dirs:
        path = Path(d) / "summary.json"
        if not path.is_file():
            raise ValueError(f"--merge: no summary.json in {d}")
        summaries.append(_restore(json.loads(path.read_text())))
    merged = merge_summaries(summaries)
    write_outputs(merged, out)
    return merged
