"""Vectorised latency Monte Carlo: what a zero-overhead server would do.

Given the injected delays and faults of R requests (one :class:`Injector` plan), the
decision time of a wait policy is an order statistic of the successful arrival
times, so 1e5 requests take one sort instead of an event loop per request. It is
the serving model of ``_events`` with every request finding its workers idle (one
:func:`serve_batch` of all R requests, sent at 0: the load simulator's step, on
idle workers). Each policy states its rule itself (its ``decision_times``
method); this module checks what the simulators are given and builds the batched
decode the rule asks for.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._result import Status
from ._checks import integer
from ._events import WorkerQueues, answer_times, serve_batch
from ._faults import Injector
from ._policy import decode_need, decodes_first, policy_deadline

# what simulate_latency needs of a code
_LATENCY_MEMBERS = ("num_workers", "threshold", "may_decode", "decode_batched")


class SimulatedLatency(NamedTuple):
    """Per-request outcome of :func:`simulate_latency` (numpy arrays [R]).

    Attributes:
        latency: seconds from submission to the decision (zero engine overhead);
            inf for a request that is never decided (a worker hangs, the policy
            waits for its answer and has no deadline).
        num_used: successful answers in hand at the decision.
        ok: whether the decode at the decision succeeds; False for a request
            that is never decided.
        timed_out: the deadline ended the wait.
        masks: bool [R, M] the answers in hand at the decision (a hung worker's
            is never in hand).
        status: int32 [R] the outcome as a ``codedjax.Status`` code: ``SUCCESS``
            where ``ok``; ``TOO_FEW_RESPONSES`` for a request never decided or
            whose answers the code's structure cannot decode; with
            ``check_ok=True`` the decoder's own status otherwise.
        query_latency: float [R, K] seconds from submission to each query's
            answer when each query is answered when it can be (its own worker's
            answer, or the decode that gives it: ``simulate_load``'s
            ``per_query`` rule); inf for a query without an answer.
    """

    latency: np.ndarray
    num_used: np.ndarray
    ok: np.ndarray
    timed_out: np.ndarray
    masks: np.ndarray
    status: np.ndarray
    query_latency: np.ndarray


def check_simulation(
    fname: str, code: Any, policy: Any, injector: Any, members: tuple[str, ...]
) -> tuple[Any, float]:
    """The checks the simulators share: ``code`` has ``members``, ``policy`` a
    ``decision_times`` rule (and its own ``check`` against the code passes),
    ``injector`` is an :class:`Injector` (or has its ``plan``), the policy's
    deadline is None or finite and >= 0 (:func:`policy_deadline`). Returns (the
    rule, the deadline: inf for none)."""
    for attr in members:
        if not hasattr(code, attr):
            raise TypeError(
                f"{fname}: code must be a codedjax Code (with {', '.join(members)}), "
                f"got {_kind(code)} without {attr!r}"
            )
    rule = getattr(policy, "decision_times", None)
    if not callable(rule):
        raise TypeError(
            f"{fname}: the policy must state its rule for many requests at once "
            f"(a decision_times(times) method, as FixedN, Deadline, "
            f"FirstDecodable and Adaptive have), got {_kind(policy)} without one; "
            f"run a Server on a SimulatedCluster to simulate it request by request"
        )
    if not isinstance(injector, Injector) and not callable(
        getattr(injector, "plan", None)
    ):
        raise TypeError(
            f"{fname}: injector must be a codedjax.serving.Injector, or an object "
            f"with its plan(request_ids, num_workers) method (the delay and fault "
            f"plan; Injector() for no delays), got {_kind(injector)}"
        )
    if callable(getattr(policy, "check", None)):
        policy.check(code)
    dl = policy_deadline(fname, policy)
    return rule, np.inf if dl is None else dl


def decision_times(fname: str, policy: Any, rule: Any, times: Any) -> np.ndarray:
    """float64 [R] of ``rule(times)``: a user's policy returning something else
    is a clear error naming the policy, not a numpy broadcast message later."""
    r = times.num_requests
    got = rule(times)
    try:
        out = np.asarray(got, np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{fname}: {_kind(policy)}.decision_times must return [R] = [{r}] "
            f"times in seconds, got {_kind(got)} ({exc})"
        ) from exc
    if out.shape != (r,) or np.isnan(out).any():
        raise ValueError(
            f"{fname}: {_kind(policy)}.decision_times must return [R] = [{r}] "
            f"times in seconds (inf for never), got shape {out.shape}"
            + (" with NaN" if out.shape == (r,) else "")
        )
    return out


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def check_flag(fname: str, name: str, value: Any) -> bool:
    """``value`` as a bool (Python or numpy bools only, not a truthy string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fname}: {name} must be True or False, got {value!r}")
    return bool(value)


