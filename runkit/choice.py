"""Which layout serves a cell: the search and the choice that the regime map
(``benchmarks.regimes``) and the planner (``theory.plan``) share.

A *cell* is a workload, K queries per request, M workers, a straggler model and an
accuracy target. A scheme of the catalogue may serve it whole, or as G = M // M'
independent groups of M' workers, each coding K' of the queries
(:func:`codedjax.layouts`). Every layout searched serves the cell's K queries at
once (G K' >= K), so none takes more than the M workers' evaluations per request;
what each costs is reported as its work per query (M' ``service_scale`` / K').

Searched (the full cross product of :func:`codedjax.layouts` is not needed):

* K' = K, and K/2 when K is even and K/2 >= 2 (:func:`group_inputs`);
* M' = M // ceil(K / K'), the most workers a group may have (:func:`group_workers`),
  except uncoded (M' = K' = K) and ParM (M' = K + K/k for its smallest group size
  k that fits M: the most parity workers);
* replication, ParM, uncoded and layer-wise coding at K' = K only (replication's
  and ParM's queries decode apart already, uncoded has no code, and layer-wise
  coding's compiled pipeline per shape is the map's costliest program);
* every scheme with its systematic variant (``catalogue(..., systematic=True)``),
  one row per scheme (:func:`base_name`) whose best layout may be either; but
  not ``threshold systematic``: the catalogue serves it ``FirstDecodable``,
  whose simulation decodes at every arrival (a compiled decode per batch size
  and code), and its per-query latency is ``chebyls systematic``'s at N = D (a
  query's own answer, or the D-th), which the search has;
* N: the application's own (the map's grid; the planner's every N from the
  scheme's fewest answers to M').

A scheme with no layout in the search keeps the catalogue's reason at (K, M)
("does not apply: ...").

Latency (:func:`simulate_layout`): per query (``simulate_latency(...)
.query_latency``: each query answered at its own worker's answer or at the decode
that gives it), each group on its own workers of the cell's M (group s on the
workers ``layout.placement[s]``, spread evenly over the cluster: those columns
of the cell's delay plan), the ceil(K / K')
groups that a request's K queries go to, every worker's service time scaled by
the scheme's ``service_scale`` (the model's shift once, ``service_scale`` times
the rest of its draw: :meth:`codedjax.serving.Injector.plan_one`'s rule; the
circle code's complex query costs 2); percentiles over every query.

The choice (:func:`choose`, :func:`rule_order`): among the candidates that meet
the accuracy target, the lowest per-query p99; ties: the least work per query,
then the order given. A scheme's row is its first candidate in that order that
meets the target (:func:`first_meeting`: candidates are simulated and their
accuracy, the costly part, judged lazily in that order, so nothing slower than
the answer is decoded; a layout that misses the target with all its answers is
not tried at the N between). Whether a candidate meets the accuracy target is
each application's own judgement (the map: median error at most a factor times
an uncoded worker's; the planner: a failure-rate bound); given the same verdicts,
the two choose the same layout.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import codedjax as cj
from codedjax.serving import simulate_latency

from .stats import percentile

__all__ = [
    "FULL_ONLY",
    "LayoutLatency",
    "base_name",
    "cell_layouts",
    "choose",
    "first_meeting",
    "full_answers",
    "group_inputs",
    "group_workers",
    "layout_fields",
    "ranked",
    "rule_order",
    "simulate_layout",
]

#: the schemes searched at K' = K only (see the module docstring)
FULL_ONLY = ("uncoded", "replication", "parity", "layerwise")

_SYSTEMATIC = " systematic"


def group_inputs(k: int) -> tuple[int, ...]:
    """The K' searched for a cell of K queries: K, and K/2 when K is even and
    K/2 >= 2.

    Raises:
        TypeError: K not an int. ValueError: K < 1.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"group_inputs: K must be an int, got {k!r}")
    if k < 1:
        raise ValueError(f"group_inputs: K must be >= 1, got {k}")
    return (k, k // 2) if k % 2 == 0 and k >= 4 else (k,)


def group_workers(k: int, kp: int, m: int) -> int:
    """M' of a group of K' queries in a cell of K queries on M workers: the most
    a group may have while ceil(K / K') groups fit, M // ceil(K / K')."""
    return m // -(-k // kp)


def layout_fields(lay: cj.Layout) -> dict[str, Any]:
    """What a report row says of a layout: its name, the scheme variant, K', M',
    G, the idle workers, the work per query and a worker's service scale."""
    return {
        "layout": lay.name,
        "variant": lay.scheme.name,
        "group_inputs": lay.group_inputs,
        "group_workers": lay.group_workers,
        "groups": lay.groups,
        "idle": lay.idle,
        "work_per_query": lay.work_per_query,
        "service_scale": lay.scheme.service_scale,
    }


def base_name(name: str) -> str:
    """A scheme's row name: ``"chebyls systematic"`` -> ``"chebyls"``,
    ``"parity k=2"`` -> ``"parity"``."""
    name = name.removesuffix(_SYSTEMATIC)
    return "parity" if name.startswith("parity ") else name


def _parity_workers(k: int, m: int) -> int | None:
    """K + K/k for the smallest group size k >= 2 dividing K that fits M."""
    sizes = [k + k // g for g in range(2, k + 1) if k % g == 0 and k + k // g <= m]
    return sizes[0] if sizes else None


def cell_layouts(
    workload: cj.Workload,
    k: int,
    m: int,
    names: Sequence[str],
    **catalogue_options: Any,
) -> tuple[dict[str, list[cj.Layout]], dict[str, str]]:
    """The layouts searched in the cell (see the module docstring).

    Args:
        workload: the cell's workload.
        k: K, the queries of a request. m: M, the workers.
        names: the schemes (names of :data:`codedjax.SCHEME_NAMES`).
        **catalogue_options: passed on to :func:`codedjax.catalogue` (the
            systematic variants are always included).

    Returns:
        ``(layouts, reasons)``: ``layouts[name]`` the layouts of each scheme that
        has one (its variants and shapes, in the catalogue's order, then K'
        descending), ``reasons[name]`` the catalogue's reason at (K, M) for each
        scheme that has none; both keyed by :func:`base_name`, every name of
        ``names`` in one of them, in the catalogue's order.

    Raises:
        ValueError: K > M, or what :func:`codedjax.catalogue` refuses.
    """
    if k > m:
        raise ValueError(f"cell_layouts: K = {k} queries need M >= K, got M = {m}")
    names = tuple(names)
    opts = {**catalogue_options, "systematic": True}
    found: dict[str, list[cj.Layout]] = {}
    for kp in group_inputs(k):
        mp = group_workers(k, kp, m)
        shapes = [(tuple(n for n in names if n not in FULL_ONLY), mp)]
        if kp == k:
            shapes.append((tuple(n for n in names if n in FULL_ONLY and n not in
                                 ("uncoded", "parity")), mp))  # fmt: skip
            if "uncoded" in names:
                shapes.append((("uncoded",), k))
            par = _parity_workers(k, m)
            if "parity" in names and par is not None:
                shapes.append((("parity",), par))
        for sel, size in shapes:
            if not sel or size < kp:
                continue
            got = cj.layouts(
                workload, m, group_inputs=(kp,), group_workers=(size,), names=sel,
                **opts,
            )  # fmt: skip
            for lay in got:
                if lay.scheme.name != "threshold" + _SYSTEMATIC:
                    found.setdefault(base_name(lay.scheme.name), []).append(lay)
    layouts, reasons = {}, {}
    for s in cj.catalogue(workload, k, m, names=names, **catalogue_options):
        name = base_name(s.name)
        if name in found:
            layouts.setdefault(name, found[name])
        elif name not in reasons:
            reasons[name] = s.reason or (
                f"does not apply: no layout of {s.name} in the search fits M = {m}"
            )
    return layouts, reasons


def full_answers(code: Any) -> int:
    """The fewest answers N at which a decision at the N-th answer answers every
    query whichever N workers they are (M + 1 if none): ``code.may_decode`` of
    the first N workers that answer no query of their own (a systematic code
    decodes below its D only from its own workers' answers). Below it a decision
    may leave a query unanswered, and the per-query p99 need not rise with N, as
    :func:`first_meeting` needs of a stream."""
    m = int(code.num_workers)
    own = code.own_workers
    order = (
        np.arange(m)
        if own is None
        else np.argsort(np.asarray(own).any(axis=0), kind="stable")
    )
    masks = np.zeros((m, m), bool)
    for n in range(1, m + 1):
        masks[n - 1, order[:n]] = True
    ok = np.asarray(code.may_decode(masks), bool)
    return int(np.argmax(ok)) + 1 if ok.any() else m + 1


class _GroupPlan:
    """The delay plan of one group of a layout: columns ``cols`` of the cell's
    plan on M workers, each service time ``shift + scale (d - shift)``."""

    def __init__(self, injector, num_workers, cols, scale, shift):
        self.injector, self.m, self.cols = injector, num_workers, cols
        self.scale, self.shift = float(scale), float(shift)

    def plan(self, request_ids, num_workers):
        if num_workers != len(self.cols):
            raise ValueError(
                f"simulate_layout: a group of {len(self.cols)} workers was asked "
                f"for a plan of {num_workers}"
            )
        d, f = self.injector.plan(request_ids, self.m)
        d, f = d[:, self.cols], f[:, self.cols]
        if self.scale != 1.0:
            d = self.shift + self.scale * (d - self.shift)
        return d, f


class LayoutLatency(NamedTuple):
    """What :func:`simulate_layout` returns for R requests of the cell, on the n
    groups that one request's K queries go to.

    Attributes:
        query: float [R, n, K'] each query's latency (inf: not answered).
        latency: float [R, n] each group's decision.
        masks: bool [R, n, M'] the answers in hand at each group's decision.
        ok: bool [R, n] whether each group's decode at its decision may succeed.
    """

    query: np.ndarray
    latency: np.ndarray
    masks: np.ndarray
    ok: np.ndarray

    def percentile(self, q: float) -> float:
        """The q-th percentile of the per-query latency, over every query."""
        return percentile(self.query, q)

    def request_masks(self, count: int) -> np.ndarray:
        """bool [count, M']: the first ``count`` groups' masks, request by
        request (request 0's groups, then request 1's, ...)."""
        return self.masks.reshape(-1, self.masks.shape[-1])[:count]


def simulate_layout(
    layout: cj.Layout,
    policy: Any,
    injector: Any,
    num_requests: int,
    *,
    num_inputs: int | None = None,
    shift: float = 0.0,
) -> LayoutLatency:
    """Per-query latency of a layout in its cell, at no load (see the module
    docstring).

    Args:
        layout: the layout (:func:`codedjax.layouts`).
        policy: the wait policy of one group's request.
        injector: the cell's delay plan on its M workers (an
            :class:`~codedjax.serving.Injector`, or an object with its ``plan``).
        num_requests: R.
        num_inputs: K, the cell's queries per request (default the layout's K':
            one group).
        shift: the latency model's fixed part
            (:func:`codedjax.serving.latency_shift`), paid once per request by a
            worker whose ``service_scale`` is not 1.

    Returns:
        :class:`LayoutLatency`.

    Raises:
        ValueError: the cell's K queries need more groups than the layout has;
            what :func:`codedjax.serving.simulate_latency` refuses.
    """
    kp, g = layout.group_inputs, layout.groups
    k = kp if num_inputs is None else num_inputs
    n = -(-k // kp)
    if n > g:
        raise ValueError(
            f"simulate_layout: K = {k} queries need {n} groups of K' = {kp}, the "
            f"layout {layout.name} has {g}"
        )
    parts = []
    for s in range(n):
        cols = layout.placement[s]
        plan = _GroupPlan(injector, layout.num_workers, cols,
                          layout.scheme.service_scale, shift)  # fmt: skip
        parts.append(simulate_latency(layout.code, policy, plan, num_requests))
    return LayoutLatency(
        np.stack([p.query_latency for p in parts], axis=1),
        np.stack([p.latency for p in parts], axis=1),
        np.stack([p.masks for p in parts], axis=1),
        np.stack([p.ok for p in parts], axis=1),
    )


def _p99(row: dict) -> float:
    return row["p99"]


def _meets(row: dict) -> bool:
    return bool(row.get("meets"))


def rule_order(
    rows: Sequence[dict], *, p99: Callable[[dict], float] = _p99
) -> list[int]:
    """The indices of ``rows`` in the rule's order: per-query p99 (``p99(row)``),
    then work per query (``row["work_per_query"]``), then as given; NaN last."""

    def key(i):
        t = p99(rows[i])
        return (math.isnan(t), t, rows[i].get("work_per_query", 0.0), i)

    return sorted(range(len(rows)), key=key)


def ranked(
    rows: Sequence[dict],
    *,
    p99: Callable[[dict], float] = _p99,
    meets: Callable[[dict], bool] = _meets,
) -> list[dict]:
    """The rows that meet the target (``meets(row)``, default ``row["meets"]``),
    in :func:`rule_order`: the choice first."""
    ok = [r for r in rows if meets(r)]
    return [ok[i] for i in rule_order(ok, p99=p99)]


def choose(
    rows: Sequence[dict],
    *,
    p99: Callable[[dict], float] = _p99,
    meets: Callable[[dict], bool] = _meets,
) -> dict | None:
    """The choice: the first of :func:`ranked` (None when no row meets)."""
    best = ranked(rows, p99=p99, meets=meets)
    return best[0] if best else None


def first_meeting(
    streams: Sequence[Sequence[Callable[[], dict]]],
    meets: Callable[[dict], bool],
    *,
    p99: Callable[[dict], float] = _p99,
) -> tuple[dict | None, list[dict]]:
    """One scheme's best candidate, built and judged lazily in the rule's order.

    Each stream is one layout's candidates (zero-argument callables that simulate
    one and return it, a dict with its p99 and ``work_per_query``) in
    non-decreasing p99 order (N ascending from :func:`full_answers`: a later
    decision is never earlier).
    The streams are merged in :func:`rule_order` (ties: the earlier stream,
    then the earlier candidate), and ``meets(candidate)`` (the accuracy, the
    costly part) is asked of each in that order until one meets, so nothing
    slower than the answer is decoded, nor simulated beyond one candidate per
    stream. A layout whose first candidate misses the target is asked once
    with its last one (all its answers); if that misses too, the layout is
    taken to miss at every N between (more answers never decode worse) and is
    left.

    Returns:
        ``(best, tried)``: the first candidate that meets (None: none), and every
        candidate judged, in the order judged.
    """
    built: dict[tuple[int, int], dict] = {}
    judged: dict[tuple[int, int], bool] = {}
    tried: list[dict] = []

    def cand(s: int, i: int) -> dict:
        if (s, i) not in built:
            built[(s, i)] = streams[s][i]()
        return built[(s, i)]

    def judge(s: int, i: int) -> bool:
        if (s, i) not in judged:
            c = cand(s, i)
            judged[(s, i)] = bool(meets(c))
            tried.append(c)
        return judged[(s, i)]

    heap: list = []

    def push(s: int, i: int) -> None:
        if i < len(streams[s]):
            c = cand(s, i)
            t = p99(c)
            key = (math.isnan(t), t, c.get("work_per_query", 0.0), s, i)
            heapq.heappush(heap, key)

    for s in range(len(streams)):
        push(s, 0)
    while heap:
        *_, s, i = heapq.heappop(heap)
        if judge(s, i):
            return cand(s, i), tried
        last = len(streams[s]) - 1
        if i == 0 and last > 0 and not judge(s, last):
            continue
        push(s, i + 1)
    return None, tried
