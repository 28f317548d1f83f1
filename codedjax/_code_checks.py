"""How a code checks its arguments: once per code, then once per call.

A code's settings and points are fixed when it is built, so they are checked then
(``codedjax._code_points.check_code_points``, each class's ``__post_init__``). Each call
of a :class:`~codedjax._code.Code` method checks its own arguments once, here
(:func:`check_inputs`, :func:`check_answers`, :func:`check_answers_batched`, and the
keywords a code does not take, :func:`refuse_keywords`); the code's jitted program then
calls the kernels' unchecked entries, so nothing is checked twice. A served code sees
arrays of the same shapes on every request: :func:`signature` and :func:`remember` let
``encode`` and ``decode`` skip even that check for a signature that passed it before.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_floating, check_mask, check_one_mask, check_payload
from ._dtypes import x64_enabled


# --- the arguments of one call -------------------------------------------------------
def check_inputs(code, fname: str, x: Any) -> jax.Array:
    """``encode``'s inputs: a floating array x [K, ...]."""
    x = check_floating(fname, "x", x)
    if x.ndim < 1 or x.shape[0] != code.num_inputs:
        raise ValueError(
            f"{fname}: x must have shape [K, ...] = [{code.num_inputs}, ...], got "
            f"{tuple(x.shape)}"
        )
    return x


def answer_shape(code, lead: tuple) -> tuple[tuple, str]:
    """(shape, text): the leading axes answers must have, ``lead`` then the code's
    coded axes, and how an error message writes them."""
    cs = tuple(code.coded_shape)
    names = ["B"] * (len(lead) - 1) + ["M"] + [str(c) for c in cs]
    want = "[" + ", ".join(names + ["..."]) + "]"
    return tuple(lead) + cs, want


def check_answers(code, fname: str, y: Any, mask: Any) -> tuple[jax.Array, jax.Array]:
    """One request's answers y [M, *coded_shape, ...] (non-empty, floating) and its
    mask [M] (boolean)."""
    y = check_payload(fname, "y", y)
    mask = check_one_mask(
        fname, mask, code.num_workers, "decode_batched takes many masks"
    )
    lead, want = answer_shape(code, (code.num_workers,))
    if y.shape[: len(lead)] != lead:
        raise ValueError(
            f"{fname}: y must have shape {want} = {list(lead) + ['...']}, "
            f"got {tuple(y.shape)}"
        )
    return y, mask


def check_answers_batched(code, fname: str, y: Any, masks: Any, shared_y: bool):
    """(y, masks, lead) of B requests: ``lead`` is y's leading shape, [M] (one
    payload shared by every mask) or [B, M].

    B = 0 masks (and payloads) are an empty batch, decoded to an empty result;
    every other axis must hold at least one entry."""
    y = check_floating(fname, "y", y)
    if 0 in (y.shape if shared_y else y.shape[1:]):
        check_payload(fname, "y", y)  # refused, with the payload's message
    m = code.num_workers
    masks = check_mask(fname, masks, m, name="masks")
    if masks.ndim != 2:
        raise ValueError(
            f"{fname}: masks must have shape [B, M] = [B, {m}], "
            f"got {tuple(masks.shape)}"
        )
    b = masks.shape[0]
    lead = (m,) if shared_y else (b, m)
    full, want = answer_shape(code, lead)
    if y.shape[: len(full)] != full:
        raise ValueError(
            f"{fname}: y must have shape {want} = {list(full) + ['...']} "
            f"(shared_y={shared_y}), got {tuple(y.shape)}"
        )
    return y, masks, lead


# The keywords of a decode that only some codes take: who takes it, for the error
# a code that does not take it raises (Python's own names the base class's method).
_CODE_KEYWORDS = {
    "order": (
        "order (the arrival order) is taken only by a threshold code "
        "(lagrange_code(..., decoder='threshold') -> ThresholdCode, circle_code(..., "
        "decoder='threshold') -> CircleThresholdCode)"
    ),
    "noise_sd": (
        "noise_sd (a per-answer noise level) is taken only by a robust code "
        "(lagrange_code(..., decoder='robust') -> RobustCode)"
    ),
}


def refuse_keywords(code, method: str, unknown: dict) -> None:
    """Raise the TypeError of keyword arguments ``code``'s ``method`` does not
    take, naming the code's own method and, for a keyword another code takes
    (``order``, ``noise_sd``), which codes take it."""
    fname = f"{type(code).__name__}.{method}"
    name = sorted(unknown)[0]
    if name in _CODE_KEYWORDS:
        raise TypeError(
            f"{fname}: {_CODE_KEYWORDS[name]}, not by {type(code).__name__}, which "
            f"decodes from {', '.join(code.answer_fields)}"
        )
    raise TypeError(
        f"{fname}: unexpected keyword argument {name!r} (it decodes from "
        f"{', '.join(code.answer_fields)})"
    )


def check_answer_fields(code, method: str, answers: Any) -> None:
    """A code given :class:`~codedjax.Answers` with a ``noise_sd`` it does not read
    refuses it, as its ``decode`` does (a runtime hands it only to a code that takes
    it); ``order`` is known to every runtime and ignored where it does not apply."""
    if answers.noise_sd is not None and "noise_sd" not in code.answer_fields:
        refuse_keywords(code, method, {"noise_sd": answers.noise_sd})


# --- the memo of checked signatures ---------------------------------------------------
# One request of a served code is an encode and a decode of arrays of the same
# shapes every time. ``encode`` and ``decode`` remember the signatures (shape,
# dtype, weak type, placement of each argument) whose checks passed and whose
# program ran; a later call with the same signature calls the jitted program
# directly, without the checks (they read nothing the signature does not hold) and
# without the Python context that names errors (a failure there retries the checked
# path, which names it). Only concrete jax arrays are remembered: tracers (a code
# inside the user's jit or vmap), numpy inputs and the rest are checked every time.
_ARRAY = None  # the concrete array type, found at the first call: making an array
# at import would start jax's backend, before a user's jax.distributed.initialize

_MAX_SIGNATURES = 64  # per code


def _array_type():
    global _ARRAY
    if _ARRAY is None:  # concrete even when the first call is inside a trace
        with jax.ensure_compile_time_eval():
            _ARRAY = type(jnp.zeros(()))
    return _ARRAY


def signature(method: str, arrays: tuple) -> tuple | None:
    """(method, each argument's shape, dtype, weak type and sharding, x64) when
    every argument is a concrete jax array or a numpy array (whose shape and
    dtype are all the checks read: the jitted program converts it as the checks
    would, with no program of its own), else None."""
    sig = [method, x64_enabled()]
    for a in arrays:
        t = type(a)
        if t is np.ndarray:
            sig.append((a.shape, a.dtype, "numpy"))
        elif t is _array_type():
            sig.append((a.shape, a.dtype, a.weak_type, a.sharding))
        else:
            return None
    return tuple(sig)


def remembered(code, sig: tuple | None) -> bool:
    """Whether ``sig`` passed ``code``'s checks before (never for None)."""
    return sig is not None and sig in code.__dict__.get("_checked", ())


def remember(code, sig: tuple | None) -> None:
    """Record that ``sig`` passed a method's checks (a code is frozen: the set is
    kept beside its fields, not in them, so it is no part of eq or hash; it is
    not pickled, see ``Code.__getstate__``)."""
    if sig is None:
        return
    seen = code.__dict__.get("_checked")
    if seen is None or len(seen) >= _MAX_SIGNATURES:
        seen = set()
        object.__setattr__(code, "_checked", seen)
    seen.add(sig)
