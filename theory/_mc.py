"""Sharded, chunked Monte Carlo kernels behind ``theory.verify``.

Every trial t draws its own key ``jax.random.fold_in(key, t)`` from the run's key and
its global index, so a trial's result depends on nothing but (key, t): not on the
chunk size, not on the number of devices, not on which device ran it. Trials are
vmapped in chunks of bounded memory, and each chunk is split over every device of a
``jax.sharding.Mesh`` with ``jax.shard_map`` (data parallel, no communication).

Several processes (hosts, or several processes on one machine): call
:func:`initialize_distributed` (coordinator address, process count and id, or the
cluster's environment) in every process before anything else touches a device, then
run the same program everywhere. ``jax.devices()`` then lists the devices of every
process and the mesh spans all of them. No process ever holds the whole batch:

- the run's key and the constants are replicated with :func:`replicate`, each
  process supplying its own (identical) copy
  (``jax.make_array_from_process_local_data``);
- the trial indices are a global array of which each process builds only the
  shards of its own devices (:func:`trial_indices`, ``jax.make_array_from_callback``);
- the per-trial results are gathered to every process with :func:`to_host`
  (``multihost_utils.process_allgather``), so every reduction on the host sees all
  trials.

Every process thus ends up with the same numbers, equal (bit for bit) to a
one-process run with the same key and trial count; :func:`is_writer` says which
process writes the outputs (process 0). The other Monte Carlo drivers of the project
should shard through these helpers (:func:`make_mesh`, :func:`replicate`,
:func:`run_chunked`, :func:`to_host`) so that they scale out the same way.

A trial is one uniformly random arrival order of the M workers: i.i.d. uniform
latencies (``jax.random.uniform(fold_in(key, t), (width,))``, the first M used) put
in order by the library's ``first_arrivals``, which is how ``sample_arrivals(
model="uniform")`` draws them. The responders for N are the first N arrivals, so one
trial serves every N of the grid (common random numbers across N; each N on its own
is an exact uniform N-subset, the law of ``sample_masks``). The latencies come from
one shared sampler program, because the threefry hash is slow to compile on CPU;
every consumer program is free of it. ``width`` (the largest M of a run) is part of
the stream: the same (key, width) gives the same trials.

Everything here runs in float64: the entry points enter ``jax.enable_x64(True)``
themselves (the library never switches it on).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import codedjax as cj

AXIS = "trials"


def initialize_distributed(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Join a multi-process JAX run (one process per host, or several on one host).

    Must run in every process before anything touches a device. With all three
    arguments ``None`` the cluster is detected from its environment (Slurm, Open MPI,
    Cloud TPU); elsewhere give the coordinator's ``host:port`` (process 0 listens
    there), the number of processes and this process's id (0..P-1). CPU processes
    talk through gloo collectives (set here; the setting is ignored by GPU and TPU
    backends, which use their own).

    Args:
        coordinator: ``host:port`` of process 0, or None to detect.
        num_processes: P, or None to detect.
        process_id: this process's index, or None to detect.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
    )


def is_writer() -> bool:
    """True in the process that writes a run's outputs (process 0)."""
    return jax.process_index() == 0


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: every device of every process)."""
    devs = list(jax.devices() if devices is None else devices)
    return Mesh(np.array(devs), (AXIS,))


def to_host(x: jax.Array) -> np.ndarray:
    """The whole of a (possibly multi-process) array as host numpy, in every process.

    With several processes the shards of the other processes are all-gathered, so
    every host-side reduction sees every trial.
    """
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


_to_host = to_host  # old private name


def trial_indices(start: int, count: int, mesh: Mesh) -> jax.Array:
    """Global trial indices start..start+count-1, sharded over the mesh.

    Each process builds only the shards of its own devices, so this works across
    processes; ``count`` must be a multiple of the mesh size.
    """
    sharding = NamedSharding(mesh, P(AXIS))
    host = np.arange(start, start + count, dtype=np.uint32)
    return jax.make_array_from_callback((count,), sharding, lambda idx: host[idx])


_indices = trial_indices  # old private name


DEFAULT_CHUNK = 1000  # trials per dispatch (then rounded to the device count)


def vmap_batch(bytes_per_trial: int, memory_bytes: int) -> int:
    """Trials vmapped together on one device within the memory budget (>= 1)."""
    return max(1, int(memory_bytes) // max(int(bytes_per_trial), 1))


@functools.lru_cache(maxsize=16)
def _sampler_program(width: int, mesh: Mesh):
    """Trial t -> ``width`` i.i.d. uniform latencies from ``fold_in(key, t)``.

    The only program with the (slow to compile) threefry hash: every consumer below
    takes its latencies from here, so a run compiles it once per chunk shape.
    """

    def batch(key, idx):
        return jax.vmap(
            lambda i: jax.random.uniform(
                jax.random.fold_in(key, i), (width,), jnp.float64
            )
        )(idx)

    return jax.jit(
        jax.shard_map(batch, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=P(AXIS))
    )


def _replicated(x: Any, rep: NamedSharding) -> jax.Array:
    if isinstance(x, jax.Array) and x.sharding == rep:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = _replicated(jax.random.key_data(x), rep)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return jax.jit(lambda a: a, out_shardings=rep)(x)
    host = np.asarray(x)
    return jax.make_array_from_process_local_data(rep, host, host.shape)


def replicate(mesh: Mesh, *xs: Any) -> tuple:
    """(first, rest): ``xs`` placed fully replicated on the mesh.

    Every process passes the same values (arrays, numpy, or typed PRNG keys). Each
    process supplies its own copy for its own devices
    (``jax.make_array_from_process_local_data``), never placing data on a device of
    another process, so the result is a global array that a multi-process ``jit``
    accepts; with one process it is an ordinary replicated array.
    """
    rep = NamedSharding(mesh, P())
    out = [_replicated(x, rep) for x in xs]
    return out[0], tuple(out[1:])


def run_chunked(
    fn: Callable,
    key: jax.Array,
    num_trials: int,
    chunk: int,
    width: int,
    mesh: Mesh,
    consts: tuple,
    progress: Callable[[int], None] | None,
    keep: Callable | None = None,
) -> list:
    """Run ``fn(latencies, *consts)`` over trials 0..T-1 in padded chunks.

    ``latencies`` [chunk, width] come from :func:`_sampler_program`. Returns the
    per-chunk host outputs (pytrees of [chunk, ...] arrays) with the padding of the
    last chunk cut off; ``keep(start, out)`` maps a chunk's output to what is kept.
    """
    sampler = _sampler_program(width, mesh)
    key, consts = replicate(mesh, key, *consts)
    outs = []
    for c0 in range(0, num_trials, chunk):
        lat = sampler(key, trial_indices(c0, chunk, mesh))
        out = jax.tree_util.tree_map(to_host, fn(lat, *consts))
        valid = min(chunk, num_trials - c0)
        out = jax.tree_util.tree_map(lambda a, v=valid: a[:v], out)
        outs.append(keep(c0, out) if keep is not None else out)
        if progress is not None:
            progress(valid)
    return outs


def _arrival_order(latencies: jax.Array, num_workers: int) -> jax.Array:
    """Arrival order of M workers from the first M latencies (library's sorter)."""
    lat = latencies[:num_workers]
    return cj.first_arrivals(lat, num_responses=num_workers).order


def sequential_linalg(mesh: Mesh) -> bool:
    """True when LAPACK calls must be issued one matrix at a time.

    jaxlib 0.10.2's CPU LAPACK kernels split a batched call over XLA's intra-op
    thread pool and block a pool thread while they wait (``ParallelBatchMap``); when
    several CPU devices run batched SVDs at once, every pool thread can end up
    waiting and the process deadlocks (seen here with 2 devices on 2 cores). One
    matrix per call never takes that path, so with several CPU devices the trials
    and the SVDs run in ``lax.map`` loops. The singular values are the same either
    way (the same LAPACK routine on the same matrix). Only the devices of this
    process share its thread pool: several processes with one CPU device each
    (a multi-process run) keep the batched calls.
    """
    me = jax.process_index()
    local = [dv for dv in mesh.devices.flat if dv.process_index == me]
    return len(local) > 1 and local[0].platform == "cpu"


def _svdvals(x: jax.Array, sequential: bool) -> jax.Array:
    """Singular values of [..., r, c] (batched call, or one matrix per call)."""
    if not sequential:
        return jnp.linalg.svd(x, compute_uv=False)
    flat = x.reshape((-1,) + x.shape[-2:])
    sv = jax.lax.map(lambda a: jnp.linalg.svd(a, compute_uv=False), flat)
    return sv.reshape(x.shape[:-2] + sv.shape[-1:])


def _over_trials(fn: Callable, sequential: bool, batch: int | None = None) -> Callable:
    """Map ``fn`` over the leading (trial) axis of one device's chunk.

    ``lax.map`` one trial at a time when ``sequential``; otherwise vmapped in steps
    of ``batch`` trials (``lax.map(batch_size=...)``), which bounds the memory of a
    chunk whatever its length. A trial's result does not depend on either choice.
    """
    if sequential:
        return lambda xs: jax.lax.map(fn, xs)
    if batch is None:
        return jax.vmap(fn)

    def mapped(xs):
        n = xs.shape[0]
        steps = -(-n // batch)
        while n % steps:  # equal steps: no remainder, so the body compiles once
            steps += 1
        if steps == 1:
            return jax.vmap(fn)(xs)
        return jax.lax.map(fn, xs, batch_size=n // steps)

    return mapped


def _shard(batch: Callable, mesh: Mesh, num_consts: int):
    return jax.jit(
        jax.shard_map(
            batch,
            mesh=mesh,
            in_specs=(P(AXIS),) + (P(),) * num_consts,
            out_specs=P(AXIS),
        )
    )


def fit_chunk(chunk: int | None, num_trials: int, mesh: Mesh) -> int:
    """Trials per dispatch: a multiple of the device count, not above the need."""
    ndev = mesh.devices.size
    chunk = DEFAULT_CHUNK if chunk is None else int(chunk)
    chunk = max(ndev, (chunk // ndev) * ndev)
    return min(chunk, -(-int(num_trials) // ndev) * ndev)


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
        conds.append(_cond(_svdvals(masked, sequential), d))  # [g, 2]
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
def _cond_program(m: int, d: int, responses: tuple[int, ...], mesh: Mesh, batch: int):
    seq = sequential_linalg(mesh)

    def run(lat, v, u):
        def one(la):
            order = _arrival_order(la, m)
            return cond_from_order(
                order,
                v,
                u,
                num_workers=m,
                num_coeffs=d,
                responses=responses,
                sequential=seq,
            ) + (order,)

        return _over_trials(one, seq, batch)(lat)

    return _shard(run, mesh, 2)


def cond_bytes_per_trial(m: int, d: int, responses: Sequence[int]) -> int:
    """Rough float64 working set of one trial: the masked [g, 2, max(g), D] rows of
    every group, a copy for LAPACK, and workspace."""
    rows = sum(len(g) * max(g) for g in row_buckets(sorted(responses)))
    return 8 * (3 * 2 * rows * d + 8 * m)


def _width(width: int | None, m: int) -> int:
    w = m if width is None else int(width)
    if w < m:
        raise ValueError(f"_mc: width must be >= M={m}, got {w}")
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
    w = _width(width, m)
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
        compiled = _cond_program(m, d, resp, mesh, batch).lower(lat0, v, u).compile()
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
            order = _arrival_order(la, m)
            return _cond(_svdvals(vs[:, order[:d], :], seq), d)

        return _over_trials(one, seq, batch)(lat)

    return _shard(run, mesh, 1)


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
            _width(width, m),
            mesh,
            (mats,),
            progress,
        )
    return np.concatenate(outs)


# ----------------------------------------------------------------------------------
# RepApprox: first arrival of the last replica group


@functools.lru_cache(maxsize=64)
def _recovery_program(k: int, c: int, m: int, mesh: Mesh):
    def one(lat):
        order = _arrival_order(lat, m)
        rank = jnp.zeros((m,), jnp.int32).at[order].set(jnp.arange(m, dtype=jnp.int32))
        first = jnp.min(rank[: k * c].reshape(k, c), axis=1)
        return jnp.max(first)

    return _shard(jax.vmap(one), mesh, 0)


def recovery_monte_carlo(
    key: jax.Array,
    *,
    num_tasks: int,
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
    k, c, m = int(num_tasks), int(replication), int(num_workers)
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
            _width(width, m),
            mesh,
            (),
            progress,
        )
    r = np.concatenate(outs).astype(np.int64)
    hist = np.bincount(r, minlength=m + 1)
    # exact at N iff R < N: counts[N] = #{R <= N - 1}
    return np.concatenate([[0], np.cumsum(hist)[:m]])
