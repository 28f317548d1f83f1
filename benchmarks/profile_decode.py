"""Where the time of the headline batched decode goes, stage by stage.

    python -m benchmarks.profile_decode [--calls 20] [--out DIR]

Runs ``cj.chebyls_decode_batched`` on the headline case (M = 40, N = 30, D = 22,
K = 8, F = 64, 4096 masks, float32, the whole result) under ``jax.profiler``, reads
the trace back, and charges each compiled operation's own time (its span less the
spans of the operations nested in it, such as the body of a loop) to the named
scope it was traced under in the kernel: ``gram``, ``sweep``, ``layout`` (unpacking
and transposing the inverses), ``decoding_matrix``, ``refinement``, ``cond_gram``,
``cond_inverse``, ``qr_tier``, ``residual``, ``payload``, ``error``; what lies
outside every scope is ``other``. Each stage is reported with its share of the
profiled time, its operation count (``benchmarks.cases.chebyls_flops_per_mask``)
and the rate it reaches as a fraction of a float32 matmul probe timed just before:
the stages far below the probe's rate are where the arithmetic floor is lost.

The profiler adds a fixed cost per operation, so profiled times are longer than
``benchmarks.decode``'s; the shares are what this reports. The wall time per call
without the profiler is measured in the same run and printed next to them.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import gzip
import json
import os
import re
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

from .cases import chebyls_flops_per_mask
from .harness import environment, matmul_probe

STAGES = (
    "gram",
    "sweep",
    "layout",
    "decoding_matrix",
    "refinement",
    "cond_gram",
    "cond_inverse",
    "qr_tier",
    "residual",
    "payload",
    "error",
)
HEADLINE = dict(M=40, N=30, D=22, K=8, F=64, B=4096)


def _op_scopes(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> the first known stage in its op_name, or "other"."""
    out = {}
    for m in re.finditer(r"%([\w.\-]+) = [^\n]*?op_name=\"([^\"]*)\"", hlo_text):
        path = m.group(2).split("/")
        out[m.group(1)] = next((p for p in path if p in STAGES), "other")
    return out


def _self_times(events: list[dict]) -> dict[str, float]:
    """Per event name, the total of its spans less those of events nested in it.

    Events of one thread nest in time (a loop holds the operations of its body);
    each is charged only the time no nested event covers, so nothing is counted
    twice.
    """
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    total: dict[str, float] = collections.defaultdict(float)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [end, name, self time]
        for e in evs:
            start, end = e["ts"], e["ts"] + e["dur"]
            while stack and stack[-1][0] <= start:
                _, name, own = stack.pop()
                total[name] += own
            if stack:
                stack[-1][2] -= min(end, stack[-1][0]) - start
            stack.append([end, e["name"], float(e["dur"])])
        for _, name, own in stack:
            total[name] += own
    return total


