"""The NeRCC experiment's metrics: MSE and RelAcc with two-way standard errors, and
the per-model comparison of NeRCC (and RepApprox) against BACC."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .config import SCHEMES


def _se_two_way(v: np.ndarray) -> float:
    """Standard error of the mean of v [B, T] (B image batches crossed with T masks):
    sqrt(se over batches^2 + se over masks^2), a conservative sum of the two one-way
    standard errors (0 for a factor with a single level)."""
    b, t = v.shape
    se_b = v.mean(axis=1).std(ddof=1) / math.sqrt(b) if b > 1 else 0.0
    se_t = v.mean(axis=0).std(ddof=1) / math.sqrt(t) if t > 1 else 0.0
    return float(math.hypot(se_b, se_t))


def decoded_metrics(dec, ok, truth, labels, uncoded_correct) -> dict:
    """dec [B, T, K, F], ok [T], truth [B, K, F], labels [B, K]."""
    dec = np.asarray(dec, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    sq = ((dec - truth[:, None]) ** 2).mean(axis=(2, 3))  # [B, T]
    mse = float(sq.mean())
    scale = float(np.mean(truth**2))
    pred = dec.argmax(-1)  # [B, T, K]
    correct = (pred == np.asarray(labels)[:, None, :]).mean(axis=2)  # [B, T]
    unc_b = np.asarray(uncoded_correct, dtype=np.float64).mean(axis=1)  # [B]
    unc = float(unc_b.mean())
    acc = float(correct.mean())
    agree = pred == truth.argmax(-1)[:, None, :]
    # the error bar of RelAcc is that of the change the coding causes (coded minus
    # uncoded accuracy of the same batch), divided by the uncoded accuracy
    change_se = _se_two_way(correct - unc_b[:, None])
    return {
        "mse": mse,
        "mse_se": _se_two_way(sq),
        "nmse": mse / scale if scale > 0 else float("nan"),
        "rel_acc": acc / unc if unc > 0 else float("nan"),
        "rel_acc_se": change_se / unc if unc > 0 else float("nan"),
        "accuracy": acc,
        "uncoded_accuracy": unc,
        "agreement": float(agree.mean()),
        "ok_fraction": float(np.mean(np.asarray(ok))),
    }


def compare_schemes(rows: Sequence[Mapping], model: str) -> dict:
    """NeRCC against BACC for one model over the cells where both ran.

    Returns:
        ``cells`` (cells with both schemes), ``nercc_below_bacc`` (cells where
        NeRCC's MSE is smaller), ``nercc_below_bacc_by_2se`` (smaller by more than
        twice the two schemes' standard errors combined in quadrature; conservative,
        since the schemes share images and masks), ``mean_mse_ratio`` (arithmetic
        mean over cells of MSE_NeRCC / MSE_BACC), ``min_mse_ratio``,
        ``max_mse_ratio``, ``mean_rel_acc_diff`` (NeRCC - BACC) and, where RepApprox
        ran, ``repapprox_cells``, ``repapprox_below_bacc`` and
        ``repapprox_mean_mse_ratio``.
    """
    by = {(r["K"], r["M"], r["S"], r["scheme"]): r for r in rows if r["model"] == model}
    ratios, below, clear, dacc = [], 0, 0, []
    rep_ratios, rep_below = [], 0
    for cell in sorted({(k, m, s) for (k, m, s, _) in by}):
        bacc, ner, rep = (by.get((*cell, x)) for x in SCHEMES)
        if bacc is None:
            continue
        if ner is not None:
            ratios.append(ner["mse"] / bacc["mse"])
            below += ner["mse"] < bacc["mse"]
            gap = 2 * math.hypot(ner["mse_se"], bacc["mse_se"])
            clear += (bacc["mse"] - ner["mse"]) > gap
            dacc.append(ner["rel_acc"] - bacc["rel_acc"])
        if rep is not None:
            rep_ratios.append(rep["mse"] / bacc["mse"])
            rep_below += rep["mse"] < bacc["mse"]
    nan = float("nan")
    out = {
        "model": model,
        "cells": len(ratios),
        "nercc_below_bacc": int(below),
        "nercc_below_bacc_by_2se": int(clear),
        "mean_mse_ratio": float(np.mean(ratios)) if ratios else nan,
        "min_mse_ratio": float(np.min(ratios)) if ratios else nan,
        "max_mse_ratio": float(np.max(ratios)) if ratios else nan,
        "mean_rel_acc_diff": float(np.mean(dacc)) if dacc else nan,
    }
    if rep_ratios:
        out.update(
            repapprox_cells=len(rep_ratios),
            repapprox_below_bacc=int(rep_below),
            repapprox_mean_mse_ratio=float(np.mean(rep_ratios)),
        )
    return out
