"""Requests served in rounds: layer-wise coding on the same server and backends.

A :class:`Pipeline` is a sequence of :class:`Round` objects. Each round is one fan-out
of the M coded rows of its code with its own worker function (one per role), its
own wait policy and decode; between rounds the master applies the round's
``master_fn`` to the decoded value (what is not a matrix product: a bias, a
nonlinearity, a cross layer's ``x0 * h + x``) and encodes the result for the next
round. :class:`PipelineServer` runs it on any backend (the simulated, thread and
Ray clusters) with the engine of :class:`~codedjax.serving.Server`.

Latency model: a request draws one service time T_i per worker (the
:class:`~codedjax.serving.Injector`'s draw for the request), and round j costs
worker i ``s + work_j * (T_i - s)``, s the latency model's shift
(:func:`~codedjax.serving.latency_shift`), so a slow worker is slow in every round
and every round pays the shift (a round trip). The master's encode, decode and
``master_fn`` of every round are measured (wall clock) and included in the latency:
on a real clock they take the time they take, on the simulated cluster's virtual
clock the server advances it by their measured time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._arguments import check_in_flight
from ._backends import Backend
from ._engine import Engine
from ._policy import WaitPolicy
from ._request import Request
from ._roles import make_round
from ._serve_result import ServeResult


class Round(NamedTuple):
    """One round of a :class:`Pipeline`: a fan-out, a wait, a decode, a master step.

    Attributes:
        code: the round's code (K inputs, M workers; every round of a pipeline has
            the same K and M), e.g. a degree-1 ``codedjax.lagrange_code`` for a
            linear layer.
        worker_fn: what a worker computes on its coded row in this round (a
            layer's matrix product, in the workers' dtype), or ``{role:
            function}``, one per role of ``code.roles``.
        policy: the round's wait policy (default ``FixedN()``, the threshold);
            its deadline counts from the round's fan-out.
        master_fn: ``master_fn(value, x, x0)``, run at the master on the round's
            decoded ``value`` [K, ...] (accumulation dtype), with ``x`` the round's
            input [K, ...] and ``x0`` the request's input: it returns the next
            round's input (after the last round: the request's answer), e.g.
            ``lambda h, x, x0: jax.nn.relu(h + b)``. Jitted by the server. None:
            the decoded value itself.
        work: the round's fraction of a request's work (finite, > 0; default
            1 / L for each of the L rounds): worker i's service time in the round
            is ``s + work * (T_i - s)``.
        noise_fn: as :class:`~codedjax.serving.Server`'s, for a robust code.
    """

    code: Any
    worker_fn: Callable | Mapping[str, Callable]
    policy: WaitPolicy | None = None
    master_fn: Callable | None = None
    work: float | None = None
    noise_fn: Callable | None = None


class Pipeline:
    """The rounds of a multi-round request, in order (see :class:`Round`).

    Args:
        rounds: one or more :class:`Round`.

    Raises:
        TypeError: an entry that is not a :class:`Round`.
        ValueError: no rounds; rounds whose codes differ in K or M; a ``work``
            that is not finite and > 0.
    """

    def __init__(self, rounds: Sequence[Round]):
        rounds = tuple(rounds)
        if not rounds:
            raise ValueError("Pipeline: needs at least one Round")
        for j, rd in enumerate(rounds):
            if not isinstance(rd, Round):
                raise TypeError(
                    f"Pipeline: rounds must be Round(code, worker_fn, ...), got "
                    f"{type(rd).__name__} at {j}"
                )
        sizes = []
        for j, rd in enumerate(rounds):
            try:
                sizes.append((int(rd.code.num_inputs), int(rd.code.num_workers)))
            except AttributeError:
                raise TypeError(
                    f"Pipeline: round {j}'s code must be a codedjax Code (with "
                    f"num_inputs and num_workers), got {type(rd.code).__name__}"
                ) from None
        if len(set(sizes)) != 1:
            raise ValueError(
                f"Pipeline: every round's code must have the same K and M (the "
                f"same queries on the same workers), got (K, M) = {sizes}"
            )
        works = []
        for j, rd in enumerate(rounds):
            w = 1.0 / len(rounds) if rd.work is None else rd.work
            try:
                w = float(w)
            except (TypeError, ValueError):
                raise TypeError(
                    f"Pipeline: round {j}'s work must be a number, got {rd.work!r}"
                ) from None
            if not (math.isfinite(w) and w > 0):
                raise ValueError(
                    f"Pipeline: round {j}'s work must be finite and > 0, got "
                    f"{rd.work!r}"
                )
            works.append(w)
        self.rounds = rounds
        self.works = tuple(works)
        self.num_inputs, self.num_workers = sizes[0]

    def __len__(self) -> int:
        return len(self.rounds)

    def __repr__(self) -> str:
        names = ", ".join(getattr(rd.code, "name", "?") for rd in self.rounds)
        return f"Pipeline([{names}], work={self.works})"


class PipelineResult(NamedTuple):
    """What :meth:`PipelineServer.infer` returns for one request.

    Attributes:
        value: the last round's ``master_fn`` output (the request's answer);
            zeros of its shape and dtype when not ok.
        ok: every round decoded.
        status: the status of the first round that did not decode
            (``codedjax.Status``; 0 when ok).
        failed_round: that round's index, None when ok (later rounds were not
            sent).
        error: the worst round's predicted absolute error (each round's in its
            own output's units; inf when not ok).
        errors: float [L] each round's predicted error (nan for rounds not run).
        latency: seconds from the request's start (before the first encode) to
            its answer: the sum of the rounds' latencies plus the last master step.
        sent_at: float [L] seconds from the start to each round's fan-out.
        encode_time: float [L] measured seconds of each round's encode.
        decode_time: float [L] measured seconds of each round's decodes (the
            policy's included).
        step_time: float [L] measured seconds of each round's ``master_fn``.
        rounds: one :class:`ServeResult` per round run; its ``latency`` runs from
            the end of the previous round's decode (the request's start for round
            0) to its own decoded value, so it includes the master step and the
            encode before it.
        request_id: the request's number on this server (the injector's draw).
    """

    value: np.ndarray
    ok: bool
    status: int
    failed_round: int | None
    error: float
    errors: np.ndarray
    latency: float
    sent_at: np.ndarray
    encode_time: np.ndarray
    decode_time: np.ndarray
    step_time: np.ndarray
    rounds: tuple[ServeResult, ...]
    request_id: int


class PipelineServer:
    """Serves requests in rounds (:class:`Pipeline`) on one cluster.

    A request x [K, ...] is encoded with round 0's code and sent to the M
    workers; each round waits by its own policy, decodes, applies its
    ``master_fn`` at the master and encodes the result for the next round. A round
    that does not decode ends the request (``ok`` False, with that round's status);
    its later rounds are not sent. Worker i runs, in round j, the function of its
    role in round j's code (``rounds[j].code.roles[i]``); every distinct function
    is compiled once by the backend, before the first request is timed.

    The latency of every round follows :meth:`Injector.plan_one`: one draw per
    (request, worker), ``s + work_j * (T_i - s)`` in round j. The master's work
    (encodes, decodes, master steps) is measured on the wall clock and included:
    on the thread and Ray clusters it is real time; on a :class:`SimulatedCluster`
    the server advances the virtual clock by it (``charge_master=False`` leaves it
    out: the workers' time alone, the zero-overhead latency).

    Args:
        pipeline: the :class:`Pipeline`.
        backend: a :class:`Backend` (default: a new :class:`ThreadCluster`);
            started and closed by the server.
        charge_master: on a virtual clock, advance it by the master's measured
            work (default True).

    Attributes:
        pipeline: the :class:`Pipeline`.
        backend: the backend it serves on (started by the server).
        engine: its event loop (the :class:`Server`'s engine, in rounds), which
            a :class:`~codedjax.serving.StreamingServer` drives.

    Raises:
        TypeError: pipeline not a :class:`Pipeline`; what :class:`Server` raises
            for a round's code, worker_fn, policy or noise_fn (the message names
            the round).
        ValueError: likewise; a role without a function; at the first request, a
            role whose function's output differs from the base role's, a
            ``master_fn`` that does not return a floating [K, ...] array.

    Examples:
        >>> import jax, jax.numpy as jnp, numpy as np, codedjax as cj
        >>> from codedjax.serving import (Pipeline, PipelineServer, Round,
        ...                               SimulatedCluster)
        >>> code = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1)
        >>> w1, w2 = jnp.full((3, 5), 0.5), jnp.full((5, 2), 0.25)
        >>> relu = lambda h, x, x0: jax.nn.relu(h)
        >>> pipe = Pipeline([Round(code, lambda v: v @ w1, master_fn=relu),
        ...                  Round(code, lambda v: v @ w2)])
        >>> with PipelineServer(pipe, backend=SimulatedCluster()) as server:
        ...     r = server.infer(jnp.ones((2, 3)))
        >>> bool(r.ok), r.value.shape, len(r.rounds)
        (True, (2, 2), 2)
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        backend: Backend | None = None,
        charge_master: bool = True,
    ):
        if not isinstance(pipeline, Pipeline):
            raise TypeError(
                f"PipelineServer: pipeline must be a Pipeline([Round(...), ...]), got "
                f"{type(pipeline).__name__}"
            )
        stages = [
            make_round(
                j,
                f"PipelineServer: round {j}",
                rd.code,
                rd.worker_fn,
                rd.policy,
                rd.noise_fn,
                rd.master_fn,
                w,
            )  # fmt: skip
            for j, (rd, w) in enumerate(
                zip(pipeline.rounds, pipeline.works, strict=True)
            )
        ]
        self.pipeline = pipeline
        self.engine = Engine(
            stages,
            backend,
            name="PipelineServer",
            charge=charge_master,
            result=self._result,
        )
        self.backend = self.engine.backend
        self.num_inputs = self.engine.num_inputs
        self.num_workers = self.engine.num_workers

    def close(self) -> None:
        """Cancels what is in flight and shuts the backend down."""
        self.engine.close()

    def __enter__(self) -> PipelineServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def roles(self) -> tuple[tuple[str, ...], ...]:
        """[L][M] the role of each worker in each round."""
        return tuple(st.roles for st in self.engine.stages)

    def infer(self, x: Any) -> PipelineResult:
        """Serves one request: x [K, ...] (round 0's input and ``x0``) ->
        :class:`PipelineResult`.

        Raises:
            TypeError: x not floating.
            ValueError: x not [K, ...] (or not shaped like earlier requests); a
                worker answered a shape or dtype other than its function's.
            RuntimeError: the server is closed.
        """
        return self.engine.run([x], max_in_flight=1, fname="PipelineServer.infer")[0]

    def serve(
        self, xs: Iterable[Any], *, max_in_flight: int = 4
    ) -> list[PipelineResult]:
        """Serves a stream of requests, at most ``max_in_flight`` at a time (a
        request is in flight from its first round to its answer).

        Returns:
            One :class:`PipelineResult` per request, in input order.
        """
        n = check_in_flight("PipelineServer.serve", max_in_flight)
        return self.engine.run(xs, max_in_flight=n, fname="PipelineServer.serve")

    def _result(self, r: Request, value) -> PipelineResult:
        """The engine's ``result``: request ``r``'s :class:`PipelineResult` from
        its rounds' results and the last master step's output ``value`` (None:
        a round did not decode)."""
        rounds = tuple(r.results)
        last = rounds[-1]
        ok = value is not None
        if not ok:
            out = self.engine.final_out
            value = np.zeros(out.shape, out.dtype)
        errors = np.full(len(self.engine.stages), np.nan)
        errors[: len(rounds)] = [res.error for res in rounds]
        return PipelineResult(
            value=np.asarray(value),
            ok=ok,
            status=0 if ok else last.status,
            failed_round=None if ok else len(rounds) - 1,
            error=float(np.max(errors[: len(rounds)])) if ok else math.inf,
            errors=errors,
            latency=self.engine.cluster.now() - r.t_start,
            sent_at=r.sent_at.copy(),
            encode_time=r.encode_time.copy(),
            decode_time=r.decode_time.copy(),
            step_time=r.step_time.copy(),
            rounds=rounds,
            request_id=r.rid,
        )
