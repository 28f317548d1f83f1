"""``summary.json`` (one entry per trained model) and ``report.md`` of the trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import runkit

__all__ = ["MnistRow", "report", "summary_row", "write_outputs"]


class MnistRow(TypedDict):
    """One trained model in ``summary.json`` (keyed ``<model>[-quick]``)."""

    model: str
    quick: bool
    test_accuracy: float
    val_accuracy: float
    train_seconds: float
    config: dict[str, Any]
    checkpoint: str
    command: str
    environment: dict[str, Any]


def summary_row(name: str, quick: bool, meta: dict, command: str) -> MnistRow:
    """The summary entry of a model from :func:`models.train_mnist.load_or_train`'s
    metadata."""
    return MnistRow(
        model=name,
        quick=quick,
        test_accuracy=meta["test_accuracy"],
        val_accuracy=meta["val_accuracy"],
        train_seconds=meta["train_seconds"],
        config=meta["config"],
        checkpoint=meta["checkpoint"],
        command=command,
        environment=runkit.environment(),
    )


def report(summary: dict[str, MnistRow]) -> str:
    """The markdown table of every model in ``summary``."""
    lines = [
        "# MNIST training",
        "",
        "| model | test accuracy | validation accuracy | epochs | train seconds |",
        "|---|---|---|---|---|",
    ]
    for key, row in sorted(summary.items()):
        lines.append(
            f"| {key} | {row['test_accuracy']:.4f} | {row['val_accuracy']:.4f} | "
            f"{row['config']['epochs']} | {row['train_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_outputs(out, rows: dict[str, MnistRow]) -> tuple[dict[str, MnistRow], str]:
    """Adds ``rows`` to ``out/summary.json`` (the models trained before stay) and
    writes ``out/report.md``; returns the whole summary and the report."""
    out = Path(out)
    path = out / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    summary.update(rows)
    runkit.write_summary(path, dict(sorted(summary.items())))
    text = report(summary)
    (out / "report.md").write_text(text)
    return summary, text
