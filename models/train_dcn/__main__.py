"""``python -m models.train_dcn --data adult|criteo [--path FILE] --out DIR``."""

from __future__ import annotations

import argparse
from typing import Any

import runkit

from ..tabular import load_dataset
from .config import FLAGS, TrainConfig
from .loop import checkpoint_path, train_dcn
from .report import write_outputs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point; returns the metrics."""
    p = argparse.ArgumentParser(
        prog="python -m models.train_dcn",
        description="Train a DCNv2 on Adult (bundled) or a Criteo file, with early "
        "stopping.",
    )
    runkit.add_run_arguments(p, quick="the quick model (TrainConfig.quick())")
    p.add_argument("--ckpt-dir", type=runkit.out_folder, default="checkpoints")
    runkit.add_config_arguments(p, TrainConfig, FLAGS)
    a = p.parse_args(argv)
    over = runkit.config_overrides(a, TrainConfig)
    if over.get("data") == "criteo" and over.get("path") is None:
        p.error("--data: criteo needs --path FILE (the Criteo file)")
    runkit.only_with(
        p, a, "--data criteo", ["--min-count", "--max-lines"], given=a.data == "criteo"
    )
    make = TrainConfig.quick if a.quick else TrainConfig
    config = runkit.make_config(p, FLAGS, make, **over)
    runkit.only_with(
        p,
        a,
        "--optimizer adamw",
        ["--weight-decay"],
        given=config.optimizer == "adamw",
    )
    show = False if a.no_progress else None
    data = load_dataset(config, show_progress=show)
    ckpt = checkpoint_path(config, a.ckpt_dir)
    model, metrics = train_dcn(config, data, ckpt_path=ckpt, show_progress=show)
    write_outputs(a.out, config, model.config, metrics, ckpt)
    return metrics


if __name__ == "__main__":
    main()
