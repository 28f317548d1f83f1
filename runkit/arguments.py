"""The command-line arguments the experiments share, added by one call.

Every ``__main__`` of ``theory/``, ``models/`` and ``benchmarks/`` builds its parser
with :func:`add_run_arguments` (``--out``, ``--quick``, ``--seed``,
``--no-progress``) and maps the flags of its frozen config dataclass with
:func:`add_config_arguments` and :func:`config_overrides`: a flag that is not given
leaves the config's own default (or its ``quick()`` preset) alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from .progress import NO_PROGRESS_ENV, disable_progress

__all__ = ["add_config_arguments", "add_run_arguments", "config_overrides"]


class _NoProgress(argparse.Action):
    """``--no-progress``: turns every bar of the process off when parsed."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        disable_progress()


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

    Returns:
      ``parser``.
    """
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
    def parse(text: str):
        return tuple(item(v) for v in text.split(",") if v.strip())

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
