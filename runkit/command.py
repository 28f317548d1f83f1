"""Every experiment's command line in one call: :func:`main`.

A ``python -m`` entry point of ``theory/``, ``models/`` or ``benchmarks/`` is::

    def main(argv=None):
        return runkit.main(Config, _run, argv, prog="python -m pkg.name",
                           description="...", flags=FLAGS, out="results/name")

:func:`main` builds the parser (:func:`command_parser`: the run arguments of
:func:`~runkit.add_run_arguments` and one flag per field named in ``flags``, by
:func:`~runkit.add_config_arguments`), parses ``argv``, lets ``check`` refuse
options given against each other, builds the config with :func:`config_from_args`
(``Config.quick(**given)`` under ``--quick``, by :func:`preset`, the one place that
flag is read; ``Config(**given)`` otherwise; the config's own checks run then, their
errors said in flags) and returns ``run(config, invocation)``: the run gets the
config and an :class:`Invocation` (the parsed arguments, ``--out``, the progress
switch and the command line as typed, for the summary). A command with modes (a
second config, or none) calls :func:`parse_command` and builds the config of its
mode with :meth:`Invocation.config`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from .arguments import (
    add_config_arguments,
    add_run_arguments,
    config_overrides,
    make_config,
)
from .pages import add_page_option, recorded_at, write_page

__all__ = [
    "Invocation",
    "command_parser",
    "config_from_args",
    "main",
    "parse_command",
    "preset",
]


def preset(args: argparse.Namespace, config: Any) -> Callable[..., Any]:
    """The one place ``--quick`` is read: ``config.quick`` when it was given, else
    ``config`` itself (either called with the fields to set)."""
    return config.quick if getattr(args, "quick", False) else config


def config_from_args(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    config: type,
    flags: Mapping[str, Any],
    *,
    validate: Callable[[Any], None] | None = None,
    **fixed: Any,
) -> Any:
    """The config of the parsed flags, built and checked before any work.

    ``config.quick(**given)`` under ``--quick``, ``config(**given)`` otherwise
    (:func:`preset`), where ``given`` is every field set on the command line
    (:func:`~runkit.config_overrides`: the flags of ``flags``, and ``--seed`` for
    a config with a ``seed`` field), ``progress=False`` under ``--no-progress`` for
    a config with a ``progress`` field, and ``fixed`` on top. ``validate(config)``
    then runs the checks the config does not do itself. A ``ValueError`` or
    ``TypeError`` of either is refused in flags (:func:`~runkit.make_config`).
    """
    over = config_overrides(args, config)
    if getattr(args, "no_progress", False) and any(
        f.name == "progress" for f in dataclasses.fields(config)
    ):
        over["progress"] = False
    over.update(fixed)
    labels = {"seed": "--seed", **flags} if hasattr(args, "seed") else flags
    make = preset(args, config)

    def build(**given: Any) -> Any:
        cfg = make(**given)
        if validate is not None:
            validate(cfg)
        return cfg

    return make_config(parser, labels, build, **over)


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What a command's run function gets besides its config.

    Attributes:
      parser: the command's parser (:meth:`error` refuses through it).
      args: the parsed arguments (the options that are no config field).
      command: the command line as typed (``python -m pkg.name --flag ...``).
    """

    parser: argparse.ArgumentParser
    args: argparse.Namespace
    command: str

    @property
    def out(self) -> str:
        """``--out``: the folder the run writes into."""
        return self.args.out

    @property
    def progress(self) -> bool:
        """False under ``--no-progress`` (bars are then off everywhere anyway)."""
        return not getattr(self.args, "no_progress", False)

    @property
    def show_progress(self) -> bool | None:
        """The ``show_progress`` of the trainers: False under ``--no-progress``,
        else None (tqdm's rule: bars on a terminal only)."""
        return None if self.progress else False

    @property
    def results_page(self) -> str | None:
        """``--results-page``: the ``docs/results/`` page to write, or None."""
        return getattr(self.args, "results_page", None)

    @functools.cached_property
    def recorded(self) -> str:
        """The run's "Recorded at" line (``runkit.pages.recorded_at``), taken
        once, before its first page: every file the run writes gets the same
        (a later one would see the earlier pages as uncommitted changes)."""
        return recorded_at()

    def write_page(self, *, title: str, body: str, intro: str = "") -> str | None:
        """Writes the ``--results-page`` page (:func:`runkit.write_page`) with
        this command line and :attr:`recorded` in its header; returns its path
        (None: not asked)."""
        if not self.results_page:
            return None
        write_page(
            self.results_page, title=title, body=body, command=self.command,
            intro=intro, recorded=self.recorded,
        )  # fmt: skip
        return self.results_page

    def error(self, message: str) -> NoReturn:
        """Refuses the command line: one line on stderr, exit status 2."""
        self.parser.error(message)

    def config(
        self,
        config: type,
        flags: Mapping[str, Any] | None = None,
        *,
        validate: Callable[[Any], None] | None = None,
        **fixed: Any,
    ) -> Any:
        """The ``config`` of the parsed flags (:func:`config_from_args`)."""
        return config_from_args(
            self.parser, self.args, config, flags or {}, validate=validate, **fixed
        )


