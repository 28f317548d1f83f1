"""The degraded-mode experiment: ParM's parity models against BACC and NeRCC.

For each base model and each k, at M = K + K/k workers:

* **ParM** (:func:`codedjax.parity_code`): degraded mode, one answer of every group
  lost; the accuracy of the rebuilt predictions (every test query rebuilt once,
  :func:`models.train_parity.degraded_predictions`).
* **BACC** and **NeRCC** (:func:`codedjax.bacc_code`, :func:`codedjax.nercc_code`,
  NeRCC's smoothing tuned with :func:`codedjax.tune_nercc` on validation queries):
  the same number of workers and the same number of lost answers, K/k (so N = K
  answers decode); the base model runs on the coded queries and every one of the K
  predictions is approximate. T random patterns, the same for every test batch;
  the metric is the mean over the patterns.
* **ParM, same masks**: ParM on BACC's and NeRCC's T patterns (K/k answers lost
  at random, so a group may lose two), each query counted on its own
  (:func:`models.parity_experiment.queries.decode_per_query`: each parity group
  decodes on its own); an unanswered query is a miss (top-1) or logit 0 (p = 1/2,
  AUC and logloss). With it: the share of queries answered and of requests whole
  on those patterns, and exactly, over every pattern of K/k lost answers
  (:func:`exact_shares`).
* **base**: the base model on the same test queries (no straggler).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from ..train_parity import (
    ParityConfig,
    ParityTask,
    apply_fn,
    degraded_predictions,
    load_or_train,
    load_task,
    parm_answers,
    task_metrics,
)
from .config import ExperimentConfig
from .queries import answered_shares, decode_per_query

__all__ = [
    "coded_predictions",
    "exact_shares",
    "parm_predictions",
    "run_cell",
    "run_experiment",
]


def _batches(x: np.ndarray, k: int) -> np.ndarray:
    b = x.shape[0] // k
    return x[: b * k].reshape((b, k) + x.shape[1:])


def coded_predictions(
    code: cj.Code, task: ParityTask, masks: np.ndarray, *, split: str = "test"
) -> tuple[np.ndarray, np.ndarray]:
    """The decoded predictions [T, n, ...] of every test query under each of the T
    ``masks`` (the base model run on the coded queries), and the labels [n]."""
    k, m = code.num_inputs, code.num_workers
    xb = jnp.asarray(_batches(task.queries[split], k))  # [B, K, ...]
    b = xb.shape[0]
    coded = jax.vmap(code.encode)(xb)  # [B, M, ...]
    f = apply_fn(task.kind, task.base)
    y = f(coded.reshape((b * m,) + coded.shape[2:]))
    y = y.reshape((b, m) + y.shape[1:])
    t = masks.shape[0]
    ys = jnp.repeat(y, t, axis=0)  # [B T, M, ...]
    ms = jnp.asarray(np.tile(masks, (b, 1)))
    r = code.decode_batched(ys, ms)
    if not bool(np.all(np.asarray(r.ok))):
        raise RuntimeError(f"coded_predictions: a {code.name} decode was not ok")
    v = np.asarray(r.value).reshape((b, t, k) + y.shape[2:])
    v = np.moveaxis(v, 1, 0).reshape((t, b * k) + y.shape[2:])
    return v, task.labels[split][: b * k]


def parm_predictions(
    code: cj.ParityCode, task: ParityTask, parity, masks: np.ndarray, split="test"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ParM's predictions [T, n, ...] of every test query under each of the T
    ``masks``, each query counted on its own (answered [T, n]), and the labels
    [n]: the base model's outputs and the parity model's on each group's sum."""
    kk, out = code.num_inputs, task.outputs[split]
    y = parm_answers(code, task, parity, split).astype(np.float32)  # [B, M, ...]
    b = y.shape[0]
    n = b * kk
    t = masks.shape[0]
    ys = np.repeat(y, t, axis=0)  # [B T, M, ...]
    ms = np.tile(np.asarray(masks, bool), (b, 1))

    def decode(y2, m2):
        r = code.decode_batched(jnp.asarray(y2), jnp.asarray(m2))
        return np.asarray(r.value), np.asarray(r.ok)

    value, ok = decode(ys, ms)
    value, answered = decode_per_query(code, ys, ms, value, ok, decode)
    v = np.moveaxis(value.reshape((b, t, kk) + out.shape[1:]), 1, 0)
    a = np.moveaxis(answered.reshape(b, t, kk), 1, 0)
    return v.reshape((t, n) + out.shape[1:]), a.reshape(t, n), task.labels[split][:n]


def exact_shares(code: cj.Code, num_responses: int) -> dict[str, float]:
    """The shares of queries answered and of requests whole over every mask of
    ``num_responses`` of the code's M workers (each equally likely)."""
    m = code.num_workers
    sets = np.array(list(itertools.combinations(range(m), num_responses)))
    masks = np.zeros((len(sets), m), bool)
    np.put_along_axis(masks, sets, True, axis=1)
    return answered_shares(code.decodable_queries(masks))


