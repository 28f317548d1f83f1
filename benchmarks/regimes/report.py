"""The regime map's report: winners per cell, the tables, the winner-map plots."""

from __future__ import annotations

import math
from pathlib import Path

from runkit import fmt, write_summary
from runkit.choice import ranked

__all__ = ["format_report", "plot_maps", "winners"]

#: the rows that are not coded (every other scheme of the map is)
_BASELINES = ("uncoded", "replication")


def _p99(row):
    return row["latency_ms"][99]


def _meets(row) -> bool:
    return bool(row["applies"] and row["meets_target"])


def winners(summary: dict) -> list[dict]:
    """One entry per cell: the shared rule's choice (:func:`runkit.choice.choose`:
    the lowest per-query p99 among the rows meeting the accuracy target, then the
    least work per query), its layout, its ratio to the runner-up, and
    replication's p99 over the best coded scheme's (> 1: coding is faster at equal
    workers and equal accuracy)."""
    out = []
    for cell in summary["cells"]:
        for wl, block in cell["workloads"].items():
            ok = ranked(block["rows"], p99=_p99, meets=_meets)
            rep = next((r for r in ok if r["scheme"] == "replication"), None)
            coded = [r for r in ok if r["scheme"] not in _BASELINES]
            best = ok[0] if ok else None
            out.append(
                {
                    "workload": wl,
                    "straggler": cell["straggler"],
                    "K": cell["K"],
                    "M": cell["M"],
                    "ratio": cell["M"] / cell["K"],
                    "winner": best["scheme"] if best else None,
                    "winner_layout": best.get("layout") if best else None,
                    "winner_n": best.get("n") if best else None,
                    "winner_work": best.get("work_per_query") if best else None,
                    "winner_p99_ms": _p99(best) if best else math.nan,
                    "runner_up": ok[1]["scheme"] if len(ok) > 1 else None,
                    "margin": _p99(ok[1]) / _p99(best) if len(ok) > 1 else math.nan,
                    "best_coded": coded[0]["scheme"] if coded else None,
                    "replication_over_coded": (
                        _p99(rep) / _p99(coded[0]) if rep and coded else math.nan
                    ),
                }
            )
    return out


