"""The statistics every experiment reports, with one treatment of odd samples.

- :func:`percentile`: float64; an empty sample gives NaN; an infinite sample (a
  request that was never answered, a decode that failed and is scored ``inf``)
  counts as larger than every finite one, and the percentile is then an order
  statistic (no interpolation next to ``inf``, which would give ``inf`` or NaN
  for a percentile that lies between two finite samples); a NaN sample makes the
  result NaN (a missing measurement is not a small one: drop it first if it means
  nothing).
- :func:`max_rel_err`: per request, ``max |value - truth| / max |truth|`` over every
  axis but the first, in float64.
- :func:`l2_rel_err`: ``||value - truth||_2 / ||truth||_2`` over the last axis, in
  float64.
- :func:`accuracy_target`: the accuracy target of the serving experiments, a
  factor times the median error of an uncoded worker.

Confidence intervals for rates: the library's
:func:`codedjax.bounds.clopper_pearson`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["accuracy_target", "l2_rel_err", "max_rel_err", "percentile"]


def percentile(a, q: float, *, order_statistic: bool = False) -> float:
    """The ``q``-th percentile (0..100) of the samples ``a`` (any shape, float64).

    Linear interpolation between order statistics when every sample is finite;
    the next higher order statistic when any is infinite, or always with
    ``order_statistic=True``. Empty: NaN. Any NaN sample: NaN.

    Examples:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
        2.5
        >>> percentile([1.0, 2.0, 3.0, float("inf")], 50)
        3.0
        >>> percentile([], 99)
        nan
    """
    a = np.asarray(a, np.float64)
    if not a.size:
        return math.nan
    if np.isnan(a).any():
        return math.nan
    finite = bool(np.isfinite(a).all())
    method = "linear" if finite and not order_statistic else "higher"
    return float(np.percentile(a, q, method=method))


def max_rel_err(value, truth) -> np.ndarray:
    """[R] relative errors of ``value`` [R, ...] against ``truth`` [R, ...]:
    ``max |value - truth| / max |truth|`` per request, in float64."""
    t = np.asarray(truth, np.float64)
    ax = tuple(range(1, t.ndim))
    err = np.abs(np.asarray(value, np.float64) - t).max(axis=ax)
    return err / np.abs(t).max(axis=ax)


def l2_rel_err(value, truth) -> np.ndarray:
    """Relative L2 error over the last axis, in float64:
    ``||value - truth|| / ||truth||``."""
    z = np.asarray(value, np.float64)
    ref = np.asarray(truth, np.float64)
    return np.linalg.norm(z - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def accuracy_target(uncoded_errors, factor: float) -> float:
    """The accuracy target a scheme must meet: its median decoded error at most
    ``factor`` times the median of ``uncoded_errors``, the errors of an uncoded
    worker (one per request, in the workers' own dtype) on the same requests.

    Raises:
        ValueError: ``factor`` not finite and > 0, or no finite median.

    Examples:
        >>> accuracy_target([1e-3, 2e-3, 4e-3], 2.0)
        0.004
    """
    if not 0 < factor < math.inf:
        raise ValueError(
            f"accuracy_target: factor must be finite and > 0, got {factor!r}"
        )
    median = percentile(uncoded_errors, 50)
    if not math.isfinite(median):
        raise ValueError(
            f"accuracy_target: the uncoded errors must have a finite median, got "
            f"{median}"
        )
    return factor * median
