"""The serving benchmark's tables and ``report.md``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from runkit import write_report

from .floor import format_floor

__all__ = ["format_tables", "write_outputs"]


def _f(v, fmt="{:.2f}") -> str:
    return (
        "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)
    )


def format_tables(summary: dict) -> str:
    """Every table of the report."""
    lines = []
    th = summary["threads"]
    lo = min(v["loadavg_min"] for v in th.values())
    hi = max(v["loadavg_max"] for v in th.values())
    lines.append(
        f"Thread cluster ({next(iter(th.values()))['requests']} requests per scheme, "
        f"one in flight, the schemes in turn; load average {lo:.1f}-{hi:.1f} on "
        f"{summary['environment']['cpu_count']} CPUs)"
    )
    lines.append("| scheme | M | p50 ms | p99 ms | p99.9 ms | ideal p50 | ideal p99 | "
                 "overhead p50 | overhead p99 | answer late p50 | encode+decode p50 | "
                 "release p99 ms | N used | err median | err p95 | ok |")  # fmt: skip
    lines.append("|" + "---|" * 16)
    for name, v in th.items():
        lat, ide, ov, rel = (v["latency_ms"], v["ideal_ms"], v["overhead_ms"],
                             v["release_ms"])  # fmt: skip
        lines.append(
            f"| {name} | {v['num_workers']} | {_f(lat[50])} | {_f(lat[99])} | "
            f"{_f(lat[99.9])} | {_f(ide[50])} | {_f(ide[99])} | {_f(ov[50])} | "
            f"{_f(ov[99])} | {_f(v['answer_late_ms'][50])} | "
            f"{_f(v['encode_decode_ms'][50])} | {_f(rel[99], '{:.3f}')} | "
            f"{v['num_used_median']:.0f} | "
            f"{_f(v['error_median'], '{:.2e}')} | {_f(v['error_p95'], '{:.2e}')} | "
            f"{v['ok_fraction']:.3f} |"
        )
    tp = summary["throughput"]
    lines.append("")
    lines.append("Throughput (" + next(iter(tp.values()))["scheme"] + "): " + "; ".join(
        f"{v['max_in_flight']} in flight: {v['requests_per_second']:.1f} req/s, "
        f"p50 {v['latency_ms'][50]:.1f} ms, p99 {v['latency_ms'][99]:.1f} ms"
        for v in tp.values()))  # fmt: skip
    eo = summary.get("engine_overhead", {})
    if eo:
        lines.append("")
        parts = [
            f"{k}: p50 {v['latency_ms'][50]:.1f} ms, p99 {v['latency_ms'][99]:.1f} ms"
            f" (load {v['loadavg']:.1f})"
            for k, v in eo.items()
            if k != "fanout_floor"
        ]
        if "fanout_floor" in eo:
            v = eo["fanout_floor"]
            parts.append(
                f"floor (bare fan-out and gather of M no-op tasks, same run): p50 "
                f"{v['latency_ms'][50]:.2f} ms, p99 {v['latency_ms'][99]:.2f} ms"
            )
        lines.append(
            "Engine cost, no injected delay, all M answers: " + "; ".join(parts)
        )
    if summary.get("engine_floor"):
        lines.append("")
        lines += format_floor(summary["engine_floor"])
    racks = f"racks of {summary['config']['rack_size']} workers slow together"
    k = summary["config"]["num_inputs"]
    linear = (f"fewer workers: f(x) = 2x - 1 (degree 1, D = K = {k}), "
              f"M = {2 * k}, replication c = 2")  # fmt: skip
    for key, title in (
        ("simulated", "independent stragglers"),
        ("simulated_racks", racks),
        ("simulated_linear", linear),
    ):
        sim = summary[key]
        lines.append("")
        lines.append(f"Simulator, zero overhead, {title}")
        lines.append("| scheme | requests | p50 ms | p99 ms | p99.9 ms | N used | "
                     "err median | err p95 | ok |")  # fmt: skip
        lines.append("|" + "---|" * 9)
        for name, v in sim.items():
            lat = v["latency_ms"]
            lines.append(
                f"| {name} | {v['requests']} | {_f(lat[50])} | {_f(lat[99])} | "
                f"{_f(lat[99.9])} | {v['num_used_median']:.0f} | "
                f"{_f(v['error_median'], '{:.2e}')} | {_f(v['error_p95'], '{:.2e}')} "
                f"| {v['ok_fraction']:.4f} |"
            )
    calls = {k: v for k, v in th.items() if v.get("released_in_call")}
    if calls:
        lines.append("")
        lines.append("Stragglers cancelled inside their jitted call (free when it "
                     "returns): " + "; ".join(
            f"{k}: {v['released_in_call']} of {v['released']}, p99 "
            f"{_f(v['release_in_call_ms'][99], '{:.3f}')} ms"
            for k, v in calls.items()))  # fmt: skip
    t = summary["targets"]
    lines.append("")
    lines.append("Targets (measured, not asserted): " + json.dumps(
        {k: round(v, 4) for k, v in t.items()}))  # fmt: skip
    return "\n".join(lines)


def write_outputs(summary: dict, out: str | Path) -> None:
    """``summary.json`` and ``report.md`` in ``out``."""
    text = "# Serving benchmark\n\n" + format_tables(summary) + "\n"
    write_report(out, summary, text)
