"""Layer-wise coding of the trained DCNv2 against replication at equal workers.

Every round codes one cross layer and one deep layer (``models.layerwise``,
:func:`~models.layerwise.dcn_rounds`) with the catalogue's ``layerwise`` code (a
degree-1 ChebyLS code: D = K, so from M = K + 1 on), bf16 workers; the master adds
the biases, the ReLU and the cross term, and the heads after the last round.
Latency: ``simulate_latency`` (1e5 requests, zero engine overhead) of ``FixedN(N)``
plus one shift per extra round (round j costs ``s + (T_i - s) / L``); the
catalogue's replication on the same M workers decodes at the first moment every
query has a replica. Accuracy: the test set's AUC with the layer-wise answers of
the simulated masks, against the float32 model's.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import FirstDecodable, simulate_latency
from runkit import percentile

from ..layerwise import LATENCIES, dcn_rounds, latency_text, straggler, sweep_n
from ..metrics import binary_auc
from .branches import make_worker
from .config import ServeDCNConfig
from .pipeline import load_test_set

__all__ = ["LATENCIES", "format_layerwise", "latency_text", "run_layerwise"]

_NAMES = ("replication", "layerwise")  # in the catalogue's order


def run_layerwise(
    cfg: ServeDCNConfig,
    *,
    ratios=(1.25, 1.5, 2.0),
    requests: int = 100_000,
    auc_tol: float = 1e-3,
    show_progress=None,
) -> dict[str, Any]:
    """The moonshot's comparison: per M <= 2K and straggler model, the smallest N
    whose AUC is within ``auc_tol`` of the float32 model's, its p99 against
    replication's at the same M."""
    t_start = time.perf_counter()
    _, model, labels, x0, z32 = load_test_set(cfg, show_progress)
    k = cfg.num_inputs
    g = len(labels) // k
    auc32 = binary_auc(labels, z32)
    worker = jax.jit(jax.vmap(make_worker(model, jnp.bfloat16)))
    bias = float(np.asarray(model.output_bias(), np.float32))
    zb = np.asarray(worker(jnp.stack([jnp.asarray(x0)] * 2, 1)), np.float64)
    auc_bf16 = binary_auc(labels, zb.sum(-1) + bias)  # uncoded and replication
    rounds = dcn_rounds(model)
    groups = x0.reshape(g, k, -1)
    net = cj.Workload("DCNv2", None, layers=tuple(rounds))
    r = max(requests, g)
    rows = []
    for ratio in ratios:
        m = int(round(k * ratio))
        rep, code = (s.code for s in cj.catalogue(net, k, m, names=_NAMES))
        for name in LATENCIES:
            text, inj, shift = straggler(name, m, cfg.seed)
            rep_lat = simulate_latency(rep, FirstDecodable(), inj, r).latency
            rep_p99 = 1e3 * percentile(rep_lat, 99)
            for n, z, lat in sweep_n(code, rounds, groups, inj, r, shift):
                auc = binary_auc(labels, z[..., 0].reshape(-1).astype(np.float64))
                best = {
                    "n": n,
                    "auc": auc,
                    "p99_ms": 1e3 * percentile(lat, 99),
                    "p50_ms": 1e3 * percentile(lat, 50),
                }
                if abs(auc - auc32) <= auc_tol:
                    break
            auc_ok = abs(best["auc"] - auc32) <= auc_tol
            rows.append(
                {
                    "M": m,
                    "ratio": ratio,
                    "straggler": name,
                    "latency": text,
                    "layerwise": best,
                    "replication_p99_ms": rep_p99,
                    "p99_over_replication": best["p99_ms"] / rep_p99,
                    "auc_ok": auc_ok,
                    "moonshot": bool(auc_ok and best["p99_ms"] <= 0.5 * rep_p99),
                }
            )
    return {
        "K": k,
        "groups": g,
        "requests": r,
        "rounds": len(rounds),
        "auc_float32": auc32,
        "auc_bf16_uncoded": auc_bf16,
        "auc_tol": auc_tol,
        "rows": rows,
        "seconds": time.perf_counter() - t_start,
    }


def format_layerwise(res: dict) -> str:
    """Markdown table of :func:`run_layerwise`."""
    lines = [
        f"Layer-wise coding of the DCNv2 ({res['rounds']} rounds, degree-1 ChebyLS, "
        f"bf16 workers) against replication at equal workers, K = {res['K']}, "
        f"{res['groups']} test groups, {res['requests']} simulated requests. "
        f"AUC float32 {res['auc_float32']:.5f}, bf16 uncoded/replication "
        f"{res['auc_bf16_uncoded']:.5f}; N = the smallest with |AUC - float32's| "
        f"<= {res['auc_tol']:g}.",
        "",
        "| M/K | M | straggler | N | AUC | p50 ms | p99 ms | replication p99 ms | "
        "ratio | moonshot |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lw = r["layerwise"]
        lines.append(
            f"| {r['ratio']:g} | {r['M']} | {r['straggler']} | {lw['n']} | "
            f"{lw['auc']:.5f}{'' if r['auc_ok'] else ' (misses)'} | "
            f"{lw['p50_ms']:.1f} | {lw['p99_ms']:.1f} | "
            f"{r['replication_p99_ms']:.1f} | {r['p99_over_replication']:.2f} | "
            f"{'yes' if r['moonshot'] else 'no'} |"
        )
    return "\n".join(lines)