def _check_responses(fname: str, code: Any, responses: Any, m: int) -> np.ndarray:
    """[M, ...] finite floating representative answers, or a clear error."""
    what = f"[M, ...] = [{m}, ...] finite floating representative answers"
    try:
        y = np.asarray(responses)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise TypeError(f"{fname}: responses must be {what}, got {exc}") from None
    if y.dtype == object or not jnp.issubdtype(y.dtype, jnp.floating):
        raise TypeError(
            f"{fname}: responses must be {what}, got dtype {y.dtype} "
            f"({type(responses).__name__})"
        )
    if y.ndim < 1 or y.shape[0] != m:
        raise ValueError(
            f"{fname}: responses must be {what} (one per worker of the code), got "
            f"shape {y.shape}"
        )
    bad = ~np.isfinite(y.astype(np.float32))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{fname}: responses must be {what} (faults come from the injector), "
            f"got {float(y[at])!r} at {at}"
        )
    try:  # the code's own shape rules (an empty batch: checks only, no decode)
        code.decode_batched(y, np.zeros((0, m), bool), shared_y=True)
    except (TypeError, ValueError) as exc:
        raise type(exc)(
            f"{fname}: responses of shape {y.shape} ({y.dtype}) are not answers "
            f"of this code: {exc}"
        ) from exc
    return y


def _batched_decode(code, y, masks, chunk=2048, *, status=False):
    """ok and predicted error (and, with ``status``, the status) of every mask, in
    chunks padded to a few fixed sizes (one compiled program per size, whatever
    the number of masks)."""
    oks, errs, sts = [], [], []
    y = np.asarray(y)
    for s in range(0, masks.shape[0], chunk):
        mk = masks[s : s + chunk]
        b = mk.shape[0]
        size = min(chunk, max(64, 1 << (b - 1).bit_length()))
        pad = np.zeros((size, mk.shape[1]), bool)
        pad[:b] = mk
        yb = jnp.broadcast_to(jnp.asarray(y), (size,) + y.shape)
        r = jax.device_get(code.decode_batched(yb, jnp.asarray(pad)))
        oks.append(np.asarray(r.ok)[:b])
        errs.append(np.asarray(r.error).reshape(size, -1).max(axis=1)[:b])
        sts.append(np.asarray(r.status, np.int32)[:b])
    if not oks:
        out = np.zeros(0, bool), np.zeros(0)
        return out + (np.zeros(0, np.int32),) if status else out
    out = np.concatenate(oks), np.concatenate(errs)
    return out + (np.concatenate(sts),) if status else out


