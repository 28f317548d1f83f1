"""What fixes a trained parity model: :class:`ParityConfig` and its presets."""

from __future__ import annotations

import dataclasses

from runkit import check_fields

__all__ = ["BASE_MODELS", "DEGRADED_INPUTS", "ParityConfig", "ParityRun"]

#: the base models a parity model can be trained for: the Adult DCNv2 and two of the
#: MNIST registry (models.train_mnist.MODELS)
BASE_MODELS = ("dcn", "lenet5", "mlp")

#: K, the queries ``python -m models.train_parity`` serves together in its degraded
#: mode report (:func:`models.train_parity.metrics.degraded_predictions`): a group k
#: it reports must divide it (12 serves k = 2, 3, 4, 6 and 12)
DEGRADED_INPUTS = 12


@dataclasses.dataclass(frozen=True)
class ParityConfig:
    """How one parity model is trained (the parity-models paper's settings where they
    fit: MSE to the sum of the base model's outputs, Adam at 1e-3 with L2 weight
    decay 1e-5, batch 64 for k = 2 and 32 for k > 2).

    Attributes:
        model: the base model, one of :data:`BASE_MODELS`.
        group: k, the queries summed into one parity query (>= 2).
        steps: optimiser steps (each a batch of fresh parity queries: k training
            queries drawn at random and summed).
        batch_size: parity queries per step; None: 64 for k = 2, 32 for k > 2.
        learning_rate: Adam step size.
        weight_decay: L2 weight decay added to the gradient (as the paper's PyTorch
            Adam does).
        base_quick: the base model is the quick preset of its trainer.
        seed: seed of the parity model's initialisation and of the query draws.
    """

    model: str = "lenet5"
    group: int = 2
    steps: int = 3000
    batch_size: int | None = None
    learning_rate: float = 1e-3
    weight_decay: float = 1e-5
    base_quick: bool = False
    seed: int = 0

    def __post_init__(self):
        name = "ParityConfig"
        check_fields(name, self, one_of={"model": BASE_MODELS})
        if isinstance(self.group, bool) or not isinstance(self.group, int):
            raise TypeError(f"{name}: group must be an int, got {self.group!r}")
        if self.batch_size is None:
            object.__setattr__(self, "batch_size", 64 if self.group == 2 else 32)
        check_fields(name, self, at_least={"group": 2, "steps": 1, "batch_size": 1})
        if not self.learning_rate > 0 or self.weight_decay < 0:
            raise ValueError(
                f"{name}: need learning_rate > 0 and weight_decay >= 0, got "
                f"{self.learning_rate} and {self.weight_decay}"
            )

    @classmethod
    def preset(cls, model: str, group: int, *, quick: bool = False, **over):
        """The full preset (3000 steps on the full base model), or ``quick``
        (400 steps on the quick base model), with ``over`` on top."""
        base = dict(steps=400, base_quick=True) if quick else {}
        return cls(model=model, group=group, **{**base, **over})


SCHEDULES = ("full", "quick")


@dataclasses.dataclass(frozen=True)
class ParityRun:
    """What one ``python -m models.train_parity`` run trains (``quick()``: the
    short presets).

    Attributes:
        models: base models of :data:`BASE_MODELS`.
        groups: the k values; each must be >= 2 and divide
            :data:`DEGRADED_INPUTS`, the queries the degraded-mode report serves
            together.
        schedule: ``"full"`` or ``"quick"``: which :meth:`ParityConfig.preset`.
        steps: override of the preset's steps (None: the preset's).
        seed: seed of every parity model.
        retrain: train even when a matching checkpoint exists.
    """

    models: tuple[str, ...] = ()
    groups: tuple[int, ...] = ()
    schedule: str = "full"
    steps: int | None = None
    seed: int = 0
    retrain: bool = False

    def __post_init__(self):
        name = "ParityRun"
        bad = [k for k in self.groups if k < 2 or DEGRADED_INPUTS % k]
        if bad or not self.groups:
            raise ValueError(
                f"{name}: groups: every group must be >= 2 and divide K = "
                f"{DEGRADED_INPUTS}, the queries the degraded mode serves together "
                f"(M = K + K/k), got {bad}"
            )
        if not self.models or self.schedule not in SCHEDULES:
            raise ValueError(
                f"{name}: need models and a schedule of {SCHEDULES}, got "
                f"{self.models} and {self.schedule!r}"
            )
        self.configs()  # each preset's own checks, before any work

    @classmethod
    def quick(cls, **overrides) -> ParityRun:
        """The short presets (400 steps, on the quick base model)."""
        return cls(**{"schedule": "quick", **overrides})

    def configs(self) -> list[ParityConfig]:
        """The :class:`ParityConfig` of every (model, k), each named once."""
        over = {"seed": self.seed}
        if self.steps is not None:
            over["steps"] = self.steps
        quick = self.schedule == "quick"
        return [
            ParityConfig.preset(name, k, quick=quick, **over)
            for name in dict.fromkeys(self.models)
            for k in dict.fromkeys(self.groups)
        ]
