"""The workloads: a real function, its pair form for the circle codes, the float64
truth's parameters."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp

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


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    degree: int
    fn: Callable  # (params, x [..., F]) -> real answers
    pair_fn: (
        Callable  # (params, x [..., 2, F]) -> (real, imaginary) answers [..., 2, ...]
    )
    params: Any


def workloads(cfg: SchemesConfig) -> list[Workload]:
    key = jax.random.key(cfg.seed)
    kl, kc = jax.random.split(key)
    n = cfg.features
    lin = {"w": [jax.random.normal(kl, (n, n)) / math.sqrt(n)]}
    pair_lin = linear_map  # x[..., 2, F] @ W: f on the real and on the imaginary part
    tower = cross_params(kc, n, cfg.cross_layers)
    return [
        Workload("linear", 1, linear_map, pair_lin, lin),
        Workload("cross3", cfg.cross_layers + 1, cross_tower, cross_tower_pair, tower),
    ]
