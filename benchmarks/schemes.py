"""Every code of the library head to head: the same inputs, the same straggler masks.

Usage::

    python -m benchmarks.schemes --out results/schemes           # ~15 min, 2 cores
    python -m benchmarks.schemes --quick --out results/schemes   # a few minutes

Two workloads on K = 8 queries of 16 features: a linear map f(x) = x W (no bias)
and the degree-3 DCNv2 cross tower (2 cross layers x_{l+1} = x0 (W_l x_l + b_l) +
x_l, then a linear head to one logit). Workers compute in bf16 or float32
(:func:`codedjax.low_precision_worker`), the master decodes in float32. For every
number of responders N, ``trials`` requests draw fresh queries and one arrival
pattern each (i.i.d. shifted-exponential latencies: a uniformly random responding
set, and its arrival order for the threshold decoders); **every scheme decodes the
same queries and the same pattern**. Error: the relative l2 error of the K decoded
outputs against the float64 uncoded model, per request (inf when ``ok`` is False:
it counts in the percentiles); cond: what each code's ``DecodeResult.cond``
reports (each code's own: Chebyshev-basis systems for the Lagrange codes, V_S for
the circle codes, G_S for the random code, the interpolant's for BACC/NeRCC).

Every scheme goes through the generic interface only: ``code.encode``, one worker
function per ``code.roles`` entry, ``code.decode_answers(Answers(y, mask,
order))`` under ``jax.vmap``, and ``code.coded_shape`` to feed (real, imaginary)
pairs to the workers of the circle codes.

**Work per worker.** A real code's worker evaluates f once on one coded query
("work 1"). A circle worker evaluates f on a complex query: for the linear map two
real products (x_re W, x_im W), for the cross tower two real matrix products per
layer plus a complex elementwise product (4 real multiplications and 2 additions
instead of 1), about two real evaluations ("work 2"). The packed linear circle
code carries two real queries per complex one, so its threshold is K/2 workers.
Equal work per worker for a real code: two coded queries per worker ("-2q": the
code at 2M points, worker j holds points j and j + M and both its answers arrive
together); for the linear workload circle-packed and chebyls-2q then have the same
work AND the same threshold (4 workers); for the cross tower they cannot both hold
(circle: threshold 22 at work 2; chebyls: 22 at work 1; chebyls-2q: 11 at work 2).

ParM's worker count M = K + K/k (k = 2: M = 12) fixes a second panel on the linear
workload, where the codes that decode at that M are compared; the parity code
joins it when the library has ``codedjax.parity_code`` (its workers: the linear
base model itself, the exact parity model of a linear model without bias).

Outputs: ``summary.json`` (every figure), ``report.md`` (the tables, the exhaustive
condition-number table of :func:`codedjax.bounds.exhaustive_condition`, and which
scheme wins where), one plot per panel (``*.png``, when matplotlib is installed).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import codedjax.bounds as cb
import runkit
from runkit import environment, progress

# ----------------------------------------------------------------------------------
# configuration


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

    @classmethod
    def quick(cls) -> SchemesConfig:
        return cls(trials=32, n_step=3)


# ----------------------------------------------------------------------------------
# workloads: a real function, its pair form for the circle codes, the float64 truth


def cross_params(key, features: int, layers: int):
    """Cross-tower weights: W ~ N(0, 1/n), b ~ 0.1 N(0, 1), a linear head."""
    ks = jax.random.split(key, 2 * layers + 1)
    n = features
    return {
        "w": [
            jax.random.normal(ks[2 * i], (n, n)) / math.sqrt(n) for i in range(layers)
        ],
        "b": [0.1 * jax.random.normal(ks[2 * i + 1], (n,)) for i in range(layers)],
        "head": jax.random.normal(ks[-1], (n,)) / math.sqrt(n),
    }


def cross_tower(p, x0):
    """x_{l+1} = x0 (W_l x_l + b_l) + x_l, then the head: [..., F] -> [...]."""
    xl = x0
    for w, b in zip(p["w"], p["b"], strict=True):
        xl = x0 * (xl @ w.T + b) + xl
    return xl @ p["head"]


def cross_tower_pair(p, x0):
    """The tower on complex queries [..., 2, F] (real, imaginary) in real arithmetic:
    two real matrix products per layer, four multiplications per complex product."""
    a, bq = x0[..., 0, :], x0[..., 1, :]
    xr, xi = a, bq
    for w, b in zip(p["w"], p["b"], strict=True):
        tr = xr @ w.T + b
        ti = xi @ w.T
        xr, xi = a * tr - bq * ti + xr, a * ti + bq * tr + xi
    return jnp.stack([xr @ p["head"], xi @ p["head"]], axis=-1)


def linear_map(p, x):
    """f(x) = x W: [..., F] -> [..., F] (real-linear: also the pair form)."""
    return x @ p["w"][0]


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    degree: int
    fn: Callable  # (params, x [..., F]) -> real answers
    pair_fn: (
        Callable  # (params, x [..., 2, F]) -> (real, imaginary) answers [..., 2, ...]
    )
    params: Any


def workloads(cfg: SchemesConfig) -> list[Workload]:
    key = jax.random.key(cfg.seed)
    kl, kc = jax.random.split(key)
    n = cfg.features
    lin = {"w": [jax.random.normal(kl, (n, n)) / math.sqrt(n)]}
    pair_lin = linear_map  # x[..., 2, F] @ W: f on the real and on the imaginary part
    tower = cross_params(kc, n, cfg.cross_layers)
    return [
        Workload("linear", 1, linear_map, pair_lin, lin),
        Workload("cross3", cfg.cross_layers + 1, cross_tower, cross_tower_pair, tower),
    ]


# ----------------------------------------------------------------------------------
# the schemes: (name, code, copies, work) from the library's factories


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


# ----------------------------------------------------------------------------------
# one panel: every scheme on the same queries and arrivals, for each N


def _worker_answers(code: cj.Code, wl: Workload, coded, dtype):
    """Each worker's answer to its coded query, computed in ``dtype``: one function
    per role (the linear base model for every role here), pairs for coded_shape
    (2,)."""
    pair = tuple(code.coded_shape) == (2,)
    fn = wl.pair_fn if pair else wl.fn
    worker = cj.low_precision_worker(fn, dtype)
    roles = code.roles
    if len(set(roles)) > 1 and wl.degree != 1:
        raise ValueError(f"{code.name}: per-role models only for the linear workload")
    return worker(wl.params, coded)


def _answers_program(sc: Scheme, wl: Workload, dtype):
    """jit(x [T, K, F] -> answers [T, M', ...] in float32): encode, then every
    worker in ``dtype``, its answer widened to float32 on arrival (so one decode
    program serves bf16 and float32 workers)."""
    code = sc.code

    def one(x):
        y = _worker_answers(code, wl, code.encode(x), dtype)
        return y.astype(jnp.float32)

    return jax.jit(jax.vmap(one))


@functools.cache
def _decode_program(code: cj.Code, copies: int):
    """jit((y, mask [T, M], order [T, M]) -> (value, ok, cond)): the code's
    ``decode_answers`` under vmap; with ``copies`` > 1, worker j holds points j,
    j + M, ... and its answers arrive together."""

    def one(y, mask, order):
        if copies > 1:
            m = mask.shape[0]
            mask = jnp.concatenate([mask] * copies)
            order = jnp.stack([order + i * m for i in range(copies)], axis=-1)
            order = order.reshape(-1)
        r = code.decode_answers(cj.Answers(y, mask, order=order))
        return r.value, r.ok, r.cond

    return jax.jit(jax.vmap(one))


def _rel_err(value, truth, ok):
    v = np.asarray(value, np.float64).reshape(truth.shape[0], -1)
    t = truth.reshape(truth.shape[0], -1)
    e = np.linalg.norm(v - t, axis=1) / np.linalg.norm(t, axis=1)
    return np.where(np.asarray(ok), e, np.inf)


def _q(e, p):
    """An order statistic (no interpolation: an inf stays inf)."""
    return float(np.quantile(e, p, method="higher")) if len(e) else math.nan


def run_panel(
    cfg: SchemesConfig,
    wl: Workload,
    m: int,
    dtype: str,
    show_progress: bool,
) -> dict:
    k = cfg.num_inputs
    sch = [
        s for s in schemes(k, m, wl.degree, dtype) if not cfg.only or s.name in cfg.only
    ]
    if not sch:
        raise ValueError(f"schemes: no scheme of {cfg.only} fits {wl.name} at M={m}")
    low = min(s.code.threshold * 1 for s in sch if s.copies == 1)
    low = max(low, 1)
    ns = list(range(low, m + 1, cfg.n_step))
    if ns[-1] != m:
        ns.append(m)
    answers = {s.name: _answers_program(s, wl, jnp.dtype(dtype)) for s in sch}
    p64 = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), wl.params)
    key = jax.random.fold_in(jax.random.key(cfg.seed), wl.degree * 1000 + m)
    rows = []
    seconds: dict[str, float] = {}  # compile and run, per scheme
    desc = f"{wl.name} M={m} {dtype}"
    for n in progress(ns, desc=desc, disable=None if show_progress else True):
        kx, ka = jax.random.split(jax.random.fold_in(key, n))
        xs = jax.random.normal(kx, (cfg.trials, k, cfg.features))
        with jax.enable_x64(True):
            truth = np.asarray(wl.fn(p64, jnp.asarray(np.asarray(xs), jnp.float64)))
        arr = cj.sample_arrivals(
            ka, num_workers=m, num_responses=n, shape=(cfg.trials,)
        )
        row: dict[str, Any] = {"N": n}
        for s in sch:
            t = time.perf_counter()
            y = answers[s.name](xs)
            dec = _decode_program(s.code, s.copies)
            value, ok, cond = dec(y, arr.mask, arr.order.astype(jnp.int32))
            value = np.asarray(value)
            seconds[s.name] = seconds.get(s.name, 0.0) + time.perf_counter() - t
            e = _rel_err(value, truth, ok)
            cond = np.asarray(cond, np.float64)
            row[s.name] = {
                "err_median": _q(e, 0.5),
                "err_p95": _q(e, 0.95),
                "ok": float(np.mean(np.asarray(ok))),
                "cond_median": _q(cond, 0.5),
                "cond_p95": _q(cond, 0.95),
                "cond_worst": float(np.max(cond)),
            }
        rows.append(row)
    slow = sorted(seconds.items(), key=lambda kv: -kv[1])
    print(
        f"{desc}: {sum(seconds.values()):.0f} s ("
        + ", ".join(f"{n} {t:.1f}" for n, t in slow)
        + ")",
        file=sys.stderr,
        flush=True,
    )
    ub = cj.low_precision_worker(wl.fn, jnp.dtype(dtype))(wl.params, xs)
    floor = _rel_err(ub, truth, np.ones(cfg.trials, bool))
    return {
        "workload": wl.name,
        "degree": wl.degree,
        "num_workers": m,
        "dtype": dtype,
        "schemes": {
            s.name: {
                "code": repr(s.code),
                "threshold_workers": math.ceil(s.code.threshold / s.copies),
                "work": s.work,
                "copies": s.copies,
                "seconds": seconds[s.name],
            }
            for s in sch
        },
        "uncoded_err_median": _q(floor, 0.5),
        "rows": rows,
    }


# ----------------------------------------------------------------------------------
# the exhaustive condition-number table


#: Figures the papers print for these configurations, (worst, mean), None where
#: not printed: Fahim and Cadambe's worst case of the raw Chebyshev-Vandermonde
#: matrix at n = 31, s = 2 (as docs/theory.md section 8 records it). Ramamoorthy and
#: Tang's tables were not located; their rows stay empty.
PAPER_FIGURES: dict[tuple[int, int, str], tuple[float | None, float | None]] = {
    (31, 29, "chebyshev"): (1.22e4, None),
}


def exhaustive_table() -> list[dict]:
    rows = []
    for m, d in ((31, 29), (20, 16)):
        for scheme in cb.SCHEMES:
            r = cb.exhaustive_condition(scheme=scheme, num_workers=m, num_coeffs=d)
            paper = PAPER_FIGURES.get((m, d, scheme))
            rows.append(
                {
                    "n": m,
                    "k": d,
                    "scheme": scheme,
                    "worst": r.worst,
                    "mean": r.mean,
                    "sets": r.num_examined,
                    "paper_worst": None if paper is None else paper[0],
                    "paper_mean": None if paper is None else paper[1],
                }
            )
    return rows


# ----------------------------------------------------------------------------------
# report


def _fmt(v, spec=".3g"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def panel_table(panel: dict, field: str) -> str:
    names = list(panel["schemes"])
    head = "| N | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (len(names) + 1)]
    for row in panel["rows"]:
        cells = [_fmt(row[n][field]) for n in names]
        lines.append(f"| {row['N']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def winners(panel: dict, field: str = "err_median") -> list[tuple[int, str, float]]:
    """(N, the scheme with the smallest ``field``, its value) per row."""
    out = []
    for row in panel["rows"]:
        best = min(panel["schemes"], key=lambda n: row[n][field])
        out.append((row["N"], best, row[best][field]))
    return out


def compare(panel: dict, a: str, b: str, field: str = "err_median") -> dict:
    """The N (where ``b`` decodes) at which scheme ``a`` beats ``b`` on ``field``."""
    if a not in panel["schemes"] or b not in panel["schemes"]:
        return {}
    rows = [r for r in panel["rows"] if math.isfinite(r[b][field])]
    return {
        "better_at": [r["N"] for r in rows if r[a][field] < r[b][field]],
        "of": [r["N"] for r in rows],
    }


def panel_key(p: dict) -> str:
    return f"{p['workload']}-M{p['num_workers']}-{p['dtype']}"


def format_report(summary: dict) -> str:
    lines = ["# Every scheme on the same masks", ""]
    cfg = summary["config"]
    lines.append(
        f"K = {cfg['num_inputs']}, {cfg['features']} features, {cfg['trials']} "
        f"requests per N (fresh queries and arrivals; the same for every scheme), "
        f"seed {cfg['seed']}. Error: relative l2 of the K outputs against float64 "
        f"(inf when not ok). `work` = real evaluations of f per worker; `thr` = the "
        f"fewest workers that decode."
    )
    for p in summary["panels"]:
        lines += ["", f"## {panel_key(p)} (degree {p['degree']})", ""]
        lines.append(
            "schemes: "
            + ", ".join(
                f"{n} (thr {v['threshold_workers']}, work {v['work']})"
                for n, v in p["schemes"].items()
            )
            + f"; uncoded {p['dtype']} worker error median "
            f"{_fmt(p['uncoded_err_median'])}"
        )
        for field, title in (
            ("err_median", "decoded error, median"),
            ("err_p95", "decoded error, p95"),
            ("cond_median", "cond, median"),
            ("cond_p95", "cond, p95"),
            ("cond_worst", "cond, worst"),
        ):
            lines += ["", f"{title}:", "", panel_table(p, field)]
        w = winners(p)
        lines += [
            "",
            "lowest median error per N: "
            + ", ".join(f"N={n}: {s} ({_fmt(v)})" for n, s, v in w),
        ]
    if summary.get("exhaustive"):
        lines += [
            "",
            "## Exhaustive condition numbers (every responder set of size k)",
            "",
            "| n | k | scheme | worst | mean | sets | paper worst | paper mean |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in summary["exhaustive"]:
            lines.append(
                f"| {r['n']} | {r['k']} | {r['scheme']} | {_fmt(r['worst'], '.5g')} | "
                f"{_fmt(r['mean'], '.5g')} | {r['sets']} | "
                f"{_fmt(r['paper_worst'])} | {_fmt(r['paper_mean'])} |"
            )
        lines.append("")
        lines.append(
            "paper columns: the figures the papers print ('-': none located; "
            "`PAPER_FIGURES`); random: five seeded draws pooled."
        )
    if summary.get("verdict"):
        lines += ["", "## Which scheme wins where", "", summary["verdict"]]
    return "\n".join(lines) + "\n"


def verdict(summary: dict) -> str:
    """A paragraph per panel from the figures: who has the lowest median error, who
    beats ChebyLS's median and p95 where ChebyLS decodes, and who decodes below
    ChebyLS's threshold."""
    parts = []
    for p in summary["panels"]:
        w = winners(p)
        counts: dict[str, list[int]] = {}
        for n, s, v in w:
            if math.isfinite(v):
                counts.setdefault(s, []).append(n)
        top = "; ".join(f"{s} at N = {_ns(ns)}" for s, ns in counts.items())
        s = f"**{panel_key(p)}**: lowest median error: {top}."
        if "chebyls" in p["schemes"]:
            for field, word in (("err_median", "median"), ("err_p95", "p95")):
                beat = []
                for other in p["schemes"]:
                    c = (
                        compare(p, other, "chebyls", field)
                        if other != "chebyls"
                        else {}
                    )
                    if c and c["better_at"]:
                        beat.append(f"{other} ({_ns(c['better_at'])})")
                if beat:
                    s += f" Below ChebyLS's {word} where ChebyLS decodes: "
                    s += ", ".join(beat) + "."
            below = [
                n
                for n in p["schemes"]
                if any(
                    math.isfinite(r[n]["err_median"])
                    and not math.isfinite(r["chebyls"]["err_median"])
                    for r in p["rows"]
                )
            ]
            if below:
                s += " Decoding below ChebyLS's threshold: " + ", ".join(below) + "."
        parts.append(s)
    return "\n\n".join(parts)


def _ns(ns: list[int]) -> str:
    """N values as runs: [4, 7, 10, 16] with step 3 -> '4-10, 16'."""
    if not ns:
        return "none"
    step = min((b - a for a, b in zip(ns, ns[1:], strict=False)), default=1)
    runs, start, prev = [], ns[0], ns[0]
    for n in ns[1:] + [None]:
        if n is not None and n - prev == step:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(runs)


def plot_panels(summary: dict, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    for p in summary["panels"]:
        ns = [r["N"] for r in p["rows"]]
        fig, axes = plt.subplots(1, 5, figsize=(24, 4.5))
        fields = ("err_median", "err_p95", "cond_median", "cond_p95", "cond_worst")
        for ax, field in zip(axes, fields, strict=True):
            for name in p["schemes"]:
                vals = [r[name][field] for r in p["rows"]]
                vals = [v if math.isfinite(v) else np.nan for v in vals]
                ax.semilogy(ns, vals, marker=".", label=name)
            ax.set_title(f"{panel_key(p)}: {field}")
            ax.set_xlabel("N responders")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{panel_key(p)}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path.name)
    return written


# ----------------------------------------------------------------------------------
# entry point


def run(cfg: SchemesConfig, show_progress: bool = True) -> dict:
    t0 = time.perf_counter()
    panels = []
    k = cfg.num_inputs
    parm_m = k + k // cfg.parm_group
    for wl in workloads(cfg):
        if wl.name not in cfg.workloads:
            continue
        for dtype in cfg.dtypes:
            panels.append(run_panel(cfg, wl, cfg.num_workers, dtype, show_progress))
            if wl.degree == 1 and parm_m != cfg.num_workers:
                panels.append(run_panel(cfg, wl, parm_m, dtype, show_progress))
    summary: dict[str, Any] = {
        "config": dataclasses.asdict(cfg),
        "panels": panels,
        "parity_code": hasattr(cj, "parity_code"),
        "exhaustive": exhaustive_table() if cfg.exhaustive else [],
    }
    summary["verdict"] = verdict(summary)
    summary["environment"] = environment()
    summary["seconds"] = time.perf_counter() - t0
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Command-line entry point; returns the summary."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.schemes",
        description="Every code of the library on the same inputs and straggler "
        "masks: cond and decoded error against N, bf16 and float32 workers.",
    )
    runkit.add_run_arguments(p, out=None, seed=None)
    runkit.add_config_arguments(
        p,
        SchemesConfig,
        {
            "trials": "--trials",
            "n_step": "--n-step",
            "num_workers": "--workers",
            "dtypes": "--dtypes",
            "exhaustive": "--no-exhaustive",
            "num_inputs": "--inputs",
            "only": "--schemes",
            "workloads": "--workloads",
        },
    )
    a = p.parse_args(argv)
    base = SchemesConfig.quick() if a.quick else SchemesConfig()
    over = runkit.config_overrides(a, SchemesConfig)
    cfg = dataclasses.replace(base, **over)
    bad = [d for d in cfg.dtypes if d not in ("bfloat16", "float16", "float32")]
    if bad:
        p.error(f"--dtypes: worker dtypes are bfloat16, float16, float32; got {bad}")
    bad = [w for w in cfg.workloads if w not in ("linear", "cross3")]
    if bad or not cfg.workloads:
        p.error(f"--workloads: choose from linear, cross3; got {list(cfg.workloads)}")
    try:
        summary = run(cfg, show_progress=not a.no_progress)
    except ValueError as exc:  # a --schemes/--inputs choice that fits no panel
        p.error(f"--schemes: {exc}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary["plots"] = plot_panels(summary, out)
    path = runkit.write_summary(out / "summary.json", summary)
    report = format_report(summary)
    (out / "report.md").write_text(report)
    print(report)
    print(f"wrote {path} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
