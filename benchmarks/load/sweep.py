"""The load benchmark's measurements.

* The map (``search.py``): per delay model and cluster size M, each scheme
  family's best layout (scheme, K', M', G, N, group deadline) by its largest
  rate under the p99 target; the best coded and the best replication layout;
  at the grid's lowest rate the best systematic layout's p50 against uncoded
  serving's; p99 against load for the layouts that matter.
* The simulator against the thread cluster: one group of the best coded and of
  the best replication layout served by a ``StreamingServer`` on a
  ``ThreadCluster`` (its M' workers, at the layout's rate over G: the groups
  are independent), and the simulator on the arrival times the thread run
  really had, with the same options (dispatch, per-query answers, deadline).
* No query lost: a long open-loop run on the thread cluster with workers raising,
  hanging and answering NaN.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import Counter
from typing import Any

import numpy as np

from codedjax.serving import (
    Server,
    StreamingServer,
    ThreadCluster,
    poisson_arrivals,
    run_open_loop,
    simulate_load,
)
from runkit import accuracy_target, percentile, progress, quiet_gc

from .config import LoadConfig
from .schemes import PLAIN, baseline_errors, queries, query_errors, workload
from .search import search_cell
from .simulate import dispatch_of, injector, latency_stats

__all__ = ["noloss_check", "run_cell", "run_load", "thread_check"]


def _best(rows: list, pred) -> dict | None:
    rows = [r for r in rows if pred(r)]
    return max(rows, key=lambda r: (r["max_rate"], -r["work_per_query"]), default=None)


def run_cell(
    cfg: LoadConfig, delay: str, m: int, base_errs, memo: dict | None = None,
    show_progress: bool = True,
) -> dict:  # fmt: skip
    """The search of one cell and what the report shows of it; ``base_errs``:
    an uncoded bf16 worker's errors per query (:func:`~.schemes.baseline_errors`).
    Each finalist's (layout, policy, deadline) is under ``"_handles"``."""
    base = percentile(base_errs, 50)
    target = accuracy_target(base_errs, cfg.error_factor)
    out = search_cell(cfg, delay, m, target, base, memo, show_progress)
    cell = out.pop("_cell")
    rows = [r for f in out["families"].values() for r in f["best"]]
    picks = {
        "best coded": _best(rows, lambda r: r["family"] not in PLAIN),
        "best replication": _best(rows, lambda r: r["family"] in PLAIN),
        "uncoded": _best(rows, lambda r: r["family"] == "uncoded"),
        "best systematic": _best(
            rows, lambda r: r["family"] not in PLAIN and r["on_arrival"]
        ),
    }
    low = float(cell.grid[0])
    p50 = {}
    for k in ("uncoded", "best systematic"):
        if picks[k] is not None:
            lay, pol, gd = picks[k]["_handle"]
            pt = cell.point(lay, pol, low, gd, cfg.num_queries)
            p50[k] = pt["latency_ms"]["50"]
    out["low_rate"] = {
        "rate": low,
        "uncoded_p50_ms": p50.get("uncoded", math.nan),
        "systematic": (picks["best systematic"] or {}).get("name"),
        "systematic_p50_ms": p50.get("best systematic", math.nan),
    }
    out["low_rate"]["ratio"] = (
        out["low_rate"]["systematic_p50_ms"] / out["low_rate"]["uncoded_p50_ms"]
    )
    # p99 against load (screening size) for the layouts the report names
    out["curves"] = {}
    for key, row in picks.items():
        if row is None or row["name"] in out["curves"]:
            continue
        lay, pol, gd = row["_handle"]
        curve = []
        for r in cell.grid:
            pt = cell.point(lay, pol, r, gd, cfg.screen_queries)
            curve.append(pt["latency_ms"])
            if pt["latency_ms"]["99"] > 10e3 * cfg.p99_target:
                break  # saturated
        out["curves"][row["name"]] = {"role": key, "family": row["family"],
                                      "p99_ms": [c["99"] for c in curve]}  # fmt: skip
    out["picks"] = {k: (None if r is None else r["name"]) for k, r in picks.items()}
    out["accuracy_target"] = target
    out["simulations"], out["simulation_seconds"] = cell.sims, cell.sim_seconds
    out["_handles"] = {r["name"]: r.pop("_handle") for r in rows}
    out["_rows"] = {r["name"]: r for r in rows}
    return out


