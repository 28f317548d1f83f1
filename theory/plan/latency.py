"""Latency models: the time to the N-th of M i.i.d. worker responses."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _duration(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us)?\s*", text)
    if not m:
        raise ValueError(
            f"theory.plan: --latency: cannot read a duration from {text!r}"
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_latency(spec: str) -> tuple[str, tuple[float, ...]]:
    """``shifted-exp:SHIFT,MEAN``, ``exp:MEAN`` or ``pareto:SCALE,INDEX`` (seconds).

    Durations take a unit (s, ms, us; default s). Returns (model, parameters).
    """
    name, _, args = spec.partition(":")
    parts = [a for a in args.split(",") if a.strip()]
    try:
        if name == "shifted-exp" and len(parts) == 2:
            shift, mean = _duration(parts[0]), _duration(parts[1])
            if shift >= 0 and mean > 0:
                return name, (shift, mean)
        elif name == "exp" and len(parts) == 1:
            mean = _duration(parts[0])
            if mean > 0:
                return "shifted-exp", (0.0, mean)
        elif name == "pareto" and len(parts) == 2:
            scale, index = _duration(parts[0]), float(parts[1])
            if scale > 0 and index > 0:
                return name, (scale, index)
    except ValueError as err:
        raise ValueError(f"theory.plan: --latency: {err}") from err
    raise ValueError(
        "theory.plan: --latency: expected shifted-exp:SHIFT,MEAN, exp:MEAN or "
        f"pareto:SCALE,INDEX with positive values, got {spec!r}"
    )


def latency_percentiles(
    spec: str, *, num_workers: int, responses: Sequence[int], trials: int, seed: int
) -> dict[int, dict[str, float]]:
    """Percentiles (p50, p95, p99) and mean of the time to the N-th response.

    M i.i.d. worker latencies per trial (``trials`` trials), sorted; the N-th smallest
    is the time the master waits for N responses.
    """
    model, par = parse_latency(spec)
    rng = np.random.default_rng(seed)
    if model == "shifted-exp":
        lat = par[0] + rng.exponential(par[1], (trials, num_workers))
    else:
        lat = par[0] * rng.uniform(size=(trials, num_workers)) ** (-1.0 / par[1])
    lat.sort(axis=1)
    out = {}
    for n in sorted(set(responses)):
        t = lat[:, n - 1]
        out[n] = {
            "mean": float(t.mean()),
            "p50": float(np.quantile(t, 0.5)),
            "p95": float(np.quantile(t, 0.95)),
            "p99": float(np.quantile(t, 0.99)),
        }
    return out
