"""A coding group's deadline: fixed, or following the arrival rate.

A streaming frontend closes a group when it holds K queries or when its first
query has waited the group deadline. A fixed deadline suits one rate only: at a
low rate every group waits it out and is sent short (its padding costs the
workers as much as real queries), at a high rate it never matters.
:class:`FillDeadline` follows the rate instead: a group opened after arrivals
with mean gap ``g`` (the last ``window`` gaps) waits ``factor (K - 1) g``, the
expected time to fill it, clipped to ``[minimum, maximum]``. With dispatch on
arrival (a systematic code sends each query to its own worker when it arrives)
the wait delays only the coded queries, so a deadline near the fill time keeps
groups full without holding a query that its own worker will answer.

:func:`group_deadline` turns either form into the rule the frontend and the
simulator share: ``deadline(arrivals, start)`` for the group whose first query
is ``arrivals[start]``, from the arrivals before it only (causal).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._checks import integer, is_real, number


class FillDeadline:
    """A group deadline that follows the arrival rate (see the module).

    Args:
        factor: multiple of the expected fill time ``(K - 1) g`` (finite, > 0;
            default 1.5).
        window: arrival gaps averaged for ``g`` (int >= 1; default 64).
        minimum: the shortest deadline in seconds (finite, > 0; default 1 ms).
        maximum: the longest deadline in seconds (finite, >= minimum; default 50
            ms), also the deadline before any gap is known.

    Raises:
        TypeError: a parameter that is not a number.
        ValueError: a non-finite or non-positive parameter, window < 1, or
            maximum < minimum.
    """

    def __init__(
        self,
        factor: float = 1.5,
        *,
        window: int = 64,
        minimum: float = 1e-3,
        maximum: float = 0.05,
    ):
        name = "FillDeadline"
        self.factor = number(name, "factor", factor, positive=True)
        self.window = integer(name, "window", window, minimum=1)
        self.minimum = number(name, "minimum", minimum, positive=True,
                              what="a number of seconds")  # fmt: skip
        self.maximum = number(name, "maximum", maximum, positive=True,
                              what="a number of seconds")  # fmt: skip
        if self.maximum < self.minimum:
            raise ValueError(
                f"{name}: maximum must be >= minimum = {self.minimum!r} seconds, "
                f"got {self.maximum!r}"
            )

    def seconds(self, size: int, mean_gap: float) -> float:
        """The deadline of a group of ``size`` queries after arrivals with mean
        gap ``mean_gap`` seconds (nan: none known yet, the maximum)."""
        if not math.isfinite(mean_gap):
            return self.maximum
        fill = self.factor * max(size - 1, 1) * mean_gap
        return min(max(fill, self.minimum), self.maximum)

    def __repr__(self):
        return (
            f"FillDeadline({self.factor!r}, window={self.window}, "
            f"minimum={self.minimum!r}, maximum={self.maximum!r})"
        )


def group_deadline(
    fname: str, value: Any, size: int
) -> Callable[[np.ndarray, int], float]:
    """``value`` (seconds, or a :class:`FillDeadline`) as the rule
    ``deadline(arrivals, start) -> seconds`` for groups of ``size`` queries, or
    a clear error naming ``fname`` and ``group_deadline``."""
    if isinstance(value, FillDeadline):
        w = value.window

        def deadline(arrivals: np.ndarray, start: int) -> float:
            lo = max(0, start - w)
            if start - lo < 1:
                return value.seconds(size, math.nan)
            gap = (arrivals[start] - arrivals[lo]) / (start - lo)
            return value.seconds(size, float(gap))

        return deadline
    if not is_real(value):
        raise TypeError(
            f"{fname}: group_deadline must be seconds (a finite number > 0) or a "
            f"FillDeadline, got {value!r:.80}"
        )
    seconds = number(fname, "group_deadline", value, positive=True,
                     what="a number of seconds")  # fmt: skip
    return lambda arrivals, start: seconds