def serve_group(cfg, lay, pol, inj, qs, times, gd, *, freeze=True):
    """One group's open-loop run on the thread cluster; (LoadRun, seconds, the
    garbage collector's pauses during it, or None unfrozen). The heap the sweep
    has gathered is frozen for the run (``runkit.gcpause``) unless ``freeze`` is
    False: a collection over it stops every thread for up to a second, which
    is the benchmark's, not the engine's (``tools/gc_stall.py`` measures it)."""
    fn = workload(cfg.num_features, cfg.seed).fn
    server = Server(lay.code, fn, backend=ThreadCluster(injector=inj), policy=pol)
    t0 = time.perf_counter()
    with (
        quiet_gc() if freeze else contextlib.nullcontext() as gc_rec,
        StreamingServer(
            server, group_deadline=gd, dispatch=dispatch_of(lay), example=qs[0]
        ) as front,
    ):
        run = run_open_loop(front, qs, times, timeout=cfg.thread_timeout)
    return run, time.perf_counter() - t0, gc_rec and gc_rec.summary()


def _coded(cell: dict) -> list:
    """The coded finalists that sustain a rate and whose worker evaluates f once
    (the thread cluster sleeps one draw per evaluation)."""
    return [r for r in cell["_rows"].values() if r["family"] not in PLAIN
            and r["service_scale"] == 1 and r["max_rate"] > 0]  # fmt: skip


def _thread_picks(cell: dict) -> list:
    """(role, row) of the best coded layout of :func:`_coded` and of the best
    replication layout."""
    out = []
    coded = _coded(cell)
    if coded:
        out.append(("coded", max(coded, key=lambda r: r["max_rate"])))
    rep = cell["picks"]["best replication"]
    if rep is not None and cell["_rows"][rep]["max_rate"] > 0:
        out.append(("replication", cell["_rows"][rep]))
    return out


def thread_check(cfg: LoadConfig, cell: dict, delay: str, show_progress=True) -> dict:
    """The thread cluster against the simulator (see the module), at
    ``thread_rates`` times each layout's own sustained rate over its G groups
    (below saturation: a saturated queue has no steady state to compare)."""
    inj = injector(cfg, delay)
    out = {}
    todo = [(p, f) for p in _thread_picks(cell) for f in cfg.thread_rates]
    for (role, row), frac in progress(todo, desc="threads", disable=not show_progress):
        lay, pol, gd = cell["_handles"][row["name"]]
        rate = frac * row["max_rate"] / row["groups"]
        qs = queries(cfg, cfg.thread_queries, seed=3)
        times = poisson_arrivals(rate, len(qs), seed=cfg.seed + 5)
        load0 = os.getloadavg()[0]
        run, secs, gcp = serve_group(cfg, lay, pol, inj, qs, times, gd)
        got = [r for r in run.results if r is not None]
        t_arr = np.array([r.arrival for r in got])
        t_arr = t_arr - t_arr[0]
        sim = simulate_load(lay.code, pol, inj, t_arr, group_deadline=gd,
                            dispatch=dispatch_of(lay))  # fmt: skip
        skip = int(cfg.warmup * len(t_arr))
        th = latency_stats(np.array([r.latency for r in got])[skip:])
        si = latency_stats(sim.latency[skip:])
        out[f"{row['name']} @ {frac:g}"] = {
            "layout": row["name"], "role": role, "rate": rate, "fraction": frac,
            "groups_of_layout": row["groups"], "deadline": row["deadline"],
            "dispatch": dispatch_of(lay), "queries": len(qs), "threads_ms": th,
            "simulator_ms": si, "ratio": {p: th[p] / si[p] for p in th},
            "answered": run.answered, "seconds": secs, "gc": gcp,
            "loadavg": [load0, os.getloadavg()[0]],
        }  # fmt: skip
    return out


