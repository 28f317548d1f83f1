"""A request in flight and its answers, kept on arrays.

:class:`Request` is what the engine (``_engine.py``) knows of one request: its
number, its round, and the round's answers so far as numpy arrays updated in
place (``mask``, ``failed``, ``times``, the answers ``y`` and their arrival
``order``). :meth:`Request.take` takes a batch of answers (everything the
backend had ready at one wake-up) in one pass; :meth:`Request.prefix` states
the answers as of the n-th successful one, and :meth:`Request.cut` forgets
those that came after it in the batch (the policy decided before them).
"""

from __future__ import annotations

import math

import numpy as np

from ._arguments import check_answer
from ._serve_result import ServeResult


class Request:
    """One request in flight: its number ``rid`` on the server (the injector's
    draw), the caller's ``index``, its round (``stage``) and that round's
    answers so far; ``results`` the :class:`ServeResult` of each round ended.

    The round's answers (:meth:`new_round`): ``mask`` bool [M] the successful
    answers, ``failed`` bool [M] the failed workers (``failures``: why, in
    arrival order), ``times`` [M] seconds from the round's submission to each
    answer (inf: none yet), ``y`` [M, ...] the answers (zeros elsewhere),
    ``order`` int32 [M] whose first ``num_ok`` entries are the successful
    workers in arrival order; ``cached`` the round's decodes so far, by the
    number of successful answers they decoded; ``stream`` a streamed group's
    queries (``_per_query.QueryState``; None for a request served whole)."""

    __slots__ = ("rid", "index", "t_start", "x0", "x", "stage", "task", "t_round",
                 "t_sub", "deadline_at", "y", "mask", "failed", "times", "order",
                 "num_ok", "num_failed", "failures", "cached", "noise", "results",
                 "sent_at", "encode_time", "decode_time", "step_time",
                 "batch", "stream")  # fmt: skip

    def __init__(self, rid, index, t_start, x0, num_rounds):
        self.rid, self.index, self.t_start = rid, index, t_start
        self.x0 = self.x = x0
        self.stage = 0
        self.task: int | None = None  # the backend's task id, once sent
        self.results: list[ServeResult] = []
        nan = np.full(num_rounds, np.nan)
        self.sent_at = nan.copy()
        self.encode_time, self.decode_time = nan.copy(), nan.copy()
        self.step_time = nan.copy()
        self.stream = None  # a streamed group's queries (_per_query.QueryState)

    def new_round(self, m, t_round, t_sub, deadline_at, out):
        """Forgets the answers: a round of ``m`` workers sent at ``t_sub``,
        whose answers are shaped like ``out`` (``shape``, ``dtype``)."""
        self.t_round, self.t_sub, self.deadline_at = t_round, t_sub, deadline_at
        self.y = np.zeros((m, *out.shape), out.dtype)
        self.mask = np.zeros(m, bool)
        self.failed = np.zeros(m, bool)
        self.times = np.full(m, np.inf)
        self.order = np.zeros(m, np.int32)
        self.num_ok = 0
        self.num_failed = 0
        self.failures: list[tuple[int, str]] = []
        self.cached: dict | None = None
        self.noise = None
        self.batch = None

    @property
    def answered(self) -> int:
        """Workers that answered (successfully or not)."""
        return self.num_ok + self.num_failed

    def take(self, completions: list, out) -> int:
        """Takes a batch of answers of this round (in arrival order): each
        worker's first one counts (later duplicates are ignored); an answer
        that is an exception, of another shape or dtype than ``out``, or not
        finite is its worker's failure. Remembers the batch for
        :meth:`prefix` and :meth:`cut`.

        Returns:
            How many successful answers the batch added.
        """
        if not completions:
            self.batch = None
            return 0
        _, workers, values, arrived = zip(*completions, strict=True)
        ws = np.fromiter(workers, np.int64, len(workers))
        fresh = self.times[ws] == math.inf
        if len(set(workers)) < len(workers):  # a duplicate: its first counts
            first = np.zeros(len(ws), bool)
            first[np.unique(ws, return_index=True)[1]] = True
            fresh &= first
        if not fresh.all():
            keep = np.flatnonzero(fresh).tolist()
            completions = [completions[i] for i in keep]
            values = [values[i] for i in keep]
            arrived = [arrived[i] for i in keep]
            ws = ws[fresh]
        if not len(ws):
            self.batch = None
            return 0
        self.times[ws] = np.fromiter(arrived, float, len(arrived)) - self.t_sub
        good, why, block = _checked(values, completions, out)
        n0 = self.num_ok
        if why is None:  # every answer usable (the usual case)
            self.y[ws] = block
            self.mask[ws] = True
            self.order[n0 : n0 + len(ws)] = ws
            self.batch = (ws, good, None, n0, self.num_failed, len(self.failures))
            self.num_ok += len(ws)
            return len(ws)
        new = ws[good]
        self.y[new] = block
        self.mask[new] = True
        self.order[n0 : n0 + len(new)] = new
        bad = np.flatnonzero(~good)
        self.failed[ws[bad]] = True
        # for prefix() and cut(): the failures before each successful answer
        before = np.cumsum(~good)[good]
        self.batch = (ws, good, before, n0, self.num_failed, len(self.failures))
        self.failures += [(int(ws[i]), why[i]) for i in bad]
        self.num_ok += len(new)
        self.num_failed += len(bad)
        return len(new)

    def prefix(self, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """``(mask, order, num_failed)`` as of the ``n``-th successful answer
        of the round (one of the last batch's, or before it)."""
        mask = self.mask.copy()
        mask[self.order[n : self.num_ok]] = False
        order = self.order[:n].copy()
        if self.batch is None or n >= self.num_ok:
            return mask, order, self.num_failed
        _, _, before, n0, f0, _ = self.batch
        if before is None or n <= n0:  # no failure in the batch, or before it
            return mask, order, f0
        return mask, order, f0 + int(before[n - n0 - 1])

    def cut(self, n: int) -> None:
        """Forgets the answers of the last batch that came after its ``n``-th
        successful answer of the round (the policy decided at it): as if they
        had not arrived."""
        if self.batch is None or n >= self.num_ok:
            return
        ws, good, before, n0, f0, nfail0 = self.batch
        keep = 0 if n <= n0 else int(np.flatnonzero(good)[n - n0 - 1]) + 1
        drop = ws[keep:]
        self.times[drop] = np.inf
        self.mask[drop] = False
        self.failed[drop] = False
        self.y[drop] = 0
        kept_failures = int(np.count_nonzero(~good[:keep]))
        self.num_ok = n
        self.num_failed = f0 + kept_failures
        del self.failures[nfail0 + kept_failures :]
        self.batch = None

    def decode_inputs(self, n: int | None = None):
        """``(y, mask, order, noise)`` for the decode as of the ``n``-th
        successful answer (default: all of them): ``order`` [M] the decoded
        workers in arrival order, then the others in increasing order."""
        n = self.num_ok if n is None else n
        mask, order, _ = self.prefix(n)
        rest = np.flatnonzero(~mask).astype(np.int32)
        return self.y, mask, np.concatenate([order, rest]), self.noise


def _checked(values: list, completions: list, out) -> tuple:
    """``(good [B], why [B], block [G, ...])``: which answers are usable (of
    ``out``'s shape and dtype, finite), why each other one is not (``why``
    None when all are usable), and the usable ones stacked. One check of the
    whole batch when every answer is an array of ``out``'s dtype and shape;
    else each answer's own check (``check_answer``), which names what is
    wrong."""
    shape, dtype = tuple(out.shape), np.dtype(out.dtype)
    b = len(values)
    block = None
    try:
        for v in values:
            if v.dtype != dtype or v.shape != shape:
                break
        else:  # np.concatenate: a tenth of np.stack's host time
            block = np.concatenate(values) if shape else np.array(values, dtype)
            block = block.reshape(b, *shape)
    except (AttributeError, TypeError, ValueError):
        block = None
    if block is not None:
        flat = block.reshape(b, -1).astype(np.float32, copy=False)
        if np.isfinite(flat).all():
            return np.ones(b, bool), None, block
        usable = np.arange(b)
        why: list = [None] * b
    else:  # the checks that name what is wrong
        got = [check_answer(c, out) for c in completions]
        why = [w for _, w in got]
        usable = np.asarray([i for i, (v, _) in enumerate(got) if v is not None], int)
        if not len(usable):
            return np.zeros(b, bool), why, np.zeros((0, *shape), dtype)
        block = np.concatenate([got[i][0][None] for i in usable])
    flat = block.reshape(len(usable), -1).astype(np.float32, copy=False)
    finite = np.isfinite(flat).all(axis=1)
    for i in usable[~finite]:
        why[i] = "answered a non-finite value"
    good = np.zeros(b, bool)
    good[usable[finite]] = True
    return good, why, block[finite] if not finite.all() else block
