"""A DCNv2 as coded inference serves it: master in float32, workers in low precision.

The jitted functions are module-level with the graph definition static, so a second
run with the same architecture compiles nothing new.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ..dcn import DCNv2, cast_floating

__all__ = ["ServedDCN"]


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _embed_jit(graphdef, state, cat, num):
    return nnx.merge(graphdef, state).embed(cat, num)


@functools.partial(jax.jit, static_argnames=("graphdef", "dtype"))
def _branches_jit(graphdef, state, x, dtype):
    m = nnx.merge(graphdef, state)
    xd = x.astype(dtype)
    return jnp.stack([m.cross_logit(xd), m.deep_logit(xd)], axis=-1)


@functools.partial(jax.jit, static_argnames=("graphdef", "dtype"))
def _logits_jit(graphdef, state, x, dtype):
    return nnx.merge(graphdef, state).logits_from_x0(x.astype(dtype))


class ServedDCN:
    """The model at the master (float32) and on the workers (``worker_dtype``).

    Args:
        model: a parallel DCNv2.
        worker_dtype: what the workers compute in (parameters, inputs, arithmetic).
    """

    def __init__(self, model: DCNv2, worker_dtype: Any):
        self.wdt = jnp.dtype(worker_dtype)
        self.g32, self.s32 = nnx.split(model)
        self.gw, self.sw = nnx.split(cast_floating(model, self.wdt))
        self.bias = np.float32(np.asarray(model.output_bias(), np.float32))

    def embed(self, cat: np.ndarray, num: np.ndarray) -> np.ndarray:
        """Master-side float32 embedding x0 [B, d0]."""
        x0 = _embed_jit(
            self.g32,
            self.s32,
            jnp.asarray(cat, jnp.int32),
            jnp.asarray(num, jnp.float32),
        )
        return np.asarray(x0, np.float32)

    def branches32(self, x) -> np.ndarray:
        """Float32 model: [B, d0] -> (cross logit, deep logit) [B, 2] float32."""
        return np.asarray(_branches_jit(self.g32, self.s32, x, jnp.float32))

    def logits32(self, x) -> np.ndarray:
        """Float32 logits [B] (float64 on the host)."""
        z = _logits_jit(self.g32, self.s32, x, jnp.float32)
        return np.asarray(z, np.float64)

    def worker(self, x) -> jax.Array:
        """A worker: [B, d0] -> (cross, deep) [B, 2] with parameters, inputs and
        arithmetic in the worker dtype; the result stays in the worker dtype."""
        return _branches_jit(self.gw, self.sw, x, self.wdt)

    def worker_np(self, x) -> np.ndarray:
        """:meth:`worker` widened (exactly) to float32 numpy."""
        return np.asarray(jnp.asarray(self.worker(x)).astype(jnp.float32))

    def logits_w(self, x) -> np.ndarray:
        """The whole uncoded model in the worker dtype (bias and final sum too)."""
        z = _logits_jit(self.gw, self.sw, x, self.wdt)
        return np.asarray(jnp.asarray(z).astype(jnp.float32), np.float64)

    def worker_total(self, x) -> jax.Array:
        """Worker cross + deep logit [B] (no bias), for NeRCC's tuning."""
        return jnp.sum(self.worker(x).astype(jnp.float32), axis=-1)

    def run_workers(self, coded) -> np.ndarray:
        """Every worker of every group in one batched call: coded inputs
        [G, M, d0] -> outputs [G, M, 2] (cross, deep), widened exactly to float32."""
        g, m = coded.shape[:2]
        flat = np.asarray(coded, np.float32).reshape(g * m, -1)
        return self.worker_np(flat).reshape(g, m, 2)
