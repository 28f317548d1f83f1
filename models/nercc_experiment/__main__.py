"""``python -m models.nercc_experiment [--quick] --out DIR``: BACC, NeRCC and
RepApprox on MNIST; ``python -m models.nercc_experiment --layerwise [--quick] --out
DIR``: layer-wise coding of the MLP against them and replication on the simulator
(``models.nercc_experiment.layerwise``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import runkit
from runkit.pages import read_report

from ..train_mnist import MODEL_NAMES
from . import layerwise
from .config import ExperimentConfig, LayerwiseConfig
from .pipeline import NerccSummary, run_experiment

FLAGS = {
    "models": ("--models", {"nargs": "+", "choices": MODEL_NAMES}),
    "ckpt_dir": (
        "--ckpt-dir",
        {
            "type": runkit.out_folder,
            "help": "checkpoint directory (trained models are reused; default "
            "checkpoints)",
        },
    ),
    "replication": ("--replication", {"help": "RepApprox c (default 2)"}),
}


#: the heading of the results page (docs/results/nercc.md)
PAGE_TITLE = "NeRCC against BACC on MNIST: LeNet5, RepVGG, ViT"


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--layerwise",
        action="store_true",
        help="instead: layer-wise coding of the MLP (784-200-100-10) against "
        "one-shot BACC, NeRCC, RepApprox and replication at equal workers on the "
        "simulator (latency and top-1; writes layerwise.json and layerwise.md)",
    )


def _check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.layerwise:
        return
    if args.models and tuple(args.models) != ("mlp",):
        p.error(f"--models: --layerwise serves the MLP only, got {args.models}")
    runkit.not_with(p, args, "--layerwise", ["--replication"])


def main(argv: list[str] | None = None) -> NerccSummary:
    """Command-line entry point; returns the summary."""
    cmd = runkit.parse_command(
        ExperimentConfig, argv, prog="python -m models.nercc_experiment",
        description="BACC vs NeRCC vs RepApprox on MNIST (LeNet5, RepVGG and a small "
        "ViT).", flags=FLAGS, options=_options, check=_check,
    )  # fmt: skip
    if cmd.args.layerwise:
        res = _layerwise(cmd.config(LayerwiseConfig, FLAGS), cmd.out)
        if cmd.results_page:
            body = read_report(cmd.out, "layerwise.md")
            cmd.write_page(title="Layer-wise coding of the MNIST MLP", body=body)
        return res
    config = cmd.config(ExperimentConfig, FLAGS)
    summary = run_experiment(config, cmd.out, command=cmd.command)
    if cmd.results_page:
        body = "\n\n".join([summary_table(summary), read_report(cmd.out)])
        cmd.write_page(title=PAGE_TITLE, body=body)
    return summary


def summary_table(summary: NerccSummary) -> str:
    """One row per model from the run's comparison: its test accuracy, the cells
    where NeRCC's MSE is below BACC's (by more than two combined standard errors),
    the MSE ratio NeRCC / BACC, the RelAcc difference, RepApprox / BACC."""

    def f(v, spec):
        return runkit.fmt(v, spec, "-")

    head = ["model", "test accuracy", "NeRCC MSE < BACC", "by > 2 s.e.",
            "MSE ratio NeRCC/BACC: mean (range)", "RelAcc NeRCC - BACC",
            "RepApprox/BACC"]  # fmt: skip
    return "\n".join(runkit.md_table(head, (
        [name, f(summary["models"].get(name, {}).get("test_accuracy"), ".3f"),
         f"{c['nercc_below_bacc']} of {c['cells']}", c["nercc_below_bacc_by_2se"],
         f"{f(c['mean_mse_ratio'], '.3f')} ({f(c['min_mse_ratio'], '.2f')} to "
         f"{f(c['max_mse_ratio'], '.2f')})", f(c["mean_rel_acc_diff"], "+.4f"),
         f(c.get("repapprox_mean_mse_ratio"), ".3f")]
        for name, c in summary["comparison"].items()
    )))  # fmt: skip


def _layerwise(cfg: LayerwiseConfig, out: str) -> dict:
    res = layerwise.run_layerwise(cfg)
    res["environment"] = runkit.environment()
    table = layerwise.format_layerwise(res)
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    runkit.write_summary(path / "layerwise.json", res)
    (path / "layerwise.md").write_text(table + "\n")
    print(table)
    print(f"wrote {out}/layerwise.json ({res['seconds']:.0f} s)", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()
