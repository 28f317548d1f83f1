"""What a verification run depends on: :class:`VerifyConfig` and its checks.

:class:`VerifyConfig` is a frozen dataclass (the full run by default,
:meth:`VerifyConfig.quick` for ``--quick``, :meth:`VerifyConfig.user` for your own
(M, K, d)), checked when it is built (:func:`validate`);
:func:`theory.verify.settings.build_config` makes one from the parsed flags and
``--config``; :func:`response_grid` and :func:`recovery_rows` are the N values the
sections report.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

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

    def __post_init__(self):
        validate(self)

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
    for name, vals in (("workers", workers), ("inputs", inputs), ("degree", degree)):
        for v in vals:
            if int(v) < 1:
                raise ValueError(f"VerifyConfig.user: {name} must be >= 1, got {v}")
    for p in points:
        if p not in C.POINT_KINDS:
            raise ValueError(
                f"VerifyConfig.user: points must be one of "
                f"{', '.join(C.POINT_KINDS)}, got {p!r}"
            )


def _checked_coefficients(p: str, m: int, k: int, d: int) -> int:
    dd = coefficients(k, d)
    if dd > m:
        raise ValueError(
            f"VerifyConfig.user: workers must be at least D = d(K-1)+1 = {dd} "
            f"(inputs {k}, degree {d}), got {m}"
        )
    if p == "second" and m < 2:
        raise ValueError(
            f"VerifyConfig.user: workers must be >= 2 for second-kind points, got {m}"
        )
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


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _row(field: str, row: Any, what: str, size: int) -> tuple[int, ...]:
    """A grid row of ``size`` ints >= 1, else a ValueError naming the field."""
    if (
        not isinstance(row, list | tuple)
        or len(row) != size
        or not all(_is_int(v) and v >= 1 for v in row)
    ):
        raise ValueError(
            f"VerifyConfig: {field}: every row must be {size} ints >= 1 {what}, "
            f"got {row!r}"
        )
    return tuple(int(v) for v in row)


def _cond_entry(entry: Any) -> None:
    ok = isinstance(entry, list | tuple) and len(entry) in (2, 3)
    ok = ok and _is_int(entry[0]) and entry[0] >= 1
    ok = ok and isinstance(entry[1], list | tuple) and all(map(_is_int, entry[1]))
    ok = ok and (len(entry) == 2 or entry[2] in C.POINT_KINDS)
    if not ok:
        raise ValueError(
            f"VerifyConfig: cond_grid: every entry must be [M, [D, ...]] or [M, "
            f"[D, ...], points] with points one of {', '.join(C.POINT_KINDS)}, got "
            f"{entry!r}"
        )
    m, ds = entry[0], entry[1]
    if not all(1 <= d <= m for d in ds):
        raise ValueError(
            f"VerifyConfig: cond_grid: need 1 <= D <= M, got M = {m}, D = {list(ds)}"
        )
    if len(entry) == 3 and entry[2] == "second" and m < 2:
        raise ValueError(
            f"VerifyConfig: cond_grid: second-kind points need M >= 2, got {entry!r}"
        )


def validate(cfg: VerifyConfig) -> None:
    """Raise ValueError, naming the field, for a configuration the run cannot do
    (a field set from a file or a flag: the command names which)."""
    name = "VerifyConfig"
    for field in ("eta", "family_confidence"):
        v = getattr(cfg, field)
        if not (isinstance(v, int | float) and 0.0 < v < 1.0):
            raise ValueError(f"{name}: {field} must lie in (0, 1), got {v!r}")
    for field, low in (
        ("trials", 1), ("points_trials", 1), ("recovery_trials", 1),
        ("identity_trials", 0), ("exhaustive_missing", 1),
        ("exhaustive_max_candidates", 1), ("points_workers", 1),
        ("memory_bytes", 1), ("seed", 0),
    ):  # fmt: skip
        v = getattr(cfg, field)
        if not _is_int(v) or v < low:
            raise ValueError(f"{name}: {field} must be an int >= {low}, got {v!r}")
    if cfg.chunk is not None and not (_is_int(cfg.chunk) and cfg.chunk >= 1):
        raise ValueError(f"{name}: chunk must be an int >= 1, got {cfg.chunk!r}")
    for entry in cfg.cond_grid:
        _cond_entry(entry)
    for field in ("exhaustive_workers", "decoder_check_workers", "points_coeffs"):
        v = getattr(cfg, field)
        if v is None and field == "decoder_check_workers":
            continue
        if not isinstance(v, tuple) or not all(_is_int(x) and x >= 1 for x in v):
            raise ValueError(f"{name}: {field} must be a list of ints >= 1, got {v!r}")
    bad = [m for m in cfg.exhaustive_workers if m - cfg.exhaustive_missing < 1]
    if bad:
        raise ValueError(
            f"{name}: exhaustive_workers must each exceed exhaustive_missing = "
            f"{cfg.exhaustive_missing}, got {bad}"
        )
    bad = [d for d in cfg.points_coeffs if d > cfg.points_workers]
    if bad:
        raise ValueError(
            f"{name}: points_coeffs must each be at most points_workers = "
            f"{cfg.points_workers}, got {bad}"
        )
    for field in ("recovery_grid", "enumeration_grid"):
        for row in getattr(cfg, field):
            k, c, m = _row(field, row, "(K, c, M)", 3)
            if k * c > m:
                raise ValueError(
                    f"{name}: {field}: need K c <= M, got K={k} c={c} M={m}"
                )
            if field == "enumeration_grid" and m > 22:
                raise ValueError(
                    f"{name}: {field}: lists all 2^M sets, so M <= 22, got M={m}"
                )


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
