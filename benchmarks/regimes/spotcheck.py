"""Three K = 8 cells on the thread cluster against the simulator.

The same injector (seed, latency model) and request numbers on a ``Server`` with a
``ThreadCluster`` (real threads, real bf16 computations, one request in flight so no
worker queues) and on ``simulate_latency``: their p50 and p99 should agree up to the
engine's overhead (encode, decode, thread wake-ups).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import codedjax as cj
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

from .config import RegimesConfig, latency_model
from .workloads import inputs, workload

__all__ = ["CELLS", "master_overhead", "spot_check"]

#: (straggler model, M, workload, scheme, N)
CELLS = (
    ("independent", 16, "linear", "chebyls", 10),
    ("racks", 12, "cross1", "replication", None),
    ("persistent", 24, "cross2", "chebyls", 24),
)


def spot_check(cfg: RegimesConfig, requests: int) -> list[dict]:
    """p50/p99 (ms) of the thread cluster and the simulator in each of :data:`CELLS`."""
    k = 8
    out = []
    for straggler, m, wname, scheme, n in CELLS:
        wl = workload(wname, cfg.width, cfg.seed)
        if scheme == "replication":
            code, policy = (
                cj.replication_code(num_inputs=k, num_workers=m),
                FirstDecodable(),
            )
        else:
            code = cj.lagrange_code(num_inputs=k, num_workers=m, degree=wl.degree)
            policy = FixedN(n)
        inj = Injector(latency=latency_model(straggler, m, cfg.seed), seed=cfg.seed)
        xs = inputs(cfg.seed, requests, k, cfg.width)
        with Server(
            code, wl.worker, backend=ThreadCluster(injector=inj), policy=policy
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
                "thread_ms": {
                    q: 1e3 * float(np.percentile(thread, q)) for q in (50, 99)
                },
                "simulator_ms": {
                    q: 1e3 * float(np.percentile(sim, q)) for q in (50, 99)
                },
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
        code = cj.lagrange_code(num_inputs=k, num_workers=m, degree=1)
        inj = Injector(latency=latency_model("independent", m, cfg.seed), seed=cfg.seed)
        xs = inputs(cfg.seed, cfg.master_requests + 1, k, cfg.width)
        for wname in cfg.workloads:
            wl = workload(wname, cfg.width, cfg.seed)
            pipe = layer_pipeline(code, wl.rounds(), policy=FixedN(k + 1))
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
