"""A short demo: encode, drop stragglers, decode bf16 / float32 worker answers.

    python -m theory.demo --out results/demo

K inputs go through a DCNv2-style cross tower (degree 3, a polynomial) on M coded
workers that compute in bf16 or float32; for every N from D to M the master decodes
random straggler patterns by ChebyLS (all N responders) and by the threshold decoder
(the first D in arrival order), in float32, and prints the relative error against the
uncoded float64 result.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit
from runkit.pages import report_page


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    cross_layers: int = 2  # L: degree d = L + 1
    features: int = 16
    num_masks: int = 200
    responses: tuple[int, ...] = (22, 24, 26, 30, 35, 40)
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "responses", tuple(self.responses))
        fields = ("num_inputs", "num_workers", "features", "num_masks")
        at_least = {**dict.fromkeys(fields, 1), "cross_layers": 0}
        runkit.check_fields("DemoConfig", self, at_least=at_least)
        d = cj.recovery_threshold(self.num_inputs, self.cross_layers + 1)
        if d > self.num_workers:
            raise ValueError(
                f"DemoConfig: num_workers must be at least D = {d} (num_inputs = "
                f"{self.num_inputs}, cross_layers = {self.cross_layers}), got "
                f"{self.num_workers}"
            )
        bad = [n for n in self.responses if not d <= n <= self.num_workers]
        if bad or not self.responses:
            raise ValueError(
                f"DemoConfig: responses must each lie in [D, num_workers] = "
                f"[{d}, {self.num_workers}], got {list(self.responses)}"
            )

    @classmethod
    def quick(cls, **overrides) -> DemoConfig:
        """The demo is small already: ``quick()`` is the default configuration."""
        return cls(**overrides)

    def codes(self) -> dict[str, cj.Code]:
        """The two decoders compared: ChebyLS and the threshold decoder, on the same
        Lagrange code (K first-kind data points, M first-kind worker points)."""
        return {
            decoder: cj.lagrange_code(
                num_inputs=self.num_inputs,
                num_workers=self.num_workers,
                degree=self.cross_layers + 1,
                decoder=decoder,
            )
            for decoder in ("chebyls", "threshold")
        }


def cross_params(key, features: int, layers: int):
    """Random cross-tower weights: W ~ N(0, 1/n), b ~ 0.1 N(0, 1), a linear head."""
    ks = jax.random.split(key, 2 * layers + 1)
    n = features
    return {
        "w": [jax.random.normal(ks[2 * i], (n, n)) / np.sqrt(n) for i in range(layers)],
        "b": [0.1 * jax.random.normal(ks[2 * i + 1], (n,)) for i in range(layers)],
        "head": jax.random.normal(ks[-1], (n,)) / np.sqrt(n),
    }


def cross_tower(params, x0):
    """DCNv2 cross tower x_{l+1} = x0 * (W_l x_l + b_l) + x_l, then a linear head."""
    xl = x0
    for w, b in zip(params["w"], params["b"], strict=True):
        xl = x0 * (xl @ w.T + b[None, :]) + xl
    return xl @ params["head"]


class DemoSummary(TypedDict, total=False):
    """What :func:`run_demo` returns (``summary.json``): the configuration, D, the
    uncoded bf16 worker's relative error, and per N the median / p95 relative error
    of each decoder with bf16 and float32 workers, cond and the ok fraction."""

    config: dict[str, Any]
    D: int
    uncoded_bf16_rel_err: float
    rows: list[dict[str, Any]]
    environment: dict[str, Any]
    seconds: float


def _quantiles(e):
    return {"median": float(np.median(e)), "p95": float(np.quantile(e, 0.95))}


def run_demo(cfg: DemoConfig) -> DemoSummary:
    """Run the demo and return the summary."""
    k, m = cfg.num_inputs, cfg.num_workers
    codes = cfg.codes()
    d = codes["chebyls"].threshold
    kp, kx, km = jax.random.split(jax.random.key(cfg.seed), 3)
    params = cross_params(kp, cfg.features, cfg.cross_layers)
    x = jax.random.normal(kx, (k, cfg.features))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(cross_tower(p64, jnp.asarray(x, jnp.float64)))
    coded = codes["chebyls"].encode(x)
    bf16_worker = cj.low_precision_worker(cross_tower, jnp.bfloat16)
    answers = {
        "bf16": bf16_worker(params, coded),
        "float32": cross_tower(params, coded),
    }
    uncoded = np.asarray(bf16_worker(params, x), np.float64)

    def rel(v):
        v = np.asarray(v, np.float64)
        return np.linalg.norm(v - truth, axis=-1) / np.linalg.norm(truth)

    def _decode_all(code, y, arr):
        # the arrival order goes to the codes that read it (the threshold code)
        extra = {"order": arr.order} if "order" in code.answer_fields else {}
        return code.decode_batched(y, arr.mask, shared_y=True, **extra)

    rows = []
    for n in cfg.responses:
        if not d <= n <= m:
            raise ValueError(f"run_demo: responses must lie in [D={d}, M={m}], got {n}")
        arr = cj.sample_arrivals(
            jax.random.fold_in(km, n),
            num_workers=m,
            num_responses=n,
            model=cj.Uniform(0.0, 1.0),
            shape=(cfg.num_masks,),
        )
        row = {"N": n}
        for wd, y in answers.items():
            res = {name: _decode_all(code, y, arr) for name, code in codes.items()}
            for name, r in res.items():
                row[f"{name}_{wd}"] = _quantiles(rel(r.value))
                if wd == "bf16":
                    row[f"cond_{name}_median"] = float(np.median(np.asarray(r.cond)))
                    row[f"{name}_ok_fraction"] = float(np.mean(np.asarray(r.ok)))
        rows.append(row)
    floor = float(np.linalg.norm(uncoded - truth) / np.linalg.norm(truth))
    return DemoSummary(
        config=dataclasses.asdict(cfg),
        D=d,
        uncoded_bf16_rel_err=floor,
        rows=rows,
        environment=runkit.environment(),
    )


def format_table(summary: dict) -> str:
    lines = [
        f"K={summary['config']['num_inputs']}, M={summary['config']['num_workers']}, "
        f"D={summary['D']}; relative L2 error of the K decoded outputs against uncoded "
        f"float64 (median / p95 over {summary['config']['num_masks']} random straggler "
        f"sets); uncoded bf16 worker: {summary['uncoded_bf16_rel_err']:.2e}",
        "",
    ]
    names = ("chebyls_bf16", "threshold_bf16", "chebyls_float32", "threshold_float32")
    head = ["N", "cond ChebyLS", "cond threshold"] + [
        f"{d}, {w} workers" for w in ("bf16", "f32") for d in ("ChebyLS", "threshold")
    ]
    lines += runkit.md_table(head, (
        [r["N"], f"{r['cond_chebyls_median']:.3g}", f"{r['cond_threshold_median']:.3g}"]
        + [f"{r[n]['median']:.2e} / {r[n]['p95']:.2e}" for n in names]
        for r in summary["rows"]
    ))  # fmt: skip
    return "\n".join(lines)


def write_outputs(summary: DemoSummary, out: str) -> str:
    """``summary.json`` and ``report.md`` in ``out``; returns the table."""
    table = format_table(summary)
    head = "# Demo: ChebyLS against the threshold decoder\n\n"
    runkit.write_report(out, summary, head + table + "\n")
    return table


FLAGS = {
    "num_inputs": ("--inputs", {"help": "K (default 8)"}),
    "num_workers": ("--workers", {"help": "M (default 40)"}),
    "cross_layers": ("--cross-layers", {"help": "L, degree L + 1 (default 2)"}),
    "num_masks": "--masks",
    "responses": ("--responses", {"nargs": "+", "help": "values of N (D to M)"}),
}


def _run(cfg: DemoConfig, cmd: runkit.Invocation) -> DemoSummary:
    t0 = time.perf_counter()
    summary = run_demo(cfg)
    summary["seconds"] = time.perf_counter() - t0
    print(write_outputs(summary, cmd.out))
    report_page(cmd, title="Demo: ChebyLS against the threshold decoder")
    return summary


def main(argv=None) -> DemoSummary:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        DemoConfig, _run, argv, prog="python -m theory.demo",
        description=__doc__.split("\n\n")[0], flags=FLAGS, out="results/demo",
    )  # fmt: skip


if __name__ == "__main__":
    main()
