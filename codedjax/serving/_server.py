"""The coded-inference server: encode, fan out, wait, decode, cancel the stragglers."""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._code import BASE_ROLE, Answers
from .._dtypes import unit_roundoff
from ._backends import (
    Backend,
    Completion,
    NoMoreAnswers,
    ThreadCluster,
    WorkerFunctions,
)
from ._checks import integer
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
            to the decoded value; inf for a request never decided (its policy
            waits for hung workers and has no deadline: ``ok`` False,
            ``TOO_FEW_RESPONSES``).
        decided_at: seconds from the submission to the decision to decode (inf
            when never decided).
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
        evaluations: how many of the M evaluations began service at a worker
            (answered, or cancelled in service; evaluations still queued when the
            request decoded are dropped and not counted); -1 when the backend
            does not count (no ``work`` method). The work the request cost.
        busy: worker-seconds its evaluations occupied the workers (nan when
            the backend does not measure it).
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
    evaluations: int = -1
    busy: float = math.nan

    @property
    def suspect_ids(self) -> np.ndarray:
        """int [S] ids of the workers flagged as corrupted, in increasing order
        (empty when none were, or when the decoder does not look)."""
        if self.suspects is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.suspects)


class _Stage:
    """One round of a request as the engine runs it (a one-shot server has one)."""

    __slots__ = ("index", "name", "code", "policy", "noise_fn", "decode", "master",
                 "work", "roles", "fns", "out")  # fmt: skip

    def __init__(self, index, name, code, fns, roles, policy, noise_fn, master, work):
        self.index, self.name, self.code = index, name, code
        self.fns, self.roles = fns, roles
        self.policy, self.noise_fn = policy, noise_fn
        self.master = None if master is None else jax.jit(master)
        self.work = work
        self.decode = _decode_fn(code)
        self.out: jax.ShapeDtypeStruct | None = None


def _decode_fn(code):
    def decode(y, mask, order, noise):
        noise = None if noise is None else jnp.asarray(noise)
        answers = Answers(jnp.asarray(y), jnp.asarray(mask), jnp.asarray(order))
        return code.decode_answers(answers._replace(noise_sd=noise))

    return decode


def _roles_of(name: str, code: Any) -> tuple[str, ...]:
    """The code's worker roles [M] (every worker ``"base"`` for a code that
    states none)."""
    m = int(code.num_workers)
    roles = getattr(code, "roles", None)
    if roles is None:
        return (BASE_ROLE,) * m
    roles = tuple(roles)
    if len(roles) != m or not all(isinstance(r, str) and r for r in roles):
        raise ValueError(
            f"{name}: code.roles must be M = {m} non-empty role names, got {roles!r}"
        )
    return roles


