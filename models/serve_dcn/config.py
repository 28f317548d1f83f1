"""What fixes a serving run of the DCNv2: :class:`ServeDCNConfig`."""

from __future__ import annotations

import dataclasses

import codedjax as cj

from ..train_dcn import TrainConfig

__all__ = ["ServeDCNConfig"]


@dataclasses.dataclass(frozen=True)
class ServeDCNConfig:
    """Everything that fixes a serving run.

    Attributes:
        train: the model (trained when its checkpoint is missing).
        num_inputs: K. num_workers: M. replication: c of RepApprox (K c <= M).
        responses: the N of the ChebyLS schemes.
        max_groups: serve only the first this many groups of K test queries
            (None: every test query).
        shift, mean, slow_prob, slow_factor: the latency model.
        calibration_groups, calibration_responses: the adaptive policy's budget
            is the median predicted error (``DecodeResult.error``) of ChebyLS +
            RepApprox with this many responses on this many VALIDATION groups.
        deadline: the adaptive policy's deadline (seconds).
        seed: of the delay draws.
        ckpt_dir: checkpoint directory.
    """

    train: TrainConfig = TrainConfig()
    num_inputs: int = 8
    num_workers: int = 40
    replication: int = 4
    responses: tuple[int, ...] = (26, 30, 34)
    max_groups: int | None = None
    shift: float = 0.005
    mean: float = 0.005
    slow_prob: float = 0.1
    slow_factor: float = 10.0
    calibration_groups: int = 32
    calibration_responses: int = 30
    deadline: float = 0.25
    seed: int = 0
    ckpt_dir: str = "checkpoints"

    @classmethod
    def quick(cls, **overrides) -> ServeDCNConfig:
        """The ``--quick`` run: the quick model of ``models.coded_dcn --quick``
        (:meth:`TrainConfig.quick`, the same checkpoint), 100 groups."""
        return cls(**{**dict(train=TrainConfig.quick(), max_groups=100), **overrides})

    @property
    def num_coeffs(self) -> int:
        return cj.recovery_threshold(self.num_inputs, self.train.num_cross_layers + 1)
