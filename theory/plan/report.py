"""``report.md`` of the plan, and the files it writes."""

from __future__ import annotations

import math
import os
from typing import Any

import runkit

from .search import search_lines


def write_outputs(out: str, summary: dict[str, Any], text: str) -> None:
    """``summary.json`` (strict JSON: non-finite numbers as null) and ``report.md``."""
    os.makedirs(out, exist_ok=True)
    runkit.write_summary(os.path.join(out, "summary.json"), summary, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)


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
    """The markdown report of a plan summary (also printed)."""
    cfg = summary["config"]
    if "search" in summary:  # --workers LO..HI: the search over M alone
        return "\n".join(["# Choosing M", ""] + search_lines(summary)) + "\n"
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
    ]
    lines += _chebyls_lines(summary)
    lines += _repapprox_lines(summary)
    if "worst_case" in summary:
        lines += _worst_case_lines(summary["worst_case"])
    if "latency" in summary:
        lines += _latency_lines(summary["latency"])
    if "schemes" in summary:
        lines += _scheme_lines(summary)
    return "\n".join(lines) + "\n"


def _chebyls_lines(summary: dict[str, Any]) -> list[str]:
    cfg = summary["config"]
    rows = summary["chebyls"]["rows"]
    actual = bool(rows) and "actual_median" in rows[0]
    head = (
        "| N | sets | failures | rate | upper | median err | p95 err | max err | "
        + ("actual median | actual max | covered | " if actual else "")
        + "proven cond | by |"
    )
    lines = [head, "|" + "---|" * head.count(" | ")]
    for r in rows:
        sets = f"all {r['trials']}" if r["exhaustive"] else f"MC {r['trials']}"
        extra = (
            f"{_g(r['actual_median'])} | {_g(r['actual_max'])} | {r['covered']:.4f} | "
            if actual
            else ""
        )
        lines.append(
            f"| {r['N']} | {sets} | {r['failures']} | {_g(r['rate'])} | "
            f"{_g(r['upper'])} | {_g(r['median_error'])} | {_g(r['p95_error'])} | "
            f"{_g(r['max_error'])} | {extra}{_g(r['proven_cond'])} | "
            f"{r['proven_by']} |"
        )
    ch = summary["chebyls"]
    conf = cfg["confidence"]
    lines += [
        "",
        "'upper' is the exact rate when every set is listed, else the one-sided "
        f"{conf:.0%} Clopper-Pearson upper bound."
        + (
            " 'actual' is the same decodes' error against the float64 polynomial "
            "(per unit of max |y_S|), 'covered' the share of them whose predicted "
            "error is at least the actual one; a decode that is not ok counts as "
            "a failure (error inf)."
            if actual
            else ""
        ),
        "",
        f"**ChebyLS: N = {_g(ch['chosen_N'])}** (smallest N with failure probability "
        f"<= {cfg['failure']:g} there and at every larger N). "
        + (
            f"Proven by a bound of codedjax.bounds from N = {ch['proven_N']} "
            "(a bound on cond(U_S), so on the cond model's error cond(U_S) u_w)."
            if ch["proven_N"] is not None
            else "No proven bound guarantees the target at any N < M+1: every bound "
            "is vacuous or too weak (see docs/theory.md section 12)."
        ),
        "",
    ]
    return lines


def _repapprox_lines(summary: dict[str, Any]) -> list[str]:
    cfg = summary["config"]
    lines = [
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
    return lines


def _worst_case_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Worst case over every straggler set (equilibrated cond(U_S))",
        "",
        "| s | N | exact worst | raw cond(T_S) there | missing | greedy | "
        "greedy / exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['s']} | {r['N']} | {_g(r['exact'])} | {_g(r.get('exact_raw'))} "
            f"| {r.get('exact_missing', '-')} | {_g(r['greedy'])} | "
            f"{_g(r.get('greedy_over_exact'))} |"
        )
    return lines


def _latency_lines(latency: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"## Latency ({latency['model']}): time to the N-th response",
        "",
        "| N | mean | p50 | p95 | p99 |",
        "|---|---|---|---|---|",
    ]
    for n, p in sorted(latency["percentiles"].items()):
        lines.append(
            f"| {n} | {p['mean'] * 1e3:.2f} ms | {p['p50'] * 1e3:.2f} ms | "
            f"{p['p95'] * 1e3:.2f} ms | {p['p99'] * 1e3:.2f} ms |"
        )
    return lines


def _scheme_lines(summary: dict[str, Any]) -> list[str]:
    cfg = summary["config"]
    sc = summary["schemes"]
    lines = [
        "",
        f"## Which scheme ({sc['workload']} workload, {cfg['latency']})",
        "",
        f"Each scheme at its best layout and N (runkit.choice: its systematic "
        f"variant, K' = K or K/2 queries per group of M' workers, G groups): the "
        f"lowest per-query p99 whose decoded error is at most "
        f"{cfg['target_error']:g} with probability 1 - {cfg['failure']:g} "
        f"(one-sided {cfg['confidence']:.0%} upper bound; ties: the least work per "
        "query); latency from codedjax.serving.simulate_latency "
        f"({sc['requests']} requests, zero engine overhead, each query answered at "
        "its own worker's answer or at the decode that gives it; 'request p99' "
        "waits for a request's last query); evals / worker = the real evaluations "
        "of f a worker serves per request (its service scale: a circle worker "
        "serves two), work / query = M' x that / K'.",
        "",
        "| scheme | layout | N | evals / worker | work / query | policy | p50 | "
        "p99 | request p99 | median err | max err | failures | upper | meets |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sc["rows"]:
        if r.get("p99") is None:
            lines.append(f"| {r['scheme']} | {r['reason']} |" + " |" * 12)
            continue
        lines.append(
            f"| {r['scheme']} | {r['layout']} | {r['N']} | {r['service_scale']:g} | "
            f"{r['work_per_query']:.3g} | {r['policy']} | "
            f"{r['p50'] * 1e3:.2f} ms | {r['p99'] * 1e3:.2f} ms | "
            f"{r['request_p99'] * 1e3:.2f} ms | "
            f"{_g(r['median_error'])} | {_g(r['max_error'])} | "
            f"{r['failures']}/{r['decodes']} | {_g(r['upper'])} | "
            f"{'yes' if r['meets'] else 'no'} |"
        )
    choice = sc["choice"]
    what = f"{choice} ({sc['choice_layout']})" if choice else "none meets the target"
    lines += ["", f"**Scheme: {what}**", ""]
    lines += [f"- {t}" for t in sc["ranking"]]
    return lines
