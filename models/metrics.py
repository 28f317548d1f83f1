"""Binary-classification metrics of the tabular models (float64, on the host)."""

from __future__ import annotations

import numpy as np

__all__ = ["binary_auc", "binary_logloss"]


def _binary_inputs(name, labels, values):
    y = np.asarray(labels)
    s = np.asarray(values, dtype=np.float64)
    if y.ndim != 1 or s.ndim != 1 or y.shape != s.shape:
        raise ValueError(
            f"{name}: labels and scores must be 1-d of equal length, got shapes "
            f"{y.shape} and {s.shape}"
        )
    if y.size == 0:
        raise ValueError(f"{name}: got empty inputs")
    ok = (y == 0) | (y == 1)
    if not np.all(ok):
        bad = np.unique(y[~ok])[:5]
        raise ValueError(f"{name}: labels must be 0 or 1, got values {bad.tolist()}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{name}: scores/logits must be finite")
    return y.astype(np.float64), s


def binary_auc(labels, scores) -> float:
    """Area under the ROC curve, exactly, from ranks (Mann-Whitney U).

    .. math:: \\mathrm{AUC} = \\frac{\\sum_{i: y_i=1} r_i - P(P+1)/2}{P\\,Q}

    with :math:`r_i` the average rank of score :math:`s_i` (ties share the mean rank,
    which counts a tied positive/negative pair as 1/2), P positives and Q negatives.
    Computed in float64 on the host.

    Args:
      labels: [B] array of 0/1.
      scores: [B] finite scores (logits or probabilities; only their order matters).

    Returns:
      The AUC as a Python float.

    Raises:
      ValueError: on shape mismatch, labels outside {0, 1}, non-finite scores, or if
        only one class is present.

    References:
      Hanley, J. A. & McNeil, B. J. (1982), The meaning and use of the area under a
      receiver operating characteristic (ROC) curve, Radiology 143(1).
    """
    from scipy.stats import rankdata

    y, s = _binary_inputs("binary_auc", labels, scores)
    num_pos = float(y.sum())
    num_neg = float(y.size) - num_pos
    if num_pos == 0 or num_neg == 0:
        raise ValueError(
            f"binary_auc: needs both classes, got {int(num_pos)} positives and "
            f"{int(num_neg)} negatives"
        )
    ranks = rankdata(s, method="average")
    u = float(ranks[y == 1].sum()) - num_pos * (num_pos + 1.0) / 2.0
    return u / (num_pos * num_neg)


def binary_logloss(labels, logits) -> float:
    """Mean binary cross-entropy from logits, stable for any magnitude.

    .. math:: \\ell = \\frac1B \\sum_i \\log(1 + e^{z_i}) - y_i z_i

    evaluated as ``logaddexp(0, z) - y z`` in float64.

    Args:
      labels: [B] array of 0/1.
      logits: [B] finite logits z.

    Returns:
      The mean logloss (natural log) as a Python float.

    Raises:
      ValueError: on shape mismatch, labels outside {0, 1} or non-finite logits.
    """
    y, z = _binary_inputs("binary_logloss", labels, logits)
    return float(np.mean(np.logaddexp(0.0, z) - y * z))
