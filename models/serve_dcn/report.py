"""The serving run's table, latency-accuracy plot and ``report.md``."""

from __future__ import annotations

from pathlib import Path

from runkit import write_summary

__all__ = ["format_table", "write_outputs"]


def format_table(summary: dict) -> str:
    """The report's table: one line per scheme."""
    ref = summary["float32_model"]
    rows = summary["schemes"]
    load = [v["loadavg"] for v in rows.values()]
    lines = [
        f"Adult test set, {summary['queries']} queries in groups of "
        f"{summary['config']['num_inputs']}, bf16 workers on the thread cluster "
        f"(load average {min(load):.1f}-{max(load):.1f} on {summary['cpu_count']} "
        f"CPUs). Float32 model: AUC {ref['auc']:.4f}, logloss {ref['logloss']:.4f}. "
        f"Adaptive budget (predicted absolute logit error): "
        f"{summary['adaptive_budget']:.3g}. `ok`: the share of groups decoded "
        f"whole; `answered`: of queries answered (a query is answered where both "
        f"branches give it: replication per replica, the other codes with their "
        f"group; an unanswered one is logit 0, p = 1/2).",
        "",
        "| scheme | AUC | logloss | logit rel err median | p95 | p50 ms | p99 ms | "
        "p99.9 ms | answers used | ok | answered |",
        "|" + "---|" * 11,
    ]
    for name, v in rows.items():
        lat = v["latency_ms"]
        lines.append(
            f"| {name} | {v['auc']:.4f} | {v['logloss']:.4f} | "
            f"{v['logit_rel_err_median']:.2e} | {v['logit_rel_err_p95']:.2e} | "
            f"{lat[50]:.1f} | {lat[99]:.1f} | {lat[99.9]:.1f} | "
            f"{v['num_used_median']:.0f} | {v['ok_fraction']:.3f} | "
            f"{v.get('answered_fraction', v['ok_fraction']):.3f} |"
        )
    return "\n".join(lines)


def _plot(summary: dict, out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    markers = "osD^v<>phX*"
    for i, (name, v) in enumerate(summary["schemes"].items()):
        ax.scatter(v["latency_ms"][99], v["logloss"], s=36, marker=markers[i % 11],
                   label=name)  # fmt: skip
    ax.axhline(summary["float32_model"]["logloss"], color="gray", lw=0.8, ls="--",
               label="float32 model, no stragglers")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("p99 latency (ms, thread cluster)")
    ax.set_ylabel("test logloss")
    ax.set_title("Serving DCNv2 on Adult: latency against accuracy")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path = out / "latency_vs_logloss.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path.name


def write_outputs(summary: dict, out) -> None:
    """``summary.json``, ``report.md`` and ``latency_vs_logloss.png`` in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot = _plot(summary, out)
    write_summary(out / "summary.json", summary)
    text = "# Serving the coded DCNv2\n\n" + format_table(summary) + "\n"
    if plot:
        text += f"\n![p99 latency against logloss]({plot})\n"
    (out / "report.md").write_text(text)
