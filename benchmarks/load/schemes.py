"""The workload and the layouts of the load benchmark, each at the N it needs.

The workload is a bf16 linear layer F -> F without bias (degree 1, linear: a
Lagrange code decodes from D = K answers, ParM's parity model is the layer
itself). The schemes are the catalogue's (:func:`codedjax.catalogue`), served as
layouts of the M workers: ``uncoded`` as M shards of one query, ``replication
c=...`` as M // c shards of (K = 1, M = c), the catalogue's replication at (K, M)
as one group (``replication K-group``) or answered per query, the coded schemes
on all M workers at the smallest N whose median decoded error meets the accuracy
target (:func:`runkit.stats.accuracy_target`, on the masks of the first N
answers of the load's own delay model), ParM where K + K/k = M. A coded layout
that meets the target at no N is kept with a reason and not swept.
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
from runkit import max_rel_err, percentile

from .config import LoadConfig

__all__ = ["Layout", "baseline_errors", "decoded_errors", "layouts", "workload"]

#: the catalogue's schemes the load serves on a group of K queries
CODED = ("replication", "chebyls", "graceful", "bacc", "nercc", "parity")


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


def queries(cfg: LoadConfig, count: int, *, seed: int = 0) -> np.ndarray:
    """``count`` queries [count, F], uniform in [-1, 1] (float32)."""
    rng = np.random.default_rng([cfg.seed, 11, seed])
    return rng.uniform(-1, 1, (count, cfg.num_features)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Layout:
    """One way of serving the stream on M workers: a catalogue scheme as a layout,
    with what was measured of it.

    Attributes:
        name: the row's name.
        scheme: the catalogue's :class:`codedjax.Scheme` (its code is one shard's).
        policy: its wait policy.
        shards: independent copies of the scheme's workers; groups go round robin.
        per_query: answer each query at its first replica (simulator only).
        num_responses: the N of a coded scheme served at a fixed N (else None).
        error: the median decoded error at that N (nan when not measured).
        reason: why it does not meet the accuracy target ("" when it does).
    """

    name: str
    scheme: cj.Scheme
    policy: Any
    shards: int = 1
    per_query: bool = False
    num_responses: int | None = None
    error: float = math.nan
    reason: str = ""

    @property
    def code(self) -> Any:
        return self.scheme.code

    @property
    def family(self) -> str:
        """The row's family: uncoded, replication or coded."""
        fam = self.scheme.family
        return fam if fam in ("uncoded", "replication") else "coded"

    @property
    def workers_used(self) -> int:
        """Workers that serve (the others of the M idle)."""
        return self.scheme.workers * self.shards

    @property
    def applies(self) -> bool:
        return not self.reason


def _answers(cfg: LoadConfig, code: Any, latency) -> tuple:
    """(queries x [B, K, F], the workers' answers y [B, M, F], each worker's rank
    in the answers' arrival order [B, M]) for ``accuracy_groups`` groups."""
    k, m, b = cfg.num_inputs, code.num_workers, cfg.accuracy_groups
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    rows = jax.vmap(code.encode)(jnp.asarray(x))
    y = jax.vmap(jax.vmap(workload(cfg.num_features, cfg.seed).fn))(rows)
    delays, _ = Injector(latency=latency, seed=cfg.seed + 3).plan(np.arange(b), m)
    order = np.argsort(delays, axis=1, kind="stable")
    return x, y, np.argsort(order, axis=1)


def _median_error(cfg: LoadConfig, code: Any, x, y, masks) -> float:
    """The median decoded error with ``masks`` [B, M] (inf where not ok)."""
    res = jax.device_get(code.decode_batched(y, jnp.asarray(masks)))
    truth = workload(cfg.num_features, cfg.seed).truth(x)
    err = max_rel_err(np.asarray(res.value), truth)
    err[~np.asarray(res.ok)] = np.inf
    return percentile(err, 50)


def baseline_errors(cfg: LoadConfig) -> np.ndarray:
    """The decoded errors of an uncoded bf16 worker, per group of K."""
    k, b = cfg.num_inputs, cfg.accuracy_groups
    x = queries(cfg, b * k, seed=1).reshape(b, k, -1)
    wl = workload(cfg.num_features, cfg.seed)
    y = np.asarray(jax.vmap(jax.vmap(wl.fn))(jnp.asarray(x)), np.float32)
    return max_rel_err(y, wl.truth(x))


