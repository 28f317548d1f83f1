"""``python -m models.nercc_experiment [--quick] --out DIR``: BACC, NeRCC and
RepApprox on MNIST; ``python -m models.nercc_experiment --layerwise [--quick] --out
DIR``: layer-wise coding of the MLP against them and replication on the simulator
(``models.nercc_experiment.layerwise``)."""

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
            p.error(f"--layerwise: serves the MLP only, got --models {args.models}")
        return _layerwise(args)
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


def _layerwise(args) -> dict:
    from pathlib import Path

    from .layerwise import LayerwiseConfig, format_layerwise, run_layerwise

    over = dict(ckpt_dir=args.ckpt_dir, seed=args.seed)
    cfg = LayerwiseConfig.quick(**over) if args.quick else LayerwiseConfig(**over)
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
