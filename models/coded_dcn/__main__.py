"""``python -m models.coded_dcn [--quick] --out DIR``: the coded DCNv2 experiment."""

from __future__ import annotations

import time
from pathlib import Path

import runkit
from runkit.pages import report_page

from .config import CodedDCNConfig
from .pipeline import CodedDCNSummary, run_coded_dcn
from .report import format_table, target_lines
from .schemes import SCHEMES

FLAGS = {
    "schemes": ("--schemes", {"help": f"default {','.join(SCHEMES)}"}),
    "num_repetitions": (
        "--repetitions",
        {"help": "straggler patterns per group (default 2 quick, 8 full)"},
    ),
    "ckpt_dir": (
        "--ckpt-dir",
        {"type": runkit.out_folder, "help": "default checkpoints"},
    ),
}


def _run(config: CodedDCNConfig, cmd: runkit.Invocation) -> CodedDCNSummary:
    t0 = time.perf_counter()
    summary = run_coded_dcn(config, out=cmd.out)
    u, ub = summary["uncoded"], summary["uncoded_bf16"]
    print(
        f"uncoded float32: AUC {u['auc']:.4f} logloss {u['logloss']:.4f}; uncoded "
        f"{ub['dtype']}: AUC {ub['auc']:.4f} logloss {ub['logloss']:.4f} logit error "
        f"median {ub['logit_rel_err_median']:.2e}"
    )
    print(format_table(summary))
    print("\n".join(target_lines(summary)))
    out = Path(cmd.out)
    seconds = time.perf_counter() - t0
    print(f"wrote {out / 'summary.json'}, {out / 'report.md'} ({seconds:.0f} s)")
    report_page(cmd, title="Coded DCNv2 on Adult, workers in bf16")
    return summary


def main(argv: list[str] | None = None) -> CodedDCNSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        CodedDCNConfig, _run, argv, prog="python -m models.coded_dcn",
        description="Coded DCNv2 inference on Adult: ChebyLS + RepApprox against "
        "the baselines.", flags=FLAGS,
    )  # fmt: skip


if __name__ == "__main__":
    main()
