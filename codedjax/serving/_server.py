"""The coded-inference server: encode, fan out, wait, decode, cancel the stragglers.

:class:`Server` checks its code, worker functions and policy
(``_roles.py``, ``_arguments.py``) and serves on an :class:`Engine`
(``_engine.py``), one round per request; its results are
:class:`~codedjax.serving.ServeResult` (``_serve_result.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._arguments import check_in_flight, check_policy
from ._backends import Backend
from ._engine import Engine
from ._policy import WaitPolicy
from ._roles import make_round
from ._serve_result import ServeResult


class Server:
    """Serves coded inference: ``infer(x[K, ...])`` or a stream with :meth:`serve`.

    For each request the server encodes the K inputs into M coded rows
    (``code.encode``), sends row i to worker i of the backend, collects the answers
    as they arrive, asks the wait policy after each successful one whether to decode,
    decodes with ``code.decode_answers(Answers(y, mask, order, noise_sd))`` (each
    code reads what applies to it: the threshold code the arrival order, a robust
    code the noise levels) and cancels the
    workers still running. An answer that is an exception, not finite, or of
    another shape or dtype than ``worker_fn``'s on a coded row counts as a failed
    worker (left out of the mask; ``failures`` says why). At the policy's
    deadline it decodes with what has arrived; ``ok`` is False (and ``value``
    zeros) when that is too little.

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

    Attributes:
        backend: the backend it serves on (started by the server).
        engine: its event loop (:class:`Engine`), which a
            :class:`~codedjax.serving.StreamingServer` drives.
        worker_fn: the worker function(s) as given.

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
        self.engine = Engine([st], backend, name="Server", charge=False)
        self.backend = self.engine.backend
        self.num_inputs = self.engine.num_inputs
        self.num_workers = self.engine.num_workers

    @property
    def code(self) -> Any:
        """The code."""
        return self.engine.stages[0].code

    @property
    def policy(self) -> WaitPolicy:
        """The wait policy (may be replaced between requests)."""
        return self.engine.stages[0].policy

    @policy.setter
    def policy(self, policy: WaitPolicy) -> None:
        self.engine.stages[0].policy = check_policy("Server", policy, self.code)

    @property
    def noise_fn(self) -> Callable | None:
        """The per-answer noise levels' function (None without one)."""
        return self.engine.stages[0].noise_fn

    @property
    def roles(self) -> tuple[str, ...]:
        """The role of each worker [M] (``code.roles``)."""
        return self.engine.stages[0].roles

    def close(self) -> None:
        """Cancels what is in flight and shuts the backend (its threads) down;
        callable from another thread while a request waits (it ends with an
        error)."""
        self.engine.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def infer(self, x: Any) -> ServeResult:
        """Serves one request: x [K, ...] -> :class:`ServeResult`.

        Raises:
            TypeError: x not floating.
            ValueError: x not [K, ...] (or not shaped like earlier requests); at
                the first request, a ``worker_fn`` that raises every time it is
                traced on a coded row (it cannot run on one). A worker that
                answers another shape or dtype than ``worker_fn``'s, or raises,
                is a failed worker (``failed``, ``failures``), never an error.
            TypeError: at the first request, a ``worker_fn`` that does not
                return one floating array on a coded row (a tuple, a list, an
                integer array).
            RuntimeError: the server is closed.
        """
        return self.engine.run([x], max_in_flight=1, fname="Server.infer")[0]

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
        return self.engine.run(xs, max_in_flight=n, fname="Server.serve")
