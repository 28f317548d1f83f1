"""``python -m theory.robust [--quick] --out DIR``: locating corrupted workers."""

from __future__ import annotations

import argparse
import time

import runkit

from .config import RobustConfig
from .pipeline import RobustSummary, run_robust
from .report import write_outputs

FLAGS = {
    "num_requests": "--requests",
    "berrut": ("--no-berrut", {"help": "skip the Berrut-coded locators"}),
    "dtype_model": (
        "--no-dtype-model",
        {"help": "skip the decoder run with the dtype-only noise model"},
    ),
    "rounding_model": (
        "--no-rounding-model",
        {"help": "skip the decoder run with noise_sd from the rounding analysis"},
    ),
}


def main(argv: list[str] | None = None) -> RobustSummary:
    """Command-line entry point; returns the summary."""
    parser = argparse.ArgumentParser(
        prog="python -m theory.robust",
        description="Locating corrupted workers: the robust decoders against "
        "corrupted answers.",
    )
    runkit.add_run_arguments(
        parser, out="results/robust", quick="300 requests per row (quick())"
    )
    runkit.add_config_arguments(parser, RobustConfig, FLAGS)
    args = parser.parse_args(argv)
    over = runkit.config_overrides(args, RobustConfig)
    over["progress"] = not args.no_progress
    make = RobustConfig.quick if args.quick else RobustConfig
    cfg = runkit.make_config(parser, FLAGS, make, **over)
    t0 = time.perf_counter()
    summary = run_robust(cfg)
    summary["seconds"] = time.perf_counter() - t0
    print(write_outputs(summary, args.out))
    print(f"({summary['seconds']:.0f} s)")
    return summary


if __name__ == "__main__":
    main()
