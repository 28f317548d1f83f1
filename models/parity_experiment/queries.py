"""Per-query decoding: each of a request's K queries counted when its responders
give it, not the request all or nothing.

A code says which queries a set of responders gives (``Code.decodable_queries``:
ParM per parity group, replication per replica, RepApprox per replica or its
fallback) and which workers answer a query as it is (``Code.own_workers``). Its
decoder, though, returns one ``DecodeResult`` per request and zeroes every value
when the request is not ``ok`` (``codedjax._result.finish``; ParM's plan zeroes its
decoding matrix too), so the queries a lost ParM group leaves decodable come back
as zeros. :func:`decode_per_query` gives them back, through the public interface
only:

* a query one of its own workers answered: that answer, as it is;
* any other decodable query of a request that is not ``ok`` (ParM's rebuilt
  queries of the groups that decode): the decode under the mask completed by a
  made-up answer at the first own worker of every query that cannot be decoded,
  which lets the code decode; the value is kept only where it is the same with two
  made-up answers (0 and 1), so a query whose value would depend on them is never
  counted (a RuntimeError names the code).

A query is *answered* where it is decodable and its value is finite.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["answered_shares", "decode_per_query", "decoding_kind"]

#: ``decode(y [B, M, ...], masks [B, M]) -> (value [B, K, ...], ok [B])``
Decode = Callable[[np.ndarray, np.ndarray], tuple]


def _finite_rows(v: np.ndarray) -> np.ndarray:
    """[B, K, ...] -> bool [B, K]: every entry of the query's value finite."""
    return np.isfinite(v.reshape(v.shape[:2] + (-1,))).all(axis=-1)


def _fill(y: np.ndarray, add: np.ndarray, value: float) -> np.ndarray:
    where = add.reshape(add.shape + (1,) * (y.ndim - 2))
    return np.where(where, np.asarray(value, y.dtype), y)


def decode_per_query(
    code, y, masks, value, ok, decode: Decode
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's value and whether it is answered.

    Args:
        code: the code (``decodable_queries``, ``own_workers``, ``num_inputs``,
            ``num_workers``, ``name``).
        y: [B, M, ...] the workers' answers (any row of a worker not in the mask
            is ignored).
        masks: bool [B, M], the responders of each request.
        value: [B, K, ...] the request's decode (zeros where not ok).
        ok: bool [B] the request's ``ok``.
        decode: the decode behind ``value``, called again (on the whole batch,
            one compiled shape) where a request that is not ok has decodable
            queries its own workers did not answer.

    Returns:
        ``(value [B, K, ...], answered bool [B, K])``: ``value`` with every
        answered query's value filled in (unanswered ones as ``value`` had them).

    Raises:
        ValueError: masks not [B, M] for the code's M, y or value of another B.
        RuntimeError: a decodable query whose value depends on the made-up
            answers (the code does not decode its queries apart).
    """
    fname = "decode_per_query"
    masks = np.asarray(masks, bool)
    k, m = code.num_inputs, code.num_workers
    if masks.ndim != 2 or masks.shape[1] != m:
        raise ValueError(
            f"{fname}: masks must be [B, M = {m}] for {code.name}, got {masks.shape}"
        )
    b = masks.shape[0]
    value = np.array(value)  # a copy: filled below
    ok = np.asarray(ok, bool).reshape(-1)
    if value.shape[:2] != (b, k) or ok.shape != (b,):
        raise ValueError(
            f"{fname}: value must be [B = {b}, K = {k}, ...] and ok [B], got "
            f"{value.shape} and {ok.shape}"
        )
    dq = np.asarray(code.decodable_queries(masks), bool)  # [B, K]
    redo = ~ok & dq.any(axis=-1)
    valid = ok[:, None] & dq
    if not redo.any():
        return value, valid & _finite_rows(value)
    y = np.asarray(y)
    if y.shape[:2] != (b, m):
        raise ValueError(f"{fname}: y must be [B = {b}, M = {m}, ...], got {y.shape}")
    own = getattr(code, "own_workers", None)
    if own is None:  # no query is answered apart from its request
        return value, valid & _finite_rows(value)
    own = np.asarray(own, bool)  # [K, M]
    hit = own[None] & masks[:, None, :]  # [B, K, M]
    has = hit.any(axis=-1) & redo[:, None]
    if has.any():
        first = np.argmax(hit, axis=-1)  # [B, K]: the first own worker that answered
        copied = np.take_along_axis(
            y, first.reshape((b, k) + (1,) * (y.ndim - 2)), axis=1
        )
        value = np.where(
            has.reshape(has.shape + (1,) * (value.ndim - 2)),
            copied.astype(value.dtype),
            value,
        )
        valid |= has
    rest = dq & ~has & redo[:, None]  # decodable, but not by an own answer
    lost = ~dq & redo[:, None]
    add = (lost[..., None] & (np.cumsum(own, axis=1) == 1)[None] & own[None]).any(
        axis=1
    ) & ~masks  # [B, M]: the first own worker of each query that cannot decode
    rows = rest.any(axis=-1) & add.any(axis=-1)
    if rows.any():
        add &= rows[:, None]
        filled = masks | add
        outs = [decode(_fill(y, add, v), filled) for v in (0.0, 1.0)]
        (v0, ok0), (v1, ok1) = ((np.asarray(v), np.asarray(o, bool)) for v, o in outs)
        use = rest & rows[:, None] & ok0[:, None] & ok1[:, None]
        same = np.all(
            (v0 == v1).reshape((b, k, -1)) | ~np.isfinite(v0).reshape((b, k, -1)),
            axis=-1,
        )
        if np.any(use & ~same):
            raise RuntimeError(
                f"{fname}: {code.name}'s decode of a decodable query depends on "
                f"the answers of workers of other queries; it cannot be decoded "
                f"apart by completing the mask"
            )
        value = np.where(use.reshape(use.shape + (1,) * (value.ndim - 2)), v0, value)
        valid |= use
    return value, valid & _finite_rows(value)


def decoding_kind(code) -> str:
    """How ``code``'s queries are counted: ``"per group"`` (ParM: each parity group
    decodes on its own), ``"per query"`` (a query its own workers answer is
    answered, others with the request: replication, RepApprox, systematic codes)
    or ``"all or nothing"`` (every query with the request)."""
    if getattr(code, "name", None) == "parity":
        return "per group"
    own = getattr(code, "own_workers", None)
    return "all or nothing" if own is None else "per query"


def answered_shares(answered: np.ndarray) -> dict[str, float]:
    """``{"answered": the share of queries answered, "whole": the share of
    requests with every query answered}`` of answered [B, K]."""
    a = np.asarray(answered, bool)
    return {"answered": float(a.mean()), "whole": float(a.all(axis=-1).mean())}
