"""The command-line arguments the experiments share, added by one call.

Every ``__main__`` of ``theory/``, ``models/`` and ``benchmarks/`` builds its parser
with :func:`add_run_arguments` (``--out``, ``--quick``, ``--seed``,
``--no-progress``) and maps the flags of its frozen config dataclass with
:func:`add_config_arguments` and :func:`config_overrides`: a flag that is not given
leaves the config's own default (or its ``quick()`` preset) alone.

A parser that has the run arguments reports a bad option as one line on stderr,
``prog: error: --option: what was expected, got what came``, and exits with
status 2, never with a traceback; every ``int`` option takes an integer >= 0,
every ``float`` option a finite number >= 0, every other option a non-empty
value, and a comma list at least one item, none of them empty. ``--out`` is a
folder that exists or can be created (never a file). A command then builds its
config at once with :func:`make_config`: the config's own checks (ranges, names,
one field against another) run before any work, and their errors are reported
by :func:`refuse` under the flags of the fields they name.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from .progress import NO_PROGRESS_ENV, disable_progress

__all__ = [
    "add_config_arguments",
    "add_run_arguments",
    "at_least",
    "config_overrides",
    "count",
    "input_file",
    "make_config",
    "nonneg_float",
    "not_with",
    "one_line_errors",
    "only_with",
    "out_folder",
    "refuse",
    "text",
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
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def nonneg_float(text: str) -> float:
    """A ``float`` option: a finite number >= 0 (never NaN or inf)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def text(value: str) -> str:
    """A ``str`` option: a non-empty value (an empty one names nothing)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty value, got {value!r}")
    return value


def out_folder(value: str) -> str:
    """``--out`` (and any folder a run writes into): a folder that exists, or one
    that can be created (its nearest existing parent is a folder this process may
    write into); never an existing file. Nothing is created here."""
    text(value)
    path = os.path.abspath(value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"expected a folder, got {value!r} (a file)")
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(
            f"cannot create the folder {value!r}: {parent!r} is a file"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"cannot write into {value!r}: no write permission in {parent!r}"
        )
    return value


def input_file(value: str) -> str:
    """An option that names a file to read: an existing, readable file."""
    text(value)
    if not os.path.isfile(value):
        what = "a folder" if os.path.isdir(value) else "no such file"
        raise argparse.ArgumentTypeError(f"expected a file, got {value!r} ({what})")
    if not os.access(value, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {value!r}")
    return value


_CHECKED = {int: count, float: nonneg_float, str: text, None: text}


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
            # every option that takes a value (nargs 0: a switch takes none)
            if action.option_strings and action.nargs != 0 and action.type in _CHECKED:
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


_OWNER = re.compile(r"(?:argument\s+)?([A-Za-z_][\w.]*):\s+")


def refuse(
    parser: argparse.ArgumentParser, err: BaseException, flags: Mapping[str, Any]
) -> None:
    """Exits through ``parser.error`` with ``err``'s message said in flags.

    ``flags`` maps a config field to its flag (or the ``(flag, keywords)`` of
    :func:`add_config_arguments`; or any label, such as ``"--config run.toml:
    key"`` for a value that came from a file). Every field the message names is
    replaced by its flag, and the line is led by the first of them, so a
    config's own check (``SomeConfig: error_requests must be at most
    num_requests = 20, got 50``) reads ``--error-requests: must be at most
    --requests = 20, got 50``: the option the user typed, and the other option of
    a constraint between two. The name of the class or function that raised is
    dropped once a flag leads. A message that names no field is passed on
    whole."""
    msg = " ".join(str(err).split())
    if msg.startswith("argument --"):
        msg = msg[len("argument ") :]
    labels = {f: s if isinstance(s, str) else s[0] for f, s in flags.items()}
    rest = msg
    while (m := _OWNER.match(rest)) and m.group(1) not in labels:
        rest = rest[m.end() :]  # "SomeConfig: ", "theory.plan: "
    if rest.startswith("--"):  # led by its flag already
        parser.error(rest)
    first: list[tuple[int, str]] = []

    def swap(m: re.Match) -> str:
        first.append((m.start(), labels[m.group(0)]))
        return labels[m.group(0)]

    names = "|".join(sorted(map(re.escape, labels), key=len, reverse=True))
    if names:
        rest = re.sub(rf"(?<![\w.'\"-])(?:{names})(?![\w'\"-])", swap, rest)
    if not first:  # no field named: the whole message
        parser.error(msg)
    lead = min(first)[1]
    if rest.startswith(lead):
        rest = rest[len(lead) :].lstrip(": ")
    parser.error(f"{lead}: {rest}")


def make_config(
    parser: argparse.ArgumentParser,
    flags: Mapping[str, Any],
    factory: Any,
    /,
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``factory(*args, **kwargs)`` (a config class, its ``quick``, a preset),
    built right after parsing so the config's own checks run before any work; a
    ``ValueError`` or ``TypeError`` it raises exits through :func:`refuse` under
    the flags (``flags``: field name -> flag) of the fields it names."""
    try:
        return factory(*args, **kwargs)
    except (TypeError, ValueError) as err:
        refuse(parser, err, flags)


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


