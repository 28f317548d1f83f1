"""The MNIST panel's report: its tables, its verdict and its plot (the panel:
:mod:`benchmarks.schemes.mnist`)."""

from __future__ import annotations

import numpy as np


def _cell(c: dict) -> str:
    s = f"{c['top1']:.3f}"
    if c["answered"] >= 1.0 and c["whole"] >= 1.0:
        return s
    t = c["top1_answered"]
    of = "-" if not np.isfinite(t) else f"{t:.3f}"
    return (
        f"{s} (answered {100 * c['answered']:.3g}%: {of}; whole "
        f"{100 * c['whole']:.3g}%)"
    )


def panel_title(p: dict, model: str) -> str:
    return f"MNIST {model} M={p['num_workers']} {p['dtype']}"


def format_mnist_panel(s: dict) -> str:
    """The MNIST panel's markdown: top-1 per row and N, for each M and dtype."""
    k, grp = s["num_inputs"], s["group"]
    base = ", ".join(f"{dt} {v:.3f}" for dt, v in s["base_top1"].items())
    lines = [
        f"## Model panel: MNIST {s['model']} (K = {k}; ParM k = {grp}, M = "
        f"{k + k // grp})",
        "",
        f"{s['test_queries']} test digits in groups of K, {s['repetitions']} arrival "
        f"orders per group (the same masks for every row). Base model (uncoded, every "
        f"answer) top-1: float32 {s['base_top1_float32']:.3f}; workers in {base}. "
        f"Cells: top-1 of the decoded logits over every query, an unanswered one a "
        f"miss; a query is answered where the responders give it (ParM per parity "
        f"group, replication and RepApprox per replica, the other codes with their "
        f"request). `answered x%: t; whole w%`: the share of queries answered and "
        f"the top-1 over those; the share of requests with every query answered. "
        f"Work per worker: "
        f"one network evaluation (whole-model rows; ParM's parity workers run the "
        f"parity model, same architecture) or one product per layer (layer-wise rows: "
        f"the same multiply-adds, biases and ReLUs at the master, one round trip per "
        f"layer).",
    ]
    pm = s.get("parity_model") or {}
    if pm:
        lines += [
            "",
            f"Parity model: {pm['config']['steps']} steps, validation MSE "
            f"{pm['val_mse']:.4g} (`{pm['checkpoint'].rsplit('/', 1)[-1]}`).",
        ]
    for p in s["panels"]:
        ns = [str(n) for n in p["responses"]]
        lines += [
            "",
            f"### {panel_title(p, s['model'])}",
            "",
            "| scheme | kind | " + " | ".join(f"N={n}" for n in ns) + " |",
            "|---|---|" + "---|" * len(ns),
        ]
        for name, row in p["rows"].items():
            cells = [_cell(row["by_n"][n]) for n in ns]
            kind = row["kind"]
            how = row.get("decoding", "all or nothing")
            if how != "all or nothing":
                kind += ", per-group decoding" if how == "per group" else ", per query"
            if row["rounds"] > 1:
                kind += f", {row['rounds']} rounds"
            lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    last: dict[str, str] = {}
    for p in s["panels"]:
        if p["not_applicable"] == last:
            continue
        last = p["not_applicable"]
        lines += ["", f"No row at M = {p['num_workers']}:"]
        lines += [f"- {name}: {why}." for name, why in last.items()]
    return "\n".join(lines) + "\n"


def _runs(ns: list[int]) -> str:
    if not ns:
        return "none"
    out, start, prev = [], ns[0], ns[0]
    for n in ns[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def mnist_verdict(s: dict, tol: float = 0.005) -> str:
    """A paragraph per (M, dtype) from the figures: which rows have the highest
    top-1 at each N, and from which N each row is within ``tol`` of the base
    model's top-1 in the workers' dtype."""
    parts = []
    for p in s["panels"]:
        base = s["base_top1"][p["dtype"]]
        ns = p["responses"]
        best: dict[str, list[int]] = {}
        for n in ns:
            vals = {a: r["by_n"][str(n)]["top1"] for a, r in p["rows"].items()}
            top = max(vals.values())
            for a, v in vals.items():
                if v >= top - 1e-12:
                    best.setdefault(a, []).append(n)
        reach = []
        for a, r in p["rows"].items():
            good = [n for n in ns if r["by_n"][str(n)]["top1"] >= base - tol]
            frm = next((n for n in ns if all(m in good for m in ns if m >= n)), None)
            at = "never" if frm is None else f"N >= {frm}"
            first = r["by_n"][str(ns[0])]["top1"]
            reach.append(f"{a} {at} ({first:.3f} at N = {ns[0]})")
        apart = []
        for a, r in p["rows"].items():
            c = r["by_n"][str(ns[0])]
            if c["answered"] > c["whole"]:
                apart.append(
                    f"{a} {100 * c['answered']:.3g}% of the queries "
                    f"({100 * c['whole']:.3g}% of the requests whole)"
                )
        parts.append(
            f"**{panel_title(p, s['model'])}** (base {base:.3f}): highest top-1: "
            + "; ".join(f"{a} at N = {_runs([n for n in ns if n in v])}"
                        for a, v in best.items())
            + f". Within {tol} of the base model: " + ", ".join(reach) + "."
            + (f" Answered per query at N = {ns[0]}: " + ", ".join(apart) + "."
               if apart else "")
        )  # fmt: skip
    return "\n\n".join(parts)


def plot_mnist_panel(s: dict, out) -> list[str]:
    """One figure: top-1 against N, a subplot per (M, dtype)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    panels = s["panels"]
    names = list(dict.fromkeys(n for p in panels for n in p["rows"]))
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}  # one per row
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    for ax, p in zip(np.atleast_1d(axes), panels, strict=True):
        ns = p["responses"]
        for name, row in p["rows"].items():
            ax.plot(ns, [row["by_n"][str(n)]["top1"] for n in ns], marker=".",
                    label=name, color=colors[name])  # fmt: skip
        ax.axhline(s["base_top1"][p["dtype"]], color="k", lw=0.8, ls="--",
                   label="base model")  # fmt: skip
        ax.set_title(panel_title(p, s["model"]))
        ax.set_xlabel("N responders")
        ax.set_ylabel("top-1")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    name = f"mnist-{s['model']}.png"
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    return [name]
