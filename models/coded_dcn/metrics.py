"""The coded DCNv2 run's metrics: the uncoded references, the decoded logits' AUC,
logloss and relative errors, and RepApprox's exact Deep tasks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import codedjax as cj
import codedjax.bounds as cb
from runkit import l2_rel_err

from ..metrics import binary_auc, binary_logloss
from .schemes import exact_tasks
from .served import ServedDCN


def group_indices(num_queries: int, k: int) -> np.ndarray:
    """[G, K] query indices; the last group wraps around to the first queries."""
    g = -(-num_queries // k)
    return (np.arange(g * k) % num_queries).reshape(g, k)


def uncoded_metrics(served: ServedDCN, x0, labels, gidx, dtype: str) -> dict[str, Any]:
    """The float32 reference and the uncoded worker-dtype models."""
    z32, zw = served.logits32(x0), served.logits_w(x0)
    bw = served.worker_np(x0)  # [Q, 2] uncoded worker branches
    # the uncoded worker-dtype branches, each rounded to the worker dtype and summed
    # with the bias in float32 at the master, as the coded schemes do
    zb = (bw[:, 0] + bw[:, 1] + served.bias).astype(np.float64)

    def against32(z):
        e = rel_err(z[gidx], z32[gidx])
        return {
            "auc": binary_auc(labels, z),
            "logloss": binary_logloss(labels, z),
            "logit_rel_err_median": float(np.median(e)),
            "logit_rel_err_p95": float(np.quantile(e, 0.95)),
            "dtype": dtype,
        }

    return {
        "z32": z32,
        "zw": zw,
        "cross32": served.branches32(x0)[:, 0].astype(np.float64),
        "deep_w": bw[:, 1][gidx],  # [G, K]
        "uncoded": {
            "auc": binary_auc(labels, z32),
            "logloss": binary_logloss(labels, z32),
            "n": int(labels.shape[0]),
        },
        "uncoded_bf16": against32(zw),
        "uncoded_bf16_branches": against32(zb),
    }


def decoded_metrics(z, labels, gidx, ref, cross) -> dict[str, float]:
    """Metrics of decoded logits z [R, G, K] (float64 on the host)."""
    r, nq = z.shape[0], labels.shape[0]
    flat = z.reshape(r, -1)[:, :nq]  # every test query once (wrapped slots dropped)
    aucs = [binary_auc(labels, flat[i]) for i in range(r)]
    lls = [binary_logloss(labels, flat[i]) for i in range(r)]
    e32 = rel_err(z, ref["z32"][gidx][None])
    ew = rel_err(z, ref["zw"][gidx][None])
    ec = rel_err(cross, ref["cross32"][gidx][None])
    return {
        "auc": float(np.mean(aucs)),
        "auc_std": float(np.std(aucs)),
        "logloss": float(np.mean(lls)),
        "logloss_std": float(np.std(lls)),
        "logit_rel_err_median": float(np.median(e32)),
        "logit_rel_err_p95": float(np.quantile(e32, 0.95)),
        "logit_rel_err_max": float(np.max(e32)),
        "logit_rel_err_bf16_median": float(np.median(ew)),
        "logit_rel_err_bf16_p95": float(np.quantile(ew, 0.95)),
        "cross_rel_err_median": float(np.median(ec)),
        "cross_rel_err_p95": float(np.quantile(ec, 0.95)),
    }


def exact_metrics(code, masks, n, deep, deep_w) -> dict[str, Any]:
    """Deep tasks a replica returned exactly, against the exact probabilities."""
    exact = exact_tasks(code, masks)
    if exact is None:
        return dict.fromkeys(
            (
                "deep_exact_fraction",
                "deep_exact_probability",
                "deep_all_exact_fraction",
                "deep_all_exact_probability",
            )
        )
    exact = exact.reshape(deep.shape)
    k, m, c = code.num_inputs, code.num_workers, code.layout.replication
    p_all = cj.exact_recovery_probability(k, c, m, n)
    all_exact = exact.all(axis=-1)
    lo, hi = cb.clopper_pearson(int(all_exact.sum()), all_exact.size, confidence=0.99)
    out = {
        "deep_exact_fraction": float(exact.mean()),
        "deep_exact_probability": task_exact_probability(k, c, m, n),
        "deep_all_exact_fraction": float(all_exact.mean()),
        "deep_all_exact_probability": p_all,
        "deep_all_exact_ci99": [lo, hi],
        "deep_all_exact_consistent": bool(lo <= p_all <= hi),
    }
    if np.any(~exact):
        # the fallback on lost Deep tasks, against the uncoded worker-dtype Deep logit
        err = np.abs(deep - deep_w[None])[~exact]
        out["deep_lost_abs_err_median"] = float(np.median(err))
    return out


def task_exact_probability(k: int, c: int, m: int, n: int) -> float:
    """P(a given task has a responding replica) = 1 - C(M - c, N) / C(M, N)."""
    del k
    return 1.0 - math.comb(m - c, n) / math.comb(m, n)


rel_err = l2_rel_err
