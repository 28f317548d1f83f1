"""The load benchmark's measurements.

* Latency curves (discrete-event simulator, ``codedjax.serving.simulate_load``):
  for each delay model, cluster size M and scheme, p50 / p99 / p99.9 of a Poisson
  stream at a grid of offered loads up to saturation, and the largest rate whose
  p99 stays under the target (bisection between the grid's last passing and first
  failing rate, in log rate). The same arrival gaps at every rate (scaled) and the
  same injector for every scheme.
* The simulator against the thread cluster: a coded and a replication scheme
  served by a ``StreamingServer`` on a ``ThreadCluster`` at a few rates; the
  simulator runs on the arrival times the thread run really had.
* No query lost: a long open-loop run on the thread cluster with workers raising,
  hanging and answering NaN.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from typing import Any

import numpy as np

import runkit
from codedjax.serving import (
    Injector,
    Server,
    StreamingServer,
    ThreadCluster,
    poisson_arrivals,
    run_open_loop,
    simulate_load,
)
from runkit import accuracy_target, max_rel_err, percentile

from .config import LoadConfig
from .schemes import Layout, baseline_errors, layouts, queries, workload

__all__ = ["noloss_check", "run_cell", "thread_check"]

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


def _stats(lat: np.ndarray) -> dict:
    ms = 1e3 * np.asarray(lat, np.float64)
    return {str(p): percentile(ms, p) for p in PCTS}


def simulate_point(
    cfg: LoadConfig, s: Layout, inj: Injector, rate: float, gd: float | None = None
) -> dict:
    """One point of a scheme's curve: the simulator on ``num_queries`` Poisson
    arrivals at ``rate``; the first ``warmup`` fraction of queries is left out of
    the percentiles (the queues start empty)."""
    a = poisson_arrivals(rate, cfg.num_queries, seed=cfg.seed)
    gd = cfg.group_deadlines[0] if gd is None else gd
    sim = simulate_load(s.code, s.policy, inj, a, group_deadline=gd,
                        shards=s.shards, per_query=s.per_query)  # fmt: skip
    skip = int(cfg.warmup * len(a))
    span = float(a[-1] - a[0]) if len(a) > 1 else math.nan
    q = len(a)
    return {
        "rate": float(rate),
        "latency_ms": _stats(sim.latency[skip:]),
        "waited_ms_p50": float(1e3 * np.median(sim.waited[skip:])),
        "ok": float(np.mean(sim.ok[skip:])),
        "evaluations_per_query": float(sim.evaluations.sum() / q),
        "busy_ms_per_query": float(1e3 * sim.busy.sum() / q),
        "utilization": float(sim.busy.sum() / (s.workers_used * span)),
        "mean_group_size": float(np.mean(sim.group_size)),
    }


def _passes(pt: dict, target_ms: float) -> bool:
    return pt["latency_ms"]["99"] <= target_ms


def sweep_scheme(
    cfg: LoadConfig, s: Layout, inj: Injector, grid, gd: float | None = None
) -> dict:
    """The scheme's curve on ``grid`` (stopped once saturated) and its largest
    sustained rate under the p99 target, at group deadline ``gd``."""
    target_ms = 1e3 * cfg.p99_target
    curve, lo, hi = [], None, None
    for r in grid:
        pt = simulate_point(cfg, s, inj, r, gd)
        curve.append(pt)
        if _passes(pt, target_ms):
            if hi is None:
                lo = r
        elif hi is None:
            hi = r
        if pt["latency_ms"]["99"] > cfg.saturated * target_ms:
            break  # saturated: the queues grow without bound
    if lo is None:
        return {"curve": curve, "max_rate": 0.0, "bound": f"< {grid[0]:.4g}",
                "bracket": [0.0, float(grid[0])]}  # fmt: skip
    if hi is None:
        return {"curve": curve, "max_rate": float(lo), "bound": f">= {lo:.4g}",
                "bracket": [float(lo), None]}  # fmt: skip
    for _ in range(cfg.bisection):
        mid = math.sqrt(lo * hi)
        if _passes(simulate_point(cfg, s, inj, mid, gd), target_ms):
            lo = mid
        else:
            hi = mid
    return {"curve": curve, "max_rate": float(lo), "bound": f"[{lo:.4g}, {hi:.4g})",
            "bracket": [float(lo), float(hi)]}  # fmt: skip


def _target(cfg: LoadConfig, base_errs) -> tuple[float, float]:
    """(an uncoded bf16 worker's median error, the accuracy target)."""
    return percentile(base_errs, 50), accuracy_target(base_errs, cfg.error_factor)


def run_cell(
    cfg: LoadConfig, delay: str, m: int, base_errs, show_progress: bool = True
) -> dict:
    """Every layout at M workers under one delay model; ``base_errs``: an uncoded
    bf16 worker's errors (:func:`~.schemes.baseline_errors`)."""
    inj = injector(cfg, delay)
    base_err, target_err = _target(cfg, base_errs)
    t0 = time.perf_counter()
    found = layouts(cfg, m, cfg.latency(delay), target_err)
    t_schemes = time.perf_counter() - t0
    mean = mean_service(inj, m)
    # the grid: up to 3 M / E[T] (uncoded's capacity is M / E[T]; a code that
    # cancels its stragglers can go beyond it)
    hi = cfg.grid_top * m / mean
    grid = np.geomspace(hi / cfg.grid_span, hi, cfg.num_rates)
    out = {"mean_service_ms": 1e3 * mean, "grid": grid.tolist(),
           "schemes_seconds": t_schemes, "schemes": {}}  # fmt: skip
    bar = runkit.progress(found, desc=f"{delay} M={m}", disable=not show_progress)
    for s in bar:
        err = base_err if s.family != "coded" else s.error
        row = {
            "family": s.family,
            "workers_used": s.workers_used,
            "num_responses": s.num_responses,
            "shards": s.shards,
            "per_query": s.per_query,
            "error_median": err,
            "accurate": bool(err <= target_err),
            "applies": s.applies,
            "reason": s.reason,
        }
        if s.applies:
            # groups of one query never wait: one deadline is enough
            gds = (
                cfg.group_deadlines
                if s.code.num_inputs > 1
                else cfg.group_deadlines[:1]
            )
            runs = {gd: sweep_scheme(cfg, s, inj, grid, gd) for gd in gds}
            gd = max(gds, key=lambda g: (runs[g]["max_rate"], -g))
            row.update(runs[gd])
            row["group_deadline"] = gd
            row["max_rate_by_group_deadline"] = {
                f"{1e3 * g:g} ms": runs[g]["max_rate"] for g in gds
            }
        out["schemes"][s.name] = row
    return out


def _by_name(cfg, m, delay, base_errs) -> dict[str, Layout]:
    target = _target(cfg, base_errs)[1]
    return {s.name: s for s in layouts(cfg, m, cfg.latency(delay), target)}


def _serve(cfg, s: Layout, inj: Injector, qs, times, gd, *, deadline=None):
    """An open-loop run on the thread cluster; returns (LoadRun, seconds)."""
    policy = s.policy
    if deadline is not None:
        policy = type(policy)(*([s.num_responses] if s.num_responses else []),
                              deadline=deadline)  # fmt: skip
    fn = workload(cfg.num_features, cfg.seed).fn
    server = Server(s.code, fn, backend=ThreadCluster(injector=inj), policy=policy)
    t0 = time.perf_counter()
    with StreamingServer(server, group_deadline=gd, example=qs[0]) as front:
        run = run_open_loop(front, qs, times, timeout=cfg.thread_timeout)
    return run, time.perf_counter() - t0


def _reference(cell: dict) -> tuple[str, float]:
    """(the coded scheme with the largest sustained rate, the largest sustained
    rate of any scheme of the cell: the unit of the checks' rates)."""
    rows = cell["schemes"]
    coded = [n for n, v in rows.items() if v["family"] == "coded" and v["applies"]]
    best = max(coded, key=lambda n: rows[n]["max_rate"])
    top = max(v.get("max_rate", 0.0) for v in rows.values())
    if top <= 0:  # nothing meets the target: the grid's middle
        top = float(np.median(cell["grid"]))
    return best, top


def thread_check(cfg: LoadConfig, cell: dict, delay: str, m: int, base_errs):
    """The thread cluster against the simulator, for the coded scheme with the
    largest sustained rate and the replication K-group layout (the layouts a
    ``StreamingServer`` serves as one group of K), at ``thread_rates`` times the
    scheme's own largest sustained rate (below saturation: a saturated queue
    has no steady state to compare)."""
    by_name = _by_name(cfg, m, delay, base_errs)
    best, top = _reference(cell)
    picks = [best, "replication K-group"]
    inj = injector(cfg, delay)
    out = {}
    for name in picks:
        s = by_name[name]
        own = cell["schemes"][name]["max_rate"]
        for frac in cfg.thread_rates:
            rate = frac * (own if own > 0 else top)
            qs = queries(cfg, cfg.thread_queries, seed=3)
            times = poisson_arrivals(rate, len(qs), seed=cfg.seed + 5)
            load0 = os.getloadavg()[0]
            gd = cell["schemes"][name]["group_deadline"]
            run, secs = _serve(cfg, s, inj, qs, times, gd)
            got = [r for r in run.results if r is not None]
            arr = np.array([r.arrival for r in got])
            t_arr = arr - arr[0]
            sim = simulate_load(s.code, s.policy, inj, t_arr,
                                group_deadline=gd)  # fmt: skip
            skip = int(cfg.warmup * len(t_arr))
            th = _stats(np.array([r.latency for r in got])[skip:])
            si = _stats(sim.latency[skip:])
            groups = (len({r.group for r in got}), len(sim.sent))
            out[f"{name} @ {frac:g}"] = {
                "scheme": name,
                "rate": rate,
                "fraction": frac,
                "group_deadline": gd,
                "queries": len(qs),
                "threads_ms": th,
                "simulator_ms": si,
                "ratio": {p: th[p] / si[p] for p in th},
                "groups": groups,
                "answered": run.answered,
                "seconds": secs,
                "loadavg": [load0, os.getloadavg()[0]],
            }
    return out


def noloss_check(cfg: LoadConfig, cell: dict, delay: str, m: int, base_errs):
    """``noloss_queries`` queries on the thread cluster at ``noloss_fraction``
    times the best coded scheme's sustained rate, for that scheme, with
    workers raising, hanging or answering NaN; every query must end with an
    answer (ok or not) or an error."""
    by_name = _by_name(cfg, m, delay, base_errs)
    best, top = _reference(cell)
    s = by_name[best]
    own = cell["schemes"][best]["max_rate"]
    rate = cfg.noloss_fraction * (own if own > 0 else top)
    qs = queries(cfg, cfg.noloss_queries, seed=4)
    times = poisson_arrivals(rate, len(qs), seed=cfg.seed + 6)
    inj = injector(cfg, delay, faults=True)
    gd = cell["schemes"][best]["group_deadline"]
    run, secs = _serve(cfg, s, inj, qs, times, gd, deadline=cfg.noloss_deadline)
    # the answers that decoded, against the float64 truth
    ok = [i for i, r in enumerate(run.results) if r is not None and r.ok]
    truth = workload(cfg.num_features, cfg.seed).truth
    errs = [math.nan]
    if ok:
        errs = max_rel_err([run.results[i].value for i in ok], truth(qs[ok]))
    statuses = Counter(str(r.status) for r in run.results if r is not None)
    return {
        "scheme": best,
        "rate": rate,
        "group_deadline": gd,
        "submitted": run.submitted,
        "answered": run.answered,
        "ok": int(run.ok.sum()),
        "errors": run.errors,
        "rejected": run.rejected,
        "lost": run.lost,
        "statuses": dict(statuses),
        "faults": {
            "kinds": list(inj.fault_kinds),
            "prob": inj.fault_prob,
            "max_faulty": inj.max_faulty,
        },  # fmt: skip
        "policy_deadline": cfg.noloss_deadline,
        "latency_ms": _stats(run.latency[np.isfinite(run.latency)]),
        "query_error_median": percentile(errs, 50),
        "seconds": secs,
    }


def run_load(
    cfg: LoadConfig, *, show_progress: bool = True, partial=None
) -> dict[str, Any]:
    """Every cell, the thread check and the no-loss run; ``partial(obj)`` is
    called with what is done after each cell (for a file written as it goes)."""
    t0 = time.perf_counter()
    errs = baseline_errors(cfg)
    base = percentile(errs, 50)
    cells: dict = {}
    for delay in cfg.delays:
        for m in cfg.workers:
            cell = run_cell(cfg, delay, m, errs, show_progress)
            cells[f"{delay} M={m}"] = {"delay": delay, "num_workers": m, **cell}
            if partial is not None:
                partial({"baseline_error": base, "cells": cells})
    first = f"{cfg.check_delay} M={cfg.check_workers}"
    cell = cells.get(first) or {"schemes": run_cell(cfg, cfg.check_delay,
                                                     cfg.check_workers, errs,
                                                     False)["schemes"]}  # fmt: skip
    threads = thread_check(cfg, cell, cfg.check_delay, cfg.check_workers, errs)
    noloss = noloss_check(cfg, cell, cfg.check_delay, cfg.check_workers, errs)
    return {
        "baseline_error": base,
        "cells": cells,
        "threads": threads,
        "noloss": noloss,
        "seconds": time.perf_counter() - t0,
    }
