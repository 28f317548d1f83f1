"""The load benchmark's simulator runs: a layout on
:func:`codedjax.serving.simulate_load`, each point remembered.

A layout (:func:`codedjax.layouts`) is simulated with
``simulate_load(code, policy, injector, arrivals, group_deadline=...,
shards=G, cluster=M, work=scheme.service_scale)``: dispatch on arrival and per-query
answers (the defaults), except a code whose own worker answers two queries
(the packed systematic circle code's), which is dispatched at the group's
close (its worker needs both). A rate is sustained when it and every rate of
the grid below it keep p99 under the target with every query answered.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

import codedjax as cj
from codedjax.serving import FillDeadline, Injector, poisson_arrivals, simulate_load
from runkit import percentile

from .config import LoadConfig

__all__ = ["Cell", "deadline_name", "dispatch_of", "injector", "latency_stats",
           "mean_service", "on_arrival", "sim_key"]  # fmt: skip

PCTS = (50, 99, 99.9)


def injector(cfg: LoadConfig, delay: str, *, faults: bool = False) -> Injector:
    if faults:
        kinds = ("raise", "hang", "nan")
        return Injector(latency=cfg.latency(delay), fault_kinds=kinds,
                        fault_prob=0.02, max_faulty=1, seed=cfg.seed + 1)  # fmt: skip
    return Injector(latency=cfg.latency(delay), seed=cfg.seed)


def mean_service(inj: Injector, m: int) -> float:
    """A worker's mean service time under the injector (4096 draws)."""
    delays, _ = inj.plan(np.arange(4096 // m + 1), m)
    return float(delays.mean())


def on_arrival(layout: cj.Layout) -> bool:
    """A systematic layout whose own workers get each query when it arrives
    (no fill wait for the queries they answer)."""
    return layout.code.own_workers is not None and dispatch_of(layout) == "arrival"


def dispatch_of(layout: cj.Layout) -> str:
    """``"arrival"``, or ``"group"`` for a code whose own worker answers more
    than one query (it needs them all)."""
    own = layout.code.own_workers
    return (
        "group"
        if own is not None and np.asarray(own).sum(axis=0).max() > 1
        else "arrival"
    )


def sim_key(layout: cj.Layout, pol: Any) -> tuple:
    """What fixes a layout's simulated latencies: two layouts with one key (a
    ChebyLS and a graceful code at the same N) are simulated once."""
    own = layout.code.own_workers
    n = getattr(pol, "num_responses", None)
    rule = ("fixed", n) if n is not None else ("first", layout.scheme.name,
                                                type(layout.code).__name__)  # fmt: skip
    return (layout.group_inputs, layout.group_workers, layout.groups,
            layout.scheme.service_scale, dispatch_of(layout), rule,
            None if own is None else np.asarray(own).tobytes())  # fmt: skip


def deadline_name(gd: Any) -> str:
    return "fill" if isinstance(gd, FillDeadline) else f"{1e3 * gd:g} ms"


def latency_stats(lat: np.ndarray) -> dict:
    ms = 1e3 * np.asarray(lat, np.float64)
    return {str(p): percentile(ms, p) for p in PCTS}


@dataclasses.dataclass
class Cell:
    """A cell's simulator runs, remembered (the same point is simulated once).

    Attributes:
        cfg: the run's config.
        inj: the cell's injector.
        grid: the rates (queries/s).
        points: {(sim key, deadline, rate, queries): point}.
    """

    cfg: LoadConfig
    inj: Injector
    grid: np.ndarray
    points: dict = dataclasses.field(default_factory=dict)
    sims: int = 0
    sim_seconds: float = 0.0

    def point(self, lay: cj.Layout, pol: Any, rate: float, gd: Any, q: int) -> dict:
        """p50 / p99 / p99.9 (ms) and the work of ``q`` Poisson arrivals at
        ``rate``; the first ``warmup`` of them left out of the percentiles."""
        key = (sim_key(lay, pol), deadline_name(gd), float(rate), q)
        if key in self.points:
            return self.points[key]
        t0 = time.perf_counter()
        a = poisson_arrivals(rate, q, seed=self.cfg.seed)
        sim = simulate_load(lay.code, pol, self.inj, a, group_deadline=gd,
                            shards=lay.groups, cluster=lay.num_workers,
                            work=lay.scheme.service_scale,
                            dispatch=dispatch_of(lay))  # fmt: skip
        skip = int(self.cfg.warmup * q)
        span = float(a[-1] - a[0]) if q > 1 else math.nan
        pt = {
            "rate": float(rate),
            "latency_ms": latency_stats(sim.latency[skip:]),
            "waited_ms_p50": float(1e3 * np.median(sim.waited[skip:])),
            "ok": float(np.mean(sim.ok[skip:])),
            "evaluations_per_query": float(sim.evaluations.sum() / q),
            "busy_ms_per_query": float(1e3 * sim.busy.sum() / q),
            "utilization": float(
                sim.busy.sum() / (lay.groups * lay.group_workers * span)
            ),
            "mean_group_size": float(np.mean(sim.group_size)),
            "deadline_ms_p50": float(1e3 * np.median(sim.deadline)),
        }  # fmt: skip
        self.points[key] = pt
        self.sims += 1
        self.sim_seconds += time.perf_counter() - t0
        return pt

    def passes(self, pt: dict) -> bool:
        # a query without an answer (ok False) fails the p99 as a late one would
        return pt["latency_ms"]["99"] <= 1e3 * self.cfg.p99_target and pt["ok"] > 0.99

    def step(self, lay, st: dict, j: int) -> None:
        """Screen state ``st`` at grid index ``j`` (see :func:`_family`)."""
        pt = self.point(lay, st["pol"], self.grid[j], st["gds"][st["gd"]],
                        self.cfg.screen_queries)  # fmt: skip
        if j == 0:
            st["zero"] = self.passes(pt)
        if self.passes(pt):
            st["lo"] = j
        else:
            st["hi"], st["p99"], st["p99_known"] = j, pt["latency_ms"]["99"], True

    def bisect(self, lay, pol, level: int, gd) -> dict:
        """The largest rate sustained on ``num_queries`` arrivals (it and every
        rate of the grid below it pass), from the screening's grid index
        ``level``, checked again at this size (``level`` of the result: the
        grid index that passes at this size, -1 none)."""
        q, grid = self.cfg.num_queries, self.grid

        def ok(rate):
            return self.passes(self.point(lay, pol, rate, gd, q))

        j = min(max(level, 0), len(grid) - 1)
        while j >= 0 and not ok(grid[j]):
            j -= 1
        if j < 0 or not ok(grid[0]):
            return {"max_rate": 0.0, "bracket": [0.0, float(grid[0])],
                    "bound": f"< {grid[0]:.4g}", "level": -1}  # fmt: skip
        while j + 1 < len(grid) and ok(grid[j + 1]):
            j += 1
        if j + 1 == len(grid):
            return {"max_rate": float(grid[j]), "bracket": [float(grid[j]), None],
                    "bound": f">= {grid[j]:.4g}", "level": j}  # fmt: skip
        lo, hi = float(grid[j]), float(grid[j + 1])
        for _ in range(self.cfg.bisection):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return {"max_rate": lo, "bracket": [lo, hi], "bound": f"[{lo:.4g}, {hi:.4g})",
                "level": j}  # fmt: skip
