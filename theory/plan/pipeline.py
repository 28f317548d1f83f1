"""The sections of the plan: ChebyLS, RepApprox, the worst case and the latency."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypedDict

import numpy as np

import codedjax as cj
import codedjax.bounds as cb
from runkit import environment, progress

from .config import PlanConfig, replication, unit_roundoff, validate
from .errors import (
    all_masks,
    arrival_ranks,
    decode_errors,
    decoder_errors,
    worker_points,
)
from .latency import latency_percentiles


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


def _masks(cfg: PlanConfig, n: int, ranks: list) -> tuple[np.ndarray, bool]:
    """Every N-subset when C(M, N) <= exhaustive_limit, else the nested Monte Carlo
    sets (``ranks`` caches the arrival ranks, drawn once per table)."""
    if math.comb(cfg.workers, n) <= cfg.exhaustive_limit:
        return all_masks(cfg.workers, n), True
    if not ranks:
        ranks.append(arrival_ranks(cfg))
    return ranks[0] < n, False


def chebyls_table(cfg: PlanConfig) -> dict[str, Any]:
    """Failure probability of ChebyLS for every N from D to M, and the N to choose."""
    m, d = cfg.workers, cfg.num_coeffs
    uw = unit_roundoff(cfg.worker_dtype)
    ranks: list = []
    rows = []
    bar = progress(range(d, m + 1), desc="ChebyLS N", disable=not cfg.progress or None)
    for n in bar:
        masks, exhaustive = _masks(cfg, n, ranks)
        actual = None
        if cfg.error_model == "decoder":
            err, actual = decoder_errors(cfg, masks)
        else:
            err = decode_errors(cfg, masks)
        k = int(np.sum(~(err <= cfg.target_error)))
        trials = masks.shape[0]
        rate = k / trials
        bound, bname = _proven(cfg, n)
        proven_err = bound * uw  # a bound on the cond model's error
        row = {
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
        if actual is not None:  # the same decodes' error against the truth
            row["actual_median"] = float(np.median(actual))
            row["actual_max"] = float(np.max(actual))
            row["actual_failures"] = int(np.sum(~(actual <= cfg.target_error)))
            row["covered"] = float(np.mean(err >= actual))
        rows.append(row)
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
    ranks: list = []
    rows = []
    for n in range(1, m + 1):
        masks, exhaustive = _masks(cfg, n, ranks)
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
    alpha = worker_points(m, "first")
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


_MODEL_TEXT = {
    "decoder": "relative decode error = the ChebyLS decoder's own prediction "
    "(DecodeResult.error) per unit of max |y_S|, on one random polynomial request "
    "per responding set answered in the worker dtype",
    "cond": "relative decode error = cond(U_S) x u_w (equilibrated rows; the "
    "model the proven bounds bound)",
    "rowsum": "relative decode error = ||T_beta T_S^+||_inf x u_w (every answer off "
    "by u_w relative, summed by each row of the decoding matrix)",
}


class PlanSummary(TypedDict, total=False):
    """What :func:`plan` returns; ``summary.json`` holds it with non-finite numbers
    as ``null`` (and the latency percentiles keyed by str(N)).

    ``worst_case`` is present at first-kind points, ``latency`` with ``--latency``,
    ``schemes`` with ``--schemes`` (:func:`theory.plan.schemes.scheme_table`).
    """

    config: dict[str, Any]
    environment: dict[str, Any]
    D: int
    unit_roundoff: float
    error_model: str
    chebyls: dict[str, Any]  # rows, chosen_N, proven_N
    repapprox: dict[str, Any]  # replication, rows, chosen_N per method
    worst_case: list[dict[str, Any]]
    latency: dict[str, Any]  # model, percentiles {N: {mean, p50, p95, p99}}
    schemes: dict[str, Any]  # rows, choice, ranking (with --schemes)
    search: dict[str, Any]  # rows, choice, ranking, tried (with --workers LO..HI)


def plan(cfg: PlanConfig) -> PlanSummary:
    """Run every section; returns the summary (what ``summary.json`` holds). With
    ``cfg.max_workers``: the search over M alone (``search``,
    :func:`theory.plan.search.workers_search`)."""
    validate(cfg)
    if cfg.max_workers is not None:
        from .search import workers_search

        return {
            "config": dataclasses.asdict(cfg),
            "environment": environment(),
            "search": workers_search(cfg),
        }
    uw = unit_roundoff(cfg.worker_dtype)
    summary: PlanSummary = {
        "config": dataclasses.asdict(cfg),
        "environment": environment(),
        "D": cfg.num_coeffs,
        "unit_roundoff": uw,
        "error_model": _MODEL_TEXT[cfg.error_model],
        "repapprox": repapprox_table(cfg),
    }
    fits = cfg.num_coeffs <= cfg.workers  # always, unless --schemes is given
    summary["chebyls"] = (
        chebyls_table(cfg) if fits else {"rows": [], "chosen_N": None, "proven_N": None}
    )
    if fits and cfg.points == "first" and (cfg.worst_exact or cfg.worst_greedy):
        summary["worst_case"] = worst_case_table(cfg)
    if cfg.latency is not None:
        ns = [n for n in (cfg.num_coeffs, cfg.workers) if n <= cfg.workers]
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
    if cfg.schemes is not None:
        from .schemes import scheme_table

        poly = cfg.workload == "polynomial"
        summary["schemes"] = scheme_table(cfg, summary["chebyls"] if poly else None)
    return summary
