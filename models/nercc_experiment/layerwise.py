"""Layer-wise coding of ParM's MNIST MLP against one-shot coding and replication.

``python -m models.nercc_experiment --layerwise --out DIR [--quick]``. The trained
784-200-100-10 MLP (``models.train_mnist``, model ``"mlp"``) served three ways on
the same M workers, K = 8 queries per request, bf16 workers:

* ``layerwise``: every linear layer a round of one degree-1 ChebyLS code
  (``models.layerwise.mlp_rounds``; D = K, so from M = K + 1 on): the workers
  compute ``v W`` on their coded rows, the master decodes the K products from the
  first N answers, adds the bias and the ReLU and encodes for the next layer; the
  logits after the third decode. Exact in exact arithmetic, ReLU included.
* one-shot coding of the whole MLP: BACC and NeRCC (smoothing tuned once per M on
  the validation images, random masks of 0.8 M answers) and RepApprox (c = M // K
  replicas, the rest Berrut-coded) encode the K images, every worker runs the
  whole MLP on its coded image, the master decodes the K logit vectors from the
  first N answers. The Lagrange codes do not apply (the MLP is not a polynomial).
* ``replication`` (query i mod K on worker i, decode when every query has an
  answer) and ``uncoded`` (K of the M workers, wait for all K): the bf16 model
  itself.

Latency: ``simulate_latency`` (zero engine overhead, 1e5 requests), with the
per-round model of ``PipelineServer`` (round j costs worker i ``s + (T_i - s) / L``
on one draw T_i per request: a slow worker is slow in every round, so L rounds at
the N-th answer cost ``T_(N) + (L - 1) s``); then the master's measured work per
request (every round's encode, decode and master step, ``PipelineServer`` on a
``SimulatedCluster``, wall clock on this machine) added to every scheme's
percentiles (``p99 + master``). Accuracy: top-1 on the test set with the decoded
logits under the simulated requests' masks (test group g decoded under the masks
of requests g, g + G, g + 2G, ...), and the agreement with the float32 model's
predictions; a scheme's N is the smallest of its grid whose top-1 is within
``top1_tol`` of the float32 model's.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit
from codedjax.serving import (
    FirstDecodable,
    FixedN,
    Injector,
    Pipeline,
    PipelineServer,
    Round,
    SimulatedCluster,
    simulate_latency,
)
from runkit import percentile

from ..layerwise import (
    latency_text,
    layer_pipeline,
    mlp_layers,
    mlp_rounds,
    mlp_worker,
    straggler,
    sweep_n,
)
from ..mnist import load_mnist
from ..train_mnist import load_or_train, logits_fn
from .config import LayerwiseConfig

__all__ = ["LayerwiseConfig", "format_layerwise", "run_layerwise"]

_CHUNK = 256
#: the catalogue's entries (in its order): the baselines, the Lagrange codes (which
#: do not apply: reported), one-shot coding and layer-wise coding
_NAMES = ("uncoded", "replication", "chebyls", "threshold", "graceful", "bacc",
          "nercc", "repapprox", "layerwise")  # fmt: skip
_ONE_SHOT = ("bacc", "nercc", "repapprox")


def _decode_logits(code, y, masks) -> np.ndarray:
    """y [E, M, 10], masks [E, M] -> logits [E, K, 10] (NaN where not ok)."""
    out = []
    for s in range(0, y.shape[0], _CHUNK):
        r = code.decode_batched(y[s : s + _CHUNK], jnp.asarray(masks[s : s + _CHUNK]))
        v = np.asarray(r.value, np.float64)
        out.append(np.where(np.asarray(r.ok)[:, None, None], v, np.nan))
    return np.concatenate(out)


def _scores(logits, labels, pred32) -> tuple[float, float]:
    """Top-1 and agreement with the float32 model's predictions (a request that
    did not decode counts as wrong)."""
    ok = np.isfinite(logits).all(-1)
    pred = np.where(ok, np.nan_to_num(logits).argmax(-1), -1)
    return float(np.mean(pred == labels)), float(np.mean(pred == pred32))


def _search(trials, labels, pred32, target):
    """The first of ``trials`` ((N, logits, latencies) each, N growing) whose
    top-1 meets ``target``, else the last: (N, latencies, top-1, agreement, every
    N tried with its top-1 and p99)."""
    tried = []
    for n, logits, lat in trials:
        t1, ag = _scores(logits, labels, pred32)
        tried.append({"n": n, "top1": t1, "p99_ms": 1e3 * percentile(lat, 99)})
        if t1 >= target:
            break
    return n, lat, t1, ag, tried


def _row(name, n, lat, top1, agree, tried, note, target, master) -> dict:
    master_ms = master.get(name, math.nan)
    return {
        "scheme": name,
        "n": n,
        "top1": top1,
        "agreement": agree,
        "meets_target": bool(top1 >= target),
        "p50_ms": 1e3 * percentile(lat, 50),
        "p99_ms": 1e3 * percentile(lat, 99),
        "p999_ms": 1e3 * percentile(lat, 99.9),
        "master_ms": master_ms,
        "p99_master_ms": 1e3 * percentile(lat, 99) + master_ms,
        "tried": tried,
        "note": note,
    }


def _master_ms(pipe: Pipeline, inj, xs) -> float:
    """Median measured master work (encodes, decodes, master steps) per request."""
    with PipelineServer(pipe, backend=SimulatedCluster(injector=inj)) as srv:
        res = srv.serve([jnp.asarray(x) for x in xs], max_in_flight=1)[1:]
    work = [np.nansum(r.encode_time + r.decode_time + r.step_time) for r in res]
    return 1e3 * float(np.median(work))


def _master(cfg, codes, lin, rounds, worker, groups, m, k) -> dict[str, float]:
    """The master's work per request, measured once per (M, scheme) on
    ``cfg.master_requests`` requests (none: empty)."""
    if not cfg.master_requests:
        return {}
    inj0 = Injector(latency=cj.parse_latency(latency_text("independent", m, 0)))
    xs = groups[: cfg.master_requests + 1]
    master = {
        "layerwise": _master_ms(
            layer_pipeline(lin, rounds, policy=FixedN(k + 1)), inj0, xs
        )
    }
    for name, code in codes.items():
        pol = {"replication": FirstDecodable(), "uncoded": FixedN(k)}.get(
            name, FixedN(k + 1)
        )
        master[name] = _master_ms(Pipeline([Round(code, worker, policy=pol)]), inj0, xs)
    return master


def _tune(layers, val, k, m, seed) -> tuple[float, float]:
    fn = jax.jit(jax.vmap(mlp_worker(layers, jnp.bfloat16)))
    t = cj.tune_nercc(
        jax.random.key(seed),
        lambda v: fn(v).astype(jnp.float32),
        jnp.asarray(val),
        num_workers=m,
        num_responses=max(2, math.ceil(0.8 * m)),
        grid=(1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
        num_masks=32,
    )
    return (t.encoder_smoothing, t.decoder_smoothing)


def run_layerwise(
    cfg: LayerwiseConfig, *, model=None, split=None, log=print
) -> dict[str, Any]:
    """Every scheme at every (M, straggler model); see the module docstring.

    Args:
        cfg: the run.
        model: an MLP (``models.mlp.MLP``) instead of the trained one (tests).
        split: the MNIST split (default :func:`models.mnist.load_mnist`).
        log: where the training line goes (None: silent).
    """
    t_start = time.perf_counter()
    split = split if split is not None else load_mnist()
    if model is None:
        model, _ = load_or_train(
            "mlp", cfg.ckpt_dir, cfg.quick_train, split=split, log=log
        )
    layers = mlp_layers(model)
    rounds = mlp_rounds(layers, last_relu=False)
    k = cfg.num_inputs
    g = min(cfg.num_test, len(split.test_y)) // k
    v = min(cfg.num_val, len(split.val_y)) // k
    imgs = np.asarray(split.test_x[: g * k], np.float32)
    labels = np.asarray(split.test_y[: g * k]).reshape(g, k)
    groups = imgs.reshape(g, k, -1)
    val = np.asarray(split.val_x[: v * k], np.float32).reshape(v, k, -1)
    pred32 = np.asarray(logits_fn(model)(imgs)).argmax(-1).reshape(g, k)
    top1_32 = float(np.mean(pred32 == labels))
    worker = mlp_worker(layers, jnp.bfloat16)
    run_workers = jax.jit(jax.vmap(jax.vmap(worker)))
    zb = np.asarray(run_workers(jnp.asarray(groups)), np.float64)
    top1_bf16 = float(np.mean(zb.argmax(-1) == labels))
    target = top1_32 - cfg.top1_tol
    e = g * cfg.masks_per_group
    idx = np.arange(e) % g  # request r decodes test group r mod G
    lab, p32 = labels[idx], pred32[idx]
    nrounds = len(rounds)
    net = cj.Workload("MLP (ReLU)", None, layers=tuple(rounds))
    rows = []
    for ratio in cfg.ratios:
        m = int(round(k * ratio))
        smoothing = _tune(layers, val, k, m, cfg.seed)
        entries = {
            s.name: s
            for s in cj.catalogue(net, k, m, names=_NAMES, nercc_smoothing=smoothing)
        }
        codes = {n: s.code for n, s in entries.items() if s.applies}
        if "layerwise" not in codes:
            raise ValueError(f"run_layerwise: {entries['layerwise'].reason}")
        lin = codes.pop("layerwise")
        one_shot = {n: codes[n] for n in _ONE_SHOT}
        payload = {
            name: jnp.asarray(
                run_workers(jax.vmap(code.encode)(jnp.asarray(groups))), jnp.float32
            )[idx]
            for name, code in codes.items()
        }
        master = _master(cfg, codes, lin, rounds, worker, groups, m, k)
        for st in cfg.stragglers:
            text, inj, shift = straggler(st, m, cfg.seed)
            cell = []
            baselines = {"uncoded": FixedN(k), "replication": FirstDecodable()}
            for name, pol in baselines.items():
                s = simulate_latency(codes[name], pol, inj, cfg.requests)
                logits = _decode_logits(codes[name], payload[name], s.masks[:e])
                t1, ag = _scores(logits, lab, p32)
                cell.append(_row(name, None, s.latency, t1, ag, [], "", target, master))
            # layer-wise: every N from K, the same N in all three rounds
            sweep = sweep_n(lin, rounds, groups[idx], inj, cfg.requests, shift)
            trials = ((n, np.asarray(z, np.float64), lat) for n, z, lat in sweep)
            note = f"{nrounds} rounds, D = K"
            found = _search(trials, lab, p32, target)
            cell.append(_row("layerwise", *found, note, target, master))
            notes = {"nercc": f"smoothing {smoothing}", "repapprox": f"c = {m // k}"}
            for name, code in one_shot.items():
                sims = (
                    (n, simulate_latency(code, FixedN(n), inj, cfg.requests))
                    for n in cfg.n_grid(m)
                )
                trials = (
                    (n, _decode_logits(code, payload[name], s.masks[:e]), s.latency)
                    for n, s in sims
                )
                found = _search(trials, lab, p32, target)
                cell.append(_row(name, *found, notes.get(name, ""), target, master))
            cell += [
                {"scheme": s.name, "applies": False, "reason": s.reason}
                for s in entries.values()
                if not s.applies
            ]
            rows.append(
                {"M": m, "ratio": ratio, "straggler": st, "latency": text, "rows": cell}
            )
    return {
        "K": k,
        "groups": g,
        "decoded_requests": e,
        "requests": cfg.requests,
        "rounds": nrounds,
        "top1_float32": top1_32,
        "top1_bf16_uncoded": top1_bf16,
        "top1_tol": cfg.top1_tol,
        "config": dataclasses.asdict(cfg),
        "cells": rows,
        "summary": _best(rows),
        "seconds": time.perf_counter() - t_start,
    }


def _best(cells) -> list[dict]:
    """Per cell: the lowest p99 + master among the schemes at the target, and
    layer-wise coding's p99 over replication's and over the best one-shot code's."""
    out = []
    for c in cells:
        rows = {r["scheme"]: r for r in c["rows"] if r.get("applies", True)}
        ok = [r for r in rows.values() if r["meets_target"]]
        win = min(ok, key=lambda r: r["p99_master_ms"]) if ok else None
        shots = [
            rows[s] for s in ("bacc", "nercc", "repapprox") if rows[s]["meets_target"]
        ]
        best_shot = min(shots, key=lambda r: r["p99_master_ms"]) if shots else None
        lw, rep = rows["layerwise"], rows["replication"]
        out.append(
            {
                "M": c["M"],
                "straggler": c["straggler"],
                "winner": None if win is None else win["scheme"],
                "layerwise_over_replication": lw["p99_master_ms"]
                / rep["p99_master_ms"],
                "best_one_shot": None if best_shot is None else best_shot["scheme"],
                "layerwise_over_one_shot": (
                    None
                    if best_shot is None
                    else lw["p99_master_ms"] / best_shot["p99_master_ms"]
                ),
            }
        )
    return out


