"""The serving benchmark on the thread cluster: latency, overhead, throughput."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

import codedjax as cj
from codedjax.serving import FixedN, Server, ThreadCluster, simulate_latency
from runkit import progress

from .config import ServingConfig, injector, request_inputs, schemes
from .floor import FanoutFloor
from .workload import pct, rel_err, worker_fn

__all__ = ["fanout_floor", "run_engine_overhead", "run_threads", "run_throughput"]


def fanout_floor(num_workers: int, requests: int = 200) -> dict:
    """The floor any thread engine pays per request (:class:`FanoutFloor`): a
    bare fan-out and gather of M no-op tasks, timed from the first put to the
    M-th answer gathered. Median and p99 in ms."""
    with FanoutFloor(num_workers) as fl:
        times = [fl.time_one() for _ in range(requests + 10)]
    t = np.asarray(times[10:])
    return {"requests": requests, "latency_ms": {q: 1e3 * pct(t, q) for q in (50, 99)}}


def _decisive_delay(r, delays_row: np.ndarray, deadline) -> float:
    """The injected delay of the answer after which the server decided (the ideal
    latency of that decision); the deadline when the deadline decided."""
    if r.timed_out:
        return float(deadline)
    arrived = int(r.mask.sum() + r.failed.sum())
    times = np.where(np.isfinite(r.arrival_times), delays_row, np.inf)
    return float(np.sort(times)[arrived - 1])


def run_threads(cfg: ServingConfig, *, show_progress: bool | None = None) -> dict:
    """Every scheme on the thread cluster, one request in flight at a time."""
    xs = request_inputs(cfg, cfg.num_requests)
    inj = injector(cfg)
    out = {}
    # every scheme has its own server; they take turns, `chunk` requests each, so
    # the machine's load (shared, changing) falls on every scheme alike
    runs = [(name, code, policy, ThreadCluster(injector=inj))
            for name, code, policy in schemes(cfg)]  # fmt: skip
    got = {name: [] for name, *_ in runs}
    loads = {name: [] for name, *_ in runs}
    walls = dict.fromkeys(got, 0.0)
    chunk = 10
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(Server(code, worker_fn, backend=backend,
                                              policy=policy))
                   for _, code, policy, backend in runs]  # fmt: skip
        starts = range(0, len(xs), chunk)
        bar = progress(starts, desc="thread cluster",
                       disable=True if show_progress is False else None)  # fmt: skip
        for s0 in bar:
            for (name, *_), server in zip(runs, servers, strict=True):
                loads[name].append(os.getloadavg()[0])
                t0 = time.perf_counter()
                got[name] += server.serve(xs[s0 : s0 + chunk], max_in_flight=1)
                walls[name] += time.perf_counter() - t0
    # after close(): a worker cancelled inside its call is free when it returns
    for name, code, policy, backend in runs:
        res, wall = got[name], walls[name]
        releases = np.asarray(backend.release_delays)
        in_call = np.asarray(backend.release_delays_in_call)
        m = code.num_workers
        delays, _ = inj.plan(np.arange(len(res)) + res[0].request_id, m)
        lat = np.array([r.latency for r in res])
        ideal = np.array([_decisive_delay(r, d, policy.deadline)
                          for r, d in zip(res, delays, strict=True)])  # fmt: skip
        if getattr(policy, "needs_answers", False):
            ideal_sim = ideal
        else:
            ideal_sim = simulate_latency(
                code, policy, inj, len(res), first_request=res[0].request_id
            ).latency
        # where the overhead goes: answers delivered after their injected delay
        # (thread wake-ups, the CPU), and encode + decode (latency - decided_at)
        late = np.concatenate([(r.arrival_times - d)[np.isfinite(r.arrival_times)]
                               for r, d in zip(res, delays, strict=True)])  # fmt: skip
        codec = np.array([r.latency - r.decided_at for r in res])
        ok = np.array([r.ok for r in res])
        err = rel_err(np.stack([r.value for r in res]), xs)
        out[name] = {
            "code": code.name,
            "num_workers": m,
            "policy": repr(policy),
            "requests": len(res),
            "ok_fraction": float(ok.mean()),
            "latency_ms": {q: 1e3 * pct(lat, q) for q in (50, 99, 99.9)},
            "ideal_ms": {q: 1e3 * pct(ideal_sim, q) for q in (50, 99, 99.9)},
            "overhead_ms": {q: 1e3 * pct(lat - ideal, q) for q in (50, 99)},
            "release_ms": {q: 1e3 * pct(releases, q) for q in (50, 99)},
            "released": int(releases.size),
            "released_in_call": int(in_call.size),
            "release_in_call_ms": {q: 1e3 * pct(in_call, q) for q in (50, 99)},
            "answer_late_ms": {q: 1e3 * pct(late, q) for q in (50, 99)},
            "encode_decode_ms": {q: 1e3 * pct(codec, q) for q in (50, 99)},
            "num_used_median": float(np.median([r.mask.sum() for r in res])),
            "error_median": pct(err[ok], 50),
            "error_p95": pct(err[ok], 95),
            "wall_seconds": wall,
            "loadavg_min": min(loads[name]),
            "loadavg_max": max(loads[name]),
        }
    return out


def run_throughput(cfg: ServingConfig, *, in_flight: int = 4) -> dict:
    """ChebyLS N = 30 with several requests in flight: throughput and queueing."""
    n = 30 if 30 in cfg.responses else cfg.responses[0]
    code = cj.lagrange_code(num_inputs=cfg.num_inputs, num_workers=cfg.num_workers,
                            degree=cfg.degree)  # fmt: skip
    xs = request_inputs(cfg, cfg.num_requests)
    out = {}
    for flight in (1, in_flight):
        with Server(code, worker_fn, backend=ThreadCluster(injector=injector(cfg)),
                    policy=FixedN(n)) as server:  # fmt: skip
            server.infer(xs[0])  # compile outside the timing
            t0 = time.perf_counter()
            res = server.serve(xs, max_in_flight=flight)
            wall = time.perf_counter() - t0
        lat = np.array([r.latency for r in res])
        out[str(flight)] = {
            "scheme": f"chebyls-{n}",
            "max_in_flight": flight,
            "requests_per_second": len(res) / wall,
            "latency_ms": {q: 1e3 * pct(lat, q) for q in (50, 99)},
            "loadavg": os.getloadavg()[0],
        }
    return out


def run_engine_overhead(cfg: ServingConfig, *, ray: bool = False,
                        requests: int = 100) -> dict:  # fmt: skip
    """Pure engine cost: ChebyLS N = M with no injected delay (the latency of a
    request whose workers answer at once), thread cluster and optionally Ray
    (embedded, as many actors as CPU cores, at most M, each with its share of
    the M workers as slots: Ray's cheapest layout on one machine,
    docs/results/ray.md)."""
    code = cj.lagrange_code(num_inputs=cfg.num_inputs, num_workers=cfg.num_workers,
                            degree=cfg.degree)  # fmt: skip
    xs = request_inputs(cfg, requests)
    backends = {"threads": lambda: ThreadCluster()}
    if ray:
        from codedjax.serving import RayCluster

        actors = min(cfg.num_workers, os.cpu_count() or 1)
        backends["ray"] = lambda: RayCluster(
            num_actors=actors, slots_per_actor=-(-cfg.num_workers // actors)
        )
    out = {}
    for name, make in backends.items():
        policy = FixedN(cfg.num_workers, deadline=30.0)
        with Server(code, worker_fn, backend=make(), policy=policy) as server:
            server.infer(xs[0])
            res = server.serve(xs, max_in_flight=1)
        lat = np.array([r.latency for r in res])
        out[name] = {
            "requests": requests,
            "latency_ms": {q: 1e3 * pct(lat, q) for q in (50, 99)},
            "loadavg": os.getloadavg()[0],
        }
    # the floor of a thread engine, timed in the same run (see fanout_floor)
    out["fanout_floor"] = {
        **fanout_floor(cfg.num_workers, requests),
        "loadavg": os.getloadavg()[0],
    }
    return out
