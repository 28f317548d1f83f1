"""Speed of the condition-number Monte Carlo of ``theory.verify`` against numpy.

    python -m benchmarks.mc_speed [--workers 100] [--coeffs 25] [--trials 2000]

Times the sharded JAX kernel behind ``theory.verify`` (cond(T_S) and cond(U_S) for
every N of the verification grid, batched SVDs in float64) against numpy's stacked
SVD on the *same* responding sets, after checking that both agree. Prints one JSON
record and writes it to ``--out DIR`` (``summary.json``, default
results/mc_speed).
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class McSpeedConfig:
    """What :func:`cond_trials_per_second` times (the flags of the command).

    Attributes:
      workers: M. coeffs: D (at most M). trials: responding sets per N.
      repeats: timed repetitions (the best is kept). seed: of the arrival orders.
    """

    workers: int = 100
    coeffs: int = 25
    trials: int = 2000
    repeats: int = 3
    seed: int = 0

    def __post_init__(self):
        fields = ("workers", "coeffs", "trials", "repeats")
        runkit.check_fields("McSpeedConfig", self, at_least=dict.fromkeys(fields, 1))
        if self.coeffs > self.workers:
            raise ValueError(
                f"McSpeedConfig: coeffs must be at most workers = {self.workers}, "
                f"got {self.coeffs}"
            )


FLAGS = {"workers": "--workers", "coeffs": "--coeffs", "trials": "--trials",
         "repeats": "--repeats"}  # fmt: skip


def _run(cfg: McSpeedConfig, cmd: runkit.Invocation) -> int:
    rec = cond_trials_per_second(
        num_workers=cfg.workers,
        num_coeffs=cfg.coeffs,
        num_trials=cfg.trials,
        seed=cfg.seed,
        repeats=cfg.repeats,
    )
    rec["environment"] = runkit.environment()
    path = runkit.write_summary(os.path.join(cmd.out, "summary.json"), rec, indent=1)
    print(path.read_text(), end="")
    cmd.write_page(
        title="Monte Carlo speed: condition numbers per second",
        body="```json\n" + path.read_text().rstrip() + "\n```",
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: prints and writes the record."""
    return runkit.main(
        McSpeedConfig, _run, argv, prog="python -m benchmarks.mc_speed",
        description=__doc__.split("\n\n")[0], flags=FLAGS, out="results/mc_speed",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
