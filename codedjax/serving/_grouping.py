"""A streaming frontend's coding groups: queries grouped in arrival order into
groups of K, a group closed when it is full or when its first query has
waited the group deadline (fixed, or a :class:`FillDeadline`'s, from the
arrivals before it: ``_deadlines.py``, the rule the simulator applies).

:class:`Groups` holds the queries that have arrived but are not grouped yet
(the inbox: on a virtual clock a heap of future arrivals, on a real clock the
queries submitted since the dispatcher last looked), the group being filled,
and the steps not yet taken, in order: each query joining its group, each
group closing. The frontend (``_stream.py``) calls it under its ledger's lock
(``_queries.py``) and takes the steps (``_stream_send.py``).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

import numpy as np

from ._checks import is_real, number
from ._deadlines import FillDeadline, group_deadline
from ._queries import Query

_EPS = 1e-12  # seconds: a deadline or an arrival this close to now is now


def positive_seconds(fname: str, name: str, value: Any) -> float:
    """``value`` as a finite number of seconds > 0, or a clear error."""
    return number(fname, name, value, positive=True, what="a number of seconds")


def clock_time(fname: str, at: Any) -> float:
    """``at=``: a finite number of seconds (its order is checked against the
    clock and the previous arrival by the caller)."""
    if not is_real(at):
        raise TypeError(f"{fname}: at must be a number of seconds, got {at!r}")
    if not math.isfinite(float(at)):
        raise ValueError(f"{fname}: at must be finite seconds, got {at!r}")
    return float(at)


class Group:
    """A coding group: its ``queries`` in slot order, its ``due`` time (its
    first query's arrival plus its deadline), its engine ``request`` (once
    opened) and ``error`` (its own, once it failed)."""

    __slots__ = ("queries", "due", "request", "error")

    def __init__(self, due: float):
        self.queries: list[Query] = []
        self.due = due
        self.request = None
        self.error: BaseException | None = None


class Groups:
    """Queries on their way to a fan-out: the inbox, the group being filled
    (``open``) and the ``steps`` to take, in order: ``("query", group, slot)``
    a query joined its group, ``("close", group)`` a group closed.

    Args:
        size: K, the queries of a full group.
        deadline: seconds a group waits, from its first query's arrival, or a
            :class:`FillDeadline` (from the last ``window`` arrival gaps
            before the group's first query).
        virtual: the inbox is a heap of arrivals on a virtual clock (else the
            queries submitted, in order).
        fname: the caller, for messages.

    Raises:
        TypeError, ValueError: a bad deadline (``group_deadline``'s errors).
    """

    def __init__(self, size: int, deadline: Any, *, virtual: bool, fname: str):
        self.size = int(size)
        self.rule = group_deadline(fname, deadline, self.size)
        self.deadline = (
            deadline if isinstance(deadline, FillDeadline) else float(deadline)
        )
        window = deadline.window if isinstance(deadline, FillDeadline) else 0
        self.recent: deque[float] = deque(maxlen=window + 1)  # the last arrivals
        self.virtual = bool(virtual)
        self.inbox: list = []  # virtual: a heap (at, seq, query); real: a list
        self.open: Group | None = None
        self.steps: deque[tuple] = deque()

    def arrive(self, q: Query) -> None:
        """A query submitted (arriving at ``q.arrival``)."""
        if self.virtual:
            heapq.heappush(self.inbox, (q.arrival, q.seq, q))
        else:
            self.inbox.append(q)

    def absorb(self, now: float) -> None:
        """Moves the queries that have arrived by ``now`` into groups."""
        if self.virtual:
            while self.inbox and self.inbox[0][0] <= now + _EPS:
                self._add(heapq.heappop(self.inbox)[2])
        else:
            for q in self.inbox:
                self._add(q)
            self.inbox.clear()

    def _add(self, q: Query) -> None:
        self.recent.append(q.arrival)
        g = self.open
        if g is None:  # its deadline from the arrivals up to its first query's
            a = np.fromiter(self.recent, np.float64, len(self.recent))
            g = self.open = Group(q.arrival + self.rule(a, len(a) - 1))
        g.queries.append(q)
        self.steps.append(("query", g, len(g.queries) - 1))
        if len(g.queries) == self.size:
            self._close()

    def _close(self) -> None:
        self.steps.append(("close", self.open))
        self.open = None

    def due(self) -> float:
        """When the group being filled is closed (inf: none is)."""
        return self.open.due if self.open is not None else math.inf

    def next_arrival(self) -> float:
        """The next arrival of a virtual clock's inbox (inf: none)."""
        return self.inbox[0][0] if self.inbox else math.inf

    def close_due(self, now: float, flush: bool) -> None:
        """Closes the group being filled if its deadline has come, or if
        ``flush`` (the frontend closes: the group is sent as it is)."""
        if self.open is not None and (flush or self.open.due <= now + _EPS):
            self._close()

    def next_step(self) -> tuple | None:
        """The next step to take (None: none)."""
        return self.steps.popleft() if self.steps else None

    @property
    def empty(self) -> bool:
        """No query waits to be grouped or sent."""
        return not (self.inbox or self.open is not None or self.steps)

    def clear(self) -> None:
        """Forgets every query here (they are ended elsewhere)."""
        self.inbox.clear()
        self.open = None
        self.steps.clear()
