"""``python -m models.train_mnist --model NAME [NAME ...] --out DIR [--quick]``."""

from __future__ import annotations

import sys

import runkit

from ..mnist import load_mnist
from .config import MODEL_NAMES, MODELS, TrainRun, deployed
from .loop import accuracy, load_or_train
from .report import summary_row, write_outputs

FLAGS = {
    "models": (
        "--model",
        {"nargs": "+", "choices": MODEL_NAMES, "required": True, "help": "to train"},
    ),
    "retrain": ("--retrain", {"help": "ignore existing checkpoints"}),
    "epochs": ("--epochs", {"help": "override the preset"}),
}


def _run(run: TrainRun, cmd: runkit.Invocation) -> int:
    split = load_mnist()
    quick = run.schedule == "quick"
    rows = {}
    for name, config in run.configs().items():
        model, meta = load_or_train(
            name,
            cmd.out,
            config=config,
            split=split,
            retrain=run.retrain,
            show_progress=cmd.show_progress,
        )
        # a model served in another form (RepVGG's fused network): its accuracy too
        deployed_acc = None
        if MODELS[name].deploy is not None:
            deployed_acc = accuracy(deployed(name, model), split.test_x, split.test_y)
        rows[f"{name}{'-quick' if quick else ''}"] = summary_row(
            name, quick, meta, cmd.command, deployed_test_accuracy=deployed_acc
        )
    _, text = write_outputs(cmd.out, rows)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: trains (or loads) each model, writes the report."""
    return runkit.main(
        TrainRun, _run, argv, prog="python -m models.train_mnist",
        description="Train MNIST models (LeNet5, an MLP, a small ViT, RepVGG) on the "
        "vendored subset, with checkpoints.", flags=FLAGS,
        quick="the short training schedule (TrainConfig.quick())",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
