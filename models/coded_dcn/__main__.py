"""``python -m models.coded_dcn [--quick] --out DIR``: the coded DCNv2 experiment."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import runkit

from .config import CodedDCNConfig
from .pipeline import CodedDCNSummary, run_coded_dcn
from .report import format_table, target_lines
from .schemes import SCHEMES

# the config fields the flags set, for messages
FLAGS = {"schemes": "--schemes", "num_repetitions": "--repetitions",
         "ckpt_dir": "--ckpt-dir", "seed": "--seed"}  # fmt: skip


def main(argv: list[str] | None = None) -> CodedDCNSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m models.coded_dcn",
        description="Coded DCNv2 inference on Adult: ChebyLS + RepApprox against "
        "the baselines.",
    )
    runkit.add_run_arguments(p)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument(
        "--repetitions",
        type=int,
        default=None,
        help="straggler patterns per group (default 2 quick, 8 full)",
    )
    p.add_argument("--schemes", default=",".join(SCHEMES))
    a = p.parse_args(argv)
    over: dict[str, Any] = {
        "ckpt_dir": a.ckpt_dir,
        "seed": a.seed,
        "schemes": tuple(s for s in a.schemes.split(",") if s),
    }
    if a.repetitions is not None:
        over["num_repetitions"] = a.repetitions
    try:
        config = CodedDCNConfig.quick(**over) if a.quick else CodedDCNConfig(**over)
    except (ValueError, TypeError) as err:
        runkit.refuse(p, err, FLAGS)
    t0 = time.perf_counter()
    summary = run_coded_dcn(config, out=a.out)
    u, ub = summary["uncoded"], summary["uncoded_bf16"]
    print(
        f"uncoded float32: AUC {u['auc']:.4f} logloss {u['logloss']:.4f}; uncoded "
        f"{ub['dtype']}: AUC {ub['auc']:.4f} logloss {ub['logloss']:.4f} logit error "
        f"median {ub['logit_rel_err_median']:.2e}"
    )
    print(format_table(summary))
    print("\n".join(target_lines(summary)))
    out = Path(a.out)
    seconds = time.perf_counter() - t0
    print(f"wrote {out / 'summary.json'}, {out / 'report.md'} ({seconds:.0f} s)")
    return summary


if __name__ == "__main__":
    main()
