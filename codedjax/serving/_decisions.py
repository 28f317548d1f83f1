"""When a round is decided: the wait policy asked once per batch of answers.

The engine (``_engine.py``) takes the answers the backend has ready at a
wake-up as one batch (:meth:`Request.take`, ``_request.py``) and asks
:class:`Decisions` whether, and at which of them, the policy decides. The
round ends where asking the policy after every answer would have ended it
(for a policy whose answer, once yes, stays yes as answers are added, as
every built-in one's), at a fraction of the asking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._policy import ArrivalState
from ._request import Request


class Decisions:
    """Asks a round's policy about batches of answers (:meth:`decide`), and
    remembers which policies ask for a decode (``decoding``: by id, the
    policy kept alive here), which are asked differently."""

    def __init__(self):
        self.decoding: dict[int, Any] = {}

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
        decoded = []

        def ask(n: int) -> bool:
            def decode_now():
                decoded.append(n)
                return decode(n)

            mask, order, num_failed = r.prefix(n)
            dtype = r.y.dtype if n else None
            state = ArrivalState(code, mask, order, now - r.t_sub, num_failed,
                                 dtype, decode_now)  # fmt: skip
            return bool(policy.decide(state))

        lo, hi = before + 1, before + added
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