def format_layerwise(res: dict) -> str:
    """Markdown: one table of every scheme per (M, straggler model)."""
    lines = [
        f"Layer-wise coding of the MNIST MLP 784-200-100-10 ({res['rounds']} rounds, "
        f"degree-1 ChebyLS, bf16 workers) against one-shot coding, RepApprox and "
        f"replication at equal workers, K = {res['K']}, {res['groups']} test groups "
        f"decoded under {res['decoded_requests']} simulated requests' masks, "
        f"{res['requests']} simulated requests per row. Top-1 float32 "
        f"{res['top1_float32']:.4f}, bf16 uncoded/replication "
        f"{res['top1_bf16_uncoded']:.4f}; N = the smallest with top-1 >= float32's "
        f"- {res['top1_tol']:g}. p99 + master: the master's measured work per "
        "request added.",
        "",
    ]
    head = ["M/K", "M", "straggler", "scheme", "N", "top-1", "agree f32", "p50 ms",
            "p99 ms", "master ms", "p99 + master ms", "target"]  # fmt: skip
    lines += runkit.md_table(head, (
        [f"{c['ratio']:g}", c["M"], c["straggler"], r["scheme"],
         "" if r["n"] is None else r["n"], f"{r['top1']:.4f}", f"{r['agreement']:.4f}",
         f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}", f"{r['master_ms']:.2f}",
         f"{r['p99_master_ms']:.1f}", "yes" if r["meets_target"] else "no"]
        for c in res["cells"] for r in c["rows"] if r.get("applies", True)
    ))  # fmt: skip
    lines += [
        "",
        "ChebyLS, threshold and graceful Lagrange codes do not apply (the MLP is not a "
        "polynomial: ReLU).",
        "",
    ]
    head = ["M", "straggler", "winner (p99 + master)", "layer-wise / replication",
            "best one-shot", "layer-wise / it"]  # fmt: skip
    lines += runkit.md_table(head, (
        [b["M"], b["straggler"], b["winner"], f"{b['layerwise_over_replication']:.2f}",
         b["best_one_shot"] or "none",
         "" if (s := b["layerwise_over_one_shot"]) is None else f"{s:.2f}"]
        for b in res["summary"]
    ))  # fmt: skip
    return "\n".join(lines)
