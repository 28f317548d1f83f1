"""Gather the reports of `make run` into one `report.md`.

    python -m theory.collect --out results

Reads `demo/`, `theory/`, `coded_dcn/` and `serve_dcn/` under ``--out`` (whichever
exist), and writes ``--out/report.md`` with each part's report, a one-line verdict
per part (for the coded DCNv2, also its AUC and logloss per scheme at four N), and
links to the plots; with ``--results-page`` that report is also the page
(``docs/results/make-run.md``).
"""

from __future__ import annotations

import json
import math
import os

import runkit
from runkit.pages import report_page

PARTS = (
    ("demo", "Demo: ChebyLS against the threshold decoder (bf16 and float32 workers)"),
    ("theory", "Theory verification: condition-number and recovery bounds"),
    ("coded_dcn", "Coded DCNv2 inference on Adult (bf16 workers)"),
    ("serve_dcn", "Serving the coded DCNv2 (thread cluster, bf16 workers)"),
)


def _verdict(part: str, summary: dict) -> str:
    if part == "theory" and "headline" in summary:
        return summary["headline"] + "."
    if part == "theory" and "checks" in summary:  # a summary from before headlines
        checks = summary["checks"]
        informative = [c for c in checks if c.get("vacuous") is not True]
        held = sum(c.get("holds") is True for c in informative)
        return (
            f"{held} of {len(informative)} informative checks hold; "
            f"{len(checks) - len(informative)} bounds vacuous."
        )
    if part == "coded_dcn" and "uncoded" in summary:
        u = summary["uncoded"]
        return f"uncoded float32 test AUC {u['auc']:.4f}, logloss {u['logloss']:.4f}."
    if part == "serve_dcn" and "float32_model" in summary:
        f32 = summary["float32_model"]
        return (
            f"{summary['queries']} test queries; float32 model AUC {f32['auc']:.4f}, "
            f"logloss {f32['logloss']:.4f}."
        )
    if part == "demo" and "rows" in summary:
        last = summary["rows"][-1]
        return (
            f"ChebyLS with all N={last['N']} bf16 answers: median error "
            f"{last['chebyls_bf16']['median']:.2e} (uncoded bf16 "
            f"{summary['uncoded_bf16_rel_err']:.2e})."
        )
    return ""


def _sci(value) -> str:
    """``-5.1e-2``: a signed difference, two digits, the exponent unpadded."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    mant, exp = f"{value:+.1e}".split("e")
    return f"{mant}e{int(exp)}"


def _columns(ns: list[int], d: int, m: int) -> list[int]:
    """The N of the pivot: D, D + 4, D + 8 and M where measured (else every N)."""
    keep = [n for n in dict.fromkeys((d, d + 4, d + 8, m)) if n in ns]
    return keep or ns


def coded_dcn_pivot(summary: dict) -> str:
    """The coded DCNv2 at a glance: per scheme and N, AUC minus the uncoded
    float32 AUC / logloss; and ChebyLS + RepApprox's median logit error at the
    third N against an uncoded bf16 worker's. Empty for a summary without them."""
    rows = summary.get("coded") or []
    if not rows or "uncoded" not in summary:
        return ""
    ns = sorted({r["N"] for r in rows})
    cfg = summary.get("config", {})
    d = cfg.get("num_coeffs", ns[0])
    cols = _columns(ns, d, cfg.get("num_workers", ns[-1]))
    by = {(r["scheme"], r["N"]): r for r in rows}
    head = "| scheme: AUC - uncoded f32 / logloss | " + " | ".join(
        f"N = {n}" for n in cols
    )
    lines = [head + " |", "|---|" + "---|" * len(cols)]
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        cells = []
        for n in cols:
            r = by.get((scheme, n))
            cells.append(
                "-"
                if r is None
                else f"{_sci(r.get('auc_diff'))} / "
                f"{runkit.fmt(r.get('logloss'), '.3g', '-')}"
            )
        lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
    n = cols[min(2, len(cols) - 1)]
    r = by.get(("chebyls+repapprox", n))
    ub = summary.get("uncoded_bf16", {})
    if r is not None and "logit_rel_err_median" in r:
        lines += [
            "",
            f"chebyls+repapprox at N = {n}: median logit relative error "
            f"{runkit.fmt(r['logit_rel_err_median'], '.3g')} (uncoded "
            f"{ub.get('dtype', 'bf16')}: "
            f"{runkit.fmt(ub.get('logit_rel_err_median'), '.3g', '-')}).",
        ]
    return "\n".join(lines)


def collect(out: str) -> str:
    """Write ``out/report.md`` from the parts present; return its text."""
    sections = ["# codedjax: results of `make run`", ""]
    for part, title in PARTS:
        folder = os.path.join(out, part)
        report = os.path.join(folder, "report.md")
        if not os.path.exists(report):
            sections += [f"## {title}", "", f"(not run: no `{part}/report.md`)", ""]
            continue
        verdict, pivot = "", ""
        summary_path = os.path.join(folder, "summary.json")
        if os.path.exists(summary_path):
            with open(summary_path) as f:
                summary = json.load(f)
            verdict = _verdict(part, summary)
            if part == "coded_dcn":
                pivot = coded_dcn_pivot(summary)
        with open(report) as f:
            body = f.read().strip().splitlines()
        if body and body[0].startswith("# "):
            body = body[1:]
        # demote headings and re-root relative links (plots) under the part folder
        text = (
            "\n".join(("#" + line if line.startswith("#") else line) for line in body)
            .replace("](", f"]({part}/")
            .replace(f"]({part}/http", "](http")
        )
        sections += [f"## {title}", "", verdict, ""]
        sections += [pivot, ""] if pivot else []
        sections += [text.strip(), ""]
    text = "\n".join(sections)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    return text


#: the heading of make run's results page (docs/results/make-run.md)
PAGE_TITLE = "What `make run` shows"


def _run(_cfg: None, cmd: runkit.Invocation) -> None:
    collect(cmd.out)
    print(f"wrote {os.path.join(cmd.out, 'report.md')}")
    report_page(cmd, title=PAGE_TITLE)


def main(argv=None) -> None:
    """Command-line entry point: gathers the reports under ``--out``."""
    runkit.main(
        None,
        _run,
        argv,
        prog="python -m theory.collect",
        description="Gather make run's reports.",
        out="results",
        seed=False,
    )


if __name__ == "__main__":
    main()
