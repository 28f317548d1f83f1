"""The coded DCNv2 run's targets, tables, plots and ``report.md``."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import runkit
from runkit import fmt

__all__ = ["format_table", "targets", "write_outputs"]

_POLY = ("chebyls+repapprox", "threshold+repapprox")


def _row(summary, scheme, n):
    for row in summary["coded"]:
        if row["scheme"] == scheme and row["N"] == n:
            return row
    return None


def _target(value, limit) -> dict[str, Any]:
    return {"value": value, "limit": limit, "met": value <= limit}


def _threshold_ratios(summary) -> dict[str, dict[str, float]]:
    ratios = {}
    for n in sorted({row["N"] for row in summary["coded"] if row["N"] >= 24}):
        a, b = (_row(summary, s, n) for s in _POLY)
        if a is not None and b is not None:
            ratios[str(n)] = {
                "median_err_ratio": (
                    b["logit_rel_err_median"] / a["logit_rel_err_median"]
                ),
                "p95_err_ratio": b["logit_rel_err_p95"] / a["logit_rel_err_p95"],
                "auc_gap": a["auc"] - b["auc"],
                "logloss_gap": b["logloss"] - a["logloss"],
            }
    return ratios


def targets(summary) -> dict[str, Any]:
    """The seed paper's targets, each with the measured value and whether it is met."""
    u, ub = summary["uncoded"], summary["uncoded_bf16"]
    d = summary["config"]["num_coeffs"]
    out: dict[str, Any] = {}
    r30 = _row(summary, "chebyls+repapprox", 30)
    if r30 is not None:
        err = r30["logit_rel_err_median"]
        out["chebyls_N30_auc_within_1e-3"] = _target(abs(r30["auc"] - u["auc"]), 1e-3)
        out["chebyls_N30_logloss_within_5e-3"] = _target(
            abs(r30["logloss"] - u["logloss"]), 5e-3
        )
        lim = 1.5 * ub["logit_rel_err_median"]
        out["chebyls_N30_median_err_le_1.5x_bf16"] = _target(err, lim)
        # the stricter reference: the uncoded bf16 branches summed in float32
        ubb = summary.get("uncoded_bf16_branches")
        if ubb is not None:
            lim = 1.5 * ubb["logit_rel_err_median"]
            out["chebyls_N30_median_err_le_1.5x_bf16_branches"] = _target(err, lim)
    r40 = _row(summary, "chebyls+repapprox", 40)
    if r40 is not None:
        out["chebyls_N40_auc_within_2e-4"] = _target(abs(r40["auc"] - u["auc"]), 2e-4)
    ratios = _threshold_ratios(summary)
    if ratios:
        worst = min(v["median_err_ratio"] for v in ratios.values())
        out["threshold_worse_for_N_ge_24"] = {
            "value": worst,
            "limit": 2.0,
            "met": worst >= 2.0,
            "meaning": "smallest ratio (threshold / ChebyLS) of the median logit "
            "error over N >= 24; 'clearly worse' = at least 2x",
            "per_N": ratios,
        }
    diff, row = summary.get("rel_diff_at_threshold"), _row(summary, _POLY[0], d)
    if diff is not None and row is not None:
        # at N = D both decoders solve the same square system: their logits agree
        # to the solvers' rounding, at most about D cond(T_S) eps32 (median cond)
        lim = d * row["cross_cond_median"] * 2.0**-23
        out["chebyls_equals_threshold_at_N_eq_D"] = _target(diff, lim)
    return out


_TABLE_COLS = (
    ("N", "N", "d"),
    ("auc", "AUC", ".4f"),
    ("auc_diff", "dAUC", "+.1e"),
    ("logloss", "logloss", ".4f"),
    ("logloss_std", "ll sd(R)", ".1e"),
    ("logit_rel_err_median", "err med", ".2e"),
    ("logit_rel_err_p95", "err p95", ".2e"),
    ("logit_rel_err_bf16_median", "vs bf16 med", ".2e"),
    ("logit_rel_err_bf16_p95", "vs bf16 p95", ".2e"),
    ("deep_exact_fraction", "deep exact", ".4f"),
    ("deep_exact_probability", "P(task exact)", ".4f"),
    ("deep_all_exact_fraction", "all exact", ".4f"),
    ("deep_all_exact_probability", "P(all exact)", ".4f"),
    ("deep_lost_abs_err_median", "lost deep abs err", ".2f"),
)


def _series(summary) -> dict[str, list[dict]]:
    """The rows of each scheme, in the order the schemes ran."""
    schemes = dict.fromkeys(row["scheme"] for row in summary["coded"])
    return {s: [row for row in summary["coded"] if row["scheme"] == s] for s in schemes}


def format_table(summary, *, markdown: bool = False) -> str:
    """The per-scheme tables of a summary, as plain text or Markdown."""
    lines = []
    for scheme, rows in _series(summary).items():
        cols = [
            c for c in _TABLE_COLS if any(row.get(c[0]) is not None for row in rows)
        ]
        cells = [[fmt(row.get(key), f, "-") for key, _, f in cols] for row in rows]
        head = [h for _, h, _ in cols]
        if markdown:
            lines += [f"### {scheme}", "", *runkit.md_table(head, cells)]
        else:
            widths = [
                max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)
            ]
            lines.append(f"== {scheme}")
            lines.append(
                "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))
            )
            lines += [
                "  ".join(c.rjust(w) for c, w in zip(cell, widths, strict=True))
                for cell in cells
            ]
        lines.append("")
    return "\n".join(lines)


