"""The regime map's workloads: parts of one DCNv2 (``models.dcn``, Glorot
initialisation, not trained) as bf16 worker functions, their float64 truths, and
their layers for layer-wise coding.

* ``linear`` (degree 1): the first cross layer's affine map ``x W + b``;
* ``cross1`` (degree 2): one cross layer ``x0 * (x0 W + b) + x0``;
* ``cross2`` (degree 3): the cross tower, two cross layers;
* ``deep`` (not a polynomial): the Deep branch, ``relu(relu(x W1 + b1) W2 + b2)``.

A layer is ``(W, b, kind)``: its matrix product ``v W`` is what a worker computes
(in bf16) in layer-wise coding; the master adds ``b`` and applies ``kind``
(``"affine"``: nothing more, ``"cross"``: ``x0 * (h + b) + x``, ``"relu"``).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models.dcn import DCNConfig, DCNv2
from runkit import max_rel_err

__all__ = ["WORKLOADS", "Workload", "batched_worker", "inputs", "rel_err", "workload"]

WORKLOADS = ("linear", "cross1", "cross2", "deep")


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
    """One workload: ``degree`` (None: not a polynomial) and its ``layers``."""

    name: str
    degree: int | None
    layers: tuple[tuple[np.ndarray, np.ndarray, str], ...]
    description: str

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def rounds(self):
        """The workload as layer-wise rounds (``models.layerwise``): a worker
        computes ``v W``, the master adds ``b`` and applies the layer's kind."""
        out = []
        for w, b, kind in self.layers:

            def fn(h, x, x0, xp=jnp, b=b, kind=kind):
                return _apply(kind, h + xp.asarray(b, h.dtype), x, x0, xp)

            out.append(([w], fn))
        return out

    def worker(self, v, dtype=jnp.bfloat16):
        """The whole workload on one coded row [F_in] -> [F_out], every parameter,
        input and operation in ``dtype`` (a bf16 worker by default)."""
        v = v.astype(dtype)
        x0 = x = v
        for w, b, kind in self.layers:
            h = x @ jnp.asarray(w, dtype) + jnp.asarray(b, dtype)
            x = _apply(kind, h, x, x0)
        return x

    def truth(self, x: np.ndarray) -> np.ndarray:
        """The workload in float64 on [..., F_in]."""
        x0 = x = np.asarray(x, np.float64)
        for w, b, kind in self.layers:
            h = x @ w.astype(np.float64) + b.astype(np.float64)
            x = _apply(kind, h, x, x0, np)
        return x


def _apply(kind, h, x, x0, xp=jnp):
    if kind == "affine":
        return h
    if kind == "cross":
        return x0 * h + x
    return xp.maximum(h, 0)


@cache
def _dcn(width: int, seed: int):
    cfg = DCNConfig(
        vocab_sizes=(), num_numeric=width, num_cross_layers=2, deep_sizes=(64, 32)
    )
    m = DCNv2(cfg, rngs=nnx.Rngs(seed))

    def lin(layer):
        return (
            np.asarray(layer.kernel[...], np.float32),
            np.asarray(layer.bias[...], np.float32),
        )

    cross = [lin(c.up) for c in m.cross_layers]
    deep = [lin(d) for d in m.deep_layers]
    return cross, deep


@cache
def workload(name: str, width: int = 16, seed: int = 0) -> Workload:
    """The workload ``name`` (one of :data:`WORKLOADS`) of a DCNv2 with d0 =
    ``width`` numeric inputs, parameters from ``seed``."""
    cross, deep = _dcn(width, seed)
    if name == "linear":
        return Workload(
            name, 1, ((*cross[0], "affine"),), "x W + b (a cross layer's affine map)"
        )
    if name == "cross1":
        return Workload(name, 2, ((*cross[0], "cross"),), "one cross layer")
    if name == "cross2":
        return Workload(
            name, 3, tuple((*c, "cross") for c in cross), "the cross tower (L = 2)"
        )
    if name == "deep":
        return Workload(
            name,
            None,
            tuple((*d, "relu") for d in deep),
            "the Deep branch (ReLU MLP 16-64-32)",
        )
    raise ValueError(f"workload: name must be one of {WORKLOADS}, got {name!r}")


def inputs(seed: int, count: int, num_inputs: int, width: int) -> np.ndarray:
    """``count`` requests of K queries, uniform in [-1, 1] ([count, K, F] float32)."""
    rng = np.random.default_rng([seed, 24])
    return rng.uniform(-1, 1, (count, num_inputs, width)).astype(np.float32)


@cache
def batched_worker(wl: Workload, dtype=jnp.bfloat16):
    """jit(vmap(vmap(worker))): [B, M, F_in] -> [B, M, F_out]; one per (workload,
    dtype), so that every cell and code of a run reuses its compiled programs."""
    return jax.jit(jax.vmap(jax.vmap(lambda v: wl.worker(v, dtype))))


rel_err = max_rel_err
