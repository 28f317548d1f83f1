"""Wait policies: when the server stops waiting for workers and decodes.

A policy is any object with a ``deadline`` attribute (seconds after the request was
sent, or None for no deadline) and a ``decide(arrivals) -> bool`` method that the
server calls once per batch of successful answers taken in one wake-up (when the
batch decides, the server finds the answer at which it did, so a policy sees the
same answers as if asked after each one; a policy's yes must then stay yes as
answers arrive, as every built-in policy's does). At the deadline the server
decodes with whatever has arrived (``ok`` is False when that is fewer than the
code needs).

A policy that also has ``decision_times(times) -> [R]`` can be simulated in one
vectorised pass (:func:`codedjax.serving.simulate_latency`): it states the same rule
as ``decide`` for R requests at once, from their arrival times
(:class:`ArrivalTimes`). Every built-in policy has one, and states its rule once
(a :class:`Rule`: the answers it needs, whether it then asks the decoder, the
predicted error it accepts); ``decide`` and ``decision_times`` are both derived
from that statement, by :func:`decide_by` and :func:`decision_times_by`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ._checks import integer, number


@runtime_checkable
class WaitPolicy(Protocol):
    """The protocol every wait policy follows (write your own in a few lines).

    Attributes:
        deadline: seconds after the request was sent at which the server decodes
            with what has arrived; None waits until ``decide`` says so or every
            worker has answered.
        needs_answers: whether ``decide`` depends on the answers' values, not
            only on which workers answered when (:class:`Adaptive`: its predicted
            error scales with them); :func:`simulate_latency` then needs
            representative ``responses``. Optional; a policy without it is read
            as False.
    """

    deadline: float | None

    def decide(self, arrivals: ArrivalState) -> bool:
        """True to decode now, with the answers in ``arrivals``."""
        ...


class ArrivalState:
    """What a policy sees: the answers of one request so far.

    Attributes:
        code: the request's code (``num_workers``, ``threshold``, ...).
        num_arrived: successful (finite) answers so far.
        num_failed: workers whose answer was an exception or not finite.
        mask: bool [M] workers with a successful answer.
        order: int [num_arrived] those workers in arrival order.
        elapsed: seconds since the request was sent.
        worker_dtype: the dtype of the answers (None before the first).
    """

    def __init__(self, code, mask, order, elapsed, num_failed, worker_dtype, decode):
        self.code = code
        self.mask = mask
        self.order = order
        self.num_arrived = len(order)
        self.num_failed = num_failed
        self.elapsed = elapsed
        self.worker_dtype = worker_dtype
        self._decode = decode
        self._result = None

    def decode(self):
        """The decode of the answers so far (``value``, ``ok``, ``cond``,
        ``error`` ...); computed once and reused by the server if it decides now."""
        if self._result is None:
            self._result = self._decode()
        return self._result


class ArrivalTimes:
    """What a policy's ``decision_times`` sees: the answers of R requests at once.

    Built by :func:`codedjax.serving.simulate_latency` from an :class:`Injector`
    plan, and by :func:`codedjax.serving.simulate_load` for each round of groups
    (times from the simulation's origin, no deadline: it applies the deadline
    itself, and judges the answers by the code's structure alone: no ``decode``);
    a zero-overhead server decides at one of the successful arrival times.

    Attributes:
        code: the code of the requests.
        success: float [R, M] seconds from submission to each successful answer
            (inf for a worker that failed, hung or never answers).
        sorted: float [R, M] ``success`` sorted along the workers: column n - 1 is
            the time of the n-th successful answer.
        all_done: float [R], when every worker has answered or failed (inf when
            one hangs): nothing more arrives after it.
        deadline: the policy's deadline in seconds (inf for none).
        decode: ``masks -> (ok, predicted error)`` of the representative
            answers, or None when the decision is judged on the code's structure
            alone (a decode is then taken as ok wherever ``code.may_decode``,
            and a rule that asks for :meth:`decode` is refused).
    """

    def __init__(self, code, success, all_done, deadline, decode=None):
        self.code = code
        self.success = success
        self.sorted = np.sort(success, axis=1)
        self.all_done = all_done
        self.deadline = math.inf if deadline is None else float(deadline)
        self._decode = decode

    @property
    def num_requests(self) -> int:
        return self.success.shape[0]

    def masks_at(self, rows: np.ndarray, times: np.ndarray) -> np.ndarray:
        """bool [len(rows), M]: the answers in hand at ``times`` [len(rows)]."""
        return self.success[rows] <= times[:, None]

    def decode(self, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ok [B], predicted error [B]) of decoding the representative answers
        with each mask (``code.decode_batched``)."""
        if self._decode is None:
            raise TypeError(
                "ArrivalTimes.decode: these arrival times judge the answers by the "
                "code's structure alone (no representative answers); a policy "
                "whose rule decodes them (needs_answers) cannot be simulated here"
            )
        return self._decode(masks)

    def first_accepted(self, need: int, accept) -> np.ndarray:
        """[R] the first successful arrival, from the ``need``-th on and within the
        deadline, after which ``accept(ok, error)`` holds for the decode of the
        answers in hand (masks the code cannot decode, ``code.may_decode``, are
        not decoded); ``all_done`` where none is accepted. Without a ``decode``
        every decode is taken as accepted, so this is the first arrival from the
        ``need``-th on after which the code may decode
        (``code.decodable_from``)."""
        if self._decode is None:
            n = max(need, 1)
            if n > self.code.num_workers:
                return self.all_done.copy()
            t = np.asarray(self.code.decodable_from(self.success), np.float64)
            t = np.maximum(t, self.sorted[:, n - 1])
            t = np.where(t <= self.deadline, t, math.inf)
            return np.minimum(t, self.all_done)
        t_dec = self.all_done.copy()
        undecided = np.ones(self.num_requests, bool)
        for n in range(max(need, 1), self.code.num_workers + 1):
            tn = self.sorted[:, n - 1]
            rows = np.flatnonzero(undecided & np.isfinite(tn) & (tn <= self.deadline))
            if rows.size == 0:
                continue
            masks = self.masks_at(rows, tn[rows])
            can = np.asarray(self.code.may_decode(masks), bool)
            rows, masks = rows[can], masks[can]
            if rows.size == 0:
                continue
            ok, err = self.decode(masks)
            hit = rows[np.asarray(accept(ok, err), bool)]
            t_dec[hit] = np.minimum(tn[hit], self.all_done[hit])
            undecided[hit] = False
        return t_dec


def responses_needed(code: Any) -> int:
    """The fewest answers a policy waits for by default: the code's
    ``correction_threshold`` (D + 2A for a robust code, which corrects A corrupted
    answers only from that many), else its ``threshold``."""
    return int(getattr(code, "correction_threshold", code.threshold))


_SECONDS = "a number of seconds (or None: no deadline)"


def _check_deadline(fname: str, deadline: Any) -> float | None:
    if deadline is None:
        return None
    return number(fname, "deadline", deadline, what=_SECONDS)


def policy_deadline(fname: str, policy: Any) -> float | None:
    """The deadline of any policy (a built-in one or one of a user's), checked by
    the rule of the built-in policies' ``deadline`` argument: None (no deadline)
    or a finite number of seconds >= 0 (0: decide at the fan-out with what has
    arrived, nothing).

    The one check of every entry point that reads a policy's deadline (the
    :class:`Server`, :func:`simulate_latency`, :func:`simulate_load`).

    Raises:
        TypeError: a policy without a ``deadline`` attribute, or a deadline that is
            not a number (a string, a bool), naming ``fname`` and the policy.
        ValueError: a NaN, infinite or negative deadline (no deadline is None).
    """
    kind = type(policy).__name__
    if not hasattr(policy, "deadline"):
        raise TypeError(
            f"{fname}: the policy must have a deadline attribute ({_SECONDS}), got "
            f"{kind} without one"
        )
    deadline = policy.deadline
    if deadline is None:
        return None
    name = f"the policy's deadline ({kind}.deadline)"
    try:
        return number(fname, name, deadline, what=_SECONDS)
    except ValueError as exc:
        if math.isinf(float(deadline)) and float(deadline) > 0:
            raise ValueError(f"{exc} (no deadline is None)") from None
        raise


class Rule(NamedTuple):
    """A built-in policy's rule, stated once: decide at the first successful
    answer, from the ``need``-th on, after which the answers in hand pass the
    test; when none passes, wait until every worker is done (the deadline, a
    policy attribute, is applied by the server or simulator that runs it).

    Attributes:
        need: answers before the policy decides (more than M: wait for every
            worker).
        decode: whether the test asks the decoder: the code must allow a decode
            of the answers in hand (``code.may_decode``, from its structure
            alone) and the decode must be ``ok``; False: the count alone
            passes.
        budget: with ``decode``, the largest predicted absolute error accepted
            (the decode's ``error``, max over the outputs); None: any.
    """

    need: int
    decode: bool = False
    budget: float | None = None


def decide_by(rule: Rule, arrivals: ArrivalState) -> bool:
    """``rule`` at one event: whether to decide with the answers in ``arrivals``
    (what a policy's ``decide`` returns)."""
    if arrivals.num_arrived < rule.need:
        return False
    if not rule.decode:
        return True
    if not bool(arrivals.code.may_decode(arrivals.mask)):
        return False
    r = arrivals.decode()
    if not bool(np.asarray(r.ok)):
        return False
    return rule.budget is None or float(np.max(np.asarray(r.error))) <= rule.budget


def decision_times_by(rule: Rule, times: ArrivalTimes) -> np.ndarray:
    """``rule`` for R requests at once: [R] the times :func:`decide_by` first
    says yes at, each request's answers taken in their arrival order (when
    every worker is done where it never does; what a policy's
    ``decision_times`` returns)."""
    if not rule.decode:
        n = rule.need
        if n > times.code.num_workers:
            return times.all_done.copy()
        return np.minimum(times.sorted[:, n - 1], times.all_done)
    budget = rule.budget
    if budget is None:
        return times.first_accepted(rule.need, lambda ok, err: ok)
    # the error compared as decide_by compares it: in float64
    return times.first_accepted(
        rule.need, lambda ok, err: ok & (np.asarray(err, np.float64) <= budget)
    )


def decodes_first(policy: Any, code: Any) -> bool:
    """Whether ``policy`` answers each query at the first moment the answers in
    hand give it (a rule that decodes at the first ``ok`` with no error budget:
    :class:`FirstDecodable`); else (a count, a budget, a policy of your own) a
    query is answered at its own worker's answer or at the decision."""
    rule = getattr(policy, "_rule", None)
    if not callable(rule):
        return False
    r = rule(code)
    return bool(r.decode) and r.budget is None


def decode_need(policy: Any, code: Any) -> int:
    """The answers a policy that :func:`decodes_first` waits for before any
    decode (its rule's ``need`` where it exceeds the code's threshold: a robust
    decoder's D + 2A); 1 otherwise."""
    if not decodes_first(policy, code):
        return 1
    need = int(policy._rule(code).need)
    return need if need > int(code.threshold) else 1


class _StatedRule:
    """A built-in policy: it states its :class:`Rule` once (``_rule(code)``), and
    its ``decide`` and ``decision_times`` are that rule's."""

    def _rule(self, code: Any) -> Rule:  # pragma: no cover - every subclass has one
        raise NotImplementedError

    def stated_rule(self, code: Any) -> Rule | None:
        """Its :class:`Rule` for ``code``; None when ``decide`` is overridden."""
        return self._rule(code) if type(self).decide is _StatedRule.decide else None

    def decide(self, arrivals: ArrivalState) -> bool:
        """True to decode now, with the answers in ``arrivals`` (the policy's
        rule at this event)."""
        return decide_by(self._rule(arrivals.code), arrivals)

    def decision_times(self, times: ArrivalTimes) -> np.ndarray:
        """[R] when the policy decides each of R requests (the same rule as
        ``decide``, for all of them at once)."""
        return decision_times_by(self._rule(times.code), times)


class FixedN(_StatedRule):
    """Decode at the N-th successful answer.

    N defaults to the code's threshold, or for a robust code (``decoder="robust"``)
    to its ``correction_threshold`` D + 2A, the fewest answers from which it
    corrects A corrupted ones.

    Args:
        num_responses: N; at most M (checked against the code by the server).
        deadline: optional backstop in seconds.
    """

    def __init__(
        self, num_responses: int | None = None, *, deadline: float | None = None
    ):
        if num_responses is not None:
            num_responses = integer("FixedN", "num_responses", num_responses, minimum=1)
        self.num_responses = num_responses
        self.deadline = _check_deadline("FixedN", deadline)

    def check(self, code) -> None:
        n = self.num_responses
        if n is not None and n > code.num_workers:
            raise ValueError(
                f"FixedN: num_responses (N) must be at most the code's M = "
                f"{code.num_workers}, got {n}"
            )

    def _rule(self, code) -> Rule:
        """N answers, the count alone (decided at the N-th successful arrival,
        or when every worker is done if sooner)."""
        return Rule(self.num_responses or responses_needed(code))

    def __repr__(self):
        return f"FixedN({self.num_responses}, deadline={self.deadline})"


class Deadline(_StatedRule):
    """Wait for every worker, but decode at ``deadline`` seconds with what arrived."""

    def __init__(self, deadline: float):
        if deadline is None:
            raise TypeError("Deadline: deadline must be a number of seconds, got None")
        self.deadline = _check_deadline("Deadline", deadline)

    def _rule(self, code) -> Rule:
        """Every worker's answer (decided when every worker is done; the
        deadline cuts it short)."""
        return Rule(int(code.num_workers))

    def __repr__(self):
        return f"Deadline({self.deadline})"


class FirstDecodable(_StatedRule):
    """Decode at the first answer after which the decoder reports ``ok``.

    The decoder is asked only once the code says the answers can decode
    (``code.may_decode``: for replication, once every input has a replica); for
    Lagrange codes that is at the threshold D (when the system is not singular).
    A robust code is asked no sooner than its
    ``correction_threshold`` D + 2A: at N = D every answer fits exactly and a
    corrupted one would pass unseen (between D + 1 and D + 2A - 1 a corruption it
    cannot correct is reported as ``UNDECIDABLE``, not ``ok``, and the policy waits).
    """

    def __init__(self, *, deadline: float | None = None):
        self.deadline = _check_deadline("FirstDecodable", deadline)

    def _rule(self, code) -> Rule:
        """The code's fewest answers (:func:`responses_needed`), then a decode
        that is ``ok``."""
        return Rule(responses_needed(code), decode=True)

    def __repr__(self):
        return f"FirstDecodable(deadline={self.deadline})"


class Adaptive(_StatedRule):
    """Decode at the first answer where the decoder's predicted error is small enough.

    After each answer beyond the code's threshold the server decodes what has
    arrived; the policy accepts when the result is ``ok`` and its predicted absolute
    error (``error``, from ``cond`` and the workers' precision) is at most
    ``budget``. The deadline is the backstop.

    Its rule is stated once like the other policies', but it is the one
    built-in policy whose rule reads the answers' values (the predicted
    error scales with them, ``needs_answers``): its ``decision_times`` decodes
    representative answers, which :func:`~codedjax.serving.simulate_latency`
    takes as ``responses``, and :func:`~codedjax.serving.simulate_load` (which
    judges the answers by the code's structure alone) refuses it.

    Args:
        budget: the largest acceptable predicted absolute error (> 0).
        deadline: seconds; required, as the error may never fall below the budget.
        min_responses: never decode before this many answers (default: the
            code's threshold; for a robust code its ``correction_threshold``
            D + 2A, see :class:`FirstDecodable`).
    """

    needs_answers = True  # the predicted error scales with the answers

    def __init__(
        self, budget: float, deadline: float, *, min_responses: int | None = None
    ):
        b = number("Adaptive", "budget", budget, positive=True)
        if deadline is None:
            raise TypeError("Adaptive: deadline must be a number of seconds, got None")
        self.budget = b
        self.deadline = _check_deadline("Adaptive", deadline)
        if min_responses is not None:
            min_responses = integer("Adaptive", "min_responses", min_responses,
                                    minimum=1)  # fmt: skip
        self.min_responses = min_responses

    def check(self, code) -> None:
        n = self.min_responses
        if n is not None and n > code.num_workers:
            raise ValueError(
                f"Adaptive: min_responses must be at most the code's M = "
                f"{code.num_workers}, got {n}"
            )

    def _rule(self, code) -> Rule:
        """The code's fewest answers (or ``min_responses``, if more), then a
        decode that is ``ok`` with a predicted error within the budget."""
        need = max(responses_needed(code), self.min_responses or 0)
        return Rule(need, decode=True, budget=self.budget)

    def __repr__(self):
        return f"Adaptive(budget={self.budget}, deadline={self.deadline})"
