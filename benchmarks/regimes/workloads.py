"""The regime map's workloads: parts of one DCNv2 (``models.dcn``, Glorot
initialisation, not trained) as :class:`codedjax.Workload`: the bf16 worker
(``fn``), the float64 truth (``truth``) and the layers for layer-wise coding
(``layers``).

* ``linear`` (degree 1): the first cross layer's affine map ``x W + b``;
* ``cross1`` (degree 2): one cross layer ``x0 * (x0 W + b) + x0``;
* ``cross2`` (degree 3): the cross tower, two cross layers;
* ``deep`` (not a polynomial): the Deep branch, ``relu(relu(x W1 + b1) W2 + b2)``.

A layer is ``(W, b, kind)``: its matrix product ``v W`` is what a worker computes
(in bf16) in layer-wise coding; the master adds ``b`` and applies ``kind``
(``"affine"``: nothing more, ``"cross"``: ``x0 * (h + b) + x``, ``"relu"``). None
is marked ``linear``: ``x W + b`` has a bias (zero at this initialisation, not
in general), so ParM's parity model stays an approximation in the catalogue.
"""

from __future__ import annotations

import functools
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import codedjax as cj
from models.dcn import DCNConfig, DCNv2

__all__ = ["WORKLOADS", "batched_worker", "inputs", "rounds", "workload"]

WORKLOADS = ("linear", "cross1", "cross2", "deep")

_DEGREE = {"linear": 1, "cross1": 2, "cross2": 3, "deep": None}


def _apply(kind, h, x, x0, xp=jnp):
    if kind == "affine":
        return h
    if kind == "cross":
        return x0 * h + x
    return xp.maximum(h, 0)


def _forward(layers, v, dtype=jnp.bfloat16):
    """The layers on one coded row [F_in] -> [F_out], every parameter, input and
    operation in ``dtype`` (a bf16 worker by default)."""
    v = v.astype(dtype)
    x0 = x = v
    for w, b, kind in layers:
        h = x @ jnp.asarray(w, dtype) + jnp.asarray(b, dtype)
        x = _apply(kind, h, x, x0)
    return x


def _truth(layers, x: np.ndarray) -> np.ndarray:
    """The layers in float64 on [..., F_in]."""
    x0 = x = np.asarray(x, np.float64)
    for w, b, kind in layers:
        h = x @ w.astype(np.float64) + b.astype(np.float64)
        x = _apply(kind, h, x, x0, np)
    return x


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
def workload(name: str, width: int = 16, seed: int = 0) -> cj.Workload:
    """The workload ``name`` (one of :data:`WORKLOADS`) of a DCNv2 with d0 =
    ``width`` numeric inputs, parameters from ``seed``."""
    if name not in WORKLOADS:
        raise ValueError(f"workload: name must be one of {WORKLOADS}, got {name!r}")
    cross, deep = _dcn(width, seed)
    layers, what = {
        "linear": (((*cross[0], "affine"),), "x W + b (a cross layer's affine map)"),
        "cross1": (((*cross[0], "cross"),), "one cross layer"),
        "cross2": (tuple((*c, "cross") for c in cross), "the cross tower (L = 2)"),
        "deep": (tuple((*d, "relu") for d in deep), "the Deep branch (ReLU MLP "
                 "16-64-32)"),
    }[name]  # fmt: skip
    return cj.Workload(
        name,
        _DEGREE[name],
        fn=functools.partial(_forward, layers),
        truth=functools.partial(_truth, layers),
        layers=layers,
        description=what,
    )


def rounds(wl: cj.Workload) -> list:
    """The workload as layer-wise rounds (``models.layerwise``): a worker computes
    ``v W``, the master adds ``b`` and applies the layer's kind."""
    out = []
    for w, b, kind in wl.layers:

        def fn(h, x, x0, xp=jnp, b=b, kind=kind):
            return _apply(kind, h + xp.asarray(b, h.dtype), x, x0, xp)

        out.append(([w], fn))
    return out


def inputs(seed: int, count: int, num_inputs: int, width: int) -> np.ndarray:
    """``count`` requests of K queries, uniform in [-1, 1] ([count, K, F] float32)."""
    rng = np.random.default_rng([seed, 24])
    return rng.uniform(-1, 1, (count, num_inputs, width)).astype(np.float32)


@cache
def batched_worker(wl: cj.Workload):
    """jit(vmap(vmap(fn))): [B, M, F_in] -> [B, M, F_out]; one per workload, so
    that every cell and code of a run reuses its compiled programs."""
    return jax.jit(jax.vmap(jax.vmap(wl.fn)))
