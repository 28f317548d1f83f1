"""The serving benchmarks' workload, shared by ``benchmarks.serving`` and
``benchmarks.robust_serving``: bf16 workers computing x^3 - x (or 2x - 1), the
request stream, the decoded error against the float64 truth, percentiles."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from runkit import max_rel_err, percentile

__all__ = [
    "inputs",
    "linear_truth",
    "linear_worker_fn",
    "pct",
    "rel_err",
    "truth",
    "worker_fn",
]


def worker_fn(v):
    """A bf16 worker computing f(x) = x^3 - x on its coded row."""
    b = v.astype(jnp.bfloat16)
    return b * b * b - b


def truth(x: np.ndarray) -> np.ndarray:
    """f(x) = x^3 - x in float64 (the worker's exact answer)."""
    x = np.asarray(x, np.float64)
    return x**3 - x


def inputs(seed: int, count: int, num_inputs: int, num_features: int) -> np.ndarray:
    """``count`` requests of K = ``num_inputs`` queries, uniform in [-1, 1]
    (float32; the same stream for every benchmark with the same seed)."""
    rng = np.random.default_rng([seed, 1])
    shape = (count, num_inputs, num_features)
    return rng.uniform(-1, 1, shape).astype(np.float32)


def linear_worker_fn(v):
    """A bf16 worker computing the affine map f(x) = 2 x - 1 (degree 1)."""
    b = v.astype(jnp.bfloat16)
    return b * jnp.bfloat16(2) - jnp.bfloat16(1)


def linear_truth(x: np.ndarray) -> np.ndarray:
    """f(x) = 2 x - 1 in float64."""
    return 2.0 * np.asarray(x, np.float64) - 1.0


def rel_err(value: np.ndarray, x: np.ndarray, truth=truth) -> np.ndarray:
    """max |value - f(x)| / max |f(x)| per request (float64)."""
    return max_rel_err(value, truth(x))


pct = percentile
