"""The load benchmark's tables, ``report.md``, ``summary.json`` and the p99 plot."""

from __future__ import annotations

import math
from pathlib import Path

from runkit import fmt, write_summary

__all__ = ["format_tables", "plot_p99", "targets", "write_outputs"]


def _f(v, spec: str = ".1f") -> str:
    return fmt(v, spec, missing="-")


def targets(summary: dict) -> dict:
    """Per cell: the best coded and the best replication layout by sustained
    rate (coded schemes within the accuracy target only), and their ratio."""
    out = {}
    for key, cell in summary["cells"].items():
        rows = cell["schemes"]

        def best(family, rows=rows):
            names = [
                n
                for n, v in rows.items()
                if v["family"] == family and v["applies"] and v["accurate"]
            ]
            if not names:
                return None, 0.0
            n = max(names, key=lambda n: rows[n]["max_rate"])
            return n, rows[n]["max_rate"]

        c, rc = best("coded")
        r, rr = best("replication")
        u = rows["uncoded"]["max_rate"]
        ratio = rc / rr if rr > 0 else (math.inf if rc > 0 else math.nan)
        out[key] = {
            "best_coded": c,
            "coded_rate": rc,
            "best_replication": r,
            "replication_rate": rr,
            "uncoded_rate": u,
            "ratio": ratio,
        }
    return out


