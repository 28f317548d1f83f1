"""``python -m benchmarks.regimes [--quick] --out DIR``."""

from __future__ import annotations

import argparse
import os
import sys

import runkit
from runkit.pages import report_page

from .config import RegimesConfig
from .merge import merge_dirs
from .run import run_regimes

FLAGS = {
    "num_inputs": ("--k", {"help": "the K of the grid (default 8,32)"}),
    "ratios": ("--ratios", {"help": "the M/K of the grid (default 1.25,1.5,2,3,5)"}),
    "workloads": ("--workloads", {"help": "linear,cross1,cross2,deep (default all)"}),
    "stragglers": (
        "--stragglers",
        {"help": "independent,heavy-tail,racks,persistent (default all)"},
    ),
    "num_requests": ("--requests", {"help": "simulated requests per cell"}),
    "error_requests": ("--error-requests", {"help": "requests decoded per cell"}),
    "spot_requests": (
        "--spot-requests",
        {"help": "thread-cluster spot check requests per cell (0: none; default 300)"},
    ),
    "master_requests": (
        "--master-requests",
        {"help": "layer-wise requests served to measure the master (0: none)"},
    ),
}


#: the heading of the results page (docs/results/regimes.md)
PAGE_TITLE = "When coding beats replication at equal workers"


def _run_dir(value: str) -> str:
    """``--merge DIR``: the folder of an earlier run (it holds summary.json)."""
    runkit.text(value)
    if not os.path.isfile(os.path.join(value, "summary.json")):
        raise argparse.ArgumentTypeError(
            f"expected the folder of an earlier run (with its summary.json), got "
            f"{value!r}"
        )
    return value


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--merge",
        nargs="+",
        type=_run_dir,
        metavar="DIR",
        help="merge the summaries of earlier runs (each DIR/summary.json: pieces "
        "of one grid, the same settings) into one report and map in --out; runs "
        "nothing",
    )


def _check(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    flags = [f for f, _ in FLAGS.values()]
    runkit.not_with(p, a, "--merge", flags, why="it runs nothing")


def _merge(cmd: runkit.Invocation) -> dict:
    try:
        summary = merge_dirs(cmd.args.merge, cmd.out)
    except ValueError as e:
        text = str(e)
        cmd.error(text if text.startswith("--merge") else f"--merge: {text}")
    print(summary["headline"])
    print(f"wrote {cmd.out}/summary.json, report.md and the winner maps",
          file=sys.stderr)  # fmt: skip
    report_page(cmd, title=PAGE_TITLE)
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    cmd = runkit.parse_command(
        RegimesConfig, argv, prog="python -m benchmarks.regimes",
        description="The regime map: every scheme and its layouts on equal "
        "workers over K, M/K, workload and straggler model; which one has the "
        "lowest per-query p99 at the accuracy target.", flags=FLAGS,
        out="results/regimes",
        quick="K = 8 only, 2e4 requests per cell", options=_options, check=_check,
    )  # fmt: skip
    if cmd.args.merge is not None:
        return _merge(cmd)
    cfg = cmd.config(RegimesConfig, FLAGS)
    summary = run_regimes(cfg, out=cmd.out, show_progress=cmd.progress)
    print(summary["headline"])
    print(f"wrote {cmd.out}/summary.json, report.md and the winner maps "
          f"({summary['seconds']:.0f} s)", file=sys.stderr)  # fmt: skip
    report_page(cmd, title=PAGE_TITLE)
    return summary


if __name__ == "__main__":
    main()
