"""``python -m benchmarks.load [--quick] --out DIR``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import runkit
from runkit.pages import report_page

from .config import DELAY_MODELS, LoadConfig
from .report import format_tables, write_outputs
from .sweep import run_load

FLAGS = {
    "workers": ("--workers", {"help": "cluster sizes M, e.g. 10,12,16,40"}),
    "delays": ("--delays", {"help": f"delay models, of {','.join(DELAY_MODELS)}"}),
    "group_inputs": ("--group-inputs", {"help": "K' tried, e.g. 1,2,4,8"}),
    "max_redundancy": ("--max-redundancy", {"help": "largest M'/K' of a code tried"}),
    "max_spares": ("--max-spares", {"help": "M' - K' tried up to this at least"}),
    "num_queries": ("--queries", {"help": "queries per point of the bisection"}),
    "screen_queries": ("--screen-queries", {"help": "queries per screening point"}),
    "bisection": ("--bisection", {"help": "bisection steps between two grid rates"}),
    "accuracy_tries": (
        "--accuracy-tries",
        {"help": "accuracy measurements per scheme and cell, at most"},
    ),
    "p99_target": ("--p99-target", {"help": "seconds (default 0.05)"}),
    "noloss_queries": ("--noloss-queries", {"help": "queries of the no-loss run"}),
    "check_delay": ("--check-delay", {"help": "delay model of the thread checks"}),
    "check_workers": ("--check-workers", {"help": "M of the thread checks"}),
    "thread_rates": (
        "--thread-rates",
        {"help": "the thread checks' rates, as fractions of a layout's sustained rate"},
    ),
}


def _run(cfg: LoadConfig, cmd: runkit.Invocation) -> dict:
    out = Path(cmd.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = run_load(
        cfg,
        show_progress=cmd.progress,
        partial=lambda obj: runkit.write_summary(out / "partial.json", obj),
    )
    summary["config"] = dataclasses.asdict(cfg)
    summary["environment"] = runkit.environment()
    summary = write_outputs(summary, cmd.out)
    print(format_tables(summary))
    print(f"wrote {cmd.out}/summary.json, report.md and p99_vs_load.png "
          f"({summary['seconds']:.0f} s)", file=sys.stderr)  # fmt: skip
    report_page(cmd, title="Latency against offered load: the layout search")
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        LoadConfig, _run, argv, prog="python -m benchmarks.load",
        description="The best coded and replication layouts of a cluster under a "
        "p99 target, searched on the serving simulator.", flags=FLAGS,
        out="results/load", quick="fewer queries and rates, one delay model",
    )  # fmt: skip


if __name__ == "__main__":
    main()
