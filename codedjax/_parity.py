"""Learned parity models as a Code (ParM): K queries in groups of k, a parity each.

The K systematic workers compute the base model F on the queries themselves; each of
the K/k parity workers computes a *parity model* F_P on the sum of its group's k
queries, F_P trained so that F_P(x_1 + ... + x_k) approximates F(x_1) + ... + F(x_k).
A missing F(x_j) is decoded as F_P(P) minus the other answers of its group. The code
is the first whose workers run different functions: :attr:`ParityCode.roles` names
them (``"base"``, ``"parity"``) and a server is given one function per role. It is
systematic (worker k is sent query k itself) and each group decodes on its own
(:meth:`ParityCode.decodable_queries`).

References:
    J. Kosaian, K. V. Rashmi and S. Venkataraman, Parity models: erasure-coded
    resilience for prediction serving systems, SOSP 2019 (arXiv:1905.00863).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_int
from ._code import BASE_ROLE, Code, acc_of
from ._dtypes import accumulation_dtype
from ._result import Status, apply_decoding, finish, predicted_error

#: the role of a parity worker (:attr:`ParityCode.roles`)
PARITY_ROLE = "parity"


@dataclasses.dataclass(frozen=True)
class ParityCode(Code):
    """K queries in groups of ``group``, one parity worker per group (see
    :func:`parity_code`).

    Attributes:
        group: k, the queries per group (K is a multiple of k).
        parity_error: the absolute error (max over the outputs) of the parity model,
            |F_P(x_1 + ... + x_k) - (F(x_1) + ... + F(x_k))|, as the user measured it
            on validation data; None when unknown (a reconstruction's ``error`` is
            then its rounding part only, as for BACC and NeRCC), 0.0 for an exact
            parity model (a linear model without bias).
    """

    group: int = 2
    parity_error: float | None = None

    @property
    def name(self) -> str:
        return "parity"

    @property
    def num_groups(self) -> int:
        """K / k, the number of parity workers."""
        return self.num_inputs // self.group

    @property
    def threshold(self) -> int:
        """K: K answers decode when no group has lost two of its k + 1 workers."""
        return self.num_inputs

    @property
    def exact(self) -> bool:
        """True: with every worker the base answers are returned as they are (for
        any function); a reconstruction is as exact as the parity model."""
        return True

    @property
    def roles(self) -> tuple[str, ...]:
        """``("base",) * K + ("parity",) * (K / k)``."""
        return (BASE_ROLE,) * self.num_inputs + (PARITY_ROLE,) * self.num_groups

    @property
    def systematic(self) -> bool:
        """True: the K base workers are sent the queries themselves."""
        return True

    @property
    def systematic_workers(self) -> tuple[int, ...]:
        """Query k's base worker, worker k."""
        return tuple(range(self.num_inputs))

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """True where every group has lost at most one base answer and, if one, its
        parity worker answered (then the decode is ``ok`` unless an answer is not
        finite)."""
        return self.decodable_queries(mask).all(axis=-1)

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """Each group decodes on its own: query j where its base worker answered,
        or where its group lost at most one base answer (j's) and the group's
        parity worker answered."""
        mask = np.asarray(mask, bool)
        k, g = self.group, self.num_groups
        base = mask[..., : self.num_inputs].reshape(mask.shape[:-1] + (g, k))
        lost = k - base.sum(axis=-1)
        rebuilt = (lost == 1) & mask[..., self.num_inputs :]  # [..., G]
        out = base | rebuilt[..., None]
        return out.reshape(mask.shape[:-1] + (self.num_inputs,))

    def decodable_from_per_query(self, times: ArrayLike) -> np.ndarray:
        """Query j's own answer, or the last of its group's parity and other k - 1
        answers, whichever arrives first, [..., K]:
        :meth:`Code.decodable_from_per_query` in closed form."""
        t = np.asarray(times, np.float64)
        k, g = self.group, self.num_groups
        base = t[..., : self.num_inputs].reshape(t.shape[:-1] + (g, k))
        others = np.stack(
            [np.delete(base, j, axis=-1).max(axis=-1) for j in range(k)], axis=-1
        )  # [..., G, k]: the latest of the group's other base answers
        rebuild = np.maximum(others, t[..., self.num_inputs :, None])
        out = np.minimum(base, rebuild)
        return out.reshape(t.shape[:-1] + (self.num_inputs,))

    # --- the code's own plan: the decoding matrix of one mask ------------------------
    def _plan(self, sel: jax.Array, dtype):
        """(A [K, M], group_ok [G], rebuilt [K]) for the usable workers ``sel``."""
        k, g, kk = self.group, self.num_groups, self.num_inputs
        base = sel[:kk].reshape(g, k)
        par = sel[kk:]
        lost = k - jnp.sum(base, axis=1)
        group_ok = (lost == 0) | ((lost == 1) & par)
        rebuilt = (~base & ((lost == 1) & par)[:, None]).reshape(kk)
        member = np.arange(kk) // k  # the group of each query
        # a present base answer: itself; a rebuilt one: parity - the group's others
        same = member[:, None] == member[None, :]  # [K, K]
        eye = np.eye(kk, dtype=bool)
        a_base = jnp.where(
            rebuilt[:, None],
            jnp.where(same & ~eye, -1.0, 0.0),
            jnp.where(eye, 1.0, 0.0),
        )
        onehot_par = member[:, None] == np.arange(g)[None, :]  # [K, G]
        a_par = jnp.where(rebuilt[:, None] & onehot_par, 1.0, 0.0)
        a = jnp.concatenate([a_base, a_par], axis=1).astype(dtype)
        ok = jnp.all(group_ok)
        return jnp.where(ok, a, jnp.zeros_like(a)), ok, rebuilt

    def _encode(self, x):
        acc = acc_of(x)
        xs = x.astype(acc)
        k, g = self.group, self.num_groups
        sums = jnp.sum(xs.reshape((g, k) + xs.shape[1:]), axis=1)
        return jnp.concatenate([xs, sums], axis=0)

    def _decode(self, y, mask):
        acc = acc_of(y)
        flat = y.reshape(y.shape[0], math.prod(y.shape[1:]))
        sel = mask & jnp.all(jnp.isfinite(flat), axis=1)
        a, ok, rebuilt = self._plan(sel, acc)
        # a query's own answer is copied bit for bit (a subnormal one included,
        # which the product would flush to zero)
        k = self.num_inputs
        used = jnp.any(a != 0, axis=0) & sel
        value = apply_decoding(
            a, y, acc, hit=~rebuilt, hit_idx=jnp.arange(k, dtype=jnp.int32), rows=used
        )
        any_rebuilt = ok & jnp.any(rebuilt)
        # max row sum of |A|: 1 for a copied answer, k for a rebuilt one
        cond = jnp.where(
            ok, jnp.max(jnp.sum(jnp.abs(a), axis=1)), jnp.asarray(jnp.inf, acc)
        ).astype(acc)
        # a copied answer is returned bit for bit, with the worker's own rounding
        # (as replication); a rebuilt one carries the rounding of its k + 1
        # answers and the parity model's own error, which only validation data
        # can tell: added when stated, left out otherwise (the rounding part
        # only, finite, as every approximate code reports it: BACC, NeRCC)
        rounding = predicted_error(a, flat, used, y.dtype)
        if not self.parity_error:  # None or 0.0: nothing to add (a prediction in
            error = rounding  # the subnormal range is kept, never flushed by a sum)
        else:  # (a stated error below the normal range counts as the smallest normal)
            model = max(float(self.parity_error), float(jnp.finfo(acc).tiny))
            error = rounding + jnp.where(any_rebuilt, model, jnp.zeros((), acc))
        status = jnp.where(
            ok, int(Status.SUCCESS), int(Status.TOO_FEW_RESPONSES)
        ).astype(jnp.int32)
        n_used = jnp.sum(used).astype(jnp.int32)
        return finish(value, cond, n_used, status, error)

    def _matrix(self, mask, dtype):
        a, _, _ = self._plan(mask, accumulation_dtype(dtype))
        return a


