"""The serving model's worker queues, stated once, and the two ways to run them.

Every simulator of the library runs one model of the workers. Worker i is a
machine: it serves one evaluation at a time from its own FIFO queue
(``queueing=False``: unlimited capacity, every evaluation begins when it is
sent). An evaluation offered to its worker at time t begins at ``max(t, when
the worker is free)``; it answers after its service time (never, for a hung
worker) and ends at its answer or at its request's release (the decision, a
cancellation), whichever comes first; one released before it began is dropped
and costs nothing. Those rules are :class:`WorkerQueues`' two methods,
``begin`` and ``end``, and nothing else states them.

Two drives run the queues:

* :func:`serve_batch`, vectorised: a batch of requests fanned out together,
  each decided by the policy's rule from its own answer times and released at
  its decision. Requests sent in order go through it one batch after another,
  exactly: a worker serves in FIFO order and a request's decision depends on its
  own answers only, so request g's release is known before request g + 1's
  evaluations are placed. ``simulate_load`` runs its groups so (one batch per
  round of shards); ``simulate_latency`` is the case where every request finds
  its workers idle (``queueing=False``: one batch of all R requests, sent at 0).
* :class:`EventQueues`, event by event on a virtual clock, for a decider outside
  the queues: the :class:`~codedjax.serving.SimulatedCluster` delivers each
  answer as it comes, and the server cancels a request when it decides.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._faults import CORRUPT, HANG, NONE
from ._policy import ArrivalTimes


class WorkerQueues:
    """The workers' state (any shape, the workers on the last axis) and the
    model's two rules.

    Args:
        shape: the state's shape, e.g. ``(M,)``, or ``(S, M)`` for S copies of
            the M workers.
        queueing: workers serve one evaluation at a time (default True);
            False: unlimited capacity (every evaluation begins when offered).

    Attributes:
        free: float [shape] when each worker is done with the evaluations that
            began on it (-inf: never busy); unused without queueing.
        busy_time: float [shape] seconds each worker has spent serving
            evaluations (to their answer, or to their release).
        queueing: as given.
    """

    def __init__(self, shape: tuple[int, ...], *, queueing: bool = True):
        self.free = np.full(shape, -math.inf)
        self.busy_time = np.zeros(shape)
        self.queueing = bool(queueing)

    def begin(self, offered: Any, at: Any = slice(None)) -> Any:
        """When evaluations offered at ``offered`` (broadcast against
        ``free[at]``) to the workers ``free[at]`` begin: at once on a free
        worker, else when it is free (its earlier evaluations first); at once
        without queueing."""
        if self.queueing:
            return np.maximum(offered, self.free[at])
        shape = np.broadcast_shapes(np.shape(offered), np.shape(self.free[at]))
        return np.broadcast_to(offered, shape)

    def end(
        self, start: Any, answer: Any, release: Any, at: Any = slice(None)
    ) -> tuple[Any, Any]:
        """Evaluations on the workers ``free[at]`` that began at ``start``,
        answer at ``answer`` (inf: no answer by the release) and are released
        at ``release``.

        An evaluation counts when it began before its release or answered by
        it (one dropped before it began costs nothing); it occupied its worker
        from its start to its answer or its release, whichever is first, and
        the worker is free from then on (the next evaluation in its queue may
        begin). Leading axes of the evaluations beyond ``free[at]``'s are
        requests on idle workers: their time adds up in ``busy_time``.

        Returns:
            ``(counted, busy)``: bool and float, the shape of the evaluations.
        """
        end = np.minimum(answer, release)
        counted = (start < release) | (answer <= release)
        busy = np.where(counted, end - start, 0.0)
        if self.queueing:
            self.free[at] = np.where(counted, end, self.free[at])
        lead = np.ndim(busy) - np.ndim(self.busy_time[at])
        self.busy_time[at] += busy.sum(axis=tuple(range(lead))) if lead else busy
        return counted, busy


# ------------------------------------------------------------------ vectorised


class Batch(NamedTuple):
    """What :func:`serve_batch` computes for B requests (numpy arrays).

    Attributes:
        success: float [B, M] each successful answer's time (inf for a worker
            that failed or hung).
        decided: float [B] the decision times (inf: never decided).
        timed_out: bool [B] the deadline, not the rule, ended the wait.
        mask: bool [B, M] the successful answers in hand at the decision.
        evaluations: int [B] evaluations that count (:meth:`WorkerQueues.end`);
            None unaccounted.
        busy: float [B] worker-seconds they took; None unaccounted.
    """

    success: np.ndarray
    decided: np.ndarray
    timed_out: np.ndarray
    mask: np.ndarray
    evaluations: np.ndarray
    busy: np.ndarray


def serve_batch(
    queues: WorkerQueues,
    at: Any,
    code: Any,
    rule: Callable[[ArrivalTimes], np.ndarray],
    sent: np.ndarray,
    delays: np.ndarray,
    faults: np.ndarray,
    deadline: float,
    *,
    rule_deadline: float | None = None,
    decode: Callable | None = None,
    account: bool = True,
    offered: np.ndarray | None = None,
) -> Batch:
    """B requests fanned out at ``sent`` [B] onto the workers ``queues.free[at]``,
    decided by ``rule`` and released at their decision.

    Worker i of request b serves it for ``delays[b, i]`` (``faults[b, i]``:
    :data:`~codedjax.serving.FAULT_KINDS` codes; a raising or NaN worker fails at
    its time, a hung one never answers). ``rule`` gets the requests'
    :class:`ArrivalTimes` (times on the clock of ``sent``; ``rule_deadline`` and
    ``decode`` as its deadline and decode) and returns their decision times;
    nothing arrives after every worker is done, so a decision later than that
    is that time, and one later than ``sent + deadline`` is the deadline
    (``timed_out``). ``account=False`` leaves the queues as they are and the
    work uncounted (``evaluations`` and ``busy`` None): idle workers whose work
    nobody reads (:func:`~codedjax.serving.simulate_latency`). ``offered`` [B,
    M]: when each evaluation joins its worker's queue, if not at ``sent`` (a
    query sent to its own worker when it arrives, before its group closes);
    the policy's deadline still counts from ``sent``.
    """
    start = queues.begin(sent[:, None] if offered is None else offered, at)
    done = np.where(faults == HANG, math.inf, start + delays)
    success = np.where((faults == NONE) | (faults == CORRUPT), done, math.inf)
    all_done = done.max(axis=1)
    times = ArrivalTimes(code, success, all_done, rule_deadline, decode)
    decided = np.maximum(np.minimum(rule(times), all_done), sent)
    due = sent + deadline
    late = decided > due
    decided = np.where(late, due, decided)
    mask = np.isfinite(success) & (success <= decided[:, None])
    if not account:
        return Batch(success, decided, late, mask, None, None)
    counted, busy = queues.end(start, done, decided[:, None], at)
    return Batch(success, decided, late, mask, counted.sum(axis=1),
                 busy.sum(axis=1))  # fmt: skip


def answer_times(
    code, own, success, decided, first: bool, sent=None, need: int = 1
) -> np.ndarray:
    """float [B, K]: when each query of B requests is answered (inf: not by the
    decision), from the successful answers' times ``success`` [B, M], the
    decisions ``decided`` [B] and the requests' fan-out ``sent`` [B] (None:
    0). A query is answered at its own answer (``own`` [K, M],
    ``code.own_workers``; None: none) or by a decode: a policy that decodes at
    the first ``ok`` (``first``: :func:`~codedjax.serving._policy.decodes_first`)
    decodes as soon as the answers in hand give the query
    (``code.decodable_from_per_query``), but not before the request is sent
    whole nor before its ``need``-th answer (a robust decoder's D + 2A); one
    that decides on a count decodes at the decision, if the answers then give
    the query."""
    per = np.asarray(code.decodable_from_per_query(success), np.float64)
    dec = decided[:, None]
    if own is None:
        mine = np.full_like(per, np.inf)
    else:
        mine = np.where(own[None], success[:, None, :], np.inf).min(axis=-1)
    if first:
        floor = np.zeros_like(dec) if sent is None else np.asarray(sent)[:, None]
        if need > 1:
            nth = np.sort(success, axis=1)[:, need - 1][:, None]
            floor = np.maximum(floor, nth)
        decoded = np.maximum(per, floor)
    else:
        decoded = np.where(per <= dec, dec, np.inf)
    out = np.minimum(np.where(mine <= dec, mine, np.inf), decoded)
    return np.where(out <= dec, out, np.inf)


# ------------------------------------------------------------------ event by event


class _Eval:
    """One evaluation: request ``rid`` at worker ``worker``."""

    __slots__ = ("rid", "worker", "value", "service", "hang", "start", "live")

    def __init__(self, rid, worker, value, service, hang):
        self.rid, self.worker, self.value = rid, worker, value
        self.service, self.hang = service, hang
        self.start = None
        self.live = True


class EventQueues:
    """The worker queues event by event, on a virtual clock, for a decider
    outside them (the server on a :class:`~codedjax.serving.SimulatedCluster`).

    :meth:`submit` offers a request's M evaluations to the workers now;
    :meth:`pop` delivers the next answer (the clock moves to it); :meth:`cancel`
    releases a request (its queued evaluations dropped, those in service
    abandoned now). The rules are :class:`WorkerQueues`'.

    Attributes:
        queues: the :class:`WorkerQueues` [M].
        now: the virtual clock (seconds).
    """

    def __init__(self, num_workers: int, *, queueing: bool = True):
        m = int(num_workers)
        self.queues = WorkerQueues((m,), queueing=queueing)
        self.now = 0.0
        self._heap: list = []
        self._seq = itertools.count()
        self._waiting = [deque() for _ in range(m)]
        self._serving: list[list[_Eval]] = [[] for _ in range(m)]
        self._by_request: dict[int, list[_Eval]] = {}
        self._work: dict[int, list] = {}

    def advance(self, seconds: float) -> None:
        """Moves the clock forward (time spent outside the queues)."""
        self.now += max(0.0, float(seconds))

    def _begin(self, e: _Eval) -> None:
        e.start = float(self.queues.begin(self.now, e.worker))
        self._serving[e.worker].append(e)
        if not e.hang:  # a hung evaluation ends only when it is cancelled
            heapq.heappush(self._heap, (e.start + e.service, next(self._seq), e))

    def _release(self, e: _Eval, t_end: float, answered: bool) -> None:
        """Worker ``e.worker`` is done with ``e`` at ``t_end`` (its answer, or
        its cancellation): account it, begin the worker's next evaluation."""
        e.live = False
        i = e.worker
        self._serving[i].remove(e)
        answer = t_end if answered else math.inf
        counted, busy = self.queues.end(e.start, answer, t_end, i)
        w = self._work[e.rid]
        w[0] += bool(counted)
        w[1] += float(busy)
        q = self._waiting[i]
        while q and not self._serving[i]:
            nxt = q.popleft()
            if nxt.live:
                self._begin(nxt)

    def submit(
        self, rid: int, service: Any, hang: Any, values: list, workers: Any = None
    ) -> None:
        """Offers request ``rid``'s evaluations now: worker i serves it for
        ``service[i]`` seconds (``hang[i]``: never answers) and answers
        ``values[i]``. ``workers`` [n]: those workers only (``service``,
        ``hang``, ``values`` theirs), a part of the request whose other parts
        are offered by other calls, each worker once (a streamed query sent to
        its own workers when it arrives, the others at its group's close)."""
        self._work.setdefault(rid, [0, 0.0])
        evals = self._by_request.setdefault(rid, [])
        at = range(len(values)) if workers is None else workers
        for i, s, h, v in zip(at, service, hang, values, strict=True):
            e = _Eval(rid, int(i), v, float(s), bool(h))
            evals.append(e)
            i = e.worker
            if self.queues.queueing and (self._serving[i] or self._waiting[i]):
                self._waiting[i].append(e)
            else:
                self._begin(e)

    def pop(self, timeout: float | None) -> _Eval | None:
        """The next evaluation to answer, the clock moved to its answer; None
        when none answers within ``timeout`` seconds (the clock moved by it) or,
        with ``timeout`` None, when none ever will (the clock unmoved)."""
        heap = self._heap
        while heap and not heap[0][2].live:
            heapq.heappop(heap)
        if not heap or (timeout is not None and heap[0][0] > self.now + timeout):
            if timeout is not None:
                self.now += timeout
            return None
        t, _, e = heapq.heappop(heap)
        self.now = max(self.now, t)
        self._release(e, t, True)
        return e

    def hung(self) -> list[int]:
        """The requests with a hung evaluation in service (sorted)."""
        return sorted({e.rid for q in self._serving for e in q if e.live and e.hang})

    def cancel(self, rid: int) -> None:
        """Releases request ``rid`` now: its queued evaluations are dropped,
        those in service abandoned (their workers begin their next one)."""
        for e in self._by_request.pop(rid, ()):
            if not e.live:
                continue
            if e.start is None:  # still queued: dropped, never begun
                e.live = False
            else:
                self._release(e, self.now, False)

    def work(self, rid: int) -> tuple[int, float]:
        """``(evaluations, busy)`` of request ``rid`` (see
        :meth:`WorkerQueues.end`), forgotten after this call; ``(0, 0.0)`` for
        one unknown."""
        got = self._work.pop(rid, None)
        if got is None:
            return 0, 0.0
        return int(got[0]), float(got[1])

    def clear(self) -> None:
        """Forgets every evaluation in flight (the cluster is closed)."""
        self._heap.clear()
        self._by_request.clear()
