"""Where a verification run's :class:`~theory.verify.config.VerifyConfig` comes from:
the parsed flags and a ``--config`` file (TOML or JSON), checked before any work.

:func:`build_config` makes the config; a bad setting is a ValueError naming it, and
:func:`setting_labels` says whether a flag (``--trials``) or a key of the file
(``--config run.toml: recovery_grid``) set it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import typing
from collections.abc import Callable
from typing import Any

from .. import _common as C
from .config import USER_KEYS, VerifyConfig, _check_sizes, coefficients


def load_config_file(path: str) -> dict:
    """Read a TOML (``.toml``) or JSON file of run settings.

    Keys: ``workers``, ``inputs``, ``degree``, ``points`` (each a value or a list),
    ``eta``, ``trials``, ``seed``, and any :class:`VerifyConfig` field (lists become
    tuples).

    Raises:
        ValueError: an unreadable file, an unknown key or a value of the wrong type
        (naming ``--config``, the file and the key).
    """
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as f:
                data = tomllib.load(f)
        else:
            with open(path) as f:
                data = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"--config {path}: cannot read it: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: must hold a table of settings")
    unknown = sorted(set(data) - set(_FIELDS) - set(USER_KEYS))
    if unknown:
        raise ValueError(
            f"--config {path}: {', '.join(unknown)}: unknown key"
            f"{'s' if len(unknown) > 1 else ''}; allowed: {', '.join(USER_KEYS)} and "
            "the VerifyConfig fields but plots and progress (--no-plots, "
            "--no-progress)"
        )
    for key, value in data.items():
        _check_setting(path, key, value)
    return data


_INT_KEYS = ("workers", "inputs", "degree", "trials", "seed")
# the fields a config file may set (plots and progress are the flags' own)
_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(VerifyConfig)
    if f.name not in ("plots", "progress")
)


def _check_setting(path: str, key: str, value: Any) -> None:
    """A config file's value has the type of its flag or VerifyConfig field (an
    int is an int, a number a finite number, a list a list), else a ValueError
    naming ``--config`` and the key: checked before any work."""

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v):
        return (is_int(v) or isinstance(v, float)) and math.isfinite(v)

    hints = typing.get_type_hints(VerifyConfig)
    if key in _INT_KEYS:
        ok = all(is_int(v) for v in _listify(value)) if key in USER_KEYS[:3] else (
            is_int(value))  # fmt: skip
        want = "an int (or a list of ints)" if key in USER_KEYS[:3] else "an int"
    elif key == "points":
        ok = all(isinstance(v, str) for v in _listify(value))
        want = "a point kind or a list of them"
    elif key == "eta" or hints.get(key) is float:
        ok, want = is_num(value), "a finite number"
    elif hints.get(key) is bool:
        ok, want = isinstance(value, bool), "true or false"
    elif hints.get(key) in (int, int | None):
        ok = is_int(value) or (value is None and hints[key] is not int)
        want = "an int"
    else:  # tuples (grids): lists in the file, checked by validate()
        ok, want = isinstance(value, (list, tuple)) or value is None, "a list"
    if not ok:
        raise ValueError(f"--config {path}: {key}: must be {want}, got {value!r}")


def _tuples(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    return x


def _listify(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def build_config(
    a: argparse.Namespace, make: Callable[..., VerifyConfig] = VerifyConfig
) -> tuple[VerifyConfig, list[str]]:
    """The run configuration from the parsed flags (and ``--config``).

    ``make`` is the preset the fields go into (``runkit.preset``:
    :meth:`VerifyConfig.quick` under ``--quick``, else :class:`VerifyConfig`): the
    built-in grid is ``make(**fields)``; your own grid
    (:meth:`VerifyConfig.user`) takes at most the preset's trials.

    Returns (config, lines to print: the D of each (K, d)). Raises ValueError with a
    message that names the setting (:func:`setting_labels` says by which flag or
    key of the file).
    """
    data = load_config_file(a.config) if a.config else {}
    for key in USER_KEYS:
        val = getattr(a, key)
        if val is not None:
            data[key] = val
    user = {k: data.pop(k) for k in ("workers", "inputs", "degree") if k in data}
    points = data.pop("points", None)
    over: dict[str, Any] = {k: _tuples(v) for k, v in data.items()}
    over.update(plots=a.plots is not False, progress=not a.no_progress)
    trials = over.pop("trials", None)
    if trials is not None:
        over.update(
            trials=trials,
            points_trials=over.get("points_trials", trials),
            recovery_trials=over.get("recovery_trials", max(trials, 1)),
        )
    if user:
        return _user_config(user, points, over, make)
    return _grid_config(points, over, make), []


def setting_labels(a: argparse.Namespace) -> dict[str, str]:
    """What an error of :func:`build_config` names each setting by (for
    ``runkit.refuse``): its flag, or ``--config FILE: key`` for a key the file set
    and no flag overrode."""
    labels = {k: f"--{k}" for k in USER_KEYS}
    try:
        keys = set(load_config_file(a.config)) if a.config else set()
    except ValueError:
        keys = set()
    for k in keys:
        if k not in USER_KEYS or getattr(a, k) is None:
            labels[k] = f"--config {a.config}: {k}"
    if a.trials is not None:  # --trials sets these two unless the file does
        for k in ("points_trials", "recovery_trials"):
            labels.setdefault(k, "--trials")
    return labels


def _user_config(
    user: dict, points: Any, over: dict[str, Any], make: Callable[..., VerifyConfig]
) -> tuple[VerifyConfig, list[str]]:
    """``--workers/--inputs/--degree`` (all three): :meth:`VerifyConfig.user`, with
    at most the trials of the preset ``make`` unless they are set."""
    names = ("workers", "inputs", "degree")
    _check_sizes(*(_listify(user.get(k, ())) for k in names), ())
    missing = [k for k in names if k not in user]
    if missing:
        raise ValueError(
            f"VerifyConfig.user: {missing[0]}: required with {', '.join(user)} "
            "(workers, inputs and degree go together)"
        )
    ws, ks, dg = (_listify(user[k]) for k in ("workers", "inputs", "degree"))
    cfg = VerifyConfig.user(
        workers=tuple(int(v) for v in ws),
        inputs=tuple(int(v) for v in ks),
        degree=tuple(int(v) for v in dg),
        points=_listify(points if points is not None else "first"),
        **over,
    )
    if "trials" not in over:
        cfg = dataclasses.replace(cfg, trials=min(cfg.trials, make().trials))
    lines = [
        f"K = {k} inputs, degree d = {d}: D = d(K-1)+1 = "
        f"{coefficients(int(k), int(d))} coefficients"
        for k in dict.fromkeys(ks)
        for d in dict.fromkeys(dg)
    ]
    return cfg, lines


def _grid_config(
    points: Any, over: dict[str, Any], make: Callable[..., VerifyConfig]
) -> VerifyConfig:
    """The built-in grid of the preset ``make``, at the ``--points`` kinds if
    given."""
    if points is not None:
        pts = _listify(points)
        for p in pts:
            if p not in C.POINT_KINDS:
                raise ValueError(
                    f"VerifyConfig: points must be one of "
                    f"{', '.join(C.POINT_KINDS)}, got {p!r}"
                )
        base = make()
        grid = tuple(
            (e[0], e[1], p)
            for p in dict.fromkeys(pts)
            for e in base.cond_grid
            if len(e) == 2
        )
        over.setdefault("cond_grid", grid)
    return make(**over)
