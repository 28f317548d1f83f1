"""The load benchmark's tables, ``report.md``, ``summary.json`` and the p99 plot."""

from __future__ import annotations

import math
from pathlib import Path

from runkit import fmt, write_summary

__all__ = ["format_tables", "plot_p99", "targets", "write_outputs"]

#: the cluster sizes the project's targets are stated for
TARGET_WORKERS = (12, 16, 40)


def _f(v, spec: str = ".1f") -> str:
    return fmt(v, spec, missing="-")


def _rows(cell: dict) -> dict:
    return {r["name"]: r for f in cell["families"].values() for r in f["best"]}


def targets(summary: dict) -> dict:
    """Per cell: the best coded and the best replication layout (uncoded
    serving included) by sustained rate, their ratio and the low-rate p50
    ratio; and, over the cells with M in :data:`TARGET_WORKERS`, how many meet
    coded >= replication and coded >= 1.5 replication."""
    out = {}
    for key, cell in summary["cells"].items():
        rows, picks = _rows(cell), cell["picks"]
        c = rows.get(picks["best coded"] or "", {})
        r = rows.get(picks["best replication"] or "", {})
        rc, rr = c.get("max_rate", 0.0), r.get("max_rate", 0.0)
        ratio = rc / rr if rr > 0 else (math.inf if rc > 0 else math.nan)
        out[key] = {
            "num_workers": cell["num_workers"],
            "best_coded": picks["best coded"],
            "coded_rate": rc,
            "best_replication": picks["best replication"],
            "replication_rate": rr,
            "ratio": ratio,
            "low_rate_p50_ratio": cell["low_rate"]["ratio"],
        }
    judged = [t for t in out.values() if t["num_workers"] in TARGET_WORKERS]
    return {
        "cells": out,
        "judged_cells": len(judged),
        "coded_at_least_replication": sum(t["ratio"] >= 1 for t in judged),
        "coded_at_least_1.5x": sum(t["ratio"] >= 1.5 for t in judged),
    }


def _layout(r: dict | None) -> str:
    if not r:
        return "-"
    n = f", N = {r['num_responses']}" if r["num_responses"] else ""
    return (
        f"{r['scheme']} (K' = {r['group_inputs']}, M' = {r['group_workers']}, "
        f"G = {r['groups']}{n}, {r['deadline']})"
    )


def _work(r: dict | None) -> str:
    """Nominal evaluations per query, then measured at its sustained rate
    (evaluations and busy worker-ms per query)."""
    if not r:
        return "-"
    at = r.get("at_max") or {}
    meas = (
        f" / {at['evaluations_per_query']:.2f} / {at['busy_ms_per_query']:.1f}"
        if at
        else " / - / -"
    )
    return f"{r['work_per_query']:.2f}{meas}"


def _map(summary: dict) -> list[str]:
    tg = targets(summary)
    lines = [
        "| cell | best coded layout | work: nominal / evals / busy ms per query | "
        "q/s | best replication layout | work | q/s | coded / replication | "
        "low-rate p50: best systematic / uncoded |",
        "|" + "---|" * 9,
    ]
    for key, cell in summary["cells"].items():
        rows, t = _rows(cell), tg["cells"][key]
        c = rows.get(t["best_coded"] or "")
        r = rows.get(t["best_replication"] or "")
        lr = cell["low_rate"]
        none = f"none sustains the lowest rate ({cell['grid'][0]:.0f} q/s)"
        cl = _layout(c) if t["coded_rate"] > 0 else none
        rl = _layout(r) if t["replication_rate"] > 0 else none
        lines.append(
            f"| {key} | {cl} | {_work(c)} | {t['coded_rate']:.0f} | "
            f"{rl} | {_work(r)} | {t['replication_rate']:.0f} | "
            f"{_f(t['ratio'], '.2f')} | {_f(lr['systematic_p50_ms'])} / "
            f"{_f(lr['uncoded_p50_ms'])} ms = {_f(lr['ratio'], '.2f')} |"
        )
    lines += [
        "",
        f"Cells with M in {{{', '.join(map(str, TARGET_WORKERS))}}}: the best coded "
        f"layout sustains at least the best replication layout's rate in "
        f"{tg['coded_at_least_replication']} of {tg['judged_cells']}, at least 1.5x "
        f"in {tg['coded_at_least_1.5x']}.",
    ]
    return lines


