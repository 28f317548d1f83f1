"""The time to the N-th of M worker responses, under a library latency model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import codedjax as cj


def parse_latency(spec: str) -> cj.LatencyModel:
    """The library's latency model for ``--latency`` (its text form, e.g.
    ``shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms``); a text it cannot read is a
    ValueError naming the option."""
    try:
        return cj.parse_latency(spec)
    except (TypeError, ValueError) as err:
        raise ValueError(f"theory.plan: --latency: {err}") from err


def latency_percentiles(
    spec: str, *, num_workers: int, responses: Sequence[int], trials: int, seed: int
) -> dict[int, dict[str, float]]:
    """Percentiles (p50, p95, p99) and mean of the time to the N-th response.

    M worker latencies per trial (``trials`` trials) from the model, sorted; the
    N-th smallest is the time the master waits for N responses.
    """
    model = parse_latency(spec)
    lat = model.sample(np.random.default_rng(seed), (trials, num_workers))
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
