"""The one benchmark harness: compile separately, check, then time against baselines.

Every case builds its inputs once; the harness jits the codedjax function, times the
compilation on its own, checks the result against a float64 reference BEFORE timing
(a wrong fast answer is a failure, not a result), warms up, and takes the median of
repeats with ``block_until_ready``. Each baseline (numpy, float64) runs on the same
inputs in the same process, is checked the same way, and is timed the same way; speed
is reported only as the ratio baseline / codedjax. A float32 matmul rate measured in
the same run turns each case's operation count into an arithmetic floor.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import runkit
from runkit import environment as environment  # every record carries it


@dataclasses.dataclass
class Built:
    """A case's inputs and checks, built once.

    Attributes:
        fn: the codedjax computation, a function of ``args`` (jitted by the harness).
            It returns the value the check reads, or a tuple whose first element is
            that value (a whole ``DecodeResult``: every field a caller gets is
            computed and timed, none is dropped by the compiler as unused).
        args: its inputs (device arrays).
        check: maps an output (numpy) to error statistics; must contain ``"ok"``
            (the output meets the case's accuracy requirement) and ``"max_err"``.
        baselines: name -> zero-argument function returning the baseline's output
            (numpy), checked with ``check`` too.
        flops: operations one call performs (for the arithmetic floor), or None.
        extra: anything else to record (e.g. throughput units).
        inspect: maps the whole output of the checked call (host numpy) to more
            fields of the record (statistics of fields other than the value), or
            None; it reads the output the harness computed, so the case compiles
            its computation once.
    """

    fn: Callable
    args: tuple
    check: Callable[[np.ndarray], dict]
    baselines: dict[str, Callable[[], Any]]
    flops: float | None = None
    extra: dict = dataclasses.field(default_factory=dict)
    inspect: Callable[[Any], dict] | None = None


@dataclasses.dataclass(frozen=True)
class Case:
    """A benchmark case: a name holding every parameter, and a builder."""

    name: str
    group: str
    build: Callable[[], Built]


def time_call(fn: Callable[[], Any], *, repeats: int, min_seconds: float) -> float:
    """Median wall time of ``fn()`` (which must block until its result is ready).

    One warm-up call, then at least ``repeats`` timed calls and more until
    ``min_seconds`` have been spent (at most 10 * repeats).
    """
    timed = time_interleaved({"fn": fn}, repeats=repeats, min_seconds=min_seconds)
    return timed["fn"]["median"]


def time_interleaved(
    fns: dict[str, Callable[[], Any]], *, repeats: int, min_seconds: float
) -> dict[str, dict]:
    """Median (and spread) of each ``fn()`` timed in round-robin order.

    One warm-up call each, then rounds in which every function runs once, at least
    ``repeats`` rounds and more until ``min_seconds`` have been spent (at most
    10 * repeats): on a shared machine every function sees the same load, so the
    ratio of two medians is what the load does not move.
    """
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    rounds = 0
    while rounds < repeats or (
        time.perf_counter() - start < min_seconds and rounds < 10 * repeats
    ):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {
        name: {
            "median": statistics.median(t),
            "min": min(t),
            "max": max(t),
            "rounds": len(t),
            "times": t,
        }
        for name, t in times.items()
    }


def _block(x):
    return jax.block_until_ready(x)


def matmul_probe(n: int = 1024) -> tuple[Callable[[], Any], float]:
    """A jitted float32 n x n matmul (blocking, compiled) and its operation count."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: jnp.matmul(x, x, precision=jax.lax.Precision.HIGHEST))
    _block(f(a))
    return (lambda: _block(f(a))), 2.0 * n**3


def matmul_rate(n: int = 1024, *, repeats: int = 5) -> float:
    """float32 matmul operations per second on the default device (same run).

    A one-off figure for the report header; each case's arithmetic floor uses the
    rate measured round-robin with the case's own repetitions (:func:`run_case`).
    """
    probe, flops = matmul_probe(n)
    t = time_call(probe, repeats=repeats, min_seconds=0.2)
    return flops / t


def floor_fraction(
    flops: float, case_times: list[float], probe_times: list[float], probe_flops: float
) -> dict:
    """Fraction of the arithmetic floor reached, per round of interleaved timing.

    Round i ran the case (``case_times[i]``) and the matmul probe
    (``probe_times[i]``) back to back under the same load, so its floor is
    ``flops / rate_i`` with ``rate_i = probe_flops / probe_times[i]`` and its
    fraction ``floor_i / case_times[i]``. Returns the median and spread of the
    per-round fractions and of the rate (a load change moves both sides of a
    round together; the spread says how far the figure can be trusted).
    """
    rates = np.asarray([probe_flops / t for t in probe_times])
    frac = np.asarray([flops / r / t for r, t in zip(rates, case_times, strict=True)])
    rate = float(np.median(rates))
    return {
        "matmul_rate_flops": rate,
        "matmul_rate_p25": float(np.quantile(rates, 0.25)),
        "matmul_rate_p75": float(np.quantile(rates, 0.75)),
        "floor_s": flops / rate,
        "fraction_of_floor": float(np.median(frac)),
        "fraction_of_floor_p25": float(np.quantile(frac, 0.25)),
        "fraction_of_floor_p75": float(np.quantile(frac, 0.75)),
        "fraction_of_floor_min": float(frac.min()),
        "fraction_of_floor_max": float(frac.max()),
    }


_PROBE = "matmul_probe"


def run_case(
    case: Case, *, repeats: int, min_seconds: float, rate: float, env: dict
) -> dict:
    """Compile, check, time one case and its baselines; return its record.

    ``rate`` (the header's one-off matmul rate) is not used for the floor: the
    floor comes from a matmul probe timed round-robin with the case
    (:func:`floor_fraction`), so a load change between the rate measurement and
    the case cannot move it.
    """
    built = case.build()
    jitted = jax.jit(built.fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*built.args).compile()
    compile_s = time.perf_counter() - t0
    out = jax.device_get(_block(compiled(*built.args)))
    check = built.check(np.asarray(out[0] if isinstance(out, tuple) else out))
    record: dict[str, Any] = {
        "case": case.name,
        "group": case.group,
        "compile_s": compile_s,
        **{f"codedjax_{k}": v for k, v in check.items()},
        **(built.inspect(out) if built.inspect is not None else {}),
    }
    if not check["ok"]:
        record["median_s"] = None
        record["error"] = "codedjax output failed its accuracy check; not timed"
        return {**record, **env}
    checked = {}
    for name, base in built.baselines.items():
        b_check = built.check(np.asarray(base()))
        record[f"{name}_max_err"] = b_check["max_err"]
        checked[name] = base
    # codedjax, every baseline and (for the floor) a matmul probe timed round-robin:
    # the same load for all, so ratios and the floor fraction compare like with like
    fns = {"codedjax": lambda: _block(compiled(*built.args)), **checked}
    probe_flops = None
    if built.flops is not None:
        fns[_PROBE], probe_flops = matmul_probe()
    timed = time_interleaved(fns, repeats=repeats, min_seconds=min_seconds)
    median = timed["codedjax"]["median"]
    record["median_s"] = median
    record["min_s"] = timed["codedjax"]["min"]
    record["rounds"] = timed["codedjax"]["rounds"]
    if built.flops is not None:
        record["flops"] = built.flops
        record.update(
            floor_fraction(
                built.flops,
                timed["codedjax"]["times"],
                timed[_PROBE]["times"],
                probe_flops,
            )
        )
    for name in checked:
        t = timed[name]["median"]
        record[f"{name}_s"] = t
        record[f"ratio_vs_{name}"] = t / median
        # the spread of the same ratio round by round (each round under one load)
        per_round = np.asarray(timed[name]["times"]) / np.asarray(
            timed["codedjax"]["times"]
        )
        record[f"{name}_ratio_iqr"] = [
            float(np.quantile(per_round, 0.25)),
            float(np.quantile(per_round, 0.75)),
        ]
    record.update(built.extra)
    return {**record, **env}


def write_jsonl(records: list[dict], path: str) -> None:
    """One strict-JSON record per line (NaN and inf as null, as
    :func:`runkit.write_summary` writes them)."""
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(runkit.json_clean(r), allow_nan=False) + "\n")


