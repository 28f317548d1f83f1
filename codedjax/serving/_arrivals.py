"""Arrival processes of an open-loop load, and the check of arrival times.

* :func:`poisson_arrivals` and :func:`bursty_arrivals` (a two-state
  Markov-modulated Poisson process) draw arrival times, bounded in count and in
  time.
* :func:`arrival_times` checks times a user gives (``run_open_loop``'s
  ``times``, ``simulate_load``'s ``arrivals``): finite, >= 0, non-decreasing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import integer, number


def positive(fname: str, name: str, value: Any) -> float:
    """``value`` as a finite float > 0, or a clear error naming ``fname`` and
    ``name``."""
    return number(fname, name, value, positive=True)


def _count(fname: str, count: Any) -> int:
    return integer(fname, "count", count)


def arrival_times(
    fname: str, name: str, value: Any, count: int | None = None
) -> np.ndarray:
    """float64 [Q] finite non-decreasing times >= 0 (Q = ``count`` when given), or
    a clear error naming ``fname``, ``name`` and the first offending entry."""
    shape = "[Q]" if count is None else f"[Q] = [{count}] (one per query)"
    what = f"{shape} finite non-decreasing times in seconds >= 0"
    try:
        raw = np.asarray(value)
    except ValueError:  # ragged nesting
        raise ValueError(
            f"{fname}: {name} must be {what}, got a ragged {type(value).__name__}"
        ) from None
    if raw.dtype.kind not in "iuf":
        came = "None" if value is None else f"dtype {raw.dtype} {raw.shape}"
        raise TypeError(f"{fname}: {name} must be {what}, got {came}")
    t = raw.astype(np.float64)
    if t.ndim != 1 or (count is not None and t.size != count):
        raise ValueError(f"{fname}: {name} must be {what}, got shape {t.shape}")
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{fname}: {name} must be finite times >= 0 (seconds), got "
            f"{name}[{i}] = {raw[i].item()!r}"
        )
    down = np.flatnonzero(np.diff(t) < 0)
    if down.size:
        i = int(down[0])
        raise ValueError(
            f"{fname}: {name} must be non-decreasing (arrival order), got "
            f"{name}[{i}] = {raw[i].item()!r} > {name}[{i + 1}] = {raw[i + 1].item()!r}"
        )
    return t


def _bound(fname: str, times: np.ndarray, max_time: Any) -> np.ndarray:
    if max_time is None:
        return times
    return times[times <= positive(fname, "max_time", max_time)]


def poisson_arrivals(
    rate: float, count: int, *, seed: int = 0, max_time: float | None = None
) -> np.ndarray:
    """Arrival times of a Poisson process: ``count`` of them at ``rate`` per second.

    Args:
        rate: queries per second (finite, > 0).
        count: how many arrivals (>= 0).
        seed: the seed of the exponential gaps.
        max_time: optional: only the arrivals at or before this many seconds.

    Returns:
        float64 [count] (fewer with ``max_time``) increasing times in seconds from
        0 (the first gap included).

    Raises:
        ValueError: a rate (or max_time) that is not finite and > 0, count < 0.

    Examples:
        >>> from codedjax.serving import poisson_arrivals
        >>> t = poisson_arrivals(1000.0, 10_000, seed=1)
        >>> round(len(t) / t[-1])  # about the rate
        995
    """
    fname = "poisson_arrivals"
    lam = positive(fname, "rate", rate)
    n = _count(fname, count)
    seed = integer(fname, "seed", seed)
    gaps = np.random.default_rng([seed, 1]).exponential(1.0 / lam, n)
    return _bound(fname, np.cumsum(gaps), max_time)


def bursty_arrivals(
    rate: float,
    count: int,
    *,
    peak: float = 3.0,
    duty: float = 0.25,
    burst: float = 0.05,
    seed: int = 0,
    max_time: float | None = None,
) -> np.ndarray:
    """Arrival times of a two-state Markov-modulated Poisson process (bursts).

    The process alternates between a burst state, in which queries arrive at
    ``peak * rate`` per second, and a quiet state at the rate that keeps the mean
    at ``rate``; a burst lasts Exp(mean ``burst``) seconds and bursts take a
    fraction ``duty`` of the time (quiet spells last Exp(mean ``burst * (1 -
    duty) / duty``)). The process starts in its stationary state.

    Args:
        rate: the mean queries per second (finite, > 0).
        count: how many arrivals (>= 0).
        peak: the burst rate as a multiple of ``rate`` (>= 1, ``peak * duty <=
            1`` so the quiet rate is not negative).
        duty: the fraction of the time in bursts (in (0, 1)).
        burst: the mean burst length in seconds (> 0).
        seed: the seed of the draws.
        max_time: optional: only the arrivals at or before this many seconds.

    Returns:
        float64 [count] (fewer with ``max_time``) increasing times in seconds.

    Raises:
        ValueError: parameters outside the ranges above.
    """
    fname = "bursty_arrivals"
    lam = positive(fname, "rate", rate)
    n = _count(fname, count)
    pk = positive(fname, "peak", peak)
    q = positive(fname, "duty", duty)
    b = positive(fname, "burst", burst)
    if pk < 1 or q >= 1 or pk * q > 1:
        raise ValueError(
            f"{fname}: need peak >= 1, 0 < duty < 1 and peak * duty <= 1 (the "
            f"quiet rate (1 - peak duty) / (1 - duty) x rate must be >= 0), got "
            f"peak={peak!r}, duty={duty!r}"
        )
    rates = (lam * (1 - pk * q) / (1 - q), lam * pk)  # quiet, burst
    means = (b * (1 - q) / q, b)
    rng = np.random.default_rng([integer(fname, "seed", seed), 2])
    state = int(rng.random() < q)
    t, out = 0.0, []
    got = 0
    while got < n:
        length = rng.exponential(means[state])
        lam_s = rates[state]
        if lam_s > 0:
            k = rng.poisson(lam_s * length)
            if k:
                pts = np.sort(t + length * rng.random(k))
                out.append(pts[: n - got])
                got += min(k, n - got)
        t += length
        state = 1 - state
    times = np.concatenate(out) if out else np.zeros(0)
    return _bound(fname, times, max_time)
