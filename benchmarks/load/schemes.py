"""The workload of the load benchmark, its candidate layouts and their accuracy.

The workload is a bf16 linear layer F -> F without bias (degree 1, linear: a
Lagrange code decodes from D = K' answers, ParM's parity model is the layer
itself, the circle code packs two real queries into a complex one). The layouts
are the library's (:func:`codedjax.layouts`: G = M // M' groups of a scheme on
K' queries and M' workers), chosen by :meth:`LoadConfig.group_workers`.

A layout's accuracy (:func:`accuracy`): each query is answered as the serving
model answers it, by its own worker (a systematic worker or a replica, its
answer as it is) or by the decode of the answers in hand: the first N answers
of the group's workers in the order of the load's own delay model (a fixed-N
policy), or the first answers the code may decode from (FirstDecodable). The
error of the queries a decode answers is what the accuracy target bounds
(their median against ``error_factor`` times an uncoded bf16 worker's, per
query); a layout whose own workers answer every query is as accurate as an
uncoded worker.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import FirstDecodable, FixedN, Injector
from runkit import percentile

from .config import LoadConfig

__all__ = ["accuracy", "baseline_errors", "candidates", "family", "policy",
           "queries", "query_errors", "workload"]  # fmt: skip

#: the families served without a decode (their answers are the workers' own)
PLAIN = ("uncoded", "replication")


@functools.cache
def workload(num_features: int, seed: int) -> cj.Workload:
    """The bf16 linear layer ``v @ W`` (``fn``, one coded row) with its float64
    truth; ``params`` is W (float32)."""
    rng = np.random.default_rng([seed, 7])
    w = (rng.standard_normal((num_features, num_features)) / 4).astype(np.float32)
    wb = jnp.asarray(w, jnp.bfloat16)

    def fn(v):
        return v.astype(jnp.bfloat16) @ wb

    def truth(x):
        return np.asarray(x, np.float64) @ w

    return cj.Workload("linear", 1, linear=True, fn=fn, truth=truth, params=w,
                       description=f"a bf16 linear layer {num_features} -> "
                       f"{num_features}, no bias")  # fmt: skip


@functools.cache
def _apply(num_features: int, seed: int):
    """The workload on [B, M', ...] coded rows, jitted once."""
    return jax.jit(jax.vmap(jax.vmap(workload(num_features, seed).fn)))


def queries(cfg: LoadConfig, count: int, *, seed: int = 0) -> np.ndarray:
    """``count`` queries [count, F], uniform in [-1, 1] (float32)."""
    rng = np.random.default_rng([cfg.seed, 11, seed])
    return rng.uniform(-1, 1, (count, cfg.num_features)).astype(np.float32)


def query_errors(value, truth) -> np.ndarray:
    """[..., K] relative errors per query of ``value`` [..., K, F] against
    ``truth``: ``max |value - truth| / max |truth|`` over the features."""
    t = np.asarray(truth, np.float64)
    err = np.abs(np.asarray(value, np.float64) - t).max(axis=-1)
    return err / np.abs(t).max(axis=-1)


def baseline_errors(cfg: LoadConfig) -> np.ndarray:
    """An uncoded bf16 worker's errors, one per query (``accuracy_groups``
    groups of the largest K')."""
    x = queries(cfg, cfg.accuracy_groups * max(cfg.group_inputs), seed=1)
    wl = workload(cfg.num_features, cfg.seed)
    y = np.asarray(jax.jit(jax.vmap(wl.fn))(jnp.asarray(x)), np.float32)
    return query_errors(y, wl.truth(x))


def family(layout: cj.Layout) -> str:
    """The layout's family in the report: the catalogue's family, with
    ``" systematic"`` for a systematic variant (``"lagrange systematic"``)."""
    s = layout.scheme
    return f"{s.family} systematic" if s.name.endswith(" systematic") else s.family


def candidates(cfg: LoadConfig, m: int) -> tuple[cj.Layout, ...]:
    """The layouts searched on M = ``m`` workers (see :class:`LoadConfig`), in
    the order of :func:`codedjax.layouts`."""
    wl = workload(cfg.num_features, cfg.seed)
    out: list[cj.Layout] = []
    for k in sorted(cfg.group_inputs):
        if k > m:
            continue
        mps = cfg.group_workers(k, m)
        if k == 1:
            out += cj.layouts(wl, m, group_inputs=(1,), group_workers=(1, *mps),
                              names=PLAIN)  # fmt: skip
        elif mps:
            out += [
                lay
                for lay in cj.layouts(
                    wl, m, group_inputs=(k,), group_workers=mps, systematic=True
                )  # fmt: skip
                if lay.scheme.family != "uncoded"
            ]
    return tuple(out)


def policy(layout: cj.Layout, num_responses: int | None = None) -> Any:
    """The layout's wait policy: ``FirstDecodable`` (kind ``"first"``),
    ``FixedN(threshold)`` (``"threshold"``) or ``FixedN(num_responses)``
    (``"fixed"``; default its fewest, ``min_responses``)."""
    s = layout.scheme
    if s.policy == "first":
        return FirstDecodable()
    if s.policy == "threshold":
        return FixedN(int(layout.code.threshold))
    n = s.min_responses if num_responses is None else num_responses
    return FixedN(max(1, int(n)))


def _answers(cfg: LoadConfig, layout: cj.Layout, latency) -> tuple:
    """(queries x [B, K', F], the answers y [B, M', ...], each worker's rank in
    its group's arrival order [B, M']) for ``accuracy_groups`` groups; the
    delays are group 0's of the layout (its workers ``layout.placement[0]`` of
    the cluster, as :func:`codedjax.serving.simulate_load` places them)."""
    code, b = layout.code, cfg.accuracy_groups
    k = layout.group_inputs
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    rows = jax.vmap(code.encode)(jnp.asarray(x))
    y = np.asarray(_apply(cfg.num_features, cfg.seed)(rows), np.float32)
    inj = Injector(latency=latency, seed=cfg.seed + 3)
    delays, _ = inj.plan(np.arange(b), layout.num_workers)
    order = np.argsort(delays[:, layout.placement[0]], axis=1, kind="stable")
    return x, y, np.argsort(order, axis=1)


def _served(cfg: LoadConfig, layout: cj.Layout, x, y, masks) -> dict:
    """The served answers' errors with responders ``masks`` [B, M']: the
    median of the decoded queries' (those without an own answer; inf where the
    decode fails), of every query's, and the decoded fraction."""
    code = layout.code
    vals, oks = [], []
    for yy, mk in zip(y, masks, strict=True):  # one mask at a time: a smaller
        res = code.decode(yy, mk)  # program to compile than the batched one
        vals.append(np.asarray(res.value))
        oks.append(bool(res.ok))
    err = query_errors(np.stack(vals), workload(cfg.num_features, cfg.seed).truth(x))
    err[~np.asarray(oks)] = np.inf
    own = code.own_workers
    mine = (
        np.zeros(err.shape, bool)
        if own is None
        else (masks[:, None, :] & np.asarray(own)[None]).any(axis=-1)
    )
    decoded = err[~mine]
    return {
        "error": percentile(decoded if decoded.size else err, 50),
        "served_error": percentile(err, 50),
        "decoded_fraction": float(decoded.size / err.size),
    }


def accuracy(
    cfg: LoadConfig, layout: cj.Layout, latency, target: float, base: float
) -> dict:
    """The layout's accuracy at the N it needs (see the module).

    Args:
        cfg: the run's config.
        layout: the layout.
        latency: the load's delay model (the order of the answers).
        target: the accuracy target (a median error).
        base: an uncoded worker's median error (the plain families' error).

    Returns:
        ``{"num_responses", "error", "served_error", "decoded_fraction",
        "errors", "reason"}``: the smallest N (None for FirstDecodable and the
        plain families) whose decoded queries meet ``target``, their median
        error, {N: error} for each N tried, and "" or why none does (an
        approximate scheme that misses it with every answer is not tried at
        fewer: more answers bring its decode nearer, if not always).
    """
    s = layout.scheme
    if s.family in PLAIN:
        return {"num_responses": None, "error": base, "served_error": base,
                "decoded_fraction": 0.0, "errors": {}, "reason": ""}  # fmt: skip
    x, y, rank = _answers(cfg, layout, latency)
    if s.policy == "first":
        mp = layout.group_workers
        prefixes = rank[:, None, :] < np.arange(1, mp + 1)[None, :, None]
        n = np.asarray(layout.code.may_decode(prefixes), bool).argmax(axis=1) + 1
        got = _served(cfg, layout, x, y, rank < n[:, None])
        why = (
            ""
            if got["error"] <= target
            else (
                f"median decoded error {got['error']:.3g} above the target {target:.3g}"
            )
        )
        return {"num_responses": None, **got, "errors": {}, "reason": why}
    lo = policy(layout).num_responses
    ns = [lo] if s.policy == "threshold" else list(range(lo, layout.group_workers + 1))
    errors, best = {}, None
    if not s.exact and len(ns) > 1:  # an approximation that misses the target
        top = ns[-1]  # with every answer misses it with fewer (mostly): skip
        errors[top] = _served(cfg, layout, x, y, rank < top)["error"]
        if errors[top] > target:
            ns = []
    for n in ns:
        got = _served(cfg, layout, x, y, rank < n)
        errors[n] = got["error"]
        if got["error"] <= target:
            best = {"num_responses": n, **got}
            break
    if best is not None:
        return {**best, "errors": errors, "reason": ""}
    n = min(errors, key=errors.get)
    return {"num_responses": None, "error": errors[n], "served_error": np.nan,
            "decoded_fraction": np.nan, "errors": errors,
            "reason": f"median decoded error {errors[n]:.3g} at its best N = {n} "
            f"is above the target {target:.3g}"}  # fmt: skip
