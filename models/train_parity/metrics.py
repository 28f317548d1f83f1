"""Degraded-mode predictions of a parity model, decoded by :func:`codedjax.parity_code`.

Degraded mode: one answer of every group of k is missing, and the lost prediction is
rebuilt from the group's parity. The test queries are served K at a time (K = 12
serves k = 2, 3 and 4); for each position j < k the answers of query j of every
group are dropped and decoded with the code, so every query is rebuilt exactly once.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import nnx

import codedjax as cj

from ..metrics import binary_auc, binary_logloss
from .loop import ParityTask, apply_fn

__all__ = ["degraded_masks", "degraded_predictions", "task_metrics"]


def degraded_masks(code: cj.ParityCode) -> np.ndarray:
    """bool [k, M]: mask j drops the answer of query j of every group."""
    k, m = code.group, code.num_workers
    masks = np.ones((k, m), bool)
    for j in range(k):
        masks[j, j : code.num_inputs : k] = False
    return masks


def parm_answers(
    code: cj.ParityCode, task: ParityTask, parity: nnx.Module, split: str = "test"
) -> np.ndarray:
    """ParM's answers [B, M, ...] to the queries of ``split`` (cut to B whole
    requests of K): the base model's outputs, then the parity model's on each
    group's sum."""
    kk, g, k = code.num_inputs, code.num_groups, code.group
    x, out = task.queries[split], task.outputs[split]
    b = x.shape[0] // kk
    n = b * kk
    base = out[:n].reshape((b, kk) + out.shape[1:])
    p = x[:n].reshape((b * g, k) + x.shape[1:]).sum(axis=1)
    par = np.asarray(apply_fn(task.kind, parity)(p)).reshape((b, g) + out.shape[1:])
    return np.concatenate([base, par], axis=1)


def degraded_predictions(
    task: ParityTask,
    parity: nnx.Module,
    group: int,
    *,
    split: str = "test",
    num_inputs: int = 12,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Every query of ``split`` (cut to a multiple of K) rebuilt from its parity.

    Returns:
        ``(rebuilt, labels, info)``: the rebuilt outputs [n, ...] (what the decode
        returns for the lost query), the labels [n], and ``info`` with ``n``,
        ``ok`` (every decode ok) and ``cond`` (the largest reported cond).
    """
    code = cj.parity_code(num_inputs=num_inputs, group=group)
    kk, k, out = num_inputs, group, task.outputs[split]
    y = parm_answers(code, task, parity, split)  # [B, M, ...]
    b = y.shape[0]
    n = b * kk
    masks = degraded_masks(code)
    ys = jnp.asarray(np.repeat(y, k, axis=0))  # [B k, M, ...]
    ms = jnp.asarray(np.tile(masks, (b, 1)))
    r = code.decode_batched(ys, ms)
    value = np.asarray(r.value).reshape((b, k, kk) + out.shape[1:])
    q = np.arange(kk)
    rebuilt = value[:, q % k, q]  # query q is lost under mask q mod k
    info = {"n": n, "ok": bool(np.all(np.asarray(r.ok))), "cond": float(np.max(r.cond))}
    return rebuilt.reshape((n,) + out.shape[1:]), task.labels[split][:n], info


def task_metrics(kind: str, outputs, labels) -> dict[str, float]:
    """Top-1 accuracy of logits [n, C] (MNIST) or AUC and logloss of logits [n]
    (the DCNv2)."""
    outputs, labels = np.asarray(outputs), np.asarray(labels)
    if kind == "dcn":
        return {
            "auc": binary_auc(labels, outputs),
            "logloss": binary_logloss(labels, outputs),
        }
    return {"top1": float(np.mean(np.argmax(outputs, axis=-1) == labels))}
