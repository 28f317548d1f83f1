"""The plan: every section (ChebyLS, RepApprox, the worst case, the latency and
the schemes) run for one configuration."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

from runkit import environment

from .config import PlanConfig, unit_roundoff, validate
from .schemes import scheme_table
from .search import workers_search
from .tables import (
    chebyls_table,
    latency_percentiles,
    repapprox_table,
    worst_case_table,
)

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
        poly = cfg.workload == "polynomial"
        summary["schemes"] = scheme_table(cfg, summary["chebyls"] if poly else None)
    return summary
