"""The rounds of a request as the engine runs them: each worker's role, one
function per role, and the checked :class:`Stage`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from .._code import BASE_ROLE, Answers
from ._arguments import check_code, check_noise_fn, check_policy, on_device


class Stage:
    """One round of a request as the engine runs it (a one-shot server has one):
    its checked code, one function per role (``fns``) and each worker's role
    (``roles`` [M]), its policy and noise function, the master's step (jitted;
    None: the decoded value itself), its fraction of the work, and its
    ``decode(y, mask, order, noise)``. ``out`` is what its functions return on
    a coded row, set by the warm-up."""

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


def _decode_fn(code: Any) -> Callable:
    """``decode(y, mask, order, noise)``: the code's ``decode_answers`` on numpy
    answers (``noise``: the noise levels [M], or None). A code that reads only
    ``y`` and ``mask`` (``answer_fields``) takes the numpy arrays as they are (a
    library code's jitted program converts them, no program of their own);
    the others get them on the device in one dispatch."""
    as_is = tuple(getattr(code, "answer_fields", ())) == ("y", "mask")

    def decode(y, mask, order, noise):
        if as_is and noise is None:
            return code.decode_answers(Answers(y, mask, order))
        noise = None if noise is None else jnp.asarray(noise)
        answers = Answers(*on_device(y, mask, order))
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
    """``'base' x 6, 'parity' x 2``: how many workers have each role."""
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


def make_round(index, name, code, worker_fn, policy, noise_fn, master, work) -> Stage:
    """A checked round: the code, one function per role, the policy."""
    check_code(name, code)
    roles = _roles_of(name, code)
    fns = _role_functions(name, worker_fn, roles)
    check_noise_fn(name, noise_fn, code)
    policy = check_policy(name, policy, code)
    if master is not None and not callable(master):
        raise TypeError(f"{name}: master_fn must be callable or None, got {master!r}")
    return Stage(index, name, code, fns, roles, policy, noise_fn, master, work)
