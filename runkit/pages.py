"""Results pages: a command writes its own page under ``docs/results/``.

A page is headed by the command that produced its figures, the commit, the date and
the machine's load, and holds the figures between two markers; whatever a person
wrote after the end marker (how to read the figures) is kept when the command writes
the page again::

    # Title

    - Command: `python -m benchmarks.load --quick ...`
    - Recorded at: commit `abc1234` (with uncommitted changes), 2026-12-04 22:10 UTC,
      jax 0.10.2, cpu x1 (AMD EPYC), load 3.2 on 2 CPU cores

    <!-- figures: written by the command above; edits here are overwritten -->
    ...the report...
    <!-- end of figures -->

    ...commentary, kept...

Every command line of the applications takes ``--results-page PATH``
(:func:`runkit.command_parser`, or :func:`add_page_option` for a command whose
``--out`` has no default) and writes its ``report.md`` there through
:meth:`runkit.Invocation.write_page` (:func:`report_page` reads the report and
turns its plots into paths under ``--out``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import posixpath
import re
import shlex
import sys
from typing import Any

from .arguments import text as _text
from .environment import environment, git_output

__all__ = [
    "BEGIN",
    "END",
    "add_page_option",
    "block_file",
    "command_line",
    "load_average",
    "page_text",
    "read_report",
    "recorded_at",
    "report_body",
    "report_page",
    "write_block",
    "write_page",
]

BEGIN = "<!-- figures: written by the command above; edits here are overwritten -->"
END = "<!-- end of figures -->"


def command_line(argv: list[str] | None = None) -> str:
    """The command as a reader would type it: ``python -m <module> <args>``."""
    argv = sys.argv if argv is None else argv
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if name:
        head = "python -m " + name.removesuffix(".__main__")
    else:
        head = "python " + (argv[0] if argv else "?")
    return " ".join([head, *(shlex.quote(a) for a in argv[1:])])


def _dirty() -> bool:
    return bool(git_output("status", "--porcelain", "--untracked-files=no"))


def load_average() -> str:
    """``load 3.2 on 2 CPU cores``: the 1-minute load average (``os.getloadavg``)
    against the cores, since every timing depends on it; ``2 CPU cores`` where the
    system has no load average."""
    cores = os.cpu_count()
    noun = "CPU core" if cores == 1 else "CPU cores"
    where = f"{cores if cores is not None else '?'} {noun}"
    try:
        one = os.getloadavg()[0]
    except (OSError, AttributeError):
        return where
    return f"load {one:.1f} on {where}"


def recorded_at() -> str:
    """``commit `abc1234` [(with uncommitted changes)], <UTC date>, jax <v>,
    <devices>, load <1-minute average> on <n> CPU cores``: where and when a page's
    figures were recorded."""
    env = environment()
    rev = env.get("git_revision") or "unknown"
    dirty = " (with uncommitted changes)" if _dirty() else ""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    dev = f"{env['backend']} x{env['num_devices']} ({env['device_name']})"
    return (
        f"commit `{rev}`{dirty}, {now}, jax {env.get('jax_version', '?')}, {dev}, "
        f"{load_average()}"
    )


def _commentary(path: str) -> str:
    """What follows the end marker of an existing page (kept on rewrite)."""
    if not os.path.isfile(path):
        return ""
    with open(path) as f:
        text = f.read()
    _, sep, after = text.partition(END)
    return after.strip("\n") if sep else ""


def page_text(
    *,
    title: str,
    body: str,
    command: str,
    recorded: str,
    intro: str = "",
    kept: str = "",
) -> str:
    """The text of a page (what :func:`write_page` writes): the heading, the
    ``- Command:`` and ``- Recorded at:`` lines, ``intro``, ``body`` between
    :data:`BEGIN` and :data:`END`, then ``kept`` (the commentary)."""
    parts = [f"# {title}", "", f"- Command: `{command}`", f"- Recorded at: {recorded}"]
    parts.append("")
    if intro:
        parts += [intro.strip(), ""]
    parts += [BEGIN, "", body.strip("\n"), "", END]
    if kept:
        parts += ["", kept]
    return "\n".join(parts) + "\n"


def write_page(
    path: str,
    *,
    title: str,
    body: str,
    command: str | None = None,
    intro: str = "",
    recorded: str | None = None,
) -> str:
    """Write the results page ``path`` (markdown) and return its text.

    Args:
        path: the page, a ``.md`` file (its folder is created).
        title: the page's heading.
        body: the figures (markdown), placed between :data:`BEGIN` and :data:`END`.
        command: the command line (default: this process's, :func:`command_line`).
        intro: a paragraph placed before the figures (what the table shows).
        recorded: the "Recorded at" line (default: :func:`recorded_at` now); a
            run that writes several files passes one, taken before the first
            (after it the tree holds that file's change).

    Raises:
        ValueError: ``path`` is not a ``.md`` file name.
    """
    if not isinstance(path, str) or not path.endswith(".md"):
        raise ValueError(f"write_page: path must name a .md file, got {path!r}")
    if os.path.isdir(path):
        raise ValueError(f"write_page: path must be a file, got {path!r} (a folder)")
    text = page_text(
        title=title,
        body=body,
        command=command_line() if command is None else command,
        recorded=recorded_at() if recorded is None else recorded,
        intro=intro,
        kept=_commentary(path),
    )
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return text


def write_block(
    path: str, *, body: str, command: str | None = None, recorded: str | None = None
) -> str:
    """Rewrites only the figures of a document that is not a results page (the
    README's speed table): the text between :data:`BEGIN` and :data:`END` in
    ``path`` becomes the command, ``recorded`` (default :func:`recorded_at`) and
    ``body``; everything else is kept. Returns the new text.

    Raises:
        ValueError: ``path`` is not an existing ``.md`` file holding both
            markers, in order.
    """
    if (
        not isinstance(path, str)
        or not path.endswith(".md")
        or not os.path.isfile(path)
    ):
        raise ValueError(
            f"write_block: path must name an existing .md file, got {path!r}"
        )
    with open(path) as f:
        text = f.read()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise ValueError(
            f"write_block: {path!r} must hold the markers {BEGIN!r} and {END!r}, "
            f"in that order"
        )
    cmd = command_line() if command is None else command
    rec = recorded_at() if recorded is None else recorded
    block = f"\n\n`{cmd}`: {rec}.\n\n{body.strip(chr(10))}\n\n"
    new = head + BEGIN + block + END + tail
    with open(path, "w") as f:
        f.write(new)
    return new


def page_file(value: str) -> str:
    """``--results-page``: a markdown file (``.md``) that is not a folder, checked
    at parse time (a bad page is refused before any work)."""
    _text(value)
    if not value.endswith(".md"):
        raise argparse.ArgumentTypeError(
            f"expected a markdown file (.md), got {value!r}"
        )
    if os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"expected a file, got {value!r} (a folder)")
    return value


def block_file(value: str) -> str:
    """``--readme``: an existing markdown file that holds the figures' markers
    (:func:`write_block`), checked at parse time (refused before any work)."""
    page_file(value)
    if not os.path.isfile(value):
        raise argparse.ArgumentTypeError(f"expected an existing file, got {value!r}")
    with open(value) as f:
        text = f.read()
    if BEGIN not in text or END not in text.partition(BEGIN)[2]:
        raise argparse.ArgumentTypeError(
            f"expected a file holding the figures' markers, got {value!r} without"
        )
    return value


def add_page_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Adds ``--results-page PAGE.md`` to ``parser`` unless it has it already
    (:func:`runkit.command_parser` calls it for every command)."""
    if "--results-page" not in parser._option_string_actions:
        parser.add_argument(
            "--results-page",
            type=page_file,
            metavar="PAGE.md",
            help="also write the figures to this results page (docs/results/), "
            "headed by the command, the commit and the date",
        )
    return parser


# a markdown link or image: [text](target) / ![alt](target)
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^()\s]+)\)")