def simulate_latency(
    code: Any,
    policy: Any,
    injector: Injector,
    num_requests: int,
    *,
    responses: Any = None,
    first_request: int = 0,
    check_ok: bool = False,
) -> SimulatedLatency:
    """Decision times of ``policy`` on ``num_requests`` requests, vectorised.

    Uses the same draws as the thread and simulated clusters for request numbers
    ``first_request ...`` (``injector.plan``). Workers that raise or answer NaN count
    as failed at their arrival time, hung workers never answer. Nothing arrives
    once every worker is done, so a server decides then at the latest, and so
    does the simulation (a rule's later time is taken as that one). A request whose
    policy waits for an answer that never comes (a hung worker, no deadline) is
    never decided: ``ok`` False, ``status`` ``TOO_FEW_RESPONSES``, latency inf,
    as a :class:`Server` on a :class:`SimulatedCluster` returns it.

    Args:
        code: the code (``num_workers``, ``threshold``, ``decode_batched``).
        policy: a wait policy with a ``decision_times`` method (every built-in
            one: :class:`FixedN`, :class:`Deadline`, :class:`FirstDecodable`,
            :class:`Adaptive`); for others run a :class:`Server` on a
            :class:`SimulatedCluster`.
        injector: the delay and fault plan.
        num_requests: R.
        responses: [M, ...] finite floating representative answers (checked
            against the code up front, whether or not they are used), used for
            ``ok`` and by a policy that decides on their values
            (``needs_answers``: :class:`Adaptive`, whose predicted error depends
            on their size; it needs them); default zeros.
        first_request: the number of the first request.
        check_ok: decode every final mask (``code.decode_batched``) to report
            ``ok``; otherwise ``ok`` is whether the code's structure allows a
            decode of the final mask (``code.may_decode``: at least ``threshold``
            answers; a replica of every input for replication).

    Returns:
        :class:`SimulatedLatency`.

    Raises:
        TypeError: a policy without ``decision_times``, or whose rule returns
            what is not numbers; a code without ``num_workers``, ``threshold``,
            ``may_decode`` and ``decode_batched``; an injector that is not an
            :class:`Injector`; a policy deadline that is not None or a number; a
            num_requests or first_request that is not an int; check_ok not a
            bool; responses that are not floating.
        ValueError: a policy that asks for more answers than M; a policy
            deadline that is NaN, infinite or negative; a rule that returns
            another shape than [R] or NaN; a negative num_requests or
            first_request; a policy with ``needs_answers`` and no ``responses``;
            responses not [M, ...], not finite, or not answers of the code (its
            ``decode_batched`` refuses their shape).
    """
    fname = "simulate_latency"
    rule, dl = check_simulation(fname, code, policy, injector, _LATENCY_MEMBERS)
    if getattr(policy, "needs_answers", False) and responses is None:
        raise ValueError(
            f"{fname}: {policy!r} decides on the answers' values (its predicted "
            f"error scales with them), so it needs responses=[M, ...] "
            f"representative answers; got none"
        )
    num_requests = integer(fname, "num_requests", num_requests)
    first_request = integer(fname, "first_request", first_request)
    check_ok = check_flag(fname, "check_ok", check_ok)
    m = int(code.num_workers)
    y = (
        np.zeros((m, 1), np.float32)
        if responses is None
        else _check_responses(fname, code, responses, m)
    )
    r_ids = np.arange(first_request, first_request + num_requests)
    delays, faults = injector.plan(r_ids, m)
    # every request sent at 0 onto idle workers: the times are from submission,
    # and the rule sees the deadline (a decode past it is never asked for)
    out = serve_batch(
        WorkerQueues((m,), queueing=False), slice(None), code,
        functools.partial(decision_times, fname, policy, rule),
        np.zeros(num_requests), delays, faults, dl, rule_deadline=dl,
        decode=lambda mk: _batched_decode(code, y, mk), account=False,
    )  # fmt: skip
    t_dec, timed_out, masks = out.decided, out.timed_out, out.mask
    decided = np.isfinite(t_dec)
    status = np.full(t_dec.shape, int(Status.TOO_FEW_RESPONSES), np.int32)
    if check_ok:
        ok, _, st = _batched_decode(code, y, masks, status=True)
        status = np.where(decided, st, status).astype(np.int32)
    else:
        ok = np.asarray(code.may_decode(masks), bool)
        status[ok] = int(Status.SUCCESS)
    ok = ok & decided
    status[~decided] = int(Status.TOO_FEW_RESPONSES)
    own = getattr(code, "own_workers", None)
    per_query = (
        answer_times(
            code,
            own,
            out.success,
            t_dec,
            decodes_first(policy, code),
            None,
            decode_need(policy, code),
        )
        if hasattr(code, "decodable_from_per_query")
        else np.where(ok, t_dec, np.inf)[:, None].repeat(code.num_inputs, axis=1)
    )
    return SimulatedLatency(t_dec, masks.sum(axis=1), ok, timed_out, masks, status,
                            per_query)  # fmt: skip
