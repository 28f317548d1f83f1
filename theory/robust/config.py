"""What fixes a run of the corrupted-worker experiment: :class:`RobustConfig`."""

from __future__ import annotations

import dataclasses

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

    @classmethod
    def quick(cls, **overrides) -> RobustConfig:
        """A smaller run for ``--quick``: 300 requests per row, three error sizes."""
        base = dict(num_requests=300, sizes=(0.1, 1.0, 10.0))
        return cls(**{**base, **overrides})
