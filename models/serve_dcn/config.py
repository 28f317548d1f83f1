"""What fixes a serving run of the DCNv2: :class:`ServeDCNConfig`."""

from __future__ import annotations

import dataclasses
import math

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
        group_deadline: behind the HTTP endpoint (``--http``), the seconds a
            coding group waits to fill before it is served part-empty.
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
    group_deadline: float = 0.005

    def __post_init__(self):
        name = "ServeDCNConfig"
        object.__setattr__(self, "responses", tuple(self.responses))
        for field in ("num_inputs", "num_workers", "replication",
                      "calibration_groups"):  # fmt: skip
            if getattr(self, field) < 1:
                raise ValueError(
                    f"{name}: {field} must be >= 1, got {getattr(self, field)}"
                )
        k, m, c = self.num_inputs, self.num_workers, self.replication
        if k * c > m:
            raise ValueError(
                f"{name}: RepApprox needs num_workers >= num_inputs * replication = "
                f"{k * c}, got {m}"
            )
        d = self.num_coeffs
        bad = [n for n in self.responses + (self.calibration_responses,)
               if not d <= n <= m]  # fmt: skip
        if bad or not self.responses:
            raise ValueError(
                f"{name}: responses and calibration_responses must each lie in "
                f"[D, M] = [{d}, {m}], got {list(self.responses)} and "
                f"{self.calibration_responses}"
            )
        if self.max_groups is not None and self.max_groups < 1:
            raise ValueError(
                f"{name}: max_groups must be None or >= 1, got {self.max_groups}"
            )
        ok = (
            0 <= self.shift < math.inf
            and 0 < self.mean < math.inf
            and 0 <= self.slow_prob <= 1
            and 1 <= self.slow_factor < math.inf
            and 0 < self.deadline < math.inf
        )
        if not ok:
            raise ValueError(
                f"{name}: need shift >= 0, mean > 0, slow_prob in [0, 1], "
                f"slow_factor >= 1 and deadline > 0 (finite), got {self.shift}, "
                f"{self.mean}, {self.slow_prob}, {self.slow_factor}, {self.deadline}"
            )
        if not 0 < self.group_deadline < math.inf:
            raise ValueError(
                f"{name}: group_deadline must be seconds > 0, got {self.group_deadline}"
            )

    @classmethod
    def quick(cls, **overrides) -> ServeDCNConfig:
        """The ``--quick`` run: the quick model of ``models.coded_dcn --quick``
        (:meth:`TrainConfig.quick`, the same checkpoint), 100 groups."""
        return cls(**{**dict(train=TrainConfig.quick(), max_groups=100), **overrides})

    @property
    def num_coeffs(self) -> int:
        return cj.recovery_threshold(self.num_inputs, self.train.num_cross_layers + 1)
