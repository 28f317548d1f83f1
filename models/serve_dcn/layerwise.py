"""Layer-wise coding of the trained DCNv2 against replication at equal workers.

Every round codes one cross layer and one deep layer (``models.layerwise``,
:func:`~models.layerwise.dcn_rounds`) with a degree-1 ChebyLS code (D = K, so from
M = K + 1 on), bf16 workers; the master adds the biases, the ReLU and the cross
term, and the heads after the last round. Latency: ``simulate_latency`` (1e5
requests, zero engine overhead) of ``FixedN(N)`` plus one shift per extra round
(round j costs ``s + (T_i - s) / L``); replication on the same M workers decodes at
the first moment every query has a replica. Accuracy: the test set's AUC with the
layer-wise answers of the simulated masks, against the float32 model's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import (
    FirstDecodable,
    FixedN,
    Injector,
    latency_shift,
    simulate_latency,
)
from runkit import percentile

from ..layerwise import CachedPlan, dcn_rounds, pipeline_values
from ..metrics import binary_auc
from ..tabular import load_dataset
from ..train_dcn import load_or_train
from .branches import make_worker
from .config import ServeDCNConfig

__all__ = ["LATENCIES", "format_layerwise", "latency_text", "run_layerwise"]

#: the straggler models of the regime map (``benchmarks.regimes``), text form
LATENCIES = {
    "independent": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms",
    "heavy-tail": "shifted-pareto:5ms,1ms,1.5",
    "racks": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5",
    "persistent": "shifted-exp:5ms,5ms; workers={} factor=10",
}


def latency_text(name: str, m: int, seed: int) -> str:
    """As ``benchmarks.regimes.latency_text`` (two seeded slow workers of M for
    ``persistent``)."""
    if name != "persistent":
        return LATENCIES[name]
    rng = np.random.default_rng([seed, 24, m])
    slow = sorted(int(w) for w in rng.choice(m, 2, replace=False))
    return LATENCIES[name].format(",".join(map(str, slow)))


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
    data = load_dataset(cfg.train, show_progress=show_progress)
    model, _ = load_or_train(
        cfg.train, cfg.ckpt_dir, data=data, show_progress=show_progress
    )
    cat, num, labels = (np.asarray(a) for a in data.test)
    k = cfg.num_inputs
    g = len(labels) // k
    if cfg.max_groups is not None:
        g = min(g, cfg.max_groups)
    cat, num, labels = cat[: g * k], num[: g * k], labels[: g * k].astype(np.int32)
    x0 = np.asarray(
        jax.jit(lambda c, n: model.embed(c, n))(
            jnp.asarray(cat, jnp.int32), jnp.asarray(num, jnp.float32)
        )
    )
    z32 = np.asarray(jax.jit(model.logits_from_x0)(jnp.asarray(x0)), np.float64)
    auc32 = binary_auc(labels, z32)
    worker = jax.jit(jax.vmap(make_worker(model, jnp.bfloat16)))
    bias = float(np.asarray(model.output_bias(), np.float32))
    zb = np.asarray(worker(jnp.stack([jnp.asarray(x0)] * 2, 1)), np.float64)
    auc_bf16 = binary_auc(labels, zb.sum(-1) + bias)  # uncoded and replication
    rounds = dcn_rounds(model)
    groups = x0.reshape(g, k, -1)
    rows = []
    for ratio in ratios:
        m = int(round(k * ratio))
        code = cj.lagrange_code(num_inputs=k, num_workers=m, degree=1)
        rep = cj.replication_code(num_inputs=k, num_workers=m)
        for name in LATENCIES:
            text = latency_text(name, m, cfg.seed)
            model_l = cj.parse_latency(text)
            inj = CachedPlan(Injector(latency=model_l, seed=cfg.seed))
            r = max(requests, g)
            rep_p99 = 1e3 * percentile(
                simulate_latency(rep, FirstDecodable(), inj, r).latency, 99
            )
            extra = (len(rounds) - 1) * latency_shift(model_l)
            best = None
            for n in range(k, m + 1):
                sim = simulate_latency(code, FixedN(n), inj, r)
                z = pipeline_values(code, rounds, groups, sim.masks[:g])[..., 0]
                auc = binary_auc(labels, z.reshape(-1).astype(np.float64))
                best = {
                    "n": n,
                    "auc": auc,
                    "p99_ms": 1e3 * percentile(sim.latency + extra, 99),
                    "p50_ms": 1e3 * percentile(sim.latency + extra, 50),
                }
                if abs(auc - auc32) <= auc_tol:
                    break
            rows.append(
                {
                    "M": m,
                    "ratio": ratio,
                    "straggler": name,
                    "latency": text,
                    "layerwise": best,
                    "replication_p99_ms": rep_p99,
                    "p99_over_replication": best["p99_ms"] / rep_p99,
                    "auc_ok": abs(best["auc"] - auc32) <= auc_tol,
                    "moonshot": bool(
                        abs(best["auc"] - auc32) <= auc_tol
                        and best["p99_ms"] <= 0.5 * rep_p99
                    ),
                }
            )
    return {
        "K": k,
        "groups": g,
        "requests": max(requests, g),
        "rounds": len(rounds),
        "auc_float32": auc32,
        "auc_bf16_uncoded": auc_bf16,
        "auc_tol": auc_tol,
        "rows": rows,
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
