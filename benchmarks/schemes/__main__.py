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


def _check_mnist_options(p: argparse.ArgumentParser, cfg: SchemesConfig) -> None:
    from .mnist import MNIST_MODELS, mnist_rows

    if cfg.mnist_model not in MNIST_MODELS:
        p.error(
            f"--mnist-model: choose from {', '.join(MNIST_MODELS)}; got "
            f"{cfg.mnist_model!r}"
        )
    k, grp = cfg.num_inputs, cfg.parm_group
    if grp < 2 or k % grp:
        p.error(f"--inputs: K = {k} must be a multiple of ParM's group k = {grp}")
    bad = [n for n in cfg.mnist_responses if not 1 <= n <= cfg.num_workers]
    if bad:
        p.error(
            f"--mnist-responses: every N must satisfy 1 <= N <= M = "
            f"{cfg.num_workers}; got {bad}"
        )
    if cfg.mnist_queries < 0 or 0 < cfg.mnist_queries < k:
        p.error(
            f"--mnist-queries: 0 (all) or at least K = {k}; got {cfg.mnist_queries}"
        )
    names: set[str] = set()
    for m in (k + k // grp, cfg.num_workers):
        whole, layer, _ = mnist_rows(k, m, grp, cfg.mnist_model)
        names |= set(whole) | set(layer)
    unknown = sorted(set(cfg.mnist_rows) - names)
    if unknown:
        p.error(f"--mnist-rows: choose from {', '.join(sorted(names))}; got {unknown}")


def _check_model_options(p: argparse.ArgumentParser, cfg: SchemesConfig) -> None:
    import codedjax as cj

    bad = [n for n in cfg.model_panels if n not in ("adult", "mnist")]
    if bad or not cfg.model_panels:
        p.error(
            f"--model-panels: choose from adult, mnist; got {list(cfg.model_panels)}"
        )
    if "mnist" in cfg.model_panels:
        _check_mnist_options(p, cfg)
    if "adult" not in cfg.model_panels:
        return
    from models.coded_dcn import QUICK_TRAIN

    d = cj.recovery_threshold(cfg.num_inputs, QUICK_TRAIN.num_cross_layers + 1)
    bad = [n for n in cfg.model_responses if not d <= n <= cfg.num_workers]
    if bad or not cfg.model_responses:
        p.error(
            f"--model-responses: every N must satisfy D = {d} <= N <= M = "
            f"{cfg.num_workers}; got {list(cfg.model_responses)}"
        )
    if cfg.model_dtype not in ("bfloat16", "float16", "float32"):
        p.error(f"--model-dtype: bfloat16, float16 or float32; got {cfg.model_dtype}")
    if cfg.model_repetitions < 1 or cfg.model_queries < 0:
        p.error("--model-repetitions: must be >= 1 (and --model-queries >= 0)")
    if cfg.num_workers < 2 * cfg.num_inputs:
        p.error("--workers: the model panel's RepApprox needs M >= 2 K")
    from .models import model_rows

    deg = 1 + QUICK_TRAIN.num_cross_layers
    names = model_rows(cfg.num_inputs, cfg.num_workers, deg)
    unknown = sorted(set(cfg.model_rows) - set(names))
    if unknown:
        p.error(f"--model-rows: choose from {', '.join(names)}; got {unknown}")


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
            "models": (
                "--models",
                {"help": "add the model panels (Adult DCNv2, MNIST; --model-panels)"},
            ),
            "model_responses": "--model-responses",
            "model_repetitions": "--model-repetitions",
            "model_queries": "--model-queries",
            "model_dtype": "--model-dtype",
            "model_rows": "--model-rows",
            "ckpt_dir": "--ckpt-dir",
            "model_panels": "--model-panels",
            "mnist_model": "--mnist-model",
            "mnist_responses": "--mnist-responses",
            "mnist_queries": "--mnist-queries",
            "mnist_rows": "--mnist-rows",
        },
    )
    a = p.parse_args(argv)
    runkit.at_least(p, a, {"--trials": 1, "--n-step": 1, "--workers": 1, "--inputs": 1})
    base = SchemesConfig.quick() if a.quick else SchemesConfig()
    over = runkit.config_overrides(a, SchemesConfig)
    cfg = dataclasses.replace(base, **over)
    bad = [d for d in cfg.dtypes if d not in ("bfloat16", "float16", "float32")]
    if bad:
        p.error(f"--dtypes: worker dtypes are bfloat16, float16, float32; got {bad}")
    bad = [w for w in cfg.workloads if w not in ("linear", "cross3", "none")]
    if bad or not cfg.workloads or (cfg.workloads == ("none",) and not cfg.models):
        p.error(
            "--workloads: choose from linear, cross3 (none: the model panel only, "
            f"with --models); got {list(cfg.workloads)}"
        )
    if cfg.models:
        _check_model_options(p, cfg)
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