def format_tables(summary: dict) -> str:
    cfg = summary["config"]
    tgt = 1e3 * cfg["p99_target"]
    lines = [
        f"K = {cfg['num_inputs']}, bf16 linear workers (F = {cfg['num_features']}), "
        f"group deadlines {'/'.join(f'{1e3 * g:g}' for g in cfg['group_deadlines'])}"
        f" ms (the best per scheme), {cfg['num_queries']} "
        f"Poisson queries per point (first {100 * cfg['warmup']:g}% left out), "
        f"p99 target {tgt:g} ms; uncoded bf16 error (median) "
        f"{summary['baseline_error']:.3g}, accuracy target "
        f"{cfg['error_factor']:g}x that.",
        "",
    ]
    for key, cell in summary["cells"].items():
        grid = cell["grid"]
        lines.append(f"### {key} (E[T] = {cell['mean_service_ms']:.1f} ms per "
                     f"evaluation)")  # fmt: skip
        lines.append("")
        lines.append(
            f"| scheme | workers | N | error median | accurate | group deadline ms "
            f"| max rate q/s (p99 <= {tgt:g} ms) | evals / busy ms per query at "
            f"{grid[0]:.0f} q/s | p50 / p99 / p99.9 ms at {grid[0]:.0f} q/s | "
            f"the same at its highest grid rate under the target |"
        )
        lines.append("|" + "---|" * 10)
        for name, v in cell["schemes"].items():
            if not v["applies"]:
                lines.append(
                    f"| {name} | {v['workers_used']} | {v['num_responses'] or '-'} | "
                    f"{_f(v['error_median'], '.3g')} | no | - | - | - | "
                    f"not swept: {v['reason']} | - |"
                )
                continue
            p0 = v["curve"][0]
            lat = p0["latency_ms"]
            under = [p for p in v["curve"] if p["latency_ms"]["99"] <= tgt]
            if under:
                u = under[-1]["latency_ms"]
                at = (f"{_f(u['50'])} / {_f(u['99'])} / {_f(u['99.9'])} at "
                      f"{under[-1]['rate']:.0f} q/s")  # fmt: skip
            else:
                at = "-"
            lines.append(
                f"| {name} | {v['workers_used']} | {v['num_responses'] or '-'} | "
                f"{_f(v['error_median'], '.3g')} | "
                f"{'yes' if v['accurate'] else 'no'} | "
                f"{_f(1e3 * v['group_deadline'], 'g')} | {v['bound']} | "
                f"{p0['evaluations_per_query']:.2f} / {p0['busy_ms_per_query']:.1f} | "
                f"{_f(lat['50'])} / {_f(lat['99'])} / {_f(lat['99.9'])} | {at} |"
            )
        lines.append("")
        lines.append("p99 ms against offered load (q/s); '-' past saturation:")
        lines.append("")
        lines.append("| scheme | " + " | ".join(f"{r:.0f}" for r in grid) + " |")
        lines.append("|" + "---|" * (len(grid) + 1))
        for name, v in cell["schemes"].items():
            if not v["applies"]:
                continue
            ps = [p["latency_ms"]["99"] for p in v["curve"]]
            ps += [math.nan] * (len(grid) - len(ps))
            lines.append(f"| {name} | " + " | ".join(_f(p, ".0f") for p in ps) + " |")
        lines.append("")
    lines.append("Best coded against best replication, sustained rate under the p99 "
                 "target (coded within the accuracy target):")  # fmt: skip
    lines.append("")
    lines.append("| cell | best coded | q/s | best replication | q/s | uncoded q/s | "
                 "coded / replication |")  # fmt: skip
    lines.append("|" + "---|" * 7)
    for key, t in targets(summary).items():
        lines.append(
            f"| {key} | {t['best_coded'] or '-'} | {t['coded_rate']:.0f} | "
            f"{t['best_replication'] or '-'} | {t['replication_rate']:.0f} | "
            f"{t['uncoded_rate']:.0f} | {_f(t['ratio'], '.2f')} |"
        )
    lines.append("")
    th = summary["threads"]
    lines.append(f"Thread cluster against the simulator ({cfg['check_delay']}, "
                 f"M = {cfg['check_workers']}; the simulator on the thread run's "
                 f"own arrival times):")  # fmt: skip
    lines.append("")
    lines.append(
        "| scheme | rate q/s | queries | threads p50 / p99 ms | simulator p50 / p99 "
        "ms | ratio p50 / p99 | groups threads / sim | load |"
    )
    lines.append("|" + "---|" * 8)
    for v in th.values():
        a, b, r = v["threads_ms"], v["simulator_ms"], v["ratio"]
        lines.append(
            f"| {v['scheme']} | {v['rate']:.0f} | {v['queries']} | {a['50']:.2f} / "
            f"{a['99']:.2f} | {b['50']:.2f} / {b['99']:.2f} | {r['50']:.3f} / "
            f"{r['99']:.3f} | {v['groups'][0]} / {v['groups'][1]} | "
            f"{v['loadavg'][0]:.1f}-{v['loadavg'][1]:.1f} |"
        )
    nl = summary["noloss"]
    lines.append("")
    lines.append(
        f"No loss ({nl['scheme']}, thread cluster, {nl['rate']:.0f} q/s, faults "
        f"{'/'.join(nl['faults']['kinds'])} p = {nl['faults']['prob']:g} per worker, "
        f"at most {nl['faults']['max_faulty']} per group, policy deadline "
        f"{1e3 * nl['policy_deadline']:g} ms): submitted {nl['submitted']}, answered "
        f"{nl['answered']} (ok {nl['ok']}), errors {nl['errors']}, rejected "
        f"{nl['rejected']}, lost {nl['lost']}; statuses {nl['statuses']}; p50 / p99 "
        f"{nl['latency_ms']['50']:.1f} / {nl['latency_ms']['99']:.1f} ms; decoded "
        f"error median {nl['query_error_median']:.3g}; {nl['seconds']:.0f} s."
    )
    return "\n".join(lines)


def plot_p99(summary: dict, path: Path) -> Path | None:
    """p99 against offered load, one panel per cell (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dev dependency
        return None
    cells = list(summary["cells"].values())
    cols = min(2, len(cells))
    rows = -(-len(cells) // cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(6.0 * cols, 4.2 * rows))  # fmt: skip
    for ax in axes.flat[len(cells) :]:
        ax.set_visible(False)
    tgt = 1e3 * summary["config"]["p99_target"]
    for j, cell in enumerate(cells):
        ax = axes.flat[j]
        for name, v in cell["schemes"].items():
            if not v["applies"]:
                continue
            r = [p["rate"] for p in v["curve"]]
            p = [p["latency_ms"]["99"] for p in v["curve"]]
            style = {"coded": "-", "replication": "--", "uncoded": ":"}[v["family"]]
            ax.plot(r, p, style, marker=".", label=name)
        ax.axhline(tgt, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{cell['delay']}, M = {cell['num_workers']}", fontsize=9)
        ax.set_xlabel("offered load (queries/s)", fontsize=8)
        ax.set_ylabel("p99 latency (ms)", fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
