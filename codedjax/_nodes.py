"""Distinct responding nodes: the merge rule shared by the interpolating decoders.

Several workers may sit at one node (RepApprox replicas); the Berrut and NeRCC decoders
merge them into one node, keeping the responder of lowest index, and rank the distinct
nodes. Fixed shapes only, so one compiled program serves every straggler pattern.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._dtypes import finite_rows


def distinct_representatives(nodes: jax.Array, sel: jax.Array):
    """Merge selected workers that sit at the same node; rank the distinct nodes.

    Among the selected workers with finite nodes, the representative of a node value
    is the selected worker of lowest index at that value. Computed by pairwise
    comparisons on a fixed shape (O(M^2) booleans, no sort or scan), so it traces
    once for every mask and compiles quickly.

    Args:
        nodes: [M] worker points (may repeat).
        sel: bool [M] selected (responding, finite) workers.

    Returns:
        (rep bool [M], rank int32 [M] = rank of the representative's node among the
        distinct selected nodes in increasing order (0-based; -1 for
        non-representatives), count int32 = number of distinct selected nodes).
    """
    m = nodes.shape[0]
    sel = sel & jnp.isfinite(nodes)
    ids = jnp.arange(m)
    same = nodes[:, None] == nodes[None, :]  # [i, j]
    dup = jnp.any(same & (ids[None, :] < ids[:, None]) & sel[None, :], axis=1)
    rep = sel & ~dup
    below = (nodes[None, :] < nodes[:, None]) & rep[None, :]  # x_j < x_i, j a rep
    rank = jnp.sum(below, axis=1, dtype=jnp.int32)
    rank = jnp.where(rep, rank, -jnp.ones_like(rank))
    return rep, rank, jnp.sum(rep, dtype=jnp.int32)


@jax.jit
def finite_selection(y, mask):
    """mask & (row of y finite): the workers a decoder may use."""
    return mask & finite_rows(y)
