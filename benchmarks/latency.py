"""Per-request latency: what a serving runtime pays to encode and decode one request.

    python -m benchmarks.latency [--calls 2000] [--out DIR]

One request: K = 8 queries of F = 64 features are Lagrange-encoded for M workers and
the responses of one straggler mask are decoded by ChebyLS, in two cases (``CASES``):
the headline M = 40, N = 30 of 40, degree 3 (D = 22), and a small code, M = 12,
N = 9 of 12, degree 1 (D = 8), where the fixed costs of a call weigh most. Timed
per call (``block_until_ready``), interleaved so that every variant
sees the same machine load, in a fresh random order each round (a fixed order
would always run the same variant right after numpy, whose work leaves the
caches of the next call's Python and dispatch cold), and reported as median and
99th percentile:

* ``public``: the library's eager calls (``cj.lagrange_encode``, ``cj.chebyls_decode``)
  with their argument checks (memoised per code: the same point arrays);
* ``jitted``: the same calls, each inside ``jax.jit`` with the points as
  arguments (``jax.jit(cj.chebyls_decode, static_argnames="num_coeffs")``, as in the
  README; no Python checks; two dispatches for encode + decode, like the public
  calls), and ``one_jit``: encode and decode fused into one program with the
  points as constants (one dispatch, the bases folded at compile time);
* ``code``: the same code as a :class:`codedjax.Code`
  (``cj.lagrange_code(...)``), whose ``encode`` and ``decode`` are one compiled
  program each (its points checked once, when it was built);
* ``numpy_f64``: what a numpy user writes: a precomputed M x K encoding matrix, then
  ``lstsq`` on the responding rows and the evaluation at the data points.

The accuracy of each variant's decode is checked against the float64 result first.
Records the device, like every benchmark here (runs unchanged on GPU/TPU).

``--dispatch`` (default ``both``): JAX runs a CPU program on a thread of its own
and the caller waits for it (``async``, JAX's default), or runs it on the calling
thread (``sync``: ``jax.config.update("jax_cpu_enable_async_dispatch", False)``
before the first computation; a serving runtime that waits for each request sets
it). The hand-off costs tens of microseconds per program on a small machine, so
both are measured, each in a fresh process (the setting is read once, when JAX
starts its CPU client), on the same inputs, one after the other.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
import runkit
from runkit import environment
from runkit.pages import report_page

K, M, N, D, F = 8, 40, 30, 22, 64  # the headline case
# (K, M, N, degree, F) of each case: D = degree (K - 1) + 1
CASES = {"headline": (K, M, N, 3, F), "small": (8, 12, 9, 1, 64)}


def _percentiles(times: list[float]) -> dict:
    t = np.asarray(times)
    return {
        "median_us": float(1e6 * np.median(t)),
        "p99_us": float(1e6 * np.quantile(t, 0.99)),
        "calls": int(t.size),
    }


def case_name(case: tuple = CASES["headline"]) -> str:
    """``latency[K=..,M=..,N=..,D=..,F=..]`` of a case of :data:`CASES`."""
    k, m, n, degree, f = case
    return f"latency[K={k},M={m},N={n},D={degree * (k - 1) + 1},F={f}]"


def measure(calls: int = 2000, seed: int = 0, case: tuple = CASES["headline"]) -> dict:
    """Median and p99 of each variant, for encode+decode and for decode alone, for
    one ``case`` (K, M, N, degree, F) of :data:`CASES` (default the headline)."""
    K, M, N, degree, F = case  # the module's names, for this case
    D = degree * (K - 1) + 1
    alpha, beta = cj.chebyshev_points(M), cj.chebyshev_points(K)
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((K, F)), jnp.float32)
    t64 = npcheb.chebvander(np.asarray(alpha, np.float64), D - 1)
    tb64 = npcheb.chebvander(np.asarray(beta, np.float64), D - 1)
    y = jnp.asarray(t64 @ rng.standard_normal((D, F)), jnp.float32)  # responses
    mask = cj.sample_masks(jax.random.key(seed), num_workers=M, num_responses=N)
    mk, y64, x64 = np.asarray(mask), np.asarray(y, np.float64), np.asarray(x)
    enc64 = np.asarray(
        cj.lagrange_encode(jnp.eye(K, dtype=jnp.float32), beta, alpha), np.float64
    )  # the M x K encoding matrix, built once per code

    def public_dec():
        return cj.chebyls_decode(y, mask, alpha, beta, num_coeffs=D).value

    def public_both():
        return cj.lagrange_encode(x, beta, alpha), public_dec()

    # jitted as the README shows: the points are arguments, num_coeffs static
    dec_jit = jax.jit(cj.chebyls_decode, static_argnames="num_coeffs")
    enc_jit = jax.jit(cj.lagrange_encode)

    def dec_j(yy, m):
        return dec_jit(yy, m, alpha, beta, num_coeffs=D)

    def enc_j(xx):
        return enc_jit(xx, beta, alpha)

    fused_j = jax.jit(
        lambda xx, yy, m: (
            cj.lagrange_encode(xx, beta, alpha),
            cj.chebyls_decode(yy, m, alpha, beta, num_coeffs=D).value,
        )
    )

    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=degree)
    assert code.num_coeffs == D

    def numpy_dec():
        c, *_ = np.linalg.lstsq(t64[mk], y64[mk], rcond=None)
        return tb64 @ c

    def numpy_both():
        return enc64 @ x64, numpy_dec()

    ref = numpy_dec()
    cond = float(np.linalg.cond(t64[mk]))
    variants = {
        "decode/public": lambda: jax.block_until_ready(public_dec()),
        "decode/jitted": lambda: jax.block_until_ready(dec_j(y, mask).value),
        "decode/code": lambda: jax.block_until_ready(code.decode(y, mask).value),
        "decode/numpy_f64": numpy_dec,
        "encode+decode/public": lambda: jax.block_until_ready(public_both()),
        "encode+decode/jitted": lambda: jax.block_until_ready(
            (enc_j(x), dec_j(y, mask).value)
        ),
        "encode+decode/one_jit": lambda: jax.block_until_ready(fused_j(x, y, mask)),
        "encode+decode/code": lambda: jax.block_until_ready(
            (code.encode(x), code.decode(y, mask).value)
        ),
        "encode+decode/numpy_f64": numpy_both,
    }
    errors = {}
    for name, fn in variants.items():
        out = fn()
        out = out[1] if isinstance(out, tuple) else out
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        if err > 100 * cond * float(jnp.finfo(jnp.float32).eps):
            raise AssertionError(f"{name}: error {err:.2e} fails the accuracy check")
        errors[name] = err
        for _ in range(20):  # warm-up
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for _ in range(calls):
        # a fresh order each round: no variant always follows the same one
        for i in rng.permutation(len(names)):
            name = names[i]
            fn = variants[name]
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    out = {
        name: {**_percentiles(t), "max_err": errors[name]} for name, t in times.items()
    }
    for what in ("decode", "encode+decode"):
        j, p = out[f"{what}/jitted"], out[f"{what}/public"]
        out[f"{what}/public_over_jitted"] = {
            "median": p["median_us"] / j["median_us"],
            "p99": p["p99_us"] / j["p99_us"],
        }
        c, n = out[f"{what}/code"], out[f"{what}/numpy_f64"]
        out[f"{what}/code_over_numpy"] = {
            "median": c["median_us"] / n["median_us"],
            "p99": c["p99_us"] / n["p99_us"],
        }
    return out


RATIOS = (("public_over_jitted", "public / jitted"),
          ("code_over_numpy", "code / numpy_f64"))  # fmt: skip
DISPATCH = ("async", "sync")  # JAX's CPU dispatch modes (see the module docstring)


@dataclasses.dataclass(frozen=True)
class LatencyConfig:
    """``calls`` interleaved calls per variant, the inputs drawn from ``seed``,
    under the ``dispatch`` modes ("async", "sync" or "both")."""

    calls: int = 2000
    seed: int = 0
    dispatch: str = "both"

    def __post_init__(self):
        runkit.check_fields("LatencyConfig", self, at_least={"calls": 1})
        if self.dispatch not in DISPATCH + ("both",):
            raise ValueError(
                "LatencyConfig: dispatch must be 'async', 'sync' or 'both', got "
                f"{self.dispatch!r}"
            )

    @property
    def modes(self) -> tuple[str, ...]:
        return DISPATCH if self.dispatch == "both" else (self.dispatch,)


def measure_cases(calls: int, seed: int, dispatch: str) -> dict:
    """:func:`measure` of every case of :data:`CASES` under ``dispatch``; run in
    a fresh process (the mode is fixed when JAX starts its CPU client)."""
    jax.config.update("jax_cpu_enable_async_dispatch", dispatch == "async")
    return {case_name(c): measure(calls, seed=seed, case=c) for c in CASES.values()}


def _in_fresh_process(fn, *args):
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(fn, *args).result()


def main(argv=None) -> dict:
    """Command-line entry point; returns the measurements."""
    return runkit.main(
        LatencyConfig, _run, argv, prog="python -m benchmarks.latency",
        description=__doc__.split("\n\n")[0],
        flags={"calls": "--calls",
               "dispatch": ("--dispatch", {"choices": DISPATCH + ("both",)})},
        out="results/benchmarks_latency",
    )  # fmt: skip


def _run(cfg: LatencyConfig, cmd: runkit.Invocation) -> dict:
    results = {
        mode: _in_fresh_process(measure_cases, cfg.calls, cfg.seed, mode)
        for mode in cfg.modes
    }
    env = environment()
    runkit.write_summary(
        os.path.join(cmd.out, "results.json"), {"dispatch": results, **env}
    )
    lines = [
        "# Per-request latency",
        "",
        f"backend `{env['backend']}`, device `{env['device_kind']}`, jax "
        f"{env['jax_version']}, git `{env['git_revision']}`; {cfg.calls} interleaved "
        "calls per variant; each dispatch mode in a fresh process, same inputs.",
    ]
    for case in results[cfg.modes[0]]:
        lines += ["", f"## {case}", "", *_case_table(results, case, cfg.modes)]
        for mode in cfg.modes:
            res = results[mode][case]
            for what in ("decode", "encode+decode"):
                for ratio, label in RATIOS:
                    r = res[f"{what}/{ratio}"]
                    lines.append(
                        f"\n{mode}, {what}: {label} = {r['median']:.2f} (median), "
                        f"{r['p99']:.2f} (p99)"
                    )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(cmd.out, "report.md"), "w") as f:
        f.write(text)
    report_page(cmd, title="Speed on CPU: per request")
    print(text)
    return results


def _case_table(results: dict, case: str, modes: tuple[str, ...]) -> list[str]:
    """One row per variant: median and p99 (us) under each dispatch mode."""
    first = results[modes[0]][case]
    names = [n for n, r in first.items() if "median_us" in r]
    head = ["variant"] + [f"{m} {q} (us)" for m in modes for q in ("median", "p99")]
    rows = [
        [n] + [f"{results[m][case][n][q]:.0f}" for m in modes
               for q in ("median_us", "p99_us")] + [f"{first[n]['max_err']:.1e}"]
        for n in names
    ]  # fmt: skip
    return runkit.md_table(head + ["max rel. err"], rows)


if __name__ == "__main__":
    main()
