"""What fixes a load benchmark run: the cluster, the delay models, the load grid."""

from __future__ import annotations

import dataclasses
import math

import codedjax as cj

__all__ = ["DELAY_MODELS", "LoadConfig"]

#: the delay models of ``benchmarks.serving`` (5 ms + Exp(mean 5 ms), a worker 10x
#: slower with probability 0.1 per request; and the same with racks of 5
#: consecutive workers slowed together), and the regime map's heavy tail
DELAY_MODELS = {
    "independent": "shifted-exp:5ms,5ms; slow=0.1 factor=10",
    "racks": "shifted-exp:5ms,5ms; slow=0.1 factor=10 rack=5",
    "heavy-tail": "shifted-pareto:5ms,1ms,1.5",
}


@dataclasses.dataclass(frozen=True)
class LoadConfig:
    """Everything that fixes a load benchmark run.

    Attributes:
        num_inputs: K, the queries coded together.
        workers: the cluster sizes M.
        delays: names of :data:`DELAY_MODELS` to sweep.
        num_features: F, the width of the linear workload (a bf16 matrix product
            F -> F, degree 1, so every code applies from M = K + 1).
        p99_target: the p99 latency (seconds) under which a rate is sustained.
        group_deadlines: seconds a coding group waits to fill (K > 1 schemes):
            each is swept and the one with the largest sustained rate kept (a
            group sent short is padded, and its padding costs the workers as
            much as real queries, so the best deadline depends on the rate).
        num_queries: queries per simulated point (a Poisson stream).
        num_rates: points of each latency curve (offered loads up to saturation).
        bisection: simulator runs per scheme to find its largest sustained rate.
        accuracy_groups: groups of K queries for each scheme's decoded error.
        error_factor: the accuracy target: a scheme's median decoded error at
            most this times an uncoded bf16 worker's
            (:func:`runkit.stats.accuracy_target`).
        replication: the replication factors c tried at equal workers (groups of
            M // c queries).
        thread_rates: offered loads (fractions of the largest sustained rate of
            a scheme) at which the thread cluster is checked against the
            simulator.
        thread_queries: queries per thread-cluster check.
        noloss_queries: queries of the no-loss run (thread cluster, faults).
        noloss_fraction: its rate, as a fraction of the scheme's sustained rate.
        noloss_deadline: its policy's deadline (seconds; workers can hang).
        warmup: the fraction of each stream's first queries left out of the
            percentiles (the queues start empty).
        saturated: a curve stops after the first rate whose p99 exceeds this
            multiple of the target.
        grid_top: the grid's highest rate, in units of M / E[T] (uncoded
            serving's capacity on M workers).
        grid_span: the grid's highest rate over its lowest.
        check_delay: the delay model of the thread-cluster checks.
        check_workers: their M.
        thread_timeout: seconds a thread run waits for its last answers.
        seed: the seed of the inputs, the delays and the arrivals.
    """

    num_inputs: int = 8
    workers: tuple[int, ...] = (10, 12, 16, 40)
    delays: tuple[str, ...] = ("independent", "racks", "heavy-tail")
    num_features: int = 16
    p99_target: float = 0.05
    group_deadlines: tuple[float, ...] = (0.005, 0.01, 0.02)
    num_queries: int = 100_000
    num_rates: int = 12
    bisection: int = 10
    accuracy_groups: int = 512
    error_factor: float = 2.0
    replication: tuple[int, ...] = (2, 3, 4, 5)
    thread_rates: tuple[float, ...] = (0.3, 0.6, 0.9)
    thread_queries: int = 4000
    noloss_queries: int = 10_000
    noloss_fraction: float = 0.5
    noloss_deadline: float = 0.25
    warmup: float = 0.05
    saturated: float = 10.0
    grid_top: float = 3.0
    grid_span: float = 30.0
    check_delay: str = "independent"
    check_workers: int = 16
    thread_timeout: float = 60.0
    seed: int = 0

    def __post_init__(self):
        name = "LoadConfig"
        k = self.num_inputs
        counts = {"num_inputs": 1, "num_features": 1, "num_queries": 1,
                  "num_rates": 1, "bisection": 0, "accuracy_groups": 1,
                  "thread_queries": 1, "noloss_queries": 1, "seed": 0}  # fmt: skip
        for field, low in counts.items():
            if getattr(self, field) < low:
                raise ValueError(
                    f"{name}: {field} must be >= {low}, got {getattr(self, field)}"
                )
        lists = {
            "workers": lambda m: m > k,
            "delays": lambda d: d in DELAY_MODELS,
            "group_deadlines": lambda t: 0 < t < math.inf,
            "replication": lambda c: c >= 1,
            "thread_rates": lambda f: 0 < f <= 1,
        }
        wants = {
            "workers": f"M > K = {k} each",
            "delays": f"names of {', '.join(DELAY_MODELS)}",
            "group_deadlines": "seconds > 0 each",
            "replication": "factors c >= 1 each",
            "thread_rates": "fractions in (0, 1] of a scheme's sustained rate",
        }
        for field, ok in lists.items():
            v = tuple(getattr(self, field))
            if not v or not all(map(ok, v)):
                raise ValueError(
                    f"{name}: {field} must list {wants[field]}, got {list(v)}"
                )
        if self.check_delay not in DELAY_MODELS:
            raise ValueError(
                f"{name}: check_delay must be one of {', '.join(DELAY_MODELS)}, "
                f"got {self.check_delay!r}"
            )
        if self.check_workers <= k:
            raise ValueError(
                f"{name}: check_workers must exceed K = {k} (as every workers M "
                f"does), got {self.check_workers}"
            )
        ranges = {
            "p99_target": (0, math.inf, "seconds > 0"),
            "error_factor": (0, math.inf, "> 0"),
            "noloss_deadline": (0, math.inf, "seconds > 0"),
            "thread_timeout": (0, math.inf, "seconds > 0"),
            "grid_top": (0, math.inf, "> 0"),
        }
        for field, (lo, hi, want) in ranges.items():
            if not lo < getattr(self, field) < hi:
                raise ValueError(
                    f"{name}: {field} must be finite {want}, got {getattr(self, field)}"
                )
        if not 0 < self.noloss_fraction <= 1:
            raise ValueError(
                f"{name}: noloss_fraction must lie in (0, 1], got "
                f"{self.noloss_fraction}"
            )
        if not 0 <= self.warmup < 1:
            raise ValueError(f"{name}: warmup must lie in [0, 1), got {self.warmup}")
        if not (1 < self.saturated < math.inf and 1 <= self.grid_span < math.inf):
            raise ValueError(
                f"{name}: need finite saturated > 1 and grid_span >= 1, got "
                f"{self.saturated} and {self.grid_span}"
            )

    @classmethod
    def quick(cls, **overrides) -> LoadConfig:
        quick = dict(
            num_queries=10_000,
            num_rates=8,
            bisection=5,
            accuracy_groups=256,
            thread_queries=1500,
            delays=("independent",),
        )
        return cls(**{**quick, **overrides})

    def latency(self, name: str) -> cj.LatencyModel:
        if name not in DELAY_MODELS:
            raise ValueError(
                f"LoadConfig: delay model must be one of {sorted(DELAY_MODELS)}, "
                f"got {name!r}"
            )
        return cj.parse_latency(DELAY_MODELS[name])
