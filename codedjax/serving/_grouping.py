"""A streaming frontend's coding groups: queries grouped in arrival order into
groups of K, a group closed when it is full or when its first query has
waited the group deadline.

:class:`Groups` holds the queries that have arrived but are not grouped yet
(the inbox: on a virtual clock a heap of future arrivals, on a real clock the
queries submitted since the dispatcher last looked), the group being filled
and the closed groups not yet sent. The frontend (``_stream.py``) calls it
under its ledger's lock (``_queries.py``).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

from ._checks import is_real, number
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


class Groups:
    """Queries on their way to a fan-out: the inbox, the group being filled
    (``open``) and the closed groups (``ready``).

    Args:
        size: K, the queries of a full group.
        deadline: seconds a group waits, from its first query's arrival.
        virtual: the inbox is a heap of arrivals on a virtual clock (else the
            queries submitted, in order).
    """

    def __init__(self, size: int, deadline: float, *, virtual: bool):
        self.size = int(size)
        self.deadline = float(deadline)
        self.virtual = bool(virtual)
        self.inbox: list = []  # virtual: a heap (at, seq, query); real: a list
        self.open: list[Query] = []
        self.ready: deque[list[Query]] = deque()

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
        self.open.append(q)
        if len(self.open) == self.size:
            self.ready.append(self.open)
            self.open = []

    def due(self) -> float:
        """When the group being filled is closed (inf: none is)."""
        return self.open[0].arrival + self.deadline if self.open else math.inf

    def next_arrival(self) -> float:
        """The next arrival of a virtual clock's inbox (inf: none)."""
        return self.inbox[0][0] if self.inbox else math.inf

    def close_due(self, now: float, flush: bool) -> None:
        """Closes the group being filled if its deadline has come, or if
        ``flush`` (the frontend closes: the group is sent as it is)."""
        if self.open and (flush or self.due() <= now + _EPS):
            self.ready.append(self.open)
            self.open = []

    def next_ready(self) -> list[Query] | None:
        """The next closed group to send (None: none)."""
        return self.ready.popleft() if self.ready else None

    @property
    def empty(self) -> bool:
        """No query waits to be grouped or sent."""
        return not (self.inbox or self.open or self.ready)

    def clear(self) -> None:
        """Forgets every query here (they are ended elsewhere)."""
        self.inbox.clear()
        self.open = []
        self.ready.clear()
