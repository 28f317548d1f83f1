"""The workloads (:class:`codedjax.Workload`): a real function of (params, x), its
pair form for the circle codes (:func:`pair_fn`), the float64 truth (:func:`truth`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from .config import SchemesConfig


def cross_params(key, features: int, layers: int):
    """Cross-tower weights: W ~ N(0, 1/n), b ~ 0.1 N(0, 1), a linear head."""
    ks = jax.random.split(key, 2 * layers + 1)
    n = features
    return {
        "w": [
            jax.random.normal(ks[2 * i], (n, n)) / math.sqrt(n) for i in range(layers)
        ],
        "b": [0.1 * jax.random.normal(ks[2 * i + 1], (n,)) for i in range(layers)],
        "head": jax.random.normal(ks[-1], (n,)) / math.sqrt(n),
    }


def cross_tower(p, x0):
    """x_{l+1} = x0 (W_l x_l + b_l) + x_l, then the head: [..., F] -> [...]."""
    xl = x0
    for w, b in zip(p["w"], p["b"], strict=True):
        xl = x0 * (xl @ w.T + b) + xl
    return xl @ p["head"]


def cross_tower_pair(p, x0):
    """The tower on complex queries [..., 2, F] (real, imaginary) in real arithmetic:
    two real matrix products per layer, four multiplications per complex product."""
    a, bq = x0[..., 0, :], x0[..., 1, :]
    xr, xi = a, bq
    for w, b in zip(p["w"], p["b"], strict=True):
        tr = xr @ w.T + b
        ti = xi @ w.T
        xr, xi = a * tr - bq * ti + xr, a * ti + bq * tr + xi
    return jnp.stack([xr @ p["head"], xi @ p["head"]], axis=-1)


def linear_map(p, x):
    """f(x) = x W: [..., F] -> [..., F] (real-linear: also the pair form)."""
    return x @ p["w"][0]


def pair_fn(wl: cj.Workload) -> Callable:
    """The workload's worker on complex queries [..., 2, F] (real, imaginary), for
    the circle codes: ``(params, x) -> (real, imaginary) answers [..., 2, ...]``. A
    real-linear map is its own pair form."""
    return cross_tower_pair if wl.fn is cross_tower else wl.fn


def truth(wl: cj.Workload, xs) -> np.ndarray:
    """The float64 reference: f with float64 parameters on float64 queries."""
    p64 = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), wl.params)
    with jax.enable_x64(True):
        return np.asarray(wl.fn(p64, jnp.asarray(np.asarray(xs), jnp.float64)))


def workloads(cfg: SchemesConfig) -> list[cj.Workload]:
    """The linear map and the cross tower: ``fn(params, x)`` the worker (jax),
    ``params`` its weights."""
    key = jax.random.key(cfg.seed)
    kl, kc = jax.random.split(key)
    n = cfg.features
    lin = {"w": [jax.random.normal(kl, (n, n)) / math.sqrt(n)]}
    tower = cross_params(kc, n, cfg.cross_layers)
    return [
        cj.Workload("linear", 1, linear=True, fn=linear_map, params=lin,
                    description="f(x) = x W, no bias"),
        cj.Workload("cross3", cfg.cross_layers + 1, fn=cross_tower, params=tower,
                    description=f"{cfg.cross_layers} cross layers and a head"),
    ]  # fmt: skip
