"""``summary.json`` (one entry per trained model) and ``report.md`` of the trainer."""

from __future__ import annotations

from typing import Any, TypedDict

import runkit

from .config import MODELS

__all__ = ["MnistRow", "report", "summary_row", "write_outputs"]


class MnistRow(TypedDict):
    """One trained model in ``summary.json`` (keyed ``<model>[-quick]``)."""

    model: str
    description: str
    quick: bool
    test_accuracy: float
    deployed_test_accuracy: float | None
    val_accuracy: float
    train_seconds: float
    config: dict[str, Any]
    checkpoint: str
    command: str
    environment: dict[str, Any]


def summary_row(
    name: str,
    quick: bool,
    meta: dict,
    command: str,
    *,
    deployed_test_accuracy: float | None = None,
) -> MnistRow:
    """The summary entry of a model from :func:`models.train_mnist.load_or_train`'s
    metadata; ``deployed_test_accuracy`` is that of the network the coded workers
    run, for a model whose registry entry has a ``deploy`` step (None otherwise)."""
    return MnistRow(
        model=name,
        description=MODELS[name].description,
        quick=quick,
        test_accuracy=meta["test_accuracy"],
        deployed_test_accuracy=deployed_test_accuracy,
        val_accuracy=meta["val_accuracy"],
        train_seconds=meta["train_seconds"],
        config=meta["config"],
        checkpoint=meta["checkpoint"],
        command=command,
        environment=runkit.environment(),
    )


def report(summary: dict[str, MnistRow]) -> str:
    """The markdown table of every model in ``summary``."""
    head = ["model", "test accuracy", "deployed network's test accuracy",
            "validation accuracy", "epochs", "train seconds", "network"]  # fmt: skip
    rows = []
    for key, row in sorted(summary.items()):
        # rows written before these columns existed have neither
        deployed = row.get("deployed_test_accuracy")
        rows.append([
            key, f"{row['test_accuracy']:.4f}",
            "-" if deployed is None else f"{deployed:.4f}",
            f"{row['val_accuracy']:.4f}", row["config"]["epochs"],
            f"{row['train_seconds']:.1f}", row.get("description", ""),
        ])  # fmt: skip
    return "\n".join(["# MNIST training", "", *runkit.md_table(head, rows)]) + "\n"


def write_outputs(out, rows: dict[str, MnistRow]) -> tuple[dict[str, MnistRow], str]:
    """Adds ``rows`` to ``out/summary.json`` (the models trained before stay) and
    writes ``out/report.md``; returns the whole summary and the report."""
    return runkit.update_report(out, rows, report)
