"""Plots of ``theory.verify`` (matplotlib, Agg backend).

Each function returns the caption that ``report.md`` prints under the figure.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import _common as C

# one style per bound, distinct in colour, line and marker, so that bounds which
# coincide (Prop. B and Prop. C at one missing worker) stay distinguishable
_STYLE = {
    "prop_b": dict(color="k", ls="-", marker="o", lw=2.2, ms=5, mfc="none"),
    "gap_probabilistic": dict(color="tab:green", ls="--", marker="^", lw=1.6, ms=4),
    "chernoff_missing": dict(color="tab:red", ls="-.", marker="v", lw=1.4, ms=4),
    "chernoff_sampling": dict(color="tab:purple", ls=":", marker="s", lw=1.6, ms=3),
}
_DODGE = {
    "prop_b": 0.0,
    "gap_probabilistic": -0.12,
    "chernoff_missing": 0.12,
    "chernoff_sampling": 0.24,
}
_SHORT = {
    "prop_b": "Prop. B",
    "gap_probabilistic": "gap bound (Prop. D)",
    "chernoff_missing": "Prop. C",
    "chernoff_sampling": "generic Chernoff",
}


def _finite(y):
    y = np.asarray([np.inf if v is None else v for v in y], dtype=np.float64)
    return np.where(np.isfinite(y), y, np.nan)


def _resolved(y):
    """Computed cond values, NaN where float64 cannot resolve them (> 1e15)."""
    y = _finite(y)
    return np.where(y > C.COND_UNRESOLVED, np.nan, y)


def _ql(eta: float) -> str:
    return f"p{100.0 * (1.0 - eta):.4g}"


def _band(ax, rows, eta, zoom_from=None):
    n = np.array([r["N"] for r in rows])
    key = "q_eta" if "q_eta" in rows[0]["eq"] else "p95"
    q = {k: _resolved([r["eq"][k] for r in rows]) for k in ("median", key, "max")}
    sel = n >= (zoom_from if zoom_from is not None else n.min())
    n = n[sel]
    q = {k: v[sel] for k, v in q.items()}
    ql = _ql(eta)
    ax.fill_between(
        n, q["median"], q[key], color="tab:blue", alpha=0.35, label=f"median..{ql}"
    )
    ax.fill_between(
        n, q[key], q["max"], color="tab:blue", alpha=0.12, label=f"{ql}..max"
    )
    ax.plot(n, q["median"], "o-", color="tab:blue", ms=3, lw=1, label="median")
    ax.plot(n, q[key], "-", color="tab:blue", lw=1.2)
    ax.plot(n, q["max"], "-", color="tab:blue", lw=0.6)
    return q


def plot_cond(
    path: str, points: str, m: int, blocks: list[tuple[int, list[dict]]], eta: float
) -> str:
    """cond(U_S) against N: full range (log) and a zoom near N = M per D.

    Writes ``path``; returns the caption.
    """
    import matplotlib.pyplot as plt

    fig, cap = cond_figure(points, m, blocks, eta)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return cap


def cond_figure(points: str, m: int, blocks: list[tuple[int, list[dict]]], eta: float):
    """(figure, caption) of :func:`plot_cond`; the zoom panels are axes[:, 1]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(blocks),
        2,
        figsize=(14.5, 3.6 * len(blocks) + 0.4),
        squeeze=False,
        gridspec_kw={"width_ratios": (1.0, 1.0)},
    )
    vacuous_all: dict[str, list[int]] = {}
    for (d, rows), (ax, az) in zip(blocks, axes, strict=True):
        curves = C.bound_curves(points, m, d, eta)
        ranges = {k: C.informative_range(v, d) for k, v in curves.items()}
        starts = [r[0] for r in ranges.values() if r is not None]
        zoom_from = max(d, (min(starts) if starts else m - 4) - 2)
        zoom_from = min(zoom_from, max(d, m - 4))
        _full_panel(ax, points, m, d, rows, eta, curves, zoom_from)
        for name in _zoom_panel(az, m, d, rows, eta, curves, ranges, zoom_from):
            vacuous_all.setdefault(name, []).append(d)
    fig.suptitle(
        f"cond(U_S) of ChebyLS against N, M={m}, {points}-kind points "
        f"(bounds at eta={eta}; band: Monte Carlo median, {_ql(eta)}, max; "
        "grey: the zoomed range)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig, _cond_caption(points, m, blocks, eta, vacuous_all)


def _full_panel(ax, points, m, d, rows, eta, curves, zoom_from) -> None:
    """cond(U_S) and the bounds over the full range N = D..M (log scale)."""
    dense = np.arange(d, m + 1)
    _band(ax, rows, eta)
    raw_med = _resolved([r["raw"]["median"] for r in rows])
    ax.plot([r["N"] for r in rows], raw_med, "x", color="tab:orange", ms=4)
    for name, y in curves.items():
        st = dict(_STYLE[name])
        st.pop("marker")
        ax.plot(dense, _finite(y), **st)
    ax.axvspan(zoom_from - 0.5, m + 0.5, color="0.85", alpha=0.5, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("N (responses)")
    ax.set_ylabel("cond(U_S)")
    ax.set_title(
        f"M={m}, D={d}, {points}-kind points, {rows[0]['trials']:,} trials",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.3)


def _zoom_panel(az, m, d, rows, eta, curves, ranges, zoom_from) -> list[str]:
    """Zoom near N = M, where every bound's informative range is visible.

    Returns the short names of the bounds that are vacuous for every N.
    """
    dense = np.arange(d, m + 1)
    q = _band(az, rows, eta, zoom_from)
    zr = [r for r in rows if r["N"] >= zoom_from]
    az.plot(
        [r["N"] for r in zr],
        _resolved([r["raw"]["median"] for r in zr]),
        "x",
        color="tab:orange",
        ms=4,
        label="median of raw cond(T_S)",
    )
    sel = dense >= zoom_from
    top = [np.nanmax(q[k]) for k in q if np.isfinite(q[k]).any()]
    vacuous = []
    for name, y in curves.items():
        r = ranges[name]
        if r is None:
            vacuous.append(_SHORT[name])
            continue
        yy = _finite(y)[sel]
        lab = f"{_SHORT[name]}: finite for N >= {r[0]}"
        # coinciding bounds (Prop. B, C and the capped gap bound at one
        # missing worker) are shifted apart by a fraction of a worker
        shift = _DODGE[name]
        every = max(1, int(sel.sum()) // 15)  # at most ~15 markers a curve
        az.plot(dense[sel] + shift, yy, label=lab, markevery=every, **_STYLE[name])
        top.append(np.nanmax(yy))
    lo = np.nanmin(q["median"]) if np.isfinite(q["median"]).any() else 1.0
    hi = max(top) if top else 10.0
    az.set_yscale("log")
    az.set_ylim(max(0.9, lo * 0.85), hi * 1.6)
    az.set_xlim(zoom_from - 0.5, m + 0.5)
    az.set_xlabel("N (responses), zoom near N = M")
    az.set_ylabel("cond(U_S)")
    gone = [_SHORT[k] for k, r in ranges.items() if r is None]
    title = f"zoom, M={m}, D={d}"
    if gone:
        title += "; vacuous for every N: " + ", ".join(gone)
    az.set_title(title, fontsize=9)
    az.grid(True, which="both", alpha=0.3)
    az.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return vacuous


def _cond_caption(points, m, blocks, eta, vacuous_all: dict[str, list[int]]) -> str:
    ql = _ql(eta)
    fac = sorted({f"{C.raw_factor(points, m, d):.3g}" for d, _ in blocks}, key=float)
    fac_s = fac[0] if len(fac) == 1 else f"{fac[0]} to {fac[-1]}"
    cap = (
        f"cond(U_S) (equilibrated rows; the raw cond(T_S) is within cond(T) = "
        f"{fac_s} of it) against N at M = {m}, "
        f"{points}-kind points. Shaded: the Monte Carlo median..{ql} and {ql}..max; "
        f"lines: the bounds at eta = {eta} (a probabilistic bound holds where it "
        f"stays above the {ql} line, a deterministic one above the max). Right: "
        "zoom near N = M, where the bounds are finite; the legend gives where each "
        "is finite, and bounds that coincide are drawn shifted by up to 0.24 in N "
        "so that each stays visible. Monte Carlo values above 1e15, which float64 "
        "cannot resolve, are not drawn."
    )
    if vacuous_all:
        cap += (
            " Not drawn, vacuous for every N: "
            + "; ".join(
                f"{k} (D = {', '.join(map(str, v))})" for k, v in vacuous_all.items()
            )
            + "."
        )
    if points != "first":
        cap += " The gap bounds (Prop. D) assume first-kind points: not applicable."
    return cap


def plot_recovery(path: str, curves: list[dict]) -> str:
    """P(all K exact) against N, with Clopper-Pearson bars and vacuous regions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(curves))
    rows_ = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(
        rows_, cols, figsize=(4.8 * cols, 3.8 * rows_), squeeze=False
    )
    for ax, c in zip(axes.flat, curves, strict=False):
        _recovery_panel(ax, c)
    for ax in list(axes.flat)[len(curves) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    conf = curves[0].get("confidence")
    return (
        "RepApprox: P(all K tasks exact) against N: the exact formula, the union "
        "bound and the seed's 1 - K(1 - N/M)^c, with the Monte Carlo rates and their "
        "Clopper-Pearson intervals"
        + (f" (level {conf:.6f}, Bonferroni)" if conf else "")
        + ". Hatched: where the seed bound is below 0, shaded: where the union bound "
        "is (inside it); a bound below 0 is vacuous, and its line is not drawn "
        "there."
    )


def _recovery_panel(ax, c: dict) -> None:
    """One (K, c, M): the formula, the bounds, the Monte Carlo with its intervals."""
    n = np.arange(c["M"] + 1)
    union, seed = np.asarray(c["union"]), np.asarray(c["seed_bound"])
    # where a lower bound on a probability is below 0 it says nothing: mark
    # that range (the union bound's lies inside the seed bound's)
    for y, style, lab in (
        (
            seed,
            dict(facecolor="none", edgecolor="tab:purple", hatch="///", alpha=0.5),
            "seed bound < 0 (vacuous)",
        ),
        (union, dict(color="tab:red", alpha=0.13), "union bound < 0 (vacuous)"),
    ):
        neg = np.flatnonzero(y < 0)
        if neg.size:
            ax.axvspan(neg.min() - 0.5, neg.max() + 0.5, lw=0, label=lab, **style)
    ax.plot(n, c["exact"], "-", color="k", label="exact (inclusion-exclusion)")
    ax.plot(
        n,
        np.where(union >= 0, union, np.nan),
        "--",
        color="tab:red",
        label="union bound",
    )
    ax.plot(
        n,
        np.where(seed >= 0, seed, np.nan),
        ":",
        color="tab:purple",
        lw=1.8,
        label="1 - K(1-N/M)^c",
    )
    mc = np.asarray(c["monte_carlo"])
    if "ci_low" in c:
        err = np.stack([mc - np.asarray(c["ci_low"]), np.asarray(c["ci_high"]) - mc])
        ax.errorbar(
            n,
            mc,
            yerr=np.maximum(err, 0.0),
            fmt="o",
            ms=2.5,
            color="tab:blue",
            ecolor="tab:blue",
            elinewidth=0.9,
            capsize=1.5,
            label=f"Monte Carlo ({c['trials']:,}), Clopper-Pearson",
        )
    else:
        ax.plot(n, mc, "o", ms=2.5, color="tab:blue", label="Monte Carlo")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("N (responses)")
    ax.set_ylabel("P(all K exact)")
    ax.set_title(f"K={c['K']}, c={c['c']}, M={c['M']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")


_POINT_STYLE = {
    "cheb1/Chebyshev": dict(color="tab:blue", ls="-", marker="o", lw=3.0, ms=7),
    "cheb2/Chebyshev": dict(
        color="tab:orange", ls="--", marker="s", lw=1.4, ms=5, mfc="none"
    ),
    "equispaced/Chebyshev": dict(color="tab:green", ls="-.", marker="^"),
    "equispaced/monomial": dict(color="tab:red", ls=":", marker="x"),
    "cheb1/monomial": dict(color="tab:purple", ls=(0, (5, 1, 1, 1)), marker="d"),
}
_POINT_LABEL = {
    "cheb1/Chebyshev": "first-kind points, Chebyshev basis",
    "cheb2/Chebyshev": "second-kind points, Chebyshev basis",
    "equispaced/Chebyshev": "equispaced points, Chebyshev basis",
    "equispaced/monomial": "equispaced points, monomial basis",
    "cheb1/monomial": "first-kind points, monomial basis",
}


def plot_points(path: str, rows: list[dict], bases: tuple[str, ...]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6))
    d = [r["D"] for r in rows]
    for b in bases:
        st = {"lw": 1.6, "ms": 5, **_POINT_STYLE.get(b, {})}
        ax.plot(
            d,
            _resolved([r[b]["median"] for r in rows]),
            label=f"{_POINT_LABEL.get(b, b)}: median",
            **st,
        )
        ax.plot(
            d,
            _resolved([r[b]["p95"] for r in rows]),
            lw=0.8,
            alpha=0.6,
            color=st.get("color"),
            ls=st.get("ls", "-"),
        )
    ax.set_yscale("log")
    ax.set_xlabel("D = N (threshold)")
    ax.set_ylabel("cond(T_S) (raw)")
    ax.set_title(
        f"Square systems at the threshold, M={rows[0]['M']} (thin: p95)", fontsize=10
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return (
        f"The raw cond(T_S) of the D x D system of the first D arrivals (N = D) "
        f"against D at M = {rows[0]['M']}, {rows[0]['trials']:,} trials: median "
        "(thick, markers) and p95 (thin), one colour, line style and marker per "
        "point kind and basis. Values above 1e15 (unresolved in float64) are not "
        "drawn."
    )


def write_plots(out: str, summary: dict, curves: list[dict]) -> list[tuple[str, str]]:
    """Write every PNG into ``out``; return (file name, caption) pairs."""
    eta = summary["eta"]
    cond_rows = summary["cond"]
    groups: dict[tuple[str, int], list[int]] = {}
    for b in summary.get("blocks", []):
        groups.setdefault((b["points"], b["M"]), []).append(b["D"])
    names = []
    for (points, m), ds in groups.items():
        blocks = [
            (
                d,
                [
                    r
                    for r in cond_rows
                    if r["M"] == m
                    and r["D"] == d
                    and r.get("points", "first") == points
                ],
            )
            for d in ds
        ]
        name = (
            f"cond_vs_N_M{m}.png"
            if points == "first"
            else f"cond_vs_N_M{m}_{points}.png"
        )
        cap = plot_cond(os.path.join(out, name), points, m, blocks, eta)
        names.append((name, cap))
    if curves:
        names.append(
            ("recovery.png", plot_recovery(os.path.join(out, "recovery.png"), curves))
        )
    if summary["points"]:
        names.append(
            (
                "threshold_points.png",
                plot_points(
                    os.path.join(out, "threshold_points.png"),
                    summary["points"],
                    C.BASES,
                ),
            )
        )
    return names
