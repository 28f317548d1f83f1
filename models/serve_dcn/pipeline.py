"""Serve Adult's test queries with every scheme through the thread cluster."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import (
    FixedN,
    Injector,
    Server,
    SimulatedCluster,
    ThreadCluster,
)
from runkit import environment, l2_rel_err, percentile, progress

from ..metrics import binary_auc, binary_logloss
from ..parity_experiment.queries import decode_per_query
from ..tabular import load_dataset
from ..train_dcn import load_or_train
from .branches import make_worker, schemes
from .config import ServeDCNConfig
from .report import write_outputs

__all__ = ["ServeDCNSummary", "load_test_set", "per_query", "run_serve_dcn"]


class ServeDCNSummary(TypedDict):
    """What :func:`run_serve_dcn` returns (and writes to ``summary.json``): per
    scheme its code, policy, AUC, logloss, logit errors, latency percentiles, the
    answers used and the load average."""

    config: dict[str, Any]
    float32_model: dict[str, float]
    adaptive_budget: float
    queries: int
    schemes: dict[str, dict[str, Any]]
    cpu_count: int | None
    environment: dict[str, Any]
    seconds: float


def load_test_set(cfg: ServeDCNConfig, show_progress=None):
    """The run's data, model (loaded, or trained when its checkpoint is missing)
    and test queries, cut to whole groups of K (at most ``max_groups``): (data,
    model, labels [G K] int32, x0 [G K, d0] float32, float32 logits [G K] float64)."""
    data = load_dataset(cfg.train, show_progress=show_progress)
    model, _ = load_or_train(cfg.train, cfg.ckpt_dir, data=data,
                             show_progress=show_progress)  # fmt: skip
    cat, num, labels = (np.asarray(a) for a in data.test)
    k = cfg.num_inputs
    g = len(labels) // k
    if cfg.max_groups is not None:
        g = min(g, cfg.max_groups)
    nq = g * k
    cat, num, labels = cat[:nq], num[:nq], labels[:nq].astype(np.int32)
    x0 = np.asarray(jax.jit(lambda c, n: model.embed(c, n))(
        jnp.asarray(cat, jnp.int32), jnp.asarray(num, jnp.float32)))  # fmt: skip
    z32 = np.asarray(jax.jit(model.logits_from_x0)(jnp.asarray(x0)), np.float64)
    return data, model, labels, x0, z32


def per_query(code, res) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok [G], value [G, K, 2], answered [G, K]) of the server's results ``res``
    for the branch code ``code``: each query counted where both branches give it
    (:func:`models.parity_experiment.queries.decode_per_query`), its value filled
    in where its group is not ok (replication: a query with a responding replica
    of both branches' inputs)."""
    ok = np.array([r.ok for r in res], bool)
    value = np.stack([np.asarray(r.value) for r in res])
    masks = np.stack([np.asarray(r.mask, bool) for r in res])
    orders = jnp.asarray(np.stack([np.asarray(r.order, np.int32) for r in res]))

    def decode(y, m):
        run = jax.vmap(lambda yy, mm, oo: code.decode(yy, mm, order=oo))
        out = run(jnp.asarray(y), jnp.asarray(m), orders)
        return np.asarray(out.value), np.asarray(out.ok)

    y = np.stack([np.asarray(r.responses) for r in res])
    value, answered = decode_per_query(code, y, masks, value, ok, decode)
    # a request the server never decided (a stalled one) answered nothing
    decided = np.isfinite([r.latency for r in res])
    return ok, value, answered & decided[:, None]


def _calibrate(cfg: ServeDCNConfig, data, model, worker) -> float:
    """The adaptive budget: median predicted error of ChebyLS at N responses on
    validation groups (no delays: a simulated cluster)."""
    k, n = cfg.num_inputs, cfg.calibration_responses
    cat, num, _ = (np.asarray(a) for a in data.val)
    q = min(len(cat) // k, cfg.calibration_groups) * k
    embed = jax.jit(lambda c, u: model.embed(c, u))
    x0 = np.asarray(
        embed(jnp.asarray(cat[:q], jnp.int32), jnp.asarray(num[:q], jnp.float32))
    )
    cheb = schemes(cfg, 1.0)[-1][1]
    inj = Injector(
        latency=cj.ShiftedExponential(cfg.shift, cfg.mean), seed=cfg.seed + 1
    )
    with Server(cheb, worker, backend=SimulatedCluster(injector=inj),
                policy=FixedN(n)) as server:  # fmt: skip
        # one group at a time, on idle workers: the calibration is of errors
        res = server.serve(x0.reshape(-1, k, x0.shape[-1]), max_in_flight=1)
    return float(np.median([r.error for r in res if r.ok]))


def run_serve_dcn(
    cfg: ServeDCNConfig, *, out=None, show_progress=None
) -> ServeDCNSummary:
    """Serves the test set with every scheme and returns the summary (and writes
    ``summary.json``, ``report.md`` and the plot to ``out`` when given)."""
    t_start = time.perf_counter()
    data, model, labels, x0, z32 = load_test_set(cfg, show_progress)
    k = cfg.num_inputs
    g = len(labels) // k
    nq = g * k
    bias = float(np.asarray(model.output_bias(), np.float32))
    groups = x0.reshape(g, k, -1)
    worker = make_worker(model, jnp.bfloat16)
    slow = cj.RandomSlowdown(cj.ShiftedExponential(cfg.shift, cfg.mean),
                             prob=cfg.slow_prob, factor=cfg.slow_factor)  # fmt: skip
    inj = Injector(latency=slow, seed=cfg.seed)
    budget = _calibrate(cfg, data, model, worker)
    rows = {}
    ref = {"auc": binary_auc(labels, z32), "logloss": binary_logloss(labels, z32)}
    todo = schemes(cfg, budget)
    disable = True if show_progress is False else (False if show_progress else None)
    bar = progress(todo, total=len(todo), desc="serving schemes", disable=disable)
    for name, code, policy in bar:
        load = os.getloadavg()[0]
        with Server(code, worker, backend=ThreadCluster(injector=inj),
                    policy=policy) as server:  # fmt: skip
            res = server.serve(groups, max_in_flight=1)
        ok, vals, answered = per_query(code, res)
        z = (vals.astype(np.float64).sum(axis=-1) + bias).reshape(-1)
        # a query that could not be answered is answered with logit 0 (p = 1/2)
        z = np.where(answered.reshape(-1), z, 0.0)
        rel = l2_rel_err(z.reshape(g, k), z32.reshape(g, k))
        lat = np.array([r.latency for r in res])
        rows[name] = {
            "code": code.name,
            "policy": repr(policy),
            "groups": g,
            "ok_fraction": float(ok.mean()),
            "answered_fraction": float(answered.mean()),
            "auc": binary_auc(labels, z),
            "logloss": binary_logloss(labels, z),
            "logit_rel_err_median": percentile(rel, 50),
            "logit_rel_err_p95": percentile(rel, 95),
            "latency_ms": {q: 1e3 * percentile(lat, q) for q in (50, 99, 99.9)},
            "num_used_median": float(np.median([r.mask.sum() for r in res])),
            "loadavg": load,
        }
    summary = ServeDCNSummary(
        config={**dataclasses.asdict(cfg), "train": cfg.train.to_dict()},
        float32_model=ref,
        adaptive_budget=budget,
        queries=nq,
        schemes=rows,
        cpu_count=os.cpu_count(),
        environment=environment(),
        seconds=time.perf_counter() - t_start,
    )
    if out is not None:
        write_outputs(summary, out)
    return summary