def _fmt(v, spec=".3g"):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def _iqr(q) -> str:
    return "" if q is None else f" ({q[0]:.2f}-{q[1]:.2f})"


def report_markdown(records: list[dict], env: dict, rate: float) -> str:
    """The report table: time, ratio to each baseline, errors, arithmetic floor."""
    lines = [
        "# Benchmarks",
        "",
        f"backend `{env['backend']}`, device `{env['device_kind']}` "
        f"({env.get('device_name', env['device_kind'])}, x{env['num_devices']}), "
        f"jax {env['jax_version']}, numpy "
        f"{env['numpy_version']}, git `{env['git_revision']}`; float32 matmul rate "
        f"measured at the start of this run: {rate / 1e9:.1f} GFLOP/s.",
        "",
        "Speed is the ratio baseline time / codedjax time on the same inputs in the "
        "same run (> 1: codedjax faster). Errors are against the float64 reference. "
        "The floor is the case's operation count at the float32 matmul rate of a "
        "probe timed round-robin with the case's repetitions (same load); "
        "% of floor is the median over rounds, with its interquartile range; "
        "each ratio is the ratio of median times, with the interquartile range of "
        "the per-round ratios.",
        "",
        "| case | codedjax (ms) | compile (s) | accurate | max err | ratios | "
        "baseline max err | floor (ms) | % of floor (IQR) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ratios = ", ".join(
            f"{k.removeprefix('ratio_vs_')} {_fmt(v, '.2f')}x"
            + _iqr(r.get(f"{k.removeprefix('ratio_vs_')}_ratio_iqr"))
            for k, v in r.items()
            if k.startswith("ratio_vs_")
        )
        berr = ", ".join(
            f"{k.removesuffix('_max_err')} {_fmt(v, '.1e')}"
            for k, v in r.items()
            if k.endswith("_max_err") and not k.startswith("codedjax")
        )
        ms = None if r.get("median_s") is None else 1e3 * r["median_s"]
        floor = None if r.get("floor_s") is None else 1e3 * r["floor_s"]
        frac = r.get("fraction_of_floor")
        pct = None if frac is None else 100 * frac
        if pct is not None and "fraction_of_floor_p25" in r:
            lo, hi = r["fraction_of_floor_p25"], r["fraction_of_floor_p75"]
            pct = f"{pct:.1f} ({100 * lo:.1f}-{100 * hi:.1f})"
        lines.append(
            f"| `{r['case']}` | {_fmt(ms)} | {_fmt(r['compile_s'], '.2f')} | "
            f"{_fmt(r.get('codedjax_ok'))} | "
            f"{_fmt(r.get('codedjax_max_err'), '.1e')} | "
            f"{ratios or '-'} | {berr or '-'} | {_fmt(floor)} | {_fmt(pct, '.1f')} |"
        )
    extras = [r for r in records if r.get("note")]
    if extras:
        lines += ["", "Notes:", ""] + [f"- `{r['case']}`: {r['note']}" for r in extras]
    return "\n".join(lines) + "\n"


#: the device kinds a run can be placed on
KINDS = ("cpu", "gpu", "tpu")
#: what to install into .venv for each device kind (docs/running.md, GPU and TPU)
WHEELS = {
    "cpu": '.venv/bin/pip install -U "jax"',
    "gpu": '.venv/bin/pip install -U "jax[cuda12]"',
    "tpu": '.venv/bin/pip install -U "jax[tpu]"',
}


def require_device(kind: str) -> list:
    """The devices of platform ``kind``.

    Raises:
      ValueError: naming ``--device``, what jax sees and the wheel to install,
        when jax has no ``kind`` device.
    """
    if devices := _devices_or_none(kind):
        return devices
    seen = ", ".join(
        f"{len(ds)} x {p} ({ds[0].device_kind})"
        for p, ds in ((p, _devices_or_none(p)) for p in KINDS)
        if ds
    )
    raise ValueError(
        f"--device: jax {jax.__version__} sees no {kind} device (it sees {seen}); "
        f"install the {kind} jax wheel into .venv: {WHEELS[kind]}"
    )


def _devices_or_none(kind: str) -> list:
    try:
        return jax.devices(kind)
    except RuntimeError:
        return []
