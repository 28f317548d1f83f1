"""The report: the tables, the verdict (which scheme wins where) and the plots."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def _fmt(v, spec=".3g"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def panel_table(panel: dict, field: str) -> str:
    names = list(panel["schemes"])
    head = "| N | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (len(names) + 1)]
    for row in panel["rows"]:
        cells = [_fmt(row[n][field]) for n in names]
        lines.append(f"| {row['N']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _answered(c: dict) -> str:
    """A cell of the answered table: the share of queries answered (of requests
    whole); ``1`` when both are 1."""
    a, w = c.get("answered", c["ok"]), c.get("whole", c["ok"])
    return "1" if a >= 1.0 and w >= 1.0 else f"{_fmt(a)} ({_fmt(w)})"


def answered_table(panel: dict) -> str:
    """Per N and scheme: the share of queries answered (in brackets: of requests
    with every query answered)."""
    names = list(panel["schemes"])
    lines = ["| N | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for row in panel["rows"]:
        cells = [_answered(row[n]) for n in names]
        lines.append(f"| {row['N']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _decoding(v: dict) -> str:
    kind = v.get("decoding", "all or nothing")
    return {"per group": ", per-group decoding", "per query": ", per query"}.get(
        kind, ""
    )


def per_query_text(panel: dict) -> str:
    """The schemes that answer more queries than whole requests, each at the N
    where the gap is widest ('' when none)."""
    parts = []
    for name in panel["schemes"]:
        rows = [r for r in panel["rows"] if "answered" in r[name]]
        if not rows:
            continue
        best = max(rows, key=lambda r: r[name]["answered"] - r[name]["whole"])
        c = best[name]
        if c["answered"] - c["whole"] <= 0:
            continue
        how = panel["schemes"][name].get("decoding", "per query")
        parts.append(
            f"{name} ({how}) {100 * c['answered']:.3g}% of the queries at N = "
            f"{best['N']}, where {100 * c['whole']:.3g}% of the requests are whole"
        )
    if not parts:
        return ""
    return "Answered per query: " + "; ".join(parts) + "."


def winners(panel: dict, field: str = "err_median") -> list[tuple[int, str, float]]:
    """(N, the scheme with the smallest ``field``, its value) per row."""
    out = []
    for row in panel["rows"]:
        best = min(panel["schemes"], key=lambda n: row[n][field])
        out.append((row["N"], best, row[best][field]))
    return out


def compare(panel: dict, a: str, b: str, field: str = "err_median") -> dict:
    """The N (where ``b`` decodes) at which scheme ``a`` beats ``b`` on ``field``."""
    if a not in panel["schemes"] or b not in panel["schemes"]:
        return {}
    rows = [r for r in panel["rows"] if math.isfinite(r[b][field])]
    return {
        "better_at": [r["N"] for r in rows if r[a][field] < r[b][field]],
        "of": [r["N"] for r in rows],
    }


def panel_key(p: dict) -> str:
    return f"{p['workload']}-M{p['num_workers']}-{p['dtype']}"


def format_report(summary: dict) -> str:
    lines = ["# Every scheme on the same masks", ""]
    cfg = summary["config"]
    lines.append(
        f"K = {cfg['num_inputs']}, {cfg['features']} features, {cfg['trials']} "
        f"requests per N (fresh queries and arrivals; the same for every scheme), "
        f"seed {cfg['seed']}. Queries are counted one by one: a query is answered "
        f"where the responders give it (`code.decodable_queries`: ParM per parity "
        f"group, replication and RepApprox per replica, every other code with its "
        f"request) and its value is finite. Error: relative l2 of the K outputs "
        f"against float64 (inf when a query is unanswered). `work` = real "
        f"evaluations of f per worker; `thr` = the fewest workers that decode."
    )
    for p in summary["panels"]:
        lines += ["", f"## {panel_key(p)} (degree {p['degree']})", ""]
        lines.append(
            "schemes: "
            + ", ".join(
                f"{n} (thr {v['threshold_workers']}, work {v['work']}{_decoding(v)})"
                for n, v in p["schemes"].items()
            )
            + f"; uncoded {p['dtype']} worker error median "
            f"{_fmt(p['uncoded_err_median'])}"
        )
        for field, title in (
            ("err_median", "decoded error, median"),
            ("err_p95", "decoded error, p95"),
            ("cond_median", "cond, median"),
            ("cond_p95", "cond, p95"),
            ("cond_worst", "cond, worst"),
        ):
            lines += ["", f"{title}:", "", panel_table(p, field)]
        lines += [
            "",
            "queries answered (in brackets: requests with every query answered):",
            "",
            answered_table(p),
        ]
        w = winners(p)
        lines += [
            "",
            "lowest median error per N: "
            + ", ".join(f"N={n}: {s} ({_fmt(v)})" for n, s, v in w),
        ]
    if summary.get("exhaustive"):
        lines += [
            "",
            "## Exhaustive condition numbers (every responder set of size k)",
            "",
            "| n | k | scheme | worst | mean | sets | paper worst | paper mean | "
            "authors' code worst | authors' code mean |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in summary["exhaustive"]:
            lines.append(
                f"| {r['n']} | {r['k']} | {r['scheme']} | {_fmt(r['worst'], '.5g')} | "
                f"{_fmt(r['mean'], '.5g')} | {r['sets']} | "
                f"{_fmt(r['paper_worst'])} | {_fmt(r['paper_mean'])} | "
                f"{_fmt(r.get('authors_code_worst'), '.8g')} | "
                f"{_fmt(r.get('authors_code_mean'), '.8g')} |"
            )
        lines.append("")
        lines.append(
            "paper columns: the figures the papers print ('-': none located; "
            "`PAPER_FIGURES`); authors' code: the same search run by Ramamoorthy and "
            "Tang's published code (`AUTHORS_CODE_FIGURES`; their paper's printed "
            "tables were not located); random: five seeded draws pooled."
        )
    if summary.get("model_panel"):
        from .models import format_model_panel

        lines += ["", format_model_panel(summary["model_panel"]).rstrip()]
    if summary.get("mnist_panel"):
        from .mnist_report import format_mnist_panel

        lines += ["", format_mnist_panel(summary["mnist_panel"]).rstrip()]
    if summary.get("verdict"):
        lines += ["", "## Which scheme wins where", "", summary["verdict"]]
    return "\n".join(lines) + "\n"


def verdict(summary: dict) -> str:
    """A paragraph per panel from the figures: who has the lowest median error, who
    beats ChebyLS's median and p95 where ChebyLS decodes, and who decodes below
    ChebyLS's threshold."""
    parts = []
    for p in summary["panels"]:
        w = winners(p)
        counts: dict[str, list[int]] = {}
        for n, s, v in w:
            if math.isfinite(v):
                counts.setdefault(s, []).append(n)
        top = "; ".join(f"{s} at N = {_ns(ns)}" for s, ns in counts.items())
        s = f"**{panel_key(p)}**: lowest median error: {top}."
        if "chebyls" in p["schemes"]:
            for field, word in (("err_median", "median"), ("err_p95", "p95")):
                beat = []
                for other in p["schemes"]:
                    c = (
                        compare(p, other, "chebyls", field)
                        if other != "chebyls"
                        else {}
                    )
                    if c and c["better_at"]:
                        beat.append(f"{other} ({_ns(c['better_at'])})")
                if beat:
                    s += f" Below ChebyLS's {word} where ChebyLS decodes: "
                    s += ", ".join(beat) + "."
            below = [
                n
                for n in p["schemes"]
                if any(
                    math.isfinite(r[n]["err_median"])
                    and not math.isfinite(r["chebyls"]["err_median"])
                    for r in p["rows"]
                )
            ]
            if below:
                s += " Decoding below ChebyLS's threshold: " + ", ".join(below) + "."
        more = per_query_text(p)
        if more:
            s += " " + more
        parts.append(s)
    if summary.get("mnist_panel"):
        from .mnist_report import mnist_verdict

        parts.append(mnist_verdict(summary["mnist_panel"]))
    return "\n\n".join(parts)


