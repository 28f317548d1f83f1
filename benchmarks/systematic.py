"""Systematic codes: what putting the data points among the worker points costs.

    python -m benchmarks.systematic [--quick] [--out DIR]
        [--results-page docs/results/systematic.md]

1. **Conditioning.** The 2-norm condition number of the equilibrated
   Chebyshev-Vandermonde rows of N responders (``DecodeResult.cond`` of ChebyLS),
   median and 95th percentile over random N-subsets (the same subsets for both
   point sets), against N, for today's first-kind worker points, the systematic
   ones (``lagrange_code(..., systematic=True)``: the Chebyshev points of M with
   the K nearest to the data points moved onto them) and, for comparison, the
   data points together with the Chebyshev points of the other M - K (where
   they do not repeat a point): K = 8, M = 12, 16, 40, degree 1 (D = 8) and 3
   (D = 22, M = 40 only).
2. **Accuracy with bf16 workers.** f(v) = v^3 - v elementwise, K = 8, M = 40,
   F features, every worker computing in bfloat16 (its query cast to bf16, f in
   bf16 arithmetic, the answer bf16; the circle code's workers in complex
   arithmetic on bf16 pairs): the largest error of a request's decoded values
   relative to the largest value (median and 95th percentile over requests),
   for an uncoded bf16 worker, ChebyLS and the circle code (least squares) and
   their systematic variants, with all 40 answers and with N random ones;
   inputs uniform in [-1, 1] (the coded answers are then much larger than the
   values decoded: the ``answers/values`` column, rms over rms) and standard
   normal.

The schemes come from ``codedjax.catalogue`` (``systematic=True``).
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
import runkit

BF16 = jnp.bfloat16


@dataclasses.dataclass(frozen=True)
class SystematicConfig:
    """Everything that fixes a run.

    Attributes:
        num_inputs: K. workers: the M of the conditioning table. degrees: the
            degrees d of that table (a degree with D > M is left out).
        cond_masks: random N-subsets per N.
        accuracy_workers: M of the accuracy table (degree 3).
        responses: the N of the accuracy table (M itself: every answer).
        requests: requests per input distribution. features: F.
        seed: masks and inputs.
    """

    num_inputs: int = 8
    workers: tuple[int, ...] = (12, 16, 40)
    degrees: tuple[int, ...] = (1, 3)
    cond_masks: int = 2000
    accuracy_workers: int = 40
    responses: tuple[int, ...] = (40, 30, 22)
    requests: int = 256
    features: int = 64
    seed: int = 0

    @classmethod
    def quick(cls, **overrides) -> SystematicConfig:
        """``--quick``: 300 subsets per N, 64 requests."""
        return cls(**{"cond_masks": 300, "requests": 64, **overrides})

    def __post_init__(self):
        name = "SystematicConfig"
        fields = ("num_inputs", "cond_masks", "accuracy_workers", "requests",
                  "features")  # fmt: skip
        runkit.check_fields(name, self, at_least=dict.fromkeys(fields, 1))
        if not self.workers or min(self.workers) < self.num_inputs:
            raise ValueError(
                f"{name}: workers must list M >= K = {self.num_inputs}, got "
                f"{self.workers}"
            )
        if not self.degrees or min(self.degrees) < 1:
            raise ValueError(f"{name}: degrees must be >= 1, got {self.degrees}")
        d = cj.recovery_threshold(self.num_inputs, 3)
        if not all(d <= n <= self.accuracy_workers for n in self.responses):
            raise ValueError(
                f"{name}: responses must lie in [D, M] = [{d}, "
                f"{self.accuracy_workers}] (degree 3), got {self.responses}"
            )


# ---------------------------------------------------------------------------------
# 1. conditioning


def _points(code) -> np.ndarray:
    with jax.enable_x64(True):
        return np.asarray(code.alpha(jnp.float64))


def _equilibrated(alpha: np.ndarray, d: int) -> np.ndarray:
    """The rows ChebyLS factors: T_j(alpha_i) with its column scale (sqrt(1/M),
    then sqrt(2/M): orthonormal at M first-kind points)."""
    m = alpha.size
    scale = np.full(d, np.sqrt(2.0 / m))
    scale[0] = np.sqrt(1.0 / m)
    return npcheb.chebvander(alpha, d - 1) * scale


def _cheb(n: int) -> np.ndarray:
    """The n first-kind Chebyshev points in float64 (the library's sine form)."""
    return np.sin(np.pi * (n - 1 - 2 * np.arange(n)) / (2 * n))


def _subsets(rng, m: int, n: int, count: int) -> np.ndarray:
    """int [count, n]: random n-subsets of range(m) (one, all of them, at n = m)."""
    if n == m:
        return np.arange(m)[None, :]
    return np.argsort(rng.random((count, m)), axis=1)[:, :n]


def conditioning(cfg: SystematicConfig) -> list[dict]:
    """One row per (M, d, N): cond median and p95 of today's and the systematic
    points on the same subsets."""
    k = cfg.num_inputs
    rows = []
    for m in cfg.workers:
        for d in cfg.degrees:
            wl = cj.Workload(f"degree {d}", d)
            sch = {
                s.name: s
                for s in cj.catalogue(wl, k, m, names=("chebyls",), systematic=True)
            }
            if not sch["chebyls"].applies:
                continue
            dd = sch["chebyls"].code.num_coeffs
            u = {
                "today": _equilibrated(_points(sch["chebyls"].code), dd),
                "systematic": _equilibrated(
                    _points(sch["chebyls systematic"].code), dd
                ),
            }
            both = np.sort(np.concatenate([_cheb(k), _cheb(m - k)]))[::-1]
            if np.unique(both.astype(np.float32)).size == m:
                u["data+cheb"] = _equilibrated(both, dd)
            rng = np.random.default_rng([cfg.seed, m, d])
            for n in range(dd, m + 1):
                sub = _subsets(rng, m, n, cfg.cond_masks)
                row = dict(M=m, degree=d, D=dd, N=n, subsets=len(sub))
                for name in ("today", "systematic", "data+cheb"):
                    if name not in u:  # (the data points repeat one)
                        row[f"{name}_median"] = row[f"{name}_p95"] = None
                        continue
                    s = np.linalg.svd(u[name][sub], compute_uv=False)
                    c = s[:, 0] / s[:, -1]
                    row[f"{name}_median"] = float(np.median(c))
                    row[f"{name}_p95"] = float(np.quantile(c, 0.95))
                rows.append(row)
    return rows


# ---------------------------------------------------------------------------------
# 2. accuracy with bf16 workers


def _f_bf16(v):
    """v^3 - v in bfloat16 arithmetic (the worker)."""
    v = v.astype(BF16)
    return v * v * v - v


def _f_pairs_bf16(q):
    """v^3 - v in complex arithmetic on bf16 (real, imaginary) pairs [M, 2, ...]."""
    a, b = q[:, 0].astype(BF16), q[:, 1].astype(BF16)
    r2, i2 = a * a - b * b, 2 * a * b
    r3, i3 = r2 * a - i2 * b, r2 * b + i2 * a
    return jnp.stack([r3 - a, i3 - b], axis=1)


def _answers(code, x):
    """bf16 answers [B, M, ...] of the workers to the coded x [K, B, F]."""
    coded = code.encode(x)  # [M, (2,) B, F]
    if tuple(code.coded_shape) == (2,):
        return jnp.moveaxis(_f_pairs_bf16(coded), 2, 0)  # [B, M, 2, F]
    return jnp.moveaxis(_f_bf16(coded), 1, 0)  # [B, M, F]


def _quantile(x: np.ndarray, q: float) -> float | None:
    return float(np.quantile(x, q)) if x.size else None


def _masks(rng, b: int, m: int, n: int) -> np.ndarray:
    if n == m:
        return np.ones((b, m), bool)
    rank = np.argsort(np.argsort(rng.random((b, m)), axis=1), axis=1)
    return rank < n


def accuracy(cfg: SystematicConfig) -> list[dict]:
    """One row per (inputs, scheme, N): the relative error of the decoded values
    (the request's largest and each query's: median, p95), the decodes ok, the
    queries copied from their own worker, and the answers' size over the
    values' (rms and max)."""
    k, m, b, f = cfg.num_inputs, cfg.accuracy_workers, cfg.requests, cfg.features
    wl = cj.Workload("v^3 - v", 3)
    names = ("uncoded", "chebyls", "circle")
    schemes = [
        s for s in cj.catalogue(wl, k, m, names=names, systematic=True) if s.applies
    ]
    rows = []
    for dist in ("uniform", "normal"):
        rng = np.random.default_rng([cfg.seed, 1 if dist == "uniform" else 2])
        if dist == "uniform":
            x64 = rng.uniform(-1.0, 1.0, (k, b, f))
        else:
            x64 = rng.standard_normal((k, b, f))
        truth = x64**3 - x64  # [K, B, F]
        scale = np.abs(truth).max(axis=(0, 2))  # [B]
        x = jnp.asarray(x64, jnp.float32)
        masks = {n: _masks(rng, b, m, n) for n in cfg.responses}
        for s in schemes:
            code = s.code
            y = _answers(code, x)
            y64 = np.asarray(y, np.float64)
            rms = float(np.sqrt(np.mean(y64**2)) / np.sqrt(np.mean(truth**2)))
            top = float(np.abs(y64).max() / np.abs(truth).max())
            own = code.systematic_workers if code.num_workers == m else None
            ns = [code.num_workers] if code.num_workers < m else cfg.responses
            for n in ns:
                mk = masks[n] if code.num_workers == m else np.ones((b, k), bool)
                r = code.decode_batched(y, jnp.asarray(mk))
                value = np.moveaxis(np.asarray(r.value, np.float64), 0, 1)  # [K, B, F]
                per_query = np.abs(value - truth).max(axis=2) / scale  # [K, B]
                ok = np.asarray(r.ok)
                err, qerr = per_query.max(axis=0)[ok], per_query[:, ok].ravel()
                copied = 0.0 if own is None else float(mk[:, list(own)].mean())
                rows.append(
                    dict(
                        inputs=dist,
                        scheme=s.name,
                        N=int(n),
                        ok=float(ok.mean()),
                        copied=copied,
                        err_median=_quantile(err, 0.5),
                        err_p95=_quantile(err, 0.95),
                        query_err_median=_quantile(qerr, 0.5),
                        query_err_p95=_quantile(qerr, 0.95),
                        answers_over_values_rms=rms,
                        answers_over_values_max=top,
                    )
                )
    return rows


# ---------------------------------------------------------------------------------
# the report


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def report(summary: dict) -> str:
    cfg = summary["config"]
    lines = [
        f"## Conditioning: cond of the equilibrated rows, K = {cfg['num_inputs']}",
        "",
        f"Median and 95th percentile over {cfg['cond_masks']} random N-subsets "
        "(the same subsets for every point set; one at N = M). today: first-kind "
        "Chebyshev points of M; systematic: those with the K nearest to the data "
        "points moved onto them; data+cheb: the K data points and the first-kind "
        "points of M - K ('-': they repeat a point).",
        "",
    ]
    stats = [f"{s}_{q}" for q in ("median", "p95")
             for s in ("today", "systematic", "data+cheb")]  # fmt: skip
    lines += runkit.md_table(
        ["M", "d", "D", "N"] + [s.replace("_", " ") for s in stats],
        (
            [r["M"], r["degree"], r["D"], r["N"]] + [_fmt(r[s]) for s in stats]
            for r in summary["conditioning"]
            # every N next to D, every third further off (summary.json has them all)
            if not (r["N"] - r["D"]) % (1 if r["M"] - r["D"] <= 12 else 3)
            or r["N"] == r["M"]
        ),
    )
    lines += [
        "",
        f"## Accuracy with bf16 workers: f(v) = v^3 - v, K = {cfg['num_inputs']}, "
        f"M = {cfg['accuracy_workers']}, F = {cfg['features']}",
        "",
        "Request error: max |decoded - f(x)| over a request's K F values, relative "
        "to its largest |f(x)|; query error: the same over one query's F values "
        "(same scale); median and 95th percentile over "
        f"{cfg['requests']} requests (the decodes that are ok). copied: the "
        "queries whose own (systematic) worker answered. answers/values: the "
        "workers' answers over the values decoded, rms and max.",
        "",
    ]
    errs = ("err_median", "err_p95", "query_err_median", "query_err_p95",
            "answers_over_values_rms", "answers_over_values_max")  # fmt: skip
    head = ["inputs", "scheme", "N", "ok", "copied", "request err median",
            "request err p95", "query err median", "query err p95",
            "answers/values rms", "max"]  # fmt: skip
    lines += runkit.md_table(head, (
        [r["inputs"], r["scheme"], r["N"], f"{r['ok']:.2f}", f"{r['copied']:.2f}"]
        + [_fmt(r[k]) for k in errs]
        for r in summary["accuracy"]
    ))  # fmt: skip
    lines += ["", f"Run time {summary['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def run(cfg: SystematicConfig) -> dict:
    t0 = time.perf_counter()
    cond = conditioning(cfg)
    acc = accuracy(cfg)
    return dict(
        config=dataclasses.asdict(cfg),
        conditioning=cond,
        accuracy=acc,
        environment=runkit.environment(),
        seconds=time.perf_counter() - t0,
    )


FLAGS = {"cond_masks": "--masks", "requests": "--requests"}


def _run(cfg: SystematicConfig, cmd: runkit.Invocation) -> dict:
    summary = run(cfg)
    os.makedirs(cmd.out, exist_ok=True)
    text = report(summary)
    runkit.write_report(cmd.out, summary, "# Systematic codes\n\n" + text)
    cmd.write_page(title="Systematic codes", body=text)
    print(text)
    return summary


def main(argv=None) -> dict:
    """Command-line entry point; returns the summary."""
    return runkit.main(
        SystematicConfig, _run, argv, prog="python -m benchmarks.systematic",
        description=__doc__.split("\n\n")[0], flags=FLAGS,
        out="results/systematic",
    )  # fmt: skip


if __name__ == "__main__":
    main()
