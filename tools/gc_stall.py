"""A garbage collection over a large heap, against the thread cluster under load.

The no-loss run of ``benchmarks.load`` (ChebyLS on K' = 8 queries and 16 workers,
N = 8, a Poisson stream at 471 queries/s, the independent delay model, workers
raising, hanging or answering NaN with probability 0.02, at most one per group,
a 250 ms policy deadline) served three times on the thread cluster, in one
process that first builds a heap of ``--objects`` small lists:

* ``as is``: one full collection forced ``--at`` seconds into the run (the heap
  stays as it is; the collection walks all of it, holding the GIL);
* ``frozen``: the same, with the heap frozen first (``runkit.quiet_gc``, as
  every thread-cluster run of ``benchmarks.load`` does: each run here is its
  ``serve_group``);
* ``no collection``: nothing forced (the heap frozen, for the baseline).

It prints, per run, the forced collection's pause, how many queries were
answered ok and how many ended ``TOO_FEW_RESPONSES``, and the p50 and p99
latency. The figures in ``docs/serving.md`` ("Garbage collection") come from

    python -m tools.gc_stall

(about a minute on 2 cores, and a few GB of memory for the heap).
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
from collections import Counter

import numpy as np

import codedjax as cj
from benchmarks.load.config import LoadConfig
from benchmarks.load.schemes import candidates, queries
from benchmarks.load.simulate import injector
from benchmarks.load.sweep import serve_group
from codedjax.serving import FillDeadline, FixedN, poisson_arrivals

LAYOUT = "chebyls K'=8 M'=16"  # the no-loss run's layout at M = 16
RATE = 471.0  # its rate (queries/s): half the layout's sustained rate


def serve(cfg: LoadConfig, count: int, *, collect_at: float | None, freeze: bool):
    """One run (``benchmarks.load``'s own, ``serve_group``); returns (the forced
    pause in s or None, statuses, p50 ms, p99 ms)."""
    (lay,) = [x for x in candidates(cfg, 16) if x.name == LAYOUT]
    pol = FixedN(8, deadline=cfg.noloss_deadline)
    qs = queries(cfg, count, seed=4)
    times = poisson_arrivals(RATE, count, seed=cfg.seed + 6)
    inj = injector(cfg, "independent", faults=True)
    pause: list[float] = []

    def collect():  # counted from the start of the run's set-up (a second or so)
        time.sleep(collect_at)
        t0 = time.perf_counter()
        gc.collect()
        pause.append(time.perf_counter() - t0)

    if collect_at is not None:
        threading.Thread(target=collect, daemon=True).start()
    run, _, _ = serve_group(cfg, lay, pol, inj, qs, times, FillDeadline(),
                            freeze=freeze)  # fmt: skip
    statuses = Counter(int(r.status) for r in run.results if r is not None)
    lat = 1e3 * run.latency[np.isfinite(run.latency)]
    return (pause[0] if pause else None, statuses, *np.percentile(lat, [50, 99]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=int, default=12_000_000,
                   help="small lists in the heap (default 12 million)")  # fmt: skip
    p.add_argument("--queries", type=int, default=5000, help="queries per run")
    p.add_argument("--at", type=float, default=4.0,
                   help="seconds into a run of the forced collection")  # fmt: skip
    a = p.parse_args(argv)
    if a.objects < 0 or a.queries < 100 or not 0 <= a.at:
        p.error("--objects >= 0, --queries >= 100 and --at >= 0, please")
    cfg = LoadConfig()
    heap = [[i] for i in range(a.objects)]
    print(f"heap: {len(heap):,} small lists; {a.queries} queries per run, "
          f"{LAYOUT}, N = 8, {RATE:g} q/s, faults, policy deadline "
          f"{1e3 * cfg.noloss_deadline:g} ms")  # fmt: skip
    print("| run | forced collection ms | ok | TOO_FEW_RESPONSES | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for name, at, freeze in (("as is", a.at, False), ("frozen", a.at, True),
                             ("no collection", None, True)):  # fmt: skip
        pause, st, p50, p99 = serve(cfg, a.queries, collect_at=at, freeze=freeze)
        ms = "-" if pause is None else f"{1e3 * pause:.0f}"
        ok, few = (
            st.get(int(s), 0) for s in (cj.Status.SUCCESS, cj.Status.TOO_FEW_RESPONSES)
        )
        print(f"| {name} | {ms} | {ok} | {few} | {p50:.1f} | "
              f"{p99:.1f} |")  # fmt: skip
    del heap


if __name__ == "__main__":
    main()
