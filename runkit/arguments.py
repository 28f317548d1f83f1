"""The command-line arguments the experiments share, added by one call.

Every ``__main__`` of ``theory/``, ``models/`` and ``benchmarks/`` builds its parser
with :func:`add_run_arguments` (``--out``, ``--quick``, ``--seed``,
``--no-progress``) and maps the flags of its frozen config dataclass with
:func:`add_config_arguments` and :func:`config_overrides`: a flag that is not given
leaves the config's own default (or its ``quick()`` preset) alone.

A parser that has the run arguments reports a bad option as one line on stderr,
``prog: error: --option: what was expected, got what came``, and exits with
status 2, never with a traceback; every ``int`` option takes an integer >= 0
and every ``float`` option a finite number >= 0 (a command checks its own
ranges beyond that, with ``parser.error``, before it starts any work).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from .progress import NO_PROGRESS_ENV, disable_progress

__all__ = [
    "add_config_arguments",
    "add_run_arguments",
    "at_least",
    "config_overrides",
    "count",
    "nonneg_float",
    "one_line_errors",
    "refuse",
]


class _NoProgress(argparse.Action):
    """``--no-progress``: turns every bar of the process off when parsed."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        disable_progress()


def count(text: str) -> int:
    """An ``int`` option: an integer >= 0 (a count, a size, a seed, an index)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 0, got {text!r}"
        ) from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def nonneg_float(text: str) -> float:
    """A ``float`` option: a finite number >= 0 (never NaN or inf)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a finite number >= 0, got {text!r}"
        ) from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


_CHECKED = {int: count, float: nonneg_float}


def _one_line_error(parser: argparse.ArgumentParser):
    def error(message: str):
        text = " ".join(str(message).split())
        # argparse says "argument --x/-x: ..."; name the option the user typed
        if text.startswith("argument "):
            head, sep, rest = text[len("argument ") :].partition(": ")
            text = f"{head.split('/')[0]}: {rest}" if sep else text
        parser.exit(2, f"{parser.prog}: error: {text}\n")

    return error


def _checked_parse(parser: argparse.ArgumentParser):
    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        for action in parser._actions:
            if action.type in _CHECKED:
                action.type = _CHECKED[action.type]
        return parse(args, namespace)

    return parse_known_args


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Makes ``parser`` report every bad option in one line and check its numbers
    (what :func:`add_run_arguments` does to every command's parser)."""
    if not getattr(parser, "_runkit_checked", False):
        parser.error = _one_line_error(parser)
        parser.parse_known_args = _checked_parse(parser)
        parser._runkit_checked = True
    return parser


def refuse(
    parser: argparse.ArgumentParser, err: BaseException, flags: Mapping[str, Any]
) -> None:
    """Exits through ``parser.error`` with ``err``'s message, led by the flag of
    the first config field the message names (``flags``: field name -> flag, or
    the ``(flag, keywords)`` of :func:`add_config_arguments`), so
    a config's own check (``SomeConfig: schemes must be ...``) names the option
    the user typed."""
    msg = str(err)
    named = [
        (m.start(), flag if isinstance(flag, str) else flag[0])
        for field, flag in flags.items()
        for m in [re.search(rf"\b{re.escape(field)}\b", msg)]
        if m is not None
    ]
    if named and not msg.startswith("--"):
        msg = f"{min(named)[1]}: {msg}"
    parser.error(msg)


def at_least(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    minimums: Mapping[str, int],
) -> None:
    """Refuses (``parser.error``, one line) every given option below its minimum:
    ``minimums`` maps a flag (``"--workers"``) to the least value it takes (a
    count that must be >= 1); an option not given (None) keeps its default, a
    list option (``nargs``, a comma tuple) is checked item by item."""
    dests = {s: a.dest for a in parser._actions for s in a.option_strings}
    for flag, low in minimums.items():
        value = getattr(args, dests[flag], None)
        if value is None:
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        if any(v < low for v in items):
            parser.error(f"{flag}: must be >= {low}, got {value!r}")


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    out: str | None = None,
    quick: str | bool = "the small configuration (Config.quick())",
    seed: int | None | bool = 0,
) -> argparse.ArgumentParser:
    """Adds the arguments every experiment shares.

    - ``--out DIR``: the output folder, required when ``out`` is None, else its
      default;
    - ``--quick``: the small configuration (help text ``quick``; ``False``: the
      command has no quick mode and no flag);
    - ``--seed N``: the run's seed, default ``seed`` (``None``: the flag's default
      is None, the config's own seed; ``False``: no flag);
    - ``--no-progress``: no progress bars (sets ``CODEDJAX_NO_PROGRESS=1`` when
      parsed, so every bar of the run goes off).

    The parser then reports bad options in one line and checks its numbers
    (:func:`one_line_errors`).

    Returns:
      ``parser``.
    """
    one_line_errors(parser)
    parser.add_argument(
        "--out",
        required=out is None,
        default=out,
        help="output folder" + ("" if out is None else f" (default {out})"),
    )
    if quick:
        parser.add_argument("--quick", action="store_true", help=str(quick))
    if seed is None:
        parser.add_argument("--seed", type=int, help="the run's seed")
    elif seed is not False:
        parser.add_argument(
            "--seed", type=int, default=seed, help=f"the run's seed (default {seed})"
        )
    parser.add_argument(
        "--no-progress",
        action=_NoProgress,
        help=f"no progress bars (the same as {NO_PROGRESS_ENV}=1)",
    )
    return parser


