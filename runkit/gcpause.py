"""Python's garbage collector kept out of a latency measurement, and its pauses
counted.

A collection of the oldest generation walks every object the process holds and
keeps the GIL while it does, so every thread of the process stops: the frontend,
and the embedded thread cluster's workers with it. In a process that has
gathered a large heap (a benchmark after minutes of simulations, a server that
has loaded its model and data) that pause nears a second: 0.62 s over 12
million small lists, and 56 of 5,000 queries on the thread cluster (16
workers, a 250 ms policy deadline) then ended with too few answers
(``python -m tools.gc_stall``). A real frontend pays the same pause
(docs/serving.md, "Garbage collection").

:func:`quiet_gc` collects once, then freezes what the process holds
(``gc.freeze``: later collections skip it), records the pause of every
collection while it is entered, and unfreezes on exit.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator

__all__ = ["GcPauses", "quiet_gc"]


class GcPauses:
    """The collections made while :func:`quiet_gc` was entered: how many, and
    their pauses (seconds) in the order they happened."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start:
            self.pauses.append(time.perf_counter() - self._start)
            self._start = 0.0

    def summary(self) -> dict:
        """``{"collections", "total_ms", "longest_ms"}`` (0 with none)."""
        return {
            "collections": len(self.pauses),
            "total_ms": 1e3 * sum(self.pauses),
            "longest_ms": 1e3 * max(self.pauses, default=0.0),
        }


@contextlib.contextmanager
def quiet_gc() -> Iterator[GcPauses]:
    """Collects, freezes the heap, and yields the record of the collections made
    inside (:class:`GcPauses`); unfreezes on exit, unless the heap was frozen
    already when it was entered (an outer ``quiet_gc`` or ``gc.freeze``). Objects
    made inside are collected as usual: only the heap that was there before is
    set aside."""
    frozen_before = gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    rec = GcPauses()
    gc.callbacks.append(rec._callback)
    try:
        yield rec
    finally:
        gc.callbacks.remove(rec._callback)
        if not frozen_before:  # an outer freeze (another quiet_gc) is kept
            gc.unfreeze()