def _ns(ns: list[int]) -> str:
    """N values as runs: [4, 7, 10, 16] with step 3 -> '4-10, 16'."""
    if not ns:
        return "none"
    step = min((b - a for a, b in zip(ns, ns[1:], strict=False)), default=1)
    runs, start, prev = [], ns[0], ns[0]
    for n in ns[1:] + [None]:
        if n is not None and n - prev == step:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(runs)


def plot_panels(summary: dict, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    for p in summary["panels"]:
        ns = [r["N"] for r in p["rows"]]
        fig, axes = plt.subplots(1, 5, figsize=(24, 4.5))
        fields = ("err_median", "err_p95", "cond_median", "cond_p95", "cond_worst")
        for ax, field in zip(axes, fields, strict=True):
            for name in p["schemes"]:
                vals = [r[name][field] for r in p["rows"]]
                vals = [v if math.isfinite(v) else np.nan for v in vals]
                ax.semilogy(ns, vals, marker=".", label=name)
            ax.set_title(f"{panel_key(p)}: {field}")
            ax.set_xlabel("N responders")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{panel_key(p)}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path.name)
    if summary.get("mnist_panel"):
        from .mnist_report import plot_mnist_panel

        written += plot_mnist_panel(summary["mnist_panel"], out)
    return written
