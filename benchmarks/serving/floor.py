"""The engine's own cost against the floor of any thread engine.

The floor (:class:`FanoutFloor`) is a bare fan-out and gather of M no-op tasks
on a pool of M threads (one ``queue.PriorityQueue`` of tasks, each answer
deposited under one ``threading.Condition`` that wakes the gathering thread),
timed from the first put to the M-th answer gathered.

:func:`run_engine_floor` serves requests whose workers do nothing (a worker
that returns its coded row, not jitted, no injected delay) on the thread
cluster, at several M and with every built-in policy, the floor of the same M
timed in turn with them (10 requests each, round robin, so the machine's load
falls on all alike). A request's latency there is the engine's whole cost:
the encode, the fan-out, the gather, the policy's checks, the decode and the
result; ``decided_at`` is the fan-out, the gather and the policy (with the
decodes a policy asks for). The code's own work (its ``encode`` and every
``decode_answers`` call, timed per request by :class:`TimedCode`) is the
``codec`` column; the engine's own cost is the latency without it, and its ratio
to the floor (``engine_over_floor``: the median of latency - codec over the
floor's median, same run) is the figure of merit; ``over_floor`` is the whole
latency's. ``cpu_ms`` is the process's CPU time per request (per fan-out for
the floor): the work itself, which the machine's load does not stretch.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time

import jax
import numpy as np

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    Deadline,
    FirstDecodable,
    FixedN,
    Server,
    ThreadCluster,
)

from .config import ServingConfig, request_inputs
from .workload import pct

__all__ = [
    "FanoutFloor",
    "TimedCode",
    "floor_policies",
    "format_floor",
    "noop_worker",
    "run_engine_floor",
]


class TimedCode:
    """A code whose ``encode`` and ``decode_answers`` calls are timed: the
    code's own work, told apart from the engine's. Every other member is the
    code's own. ``log`` holds ``(kind, seconds)`` of every call."""

    def __init__(self, code):
        self.__dict__["code"] = code
        self.__dict__["log"] = []

    def __getattr__(self, name):
        return getattr(self.__dict__["code"], name)

    def encode(self, x):
        t0 = time.perf_counter()
        out = jax.block_until_ready(self.code.encode(x))
        self.log.append(("encode", time.perf_counter() - t0))
        return out

    def decode_answers(self, answers):
        t0 = time.perf_counter()
        out = jax.block_until_ready(self.code.decode_answers(answers))
        self.log.append(("decode", time.perf_counter() - t0))
        return out

    def per_request(self) -> np.ndarray:
        """Seconds of encode and decode per request, in order (a request's
        calls run from its encode to the next request's), and clears the
        log."""
        out: list[float] = []
        for kind, dt in self.log:
            if kind == "encode":
                out.append(0.0)
            if out:
                out[-1] += dt
        self.log.clear()
        return np.asarray(out)


class FanoutFloor:
    """M threads that take no-op tasks from one priority queue and deposit
    them under one condition; :meth:`time_one` times one fan-out and gather.
    Use as a context manager (the threads end on exit)."""

    def __init__(self, num_workers: int):
        self.num_workers = int(num_workers)
        self._tasks: queue.PriorityQueue = queue.PriorityQueue()
        self._cv = threading.Condition(threading.Lock())
        self._done: list = []
        self._seq = itertools.count()
        self._threads = [
            threading.Thread(target=self._work, daemon=True)
            for _ in range(self.num_workers)
        ]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            _, _, task = self._tasks.get()
            if task is None:
                return
            with self._cv:
                self._done.append(task)
                self._cv.notify_all()

    def time_one(self) -> float:
        """Seconds from the first put to the M-th answer gathered."""
        m = self.num_workers
        t0 = time.perf_counter()
        with self._cv:
            self._done.clear()
        for i in range(m):
            self._tasks.put((t0, next(self._seq), i))
        with self._cv:
            while len(self._done) < m:
                self._cv.wait()
        return time.perf_counter() - t0

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put((float("inf"), next(self._seq), None))
        for t in self._threads:
            t.join()

    def __enter__(self) -> FanoutFloor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def noop_worker(v):
    """A worker that does nothing: it answers its coded row."""
    return v


def floor_policies(num_workers: int) -> dict:
    """Every built-in policy, as the floor table runs it: ``FixedN(M)`` and
    ``Deadline`` wait for every answer (like the floor's gather),
    ``FirstDecodable`` and ``Adaptive`` (a budget every decode meets) decide at
    the first decode that is ok."""
    return {
        "FixedN": FixedN(num_workers),
        "FirstDecodable": FirstDecodable(),
        "Deadline": Deadline(30.0),
        "Adaptive": Adaptive(1.0, 30.0),
    }


