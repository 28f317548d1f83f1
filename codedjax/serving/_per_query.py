"""Each query of a streamed group answered when it can be.

A :class:`~codedjax.serving.StreamingServer` has its engine answer each query
of a group on its own, not all of them at the group's decision. Query k is
answered at the first of:

(a) a successful answer of one of its own workers (``code.own_workers[k]``:
    its systematic worker, or a replica): that answer is its value as the
    decoder would return it (a decoder copies a systematic answer), with no
    decode;
(b) under a policy that decodes at the first ``ok`` (``decodes_first``:
    :class:`FirstDecodable`), once its group has closed: the first answer
    after which ``code.decodable_queries`` gives k (a ParM group rebuilt before
    the others), from a decode of the answers in hand;
(c) its group's decision: the decode's row when the decode is ``ok``; else, if
    the answers give k (``decodable_queries``), the row of a decode in which
    the queries they do not give are stood in for (:func:`stand_in`); else an
    answer that is not ``ok``, with the decode's status.

:class:`QueryPlan` is what a code allows, found once per server after its
warm-up; :class:`QueryState` a streamed request's queries. The engine's
streaming side (``_streamed.py``) applies the three cases.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .._result import Status
from ._policy import decodes_first, responses_needed


class QueryAnswer(NamedTuple):
    """One query's answer as the engine gives it to the frontend.

    Attributes:
        slot: the query's row in its group.
        value: its value [...] (the decode's accumulation dtype; zeros when not
            ok).
        ok: answered (its own worker's answer, or a decode that gives it).
        status: ``codedjax.Status`` (0: ok; else the group's decode's).
        error: the predicted absolute error of its decode (0.0 for an own
            worker's answer, which no decode touched; inf when not ok).
        result: the group's :class:`ServeResult` for a query answered at its
            group's decision; None for one answered before it.
    """

    slot: int
    value: np.ndarray
    ok: bool
    status: int
    error: float
    result: Any


class QueryPlan:
    """What a code allows its queries, found once (after the warm-up).

    Args:
        code: the server's code.
        spec: ``(shape, dtype)`` of a request [K, ...] (the warm-up's).
        out: what a worker answers on a coded row (shape, dtype).
        value: what a decode returns, [K, ...] (shape, dtype).
        fname: the caller, for messages.

    Attributes:
        own: bool [K, M] ``code.own_workers`` (None: no query has a worker of
            its own).
        own_list: per query, its own workers (int arrays).
        first_own: int [K] each query's first own worker (-1: none).
        owners: per worker, the ``(query, part)`` pairs it answers as they
            are: its answer as [parts, ...] holds query k's value at part p,
            p the rank of k among the queries the worker answers (a packed
            circle code's real and imaginary parts; 0 elsewhere).
        copy: own answers are taken as the queries' values (case (a)): the
            answer's size is ``parts`` times a value row's.
        on_arrival: each own worker is sent its query as it is (an encode's
            rows checked bit for bit on a probe) and answers one query only:
            a query may be sent to its own workers when it arrives.
        row_dtype: the coded rows' dtype.

    Raises:
        ValueError: ``code.own_workers`` that is not bool [K, M].
    """

    def __init__(self, code: Any, spec: tuple, out: Any, value: Any, fname: str):
        k, m = int(code.num_inputs), int(code.num_workers)
        own = getattr(code, "own_workers", None)
        self.value_shape = tuple(value.shape[1:])
        self.value_dtype = np.dtype(value.dtype)
        self.row_dtype = None
        self.on_arrival = False
        self.copy = False
        self.parts = 1
        if own is None:
            self.own = None
            self.own_list = [np.zeros(0, np.int64)] * k
            self.first_own = np.full(k, -1)
            self.owners = ((),) * m
            return
        own = np.asarray(own)
        if own.shape != (k, m) or own.dtype != bool:
            raise ValueError(
                f"{fname}: code.own_workers must be bool [K, M] = [{k}, {m}] (or "
                f"None), got {own.dtype} {own.shape}"
            )
        self.own = own
        self.own_list = [np.flatnonzero(own[q]) for q in range(k)]
        self.first_own = np.array([w[0] if len(w) else -1 for w in self.own_list])
        owners: list = [[] for _ in range(m)]
        for q in range(k):
            for w in self.own_list[q]:
                owners[w].append((q, len(owners[w])))
        self.owners = tuple(tuple(o) for o in owners)
        size = math.prod(self.value_shape)
        total = math.prod(tuple(out.shape))
        most = max(len(o) for o in owners)
        if size and total % size == 0 and most <= total // size:
            self.parts = total // size
            self.copy = True
        self.on_arrival, self.row_dtype = rows_are_queries(code, spec, own, most)

    def copy_of(self, answer: np.ndarray, part: int) -> np.ndarray:
        """Query value from part ``part`` of an own worker's answer (a copy)."""
        rows = answer.reshape(self.parts, -1)
        return rows[part].reshape(self.value_shape).astype(self.value_dtype)


def rows_are_queries(code: Any, spec: tuple, own: np.ndarray, most: int) -> tuple:
    """``(on_arrival, rows' dtype)``: whether each own worker's coded row is its
    query as it is (cast to the rows' dtype), checked bit for bit on a random
    probe request of ``spec`` (shape, dtype), and no worker answers two
    queries."""
    shape, dtype = spec
    probe = np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(dtype)
    try:
        rows = np.asarray(code.encode(probe))
    except Exception:  # the warm-up encoded such a request: not expected
        return False, None
    if most > 1 or rows.shape[1:] != tuple(shape[1:]):
        return False, rows.dtype
    for q, w in zip(*np.nonzero(own), strict=True):
        if not np.array_equal(rows[w], probe[q].astype(rows.dtype)):
            return False, rows.dtype
    return True, rows.dtype


class QueryState:
    """A streamed request's queries: ``live`` bool [K] the real queries its
    group has (a padding row never is), ``done`` bool [K] those answered,
    ``sent`` bool [M] the workers sent their row, ``closed`` the group has
    closed (every row sent, the policy's deadline running), ``first`` its
    policy decodes at the first ``ok`` (case (b)), not before its ``need``-th
    successful answer (0: any; a robust code's FirstDecodable waits for the D
    + 2A answers that locate a corrupted one: ``responses_needed`` beyond the
    code's threshold)."""

    __slots__ = ("plan", "first", "need", "live", "done", "sent", "closed")

    def __init__(self, plan: QueryPlan, policy: Any, code: Any, k: int, m: int):
        self.plan = plan
        self.first = decodes_first(policy, code)
        need = responses_needed(code) if self.first else 0
        self.need = need if need > int(code.threshold) else 0
        self.live = np.zeros(k, bool)
        self.done = np.zeros(k, bool)
        self.sent = np.zeros(m, bool)
        self.closed = False

    @property
    def wanted(self) -> np.ndarray:
        """bool [K]: the live queries not answered yet."""
        return self.live & ~self.done


def decoded(res: Any) -> tuple[np.ndarray, bool, int, float]:
    """``(value [K, ...], ok, status, error)`` of a decode on the host (a
    decoder's result or a :class:`ServeResult`); error the max over outputs."""
    ok = bool(np.asarray(res.ok))
    status = getattr(res, "status", None)
    status = int(np.asarray(status)) if status is not None else int(not ok)
    err = getattr(res, "error", None)
    err = (0.0 if ok else math.inf) if err is None else float(np.max(np.asarray(err)))
    return np.asarray(res.value), ok, status, err


def stand_in(plan: QueryPlan, inputs: tuple, give: np.ndarray, decode) -> Any:
    """The decode of ``inputs`` (``(y, mask, order, noise)``, the answers in
    hand) with a zero answer at the first own worker of each query that the
    answers do not give (``give`` bool [K]); None when there is none to stand
    in for.

    A code whose ``decodable_queries`` gives a query beyond its own answers
    without the whole decode (ParM's groups decode apart) then decodes, and the
    rows of the queries ``give`` names come from their own answers alone; the
    others' rows are discarded. (A code whose queries do not decode apart
    gives them all or none: the decode itself is ``ok``, no stand-in.)"""
    y, mask, order, noise = inputs
    fill = np.unique(plan.first_own[~give])
    if (fill < 0).any():
        return None
    fill = fill[~mask[fill]]
    if not len(fill):
        return None
    y = y.copy()
    y[fill] = 0
    n = int(mask.sum())
    mask = mask.copy()
    mask[fill] = True
    rest = order[n:]
    order = np.concatenate([order[:n], fill, rest[~np.isin(rest, fill)]])
    return decode(y, mask, order.astype(np.int32), noise)


def answered_rows(
    plan: QueryPlan,
    code: Any,
    res: Any,
    inputs: tuple,
    want: np.ndarray,
    decode,
    give: np.ndarray | None = None,
) -> tuple[np.ndarray, Any, float]:
    """``(ok [K], value [K, ...] or None, error)``: which of the queries
    ``want`` bool [K] the answers ``inputs`` give, and their values: all of
    them from ``res``, their decode, when it is ``ok``; else (or with ``res``
    None) those ``give`` (default ``code.decodable_queries`` of the mask) names,
    from a :func:`stand_in` decode when that one is ``ok``."""
    if res is not None:
        value, ok, _, err = decoded(res)
        if ok:
            return want.copy(), value, err
    none = np.zeros_like(want)
    if give is None:
        give = np.asarray(code.decodable_queries(inputs[1]), bool).reshape(-1)
    if plan.own is None or not (give & want).any():
        return none, None, math.inf
    alt = stand_in(plan, inputs, give, decode)
    if alt is None:
        return none, None, math.inf
    value, ok, _, err = decoded(alt)
    if not ok:
        return none, None, math.inf
    return give & want, value, err


SUCCESS = int(Status.SUCCESS)
