"""Sharded, chunked Monte Carlo kernels behind ``theory.verify`` (public, shared).

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
(``benchmarks.mc_speed`` among them) shard through these public helpers
(:func:`make_mesh`, :func:`replicate`, :func:`run_chunked`, :func:`to_host`,
:func:`shard`, :func:`sampler_program`) so that they scale out the same way.

A trial is one uniformly random arrival order of the M workers: i.i.d. uniform
latencies (``jax.random.uniform(fold_in(key, t), (width,))``, the first M used) put
in order by the library's ``first_arrivals``, which is how ``sample_arrivals(
model=Uniform(0, 1))`` draws them. The responders for N are the first N arrivals, so one
trial serves every N of the grid (common random numbers across N; each N on its own
is an exact uniform N-subset, the law of ``sample_masks``). The latencies come from
one shared sampler program, because the threefry hash is slow to compile on CPU;
every consumer program is free of it. ``width`` (the largest M of a run) is part of
the stream: the same (key, width) gives the same trials.

Everything here runs in float64: the entry points enter ``jax.enable_x64(True)``
themselves (the library never switches it on).

Modules: ``sharding`` (meshes, replication, the sampler, the chunked driver),
``cond`` (:func:`cond_monte_carlo`, :func:`square_cond_monte_carlo`) and
``recovery`` (:func:`recovery_monte_carlo`).
"""

from .cond import CondSamples as CondSamples
from .cond import bases as bases
from .cond import check_width as check_width
from .cond import cond_bytes_per_trial as cond_bytes_per_trial
from .cond import cond_from_order as cond_from_order
from .cond import cond_monte_carlo as cond_monte_carlo
from .cond import cond_program as cond_program
from .cond import row_buckets as row_buckets
from .cond import square_cond_monte_carlo as square_cond_monte_carlo
from .recovery import recovery_monte_carlo as recovery_monte_carlo
from .sharding import AXIS as AXIS
from .sharding import DEFAULT_CHUNK as DEFAULT_CHUNK
from .sharding import arrival_order as arrival_order
from .sharding import fit_chunk as fit_chunk
from .sharding import initialize_distributed as initialize_distributed
from .sharding import is_writer as is_writer
from .sharding import make_mesh as make_mesh
from .sharding import over_trials as over_trials
from .sharding import replicate as replicate
from .sharding import run_chunked as run_chunked
from .sharding import sampler_program as sampler_program
from .sharding import sequential_linalg as sequential_linalg
from .sharding import shard as shard
from .sharding import svdvals as svdvals
from .sharding import to_host as to_host
from .sharding import trial_indices as trial_indices
from .sharding import vmap_batch as vmap_batch