def run_engine_floor(cfg: ServingConfig, *, chunk: int = 10) -> dict:
    """The engine with a no-op worker against the floor, at each M of
    ``cfg.floor_workers``, for every policy (see the module), with
    ``cfg.floor_requests`` requests each.

    Returns:
        ``{str(M): {"floor": {...}, policy: {...}}}``: latencies in ms (p50,
        p99), ``decided_ms`` (p50), ``answers_used`` (median), ``over_floor``
        (median latency / the floor's median), the load average.
    """
    n = cfg.floor_requests
    xs = request_inputs(cfg, n + 2)
    out: dict = {}
    for m in cfg.floor_workers:
        k = min(cfg.num_inputs, m)
        ks = xs[:, :k]
        pols = floor_policies(m)
        floor: list[float] = []
        got: dict = {name: [] for name in pols}
        codec: dict = {name: [] for name in pols}
        cpu = dict.fromkeys(["floor", *pols], 0.0)  # the process's CPU seconds
        codes = {
            name: TimedCode(cj.lagrange_code(num_inputs=k, num_workers=m, degree=1))
            for name in pols
        }
        loads = []
        servers = {
            name: Server(codes[name], noop_worker, backend=ThreadCluster(jit=False),
                         policy=pol)
            for name, pol in pols.items()
        }  # fmt: skip
        try:
            for name, s in servers.items():
                s.serve(ks[:2], max_in_flight=1)  # compile, outside the timing
                codes[name].per_request()
            with FanoutFloor(m) as fl:
                for _ in range(10):
                    fl.time_one()
                for s0 in range(2, n + 2, chunk):
                    loads.append(os.getloadavg()[0])
                    c0 = time.process_time()
                    floor += [fl.time_one() for _ in range(min(chunk, n + 2 - s0))]
                    cpu["floor"] += time.process_time() - c0
                    for name, s in servers.items():
                        c0 = time.process_time()
                        got[name] += s.serve(ks[s0 : s0 + chunk], max_in_flight=1)
                        cpu[name] += time.process_time() - c0
                        codec[name].append(codes[name].per_request())
        finally:
            for s in servers.values():
                s.close()
        f = np.asarray(floor)
        f50 = 1e3 * pct(f, 50)
        row: dict = {
            "floor": {
                "latency_ms": {50: f50, 99: 1e3 * pct(f, 99)},
                "cpu_ms": 1e3 * cpu["floor"] / len(f),
            },
            "num_inputs": k,
            "loadavg_min": min(loads),
            "loadavg_max": max(loads),
        }
        for name, res in got.items():
            lat = 1e3 * np.array([r.latency for r in res])
            dec = 1e3 * np.array([r.decided_at for r in res])
            cod = 1e3 * np.concatenate(codec[name])
            own = lat - cod
            row[name] = {
                "policy": repr(pols[name]),
                "requests": len(res),
                "latency_ms": {50: pct(lat, 50), 99: pct(lat, 99)},
                "decided_ms": {50: pct(dec, 50)},
                "codec_ms": {50: pct(cod, 50)},
                "engine_ms": {50: pct(own, 50), 99: pct(own, 99)},
                "engine_over_floor": pct(own, 50) / f50,
                "answers_used": float(np.median([r.num_used for r in res])),
                "ok_fraction": float(np.mean([r.ok for r in res])),
                "over_floor": pct(lat, 50) / f50,
                "cpu_ms": 1e3 * cpu[name] / len(res),
            }
        out[str(m)] = row
    return out


def format_floor(table: dict) -> list[str]:
    """The floor table's lines (markdown)."""
    lines = [
        "Engine with a no-op worker against the floor (bare fan-out and gather of "
        "M no-op tasks), same run, in turns: latency, the code's encode and "
        "decodes (codec), the engine's own (latency - codec), over the floor",
        "| M | floor p50 ms | policy | latency p50 | p99 | decided p50 | codec p50 "
        "| engine p50 | engine p99 | answers | engine / floor | latency / floor "
        "| CPU ms (floor) | load |",
        "|" + "---|" * 14,
    ]
    for m, row in table.items():
        fl = row["floor"]["latency_ms"]
        for name, v in row.items():
            if not isinstance(v, dict) or name == "floor":
                continue
            lat = v["latency_ms"]
            own = v["engine_ms"]
            lines.append(
                f"| {m} | {fl[50]:.3f} | {name} | {lat[50]:.3f} | {lat[99]:.3f} | "
                f"{v['decided_ms'][50]:.3f} | {v['codec_ms'][50]:.3f} | "
                f"{own[50]:.3f} | {own[99]:.3f} | {v['answers_used']:.0f} | "
                f"{v['engine_over_floor']:.2f} | {v['over_floor']:.2f} | "
                f"{v['cpu_ms']:.3f} ({row['floor']['cpu_ms']:.3f}) | "
                f"{row['loadavg_min']:.1f}-{row['loadavg_max']:.1f} |"
            )
    return lines
