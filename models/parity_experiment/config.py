"""The settings of the degraded-mode experiment (:class:`ExperimentConfig`)."""

from __future__ import annotations

import dataclasses
import math

from ..train_parity import BASE_MODELS

__all__ = ["ExperimentConfig"]


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """What fixes one run of :mod:`models.parity_experiment`.

    Attributes:
        models: base models (``"dcn"``: Adult DCNv2; ``"lenet5"``, ``"mlp"``: MNIST).
        groups: the k values (queries per parity).
        num_inputs: K, queries served together (a multiple of every k; 12 serves
            2, 3 and 4); every code has M = K + K/k workers.
        test_masks: T straggler patterns of K/k lost workers for BACC and NeRCC,
            the same for every test batch.
        val_masks: patterns in NeRCC's tuning (drawn independently).
        num_val: validation queries for NeRCC's tuning (cut to a multiple of K).
        smoothing_grid: NeRCC's lambda grid (encoder and decoder; 0 included).
        quick_train: the quick presets of the parity models and of their base
            models.
        steps: override of the parity models' training steps (None: the preset's).
        seed: root seed of the straggler patterns.
    """

    models: tuple[str, ...] = BASE_MODELS
    groups: tuple[int, ...] = (2, 3, 4)
    num_inputs: int = 12
    test_masks: int = 16
    val_masks: int = 16
    num_val: int = 600
    smoothing_grid: tuple[float, ...] = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
    quick_train: bool = False
    steps: int | None = None
    seed: int = 0

    def __post_init__(self):
        fname = "ExperimentConfig"
        bad = [m for m in self.models if m not in BASE_MODELS]
        if bad or not self.models:
            raise ValueError(f"{fname}: models must be in {BASE_MODELS}, got {bad}")
        if not self.groups or min(self.groups) < 2:
            raise ValueError(f"{fname}: groups must be >= 2, got {self.groups}")
        odd = [k for k in self.groups if self.num_inputs % k]
        if odd:
            raise ValueError(
                f"{fname}: groups must each divide num_inputs K = {self.num_inputs} "
                f"(a multiple of every group k: M = K + K/k workers), got {odd}"
            )
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"{fname}: steps must be None or >= 1, got {self.steps}")
        for name in ("test_masks", "val_masks", "num_val"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"{fname}: {name} must be >= 1, got {getattr(self, name)}"
                )
        if any(g < 0 or not math.isfinite(g) for g in self.smoothing_grid):
            raise ValueError(
                f"{fname}: smoothing_grid must hold finite values >= 0, got "
                f"{self.smoothing_grid}"
            )

    @classmethod
    def quick(cls, **overrides) -> ExperimentConfig:
        """Quick-trained models, fewer straggler patterns, a coarser NeRCC grid."""
        base = dict(
            quick_train=True, test_masks=8, val_masks=8, num_val=240,
            smoothing_grid=(0.0, 1e-4, 1e-3, 1e-2, 1e-1),
        )  # fmt: skip
        return cls(**{**base, **overrides})
