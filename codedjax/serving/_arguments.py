"""The checks of what a server is given: its code, policy and noise function,
each request, each worker's answer, each round's input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._backends import Completion
from ._checks import integer
from ._policy import FixedN, WaitPolicy, policy_deadline

# what the server needs of a code
CODE_MEMBERS = (
    "num_inputs",
    "num_workers",
    "threshold",
    "answer_fields",
    "may_decode",
    "encode",
    "decode_answers",
)


def check_code(name: str, code: Any) -> None:
    """``code`` has what the server needs of a code (``CODE_MEMBERS``)."""
    for attr in CODE_MEMBERS:
        if not hasattr(code, attr):
            raise TypeError(
                f"{name}: code must be a codedjax Code (with "
                f"{', '.join(CODE_MEMBERS)}), got {type(code).__name__} "
                f"without {attr!r}"
            )


def check_policy(name: str, policy: Any, code: Any) -> WaitPolicy:
    """The wait policy (None: ``FixedN()``), checked against the code."""
    policy = FixedN() if policy is None else policy
    if not (callable(getattr(policy, "decide", None)) and hasattr(policy, "deadline")):
        raise TypeError(
            f"{name}: policy must have decide(arrivals) and a deadline attribute, "
            f"got {type(policy).__name__}"
        )
    if callable(getattr(policy, "check", None)):
        policy.check(code)
    policy_deadline(name, policy)
    return policy


def check_noise_fn(name: str, noise_fn: Any, code: Any) -> None:
    """``noise_fn`` is None, or callable with a code that takes noise levels."""
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


def check_in_flight(fname: str, max_in_flight: Any) -> int:
    """``max_in_flight`` of ``serve``: an int >= 1."""
    return integer(fname, "max_in_flight", max_in_flight, minimum=1)


def check_request(
    fname: str, x: Any, k: int, spec: tuple | None
) -> tuple[jax.Array, tuple]:
    """A request x: a floating array [K, ...] shaped like the first request,
    whose ``(shape, dtype)`` is ``spec`` (None: x is the first).

    Returns:
        ``(x, spec)``: x as a jax array, or as the numpy array it is when shaped
        like the first request (every program it meets converts it, with no
        dispatch of its own); spec x's own for the first request.

    Raises:
        TypeError: x not floating.
        ValueError: x not [K, ...], or shaped unlike the first request.
    """
    if type(x) is np.ndarray and spec is not None and x.shape == spec[0]:
        if x.dtype == spec[1]:  # shaped like the first request: checked then
            return x, spec  # (the programs it meets convert it themselves)
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        x = np.asarray(x)
    dt = jnp.dtype(x.dtype)
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"{fname}: x must be a floating array [K, ...], got dtype {dt}")
    if x.ndim < 1 or x.shape[0] != k:
        raise ValueError(
            f"{fname}: x must have shape [K, ...] with K = {k} (the "
            f"code's num_inputs), got shape {tuple(x.shape)}"
        )
    if spec is None:
        spec = (tuple(x.shape), dt)
    elif (tuple(x.shape), dt) != spec:
        raise ValueError(
            f"{fname}: every request must have the shape and dtype of the first, "
            f"{spec[0]} {spec[1]}, got {tuple(x.shape)} {dt}"
        )
    if isinstance(x, np.ndarray):
        return on_device(x)[0], spec
    return jnp.asarray(x), spec


@jax.jit
def _identity(*arrays):
    return arrays


def on_device(*arrays: np.ndarray) -> tuple[jax.Array, ...]:
    """Numpy arrays as jax arrays on the default device, all in one dispatch
    (``jnp.asarray`` of each costs several times more host time); the values
    and dtypes are ``jnp.asarray``'s."""
    return _identity(*arrays)


def noise_levels(
    fname: str, noise_fn: Callable | None, rows: np.ndarray, m: int
) -> np.ndarray | None:
    """The answers' noise levels [M] from ``noise_fn`` on the coded rows [M, ...]
    (None without one)."""
    if noise_fn is None:
        return None
    sd = np.asarray(noise_fn(rows))
    if sd.shape != (m,) or not np.issubdtype(sd.dtype, np.floating):
        raise ValueError(
            f"{fname}: noise_fn must return a floating array of shape [M] = "
            f"[{m}] (each answer's noise standard deviation), got "
            f"{sd.dtype} {sd.shape}"
        )
    return sd


def check_answer(c: Completion, out: jax.ShapeDtypeStruct) -> tuple[Any, str | None]:
    """``(answer, None)`` for a usable answer, ``(None, what)`` for a worker's
    failure: an exception, another shape or dtype than ``out`` (what
    ``worker_fn`` returns on a coded row), something that is not an array, a
    non-finite value. A bad answer is its worker's failure, like a crash,
    never the server's."""
    v = c.value
    if isinstance(v, BaseException):
        return None, f"raised {type(v).__name__}: {v}"
    try:
        v = np.asarray(v)
    except Exception as exc:
        return None, f"answered a {type(c.value).__name__}, not an array ({exc})"
    want = (tuple(out.shape), out.dtype)
    if v.dtype == object:
        return None, f"answered a {type(c.value).__name__}, not an array"
    if (v.shape, v.dtype) != want:
        return None, (
            f"answered {v.dtype} {v.shape}; worker_fn returns {want[1]} "
            f"{want[0]} on a coded row"
        )
    if not np.all(np.isfinite(v.astype(np.float32))):
        return None, "answered a non-finite value"
    return v, None


def check_round_input(where: str, x: Any, k: int) -> jax.Array:
    """The master's output as the next round's input: floating [K, ...]."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating) or x.ndim < 1 or x.shape[0] != k:
        raise ValueError(
            f"{where}: the previous round's master_fn must return the next round's "
            f"input, a floating array [K, ...] with K = {k}, got {x.dtype} "
            f"{tuple(x.shape)}"
        )
    return x
