"""The condition-number Monte Carlo: cond(T_S) and cond(U_S) of random responding
sets, and of the square systems at the threshold (see :mod:`theory.montecarlo`)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import codedjax as cj

from .sharding import (
    AXIS,
    arrival_order,
    fit_chunk,
    make_mesh,
    over_trials,
    replicate,
    run_chunked,
    sequential_linalg,
    shard,
    svdvals,
    vmap_batch,
)

__all__ = [
    "CondSamples",
    "bases",
    "check_width",
    "cond_bytes_per_trial",
    "cond_from_order",
    "cond_monte_carlo",
    "cond_program",
    "row_buckets",
    "square_cond_monte_carlo",
]


def _cond(sv: jax.Array, d: int) -> jax.Array:
    return sv[..., 0] / sv[..., d - 1]


def _gap_stats(resp: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """Max gap g (units pi/M) and w_max / w_min of the Voronoi weights.

    ``resp`` is bool [nN, M] (responders of each N, workers in point order). The
    nearest responders to the left and right of every worker come from cumulative
    max / min scans (no sort, so the program compiles fast); the gaps across
    theta = 0 and pi are doubled by the reflection.
    """
    ar = jnp.arange(m, dtype=jnp.int32)[None, :]
    prev = jax.lax.cummax(jnp.where(resp, ar, -1), axis=1)
    prev = jnp.concatenate([jnp.full_like(prev[:, :1], -1), prev[:, :-1]], axis=1)
    nxt = jax.lax.cummin(jnp.where(resp, ar, m), axis=1, reverse=True)
    nxt = jnp.concatenate([nxt[:, 1:], jnp.full_like(nxt[:, :1], m)], axis=1)
    left = jnp.where(prev >= 0, ar - prev, 2 * ar + 1)
    right = jnp.where(nxt < m, nxt - ar, 2 * (m - 1 - ar) + 1)
    g = jnp.max(jnp.where(resp, jnp.maximum(left, right), 0), axis=1)
    w = (left + right).astype(jnp.float64)
    wmax = jnp.max(jnp.where(resp, w, -jnp.inf), axis=1)
    wmin = jnp.min(jnp.where(resp, w, jnp.inf), axis=1)
    return g.astype(jnp.int32), wmax / wmin


def row_buckets(responses: Sequence[int], max_groups: int = 3) -> list[tuple[int, ...]]:
    """Split the N values (in order) into <= ``max_groups`` runs of one shape each.

    Dynamic programming over the sorted values: minimises the padded row count
    sum_g |g| max(g), i.e. the SVD work, for at most ``max_groups`` LAPACK calls.
    ``responses`` must be increasing; the groups keep that order.
    """
    ns = [int(n) for n in responses]
    if any(b <= a for a, b in zip(ns, ns[1:], strict=False)):
        raise ValueError(f"row_buckets: responses must increase, got {ns}")
    k = len(ns)
    inf = float("inf")
    best = [[inf] * (k + 1) for _ in range(max_groups + 1)]
    cut = [[0] * (k + 1) for _ in range(max_groups + 1)]
    best[0][0] = 0.0
    for g in range(1, max_groups + 1):
        for j in range(1, k + 1):
            for i in range(j):
                cost = best[g - 1][i] + (j - i) * ns[j - 1]
                if cost < best[g][j]:
                    best[g][j], cut[g][j] = cost, i
    g = min(range(1, max_groups + 1), key=lambda q: (best[q][k], q))
    groups, j = [], k
    while g > 0:
        i = cut[g][j]
        groups.append(tuple(ns[i:j]))
        j, g = i, g - 1
    return groups[::-1]


def cond_from_order(
    order: jax.Array,
    v: jax.Array,
    u: jax.Array,
    *,
    num_workers: int,
    num_coeffs: int,
    responses: tuple[int, ...],
    gaps: bool = True,
    sequential: bool = False,
) -> tuple[jax.Array, ...]:
    """Condition numbers of the first N arrivals' rows, for every N in ``responses``.

    The rows are put in arrival order and the rows past N are zeroed, so the N of
    a group (:func:`row_buckets`) share one shape and one SVD call (zero rows leave
    the singular values unchanged; a few calls compile far faster than one per N).

    Args:
        order: int [M] one arrival order.
        v: [M, D] raw Chebyshev-Vandermonde T. u: [M, D] equilibrated (orthonormal).
        num_workers: M. num_coeffs: D. responses: the N values (each >= D).
        gaps: also return the gap statistics.
        sequential: one matrix per LAPACK call (see :func:`sequential_linalg`).

    Returns:
        raw [nN], eq [nN] (singular values only, LAPACK SVD in float64), and when
        ``gaps``: g int32 [nN], w_max / w_min [nN].
    """
    m, d = num_workers, num_coeffs
    rows = jnp.stack([v[order], u[order]])  # [2, M, D], arrival order
    conds = []
    for group in row_buckets(responses):
        top = max(group)  # every N of the group shares the shape [top, D]
        ns = jnp.asarray(group, dtype=jnp.int32)
        keep = jnp.arange(top, dtype=jnp.int32)[None, :] < ns[:, None]  # [g, top]
        sub = rows[None, :, :top, :]
        masked = jnp.where(keep[:, None, :, None], sub, jnp.zeros_like(sub))
        conds.append(_cond(svdvals(masked, sequential), d))  # [g, 2]
    c = jnp.concatenate(conds)  # [nN, 2] in the order of ``responses``
    out = (c[:, 0], c[:, 1])
    if gaps:
        rank = jnp.zeros((m,), jnp.int32).at[order].set(jnp.arange(m, dtype=jnp.int32))
        all_ns = jnp.asarray(responses, dtype=jnp.int32)
        g, wr = _gap_stats(rank[None, :] < all_ns[:, None], m)
        out = out + (g, wr)
    return out


class CondSamples(NamedTuple):
    """Per-trial results of :func:`cond_monte_carlo` (host numpy).

    Attributes:
        raw: [T, nN] cond(T_S). eq: [T, nN] cond(U_S) (equilibrated).
        gap: int [T, nN] largest gap. wratio: [T, nN] w_max / w_min.
        orders: int [T0, M] arrival orders of the first T0 <= T trials.
        seconds: wall time of the trials (compilation excluded).
        compile_seconds: time to compile the kernel.
    """

    raw: np.ndarray
    eq: np.ndarray
    gap: np.ndarray
    wratio: np.ndarray
    orders: np.ndarray
    seconds: float
    compile_seconds: float


def bases(
    num_workers: int, num_coeffs: int, points: str = "first"
) -> tuple[jax.Array, jax.Array]:
    """Raw T and orthonormal-column U at Chebyshev points, float64.

    First kind: U = T Lambda^{-1/2} (column equilibration). Second kind, where the
    columns of T are not orthogonal: U = the thin QR factor Q of T (same range).
    """
    if points not in ("first", "second"):
        raise ValueError(f"bases: points must be 'first' or 'second', got {points!r}")
    with jax.enable_x64(True):
        kind = 1 if points == "first" else 2
        alpha = cj.chebyshev_points(num_workers, kind=kind, dtype=jnp.float64)
        v = cj.chebyshev_vandermonde(alpha, num_coeffs=num_coeffs)
        if points == "second":
            return v, jnp.asarray(np.linalg.qr(np.asarray(v))[0])
        scale = np.full(num_coeffs, math.sqrt(2.0 / num_workers))
        scale[0] = math.sqrt(1.0 / num_workers)
        return v, v * jnp.asarray(scale)[None, :]


@functools.lru_cache(maxsize=64)
def cond_program(m: int, d: int, responses: tuple[int, ...], mesh: Mesh, batch: int):
    seq = sequential_linalg(mesh)

    def run(lat, v, u):
        def one(la):
            order = arrival_order(la, m)
            return cond_from_order(
                order,
                v,
                u,
                num_workers=m,
                num_coeffs=d,
                responses=responses,
                sequential=seq,
            ) + (order,)

        return over_trials(one, seq, batch)(lat)

    return shard(run, mesh, 2)


def cond_bytes_per_trial(m: int, d: int, responses: Sequence[int]) -> int:
    """Rough float64 working set of one trial: the masked [g, 2, max(g), D] rows of
    every group, a copy for LAPACK, and workspace."""
    rows = sum(len(g) * max(g) for g in row_buckets(sorted(responses)))
    return 8 * (3 * 2 * rows * d + 8 * m)


def check_width(width: int | None, m: int) -> int:
    """Latencies drawn per trial: ``width`` (>= M), default M."""
    w = m if width is None else int(width)
    if w < m:
        raise ValueError(f"theory.montecarlo: width must be >= M={m}, got {w}")
    return w


def cond_monte_carlo(
    key: jax.Array,
    *,
    num_workers: int,
    num_coeffs: int,
    responses: Sequence[int],
    num_trials: int,
    chunk: int | None = None,
    width: int | None = None,
    mesh: Mesh | None = None,
    memory_bytes: int = 128 << 20,
    keep_orders: int = 512,
    progress: Callable[[int], None] | None = None,
    points: str = "first",
) -> CondSamples:
    """cond(T_S) and cond(U_S) of uniformly random responding sets, sharded.

    Args:
        key: typed PRNG key of the run (trial t uses ``fold_in(key, t)``).
        num_workers: M. num_coeffs: D. responses: the N values (D <= N <= M).
        num_trials: T. chunk: trials per dispatch (default 1000; every section of
            a run should use one chunk so the sampler compiles once).
        width: latencies drawn per trial (>= M; default M).
        mesh: device mesh (default: every device).
        memory_bytes: working-set budget of one device: trials are vmapped in
            steps of budget / (bytes per trial).
        keep_orders: how many arrival orders to return (from the first trials).
        progress: called with the number of trials done after each chunk.
        points: "first" or "second" kind Chebyshev points (:func:`bases`; the gap
            statistics assume first-kind points).

    Returns:
        CondSamples.

    Raises:
        ValueError: an N outside [D, M], width < M.
    """
    m, d = int(num_workers), int(num_coeffs)
    resp = tuple(int(n) for n in responses)
    if not resp or min(resp) < d or max(resp) > m:
        raise ValueError(
            f"cond_monte_carlo: responses must lie in [D={d}, M={m}], got {resp}"
        )
    w = check_width(width, m)
    mesh = make_mesh() if mesh is None else mesh
    chunk = fit_chunk(chunk, num_trials, mesh)
    batch = vmap_batch(cond_bytes_per_trial(m, d, resp), memory_bytes)
    with jax.enable_x64(True):
        v, u = bases(m, d, points)
        v, (u,) = replicate(mesh, v, u)
        lat0 = jax.ShapeDtypeStruct(
            (chunk, w), jnp.float64, sharding=NamedSharding(mesh, P(AXIS))
        )
        t0 = time.perf_counter()
        compiled = cond_program(m, d, resp, mesh, batch).lower(lat0, v, u).compile()
        compile_s = time.perf_counter() - t0

        def keep(c0, out):
            raw, eq, g, wr, order = out
            return raw, eq, g, wr, order[: max(0, keep_orders - c0)]

        t0 = time.perf_counter()
        outs = run_chunked(
            compiled, key, num_trials, chunk, w, mesh, (v, u), progress, keep
        )
        secs = time.perf_counter() - t0
    raw, eq, g, wr, order = (np.concatenate(x) for x in zip(*outs, strict=True))
    return CondSamples(raw, eq, g, wr, order, secs, compile_s)


# ----------------------------------------------------------------------------------
# threshold systems for several point sets and bases


@functools.lru_cache(maxsize=64)
def _square_program(m: int, d: int, mesh: Mesh, batch: int):
    seq = sequential_linalg(mesh)

    def run(lat, vs):
        def one(la):
            order = arrival_order(la, m)
            return _cond(svdvals(vs[:, order[:d], :], seq), d)

        return over_trials(one, seq, batch)(lat)

    return shard(run, mesh, 1)


def square_cond_monte_carlo(
    key: jax.Array,
    matrices: Any,
    *,
    num_coeffs: int,
    num_trials: int,
    chunk: int | None = None,
    width: int | None = None,
    mesh: Mesh | None = None,
    memory_bytes: int = 128 << 20,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """cond of the D x D systems of the first D arrivals, for B bases at once.

    Args:
        key: typed PRNG key. matrices: [B, M, D] full matrices of B bases.
        num_coeffs: D. num_trials: T. chunk, width, mesh, memory_bytes, progress:
            as :func:`cond_monte_carlo`.

    Returns:
        [T, B] condition numbers.
    """
    mesh = make_mesh() if mesh is None else mesh
    with jax.enable_x64(True):
        mats = jnp.asarray(matrices, dtype=jnp.float64)
        b, m, d = mats.shape
        if d != num_coeffs:
            raise ValueError(
                f"square_cond_monte_carlo: matrices must be [B, M, D={num_coeffs}], "
                f"got {tuple(mats.shape)}"
            )
        chunk = fit_chunk(chunk, num_trials, mesh)
        batch = vmap_batch(8 * 4 * b * (d * d + m), memory_bytes)
        outs = run_chunked(
            _square_program(m, d, mesh, batch),
            key,
            num_trials,
            chunk,
            check_width(width, m),
            mesh,
            (mats,),
            progress,
        )
    return np.concatenate(outs)
