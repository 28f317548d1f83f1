"""``python -m models.train_parity --model NAME [...] --group k [...] --out DIR``."""

from __future__ import annotations

import sys

import runkit

from .config import BASE_MODELS, DEGRADED_INPUTS, ParityRun
from .loop import load_or_train, load_task
from .metrics import degraded_predictions, task_metrics


def _metric_text(m: dict) -> str:
    if "top1" in m:
        return f"top-1 {m['top1']:.4f}"
    return f"AUC {m['auc']:.4f}, logloss {m['logloss']:.4f}"


def report(summary: dict) -> str:
    """The markdown table of every parity model in ``summary``."""
    lines = [
        "# Parity models",
        "",
        "Degraded mode: every test query rebuilt once from its group's parity "
        f"(codedjax.parity_code, K = {DEGRADED_INPUTS}).",
        "",
    ]
    head = ["run", "base model (test)", "degraded mode (test)", "validation MSE",
            "steps", "train seconds"]  # fmt: skip
    lines += runkit.md_table(head, (
        [key, _metric_text(row["base_test"]), _metric_text(row["degraded_test"]),
         f"{row['val_mse']:.4g}", row["config"]["steps"],
         f"{row['train_seconds']:.1f}"]
        for key, row in sorted(summary.items())
    ))  # fmt: skip
    return "\n".join(lines) + "\n"


FLAGS = {
    "models": (
        "--model",
        {"nargs": "+", "choices": BASE_MODELS, "required": True, "help": "to train"},
    ),
    "groups": ("--group", {"nargs": "+", "required": True, "help": "k values"}),
    "steps": ("--steps", {"help": "override the preset"}),
    "retrain": ("--retrain", {"help": "ignore existing checkpoints"}),
}


def _run(run: ParityRun, cmd: runkit.Invocation) -> int:
    show = cmd.show_progress
    quick = run.schedule == "quick"
    rows, tasks = {}, {}
    for cfg in run.configs():
        if cfg.model not in tasks:
            tasks[cfg.model] = load_task(
                cfg.model, cmd.out, base_quick=cfg.base_quick, show_progress=show
            )
        task = tasks[cfg.model]
        model, meta, _ = load_or_train(
            cfg, cmd.out, task=task, retrain=run.retrain, show_progress=show
        )
        rebuilt, labels, _info = degraded_predictions(
            task, model, cfg.group, num_inputs=DEGRADED_INPUTS
        )
        n = labels.shape[0]
        rows[f"{cfg.model}-k{cfg.group}{'-quick' if quick else ''}"] = {
            "model": cfg.model,
            "group": cfg.group,
            "quick": quick,
            "config": meta["config"],
            "val_mse": meta["val_mse"],
            "train_seconds": meta["train_seconds"],
            "base_test": task_metrics(task.kind, task.outputs["test"][:n], labels),
            "degraded_test": task_metrics(task.kind, rebuilt, labels),
            "test_n": n,
            "checkpoint": meta["checkpoint"],
            "base_checkpoint": task.base_meta.get("checkpoint"),
            "command": cmd.command,
            "environment": runkit.environment(),
        }
    print(runkit.update_report(cmd.out, rows, report)[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: trains (or loads) each parity model, writes the
    report."""
    return runkit.main(
        ParityRun, _run, argv, prog="python -m models.train_parity",
        description="Train ParM parity models (MSE to the sum of the base model's "
        "outputs) for the Adult DCNv2 and the MNIST LeNet5 and MLP.", flags=FLAGS,
        quick="the short preset (400 steps, on the quick base model)",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
