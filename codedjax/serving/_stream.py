"""Streaming frontend: queries one by one, coded in groups of K in arrival order.

:class:`StreamingServer` owns a :class:`~codedjax.serving.Server` (or a
:class:`~codedjax.serving.PipelineServer`): ``submit(query)`` returns a future; the
queries are grouped in arrival order into coding groups of K (the code's
``num_inputs``), and a group is sent when it is full or when its first query has
waited ``group_deadline`` seconds, padded to K with copies of its last query. Each
query's latency runs from its own arrival to its decoded answer.

On a real clock (thread and Ray clusters) a dispatcher thread runs the server's
event loop; ``submit`` may be called from any thread. On a virtual clock (the
simulated cluster) nothing runs in the background: ``submit(query, at=t)`` places
an arrival on the virtual clock and the loop runs when a result is asked for
(``future.result()``, :meth:`StreamingServer.drain`), so an open-loop load on the
simulated cluster is a discrete-event simulation with the real worker functions.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import math
import threading
from collections import deque
from typing import Any, NamedTuple

import numpy as np

from ._backends import captured_config
from ._checks import integer, is_real, number
from ._server import Engine


class QueueFull(RuntimeError):
    """:meth:`StreamingServer.submit` refused a query: ``max_pending`` queries are
    already waiting for their answers (back-pressure: retry later)."""


class QueryResult(NamedTuple):
    """The answer to one query of a :class:`StreamingServer`.

    Attributes:
        value: the query's decoded output [...] (its row of the group's value;
            zeros when not ok).
        ok: its group decoded.
        status: the group's status (``codedjax.Status``; 0 = success).
        error: the group's predicted absolute error (inf when not ok).
        latency: seconds from the query's arrival to its answer.
        waited: seconds from its arrival to its group's fan-out (the wait for
            the group to fill, or for its group deadline).
        arrival: its arrival time on the backend's clock.
        group: its group's request number on the server (the injector's draw).
        slot: its row in the group (0 .. K - 1).
        group_size: the real queries in its group (K minus the padding).
        evaluations: the evaluations its group's request began at the workers
            (every round's, for a pipeline), per real query of the group: the
            work this query cost (nan when the backend does not count).
        busy: worker-seconds of those evaluations, per real query (nan when the
            backend does not measure them).
        result: the group's :class:`ServeResult` (or ``PipelineResult``).
    """

    value: np.ndarray
    ok: bool
    status: int
    error: float
    latency: float
    waited: float
    arrival: float
    group: int
    slot: int
    group_size: int
    evaluations: float
    busy: float
    result: Any


class _Query:
    __slots__ = ("x", "arrival", "future")

    def __init__(self, x, arrival, future):
        self.x, self.arrival, self.future = x, arrival, future


class _VirtualFuture(concurrent.futures.Future):
    """A future of a virtual-clock frontend: asking for its result runs the
    simulation until it is answered."""

    def __init__(self, frontend):
        super().__init__()
        self._frontend = frontend

    def result(self, timeout=None):
        if not self.done():
            self._frontend._drive(self)
        return super().result(timeout)

    def exception(self, timeout=None):
        if not self.done():
            self._frontend._drive(self)
        return super().exception(timeout)


def _positive(fname: str, name: str, value: Any) -> float:
    return number(fname, name, value, positive=True, what="a number of seconds")


def _clock_time(fname: str, at: Any) -> float:
    """``at=``: a finite number of seconds (its order is checked against the
    clock and the previous arrival)."""
    if not is_real(at):
        raise TypeError(f"{fname}: at must be a number of seconds, got {at!r}")
    if not math.isfinite(float(at)):
        raise ValueError(f"{fname}: at must be finite seconds, got {at!r}")
    return float(at)


def _outcome(res) -> tuple:
    """(evaluations, busy) of a group's result (a pipeline: every round's)."""
    rounds = getattr(res, "rounds", None)
    parts = rounds if rounds is not None else (res,)
    ev = [getattr(p, "evaluations", -1) for p in parts]
    busy = [getattr(p, "busy", math.nan) for p in parts]
    total = math.nan if any(e < 0 for e in ev) else float(sum(ev))
    return total, float(sum(busy))


class StreamingServer:
    """Queries one at a time, served in coding groups of K (see the module).

    Args:
        server: a :class:`~codedjax.serving.Server` or
            :class:`~codedjax.serving.PipelineServer`; the frontend owns it from
            now on (its ``infer`` and ``serve`` refuse while the frontend runs) and
            closes it in :meth:`close`.
        group_deadline: seconds (finite, > 0) a group waits, from its first
            query's arrival, before it is sent with the queries it has. The
            missing rows are copies of the group's last query (a valid input of
            any model: no zeros fed to an embedding or a log); their answers are
            discarded, but they cost the workers an evaluation like any row.
        max_pending: queries accepted and not yet answered, at most (int >= 1,
            default 10,000): beyond it :meth:`submit` raises :class:`QueueFull`
            (back-pressure; nothing is dropped silently). The groups themselves
            are sent as soon as they close (no limit on groups in flight): the
            queueing happens at the workers, one evaluation at a time each.
        example: an optional query [...] to compile everything with now (else the
            first group compiles, outside its timing but inside its latency).
        poll: on a backend without ``wake`` (a backend of your own), how often
            (seconds) the dispatcher looks for new queries while groups are in
            flight.

    Raises:
        TypeError: server not a Server or PipelineServer; a non-numeric deadline.
        ValueError: a group deadline or poll that is not finite and > 0, a
            max_pending below 1.
        RuntimeError: the server is closed.

    Examples:
        >>> import numpy as np, codedjax as cj
        >>> from codedjax.serving import (FixedN, Server, SimulatedCluster,
        ...                               StreamingServer)
        >>> code = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1)
        >>> server = Server(code, lambda v: 2 * v, backend=SimulatedCluster(),
        ...                 policy=FixedN(3))
        >>> with StreamingServer(server, group_deadline=0.01) as front:
        ...     futs = [front.submit(np.full(3, q, np.float32)) for q in range(3)]
        ...     answers = [f.result() for f in futs]
        >>> [a.value.round(3).tolist() for a in answers]
        [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]
        >>> [a.group_size for a in answers], [a.group for a in answers]
        ([2, 2, 1], [0, 0, 1])
    """

    def __init__(
        self,
        server: Engine,
        *,
        group_deadline: float,
        max_pending: int = 10_000,
        example: Any = None,
        poll: float = 0.001,
    ):
        fname = "StreamingServer"
        if not isinstance(server, Engine):
            raise TypeError(
                f"{fname}: server must be a codedjax.serving Server or "
                f"PipelineServer, got {type(server).__name__}"
            )
        if server._closed:
            raise RuntimeError(f"{fname}: the server is closed")
        if getattr(server, "_frontend", None) is not None:
            raise RuntimeError(f"{fname}: the server already has a StreamingServer")
        self.group_deadline = _positive(fname, "group_deadline", group_deadline)
        self.poll = _positive(fname, "poll", poll)
        self.max_pending = integer(fname, "max_pending", max_pending, minimum=1)
        self.server = server
        self.backend = server.backend
        self.num_inputs = server.num_inputs
        self.virtual = callable(getattr(self.backend, "advance", None))
        self._wake = getattr(self.backend, "wake", None)
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._inbox: list = []  # virtual: a heap (at, seq, query); real: a list
        self._seq = itertools.count()
        self._open: list[_Query] = []  # the group being filled
        self._ready: deque = deque()  # closed groups not yet sent
        self._groups: dict[int, tuple[list[_Query], float]] = {}  # rid: (group, sent)
        self._pending = 0
        self._last_at = -math.inf
        self._shape = None
        self._dtype = None
        self._closing = False
        self._stop = False
        self._closed = False
        self._error: BaseException | None = None
        self.rejected = 0
        server._frontend = self
        if example is not None:
            x = self._check_query("StreamingServer", example)
            server._warmup(np.stack([x] * self.num_inputs), fname)
        self._thread = None
        self._config = captured_config()
        if not self.virtual:
            self._thread = threading.Thread(
                target=self._dispatch, name="codedjax-stream", daemon=True
            )
            self._thread.start()

    # ---------------------------------------------------------------- submit

    def _check_query(self, fname: str, query: Any) -> np.ndarray:
        x = np.asarray(query)
        if not np.issubdtype(x.dtype, np.floating) and x.dtype.name != "bfloat16":
            raise TypeError(
                f"{fname}: a query must be a floating array (one row of the code's "
                f"input [K, ...]), got dtype {x.dtype}"
            )
        if self._shape is None:
            want = self.server._in_shape
            if want is not None:
                self._shape, self._dtype = want[1:], np.dtype(self.server._in_dtype)
            else:
                self._shape, self._dtype = x.shape, x.dtype
        if x.shape != self._shape or x.dtype != self._dtype:
            raise ValueError(
                f"{fname}: every query must have the shape and dtype of the "
                f"server's queries, {self._shape} {self._dtype}, got {x.shape} "
                f"{x.dtype}"
            )
        return x

    def submit(
        self, query: Any, *, at: float | None = None
    ) -> concurrent.futures.Future:
        """Queues one query; returns a future of its :class:`QueryResult`.

        Args:
            query: one query [...] (a row of the code's input [K, ...]; every
                query of the frontend has the shape and dtype of the first).
            at: on a virtual clock only, its arrival time (seconds on the
                backend's clock; default: now). Arrivals come in time order.

        Raises:
            TypeError: a query that is not floating.
            ValueError: a query shaped unlike the others; ``at`` on a real clock,
                or earlier than the previous arrival or the clock.
            QueueFull: ``max_pending`` queries are waiting for their answers.
            RuntimeError: the frontend is closed, or its dispatcher stopped on an
                error (the message says which).
        """
        fname = "StreamingServer.submit"
        x = self._check_query(fname, query)
        if at is not None and not self.virtual:
            raise ValueError(
                f"{fname}: at= places an arrival on a virtual clock (a "
                f"SimulatedCluster); on {type(self.backend).__name__} a query "
                f"arrives when it is submitted"
            )
        with self._lock:
            self._check_open(fname)
            now = self.backend.now()
            t = now if at is None else _clock_time(fname, at)
            if not (t >= max(self._last_at, now if self.virtual else -math.inf)):
                raise ValueError(
                    f"{fname}: arrivals must come in time order, at or after the "
                    f"clock: got at={at!r}, the previous arrival "
                    f"{self._last_at:.9g}, the clock {now:.9g}"
                )
            if self._pending >= self.max_pending:
                self.rejected += 1
                raise QueueFull(
                    f"{fname}: {self._pending} queries are waiting for their answers "
                    f"(max_pending = {self.max_pending}); retry later"
                )
            self._last_at = t
            fut = _VirtualFuture(self) if self.virtual else concurrent.futures.Future()
            q = _Query(x, t, fut)
            self._pending += 1
            if self.virtual:
                heapq.heappush(self._inbox, (t, next(self._seq), q))
            else:
                self._inbox.append(q)
                self._cv.notify_all()
        if self._wake is not None and not self.virtual:
            self._wake()
        return fut

    def _check_open(self, fname: str) -> None:
        if self._error is not None:
            raise RuntimeError(
                f"{fname}: the frontend stopped on an error: {self._error!r}"
            ) from self._error
        if self._closing or self._closed:
            raise RuntimeError(f"{fname}: the StreamingServer is closed")

    @property
    def pending(self) -> int:
        """Queries accepted and not yet answered."""
        return self._pending

    # ---------------------------------------------------------------- the loop

    def _absorb(self, now: float) -> None:
        """Moves the queries that have arrived into groups (under the lock)."""
        if self.virtual:
            while self._inbox and self._inbox[0][0] <= now + 1e-12:
                self._add(heapq.heappop(self._inbox)[2])
        else:
            for q in self._inbox:
                self._add(q)
            self._inbox.clear()

    def _add(self, q: _Query) -> None:
        self._open.append(q)
        if len(self._open) == self.num_inputs:
            self._ready.append(self._open)
            self._open = []

    def _group_due(self) -> float:
        return self._open[0].arrival + self.group_deadline if self._open else math.inf

    def _close_due(self, now: float, flush: bool) -> None:
        if self._open and (flush or self._group_due() <= now + 1e-12):
            self._ready.append(self._open)
            self._open = []

    def _send(self, fname: str) -> None:
        while self._ready:
            group = self._ready.popleft()
            rows = [q.x for q in group]
            rows += [rows[-1]] * (self.num_inputs - len(rows))
            sent = self.backend.now()
            r = self.server._open(None, np.stack(rows), fname)
            self._groups[r.rid] = (group, sent)

    def _resolve(self, done: list) -> None:
        for r, res in done:
            group, sent = self._groups.pop(r.rid)
            t = self.backend.now()
            evals, busy = _outcome(res)
            n = len(group)
            value = np.asarray(res.value)
            for slot, q in enumerate(group):
                qr = QueryResult(
                    value=value[slot],
                    ok=bool(res.ok),
                    status=int(res.status),
                    error=float(res.error),
                    latency=t - q.arrival,
                    waited=sent - q.arrival,
                    arrival=q.arrival,
                    group=r.rid,
                    slot=slot,
                    group_size=n,
                    evaluations=evals / n,
                    busy=busy / n,
                    result=res,
                )
                with self._lock:
                    self._pending -= 1
                    self._cv.notify_all()
                q.future.set_result(qr)

    def _idle(self) -> bool:
        return not (self._inbox or self._open or self._ready or self.server._active)

    def _dispatch(self) -> None:
        """The dispatcher thread (real clock), in the JAX settings of the thread
        that built the frontend."""
        with self._config():
            self._dispatch_loop()

    def _dispatch_loop(self) -> None:
        fname = "StreamingServer"
        server = self.server
        try:
            while not self._stop:
                now = self.backend.now()
                with self._lock:
                    self._absorb(now)
                    if self._closing and self._idle():
                        return
                    self._close_due(now, flush=self._closing)
                self._send(fname)
                due = self._group_due()
                if server._active:
                    until = due if self._wake is not None else min(due, now + self.poll)
                    self._resolve(server._step(fname, until=until))
                else:
                    with self._cv:
                        if not self._inbox and not self._closing:
                            wait = None if math.isinf(due) else max(0.0, due - now)
                            self._cv.wait(wait)
        except BaseException as exc:  # fail every waiting query, never drop one
            self._fail(exc)

    def _drive(self, until=None) -> None:
        """Runs the loop on the virtual clock until ``until`` (a future) is done,
        or until nothing is left."""
        fname = "StreamingServer"
        server = self.server
        try:
            while until is None or not until.done():
                now = self.backend.now()
                with self._lock:
                    self._absorb(now)
                    self._close_due(now, flush=self._closing)
                self._send(fname)
                if self._idle():
                    return
                nxt = self._inbox[0][0] if self._inbox else math.inf
                target = min(nxt, self._group_due())
                if server._active:
                    self._resolve(server._step(fname, until=target))
                elif math.isfinite(target):
                    self.backend.advance(target - now)
                else:  # pragma: no cover - idle is checked above
                    return
        except BaseException as exc:
            self._fail(exc)
            raise

    def drain(self) -> None:
        """Virtual clock: runs until every submitted query is answered (groups
        not full by then are sent at their deadline). Real clock: waits until
        every submitted query is answered."""
        if self.virtual:
            self._drive(None)
            return
        with self._cv:
            while self._pending > 0 and self._error is None:
                self._cv.wait()

    def _fail(self, exc: BaseException) -> None:
        """Ends every query still waiting with an error naming the cause."""
        with self._lock:
            if self._error is None:
                self._error = exc
            queries = (
                [q for *_, q in self._inbox] if self.virtual else list(self._inbox)
            )
            self._inbox.clear()
            queries += self._open
            self._open = []
            for g in self._ready:
                queries += g
            self._ready.clear()
        for group, _ in self._groups.values():
            queries += group
        self._groups.clear()
        try:
            self.server._abort()
        except Exception:  # pragma: no cover - best effort after an error
            pass
        err = RuntimeError(f"StreamingServer: the query was not answered: {exc!r}")
        err.__cause__ = exc
        for q in queries:
            if not q.future.done():
                with self._lock:
                    self._pending -= 1
                    self._cv.notify_all()
                q.future.set_exception(err)

    # ---------------------------------------------------------------- lifecycle

    def close(self, *, wait: bool = True) -> None:
        """Stops the frontend and closes its server.

        Args:
            wait: send the group being filled now and answer every query first
                (default); False ends the waiting queries with an error.
        """
        if self._closed:
            return
        if wait and self._error is None:
            with self._lock:
                self._closing = True
                self._cv.notify_all()
            if self.virtual:
                self._drive(None)
            else:
                if self._wake is not None:
                    self._wake()
                self._thread.join()
        else:
            with self._lock:
                self._closing = self._stop = True
                self._cv.notify_all()
            if self._thread is not None:
                if self._wake is not None:
                    self._wake()
                self._thread.join()
            self._fail(RuntimeError("StreamingServer.close: closed before its answer"))
        self._closed = True
        self.server._frontend = None
        self.server.close()

    def __enter__(self) -> StreamingServer:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(wait=exc_type is None)