def _given(parser: argparse.ArgumentParser, args: argparse.Namespace, flag: str):
    """Whether ``flag`` was given: its value is neither None nor False (its
    default must be one of them)."""
    dest = next(a.dest for a in parser._actions if flag in a.option_strings)
    value = getattr(args, dest, None)
    return value is not None and value is not False


def only_with(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    needed: str,
    options: Sequence[str],
    *,
    given: bool | None = None,
) -> None:
    """Refuses (``parser.error``, one line naming both) every flag of ``options``
    given on the command line when ``needed`` was not: an option that would be
    ignored is an error, never a silent no-op. An option counts as given when its
    value is neither None nor False (its default must be one of them); ``given``
    says it for ``needed`` instead (a condition on a value: ``needed`` is then
    only the text of the message, such as ``"--payload series"``)."""
    if given if given is not None else _given(parser, args, needed):
        return
    for flag in options:
        if _given(parser, args, flag):
            parser.error(f"{flag}: applies only with {needed}")


def not_with(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    other: str,
    options: Sequence[str],
    *,
    given: bool | None = None,
    why: str = "",
) -> None:
    """Refuses every flag of ``options`` given together with ``other`` (which
    ignores them, or runs instead of them): ``--flag: does not apply with
    --other (why)``. ``given`` says whether ``other`` was given, as in
    :func:`only_with`."""
    if not (given if given is not None else _given(parser, args, other)):
        return
    for flag in options:
        if _given(parser, args, flag):
            parser.error(
                f"{flag}: does not apply with {other}" + (f" ({why})" if why else "")
            )


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    out: str | None = None,
    quick: str | bool = "the small configuration (Config.quick())",
    seed: int | None | bool = 0,
) -> argparse.ArgumentParser:
    """Adds the arguments every experiment shares.

    - ``--out DIR``: the output folder, required when ``out`` is None, else its
      default; an existing file, or a folder that cannot be created, is refused
      (:func:`out_folder`) before any work;
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
        type=out_folder,
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


_ITEMS = {count: "integers >= 0", nonneg_float: "finite numbers >= 0", text: "names"}


def _parse_tuple(item: type):
    item = _CHECKED.get(item, item)
    name = getattr(item, "__name__", item)
    what = _ITEMS.get(item, f"{name} values")

    def parse(value: str):
        items = [v.strip() for v in value.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError(
                f"expected a comma list of {what}, at least one and none empty, "
                f"got {value!r}"
            )
        try:
            return tuple(item(v) for v in items)
        except (ValueError, argparse.ArgumentTypeError) as err:
            raise argparse.ArgumentTypeError(f"a comma list of {what}: {err}") from None

    parse.__name__ = f"list of {name}"
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
        if "help" not in extra and default not in (None, ()):
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
