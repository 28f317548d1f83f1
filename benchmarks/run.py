"""Run the benchmark cases and write JSON lines, a report and a printed table.

    python -m benchmarks.run [--quick] [--only PATTERN] [--device KIND] --out DIR

Runs unchanged on CPU, GPU and TPU (install the matching jax wheel); ``--device``
checks first that jax sees that platform and places the cases on it. Each case's
accuracy is checked against a float64 reference before it is timed. The whole
accelerator table (these cases, latency, the floor, DCNv2 training and coded
inference, the head-to-head) is ``python -m benchmarks.device_table --device gpu``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import os
import sys

import jax

import runkit
from runkit.pages import block_file, report_page, write_block

from .cases import cases
from .harness import (
    KINDS,
    environment,
    matmul_rate,
    report_markdown,
    require_device,
    run_case,
    write_jsonl,
)


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What one run of the benchmark cases does.

    Attributes:
      quick_cases: the fewer, smaller cases of ``--quick``
        (:func:`benchmarks.cases.cases`).
      only: run the cases whose name matches (:func:`select`); None: every case.
      repeats: timed repetitions per case.
      min_seconds: least time spent timing each case.
      out: the folder of ``results.jsonl`` and ``report.md``.
      device: the jax platform the cases are placed on (checked first); None:
        jax's default backend.
      readme: a markdown file whose speed table (between the results markers,
        ``runkit.pages.write_block``) is rewritten with one row per case: its
        time and its same-run ratios (the README's "Speed" section).
    """

    quick_cases: bool = False
    only: str | None = None
    repeats: int = 5
    min_seconds: float = 0.5
    out: str = "results/benchmarks"
    device: str | None = None
    readme: str | None = None

    def __post_init__(self):
        if self.repeats < 1:
            raise ValueError(f"BenchConfig: repeats must be >= 1, got {self.repeats}")
        if not 0 <= self.min_seconds < float("inf"):
            raise ValueError(
                f"BenchConfig: min_seconds must be finite and >= 0, got "
                f"{self.min_seconds}"
            )

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        """``--quick``: fewer, smaller cases, shorter timing loops."""
        return cls(**{"quick_cases": True, "min_seconds": 0.2, **overrides})


def select(case_list: list, only: str | None) -> list:
    """The cases ``--only`` names: the one of that name, else those whose name
    holds it, else those its glob matches; every case when it is None.

    Raises:
      ValueError: naming ``--only``, when it matches no case.
    """
    if not only:
        return list(case_list)
    for keep in (lambda c: c.name == only, lambda c: only in c.name):
        if any(map(keep, case_list)):
            return [c for c in case_list if keep(c)]
    pattern = only if any(c in only for c in "*?[") else f"*{only}*"
    selected = [c for c in case_list if fnmatch.fnmatch(c.name, pattern)]
    if not selected:
        raise ValueError(f"--only: {only!r} matches no case")
    return selected


def run(config: BenchConfig, *, case_list=None) -> list[dict]:
    """Run the selected cases; write ``results.jsonl`` and ``report.md``."""
    selected = case_list if case_list is not None else cases(config.quick_cases)
    selected = select(selected, config.only)
    env = environment()
    rate = matmul_rate()
    records = []
    for i, case in enumerate(selected, 1):
        print(f"[{i}/{len(selected)}] {case.name}", file=sys.stderr, flush=True)
        records.append(
            run_case(
                case,
                repeats=config.repeats,
                min_seconds=config.min_seconds,
                rate=rate,
                env=env,
            )
        )
    os.makedirs(config.out, exist_ok=True)
    write_jsonl(records, os.path.join(config.out, "results.jsonl"))
    text = report_markdown(records, env, rate)
    with open(os.path.join(config.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return records


FLAGS = {
    "only": (
        "--only",
        {"help": "run the cases whose name matches (substring or glob)"},
    ),
    "repeats": ("--repeats", {"help": f"default {BenchConfig.repeats}"}),
    "device": (
        "--device",
        {
            "choices": KINDS,
            "help": "run on this jax platform (default: jax's default backend); "
            "every part of the table: python -m benchmarks.device_table",
        },
    ),
    "readme": (
        "--readme",
        {
            "metavar": "FILE.md",
            "type": block_file,
            "help": "also rewrite the speed table between the "
            "results markers of this file (the README's Speed section)",
        },
    ),
}


def speed_table(records: list[dict]) -> str:
    """One row per case: its median time and its same-run ratios (baseline time
    / codedjax time: > 1 is codedjax faster)."""
    rows = ["| case | codedjax | ratios (same run; > 1: codedjax faster) |",
            "|---|---|---|"]  # fmt: skip
    for r in records:
        ratios = ", ".join(
            f"{k.removeprefix('ratio_vs_')} {v:.2f}x"
            for k, v in r.items()
            if k.startswith("ratio_vs_") and v is not None
        )
        ms = "-" if r.get("median_s") is None else f"{1e3 * r['median_s']:.3g} ms"
        rows.append(f"| {r['case']} | {ms} | {ratios or '-'} |")
    return "\n".join(rows)


def _run(config: BenchConfig, cmd: runkit.Invocation) -> dict[str, list[dict]]:
    runkit.make_config(
        cmd.parser, FLAGS, select, cases(config.quick_cases), config.only
    )
    place = contextlib.nullcontext()
    if config.device is not None:
        devices = runkit.make_config(cmd.parser, FLAGS, require_device, config.device)
        place = jax.default_device(devices[0])
    with place:
        records = run(config)
    report_page(cmd, title="Speed on CPU: the benchmark cases")
    if config.readme:
        write_block(config.readme, body=speed_table(records), command=cmd.command,
                    recorded=cmd.recorded)  # fmt: skip
    return {"records": records}


def main(argv=None) -> dict[str, list[dict]]:
    """Command-line entry point; returns the summary (``records``: one per case)."""
    return runkit.main(
        BenchConfig, _run, argv, prog="python -m benchmarks.run",
        description=__doc__.split("\n\n")[0], flags=FLAGS, out=BenchConfig.out,
        quick="fewer, smaller cases", seed=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()
