"""What fixes a load benchmark run: the cluster, the delay models, the search."""

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

    What is searched, per cell (a delay model and a cluster of M workers): every
    layout of the M workers as G = M // M' groups of a scheme on K' queries and
    M' workers (:func:`codedjax.layouts`, with the systematic variants), for K'
    in ``group_inputs``: at K' = 1 uncoded serving (M' = 1) and replication with
    c = M' copies for c in ``replication`` (a code of one query is replication
    with a decoder, so no other scheme at K' = 1); at K' >= 2 every scheme of
    the catalogue that applies to the bf16 linear layer (the Lagrange codes --
    ChebyLS, threshold, graceful, robust -- and their systematic variants, the
    circle code and its systematic variant at two real evaluations per worker,
    the random code, BACC and its systematic variant, NeRCC with the
    catalogue's smoothing, RepApprox, ParM's parity codes, replication of
    query i mod K') at every M' from K' + 1 to K' + max(``max_spares``,
    (``max_redundancy`` - 1) K') that leaves at most ``max_idle`` M workers
    idle; each at the smallest N (its wait policy's count) whose decoded
    queries meet the accuracy target; group deadline a
    :class:`codedjax.serving.FillDeadline` (the rate's fill time), else each
    of ``group_deadlines`` where the lowest rate fails with it, and for the
    bisected layouts also each of them where it sustains more; dispatch on
    arrival and per-query answers (the simulator's defaults).

    How (``search.py``): every layout is screened on ``screen_queries``
    arrivals at the rates of the grid, as if its N were the fewest it may
    decode from (a bound); per scheme family the layouts are taken in the
    order of that bound, narrowed one rate at a time, and each one's accuracy
    (its N) is measured only when it could still be the family's best (at
    most ``accuracy_tries`` per scheme of the family and cell, except that a
    layout this cap left unmeasured whose bracket reaches above the cell's
    best coded rate is measured too: the cap never decides a cell); the
    ``finalists`` best coded and replication layouts, the best systematic one,
    and any whose screened bracket reaches above them are bisected on
    ``num_queries`` arrivals (``bisection`` steps between two rates of the
    grid).

    Attributes:
        group_inputs: the K' tried (queries per coding group).
        workers: the cluster sizes M.
        delays: names of :data:`DELAY_MODELS` to sweep.
        num_features: F, the width of the linear workload (a bf16 matrix product
            F -> F, degree 1).
        p99_target: the p99 latency (seconds) under which a rate is sustained.
        max_spares: with ``max_redundancy``, the largest M' - K' tried (K' >= 2).
        max_redundancy: M' / K' tried up to this (or K' + ``max_spares``):
            4 by default, near replication's largest c (5), so that a code may
            spend the redundancy that slowdowns in racks ask for (with racks
            of 5 on 16 workers two slow racks leave a third of a group fast;
            at 2, racks M = 16 had no coded layout within 0.72x of
            replication's rate).
        max_idle: the largest fraction of the M workers a layout may leave idle
            (M - G M' when M' does not divide M); those that leave more lose
            capacity for nothing and are not tried.
        replication: the copies c tried at K' = 1 (groups of M' = c workers).
        group_deadlines: fixed group deadlines (seconds) tried besides the
            :class:`FillDeadline` (empty: none), in order.
        num_queries: queries per simulated point of the bisection and of the
            reported points (a Poisson stream).
        screen_queries: queries per point of the screening.
        num_rates: rates of the grid (geometric, ``grid_span`` wide, up to
            ``grid_top`` M / E[T]).
        bisection: steps of the bisection between two rates of the grid.
        finalists: the coded, and the replication, layouts bisected first.
        accuracy_groups: groups whose decoded errors measure a layout's accuracy.
        accuracy_tries: the most layouts per scheme of a family and per cell
            whose accuracy is measured (each measurement compiles a decoder):
            8: with codes tried up to 4x redundancy, 4 left 23-44 of the
            Lagrange families' 81 layouts at M = 40 unmeasured above their
            best, and some families' bests below what the search up to 2x had
            found (racks M = 40, Lagrange: 2140 against 2409 q/s).
        error_factor: the accuracy target: the median error of a layout's
            decoded queries (those its own workers did not answer) at most this
            times an uncoded bf16 worker's median (per query;
            :func:`runkit.stats.accuracy_target`).
        thread_rates: offered loads (fractions of a layout's sustained rate) at
            which the thread cluster is checked against the simulator.
        thread_queries: queries per thread-cluster check.
        noloss_queries: queries of the no-loss run (thread cluster, faults).
        noloss_fraction: its rate, as a fraction of the layout's sustained rate.
        noloss_deadline: its policy's deadline (seconds; workers can hang).
        warmup: the fraction of each stream's first queries left out of the
            percentiles (the queues start empty).
        grid_top: the grid's highest rate, in units of M / E[T] (uncoded
            serving's capacity on M workers).
        grid_span: the grid's highest rate over its lowest.
        check_delay: the delay model of the thread-cluster checks.
        check_workers: their M.
        thread_timeout: seconds a thread run waits for its last answers.
        seed: the seed of the inputs, the delays and the arrivals.
    """

    group_inputs: tuple[int, ...] = (1, 2, 4, 8)
    workers: tuple[int, ...] = (10, 12, 16, 40)
    delays: tuple[str, ...] = ("independent", "racks", "heavy-tail")
    num_features: int = 16
    p99_target: float = 0.05
    max_spares: int = 4
    max_redundancy: float = 4.0
    max_idle: float = 0.125
    replication: tuple[int, ...] = (2, 3, 4, 5)
    group_deadlines: tuple[float, ...] = (0.02, 0.01)
    num_queries: int = 12_000
    screen_queries: int = 3_000
    num_rates: int = 10
    bisection: int = 4
    finalists: int = 3
    accuracy_groups: int = 256
    accuracy_tries: int = 8
    error_factor: float = 2.0
    thread_rates: tuple[float, ...] = (0.3, 0.6, 0.9)
    thread_queries: int = 1500
    noloss_queries: int = 10_000
    noloss_fraction: float = 0.5
    noloss_deadline: float = 0.25
    warmup: float = 0.05
    grid_top: float = 3.0
    grid_span: float = 30.0
    check_delay: str = "independent"
    check_workers: int = 16
    thread_timeout: float = 60.0
    seed: int = 0

    def __post_init__(self):
        name = "LoadConfig"
        counts = {"num_features": 1, "num_queries": 1, "screen_queries": 1,
                  "num_rates": 2, "bisection": 0, "finalists": 1,
                  "accuracy_groups": 1, "accuracy_tries": 1, "max_spares": 1,
                  "thread_queries": 1, "noloss_queries": 1, "seed": 0}  # fmt: skip
        for field, low in counts.items():
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}: {field} must be an int >= {low}, got {v!r}")
        lists = {
            "group_inputs": (lambda k: k >= 1, "ints K' >= 1 each"),
            "workers": (lambda m: m >= 2, "cluster sizes M >= 2 each"),
            "delays": (lambda d: d in DELAY_MODELS,
                       f"names of {', '.join(DELAY_MODELS)}"),
            "replication": (lambda c: c >= 2, "copies c >= 2 each"),
            "thread_rates": (lambda f: 0 < f <= 1, "fractions in (0, 1]"),
        }  # fmt: skip
        for field, (ok, want) in lists.items():
            v = tuple(getattr(self, field))
            if not v or not all(map(ok, v)):
                raise ValueError(f"{name}: {field} must list {want}, got {list(v)}")
        if 1 not in self.group_inputs:
            raise ValueError(
                f"{name}: group_inputs must include 1 (uncoded serving and "
                f"replication), got {list(self.group_inputs)}"
            )
        if not all(0 < t < math.inf for t in self.group_deadlines):
            raise ValueError(
                f"{name}: group_deadlines must be seconds > 0 each (or none), got "
                f"{list(self.group_deadlines)}"
            )
        if self.check_delay not in DELAY_MODELS:
            raise ValueError(
                f"{name}: check_delay must be one of {', '.join(DELAY_MODELS)}, "
                f"got {self.check_delay!r}"
            )
        if self.check_workers < 2:
            raise ValueError(
                f"{name}: check_workers must be >= 2, got {self.check_workers}"
            )
        ranges = {
            "p99_target": "seconds > 0",
            "error_factor": "> 0",
            "noloss_deadline": "seconds > 0",
            "thread_timeout": "seconds > 0",
            "grid_top": "> 0",
        }
        for field, want in ranges.items():
            if not 0 < getattr(self, field) < math.inf:
                raise ValueError(
                    f"{name}: {field} must be finite {want}, got {getattr(self, field)}"
                )
        if not 0 <= self.max_idle < 1:
            raise ValueError(
                f"{name}: max_idle must lie in [0, 1), got {self.max_idle}"
            )
        if not 1 <= self.max_redundancy < math.inf:
            raise ValueError(
                f"{name}: max_redundancy must be finite and >= 1, got "
                f"{self.max_redundancy}"
            )
        if not 0 < self.noloss_fraction <= 1:
            raise ValueError(
                f"{name}: noloss_fraction must lie in (0, 1], got "
                f"{self.noloss_fraction}"
            )
        if not 0 <= self.warmup < 1:
            raise ValueError(f"{name}: warmup must lie in [0, 1), got {self.warmup}")
        if not 1 < self.grid_span < math.inf:
            raise ValueError(
                f"{name}: grid_span must be finite and > 1, got {self.grid_span}"
            )

    @classmethod
    def quick(cls, **overrides) -> LoadConfig:
        quick = dict(
            num_queries=5_000,
            screen_queries=1_500,
            num_rates=6,
            bisection=2,
            finalists=2,
            accuracy_groups=96,
            accuracy_tries=2,
            thread_queries=600,
            thread_rates=(0.5,),
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

    def group_workers(self, k: int, m: int) -> tuple[int, ...]:
        """The M' tried for K' = ``k`` on M = ``m`` workers (see the class)."""
        if k == 1:
            return tuple(c for c in self.replication if c <= m)
        spares = max(self.max_spares, int((self.max_redundancy - 1) * k))
        idle = self.max_idle * m
        return tuple(
            mp for mp in range(k + 1, min(m, k + spares) + 1) if m % mp <= idle
        )
