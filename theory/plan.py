r"""Choose N: the fewest responses that meet an error target with a failure budget.

    python -m theory.plan --workers 40 --inputs 8 --degree 3 \
        --worker-dtype bfloat16 --target-error 1e-2 --failure 1e-3 \
        --latency shifted-exp:5ms,5ms --out results/plan

Given M workers, K inputs, a polynomial of degree d (so D = d (K - 1) + 1 Chebyshev
coefficients), the dtype the workers compute in, a target relative error and a failure
probability, it reports, for a uniformly random set of N responders:

1. **ChebyLS.** For every N from D to M, the probability that the decode error exceeds
   the target: exactly (every responding set listed) when C(M, N) is small, else by
   Monte Carlo with a one-sided Clopper-Pearson upper confidence bound. The smallest N
   whose failure probability (its upper bound) is at most the failure level, for that
   N and every larger one. Next to it, the smallest N where a *proven* bound of
   :mod:`codedjax.bounds` at confidence 1 - failure already guarantees the target
   (the deterministic, missing-row Chernoff, gap and generic Chernoff bounds; first-
   kind points only), or a statement that every bound is vacuous or too weak.
2. **RepApprox** with c replicas per task: the smallest N with P(some task is not
   recovered exactly) at most the failure level, from the exact formula, from the
   union bound, from the seed's bound 1 - K (1 - N/M)^c, and from the Monte Carlo.
3. **Latency** (``--latency``): percentiles of the time to the N-th response for the
   chosen N (and for N = D and N = M), e.g. ``shifted-exp:5ms,5ms`` (shift 5 ms plus
   an exponential of mean 5 ms), ``exp:5ms``, ``pareto:2ms,1.5``.
4. **Worst case** over *every* straggler set: the exact worst cond for s = 1..3
   missing workers (all C(M, s) sets), and how far the greedy search of
   :func:`codedjax.worst_case_mask` falls below it, and its value at larger s.

The decode error. ``--error-model cond`` (default): the relative error of the decoded
outputs is taken as cond(U_S) x u_w, the condition number of the equilibrated
Chebyshev-Vandermonde rows ChebyLS factorises times the unit roundoff of the worker
dtype (bfloat16: 2^-8 = 3.9e-3), the first-order model of docs/theory.md section 9;
the proven bounds bound exactly this cond. ``--error-model decoder``: u_w x
||A_S||_inf with A_S = T_beta T_S^+ the decoding matrix, which is the error that the
decoders report in ``DecodeResult.error`` divided by max_i |y_i| (every response
off by up to u_w relative, row k of A_S adding them up); no proven bound is given for
it. Both are per unit of the largest response magnitude; neither counts the error of
the worker's own computation beyond the rounding of its output.

Outputs in ``--out``: ``summary.json`` and ``report.md``; the table is also printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import codedjax as cj
import codedjax.bounds as cb

_DTYPES = ("bfloat16", "float16", "float32", "float64")
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """What to plan for (the command line's flags).

    Attributes:
        workers: M. inputs: K. degree: d (D = d (K - 1) + 1 <= M).
        worker_dtype: the dtype the workers compute in (its unit roundoff u_w).
        target_error: the relative decode error that must not be exceeded.
        failure: the probability allowed to exceed it, in (0, 1).
        points: "first" or "second" kind Chebyshev worker points.
        error_model: "cond" (cond(U_S) u_w) or "decoder" (||A_S||_inf u_w).
        replication: c for RepApprox (default M // K).
        trials: Monte Carlo trials per N (nested: trial t's responders for N are the
            first N of one random arrival order, so each N sees a uniform N-subset).
        exhaustive_limit: list every responding set when C(M, N) is at most this.
        confidence: level of the one-sided Clopper-Pearson upper bound.
        latency: a latency model such as "shifted-exp:5ms,5ms", or None.
        worst_exact: exact worst case for s = 1 .. worst_exact missing workers.
        worst_greedy: greedy worst case for s = 1 .. worst_greedy.
        seed: the Monte Carlo seed.
        progress: show progress bars.
    """

    workers: int
    inputs: int
    degree: int
    worker_dtype: str = "bfloat16"
    target_error: float = 1e-2
    failure: float = 1e-3
    points: str = "first"
    error_model: str = "cond"
    replication: int | None = None
    trials: int = 20_000
    exhaustive_limit: int = 100_000
    confidence: float = 0.95
    latency: str | None = None
    worst_exact: int = 3
    worst_greedy: int = 6
    seed: int = 0
    progress: bool = True

    @property
    def num_coeffs(self) -> int:
        return self.degree * (self.inputs - 1) + 1


def _fail(flag: str, msg: str) -> None:
    raise ValueError(f"theory.plan: {flag}: {msg}")


def validate(cfg: PlanConfig) -> None:
    """Raise ValueError naming the flag for every impossible setting."""
    if cfg.workers < 1:
        _fail("--workers", f"must be >= 1, got {cfg.workers}")
    if cfg.inputs < 1:
        _fail("--inputs", f"must be >= 1, got {cfg.inputs}")
    if cfg.degree < 1:
        _fail("--degree", f"must be >= 1, got {cfg.degree}")
    if cfg.num_coeffs > cfg.workers:
        _fail(
            "--degree/--inputs",
            f"D = d (K - 1) + 1 = {cfg.num_coeffs} exceeds --workers M = {cfg.workers}",
        )
    if cfg.worker_dtype not in _DTYPES:
        _fail("--worker-dtype", f"must be one of {_DTYPES}, got {cfg.worker_dtype!r}")
    if not 0.0 < cfg.target_error:
        _fail("--target-error", f"must be > 0, got {cfg.target_error}")
    if not 0.0 < cfg.failure < 1.0:
        _fail("--failure", f"must lie in (0, 1), got {cfg.failure}")
    if not 0.0 < cfg.confidence < 1.0:
        _fail("--confidence", f"must lie in (0, 1), got {cfg.confidence}")
    if cfg.points not in ("first", "second"):
        _fail("--points", f"must be 'first' or 'second', got {cfg.points!r}")
    if cfg.error_model not in ("cond", "decoder"):
        _fail("--error-model", f"must be 'cond' or 'decoder', got {cfg.error_model!r}")
    if cfg.trials < 1:
        _fail("--trials", f"must be >= 1, got {cfg.trials}")
    c = replication(cfg)
    if c < 1 or cfg.inputs * c > cfg.workers:
        _fail("--replication", f"need 1 <= c and K c <= M, got c = {c}")
    if cfg.latency is not None:
        parse_latency(cfg.latency)


def replication(cfg: PlanConfig) -> int:
    return cfg.replication if cfg.replication is not None else cfg.workers // cfg.inputs


def unit_roundoff(name: str) -> float:
    """u_w = 2^-p for a p-bit significand: bfloat16 2^-8, float16 2^-11, ..."""
    return {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}.get(
        name, 2.0**-53
    )


# ----------------------------------------------------------------------------------
# latency models


def _duration(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us)?\s*", text)
    if not m:
        raise ValueError(
            f"theory.plan: --latency: cannot read a duration from {text!r}"
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_latency(spec: str) -> tuple[str, tuple[float, ...]]:
    """``shifted-exp:SHIFT,MEAN``, ``exp:MEAN`` or ``pareto:SCALE,INDEX`` (seconds).

    Durations take a unit (s, ms, us; default s). Returns (model, parameters).
    """
    name, _, args = spec.partition(":")
    parts = [a for a in args.split(",") if a.strip()]
    try:
        if name == "shifted-exp" and len(parts) == 2:
            shift, mean = _duration(parts[0]), _duration(parts[1])
            if shift >= 0 and mean > 0:
                return name, (shift, mean)
        elif name == "exp" and len(parts) == 1:
            mean = _duration(parts[0])
            if mean > 0:
                return "shifted-exp", (0.0, mean)
        elif name == "pareto" and len(parts) == 2:
            scale, index = _duration(parts[0]), float(parts[1])
            if scale > 0 and index > 0:
                return name, (scale, index)
    except ValueError as err:
        raise ValueError(f"theory.plan: --latency: {err}") from err
    raise ValueError(
        "theory.plan: --latency: expected shifted-exp:SHIFT,MEAN, exp:MEAN or "
        f"pareto:SCALE,INDEX with positive values, got {spec!r}"
    )


def latency_percentiles(
    spec: str, *, num_workers: int, responses: Sequence[int], trials: int, seed: int
) -> dict[int, dict[str, float]]:
    """Percentiles (p50, p95, p99) and mean of the time to the N-th response.

    M i.i.d. worker latencies per trial (``trials`` trials), sorted; the N-th smallest
    is the time the master waits for N responses.
    """
    model, par = parse_latency(spec)
    rng = np.random.default_rng(seed)
    if model == "shifted-exp":
        lat = par[0] + rng.exponential(par[1], (trials, num_workers))
    else:
        lat = par[0] * rng.uniform(size=(trials, num_workers)) ** (-1.0 / par[1])
    lat.sort(axis=1)
    out = {}
    for n in sorted(set(responses)):
        t = lat[:, n - 1]
        out[n] = {
            "mean": float(t.mean()),
            "p50": float(np.quantile(t, 0.5)),
            "p95": float(np.quantile(t, 0.95)),
            "p99": float(np.quantile(t, 0.99)),
        }
    return out


# ----------------------------------------------------------------------------------
# the decode error of one responding set


def _points(m: int, kind: str) -> np.ndarray:
    if kind == "first":
        return np.cos((2.0 * np.arange(m) + 1.0) * np.pi / (2.0 * m))
    if m == 1:
        return np.zeros(1)
    return np.cos(np.arange(m) * np.pi / (m - 1))


def _bases(cfg: PlanConfig) -> tuple[np.ndarray, np.ndarray]:
    """Equilibrated T [M, D] (unit-norm columns over all M) and T_beta [K, D]."""
    d = cfg.num_coeffs
    t = np.polynomial.chebyshev.chebvander(_points(cfg.workers, cfg.points), d - 1)
    scale = 1.0 / np.linalg.norm(t, axis=0)
    tb = np.polynomial.chebyshev.chebvander(_points(cfg.inputs, "first"), d - 1)
    return t * scale, tb * scale


def decode_errors(cfg: PlanConfig, masks: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Predicted relative decode error of ChebyLS for each responding set [B, M].

    cond model: cond(U_S) u_w; decoder model: ||T_beta T_S^+||_inf u_w (float64 SVD).
    Every row of ``masks`` must hold the same number N >= D of responders.
    """
    u, tb = _bases(cfg)
    uw = unit_roundoff(cfg.worker_dtype)
    b, m = masks.shape
    n = int(masks[0].sum()) if b else 0
    out = np.empty(b)
    for lo in range(0, b, chunk):
        mk = masks[lo : lo + chunk]
        rows = np.broadcast_to(u, (mk.shape[0],) + u.shape)[mk]
        rows = rows.reshape(mk.shape[0], n, u.shape[1])
        if cfg.error_model == "cond":
            sv = np.linalg.svd(rows, compute_uv=False)
            with np.errstate(divide="ignore"):
                gain = np.where(sv[:, -1] > 0, sv[:, 0] / sv[:, -1], np.inf)
        else:
            left, sv, vt = np.linalg.svd(rows, full_matrices=False)
            with np.errstate(divide="ignore"):
                inv = np.where(sv > 0, 1.0 / sv, np.inf)
            pinv = np.einsum("bji,bj,bkj->bik", vt, inv, left)  # [B, D, N]
            a = np.einsum("kd,bdn->bkn", tb, pinv)
            gain = np.abs(a).sum(axis=2).max(axis=1)
        out[lo : lo + chunk] = gain * uw
    return out


# ----------------------------------------------------------------------------------
# responding sets: every subset, or nested Monte Carlo


def _all_masks(m: int, n: int) -> np.ndarray:
    idx = np.array(list(itertools.combinations(range(m), n)), dtype=np.int64)
    masks = np.zeros((idx.shape[0], m), bool)
    np.put_along_axis(masks, idx.reshape(idx.shape[0], n), True, axis=1)
    return masks


def _ranks(cfg: PlanConfig) -> np.ndarray:
    """rank[t, i]: worker i's place in trial t's uniform random arrival order."""
    rng = np.random.default_rng(cfg.seed)
    order = np.argsort(rng.random((cfg.trials, cfg.workers)), axis=1)
    return np.argsort(order, axis=1)


def _cp_upper(k: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson upper bound at the given confidence."""
    return cb.clopper_pearson(k, n, confidence=2.0 * confidence - 1.0)[1]


def _smallest(rows: list[dict], key: str, level: float) -> int | None:
    """Smallest N with rows[N][key] <= level for that N and every larger one."""
    best = None
    for row in reversed(rows):
        if row[key] is not None and row[key] <= level:
            best = row["N"]
        else:
            break
    return best


def _proven(cfg: PlanConfig, n: int) -> tuple[float, str]:
    """Smallest proven bound on cond(U_S) at confidence 1 - failure, and its name."""
    if cfg.points != "first":
        return math.inf, "not applicable (the bounds assume first-kind points)"
    kw = dict(num_workers=cfg.workers, num_coeffs=cfg.num_coeffs, num_responses=n)
    eta = cfg.failure
    cands = {
        "deterministic (Prop. B)": cb.deterministic_condition_bound(**kw),
        "missing-row Chernoff (Prop. C)": cb.missing_rows_condition_bound(
            **kw, eta=eta
        ),
        "gap (Prop. D)": cb.gap_condition_bound_probabilistic(**kw, eta=eta),
        "generic Chernoff": cb.sampling_condition_bound(**kw, eta=eta),
    }
    name = min(cands, key=cands.get)
    return cands[name], name if math.isfinite(cands[name]) else "all vacuous"


def _progress(cfg: PlanConfig, it, desc: str):
    if not cfg.progress or os.environ.get("CODEDJAX_NO_PROGRESS") == "1":
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, leave=False)


def chebyls_table(cfg: PlanConfig) -> dict[str, Any]:
    """Failure probability of ChebyLS for every N from D to M, and the N to choose."""
    m, d = cfg.workers, cfg.num_coeffs
    uw = unit_roundoff(cfg.worker_dtype)
    ranks = None
    rows = []
    for n in _progress(cfg, range(d, m + 1), "ChebyLS N"):
        total = math.comb(m, n)
        exhaustive = total <= cfg.exhaustive_limit
        if exhaustive:
            masks = _all_masks(m, n)
        else:
            if ranks is None:
                ranks = _ranks(cfg)
            masks = ranks < n
        err = decode_errors(cfg, masks)
        k = int(np.sum(~(err <= cfg.target_error)))
        trials = masks.shape[0]
        rate = k / trials
        bound, bname = _proven(cfg, n)
        proven_err = bound * uw if cfg.error_model == "cond" else math.inf
        rows.append(
            {
                "N": n,
                "exhaustive": exhaustive,
                "trials": trials,
                "failures": k,
                "rate": rate,
                "upper": rate if exhaustive else _cp_upper(k, trials, cfg.confidence),
                "median_error": float(np.median(err)),
                "p95_error": float(np.quantile(err, 0.95)),
                "max_error": float(np.max(err)),
                "proven_cond": bound if math.isfinite(bound) else None,
                "proven_by": bname,
                "proven_error": proven_err if math.isfinite(proven_err) else None,
            }
        )
    chosen = _smallest(rows, "upper", cfg.failure)
    proven = _smallest(
        [
            {"N": r["N"], "p": r["proven_error"] if r["proven_error"] else None}
            for r in rows
        ],
        "p",
        cfg.target_error,
    )
    return {"rows": rows, "chosen_N": chosen, "proven_N": proven}


def repapprox_table(cfg: PlanConfig) -> dict[str, Any]:
    """P(not every task exact) of RepApprox for every N, and the N each method picks."""
    k, m = cfg.inputs, cfg.workers
    c = replication(cfg)
    task = cj.repapprox_layout(k, c, m).task
    onehot = np.zeros((m, k), bool)
    onehot[task >= 0, task[task >= 0]] = True
    ranks = None
    rows = []
    for n in range(1, m + 1):
        total = math.comb(m, n)
        exhaustive = total <= cfg.exhaustive_limit
        if exhaustive:
            masks = _all_masks(m, n)
        else:
            if ranks is None:
                ranks = _ranks(cfg)
            masks = ranks < n
        covered = (masks.astype(np.int64) @ onehot.astype(np.int64)) > 0
        lost = int(np.sum(~covered.all(axis=1)))
        trials = masks.shape[0]
        exact = cb.exact_recovery_probability(k, c, m, n)
        rows.append(
            {
                "N": n,
                "exhaustive": exhaustive,
                "trials": trials,
                "lost": lost,
                "rate": lost / trials,
                "upper": lost / trials
                if exhaustive
                else _cp_upper(lost, trials, cfg.confidence),
                "exact": 1.0 - exact,
                "union": 1.0 - cb.recovery_probability_union(k, c, m, n),
                "seed": 1.0 - cb.recovery_probability_bound(k, c, m, n),
            }
        )
    return {
        "replication": c,
        "rows": rows,
        "chosen_N": {
            key: _smallest(rows, key, cfg.failure)
            for key in ("exact", "union", "seed", "upper")
        },
    }


def worst_case_table(cfg: PlanConfig) -> list[dict[str, Any]]:
    """Exact worst cond(U_S) for small s, and the greedy search's value next to it."""
    import jax

    m, d = cfg.workers, cfg.num_coeffs
    out = []
    alpha = _points(m, "first")
    for s in range(1, min(max(cfg.worst_exact, cfg.worst_greedy), m - d) + 1):
        row: dict[str, Any] = {"s": s, "N": m - s, "exact": None, "greedy": None}
        if s <= cfg.worst_exact:
            w = cb.worst_case_condition(num_workers=m, num_coeffs=d, num_missing=s)
            row["exact"] = w.cond
            row["exact_missing"] = np.flatnonzero(~w.mask).tolist()
            row["exact_raw"] = cb.raw_condition_number(w.mask, num_coeffs=d)
        if s <= cfg.worst_greedy:
            with jax.enable_x64(True):
                g = cj.worst_case_mask(
                    alpha, num_coeffs=d, num_responses=m - s, max_candidates=0
                )
            row["greedy"] = g.cond
            row["greedy_missing"] = np.flatnonzero(~g.mask).tolist()
        if row["exact"] is not None and row["greedy"] is not None:
            row["greedy_over_exact"] = row["greedy"] / row["exact"]
        out.append(row)
    return out


def plan(cfg: PlanConfig) -> dict[str, Any]:
    """Run every section; returns the summary (what ``summary.json`` holds)."""
    validate(cfg)
    uw = unit_roundoff(cfg.worker_dtype)
    summary: dict[str, Any] = {
        "config": dataclasses.asdict(cfg),
        "D": cfg.num_coeffs,
        "unit_roundoff": uw,
        "error_model": (
            "relative decode error = cond(U_S) x u_w (equilibrated rows)"
            if cfg.error_model == "cond"
            else "relative decode error = ||T_beta T_S^+||_inf x u_w "
            "(DecodeResult.error per unit of max |y|)"
        ),
        "chebyls": chebyls_table(cfg),
        "repapprox": repapprox_table(cfg),
    }
    if cfg.points == "first" and (cfg.worst_exact or cfg.worst_greedy):
        summary["worst_case"] = worst_case_table(cfg)
    if cfg.latency is not None:
        ns = [cfg.num_coeffs, cfg.workers]
        for n in (
            summary["chebyls"]["chosen_N"],
            summary["repapprox"]["chosen_N"]["exact"],
        ):
            if n is not None:
                ns.append(n)
        summary["latency"] = {
            "model": cfg.latency,
            "percentiles": latency_percentiles(
                cfg.latency,
                num_workers=cfg.workers,
                responses=ns,
                trials=max(cfg.trials, 10_000),
                seed=cfg.seed + 1,
            ),
        }
    return summary


# ----------------------------------------------------------------------------------
# report


def _g(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "inf"
        if x > 1e15:
            return "unresolved"
        return f"{x:.3g}"
    return str(x)


def report(summary: dict[str, Any]) -> str:
    cfg = summary["config"]
    lines = [
        "# Choosing N",
        "",
        f"M = {cfg['workers']}, K = {cfg['inputs']}, d = {cfg['degree']}, so "
        f"D = d (K - 1) + 1 = {summary['D']}; worker dtype {cfg['worker_dtype']} "
        f"(u_w = {summary['unit_roundoff']:.3g}); {cfg['points']}-kind points; target "
        f"error {cfg['target_error']:g} exceeded with probability at most "
        f"{cfg['failure']:g}.",
        f"Error model: {summary['error_model']}.",
        "",
        "## ChebyLS",
        "",
        "| N | sets | failures | rate | upper | median err | p95 err | max err | "
        "proven cond | by |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["chebyls"]["rows"]:
        sets = f"all {r['trials']}" if r["exhaustive"] else f"MC {r['trials']}"
        lines.append(
            f"| {r['N']} | {sets} | {r['failures']} | {_g(r['rate'])} | "
            f"{_g(r['upper'])} | {_g(r['median_error'])} | {_g(r['p95_error'])} | "
            f"{_g(r['max_error'])} | {_g(r['proven_cond'])} | {r['proven_by']} |"
        )
    ch = summary["chebyls"]
    conf = cfg["confidence"]
    lines += [
        "",
        "'upper' is the exact rate when every set is listed, else the one-sided "
        f"{conf:.0%} Clopper-Pearson upper bound.",
        "",
        f"**ChebyLS: N = {_g(ch['chosen_N'])}** (smallest N with failure probability "
        f"<= {cfg['failure']:g} there and at every larger N). "
        + (
            f"Proven by a bound of codedjax.bounds from N = {ch['proven_N']}."
            if ch["proven_N"] is not None
            else "No proven bound guarantees the target at any N < M+1: every bound "
            "is vacuous or too weak (see docs/theory.md section 12)."
        ),
        "",
        f"## RepApprox (c = {summary['repapprox']['replication']})",
        "",
        "| N | P(lost) exact | union bound | seed bound | Monte Carlo | upper |",
        "|---|---|---|---|---|---|",
    ]
    rep = summary["repapprox"]
    for r in rep["rows"]:
        if r["exact"] > 0.5 and r["N"] < cfg["workers"] // 2:
            continue
        lines.append(
            f"| {r['N']} | {_g(r['exact'])} | {_g(min(r['union'], 1.0))} | "
            f"{_g(min(r['seed'], 1.0))} | {_g(r['rate'])} | {_g(r['upper'])} |"
        )
    cn = rep["chosen_N"]
    lines += [
        "",
        f"**RepApprox: N = {_g(cn['exact'])}** by the exact formula (union bound "
        f"{_g(cn['union'])}, seed bound {_g(cn['seed'])}, Monte Carlo upper bound "
        f"{_g(cn['upper'])}).",
    ]
    if "worst_case" in summary:
        lines += [
            "",
            "## Worst case over every straggler set (equilibrated cond(U_S))",
            "",
            "| s | N | exact worst | raw cond(T_S) there | missing | greedy | "
            "greedy / exact |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in summary["worst_case"]:
            lines.append(
                f"| {r['s']} | {r['N']} | {_g(r['exact'])} | {_g(r.get('exact_raw'))} "
                f"| {r.get('exact_missing', '-')} | {_g(r['greedy'])} | "
                f"{_g(r.get('greedy_over_exact'))} |"
            )
    if "latency" in summary:
        lines += [
            "",
            f"## Latency ({summary['latency']['model']}): time to the N-th response",
            "",
            "| N | mean | p50 | p95 | p99 |",
            "|---|---|---|---|---|",
        ]
        for n, p in sorted(summary["latency"]["percentiles"].items()):
            lines.append(
                f"| {n} | {p['mean'] * 1e3:.2f} ms | {p['p50'] * 1e3:.2f} ms | "
                f"{p['p95'] * 1e3:.2f} ms | {p['p99'] * 1e3:.2f} ms |"
            )
    return "\n".join(lines) + "\n"


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return _jsonable(float(x))
    return x


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m theory.plan", description=__doc__)
    p.add_argument("--workers", type=int, required=True, help="M")
    p.add_argument("--inputs", type=int, required=True, help="K")
    p.add_argument("--degree", type=int, required=True, help="d")
    p.add_argument("--worker-dtype", default="bfloat16", choices=_DTYPES)
    p.add_argument("--target-error", type=float, default=1e-2)
    p.add_argument("--failure", type=float, default=1e-3)
    p.add_argument("--points", default="first", choices=("first", "second"))
    p.add_argument("--error-model", default="cond", choices=("cond", "decoder"))
    p.add_argument("--replication", type=int, default=None, help="c (default M//K)")
    p.add_argument("--trials", type=int, default=20_000)
    p.add_argument("--exhaustive-limit", type=int, default=100_000)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--latency", default=None, help="e.g. shifted-exp:5ms,5ms")
    p.add_argument("--worst-exact", type=int, default=3)
    p.add_argument("--worst-greedy", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    cfg = PlanConfig(
        workers=a.workers,
        inputs=a.inputs,
        degree=a.degree,
        worker_dtype=a.worker_dtype,
        target_error=a.target_error,
        failure=a.failure,
        points=a.points,
        error_model=a.error_model,
        replication=a.replication,
        trials=a.trials,
        exhaustive_limit=a.exhaustive_limit,
        confidence=a.confidence,
        latency=a.latency,
        worst_exact=a.worst_exact,
        worst_greedy=a.worst_greedy,
        seed=a.seed,
        progress=not a.no_progress,
    )
    try:
        validate(cfg)
    except ValueError as err:
        p.error(str(err))
    print(f"D = d (K - 1) + 1 = {cfg.num_coeffs}", flush=True)
    summary = plan(cfg)
    text = report(summary)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(_jsonable(summary), f, indent=1)
        with open(os.path.join(a.out, "report.md"), "w") as f:
            f.write(text)
    return summary


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
