"""What fixes a regime-map run: the grid, the four straggler models, the budgets."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

import codedjax as cj

from .workloads import WORKLOADS

__all__ = ["STRAGGLERS", "RegimesConfig", "latency_model", "latency_text"]

#: the straggler models of the map (text form: ``codedjax.parse_latency``)
STRAGGLERS = ("independent", "heavy-tail", "racks", "persistent")

_TEXT = {
    "independent": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms",
    "heavy-tail": "shifted-pareto:5ms,1ms,1.5",
    "racks": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5",
    "persistent": "shifted-exp:5ms,5ms; workers={} factor=10",
}


def latency_text(name: str, num_workers: int, seed: int = 0) -> str:
    """The text form (``codedjax.parse_latency``) of the straggler model ``name``
    for M = ``num_workers`` workers.

    * ``independent``: 5 ms + Exp(5 ms); with probability 0.05 a worker is slowed
      by a further Exp(100 ms).
    * ``heavy-tail``: 5 ms + Pareto(scale 1 ms, shape 1.5).
    * ``racks``: 5 ms + Exp(5 ms); racks of 5 consecutive workers, each slowed
      together by Exp(100 ms) with probability 0.05.
    * ``persistent``: 5 ms + Exp(5 ms), two workers of the M ten times slower on
      every request: two drawn once from ``(seed, M)`` (so not the same two for
      every M, and not chosen to spare any scheme).
    """
    if name not in _TEXT:
        raise ValueError(
            f"latency_model: name must be one of {STRAGGLERS}, got {name!r}"
        )
    if name != "persistent":
        return _TEXT[name]
    rng = np.random.default_rng([seed, 24, num_workers])
    slow = sorted(int(w) for w in rng.choice(num_workers, 2, replace=False))
    return _TEXT[name].format(",".join(map(str, slow)))


def latency_model(name: str, num_workers: int, seed: int = 0) -> cj.LatencyModel:
    """The straggler model ``name`` for M workers (see :func:`latency_text`)."""
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
        target_factor: the accuracy target, this times the median relative error
            of an uncoded bf16 worker.
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
    target_factor: float = 2.0
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
        for w in self.workloads:
            if w not in WORKLOADS:
                raise ValueError(
                    f"RegimesConfig: workloads must be among {WORKLOADS}, got {w!r}"
                )
        for s in self.stragglers:
            if s not in STRAGGLERS:
                raise ValueError(
                    f"RegimesConfig: stragglers must be among {STRAGGLERS}, got {s!r}"
                )
        if not self.num_inputs or any(k < 2 for k in self.num_inputs):
            raise ValueError(
                f"RegimesConfig: num_inputs (--k) must be K >= 2 each, got "
                f"{self.num_inputs}"
            )
        for name in ("num_requests", "error_requests", "width"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"RegimesConfig: {name} must be >= 1, got {getattr(self, name)}"
                )
        if not self.target_factor > 0:
            raise ValueError(
                f"RegimesConfig: target_factor must be > 0, got {self.target_factor}"
            )
        if any(r < 1 for r in self.ratios):
            raise ValueError(
                f"RegimesConfig: ratios (--ratios) must be M/K >= 1, got {self.ratios}"
            )
        if self.error_requests > self.num_requests:
            raise ValueError(
                f"RegimesConfig: error_requests ({self.error_requests}) must be at "
                f"most num_requests ({self.num_requests})"
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
