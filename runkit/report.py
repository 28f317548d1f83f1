"""What every command's report repeats: its tables and its two files.

- :func:`md_table`: a markdown table from a header and rows of cells;
- :func:`write_report`: ``summary.json`` (strict JSON, :func:`runkit.write_summary`)
  and ``report.md`` in the run's folder; :func:`update_report` adds a run's entries
  to the summary already there (the trainers': one entry per trained model).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .summary import write_summary

__all__ = ["md_table", "update_report", "write_report"]


def md_table(head: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The lines of a markdown table: ``| a | b |``, ``|---|---|``, one per row.

    Cells are written with ``str``; format numbers before.
    """
    lines = ["| " + " | ".join(map(str, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return lines


def write_report(
    out: str | os.PathLike, summary: Any, report: str, *, name: str = "report.md"
) -> str:
    """Writes ``summary`` to ``out/summary.json`` and ``report`` to ``out/name``
    (the folder created); returns ``report``."""
    write_summary(os.path.join(out, "summary.json"), summary)
    with open(os.path.join(out, name), "w") as f:
        f.write(report)
    return report


def update_report(
    out: str | os.PathLike, rows: Mapping[str, Any], report: Callable[[dict], str]
) -> tuple[dict, str]:
    """Adds ``rows`` to ``out/summary.json`` (the entries of earlier runs stay, the
    keys sorted) and writes ``report(summary)`` to ``out/report.md``.

    Returns:
      ``(summary, report text)``.
    """
    path = os.path.join(out, "summary.json")
    summary = {}
    if os.path.isfile(path):
        with open(path) as f:
            summary = json.load(f)
    summary = dict(sorted({**summary, **rows}.items()))
    return summary, write_report(out, summary, report(summary))
