"""Seeded latency and fault injection for the serving backends.

Every backend asks one :class:`Injector` what happens to worker i on request r: a
service time (the delay after which its answer is released) and a fault kind. The
draws are a pure function of ``(seed, r)``, so every scheme,
backend and run sees the same delays for the same request number, and the simulated
cluster can draw 1e5 requests in one vectorised call.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._latency import LatencyModel, ShiftedExponential, Streams
from ._checks import integer, number

#: fault kinds, in the order of their integer codes (0 = no fault)
FAULT_KINDS = ("none", "raise", "hang", "nan", "corrupt")
NONE, RAISE, HANG, NAN, CORRUPT = range(len(FAULT_KINDS))


class WorkerFault(RuntimeError):
    """The exception an injected ``"raise"`` fault delivers as a worker's answer."""


@dataclasses.dataclass(frozen=True)
class Injector:
    """What happens to every worker on every request: a seeded delay and fault plan.

    Attributes:
        latency: the service-time model, a :class:`codedjax.LatencyModel` (default
            ``ShiftedExponential(0.005, 0.005)``, 5 ms + Exp(mean 5 ms));
            stragglers are part of it (``RandomSlowdown``: a worker or a rack slowed
            at random; ``PersistentSlowdown``: given workers always slower), or
            ``codedjax.parse_latency("shifted-exp:5ms,5ms; slow=0.1 factor=10")``.
        fault_kinds: kinds drawn for faulty workers, from ``"raise"`` (the worker's
            answer is an exception), ``"hang"`` (it never answers until cancelled),
            ``"nan"`` (its answer is NaN) and ``"corrupt"`` (its answer is shifted by
            ``corrupt_scale``).
        fault_prob: each worker is faulty on a request with this probability.
        max_faulty: additionally, a uniform number in ``0..max_faulty`` of randomly
            chosen workers are faulty on each request.
        failed_workers: ``{worker: kind}`` workers that fail on every request.
        corrupt_scale: the offset a ``"corrupt"`` answer carries.
        seed: the seed of the plan.
    """

    latency: LatencyModel = ShiftedExponential(0.005, 0.005)
    fault_kinds: tuple[str, ...] = ()
    fault_prob: float = 0.0
    max_faulty: int = 0
    failed_workers: Mapping[int, str] = dataclasses.field(default_factory=dict)
    corrupt_scale: float = 100.0
    seed: int = 0

    def __post_init__(self):
        name = "Injector"
        if not isinstance(self.latency, LatencyModel):
            raise TypeError(
                f"{name}: latency must be a codedjax latency model "
                f"(ShiftedExponential, Pareto, Constant, Uniform, RandomSlowdown, "
                f"PersistentSlowdown, parse_latency(text)), got "
                f"{type(self.latency).__name__}"
            )
        q = number(name, "fault_prob", self.fault_prob, at_most=1.0)
        number(name, "corrupt_scale", self.corrupt_scale)
        integer(name, "max_faulty", self.max_faulty)
        integer(name, "seed", self.seed)
        kinds = tuple(self.fault_kinds)
        bad = [k for k in kinds if k not in FAULT_KINDS[1:]]
        if bad:
            raise ValueError(
                f"{name}: fault kinds must be in {FAULT_KINDS[1:]}, got {bad}"
            )
        if (q > 0 or self.max_faulty > 0) and not kinds:
            raise ValueError(f"{name}: fault_prob or max_faulty needs fault_kinds")
        object.__setattr__(self, "fault_kinds", kinds)
        fw = dict(self.failed_workers)
        for w, k in fw.items():
            integer(name, "failed_workers (a worker index)", w)
            if k not in FAULT_KINDS[1:]:
                raise ValueError(
                    f"{name}: failed_workers[{w}] must be in {FAULT_KINDS[1:]}, "
                    f"got {k!r}"
                )
        object.__setattr__(self, "failed_workers", tuple(sorted(fw.items())))

    def plan(self, request_ids: Any, num_workers: int) -> tuple[np.ndarray, np.ndarray]:
        """Delays and faults of workers ``0..M-1`` on the given requests.

        Requests are drawn in blocks of 256 consecutive numbers from generators
        seeded with ``(seed, block, ...)``, so a request's draws depend only on its
        number (not on which other requests are drawn with it), and worker i's
        delays do not depend on M.

        Args:
            request_ids: int [R] request numbers >= 0.
            num_workers: M.

        Returns:
            ``(delays, faults)``: float64 [R, M] seconds and int8 [R, M] fault codes
            (:data:`FAULT_KINDS` index; 0 = no fault).
        """
        ids = np.asarray(request_ids)
        if ids.size and not (
            np.issubdtype(ids.dtype, np.integer) and ids.dtype != np.bool_
        ):
            raise TypeError(
                f"Injector.plan: request_ids must be ints, got dtype {ids.dtype}"
            )
        ids = ids.astype(np.int64).reshape(-1)
        m = integer("Injector.plan", "num_workers", num_workers, minimum=1)
        delays = np.empty((ids.size, m))
        faults = np.empty((ids.size, m), np.int8)
        if ids.size and ids.min() < 0:
            raise ValueError(
                f"Injector.plan: request_ids must be >= 0, got {ids.min()}"
            )
        blocks, rows = np.divmod(ids, _BLOCK)
        for b in np.unique(blocks):
            sel = blocks == b
            d, f = self._block(int(b), m)
            delays[sel], faults[sel] = d[rows[sel]], f[rows[sel]]
        return delays, faults

    def plan_one(self, request_id: int, num_workers: int, *, work: float = 1.0):
        """:meth:`plan` of one request (blocks cached), at a fraction of the work.

        A request served in rounds (:class:`~codedjax.serving.Pipeline`) draws
        once per (request, worker) and every round reuses the draw: with worker
        i's draw T_i and the latency model's shift s (:func:`latency_shift`),
        round j costs ``s + work_j * (T_i - s)``, so a slow worker is slow in
        every round and ``work = 1`` is the one-shot service time T_i itself.
        The faults are the request's, in every round.

        Args:
            request_id: the request number (>= 0).
            num_workers: M.
            work: the round's fraction of the work (finite, > 0).

        Returns:
            ``(delays, faults)``: float64 [M] seconds, int8 [M] fault codes.
        """
        fname = "Injector.plan_one"
        rid = integer(fname, "request_id", request_id)
        m = integer(fname, "num_workers", num_workers, minimum=1)
        block, row = divmod(rid, _BLOCK)
        d, f = _cached_block(self, block, m)
        d = d[row]
        w = work if type(work) is float else number(fname, "work", work, positive=True)
        if w != 1.0:
            w = number(fname, "work", w, positive=True)
            s = latency_shift(self.latency)
            d = s + w * (d - s)
        return d, f[row]

    def _block(self, block: int, m: int):
        r = _BLOCK
        # worker i's delays and group g's slowdowns come from streams of their own,
        # seeded (seed, block, part, index), so worker i sees the same delays
        # whatever M is (uncoded K workers and coded M workers share their first K
        # columns); the fault plan is per M
        streams = Streams.seeded((self.seed, block))
        delay = self.latency.sample_streams(streams, r, m)
        fault = np.zeros((r, m), np.int8)
        if self.fault_kinds:
            rng = np.random.default_rng([self.seed, block, 2, m])
            kinds = np.asarray(
                [FAULT_KINDS.index(k) for k in self.fault_kinds], np.int8
            )
            which = rng.integers(0, kinds.size, (r, m))
            faulty = rng.random((r, m)) < self.fault_prob
            if self.max_faulty > 0:
                nf = rng.integers(0, self.max_faulty + 1, (r, 1))
                rank = np.argsort(rng.random((r, m)), axis=1).argsort(axis=1)
                faulty |= rank < nf
            fault = np.where(faulty, kinds[which], fault).astype(np.int8)
        for w, kind in self.failed_workers:
            if w < m:
                fault[:, w] = FAULT_KINDS.index(kind)
        return delay, fault


_BLOCK = 256


def latency_shift(model: LatencyModel) -> float:
    """The fixed part of a latency model's service time, in seconds: its
    ``shift`` (``ShiftedExponential``, ``Pareto``), that of its base for a
    slowdown (``RandomSlowdown``, ``PersistentSlowdown``), 0 for the others
    (``Constant`` and ``Uniform`` are all work). Every round of a multi-round
    request pays it once (:meth:`Injector.plan_one`)."""
    while True:
        shift = getattr(model, "shift", None)
        if shift is not None:
            return float(shift)
        base = getattr(model, "base", None)
        if not isinstance(base, LatencyModel):
            return 0.0
        model = base


@functools.lru_cache(maxsize=64)
def _cached_block(inj: Injector, block: int, m: int):
    return inj._block(block, m)


def apply_fault(value: np.ndarray, fault: int, scale: float, worker: int):
    """A worker's answer after its fault (``"raise"`` gives a :class:`WorkerFault`)."""
    if fault == RAISE:
        return WorkerFault(f"injected fault: worker {worker} raised")
    if fault == NAN:
        return np.full(value.shape, np.nan, value.dtype)
    if fault == CORRUPT:
        return (value.astype(np.float32) + np.float32(scale)).astype(value.dtype)
    return value
