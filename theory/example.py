"""The README's ten-line example over many straggler masks per N.

    python -m theory.example [--quick] [--masks 1000] [--responses 22 24 26 30 40] \\
        --out results/example [--results-page docs/results/decoding.md]

The example's code and data as the README has them: K = 8 queries of 16 features
(``jax.random.key(0)``), M = 40 workers computing x^3 - x in bf16
(``cj.low_precision_worker``) on the Lagrange code of degree 3 (D = 22). For every N
it draws ``--masks`` uniformly random sets of N responders (``cj.sample_masks``
from ``fold_in(key(seed), N)``; the README's one mask is ``key(1)``) and decodes the
same bf16 answers with each of them, as ``code.decode`` would, in one batched call
(``code.decode_batched``, the kernel ``jax.vmap(code.decode)`` runs), by ChebyLS and
by ``decoder="graceful"``. Per N it reports the median, p95 and max over the masks
of max |value - f(x)| / max |f(x)| (a decode that is not ok counts with its zeros),
the fraction of ok decodes and ChebyLS's median condition number, next to the
error of an uncoded bf16 worker. Writes ``summary.json`` and ``report.md``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit
from runkit.pages import report_page

#: the example's sizes (the README's ten lines): K, M, degree, features
K, M, DEGREE, FEATURES = 8, 40, 3, 16

#: the heading of the results page (docs/results/decoding.md)
PAGE_TITLE = "The ten-line example over many masks per N"


@dataclasses.dataclass(frozen=True)
class ExampleConfig:
    """How many masks per N, which N, and the seed of the masks.

    Attributes:
      num_masks: random responding sets per N.
      responses: the values of N, each in [D, M] = [22, 40].
      seed: the masks' key (``fold_in(key(seed), N)``); the README's is 1.
    """

    num_masks: int = 1000
    responses: tuple[int, ...] = (22, 24, 26, 30, 40)
    seed: int = 1

    def __post_init__(self):
        object.__setattr__(self, "responses", tuple(self.responses))
        runkit.check_fields("ExampleConfig", self, at_least={"num_masks": 1})
        d = cj.recovery_threshold(K, DEGREE)
        bad = [n for n in self.responses if not d <= n <= M]
        if bad or not self.responses:
            raise ValueError(
                f"ExampleConfig: responses must each lie in [D, M] = [{d}, {M}], "
                f"got {list(self.responses)}"
            )

    @classmethod
    def quick(cls, **overrides) -> ExampleConfig:
        """100 masks per N."""
        return cls(**{"num_masks": 100, **overrides})


def _codes() -> dict[str, cj.Code]:
    return {
        "chebyls": cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEGREE),
        "graceful": cj.lagrange_code(
            num_inputs=K,
            num_workers=M,
            degree=DEGREE,
            decoder="graceful",
            worker_dtype="bfloat16",
        ),
    }


def _stats(err: np.ndarray) -> dict[str, float]:
    return {
        "median": float(np.median(err)),
        "p95": float(np.quantile(err, 0.95)),
        "max": float(np.max(err)),
    }


def run_example(cfg: ExampleConfig) -> dict[str, Any]:
    """The example's errors per N and decoder (the summary)."""
    x = jax.random.normal(jax.random.key(0), (K, FEATURES))
    worker = cj.low_precision_worker(lambda v: v**3 - v, jnp.bfloat16)
    x64 = np.asarray(x, np.float64)
    truth = x64**3 - x64
    scale = float(np.abs(truth).max())
    uncoded = np.asarray(worker(x), np.float64)
    codes = _codes()
    answers = {name: worker(code.encode(x)) for name, code in codes.items()}
    rows = []
    for n in cfg.responses:
        masks = cj.sample_masks(
            jax.random.fold_in(jax.random.key(cfg.seed), n),
            num_workers=M,
            num_responses=n,
            shape=(cfg.num_masks,),
        )
        row: dict[str, Any] = {"N": n}
        for name, code in codes.items():
            r = code.decode_batched(answers[name], masks, shared_y=True)
            value = np.asarray(r.value, np.float64)
            err = np.abs(value - truth).max(axis=(-2, -1)) / scale
            row[name] = {**_stats(err), "ok": float(np.mean(np.asarray(r.ok)))}
            if name == "chebyls":
                row["cond_median"] = float(np.median(np.asarray(r.cond)))
        rows.append(row)
    return {
        "config": dataclasses.asdict(cfg),
        "D": codes["chebyls"].threshold,
        "uncoded_bf16_rel_err": float(np.abs(uncoded - truth).max() / scale),
        "rows": rows,
        "environment": runkit.environment(),
    }


def _g(value: float) -> str:
    """Two significant digits, ``4.5e-3`` / ``0.32`` / ``1.1e4``."""
    text = f"{value:.1e}" if value != 0 and abs(value) < 0.01 else f"{value:.2g}"
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant}e{int(exp)}"
    return text


def format_report(summary: dict[str, Any]) -> str:
    """``report.md``: the table of errors per N."""
    cfg = summary["config"]

    def q(s: dict) -> str:
        return f"{_g(s['median'])} / {_g(s['p95'])} / {_g(s['max'])}"

    lines = [
        "# The ten-line example over many masks per N",
        "",
        f"K = {K}, M = {M}, x^3 - x on bf16 workers (D = {summary['D']}); "
        f"{cfg['num_masks']} random responding sets per N (seed {cfg['seed']}); "
        "max |value - f(x)| / max |f(x)| against float64, median / p95 / max over "
        f"the masks; an uncoded bf16 worker: {_g(summary['uncoded_bf16_rel_err'])}.",
        "",
        "| N | ChebyLS median / p95 / max | graceful median / p95 / max | "
        "median cond | ok ChebyLS / graceful |",
        "|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        c, g = r["chebyls"], r["graceful"]
        lines.append(
            f"| {r['N']} | {q(c)} | {q(g)} | {_g(r['cond_median'])} | "
            f"{c['ok']:.3f} / {g['ok']:.3f} |"
        )
    return "\n".join(lines) + "\n"


FLAGS = {
    "num_masks": ("--masks", {"help": "random responding sets per N (default 1000)"}),
    "responses": ("--responses", {"nargs": "+", "help": "values of N (22 to 40)"}),
}


def _run(cfg: ExampleConfig, cmd: runkit.Invocation) -> dict[str, Any]:
    t0 = time.perf_counter()
    summary = run_example(cfg)
    summary["seconds"] = time.perf_counter() - t0
    summary["command"] = cmd.command
    print(runkit.write_report(cmd.out, summary, format_report(summary)))
    report_page(cmd, title=PAGE_TITLE)
    return summary


def main(argv=None) -> dict[str, Any]:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        ExampleConfig, _run, argv, prog="python -m theory.example",
        description=__doc__.split("\n\n")[0], flags=FLAGS, out="results/example",
        seed=None,
    )  # fmt: skip


if __name__ == "__main__":
    main()
