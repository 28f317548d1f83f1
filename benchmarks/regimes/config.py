"""What fixes a regime-map run: the grid, the four straggler models, the budgets."""

from __future__ import annotations

import dataclasses
import math

import codedjax as cj
from models.layerwise import LATENCIES, latency_text

from .workloads import WORKLOADS

__all__ = ["STRAGGLERS", "RegimesConfig", "latency_model", "latency_text"]

#: the straggler models of the map (text form: ``codedjax.parse_latency``)
STRAGGLERS = tuple(LATENCIES)


def latency_model(name: str, num_workers: int, seed: int = 0) -> cj.LatencyModel:
    """The straggler model ``name`` for M workers (``models.layerwise.latency_text``:
    5 ms + Exp(5 ms) with 5% of evaluations slowed by Exp(100 ms) independently
    (``independent``) or by racks of 5 (``racks``); 5 ms + Pareto(1 ms, 1.5)
    (``heavy-tail``); two of the M workers ten times slower on every request, drawn
    once from ``(seed, M)`` (``persistent``))."""
    return cj.parse_latency(latency_text(name, num_workers, seed))


@dataclasses.dataclass(frozen=True)
class RegimesConfig:
    """Everything that fixes a regime-map run.

    Attributes:
        num_inputs: the K of the grid. ratios: the M/K of the grid (M = round(K r)).
        workloads: names of :data:`~benchmarks.regimes.workloads.WORKLOADS`.
        stragglers: names of :data:`STRAGGLERS`.
        width: d0, the DCNv2's input width.
        num_requests: R, simulated requests per cell (latency percentiles).
        error_requests: E, the first E of them decoded on real payloads.
        error_factor: the accuracy target: a scheme's median decoded error at
            most this times an uncoded bf16 worker's
            (:func:`runkit.stats.accuracy_target`).
        n_fractions: the N tried by a scheme that decodes from N answers: its
            threshold plus these fractions of the way to M.
        nercc_responses: NeRCC is tuned once per (K, M) on the Deep branch with
            random masks of ceil(this * M) answers.
        nercc_groups: validation groups of the tuning.
        nercc_smoothing: a fixed (encoder, decoder) smoothing instead of tuning.
        master_requests: requests served by ``PipelineServer`` per layer-wise row
            to measure the master's decode and re-encode (0: not measured).
        spot_requests: requests per cell of the thread-cluster spot check of
            three K = 8 cells (0: none).
        seed: of the delay draws, the inputs and the DCNv2's parameters.
    """

    num_inputs: tuple[int, ...] = (8, 32)
    ratios: tuple[float, ...] = (1.25, 1.5, 2.0, 3.0, 5.0)
    workloads: tuple[str, ...] = WORKLOADS
    stragglers: tuple[str, ...] = STRAGGLERS
    width: int = 16
    num_requests: int = 100_000
    error_requests: int = 1024
    error_factor: float = 2.0
    n_fractions: tuple[float, ...] = (0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0)
    nercc_responses: float = 0.8
    nercc_groups: int = 16
    nercc_smoothing: tuple[float, ...] | None = None
    master_requests: int = 8
    spot_requests: int = 300
    seed: int = 0

    @classmethod
    def quick(cls, **overrides) -> RegimesConfig:
        """K = 8 only, 2e4 requests per cell, 256 decoded."""
        base = dict(
            num_inputs=(8,), num_requests=20_000, error_requests=256, master_requests=4
        )
        return cls(**{**base, **overrides})

    def __post_init__(self):
        name = "RegimesConfig"
        lists = {
            "num_inputs": (lambda k: k >= 2, "K >= 2 each"),
            "ratios": (lambda r: 1 <= r < math.inf, "M/K >= 1 each"),
            "workloads": (lambda w: w in WORKLOADS, f"names of {WORKLOADS}"),
            "stragglers": (lambda s: s in STRAGGLERS, f"names of {STRAGGLERS}"),
            "n_fractions": (lambda f: 0 <= f <= 1, "fractions in [0, 1]"),
        }
        for field, (ok, want) in lists.items():
            v = tuple(getattr(self, field))
            if not v or not all(map(ok, v)):
                raise ValueError(f"{name}: {field} must list {want}, got {list(v)}")
        lows = {"num_requests": 1, "error_requests": 1, "width": 1, "nercc_groups": 1,
                "master_requests": 0, "spot_requests": 0, "seed": 0}  # fmt: skip
        for field, low in lows.items():
            if getattr(self, field) < low:
                raise ValueError(
                    f"{name}: {field} must be >= {low}, got {getattr(self, field)}"
                )
        if not 0 < self.error_factor < math.inf:
            raise ValueError(
                f"{name}: error_factor must be finite and > 0, got {self.error_factor}"
            )
        if not 0 < self.nercc_responses <= 1:
            raise ValueError(
                f"{name}: nercc_responses must lie in (0, 1], got "
                f"{self.nercc_responses}"
            )
        sm = self.nercc_smoothing
        if sm is not None and not (len(sm) == 2 and all(0 <= v < math.inf for v in sm)):
            raise ValueError(
                f"{name}: nercc_smoothing must be None or (encoder, decoder) "
                f"values >= 0, got {sm}"
            )
        if self.error_requests > self.num_requests:
            raise ValueError(
                f"{name}: error_requests must be at most num_requests = "
                f"{self.num_requests}, got {self.error_requests}"
            )

    def grid(self) -> list[tuple[int, int]]:
        """The (K, M) of the map."""
        return [(k, int(round(k * r))) for k in self.num_inputs for r in self.ratios]

    def n_grid(self, low: int, m: int) -> list[int]:
        """The N tried between ``low`` and M."""
        low = max(1, min(low, m))
        return sorted(
            {min(m, low + math.ceil(f * (m - low))) for f in self.n_fractions}
        )
