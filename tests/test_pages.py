"""runkit.write_page: a results page headed by command, commit and date, its figures
between markers, the commentary after them kept on rewrite."""

import re

import pytest

import runkit
from runkit import pages


def test_page_has_header_figures_and_keeps_commentary(tmp_path):
    path = str(tmp_path / "sub" / "page.md")
    text = runkit.write_page(
        path, title="Load", body="| a |\n|---|\n| 1 |", command="python -m x --quick"
    )
    assert text.startswith("# Load\n\n- Command: `python -m x --quick`\n")
    rec = re.search(
        r"- Recorded at: commit `(\w+)`.*, (\d{4}-\d\d-\d\d \d\d:\d\d) UTC, jax .*"
        r"(load \d+\.\d on )?\d+ CPU cores?\n",
        text,
    )
    assert rec is not None
    assert text.index(pages.BEGIN) < text.index("| 1 |") < text.index(pages.END)
    with open(path, "a") as f:
        f.write("\nHow to read it: the rate is per second.\n")
    again = runkit.write_page(path, title="Load", body="| b |", command="python -m x")
    assert "| 1 |" not in again and "| b |" in again
    assert again.rstrip().endswith("How to read it: the rate is per second.")
    assert again.count(pages.END) == 1


def test_page_intro_sits_before_the_figures(tmp_path):
    text = runkit.write_page(
        str(tmp_path / "p.md"), title="T", body="x", command="c", intro="What it shows."
    )
    assert text.index("What it shows.") < text.index(pages.BEGIN)


@pytest.mark.parametrize("bad", ["page.txt", 3])
def test_page_refuses_a_name_that_is_not_markdown(tmp_path, bad):
    with pytest.raises(ValueError, match=r"write_page: path must name a \.md file"):
        runkit.write_page(bad, title="T", body="x", command="c")


def test_page_refuses_a_folder(tmp_path):
    (tmp_path / "d.md").mkdir()
    with pytest.raises(ValueError, match="a folder"):
        runkit.write_page(str(tmp_path / "d.md"), title="T", body="x", command="c")


def test_command_line_names_the_module(monkeypatch):
    assert pages.command_line(["prog", "--out", "a b"]).endswith("--out 'a b'")


def test_recorded_at_names_the_load_on_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(pages.os, "getloadavg", lambda: (3.21, 1.0, 0.5))
    monkeypatch.setattr(pages.os, "cpu_count", lambda: 2)
    assert pages.load_average() == "load 3.2 on 2 CPU cores"
    assert pages.recorded_at().endswith(", load 3.2 on 2 CPU cores")
    text = runkit.write_page(str(tmp_path / "p.md"), title="T", body="x", command="c")
    line = text.splitlines()[3]
    assert re.fullmatch(
        r"- Recorded at: commit `\w+`.* UTC, jax .*, load 3\.2 on 2 CPU cores", line
    )


def test_load_average_without_one_names_the_cores(monkeypatch):
    def unavailable():
        raise OSError("no load average")

    monkeypatch.setattr(pages.os, "getloadavg", unavailable)
    monkeypatch.setattr(pages.os, "cpu_count", lambda: 1)
    assert pages.load_average() == "1 CPU core"


def test_page_text_is_what_write_page_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(pages, "recorded_at", lambda: "commit `abc`, now")
    path = tmp_path / "p.md"
    text = runkit.write_page(str(path), title="T", body="| 1 |", command="c", intro="I")
    kw = dict(title="T", body="| 1 |", command="c", recorded="commit `abc`, now")
    assert text == pages.page_text(**kw, intro="I") == path.read_text()
    assert pages.page_text(**kw, kept="K").endswith(f"{pages.END}\n\nK\n")


REPORT = """# Load benchmark

- Command: `python -m benchmarks.load --quick`
- Recorded at: commit `abc` (2026-12-04),
  jax 0.10.2
- Device: cpu

| a |
|---|

![p99 against load](p99.png) and [the data](sub/d.json), [docs](https://x.org/a.md),
[top](#top), ![abs](/tmp/a.png)
"""