def _quick_help(config: type | None, quick: str | bool | None) -> str | bool:
    """The ``--quick`` help text: ``quick`` itself, or (None) the first paragraph
    of ``config.quick``'s docstring when the config has that preset, else no flag."""
    if quick is not None:
        return quick
    method = getattr(config, "quick", None)
    if not callable(method):
        return False
    doc = " ".join((method.__doc__ or "").strip().split("\n\n")[0].split())
    return doc or f"the small configuration ({config.__name__}.quick())"


def command_parser(
    config: type | None,
    *,
    prog: str,
    description: str,
    flags: Mapping[str, Any] | None = None,
    out: str | None = None,
    quick: str | bool | None = None,
    seed: int | None | bool = 0,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.ArgumentParser:
    """The parser of a command whose settings are the frozen dataclass ``config``.

    Args:
      config: the config class (None: a command with the run arguments only).
      prog: how the command is typed (``python -m pkg.name``): the lead of every
        error line.
      description: the ``--help`` text; one of several paragraphs is shown as
        written, a single paragraph is reflowed.
      flags: field -> flag, as :func:`~runkit.add_config_arguments` takes them.
      out, seed: as :func:`~runkit.add_run_arguments` takes them.
      quick: the ``--quick`` help text; None: the first paragraph of
        ``config.quick.__doc__`` when the config has that preset, no flag when it
        has none; False: no flag.
      options: adds the options that are no field of ``config`` (a mode, a
        checkpoint folder, a port).

    Returns:
      The parser (bad options reported in one line, its numbers checked).
    """
    raw = "\n\n" in description.strip()
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter
        if raw
        else argparse.HelpFormatter,
    )
    add_run_arguments(parser, out=out, quick=_quick_help(config, quick), seed=seed)
    add_page_option(parser)
    if config is not None:
        add_config_arguments(parser, config, flags or {})
    if options is not None:
        options(parser)
    return parser


def parse_command(
    config: type | None,
    argv: Sequence[str] | None = None,
    *,
    check: Callable[[argparse.ArgumentParser, argparse.Namespace], None] | None = None,
    **parser: Any,
) -> Invocation:
    """Parses ``argv`` (None: ``sys.argv[1:]``) with the parser
    :func:`command_parser` builds for ``config`` (the keywords of ``parser``);
    ``check(parser, args)`` then refuses options given against each other
    (``runkit.only_with``, ``runkit.not_with``).

    Returns:
      The :class:`Invocation` (its :meth:`~Invocation.config` builds a config).
    """
    p = command_parser(config, **parser)
    words = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(words)
    if check is not None:
        check(p, args)
    command = " ".join([p.prog, shlex.join(words)]) if words else p.prog
    return Invocation(p, args, command)


def main(
    config: type | None,
    run: Callable[[Any, Invocation], Any],
    argv: Sequence[str] | None = None,
    *,
    flags: Mapping[str, Any] | None = None,
    validate: Callable[[Any], None] | None = None,
    **parser: Any,
) -> Any:
    """A whole command line: :func:`parse_command` (``config``, ``argv``, ``flags``
    and the other keywords, ``check`` among them), then the config of the flags
    (:func:`config_from_args`: checked by its own ``__post_init__`` and by
    ``validate(config)`` before any work; None when ``config`` is None).

    Returns:
      ``run(config, invocation)``.
    """
    cmd = parse_command(config, argv, flags=flags, **parser)
    cfg = None if config is None else cmd.config(config, flags, validate=validate)
    return run(cfg, cmd)