def parity_code(
    *, num_inputs: int, group: int, parity_error: float | None = None
) -> ParityCode:
    """ParM's learned parity code: K queries in groups of k, M = K + K/k workers.

    Worker i < K is sent query i and runs the base model F (role ``"base"``);
    worker K + g is sent the parity query P_g, the sum of group g's k queries
    (queries g k .. g k + k - 1), and runs the parity model F_P (role
    ``"parity"``), trained so that F_P(P_g) approximates the sum of F over the
    group. Serve it with ``Server(code, {"base": F, "parity": F_P})``.

    Decoding: a base answer that arrived is returned as it is; a missing one,
    F(x_j), is F_P(P_g) minus the other k - 1 answers of its group (a linear map of
    the answers: :meth:`~ParityCode.decoding_matrix`, [K, M] over the base answers
    then the parity answers). A group that lost two or more of its k + 1 workers, or
    a base answer and its parity, cannot be decoded: ``ok`` False with status
    ``TOO_FEW_RESPONSES`` and zeros (never NaN). NaN/Inf answers count as missing.

    The result's fields for this code:

    * ``cond``: the max row sum of |A|, the factor by which an error in the answers
      can grow: 1 when every query's own answer arrived, k when a query was
      rebuilt from its group's parity (inf when not ``ok``).
    * ``error``: the library's predicted error of ``value = A y`` (the workers'
      rounding, docs/decoding.md): for copied answers (bit for bit) their own
      rounding; when a query was rebuilt, the rounding of the k + 1 answers it
      combines **plus** ``parity_error``, the parity model's own approximation
      error, which dominates and which rounding cannot predict: state it
      (measured on validation data, e.g. the largest |F_P(P) - sum F(x_j)| seen
      there). Left unstated (None), ``error`` is the rounding part only, finite
      with ``ok``, as for the other approximate codes (BACC, NeRCC:
      ``docs/decoding.md``): it does not bound a rebuilt answer's error, and a
      wait policy's error budget (``Adaptive``) then bounds the rounding only.
      ``parity_error=0.0`` is right only for an exact parity model (for a linear
      model without bias F itself is one).

    Args:
        num_inputs: K >= 2, a multiple of ``group``.
        group: k >= 2, the queries per parity (K = 12 serves k = 2, 3 and 4).
        parity_error: None (unknown) or a finite float >= 0 (see above).

    Examples:
        >>> import codedjax as cj
        >>> code = cj.parity_code(num_inputs=12, group=3)
        >>> code.num_workers, code.threshold, code.roles[-4:]
        (16, 12, ('parity', 'parity', 'parity', 'parity'))

    References:
        J. Kosaian, K. V. Rashmi and S. Venkataraman, Parity models: erasure-coded
        resilience for prediction serving systems, SOSP 2019, arXiv:1905.00863.
    """
    fname = "parity_code"
    k = check_int(fname, "group", group, minimum=2)
    kk = check_int(fname, "num_inputs", num_inputs, minimum=2)
    if kk % k:
        raise ValueError(
            f"{fname}: num_inputs must be a multiple of group={k}, got num_inputs={kk}"
        )
    err = None
    if parity_error is not None:
        try:
            err = float(parity_error)
        except (TypeError, ValueError):
            raise TypeError(
                f"{fname}: parity_error must be None or a number >= 0, got "
                f"{parity_error!r}"
            ) from None
        if not (np.isfinite(err) and err >= 0):
            raise ValueError(
                f"{fname}: parity_error must be finite and >= 0, got {parity_error!r}"
            )
    return ParityCode(kk, kk + kk // k, group=k, parity_error=err)