def _cell_table(cell, wl, block) -> list[str]:
    head = (
        f"#### {wl} (degree {block['degree'] or 'none'}), K = {cell['K']}, "
        f"M = {cell['M']}, {cell['straggler']}: target error <= "
        f"{block['target']:.2e}"
    )
    lines = [
        head,
        "",
        "| scheme | best layout | N | evals / worker | work / query | p50 ms | "
        "p99 ms | p99.9 ms | request p99 ms | error median | error p99 | "
        "meets target | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in block["rows"]:
        if not r["applies"]:
            lines.append(f"| {r['scheme']} |" + " |" * 11 + f" {r['reason']} |")
            continue
        lt = r["latency_ms"]
        lines.append(
            f"| {r['scheme']} | {r['layout']} | "
            f"{r['n'] if r['n'] is not None else 'first'} | "
            f"{r['service_scale']:g} | "
            f"{r['work_per_query']:g} | {lt[50]:.1f} | {lt[99]:.1f} | "
            f"{lt[99.9]:.1f} | {r['request_ms'][99]:.1f} | "
            f"{fmt(r['error_median'], '.2e')} | {fmt(r['error_p99'], '.2e')} | "
            f"{'yes' if r['meets_target'] else 'no'} | {r['note']} |"
        )
    return lines + [""]


def format_report(summary: dict) -> str:
    """Markdown: the winner map as tables, then every cell's rows."""
    cfg = summary["config"]
    ws = winners(summary)
    lines = [
        "# Regime map: when coding beats replication at equal workers",
        "",
        f"Simulator (`simulate_latency`, zero engine overhead, idle workers), "
        f"{cfg['num_requests']} requests per cell, the first "
        f"{cfg['error_requests']} decoded on real payloads (bf16 workers, float32 "
        f"decoding, error relative to the float64 truth). Each scheme is searched "
        f"over its layouts (`runkit.choice`: its systematic variant, K' = K and "
        f"K/2 queries per group, M' the most workers a group may have, G = M // M' "
        f"groups serving the K queries together) and its N grid. Latency is per "
        f"query (each query answered at its own worker's answer or at the decode "
        f"that gives it; percentiles over every query; 'request p99' waits for the "
        f"request's last query); evals / worker = the real evaluations of f a worker "
        f"serves per request (its service scale: the circle code's complex query "
        f"costs 2), work / query = M' x that / K'. Accuracy "
        f"target: median error at most {cfg['error_factor']}x an uncoded bf16 "
        f"worker's. Each scheme's row is its layout and N with the lowest p99 "
        f"meeting the target (ties: less work per query); the winner is the "
        f"lowest of those (`runkit.choice.choose`, the rule `theory.plan` uses); "
        f"margin = runner-up p99 / winner p99; rep/coded = replication's p99 / "
        f"the best coded scheme's (> 1: coding wins).",
        "",
    ]
    for wl in cfg["workloads"]:
        for st in cfg["stragglers"]:
            sel = [w for w in ws if w["workload"] == wl and w["straggler"] == st]
            lines += [
                f"### {wl}, {st}",
                "",
                "| K | M/K | M | winner: layout (N) | work / query | p99 ms | "
                "margin | runner-up | rep/coded |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for w in sel:
                n = f" (N = {w['winner_n']})" if w["winner_n"] is not None else ""
                lay = w.get("winner_layout") or w["winner"]
                lines.append(
                    f"| {w['K']} | {w['ratio']:g} | {w['M']} | {lay}{n} | "
                    f"{fmt(w.get('winner_work'), 'g')} | "
                    f"{fmt(w['winner_p99_ms'], '.1f')} | {fmt(w['margin'], '.2f')} | "
                    f"{w['runner_up']} | {fmt(w['replication_over_coded'], '.2f')} |"
                )
            lines.append("")
    if summary.get("master_overhead"):
        lines += [
            "## Layer-wise coding: the master's measured work",
            "",
            "Every round's encode, decode and master step on `PipelineServer` "
            "(wall clock, this machine), median per request; the map's "
            "layer-wise p99 excludes it, as every scheme's excludes its decode.",
            "",
            "| K | M | workload | rounds | master ms / request | ms / round |",
            "|---|---|---|---|---|---|",
        ]
        for c in summary["master_overhead"]:
            runs = f" (median of {c['runs']} runs)" if c.get("runs", 1) > 1 else ""
            lines.append(
                f"| {c['K']} | {c['M']} | {c['workload']} | {c['rounds']} | "
                f"{c['master_ms_median']:.2f}{runs} | "
                f"{c['master_ms_per_round']:.2f} |"
            )
        lines.append("")
    if summary.get("spot_check"):
        lines += [
            "## Thread cluster against the simulator (K = 8)",
            "",
            "| straggler | M | workload | scheme (N) | requests | thread p50 | "
            "sim p50 | thread p99 | sim p99 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in summary["spot_check"]:
            t, s = c["thread_ms"], c["simulator_ms"]
            n = f" ({c['n']})" if c["n"] else ""
            lines.append(
                f"| {c['straggler']} | {c['M']} | {c['workload']} | {c['scheme']}{n} "
                f"| {c['requests']} | {t[50]:.1f} | {s[50]:.1f} | {t[99]:.1f} | "
                f"{s[99]:.1f} |"
            )
        lines.append("")
    lines += ["## Every cell", ""]
    for cell in summary["cells"]:
        for wl, block in cell["workloads"].items():
            lines += _cell_table(cell, wl, block)
    return "\n".join(lines)


def plot_maps(summary: dict, out: Path) -> list[str]:
    """One PNG per (workload, straggler model): the K x M/K grid coloured by the
    winner, with its margin over the runner-up."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = summary["config"]
    ws = winners(summary)
    names = sorted({w["winner"] for w in ws if w["winner"]})
    colour = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}
    files = []
    ks, ratios = cfg["num_inputs"], cfg["ratios"]
    for wl in cfg["workloads"]:
        for st in cfg["stragglers"]:
            fig, ax = plt.subplots(figsize=(1.3 * len(ratios) + 1, 1.0 * len(ks) + 1))
            _draw_grid(ax, ws, wl, st, cfg, colour, _margin_label, 0.6, (7, None))
            ax.set_xlabel("M / K")
            ax.set_ylabel("K")
            ax.set_title(f"{wl}, {st}: lowest per-query p99 at the target", fontsize=8)
            fig.tight_layout()
            path = out / f"winners_{wl}_{st}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            files.append(path.name)
    files.append(_plot_overview(ws, cfg, colour, out))
    return files


def _margin_label(w) -> str:
    return f"{w['winner']}\nx{w['margin']:.2f}" if w["winner"] else "none"


def _rep_label(w) -> str:
    r = w["replication_over_coded"]
    return "-" if r != r else f"{r:.1f}"


def _draw_grid(ax, ws, wl, st, cfg, colour, label, alpha, fontsizes) -> None:
    """One (workload, straggler) map on ``ax``: the K x M/K cells coloured by their
    winner and labelled by ``label(winner entry)``; fontsizes = (cell text, ticks;
    None: matplotlib's)."""
    import matplotlib.pyplot as plt

    ks, ratios = cfg["num_inputs"], cfg["ratios"]
    text_size, tick_size = fontsizes
    tick = {} if tick_size is None else {"fontsize": tick_size}
    for w in ws:
        if w["workload"] != wl or w["straggler"] != st:
            continue
        i, j = ks.index(w["K"]), ratios.index(w["ratio"])
        c = colour.get(w["winner"], (0.9, 0.9, 0.9, 1))
        ax.add_patch(plt.Rectangle((j, i), 1, 1, color=c, alpha=alpha))
        ax.text(
            j + 0.5, i + 0.5, label(w), ha="center", va="center", fontsize=text_size
        )
    ax.set_xlim(0, len(ratios))
    ax.set_ylim(0, len(ks))
    ax.set_xticks(
        [j + 0.5 for j in range(len(ratios))], [f"{r:g}" for r in ratios], **tick
    )
    ax.set_yticks([i + 0.5 for i in range(len(ks))], [str(k) for k in ks], **tick)


def write_outputs(summary: dict, out) -> None:
    """``out/summary.json`` (strict JSON), ``report.md`` and the winner maps (their
    file names in ``summary["plots"]``)."""
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    summary["plots"] = plot_maps(summary, path)
    write_summary(path / "summary.json", summary)
    (path / "report.md").write_text(format_report(summary) + "\n")


def _plot_overview(ws, cfg, colour, out: Path) -> str:
    """``winners.png``: every map on one page, a row per workload and a column per
    straggler model; each cell coloured by its winner and labelled with
    replication's p99 over the best coded scheme's (above 1: coding wins)."""
    import matplotlib.pyplot as plt

    wls, sts, ks = cfg["workloads"], cfg["stragglers"], cfg["num_inputs"]
    fig, axes = plt.subplots(
        len(wls),
        len(sts),
        figsize=(2.6 * len(sts) + 1.2, 0.55 * len(ks) * len(wls) + 1.6),
        squeeze=False,
    )
    for a, wl in enumerate(wls):
        for b, st in enumerate(sts):
            ax = axes[a][b]
            _draw_grid(ax, ws, wl, st, cfg, colour, _rep_label, 0.7, (6, 6))
            if a == 0:
                ax.set_title(st, fontsize=8)
            if b == 0:
                ax.set_ylabel(f"{wl}\nK", fontsize=7)
            if a == len(wls) - 1:
                ax.set_xlabel("M / K", fontsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.7) for c in colour.values()]
    fig.legend(handles, list(colour), loc="lower center", ncol=len(colour), fontsize=7)
    fig.suptitle(
        "Lowest per-query p99 at the accuracy target over every layout (colour); "
        "replication's p99 over the "
        "best coded scheme's (number)",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    path = out / "winners.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path.name