def _parse_tuple(item: type):
    item = _CHECKED.get(item, item)

    def parse(text: str):
        try:
            return tuple(item(v) for v in text.split(",") if v.strip())
        except (ValueError, argparse.ArgumentTypeError) as err:
            raise argparse.ArgumentTypeError(
                f"a comma list of {getattr(item, '__name__', item)} values: {err}"
            ) from None

    parse.__name__ = f"list of {getattr(item, '__name__', item)}"
    return parse


def _flag_type(hint: Any) -> tuple[Any, bool]:
    """(argparse type, is a tuple) of a field's annotation."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _flag_type(args[0])
    if origin is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def add_config_arguments(
    parser: argparse.ArgumentParser,
    config: type,
    flags: Mapping[str, str | tuple[str, dict]],
) -> argparse.ArgumentParser:
    """Adds one flag per field of the frozen dataclass ``config``.

    Args:
      parser: the parser.
      config: the config class (a dataclass; its annotations give each flag's
        type: ``int``, ``float``, ``str``, ``bool``, ``X | None`` and
        ``tuple[X, ...]``, a tuple given as ``a,b,c``).
      flags: field name -> flag (``"--cross-layers"``), or (flag, extra argparse
        keywords such as ``choices``, ``help``, ``nargs``). A ``bool`` field whose
        default is True gets a flag that turns it off (``--no-berrut``), one whose
        default is False a flag that turns it on.

    Every flag's default is None (not given), so :func:`config_overrides` returns
    only what was set on the command line.

    Returns:
      ``parser``.

    Raises:
      TypeError: naming the field, if ``config`` has no such field.
    """
    hints = typing.get_type_hints(config)
    fields = {f.name: f for f in dataclasses.fields(config)}
    for name, spec in flags.items():
        if name not in fields:
            raise TypeError(
                f"add_config_arguments: {config.__name__} has no field {name!r}"
            )
        flag, extra = (spec, {}) if isinstance(spec, str) else spec
        extra = dict(extra)
        field = fields[name]
        default = field.default if field.default is not dataclasses.MISSING else None
        kind, is_tuple = _flag_type(hints[name])
        if kind is bool:
            parser.add_argument(
                flag,
                dest=name,
                action="store_const",
                const=not default,
                default=None,
                **extra,
            )
            continue
        if is_tuple and "nargs" in extra:
            extra.setdefault("type", kind)
        elif is_tuple:
            extra.setdefault("type", _parse_tuple(kind))
            extra.setdefault("metavar", "A,B,...")
        else:
            extra.setdefault("type", kind)
        if "help" not in extra and default is not None:
            shown = ",".join(map(str, default)) if is_tuple else default
            extra["help"] = f"default {shown}"
        parser.add_argument(flag, dest=name, default=None, **extra)
    return parser


def config_overrides(args: argparse.Namespace, config: type) -> dict[str, Any]:
    """The fields of ``config`` given on the command line: ``{field: value}`` for
    every flag of :func:`add_config_arguments` that was set (tuples as tuples)."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(args, field.name, None)
        if value is not None:
            out[field.name] = tuple(value) if isinstance(value, list) else value
    return out
