"""``python -m theory.plan --workers M --inputs K --degree d ...``: choose N."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import __doc__ as _DOC
from .config import DTYPES, PlanConfig, validate
from .pipeline import PlanSummary, plan
from .report import report, write_outputs


def main(argv: Sequence[str] | None = None) -> PlanSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(prog="python -m theory.plan", description=_DOC)
    p.add_argument("--workers", type=int, required=True, help="M")
    p.add_argument("--inputs", type=int, required=True, help="K")
    p.add_argument("--degree", type=int, required=True, help="d")
    p.add_argument("--worker-dtype", default="bfloat16", choices=DTYPES)
    p.add_argument("--target-error", type=float, default=1e-2)
    p.add_argument("--failure", type=float, default=1e-3)
    p.add_argument("--points", default="first", choices=("first", "second"))
    p.add_argument("--error-model", default="cond", choices=("cond", "decoder"))
    p.add_argument("--replication", type=int, default=None, help="c (default M//K)")
    p.add_argument("--trials", type=int, default=None, help="default 20,000")
    p.add_argument("--exhaustive-limit", type=int, default=None, help="default 1e5")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--latency", default=None, help="e.g. shifted-exp:5ms,5ms")
    p.add_argument("--worst-exact", type=int, default=3)
    p.add_argument("--worst-greedy", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument(
        "--quick", action="store_true", help="PlanConfig.quick(): 2,000 trials per N"
    )
    p.add_argument("--no-progress", action="store_true")
    a = vars(p.parse_args(argv))
    out, quick = a.pop("out"), a.pop("quick")
    a["progress"] = not a.pop("no_progress")
    over = {k: v for k, v in a.items() if v is not None}
    cfg = PlanConfig.quick(**over) if quick else PlanConfig(**over)
    try:
        validate(cfg)
    except ValueError as err:
        p.error(str(err))
    print(f"D = d (K - 1) + 1 = {cfg.num_coeffs}", flush=True)
    summary = plan(cfg)
    text = report(summary)
    print(text)
    if out:
        write_outputs(out, summary, text)
    return summary


if __name__ == "__main__":  # pragma: no cover
    main()
