"""The grid and sample sizes of the NeRCC experiment (a frozen dataclass with
``quick()``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from runkit import check_fields

from ..layerwise import LATENCIES
from ..train_mnist import MODEL_NAMES

SCHEMES = ("bacc", "nercc", "repapprox")


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """The grid and the sample sizes of the experiment.

    Attributes:
        models: model names of :data:`models.train_mnist.MODELS` (default ``"lenet5"``,
            ``"vit"``, ``"repvgg"``).
        num_inputs: the K values (queries coded together).
        worker_factors: M = factor * K for each factor.
        straggler_fractions: S = round(fraction * M) for each fraction (duplicates
            and values with fewer than 2 responders dropped).
        num_test: test images used (the first ``num_test`` of the fixed test split,
            cut to a multiple of K: B = num_test // K batches).
        num_val: validation images for tuning NeRCC (V = num_val // K groups).
        test_masks: straggler patterns per cell (T), shared by every test batch and
            every scheme.
        val_masks: straggler patterns in the NeRCC tuning (drawn independently).
        smoothing_grid: values tried for lambda_e and lambda_d (0 always included).
        replication: RepApprox replication factor c.
        quick_train: use the quick training preset (and its checkpoint).
        ckpt_dir: directory of the model checkpoints.
        seed: root seed of the straggler masks.
    """

    models: tuple[str, ...] = ("lenet5", "vit", "repvgg")
    num_inputs: tuple[int, ...] = (10, 20)
    worker_factors: tuple[int, ...] = (2, 3, 4, 5)
    straggler_fractions: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4)
    num_test: int = 1000
    num_val: int = 500
    test_masks: int = 64
    val_masks: int = 32
    smoothing_grid: tuple[float, ...] = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    replication: int = 2
    quick_train: bool = False
    ckpt_dir: str = "checkpoints"
    seed: int = 0

    def __post_init__(self):
        fname = "ExperimentConfig"
        bad = [m for m in self.models if m not in MODEL_NAMES]
        if bad or not self.models:
            raise ValueError(
                f"{fname}: models must be in {MODEL_NAMES} (one at least), got "
                f"{list(self.models)}"
            )
        if not self.num_inputs or min(self.num_inputs) < 2:
            raise ValueError(
                f"{fname}: num_inputs (K) must be >= 2, got {self.num_inputs}"
            )
        if not self.worker_factors or min(self.worker_factors) < 1:
            raise ValueError(
                f"{fname}: worker_factors must be >= 1, got {self.worker_factors}"
            )
        if not self.straggler_fractions or not all(
            0.0 <= f < 1.0 for f in self.straggler_fractions
        ):
            raise ValueError(
                f"{fname}: straggler_fractions (S/M) must lie in [0, 1), got "
                f"{self.straggler_fractions}"
            )
        fields = ("num_test", "num_val", "test_masks", "val_masks", "replication")
        check_fields(fname, self, at_least=dict.fromkeys(fields, 1))
        for name in ("num_test", "num_val"):
            if max(self.num_inputs) > getattr(self, name):
                raise ValueError(
                    f"{fname}: K = {max(self.num_inputs)} is larger than {name} = "
                    f"{getattr(self, name)} images"
                )
        if any(g < 0 or not math.isfinite(g) for g in self.smoothing_grid):
            raise ValueError(
                f"{fname}: smoothing_grid must hold finite values >= 0, got "
                f"{self.smoothing_grid}"
            )

    @classmethod
    def quick(cls, **overrides) -> ExperimentConfig:
        """The ``--quick`` configuration: M in {2K, 3K, 4K}, 400 test and 200
        validation images, fewer masks and a coarser smoothing grid, quick-trained
        models."""
        base = dict(
            worker_factors=(2, 3, 4),
            num_test=400,
            num_val=200,
            test_masks=32,
            val_masks=16,
            smoothing_grid=(0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
            quick_train=True,
        )
        return cls(**{**base, **overrides})

    def cells(self) -> list[tuple[int, int, int]]:
        """The grid's cells (K, M, S) in run order."""
        return [
            (k, f * k, s)
            for k in self.num_inputs
            for f in self.worker_factors
            for s in straggler_counts(f * k, self.straggler_fractions)
        ]


def straggler_counts(num_workers: int, fractions: Sequence[float]) -> list[int]:
    """S = round(f M) for each fraction, unique, sorted, keeping N = M - S >= 2."""
    out = sorted({int(round(f * num_workers)) for f in fractions})
    return [s for s in out if num_workers - s >= 2]


@dataclasses.dataclass(frozen=True)
class LayerwiseConfig:
    """What fixes a layer-wise run of the MLP.

    Attributes:
        num_inputs: K, queries per request.
        ratios: the M/K (M = round(K r)).
        stragglers: names of the straggler models (``models.layerwise.LATENCIES``,
            the regime map's four).
        requests: R, simulated requests per (M, straggler model).
        masks_per_group: T, each test group decoded under T requests' masks.
        num_test: test images (cut to a multiple of K: G = num_test // K groups).
        num_val: validation images for NeRCC's tuning.
        top1_tol: a scheme meets the target when its top-1 is at least the float32
            model's minus this.
        n_fractions: the N tried by one-shot coding: K plus these fractions of the
            way to M (layer-wise coding tries every N from K).
        master_requests: requests served on ``PipelineServer`` per (M, scheme) to
            measure the master's work (after one warm-up request).
        quick_train: the quick-trained MLP.
        ckpt_dir: checkpoints.
        seed: of the delay draws and NeRCC's tuning masks.
    """

    num_inputs: int = 8
    ratios: tuple[float, ...] = (1.25, 1.5, 2.0, 3.0)
    stragglers: tuple[str, ...] = tuple(LATENCIES)
    requests: int = 100_000
    masks_per_group: int = 8
    num_test: int = 1000
    num_val: int = 500
    top1_tol: float = 0.005
    n_fractions: tuple[float, ...] = (0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0)
    master_requests: int = 8
    quick_train: bool = False
    ckpt_dir: str = "checkpoints"
    seed: int = 0

    @classmethod
    def quick(cls, **overrides) -> LayerwiseConfig:
        """The quick-trained MLP, M/K <= 2, 2e4 requests, 400 test images."""
        base = dict(
            ratios=(1.25, 1.5, 2.0),
            requests=20_000,
            masks_per_group=4,
            num_test=400,
            num_val=200,
            master_requests=4,
            quick_train=True,
        )
        return cls(**{**base, **overrides})

    def __post_init__(self):
        bad = [s for s in self.stragglers if s not in LATENCIES]
        if bad or not self.stragglers:
            raise ValueError(
                f"LayerwiseConfig: stragglers must be among {tuple(LATENCIES)}, got "
                f"{self.stragglers}"
            )
        check_fields("LayerwiseConfig", self, at_least={"num_inputs": 2})
        if not self.ratios or any(r < 1 for r in self.ratios):
            raise ValueError(
                f"LayerwiseConfig: ratios must be M/K >= 1, got {self.ratios}"
            )
        fields = ("requests", "masks_per_group", "num_test", "num_val")
        check_fields("LayerwiseConfig", self, at_least=dict.fromkeys(fields, 1))
        if self.num_test < self.num_inputs or self.num_val < self.num_inputs:
            raise ValueError(
                f"LayerwiseConfig: num_test and num_val must be >= K = "
                f"{self.num_inputs}, got {self.num_test} and {self.num_val}"
            )
        g = self.num_test // self.num_inputs
        if g * self.masks_per_group > self.requests:
            raise ValueError(
                f"LayerwiseConfig: {g} test groups x {self.masks_per_group} masks "
                f"need requests >= {g * self.masks_per_group}, got {self.requests}"
            )
        if not 0 <= self.top1_tol < 1:
            raise ValueError(
                f"LayerwiseConfig: top1_tol must lie in [0, 1), got {self.top1_tol}"
            )

    def n_grid(self, m: int) -> list[int]:
        """One-shot coding's N: K, then the fractions of the way to M."""
        k = self.num_inputs
        return sorted({min(m, k + math.ceil(f * (m - k))) for f in self.n_fractions})
