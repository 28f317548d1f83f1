"""The verification run: every section, the verdicts, ``summary.json``, report, plots.

:func:`run` returns a :class:`VerifySummary` (what ``summary.json`` holds); process 0
of a multi-process run writes the outputs.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any, TypedDict

import jax

import runkit

from .. import _common as C
from .. import montecarlo as mc
from . import report as _report
from .conditions import analyse_cond, informative_ranges, key, orthogonality_checks
from .config import VerifyConfig, cond_blocks, recovery_rows, response_grid, validate
from .points import points_comparison
from .recovery import recovery_section
from .verdict import bound_summary, verdict
from .worst_case import exhaustive_worst_case


class VerifySummary(TypedDict, total=False):
    """What :func:`run` returns and writes to ``summary.json`` (strict JSON: vacuous
    bounds and other non-finite numbers are ``None``)."""

    config: dict[str, Any]
    devices: list[str]
    environment: dict[str, Any]
    backend: str
    interval_confidence: float
    family_confidence: float
    eta: float
    num_checks: int
    num_holding: int
    num_informative: int
    num_informative_holding: int
    num_vacuous: int
    num_bound_checks: int
    num_bound_checks_holding: int
    headline: str
    headline_bounds: str
    all_hold: bool
    seconds: float
    section_seconds: dict[str, float]
    chunk: int
    width: int
    blocks: list[dict]
    bounds: list[dict]
    checks: list[dict]
    recovery: list[dict]
    cond: list[dict]
    points: list[dict]
    exhaustive: list[dict]
    speed: list[dict]


def dispatch_plan(cfg: VerifyConfig, mesh) -> tuple[int, int]:
    """(width, chunk) shared by every section, so the sampler compiles once.

    width: the largest M of the run (latencies drawn per trial). chunk: trials per
    dispatch (each device vmaps them in memory-bounded steps).
    """
    ms = [m for _, m, _ in cond_blocks(cfg)]
    trials = [cfg.trials] if ms else []
    if cfg.points_coeffs:
        ms.append(cfg.points_workers)
        trials.append(cfg.points_trials)
    if cfg.recovery_grid:
        ms += [m for _, _, m in cfg.recovery_grid]
        trials.append(cfg.recovery_trials)
    if not ms:
        return 1, mc.fit_chunk(cfg.chunk, 1, mesh)
    return max(ms), mc.fit_chunk(cfg.chunk, min(trials), mesh)


def num_intervals(cfg: VerifyConfig) -> int:
    """Bonferroni family: informative probabilistic checks and RepApprox rows."""
    n = 0
    for p, m, d in cond_blocks(cfg):
        for b in C.BOUNDS:
            if b.kind != "probabilistic":
                continue
            for nn in response_grid(m, d):
                v = C.bound_value(b.name, p, m, d, nn, cfg.eta)
                n += v is not None and math.isfinite(v)
    n += sum(len(recovery_rows(*g)) for g in cfg.recovery_grid)
    return max(n, 1)


@dataclasses.dataclass
class _Run:
    """What the sections of one run share and what they collect."""

    cfg: VerifyConfig
    level: float  # per-interval confidence
    mesh: Any
    width: int
    chunk: int
    checks: list = dataclasses.field(default_factory=list)
    sections: dict = dataclasses.field(default_factory=dict)

    def bar(self, total: int, desc: str):
        """One progress bar per section: their trials cost very different amounts."""
        return runkit.progress(
            total=total,
            desc=desc,
            disable=None if self.cfg.progress else True,
            unit="trial",
            unit_scale=True,
        )

    @property
    def plan_kw(self) -> dict:
        return dict(chunk=self.chunk, width=self.width, mesh=self.mesh)


def run(cfg: VerifyConfig, out: str) -> VerifySummary:
    """Run every section, write ``summary.json``, ``report.md`` and plots to ``out``."""
    validate(cfg)
    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    level = 1.0 - (1.0 - cfg.family_confidence) / num_intervals(cfg)
    mesh = mc.make_mesh()
    width, chunk = dispatch_plan(cfg, mesh)
    r = _Run(cfg, level, mesh, width, chunk)
    cond_rows, speed, blocks = _timed(r, "condition numbers", _cond_section)
    point_rows, rec_rows, curves, ex_rows = [], [], [], []
    if cfg.points_coeffs:
        point_rows = _timed(r, "points and bases", _points_section)
    if cfg.recovery_grid or cfg.enumeration_grid:
        rec_rows, curves = _timed(r, "RepApprox", _recovery_section)
    if cfg.exhaustive_workers:
        ex_rows = _timed(r, "exhaustive worst case", _worst_case_section)
    summary = _summary(
        r,
        seconds=time.perf_counter() - t_start,
        blocks=blocks,
        tables=dict(
            recovery=rec_rows,
            cond=cond_rows,
            points=point_rows,
            exhaustive=ex_rows,
            speed=speed,
        ),
    )
    if mc.is_writer():
        write_outputs(out, summary, curves, plots=cfg.plots)
    return summary


def _timed(r: _Run, name: str, section: Callable[[_Run], Any]) -> Any:
    t = time.perf_counter()
    result = section(r)
    r.sections[name] = time.perf_counter() - t
    return result


def _cond_section(r: _Run) -> tuple[list[dict], list[dict], list[dict]]:
    """Section 1 for every (points, M, D): rows, run times and block descriptions."""
    cfg = r.cfg
    cond_rows, speed, blocks = [], [], []
    todo = cond_blocks(cfg)
    bar = r.bar(len(todo) * cfg.trials, "cond(T_S) trials")
    for points, m, d in todo:
        resp = response_grid(m, d)
        bar.set_postfix_str(f"cond {points} M={m} D={d}")
        smp = mc.cond_monte_carlo(
            key(cfg.seed, 1, m, d) if points == "first" else key(cfg.seed, 5, m, d),
            num_workers=m,
            num_coeffs=d,
            responses=resp,
            num_trials=cfg.trials,
            memory_bytes=cfg.memory_bytes,
            keep_orders=cfg.identity_trials,
            progress=bar.update,
            **r.plan_kw,
            **({} if points == "first" else {"points": points}),
        )
        rows, chk = analyse_cond(
            smp,
            m=m,
            d=d,
            responses=resp,
            eta=cfg.eta,
            level=r.level,
            identity_trials=cfg.identity_trials,
            points=points,
        )
        cond_rows += rows
        r.checks += (orthogonality_checks(m, d) if points == "first" else []) + chk
        blocks.append(_block(cfg, points, m, d, rows))
        speed.append(_speed(cfg, points, m, d, len(resp), smp))
    bar.close()
    return cond_rows, speed, blocks


def _block(cfg: VerifyConfig, points: str, m: int, d: int, rows: list[dict]) -> dict:
    return {
        "points": points,
        "M": m,
        "D": d,
        "raw_factor": C.raw_factor(points, m, d),
        "coherence": C.max_leverage_times_m(points, m, d) / d,
        "informative_N": informative_ranges(points, m, d, cfg.eta),
        "not_applicable": rows[0]["not_applicable"] if rows else [],
    }


def _speed(cfg: VerifyConfig, points: str, m: int, d: int, num_n: int, smp) -> dict:
    return {
        "points": points,
        "M": m,
        "D": d,
        "num_N": num_n,
        "trials": cfg.trials,
        "seconds": smp.seconds,
        "compile_seconds": smp.compile_seconds,
        "trials_per_s": cfg.trials / smp.seconds,
        "svds_per_s": 2 * cfg.trials * num_n / smp.seconds,
    }


def _points_section(r: _Run) -> list[dict]:
    cfg = r.cfg
    bar = r.bar(len(cfg.points_coeffs) * cfg.points_trials, "points and bases")
    rows, chk = points_comparison(cfg, bar.update, **r.plan_kw)
    bar.close()
    r.checks += chk
    return rows


def _recovery_section(r: _Run) -> tuple[list[dict], list[dict]]:
    cfg = r.cfg
    bar = r.bar(len(cfg.recovery_grid) * cfg.recovery_trials, "RepApprox trials")
    rows, chk, curves = recovery_section(cfg, r.level, bar.update, **r.plan_kw)
    bar.close()
    r.checks += chk
    return rows, curves


def _worst_case_section(r: _Run) -> list[dict]:
    rows, chk = exhaustive_worst_case(r.cfg)
    r.checks += chk
    return rows


def _summary(
    r: _Run, *, seconds: float, blocks: list[dict], tables: dict[str, list]
) -> VerifySummary:
    cfg, checks = r.cfg, r.checks
    counts = verdict(checks)
    summary = {
        "config": dataclasses.asdict(cfg),
        "devices": [str(dv) for dv in jax.devices()],
        "environment": runkit.environment(),
        "backend": jax.default_backend(),
        "interval_confidence": r.level,
        "family_confidence": cfg.family_confidence,
        "eta": cfg.eta,
        # every check, vacuous ones included (their ``holds`` is null)
        "num_checks": len(checks),
        "num_holding": sum(c["holds"] is True for c in checks),
        **counts,
        "all_hold": counts["num_informative_holding"] == counts["num_informative"],
        "seconds": seconds,
        "section_seconds": r.sections,
        "chunk": r.chunk,
        "width": r.width,
        "blocks": blocks,
        "bounds": bound_summary(checks, blocks),
        "checks": checks,
        **tables,
    }
    return runkit.json_clean(summary)


def write_outputs(
    out: str, summary: VerifySummary, curves: list[dict], *, plots: bool = True
) -> None:
    """``summary.json``, the PNG plots (``plots``) and ``report.md`` in ``out``."""
    runkit.write_summary(os.path.join(out, "summary.json"), summary, indent=1)
    written = []
    if plots:
        from . import plots as _plots

        written = _plots.write_plots(out, summary, curves)
    text = _report.report(summary, written)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
