"""Gather the reports of `make run` into one `report.md`.

    python -m theory.collect --out results

Reads `demo/`, `theory/`, `coded_dcn/` and `serve_dcn/` under ``--out`` (whichever
exist), and writes ``--out/report.md`` with each part's report, a one-line verdict
per part, and links to the plots.
"""

from __future__ import annotations

import argparse
import json
import os

import runkit

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


def collect(out: str) -> str:
    """Write ``out/report.md`` from the parts present; return its text."""
    sections = ["# codedjax: results of `make run`", ""]
    for part, title in PARTS:
        folder = os.path.join(out, part)
        report = os.path.join(folder, "report.md")
        if not os.path.exists(report):
            sections += [f"## {title}", "", f"(not run: no `{part}/report.md`)", ""]
            continue
        verdict = ""
        summary_path = os.path.join(folder, "summary.json")
        if os.path.exists(summary_path):
            with open(summary_path) as f:
                verdict = _verdict(part, json.load(f))
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
        sections += [f"## {title}", "", verdict, "", text.strip(), ""]
    text = "\n".join(sections)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    return text


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Gather make run's reports.")
    runkit.add_run_arguments(parser, out="results", quick=False, seed=False)
    args = parser.parse_args(argv)
    collect(args.out)
    print(f"wrote {os.path.join(args.out, 'report.md')}")


if __name__ == "__main__":
    main()
