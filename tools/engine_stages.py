"""Where a query's time goes on the thread cluster, beyond the simulator's.

``benchmarks.load`` checks the thread cluster against the serving simulator
(``simulate_load``, a master and workers that take no time) on one group of a
layout. This tool serves one group the same way (``serve_group``: a
``StreamingServer`` on a ``ThreadCluster``, the load benchmark's delay model,
queries and worker) and splits each answered query's path at the backend's
two moments, recorded by wrapping its private members for the run:

* ``sent late``: for a query sent to its own workers when it arrives (dispatch
  on arrival), from its arrival (``submit``) to its rows handed to the
  backend's threads: the frontend's hand-off to the serving thread, the
  group's request opened, the query sent;
* ``delivered late``: from the moment the answer that answered the query was
  due (sent + injected service time) to its delivery to the serving thread:
  the serving thread's timed wait;
* ``answered late``: from that delivery to the query's answer (its future
  resolved): taking the answer, and for a query decoded from its group, the
  decision's decode and the round's end.

and prints their percentiles beside the thread cluster's latency less the
simulator's on the run's own arrival times (per query).

    python -m tools.engine_stages                       # replication c = 3
    python -m tools.engine_stages --layout "chebyls K'=8 M'=16" --responses 8 \\
        --deadline 0.02 --rate 283

(about 20 s per run of 1,000 queries at 28 queries/s.)
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from benchmarks.load.config import LoadConfig
from benchmarks.load.schemes import candidates, policy, queries
from benchmarks.load.simulate import dispatch_of, injector, on_arrival
from benchmarks.load.sweep import serve_group
from codedjax.serving import FillDeadline, poisson_arrivals, simulate_load
from codedjax.serving import _thread_cluster as tc

PCTS = (5, 50, 95, 99)


class _Recorder:
    """Wraps ``ThreadCluster._send`` and ``_deliver`` while in use: each
    request's send times, and each delivery's (due, delivered) by request."""

    def __init__(self):
        self.sent: dict = defaultdict(list)
        self.delivered: dict = defaultdict(list)

    def __enter__(self):
        self._send, self._deliver = tc.ThreadCluster._send, tc.ThreadCluster._deliver
        rec, send, deliver = self, self._send, self._deliver

        def _send(cluster, fname, rid, *args):
            rec.sent[rid].append(time.perf_counter())
            return send(cluster, fname, rid, *args)

        def _deliver(cluster, t, i, now):
            rec.delivered[cluster._lines[i][0].request_id].append((t, now))
            return deliver(cluster, t, i, now)

        tc.ThreadCluster._send, tc.ThreadCluster._deliver = _send, _deliver
        return self

    def __exit__(self, *exc):
        tc.ThreadCluster._send, tc.ThreadCluster._deliver = self._send, self._deliver


def run(cfg, lay, pol, gd, rate, count) -> dict:
    """One served group; per-query stages and thread - simulator (ms)."""
    qs = queries(cfg, count, seed=3)
    times = poisson_arrivals(rate, count, seed=cfg.seed + 5)
    inj = injector(cfg, "independent")
    with _Recorder() as rec:
        out, _, _ = serve_group(cfg, lay, pol, inj, qs, times, gd)
    got = [r for r in out.results if r is not None]
    arrival = np.array([r.arrival for r in got])
    sim = simulate_load(lay.code, pol, inj, arrival - arrival[0], group_deadline=gd,
                        dispatch=dispatch_of(lay))  # fmt: skip
    skip = int(cfg.warmup * len(got))
    arrives = on_arrival(lay)
    stages: dict = {"sent late": [], "delivered late": [], "answered late": []}
    for r in got[skip:]:
        at = r.arrival + r.latency
        sends = [t for t in rec.sent[r.group] if t >= r.arrival]
        if arrives and sends:  # sent on arrival: its own rows, the first after it
            stages["sent late"].append(sends[0] - r.arrival)
        before = [d for d in rec.delivered[r.group] if d[1] <= at]
        if before:
            due, now = max(before, key=lambda d: d[1])
            stages["delivered late"].append(now - due)
            stages["answered late"].append(at - now)
    lat = np.array([r.latency for r in got])
    diff = (lat - sim.latency)[skip:]
    return {
        "stages": {k: 1e3 * np.asarray(v) for k, v in stages.items()},
        "diff": 1e3 * diff,
        "p50": (1e3 * np.median(lat[skip:]), 1e3 * np.median(sim.latency[skip:])),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--layout",
        default="replication K'=1 M'=3",
        help="a layout of benchmarks.load at M = 16 (without x G)",
    )
    ap.add_argument(
        "--responses",
        type=int,
        default=None,
        help="N of a FixedN policy (default: the layout's own)",
    )
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="group deadline in seconds (default: FillDeadline)",
    )
    ap.add_argument("--rate", type=float, default=28.0, help="queries/s")
    ap.add_argument("--queries", type=int, default=1000)  # fmt: skip
    args = ap.parse_args(argv)
    cfg = LoadConfig()
    lays = [x for x in candidates(cfg, 16) if x.name.split(" x")[0] == args.layout]
    if not lays:
        names = sorted({x.name.split(" x")[0] for x in candidates(cfg, 16)})
        ap.error(f"--layout: no layout {args.layout!r} at M = 16; one of {names}")
    lay = lays[0]
    pol = policy(lay, args.responses)
    gd = FillDeadline() if args.deadline is None else args.deadline
    print(f"{lay.name}, {pol}, group deadline {gd}, {args.rate:g} q/s, "
          f"{args.queries} queries")  # fmt: skip
    got = run(cfg, lay, pol, gd, args.rate, args.queries)
    th, si = got["p50"]
    print(f"p50 threads {th:.2f} ms, simulator {si:.2f} ms ({th / si:.3f}x)")
    print(f"{'ms':22s} {'queries':>7s}  " + " / ".join(f"p{p}" for p in PCTS))
    for name, v in [*got["stages"].items(), ("threads - simulator", got["diff"])]:
        pct = " / ".join(f"{x:.3f}" for x in np.percentile(v, PCTS)) if len(v) else "-"
        print(f"{name:22s} {len(v):7d}  {pct}")


if __name__ == "__main__":
    main()
