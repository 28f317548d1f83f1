"""``python -m models.nercc_experiment [--quick] --out DIR``: BACC, NeRCC and
RepApprox on MNIST; ``python -m models.nercc_experiment --layerwise [--quick] --out
DIR``: layer-wise coding of the MLP against them and replication on the simulator
(``models.nercc_experiment.layerwise``)."""

from __future__ import annotations

import argparse
import sys

import runkit

from ..train_mnist import MODEL_NAMES
from .config import ExperimentConfig, LayerwiseConfig
from .pipeline import NerccSummary, run_experiment

FLAGS = {"replication": "--replication", "models": "--models",
         "ckpt_dir": "--ckpt-dir", "seed": "--seed"}  # fmt: skip


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
        type=runkit.out_folder,
        default="checkpoints",
        help="checkpoint directory (trained models are reused)",
    )
    p.add_argument("--replication", type=int, help="RepApprox c (default 2)")
    p.add_argument(
        "--layerwise",
        action="store_true",
        help="instead: layer-wise coding of the MLP (784-200-100-10) against "
        "one-shot BACC, NeRCC, RepApprox and replication at equal workers on the "
        "simulator (latency and top-1; writes layerwise.json and layerwise.md)",
    )
    args = p.parse_args(argv)
    if args.layerwise:
        if args.models and tuple(args.models) != ("mlp",):
            p.error(f"--models: --layerwise serves the MLP only, got {args.models}")
        runkit.not_with(p, args, "--layerwise", ["--replication"])
        over = dict(ckpt_dir=args.ckpt_dir, seed=args.seed)
        make = LayerwiseConfig.quick if args.quick else LayerwiseConfig
        return _layerwise(args, runkit.make_config(p, FLAGS, make, **over))
    over = dict(ckpt_dir=args.ckpt_dir, seed=args.seed)
    if args.replication is not None:
        over["replication"] = args.replication
    if args.models:
        over["models"] = tuple(args.models)
    make = ExperimentConfig.quick if args.quick else ExperimentConfig
    config = runkit.make_config(p, FLAGS, make, **over)
    command = "python -m models.nercc_experiment " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    return run_experiment(config, args.out, command=command)


def _layerwise(args, cfg) -> dict:
    from pathlib import Path

    from .layerwise import format_layerwise, run_layerwise

    res = run_layerwise(cfg)
    res["environment"] = runkit.environment()
    table = format_layerwise(res)
    path = Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    runkit.write_summary(path / "layerwise.json", res)
    (path / "layerwise.md").write_text(table + "\n")
    print(table)
    print(f"wrote {args.out}/layerwise.json ({res['seconds']:.0f} s)", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()
