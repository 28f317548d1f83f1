"""``python -m benchmarks.schemes [--quick] --out DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import runkit
from runkit.pages import add_page_option, report_page

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
            f"--mnist-responses: every N must satisfy 1 <= N <= --workers M = "
            f"{cfg.num_workers}; got {bad}"
        )
    if cfg.mnist_queries < 0 or 0 < cfg.mnist_queries < k:
        p.error(
            f"--mnist-queries: 0 (all) or at least --inputs K = {k}; got "
            f"{cfg.mnist_queries}"
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

    if "mnist" in cfg.model_panels:
        _check_mnist_options(p, cfg)
    if "adult" not in cfg.model_panels:
        return
    from models.coded_dcn import QUICK_TRAIN

    d = cj.recovery_threshold(cfg.num_inputs, QUICK_TRAIN.num_cross_layers + 1)
    bad = [n for n in cfg.model_responses if not d <= n <= cfg.num_workers]
    if bad or not cfg.model_responses:
        p.error(
            f"--model-responses: every N must satisfy D = {d} <= N <= --workers M "
            f"= {cfg.num_workers}; got {list(cfg.model_responses)}"
        )
    if cfg.num_workers < 2 * cfg.num_inputs:
        p.error(
            f"--workers: the model panel's RepApprox needs M >= 2 K = "
            f"{2 * cfg.num_inputs} (--inputs {cfg.num_inputs}), got {cfg.num_workers}"
        )
    from .models import model_rows

    deg = 1 + QUICK_TRAIN.num_cross_layers
    names = model_rows(cfg.num_inputs, cfg.num_workers, deg)
    unknown = sorted(set(cfg.model_rows) - set(names))
    if unknown:
        p.error(f"--model-rows: choose from {', '.join(names)}; got {unknown}")


def _check_schemes(p: argparse.ArgumentParser, cfg: SchemesConfig) -> None:
    """``--schemes``: every name runs in some panel, and every panel of the run
    (each workload and worker dtype, at M and at ParM's M = K + K/k for degree 1,
    as :func:`benchmarks.schemes.pipeline.run` lays them out) has one of them."""
    if not cfg.only:
        return
    from .config import schemes
    from .workloads import workloads

    k = cfg.num_inputs
    parm_m = k + k // cfg.parm_group
    known: set[str] = set()
    for wl in workloads(cfg):
        if wl.name not in cfg.workloads:
            continue
        ms = [cfg.num_workers] + ([parm_m] if wl.degree == 1 else [])
        for m in dict.fromkeys(ms):
            for dtype in cfg.dtypes:
                names = {s.name for s in schemes(k, m, wl.degree, dtype)}
                known |= names
                if not names & set(cfg.only):
                    p.error(
                        f"--schemes: none of {', '.join(cfg.only)} fits the "
                        f"{wl.name} panel at K = {k}, M = {m} (--inputs, --workers); "
                        f"it has {', '.join(sorted(names))}"
                    )
    unknown = [s for s in cfg.only if s not in known]
    if unknown:
        p.error(
            f"--schemes: {', '.join(unknown)} runs in no panel of this run; "
            f"choose from {', '.join(sorted(known))}"
        )


# the model panels' options (--models): both panels', the Adult panel's, MNIST's
MODEL_FLAGS = ["--model-panels", "--model-repetitions", "--ckpt-dir"]
ADULT_FLAGS = ["--model-responses", "--model-queries", "--model-dtype", "--model-rows"]
MNIST_FLAGS = ["--mnist-model", "--mnist-responses", "--mnist-queries", "--mnist-rows"]

FLAGS = {
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
    "ckpt_dir": ("--ckpt-dir", {"type": runkit.out_folder}),
    "model_panels": "--model-panels",
    "mnist_model": "--mnist-model",
    "mnist_responses": "--mnist-responses",
    "mnist_queries": "--mnist-queries",
    "mnist_rows": "--mnist-rows",
}


def _check(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    runkit.only_with(p, a, "--models", MODEL_FLAGS + ADULT_FLAGS + MNIST_FLAGS)


def _run(cfg: SchemesConfig, cmd: runkit.Invocation) -> dict:
    p = cmd.parser
    if cfg.models:
        for panel, flags in (("adult", ADULT_FLAGS), ("mnist", MNIST_FLAGS)):
            given = panel in cfg.model_panels
            runkit.only_with(p, cmd.args, f"--model-panels {panel}", flags, given=given)
        _check_model_options(p, cfg)
    _check_schemes(p, cfg)
    summary = run(cfg, show_progress=cmd.progress)
    out = Path(cmd.out)
    out.mkdir(parents=True, exist_ok=True)
    summary["plots"] = plot_panels(summary, out)
    path = runkit.write_summary(out / "summary.json", summary)
    report = format_report(summary)
    (out / "report.md").write_text(report)
    report_page(cmd, title="Every scheme on the same masks")
    print(report)
    print(f"wrote {path} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        SchemesConfig, _run, argv, prog="python -m benchmarks.schemes",
        description="Every code of the library on the same inputs and straggler "
        "masks: cond and decoded error against N, bf16 and float32 workers.",
        flags=FLAGS, seed=None, check=_check, options=add_page_option,
    )  # fmt: skip


if __name__ == "__main__":
    main()
