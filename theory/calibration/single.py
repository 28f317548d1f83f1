"""One decoder family on one workload (the cross tower or a Chebyshev series):
predicted against actual error per N, the table and the scatter plot."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

from ..demo import cross_params, cross_tower
from .config import PAYLOADS, WORKER_DTYPES, CalibrationConfig


def _series(cfg: CalibrationConfig, alpha, beta, d: int):
    """Answers [B, M, F] (rounded once to the workers' dtype) and float64 truths
    [B, K, F] of random Chebyshev series of degree D - 1 (equilibrated basis)."""
    rng = np.random.default_rng(cfg.seed)
    m = cfg.num_workers
    scale = np.full(d, np.sqrt(2.0 / m))
    scale[0] = np.sqrt(1.0 / m)
    t = np.polynomial.chebyshev.chebvander(np.asarray(alpha, np.float64), d - 1)
    tb = np.polynomial.chebyshev.chebvander(np.asarray(beta, np.float64), d - 1)
    c = rng.standard_normal((cfg.num_masks, d, cfg.columns))
    c *= (cfg.decay ** np.arange(d))[None, :, None]
    y = np.einsum("md,bdf->bmf", t * scale, c)
    truth = np.einsum("kd,bdf->bkf", tb * scale, c)
    return jnp.asarray(y, cfg.worker_dtype), truth


def _problem(cfg: CalibrationConfig, d: int):
    """Answers in the workers' dtype and float64 truths of ``num_masks``
    requests (the queries of the cross tower, or a Chebyshev series)."""
    k, m = cfg.num_inputs, cfg.num_workers
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    if cfg.payload == "series":
        return (alpha, beta) + _series(cfg, alpha, beta, d)
    kp, kx, _ = jax.random.split(jax.random.key(cfg.seed), 3)
    params = cross_params(kp, cfg.features, cfg.cross_layers)
    x = jax.random.normal(kx, (cfg.num_masks, k, cfg.features))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(
            jax.vmap(lambda xx: cross_tower(p64, xx))(jnp.asarray(x, jnp.float64))
        )
    coded = jax.vmap(lambda xx: cj.lagrange_encode(xx, beta, alpha))(x)
    worker = cj.low_precision_worker(cross_tower, jnp.dtype(cfg.worker_dtype))
    y = jax.vmap(lambda c: worker(params, c))(coded)  # [B, M] in the workers' dtype
    return alpha, beta, y, truth


def _decoder(name: str, alpha, beta, d: int):
    """``chebyls`` and ``graceful``: their function under ``jax.vmap`` (for
    ChebyLS the batched kernel), ``chebyls_batched``: the batched function,
    ``chebyls_one``: the one-mask kernel (what ``ChebyLSCode.decode`` runs for
    one request), mask after mask under ``lax.map``."""
    if name == "chebyls_batched":
        return lambda y, masks: cj.chebyls_decode_batched(
            y, masks, alpha, beta, num_coeffs=d
        )
    fn = {"chebyls": cj.chebyls_decode, "chebyls_one": cj.chebyls_decode,
          "graceful": cj.graceful_decode}[name]  # fmt: skip

    def dec(a):
        return fn(a[0], a[1], alpha, beta, num_coeffs=d)

    def batch(yy, mk):
        if name == "chebyls_one":
            return jax.lax.map(dec, (yy, mk))
        return jax.vmap(dec)((yy, mk))

    one = jax.jit(batch)

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
    date: str
    command: str
    environment: dict[str, Any]
    seconds: float


def run_calibration(cfg: CalibrationConfig) -> CalibrationSummary:
    """Measure the calibration; returns the summary with the raw pairs."""
    k, m = cfg.num_inputs, cfg.num_workers
    d = cj.recovery_threshold(k, cfg.cross_layers + 1)
    if cfg.payload not in PAYLOADS or cfg.worker_dtype not in WORKER_DTYPES:
        raise ValueError(
            f"run_calibration: payload must be one of {PAYLOADS} and worker_dtype "
            f"one of {WORKER_DTYPES}, got {cfg.payload!r}, {cfg.worker_dtype!r}"
        )
    alpha, beta, y, truth = _problem(cfg, d)
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
            diff = np.abs(np.asarray(r.value, np.float64) - truth)
            act = diff.reshape(diff.shape[0], -1).max(axis=1)
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
    if c.get("payload", "tower") == "series":
        what = (
            f"Chebyshev series (F={c['columns']}, coefficients N(0, {c['decay']}^(2j)))"
        )
    else:
        what = f"cross tower of degree {c['cross_layers'] + 1}"
    wdt = c.get("worker_dtype", "bfloat16")
    lines = [
        f"K={c['num_inputs']}, M={c['num_workers']}, D={summary['D']}, {wdt} "
        f"workers, {what}; {c['num_masks']} requests "
        "per N (fresh queries and responders each); covered = P(predicted >= "
        "actual), ratio = predicted / actual",
        "",
    ]
    head = ["N", "decoder", "covered", "median ratio", "median actual",
            "median predicted"]  # fmt: skip
    lines += runkit.md_table(head, (
        [r["N"], r["decoder"], f"{r['covered']:.4f}", f"{r['median_ratio']:.2f}",
         f"{r['actual_median']:.2e}", f"{r['predicted_median']:.2e}"]
        for r in summary["rows"]
    ))  # fmt: skip
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
    runkit.write_report(
        out, slim, "# Calibration of the predicted error\n\n" + table + "\n\n"
        f"Targets met: {summary['targets']}\n\n![scatter](calibration.png)\n",
    )  # fmt: skip
    return table


# ----------------------------------------------------------------------------------
# the catalogue (``--codes``): every code, every N from its threshold to M

#: (K, M, d) of the catalogue's two workloads, f(x) = (x W)^d on P payload
#: columns: the linear one serves every code, the quadratic one the codes that are
