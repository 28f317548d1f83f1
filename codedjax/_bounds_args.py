"""Argument checks of :mod:`codedjax.bounds`: plain Python and numpy values on the
host (sizes, probabilities, masks, seeds), each error naming the public function."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._argchecks import check_int


def check_sizes(fname: str, num_workers: Any, num_coeffs: Any) -> tuple[int, int]:
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    d = check_int(fname, "num_coeffs", num_coeffs, minimum=1)
    if d > m:
        raise ValueError(
            f"{fname}: num_coeffs (D) must be at most num_workers (M={m}), got {d}"
        )
    return m, d


def check_responses(fname: str, num_responses: Any, m: int) -> int:
    n = check_int(fname, "num_responses", num_responses, minimum=0)
    if n > m:
        raise ValueError(
            f"{fname}: num_responses (N) must be at most num_workers (M={m}), got {n}"
        )
    return n


def check_probability(fname: str, eta: Any, name: str = "eta") -> float:
    try:
        e = float(eta)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{fname}: {name} must be a float in (0, 1), got {eta!r}"
        ) from err
    if not 0.0 < e < 1.0:
        raise ValueError(f"{fname}: {name} must lie in (0, 1), got {e}")
    return e


def check_real_vector(fname: str, name: str, value: Any) -> np.ndarray:
    """A 1-D array of finite real numbers, as float64; raise naming ``fname``
    (strings, booleans and other non-numeric entries are a TypeError, NaN and
    +-inf a ValueError)."""
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(
            f"{fname}: {name} must be an array of real numbers, got dtype {arr.dtype}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{fname}: {name} must be 1-D, got shape {tuple(arr.shape)}")
    x = arr.astype(np.float64)
    if not np.all(np.isfinite(x)):
        bad = x[~np.isfinite(x)][0]
        raise ValueError(f"{fname}: {name} must be finite, got an entry {bad}")
    return x


def check_seeds(fname: str, seeds: Any) -> tuple[int, ...]:
    """A non-empty tuple or list of seeds (ints >= 0); raise naming ``fname``."""
    if not isinstance(seeds, (tuple, list)):
        raise TypeError(
            f"{fname}: seeds must be a tuple of ints >= 0, got "
            f"{type(seeds).__name__} {seeds!r}"
        )
    draws = tuple(check_int(fname, "seeds", v, minimum=0) for v in seeds)
    if not draws:
        raise ValueError(f"{fname}: seeds must hold at least one seed, got ()")
    return draws


def check_bool_mask(fname: str, mask: Any) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(f"{fname}: mask must be boolean, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] < 1:
        raise ValueError(
            f"{fname}: mask must have shape [M] with M >= 1, got {tuple(arr.shape)}"
        )
    return arr
