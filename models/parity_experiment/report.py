"""The degraded-mode experiment's table, plot, ``summary.json`` and ``report.md``."""

from __future__ import annotations

from pathlib import Path

from runkit import fmt, write_summary

__all__ = ["metric_of", "table", "write_outputs"]

SCHEMES = (("base", "base model"), ("parm_degraded", "ParM degraded"),
           ("parm_masks", "ParM, same masks"), ("bacc", "BACC"),
           ("nercc", "NeRCC"))  # fmt: skip


def metric_of(row: dict, scheme: str) -> str:
    m = row[scheme]
    if "top1" in m:
        return fmt(m["top1"], ".4f")
    return f"{fmt(m['auc'], '.4f')} / {fmt(m['logloss'], '.4f')}"


def _shares(m: dict) -> str:
    """``answered a% (exact e%), whole w% (exact x%)`` of a ParM-on-masks cell."""
    ex = m["exact"]
    return (
        f"{100 * m['answered']:.3g}% ({100 * ex['answered']:.3g}%) / "
        f"{100 * m['whole']:.3g}% ({100 * ex['whole']:.3g}%)"
    )


def table(rows: list[dict]) -> str:
    """One line per (model, k): the metric of each scheme (top-1 for MNIST, AUC /
    logloss for the Adult DCNv2), and ParM's shares of queries answered and of
    requests whole on BACC's masks."""
    lines = [
        "| model (metric) | k | M = K + K/k | lost answers | base model | "
        "ParM degraded | ParM, same masks (per-group decoding) | queries answered "
        "/ requests whole (exact) | BACC | NeRCC (lambda_e, lambda_d) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        what = "AUC / logloss" if r["model"] == "dcn" else "top-1"
        lam = ", ".join(fmt(v, "g") for v in r["nercc_smoothing"])
        pm = r.get("parm_masks")
        same = "-" if pm is None else metric_of(r, "parm_masks")
        shares = "-" if pm is None else _shares(pm)
        lines.append(
            f"| {r['model']} ({what}) | {r['group']} | {r['M']} | {r['lost']} | "
            f"{metric_of(r, 'base')} | {metric_of(r, 'parm_degraded')} | {same} | "
            f"{shares} | {metric_of(r, 'bacc')} | {metric_of(r, 'nercc')} ({lam}) |"
        )
    return "\n".join(lines)


def _plot(rows: list[dict], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4))
    axes = [axes] if len(models) == 1 else list(axes)
    for ax, name in zip(axes, models, strict=True):
        sub = [r for r in rows if r["model"] == name]
        key = "auc" if name == "dcn" else "top1"
        ks = [r["group"] for r in sub]
        for scheme, label in SCHEMES:
            if all(scheme in r for r in sub):
                ax.plot(ks, [r[scheme][key] for r in sub], marker="o", label=label)
        ax.set_xticks(ks)
        ax.set_xlabel("k (queries per parity), M = K + K/k")
        ax.set_ylabel("test AUC" if key == "auc" else "test top-1")
        ax.set_title({"dcn": "Adult DCNv2"}.get(name, f"MNIST {name}"))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(out, result: dict, config: dict, command: str, env: dict) -> str:
    """``summary.json`` (strict JSON), ``report.md`` and ``degraded.png`` in
    ``out``; returns the report's text."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"config": config, "command": command, "environment": env, **result}
    write_summary(out / "summary.json", summary)
    plot = _plot(result["rows"], out / "degraded.png")
    k = config["num_inputs"]
    text = "\n".join([
        "# Degraded mode: learned parity models (ParM) against BACC and NeRCC",
        "",
        f"Command: `{command}` ({result['seconds']:.0f} s)",
        "",
        f"K = {k} queries, M = K + K/k workers for every scheme. ParM degraded: one "
        "answer of every group lost, the accuracy of the rebuilt predictions (every "
        "test query rebuilt once from its group's parity, codedjax.parity_code). "
        f"BACC and NeRCC: the same K/k answers lost at random ({config['test_masks']}"
        " patterns, the mean over them), every prediction decoded from the base "
        "model's answers on the coded queries. ParM, same masks: ParM on those "
        "patterns with per-group decoding (each parity group decodes on its own; "
        "a query is answered when its base worker answered, or its group lost only "
        "it and its parity worker answered); an unanswered query is a miss (top-1) "
        "or logit 0 (AUC, logloss); next to it the shares of queries answered and "
        "of requests with every query answered, on the patterns and (in brackets) "
        "exactly over every pattern of K/k lost answers. Base model: the model "
        "itself on the same test queries.",
        "",
        table(result["rows"]),
        "",
        "Parity models (validation MSE of F_P(sum of k queries) against the sum of "
        "the base outputs):",
        "",
        "| parity model | steps | batch | validation MSE | train seconds |",
        "|---|---|---|---|---|",
        *[
            f"| {name} | {p['config']['steps']} | {p['config']['batch_size']} | "
            f"{fmt(p['val_mse'], '.4g')} | {fmt(p['train_seconds'], '.1f')} |"
            for name, p in result["parity_models"].items()
        ],
        "",
        f"Plot: {plot.name if plot else '(matplotlib missing: no plot)'}",
        "",
    ])  # fmt: skip
    (out / "report.md").write_text(text)
    return text
