"""``python -m models.train_dcn --data adult|criteo [--path FILE] --out DIR``."""

from __future__ import annotations

import argparse
from typing import Any

import runkit

from ..tabular import load_dataset
from .config import FLAGS, TrainConfig
from .loop import checkpoint_path, train_dcn
from .report import write_outputs


def _options(p: argparse.ArgumentParser) -> None:
    # where the checkpoint goes: no field of TrainConfig, whose hash names it
    p.add_argument(
        "--ckpt-dir",
        type=runkit.out_folder,
        default="checkpoints",
        help="checkpoint folder (default checkpoints)",
    )


def _check(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if a.data == "criteo" and a.path is None:
        p.error("--data: criteo needs --path FILE (the Criteo file)")
    criteo = a.data == "criteo"
    runkit.only_with(
        p, a, "--data criteo", ["--min-count", "--max-lines"], given=criteo
    )


def _run(config: TrainConfig, cmd: runkit.Invocation) -> dict[str, Any]:
    adamw = config.optimizer == "adamw"
    runkit.only_with(
        cmd.parser, cmd.args, "--optimizer adamw", ["--weight-decay"], given=adamw
    )
    data = load_dataset(config, show_progress=cmd.show_progress)
    ckpt = checkpoint_path(config, cmd.args.ckpt_dir)
    model, metrics = train_dcn(
        config, data, ckpt_path=ckpt, show_progress=cmd.show_progress
    )
    write_outputs(cmd.out, config, model.config, metrics, ckpt)
    return metrics


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point; returns the metrics."""
    return runkit.main(
        TrainConfig, _run, argv, prog="python -m models.train_dcn",
        description="Train a DCNv2 on Adult (bundled) or a Criteo file, with early "
        "stopping.", flags=FLAGS, quick="the quick model (TrainConfig.quick())",
        options=_options, check=_check,
    )  # fmt: skip


if __name__ == "__main__":
    main()