def noloss_check(cfg: LoadConfig, cell: dict, delay: str) -> dict:
    """``noloss_queries`` queries on the thread cluster at ``noloss_fraction``
    times the per-group sustained rate of the coded finalist with the largest
    one (one group), with workers raising, hanging or answering NaN; every
    query must end with an answer (ok or not) or an error."""
    coded = _coded(cell)
    if not coded:
        return {"skipped": "no coded layout sustains any rate of the grid"}
    row = max(coded, key=lambda r: r["max_rate"] / r["groups"])
    lay, pol, gd = cell["_handles"][row["name"]]
    pol = type(pol)(*([pol.num_responses] if hasattr(pol, "num_responses") else []),
                    deadline=cfg.noloss_deadline)  # fmt: skip
    rate = cfg.noloss_fraction * row["max_rate"] / row["groups"]
    qs = queries(cfg, cfg.noloss_queries, seed=4)
    times = poisson_arrivals(rate, len(qs), seed=cfg.seed + 6)
    inj = injector(cfg, delay, faults=True)
    run, secs, gcp = serve_group(cfg, lay, pol, inj, qs, times, gd)
    ok = [i for i, r in enumerate(run.results) if r is not None and r.ok]
    errs = [math.nan]
    if ok:
        truth = workload(cfg.num_features, cfg.seed).truth
        vals = np.stack([np.asarray(run.results[i].value) for i in ok])
        errs = query_errors(vals, truth(qs[ok]))
    statuses = Counter(str(r.status) for r in run.results if r is not None)
    return {
        "layout": row["name"], "rate": rate, "deadline": row["deadline"],
        "submitted": run.submitted, "answered": run.answered,
        "ok": int(run.ok.sum()), "errors": run.errors, "rejected": run.rejected,
        "lost": run.lost, "statuses": dict(statuses),
        "faults": {"kinds": list(inj.fault_kinds), "prob": inj.fault_prob,
                   "max_faulty": inj.max_faulty},
        "policy_deadline": cfg.noloss_deadline,
        "latency_ms": latency_stats(run.latency[np.isfinite(run.latency)]),
        "query_error_median": percentile(errs, 50), "seconds": secs, "gc": gcp,
    }  # fmt: skip


def _public(cell: dict) -> dict:
    return {k: v for k, v in cell.items() if not k.startswith("_")}


def run_load(
    cfg: LoadConfig, *, show_progress: bool = True, partial=None
) -> dict[str, Any]:
    """Every cell, then the thread checks and the no-loss run; ``partial(obj)``
    is called with what is done after each cell (a file written as it goes)."""
    t0 = time.perf_counter()
    errs = baseline_errors(cfg)
    base = percentile(errs, 50)
    cells: dict = {}
    memo: dict = {}
    check = None
    for delay in cfg.delays:
        for m in cfg.workers:
            cell = run_cell(cfg, delay, m, errs, memo, show_progress)
            if (delay, m) == (cfg.check_delay, cfg.check_workers):
                check = cell
            cells[f"{delay} M={m}"] = _public(cell)
            if partial is not None:
                partial({"baseline_error": base, "cells": cells})
    map_seconds = time.perf_counter() - t0
    if check is None:
        check = run_cell(cfg, cfg.check_delay, cfg.check_workers, errs, memo, False)
    t1 = time.perf_counter()
    # the checks run the real frontend: one that fails is reported, the map kept
    try:
        threads = thread_check(cfg, check, cfg.check_delay, show_progress)
    except Exception as e:  # noqa: BLE001 - reported in the summary
        threads = {"error": f"{type(e).__name__}: {e}"}
    try:
        noloss = noloss_check(cfg, check, cfg.check_delay)
    except Exception as e:  # noqa: BLE001 - reported in the summary
        noloss = {"error": f"{type(e).__name__}: {e}"}
    return {
        "baseline_error": base,
        "cells": cells,
        "threads": threads,
        "noloss": noloss,
        "map_seconds": map_seconds,
        "check_seconds": time.perf_counter() - t1,
        "seconds": time.perf_counter() - t0,
    }
