"""The corrupted-worker experiment's tables, plot and ``report.md``."""

from __future__ import annotations

import os

import runkit

__all__ = ["format_tables", "plot_rates", "write_outputs"]


def format_tables(summary: dict) -> str:
    c = summary["config"]
    lag = summary["lagrange"]["rows"]
    lines = [
        f"K={c['num_inputs']}, M={c['num_workers']}, D={summary['lagrange']['D']}, "
        f"N={c['num_responses']}, bf16 workers, {c['num_requests']} requests per row; "
        f"decoders look for up to A={c['max_corrupted']} corrupted answers; "
        "error ratio = decoded error / the clean decode's (median over requests)",
        "",
    ]
    models = [
        ("rounding", "noise_sd = the first-order rounding analysis of the tower"),
        ("dtype", "dtype-only noise model (no noise_sd)"),
    ]
    cut = c.get("leverage_cut", 0.9)
    for key, title in models:
        if key not in lag[0]:
            continue  # that model was not run
        lines += [
            "",
            f"Lagrange-coded answers, robust_decode, {title}:",
            "",
            "| corrupted | size x RMS | located exactly | ML locator told the "
            f"count | located, leverage < {cut:g} (share of requests) | all "
            "corrupted flagged | clean worker flagged | UNDECIDABLE | error ratio |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in lag:
            r = row[key]
            below = (
                f"{r['located_below_cut']:.3f} ({r['share_below_cut']:.2f})"
                if "located_below_cut" in r
                else "-"
            )
            ml = f"{row['ml_located']:.3f}" if "ml_located" in row else "-"
            lines.append(
                f"| {row['corrupted']} | {row['size_x_rms']:g} | {r['located']:.3f} | "
                f"{ml} | {below} | {r['all_corrupted_flagged']:.3f} | "
                f"{r['clean_flagged']:.3f} | {r['undecidable']:.3f} | "
                f"{r['error_ratio_median']:.2f} |"
            )
    if "berrut" not in summary:
        return "\n".join(lines)
    lines += [
        "",
        "Berrut-coded answers (BACC): the leave-one-out locator, ApproxIFER's "
        f"(rational fit, deg P = {summary['berrut']['approxifer_deg_p']}, deg Q = A; "
        "always excludes A workers) and the rational view (the robust decoder on "
        "y B(z)^d, the worker's degree d known):",
        "",
        "| corrupted | size x RMS | located exactly (LOO / ApproxIFER / rational "
        "view) | all corrupted flagged | clean worker flagged | error ratio |",
        "|---|---|---|---|---|---|",
    ]
    names = ("loo_berrut", "approxifer", "rational")
    for r in summary["berrut"]["rows"]:
        present = [r[n] for n in names if n in r]

        def cells(key, fmt, present=present):
            return " / ".join(format(v[key], fmt) for v in present)

        lines.append(
            f"| {r['corrupted']} | {r['size_x_rms']:g} | {cells('located', '.3f')} | "
            f"{cells('all_corrupted_flagged', '.3f')} | "
            f"{cells('clean_flagged', '.3f')} | {cells('error_ratio_median', '.2g')} |"
        )
    return "\n".join(lines)


def plot_rates(summary: dict, path: str) -> None:
    """Located exactly against the error size (one corrupted worker) and against the
    number of corrupted workers (at 1 x RMS): each noise model's decoder next to the
    maximum-likelihood locator told the count, and Berrut's locators when run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["lagrange"]["rows"]
    sized = sorted(
        (r for r in rows if r["corrupted"] == 1), key=lambda r: r["size_x_rms"]
    )
    counted = sorted(
        (r for r in rows if r["corrupted"] and r["size_x_rms"] == 1.0),
        key=lambda r: r["corrupted"],
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    styles = [
        ("rounding", "robust, noise_sd from the rounding analysis", "C0", "o-"),
        ("dtype", "robust, dtype-only noise level", "C1", "s-"),
    ]
    for ax, group, key, label in (
        (axes[0], sized, "size_x_rms", "error size (x RMS of the answers)"),
        (axes[1], counted, "corrupted", "corrupted workers (error 1 x RMS)"),
    ):
        xs = [r[key] for r in group]
        for name, text, color, style in styles:
            if group and name in group[0]:
                ax.plot(xs, [r[name]["located"] for r in group], style, color=color,
                        label=text)  # fmt: skip
        if group and "ml_located" in group[0]:
            ax.plot(xs, [r["ml_located"] for r in group], "k--",
                    label="maximum likelihood, told the count (reference)")  # fmt: skip
        if "berrut" in summary:
            brows = [
                r for r in summary["berrut"]["rows"]
                if (r["corrupted"] == 1 if key == "size_x_rms"
                    else r["corrupted"] and r["size_x_rms"] == 1.0)
            ]  # fmt: skip
            brows.sort(key=lambda r: r[key])
            for name, style, color in (
                ("loo_berrut", "v:", "C2"), ("approxifer", "^:", "C3"),
                ("rational", "d:", "C4"),
            ):  # fmt: skip
                if brows and name in brows[0]:
                    ax.plot([r[key] for r in brows],
                            [r[name]["located"] for r in brows], style, color=color,
                            label=f"Berrut-coded, {name}")  # fmt: skip
        ax.set_xlabel(label)
        ax.set_ylabel("located exactly (share of requests)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_xscale("log")
    axes[1].set_xticks([r["corrupted"] for r in counted])
    axes[0].legend(fontsize=7, loc="center right")
    c = summary["config"]
    fig.suptitle(
        f"Locating corrupted workers: K={c['num_inputs']}, M={c['num_workers']}, "
        f"N={c['num_responses']}, bf16 workers, {c['num_requests']} requests per point",
        fontsize=10,
    )
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(summary: dict, out: str) -> str:
    """``summary.json``, ``located.png`` and ``report.md`` in ``out``; returns the
    tables."""
    table = format_tables(summary)
    head = "# Locating corrupted workers\n\n![located](located.png)\n\n"
    runkit.write_report(out, summary, head + table + "\n")
    plot_rates(summary, os.path.join(out, "located.png"))
    return table
