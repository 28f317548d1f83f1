"""The configuration of a coded DCNv2 run (a frozen dataclass with ``quick()``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

import codedjax as cj

from ..train_dcn import TrainConfig
from .schemes import SCHEMES

_WORKER_DTYPES = ("bfloat16", "float16", "float32")
_DEFAULT_NERCC_GRID = (0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
_INT_FIELDS = (
    "num_inputs",
    "num_workers",
    "replication",
    "num_repetitions",
    "nercc_val_groups",
    "nercc_num_masks",
)

# The models the two modes train when no checkpoint is present (load_or_train hashes
# the TrainConfig into the checkpoint name). Full: the training module's defaults
# (Adult, a parallel DCNv2 with L = 2); quick: TrainConfig.quick(), a narrower Deep
# MLP and a few epochs, so that training fits in the quick run's budget.
FULL_TRAIN = TrainConfig()
QUICK_TRAIN = TrainConfig.quick()


@dataclasses.dataclass(frozen=True)
class CodedDCNConfig:
    """Everything that fixes a coded-inference run.

    Attributes:
        train: the model (trained by :func:`models.train_dcn.load_or_train` when its
            checkpoint is missing); must be a parallel DCNv2.
        num_inputs: K, queries coded together.
        num_workers: M.
        replication: c, RepApprox replicas per query (M >= K c).
        responses: the values of N (D <= N <= M).
        schemes: which of :data:`SCHEMES` to run.
        num_repetitions: R, independent straggler patterns per group.
        worker_dtype: what the workers compute in ("bfloat16" for the experiment).
        nercc_grid: smoothing values tried for both NeRCC stages.
        nercc_val_groups: V, validation groups (of K queries) used to tune NeRCC.
        nercc_num_masks: T, straggler patterns per N used to tune NeRCC.
        max_test_queries: score only the first this many test queries (None: all).
        seed: seed of the straggler patterns and of the NeRCC tuning.
        ckpt_dir: checkpoint directory for :func:`load_or_train`.
    """

    train: TrainConfig = FULL_TRAIN
    num_inputs: int = 8
    num_workers: int = 40
    replication: int = 4
    responses: tuple[int, ...] = tuple(range(22, 41))
    schemes: tuple[str, ...] = SCHEMES
    num_repetitions: int = 8
    worker_dtype: str = "bfloat16"
    nercc_grid: tuple[float, ...] = _DEFAULT_NERCC_GRID
    nercc_val_groups: int = 128
    nercc_num_masks: int = 64
    max_test_queries: int | None = None
    seed: int = 0
    ckpt_dir: str = "checkpoints"

    def __post_init__(self):
        name = "CodedDCNConfig"
        if not isinstance(self.train, TrainConfig):
            raise TypeError(
                f"{name}: train must be a models.train_dcn.TrainConfig, got "
                f"{type(self.train).__name__}"
            )
        for field in _INT_FIELDS:
            value = getattr(self, field)
            if not isinstance(value, int | np.integer) or isinstance(value, bool):
                raise TypeError(f"{name}: {field} must be an int, got {value!r}")
            if value < 1:
                raise ValueError(f"{name}: {field} must be >= 1, got {value}")
        object.__setattr__(self, "responses", tuple(int(n) for n in self.responses))
        object.__setattr__(self, "schemes", tuple(self.schemes))
        object.__setattr__(self, "nercc_grid", tuple(float(v) for v in self.nercc_grid))
        self._check_sizes(name)
        self._check_choices(name)

    def _check_sizes(self, name: str) -> None:
        k, m, c = self.num_inputs, self.num_workers, self.replication
        if k < 2:
            raise ValueError(f"{name}: num_inputs (K) must be >= 2, got {k}")
        if k * c > m:
            raise ValueError(
                f"{name}: RepApprox needs num_workers (M) >= num_inputs * replication "
                f"(K c = {k} * {c} = {k * c}), got M = {m}"
            )
        if not self.responses:
            raise ValueError(f"{name}: responses must list at least one N")
        if len(set(self.responses)) != len(self.responses):
            raise ValueError(
                f"{name}: responses must be distinct, got {self.responses}"
            )
        d = self.num_coeffs
        bad = [n for n in self.responses if not d <= n <= m]
        if bad:
            raise ValueError(
                f"{name}: every N in responses must satisfy D <= N <= M (D = "
                f"{d} for K = {k} and L = {self.train.num_cross_layers}, M = {m}), "
                f"got {bad}"
            )
        if self.max_test_queries is not None and self.max_test_queries < 1:
            raise ValueError(
                f"{name}: max_test_queries must be None or >= 1, got "
                f"{self.max_test_queries}"
            )

    def _check_choices(self, name: str) -> None:
        unknown = [s for s in self.schemes if s not in SCHEMES]
        if unknown or not self.schemes:
            raise ValueError(
                f"{name}: schemes must be a non-empty subset of {SCHEMES}, got "
                f"{self.schemes}"
            )
        if self.worker_dtype not in _WORKER_DTYPES:
            raise ValueError(
                f"{name}: worker_dtype must be one of {_WORKER_DTYPES}, got "
                f"{self.worker_dtype!r}"
            )
        if self.train.structure != "parallel":
            raise ValueError(
                f"{name}: coded inference needs the parallel DCNv2 structure, got "
                f"train.structure = {self.train.structure!r}"
            )
        if any(not (math.isfinite(v) and v >= 0) for v in self.nercc_grid):
            raise ValueError(
                f"{name}: nercc_grid must hold finite values >= 0, got "
                f"{self.nercc_grid}"
            )

    @property
    def degree(self) -> int:
        """d = L + 1, the degree of the Cross branch (with its linear head)."""
        return self.train.num_cross_layers + 1

    @property
    def num_coeffs(self) -> int:
        """D = (L + 1)(K - 1) + 1 for the configured model."""
        return cj.recovery_threshold(self.num_inputs, self.degree)

    @classmethod
    def quick(cls, **overrides) -> CodedDCNConfig:
        """The ``--quick`` configuration (small model, fewer masks)."""
        base = dict(
            train=QUICK_TRAIN,
            num_repetitions=2,
            nercc_val_groups=48,
            nercc_num_masks=24,
        )
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["train"] = self.train.to_dict()
        for key in ("responses", "schemes", "nercc_grid"):
            out[key] = list(out[key])
        return out
