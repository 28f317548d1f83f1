"""The MNIST models the trainer knows, and what fixes a training run.

To add a model, add an entry to :data:`MODELS`: how to build it from a seed, its two
training presets, and (optionally) the network the coded workers run, for models
whose deployed form differs from the trained one. ``python -m models.train_mnist
--model NAME``, :func:`models.train_mnist.load_or_train` and the NeRCC experiment
then know it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from flax import nnx

from runkit import check_fields

from ..lenet import LeNet5
from ..mlp import MLP
from ..repvgg import RepVGG, reparameterize
from ..vit import SmallViT

__all__ = [
    "MODELS",
    "MODEL_NAMES",
    "MnistModel",
    "TrainConfig",
    "TrainRun",
    "build_model",
]


@dataclasses.dataclass(frozen=True)
class MnistModel:
    """A model the trainer knows.

    Attributes:
        build: seed -> a freshly initialised ``nnx.Module`` (images [B, 28, 28, 1]
            -> logits [B, 10]).
        full: the :class:`TrainConfig` fields of the full training preset.
        quick: those of the ``--quick`` preset.
        deploy: the trained model -> the network the coded workers run (None: the
            trained model itself).
        description: one line for reports.
    """

    build: Callable[[int], nnx.Module]
    full: Mapping[str, Any]
    quick: Mapping[str, Any]
    deploy: Callable[[nnx.Module], nnx.Module] | None = None
    description: str = ""


# Full and quick presets, set by hand; the validation accuracy of each run is kept in
# the checkpoint metadata (the test split plays no part in choosing them).
MODELS: dict[str, MnistModel] = {
    "lenet5": MnistModel(
        build=lambda seed: LeNet5(rngs=nnx.Rngs(seed)),
        full=dict(epochs=12, learning_rate=2e-3, shift=0),
        quick=dict(epochs=4, learning_rate=3e-3, shift=0),
        description="LeNet5",
    ),
    # the parity-models paper's MNIST base model
    "mlp": MnistModel(
        build=lambda seed: MLP(rngs=nnx.Rngs(seed)),
        full=dict(epochs=12, learning_rate=1e-3, shift=0),
        quick=dict(epochs=4, learning_rate=2e-3, shift=0),
        description="MLP 784-200-100-10",
    ),
    "vit": MnistModel(
        build=lambda seed: SmallViT(
            rngs=nnx.Rngs(seed), patch=7, width=64, depth=3, heads=4, mlp_ratio=2
        ),
        full=dict(epochs=30, learning_rate=1e-3, shift=2),
        quick=dict(epochs=12, learning_rate=1.5e-3, shift=2),
        description="ViT (patch 7, width 64, depth 3, 4 heads)",
    ),
    # trained multi-branch (3x3, 1x1 and identity branches with batch norm); the
    # coded workers run the fused network, one 3x3 convolution per block
    "repvgg": MnistModel(
        build=lambda seed: RepVGG(rngs=nnx.Rngs(seed)),
        full=dict(epochs=12, learning_rate=3e-3, shift=1),
        quick=dict(epochs=3, learning_rate=5e-3, shift=1),
        deploy=reparameterize,
        description="RepVGG (widths 16/32/64, blocks 1/2/2), fused for serving",
    ),
}
MODEL_NAMES = tuple(MODELS)


def build_model(name: str, *, seed: int = 0) -> nnx.Module:
    """A freshly initialised model of :data:`MODELS` (``"lenet5"``: :class:`LeNet5`;
    ``"mlp"``: ParM's 784-200-100-10 :class:`~models.mlp.MLP`; ``"vit"``:
    :class:`SmallViT`, patch 7, width 64, depth 3, 4 heads;
    ``"repvgg"``: the multi-branch :class:`RepVGG`, widths 16/32/64, blocks
    1/2/2)."""
    if name not in MODELS:
        raise ValueError(
            f"build_model: name must be one of {tuple(MODELS)}, got {name!r}"
        )
    return MODELS[name].build(seed)


def deployed(name: str, model: nnx.Module) -> nnx.Module:
    """The network the coded workers run for a trained ``model`` of kind ``name``."""
    fn = MODELS[name].deploy
    return model if fn is None else fn(model)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How one model is trained.

    Attributes:
        model: a name of :data:`MODELS` (``"lenet5"``, ``"vit"``, ``"repvgg"``).
        epochs: passes over the training images.
        batch_size: images per optimiser step.
        learning_rate: peak AdamW learning rate (cosine decay to 0 after a 1-epoch
            linear warm-up when ``epochs > 1``).
        weight_decay: AdamW decoupled weight decay.
        shift: random translation of each training image by up to this many pixels
            (0 turns augmentation off).
        seed: seed of the initialisation and of the batch order.
        max_train: use only the first ``max_train`` training images (None = all); for
            shrunken tests.
    """

    model: str = "lenet5"
    epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    shift: int = 0
    seed: int = 0
    max_train: int | None = None

    def __post_init__(self):
        check_fields(
            "TrainConfig", self, one_of={"model": tuple(MODELS)},
            at_least={"epochs": 1, "batch_size": 1, "shift": 0},
        )  # fmt: skip

    @classmethod
    def preset(cls, model: str, *, quick: bool = False, **overrides) -> TrainConfig:
        """The training preset of ``model`` (:data:`MODELS`): the full schedule, or
        the short ``quick`` one, with ``overrides`` on top."""
        if model not in MODELS:
            raise ValueError(
                f"TrainConfig.preset: model must be one of {tuple(MODELS)}, got "
                f"{model!r}"
            )
        spec = MODELS[model]
        return cls(model=model, **{**(spec.quick if quick else spec.full), **overrides})

    @classmethod
    def quick(cls, model: str = "lenet5", **overrides) -> TrainConfig:
        """The ``--quick`` preset of ``model``."""
        return cls.preset(model, quick=True, **overrides)


SCHEDULES = ("full", "quick")


@dataclasses.dataclass(frozen=True)
class TrainRun:
    """What one ``python -m models.train_mnist`` run trains (``quick()``: the
    short schedules).

    Attributes:
        models: names of :data:`MODELS`, each trained (or loaded) in turn.
        schedule: which preset of each model's registry entry: ``"full"`` or
            ``"quick"`` (:meth:`TrainConfig.preset`; its own checkpoint file).
        epochs: override of the preset's epochs (None: the preset's).
        seed: seed of every model's training.
        retrain: train even when a matching checkpoint exists.
    """

    models: tuple[str, ...] = ()
    schedule: str = "full"
    epochs: int | None = None
    seed: int = 0
    retrain: bool = False

    def __post_init__(self):
        if not self.models:
            raise ValueError("TrainRun: models must name at least one model")
        check_fields("TrainRun", self, one_of={"schedule": SCHEDULES})
        self.configs()  # each preset's own checks, before any work

    @classmethod
    def quick(cls, **overrides) -> TrainRun:
        """The short training schedule of each model (TrainConfig.quick())."""
        return cls(**{"schedule": "quick", **overrides})

    def configs(self) -> dict[str, TrainConfig]:
        """The :class:`TrainConfig` of each model (each named once)."""
        over: dict[str, Any] = {"seed": self.seed}
        if self.epochs is not None:
            over["epochs"] = self.epochs
        quick = self.schedule == "quick"
        return {
            name: TrainConfig.preset(name, quick=quick, **over)
            for name in dict.fromkeys(self.models)
        }