def _outside(target: str) -> bool:
    return target.startswith(("#", "/")) or "://" in target or ":" in target[:8]


def report_body(text: str, folder: str | None = None) -> str:
    """A ``report.md`` as a page's figures: without its ``# `` heading and its own
    ``- Command:`` / ``- Recorded at:`` lines (the page has them), and, with
    ``folder`` (the run's ``--out``), each link to a file of the run (a plot) as
    that file's path under ``folder``, so that it names the file from any page."""
    lines = text.strip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and lines[0].startswith(("- Command:", "- Recorded at:")):
        lines = lines[1:]
        while lines and lines[0].startswith("  ") and lines[0].strip():
            lines = lines[1:]  # the bullet's continuation lines
    body = "\n".join(lines).strip("\n")
    if folder is None:
        return body

    def name(m: re.Match) -> str:
        image, label, target = m.groups()
        if _outside(target):
            return m.group(0)
        path = posixpath.normpath(posixpath.join(folder.replace(os.sep, "/"), target))
        if image:
            return f"{label or 'plot'}: `{path}`"
        return f"{label} (`{path}`)"

    return _LINK.sub(name, body)


def read_report(folder: str, name: str = "report.md") -> str:
    """:func:`report_body` of the report ``folder/name`` a run wrote.

    Raises:
        FileNotFoundError: the run wrote no such report.
    """
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"read_report: expected the report the run writes at {path!r}, found none"
        )
    with open(path) as f:
        return report_body(f.read(), folder)


def report_page(
    invocation: Any,
    *,
    title: str,
    folder: str | None = None,
    report: str = "report.md",
    intro: str = "",
) -> str | None:
    """Writes the ``--results-page`` of ``invocation`` (a
    :class:`runkit.Invocation`) from the report its run wrote,
    ``folder/report`` (``folder``: its ``--out``), by
    :meth:`~runkit.Invocation.write_page`; returns the page's path, None when no
    page was asked for (then nothing is read)."""
    if not getattr(invocation, "results_page", None):
        return None
    body = read_report(invocation.out if folder is None else folder, report)
    return invocation.write_page(title=title, body=body, intro=intro)
