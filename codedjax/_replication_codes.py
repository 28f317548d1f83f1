"""Codes built on replicas: RepApprox, replication and the uncoded baseline.

RepApprox replicates each input on c servers and falls back to an approximation
(Berrut or NeRCC) for an input whose replicas all straggle; replication and uncoded
serving are codes too, because they are the baselines a serving user compares
against.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._code import Code, acc_of
from ._dtypes import check_int, errors_named
from ._repapprox import repapprox_decode, repapprox_encode, repapprox_layout
from ._result import DecodeResult, Status, finish, predicted_error


@functools.lru_cache(maxsize=64)
def _layout(k: int, c: int, m: int):
    return repapprox_layout(k, c, m)


@dataclasses.dataclass(frozen=True)
class RepApproxCode(Code):
    """Replication with an approximate fallback (see :func:`repapprox_code`)."""

    replication: int = 1
    fallback: str = "berrut"
    smoothing: float = 0.0

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
    def layout(self):
        """The :class:`RepApproxLayout` (which server computes what)."""
        return _layout(self.num_inputs, self.replication, self.num_workers)

    def _encode(self, x):
        return repapprox_encode(x, self.layout)

    def _decode(self, y, mask):
        r = repapprox_decode(
            y, mask, self.layout, fallback=self.fallback, smoothing=self.smoothing
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
    return RepApproxCode(k, m, replication=c, fallback=fallback, smoothing=lam)


def _first_replica(sel: jax.Array, task: np.ndarray, k: int) -> jax.Array:
    """One-hot [K, M]: for each task the lowest-index selected worker computing it."""
    onehot = (task[None, :] == np.arange(k)[:, None]) & sel[None, :]
    first = jnp.cumsum(onehot, axis=1) == 1
    return onehot & first


@dataclasses.dataclass(frozen=True)
class ReplicationCode(Code):
    """Plain replication (see :func:`replication_code`)."""

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
    def task(self) -> np.ndarray:
        """int [M]: the input each worker computes (i mod K)."""
        return np.arange(self.num_workers) % self.num_inputs

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """True where every input has a responding replica (the decode is then
        ``ok`` unless a replica's answer is not finite)."""
        mask = np.asarray(mask, bool)
        covered = np.stack(
            [mask[..., self.task == t].any(axis=-1) for t in range(self.num_inputs)],
            axis=-1,
        )
        return covered.all(axis=-1)

    def decodable_from(self, times: ArrayLike) -> np.ndarray:
        """The latest of each input's first replica to arrive (inf when an
        input's replicas never do): :meth:`Code.decodable_from` in closed form."""
        t = np.asarray(times, np.float64)
        perm = np.argsort(self.task, kind="stable")
        cuts = np.searchsorted(self.task[perm], np.arange(self.num_inputs))
        return np.minimum.reduceat(t[..., perm], cuts, axis=-1).max(axis=-1)

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
