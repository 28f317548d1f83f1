"""Compile and run time of the two float32 batched ChebyLS kernels, per batch size.

The batched float32 decode (``cj.chebyls_decode_batched``, ``Code.decode_batched`` and
``jax.vmap`` of the ChebyLS decoders) runs either the semi-normal-equations kernel
(``codedjax._lagrange_lsq.ne_decoding_matrices``) or the Householder QR kernel
(``codedjax._lagrange_lsq.qr_decoding_matrices``), each with its form of the residual
for the predicted error. ``codedjax._lagrange_lsq.batched_kernel`` picks QR below
``NE_MIN_MASKS`` masks; this script measures the figures that threshold comes from. For
each (M, D), batch size B and kernel it builds the whole decode program
(``jax.jit(...).lower(...).compile()``, a fresh function each time, so nothing is
cached; wall-clock seconds of the compile, and CPU seconds of lowering and compiling
together), then times runs of the compiled program alone (the median of ``--reps``
wall-clock runs; the fastest is in the ``--out`` file).
The table in ``docs/decoding.md`` comes from

    python tools/batched_kernel_times.py

(about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax import _lagrange_chebyls

SHAPES = ((12, 3, 5), (40, 8, 22))  # (M, K, D)
BATCHES = (1, 4, 12, 16, 32, 128)
KERNELS = ("ne", "qr")
F = 16  # payload columns, shared by every mask


def measure(m: int, k: int, d: int, b: int, kernel: str, reps: int) -> dict:
    """Seconds to lower, to compile and (median of ``reps``) to run one program.

    ``build_cpu`` is the CPU time of lowering and compiling together: on a loaded
    machine the wall-clock times grow with the load, the CPU time much less."""
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    n = (m + d) // 2  # responders between the threshold and every worker
    masks = cj.sample_masks(
        jax.random.key(b), num_workers=m, num_responses=n, shape=(b,)
    )
    y = jax.random.normal(jax.random.key(1), (m, F), jnp.float32)
    fn = jax.jit(
        functools.partial(_lagrange_chebyls._chebyls_batched_impl, kernel=kernel),
        static_argnames=("num_coeffs", "acc", "per_mask"),
    )
    args = (y, masks, alpha, beta)
    statics = {"num_coeffs": d, "acc": jnp.float32, "per_mask": False}
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = fn.lower(*args, **statics)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    c2, t2 = time.process_time(), time.perf_counter()
    jax.block_until_ready(compiled(*args))  # first run (allocations) not timed
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t)
    return {
        "lower": t1 - t0,
        "compile": t2 - t1,
        "build_cpu": c2 - c0,  # lowering and compiling, CPU seconds of the process
        "run": float(np.median(runs)),
        "run_fastest": float(np.min(runs)),
    }


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=50, help="timed runs per program")
    p.add_argument(
        "--batches", type=int, nargs="+", default=list(BATCHES), help="batch sizes"
    )
    p.add_argument("--out", help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    if a.reps < 1:
        p.error(f"--reps must be at least 1, got {a.reps}")
    if min(a.batches) < 1:
        p.error(f"--batches must be at least 1, got {min(a.batches)}")
    rows = []
    print(
        "| M, D | masks | semi-normal compile (CPU) | semi-normal run | QR compile "
        "(CPU) | QR run |\n|---|---|---|---|---|---|",
        flush=True,
    )
    for m, k, d in SHAPES:
        for b in a.batches:
            got = {kern: measure(m, k, d, b, kern, a.reps) for kern in KERNELS}
            ne, qr = got["ne"], got["qr"]
            rows.append({"M": m, "D": d, "B": b, **got})
            print(
                f"| {m}, {d} | {b} | {ne['compile']:.1f} s ({ne['build_cpu']:.1f} s) "
                f"| {ne['run'] * 1e6:,.0f} us | {qr['compile']:.1f} s "
                f"({qr['build_cpu']:.1f} s) | {qr['run'] * 1e6:,.0f} us |",
                flush=True,
            )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