def _answered_metrics(kind, preds, answered, labels) -> dict[str, float]:
    """The mean over patterns of the metrics with every unanswered query a miss
    (top-1) or logit 0 (AUC, logloss)."""
    per = []
    for p, a in zip(preds, answered, strict=True):
        if kind == "dcn":
            per.append(task_metrics(kind, np.where(a, p, 0.0), labels))
        else:
            hit = (np.argmax(p, axis=-1) == labels) & a
            per.append({"top1": float(np.mean(hit))})
    return {key: float(np.mean([d[key] for d in per])) for key in per[0]}


def _mean_metrics(kind, preds, labels) -> dict[str, float]:
    per = [task_metrics(kind, p, labels) for p in preds]
    return {key: float(np.mean([d[key] for d in per])) for key in per[0]}


def run_cell(
    task: ParityTask,
    parity,
    group: int,
    config: ExperimentConfig,
    *,
    log: Callable[[str], None] = print,
) -> dict:
    """Base, ParM, BACC and NeRCC for one (model, k) at M = K + K/k."""
    kk = config.num_inputs
    # the network is not a polynomial: ParM's parity model is learned, BACC and
    # NeRCC approximate; every code from the catalogue at M = K + K/k
    schemes = {s.name: s for s in cj.catalogue(
        cj.Workload(task.model, None), kk, kk + kk // group,
        names=("bacc", "nercc", "parity"), nercc_smoothing=(0.0, 0.0),
    )}  # fmt: skip
    code = schemes[f"parity k={group}"].code
    m, lost = code.num_workers, code.num_groups
    rebuilt, labels, info = degraded_predictions(task, parity, group, num_inputs=kk)
    n = labels.shape[0]
    row = {
        "model": task.model,
        "group": group,
        "K": kk,
        "M": m,
        "lost": lost,
        "test_n": n,
        "base": task_metrics(task.kind, task.outputs["test"][:n], labels),
        "parm_degraded": task_metrics(task.kind, rebuilt, labels),
        "parm_ok": info["ok"],
        "parm_cond": info["cond"],
    }
    key = jax.random.key(config.seed)
    k_test, k_val = jax.random.split(jax.random.fold_in(key, group))
    masks = np.asarray(
        cj.sample_masks(k_test, num_workers=m, num_responses=m - lost,
                        shape=(config.test_masks,))
    )  # fmt: skip
    preds, answered, _ = parm_predictions(code, task, parity, masks)
    row["parm_masks"] = {
        **_answered_metrics(task.kind, preds, answered, labels),
        **answered_shares(answered),
        "exact": exact_shares(code, m - lost),
    }
    bacc = schemes["bacc"].code
    preds, _ = coded_predictions(bacc, task, masks)
    row["bacc"] = _mean_metrics(task.kind, preds, labels)
    # NeRCC: its smoothing pair tuned on validation queries, then tested
    nv = min(config.num_val, task.queries["val"].shape[0]) // kk
    xv = jnp.asarray(_batches(task.queries["val"][: nv * kk], kk))
    untuned = schemes["nercc"].code
    val_masks = cj.sample_masks(
        k_val, num_workers=m, num_responses=m - lost, shape=(config.val_masks,)
    )
    tuning = cj.tune_nercc(
        k_val, apply_fn(task.kind, task.base), xv, num_workers=m,
        beta=untuned.beta(), alpha=untuned.alpha(), grid=config.smoothing_grid,
        masks=val_masks,
    )  # fmt: skip
    lam = (float(tuning.encoder_smoothing), float(tuning.decoder_smoothing))
    nercc = dataclasses.replace(untuned, smoothing=lam)
    preds, _ = coded_predictions(nercc, task, masks)
    row["nercc"] = _mean_metrics(task.kind, preds, labels)
    row["nercc_smoothing"] = list(lam)
    log(f"[parity_experiment] {task.model} k={group} M={m}: {row}")
    return row


def run_experiment(
    config: ExperimentConfig,
    out,
    *,
    log: Callable[[str], None] = print,
    show_progress: bool | None = None,
) -> dict:
    """Every (model, k) cell; trains (or loads from ``out``) the base and parity
    models. Returns ``{"config", "rows", "parity_models", "seconds"}``."""
    t0 = time.perf_counter()
    rows, trained = [], {}
    for name in config.models:
        task = load_task(name, out, base_quick=config.quick_train, log=log,
                         show_progress=show_progress)  # fmt: skip
        for k in config.groups:
            over = {} if config.steps is None else {"steps": config.steps}
            pcfg = ParityConfig.preset(name, k, quick=config.quick_train, **over)
            parity, meta, _ = load_or_train(
                pcfg, out, task=task, log=log, show_progress=show_progress
            )
            trained[f"{name}-k{k}"] = {
                "config": meta["config"],
                "val_mse": meta["val_mse"],
                "train_seconds": meta["train_seconds"],
                "checkpoint": meta["checkpoint"],
                "base_checkpoint": task.base_meta.get("checkpoint"),
            }
            rows.append(run_cell(task, parity, k, config, log=log))
    return {
        "rows": rows,
        "parity_models": trained,
        "seconds": time.perf_counter() - t0,
    }
