"""The plan's tables: ChebyLS and RepApprox failure probabilities against N, the
worst case, and the time to the N-th of M worker responses under a library
latency model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import codedjax as cj
import codedjax.bounds as cb
from runkit import progress

from .config import PlanConfig, replication, unit_roundoff
from .errors import (
    all_masks,
    arrival_ranks,
    decode_errors,
    decoder_errors,
    worker_points,
)


def cp_upper(k: int, n: int, confidence: float) -> float:
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
            "upper": rate if exhaustive else cp_upper(k, trials, cfg.confidence),
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
                else cp_upper(lost, trials, cfg.confidence),
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


def parse_latency(spec: str) -> cj.LatencyModel:
    """The library's latency model for ``--latency`` (its text form, e.g.
    ``shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms``); a text it cannot read is a
    ValueError naming the option."""
    try:
        return cj.parse_latency(spec)
    except (TypeError, ValueError) as err:
        raise ValueError(f"theory.plan: --latency: {err}") from err


def latency_percentiles(
    spec: str, *, num_workers: int, responses: Sequence[int], trials: int, seed: int
) -> dict[int, dict[str, float]]:
    """Percentiles (p50, p95, p99) and mean of the time to the N-th response.

    M worker latencies per trial (``trials`` trials) from the model, sorted; the
    N-th smallest is the time the master waits for N responses.
    """
    model = parse_latency(spec)
    lat = model.sample(np.random.default_rng(seed), (trials, num_workers))
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
