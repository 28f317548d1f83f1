"""What to plan for: :class:`PlanConfig` (the command line's flags) and its checks."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import jax.numpy as jnp

import codedjax as cj

DTYPES = ("bfloat16", "float16", "float32", "float64")
ERROR_MODELS = ("decoder", "cond", "rowsum")
WORKLOADS = ("polynomial", "deep")


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """What to plan for (the command line's flags).

    Attributes:
        workers: M. inputs: K. degree: d (D = d (K - 1) + 1 <= M).
        worker_dtype: the dtype the workers compute in (its unit roundoff u_w).
        target_error: the relative decode error that must not be exceeded.
        failure: the probability allowed to exceed it, in (0, 1).
        points: "first" or "second" kind Chebyshev worker points.
        error_model: "decoder" (default: the decoder's own predicted error,
            ``DecodeResult.error``), "cond" (cond(U_S) u_w, which the proven bounds
            bound) or "rowsum" (||A_S||_inf u_w); see :mod:`theory.plan.errors`.
        replication: c for RepApprox (default M // K).
        trials: Monte Carlo trials per N (nested: trial t's responders for N are the
            first N of one random arrival order, so each N sees a uniform N-subset).
        exhaustive_limit: list every responding set when C(M, N) is at most this.
        confidence: level of the one-sided Clopper-Pearson upper bound.
        latency: a latency model such as "shifted-exp:5ms,5ms", or None.
        worst_exact: exact worst case for s = 1 .. worst_exact missing workers.
        worst_greedy: greedy worst case for s = 1 .. worst_greedy.
        schemes: "all" or a comma-separated list of schemes to compare
            (:mod:`theory.plan.schemes`; needs ``latency``), or None.
        workload: "polynomial" (degree ``degree``) or "deep" (non-polynomial), the
            worker function of the scheme comparison.
        scheme_requests: simulated requests per scheme and N.
        max_workers: with ``schemes``: search M from ``workers`` to this
            (:mod:`theory.plan.search`: each scheme's smallest M) instead of
            planning one M; None: plan M = ``workers``.
        p99_target: seconds; in the search over M, a scheme must also have a p99
            at most this (None: no latency target).
        seed: the Monte Carlo seed.
        progress: show progress bars.
    """

    workers: int
    inputs: int
    degree: int
    worker_dtype: str = "bfloat16"
    target_error: float = 1e-2
    failure: float = 1e-3
    points: str = "first"
    error_model: str = "decoder"
    replication: int | None = None
    trials: int = 20_000
    exhaustive_limit: int = 100_000
    confidence: float = 0.95
    latency: str | None = None
    worst_exact: int = 3
    worst_greedy: int = 6
    schemes: str | None = None
    workload: str = "polynomial"
    scheme_requests: int = 20_000
    max_workers: int | None = None
    p99_target: float | None = None
    seed: int = 0
    progress: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> PlanConfig:
        """The ``--quick`` configuration: 2,000 Monte Carlo trials per N, every set
        listed only up to 10,000 of them (``workers``, ``inputs`` and ``degree`` are
        still required)."""
        return cls(
            **{
                "trials": 2_000,
                "exhaustive_limit": 10_000,
                "scheme_requests": 4_000,
                **overrides,
            }
        )

    @property
    def num_coeffs(self) -> int:
        return self.degree * (self.inputs - 1) + 1


def _fail(flag: str, msg: str) -> None:
    raise ValueError(f"theory.plan: {flag}: {msg}")


def validate(cfg: PlanConfig) -> None:
    """Raise ValueError naming the flag for every impossible setting."""
    if cfg.workers < 1:
        _fail("--workers", f"must be >= 1, got {cfg.workers}")
    if cfg.inputs < 1:
        _fail("--inputs", f"must be >= 1, got {cfg.inputs}")
    if cfg.degree < 1:
        _fail("--degree", f"must be >= 1, got {cfg.degree}")
    if cfg.num_coeffs > cfg.workers and cfg.schemes is None:
        _fail(
            "--degree/--inputs",
            f"D = d (K - 1) + 1 = {cfg.num_coeffs} exceeds --workers M = {cfg.workers}",
        )
    if cfg.worker_dtype not in DTYPES:
        _fail("--worker-dtype", f"must be one of {DTYPES}, got {cfg.worker_dtype!r}")
    if not 0.0 < cfg.target_error:
        _fail("--target-error", f"must be > 0, got {cfg.target_error}")
    uw = unit_roundoff(cfg.worker_dtype)
    if cfg.target_error < uw:
        # every error model is at least u_w per unit of max |y_S| (the decoding
        # matrix reproduces constants: its norm and cond are >= 1)
        _fail(
            "--target-error",
            f"{cfg.target_error:g} is below the {cfg.worker_dtype} workers' own "
            f"rounding u_w = {uw:.3g}: no N can be sure to meet it",
        )
    if not 0.0 < cfg.failure < 1.0:
        _fail("--failure", f"must lie in (0, 1), got {cfg.failure}")
    if not 0.0 < cfg.confidence < 1.0:
        _fail("--confidence", f"must lie in (0, 1), got {cfg.confidence}")
    if cfg.points not in ("first", "second"):
        _fail("--points", f"must be 'first' or 'second', got {cfg.points!r}")
    if cfg.points == "second" and cfg.workers < 2:
        _fail("--points", f"second-kind points need --workers >= 2, got {cfg.workers}")
    if cfg.error_model not in ERROR_MODELS:
        _fail(
            "--error-model",
            f"must be one of {ERROR_MODELS}, got {cfg.error_model!r}",
        )
    if cfg.trials < 1:
        _fail("--trials", f"must be >= 1, got {cfg.trials}")
    if cfg.scheme_requests < 100:
        _fail("--scheme-requests", f"must be >= 100, got {cfg.scheme_requests}")
    if cfg.max_workers is not None:
        _validate_search(cfg)
    else:
        if cfg.p99_target is not None:
            _fail("--p99-target", "applies to a search over M (--workers LO..HI)")
        c = replication(cfg)
        if c < 1 or cfg.inputs * c > cfg.workers:
            _fail("--replication", f"need 1 <= c and K c <= M, got c = {c}")
    if cfg.latency is not None:
        try:
            cj.parse_latency(cfg.latency)
        except (TypeError, ValueError) as err:
            _fail("--latency", str(err))
    if cfg.workload not in WORKLOADS:
        _fail("--workload", f"must be one of {WORKLOADS}, got {cfg.workload!r}")
    if cfg.schemes is not None:
        _validate_schemes(cfg)


def _validate_search(cfg: PlanConfig) -> None:
    if cfg.schemes is None:
        _fail("--workers", "a range LO..HI needs --schemes (and --latency)")
    if cfg.max_workers < cfg.workers:
        _fail(
            "--workers",
            f"a range LO..HI needs LO <= HI, got {cfg.workers}..{cfg.max_workers}",
        )
    if cfg.p99_target is not None and not 0 < cfg.p99_target < math.inf:
        _fail("--p99-target", f"must be a finite time > 0, got {cfg.p99_target}")


def workers_arg(text: str) -> int | tuple[int, int]:
    """``--workers``: M, or a range ``LO..HI`` of M to search (inclusive)."""
    try:
        if ".." in text:
            lo, hi = text.split("..")
            return (int(lo), int(hi))
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected M or a range LO..HI, got {text!r}"
        ) from None


def seconds_arg(text: str) -> float:
    """A time such as ``30ms``, ``250us`` or ``0.03s`` (a bare number: seconds)."""
    t = text.strip()
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
        if t.endswith(unit):
            t, sc = t[: -len(unit)], scale
            break
    else:
        sc = 1.0
    try:
        v = float(t) * sc
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a time such as 30ms, got {text!r}"
        ) from None
    if not 0 < v < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite time > 0, got {text!r}")
    return v


def selected(spec: str) -> tuple[str, ...]:
    """The schemes named by ``--schemes``: "all" (every name of
    ``codedjax.SCHEME_NAMES``) or a comma-separated list of them."""
    if spec.strip() == "all":
        return cj.SCHEME_NAMES
    names = tuple(s.strip() for s in spec.split(","))
    bad = [s for s in names if s not in cj.SCHEME_NAMES]
    if bad:
        raise ValueError(
            f"theory.plan: --schemes: expected 'all' or names from "
            f"{cj.SCHEME_NAMES}, got {spec!r}"
        )
    return names


def _validate_schemes(cfg: PlanConfig) -> None:
    selected(cfg.schemes)
    if cfg.latency is None:
        _fail("--schemes", "needs a --latency model to rank the schemes by")


def replication(cfg: PlanConfig) -> int:
    return cfg.replication if cfg.replication is not None else cfg.workers // cfg.inputs


def unit_roundoff(name: str) -> float:
    """u_w of the worker dtype named ``name`` (:func:`codedjax.unit_roundoff`:
    bfloat16 2^-8, float16 2^-11, float32 2^-24, float64 2^-53)."""
    return float(cj.unit_roundoff(jnp.dtype(name)))
