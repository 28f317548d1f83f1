"""The whole map: every (K, M) and straggler model, the summary, the report; and
the map's two checks on real servers.

* :func:`spot_check`: three K = 8 cells on the thread cluster against the
  simulator: the same injector (seed, latency model) and request numbers on a
  ``Server`` with a ``ThreadCluster`` (real threads, real bf16 computations, one
  request in flight so no worker queues) and on ``simulate_latency``; their p50
  and p99 should agree up to the engine's overhead (encode, decode, thread
  wake-ups).
* :func:`master_overhead`: the layer-wise master's measured work.
"""

from __future__ import annotations

import dataclasses
import time

import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit
from codedjax.serving import (
    FirstDecodable,
    FixedN,
    Injector,
    PipelineServer,
    Server,
    SimulatedCluster,
    ThreadCluster,
    simulate_latency,
)
from models.layerwise import layer_pipeline
from runkit import percentile

from .config import RegimesConfig, latency_model, latency_text
from .report import winners, write_outputs
from .search import run_block
from .workloads import inputs, rounds, workload

__all__ = ["CELLS", "headline", "master_overhead", "run_regimes", "spot_check"]

#: the spot check's cells: (straggler model, M, workload, scheme, N)
CELLS = (
    ("independent", 16, "linear", "chebyls", 10),
    ("racks", 12, "cross1", "replication", None),
    ("persistent", 24, "cross2", "chebyls", 24),
)


def headline(summary: dict) -> str:
    """Where coding beats replication at equal workers and equal accuracy, and
    where replication is the better choice (counts of cells, the best margins)."""
    ws = [w for w in winners(summary) if w["winner"]]
    coded = [w for w in ws if w["winner"] not in ("replication", "uncoded")]
    rep = [w for w in ws if w["winner"] == "replication"]
    lines = [
        f"{len(coded)} of {len(ws)} cells won by a coded scheme, {len(rep)} by "
        "replication (lowest per-query p99 at the accuracy target)."
    ]
    best = sorted(coded, key=lambda w: -w["replication_over_coded"])[:3]
    for w in best:
        lines.append(
            f"  {w.get('winner_layout') or w['winner']} (N = {w['winner_n']}): "
            f"{w['workload']}, "
            f"{w['straggler']}, K = {w['K']}, M/K = {w['ratio']:g}: replication's "
            f"p99 is {w['replication_over_coded']:.2f}x the coded scheme's"
        )
    for w in sorted(rep, key=lambda w: -w["margin"])[:3]:
        lines.append(
            f"  replication: {w['workload']}, {w['straggler']}, K = {w['K']}, "
            f"M/K = {w['ratio']:g}: runner-up {w['runner_up']}'s p99 is "
            f"{w['margin']:.2f}x replication's"
        )
    return "\n".join(lines)


def spot_check(cfg: RegimesConfig, requests: int) -> list[dict]:
    """p50/p99 (ms) of the thread cluster and the simulator in each of :data:`CELLS`."""
    k = 8
    out = []
    for straggler, m, wname, scheme, n in CELLS:
        wl = workload(wname, cfg.width, cfg.seed)
        code = cj.catalogue(wl, k, m, names=(scheme,))[0].code
        policy = FixedN(n) if n else FirstDecodable()
        inj = Injector(latency=latency_model(straggler, m, cfg.seed), seed=cfg.seed)
        xs = inputs(cfg.seed, requests, k, cfg.width)
        with Server(
            code, wl.fn, backend=ThreadCluster(injector=inj), policy=policy
        ) as server:
            served = server.serve([jnp.asarray(x) for x in xs], max_in_flight=1)
        thread = np.array([r.latency for r in served])
        sim = simulate_latency(code, policy, inj, requests).latency
        out.append(
            {
                "straggler": straggler,
                "K": k,
                "M": m,
                "workload": wname,
                "scheme": scheme,
                "n": n,
                "requests": requests,
                "thread_ms": {q: 1e3 * percentile(thread, q) for q in (50, 99)},
                "simulator_ms": {q: 1e3 * percentile(sim, q) for q in (50, 99)},
                "ok_fraction": float(np.mean([r.ok for r in served])),
            }
        )
    return out


def master_overhead(cfg: RegimesConfig) -> list[dict]:
    """The master's measured work per layer-wise request (every round's encode,
    decode and master step, wall clock) on ``PipelineServer``, at M = 2K with
    N = K + 1, for each K and workload; the map's layer-wise latencies exclude it
    (zero overhead, like every other scheme's)."""
    out = []
    for k in cfg.num_inputs:
        m = 2 * k
        inj = Injector(latency=latency_model("independent", m, cfg.seed), seed=cfg.seed)
        xs = inputs(cfg.seed, cfg.master_requests + 1, k, cfg.width)
        for wname in cfg.workloads:
            wl = workload(wname, cfg.width, cfg.seed)
            code = cj.catalogue(wl, k, m, names=("layerwise",))[0].code
            pipe = layer_pipeline(code, rounds(wl), policy=FixedN(k + 1))
            with PipelineServer(pipe, backend=SimulatedCluster(injector=inj)) as srv:
                res = srv.serve([jnp.asarray(x) for x in xs], max_in_flight=1)[1:]
            work = [np.nansum(r.encode_time + r.decode_time + r.step_time) for r in res]
            out.append(
                {
                    "K": k,
                    "M": m,
                    "workload": wname,
                    "rounds": wl.num_layers,
                    "requests": len(res),
                    "master_ms_median": 1e3 * float(np.median(work)),
                    "master_ms_per_round": 1e3 * float(np.median(work)) / wl.num_layers,
                }
            )
    return out


def run_regimes(
    cfg: RegimesConfig, *, out: str | None = None, show_progress: bool = True
) -> dict:
    """Runs the map; writes ``summary.json``, ``report.md`` and the winner maps to
    ``out`` when given."""
    t0 = time.perf_counter()
    grid = cfg.grid()
    cells = []
    total = len(grid) * len(cfg.stragglers) * len(cfg.workloads)
    with runkit.progress(total=total, desc="regimes", disable=not show_progress) as bar:
        for k, m in grid:
            for st in cfg.stragglers:
                blocks = run_block(cfg, k, m, st, progress=lambda: bar.update(1))
                cells.append(
                    {
                        "K": k,
                        "M": m,
                        "straggler": st,
                        "latency": latency_text(st, m, cfg.seed),
                        "workloads": blocks,
                    }
                )
    summary = {
        "config": dataclasses.asdict(cfg),
        "environment": runkit.environment(),
        "cells": cells,
    }
    if cfg.master_requests:
        summary["master_overhead"] = master_overhead(cfg)
    if cfg.spot_requests and 8 in cfg.num_inputs:
        summary["spot_check"] = spot_check(cfg, cfg.spot_requests)
    summary["winners"] = winners(summary)
    summary["headline"] = headline(summary)
    summary["seconds"] = time.perf_counter() - t0
    if out is not None:
        write_outputs(summary, out)
    return summary
