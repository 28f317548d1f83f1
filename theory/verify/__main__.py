"""``python -m theory.verify [--quick] --out DIR``: the bounds against Monte Carlo.

Exits with status 1 when an informative check fails.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax

import runkit

from .. import montecarlo as mc
from . import __doc__ as _DOC
from .config import VerifyConfig
from .pipeline import VerifySummary, run
from .report import print_table
from .settings import build_config, setting_labels


def _host_port(value: str) -> str:
    """``--coordinator``: ``host:port``, the port in 1..65535."""
    host, sep, port = value.rpartition(":")
    if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(
            f"expected host:port with a port in 1..65535, got {value!r}"
        )
    return value


FLAGS = {
    "eta": (
        "--eta",
        {"help": "failure probability of the probabilistic bounds (default 0.05)"},
    ),
    "trials": (
        "--trials",
        {
            "help": "random straggler sets per (M, D, N) (default 100,000; --quick "
            "2,000; with --workers 10,000)"
        },
    ),
    "plots": ("--no-plots", {"help": "write no plots"}),
}


def _options(p: argparse.ArgumentParser) -> None:
    """Your own (M, K, d) grid, a settings file, and the processes of the run."""
    p.add_argument("--workers", type=int, nargs="+", metavar="M", help="M workers")
    p.add_argument("--inputs", type=int, nargs="+", metavar="K", help="K inputs")
    p.add_argument(
        "--degree",
        type=int,
        nargs="+",
        metavar="d",
        help="degree d of the computed polynomial (D = d(K-1)+1)",
    )
    p.add_argument(
        "--points",
        nargs="+",
        metavar="KIND",
        help="Chebyshev points of the first and/or second kind (default first)",
    )
    p.add_argument(
        "--config",
        type=runkit.input_file,
        metavar="FILE",
        help="TOML or JSON run settings",
    )
    p.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run first (one process per host, all running "
        "this command; Slurm, Open MPI and Cloud TPU are detected; elsewhere give "
        "the three options below)",
    )
    p.add_argument("--coordinator", type=_host_port, help="host:port of process 0")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    p.add_argument(
        "--cpu-devices",
        type=int,
        help="CPU devices to shard over (default: one per core; ignored "
        "when XLA_FLAGS sets xla_force_host_platform_device_count); "
        "the numbers do not depend on it",
    )


def parser() -> argparse.ArgumentParser:
    """The command's parser (the flags of :class:`VerifyConfig` and the options)."""
    return runkit.command_parser(
        VerifyConfig, prog="python -m theory.verify", description=_DOC, flags=FLAGS,
        quick="2,000 trials per configuration (about a minute on 2 cores)", seed=None,
        options=_options,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> VerifySummary:
    """Command-line entry point; returns the summary (``all_hold``: the verdict)."""
    p = parser()
    a = p.parse_args(argv)
    runkit.at_least(p, a, {"--num-processes": 1, "--cpu-devices": 1})
    runkit.only_with(
        p, a, "--distributed", ["--coordinator", "--num-processes", "--process-id"]
    )
    if a.process_id is not None and a.num_processes is not None:
        if a.process_id >= a.num_processes:
            p.error(
                f"--process-id: must be below --num-processes = {a.num_processes}, "
                f"got {a.process_id}"
            )
    try:
        cfg, lines = build_config(a, runkit.preset(a, VerifyConfig))
    except (TypeError, ValueError) as err:
        runkit.refuse(p, err, setting_labels(a))
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # must precede backend initialisation; affects the CPU platform only
        jax.config.update("jax_num_cpu_devices", a.cpu_devices or os.cpu_count() or 1)
    if a.distributed:
        mc.initialize_distributed(a.coordinator, a.num_processes, a.process_id)
    for line in lines:
        print(line)
    summary = run(cfg, a.out)
    print_table(summary)  # every process: the same numbers
    return summary


if __name__ == "__main__":
    sys.exit(0 if main()["all_hold"] else 1)
