"""``python -m theory.plan --workers M --inputs K --degree d ...``: choose N."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import runkit

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

FLAGS = {
    "workers": (
        "--workers",
        {
            "required": True,
            "type": workers_arg,
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


def _config(quick: bool, **over) -> PlanConfig:
    """The config of the flags, checked (:func:`theory.plan.config.validate`)."""
    cfg = PlanConfig.quick(**over) if quick else PlanConfig(**over)
    validate(cfg)
    return cfg


def main(argv: Sequence[str] | None = None) -> PlanSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m theory.plan",
        description=_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runkit.add_run_arguments(
        p, out="results/plan", quick="PlanConfig.quick(): 2,000 trials per N"
    )
    runkit.add_config_arguments(p, PlanConfig, FLAGS)
    a = p.parse_args(argv)
    runkit.only_with(p, a, "--schemes", ["--workload", "--scheme-requests"])
    over = runkit.config_overrides(a, PlanConfig)
    if isinstance(over["workers"], tuple):
        over["workers"], over["max_workers"] = over["workers"]
    over["progress"] = not a.no_progress
    cfg = runkit.make_config(p, FLAGS, _config, a.quick, **over)
    if cfg.max_workers is None:
        print(f"D = d (K - 1) + 1 = {cfg.num_coeffs}", flush=True)
    summary = plan(cfg)
    text = report(summary)
    print(text)
    write_outputs(a.out, summary, text)
    return summary


if __name__ == "__main__":  # pragma: no cover
    main()
