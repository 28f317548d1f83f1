"""What fixes a run of the corrupted-worker experiment: :class:`RobustConfig`."""

from __future__ import annotations

import dataclasses
import math

import codedjax as cj
import runkit

__all__ = ["RobustConfig"]


@dataclasses.dataclass(frozen=True)
class RobustConfig:
    """The setting and the sample sizes of the corrupted-worker experiment (the
    defaults are the bf16 cross tower of ``theory.demo``: K = 8, M = 40, N = 30)."""

    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    cross_layers: int = 2
    features: int = 16
    num_responses: int = 30  # N
    num_requests: int = 2000
    max_corrupted: int = 4  # A the decoders look for
    counts: tuple[int, ...] = (1, 2, 3, 4)  # corrupted workers at size 1 x RMS
    sizes: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    false_alarm: float = 0.01
    seed: int = 0
    progress: bool = True
    berrut: bool = True  # also the Berrut-coded locators
    rounding_model: bool = True  # the decoder with noise_sd from the rounding analysis
    dtype_model: bool = True  # also run the decoder with the dtype-only noise model
    leverage_cut: float = 0.9  # locate rate also among corrupted workers below it
    oracle: bool = True  # the maximum-likelihood locator told the count (reference)

    def __post_init__(self):
        name = "RobustConfig"
        fields = ("num_inputs", "num_workers", "features", "num_requests")
        runkit.check_fields(name, self, at_least=dict.fromkeys(fields, 1))
        d = cj.recovery_threshold(self.num_inputs, self.cross_layers + 1)
        if not d <= self.num_responses <= self.num_workers:
            raise ValueError(
                f"{name}: num_responses must lie in [D, num_workers] = "
                f"[{d}, {self.num_workers}], got {self.num_responses}"
            )
        runkit.check_fields(name, self, at_least={"max_corrupted": 0})
        if not all(1 <= c <= self.num_responses for c in self.counts):
            raise ValueError(
                f"{name}: counts must each lie in [1, num_responses], got {self.counts}"
            )
        if not all(math.isfinite(v) and v > 0 for v in self.sizes):
            raise ValueError(f"{name}: sizes must be finite and > 0, got {self.sizes}")
        if not 0 < self.false_alarm < 1:
            raise ValueError(
                f"{name}: false_alarm must lie in (0, 1), got {self.false_alarm}"
            )
        if not 0 < self.leverage_cut <= 1:
            raise ValueError(
                f"{name}: leverage_cut must lie in (0, 1], got {self.leverage_cut}"
            )

    @classmethod
    def quick(cls, **overrides) -> RobustConfig:
        """A smaller run for ``--quick``: 300 requests per row, three error sizes."""
        base = dict(num_requests=300, sizes=(0.1, 1.0, 10.0))
        return cls(**{**base, **overrides})
