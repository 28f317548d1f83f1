"""``report.md`` and the printed table of ``theory.verify``."""

from __future__ import annotations

import runkit

from .. import _common as C
from .._common import fmt as _f
from .._common import fmt_cond as _fc


def _quantile_label(eta: float) -> str:
    return f"p{100.0 * (1.0 - eta):.4g}"


def _range(r) -> str:
    if r is None:
        return "nowhere (vacuous)"
    return f"N = {r[0]}" if r[0] == r[1] else f"N = {r[0]}..{r[1]}"


def bound_tables(summary: dict) -> list[str]:
    rows = summary.get("bounds", [])
    out = [
        "| bound | kind | informative checks held | vacuous |",
        "|---|---|---|---|",
    ]
    for r in rows:
        if r["M"] is None:
            out.append(
                f"| {r['label']} | {r['kind']} | {r['held']} of {r['informative']} "
                f"| {r['vacuous']} |"
            )
    per = [r for r in rows if r["M"] is not None]
    if per:
        out += [
            "",
            "Per configuration: where each bound is informative (finite), on every "
            "N from D to M and on the Monte Carlo grid, and the power of each "
            "probabilistic check (the smallest exceedance rate it could have "
            "flagged: the observed rate at which its whole Clopper-Pearson interval "
            "lies above eta).",
            "",
            "| points | M | D | bound | informative for | held / informative "
            "(grid N) | vacuous (grid N) | flags exceedance above |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in per:
            head = f"| {r['points']} | {r['M']} | {r['D']} | {r['label']} |"
            if not r["applicable"]:
                out.append(head + " not applicable (assumes first-kind points) ||||")
                continue
            power = (
                f"{100 * r['detectable_rate']:.3g}% ({r['trials']:,} trials)"
                if r.get("detectable_rate") is not None
                else ("" if r["kind"] == "deterministic" else "-")
            )
            if r["bound"] == "gap_deterministic":
                where = "per trial (its own gaps)"
            else:
                where = _range(r["informative_N"])
            out.append(
                head + f" {where} | {r['held']} / {r['informative']} | "
                f"{r['vacuous']} | {power} |"
            )
    return out


def cond_table(summary: dict) -> str:
    eta = summary.get("eta", 0.05)
    ql = _quantile_label(eta)
    names = [b.name for b in C.BOUNDS]
    lines = [
        f"| points | M | D | N | raw med | raw {ql} | raw max | eq med | eq {ql} | "
        "eq max | Prop B | gap (prob) | Ch-miss | generic | "
        "P(exceed) gap / Ch-miss / generic |",
        "|" + "---|" * 15,
    ]
    for r in summary["cond"]:
        b, e, t = r["bounds"], r["exceed"], r["trials"]
        na = set(r.get("not_applicable", ()))

        def bv(name, b=b, na=na):
            return "n/a" if name in na else _f(b.get(name))

        def rate(name, e=e, t=t, na=na):
            if name in na:
                return "n/a"
            if name not in e:
                return "-"  # vacuous: no check
            return f"{e[name] / t:.2g}"

        q = "q_eta" if "q_eta" in r["eq"] else "p95"
        lines.append(
            f"| {r.get('points', 'first')} | {r['M']} | {r['D']} | {r['N']} | "
            + " | ".join(_fc(r["raw"][k]) for k in ("median", q, "max"))
            + " | "
            + " | ".join(_fc(r["eq"][k]) for k in ("median", q, "max"))
            + " | "
            + " | ".join(bv(n) for n in names)
            + " | "
            + " / ".join(rate(n) for n in names[1:])
            + " |"
        )
    return "\n".join(lines)


def _blocks_table(summary: dict) -> list[str]:
    head = ["points", "M", "D", "coherence mu", "cond(T) factor: bound on cond(T_S) "
            "= factor x bound on cond(U_S)"]  # fmt: skip
    return runkit.md_table(head, (
        [b["points"], b["M"], b["D"], f"{b['coherence']:.4g}", f"{b['raw_factor']:.4g}"]
        for b in summary.get("blocks", [])
    ))  # fmt: skip


def report(summary: dict, plots: list[str]) -> str:
    cfg = summary["config"]
    checks = summary["checks"]
    failed = [c for c in checks if c["holds"] is False]
    eta = summary.get("eta", cfg["eta"])
    out = [
        "# Theory verification: condition-number and recovery bounds",
        "",
        f"**{summary['headline']}** "
        f"({'all informative checks hold' if summary['all_hold'] else 'SOME FAIL'}); "
        f"{cfg['trials']:,} trials per (M, D, N), eta = {eta}, run time "
        f"{summary['seconds']:.0f} s on {len(summary['devices'])} "
        f"{summary['backend']} device(s).",
        "",
        f"{summary.get('headline_bounds', '')}. A vacuous (infinite) bound claims "
        "nothing, so it is not counted as a check that held.",
        "",
    ]
    rates = [
        r["detectable_rate"]
        for r in summary.get("bounds", [])
        if r.get("detectable_rate") is not None
    ]
    if rates:
        out += [
            f"Power: at {cfg['trials']:,} trials a bound at confidence 1 - eta = "
            f"{1 - eta:g} is flagged as violated only when its exceedance rate is "
            f"above {100 * max(rates):.3g}% (Clopper-Pearson at level "
            f"{summary['interval_confidence']:.6f}); more trials sharpen this.",
            "",
        ]
    out += bound_tables(summary)
    if failed:
        out += ["", "Failed checks:", ""] + [f"- {c['name']}" for c in failed]
    out += _cond_section(summary)
    out += _exhaustive_section(summary)
    out += _points_section(summary)
    out += _recovery_section(summary)
    out += _speed_section(summary)
    out += _plots_section(plots)
    out.append("")
    return "\n".join(out)


def _cond_section(summary: dict) -> list[str]:
    """Condition numbers: how to read them, the blocks and the table."""
    if not summary["cond"]:
        return []
    out = [
        "",
        "## Condition numbers (uniform stragglers)",
        "",
        "How to read: `eq` is cond(U_S), the responders' rows of the orthonormal "
        "basis U of the Chebyshev-Vandermonde matrix T (first-kind points: the "
        "equilibrated columns T Lambda^{-1/2}, what ChebyLS factorises; "
        "second-kind points: the QR factor of T); `raw` is cond(T_S). Every "
        "bound is a bound on cond(U_S); cond(T_S) lies within the factor cond(T) "
        "of it (sqrt(2) = 1.414 at first-kind points), so multiply a bound by "
        "that factor before comparing it with a published raw cond(T_S). `inf` "
        "means vacuous, `n/a` not applicable (the gap bounds assume first-kind "
        "points), `unresolved` a cond above 1e15 that float64 cannot resolve. "
        "The probabilistic gap bound is capped by Prop. B where Prop. B is "
        "smaller. Deterministic bounds must never be exceeded; a probabilistic "
        "bound at 1 - eta is violated only if the whole Clopper-Pearson interval "
        "of its exceedance rate lies above eta (intervals at level "
        f"{summary['interval_confidence']:.6f}, Bonferroni for a family-wise "
        f"{summary['family_confidence']}).",
        "",
    ]
    out += _blocks_table(summary)
    out += ["", cond_table(summary), ""]
    return out


def _exhaustive_section(summary: dict) -> list[str]:
    """The exhaustive worst case over every straggler set."""
    if not summary["exhaustive"]:
        return []
    out = [
        "## Exhaustive worst case (all straggler sets, first-kind points)",
        "",
        "The threshold decoder uses the first D responders, and any D of them "
        "can arrive first, so its worst case is the worst D-subset whatever N "
        "is. Condition numbers are cond(U_S).",
        "",
    ]
    head = ["M", "D", "s", "ChebyLS worst (N = M - s)", "exhaustive",
            "threshold worst (D of N)", "exhaustive", "Prop B",
            "worst / M^s"]  # fmt: skip
    out += runkit.md_table(head, (
        [r["M"], r["D"], r["s"], _fc(r["chebyls_worst"]), _f(r["chebyls_exhaustive"]),
         _fc(r["threshold_worst"]), _f(r["threshold_exhaustive"]), _f(r["prop_b"]),
         _f(r["worst_over_M_pow_s"])]
        for r in summary["exhaustive"]
    ))  # fmt: skip
    return out + [""]


def _points_section(summary: dict) -> list[str]:
    """Points and bases at the threshold N = D."""
    cfg = summary["config"]
    if not summary["points"]:
        return []
    out = [
        "## Points and bases at the threshold N = D "
        f"(M = {cfg['points_workers']}, cond(T_S) median / p95 / max)",
        "",
    ]
    out += runkit.md_table(["D", *C.BASES], (
        [r["D"]] + [" / ".join(_fc(r[b][k]) for k in ("median", "p95", "max"))
                    for b in C.BASES]
        for r in summary["points"]
    ))  # fmt: skip
    return out + [""]


def _recovery_section(summary: dict) -> list[str]:
    """RepApprox: P(all K tasks exact) with N of M responding."""
    if not summary["recovery"]:
        return []
    out = [
        "## RepApprox: P(all K tasks exact) with N of M responding",
        "",
        "The union and seed bounds are vacuous where they fall below 0.",
        "",
    ]
    head = ["K", "c", "M", "N", "exact", "union", "seed bound", "Monte Carlo",
            "interval"]  # fmt: skip
    out += runkit.md_table(head, (
        [r["K"], r["c"], r["M"], r["N"]]
        + [f"{r[k]:.6f}" for k in ("exact", "union", "seed_bound", "monte_carlo")]
        + [f"[{r['ci_low']:.6f}, {r['ci_high']:.6f}]"]
        for r in summary["recovery"]
    ))  # fmt: skip
    return out + [""]


def _speed_section(summary: dict) -> list[str]:
    """Run time of the cond Monte Carlo."""
    if not summary["speed"]:
        return []
    out = [
        "## Run time of the cond Monte Carlo",
        "",
        "(Its speed against numpy is measured by `python -m benchmarks.mc_speed`.)",
        "",
    ]
    head = ["points", "M", "D", "#N", "trials", "trials/s", "SVDs/s", "compile s"]
    return out + runkit.md_table(head, (
        [s.get("points", "first"), s["M"], s["D"], s["num_N"], s["trials"],
         f"{s['trials_per_s']:.4g}", f"{s['svds_per_s']:.4g}",
         f"{s['compile_seconds']:.3g}"]
        for s in summary["speed"]
    ))  # fmt: skip


def _plots_section(plots: list) -> list[str]:
    """The plots with their captions."""
    out: list[str] = []
    if plots:
        out += ["", "## Plots", ""]
        for p in plots:
            name, caption = p if isinstance(p, tuple) else (p, "")
            out += [f"![{name}]({name})", ""] + ([caption, ""] if caption else [])
    return out


def print_table(summary: dict) -> None:
    ql = _quantile_label(summary.get("eta", 0.05))
    if summary["cond"]:
        print(
            f"{'pts':>6} {'M':>4} {'D':>3} {'N':>4} | {'eq med':>10} "
            f"{'eq ' + ql:>10} {'eq max':>10} | "
            f"{'PropB':>7} {'gap':>7} {'Chmiss':>7} {'generic':>7}"
        )
    for r in summary["cond"]:
        b = r["bounds"]
        na = set(r.get("not_applicable", ()))

        def bv(name, b=b, na=na):
            return "n/a" if name in na else _f(b.get(name))

        q = "q_eta" if "q_eta" in r["eq"] else "p95"
        print(
            f"{r.get('points', 'first'):>6} {r['M']:>4} {r['D']:>3} {r['N']:>4} | "
            f"{_fc(r['eq']['median']):>10} {_fc(r['eq'][q]):>10} "
            f"{_fc(r['eq']['max']):>10} | "
            + " ".join(f"{bv(b_.name):>7}" for b_ in C.BOUNDS)
        )
    if summary["recovery"]:
        print(
            f"{'K':>3} {'c':>2} {'M':>4} {'N':>4} | {'exact':>9} {'union':>9} "
            f"{'seed':>9} {'MC':>9}"
        )
    for r in summary["recovery"]:
        print(
            f"{r['K']:>3} {r['c']:>2} {r['M']:>4} {r['N']:>4} | {r['exact']:9.6f} "
            f"{r['union']:9.6f} {r['seed_bound']:9.6f} {r['monte_carlo']:9.6f}"
        )
    for r in summary.get("bounds", []):
        if r["M"] is None:
            print(
                f"{r['label']}: {r['held']} of {r['informative']} informative "
                f"checks hold, {r['vacuous']} vacuous"
            )
    rates = [
        r["detectable_rate"]
        for r in summary.get("bounds", [])
        if r.get("detectable_rate") is not None
    ]
    if rates:
        print(
            f"power: a probabilistic bound is flagged only above an exceedance rate "
            f"of {100 * max(rates):.3g}% at {summary['config']['trials']:,} trials"
        )
    for c in summary["checks"]:
        if c["holds"] is False:
            print("FAILED:", c["name"])
    print(f"{summary['headline']}; {summary['seconds']:.0f} s")