def decoded_errors(
    cfg: LoadConfig, code: Any, latency, ns, *, stop_below: float | None = None
) -> dict[int, float]:
    """{N: median decoded error} with the masks of the first N answers (in the
    order of ``latency``'s draws), for N in ``ns`` in order; with ``stop_below``,
    stops at the first N whose error is at most that."""
    x, y, rank = _answers(cfg, code, latency)
    out = {}
    for n in ns:
        out[int(n)] = _median_error(cfg, code, x, y, rank < n)
        if stop_below is not None and out[int(n)] <= stop_below:
            break
    return out


def _first_decodable_error(cfg: LoadConfig, code: Any, latency) -> float:
    """The median decoded error at the FirstDecodable decision (the shortest
    prefix of the arrival order that ``may_decode``)."""
    x, y, rank = _answers(cfg, code, latency)
    prefixes = rank[:, None, :] < np.arange(1, code.num_workers + 1)[None, :, None]
    n = np.asarray(code.may_decode(prefixes), bool).argmax(axis=1) + 1
    return _median_error(cfg, code, x, y, rank < n[:, None])


def _too_far(err: float, target: float, where: str = "") -> str:
    return f"median error {err:.3g}{where} is above the target {target:.3g}"


def _coded(cfg: LoadConfig, s: cj.Scheme, latency, target: float) -> Layout:
    """A fixed-N scheme at the smallest N whose median error meets the target."""
    ns = range(s.min_responses, s.code.num_workers + 1)
    errs = decoded_errors(cfg, s.code, latency, ns, stop_below=target)
    good = [n for n, e in errs.items() if e <= target]
    if good:
        n = min(good)
        return Layout(f"{s.name} N={n}", s, FixedN(n), num_responses=n,
                      error=errs[n])  # fmt: skip
    n = min(errs, key=errs.get)
    why = _too_far(errs[n], target, f" at its best N = {n}")
    return Layout(s.name, s, FixedN(n), num_responses=n, error=errs[n], reason=why)


@functools.cache
def _nercc_smoothing(cfg: LoadConfig, m: int) -> tuple[float, float]:
    """NeRCC's (encoder, decoder) smoothing, tuned once per (K, M) on validation
    groups."""
    k = cfg.num_inputs
    x = jnp.asarray(queries(cfg, 32 * k, seed=2).reshape(32, k, -1))
    fn = jax.vmap(workload(cfg.num_features, cfg.seed).fn)
    tuned = cj.tune_nercc(jax.random.key(cfg.seed), lambda v: fn(v), x,
                          num_workers=m, num_responses=max(2, (k + m) // 2),
                          num_masks=32)  # fmt: skip
    return (tuned.encoder_smoothing, tuned.decoder_smoothing)


def layouts(cfg: LoadConfig, m: int, latency, target: float) -> list[Layout]:
    """Every layout at M workers (K = ``cfg.num_inputs``), in report order."""
    k = cfg.num_inputs
    wl = workload(cfg.num_features, cfg.seed)
    (one,) = cj.catalogue(wl, 1, 1, names=("uncoded",))
    out = [Layout("uncoded", one, FixedN(one.code.threshold), shards=m)]
    for c in cfg.replication:
        if c >= 2 and m // c >= 1:
            (rep,) = cj.catalogue(wl, 1, c, names=("replication",))
            out.append(Layout(f"replication c={c}", rep, FirstDecodable(),
                              shards=m // c))  # fmt: skip
    cat = cj.catalogue(wl, k, m, names=CODED,
                       nercc_smoothing=_nercc_smoothing(cfg, m))  # fmt: skip
    for s in cat:
        if s.family == "replication":
            # the codes' grouping: worker i -> query i mod K (the M - K spare
            # workers replicate as many queries)
            out += [Layout("replication K-group", s, FirstDecodable()),
                    Layout("replication K-group, per query", s, FirstDecodable(),
                           per_query=True)]  # fmt: skip
        elif s.family == "parity":
            if s.applies and s.workers == m:  # ParM on all M workers
                err = _first_decodable_error(cfg, s.code, latency)
                why = "" if err <= target else _too_far(err, target)
                out.append(Layout(s.name, s, FirstDecodable(), error=err,
                                  reason=why))  # fmt: skip
        elif s.applies:
            out.append(_coded(cfg, s, latency, target))
        else:
            out.append(Layout(s.name, s, None, reason=s.reason))
    return out
