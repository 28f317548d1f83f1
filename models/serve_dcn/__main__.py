"""``python -m models.serve_dcn [--quick] --out DIR``: serving the trained DCNv2."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import runkit

from .config import ServeDCNConfig
from .pipeline import ServeDCNSummary, run_serve_dcn
from .report import format_table


def main(argv: list[str] | None = None) -> ServeDCNSummary:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m models.serve_dcn",
        description="Serving the trained DCNv2 through the thread cluster: latency "
        "against accuracy.",
    )
    runkit.add_run_arguments(
        p,
        out="results/serve_dcn",
        quick="the small model of models.coded_dcn --quick, 100 groups",
    )
    p.add_argument("--max-groups", type=int, default=None)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument(
        "--layerwise",
        action="store_true",
        help="instead: layer-wise coding against replication at M <= 2K on the "
        "simulator (AUC on the test set; writes layerwise.json and layerwise.md)",
    )
    a = p.parse_args(argv)
    over: dict[str, Any] = {"ckpt_dir": a.ckpt_dir, "seed": a.seed}
    if a.max_groups is not None:
        over["max_groups"] = a.max_groups
    cfg = ServeDCNConfig.quick(**over) if a.quick else ServeDCNConfig(**over)
    if a.layerwise:
        return _layerwise(cfg, a.out)
    summary = run_serve_dcn(
        cfg, out=a.out, show_progress=False if a.no_progress else None
    )
    print(format_table(summary))
    print(f"wrote {a.out} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


def _layerwise(cfg: ServeDCNConfig, out: str) -> dict:
    import time
    from pathlib import Path

    from .layerwise import format_layerwise, run_layerwise

    t0 = time.perf_counter()
    res = run_layerwise(cfg, requests=100_000)
    res["seconds"] = time.perf_counter() - t0
    table = format_layerwise(res)
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    runkit.write_summary(path / "layerwise.json", res)
    (path / "layerwise.md").write_text(table + "\n")
    print(table)
    print(f"wrote {out}/layerwise.json ({res['seconds']:.0f} s)", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()
