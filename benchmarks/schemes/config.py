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
    def quick(cls, **overrides) -> SchemesConfig:
        """32 trials per N, every third N, the quick-trained MNIST models."""
        base = dict(trials=32, n_step=3, mnist_quick_train=True)
        return cls(**{**base, **overrides})


#: the head-to-head's rows, in its order: (row, catalogue entry, the catalogue's
#: knobs; ``copies``: coded queries per worker, the code built at M copies
#: points). A row joins a panel where its catalogue entry applies.
_LAGRANGE_ROWS = (
    ("chebyls", "chebyls", {}),
    ("chebyls-2q", "chebyls", {"copies": 2}),
    ("chebyls-kind2", "chebyls", {"kind": 2}),
    ("threshold", "threshold", {}),
    ("graceful", "graceful", {}),
    ("robust1", "robust", {"max_corrupted": 1}),
)
_LINEAR_ROWS = (  # the packed circle code and the random code: a linear map only
    ("circle-packed", "circle", {}),
    ("circle-packed-threshold", "circle", {"circle_decoder": "threshold"}),
    ("circle", "circle", {"circle_pack": False}),
    ("random", "random", {}),
    ("parity", "parity k=2", {}),  # ParM's k = 2, at its M = K + K/2 only
)
_POLYNOMIAL_ROWS = (
    ("circle", "circle", {}),
    ("circle-threshold", "circle", {"circle_decoder": "threshold"}),
)
_APPROXIMATE_ROWS = (
    ("bacc", "bacc", {}),
    ("nercc", "nercc", {"nercc_smoothing": (1e-4, 1e-3)}),
    ("repapprox", "repapprox", {}),  # from M = 2K on, c = (M - K) // K
    ("replication", "replication", {}),
)


def schemes(k: int, m: int, degree: int | None, worker_dtype: str) -> list[cj.Scheme]:
    """The head-to-head's rows at (K, M, degree) for workers in ``worker_dtype``:
    the entries of :func:`codedjax.catalogue` that apply, renamed by row. Degree 1
    is the linear map without bias (the packed circle, random and parity codes
    join), None a workload that is not a polynomial; ``chebyls-2q`` is ChebyLS at
    2M points, worker j holding points j and j + M (``copies`` 2)."""
    wl = cj.Workload("f", degree, linear=degree == 1)
    rows = _LAGRANGE_ROWS + (_LINEAR_ROWS if degree == 1 else _POLYNOMIAL_ROWS)
    out: list[cj.Scheme] = []
    for row, entry, knobs in rows + _APPROXIMATE_ROWS:
        knobs = dict(knobs)
        copies = knobs.pop("copies", 1)
        if entry == "parity k=2" and m != k + k // 2:
            continue
        if entry == "repapprox":
            if m < 2 * k:
                continue
            knobs["replicas"] = (m - k) // k
        built = cj.catalogue(
            wl, k, m * copies, worker_dtype=worker_dtype, names=[entry.split()[0]],
            **knobs,
        )  # fmt: skip
        for s in built:
            if s.name == entry and s.applies:
                out.append(dataclasses.replace(s, name=row, copies=copies, workers=m))
    return out
