"""Codes built on replicas: RepApprox, replication and the uncoded baseline.

RepApprox replicates each input on c servers and falls back to an approximation
(Berrut or NeRCC) for an input whose replicas all straggle; replication and uncoded
serving are codes too, because they are the baselines a serving user compares
against. All three are systematic: a query's replica is sent the query itself and
its answer is returned as it is, and each query decodes on its own
(``decodable_queries``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_int, errors_named
from ._code import Code, acc_of
from ._repapprox_kernels import (
    repapprox_decode_unchecked,
    repapprox_encode_unchecked,
    repapprox_layout,
)
from ._result import DecodeResult, Status, finish, predicted_error


@functools.lru_cache(maxsize=64)
def _layout(k: int, c: int, m: int):
    return repapprox_layout(k, c, m)


@dataclasses.dataclass(frozen=True)
class RepApproxCode(Code):
    """Replication with an approximate fallback (see :func:`repapprox_code`).

    Systematic: query k's replicas are sent the query itself, and a query with a
    responding replica is that replica's answer (``systematic`` True).
    """

    replication: int = 1
    fallback: str = "berrut"
    smoothing: float = 0.0

    def __post_init__(self):
        # the settings are checked here, once per code (the kernels' unchecked
        # entries rely on them)
        _check_settings(
            type(self).__name__,
            self.num_inputs,
            self.num_workers,
            self.replication,
            self.fallback,
            self.smoothing,
        )

    @property
    def name(self) -> str:
        return "repapprox" if self.fallback == "berrut" else "repapprox-nercc"

    @property
    def threshold(self) -> int:
        return 1 if self.fallback == "berrut" else 2

    @property
    def exact(self) -> bool:
        return True

    @property
    def systematic(self) -> bool:
        """True: a query's replicas answer it as it is."""
        return True

    @property
    def systematic_workers(self) -> tuple[int, ...]:
        """Query k's first replica, worker k c."""
        return tuple(range(0, self.num_inputs * self.replication, self.replication))

    @property
    def layout(self):
        """The :class:`RepApproxLayout` (which server computes what)."""
        return _layout(self.num_inputs, self.replication, self.num_workers)

    @property
    def own_workers(self) -> np.ndarray:
        """bool [K, M]: the workers at query k's data point (its replicas, and
        an extra server placed there): their answer is query k's as it is."""
        nodes = np.asarray(self.layout.nodes, np.float64)
        beta = np.asarray(self.layout.beta, np.float64)
        return nodes[None, :] == beta[:, None]

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """Query k where a worker at its data point answered (a replica, or an
        extra server whose point is beta_k), or where the fallback decodes: at
        least one distinct responding point (Berrut), two (NeRCC)."""
        mask = np.asarray(mask, bool)
        nodes = np.asarray(self.layout.nodes, np.float64)
        at = self.own_workers  # [K, M]: worker i sits at beta_k
        hit = np.stack([mask[..., at[q]].any(axis=-1) for q in range(len(at))], -1)
        _, group = np.unique(nodes, return_inverse=True)
        distinct = sum(
            mask[..., group == g].any(axis=-1) for g in range(group.max() + 1)
        )
        enough = np.asarray(distinct) >= (1 if self.fallback == "berrut" else 2)
        return hit | enough[..., None]

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """Every query has a responding replica, or the fallback has enough
        distinct points (:meth:`decodable_queries` for all K)."""
        return self.decodable_queries(mask).all(axis=-1)

    def _encode(self, x):
        return repapprox_encode_unchecked(x, self.layout, acc_of(x))

    def _decode(self, y, mask):
        r = repapprox_decode_unchecked(
            y, mask, self.layout, self.fallback, self.smoothing, acc_of(y)
        )
        return DecodeResult(*(getattr(r, f) for f in DecodeResult._fields))


