"""What fixes a serving benchmark run, its schemes and its straggler injector."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    FirstDecodable,
    FixedN,
    Injector,
)
from runkit import check_fields

from .workload import inputs, worker_fn

__all__ = ["ServingConfig", "injector", "request_inputs", "schemes"]


@dataclasses.dataclass(frozen=True)
class ServingConfig:
    """Everything that fixes a serving benchmark run.

    Attributes:
        num_inputs: K. num_workers: M. num_features: F. degree: d of f = x^3 - x.
        responses: the N of the ChebyLS rows.
        shift, mean: the service time shift + Exp(mean), seconds.
        slow_prob, slow_factor: the straggler model.
        rack_size: workers slowed together in the correlated scenario.
        num_requests: requests per scheme on the thread cluster.
        sim_requests: requests per scheme on the simulator.
        adaptive_requests: requests of the adaptive policy on the simulator (it
            decodes every prefix, so fewer).
        error_requests: requests whose decoded error the simulator table reports.
        budget_factor: the adaptive budget (an absolute predicted error) in units
            of one bf16 rounding at the scale of the coded answers (unit roundoff
            of bf16 times max |y| of a representative request).
        deadline: the adaptive policy's deadline, seconds.
        floor_workers: the M of the engine-against-floor table (a no-op
            worker, every policy; ``floor.py``).
        floor_requests: requests per M and policy in that table.
        seed: the seed of the delay draws and the inputs.
        ray: also time the Ray backend (the extra ``codedjax[ray]``).
    """

    num_inputs: int = 8
    num_workers: int = 40
    num_features: int = 64
    degree: int = 3
    responses: tuple[int, ...] = (26, 30, 34)
    shift: float = 0.005
    mean: float = 0.005
    slow_prob: float = 0.1
    slow_factor: float = 10.0
    rack_size: int = 5
    num_requests: int = 1000
    sim_requests: int = 100_000
    adaptive_requests: int = 10_000
    error_requests: int = 2048
    budget_factor: float = 4.0
    deadline: float = 0.25
    floor_workers: tuple[int, ...] = (12, 16, 40)
    floor_requests: int = 400
    seed: int = 0
    ray: bool = False

    def __post_init__(self):
        name = "ServingConfig"
        fields = ("num_inputs", "num_workers", "num_features", "degree",
                  "rack_size", "num_requests", "sim_requests",
                  "adaptive_requests", "error_requests",
                  "floor_requests")  # fmt: skip
        check_fields(name, self, at_least=dict.fromkeys(fields, 1))
        d, m = self.num_coeffs, self.num_workers
        if d > m or not all(d <= n <= m for n in self.responses):
            raise ValueError(
                f"{name}: responses must each lie in [D, M] = [{d}, {m}], got "
                f"{list(self.responses)}"
            )
        if not self.floor_workers or min(self.floor_workers) < 1:
            raise ValueError(
                f"{name}: floor_workers must be one or more M >= 1, got "
                f"{list(self.floor_workers)}"
            )
        if self.sim_requests < self.error_requests:
            raise ValueError(
                f"{name}: sim_requests must be at least error_requests = "
                f"{self.error_requests} (the simulated requests whose decoded error "
                f"is reported), got {self.sim_requests}"
            )
        ok = (
            0 <= self.shift < math.inf
            and 0 < self.mean < math.inf
            and 0 <= self.slow_prob <= 1
            and 1 <= self.slow_factor < math.inf
            and 0 < self.budget_factor < math.inf
            and 0 < self.deadline < math.inf
        )
        if not ok:
            raise ValueError(
                f"{name}: need shift >= 0, mean > 0, slow_prob in [0, 1], "
                f"slow_factor >= 1, budget_factor > 0 and deadline > 0 (finite), got "
                f"{self.shift}, {self.mean}, {self.slow_prob}, {self.slow_factor}, "
                f"{self.budget_factor}, {self.deadline}"
            )

    @classmethod
    def quick(cls, **overrides) -> ServingConfig:
        quick = dict(num_requests=300, adaptive_requests=4000, floor_requests=200)
        return cls(**{**quick, **overrides})

    @property
    def num_coeffs(self) -> int:
        return cj.recovery_threshold(self.num_inputs, self.degree)


def catalogue_codes(workload: cj.Workload, k: int, m: int, names) -> dict[str, Any]:
    """{name: code} of the catalogue's ``names`` for ``workload`` on K queries and
    M workers; a scheme that does not apply is refused with the catalogue's reason."""
    out = {}
    for s in cj.catalogue(workload, k, m, names=names):
        if not s.applies:
            raise ValueError(f"benchmarks.serving: {s.name} {s.reason}")
        out[s.name] = s.code
    return out


def schemes(cfg: ServingConfig) -> list[tuple[str, Any, Any]]:
    """(name, code, policy) of every scheme of the tables."""
    k, m, d = cfg.num_inputs, cfg.num_workers, cfg.degree
    codes = catalogue_codes(
        cj.Workload("worker", d),
        k,
        m,
        ("uncoded", "replication", "chebyls", "threshold"),
    )
    cheb, thr = codes["chebyls"], codes["threshold"]
    # a few roundings of a bf16 worker at the scale of the coded answers
    x0 = request_inputs(cfg, 1)[0]
    scale = float(np.abs(np.asarray(jax.vmap(worker_fn)(cheb.encode(x0)),
                                    np.float32)).max())  # fmt: skip
    budget = cfg.budget_factor * cj.unit_roundoff(jnp.bfloat16) * scale
    out = [
        ("uncoded", codes["uncoded"], FixedN(k)),
        ("replication", codes["replication"], FirstDecodable()),
        ("threshold", thr, FixedN(cfg.num_coeffs)),
    ]  # fmt: skip
    out += [(f"chebyls-{n}", cheb, FixedN(n)) for n in cfg.responses]
    out.append(("adaptive", cheb, Adaptive(budget, cfg.deadline)))
    return out


def injector(cfg: ServingConfig, *, rack: bool = False) -> Injector:
    base = cj.ShiftedExponential(cfg.shift, cfg.mean)
    latency = cj.RandomSlowdown(
        base, prob=cfg.slow_prob, factor=cfg.slow_factor,
        group_size=cfg.rack_size if rack else 1,
    )  # fmt: skip
    return Injector(latency=latency if cfg.slow_prob > 0 else base, seed=cfg.seed)


def request_inputs(cfg: ServingConfig, count: int) -> np.ndarray:
    """The first ``count`` requests of the run ([count, K, F] float32)."""
    return inputs(cfg.seed, count, cfg.num_inputs, cfg.num_features)
