"""``python -m models.train_mnist --model NAME [NAME ...] --out DIR [--quick]``."""

from __future__ import annotations

import argparse
import sys

import runkit

from ..mnist import load_mnist
from .config import MODEL_NAMES, MODELS, TrainConfig, deployed
from .loop import accuracy, load_or_train
from .report import summary_row, write_outputs


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: trains (or loads) each model, writes the report."""
    p = argparse.ArgumentParser(
        prog="python -m models.train_mnist",
        description="Train MNIST models (LeNet5, an MLP, a small ViT, RepVGG) on the "
        "vendored subset, with checkpoints.",
    )
    runkit.add_run_arguments(
        p, quick="the short training schedule (TrainConfig.quick())"
    )
    p.add_argument("--model", nargs="+", choices=MODEL_NAMES, required=True)
    p.add_argument("--retrain", action="store_true", help="ignore existing checkpoints")
    p.add_argument("--epochs", type=int, default=None, help="override the preset")
    args = p.parse_args(argv)
    over = {"seed": args.seed}
    if args.epochs is not None:
        over["epochs"] = args.epochs
    flags = {"epochs": "--epochs", "seed": "--seed", "model": "--model"}
    configs = {
        name: runkit.make_config(
            p, flags, TrainConfig.preset, name, quick=args.quick, **over
        )
        for name in dict.fromkeys(args.model)
    }
    split = load_mnist()
    command = "python -m models.train_mnist " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    rows = {}
    for name, config in configs.items():
        model, meta = load_or_train(
            name,
            args.out,
            args.quick,
            config=config,
            split=split,
            retrain=args.retrain,
            show_progress=False if args.no_progress else None,
        )
        # a model served in another form (RepVGG's fused network): its accuracy too
        deployed_acc = None
        if MODELS[name].deploy is not None:
            deployed_acc = accuracy(deployed(name, model), split.test_x, split.test_y)
        rows[f"{name}{'-quick' if args.quick else ''}"] = summary_row(
            name, args.quick, meta, command, deployed_test_accuracy=deployed_acc
        )
    _, text = write_outputs(args.out, rows)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
