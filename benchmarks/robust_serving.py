"""Corrupted workers in serving: what the robust code reports and what it costs.

Usage::

    python -m benchmarks.robust_serving --out results/robust_serving   # ~1 min

The serving benchmark's setting (``benchmarks.serving``): K = 8 queries, M = 40 bf16
workers computing f(x) = x^3 - x on F = 64 features (D = 22), service time 5 ms +
Exp(5 ms), 10 times slower with probability 0.1. On each request a uniform number in
{0, 1} of workers returns its answer shifted by ``factor`` times the rms of the coded
answers (:class:`codedjax.serving.Injector`, fault ``"corrupt"``). Schemes, served on
the simulated cluster (the same delays and faults for every scheme):

- ``chebyls-30``: ChebyLS at the first 30 answers (does not look for corruption);
- ``robust1-30-dtype``: the robust code, A = 1, at 30 answers, with the default
  noise level (gamma from the degree, a homogeneous worker's rounding);
- ``robust1-30``, ``robust2-30``: A = 1, 2 with gamma from the first-order rounding
  analysis of this worker (:func:`rounding_gamma`), one gamma for every answer;
- ``robust1-30-sd``: A = 1 with a noise level per answer, the same rounding analysis
  at each worker's coded input (:func:`rounding_sd`, the server's ``noise_fn``);
- ``chebyls-first``, ``robust1-first``, ``robust1-first-sd``:
  :class:`~codedjax.serving.FirstDecodable`, which waits for D answers (ChebyLS) or
  D + 2A (robust).

Per scheme: the share of requests whose corrupted answer was decoded and flagged
(``located``, exactly that worker), decoded and not flagged (``missed``), the share
of clean requests with a worker flagged or ``ok`` False (``false alarm``), the
decoded error max |value - f(x)| / max |f(x)| (float64 truth; median and 99th
percentile), the answers used, the simulated decision latency (p50, p99: the
injected delays only) and the median time of one decode on this machine (the
master's cost; a ratio to ChebyLS's in the same run).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit
from codedjax.serving import (
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    SimulatedCluster,
)
from runkit import environment, progress

from .serving.workload import inputs, pct, rel_err, worker_fn


@dataclasses.dataclass(frozen=True)
class RobustServingConfig:
    """Everything that fixes a run.

    Attributes:
        num_inputs: K. num_workers: M. num_features: F. degree: d of x^3 - x.
        responses: N of the fixed-N schemes.
        factors: corruption sizes, in units of the rms of the coded answers.
        num_requests: requests per scheme and factor.
        decode_repeats: timed decodes per scheme (median).
        shift, mean, slow_prob, slow_factor: the service-time model.
        seed: the seed of inputs, delays and faults.
    """

    num_inputs: int = 8
    num_workers: int = 40
    num_features: int = 64
    degree: int = 3
    responses: int = 30
    factors: tuple[float, ...] = (0.1, 0.3, 1.0)
    num_requests: int = 400
    decode_repeats: int = 30
    shift: float = 0.005
    mean: float = 0.005
    slow_prob: float = 0.1
    slow_factor: float = 10.0
    seed: int = 0

    def __post_init__(self):
        name = "RobustServingConfig"
        fields = ("num_inputs", "num_workers", "num_features", "degree",
                  "num_requests", "decode_repeats")  # fmt: skip
        runkit.check_fields(name, self, at_least=dict.fromkeys(fields, 1))
        if not self.factors or not all(0 < f < float("inf") for f in self.factors):
            raise ValueError(
                f"{name}: factors must list finite sizes > 0, got {self.factors}"
            )


def schemes(cfg: RobustServingConfig, gamma: float):
    """(name, code, policy, noise_fn) of every scheme; ``gamma`` the worker's noise
    scale, ``noise_fn`` None or :func:`rounding_sd` (a level per answer)."""
    k, m, d, n = cfg.num_inputs, cfg.num_workers, cfg.degree, cfg.responses
    cheb = cj.lagrange_code(num_inputs=k, num_workers=m, degree=d)

    def robust(a, g=gamma):
        return cj.lagrange_code(num_inputs=k, num_workers=m, degree=d,
                                decoder="robust", max_corrupted=a,
                                noise_scale=g)  # fmt: skip

    # per answer: the code's gamma is unused (noise_sd replaces it)
    return [
        (f"chebyls-{n}", cheb, FixedN(n), None),
        (f"robust1-{n}-dtype", robust(1, None), FixedN(n), None),
        (f"robust1-{n}", robust(1), FixedN(n), None),
        (f"robust2-{n}", robust(2), FixedN(n), None),
        (f"robust1-{n}-sd", robust(1, None), FixedN(n), rounding_sd),
        ("chebyls-first", cheb, FirstDecodable(), None),
        ("robust1-first", robust(1), FirstDecodable(), None),
        ("robust1-first-sd", robust(1, None), FirstDecodable(), rounding_sd),
    ]


BF16_UNIT = cj.unit_roundoff(jnp.bfloat16)  # u = 2^-8


def _entry_sd(v: np.ndarray) -> np.ndarray:
    r"""The rounding error's standard deviation of each entry of v^3 - v, in units
    of u (float64): see :func:`rounding_gamma`."""
    return np.sqrt((((3 * v**2 - 1) * v) ** 2 + 2 * v**6 + (v**3 - v) ** 2) / 3.0)


def rounding_sd(rows) -> np.ndarray:
    r"""Each answer's rounding level from the worker's computation at its input.

    The master knows the coded rows it sent, [M, F]; the first-order rounding
    analysis of :func:`rounding_gamma` gives every entry's standard deviation
    u sigma(v) (u = 2^-8, bf16). A worker's level is the largest over its F
    entries: the decoder studentises every entry of an answer by its worker's
    level, and its false-alarm bound needs each entry's error within it. Nothing
    here looks at answers or detection outcomes.

    Returns:
        float32 [M] standard deviations (the server's ``noise_fn``).
    """
    v = np.asarray(rows, np.float64)
    sd = BF16_UNIT * _entry_sd(v)
    return sd.reshape(v.shape[0], -1).max(axis=1).astype(np.float32)


def rounding_gamma(cfg: RobustServingConfig, xs: np.ndarray, code) -> float:
    r"""gamma of this worker from its first-order rounding analysis (no detection data).

    A bf16 worker computing v^3 - v rounds its input (v), v^2, v^3 and the
    difference, each by an independent relative error of standard deviation
    u / sqrt(3), so its answer's error has standard deviation

    .. math:: \sigma = \frac{u}{\sqrt 3}\sqrt{((3v^2 - 1) v)^2 + 2 v^6 + (v^3 - v)^2},

    large where v^3 and v cancel. The robust decoder's level is gamma u s_i with
    s_i = sqrt(mean_f y_if^2 + rms^2 / 4) (``docs/decoding.md``): gamma is the
    largest sigma / (u s_i) over the coded inputs of the first 32 requests.
    """
    v = np.asarray(jax.vmap(code.encode)(jnp.asarray(xs[:32])), np.float64)
    y = v**3 - v
    sd = _entry_sd(v)  # units of u
    rms = np.sqrt(np.mean(y**2, axis=(1, 2), keepdims=True))
    size = np.sqrt(np.mean(y**2, axis=2, keepdims=True) + rms**2 / 4)
    return float(np.max(sd / size))


def noise_levels(xs: np.ndarray, code, gamma: float, rms: float) -> dict:
    """Percentiles (10, 50, 90) over the workers of the first 32 requests of the
    answers' noise levels in units of ``rms``: per answer (:func:`rounding_sd`) and
    the one gamma's (gamma u s_i, s_i the decoder's answer size)."""
    v = np.asarray(jax.vmap(code.encode)(jnp.asarray(xs[:32])), np.float64)
    per = np.stack([rounding_sd(r) for r in v])
    y = v**3 - v
    size = np.sqrt(np.mean(y**2, axis=2) + np.mean(y**2, axis=(1, 2))[:, None] / 4)
    glob = gamma * BF16_UNIT * size
    q = (10, 50, 90)
    return dict(per_answer=[pct(per / rms, p) for p in q],
                global_gamma=[pct(glob / rms, p) for p in q])  # fmt: skip


def _inputs(cfg: RobustServingConfig) -> np.ndarray:
    return inputs(cfg.seed, cfg.num_requests, cfg.num_inputs, cfg.num_features)


def answer_rms(cfg: RobustServingConfig, xs: np.ndarray, code) -> float:
    """The rms of the coded answers (the unit of the corruption size)."""
    y = jax.vmap(jax.vmap(worker_fn))(jax.vmap(code.encode)(jnp.asarray(xs[:32])))
    return float(np.sqrt(np.mean(np.asarray(y, np.float64) ** 2)))


def _decode_time(code, y, mask, repeats: int, noise_sd=None) -> float:
    kw = {} if noise_sd is None else dict(noise_sd=jnp.asarray(noise_sd))
    jax.block_until_ready(code.decode(y, mask, **kw))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(code.decode(y, mask, **kw))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run_scheme(cfg, name, code, policy, xs, inj, *, show_progress=True,
               noise_fn=None) -> dict:  # fmt: skip
    """Serves every request of ``xs`` and counts what was reported (``noise_fn``:
    the server's per-answer noise level, or None)."""
    m = cfg.num_workers
    _, faults = inj.plan(np.arange(len(xs)), m)
    with Server(code, worker_fn, backend=SimulatedCluster(injector=inj),
                policy=policy, noise_fn=noise_fn) as server:  # fmt: skip
        it = progress(xs, desc=name, disable=None if show_progress else True)
        rs = [server.infer(x) for x in it]
    located = missed = other = corrupted = clean = alarms = 0
    for r, f in zip(rs, faults, strict=True):
        bad = np.flatnonzero((f > 0) & r.mask)
        flagged = r.suspect_ids.tolist()
        if bad.size:
            corrupted += 1
            if flagged == bad.tolist() and r.ok:  # decoded, exactly that worker
                located += 1
            elif not flagged and r.ok:
                missed += 1
            else:
                other += 1
        else:
            clean += 1
            alarms += bool(flagged) or not r.ok
    err = rel_err(np.stack([r.value for r in rs]), xs)
    lat = np.array([r.decided_at for r in rs])
    last = rs[-1]
    sd = None if noise_fn is None else noise_fn(np.asarray(code.encode(xs[-1])))
    dt = _decode_time(code, jnp.asarray(last.responses), jnp.asarray(last.mask),
                      cfg.decode_repeats, sd)  # fmt: skip
    return dict(
        scheme=name,
        requests=len(rs),
        corrupted=corrupted,
        located=located / max(corrupted, 1),
        missed=missed / max(corrupted, 1),
        other=other / max(corrupted, 1),
        clean=clean,
        false_alarm=alarms / max(clean, 1),
        ok=float(np.mean([r.ok for r in rs])),
        err_p50=pct(err, 50),
        err_p99=pct(err, 99),
        used=float(np.mean([r.num_used for r in rs])),
        answers=float(np.mean([r.mask.sum() for r in rs])),
        latency_p50_ms=1e3 * pct(lat, 50),
        latency_p99_ms=1e3 * pct(lat, 99),
        decode_ms=1e3 * dt,
    )


class RobustServingSummary(TypedDict):
    """What :func:`run` returns (``summary.json``): the configuration, the answers'
    rms and noise levels, and one row per (corruption size, scheme) with the share
    of requests located, missed and falsely alarmed, the decoded error, latency and
    decode time."""

    config: dict[str, Any]
    answer_rms: float
    gamma: float
    noise_levels: dict[str, list[float]]
    rows: list[dict[str, Any]]
    environment: dict[str, Any]
    load: tuple[float, float, float]
    seconds: float


def run(
    cfg: RobustServingConfig, *, show_progress: bool = True
) -> RobustServingSummary:
    t0 = time.perf_counter()
    xs = _inputs(cfg)
    cheb = cj.lagrange_code(num_inputs=cfg.num_inputs, num_workers=cfg.num_workers,
                            degree=cfg.degree)  # fmt: skip
    gamma = rounding_gamma(cfg, xs, cheb)
    table = schemes(cfg, gamma)
    rms = answer_rms(cfg, xs, cheb)
    rows = []
    for factor in cfg.factors:
        inj = Injector(
            latency=cj.RandomSlowdown(
                cj.ShiftedExponential(cfg.shift, cfg.mean),
                prob=cfg.slow_prob,
                factor=cfg.slow_factor,
            ),  # fmt: skip
            fault_kinds=("corrupt",),
            max_faulty=1,
            corrupt_scale=factor * rms,
            seed=cfg.seed,
        )
        for name, code, policy, noise_fn in table:
            row = run_scheme(cfg, name, code, policy, xs, inj,
                             show_progress=show_progress,
                             noise_fn=noise_fn)  # fmt: skip
            rows.append(dict(factor=factor, **row))
    base = {r["factor"]: r["decode_ms"] for r in rows if r["scheme"] == table[0][0]}
    for r in rows:
        r["decode_ratio"] = r["decode_ms"] / base[r["factor"]]
    return RobustServingSummary(
        config=dataclasses.asdict(cfg),
        answer_rms=rms,
        gamma=gamma,
        noise_levels=noise_levels(xs, cheb, gamma, rms),
        rows=rows,
        environment=environment(),
        load=os.getloadavg(),
        seconds=time.perf_counter() - t0,
    )


def format_table(summary: dict) -> str:
    cols = ("factor", "scheme", "corrupted", "located", "missed", "false_alarm",
            "err_p50", "err_p99", "answers", "latency_p50_ms", "latency_p99_ms",
            "decode_ms", "decode_ratio")  # fmt: skip
    rows = [
        [f"{r[c]:.3g}" if isinstance(r[c], float) else r[c] for c in cols]
        for r in summary["rows"]
    ]
    return "\n".join(runkit.md_table(cols, rows))


def _run(cfg: RobustServingConfig, cmd: runkit.Invocation) -> RobustServingSummary:
    summary = run(cfg, show_progress=cmd.progress)
    path = runkit.write_summary(Path(cmd.out) / "summary.json", summary)
    print(format_table(summary))
    cmd.write_page(title="Corrupted workers served", body=format_table(summary))
    print(f"wrote {path} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


def main(argv: list[str] | None = None) -> RobustServingSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        RobustServingConfig, _run, argv, prog="python -m benchmarks.robust_serving",
        description="Corrupted workers in serving: what the robust code reports and "
        "what it costs.", flags={"num_requests": "--requests"},
        out="results/robust_serving",
    )  # fmt: skip


if __name__ == "__main__":
    main()
