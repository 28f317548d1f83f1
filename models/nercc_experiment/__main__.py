"""``python -m models.nercc_experiment [--quick] --out DIR``: BACC, NeRCC and
RepApprox on MNIST."""

from __future__ import annotations

import argparse
import sys

import runkit

from ..train_mnist import MODEL_NAMES
from .config import ExperimentConfig
from .pipeline import NerccSummary, run_experiment


def main(argv: list[str] | None = None) -> NerccSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m models.nercc_experiment",
        description="BACC vs NeRCC vs RepApprox on MNIST (LeNet5, RepVGG and a small "
        "ViT).",
    )
    runkit.add_run_arguments(p)
    p.add_argument("--models", nargs="+", choices=MODEL_NAMES, default=None)
    p.add_argument(
        "--ckpt-dir",
        default="checkpoints",
        help="checkpoint directory (trained models are reused)",
    )
    p.add_argument("--replication", type=int, default=2, help="RepApprox c")
    args = p.parse_args(argv)
    over = dict(ckpt_dir=args.ckpt_dir, replication=args.replication, seed=args.seed)
    if args.models:
        over["models"] = tuple(args.models)
    try:
        config = (
            ExperimentConfig.quick(**over) if args.quick else ExperimentConfig(**over)
        )
    except (TypeError, ValueError) as err:
        runkit.refuse(p, err, {"replication": "--replication", "models": "--models",
                               "ckpt_dir": "--ckpt-dir", "seed": "--seed"})  # fmt: skip
    command = "python -m models.nercc_experiment " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    return run_experiment(config, args.out, command=command)


if __name__ == "__main__":
    main()
