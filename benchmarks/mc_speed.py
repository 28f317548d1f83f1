"""Speed of the condition-number Monte Carlo of ``theory.verify`` against numpy.

    python -m benchmarks.mc_speed [--workers 100] [--coeffs 25] [--trials 2000]

Times the sharded JAX kernel behind ``theory.verify`` (cond(T_S) and cond(U_S) for
every N of the verification grid, batched SVDs in float64) against numpy's stacked
SVD on the *same* responding sets, after checking that both agree. Prints one JSON
record and writes it to ``--out DIR`` (``summary.json``, default
results/mc_speed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

import runkit
from theory import montecarlo as mc
from theory.verify import EPS, key, response_grid


def cond_trials_per_second(
    *,
    num_workers: int = 100,
    num_coeffs: int = 25,
    responses: tuple[int, ...] | None = None,
    num_trials: int = 2000,
    seed: int = 0,
    repeats: int = 3,
    mesh=None,
) -> dict:
    """Trials per second of the cond Monte Carlo against numpy's stacked SVD.

    Both compute cond(T_S) and cond(U_S) for every N of ``responses`` on the *same*
    responding sets (the arrival orders are drawn once, by the JAX sampler). Timed:
    the JAX kernel from the orders (sharded over every device), the full JAX Monte
    Carlo including sampling, and numpy (``np.linalg.svd`` on the stacked [T, 2, N, D]
    rows, one call per N). Results are compared before timing. Medians of
    ``repeats`` interleaved runs; compilation is timed separately.

    Returns:
        dict with ``jax_trials_per_s``, ``jax_mc_trials_per_s``,
        ``numpy_trials_per_s``, ``ratio`` (JAX kernel over numpy), ``ratio_mc``
        (full Monte Carlo over numpy), ``max_rel_diff_over_eps_cond`` (over trials
        with cond < 1e8), the device count and backend.
    """
    from jax.sharding import PartitionSpec as P

    m, d = num_workers, num_coeffs
    resp = response_grid(m, d) if responses is None else tuple(responses)
    mesh = mc.make_mesh() if mesh is None else mesh
    ndev = mesh.devices.size
    t = -(-num_trials // ndev) * ndev
    run_key = key(seed, 4, m, d)
    with jax.enable_x64(True):
        v, u = mc.bases(m, d)
        orders_prog = jax.jit(
            jax.shard_map(
                jax.vmap(lambda lat: mc.arrival_order(lat, m)),
                mesh=mesh,
                in_specs=P(mc.AXIS),
                out_specs=P(mc.AXIS),
            )
        )

        seq = mc.sequential_linalg(mesh)

        def kernel(orders, v, u):
            return mc.over_trials(
                lambda o: mc.cond_from_order(
                    o,
                    v,
                    u,
                    num_workers=m,
                    num_coeffs=d,
                    responses=resp,
                    gaps=False,
                    sequential=seq,
                ),
                seq,
            )(orders)

        kern = mc.shard(kernel, mesh, 2)
        sampler = mc.sampler_program(m, mesh)
        idx = mc.trial_indices(0, t, mesh)
        orders = jax.block_until_ready(orders_prog(sampler(run_key, idx)))
        t0 = time.perf_counter()
        raw, eq = jax.block_until_ready(kern(orders, v, u))
        compile_s = time.perf_counter() - t0
        vn, un, on = np.asarray(v), np.asarray(u), np.asarray(orders)

        def numpy_run():
            out = []
            for n in resp:
                rows = on[:, :n]
                sv = np.linalg.svd(
                    np.stack([vn[rows], un[rows]], axis=1), compute_uv=False
                )
                out.append(sv[..., 0] / sv[..., d - 1])
            return np.stack(out, axis=-1)  # [T, 2, nN]

        ref = numpy_run()
        got = np.stack([np.asarray(raw), np.asarray(eq)], axis=1)
        ok = np.isfinite(ref) & (ref < 1e8)
        rel = np.abs(got[ok] / ref[ok] - 1.0) / (EPS * ref[ok])
        max_rel = float(rel.max()) if rel.size else 0.0

        full = mc.cond_program(
            m,
            d,
            resp,
            mesh,
            mc.vmap_batch(mc.cond_bytes_per_trial(m, d, resp), 128 << 20),
        )
        jax.block_until_ready(full(sampler(run_key, idx), v, u))
        runs = {
            "jax": lambda: jax.block_until_ready(kern(orders, v, u)),
            "mc": lambda: jax.block_until_ready(full(sampler(run_key, idx), v, u)),
            "numpy": numpy_run,
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(repeats):  # interleaved, so a change of load hits all three
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        t_jax, t_mc, t_np = (float(np.median(times[k])) for k in ("jax", "mc", "numpy"))
    return {
        "M": m,
        "D": d,
        "responses": list(resp),
        "trials": t,
        "jax_trials_per_s": t / t_jax,
        "jax_mc_trials_per_s": t / t_mc,
        "numpy_trials_per_s": t / t_np,
        "ratio": t_np / t_jax,
        "ratio_mc": t_np / t_mc,
        "compile_s": compile_s,
        "max_rel_diff_over_eps_cond": max_rel,
        "devices": ndev,
        "backend": jax.default_backend(),
        "device_kind": mesh.devices.flat[0].device_kind,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mc_speed")
    runkit.add_run_arguments(p, out="results/mc_speed", quick=False)
    p.add_argument("--workers", type=int, default=100)
    p.add_argument("--coeffs", type=int, default=25)
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    runkit.at_least(
        p, a, {"--workers": 1, "--coeffs": 1, "--trials": 1, "--repeats": 1}
    )
    if a.coeffs > a.workers:
        p.error(
            f"--coeffs: D must be at most --workers M = {a.workers}, got {a.coeffs}"
        )
    rec = cond_trials_per_second(
        num_workers=a.workers,
        num_coeffs=a.coeffs,
        num_trials=a.trials,
        seed=a.seed,
        repeats=a.repeats,
    )
    rec["environment"] = runkit.environment()
    path = runkit.write_summary(os.path.join(a.out, "summary.json"), rec, indent=1)
    print(path.read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