def _plot_auc(plt, summary, series, markers, out: Path) -> str:
    u, ub = summary["uncoded"], summary["uncoded_bf16"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for s, rows in series.items():
        ns = [row["N"] for row in rows]
        ax[0].plot(ns, [row["auc"] for row in rows], marker=markers[s], label=s)
        diffs = [max(abs(row["auc_diff"]), 1e-6) for row in rows]
        ax[1].plot(ns, diffs, marker=markers[s], label=s)
    ax[0].axhline(u["auc"], color="k", ls="--", label="uncoded float32")
    ax[0].axhline(ub["auc"], color="grey", ls=":", label=f"uncoded {ub['dtype']}")
    floor = max(abs(ub["auc"] - u["auc"]), 1e-6)
    ax[1].axhline(floor, color="grey", ls=":", label=f"uncoded {ub['dtype']}")
    ax[1].axhline(1e-3, color="r", ls="-.", lw=0.8, label="1e-3")
    ax[1].set_yscale("log")
    ax[0].set_ylabel("test AUC")
    ax[1].set_ylabel("|AUC - AUC uncoded float32| (floor 1e-6)")
    for a in ax:
        a.set_xlabel("N responses")
        a.legend(fontsize=7)
    fig.suptitle("Coded DCNv2 on Adult: test AUC against N")
    fig.tight_layout()
    fig.savefig(out / "auc_vs_n.png", dpi=120)
    plt.close(fig)
    return "auc_vs_n.png"


def _plot_errors(plt, summary, series, markers, out: Path) -> str:
    ub, ubb = summary["uncoded_bf16"], summary.get("uncoded_bf16_branches")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    panels = (
        ("logit_rel_err", "against uncoded float32"),
        ("logit_rel_err_bf16", f"against uncoded {ub['dtype']}"),
    )
    for j, (key, title) in enumerate(panels):
        for s, rows in series.items():
            ns = [row["N"] for row in rows]
            med = [row[f"{key}_median"] for row in rows]
            (line,) = ax[j].plot(ns, med, marker=markers[s], label=f"{s} median")
            p95 = [row[f"{key}_p95"] for row in rows]
            ax[j].plot(
                ns, p95, ls="--", color=line.get_color(), lw=0.8, label=f"{s} p95"
            )
        ax[j].axhline(
            ub["logit_rel_err_median"],
            color="k",
            ls=":",
            label=f"uncoded {ub['dtype']} median",
        )
        if ubb is not None:
            ax[j].axhline(
                ubb["logit_rel_err_median"],
                color="grey",
                ls="-.",
                lw=0.8,
                label=f"uncoded {ub['dtype']} branches, f32 sum",
            )
        ax[j].set_yscale("log")
        ax[j].set_xlabel("N responses")
        ax[j].set_ylabel("relative L2 error of a group's K logits")
        ax[j].set_title(title)
        ax[j].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "logit_error_vs_n.png", dpi=120)
    plt.close(fig)
    return "logit_error_vs_n.png"


def _plot_deep_exact(plt, rows, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ns = [row["N"] for row in rows]
    for key, style, label in (
        ("deep_all_exact_fraction", "o", "groups all exact (measured)"),
        ("deep_all_exact_probability", "-", "P(all exact), exact formula"),
        ("deep_exact_fraction", "s", "tasks exact (measured)"),
        ("deep_exact_probability", "--", "P(task exact)"),
    ):
        ax.plot(ns, [row[key] for row in rows], style, label=label)
    ax.set_xlabel("N responses")
    ax.set_ylabel("fraction")
    ax.set_title("RepApprox Deep branch: exact recovery")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "deep_exact_vs_n.png", dpi=120)
    plt.close(fig)
    return "deep_exact_vs_n.png"


