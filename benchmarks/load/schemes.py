"""The workload and the schemes of the load benchmark, each at the N it needs.

The workload is a linear layer in bf16 (a matrix product F -> F): degree 1, so a
Lagrange code decodes from D = K answers and applies from M = K + 1 workers. The
accuracy target is the regimes' one: a scheme's decoded error at most
``error_factor`` times an uncoded bf16 worker's, at the median (max |value - f(x)|
/ max |f(x)| per group of K queries, float64 truth), on the masks of the first N
answers of the load's own delay model. Each coded scheme is served at the smallest
N that meets it; a scheme that meets it at no N is kept with a reason (``applies``
False) and not swept.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import FirstDecodable, FixedN, Injector
from runkit import max_rel_err

from .config import LoadConfig

__all__ = ["Scheme", "baseline_error", "decoded_errors", "schemes", "worker"]


@functools.cache
def _weights(num_features: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 7])
    return (rng.standard_normal((num_features, num_features)) / 4).astype(np.float32)


def worker(cfg: LoadConfig):
    """The bf16 worker: v @ W on one coded row (one function per config)."""
    return _worker(cfg.num_features, cfg.seed)


@functools.cache
def _worker(num_features: int, seed: int):
    w = jnp.asarray(_weights(num_features, seed), jnp.bfloat16)

    def fn(v):
        return v.astype(jnp.bfloat16) @ w

    return fn


def truth(cfg: LoadConfig, x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64) @ _weights(cfg.num_features, cfg.seed)


def queries(cfg: LoadConfig, count: int, *, seed: int = 0) -> np.ndarray:
    """``count`` queries [count, F], uniform in [-1, 1] (float32)."""
    rng = np.random.default_rng([cfg.seed, 11, seed])
    return rng.uniform(-1, 1, (count, cfg.num_features)).astype(np.float32)


def _rel_err(value: np.ndarray, x: np.ndarray, cfg: LoadConfig) -> np.ndarray:
    return max_rel_err(value, truth(cfg, x))


def baseline_error(cfg: LoadConfig) -> float:
    """The median decoded error of an uncoded bf16 worker (per group of K)."""
    k, b = cfg.num_inputs, cfg.accuracy_groups
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    y = np.asarray(jax.vmap(jax.vmap(worker(cfg)))(jnp.asarray(x)), np.float32)
    return float(np.median(_rel_err(y, x, cfg)))


@dataclasses.dataclass(frozen=True)
class Scheme:
    """One way of serving the stream on M workers.

    Attributes:
        name: the row's name.
        family: "uncoded", "replication" or "coded".
        code: the code of one group (a shard's, when ``shards`` > 1).
        policy: its wait policy.
        shards: independent copies of the code's workers; groups go round robin.
        per_query: answer each query at its first replica (simulator only).
        workers_used: workers that serve (the others of the M idle).
        num_responses: N for a coded scheme (None otherwise).
        error: the median decoded error at that N (nan when not measured).
        applies: meets the accuracy target.
        reason: why not, when it does not.
    """

    name: str
    family: str
    code: Any
    policy: Any
    shards: int = 1
    per_query: bool = False
    workers_used: int = 0
    num_responses: int | None = None
    error: float = math.nan
    applies: bool = True
    reason: str = ""


def _first_arrivals(cfg: LoadConfig, latency, m: int, b: int) -> np.ndarray:
    """int [B, M] the worker order of B requests' answers under ``latency``."""
    inj = Injector(latency=latency, seed=cfg.seed + 3)
    delays, _ = inj.plan(np.arange(b), m)
    return np.argsort(delays, axis=1, kind="stable")


def decoded_errors(
    cfg: LoadConfig, code: Any, latency, ns, *, stop_below: float | None = None
) -> dict[int, float]:
    """{N: median decoded error} with the masks of the first N answers (in the
    order of ``latency``'s draws), for N in ``ns`` in order; with ``stop_below``,
    stops at the first N whose error is at most that."""
    k, m, b = cfg.num_inputs, code.num_workers, cfg.accuracy_groups
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    rows = jax.vmap(code.encode)(jnp.asarray(x))
    y = jax.vmap(jax.vmap(worker(cfg)))(rows)
    rank = np.argsort(_first_arrivals(cfg, latency, m, b), axis=1)
    out = {}
    for n in ns:
        masks = jnp.asarray(rank < n)
        res = jax.device_get(code.decode_batched(y, masks))
        err = _rel_err(np.asarray(res.value), x, cfg)
        err[~np.asarray(res.ok)] = np.inf
        out[int(n)] = float(np.median(err))
        if stop_below is not None and out[int(n)] <= stop_below:
            break
    return out


def _coded(cfg, name, code, latency, target, ns=None) -> Scheme:
    """The scheme at the smallest N whose median error meets the target."""
    m = code.num_workers
    ns = range(max(code.threshold, 1), m + 1) if ns is None else ns
    errs = decoded_errors(cfg, code, latency, ns, stop_below=target)
    good = [n for n, e in errs.items() if e <= target]
    if good:
        n = min(good)
        return Scheme(f"{name} N={n}", "coded", code, FixedN(n), workers_used=m,
                      num_responses=n, error=errs[n])  # fmt: skip
    n = min(errs, key=errs.get)
    return Scheme(name, "coded", code, FixedN(n), workers_used=m, num_responses=n,
                  error=errs[n], applies=False,
                  reason=f"median error {errs[n]:.3g} at its best N = {n} is above "
                  f"the target {target:.3g}")  # fmt: skip


@functools.cache
def _nercc(cfg: LoadConfig, m: int) -> Any:
    """NeRCC with its smoothing tuned once per (K, M) on validation groups."""
    k = cfg.num_inputs
    x = jnp.asarray(queries(cfg, 32 * k, seed=2).reshape(32, k, -1))
    fn = jax.vmap(worker(cfg))
    tuned = cj.tune_nercc(jax.random.key(cfg.seed), lambda v: fn(v), x,
                          num_workers=m, num_responses=max(2, (k + m) // 2),
                          num_masks=32)  # fmt: skip
    pair = (tuned.encoder_smoothing, tuned.decoder_smoothing)
    return cj.nercc_code(num_inputs=k, num_workers=m, smoothing=pair)


def _first_decodable_error(cfg: LoadConfig, code: Any, latency) -> float:
    """The median decoded error at the FirstDecodable decision (the shortest
    prefix of the arrival order that ``may_decode``)."""
    k, m, b = cfg.num_inputs, code.num_workers, cfg.accuracy_groups
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    rows = jax.vmap(code.encode)(jnp.asarray(x))
    y = jax.vmap(jax.vmap(worker(cfg)))(rows)
    order = _first_arrivals(cfg, latency, m, b)
    rank = np.argsort(order, axis=1)
    prefixes = rank[:, None, :] < np.arange(1, m + 1)[None, :, None]  # [B, n, M]
    can = np.asarray(code.may_decode(prefixes), bool)
    n = can.argmax(axis=1) + 1
    masks = jnp.asarray(rank < n[:, None])
    res = jax.device_get(code.decode_batched(y, masks))
    err = _rel_err(np.asarray(res.value), x, cfg)
    err[~np.asarray(res.ok)] = np.inf
    return float(np.median(err))


def _parity(cfg: LoadConfig, m: int, latency, target: float) -> list[Scheme]:
    """ParM's parity code where M = K + K/k (k >= 2), with an exact parity model:
    the workload is linear without a bias, so the base model is its own parity
    model (``parity_error=0``)."""
    k = cfg.num_inputs
    out = []
    for g in range(2, k + 1):
        if k % g or k + k // g != m:
            continue
        code = cj.parity_code(num_inputs=k, group=g, parity_error=0.0)
        err = _first_decodable_error(cfg, code, latency)
        ok = err <= target
        out.append(Scheme(f"parity k={g}", "coded", code, FirstDecodable(),
                          workers_used=m, error=err, applies=ok,
                          reason="" if ok else f"median error {err:.3g} is above "
                          f"the target {target:.3g}"))  # fmt: skip
    return out


def schemes(cfg: LoadConfig, m: int, latency, target: float) -> list[Scheme]:
    """Every scheme at M workers (K = ``cfg.num_inputs``), in report order."""
    k = cfg.num_inputs
    out = [
        Scheme("uncoded", "uncoded", cj.uncoded_code(num_inputs=1), FixedN(1),
               shards=m, workers_used=m),
    ]  # fmt: skip
    for c in cfg.replication:
        if m // c < 1 or c < 2:
            continue
        out.append(
            Scheme(
                f"replication c={c}",
                "replication",
                cj.replication_code(num_inputs=1, num_workers=c),
                FirstDecodable(),
                shards=m // c,
                workers_used=c * (m // c),
            )  # fmt: skip
        )
    # the codes' grouping: K queries on the M workers, worker i -> query i mod K
    # (the M - K spare workers replicate as many queries)
    rep = cj.replication_code(num_inputs=k, num_workers=m)
    out.append(Scheme("replication K-group", "replication", rep, FirstDecodable(),
                      workers_used=m))  # fmt: skip
    out.append(Scheme("replication K-group, per query", "replication", rep,
                      FirstDecodable(), per_query=True, workers_used=m))  # fmt: skip
    cheb = cj.lagrange_code(num_inputs=k, num_workers=m, degree=1)
    out.append(_coded(cfg, "chebyls", cheb, latency, target))
    grace = cj.lagrange_code(num_inputs=k, num_workers=m, degree=1,
                             decoder="graceful", worker_dtype=jnp.bfloat16)  # fmt: skip
    out.append(_coded(cfg, "graceful", grace, latency, target))
    out.append(_coded(cfg, "bacc", cj.bacc_code(num_inputs=k, num_workers=m),
                      latency, target))  # fmt: skip
    out.append(_coded(cfg, "nercc", _nercc(cfg, m), latency, target,
                      ns=range(2, m + 1)))  # fmt: skip
    out += _parity(cfg, m, latency, target)
    return out
