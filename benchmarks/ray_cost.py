"""What one request costs on the Ray backend, split into its parts.

    python -m benchmarks.ray_cost [--quick] [--requests R] [--workers 8,16,40]
        [--actors 1,2,4,8] [--out DIR] [--results-page PAGE]

One request is served at a time (``Server.infer``), ChebyLS with N = M (every
worker's answer is used) and no injected delay: its latency is the engine's and
the backend's whole cost. Each M of ``workers`` (K = min(8, (M - 1) // 3 + 1)
queries, bf16 workers computing x^3 - x, the serving benchmark's workload) runs
on each number of ``actors`` (at most M; worker i on actor i % A, M slots each)
of one embedded Ray instance. A request's time is split where the driver spends
it:

* ``submit``: the one call per actor that sends the request's rows
  (``RayCluster.submit``: serialising the rows, the submission);
* ``wait``: blocked in ``ray.wait`` until an answer is ready: the scheduling of
  the calls, the actors' evaluations and the answers' return to the driver;
* ``fetch``: taking the ready answers (``ray.get`` of inlined objects and the
  streaming generators' bookkeeping);
* ``engine``: the rest of the latency (encode, the policy, the decode, the
  result), the engine's own work, as on the thread cluster.

Two ways to return the answers are measured on the same actors, request by
request in turn (so the machine's load falls on both alike): ``each``, one Ray
object per answer (the backend before December 2026), and ``batched``, one
object per moment an actor has answers ready (``RayCluster(batch_answers=...)``,
the default now). Two floors are timed in the same run: Ray's bare fan-out (one
no-op call per actor, gathered with ``ray.get``: what a fixed fan-out to
long-lived actors costs at least, with no answer returned per worker) and the
thread cluster serving the same requests.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time

import codedjax as cj
import runkit
from codedjax.serving import FixedN, RayCluster, Server, ThreadCluster
from runkit import environment, md_table, percentile
from runkit.pages import report_page

from .serving.workload import inputs, worker_fn

MODES = ("each", "batched")  # RayCluster(batch_answers=False / True)
PARTS = ("submit", "wait", "fetch", "engine")


@dataclasses.dataclass(frozen=True)
class RayCostConfig:
    """``requests`` per mode at each (M, actors) of ``workers`` x ``actors``
    (actors above M skipped), the inputs drawn from ``seed``."""

    workers: tuple[int, ...] = (8, 16, 40)
    actors: tuple[int, ...] = (1, 2, 4, 8)
    requests: int = 200
    num_features: int = 64
    seed: int = 0

    def __post_init__(self):
        runkit.check_fields("RayCostConfig", self,
                            at_least={"requests": 5, "num_features": 1})  # fmt: skip
        for field, low in (("workers", 4), ("actors", 1)):
            v = getattr(self, field)
            if not v or min(v) < low:
                raise ValueError(
                    f"RayCostConfig: {field} must be one or more integers >= {low}, "
                    f"got {v!r}"
                )
        if min(self.actors) > max(self.workers):
            raise ValueError(
                f"RayCostConfig: actors {self.actors!r} all exceed every M of "
                f"workers {self.workers!r}: nothing to measure"
            )

    @classmethod
    def quick(cls, **overrides) -> RayCostConfig:
        return cls(**{"workers": (8, 40), "actors": (1, 2), "requests": 40,
                      **overrides})  # fmt: skip


def num_inputs(m: int) -> int:
    """K of a cluster of M: the largest K <= 8 whose degree-3 threshold is at
    most M."""
    return max(k for k in range(1, 9) if cj.recovery_threshold(k, 3) <= m)


def _workload(m: int, cfg: RayCostConfig):
    """(code, requests) of a cluster of M: ChebyLS of degree 3, the inputs."""
    k = num_inputs(m)
    code = cj.lagrange_code(num_inputs=k, num_workers=m, degree=3)
    return code, inputs(cfg.seed, cfg.requests, k, cfg.num_features)


def _timed(owner, counter: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its seconds added to ``owner.<counter>``."""
    t0 = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        setattr(owner, counter, getattr(owner, counter) + time.perf_counter() - t0)


