"""``python -m models.serve_dcn [--quick] --out DIR``: serving the trained DCNv2;
``python -m models.serve_dcn --http PORT [--quick]``: the same model behind an HTTP
endpoint (``models.serve_dcn.http``, the extra ``codedjax[http]``)."""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import jax.numpy as jnp

import codedjax as cj
import runkit
from codedjax.serving import Injector, Server, ThreadCluster
from runkit.pages import report_page

from ..train_dcn import load_or_train
from .branches import make_worker, schemes
from .config import ServeDCNConfig
from .layerwise import format_layerwise, run_layerwise
from .pipeline import ServeDCNSummary, run_serve_dcn
from .report import format_table

FLAGS = {
    "max_groups": "--max-groups",
    "ckpt_dir": (
        "--ckpt-dir",
        {"type": runkit.out_folder, "help": "default checkpoints"},
    ),
    "group_deadline": (
        "--group-deadline",
        {"help": "with --http: seconds a coding group waits to fill (default 0.005)"},
    ),
}


def _options(p: argparse.ArgumentParser) -> None:
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


def _check(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    runkit.only_with(p, a, "--http", ["--group-deadline"])
    runkit.not_with(p, a, "--layerwise", ["--http"], why="each is a run of its own")
    if a.http is not None and not 0 < a.http < 65536:
        p.error(f"--http: a port in 1..65535, got {a.http}")


def _run(cfg: ServeDCNConfig, cmd: runkit.Invocation) -> ServeDCNSummary | None:
    if cmd.args.layerwise:
        res = _layerwise(cfg, cmd.out)
        title = "Layer-wise coding of the trained DCNv2"
        report_page(cmd, title=title, report="layerwise.md")
        return res
    if cmd.args.http is not None:
        serve_http(cfg, cmd.args.http)
        return None
    summary = run_serve_dcn(cfg, out=cmd.out, show_progress=cmd.show_progress)
    print(format_table(summary))
    print(f"wrote {cmd.out} ({summary['seconds']:.0f} s)", file=sys.stderr)
    report_page(cmd, title="Serving the trained DCNv2 on Adult")
    return summary


def main(argv: list[str] | None = None) -> ServeDCNSummary | None:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        ServeDCNConfig, _run, argv, prog="python -m models.serve_dcn",
        description="Serving the trained DCNv2 through the thread cluster: latency "
        "against accuracy.", flags=FLAGS, out="results/serve_dcn",
        quick="the small model of models.coded_dcn --quick, 100 groups",
        options=_options, check=_check,
    )  # fmt: skip


def _layerwise(cfg: ServeDCNConfig, out: str) -> dict:
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


def serve_http(cfg: ServeDCNConfig, port: int) -> None:
    """Serves ChebyLS + RepApprox at the middle N of ``cfg.responses`` on the
    thread cluster (the benchmark's delays) at http://127.0.0.1:PORT/predict,
    a coding group waiting ``cfg.group_deadline`` seconds to fill."""
    try:  # the optional extra codedjax[http]: imported for --http only
        import uvicorn

        from .http import make_app
    except ImportError:
        sys.exit("--http: needs uvicorn and Starlette: pip install 'codedjax[http]'")

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
    app = make_app(model, server, group_deadline=cfg.group_deadline)
    # the model and data loaded: later collections skip them (a pass over the
    # whole heap stops every thread; docs/serving.md, "Garbage collection")
    gc.collect()
    gc.freeze()
    print(f"serving {name} (K = {cfg.num_inputs}, M = {cfg.num_workers}) on "
          f"http://127.0.0.1:{port}/predict", file=sys.stderr)  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