def _cell(key: str, cell: dict, tgt: float) -> list[str]:
    lines = [
        f"### {key} (E[T] = {cell['mean_service_ms']:.1f} ms per evaluation; "
        f"{cell['simulations']} simulations, {cell['seconds']:.0f} s)",
        "",
        "| family | best layout | work / query | decoded error (fraction decoded) "
        f"| max q/s (p99 <= {tgt:g} ms) | p50 / p99 ms there | evals / busy ms "
        "per query there | layouts / accuracy measured / failed / unmeasured "
        "above |",
        "|" + "---|" * 8,
    ]
    for fam, v in cell["families"].items():
        counts = (
            f"{v['layouts']} / {v['accuracy_measured']} / {len(v['failed'])} / "
            f"{v['capped']}"
        )
        if not v["best"]:
            why = v["failed"][0]["reason"] if v["failed"] else "none measured"
            lines.append(f"| {fam} | none within the target ({why}) | - | - | - | "
                         f"- | - | {counts} |")  # fmt: skip
            continue
        for r in v["best"]:
            at = r.get("at_max") or {}
            lat = at.get("latency_ms", {})
            frac = r["decoded_fraction"]
            lines.append(
                f"| {fam} | {_layout(r)} | {r['work_per_query']:.2f} | "
                f"{_f(r['error'], '.3g')} ({_f(frac, '.2f')}) | {r['bound']} | "
                f"{_f(lat.get('50'))} / {_f(lat.get('99'))} | "
                f"{_f(at.get('evaluations_per_query'), '.2f')} / "
                f"{_f(at.get('busy_ms_per_query'))} | {counts} |"
            )
    grid = cell["grid"]
    lines += ["", "p99 ms against offered load (q/s; the screening's arrivals; "
              "'-' past saturation):", "",
              "| layout | " + " | ".join(f"{r:.0f}" for r in grid) + " |",
              "|" + "---|" * (len(grid) + 1)]  # fmt: skip
    for name, c in cell["curves"].items():
        ps = c["p99_ms"] + [math.nan] * (len(grid) - len(c["p99_ms"]))
        row = " | ".join(_f(p, ".0f") for p in ps)
        lines.append(f"| {c['role']}: {name} | {row} |")
    lines.append("")
    return lines


def format_tables(summary: dict) -> str:
    cfg = summary["config"]
    tgt = 1e3 * cfg["p99_target"]
    fixed = "/".join(f"{1e3 * g:g}" for g in cfg["group_deadlines"])
    lines = [
        f"Layouts of M workers as G groups of (K', M'), K' in "
        f"{{{', '.join(map(str, cfg['group_inputs']))}}}, bf16 linear workers "
        f"(F = {cfg['num_features']}); group deadline the rate's fill time "
        f"(FillDeadline){f' or {fixed} ms' if fixed else ''}; dispatch on arrival, "
        f"per-query answers; screening on {cfg['screen_queries']} and bisection on "
        f"{cfg['num_queries']} Poisson queries per point (first "
        f"{100 * cfg['warmup']:g}% left out), p99 target {tgt:g} ms; uncoded bf16 "
        f"error per query (median) {summary['baseline_error']:.3g}, accuracy "
        f"target {cfg['error_factor']:g}x that for the queries a decode answers. "
        f"Work: evaluations of f per query, nominal (M' x service scale / K') and "
        f"measured at the sustained rate (evaluations begun, busy worker-ms).",
        "",
        "Largest sustained rate (queries/s) under the p99 target:",
        "",
        *_map(summary),
        "",
    ]
    for key, cell in summary["cells"].items():
        lines += _cell(key, cell, tgt)
    lines += _checks(summary)
    return "\n".join(lines)


