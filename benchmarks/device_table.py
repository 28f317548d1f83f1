"""The accelerator table in one command: every benchmark on one device kind.

    python -m benchmarks.device_table --device {cpu,gpu,tpu} [--quick] --out DIR \\
        [--results-page docs/results/device-gpu.md]

It first checks that jax sees the requested platform (``jax.devices(kind)``) and
exits at once, in one line naming ``--device``, when it does not (with the wheel
to install into ``.venv``). Then it runs, with every array on that device
(``jax.default_device``), each part as a library call in its own ``try`` (a
failing part is a row of the table, the others still run):

1. ``benchmarks``: the cases of :mod:`benchmarks.run` through its harness (each
   checked against its float64 reference before it is timed; the same ratios to
   the same baselines as on CPU);
2. ``latency``: :func:`benchmarks.latency.measure`, per-request encode + decode;
3. ``floor``: the device's float32 matmul rate (:func:`benchmarks.harness.matmul_rate`),
   the arithmetic floor;
4. ``dcn_train``: DCNv2 training (:func:`models.train_dcn.train_dcn`), then
   ``coded_dcn``: coded inference of that model (``models.coded_dcn``);
5. ``schemes``: the head-to-head's panels (:func:`benchmarks.schemes.run`).

Full form: every benchmark row, 2,000 latency calls, the Adult DCNv2 of
``TrainConfig.quick()`` served by ``CodedDCNConfig.quick()``, and
``SchemesConfig.quick()``. ``--quick``: tiny sizes for every part (tiny benchmark
rows, a tiny DCNv2 on synthetic data, one small schemes panel), a CPU check in CI
that the command runs end to end on any device. Writes ``DIR/summary.json``,
``DIR/report.md``, a results page (:func:`runkit.write_page`) that, with
``--results-page``, is also written to that page (docs/results/), its commentary
after the figures kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import os
import shutil
import time
import traceback
from collections.abc import Callable
from typing import Any

import jax

import runkit
from runkit import pages

from . import device_parts as parts
from .cases import cases
from .harness import KINDS, require_device
from .run import select

#: the parts, in the order they run (benchmarks.device_parts)
PARTS: dict[str, Callable[..., dict]] = {
    "benchmarks": parts.benchmark_cases,
    "latency": parts.latency,
    "floor": parts.floor,
    "dcn_train": parts.dcn_train,
    "coded_dcn": parts.coded_dcn,
    "schemes": parts.schemes,
}


@dataclasses.dataclass(frozen=True)
class DeviceTableConfig:
    """What one run of the table does (``quick()``: the tiny CI form).

    Attributes:
      device: the jax platform to run on (``cpu``, ``gpu``, ``tpu``).
      tiny: tiny sizes for every part (tiny benchmark cases, a tiny DCNv2 on
        synthetic data, one small schemes panel).
      only: run only the benchmark cases whose name matches (``benchmarks.run``'s
        ``--only``); None: every case.
      repeats: timed repetitions per benchmark case.
      min_seconds: least time spent timing each case.
      latency_calls: interleaved calls per latency variant.
      matmul_size: n of the n x n float32 matmul that measures the floor.
      train_steps: cap on the DCNv2 training steps (None: early stopping decides).
      trials: requests per N in the schemes panels.
      seed: the seed of the latency inputs and of the training.
    """

    device: str = "gpu"
    tiny: bool = False
    only: str | None = None
    repeats: int = 5
    min_seconds: float = 0.5
    latency_calls: int = 2000
    matmul_size: int = 2048
    train_steps: int | None = None
    trials: int = 32
    seed: int = 0

    def __post_init__(self):
        name = "DeviceTableConfig"
        fields = ("repeats", "latency_calls", "matmul_size", "trials")
        runkit.check_fields(
            name, self, one_of={"device": KINDS}, at_least=dict.fromkeys(fields, 1),
            or_none={"train_steps": 1},
        )  # fmt: skip
        if not 0 <= self.min_seconds < math.inf:
            raise ValueError(
                f"{name}: min_seconds must be finite and >= 0, got {self.min_seconds}"
            )

    @classmethod
    def quick(cls, **overrides) -> DeviceTableConfig:
        """``--quick``: tiny sizes, short timing loops, 20 training steps."""
        base = dict(
            tiny=True,
            repeats=2,
            min_seconds=0.0,
            latency_calls=20,
            matmul_size=256,
            train_steps=20,
            trials=8,
        )
        return cls(**{**base, **overrides})


def _run_part(name: str, fn: Callable[[], dict]) -> dict:
    t0 = time.perf_counter()
    try:
        out = fn()
        status = "ok" if out.pop("ok") else "check failed"
    except Exception as err:  # one failing part is a row; the rest still run
        last = traceback.extract_tb(err.__traceback__)[-1]
        msg = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        out = {"ratios": [], "accuracy": "-", "error": msg, "where": f"{last.name}"}
        status = "failed"
    return {"part": name, "status": status, "seconds": time.perf_counter() - t0, **out}


def device_record(kind: str) -> dict:
    """The device kind, count and name the run is placed on."""
    devs = jax.devices(kind)
    return {
        "kind": kind,
        "count": len(devs),
        "device_kind": devs[0].device_kind,
        "platform": devs[0].platform,
    }


def run_table(cfg: DeviceTableConfig) -> dict:
    """Runs every part on the first device of ``cfg.device``; returns the summary
    (``parts``: one record per part, in :data:`PARTS` order: ``part``, ``status``
    ``ok``, ``check failed`` or ``failed`` with its ``error``, ``seconds``,
    ``ratios``, ``accuracy`` and the part's figures)."""
    devices = require_device(cfg.device)
    state: dict[str, Any] = {}
    records = []
    t0 = time.perf_counter()
    with jax.default_device(devices[0]):
        bar = runkit.progress(list(PARTS), desc=f"device table ({cfg.device})")
        for name in bar:
            bar.set_postfix_str(name)
            records.append(_run_part(name, lambda f=PARTS[name]: f(cfg, state)))
    floor = next((p for p in records if p["part"] == "floor"), {})
    return {
        "config": cfg,
        "device": device_record(cfg.device),
        "matmul_rate_flops": floor.get("matmul_rate_flops"),
        "parts": records,
        "all_ok": all(p["status"] == "ok" for p in records),
        "seconds": time.perf_counter() - t0,
        "environment": runkit.environment(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _cell(text: str) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def page_title(summary: dict) -> str:
    """The page's heading: ``Accelerator table: <device kind>``."""
    return f"Accelerator table: {summary['device']['kind']}"


def format_body(summary: dict) -> str:
    """The figures of the page: the run (its start and revision), the device and
    its floor, one row per part, and the benchmark cases."""
    env, dev = summary["environment"], summary["device"]
    rate = summary["matmul_rate_flops"]
    floor = "not measured (the floor part failed)" if rate is None else (
        f"{rate / 1e9:.1f} GFLOP/s (float32 matmul, "
        f"n = {summary['config'].matmul_size})"
    )  # fmt: skip
    form = "quick (tiny sizes)" if summary["config"].tiny else "full"
    lines = [
        f"- Run started: {summary['date']}, git `{env['git_revision']}`, "
        f"{summary['seconds']:.0f} s",
        f"- Device: {dev['count']} x {dev['kind']} (`{dev['device_kind']}`), "
        f"host `{env['device_name']}`; form: {form}",
        f"- Arithmetic floor of the device: {floor}",
        "",
        "Every part runs with its arrays on this device. Ratios are baseline time "
        "/ codedjax time measured in the same run (> 1: codedjax faster); status "
        "`ok` means the part ran and its own accuracy checks passed.",
        "",
        "| part | time (s) | ratios | accuracy | status |",
        "|---|---|---|---|---|",
    ]
    for p in summary["parts"]:
        status = p["status"] + (f": {p['error']}" if "error" in p else "")
        lines.append(
            f"| {p['part']} | {p['seconds']:.1f} | "
            f"{_cell('; '.join(p['ratios']) or '-')} | {_cell(p['accuracy'])} | "
            f"{_cell(status)} |"
        )
    bench = next((p for p in summary["parts"] if p["part"] == "benchmarks"), {})
    if bench.get("records"):
        lines += [
            "",
            "## Benchmark cases",
            "",
            "| case | codedjax (ms) | compile (s) | accurate | max err | % of floor |",
            "|---|---|---|---|---|---|",
        ]
        for r in bench["records"]:
            frac = r.get("fraction_of_floor")
            lines.append(
                f"| `{r['case']}` | {runkit.fmt(_ms(r.get('median_s')))} | "
                f"{r['compile_s']:.2f} | {'yes' if r.get('codedjax_ok') else 'NO'} | "
                f"{runkit.fmt(r.get('codedjax_max_err'), '.1e')} | "
                f"{runkit.fmt(None if frac is None else 100 * frac, '.1f')} |"
            )
    return "\n".join(lines) + "\n"


def format_page(summary: dict, command: str) -> str:
    """The whole page as :func:`runkit.write_page` lays it out (the heading, the
    command, where and when it is written, the figures of :func:`format_body`
    between the markers)."""
    return pages.page_text(
        title=page_title(summary),
        body=format_body(summary),
        command=command,
        recorded=pages.recorded_at(),
    )


def _ms(seconds):
    return None if seconds is None else 1e3 * seconds


FLAGS = {
    "device": (
        "--device",
        {"choices": KINDS, "required": True, "help": "jax platform"},
    ),
    "only": ("--only", {"help": "benchmark cases whose name matches (--only)"}),
    "repeats": ("--repeats", {"help": "default: repeats preset"}),
    "latency_calls": ("--calls", {"help": "default: latency_calls preset"}),
    "train_steps": ("--train-steps", {"help": "default: train_steps preset"}),
    "trials": ("--trials", {"help": "default: trials preset"}),
}


def _check_page(parser: argparse.ArgumentParser, path: str | None) -> None:
    if path is None:
        return
    if not path.endswith(".md"):
        parser.error(f"--results-page: expected a markdown file (.md), got {path!r}")
    if os.path.isdir(path):
        parser.error(f"--results-page: expected a file, got {path!r} (a folder)")
    try:
        runkit.out_folder(os.path.dirname(path) or ".")
    except argparse.ArgumentTypeError as err:
        parser.error(f"--results-page: {err}")


def _run(cfg: DeviceTableConfig, cmd: runkit.Invocation) -> dict:
    p = cmd.parser
    runkit.make_config(
        p, FLAGS, select, parts.tiny_cases() if cfg.tiny else cases(False), cfg.only
    )
    _check_page(p, cmd.results_page)
    runkit.make_config(p, FLAGS, require_device, cfg.device)
    summary = run_table(cfg)
    runkit.write_summary(os.path.join(cmd.out, "summary.json"), summary)
    title, body = page_title(summary), format_body(summary)
    report = os.path.join(cmd.out, "report.md")
    page = cmd.write_page(title=title, body=body)
    if page is not None:  # report.md is the page (its kept commentary too)
        shutil.copyfile(page, report)
    else:
        runkit.write_page(report, title=title, body=body, command=cmd.command,
                          recorded=cmd.recorded)  # fmt: skip
    with open(report) as f:
        print(f.read())
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        DeviceTableConfig, _run, argv, prog="python -m benchmarks.device_table",
        description=__doc__.split("\n\n")[0], flags=FLAGS,
        quick="tiny sizes for every part (the CI form)",
    )  # fmt: skip


if __name__ == "__main__":
    main()
