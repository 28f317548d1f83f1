"""Streaming frontend: queries one by one, coded in groups of K in arrival order.

:class:`StreamingServer` owns a :class:`~codedjax.serving.Server` (or a
:class:`~codedjax.serving.PipelineServer`): ``submit(query)`` returns a future; the
queries are grouped in arrival order into coding groups of K (the code's
``num_inputs``), and a group closes when it is full or when its first query has
waited its group deadline (seconds, or a :class:`FillDeadline` that follows the
arrival rate), padded to K with copies of its last query. With dispatch on
arrival a systematic code's query goes to its own workers when it arrives, the
other workers get their coded rows at the close; each query is answered when
it can be: its own worker's answer, a decode that gives it, or its group's
decision (``_per_query.py``). Each query's latency runs from its own arrival to
its answer. The frontend drives its server's engine (``server.engine``,
``_engine.py``) through the engine's declared members (``_streamed.py``: a
group's request opened, sent in parts and answered query by query; ``step``
the loop; ``abort`` after an error).

On a real clock (thread and Ray clusters) a dispatcher thread runs the server's
event loop; ``submit`` may be called from any thread. On a virtual clock (the
simulated cluster) nothing runs in the background: ``submit(query, at=t)`` places
an arrival on the virtual clock and the loop runs when a result is asked for
(``future.result()``, :meth:`StreamingServer.drain`), so an open-loop load on the
simulated cluster is a discrete-event simulation with the real worker functions.

No query is lost: every accepted query's future gets its answer or a
``RuntimeError`` naming the cause (``docs/serving.md``, "Failures: no query
lost"). A worker's bad answer is that worker's failure; a group's own error (its
encode, dispatch, decode, ...) fails that group alone; a failed warm-up or a
broken backend stops the frontend and ends every waiting query with its error.

The grouping (the inbox, the group being filled, its deadline) is
:class:`Groups` (``_grouping.py``); the groups' way through the engine and the
answers back, :class:`Sender` (``_stream_send.py``); the futures and the
ledger of the queries not yet answered, :class:`Ledger` (``_queries.py``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import math
import threading
from typing import Any

import numpy as np

from ._backends import captured_config
from ._checks import integer
from ._deadlines import FillDeadline
from ._grouping import Groups, clock_time, positive_seconds
from ._pipeline import PipelineServer
from ._queries import Ledger, Query, VirtualFuture, checked_query
from ._queries import QueryResult as QueryResult
from ._queries import QueueFull as QueueFull
from ._server import Server
from ._stream_send import Sender


class StreamingServer:
    """Queries one at a time, served in coding groups of K (see the module).

    Args:
        server: a :class:`~codedjax.serving.Server` or
            :class:`~codedjax.serving.PipelineServer`; the frontend owns it from
            now on (its ``infer`` and ``serve`` refuse while the frontend runs) and
            closes it in :meth:`close`.
        group_deadline: seconds (finite, > 0) a group waits, from its first
            query's arrival, before it closes with the queries it has; or a
            :class:`FillDeadline`, which follows the arrival rate (the expected
            time to fill a group at the mean of the last arrival gaps). The
            missing rows are copies of the group's last query (a valid input of
            any model: no zeros fed to an embedding or a log); their answers are
            discarded, but they cost the workers an evaluation like any row.
        dispatch: ``"arrival"`` (default): a systematic code's query is sent to
            its own workers (``code.own_workers``: its systematic worker, or
            its replicas) when it arrives, and every other worker gets its
            coded row when the group closes (padding rows too); ``"group"``:
            every row at the close. The same for a code that is not systematic,
            a :class:`PipelineServer` and a backend without ``submit_part``.
            The policy's deadline counts from the group's close either way.
        on_group: an optional ``on_group(group, result)``, called in the
            dispatcher when a group ends, with its request number and its
            :class:`ServeResult` (``PipelineResult``), or the exception that
            failed it: every group's outcome, whether or not its queries were
            answered before it (an error it raises stops the frontend).
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

    Answers (a one-round :class:`Server`): query k of a group is answered at
    the first of its own worker's successful answer (that answer, no decode),
    the answer after which a decode of the answers in hand gives it (only
    under :class:`FirstDecodable`, after the close: a ParM group rebuilt while
    another is lost), and its group's decision (the decode's row if the
    answers give it, else not ``ok``, with the decode's status); the group's
    workers are released at its decision. A :class:`PipelineServer`'s queries
    are answered together at their group's end.

    Failures (``docs/serving.md``, "Failures: no query lost"): every accepted
    query's future gets its :class:`QueryResult` or a ``RuntimeError`` naming the
    cause. A worker's bad answer (an exception, another shape or dtype, NaN) is
    that worker's failure; an error of one group (its encode, its dispatch, its
    decode) fails that group alone; a failed warm-up (a model that cannot serve
    these queries) or a backend whose ``next_completed`` raises stops the
    frontend: every waiting query ends with the error, later submits raise it.

    Raises:
        TypeError: server not a Server or PipelineServer; a group deadline
            neither seconds nor a FillDeadline; an on_group not callable.
        ValueError: a group deadline or poll that is not finite and > 0, a
            max_pending below 1, a dispatch not "arrival" or "group".
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
        >>> [(a.value.round(3) + 0.0).tolist() for a in answers]  # + 0.0: no -0.0
        [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]
        >>> [a.group_size for a in answers], [a.group for a in answers]
        ([2, 2, 1], [0, 0, 1])
    """

    def __init__(
        self,
        server: Server | PipelineServer,
        *,
        group_deadline: float | FillDeadline,
        dispatch: str = "arrival",
        max_pending: int = 10_000,
        example: Any = None,
        poll: float = 0.001,
        on_group: Any = None,
    ):
        fname = "StreamingServer"
        if not isinstance(server, (Server, PipelineServer)):
            raise TypeError(
                f"{fname}: server must be a codedjax.serving Server or "
                f"PipelineServer, got {type(server).__name__}"
            )
        engine = server.engine
        if engine.closed:
            raise RuntimeError(f"{fname}: the server is closed")
        if engine.frontend is not None:
            raise RuntimeError(f"{fname}: the server already has a StreamingServer")
        virtual = engine.cluster.virtual_clock
        self._queue = Groups(server.num_inputs, group_deadline, virtual=virtual,
                             fname=fname)  # fmt: skip
        self.group_deadline = self._queue.deadline
        self._sender = Sender(engine, dispatch=dispatch, on_group=on_group,
                              fname=fname)  # fmt: skip
        self.dispatch = dispatch
        self.poll = positive_seconds(fname, "poll", poll)
        self.max_pending = integer(fname, "max_pending", max_pending, minimum=1)
        self.server = server
        self.backend = server.backend
        self.num_inputs = server.num_inputs
        self._engine = engine
        self._cluster = engine.cluster  # the backend with its optional members
        self.virtual = self._cluster.virtual_clock
        self._wake = self._cluster.wake if self._cluster.can_wake else None
        # every query accepted and not yet answered, wherever it is (inbox, open
        # group, ready, in flight): an error anywhere resolves all of them
        self._ledger = Ledger()
        self._lock, self._cv = self._ledger.lock, self._ledger.cv
        self._sender.ledger = self._ledger
        self._seq = itertools.count()
        self._last_at = -math.inf
        self._spec = None  # the queries' (shape, dtype), from the first
        self._closing = False
        self._stop = False
        self._closed = False
        self._close_on_exit = False
        self._error: BaseException | None = None
        self.rejected = 0
        engine.frontend = self
        engine.on_answers = self._sender.settle
        if example is not None:
            try:
                x = self._check_query("StreamingServer", example)
                engine.warmup(np.stack([x] * self.num_inputs), fname)
            except BaseException:
                engine.frontend = engine.on_answers = None  # usable on its own
                raise
        self._thread = None
        self._config = captured_config()
        if not self.virtual:
            self._thread = threading.Thread(
                target=self._dispatch, name="codedjax-stream", daemon=True
            )
            self._thread.start()

    # ---------------------------------------------------------------- submit

    def _check_query(self, fname: str, query: Any) -> np.ndarray:
        x, self._spec = checked_query(fname, query, self._spec, self._engine)
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
            now = self._cluster.now()
            t = now if at is None else clock_time(fname, at)
            if not (t >= max(self._last_at, now if self.virtual else -math.inf)):
                raise ValueError(
                    f"{fname}: arrivals must come in time order, at or after the "
                    f"clock: got at={at!r}, the previous arrival "
                    f"{self._last_at:.9g}, the clock {now:.9g}"
                )
            if self._ledger.pending >= self.max_pending:
                self.rejected += 1
                raise QueueFull(
                    f"{fname}: {self._ledger.pending} queries are waiting for their "
                    f"answers (max_pending = {self.max_pending}); retry later"
                )
            self._last_at = t
            if self.virtual:
                fut = VirtualFuture(self._drive)
            else:
                fut = concurrent.futures.Future()
            q = Query(x, t, fut, next(self._seq))
            self._ledger.add(q)
            self._queue.arrive(q)
            if not self.virtual:
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
        return self._ledger.pending

    # ---------------------------------------------------------------- the loop

    def _send(self, fname: str) -> None:
        """Takes the grouping's steps (queries to their own workers, closed
        groups to every worker: :class:`Sender`). A group whose request cannot
        be sent (its encode, its noise levels, the backend's submit raised)
        fails alone; a failed warm-up (the model cannot serve these queries: a
        worker_fn that returns no floating array, cannot run on a coded row,
        ...) stops the frontend, every waiting query ending with its error."""
        while (step := self._queue.next_step()) is not None:
            try:
                self._sender.take(step, fname)
            except Exception as exc:
                if not self._engine.warm:  # every group would fail alike: stop
                    self._fail(exc, what="the server's warm-up failed")
                raise

    def _idle(self) -> bool:
        return self._queue.empty and not self._engine.in_flight

    def _dispatch(self) -> None:
        """The dispatcher thread (real clock), in the JAX settings of the thread
        that built the frontend."""
        with self._config():
            try:
                self._dispatch_loop()
            finally:
                if self._close_on_exit:  # close() came from a future's callback
                    self._finish_close()

    def _dispatch_loop(self) -> None:
        fname = "StreamingServer"
        engine = self._engine
        try:
            while not self._stop:
                now = self._cluster.now()
                with self._lock:
                    self._queue.absorb(now)
                    if self._closing and self._idle():
                        return
                    self._queue.close_due(now, flush=self._closing)
                self._send(fname)
                due = self._queue.due()
                if engine.in_flight:
                    until = due if self._wake is not None else min(due, now + self.poll)
                    self._sender.collect(engine.step(fname, until=until))
                else:
                    with self._cv:
                        if not self._queue.inbox and not self._closing:
                            wait = None if math.isinf(due) else max(0.0, due - now)
                            self._cv.wait(wait)
        except BaseException as exc:  # fail every waiting query, never drop one
            self._fail(exc)

    def _drive(self, until=None) -> None:
        """Runs the loop on the virtual clock until ``until`` (a future) is done,
        or until nothing is left. An error that stops the frontend ends every
        waiting query with it (their futures raise it), and is not raised here."""
        fname = "StreamingServer"
        engine = self._engine
        if self._error is not None:
            return
        try:
            while until is None or not until.done():
                now = self._cluster.now()
                with self._lock:
                    self._queue.absorb(now)
                    self._queue.close_due(now, flush=self._closing)
                self._send(fname)
                if self._idle():
                    return
                target = min(self._queue.next_arrival(), self._queue.due())
                if engine.in_flight:
                    self._sender.collect(engine.step(fname, until=target))
                elif math.isfinite(target):
                    self._cluster.advance(target - now)
                else:  # pragma: no cover - idle is checked above
                    return
        except BaseException as exc:
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and the like: after failing the queries

    def drain(self) -> None:
        """Virtual clock: runs until every submitted query is answered (groups
        not full by then are sent at their deadline). Real clock: waits until
        every submitted query is answered. Answered includes ended with an
        error: a query's future holds its result or its error, and ``drain``
        itself does not raise them."""
        if self.virtual:
            self._drive(None)
            return
        with self._cv:
            while self._ledger.pending > 0 and self._error is None:
                self._cv.wait()

    def _fail(
        self,
        exc: BaseException,
        *,
        stop: bool = True,
        what: str = "the query was not answered",
    ) -> None:
        """Ends every query still waiting, wherever it is, with an error naming
        the cause; ``stop``: the frontend refuses later queries with it."""
        with self._lock:
            if stop and self._error is None:
                self._error = exc
            self._queue.clear()
            queries = self._ledger.waiting()
        self._sender.clear()
        with contextlib.suppress(Exception):  # best effort after an error
            self._engine.abort()
        self._ledger.reject(queries, exc, what)

    # ---------------------------------------------------------------- lifecycle

    def close(self, *, wait: bool = True) -> None:
        """Stops the frontend and closes its server.

        Args:
            wait: send the group being filled now and answer every query first
                (default); False ends the waiting queries with an error. Called
                from a future's done-callback (in the dispatcher thread), it
                returns at once: the dispatcher finishes (or stops), then closes.
        """
        if self._closed:
            return
        stop = not wait or self._error is not None
        with self._lock:
            self._closing = True
            self._stop = self._stop or stop
            self._cv.notify_all()
        if self._thread is not None and threading.current_thread() is self._thread:
            # called in the dispatcher itself (a future's done-callback): it
            # finishes (or stops) its loop, then closes
            self._close_on_exit = True
            if self._wake is not None:
                self._wake()
            return
        try:
            if self._thread is not None:
                if self._wake is not None:
                    self._wake()
                self._thread.join()
            elif not stop:
                self._drive(None)
        finally:
            self._finish_close()

    def _finish_close(self) -> None:
        """Ends what is still waiting (close(wait=False), an interrupted drain)
        with an error, and closes the server."""
        if self._ledger.live:
            err = RuntimeError("StreamingServer.close: closed before its answer")
            self._fail(err, stop=False)
        self._closed = True
        self._engine.frontend = self._engine.on_answers = None
        self.server.close()

    def __enter__(self) -> StreamingServer:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(wait=exc_type is None)
