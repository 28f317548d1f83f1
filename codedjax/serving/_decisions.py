"""When a round is decided: the wait policy asked once per batch of answers.

The engine (``_engine.py``) takes the answers the backend has ready at a
wake-up as one batch (:meth:`Request.take`, ``_request.py``) and asks
:class:`Decisions` whether, and at which of them, the policy decides. The
round ends where asking the policy after every answer would have ended it
(for a policy whose answer, once yes, stays yes as answers are added, as
every built-in one's), at a fraction of the asking. A built-in policy's
rule (``_policy.Rule``) is read on arrays: its count and the code's
structure (``may_decode`` of every prefix of the batch, one call) before any
decode, and a decoding rule's decodes start at its last decision, so a
round is confirmed by about two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._policy import ArrivalState, Rule
from ._request import Request


class Decisions:
    """Asks a round's policy about batches of answers (:meth:`decide`), and
    remembers which policies ask for a decode (``decoding``: by id, the
    policy kept alive here), which are asked differently."""

    def __init__(self):
        self.decoding: dict[int, Any] = {}
        self.hints: dict[int, int] = {}  # a decoding rule's last decision

    @staticmethod
    def rule(policy: Any, code: Any) -> Rule | None:
        """The :class:`Rule` of a built-in policy whose ``decide`` is its rule's
        (not overridden); None for any other policy (asked as it is)."""
        stated = getattr(policy, "stated_rule", None)
        return stated(code) if callable(stated) else None

    def decide(
        self,
        policy: Any,
        code: Any,
        r: Request,
        before: int,
        added: int,
        now: float,
        decode: Callable[[int], Any],
    ) -> int:
        """Whether the batch that brought request ``r``'s successful answers
        from ``before`` to ``before + added`` decides its round: 0 to wait,
        else the successful answer at which ``policy`` decides.

        * A policy whose answer costs no decode is asked once per batch; when
          it decides, bisection (the batch's last answer first) finds the
          first answer after which it says so.
        * A policy that decodes (learned at its first decode) is asked answer
          by answer from the batch's first until its first decode (those
          below the code's threshold cost none); when that one does not pass,
          once about the whole batch: no, and the round waits; yes, and
          bisection finds the first answer between that passes.

        Args:
            policy: the round's wait policy (``decide(arrivals) -> bool``).
            code: the round's code.
            r: the request, its batch taken.
            before, added: its successful answers before the batch, and how
                many the batch added (> 0).
            now: the moment it is asked, on the backend's clock.
            decode: ``decode(n)``, the decode of its first n successful
                answers (kept by the engine: the policy's decode is the
                round's when it decides there).
        """
        decoded: list = []

        def ask(n: int) -> bool:
            return self.ask(policy, code, r, n, now, decode, decoded)

        lo, hi = before + 1, before + added
        rule = self.rule(policy, code)
        if rule is not None:  # a built-in rule: its structure first, on arrays
            lo = max(lo, rule.need)
            if lo > hi:
                return 0
            if not rule.decode:  # the count alone: yes from the need-th on
                return lo
            lo = _first_may_decode(code, r, lo, hi)
            if not lo:
                return 0
            key = id(policy)
            self.decoding[key] = policy
            n = near_first_yes(_passes(rule, decode), lo, hi, self.hints.get(key, lo))
            if n:
                self.hints[key] = n
            return n
        if id(policy) in self.decoding:
            return _first_decoded(ask, decoded, lo, hi, known_yes=False)
        if not ask(hi):
            if decoded:
                self.decoding[id(policy)] = policy
            return 0
        if decoded:
            self.decoding[id(policy)] = policy
            return _first_decoded(ask, decoded, lo, hi, known_yes=True)
        if lo < hi:
            if not ask(hi - 1):  # the batch's last answer decided (FixedN(M))
                return hi
            hi -= 1
        return first_yes(ask, lo, hi)

    def ask(
        self,
        policy: Any,
        code: Any,
        r: Request,
        n: int,
        now: float,
        decode: Callable[[int], Any],
        decoded: list | None = None,
    ) -> bool:
        """Whether ``policy`` decides with request ``r``'s first ``n``
        successful answers of the round (``decode`` as :meth:`decide`'s;
        ``decoded`` gets ``n`` when the policy asks for the decode)."""

        def decode_now():
            if decoded is not None:
                decoded.append(n)
            return decode(n)

        mask, order, num_failed = r.prefix(n)
        dtype = r.y.dtype if n else None
        state = ArrivalState(code, mask, order, now - r.t_sub, num_failed, dtype,
                             decode_now)  # fmt: skip
        return bool(policy.decide(state))


def _passes(rule: Rule, decode: Callable[[int], Any]) -> Callable[[int], bool]:
    """``ask(n)`` of a decoding rule whose structural test passes at n (the
    code may decode, n at least its need): :func:`decide_by`'s decode test."""

    def ask(n: int) -> bool:
        res = decode(n)
        if not bool(np.asarray(res.ok)):
            return False
        budget = rule.budget
        return budget is None or float(np.max(np.asarray(res.error))) <= budget

    return ask


def near_first_yes(ask: Callable[[int], bool], lo: int, hi: int, guess: int) -> int:
    """The first n in [lo, hi] for which ``ask(n)`` (taken to hold from that n
    on), 0 for none, asking near ``guess`` first (a decoding policy's last
    decision: a round's decision is then confirmed by two decodes, the guess
    and its neighbour, where bisection takes log2 of the batch)."""
    g = min(max(guess, lo), hi)
    if ask(g):
        if g == lo or not ask(g - 1):
            return g
        return first_yes(ask, lo, g - 1)
    if g == hi:
        return 0
    if ask(g + 1):
        return g + 1
    if g + 1 == hi or not ask(hi):
        return 0
    return first_yes(ask, g + 2, hi)


def _first_may_decode(code: Any, r: Request, lo: int, hi: int) -> int:
    """The first n in [lo, hi] whose first n successful answers of ``r`` the
    code may decode (``code.may_decode``, monotone: every n before it would
    say no without a decode), from one call on the [hi - lo + 1, M] prefix
    masks; 0: none."""
    m = r.mask.shape[0]
    rank = np.full(m, m + 1)
    rank[r.order[:hi]] = np.arange(1, hi + 1)
    masks = rank[None, :] <= np.arange(lo, hi + 1)[:, None]
    can = np.asarray(code.may_decode(masks), bool)
    if can.shape != (len(masks),):  # a code that takes one mask at a time
        can = np.array([bool(np.asarray(code.may_decode(k))) for k in masks])
    if not can.any():
        return 0
    return lo + int(np.argmax(can))


def _first_decoded(ask, decoded: list, lo: int, hi: int, *, known_yes: bool) -> int:
    """A decoding policy's first yes in [lo, hi] (0: none): answer by answer
    until its first decode (those before cost none); when that one does not
    pass, the whole batch (unless ``known_yes``: it says yes at hi), then
    bisection between."""
    for n in range(lo, hi + 1):
        if n == hi and known_yes:
            return hi
        decoded.clear()
        if ask(n):
            return n
        if decoded:  # its first decode, and it did not pass
            break
    else:
        return 0
    if n == hi or not (known_yes or ask(hi)):
        return 0
    return first_yes(ask, n + 1, hi)


def first_yes(ask: Callable[[int], bool], lo: int, hi: int) -> int:
    """The first n in [lo, hi] for which ``ask(n)``, known to hold at hi and
    taken to hold from that n on: by bisection."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ask(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
