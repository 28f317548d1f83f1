"""``python -m benchmarks.schemes [--quick] --out DIR``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import runkit

from .config import SchemesConfig
from .pipeline import run
from .report import format_report, plot_panels


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.schemes",
        description="Every code of the library on the same inputs and straggler "
        "masks: cond and decoded error against N, bf16 and float32 workers.",
    )
    runkit.add_run_arguments(p, out=None, seed=None)
    runkit.add_config_arguments(
        p,
        SchemesConfig,
        {
            "trials": "--trials",
            "n_step": "--n-step",
            "num_workers": "--workers",
            "dtypes": "--dtypes",
            "exhaustive": "--no-exhaustive",
            "num_inputs": "--inputs",
            "only": "--schemes",
            "workloads": "--workloads",
        },
    )
    a = p.parse_args(argv)
    base = SchemesConfig.quick() if a.quick else SchemesConfig()
    over = runkit.config_overrides(a, SchemesConfig)
    cfg = dataclasses.replace(base, **over)
    bad = [d for d in cfg.dtypes if d not in ("bfloat16", "float16", "float32")]
    if bad:
        p.error(f"--dtypes: worker dtypes are bfloat16, float16, float32; got {bad}")
    bad = [w for w in cfg.workloads if w not in ("linear", "cross3")]
    if bad or not cfg.workloads:
        p.error(f"--workloads: choose from linear, cross3; got {list(cfg.workloads)}")
    try:
        summary = run(cfg, show_progress=not a.no_progress)
    except ValueError as exc:  # a --schemes/--inputs choice that fits no panel
        p.error(f"--schemes: {exc}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary["plots"] = plot_panels(summary, out)
    path = runkit.write_summary(out / "summary.json", summary)
    report = format_report(summary)
    (out / "report.md").write_text(report)
    print(report)
    print(f"wrote {path} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
