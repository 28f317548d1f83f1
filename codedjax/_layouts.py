"""Layouts of a cluster: M workers served as G coding groups of M' workers.

A code need not take the whole cluster. Replication of single queries with c
copies is M // c groups of (K' = 1, M' = c); a code on K' queries and M' workers
can be laid out the same way, G = M // M' independent groups, each a copy of
the scheme with its own queries (round robin over the groups), its workers
spread evenly over the cluster (:func:`spread_workers`: group s on workers s, s
+ G, s + 2 G, ... when the groups fill the cluster, stretched over all M when
some workers are idle, so that in a rack model every group has about as many
workers in each rack and the idle ones fall between them, not all in the
last racks). :func:`layouts` lists, for a workload and M, every scheme of the
catalogue (:func:`~codedjax.catalogue`) at every group shape that fits, with
what each costs: the evaluations of f per query (``work_per_query``) and the
workers left idle when M' does not divide M.

The serving simulator runs a layout as ``simulate_load(layout.code, ...,
shards=layout.groups, cluster=layout.num_workers,
work=layout.scheme.service_scale)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._catalogue import Scheme, Workload, catalogue

__all__ = ["Layout", "layouts"]


def spread_workers(groups: int, group_workers: int, num_workers: int) -> np.ndarray:
    """The workers of G groups of M' spread evenly over a cluster of M.

    Slot j of group s is worker floor((j G + s) M / (G M')): with G M' = M the
    strided order (group s on s, s + G, s + 2 G, ...), otherwise that order
    stretched over all M workers, so that the M - G M' idle workers fall
    between the groups' workers rather than at the end. Workers are numbered as
    a rack model numbers them (racks of consecutive workers): a group's workers
    lie about M / M' apart, in as many racks as can be.

    Args:
        groups: G >= 1.
        group_workers: M' >= 1.
        num_workers: M >= G M'.

    Returns:
        int64 [G, M'], distinct workers in [0, M), each row increasing.

    Raises:
        ValueError: a size that is not an int >= 1, or G M' > M.

    Examples:
        >>> spread_workers(2, 6, 16).tolist()
        [[0, 2, 5, 8, 10, 13], [1, 4, 6, 9, 12, 14]]
    """
    for name, v in (("groups", groups), ("group_workers", group_workers),
                    ("num_workers", num_workers)):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"spread_workers: {name} must be an int >= 1, got {v!r}")
    g, mp, m = int(groups), int(group_workers), int(num_workers)
    if g * mp > m:
        raise ValueError(
            f"spread_workers: {g} groups of {mp} workers need {g * mp} workers, "
            f"the cluster has num_workers={m}"
        )
    i = np.arange(mp)[None, :] * g + np.arange(g)[:, None]  # the strided order
    return (i * m) // (g * mp)


@dataclasses.dataclass(frozen=True)
class Layout:
    """One scheme laid out on M workers as G groups of M' (see the module).

    Attributes:
        scheme: one group's :class:`~codedjax.Scheme` (K' queries, M' workers;
            its ``code`` serves one group's request).
        groups: G, the groups (independent copies of the scheme).
        num_workers: M, the cluster.
    """

    scheme: Scheme
    groups: int
    num_workers: int

    @property
    def code(self) -> Any:
        """One group's code."""
        return self.scheme.code

    @property
    def group_inputs(self) -> int:
        """K', the queries of one group's request."""
        return int(self.code.num_inputs)

    @property
    def group_workers(self) -> int:
        """M', the workers of one group (the scheme's ``workers``)."""
        return int(self.scheme.workers)

    @property
    def idle(self) -> int:
        """Workers of the M that no group uses."""
        return self.num_workers - self.groups * self.group_workers

    @property
    def placement(self) -> np.ndarray:
        """int [G, M']: the cluster's workers of each group
        (:func:`spread_workers`)."""
        return spread_workers(self.groups, self.group_workers, self.num_workers)

    @property
    def work_per_query(self) -> float:
        """Real evaluations of f per query: M' evaluations of
        ``scheme.service_scale`` each, for K' queries."""
        return self.group_workers * self.scheme.service_scale / self.group_inputs

    @property
    def name(self) -> str:
        """``"<scheme> K'=.. M'=.. xG"`` (``"... xG"`` only when G > 1)."""
        base = f"{self.scheme.name} K'={self.group_inputs} M'={self.group_workers}"
        return base if self.groups == 1 else f"{base} x{self.groups}"


def _ints(name: str, values: Any, low: int) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"layouts: {name} must be a sequence of ints, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"layouts: {name} must be ints >= {low}, got {v!r}")
        out.append(v)
    if not out:
        raise ValueError(f"layouts: {name} must not be empty")
    return tuple(sorted(set(out)))


def layouts(
    workload: Workload,
    num_workers: int,
    *,
    group_inputs: Sequence[int] = (1, 2, 4, 8),
    group_workers: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    max_idle: int | None = None,
    **catalogue_options: Any,
) -> tuple[Layout, ...]:
    """Every scheme of the catalogue at every group shape (K', M') that fits in
    M workers, as G = M // M' groups.

    Args:
        workload: what each worker computes (:class:`~codedjax.Workload`).
        num_workers: M, the cluster.
        group_inputs: the K' to try (default 1, 2, 4, 8; those above M are
            skipped).
        group_workers: the M' to try (default every M' from K' to M); each gives
            G = M // M' groups.
        names: the schemes (default every one of the catalogue's), as
            :func:`~codedjax.catalogue` takes them.
        max_idle: the most workers a layout may leave idle (default: any; 0
            keeps the shapes whose M' divides M).
        **catalogue_options: passed on to :func:`~codedjax.catalogue` (e.g.
            ``worker_dtype``, ``systematic=True``, ``nercc_smoothing``).

    Returns:
        The layouts whose scheme applies and uses all M' workers of its group
        (a scheme that would idle some of its M' appears at the smaller M';
        M' = K' only for ``uncoded``), in order of K', then M', then the
        catalogue's order.

    Raises:
        TypeError: a workload that is not a :class:`~codedjax.Workload`; sizes
            that are not sequences of ints.
        ValueError: num_workers < 1, a K' or M' < 1, an empty list, max_idle <
            0; what :func:`~codedjax.catalogue` refuses.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int):
        raise TypeError(f"layouts: num_workers must be an int, got {num_workers!r}")
    if num_workers < 1:
        raise ValueError(f"layouts: num_workers must be >= 1, got {num_workers}")
    m = num_workers
    ks = _ints("group_inputs", group_inputs, 1)
    mps = None if group_workers is None else _ints("group_workers", group_workers, 1)
    if max_idle is not None and (
        isinstance(max_idle, bool) or not isinstance(max_idle, int) or max_idle < 0
    ):
        raise ValueError(f"layouts: max_idle must be an int >= 0, got {max_idle!r}")
    out: list[Layout] = []
    for k in ks:
        if k > m:
            continue
        for mp in mps or range(k, m + 1):
            if mp < k or mp > m:
                continue
            g = m // mp
            if max_idle is not None and m - g * mp > max_idle:
                continue
            for s in catalogue(workload, k, mp, names=names, **catalogue_options):
                # M' = K' is no redundancy: uncoded serving only
                if s.applies and s.workers == mp and (mp > k or s.family == "uncoded"):
                    out.append(Layout(s, g, m))
    return tuple(out)
