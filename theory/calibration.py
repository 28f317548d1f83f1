"""Calibration of the predicted error (the ``error`` field of every decode).

    python -m theory.calibration --out results/calibration

The bf16 cross-tower setting of :mod:`theory.demo` (K = 8 queries through a degree-3
DCNv2 cross tower, M = 40 workers at first-kind Chebyshev points, D = 22): for each N
and each of ``num_masks`` requests (a fresh batch of K queries and a uniformly
random set of N responders per request), the workers answer in bf16, the master
decodes in float32, and the actual error max_k |value_k - f(X_k)| (against the
float64 model) is compared with the decoder's predicted error. Reported per decoder
and N: the fraction of requests whose prediction is at least the actual error
(target >= 95%) and the median of predicted / actual (target <= 10); a scatter
plot of predicted against actual. The maths is in ``docs/decoding.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

from .demo import cross_params, cross_tower

DECODERS = ("chebyls", "chebyls_batched", "graceful")


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    cross_layers: int = 2  # L: degree d = L + 1
    features: int = 16
    num_masks: int = 2000
    responses: tuple[int, ...] = (22, 24, 26, 30, 40)
    decoders: tuple[str, ...] = DECODERS
    seed: int = 0
    progress: bool = True


def _problem(cfg: CalibrationConfig):
    """Queries, bf16 answers and float64 truths of ``num_masks`` requests."""
    k, m = cfg.num_inputs, cfg.num_workers
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    kp, kx, _ = jax.random.split(jax.random.key(cfg.seed), 3)
    params = cross_params(kp, cfg.features, cfg.cross_layers)
    x = jax.random.normal(kx, (cfg.num_masks, k, cfg.features))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(
            jax.vmap(lambda xx: cross_tower(p64, xx))(jnp.asarray(x, jnp.float64))
        )
    coded = jax.vmap(lambda xx: cj.lagrange_encode(xx, beta, alpha))(x)
    worker = cj.low_precision_worker(cross_tower, jnp.bfloat16)
    y = jax.vmap(lambda c: worker(params, c))(coded)  # [B, M] bf16
    return alpha, beta, y, truth


def _decoder(name: str, alpha, beta, d: int):
    if name == "chebyls_batched":
        return lambda y, masks: cj.chebyls_decode_batched(
            y, masks, alpha, beta, num_coeffs=d
        )
    fn = {"chebyls": cj.chebyls_decode, "graceful": cj.graceful_decode}[name]
    one = jax.jit(
        jax.vmap(lambda yy, mk: fn(yy, mk, alpha, beta, num_coeffs=d)),
    )

    def run(y, masks, chunk=250):
        parts = [
            one(y[i : i + chunk], masks[i : i + chunk]) for i in range(0, len(y), chunk)
        ]
        return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)

    return run


class CalibrationSummary(TypedDict, total=False):
    """What :func:`run_calibration` returns: per N and decoder the share of
    requests whose predicted error covers the actual one and the median ratio
    (``rows``), the targets, and the raw (actual, predicted) ``pairs`` (not written
    to ``summary.json``)."""

    config: dict[str, Any]
    D: int
    rows: list[dict[str, Any]]
    targets: dict[str, bool]
    pairs: dict[str, tuple[list[float], list[float]]]
    environment: dict[str, Any]
    seconds: float


def run_calibration(cfg: CalibrationConfig) -> CalibrationSummary:
    """Measure the calibration; returns the summary with the raw pairs."""
    k, m = cfg.num_inputs, cfg.num_workers
    d = cj.recovery_threshold(k, cfg.cross_layers + 1)
    alpha, beta, y, truth = _problem(cfg)
    km = jax.random.fold_in(jax.random.key(cfg.seed), 7)
    rows, pairs = [], {}
    steps = [(n, name) for n in cfg.responses for name in cfg.decoders]
    bar = runkit.progress(
        total=len(steps), desc="calibration", disable=None if cfg.progress else True
    )
    for n in cfg.responses:
        if not d <= n <= m:
            raise ValueError(f"run_calibration: responses must lie in [D={d}, M={m}]")
        masks = cj.sample_masks(
            jax.random.fold_in(km, n), num_workers=m, num_responses=n,
            shape=(cfg.num_masks,),
        )  # fmt: skip
        for name in cfg.decoders:
            r = _decoder(name, alpha, beta, d)(y, masks)
            ok = np.asarray(r.ok)
            act = np.abs(np.asarray(r.value, np.float64) - truth).max(axis=1)
            pred = np.asarray(r.error, np.float64)
            act, pred = act[ok], pred[ok]
            ratio = pred / np.maximum(act, np.finfo(np.float64).tiny)
            rows.append(
                {
                    "N": n,
                    "decoder": name,
                    "requests": int(ok.sum()),
                    "not_ok": int((~ok).sum()),
                    "covered": float(np.mean(ratio >= 1)),
                    "median_ratio": float(np.median(ratio)),
                    "actual_median": float(np.median(act)),
                    "predicted_median": float(np.median(pred)),
                }
            )
            pairs[f"{name}/{n}"] = (act.tolist(), pred.tolist())
            bar.update(1)
    bar.close()
    targets = {
        "covered>=0.95": all(r["covered"] >= 0.95 for r in rows),
        "median_ratio<=10": all(r["median_ratio"] <= 10 for r in rows),
    }
    return CalibrationSummary(
        config=dataclasses.asdict(cfg),
        D=d,
        rows=rows,
        targets=targets,
        pairs=pairs,
        environment=runkit.environment(),
    )


def format_table(summary: dict) -> str:
    c = summary["config"]
    lines = [
        f"K={c['num_inputs']}, M={c['num_workers']}, D={summary['D']}, bf16 workers, "
        f"cross tower of degree {c['cross_layers'] + 1}; {c['num_masks']} requests "
        "per N (fresh queries and responders each); covered = P(predicted >= "
        "actual), ratio = predicted / actual",
        "",
        "| N | decoder | covered | median ratio | median actual | median predicted |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        lines.append(
            f"| {r['N']} | {r['decoder']} | {r['covered']:.4f} | "
            f"{r['median_ratio']:.2f} | {r['actual_median']:.2e} | "
            f"{r['predicted_median']:.2e} |"
        )
    return "\n".join(lines)


def plot(summary: dict, path: str) -> None:
    """Scatter of predicted against actual error, one panel per decoder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = summary["config"]["decoders"]
    fig, axes = plt.subplots(
        1, len(names), figsize=(5 * len(names), 4.5), squeeze=False
    )
    for ax, name in zip(axes[0], names, strict=True):
        lo, hi = np.inf, 0.0
        for n in summary["config"]["responses"]:
            act, pred = summary["pairs"][f"{name}/{n}"]
            act, pred = np.asarray(act), np.asarray(pred)
            ax.loglog(act, pred, ".", ms=2, alpha=0.4, label=f"N = {n}")
            lo = min(lo, act.min(), pred.min())
            hi = max(hi, act.max(), pred.max())
        lo = max(lo, 1e-8)
        ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="predicted = actual")
        ax.plot([lo, hi], [10 * lo, 10 * hi], "k--", lw=1, label="10 x actual")
        ax.set_xlabel("actual error max_k |value_k - f(X_k)|")
        ax.set_ylabel("predicted error")
        ax.set_title(name)
        ax.legend(fontsize=7, markerscale=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(summary: CalibrationSummary, out: str) -> str:
    """``summary.json`` (without the raw pairs), ``report.md`` and
    ``calibration.png`` in ``out``; returns the table."""
    os.makedirs(out, exist_ok=True)
    table = format_table(summary)
    plot(summary, os.path.join(out, "calibration.png"))
    slim = {key: val for key, val in summary.items() if key != "pairs"}
    runkit.write_summary(os.path.join(out, "summary.json"), slim)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(
            "# Calibration of the predicted error\n\n" + table + "\n\n"
            f"Targets met: {summary['targets']}\n\n![scatter](calibration.png)\n"
        )
    return table


FLAGS = {
    "num_masks": "--masks",
    "responses": ("--responses", {"nargs": "+"}),
    "decoders": ("--decoders", {"nargs": "+", "choices": DECODERS}),
}


def main(argv=None) -> CalibrationSummary:
    """Command-line entry point; returns the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runkit.add_run_arguments(parser, out="results/calibration", quick=False)
    runkit.add_config_arguments(parser, CalibrationConfig, FLAGS)
    args = parser.parse_args(argv)
    runkit.at_least(parser, args, {"--masks": 1, "--responses": 1})
    cfg = CalibrationConfig(
        **runkit.config_overrides(args, CalibrationConfig),
        progress=not args.no_progress,
    )
    t0 = time.perf_counter()
    summary = run_calibration(cfg)
    summary["seconds"] = time.perf_counter() - t0
    print(write_outputs(summary, args.out))
    print(f"targets: {summary['targets']} ({summary['seconds']:.1f} s)")
    return summary


if __name__ == "__main__":
    main()
