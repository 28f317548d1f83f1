"""One workload's rows in a cell: each scheme's best layout and N.

A scheme's candidates are its layouts (``runkit.choice.cell_layouts``: the
systematic variant, K' = K and K/2, M' the most a group may have) each at the N
of its grid (:func:`benchmarks.regimes.pipeline.n_grid`). Its row is the first
candidate that meets the accuracy target in the shared rule's order
(:func:`runkit.choice.first_meeting`: lowest per-query p99, then least work per
query), simulated and decoded lazily in that order. The target is the cell's
(twice an uncoded bf16 worker's median error, ``cfg.error_factor``), so the
uncoded row is decoded first. A scheme none of whose candidates meets it shows
the one that came closest (lowest median error) with ``meets_target`` false.
"""

from __future__ import annotations

import time

import numpy as np

from runkit import accuracy_target, percentile
from runkit.choice import first_meeting, layout_fields

from .config import RegimesConfig
from .pipeline import NAMES, Cell, n_grid

__all__ = ["run_block", "workload_rows"]

_QS = (50, 99, 99.9)


def _candidate(cell: Cell, lay, n: int | None) -> dict:
    """The layout at N = n (None: at the first decodable moment), simulated:
    its per-query latency percentiles in ms (layer-wise coding: its extra
    rounds' shifts added), the masks to decode."""
    sim, masks = cell.sim(lay, n)
    q = sim.query + (lay.scheme.rounds - 1) * cell.shift
    per_request = q.reshape(q.shape[0], -1).max(axis=1)
    lat = {p: 1e3 * percentile(q, p) for p in _QS}
    return {
        "layout": lay,
        "n": n,
        "p99": lat[99],
        "latency_ms": lat,
        "request_ms": {p: 1e3 * percentile(per_request, p) for p in (50, 99)},
        "work_per_query": lay.work_per_query,
        "ok_fraction": float(np.mean(sim.ok)),
        "masks": masks,
    }


def _streams(cell: Cell, lays) -> list[list]:
    """One stream per layout: its candidates at each N of its grid, N
    ascending (a later decision is never earlier: p99 non-decreasing)."""
    out = []
    for lay in lays:
        s = lay.scheme
        ns = [None] if s.policy == "first" else n_grid(cell.cfg, s, lay.group_inputs)
        out.append([lambda lay=lay, n=n: _candidate(cell, lay, n) for n in ns])
    return out


def _row(name: str, best: dict, tried: list, met: bool, t0: float) -> dict:
    lay = best["layout"]
    s = lay.scheme
    return {
        "scheme": name,
        "note": s.note,
        "applies": True,
        **layout_fields(lay),
        "n": best["n"],
        "rounds": s.rounds,
        "latency_ms": best["latency_ms"],
        "request_ms": best["request_ms"],
        "ok_fraction": best["ok_fraction"],
        "error_median": best["error_median"],
        "error_p99": best["error_p99"],
        "meets_target": met,
        "tried": [
            {
                "layout": c["layout"].name,
                "n": c["n"],
                "p99_ms": c["p99"],
                "error_median": c["error_median"],
            }
            for c in tried
        ],
        "seconds": time.perf_counter() - t0,
    }


def workload_rows(cell: Cell, w: str) -> dict:
    """Workload ``w``'s block of the cell: ``target``, ``uncoded_error``,
    ``degree``, ``layers`` and ``rows`` (one per scheme of
    :data:`~benchmarks.regimes.pipeline.NAMES`, in its order)."""
    layouts, reasons = cell.search[w]
    wl = cell.wls[w]
    state = {"target": None, "uncoded": None}

    def meets(c: dict) -> bool:
        lay = c["layout"]
        if lay.scheme.name == "layerwise":  # one round per layer, at the master
            err = cell.layerwise_errors(lay, c["masks"], w)
        else:
            err = cell.errors(lay, c["n"], c["masks"], w)
        c["error_median"], c["error_p99"] = percentile(err, 50), percentile(err, 99)
        if state["target"] is None:  # the uncoded row, decoded first
            state["uncoded"] = c["error_median"]
            state["target"] = accuracy_target(err, cell.cfg.error_factor)
        return c["error_median"] <= state["target"]

    order = ["uncoded"] + [n for n in layouts if n != "uncoded"]
    rows = {}
    for name in order:
        if name not in layouts:
            continue
        t0 = time.perf_counter()
        best, tried = first_meeting(_streams(cell, layouts[name]), meets)
        met = best is not None
        if not met:  # the closest: lowest median error, then lowest p99
            best = min(tried, key=lambda c: (c["error_median"], c["p99"]))
        rows[name] = _row(name, best, tried, met, t0)
    out_rows = []
    for name in (n for n in NAMES if n in layouts or n in reasons):
        if name in rows:
            out_rows.append(rows[name])
        else:
            out_rows.append({"scheme": name, "note": "", "applies": False,
                             "reason": reasons[name]})  # fmt: skip
    return {
        "target": state["target"],
        "uncoded_error": state["uncoded"],
        "degree": wl.degree,
        "layers": wl.num_layers,
        "rows": out_rows,
    }


def run_block(cfg: RegimesConfig, k: int, m: int, straggler: str, progress=None):
    """Every workload's rows at (K, M) under one straggler model.

    Returns:
        {workload: {"target": ..., "uncoded_error": ..., "rows": [row, ...]}}
    """
    cell = Cell(cfg, k, m, straggler)
    out = {}
    for w in cfg.workloads:
        out[w] = workload_rows(cell, w)
        if progress is not None:
            progress()
    return out
