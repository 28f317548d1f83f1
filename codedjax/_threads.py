"""One process-wide lock around programs that run batched LAPACK on the CPU.

With jaxlib 0.10.2 on CPU, a batched LAPACK custom call (QR, SVD, Cholesky,
triangular solve over a leading batch axis) splits its batch across XLA's intra-op
thread pool and blocks its own thread until the pieces are done
(``jax::ParallelBatchMap``). When such a call itself runs on a pool worker (inside a
``while_loop``, or whenever the CPU runtime schedules it there) and as many such calls
run at once as the pool has workers, every worker waits for pieces that no free worker
can run: the process deadlocks. Two concurrent executions suffice on a 2-core
machine; one execution with two independent batched LAPACK calls can do it too.

codedjax's batched entry points therefore run their compiled programs under
:data:`lapack_lock` and wait for the result before releasing it, so at most one such
program runs at a time in the process (and within a program, codedjax chains its LAPACK
calls through data dependencies, see ``codedjax._lagrange_lsq``). A program the caller
compiles around a codedjax decoder (``jax.jit(jax.vmap(cj.chebyls_decode))``) is outside
the library's reach: call it under ``with cj.lapack_lock:`` and block on its result
inside the block when several threads may run it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax

#: Process-wide re-entrant lock held while a program with batched CPU LAPACK calls
#: runs (see the module docstring).
lapack_lock = threading.RLock()


def _traced(tree: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


def serialised_call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` under :data:`lapack_lock`, blocked until ready.

    Inside a trace (the arguments are tracers) the call only stages operations, so
    it runs without the lock: the caller's program is then the caller's to guard.
    Only the CPU backend needs the lock; elsewhere ``fn`` runs directly.
    """
    if _traced((args, kwargs)) or jax.default_backend() != "cpu":
        return fn(*args, **kwargs)
    with lapack_lock:
        return jax.block_until_ready(fn(*args, **kwargs))
