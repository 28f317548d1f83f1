"""``python -m theory.robust [--quick] --out DIR``: locating corrupted workers."""

from __future__ import annotations

import time

import runkit
from runkit.pages import report_page

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


def _run(cfg: RobustConfig, cmd: runkit.Invocation) -> RobustSummary:
    t0 = time.perf_counter()
    summary = run_robust(cfg)
    summary["seconds"] = time.perf_counter() - t0
    print(write_outputs(summary, cmd.out))
    print(f"({summary['seconds']:.0f} s)")
    report_page(cmd, title="Locating corrupted workers")
    return summary


def main(argv: list[str] | None = None) -> RobustSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        RobustConfig, _run, argv, prog="python -m theory.robust",
        description="Locating corrupted workers: the robust decoders against "
        "corrupted answers.", flags=FLAGS, out="results/robust",
        quick="300 requests per row (quick())",
    )  # fmt: skip


if __name__ == "__main__":
    main()
