"""``python -m models.serve_dcn [--quick] --out DIR``: serving the trained DCNv2;
``python -m models.serve_dcn --http PORT [--quick]``: the same model behind an HTTP
endpoint (``models.serve_dcn.http``, the extra ``codedjax[http]``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax.numpy as jnp

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
    p.add_argument("--ckpt-dir", type=runkit.out_folder, default="checkpoints")
    p.add_argument(
        "--layerwise",
        action="store_true",
        help="instead: layer-wise coding against replication at M <= 2K on the "
        "simulator (AUC on the test set; writes layerwise.json and layerwise.md)",
    )
    p.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve POST /predict on 127.0.0.1:PORT instead of the benchmark",
    )
    p.add_argument(
        "--group-deadline",
        type=float,
        help="with --http: seconds a coding group waits to fill (default 0.005)",
    )
    a = p.parse_args(argv)
    runkit.at_least(p, a, {"--max-groups": 1})
    runkit.only_with(p, a, "--http", ["--group-deadline"])
    runkit.not_with(p, a, "--layerwise", ["--http"], why="each is a run of its own")
    if a.http is not None and not 0 < a.http < 65536:
        p.error(f"--http: a port in 1..65535, got {a.http}")
    deadline = 0.005 if a.group_deadline is None else a.group_deadline
    if not (deadline > 0 and deadline < float("inf")):
        p.error(f"--group-deadline: seconds > 0, got {deadline}")
    over: dict[str, Any] = {"ckpt_dir": a.ckpt_dir, "seed": a.seed}
    if a.max_groups is not None:
        over["max_groups"] = a.max_groups
    flags = {"max_groups": "--max-groups", "ckpt_dir": "--ckpt-dir", "seed": "--seed"}
    make = ServeDCNConfig.quick if a.quick else ServeDCNConfig
    cfg = runkit.make_config(p, flags, make, **over)
    if a.layerwise:
        return _layerwise(cfg, a.out)
    if a.http is not None:
        serve_http(cfg, a.http, group_deadline=deadline)
        return None
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


def serve_http(cfg: ServeDCNConfig, port: int, *, group_deadline: float) -> None:
    """Serves ChebyLS + RepApprox at the middle N of ``cfg.responses`` on the
    thread cluster (the benchmark's delays) at http://127.0.0.1:PORT/predict."""
    try:
        import uvicorn
    except ImportError:
        sys.exit("--http: needs uvicorn and Starlette: pip install 'codedjax[http]'")
    import codedjax as cj
    from codedjax.serving import Injector, Server, ThreadCluster

    from ..train_dcn import load_or_train
    from .branches import make_worker, schemes
    from .http import make_app

    model, _ = load_or_train(cfg.train, cfg.ckpt_dir, show_progress=False)
    n = cfg.responses[len(cfg.responses) // 2]
    name, code, policy = next(s for s in schemes(cfg, 1.0)
                              if s[0] == f"chebyls+repapprox N={n}")  # fmt: skip
    slow = cj.RandomSlowdown(cj.ShiftedExponential(cfg.shift, cfg.mean),
                             prob=cfg.slow_prob, factor=cfg.slow_factor)  # fmt: skip
    server = Server(code, make_worker(model, jnp.bfloat16),
                    backend=ThreadCluster(injector=Injector(latency=slow,
                                                            seed=cfg.seed)),
                    policy=policy)  # fmt: skip
    app = make_app(model, server, group_deadline=group_deadline)
    print(f"serving {name} (K = {cfg.num_inputs}, M = {cfg.num_workers}) on "
          f"http://127.0.0.1:{port}/predict", file=sys.stderr)  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
