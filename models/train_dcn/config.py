"""What fixes a trained DCNv2: :class:`TrainConfig`, and the flags that set it."""

from __future__ import annotations

import dataclasses
from typing import Any

from runkit import check_fields, input_file

__all__ = ["DATASETS", "FLAGS", "OPTIMIZERS", "TrainConfig"]

DATASETS = ("adult", "criteo")
OPTIMIZERS = ("adam", "adamw")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that fixes a trained model (data, architecture, optimisation).

    Attributes:
      data: ``"adult"`` or ``"criteo"``.
      path: data file; ``None`` is the bundled Adult file (required for Criteo).
      embed_dim, numeric_mode, num_cross_layers, low_rank, deep_sizes, structure:
        the DCNv2 architecture (see :class:`models.dcn.DCNConfig`).
      optimizer: ``"adam"`` or ``"adamw"``.
      learning_rate: Adam step size.
      weight_decay: decoupled weight decay (AdamW only).
      batch_size: training minibatch size (the last incomplete batch of an epoch is
        dropped; the data are reshuffled every epoch).
      max_epochs: upper bound on passes over the training split.
      patience: evaluations without a better validation logloss before stopping.
      steps_per_eval: evaluate every this many steps (``None``: after each epoch).
      seed: parameter initialisation and shuffling seed.
      criteo_min_count: Criteo vocabulary minimum count.
      criteo_max_lines: read only this many lines of the Criteo file (``None``: all).
      eval_batch_size: batch size for evaluation (padded, so one compiled program).
    """

    data: str = "adult"
    path: str | None = None
    embed_dim: int = 8
    numeric_mode: str = "embedded"
    num_cross_layers: int = 2
    low_rank: int | None = None
    deep_sizes: tuple[int, ...] = (128, 64)
    structure: str = "parallel"
    optimizer: str = "adamw"
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    batch_size: int = 512
    max_epochs: int = 30
    patience: int = 3
    steps_per_eval: int | None = None
    seed: int = 0
    criteo_min_count: int = 10
    criteo_max_lines: int | None = None
    eval_batch_size: int = 4096

    def __post_init__(self):
        name = "TrainConfig"
        object.__setattr__(self, "deep_sizes", tuple(int(h) for h in self.deep_sizes))
        check_fields(name, self, one_of={"data": DATASETS})
        if self.data == "criteo" and self.path is None:
            raise ValueError(f"{name}: data='criteo' needs path (the Criteo file)")
        ones = ("batch_size", "max_epochs", "patience", "eval_batch_size", "embed_dim")
        maybe = ("low_rank", "steps_per_eval", "criteo_max_lines")
        check_fields(
            name, self, one_of={"optimizer": OPTIMIZERS},
            at_least=dict.fromkeys(ones, 1), or_none=dict.fromkeys(maybe, 1),
        )  # fmt: skip
        if not all(h >= 1 for h in self.deep_sizes):
            raise ValueError(
                f"{name}: every entry of deep_sizes must be >= 1, got {self.deep_sizes}"
            )
        if not self.learning_rate > 0:
            raise ValueError(
                f"{name}: learning_rate must be > 0, got {self.learning_rate}"
            )

    @classmethod
    def quick(cls, **overrides) -> TrainConfig:
        """The ``--quick`` model (the one ``models.coded_dcn --quick`` and
        ``models.serve_dcn --quick`` serve): a narrower Deep MLP (64, 32) and at most
        4 epochs with patience 2, so that training fits in the quick runs."""
        base = dict(deep_sizes=(64, 32), max_epochs=4, patience=2)
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["deep_sizes"] = list(self.deep_sizes)
        return out


# The command line's flag of every field (python -m models.train_dcn --help).
FLAGS = {
    "data": ("--data", {"choices": DATASETS}),
    "path": ("--path", {"type": input_file, "help": "data file (required for criteo)"}),
    "embed_dim": "--embed-dim",
    "numeric_mode": ("--numeric-mode", {"choices": ("normalised", "embedded")}),
    "num_cross_layers": "--cross-layers",
    "low_rank": "--low-rank",
    "deep_sizes": ("--deep-sizes", {"help": "comma-separated hidden widths"}),
    "structure": ("--structure", {"choices": ("parallel", "stacked")}),
    "optimizer": ("--optimizer", {"choices": OPTIMIZERS}),
    "learning_rate": "--lr",
    "weight_decay": "--weight-decay",
    "batch_size": "--batch-size",
    "max_epochs": "--epochs",
    "patience": "--patience",
    "steps_per_eval": "--steps-per-eval",
    "criteo_min_count": "--min-count",
    "criteo_max_lines": "--max-lines",
}