class _TimedRay:
    """The ``ray`` module with ``wait`` timed (seconds summed)."""

    def __init__(self, ray):
        self._ray = ray
        self.wait_s = 0.0

    def wait(self, *args, **kwargs):
        return _timed(self, "wait_s", self._ray.wait, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ray, name)


class TimedRayCluster(RayCluster):
    """A :class:`RayCluster` whose submissions, waits and collections are
    timed; :meth:`take` returns the seconds spent since the last call."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ray = _TimedRay(self.ray)
        self.submit_s = 0.0
        self.backend_s = 0.0

    def submit(self, *args, **kwargs):
        return _timed(self, "submit_s", super().submit, *args, **kwargs)

    def next_completions(self, timeout):
        return _timed(self, "backend_s", super().next_completions, timeout)

    def next_completed(self, timeout):
        return _timed(self, "backend_s", super().next_completed, timeout)

    def take(self) -> dict[str, float]:
        """{submit, wait, fetch} seconds since the last call (fetch: the time
        in the backend's answer calls outside ``ray.wait``)."""
        r = self.ray
        out = {
            "submit": self.submit_s,
            "wait": r.wait_s,
            "fetch": self.backend_s - r.wait_s,
        }
        self.submit_s = self.backend_s = r.wait_s = 0.0
        return out


def _stats(ms: list[float]) -> dict[str, float]:
    return {"p50": percentile(ms, 50), "p99": percentile(ms, 99)}


def measure_cell(m: int, actors: int, cfg: RayCostConfig, ray) -> dict:
    """Both modes and Ray's bare fan-out at one (M, actors), interleaved."""
    code, xs = _workload(m, cfg)
    backend = TimedRayCluster(num_actors=actors, slots_per_actor=m)
    rows: dict[str, dict[str, list[float]]] = {
        mode: {p: [] for p in ("latency", *PARTS)} for mode in MODES
    }
    floor: list[float] = []
    with Server(code, worker_fn, backend=backend,
                policy=FixedN(m, deadline=60.0)) as server:  # fmt: skip
        for mode in MODES:  # compile, start the actors' programs: untimed
            backend.batch_answers = mode == "batched"
            server.infer(xs[0])
        backend.take()
        for i in range(cfg.requests):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                backend.batch_answers = mode == "batched"
                r = server.infer(xs[i])
                if not r.ok:
                    raise RuntimeError(f"ray_cost: M={m} A={actors} {mode}: not ok")
                parts = backend.take()
                lat = r.latency
                parts["engine"] = lat - sum(parts.values())
                rows[mode]["latency"].append(1e3 * lat)
                for p in PARTS:
                    rows[mode][p].append(1e3 * parts[p])
            t0 = time.perf_counter()
            ray.get([a.ping.remote() for a in backend.actors])
            floor.append(1e3 * (time.perf_counter() - t0))
    return {
        "M": m, "K": code.num_inputs, "actors": actors, "requests": cfg.requests,
        "modes": {mode: {p: _stats(v) for p, v in rows[mode].items()}
                  for mode in MODES},
        "ray_fanout": _stats(floor),
        "loadavg": os.getloadavg()[0],
    }  # fmt: skip


def measure_threads(m: int, cfg: RayCostConfig) -> dict:
    """The same requests on the thread cluster (jitted workers)."""
    code, xs = _workload(m, cfg)
    with Server(code, worker_fn, backend=ThreadCluster(),
                policy=FixedN(m, deadline=60.0)) as server:  # fmt: skip
        server.infer(xs[0])
        lat = [1e3 * server.infer(x).latency for x in xs]
    return {"M": m, "K": code.num_inputs, "latency": _stats(lat)}


def run_ray_cost(cfg: RayCostConfig, *, show_progress: bool = True) -> dict:
    """Every cell of the sweep on one embedded Ray instance (started here with
    as many CPUs as the largest actor count, stopped at the end)."""
    import ray

    cells = [(m, a) for m in cfg.workers for a in cfg.actors if a <= m]
    started = not ray.is_initialized()
    if started:
        tmp = tempfile.mkdtemp(prefix="codedjax-ray-cost-")
        ray.init(num_cpus=max(a for _, a in cells), include_dashboard=False,
                 _temp_dir=tmp, log_to_driver=False)  # fmt: skip
    out = []
    try:
        bar = runkit.progress(cells, desc="ray cost", disable=not show_progress)
        for m, a in bar:
            out.append(measure_cell(m, a, cfg, ray))
    finally:
        if started:
            ray.shutdown()
    threads = [measure_threads(m, cfg) for m in cfg.workers]
    return {"config": dataclasses.asdict(cfg), "cells": out, "threads": threads,
            "environment": environment()}  # fmt: skip


def format_report(summary: dict) -> str:
    env = summary["environment"]
    cfg = summary["config"]
    lines = [
        "# Ray backend: the cost of one request, part by part",
        "",
        f"backend `{env['backend']}`, jax {env['jax_version']}, git "
        f"`{env['git_revision']}`; {cfg['requests']} requests per mode and cell, "
        "one at a time, the modes in turn; ChebyLS N = M, no injected delay; "
        "milliseconds.",
        "",
    ]
    head = ["M", "actors", "answers", "p50", "p99",
            *[f"{p} p50" for p in PARTS], "Ray fan-out p50"]  # fmt: skip
    rows = []
    for c in summary["cells"]:
        for mode in MODES:
            s = c["modes"][mode]
            rows.append([
                str(c["M"]), str(c["actors"]), mode,
                f"{s['latency']['p50']:.2f}", f"{s['latency']['p99']:.2f}",
                *[f"{s[p]['p50']:.2f}" for p in PARTS],
                f"{c['ray_fanout']['p50']:.2f}",
            ])  # fmt: skip
    lines += md_table(head, rows)
    lines += ["", "Thread cluster, same requests (jitted workers):", ""]
    lines += md_table(
        ["M", "K", "p50", "p99"],
        [[str(t["M"]), str(t["K"]), f"{t['latency']['p50']:.2f}",
          f"{t['latency']['p99']:.2f}"] for t in summary["threads"]],
    )  # fmt: skip
    lines += ["", "Batched over each (p50 latency, same cells):", ""]
    p50 = {(c["M"], c["actors"], mode): c["modes"][mode]["latency"]["p50"]
           for c in summary["cells"] for mode in MODES}  # fmt: skip
    lines += md_table(
        ["M", "actors", "each / batched"],
        [[str(m), str(a), f"{p50[m, a, 'each'] / p50[m, a, 'batched']:.2f}"]
         for m, a, mode in p50 if mode == "batched"],
    )  # fmt: skip
    return "\n".join(lines) + "\n"


def _run(cfg: RayCostConfig, cmd: runkit.Invocation) -> dict:
    t0 = time.perf_counter()
    summary = run_ray_cost(cfg, show_progress=cmd.progress)
    summary["seconds"] = time.perf_counter() - t0
    runkit.write_summary(os.path.join(cmd.out, "summary.json"), summary)
    text = format_report(summary)
    with open(os.path.join(cmd.out, "report.md"), "w") as f:
        f.write(text)
    report_page(cmd, title="Ray backend: the cost of one request")
    print(text)
    print(f"wrote {cmd.out}/summary.json and report.md "
          f"({summary['seconds']:.0f} s)", file=sys.stderr)  # fmt: skip
    return summary


def main(argv=None) -> dict:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        RayCostConfig, _run, argv, prog="python -m benchmarks.ray_cost",
        description=__doc__.split("\n\n")[0],
        flags={"requests": "--requests", "workers": "--workers",
               "actors": "--actors"},
        out="results/ray_cost", quick="M = 8 and 40, 1 and 2 actors, 40 requests",
    )  # fmt: skip


if __name__ == "__main__":
    main()
