"""``python -m models.parity_experiment --out DIR [--quick]``."""

from __future__ import annotations

import dataclasses
import sys

import runkit
from runkit.pages import report_page

from ..train_parity import BASE_MODELS
from .config import ExperimentConfig
from .pipeline import run_experiment
from .report import write_outputs

FLAGS = {
    "models": ("--models", {"nargs": "+", "choices": BASE_MODELS}),
    "groups": ("--groups", {"nargs": "+", "help": "k values"}),
    "steps": ("--steps", {"help": "parity training steps"}),
}


def _run(config: ExperimentConfig, cmd: runkit.Invocation) -> int:
    result = run_experiment(config, cmd.out, show_progress=cmd.show_progress)
    text = write_outputs(
        cmd.out, result, dataclasses.asdict(config), cmd.command, runkit.environment()
    )
    report_page(cmd, title="Learned parity models (ParM) against BACC and NeRCC")
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: trains or loads the models, writes the report."""
    return runkit.main(
        ExperimentConfig, _run, argv, prog="python -m models.parity_experiment",
        description="Degraded-mode accuracy of ParM parity models (k = 2, 3, 4) "
        "against the base model, BACC and NeRCC at M = K + K/k workers.", flags=FLAGS,
        quick="quick-trained models, fewer straggler patterns, coarser grid",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
