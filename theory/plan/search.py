"""How many workers: the smallest M at which each scheme meets the targets.

``python -m theory.plan --workers LO..HI --schemes all --latency ... [--p99-target
30ms]``. For M = LO, LO + 1, ..., HI, every scheme not yet placed is run as in
:mod:`theory.plan.schemes` on M workers (its best layout and N, searched as
``runkit.choice`` prunes them: the lowest per-query p99 among the candidates whose
decoded error meets ``--target-error`` with probability 1 - ``--failure``, from
:func:`codedjax.serving.simulate_latency` under ``--latency``; ChebyLS on the
whole cell at the N of the plan's ChebyLS table for that M); a scheme is placed at
the first M where it meets the error target and, when ``--p99-target`` is given,
has a per-query p99 at most that.
The choice is the scheme with the smallest M (ties: the lowest p99). A scheme that
no M of the range serves keeps the reason of its last M ("does not apply: ...",
"does not meet the target at any N <= M", or "p99 ... above the target").
Every M sees the same delay draws for its workers (one injector seed), as a
deployment that adds workers would.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import codedjax as cj
from codedjax import serving

from .config import PlanConfig, selected
from .schemes import plan_layouts, scheme_row, workload
from .tables import chebyls_table

__all__ = ["search_lines", "workers_search"]


def _ms(t: float) -> str:
    return f"{t * 1e3:.3g} ms"


def workers_search(cfg: PlanConfig) -> dict[str, Any]:
    """Each selected scheme's smallest M in [``cfg.workers``, ``cfg.max_workers``]
    (see the module docstring); returns rows (one per scheme: ``M``, ``name`` (the
    name asked for; ``scheme`` is the catalogue entry's, e.g. ``parity k=2``) and
    the row of :func:`theory.plan.schemes.scheme_row` at that M, or ``M`` None and
    the reason),
    ``choice``, ``ranking`` (text with the reasons) and ``tried`` (every (scheme, M)
    evaluated: N, p99, whether it met the error target)."""
    names = selected(cfg.schemes)
    wl = workload(cfg)
    poly = cfg.workload == "polynomial"
    found: dict[str, dict] = {}
    last: dict[str, dict] = {}
    tried = []
    for m in range(cfg.workers, cfg.max_workers + 1):
        todo = [s for s in names if s not in found]
        if not todo:
            break
        cm = dataclasses.replace(cfg, workers=m, max_workers=None)
        injector = serving.Injector(
            latency=cj.parse_latency(cfg.latency), seed=cfg.seed
        )
        cheb = None
        if poly and "chebyls" in todo and cm.num_coeffs <= m:
            cheb = chebyls_table(cm)
        layouts, reasons = plan_layouts(cm, wl, tuple(todo))
        for s in (n for n in todo if n in layouts or n in reasons):
            if s in layouts:
                got = scheme_row(cm, s, layouts[s], wl, injector, cheb)
            else:
                got = {"scheme": s, "applies": False, "reason": reasons[s]}
            row = {"M": m, "name": s, **got}
            if row.get("p99") is not None and not row["meets"] and not row["reason"]:
                row["reason"] = (
                    f"misses the error target at N = {row['N']} ({row['failures']} "
                    f"of {row['decodes']} decodes over {cfg.target_error:g})"
                )
            fast = row.get("p99") is not None and (
                cfg.p99_target is None or row["p99"] <= cfg.p99_target
            )
            tried.append(
                {
                    "scheme": s,
                    "M": m,
                    "N": row.get("N"),
                    "p99": row.get("p99"),
                    "meets_error": bool(row.get("meets")),
                    "reason": row.get("reason"),
                }
            )
            if row.get("meets") and fast:
                found[s] = row
                continue
            if row.get("meets"):
                row["reason"] = (
                    f"p99 {_ms(row['p99'])} above the target {_ms(cfg.p99_target)}"
                )
            last[s] = row
    rows = []
    for s in names:
        if s in found:
            rows.append(found[s])
        else:
            r = last[s]
            rows.append(
                {
                    **r,
                    "M": None,
                    "last_M": r["M"],
                    "reason": f"no M <= {cfg.max_workers}: at M = {r['M']}, "
                    f"{r['reason'] or 'misses the target'}",
                }
            )
    placed = sorted((r for r in rows if r["M"] is not None),
                    key=lambda r: (r["M"], r["p99"]))  # fmt: skip
    choice = placed[0]["scheme"] if placed else None
    ranking = []
    for r in placed:
        text = (
            f"{r['scheme']}: M = {r['M']}, N = {r['N']}, p99 {_ms(r['p99'])} per "
            f"query ({r['layout']})"
        )
        if r is not placed[0]:
            extra = r["M"] - placed[0]["M"]
            text += f" ({extra} more worker{'s' * (extra != 1)} than {choice})"
        below = [t for t in tried if t["scheme"] == r["name"] and t["M"] < r["M"]]
        if below:
            b = below[-1]
            why = (
                f"p99 {_ms(b['p99'])} above the target"
                if b["meets_error"]
                else (b["reason"] or "misses the error target")
            )
            text += f"; at M = {b['M']}: {why}"
        ranking.append(text)
    ranking += [f"{r['scheme']}: {r['reason']}" for r in rows if r["M"] is None]
    return {
        "range": [cfg.workers, cfg.max_workers],
        "p99_target": cfg.p99_target,
        "workload": cfg.workload,
        "requests": cfg.scheme_requests,
        "rows": rows,
        "choice": choice,
        "ranking": ranking,
        "tried": tried,
    }


def search_lines(summary: dict[str, Any]) -> list[str]:
    """The report's section "How many workers"."""
    cfg = summary["config"]
    se = summary["search"]
    lo, hi = se["range"]
    target = "" if se["p99_target"] is None else f", p99 <= {_ms(se['p99_target'])}"
    lines = [
        f"## How many workers (M = {lo}..{hi}, K = {cfg['inputs']}, "
        f"{se['workload']} workload of degree {cfg['degree']}, {cfg['latency']})",
        "",
        f"Each scheme at the smallest M where its decoded error is at most "
        f"{cfg['target_error']:g} with probability 1 - {cfg['failure']:g}{target} "
        f"({cfg['worker_dtype']} workers, {se['requests']} simulated requests per "
        "layout and N; its best layout there, per-query latency).",
        "",
        "| scheme | M | layout | N | p50 | p99 | median err | failures | reason |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in se["rows"]:
        if r["M"] is None:
            lines.append(f"| {r['scheme']} | none |  |  |  |  |  |  | {r['reason']} |")
            continue
        lines.append(
            f"| {r['scheme']} | {r['M']} | {r['layout']} | {r['N']} | "
            f"{_ms(r['p50'])} | "
            f"{_ms(r['p99'])} | {r['median_error']:.3g} | "
            f"{r['failures']}/{r['decodes']} |  |"
        )
    lines += ["", f"**Fewest workers: {se['choice'] or 'none in the range'}**", ""]
    lines += [f"- {t}" for t in se["ranking"]]
    return lines