def repapprox_code(
    *,
    num_inputs: int,
    num_workers: int,
    replication: int,
    fallback: str = "berrut",
    smoothing: float = 0.0,
) -> RepApproxCode:
    """RepApprox: each input on c servers, an approximation where a group is lost.

    Task k's replicas are servers k c .. k c + c - 1 (placed at the data point
    beta_k), the E = M - K c extra servers are coded (second-kind points). A task with
    a responding replica is returned exactly; a lost one by the Berrut (or NeRCC)
    interpolant over the responding points (:func:`repapprox_decode`).

    Args:
        num_inputs: K >= 1. num_workers: M >= K c. replication: c >= 1.
        fallback: "berrut" or "nercc". smoothing: NeRCC decoder weight (>= 0).

    Examples:
        >>> import codedjax as cj
        >>> code = cj.repapprox_code(num_inputs=8, num_workers=40, replication=4)
        >>> code.layout.num_extra, code.exact
        (8, True)
    """
    fname = "repapprox_code"
    k, m, c, lam = _check_settings(
        fname, num_inputs, num_workers, replication, fallback, smoothing
    )
    return RepApproxCode(k, m, replication=c, fallback=fallback, smoothing=lam)


def _check_settings(fname, num_inputs, num_workers, replication, fallback, smoothing):
    """(K, M, c, smoothing) of a RepApprox code, checked (errors name ``fname``)."""
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    c = check_int(fname, "replication", replication, minimum=1)
    if fallback not in ("berrut", "nercc"):
        raise ValueError(
            f"{fname}: fallback must be 'berrut' or 'nercc', got {fallback!r}"
        )
    try:
        lam = float(smoothing)
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: smoothing must be a number >= 0, got {smoothing!r}"
        ) from None
    if not (np.isfinite(lam) and lam >= 0):
        raise ValueError(
            f"{fname}: smoothing must be finite and >= 0, got {smoothing!r}"
        )
    with errors_named(fname):  # K c <= M, as the layout checks it
        _layout(k, c, m)
    return k, m, c, lam


def _first_replica(sel: jax.Array, task: np.ndarray, k: int) -> jax.Array:
    """One-hot [K, M]: for each task the lowest-index selected worker computing it."""
    onehot = (task[None, :] == np.arange(k)[:, None]) & sel[None, :]
    first = jnp.cumsum(onehot, axis=1) == 1
    return onehot & first