def test_report_body_drops_the_reports_header_and_names_plots_under_out():
    body = pages.report_body(REPORT, "results/load")
    assert body.startswith("- Device: cpu\n\n| a |")
    assert "Command" not in body and "jax 0.10.2" not in body
    assert "p99 against load: `results/load/p99.png`" in body
    assert "the data (`results/load/sub/d.json`)" in body
    # links that leave the run's folder stay links
    assert "[docs](https://x.org/a.md)" in body and "[top](#top)" in body
    assert "![abs](/tmp/a.png)" in body
    # without a folder, the links are kept as they are
    assert "![p99 against load](p99.png)" in pages.report_body(REPORT)
    assert pages.report_body("no heading\n") == "no heading"


class _Invocation:
    def __init__(self, out, page):
        self.out, self.results_page, self.pages = out, page, []

    def write_page(self, *, title, body, intro=""):
        self.pages.append((title, body, intro))
        return self.results_page


def test_report_page_reads_the_report_only_when_a_page_is_asked(tmp_path):
    missing = str(tmp_path / "never-written")
    assert pages.report_page(_Invocation(missing, None), title="T") is None
    inv = _Invocation(str(tmp_path), "docs/p.md")
    with pytest.raises(FileNotFoundError, match="read_report: expected the report"):
        pages.report_page(inv, title="T")
    (tmp_path / "report.md").write_text(REPORT)
    assert pages.report_page(inv, title="Load", intro="I") == "docs/p.md"
    ((title, body, intro),) = inv.pages
    assert (title, intro) == ("Load", "I")
    assert body == pages.report_body(REPORT, str(tmp_path))


def test_add_page_option_adds_the_flag_once():
    parser = runkit.command_parser(None, prog="p", description="d", out="o")
    assert pages.add_page_option(parser) is parser  # the run kit's flag: kept
    bare = runkit.command_parser(None, prog="p", description="d")
    pages.add_page_option(pages.add_page_option(bare))
    args = bare.parse_args(["--out", "x", "--results-page", "a.md"])
    assert args.results_page == "a.md"


def test_block_rewrites_only_the_figures_of_a_document(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# Guide\n\nIntro.\n\n{pages.BEGIN}\nold\n{pages.END}\n\nAfter.\n")
    text = pages.write_block(str(path), body="| new |", command="python -m b")
    assert text.startswith("# Guide\n\nIntro.\n\n" + pages.BEGIN)
    assert "old" not in text and "| new |" in text and "`python -m b`: commit" in text
    assert text.endswith(pages.END + "\n\nAfter.\n")
    path.write_text("# Guide without markers\n")
    with pytest.raises(ValueError, match="write_block: .* must hold the markers"):
        pages.write_block(str(path), body="x", command="c")
    with pytest.raises(ValueError, match="write_block: path must name an existing"):
        pages.write_block(str(tmp_path / "none.md"), body="x", command="c")


def test_a_run_writing_a_page_and_a_block_records_one_header(tmp_path, monkeypatch):
    """A run's first page dirties the tree; the block the same run writes after
    it (the README's speed table) must not say "with uncommitted changes" when
    the page does not: both take the run's one ``Invocation.recorded``."""
    page, readme = tmp_path / "page.md", tmp_path / "README.md"
    readme.write_text(f"# R\n\n{pages.BEGIN}\nold\n{pages.END}\n")
    written: list = []
    monkeypatch.setattr(pages, "_dirty", lambda: bool(written))
    real = pages.write_page

    def write_page(*args, **kw):
        written.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(runkit.command, "write_page", write_page)
    argv = ["--out", str(tmp_path), "--results-page", str(page)]
    inv = runkit.parse_command(None, argv, prog="p", description="d")
    inv.write_page(title="T", body="| 1 |")
    assert pages.recorded_at().startswith("commit `") and written
    assert "uncommitted" in pages.recorded_at()  # what a second look would say
    text = pages.write_block(str(readme), body="| 2 |", command=inv.command,
                             recorded=inv.recorded)  # fmt: skip
    head = page.read_text().splitlines()[3].removeprefix("- Recorded at: ")
    assert head == inv.recorded and "uncommitted" not in head
    assert f": {inv.recorded}." in text
