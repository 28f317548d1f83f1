"""The coded-inference server: encode, fan out, wait, decode, cancel the stragglers."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._code import Answers
from .._dtypes import unit_roundoff
from ._backends import Backend, Completion, ThreadCluster
from ._policy import ArrivalState, FixedN, WaitPolicy

_SUCCESS, _TOO_FEW = 0, 1
# what the server needs of a code
_CODE_MEMBERS = (
    "num_inputs",
    "num_workers",
    "threshold",
    "answer_fields",
    "may_decode",
    "encode",
    "decode_answers",
)


class ServeResult(NamedTuple):
    """What :meth:`Server.infer` returns for one request (numpy arrays).

    Attributes:
        value: [K, ...] decoded outputs in the accumulation dtype; zeros when not ok.
        ok: whether the decode succeeded (``status == 0``).
        status: the decoder's status code (``codedjax.Status``; 0 = success).
        mask: bool [M] the workers whose answers were decoded.
        order: int [M] worker indices, the decoded ones first in arrival order.
        num_used: how many answers the decoder used.
        cond: condition number of the decoding system (inf when not decodable).
        error: the decoder's predicted absolute error (inf when not ok).
        latency: seconds from the start of :meth:`Server.infer` (encoding included)
            to the decoded value.
        decided_at: seconds from the submission to the decision to decode.
        arrival_times: [M] seconds from the submission to each worker's answer
            (failed answers included), inf for workers that never answered.
        failed: bool [M] workers that answered with an exception or a non-finite
            value.
        cancelled: bool [M] workers still working when the server decoded.
        timed_out: the deadline, not the policy, ended the wait.
        responses: [M, ...] the answers given to the decoder (zeros where masked).
        suspects: bool [M] workers the decoder located as corrupted and excluded
            (a robust code, ``lagrange_code(..., decoder="robust")``); None for
            codes whose decoder does not look for corrupted answers.
        request_id: the request's number on this server.
    """

    value: np.ndarray
    ok: bool
    status: int
    mask: np.ndarray
    order: np.ndarray
    num_used: int
    cond: float
    error: float
    latency: float
    decided_at: float
    arrival_times: np.ndarray
    failed: np.ndarray
    cancelled: np.ndarray
    timed_out: bool
    responses: np.ndarray
    suspects: np.ndarray | None
    request_id: int

    @property
    def suspect_ids(self) -> np.ndarray:
        """int [S] ids of the workers flagged as corrupted, in increasing order
        (empty when none were, or when the decoder does not look)."""
        if self.suspects is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.suspects)


class _Request:
    __slots__ = ("rid", "index", "t_start", "t_sub", "deadline_at", "y", "mask",
                 "failed", "times", "order", "num_failed", "cached",
                 "noise")  # fmt: skip

    def __init__(self, rid, index, t_start, t_sub, deadline_at, m):
        self.rid, self.index = rid, index
        self.t_start, self.t_sub, self.deadline_at = t_start, t_sub, deadline_at
        self.y = None
        self.mask = np.zeros(m, bool)
        self.failed = np.zeros(m, bool)
        self.times = np.full(m, np.inf)
        self.order: list[int] = []
        self.num_failed = 0
        self.cached = None
        self.noise = None


class Server:
    """Serves coded inference: ``infer(x[K, ...])`` or a stream with :meth:`serve`.

    For each request the server encodes the K inputs into M coded rows
    (``code.encode``), sends row i to worker i of the backend, collects the answers
    as they arrive, asks the wait policy after each successful one whether to decode,
    decodes with ``code.decode_answers(Answers(y, mask, order, noise_sd))`` (each
    code reads what applies to it: the threshold code the arrival order, a robust
    code the noise levels) and cancels the
    workers still running. An answer that is an exception or not finite counts as a
    failed worker (left out of the mask). At the policy's deadline it decodes with
    what has arrived; ``ok`` is False (and ``value`` zeros) when that is too little.

    Args:
        code: a code object (``num_inputs`` K, ``num_workers`` M, ``threshold``,
            ``encode``, ``decode``), e.g. ``codedjax.lagrange_code(...)``.
        worker_fn: what a worker computes on one coded row [...] (jitted by the
            backend), e.g. a model part in bf16 via ``codedjax.low_precision_worker``.
            Every worker must return the same shape and dtype.
        backend: a :class:`Backend` (default: a new :class:`ThreadCluster`). The
            server starts it and closes it in :meth:`close`.
        policy: a wait policy (default: ``FixedN()``, the code's threshold).
        noise_fn: optional, for a code whose decode takes a per-answer noise level
            (``"noise_sd" in code.answer_fields``: ``lagrange_code(...,
            decoder="robust")``).
            Called once per request, on the master, with the coded rows the
            workers were sent (numpy [M, ...]) while they compute; returns [M]
            floats, the standard deviation of each worker's answer error (its
            rounding, e.g. from a first-order rounding analysis of ``worker_fn``
            at that input), passed to ``code.decode(..., noise_sd=)`` in place of
            the code's one ``noise_scale``. A level that is not finite and
            positive makes its worker's answer count as missing.

    Raises:
        TypeError: a code without the attributes above, a non-callable worker_fn or
            noise_fn, a policy without ``decide`` and ``deadline``.
        ValueError: a policy that asks for more answers than M; a noise_fn with a
            code that takes no noise level, or one that does not return a floating
            array of shape [M] (at the first request).

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> from codedjax.serving import Server, SimulatedCluster, FixedN
        >>> code = cj.lagrange_code(num_inputs=2, num_workers=6, degree=1)
        >>> with Server(code, lambda v: 2 * v, backend=SimulatedCluster(),
        ...             policy=FixedN(4)) as server:
        ...     r = server.infer(jnp.ones((2, 3)))
        >>> bool(r.ok), r.num_used, r.value.shape
        (True, 4, (2, 3))
    """

    def __init__(
        self,
        code: Any,
        worker_fn: Callable,
        *,
        backend: Backend | None = None,
        policy: WaitPolicy | None = None,
        noise_fn: Callable | None = None,
    ):
        name = "Server"
        for attr in _CODE_MEMBERS:
            if not hasattr(code, attr):
                raise TypeError(
                    f"{name}: code must be a codedjax Code (with "
                    f"{', '.join(_CODE_MEMBERS)}), got {type(code).__name__} "
                    f"without {attr!r}"
                )
        if not callable(worker_fn):
            raise TypeError(f"{name}: worker_fn must be callable, got {worker_fn!r}")
        if noise_fn is not None:
            if not callable(noise_fn):
                raise TypeError(
                    f"{name}: noise_fn must be callable (coded rows [M, ...] -> [M] "
                    f"standard deviations) or None, got {noise_fn!r}"
                )
            if "noise_sd" not in code.answer_fields:
                raise ValueError(
                    f"{name}: noise_fn needs a code whose decode takes a per-answer "
                    f"noise_sd ('noise_sd' in code.answer_fields: lagrange_code(..., "
                    f"decoder='robust')), got {type(code).__name__} "
                    f"{getattr(code, 'name', '')!r}"
                )
        policy = FixedN() if policy is None else policy
        if not (
            callable(getattr(policy, "decide", None)) and hasattr(policy, "deadline")
        ):
            raise TypeError(
                f"{name}: policy must have decide(arrivals) and a deadline attribute, "
                f"got {type(policy).__name__}"
            )
        if callable(getattr(policy, "check", None)):
            policy.check(code)
        dl = policy.deadline
        if dl is not None and not (float(dl) >= 0):
            raise ValueError(f"{name}: the policy's deadline must be >= 0, got {dl!r}")
        self.code = code
        self.policy = policy
        self.worker_fn = worker_fn
        self.noise_fn = noise_fn
        self.backend = ThreadCluster() if backend is None else backend
        self.num_inputs = int(code.num_inputs)
        self.num_workers = int(code.num_workers)
        self._next_id = 0
        self._closed = False
        self._in_shape: tuple | None = None
        self._in_dtype = None
        self._out: jax.ShapeDtypeStruct | None = None
        self._decode = self._decode_fn(code)
        self.backend.start(worker_fn, self.num_workers)

    @staticmethod
    def _decode_fn(code):
        def decode(y, mask, order, noise):
            noise = None if noise is None else jnp.asarray(noise)
            answers = Answers(jnp.asarray(y), jnp.asarray(mask), jnp.asarray(order))
            return code.decode_answers(answers._replace(noise_sd=noise))

        return decode

    def _noise(self, fname: str, rows: np.ndarray) -> np.ndarray | None:
        """The answers' noise levels [M] from ``noise_fn`` (None without one)."""
        if self.noise_fn is None:
            return None
        sd = np.asarray(self.noise_fn(rows))
        if sd.shape != (self.num_workers,) or not np.issubdtype(sd.dtype, np.floating):
            raise ValueError(
                f"{fname}: noise_fn must return a floating array of shape [M] = "
                f"[{self.num_workers}] (each answer's noise standard deviation), got "
                f"{sd.dtype} {sd.shape}"
            )
        return sd

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Cancels what is in flight and shuts the backend (its threads) down."""
        if not self._closed:
            self._closed = True
            self.backend.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- checks

    def _check_input(self, fname: str, x: Any) -> jax.Array:
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            x = np.asarray(x)
        dt = jnp.dtype(x.dtype)
        if not jnp.issubdtype(dt, jnp.floating):
            raise TypeError(
                f"{fname}: x must be a floating array [K, ...], got dtype {dt}"
            )
        if x.ndim < 1 or x.shape[0] != self.num_inputs:
            raise ValueError(
                f"{fname}: x must have shape [K, ...] with K = {self.num_inputs} (the "
                f"code's num_inputs), got shape {tuple(x.shape)}"
            )
        if self._in_shape is None:
            self._in_shape, self._in_dtype = tuple(x.shape), dt
        elif (tuple(x.shape), dt) != (self._in_shape, self._in_dtype):
            raise ValueError(
                f"{fname}: every request must have the shape and dtype of the first, "
                f"{self._in_shape} {self._in_dtype}, got {tuple(x.shape)} {dt}"
            )
        return jnp.asarray(x)

    def _check_answer(self, fname: str, c: Completion, rows: np.ndarray):
        v = c.value
        if isinstance(v, BaseException):
            return None
        v = np.asarray(v)
        if v.shape != tuple(self._out.shape) or v.dtype != self._out.dtype:
            raise ValueError(
                f"{fname}: worker {c.worker} answered shape {v.shape} dtype {v.dtype}; "
                f"every worker must return what worker_fn returns on a coded row, "
                f"shape {tuple(self._out.shape)} dtype {self._out.dtype}"
            )
        return v

    # ---------------------------------------------------------------- serving

    def infer(self, x: Any) -> ServeResult:
        """Serves one request: x [K, ...] -> :class:`ServeResult`.

        Raises:
            TypeError: x not floating.
            ValueError: x not [K, ...] (or not shaped like earlier requests); a
                worker answered a shape or dtype other than ``worker_fn``'s.
            RuntimeError: the server is closed.
        """
        return self._run([x], max_in_flight=1, fname="Server.infer")[0]

    def serve(self, xs: Iterable[Any], *, max_in_flight: int = 4) -> list[ServeResult]:
        """Serves a stream of requests, at most ``max_in_flight`` at a time.

        Args:
            xs: [G, K, ...] array or an iterable of [K, ...] requests.
            max_in_flight: requests in flight at once (>= 1); the next is sent when
                one is decoded, so queueing at busy workers shows in the latencies.

        Returns:
            One :class:`ServeResult` per request, in input order.
        """
        if (
            not isinstance(max_in_flight, (int, np.integer))
            or isinstance(max_in_flight, bool)
            or max_in_flight < 1
        ):
            raise ValueError(
                "Server.serve: max_in_flight must be an int >= 1, got "
                f"{max_in_flight!r}"
            )
        return self._run(xs, max_in_flight=int(max_in_flight), fname="Server.serve")

    def _run(self, xs, *, max_in_flight: int, fname: str) -> list[ServeResult]:
        if self._closed:
            raise RuntimeError(f"{fname}: the server is closed")
        backend, m = self.backend, self.num_workers
        pending = deque(enumerate(xs))
        results: dict[int, ServeResult] = {}
        active: dict[int, _Request] = {}
        rows_of: dict[int, np.ndarray] = {}
        deadline = self.policy.deadline
        try:
            while pending or active:
                if self._closed:
                    raise RuntimeError(f"{fname}: the server was closed mid-request")
                while pending and len(active) < max_in_flight:
                    index, x = pending.popleft()
                    x = self._check_input(fname, x)
                    if self._out is None:
                        self._warmup(x, fname)
                    t_start = backend.now()
                    rows = np.asarray(self.code.encode(x))
                    rid = self._next_id
                    self._next_id += 1
                    t_sub = backend.now()
                    dl = math.inf if deadline is None else t_sub + deadline
                    active[rid] = _Request(rid, index, t_start, t_sub, dl, m)
                    rows_of[rid] = rows
                    backend.submit(rid, rows)
                    # the master's share, while the workers compute
                    active[rid].noise = self._noise(fname, rows)
                now = backend.now()
                for r in [r for r in active.values() if r.deadline_at <= now]:
                    results[r.index] = self._finish(r, timed_out=True)
                    del active[r.rid], rows_of[r.rid]
                if not active:
                    continue
                due = min(r.deadline_at for r in active.values())
                timeout = None if math.isinf(due) else max(0.0, due - now)
                c = backend.next_completed(timeout)
                if c is None or c.request_id not in active:
                    continue
                r = active[c.request_id]
                if r.times[c.worker] < math.inf:  # a duplicate answer
                    continue
                v = self._check_answer(fname, c, rows_of[r.rid])
                r.times[c.worker] = c.time - r.t_sub
                if v is None or not np.all(np.isfinite(v.astype(np.float32))):
                    r.failed[c.worker] = True
                    r.num_failed += 1
                else:
                    if r.y is None:
                        r.y = np.zeros((m,) + v.shape, v.dtype)
                    r.y[c.worker] = v
                    r.mask[c.worker] = True
                    r.order.append(c.worker)
                    r.cached = None
                    if self._ask(r):
                        results[r.index] = self._finish(r, timed_out=False)
                        del active[r.rid], rows_of[r.rid]
                        continue
                if len(r.order) + r.num_failed == m:  # nothing more will come
                    results[r.index] = self._finish(r, timed_out=False)
                    del active[r.rid], rows_of[r.rid]
        except BaseException:
            for rid in list(active):
                backend.cancel(rid)
            raise
        return [results[i] for i in range(len(results))]

    def _warmup(self, x, fname: str) -> None:
        """Compiles encode, the workers and decode before the first request is timed."""
        rows = np.asarray(self.code.encode(x))
        self._out = jax.eval_shape(
            self.worker_fn, jax.ShapeDtypeStruct(rows.shape[1:], rows.dtype)
        )
        warm = getattr(self.backend, "warmup", None)
        if callable(warm):
            warm(rows)
        m = self.num_workers
        y = np.zeros((m,) + tuple(self._out.shape), self._out.dtype)
        noise = self._noise(fname, rows)
        jax.block_until_ready(
            self._decode(y, np.ones(m, bool), np.arange(m, dtype=np.int32), noise)
        )

    def _arrivals(self, r: _Request) -> ArrivalState:
        def decode():
            if r.cached is None:
                r.cached = self._decode(*self._inputs(r))
            return r.cached

        dt = None if r.y is None else r.y.dtype
        elapsed = self.backend.now() - r.t_sub
        order = np.asarray(r.order, np.int32)
        return ArrivalState(
            self.code, r.mask.copy(), order, elapsed, r.num_failed, dt, decode
        )

    def _ask(self, r: _Request) -> bool:
        return bool(self.policy.decide(self._arrivals(r)))

    def _inputs(self, r: _Request):
        m = self.num_workers
        if r.y is None:
            r.y = np.zeros((m,) + tuple(self._out.shape), self._out.dtype)
        rest = [i for i in range(m) if not r.mask[i]]
        order = np.asarray(r.order + rest, np.int32)
        return r.y, r.mask.copy(), order, r.noise

    def _finish(self, r: _Request, *, timed_out: bool) -> ServeResult:
        t_dec = self.backend.now()
        y, mask, order, noise = self._inputs(r)
        res = r.cached if r.cached is not None else self._decode(y, mask, order, noise)
        res = jax.device_get(res)
        t_end = self.backend.now()
        # cancel after decoding, outside the latency: a backend's cancel may take time
        # (Ray sends one cancellation per straggler; ThreadCluster's is bookkeeping)
        self.backend.cancel(r.rid)
        value = np.asarray(res.value)
        ok = bool(np.asarray(res.ok))
        cond = float(np.asarray(res.cond))
        status = getattr(res, "status", None)
        status = (
            int(np.asarray(status))
            if status is not None
            else (_SUCCESS if ok else _TOO_FEW)
        )
        err = getattr(res, "error", None)
        if err is not None:
            err = float(np.max(np.asarray(err)))
        elif ok:  # a decoder without an error prediction: cond * u * max |y|
            used = y[mask].astype(np.float32)
            err = (
                cond * unit_roundoff(y.dtype) * float(np.max(np.abs(used), initial=0.0))
            )
        else:
            err = math.inf
        suspects = getattr(res, "suspects", None)
        cancelled = ~(np.isfinite(r.times))
        return ServeResult(
            value=value,
            ok=ok,
            status=status,
            mask=mask,
            order=order,
            num_used=int(np.asarray(res.num_used)),
            cond=cond,
            error=err,
            latency=t_end - r.t_start,
            decided_at=t_dec - r.t_sub,
            arrival_times=r.times.copy(),
            failed=r.failed.copy(),
            cancelled=cancelled,
            timed_out=timed_out,
            responses=y,
            suspects=None if suspects is None else np.asarray(suspects),
            request_id=r.rid,
        )
