"""Per-request latency: what a serving runtime pays to encode and decode one request.

    python -m benchmarks.latency [--calls 2000] [--out DIR]

One request: K = 8 queries of F = 64 features are Lagrange-encoded for M = 40 workers
and the responses of one straggler mask (N = 30 of 40, D = 22) are decoded by
ChebyLS. Timed per call (``block_until_ready``), interleaved so that every variant
sees the same machine load, and reported as median and 99th percentile:

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
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
import runkit
from runkit import environment

K, M, N, D, F = 8, 40, 30, 22, 64


def _percentiles(times: list[float]) -> dict:
    t = np.asarray(times)
    return {
        "median_us": float(1e6 * np.median(t)),
        "p99_us": float(1e6 * np.quantile(t, 0.99)),
        "calls": int(t.size),
    }


def measure(calls: int = 2000, seed: int = 0) -> dict:
    """Median and p99 of each variant, for encode+decode and for decode alone."""
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

    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=3)
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
    for _ in range(calls):
        for name, fn in variants.items():
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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runkit.add_run_arguments(parser, out="results/benchmarks_latency", quick=False)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    runkit.at_least(parser, args, {"--calls": 1})
    res = measure(args.calls, seed=args.seed)
    env = environment()
    case = f"latency[K={K},M={M},N={N},D={D},F={F}]"
    runkit.write_summary(
        os.path.join(args.out, "results.json"), {"case": case, **res, **env}
    )
    lines = [
        f"# Per-request latency, K={K} M={M} N={N} D={D} F={F}",
        "",
        f"backend `{env['backend']}`, device `{env['device_kind']}`, jax "
        f"{env['jax_version']}, git `{env['git_revision']}`; {args.calls} interleaved "
        "calls per variant.",
        "",
        "| variant | median (us) | p99 (us) | max rel. err |",
        "|---|---|---|---|",
    ]
    for name, r in res.items():
        if "median_us" in r:
            lines.append(
                f"| {name} | {r['median_us']:.0f} | {r['p99_us']:.0f} | "
                f"{r['max_err']:.1e} |"
            )
    for what in ("decode", "encode+decode"):
        for ratio, label in (("public_over_jitted", "public / jitted"),
                             ("code_over_numpy", "code / numpy_f64")):  # fmt: skip
            r = res[f"{what}/{ratio}"]
            lines.append(
                f"\n{what}: {label} = {r['median']:.2f} (median), {r['p99']:.2f} (p99)"
            )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return res


if __name__ == "__main__":
    main()