@dataclasses.dataclass(frozen=True)
class ReplicationCode(Code):
    """Plain replication (see :func:`replication_code`); systematic: each query
    decodes as soon as one of its replicas answered."""

    @property
    def name(self) -> str:
        return "replication" if self.num_workers > self.num_inputs else "uncoded"

    @property
    def threshold(self) -> int:
        return self.num_inputs

    @property
    def exact(self) -> bool:
        return True

    @property
    def systematic(self) -> bool:
        """True: every worker is sent a query itself."""
        return True

    @property
    def systematic_workers(self) -> tuple[int, ...]:
        """Query k's first replica, worker k."""
        return tuple(range(self.num_inputs))

    @property
    def task(self) -> np.ndarray:
        """int [M]: the input each worker computes (i mod K)."""
        return np.arange(self.num_workers) % self.num_inputs

    @property
    def own_workers(self) -> np.ndarray:
        """bool [K, M]: query k's replicas (``task == k``)."""
        return self.task[None, :] == np.arange(self.num_inputs)[:, None]

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """Query k where one of its replicas answered."""
        mask = np.asarray(mask, bool)
        return np.stack(
            [mask[..., self.task == t].any(axis=-1) for t in range(self.num_inputs)],
            axis=-1,
        )

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """True where every input has a responding replica (the decode is then
        ``ok`` unless a replica's answer is not finite)."""
        return self.decodable_queries(mask).all(axis=-1)

    def decodable_from(self, times: ArrayLike) -> np.ndarray:
        """The latest of each input's first replica to arrive (inf when an
        input's replicas never do): :meth:`Code.decodable_from` in closed form."""
        return self.decodable_from_per_query(times).max(axis=-1)

    def decodable_from_per_query(self, times: ArrayLike) -> np.ndarray:
        """The first of query k's replicas to arrive, [..., K] (inf when none
        does): :meth:`Code.decodable_from_per_query` in closed form."""
        t = np.asarray(times, np.float64)
        perm = np.argsort(self.task, kind="stable")
        cuts = np.searchsorted(self.task[perm], np.arange(self.num_inputs))
        return np.minimum.reduceat(t[..., perm], cuts, axis=-1)

    def _encode(self, x):
        return x[self.task]

    def _decode(self, y, mask):
        acc = acc_of(y)
        flat = y.reshape(y.shape[0], -1)
        fin = jnp.all(jnp.isfinite(flat), axis=1)
        sel = mask & fin
        pick = _first_replica(sel, self.task, self.num_inputs)
        have = jnp.any(pick, axis=1)
        n_used = jnp.sum(have).astype(jnp.int32)
        ok = jnp.all(have)
        safe = jnp.where(sel[:, None], flat, 0).astype(acc)
        # a gather, not a product: the answer is copied bit for bit (a subnormal
        # one included, which any arithmetic would flush to zero)
        first = jnp.argmax(pick, axis=1)
        value = jnp.where(have[:, None], safe[first], jnp.zeros((), acc))
        value = value.reshape((self.num_inputs,) + y.shape[1:])
        status = jnp.where(
            ok, int(Status.SUCCESS), int(Status.TOO_FEW_RESPONSES)
        ).astype(jnp.int32)
        cond = jnp.where(ok, 1.0, jnp.inf).astype(acc)
        # a copied response carries the worker's own rounding and no decoder's (a
        # gather): the predicted error of value = P y, P the one-hot copies
        used = jnp.any(pick, axis=0)
        error = predicted_error(pick.astype(acc), safe, used, y.dtype, solve_factor=0.0)
        return finish(value, cond, n_used, status, error)


def replication_code(*, num_inputs: int, num_workers: int) -> ReplicationCode:
    """Replication: worker i computes input i mod K; decoding takes any replica.

    The baseline a coded scheme must beat with the same workers: exact for any
    function, ``ok`` once every input has a responding replica (so ``threshold`` is
    K, though K responses need not suffice). A replica's answer is copied bit for
    bit; ``error`` predicts the workers' own rounding (docs/decoding.md: the model
    of every decoder, with gain 1 and no rounding of the decoder's own).

    Layout: the replicas of input k are workers k, k + K, k + 2K, ... (K apart), so
    racks of up to K consecutive workers (``RandomSlowdown(..., group_size=g)`` with
    g <= K) never hold two replicas of the same input. With M not a multiple of K,
    inputs 0 .. (M mod K) - 1 have one replica more than the others.

    Args:
        num_inputs: K >= 1. num_workers: M >= K.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> code = cj.replication_code(num_inputs=2, num_workers=5)
        >>> code.encode(jnp.array([[1.0], [2.0]]))[:, 0].tolist()
        [1.0, 2.0, 1.0, 2.0, 1.0]
    """
    k = check_int("replication_code", "num_inputs", num_inputs, minimum=1)
    m = check_int("replication_code", "num_workers", num_workers, minimum=1)
    if m < k:
        raise ValueError(
            f"replication_code: num_workers must be at least num_inputs K={k}, got {m}"
        )
    return ReplicationCode(k, m)


def uncoded_code(*, num_inputs: int) -> ReplicationCode:
    """No coding: M = K workers, worker k computes input k; every one must answer.

    Examples:
        >>> import codedjax as cj
        >>> code = cj.uncoded_code(num_inputs=3)
        >>> code.num_workers, code.threshold, code.name
        (3, 3, 'uncoded')
    """
    k = check_int("uncoded_code", "num_inputs", num_inputs, minimum=1)
    return ReplicationCode(k, k)
