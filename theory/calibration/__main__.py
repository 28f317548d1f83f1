"""``python -m theory.calibration``: the flags, mapped to the config."""

from __future__ import annotations

import argparse
import time

import codedjax as cj
import runkit
from runkit.pages import report_page

from . import __doc__ as _DOC
from .catalogue import run_catalogue, write_catalogue
from .config import CODES, DECODERS, PAYLOADS, WORKER_DTYPES, CalibrationConfig
from .single import CalibrationSummary, run_calibration, write_outputs

FLAGS = {
    "num_masks": "--masks",
    "responses": ("--responses", {"nargs": "+"}),
    "decoders": ("--decoders", {"nargs": "+", "choices": DECODERS}),
    "payload": ("--payload", {"choices": PAYLOADS}),
    "worker_dtype": ("--worker-dtype", {"choices": WORKER_DTYPES}),
    "columns": "--columns",
    "decay": "--decay",
    "codes": ("--codes", {"nargs": "+", "choices": CODES + ("all",)}),
}


#: the results pages' headings: one setting, and every code (``--codes``)
PAGE_TITLES = {
    False: "Calibration of the predicted error",
    True: "Calibration of the predicted error: every code",
}


def validate(cfg: CalibrationConfig) -> None:
    """Refuses a :class:`CalibrationConfig` with a field no run can do: sizes must
    be >= 1, N in [D, M] (D = (L + 1)(K - 1) + 1), a decay in (0, 1], the names
    known; else a ValueError naming the field."""
    name = "CalibrationConfig"
    fields = ("num_inputs", "num_workers", "features", "num_masks", "columns")
    at_least = {**dict.fromkeys(fields, 1), "cross_layers": 0}
    runkit.check_fields(name, cfg, at_least=at_least)
    d = cj.recovery_threshold(cfg.num_inputs, cfg.cross_layers + 1)
    bad = [n for n in cfg.responses if not d <= n <= cfg.num_workers]
    if bad or not cfg.responses:
        raise ValueError(
            f"{name}: responses must each lie in [D, M] = [{d}, {cfg.num_workers}], "
            f"got {list(cfg.responses)}"
        )
    if not 0 < cfg.decay <= 1:
        raise ValueError(f"{name}: decay must lie in (0, 1], got {cfg.decay}")
    for field, allowed in (("decoders", DECODERS), ("codes", CODES + ("all",))):
        bad = [v for v in getattr(cfg, field) if v not in allowed]
        if bad:
            raise ValueError(f"{name}: {field} must be names of {allowed}, got {bad}")
    if not cfg.decoders:
        raise ValueError(f"{name}: decoders must name at least one decoder")
    if cfg.payload not in PAYLOADS or cfg.worker_dtype not in WORKER_DTYPES:
        raise ValueError(
            f"{name}: payload must be one of {PAYLOADS} and worker_dtype one of "
            f"{WORKER_DTYPES}, got {cfg.payload!r} and {cfg.worker_dtype!r}"
        )


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    series = ["--columns", "--decay"]
    runkit.not_with(
        parser,
        args,
        "--codes",
        ["--responses", "--decoders", "--payload", "--worker-dtype", *series],
        why="the catalogue runs its own settings",
    )
    given = args.payload == "series"
    runkit.only_with(parser, args, "--payload series", series, given=given)


def _run(cfg: CalibrationConfig, cmd: runkit.Invocation) -> CalibrationSummary:
    t0 = time.perf_counter()
    run, write = (
        (run_catalogue, write_catalogue)
        if cfg.codes
        else (run_calibration, write_outputs)
    )
    summary = run(cfg)
    summary["seconds"] = time.perf_counter() - t0
    summary["command"] = cmd.command
    print(write(summary, cmd.out))
    report_page(cmd, title=PAGE_TITLES[bool(cfg.codes)])
    print(f"targets: {summary['targets']} ({summary['seconds']:.1f} s)")
    return summary


def main(argv=None) -> CalibrationSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        CalibrationConfig, _run, argv, prog="python -m theory.calibration",
        description=_DOC.split("\n\n")[0], flags=FLAGS, out="results/calibration",
        check=_check, validate=validate,
    )  # fmt: skip


if __name__ == "__main__":
    main()