def _role_counts(roles: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for r in roles:
        counts[r] = counts.get(r, 0) + 1
    return ", ".join(f"{r!r} x {n}" for r, n in counts.items())


def _role_functions(name: str, worker_fn: Any, roles: tuple[str, ...]) -> dict:
    """{role: function} for every role of the code, from a callable (every role)
    or a mapping."""
    if isinstance(worker_fn, Mapping):
        fns = dict(worker_fn)
        for role, f in fns.items():
            if not callable(f):
                raise TypeError(
                    f"{name}: worker_fn[{role!r}] must be callable, got {f!r}"
                )
        used = dict.fromkeys(roles)
        missing = [r for r in used if r not in fns]
        if missing:
            raise ValueError(
                f"{name}: worker_fn has no function for role {missing[0]!r} (the "
                f"code's workers: {_role_counts(roles)}); give one function per "
                f"role, worker_fn={{role: function}}"
            )
        extra = [r for r in fns if r not in used]
        if extra:
            raise ValueError(
                f"{name}: worker_fn has a function for role {extra[0]!r}, which no "
                f"worker of the code has (the code's workers: {_role_counts(roles)})"
            )
        return {r: fns[r] for r in used}
    if not callable(worker_fn):
        raise TypeError(
            f"{name}: worker_fn must be callable or a mapping {{role: callable}}, "
            f"got {worker_fn!r}"
        )
    return dict.fromkeys(dict.fromkeys(roles), worker_fn)


def _check_code(name: str, code: Any) -> None:
    for attr in _CODE_MEMBERS:
        if not hasattr(code, attr):
            raise TypeError(
                f"{name}: code must be a codedjax Code (with "
                f"{', '.join(_CODE_MEMBERS)}), got {type(code).__name__} "
                f"without {attr!r}"
            )


def _check_policy(name: str, policy: Any, code: Any) -> WaitPolicy:
    policy = FixedN() if policy is None else policy
    if not (callable(getattr(policy, "decide", None)) and hasattr(policy, "deadline")):
        raise TypeError(
            f"{name}: policy must have decide(arrivals) and a deadline attribute, "
            f"got {type(policy).__name__}"
        )
    if callable(getattr(policy, "check", None)):
        policy.check(code)
    dl = policy.deadline
    if dl is not None and not (float(dl) >= 0):
        raise ValueError(f"{name}: the policy's deadline must be >= 0, got {dl!r}")
    return policy


def _check_noise_fn(name: str, noise_fn: Any, code: Any) -> None:
    if noise_fn is None:
        return
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


def make_round(index, name, code, worker_fn, policy, noise_fn, master, work) -> _Stage:
    """A checked round: the code, one function per role, the policy."""
    _check_code(name, code)
    roles = _roles_of(name, code)
    fns = _role_functions(name, worker_fn, roles)
    _check_noise_fn(name, noise_fn, code)
    policy = _check_policy(name, policy, code)
    if master is not None and not callable(master):
        raise TypeError(f"{name}: master_fn must be callable or None, got {master!r}")
    return _Stage(index, name, code, fns, roles, policy, noise_fn, master, work)


class _Request:
    __slots__ = ("rid", "index", "t_start", "x0", "x", "stage", "task", "t_round",
                 "t_sub", "deadline_at", "y", "mask", "failed", "times", "order",
                 "num_failed", "cached", "noise", "results", "sent_at",
                 "encode_time", "decode_time", "step_time")  # fmt: skip

    def __init__(self, rid, index, t_start, x0, num_rounds):
        self.rid, self.index, self.t_start = rid, index, t_start
        self.x0 = self.x = x0
        self.stage = self.task = 0
        self.results: list[ServeResult] = []
        nan = np.full(num_rounds, np.nan)
        self.sent_at = nan.copy()
        self.encode_time, self.decode_time = nan.copy(), nan.copy()
        self.step_time = nan.copy()

    def new_round(self, m, t_round, t_sub, deadline_at):
        self.t_round, self.t_sub, self.deadline_at = t_round, t_sub, deadline_at
        self.y = None
        self.mask = np.zeros(m, bool)
        self.failed = np.zeros(m, bool)
        self.times = np.full(m, np.inf)
        self.order: list[int] = []
        self.num_failed = 0
        self.cached = None
        self.noise = None


class Engine:
    """The event loop shared by :class:`Server` (one round per request) and
    :class:`~codedjax.serving.PipelineServer` (several): encode, fan out, wait,
    decode, cancel; between rounds the master's step and the next encode."""

    _name = "Server"

    def _setup(self, stages, backend, *, charge: bool, rounds: bool):
        """``rounds``: requests are pipelines (results from ``_result``, submits
        that name the round, the draw and the work); else one round, the
        one-shot :class:`Server` (plain ``submit(request_id, rows)``)."""
        self._stages = stages
        self._rounds = bool(rounds)
        first = stages[0].code
        self.num_inputs = int(first.num_inputs)
        self.num_workers = m = int(first.num_workers)
        self._charge_master = bool(charge)
        self._next_id = 0
        self._active: dict[int, _Request] = {}  # by the backend's task id
        self._frontend = None  # a StreamingServer that owns the server
        self._closed = False
        self._in_shape: tuple | None = None
        self._in_dtype = None
        self._warm = False
        self._final_out: jax.ShapeDtypeStruct | None = None
        self.backend = ThreadCluster() if backend is None else backend
        self._advance = getattr(self.backend, "advance", None) if charge else None
        fns = [[st.fns[role] for role in st.roles] for st in stages]
        if not rounds and len({id(f) for f in fns[0]}) == 1:
            self.backend.start(fns[0][0], m)  # one function: any backend takes it
        else:
            self.backend.start(
                WorkerFunctions(fns, roles=[st.roles for st in stages]), m
            )

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Cancels what is in flight and shuts the backend (its threads) down."""
        if not self._closed:
            self._closed = True
            self.backend.close()

    def __enter__(self):
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

    def _check_answer(self, fname: str, c: Completion, st: _Stage):
        v = c.value
        if isinstance(v, BaseException):
            return None
        v = np.asarray(v)
        if v.shape != tuple(st.out.shape) or v.dtype != st.out.dtype:
            where = f" in round {st.index}" if self._rounds else ""
            raise ValueError(
                f"{fname}: worker {c.worker} answered shape {v.shape} dtype {v.dtype}"
                f"{where}; every worker must return what worker_fn returns on a "
                f"coded row, shape {tuple(st.out.shape)} dtype {st.out.dtype}"
            )
        return v

    def _noise(self, fname: str, st: _Stage, rows: np.ndarray) -> np.ndarray | None:
        """The answers' noise levels [M] from ``noise_fn`` (None without one)."""
        if st.noise_fn is None:
            return None
        sd = np.asarray(st.noise_fn(rows))
        if sd.shape != (self.num_workers,) or not np.issubdtype(sd.dtype, np.floating):
            raise ValueError(
                f"{fname}: noise_fn must return a floating array of shape [M] = "
                f"[{self.num_workers}] (each answer's noise standard deviation), got "
                f"{sd.dtype} {sd.shape}"
            )
        return sd

    # ---------------------------------------------------------------- serving

    def _charge(self, seconds: float) -> None:
        """The master's measured work, on a virtual clock (a real clock has
        already moved)."""
        if self._advance is not None:
            self._advance(seconds)

    def _run(self, xs, *, max_in_flight: int, fname: str) -> list:
        if self._closed:
            raise RuntimeError(f"{fname}: the server is closed")
        if self._frontend is not None or self._active:
            raise RuntimeError(
                f"{fname}: a StreamingServer owns this server; submit through it"
            )
        pending = deque(enumerate(xs))
        results: dict[int, Any] = {}
        try:
            while pending or self._active:
                if self._closed:
                    raise RuntimeError(f"{fname}: the server was closed mid-request")
                while pending and len(self._active) < max_in_flight:
                    index, x = pending.popleft()
                    self._open(index, x, fname)
                for r, res in self._step(fname):
                    results[r.index] = res
        except BaseException:
            self._abort()
            raise
        return [results[i] for i in range(len(results))]

    def _abort(self) -> None:
        """Cancels every request in flight (after an error)."""
        for task in list(self._active):
            self.backend.cancel(task)
        self._active.clear()

    def _open(self, index: Any, x: Any, fname: str, *, checked: bool = False):
        """Checks x, compiles on the first request, and sends its first round.

        Returns:
            The request's state (``rid`` its number, ``index`` what the caller
            passed).
        """
        if not checked:
            x = self._check_input(fname, x)
        if not self._warm:
            self._warmup(x, fname)
        rid = self._next_id
        self._next_id += 1
        r = _Request(rid, index, self.backend.now(), x, len(self._stages))
        self._start_round(r, 0, x, fname)
        self._active[r.task] = r
        return r

    def _step(self, fname: str, until: float | None = None) -> list:
        """Ends the requests whose deadline has passed, else waits for one answer
        (until the earliest deadline, or ``until`` on the backend's clock, or a
        backend's ``wake``) and handles it.

        Returns:
            ``[(request, result)]`` for the requests that ended.
        """
        backend, m = self.backend, self.num_workers
        done: list = []
        now = backend.now()
        for r in [r for r in self._active.values() if r.deadline_at <= now]:
            self._end_round(r, True, done, fname)
        if done:
            return done
        due = min((r.deadline_at for r in self._active.values()), default=math.inf)
        if until is not None:
            due = min(due, until)
        if math.isinf(due) and not self._active:
            return done
        timeout = None if math.isinf(due) else max(0.0, due - now)
        try:
            c = backend.next_completed(timeout)
        except NoMoreAnswers as exc:
            if timeout is not None:
                raise
            # no answer will ever come (hung workers) and no deadline: the
            # requests that hold the hung workers are never decided, which is
            # data, not a hang (ending them frees the workers for the others)
            stuck = [self._active[t] for t in exc.request_ids if t in self._active]
            for r in stuck or list(self._active.values()):
                self._end_round(r, False, done, fname, stalled=True)
            return done
        if c is None or c.request_id not in self._active:
            return done
        r = self._active[c.request_id]
        if r.times[c.worker] < math.inf:  # a duplicate answer
            return done
        st = self._stages[r.stage]
        v = self._check_answer(fname, c, st)
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
            if self._ask(r, st):
                self._end_round(r, False, done, fname)
                return done
        if len(r.order) + r.num_failed == m:  # nothing more will come
            self._end_round(r, False, done, fname)
        return done

    def _start_round(self, r: _Request, j: int, x, fname: str, t_round=None) -> None:
        """Encodes round j's input (timed), sends it, and resets the request's
        answers for the round."""
        st, backend = self._stages[j], self.backend
        t_round = backend.now() if t_round is None else t_round
        t0 = time.perf_counter()
        rows = np.asarray(st.code.encode(x))
        dt = time.perf_counter() - t0
        self._charge(dt)
        r.encode_time[j] = dt
        r.stage, r.x = j, x
        single = not self._rounds
        r.task = r.rid if single else r.rid * len(self._stages) + j
        t_sub = backend.now()
        dl = st.policy.deadline
        r.new_round(self.num_workers, t_round, t_sub,
                    math.inf if dl is None else t_sub + dl)  # fmt: skip
        r.sent_at[j] = t_sub - r.t_start
        if single:
            backend.submit(r.task, rows)
        else:
            backend.submit(r.task, rows, round=j, draw=r.rid, work=st.work)
        # the master's share, while the workers compute
        r.noise = self._noise(fname, st, rows)

    def _end_round(
        self, r: _Request, timed_out, done: list, fname, *, stalled=False
    ) -> None:
        del self._active[r.task]
        st = self._stages[r.stage]
        res = self._finish(r, st, timed_out=timed_out, stalled=stalled)
        if not self._rounds:
            done.append((r, res))
            return
        r.results.append(res)
        j = r.stage
        last = j == len(self._stages) - 1
        if not res.ok:
            done.append((r, self._result(r, None)))
            return
        t_round = self.backend.now()
        t0 = time.perf_counter()
        value = jnp.asarray(res.value)
        out = value if st.master is None else st.master(value, r.x, r.x0)
        out = jax.block_until_ready(out)
        dt = time.perf_counter() - t0
        self._charge(dt)
        r.step_time[j] = dt
        if last:
            done.append((r, self._result(r, np.asarray(out))))
            return
        self._start_round(r, j + 1, out, fname, t_round=t_round)
        self._active[r.task] = r

    def _result(self, r: _Request, value) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _warmup(self, x, fname: str) -> None:
        """Compiles encode, every role's function, decode and the master's steps
        of every round, before the first request is timed; checks that every
        role answers the base role's shape and dtype."""
        x0 = x
        warm = getattr(self.backend, "warmup", None)
        m = self.num_workers
        for st in self._stages:
            where = st.name
            if st.index > 0:
                x = _check_round_input(where, x, self.num_inputs)
            rows = np.asarray(st.code.encode(x))
            row = jax.ShapeDtypeStruct(rows.shape[1:], rows.dtype)
            one = len({id(f) for f in st.fns.values()}) == 1
            outs = {
                role: _worker_output(
                    where, "worker_fn" if one else f"worker_fn[{role!r}]", f, row
                )
                for role, f in st.fns.items()
            }
            ref = BASE_ROLE if BASE_ROLE in outs else st.roles[0]
            for role, o in outs.items():
                want = outs[ref]
                if (tuple(o.shape), o.dtype) != (tuple(want.shape), want.dtype):
                    raise ValueError(
                        f"{where}: the function of role {role!r} returns {o.dtype} "
                        f"{tuple(o.shape)} on a coded row, the {ref!r} role's "
                        f"returns {want.dtype} {tuple(want.shape)}; every role "
                        f"must return the {ref!r} role's shape and dtype"
                    )
            st.out = outs[ref]
            if callable(warm):
                # compiling is what the warm-up is for; a worker that fails when
                # run here fails (and counts as a failed worker) when a request
                # runs it, not here
                with contextlib.suppress(Exception):
                    if not self._rounds:
                        warm(rows)
                    else:
                        warm(rows, round=st.index)
            y = np.zeros((m,) + tuple(st.out.shape), st.out.dtype)
            noise = self._noise(fname, st, rows)
            res = st.decode(y, np.ones(m, bool), np.arange(m, dtype=np.int32), noise)
            value = jax.block_until_ready(res.value)
            if st.master is not None:
                value = jax.block_until_ready(st.master(value, x, x0))
            x = value
        self._final_out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        self._warm = True

    def _arrivals(self, r: _Request, st: _Stage) -> ArrivalState:
        def decode():
            if r.cached is None:
                t0 = time.perf_counter()
                r.cached = jax.block_until_ready(st.decode(*self._inputs(r, st)))
                dt = time.perf_counter() - t0
                self._charge(dt)
                j = r.stage
                r.decode_time[j] = np.nan_to_num(r.decode_time[j]) + dt
            return r.cached

        dt = None if r.y is None else r.y.dtype
        elapsed = self.backend.now() - r.t_sub
        order = np.asarray(r.order, np.int32)
        return ArrivalState(
            st.code, r.mask.copy(), order, elapsed, r.num_failed, dt, decode
        )

    def _ask(self, r: _Request, st: _Stage) -> bool:
        return bool(st.policy.decide(self._arrivals(r, st)))

    def _inputs(self, r: _Request, st: _Stage):
        m = self.num_workers
        if r.y is None:
            r.y = np.zeros((m,) + tuple(st.out.shape), st.out.dtype)
        rest = [i for i in range(m) if not r.mask[i]]
        order = np.asarray(r.order + rest, np.int32)
        return r.y, r.mask.copy(), order, r.noise

    def _finish(
        self, r: _Request, st: _Stage, *, timed_out: bool, stalled: bool = False
    ) -> ServeResult:
        """The round's result; ``stalled``: the policy's answers will never come
        (hung workers, no deadline), so the round is never decided: ``ok``
        False, ``TOO_FEW_RESPONSES``, latency inf."""
        t_dec = self.backend.now()
        y, mask, order, noise = self._inputs(r, st)
        if r.cached is not None:
            res = r.cached
        else:
            t0 = time.perf_counter()
            res = jax.block_until_ready(st.decode(y, mask, order, noise))
            dt = time.perf_counter() - t0
            self._charge(dt)
            j = r.stage
            r.decode_time[j] = np.nan_to_num(r.decode_time[j]) + dt
        res = jax.device_get(res)
        t_end = self.backend.now()
        # cancel after decoding, outside the latency: a backend's cancel may take time
        # (Ray sends one cancellation per straggler; ThreadCluster's is bookkeeping)
        self.backend.cancel(r.task)
        work = getattr(self.backend, "work", None)
        evaluations, busy = work(r.task) if callable(work) else (-1, math.nan)
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
        latency, decided_at = t_end - r.t_round, t_dec - r.t_sub
        if stalled:
            value, ok, status, err = np.zeros_like(value), False, _TOO_FEW, math.inf
            latency = decided_at = math.inf
        return ServeResult(
            value=value,
            ok=ok,
            status=status,
            mask=mask,
            order=order,
            num_used=int(np.asarray(res.num_used)),
            cond=cond,
            error=err,
            latency=latency,
            decided_at=decided_at,
            arrival_times=r.times.copy(),
            failed=r.failed.copy(),
            cancelled=cancelled,
            timed_out=timed_out,
            responses=y,
            suspects=None if suspects is None else np.asarray(suspects),
            request_id=r.rid,
            evaluations=int(evaluations),
            busy=float(busy),
        )


def _describe(out: Any) -> str:
    """What a function returned, for messages: ``float32 (3,)``, ``a tuple of 2
    (float32 (3,), int32 ())``."""
    if isinstance(out, jax.ShapeDtypeStruct):
        return f"{out.dtype} {tuple(out.shape)}"
    if isinstance(out, (tuple, list)):
        inner = ", ".join(_describe(o) for o in out[:4])
        more = ", ..." if len(out) > 4 else ""
        return f"a {type(out).__name__} of {len(out)} ({inner}{more})"
    return f"a {type(out).__name__}"


def _worker_output(where: str, name: str, f: Callable, row) -> jax.ShapeDtypeStruct:
    """What ``f`` returns on a coded row like ``row`` (traced, never run): one
    floating array. A function that raises while traced is tried once more (a
    fault of its first call counts as a failed worker, as it would at any later
    request); one that raises again cannot run on a coded row, a static mistake."""
    for attempt in range(2):
        try:
            out = jax.eval_shape(f, row)
            break
        except Exception as exc:
            if attempt:
                raise ValueError(
                    f"{where}: {name} cannot run on a coded row ({row.dtype} "
                    f"{tuple(row.shape)}): it raised {type(exc).__name__}: {exc}"
                ) from exc
    if not isinstance(out, jax.ShapeDtypeStruct) or not jnp.issubdtype(
        out.dtype, jnp.floating
    ):
        raise TypeError(
            f"{where}: {name} must return one floating array on a coded row "
            f"({row.dtype} {tuple(row.shape)}), e.g. of that shape and dtype; got "
            f"{_describe(out)}"
        )
    return out


def _check_round_input(where: str, x: Any, k: int) -> jax.Array:
    """The master's output as the next round's input: floating [K, ...]."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating) or x.ndim < 1 or x.shape[0] != k:
        raise ValueError(
            f"{where}: the previous round's master_fn must return the next round's "
            f"input, a floating array [K, ...] with K = {k}, got {x.dtype} "
            f"{tuple(x.shape)}"
        )
    return x


class Server(Engine):
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

    Worker i runs the function of its role, ``code.roles[i]`` (every worker of
    the library's codes is ``"base"``; a parity code's parity workers are
    ``"parity"``): ``worker_fn`` is one function for every role, or a mapping
    ``{role: function}`` with one function per role of the code. For requests
    served in several rounds (layer-wise coding) see
    :class:`~codedjax.serving.PipelineServer`.

    On a :class:`SimulatedCluster` the latency is the workers' time alone (the
    zero-overhead decision time of the injected delays: the master's encode and
    decode take no virtual time), so it equals :func:`simulate_latency`; on a real
    clock (threads, Ray) it includes them.

    Args:
        code: a code object (``num_inputs`` K, ``num_workers`` M, ``threshold``,
            ``encode``, ``decode``), e.g. ``codedjax.lagrange_code(...)``;
            optional ``roles`` (M role names; default every worker ``"base"``).
        worker_fn: what a worker computes on one coded row [...] (jitted by the
            backend), e.g. a model part in bf16 via ``codedjax.low_precision_worker``;
            or ``{role: function}``, one per role of ``code.roles``. Every role
            must return the shape and dtype of the ``"base"`` role's function.
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
        TypeError: a code without the attributes above, a non-callable worker_fn
            (or a mapping with a non-callable entry) or noise_fn, a policy
            without ``decide`` and ``deadline``.
        ValueError: a role of the code without a function, a function for a role
            no worker has, ``code.roles`` not M names; a policy that asks for
            more answers than M; a noise_fn with a code that takes no noise level,
            or one that does not return a floating array of shape [M] (at the
            first request); a role's function whose output shape or dtype differs
            from the base role's (at the first request).

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
        worker_fn: Callable | Mapping[str, Callable],
        *,
        backend: Backend | None = None,
        policy: WaitPolicy | None = None,
        noise_fn: Callable | None = None,
    ):
        st = make_round(0, "Server", code, worker_fn, policy, noise_fn, None, 1.0)
        self.worker_fn = worker_fn
        self._setup([st], backend, charge=False, rounds=False)

    @property
    def code(self) -> Any:
        """The code."""
        return self._stages[0].code

    @property
    def policy(self) -> WaitPolicy:
        """The wait policy (may be replaced between requests)."""
        return self._stages[0].policy

    @policy.setter
    def policy(self, policy: WaitPolicy) -> None:
        self._stages[0].policy = _check_policy("Server", policy, self.code)

    @property
    def noise_fn(self) -> Callable | None:
        """The per-answer noise levels' function (None without one)."""
        return self._stages[0].noise_fn

    @property
    def roles(self) -> tuple[str, ...]:
        """The role of each worker [M] (``code.roles``)."""
        return self._stages[0].roles

    def __enter__(self) -> Server:
        return self

    def infer(self, x: Any) -> ServeResult:
        """Serves one request: x [K, ...] -> :class:`ServeResult`.

        Raises:
            TypeError: x not floating.
            ValueError: x not [K, ...] (or not shaped like earlier requests); a
                worker answered a shape or dtype other than ``worker_fn``'s; at
                the first request, a ``worker_fn`` that raises every time it is
                traced on a coded row (it cannot run on one).
            TypeError: at the first request, a ``worker_fn`` that does not
                return one floating array on a coded row (a tuple, a list, an
                integer array).
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
        n = check_in_flight("Server.serve", max_in_flight)
        return self._run(xs, max_in_flight=n, fname="Server.serve")


def check_in_flight(fname: str, max_in_flight: Any) -> int:
    return integer(fname, "max_in_flight", max_in_flight, minimum=1)
