"""``python -m theory.plan --workers M --inputs K --degree d ...``: choose N."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import runkit
from runkit.pages import report_page

from . import __doc__ as _DOC
from .config import (
    DTYPES,
    ERROR_MODELS,
    PlanConfig,
    seconds_arg,
    validate,
    workers_arg,
)
from .pipeline import PlanSummary, plan
from .report import report, write_outputs


class _WorkersRange(argparse.Action):
    """``--workers M`` sets ``workers``; ``--workers LO..HI`` sets ``workers`` and
    ``max_workers`` (the search over M)."""

    def __call__(self, parser, namespace, values, option_string=None):
        lo, hi = values if isinstance(values, tuple) else (values, None)
        namespace.workers = lo
        namespace.max_workers = hi


FLAGS = {
    "workers": (
        "--workers",
        {
            "required": True,
            "type": workers_arg,
            "action": _WorkersRange,
            "help": "M, or a range LO..HI: with --schemes, each scheme's smallest M",
        },
    ),
    "inputs": ("--inputs", {"required": True, "help": "K"}),
    "degree": ("--degree", {"required": True, "help": "d"}),
    "worker_dtype": ("--worker-dtype", {"choices": DTYPES}),
    "target_error": "--target-error",
    "failure": "--failure",
    "points": ("--points", {"choices": ("first", "second")}),
    "error_model": (
        "--error-model",
        {
            "choices": ERROR_MODELS,
            "help": "decoder: DecodeResult.error (default); cond: cond(U_S) u_w, "
            "what the proven bounds bound; rowsum: ||A_S||_inf u_w",
        },
    ),
    "replication": ("--replication", {"help": "c (default M // K)"}),
    "trials": ("--trials", {"help": "default 20,000 (--quick: 2,000)"}),
    "exhaustive_limit": ("--exhaustive-limit", {"help": "default 1e5"}),
    "confidence": "--confidence",
    "latency": (
        "--latency",
        {
            "help": "a codedjax latency model, e.g. "
            "'shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms'"
        },
    ),
    "schemes": (
        "--schemes",
        {"help": "'all' or a comma list of schemes to rank (needs --latency)"},
    ),
    "workload": ("--workload", {"choices": ("polynomial", "deep")}),
    "scheme_requests": (
        "--scheme-requests",
        {"help": "default 20,000 (--quick 4,000)"},
    ),
    "p99_target": (
        "--p99-target",
        {
            "type": seconds_arg,
            "help": "with --workers LO..HI: the p99 a scheme must meet, e.g. 30ms",
        },
    ),
    "worst_exact": "--worst-exact",
    "worst_greedy": "--worst-greedy",
}


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    runkit.only_with(parser, args, "--schemes", ["--workload", "--scheme-requests"])


def _run(cfg: PlanConfig, cmd: runkit.Invocation) -> PlanSummary:
    if cfg.max_workers is None:
        print(f"D = d (K - 1) + 1 = {cfg.num_coeffs}", flush=True)
    summary = plan(cfg)
    text = report(summary)
    print(text)
    write_outputs(cmd.out, summary, text)
    report_page(cmd, title="Choosing N and the scheme")
    return summary


def main(argv: Sequence[str] | None = None) -> PlanSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        PlanConfig, _run, argv, prog="python -m theory.plan", description=_DOC,
        flags=FLAGS, out="results/plan", quick="PlanConfig.quick(): 2,000 trials per N",
        check=_check, validate=validate,
    )  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    main()
