"""The head-to-head's settings and its schemes: every code of the library that fits
(K, M, degree), built by the library's factories."""

from __future__ import annotations

import dataclasses

import codedjax as cj

#: the workers' dtypes, the workloads and the model panels the benchmark knows
DTYPES = ("bfloat16", "float16", "float32")
WORKLOADS = ("linear", "cross3")
MODEL_PANELS = ("adult", "mnist")


@dataclasses.dataclass(frozen=True)
class SchemesConfig:
    """The head-to-head's settings (``--quick``: :meth:`quick`)."""

    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    features: int = 16
    cross_layers: int = 2  # degree 3
    trials: int = 200  # requests per N (fresh queries and arrivals each)
    n_step: int = 1  # every n_step-th N from the lowest threshold to M
    parm_group: int = 2  # k of ParM: M = K + K / k
    dtypes: tuple[str, ...] = ("bfloat16", "float32")
    exhaustive: bool = True  # the exhaustive cond table (n=31,k=29; n=20,k=16)
    only: tuple[str, ...] = ()  # scheme names to run (empty: every scheme)
    workloads: tuple[str, ...] = ("linear", "cross3")
    seed: int = 0
    # the model panel (benchmarks.schemes.models): the Adult DCNv2, off by default
    models: bool = False
    model_responses: tuple[int, ...] = (22, 26, 31, 36, 40)  # N, D <= N <= M
    model_repetitions: int = 2  # arrival orders per group of K test queries
    model_queries: int = 0  # score the first this many test queries (0: all)
    model_dtype: str = "bfloat16"  # the workers' dtype
    model_rows: tuple[str, ...] = ()  # rows of the model panel (empty: every row)
    ckpt_dir: str = "checkpoints"  # where the models' checkpoints are (or go)
    # which model panels --models runs: the Adult DCNv2 and the MNIST network
    model_panels: tuple[str, ...] = ("adult", "mnist")
    mnist_model: str = "mlp"  # ParM's 784-200-100-10 MLP, or lenet5
    mnist_quick_train: bool = False  # the quick training presets (--quick)
    mnist_responses: tuple[int, ...] = ()  # N of the MNIST panel (empty: a grid)
    mnist_queries: int = 0  # the first this many test digits (0: all 1,000)
    mnist_rows: tuple[str, ...] = ()  # rows of the MNIST panel (empty: every row)

    def __post_init__(self):
        name = "SchemesConfig"
        lows = {"num_inputs": 1, "num_workers": 1, "features": 1, "cross_layers": 0,
                "trials": 1, "n_step": 1, "parm_group": 2, "model_repetitions": 1,
                "model_queries": 0, "mnist_queries": 0, "seed": 0}  # fmt: skip
        for field, low in lows.items():
            if getattr(self, field) < low:
                raise ValueError(
                    f"{name}: {field} must be >= {low}, got {getattr(self, field)}"
                )
        if self.num_inputs > self.num_workers:
            raise ValueError(
                f"{name}: num_inputs must be at most num_workers = "
                f"{self.num_workers} (K <= M), got {self.num_inputs}"
            )
        names = {
            "dtypes": DTYPES,
            "workloads": WORKLOADS + ("none",),
            "model_panels": MODEL_PANELS,
        }
        for field, allowed in names.items():
            v = tuple(getattr(self, field))
            if not v or not set(v) <= set(allowed):
                raise ValueError(
                    f"{name}: {field} must list names of {', '.join(allowed)}, got "
                    f"{list(v)}"
                )
        if self.workloads == ("none",) and not self.models:
            raise ValueError(
                f"{name}: workloads none (the model panels only) needs models"
            )
        if self.model_dtype not in DTYPES:
            raise ValueError(
                f"{name}: model_dtype must be one of {', '.join(DTYPES)}, got "
                f"{self.model_dtype!r}"
            )
        for field in ("model_responses", "mnist_responses"):
            bad = [n for n in getattr(self, field) if n < 1]
            if bad:
                raise ValueError(f"{name}: {field} must each be >= 1, got {bad}")

    @classmethod
    def quick(cls) -> SchemesConfig:
        return cls(trials=32, n_step=3, mnist_quick_train=True)


@dataclasses.dataclass(frozen=True)
class Scheme:
    name: str
    code: cj.Code
    copies: int  # coded queries per worker (1, or 2 for the "-2q" variants)
    work: int  # real evaluations of f per worker


def schemes(k: int, m: int, degree: int, worker_dtype: str) -> list[Scheme]:
    """Every code of the library that fits (K, M, degree), for workers in
    ``worker_dtype``. Linear-only codes (packed circle, random) join for degree 1."""
    out: list[Scheme] = []

    def add(name, make, copies=1, work=1):
        try:
            code = make(m * copies)
        except ValueError:  # does not fit this (K, M, degree): not in the panel
            return
        out.append(Scheme(name, code, copies, work))

    lag = dict(num_inputs=k, degree=degree)
    add("chebyls", lambda mm: cj.lagrange_code(num_workers=mm, **lag))
    add("chebyls-2q", lambda mm: cj.lagrange_code(num_workers=mm, **lag), 2, 2)
    add("chebyls-kind2", lambda mm: cj.lagrange_code(num_workers=mm, kind=2, **lag))
    add(
        "threshold",
        lambda mm: cj.lagrange_code(num_workers=mm, decoder="threshold", **lag),
    )
    add(
        "graceful",
        lambda mm: cj.lagrange_code(
            num_workers=mm, decoder="graceful", worker_dtype=worker_dtype, **lag
        ),
    )
    add(
        "robust1",
        lambda mm: cj.lagrange_code(
            num_workers=mm,
            decoder="robust",
            max_corrupted=1,
            worker_dtype=worker_dtype,
            **lag,
        ),
    )
    circ = dict(num_inputs=k, degree=degree)
    if degree == 1:
        add("circle-packed", lambda mm: cj.circle_code(num_workers=mm, **circ), 1, 2)
        add(
            "circle-packed-threshold",
            lambda mm: cj.circle_code(num_workers=mm, decoder="threshold", **circ),
            1,
            2,
        )
        add(
            "circle",
            lambda mm: cj.circle_code(num_workers=mm, pack=False, **circ),
            1,
            2,
        )
        add("random", lambda mm: cj.random_code(num_inputs=k, num_workers=mm))
        parity = getattr(cj, "parity_code", None)
        if parity is not None and m == k + k // 2 and k % 2 == 0:
            # the linear base model without bias is its own exact parity model
            add("parity", lambda mm: parity(num_inputs=k, group=2, parity_error=0.0))
    else:
        add("circle", lambda mm: cj.circle_code(num_workers=mm, **circ), 1, 2)
        add(
            "circle-threshold",
            lambda mm: cj.circle_code(num_workers=mm, decoder="threshold", **circ),
            1,
            2,
        )
    add("bacc", lambda mm: cj.bacc_code(num_inputs=k, num_workers=mm))
    add(
        "nercc",
        lambda mm: cj.nercc_code(num_inputs=k, num_workers=mm, smoothing=(1e-4, 1e-3)),
    )
    if m >= 2 * k:
        add(
            "repapprox",
            lambda mm: cj.repapprox_code(
                num_inputs=k, num_workers=mm, replication=max(1, (m - k) // k)
            ),
        )
    add("replication", lambda mm: cj.replication_code(num_inputs=k, num_workers=mm))
    return out
