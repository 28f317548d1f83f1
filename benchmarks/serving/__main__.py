"""``python -m benchmarks.serving [--quick] [--ray] --out DIR``."""

from __future__ import annotations

import sys

import runkit
from runkit.pages import report_page

from .config import ServingConfig
from .pipeline import ServingSummary, run_serving
from .report import format_tables

FLAGS = {
    "num_requests": ("--requests", {"help": "requests per scheme, thread cluster"}),
    "sim_requests": ("--sim-requests", {"help": "requests per scheme, simulator"}),
    "ray": ("--ray", {"help": "also time the Ray backend (codedjax[ray])"}),
}


def _run(cfg: ServingConfig, cmd: runkit.Invocation) -> ServingSummary:
    summary = run_serving(cfg, out=cmd.out, show_progress=cmd.progress, ray=cfg.ray)
    print(format_tables(summary))
    print(
        f"wrote {cmd.out}/summary.json and report.md ({summary['seconds']:.0f} s)",
        file=sys.stderr,
    )
    report_page(cmd, title="Serving: latency and accuracy per scheme")
    return summary


def main(argv: list[str] | None = None) -> ServingSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        ServingConfig, _run, argv, prog="python -m benchmarks.serving",
        description="Serving benchmark: tail latency and accuracy of coded serving "
        "against the baselines.", flags=FLAGS, out="results/serving",
        quick="300 requests per scheme",
    )  # fmt: skip


if __name__ == "__main__":
    main()
