"""``python -m models.parity_experiment --out DIR [--quick]``."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import runkit

from ..train_parity import BASE_MODELS
from .config import ExperimentConfig
from .pipeline import run_experiment
from .report import write_outputs


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: trains or loads the models, writes the report."""
    p = argparse.ArgumentParser(
        prog="python -m models.parity_experiment",
        description="Degraded-mode accuracy of ParM parity models (k = 2, 3, 4) "
        "against the base model, BACC and NeRCC at M = K + K/k workers.",
    )
    runkit.add_run_arguments(
        p, quick="quick-trained models, fewer straggler patterns, coarser grid"
    )
    p.add_argument("--models", nargs="+", choices=BASE_MODELS, default=None)
    p.add_argument("--groups", nargs="+", type=int, default=None, help="k values")
    p.add_argument("--steps", type=int, default=None, help="parity training steps")
    args = p.parse_args(argv)
    over = {"seed": args.seed}
    if args.models:
        over["models"] = tuple(args.models)
    if args.groups:
        over["groups"] = tuple(args.groups)
    if args.steps is not None:
        over["steps"] = args.steps
    flags = {"models": "--models", "groups": "--groups", "steps": "--steps",
             "seed": "--seed"}  # fmt: skip
    config = runkit.make_config(
        p, flags, ExperimentConfig.preset, quick=args.quick, **over
    )
    command = "python -m models.parity_experiment " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    show = False if args.no_progress else None
    result = run_experiment(config, args.out, show_progress=show)
    text = write_outputs(
        args.out, result, dataclasses.asdict(config), command, runkit.environment()
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