def _plots(summary, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are an optional extra
        print("matplotlib not installed: no plots written", file=sys.stderr)
        return []
    series = _series(summary)
    markers = dict(zip(series, itertools.cycle("osD^vP*X"), strict=False))
    files = [
        _plot_auc(plt, summary, series, markers, out),
        _plot_errors(plt, summary, series, markers, out),
    ]
    exact = [
        rows for rows in series.values() if rows[0]["deep_exact_fraction"] is not None
    ]
    if exact:
        files.append(_plot_deep_exact(plt, exact[0], out))
    return files


def _report_head(summary) -> list[str]:
    cfg, u, ub = summary["config"], summary["uncoded"], summary["uncoded_bf16"]
    ubb = summary["uncoded_bf16_branches"]
    mc = cfg["model"]
    return [
        "# Coded DCNv2 inference on Adult",
        "",
        f"Parallel DCNv2, L = {mc['num_cross_layers']} cross layers (Cross degree "
        f"d = {cfg['degree']}), d0 = {cfg['input_dim']}, deep {mc['deep_sizes']}; "
        f"K = {cfg['num_inputs']} queries per group, M = {cfg['num_workers']} "
        f"workers in {ub['dtype']}, D = {cfg['num_coeffs']}, RepApprox c = "
        f"{cfg['replication']} with E = {cfg['num_extra_servers']} extra Berrut-coded "
        f"servers. {cfg['num_test_queries']} test queries in {cfg['num_groups']} "
        f"groups, R = {cfg['num_repetitions']} uniform straggler patterns per group "
        "(the first N arrivals of a random arrival order; the same masks for every "
        "scheme, nested in N). AUC and logloss are means over the R repetitions; "
        "errors are the median / p95 over groups and repetitions of "
        "norm(z_group - z_ref) / norm(z_ref), the relative L2 error of a group's K "
        "logits.",
        "",
        "| model | AUC | logloss | logit error median | p95 |",
        "|---|---|---|---|---|",
        f"| uncoded float32 | {u['auc']:.4f} | {u['logloss']:.4f} | 0 | 0 |",
        f"| uncoded {ub['dtype']} | {ub['auc']:.4f} | {ub['logloss']:.4f} | "
        f"{ub['logit_rel_err_median']:.2e} | {ub['logit_rel_err_p95']:.2e} |",
        f"| uncoded {ubb['dtype']}, branches summed in float32 | {ubb['auc']:.4f} | "
        f"{ubb['logloss']:.4f} | {ubb['logit_rel_err_median']:.2e} | "
        f"{ubb['logit_rel_err_p95']:.2e} |",
        "",
        f"The uncoded {ub['dtype']} model (the reference of the targets) rounds its "
        f"final logit to {ub['dtype']}; the coded schemes receive the two branch "
        f"logits in {ub['dtype']} and add them and the bias in float32 at the master. "
        "The last row is the uncoded model served that way (no coding error), the "
        "floor the coded schemes can reach.",
    ]


def _measured(t) -> str:
    val = t["value"]
    return str(val) if isinstance(val, bool) else f"{val:.3g}"


def target_lines(summary) -> list[str]:
    """``name: measured -> met`` for every target (the printed summary)."""
    return [
        f"target {name}: {_measured(t)} -> {'met' if t['met'] else 'NOT met'}"
        for name, t in summary["targets"].items()
    ]


def _report_targets(summary) -> list[str]:
    rows = [
        [k, _measured(t), fmt(t.get("limit"), ".3g", "-"), "yes" if t["met"] else "NO"]
        for k, t in summary["targets"].items()
    ]
    lines = ["", "## Targets", ""]
    lines += runkit.md_table(["target", "measured", "limit", "met"], rows)
    thr = summary["targets"].get("threshold_worse_for_N_ge_24")
    if thr:
        lines += ["", "Threshold against ChebyLS (both with RepApprox on Deep):", ""]
        head = ["N", "median error ratio", "p95 ratio", "AUC gap", "logloss gap"]
        lines += runkit.md_table(head, (
            [n, f"{v['median_err_ratio']:.3g}", f"{v['p95_err_ratio']:.3g}",
             f"{v['auc_gap']:.2e}", f"{v['logloss_gap']:.3g}"]
            for n, v in thr["per_N"].items()
        ))  # fmt: skip
    return lines


def _report_nercc(summary) -> list[str]:
    if not summary.get("nercc"):
        return []
    cfg = summary["config"]
    lines = [
        "",
        "NeRCC smoothing chosen on the validation split "
        f"({cfg['nercc_val_groups']} groups max, "
        f"{cfg['nercc_num_masks']} masks per N):",
        "",
    ]
    return lines + runkit.md_table(
        ["N", "lambda_e", "lambda_d", "validation MSE"],
        [[n, f"{v['encoder_smoothing']:g}", f"{v['decoder_smoothing']:g}",
          f"{v['val_mse']:.3g}"] for n, v in summary["nercc"].items()],
    )  # fmt: skip


def _report(summary, plots: list[str]) -> str:
    lines = _report_head(summary) + _report_targets(summary) + _report_nercc(summary)
    lines += [
        "",
        "## Results per scheme",
        "",
        "err = relative logit error against uncoded float32; vs bf16 = against "
        "the uncoded model in the worker dtype; deep exact = fraction of Deep "
        "tasks returned exactly by RepApprox (P = the exact probability); all "
        "exact = fraction of groups with every task exact; lost deep abs err = "
        "median absolute error (logit units) of the Berrut fallback on the "
        "Deep tasks whose replicas all straggled.",
        "",
    ]
    lines.append(format_table(summary, markdown=True))
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p[:-4]}]({p})" for p in plots]
    tm = summary["timing"]
    lines += ["", "Timing (s): " + ", ".join(f"{k} {v:.1f}" for k, v in tm.items()), ""]
    return "\n".join(lines)


def write_outputs(summary, out: str | Path) -> None:
    """Writes ``summary.json``, ``report.md`` and the PNG plots into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runkit.write_report(out, summary, _report(summary, _plots(summary, out)))
