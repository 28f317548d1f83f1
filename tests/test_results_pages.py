"""The pages of docs/results/: each is written by the command that measures it.

Cheap checks, no experiment run: every page the index (docs/results/README.md) lists
is in the format :func:`runkit.write_page` writes (header, figures between the
markers); every command the index names, and every command line of ``make results``
and ``make results-quick``, takes ``--results-page`` (parsed up to ``--help``, which
checks each option given before it and stops); the two targets cover every page.
Two small commands then run end to end: ``theory.collect`` on a made-up
``make run`` folder, and the README's example at tiny settings.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import pathlib
import re
import shlex

import pytest

import runkit
from runkit import pages

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
TARGETS = ("results", "results-quick", "results-make-run", "device-table")


def _index_rows() -> list[tuple[str, str]]:
    """(page, the rest of its row) for every row of the index's table."""
    rows = []
    for line in (RESULTS / "README.md").read_text().splitlines():
        m = re.match(r"\| \[([\w.-]+\.md)\]\(\1\) \|(.*)\|$", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def _recipes() -> dict[str, list[str]]:
    """The Makefile's recipe lines (continuations joined) of :data:`TARGETS`."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    recipes: dict[str, list[str]] = {}
    target = None
    for line in text.splitlines():
        head = re.match(r"^([\w-]+):", line)
        if head:
            target = head.group(1)
            continue
        if line.startswith("\t") and target in TARGETS:
            recipes.setdefault(target, []).append(" ".join(line.split()))
    return recipes


def _main_of(module: str):
    mod = importlib.import_module(module)
    if hasattr(mod, "__path__"):  # a package: its command is its __main__
        mod = importlib.import_module(f"{module}.__main__")
    return mod.main


def _help(module: str, argv: list[str]) -> str:
    """``module``'s ``--help`` after ``argv`` (each option before it is parsed and
    checked first); fails unless it exits 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        _main_of(module)([*argv, "--help"])
    assert info.value.code == 0, f"{module} {shlex.join(argv)}: exit {info.value.code}"
    return out.getvalue()


def test_the_index_lists_every_page_and_each_is_a_written_page():
    rows = _index_rows()
    listed = [page for page, _ in rows]
    on_disk = sorted(p.name for p in RESULTS.glob("*.md") if p.name != "README.md")
    assert sorted(listed) == on_disk
    for page in listed:
        text = (RESULTS / page).read_text()
        lines = text.splitlines()
        assert lines[0].startswith("# ") and lines[1] == "", page
        assert lines[2].startswith("- Command: `") and lines[2].endswith("`"), page
        assert lines[3].startswith("- Recorded at: "), page
        assert text.count(pages.BEGIN) == 1 and text.count(pages.END) == 1, page
        assert text.index(pages.BEGIN) < text.index(pages.END), page
        assert "does not rewrite this page" not in text, page


def test_every_command_of_the_index_takes_results_page(monkeypatch):
    monkeypatch.setenv(runkit.NO_PROGRESS_ENV, "")  # restored after the test
    modules = set()
    for page, row in _index_rows():
        found = re.findall(r"python -m ([\w.]+)", row)
        make = re.findall(r"`make ([\w-]+)", row)
        assert found or make, f"{page}: the index names no command"
        modules |= set(found)
    assert {"theory.example", "theory.collect", "benchmarks.regimes"} <= modules
    for module in sorted(modules):
        assert "--results-page" in _help(module, []), module


def test_make_results_writes_every_page_by_its_command(tmp_path, monkeypatch):
    monkeypatch.setenv(runkit.NO_PROGRESS_ENV, "")
    recipes = _recipes()
    assert set(recipes) == set(TARGETS)
    device = {"$(DEVICE)": "cpu", "$(QUICK)": "--quick"}
    listed = {page for page, _ in _index_rows()}
    for target in ("results", "results-quick"):
        lines = recipes[target] + recipes["results-make-run"]
        if any(line.startswith("$(MAKE) device-table") for line in lines):
            lines = lines + [recipes["device-table"][0]]
        written = set()
        for line in lines:
            for key, value in {**device, "$(OUT)": str(tmp_path)}.items():
                line = line.replace(key, value)
            line = line.replace("$(PAGES)", "docs/results")
            m = re.search(r"\$\(PY\) -m ([\w.]+) (.*)$", line)
            if m is None:
                continue
            argv = shlex.split(m.group(2))
            assert "--results-page" in argv, line
            page = argv[argv.index("--results-page") + 1]
            assert page.startswith("docs/results/") and page.endswith(".md"), line
            written.add(page.removeprefix("docs/results/"))
            assert "--results-page" in _help(m.group(1), argv), line
        assert written == listed, f"make {target}: {sorted(written ^ listed)}"


