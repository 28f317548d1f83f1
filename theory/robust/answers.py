"""The experiment's answers: bf16 cross-tower workers and their rounding level."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from ..demo import cross_params, cross_tower
from .config import RobustConfig

__all__ = ["answers", "cross_tower_rounding_sd"]


def cross_tower_rounding_sd(params, x0, unit: float):
    """Standard deviation of a low-precision cross tower's rounding error, per answer.

    A first-order rounding analysis of :func:`theory.demo.cross_tower` as a bf16
    worker runs it: every rounded quantity v (the coded input, each matrix product,
    each sum and product of the layers, the head) carries an independent relative
    error delta_v, |delta_v| <= unit, taken uniform: standard deviation
    unit / sqrt(3) (an upper bound: with logarithmically distributed significands
    it is unit / sqrt(8 ln 2), 0.74 times less). So the answer's error has variance
    (unit^2 / 3) sum_v (v d out / d v)^2. The master
    knows the coded inputs and the weights, so this is a per-answer noise level
    from the dtype and the computation's structure, not from the answers.

    Args:
        params: the (already rounded) weights of :func:`theory.demo.cross_params`.
        x0: [M, F] coded inputs.
        unit: the unit roundoff of the worker dtype (2^-8 for bf16).

    Returns:
        [M] standard deviations.
    """

    def tower(x, d):
        it = iter(d)
        x = x * (1 + next(it))
        xl = x
        for w, b in zip(params["w"], params["b"], strict=True):
            t = (xl @ w.T) * (1 + next(it))
            t = (t + b) * (1 + next(it))
            t = (x * t) * (1 + next(it))
            xl = (t + xl) * (1 + next(it))
        return (xl @ params["head"]) * (1 + next(it))

    def one(x):
        n = 1 + 4 * len(params["w"])
        d0 = [jnp.zeros_like(x)] * n + [jnp.zeros((), x.dtype)]
        g = jax.grad(lambda d: tower(x, d))(d0)
        return jnp.sqrt(sum(jnp.sum(gi * gi) for gi in g) / 3.0) * unit

    return jax.vmap(one)(x0)


def answers(cfg: RobustConfig, kind: str):
    """Queries, bf16 answers [B, M] (float32), float64 truths [B, K] and the
    first-order rounding standard deviation of every answer [B, M]."""
    k, m = cfg.num_inputs, cfg.num_workers
    if kind == "lagrange":
        alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
        enc = cj.lagrange_encode
    else:
        beta, alpha = cj.bacc_points(k, m)
        enc = cj.berrut_encode
    kp, kx = jax.random.split(jax.random.key(cfg.seed), 2)
    params = cross_params(kp, cfg.features, cfg.cross_layers)
    x = jax.random.normal(kx, (cfg.num_requests, k, cfg.features))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(
            jax.vmap(lambda xx: cross_tower(p64, xx))(jnp.asarray(x, jnp.float64))
        )
    coded = jax.vmap(lambda xx: enc(xx, beta, alpha))(x)
    worker = cj.low_precision_worker(cross_tower, jnp.bfloat16)
    y = jax.vmap(lambda c: worker(params, c))(coded).astype(jnp.float32)
    rounded = jax.tree_util.tree_map(
        lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), params
    )
    unit = cj.unit_roundoff(jnp.bfloat16)
    sd = jax.jit(
        jax.vmap(lambda c: cross_tower_rounding_sd(rounded, c, unit))
    )(coded)  # fmt: skip
    return alpha, beta, np.asarray(y), truth, np.asarray(sd)
