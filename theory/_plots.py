"""Plots of ``theory.verify`` (matplotlib, Agg backend)."""

from __future__ import annotations

import math
import os

import numpy as np

import codedjax.bounds as cb

_BOUND_STYLE = (
    ("Prop. B (deterministic)", "k", "-"),
    ("gap bound, 1 - eta (Prop. D)", "tab:green", "--"),
    ("Chernoff, missing rows (Prop. C)", "tab:red", "-."),
    ("generic Chernoff (coherence)", "tab:purple", ":"),
)


def _finite(y):
    y = np.asarray([np.inf if v is None else v for v in y], dtype=np.float64)
    return np.where(np.isfinite(y), y, np.nan)


def _bound_curves(m: int, d: int, eta: float, ns: np.ndarray) -> list[np.ndarray]:
    kw = [dict(num_workers=m, num_coeffs=d, num_responses=int(n)) for n in ns]
    return [
        np.array([cb.deterministic_condition_bound(**k) for k in kw]),
        np.array([cb.gap_condition_bound_probabilistic(**k, eta=eta) for k in kw]),
        np.array([cb.missing_rows_condition_bound(**k, eta=eta) for k in kw]),
        np.array([cb.sampling_condition_bound(**k, eta=eta) for k in kw]),
    ]


def plot_cond(
    path: str, m: int, blocks: list[tuple[int, list[dict]]], eta: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(2, len(blocks))
    nrows = math.ceil(len(blocks) / cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(5.6 * cols, 4.2 * nrows), squeeze=False
    )
    for ax, (d, rows) in zip(axes.flat, blocks, strict=False):
        n = np.array([r["N"] for r in rows])
        q = {k: _finite([r["eq"][k] for r in rows]) for k in ("median", "p95", "max")}
        raw_med = _finite([r["raw"]["median"] for r in rows])
        ax.fill_between(
            n, q["median"], q["p95"], color="tab:blue", alpha=0.35, label="median..p95"
        )
        ax.fill_between(
            n, q["p95"], q["max"], color="tab:blue", alpha=0.12, label="p95..max"
        )
        ax.plot(n, q["median"], "o-", color="tab:blue", ms=3, label="median (eq)")
        ax.plot(n, q["max"], "-", color="tab:blue", lw=0.8)
        ax.plot(n, raw_med, "x", color="tab:orange", ms=4, label="median (raw)")
        dense = np.arange(d, m + 1)
        curves = _bound_curves(m, d, eta, dense)
        for (label, color, ls), y in zip(_BOUND_STYLE, curves, strict=True):
            ax.plot(dense, _finite(y), ls, color=color, lw=1.6, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("N (responses)")
        ax.set_ylabel("cond(U_S)")
        ax.set_title(f"M={m}, D={d}, {rows[0]['trials']:,} trials")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(blocks) :]:
        ax.axis("off")
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.suptitle(
        f"Condition number of ChebyLS against N, M={m} (bounds at eta={eta}; "
        "vacuous bounds are not drawn)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_recovery(path: str, curves: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(curves))
    rows_ = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(
        rows_, cols, figsize=(4.6 * cols, 3.6 * rows_), squeeze=False
    )
    for ax, c in zip(axes.flat, curves, strict=False):
        n = np.arange(c["M"] + 1)
        ax.plot(n, c["exact"], "-", color="k", label="exact (inclusion-exclusion)")
        ax.plot(n, c["union"], "--", color="tab:red", label="union bound")
        ax.plot(n, c["seed_bound"], ":", color="tab:purple", label="1 - K(1-N/M)^c")
        ax.plot(
            n,
            c["monte_carlo"],
            "o",
            ms=2.5,
            color="tab:blue",
            label=f"Monte Carlo ({c['trials']:,})",
        )
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("N (responses)")
        ax.set_ylabel("P(all K exact)")
        ax.set_title(f"K={c['K']}, c={c['c']}, M={c['M']}")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(curves) :]:
        ax.axis("off")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_points(path: str, rows: list[dict], bases: tuple[str, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    d = [r["D"] for r in rows]
    for b in bases:
        ax.plot(
            d,
            _finite([r[b]["median"] for r in rows]),
            "o-",
            ms=3,
            label=f"{b} (median)",
        )
    ax.set_yscale("log")
    ax.set_xlabel("D = N (threshold)")
    ax.set_ylabel("cond(T_S)")
    ax.set_title(f"Square systems at the threshold, M={rows[0]['M']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(
    out: str, cfg, cond_rows: list[dict], curves: list[dict], point_rows: list[dict]
) -> list[str]:
    """Write every PNG into ``out``; return their file names."""
    from .verify import BASES

    names = []
    for m, ds in cfg.cond_grid:
        blocks = [
            (d, [r for r in cond_rows if r["M"] == m and r["D"] == d]) for d in ds
        ]
        name = f"cond_vs_N_M{m}.png"
        plot_cond(os.path.join(out, name), m, blocks, cfg.eta)
        names.append(name)
    if curves:
        plot_recovery(os.path.join(out, "recovery.png"), curves)
        names.append("recovery.png")
    if point_rows:
        plot_points(os.path.join(out, "threshold_points.png"), point_rows, BASES)
        names.append("threshold_points.png")
    return names