def _fake_make_run(out: pathlib.Path) -> None:
    """A ``make run`` folder: the demo's report and the coded DCNv2's summary."""
    (out / "demo").mkdir(parents=True)
    (out / "demo" / "report.md").write_text(
        "# Demo\n\n| N | err |\n|---|---|\n| 22 | 0.4 |\n\n![cond](cond.png)\n"
    )
    (out / "coded_dcn").mkdir()
    (out / "coded_dcn" / "report.md").write_text("# Coded DCNv2\n\nper scheme\n")
    coded = [
        {"scheme": s, "N": n, "auc": 0.9, "auc_diff": -1e-3 * (40 - n),
         "logloss": 0.3 + 0.01 * (40 - n), "logit_rel_err_median": 2e-3}
        for s in ("chebyls+repapprox", "bacc") for n in (22, 24, 26, 30, 40)
    ]  # fmt: skip
    summary = {
        "config": {"num_coeffs": 22, "num_workers": 40},
        "uncoded": {"auc": 0.9, "logloss": 0.3},
        "uncoded_bf16": {"dtype": "bfloat16", "logit_rel_err_median": 3e-3},
        "coded": coded,
    }
    (out / "coded_dcn" / "summary.json").write_text(json.dumps(summary))


def test_collect_writes_make_runs_page_with_the_pivot(tmp_path):
    from theory import collect

    out, page = tmp_path / "run", tmp_path / "pages" / "make-run.md"
    _fake_make_run(out)
    argv = ["--out", str(out), "--results-page", str(page)]
    collect.main(argv)
    text = page.read_text()
    assert text.startswith(f"# {collect.PAGE_TITLE}\n")
    assert f"- Command: `python -m theory.collect {shlex.join(argv)}`" in text
    figures = text[text.index(pages.BEGIN) : text.index(pages.END)]
    # the report without its own heading, the plot named by its path under --out
    assert "# codedjax: results of `make run`" not in figures
    assert f"cond: `{out.as_posix()}/demo/cond.png`" in figures
    assert "| 22 | 0.4 |" in figures and "(not run: no `theory/report.md`)" in figures
    # the pivot: D, D + 4, D + 8 and M, where measured (24 is not a column)
    assert "| scheme: AUC - uncoded f32 / logloss | N = 22 | N = 26 | N = 30 | " \
        "N = 40 |" in figures  # fmt: skip
    assert "| bacc | -1.8e-2 / 0.48 | -1.4e-2 / 0.44 | -1.0e-2 / 0.4 | " \
        "0 / 0.3 |" in figures  # fmt: skip
    assert "chebyls+repapprox at N = 30: median logit relative error 0.002 " \
        "(uncoded bfloat16: 0.003)." in figures  # fmt: skip


def test_example_writes_its_page_and_keeps_the_reading(tmp_path):
    from theory import example

    page = tmp_path / "pages" / "x.md"
    argv = ["--masks", "2", "--responses", "22", "40", "--out", str(tmp_path / "o")]
    example.main([*argv, "--results-page", str(page)])
    text = page.read_text()
    lines = text.splitlines()
    assert lines[0] == f"# {example.PAGE_TITLE}"
    assert lines[2] == f"- Command: `python -m theory.example {shlex.join(argv)} " \
        f"--results-page {page}`"  # fmt: skip
    assert re.match(r"- Recorded at: commit `\w+`.*UTC, jax .*CPU cores?$", lines[3])
    figures = text[text.index(pages.BEGIN) : text.index(pages.END)]
    report = (tmp_path / "o" / "report.md").read_text()
    assert figures.strip().removeprefix(pages.BEGIN).strip() == pages.report_body(
        report, str(tmp_path / "o")
    )
    rows = [ln.split(" | ")[0] for ln in figures.splitlines() if ln.startswith("| ")]
    assert rows == ["| N", "| 22", "| 40"]
    assert "2 random responding sets per N" in figures
    with open(page, "a") as f:
        f.write("\nThe reading.\n")
    example.main([*argv, "--results-page", str(page)])
    again = page.read_text()
    assert again.rstrip().endswith("The reading.") and again.count(pages.END) == 1
