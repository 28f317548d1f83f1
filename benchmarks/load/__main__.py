"""``python -m benchmarks.load [--quick] --out DIR``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import runkit

from .config import DELAY_MODELS, LoadConfig
from .report import format_tables, write_outputs
from .sweep import run_load

FLAGS = {
    "workers": ("--workers", {"help": "cluster sizes M, e.g. 10,12,16,40"}),
    "delays": ("--delays", {"help": f"delay models, of {','.join(DELAY_MODELS)}"}),
    "num_queries": ("--queries", {"help": "queries per simulated point"}),
    "p99_target": ("--p99-target", {"help": "seconds (default 0.05)"}),
    "noloss_queries": ("--noloss-queries", {"help": "queries of the no-loss run"}),
    "check_delay": ("--check-delay", {"help": "delay model of the thread checks"}),
    "check_workers": ("--check-workers", {"help": "M of the thread checks"}),
    "thread_rates": (
        "--thread-rates",
        {"help": "the thread checks' rates, as fractions of a scheme's sustained rate"},
    ),
}


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.load",
        description="Latency against offered load for coded serving, uncoded "
        "serving and replication on a fixed cluster (K = 8).",
    )
    runkit.add_run_arguments(p, out="results/load", quick="10,000 queries per "
                             "point, one delay model")  # fmt: skip
    runkit.add_config_arguments(p, LoadConfig, FLAGS)
    a = p.parse_args(argv)
    over = runkit.config_overrides(a, LoadConfig)
    over["seed"] = a.seed
    make = LoadConfig.quick if a.quick else LoadConfig
    cfg = runkit.make_config(p, FLAGS, make, **over)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = run_load(
        cfg,
        show_progress=not a.no_progress,
        partial=lambda obj: runkit.write_summary(out / "partial.json", obj),
    )
    summary["config"] = dataclasses.asdict(cfg)
    summary["environment"] = runkit.environment()
    summary = write_outputs(summary, a.out)
    print(format_tables(summary))
    print(f"wrote {a.out}/summary.json, report.md and p99_vs_load.png "
          f"({summary['seconds']:.0f} s)", file=sys.stderr)  # fmt: skip
    return summary


if __name__ == "__main__":
    main()