def profile(calls: int = 20) -> dict:
    """Stage times (profiled), shares, operation counts and rates of the decode."""
    p = HEADLINE
    m, n, d, k, f, b = p["M"], p["N"], p["D"], p["K"], p["F"], p["B"]
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    y = jax.random.normal(jax.random.key(1), (m, f), jnp.float32)
    masks = cj.sample_masks(
        jax.random.key(0), num_workers=m, num_responses=n, shape=(b,)
    )

    def decode(yy, ms):
        return cj.chebyls_decode_batched(yy, ms, alpha, beta, num_coeffs=d)

    fn = jax.jit(decode)
    compiled = fn.lower(y, masks).compile()
    scopes = _op_scopes(compiled.as_text())
    for _ in range(3):
        jax.block_until_ready(compiled(y, masks))
    probe, probe_flops = matmul_probe()
    # wall time without the profiler, round-robin with the matmul probe
    wall, rates = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(y, masks))
        wall.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        probe()
        rates.append(probe_flops / (time.perf_counter() - t0))
    rate = float(np.median(rates))

    with tempfile.TemporaryDirectory() as tmp:
        jax.profiler.start_trace(tmp)
        for _ in range(calls):
            jax.block_until_ready(compiled(y, masks))
        jax.profiler.stop_trace()
        files = glob.glob(os.path.join(tmp, "**", "*.trace.json.gz"), recursive=True)
        if not files:
            raise RuntimeError("benchmarks.profile_decode: the profiler wrote no trace")
        with gzip.open(files[0]) as fh:
            trace = json.load(fh)
    events = [
        e
        for e in trace.get("traceEvents", [])
        if e.get("ph") == "X" and e.get("name") in scopes
    ]
    if not events:
        raise RuntimeError(
            "benchmarks.profile_decode: no event of the trace names an instruction "
            f"of the compiled decode (backend {jax.default_backend()}); the profiler "
            "names operations differently here"
        )
    own = _self_times(events)
    stage_us: dict[str, float] = collections.defaultdict(float)
    for name, us in own.items():
        stage_us[scopes[name]] += us / calls
    counted = sum(stage_us.values())
    flops = {s: b * v for s, v in chebyls_flops_per_mask(m, d, k, f).items()}
    rows = []
    for s in (*STAGES, "other"):
        t = stage_us.get(s, 0.0) * 1e-6
        fl = flops.get(s, 0.0)
        rows.append(
            {
                "stage": s,
                "profiled_ms": 1e3 * t,
                "share": t / (counted * 1e-6) if counted else 0.0,
                "flops": fl,
                "fraction_of_probe_rate": (fl / t / rate) if t > 0 and fl else None,
            }
        )
    total_flops = float(sum(flops.values()))
    wall_s = float(np.median(wall))
    return {
        "case": "chebyls_decode_batched["
        + ",".join(f"{a}={v}" for a, v in p.items())
        + ",dtype=float32]",
        "calls": calls,
        "wall_ms": 1e3 * wall_s,
        "profiled_ms": 1e-3 * counted,
        "matmul_rate_flops": rate,
        "flops": total_flops,
        "fraction_of_floor": total_flops / rate / wall_s,
        "stages": rows,
        **environment(),
    }


def report(r: dict) -> str:
    lines = [
        f"# Where the time goes: `{r['case']}`",
        "",
        f"backend `{r['backend']}`, device `{r['device_name']}`, jax "
        f"{r['jax_version']}, git `{r['git_revision']}`. Wall time per call "
        f"{r['wall_ms']:.2f} ms without the profiler, {r['profiled_ms']:.2f} ms of "
        f"operations under it; float32 matmul probe {r['matmul_rate_flops'] / 1e9:.0f}"
        f" GFLOP/s; the whole call reaches {100 * r['fraction_of_floor']:.1f}% of "
        "its arithmetic floor.",
        "",
    ]
    lines += runkit.md_table(
        ["stage", "profiled ms", "share", "MFLOP", "% of the probe's rate"],
        (
            [s["stage"], f"{s['profiled_ms']:.2f}", f"{100 * s['share']:.1f}%",
             f"{s['flops'] / 1e6:.1f}", "-" if (f := s["fraction_of_probe_rate"])
             is None else f"{100 * f:.1f}"]
            for s in r["stages"]
        ),
    )  # fmt: skip
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """``calls``: profiled calls of the headline decode."""

    calls: int = 20

    def __post_init__(self):
        runkit.check_fields("ProfileConfig", self, at_least={"calls": 1})


def _run(cfg: ProfileConfig, cmd: runkit.Invocation) -> dict:
    r = profile(cfg.calls)
    runkit.write_summary(os.path.join(cmd.out, "profile.json"), r, indent=1)
    text = report(r)
    with open(os.path.join(cmd.out, "report.md"), "w") as fh:
        fh.write(text)
    cmd.write_page(title="Where a one-request decode spends its time", body=text)
    print(text)
    return r


def main(argv=None) -> dict:
    """Command-line entry point; returns the profile."""
    return runkit.main(
        ProfileConfig, _run, argv, prog="python -m benchmarks.profile_decode",
        description=__doc__.split("\n\n")[0], flags={"calls": "--calls"},
        out="results/profile_decode", seed=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()
