"""The checks of the serving runtime's numeric arguments, one rule per kind.

Every number a user passes to the serving API (a time, a rate, a probability, a
count, a seed, a request or worker number) goes through :func:`number` or
:func:`integer`, so every public function refuses the same class of values the
same way: a ``TypeError`` for what is not a number (a string, a bool, None where
a number is needed) and a ``ValueError`` for a number out of range (negative, NaN
or infinite, zero where it must be positive), each naming the public function
and the argument, saying what was expected and what came.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def is_real(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Real):
        return True
    return (
        isinstance(value, np.ndarray)
        and value.ndim == 0
        and (np.issubdtype(value.dtype, np.integer)
             or np.issubdtype(value.dtype, np.floating))
    )  # fmt: skip


def number(
    fname: str,
    name: str,
    value: Any,
    *,
    positive: bool = False,
    at_most: float | None = None,
    what: str = "a number",
) -> float:
    """``value`` as a finite float >= 0 (> 0 with ``positive``; <= ``at_most``)."""
    if not is_real(value):
        raise TypeError(f"{fname}: {name} must be {what}, got {value!r}")
    v = float(value)
    bad = not math.isfinite(v) or v < 0 or (positive and v == 0)
    if bad or (at_most is not None and v > at_most):
        need = "> 0" if positive else ">= 0"
        if at_most is not None:
            need += f" and <= {at_most:g}"
        raise ValueError(f"{fname}: {name} must be finite and {need}, got {value!r}")
    return v


def integer(fname: str, name: str, value: Any, *, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum`` (Python or numpy integers only)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fname}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{fname}: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)
