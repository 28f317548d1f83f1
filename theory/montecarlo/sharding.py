"""Sharding trials over devices and processes: meshes, replicated constants, the
latency sampler and the chunked driver (see :mod:`theory.montecarlo`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import codedjax as cj

__all__ = [
    "AXIS",
    "DEFAULT_CHUNK",
    "arrival_order",
    "fit_chunk",
    "initialize_distributed",
    "is_writer",
    "make_mesh",
    "over_trials",
    "replicate",
    "run_chunked",
    "sampler_program",
    "sequential_linalg",
    "shard",
    "svdvals",
    "to_host",
    "trial_indices",
    "vmap_batch",
]

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


def trial_indices(start: int, count: int, mesh: Mesh) -> jax.Array:
    """Global trial indices start..start+count-1, sharded over the mesh.

    Each process builds only the shards of its own devices, so this works across
    processes; ``count`` must be a multiple of the mesh size.
    """
    sharding = NamedSharding(mesh, P(AXIS))
    host = np.arange(start, start + count, dtype=np.uint32)
    return jax.make_array_from_callback((count,), sharding, lambda idx: host[idx])


DEFAULT_CHUNK = 1000  # trials per dispatch (then rounded to the device count)


def vmap_batch(bytes_per_trial: int, memory_bytes: int) -> int:
    """Trials vmapped together on one device within the memory budget (>= 1)."""
    return max(1, int(memory_bytes) // max(int(bytes_per_trial), 1))


@functools.lru_cache(maxsize=16)
def sampler_program(width: int, mesh: Mesh):
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

    ``latencies`` [chunk, width] come from :func:`sampler_program`. Returns the
    per-chunk host outputs (pytrees of [chunk, ...] arrays) with the padding of the
    last chunk cut off; ``keep(start, out)`` maps a chunk's output to what is kept.
    """
    sampler = sampler_program(width, mesh)
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


def arrival_order(latencies: jax.Array, num_workers: int) -> jax.Array:
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


def svdvals(x: jax.Array, sequential: bool) -> jax.Array:
    """Singular values of [..., r, c] (batched call, or one matrix per call)."""
    if not sequential:
        return jnp.linalg.svd(x, compute_uv=False)
    flat = x.reshape((-1,) + x.shape[-2:])
    sv = jax.lax.map(lambda a: jnp.linalg.svd(a, compute_uv=False), flat)
    return sv.reshape(x.shape[:-2] + sv.shape[-1:])


def over_trials(fn: Callable, sequential: bool, batch: int | None = None) -> Callable:
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


def shard(batch: Callable, mesh: Mesh, num_consts: int):
    """``jit(shard_map(batch))``: the trial axis of the first argument split over the
    mesh, ``num_consts`` replicated constants after it."""
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
