"""The warm-up of a server's first request: what every round's functions
return, compiled ahead of the timing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._code import BASE_ROLE
from ._arguments import check_round_input, noise_levels
from ._backends import BackendBase
from ._roles import Stage


def warm_up(
    stages: list[Stage],
    cluster: BackendBase,
    x: jax.Array,
    fname: str,
    *,
    rounds: bool,
) -> jax.ShapeDtypeStruct:
    """Compiles encode, every role's function (``cluster.warmup``), decode and
    the master's steps of every round on a request like ``x`` [K, ...], before
    the first request is timed; checks that every role answers the base
    role's shape and dtype, and sets each stage's ``out``.

    Args:
        stages: the rounds, in order.
        cluster: the started backend.
        x: the first request (checked).
        fname: the caller, for messages.
        rounds: requests are pipelines (``cluster.warmup(rows, round=j)``);
            else the plain ``cluster.warmup(rows)`` of a one-shot server.

    Returns:
        What the last round returns (its master's output, or its decoded value).
    """
    x0 = x
    k = int(stages[0].code.num_inputs)
    m = int(stages[0].code.num_workers)
    for st in stages:
        where = st.name
        if st.index > 0:
            x = check_round_input(where, x, k)
        rows = np.asarray(st.code.encode(x))
        row = jax.ShapeDtypeStruct(rows.shape[1:], rows.dtype)
        one = len({id(f) for f in st.fns.values()}) == 1
        outs = {
            role: _worker_output(
                where, "worker_fn" if one else f"worker_fn[{role!r}]", f, row
            )
            for role, f in st.fns.items()
        }
        ref = BASE_ROLE if BASE_ROLE in outs else st.roles[0]
        for role, o in outs.items():
            want = outs[ref]
            if (tuple(o.shape), o.dtype) != (tuple(want.shape), want.dtype):
                raise ValueError(
                    f"{where}: the function of role {role!r} returns {o.dtype} "
                    f"{tuple(o.shape)} on a coded row, the {ref!r} role's "
                    f"returns {want.dtype} {tuple(want.shape)}; every role "
                    f"must return the {ref!r} role's shape and dtype"
                )
        st.out = outs[ref]
        # compiling is what the warm-up is for; a worker that fails when run
        # here fails (and counts as a failed worker) when a request runs it,
        # not here
        with contextlib.suppress(Exception):
            if not rounds:
                cluster.warmup(rows)
            else:
                cluster.warmup(rows, round=st.index)
        y = np.zeros((m,) + tuple(st.out.shape), st.out.dtype)
        noise = noise_levels(fname, st.noise_fn, rows, m)
        res = st.decode(y, np.ones(m, bool), np.arange(m, dtype=np.int32), noise)
        value = jax.block_until_ready(res.value)
        if st.master is not None:
            value = jax.block_until_ready(st.master(value, x, x0))
        x = value
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _describe(out: Any) -> str:
    """What a function returned, for messages: ``float32 (3,)``, ``a tuple of 2
    (float32 (3,), int32 ())``."""
    if isinstance(out, jax.ShapeDtypeStruct):
        return f"{out.dtype} {tuple(out.shape)}"
    if isinstance(out, (tuple, list)):
        inner = ", ".join(_describe(o) for o in out[:4])
        more = ", ..." if len(out) > 4 else ""
        return f"a {type(out).__name__} of {len(out)} ({inner}{more})"
    return f"a {type(out).__name__}"


def _worker_output(where: str, name: str, f: Callable, row) -> jax.ShapeDtypeStruct:
    """What ``f`` returns on a coded row like ``row`` (traced, never run): one
    floating array. A function that raises while traced is tried once more (a
    fault of its first call counts as a failed worker, as it would at any later
    request); one that raises again cannot run on a coded row, a static mistake."""
    for attempt in range(2):
        try:
            out = jax.eval_shape(f, row)
            break
        except Exception as exc:
            if attempt:
                raise ValueError(
                    f"{where}: {name} cannot run on a coded row ({row.dtype} "
                    f"{tuple(row.shape)}): it raised {type(exc).__name__}: {exc}"
                ) from exc
    if not isinstance(out, jax.ShapeDtypeStruct) or not jnp.issubdtype(
        out.dtype, jnp.floating
    ):
        raise TypeError(
            f"{where}: {name} must return one floating array on a coded row "
            f"({row.dtype} {tuple(row.shape)}), e.g. of that shape and dtype; got "
            f"{_describe(out)}"
        )
    return out
