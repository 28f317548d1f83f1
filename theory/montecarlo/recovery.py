"""The RepApprox recovery Monte Carlo (see :mod:`theory.montecarlo`)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from .cond import check_width
from .sharding import arrival_order, fit_chunk, make_mesh, run_chunked, shard

__all__ = ["recovery_monte_carlo"]


@functools.lru_cache(maxsize=64)
def _recovery_program(k: int, c: int, m: int, mesh: Mesh):
    def one(lat):
        order = arrival_order(lat, m)
        rank = jnp.zeros((m,), jnp.int32).at[order].set(jnp.arange(m, dtype=jnp.int32))
        first = jnp.min(rank[: k * c].reshape(k, c), axis=1)
        return jnp.max(first)

    return shard(jax.vmap(one), mesh, 0)


def recovery_monte_carlo(
    key: jax.Array,
    *,
    num_inputs: int,
    replication: int,
    num_workers: int,
    num_trials: int,
    chunk: int | None = None,
    width: int | None = None,
    mesh: Mesh | None = None,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Counts of exact recovery for every N = 0..M from one set of trials.

    Workers 0..Kc-1 form the K disjoint replica groups (c each), the others are the
    extra coded servers. A trial draws an arrival order; every group has a responder
    among the first N arrivals iff N > R, R = max over groups of the group's first
    arrival rank. So one R per trial gives the indicator for every N.

    Returns:
        int64 [M + 1]: the number of trials with exact recovery at N = 0..M.
    """
    mesh = make_mesh() if mesh is None else mesh
    k, c, m = int(num_inputs), int(replication), int(num_workers)
    if k * c > m:
        raise ValueError(
            f"recovery_monte_carlo: need K c <= M, got K={k}, c={c}, M={m}"
        )
    with jax.enable_x64(True):
        chunk = fit_chunk(chunk, num_trials, mesh)
        outs = run_chunked(
            _recovery_program(k, c, m, mesh),
            key,
            num_trials,
            chunk,
            check_width(width, m),
            mesh,
            (),
            progress,
        )
    r = np.concatenate(outs).astype(np.int64)
    hist = np.bincount(r, minlength=m + 1)
    # exact at N iff R < N: counts[N] = #{R <= N - 1}
    return np.concatenate([[0], np.cumsum(hist)[:m]])
