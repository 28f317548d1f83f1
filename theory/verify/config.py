"""What a verification run depends on: :class:`VerifyConfig` and where it comes from.

:class:`VerifyConfig` is a frozen dataclass (the full run by default,
:meth:`VerifyConfig.quick` for ``--quick``, :meth:`VerifyConfig.user` for your own
(M, K, d)); :func:`build_config` makes one from the parsed flags and ``--config``;
:func:`response_grid` and :func:`recovery_rows` are the N values the sections report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import typing
from typing import Any

from .. import _common as C

CondEntry = tuple  # (M, (D, ...)) or (M, (D, ...), points)

# the keys of a config file (and flags) besides the VerifyConfig fields
USER_KEYS = ("workers", "inputs", "degree", "points", "eta", "trials", "seed")


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    """Everything the verification run depends on (the full mode by default).

    ``cond_grid`` entries are (M, (D, ...)) for first-kind points or
    (M, (D, ...), "second"); an empty grid (or tuple) skips a section.
    """

    cond_grid: tuple[CondEntry, ...] = (
        (40, (7, 13, 20, 30)),
        (100, (13, 25)),
        (200, (20, 40)),
        (40, (7, 13, 20, 30), "second"),
    )
    trials: int = 100_000
    eta: float = 0.05
    family_confidence: float = 0.99
    identity_trials: int = 256
    exhaustive_workers: tuple[int, ...] = (12, 16, 20, 24)
    exhaustive_missing: int = 3
    exhaustive_max_candidates: int = 1_000_000
    exhaustive_greedy: bool = True
    decoder_check_workers: tuple[int, ...] | None = None  # None: every M
    points_workers: int = 40
    points_coeffs: tuple[int, ...] = (5, 9, 13, 17, 21, 25, 30)
    points_trials: int = 100_000
    recovery_grid: tuple[tuple[int, int, int], ...] = (
        (4, 3, 12),
        (8, 4, 32),
        (8, 4, 40),
        (10, 4, 40),
        (16, 2, 40),
        (8, 4, 100),
    )
    recovery_trials: int = 100_000
    enumeration_grid: tuple[tuple[int, int, int], ...] = (
        (3, 2, 8),
        (4, 3, 12),
        (2, 5, 14),
        (5, 3, 16),
        (6, 3, 20),
    )
    seed: int = 0
    chunk: int | None = None  # trials per dispatch (default 1000)
    memory_bytes: int = 128 << 20  # per device, bounds the vmapped step
    plots: bool = True
    progress: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> VerifyConfig:
        """The ``--quick`` configuration: 2,000 trials per configuration."""
        base = dict(
            trials=2000,
            points_trials=2000,
            recovery_trials=20_000,
            exhaustive_max_candidates=20_000,
            exhaustive_greedy=False,
            decoder_check_workers=(24,),
        )
        return cls(**{**base, **overrides})

    @classmethod
    def user(
        cls,
        *,
        workers: tuple[int, ...],
        inputs: tuple[int, ...],
        degree: tuple[int, ...],
        points: tuple[str, ...] = ("first",),
        **overrides: Any,
    ) -> VerifyConfig:
        """The condition-number section for every (M, K, d, points) combination.

        D = d (K - 1) + 1. The other sections are off unless ``overrides`` set them.

        Raises:
            ValueError: D > M, sizes below 1, an unknown point kind (message names
            the command-line flag).
        """
        _check_sizes(workers, inputs, degree, points)
        grid = []
        for p in dict.fromkeys(points):
            for m in dict.fromkeys(int(v) for v in workers):
                ds = []
                for k in inputs:
                    for d in degree:
                        ds.append(_checked_coefficients(p, m, int(k), int(d)))
                grid.append((m, tuple(sorted(set(ds))), p))
        base = dict(
            cond_grid=tuple(grid),
            trials=10_000,
            exhaustive_workers=(),
            points_coeffs=(),
            recovery_grid=(),
            enumeration_grid=(),
        )
        return cls(**{**base, **overrides})


def _check_sizes(workers, inputs, degree, points) -> None:
    for flag, vals in (("--workers", workers), ("--inputs", inputs)):
        for v in vals:
            if int(v) < 1:
                raise ValueError(f"argument {flag}: must be >= 1, got {v}")
    for v in degree:
        if int(v) < 1:
            raise ValueError(f"argument --degree: must be >= 1, got {v}")
    for p in points:
        if p not in C.POINT_KINDS:
            raise ValueError(
                f"argument --points: must be one of {', '.join(C.POINT_KINDS)}, "
                f"got {p!r}"
            )


def _checked_coefficients(p: str, m: int, k: int, d: int) -> int:
    dd = coefficients(k, d)
    if dd > m:
        raise ValueError(
            f"argument --workers: D = d(K-1)+1 = {dd} for --inputs "
            f"{k} --degree {d} exceeds --workers {m} (need D <= M)"
        )
    if p == "second" and m < 2:
        raise ValueError("argument --workers: second-kind points need M >= 2")
    return dd


def coefficients(num_inputs: int, degree: int) -> int:
    """D = d (K - 1) + 1: the coefficients of f(u(z)) for K inputs, degree d."""
    return degree * (num_inputs - 1) + 1


def cond_blocks(cfg: VerifyConfig) -> list[tuple[str, int, int]]:
    """(points, M, D) of every block of the condition-number section."""
    out = []
    for entry in cfg.cond_grid:
        m, ds = int(entry[0]), entry[1]
        p = entry[2] if len(entry) > 2 else "first"
        out += [(C.check_points(p), m, int(d)) for d in ds]
    return out


def validate(cfg: VerifyConfig) -> None:
    """Raise ValueError for a configuration the run cannot do."""
    if not 0.0 < cfg.eta < 1.0:
        raise ValueError(f"argument --eta: must lie in (0, 1), got {cfg.eta}")
    if not 0.0 < cfg.family_confidence < 1.0:
        raise ValueError(
            f"family_confidence must lie in (0, 1), got {cfg.family_confidence}"
        )
    for name in ("trials", "points_trials", "recovery_trials"):
        if int(getattr(cfg, name)) < 1:
            raise ValueError(
                f"argument --trials: {name} must be >= 1, got {getattr(cfg, name)}"
            )
    for _p, m, d in cond_blocks(cfg):
        if not 1 <= d <= m:
            raise ValueError(f"cond_grid: need 1 <= D <= M, got M={m}, D={d}")
    for k, c, m in cfg.recovery_grid:
        if k * c > m:
            raise ValueError(f"recovery_grid: need K c <= M, got K={k} c={c} M={m}")


# ----------------------------------------------------------------------------------
# grids


def response_grid(m: int, d: int) -> tuple[int, ...]:
    """N values from D to M: dense next to D and M, a few in between."""
    cand = [
        d,
        d + 1,
        d + 2,
        d + 3,
        d + 5,
        d + 8,
        d + (m - d) // 4,
        (d + m) // 2,
        m - (m - d) // 4,
        m - 3,
        m - 2,
        m - 1,
        m,
    ]
    return tuple(sorted({n for n in cand if d <= n <= m}))


def recovery_rows(k: int, c: int, m: int) -> tuple[int, ...]:
    """N values reported in the table (the plots use every N)."""
    cand = [
        0,
        k,
        m // 4,
        m // 2,
        (3 * m) // 4,
        m - 2 * c,
        m - c,
        m - c + 1,
        m - 2,
        m - 1,
        m,
    ]
    return tuple(sorted({n for n in cand if 0 <= n <= m}))


# ----------------------------------------------------------------------------------
# the command line and config files


def load_config_file(path: str) -> dict:
    """Read a TOML (``.toml``) or JSON file of run settings.

    Keys: ``workers``, ``inputs``, ``degree``, ``points`` (each a value or a list),
    ``eta``, ``trials``, ``seed``, and any :class:`VerifyConfig` field (lists become
    tuples).

    Raises:
        ValueError: unreadable file or an unknown key (naming ``--config``).
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
        raise ValueError(f"argument --config: cannot read {path!r}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"argument --config: {path!r} must hold a table of settings")
    fields = {f.name for f in dataclasses.fields(VerifyConfig)}
    unknown = sorted(set(data) - fields - set(USER_KEYS))
    if unknown:
        raise ValueError(
            f"argument --config: unknown key(s) {', '.join(unknown)} in {path!r}; "
            f"allowed: {', '.join(USER_KEYS)} and the VerifyConfig fields"
        )
    for key, value in data.items():
        _check_setting(path, key, value)
    return data


_INT_KEYS = ("workers", "inputs", "degree", "trials", "seed")


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
        raise ValueError(
            f"argument --config: {key} must be {want}, got {value!r} in {path!r}"
        )


def _tuples(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    return x


def _listify(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def build_config(a: argparse.Namespace) -> tuple[VerifyConfig, list[str]]:
    """The run configuration from the parsed flags (and ``--config``).

    Returns (config, lines to print: the D of each (K, d)). Raises ValueError with a
    message that names the flag.
    """
    data = load_config_file(a.config) if a.config else {}
    for key in USER_KEYS:
        val = getattr(a, key)
        if val is not None:
            data[key] = val
    user = {k: data.pop(k) for k in ("workers", "inputs", "degree") if k in data}
    points = data.pop("points", None)
    over: dict[str, Any] = {k: _tuples(v) for k, v in data.items()}
    over.update(plots=not a.no_plots, progress=not a.no_progress)
    trials = over.pop("trials", None)
    if trials is not None:
        over.update(
            trials=trials,
            points_trials=over.get("points_trials", trials),
            recovery_trials=over.get("recovery_trials", max(trials, 1)),
        )
    if "eta" in over and not 0.0 < float(over["eta"]) < 1.0:
        raise ValueError(f"argument --eta: must lie in (0, 1), got {over['eta']}")
    if user:
        cfg, lines = _user_config(user, points, over, quick=a.quick)
    else:
        cfg, lines = _grid_config(points, over, quick=a.quick), []
    validate(cfg)
    return cfg, lines


def _user_config(
    user: dict, points: Any, over: dict[str, Any], *, quick: bool
) -> tuple[VerifyConfig, list[str]]:
    """``--workers/--inputs/--degree`` (all three): :meth:`VerifyConfig.user`."""
    missing = [f"--{k}" for k in ("workers", "inputs", "degree") if k not in user]
    if missing:
        raise ValueError(
            f"argument {missing[0]}: required with "
            + " and ".join(f"--{k}" for k in user)
            + " (give --workers, --inputs and --degree together)"
        )
    ws, ks, dg = (_listify(user[k]) for k in ("workers", "inputs", "degree"))
    if quick and "trials" not in over:
        over["trials"] = 2000
    cfg = VerifyConfig.user(
        workers=tuple(int(v) for v in ws),
        inputs=tuple(int(v) for v in ks),
        degree=tuple(int(v) for v in dg),
        points=_listify(points if points is not None else "first"),
        **over,
    )
    lines = [
        f"K = {k} inputs, degree d = {d}: D = d(K-1)+1 = "
        f"{coefficients(int(k), int(d))} coefficients"
        for k in dict.fromkeys(ks)
        for d in dict.fromkeys(dg)
    ]
    return cfg, lines


def _grid_config(points: Any, over: dict[str, Any], *, quick: bool) -> VerifyConfig:
    """The built-in grid (full or ``--quick``), at the ``--points`` kinds if given."""
    if points is not None:
        pts = _listify(points)
        for p in pts:
            if p not in C.POINT_KINDS:
                raise ValueError(
                    f"argument --points: must be one of "
                    f"{', '.join(C.POINT_KINDS)}, got {p!r}"
                )
        base = VerifyConfig.quick() if quick else VerifyConfig()
        grid = tuple(
            (e[0], e[1], p)
            for p in dict.fromkeys(pts)
            for e in base.cond_grid
            if len(e) == 2
        )
        over.setdefault("cond_grid", grid)
    return VerifyConfig.quick(**over) if quick else VerifyConfig(**over)