def _checks(summary: dict) -> list[str]:
    cfg = summary["config"]
    lines = [
        f"Thread cluster against the simulator ({cfg['check_delay']}, M = "
        f"{cfg['check_workers']}; one group of the layout at its rate over G, which "
        f"alone sees Poisson arrivals, burstier than its round-robin share in the "
        f"layout; the simulator on the thread run's own arrival times, with the "
        f"same dispatch, per-query answers and deadline):",
        "",
        "| layout | rate q/s | queries | threads p50 / p99 ms | simulator p50 / p99 "
        "ms | ratio p50 / p99 | GC pauses (longest ms) | load |",
        "|" + "---|" * 8,
    ]
    if "error" in summary["threads"]:
        lines.append(f"| failed: {summary['threads']['error']} ||||||||")
    for v in summary["threads"].values():
        if not isinstance(v, dict):
            continue
        a, b, r = v["threads_ms"], v["simulator_ms"], v["ratio"]
        lines.append(
            f"| {v['layout']} | {v['rate']:.0f} | {v['queries']} | {a['50']:.2f} / "
            f"{a['99']:.2f} | {b['50']:.2f} / {b['99']:.2f} | {r['50']:.3f} / "
            f"{r['99']:.3f} | {_gc(v)} | {v['loadavg'][0]:.1f}-{v['loadavg'][1]:.1f} |"
        )
    nl = summary["noloss"]
    lines.append("")
    if "skipped" in nl or "error" in nl:
        why = nl.get("skipped") or f"failed: {nl['error']}"
        lines.append(f"No-loss run {'skipped: ' if 'skipped' in nl else ''}{why}.")
        return lines
    lines.append(
        f"No loss ({nl['layout']}, one group on the thread cluster, {nl['rate']:.0f} "
        f"q/s, faults {'/'.join(nl['faults']['kinds'])} p = {nl['faults']['prob']:g} "
        f"per worker, at most {nl['faults']['max_faulty']} per group, policy deadline "
        f"{1e3 * nl['policy_deadline']:g} ms): submitted {nl['submitted']}, answered "
        f"{nl['answered']} (ok {nl['ok']}), errors {nl['errors']}, rejected "
        f"{nl['rejected']}, lost {nl['lost']}; statuses {nl['statuses']}; p50 / p99 "
        f"{nl['latency_ms']['50']:.1f} / {nl['latency_ms']['99']:.1f} ms; decoded "
        f"error median {nl['query_error_median']:.3g}; garbage collections "
        f"{_gc(nl)} (the sweep's heap frozen); {nl['seconds']:.0f} s."
    )
    return lines


def _gc(run: dict) -> str:
    """``"n (longest ms)"`` of a thread run's collections (``runkit.quiet_gc``)."""
    g = run.get("gc")
    if not g:  # a summary written before the count was kept
        return "-"
    return f"{g['collections']} ({g['longest_ms']:.1f})"


def plot_p99(summary: dict, path: Path) -> Path | None:
    """p99 against offered load, one panel per cell (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:  # pragma: no cover - matplotlib is a dev dependency
        return None
    cells = list(summary["cells"].values())
    cols = min(3, len(cells))
    rows = -(-len(cells) // cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(5.0 * cols, 3.8 * rows))  # fmt: skip
    for ax in axes.flat[len(cells) :]:
        ax.set_visible(False)
    tgt = 1e3 * summary["config"]["p99_target"]
    styles = {"best coded": "-", "best systematic": "-.", "best replication": "--",
              "uncoded": ":"}  # fmt: skip
    for j, cell in enumerate(cells):
        ax = axes.flat[j]
        for name, c in cell["curves"].items():
            r = cell["grid"][: len(c["p99_ms"])]
            ax.plot(r, c["p99_ms"], styles.get(c["role"], "-"), marker=".",
                    label=f"{c['role']}: {name}")  # fmt: skip
        ax.axhline(tgt, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # the grid's rates span about one decade: label every third one, plainly
        ax.set_xticks(cell["grid"][::3], [f"{r:.0f}" for r in cell["grid"][::3]])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{cell['delay']}, M = {cell['num_workers']}", fontsize=9)
        ax.set_xlabel("offered load (queries/s)", fontsize=8)
        ax.set_ylabel("p99 latency (ms)", fontsize=8)
        ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_outputs(summary: dict, out: str | Path) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary["targets"] = targets(summary)
    plot = plot_p99(summary, out / "p99_vs_load.png")
    summary["plot"] = None if plot is None else plot.name
    write_summary(out / "summary.json", summary)
    (out / "report.md").write_text(format_tables(summary) + "\n")
    return summary
