"""The serving benchmark on the vectorised simulator (zero engine overhead)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import FirstDecodable, FixedN, simulate_latency

from .config import (
    ServingConfig,
    catalogue_codes,
    injector,
    request_inputs,
    schemes,
)
from .workload import linear_truth, linear_worker_fn, pct, rel_err, truth, worker_fn

__all__ = ["run_simulated", "run_simulated_linear"]


def _sim_errors(code, sim, xs, inj, worker=worker_fn, truth=truth) -> np.ndarray:
    """Decoded error of the first requests of a simulation, on their final masks."""
    b = xs.shape[0]
    enc = jax.vmap(code.encode)(jnp.asarray(xs))
    y = jax.jit(jax.vmap(jax.vmap(worker)))(enc)
    # the arrival order of every request (used by a code that decodes from the
    # first answers in arrival order, ignored by the others)
    delays, _ = inj.plan(np.arange(b), code.num_workers)
    order = jnp.asarray(np.argsort(delays, axis=1, kind="stable").astype(np.int32))
    reads_order = "order" in code.answer_fields
    vals, oks = [], []
    for s in range(0, b, 256):
        extra = {"order": order[s : s + 256]} if reads_order else {}
        r = code.decode_batched(
            y[s : s + 256], jnp.asarray(sim.masks[s : s + 256]), **extra
        )
        vals.append(np.asarray(r.value))
        oks.append(np.asarray(r.ok))
    ok = np.concatenate(oks)
    err = rel_err(np.concatenate(vals), xs, truth)
    return err[ok]


def run_simulated(cfg: ServingConfig, *, rack: bool = False) -> dict:
    """Every scheme on the vectorised simulator (zero engine overhead)."""
    inj = injector(cfg, rack=rack)
    xs = request_inputs(cfg, cfg.error_requests)
    out = {}
    for name, code, policy in schemes(cfg):
        t0 = time.perf_counter()
        if getattr(policy, "needs_answers", False):
            count = cfg.adaptive_requests
            enc = code.encode(jnp.asarray(xs[0]))
            y = np.asarray(jax.vmap(worker_fn)(enc))  # one representative payload
            sim = simulate_latency(code, policy, inj, count, responses=y,
                                   check_ok=True)  # fmt: skip
        else:
            count = cfg.sim_requests
            sim = simulate_latency(code, policy, inj, count)
        seconds = time.perf_counter() - t0
        e = min(cfg.error_requests, count)
        head = sim._replace(masks=sim.masks[:e])
        err = _sim_errors(code, head, xs[:e], inj)
        lat = sim.latency
        out[name] = {
            "requests": int(count),
            "latency_ms": {q: 1e3 * pct(lat, q) for q in (50, 99, 99.9)},
            "ok_fraction": float(np.mean(sim.ok)),
            "num_used_median": float(np.median(sim.num_used)),
            "error_median": pct(err, 50),
            "error_p95": pct(err, 95),
            "error_requests": int(e),
            "seconds": seconds,
        }
    return out


def run_simulated_linear(cfg: ServingConfig) -> dict:
    """Fewer workers per query: a degree-1 worker (D = K), M = 2K workers.

    Replication has c = 2 replicas of each query and waits until each query has one
    answer; the Lagrange code (an MDS code for a linear function) decodes from any K
    answers. Same latency model, simulator, 1e5 requests.
    """
    k, m = cfg.num_inputs, 2 * cfg.num_inputs
    inj = injector(cfg)
    codes = catalogue_codes(cj.Workload("linear", 1, linear=True), k, m,
                            ("uncoded", "replication", "chebyls"))  # fmt: skip
    lag = codes["chebyls"]
    cases = [
        ("uncoded", codes["uncoded"], FixedN(k)),
        ("replication", codes["replication"], FirstDecodable()),
    ]
    cases += [(f"chebyls-{n}", lag, FixedN(n)) for n in (k, k + 2, k + 4) if n <= m]
    xs = request_inputs(cfg, cfg.error_requests)
    out = {}
    for name, code, policy in cases:
        sim = simulate_latency(code, policy, inj, cfg.sim_requests)
        e = cfg.error_requests
        err = _sim_errors(code, sim._replace(masks=sim.masks[:e]), xs[:e], inj,
                          linear_worker_fn, linear_truth)  # fmt: skip
        out[name] = {
            "requests": cfg.sim_requests,
            "num_workers": code.num_workers,
            "latency_ms": {q: 1e3 * pct(sim.latency, q) for q in (50, 99, 99.9)},
            "ok_fraction": float(np.mean(sim.ok)),
            "num_used_median": float(np.median(sim.num_used)),
            "error_median": pct(err, 50),
            "error_p95": pct(err, 95),
            "error_requests": int(e),
        }
    return out
