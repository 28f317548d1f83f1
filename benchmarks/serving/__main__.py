"""``python -m benchmarks.serving [--quick] [--ray] --out DIR``."""

from __future__ import annotations

import argparse
import sys

import runkit

from .config import ServingConfig
from .pipeline import ServingSummary, run_serving
from .report import format_tables

FLAGS = {
    "num_requests": ("--requests", {"help": "requests per scheme, thread cluster"}),
    "sim_requests": ("--sim-requests", {"help": "requests per scheme, simulator"}),
}


def main(argv: list[str] | None = None) -> ServingSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.serving",
        description="Serving benchmark: tail latency and accuracy of coded serving "
        "against the baselines.",
    )
    runkit.add_run_arguments(p, out="results/serving", quick="300 requests per scheme")
    runkit.add_config_arguments(p, ServingConfig, FLAGS)
    p.add_argument(
        "--ray", action="store_true", help="also time the Ray backend (codedjax[ray])"
    )
    a = p.parse_args(argv)
    over = runkit.config_overrides(a, ServingConfig)
    make = ServingConfig.quick if a.quick else ServingConfig
    cfg = runkit.make_config(p, FLAGS, make, **over)
    summary = run_serving(cfg, out=a.out, show_progress=not a.no_progress, ray=a.ray)
    print(format_tables(summary))
    print(
        f"wrote {a.out}/summary.json and report.md ({summary['seconds']:.0f} s)",
        file=sys.stderr,
    )
    return summary


if __name__ == "__main__":
    main()
