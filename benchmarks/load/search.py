"""The search of one cell (a delay model, M workers): each scheme family's best
layout under the p99 target, on the simulator (``simulate.py``).

1. Screening (``screen_queries`` arrivals per point) on the grid of rates: a
   layout is tried at a start rate (the grid's middle for the plain families,
   uncoded serving and replication; then the best replication layout's), then
   at once at the grid's lowest rate if the start passes (a code's fill wait
   makes a p99 curve U-shaped: it passes between two rates that do), with the
   :class:`~codedjax.serving.FillDeadline`, then with each fixed group
   deadline where the lowest rate fails. Its bracket then narrows one rate at
   a time, up from its highest passing rate or down from its lowest failing
   one, only while it could still be its family's best.
2. Accuracy, lazily: a coded layout is screened at the fewest answers it may
   decode from, a bound on its rate (a larger N waits longer). The layout on
   top of its family (bracket top, then bottom, then p99 at the top) has its
   accuracy measured (:func:`~.schemes.accuracy`: its N; a decoder to compile)
   once its bracket is one rate wide (an approximate scheme's as soon as it
   passes a rate: most miss the target), is screened again at that N and put
   back; the first layout on top with both known is its family's best. At
   most ``accuracy_tries`` measurements per scheme of the family and cell (one
   for a family that has met the target nowhere after that many); the layouts
   left unmeasured above the best are counted.
3. The families' bests are bisected on ``num_queries`` arrivals between two
   rates of the grid (checked again at that size), at their screening
   deadline and then each other one that passes at their first failing rate:
   the ``finalists`` best coded and plain ones, the best systematic one
   dispatched on arrival, and in each group any whose screened bracket reaches
   above its best bisected rate. The others keep their screening's bracket.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter

import numpy as np

import codedjax as cj
import runkit
from codedjax.serving import FillDeadline
from runkit import fmt

from .config import DELAY_MODELS, LoadConfig
from .schemes import PLAIN, accuracy, candidates, family, policy
from .simulate import (
    Cell,
    deadline_name,
    dispatch_of,
    injector,
    mean_service,
    on_arrival,
    sim_key,
)

__all__ = ["search_cell"]


def _f(v) -> str:
    return fmt(v, ".4g", missing="-")


def _deadlines(cfg: LoadConfig, lay: cj.Layout) -> list:
    """The group deadlines a layout is tried at, in order: the FillDeadline,
    then (K' > 1) each fixed one."""
    return [FillDeadline()] + (
        list(cfg.group_deadlines) if lay.group_inputs > 1 else []
    )


def _row(cell: Cell, lay, st: dict, bisect: bool) -> dict:
    """A family's best (screen state ``st``), as the report shows it; with
    ``bisect``, bisected at its screening deadline, then at each other one that
    passes at its first failing rate; else its screening bracket."""
    cfg, pol, level = cell.cfg, st["pol"], st["lo"]
    gd = st["gds"][st["gd"]]
    if not bisect:
        grid, hi = cell.grid, st["hi"]
        top = float(grid[hi]) if hi < len(grid) else None
        low = float(grid[level]) if level >= 0 else 0.0
        bound = f"[{low:.4g}, {_f(top)}) screened"
        best = {"max_rate": low, "bracket": [low, top], "level": level,
                "bound": bound, "deadline": gd}  # fmt: skip
    else:
        best = {**cell.bisect(lay, pol, level, gd), "deadline": gd}
    for other in st["gds"] if bisect else ():
        hi = best["bracket"][1]
        if other is gd or hi is None:
            continue
        if cell.passes(cell.point(lay, pol, hi, other, cfg.num_queries)):
            got = cell.bisect(lay, pol, best["level"] + 1, other)
            if got["max_rate"] > best["max_rate"]:
                best = {**got, "deadline": other}
    gd = best.pop("deadline")
    at = None
    if best["max_rate"] > 0:
        q = cfg.num_queries if bisect else cfg.screen_queries
        at = cell.point(lay, pol, best["max_rate"], gd, q)
    n = getattr(pol, "num_responses", None)
    acc = st["acc"]
    return {
        "name": lay.name if n is None else f"{lay.name} N={n}",
        "scheme": lay.scheme.name,
        "family": family(lay),
        "group_inputs": lay.group_inputs,
        "group_workers": lay.group_workers,
        "groups": lay.groups,
        "idle": lay.idle,
        "num_responses": n,
        "policy": lay.scheme.policy,
        "systematic": lay.code.own_workers is not None,
        "on_arrival": on_arrival(lay),
        "dispatch": dispatch_of(lay),
        "deadline": deadline_name(gd),
        "service_scale": lay.scheme.service_scale,
        "work_per_query": lay.work_per_query,
        "error": acc["error"],
        "served_error": acc["served_error"],
        "decoded_fraction": acc["decoded_fraction"],
        "screen_level": level,
        "bisected": bisect,
        **best,
        "at_max": at,
        "_handle": (lay, pol, gd),
    }


class _Family:
    """Steps 1 and 2 over one family's layouts, lazily and resumable.

    Each layout has a screen state: its policy (``pol``), its deadline (index
    ``gd`` into ``gds``), its bracket on the grid (``lo`` the highest index
    known to pass, -1 none; ``hi`` the lowest known to fail, ``len(grid)``
    none; ``p99`` ms at ``hi``), whether the grid's lowest rate passes
    (``zero``) and its accuracy (``acc``). The layout whose bound (``hi``, then
    ``lo``, then ``p99``; ties: ``prior(lay)``, how often its scheme needed
    more than its fewest answers) is the highest takes the next step: a rate
    further (up from ``lo``, or down from ``hi``); the lowest rate (a code's
    fill wait makes a curve U-shaped: it passes between two rates that do); its
    next deadline where the lowest rate fails; its accuracy (``judge(lay)``, at
    most ``tries``); its p99 at ``hi`` at its own N; or, all known, it is the
    family's best (:meth:`top`). An approximate scheme's accuracy is measured
    as soon as it passes a rate (most miss the target: no climb for nothing).
    A best whose bisection finds less than its screening goes back in line
    with the checked bracket (:meth:`demote`).
    """

    def __init__(self, cell: Cell, lays: list, start: int, judge, prior, tries: int):
        self.cell, self.lays, self.judge, self.prior = cell, lays, judge, prior
        self.tries, self.tried, self.parked, self.free = tries, 0, [], set()
        self.r = len(cell.grid)
        self.s0 = min(max(start, 0), self.r - 1)
        self.heap, self.failed, self.seen, self.state = [], [], set(), []
        for i, lay in enumerate(lays):
            acc = judge(lay) if lay.scheme.family in PLAIN else None
            st = {"pol": policy(lay), "gds": _deadlines(cell.cfg, lay), "gd": 0,
                  "acc": acc}  # fmt: skip
            self._reset(st)
            self.state.append(st)
            self._begin(lay, st)
            self._push(i)

    def _push(self, i):
        st = self.state[i]
        key = (-st["hi"], -st["lo"], st["p99"], self.prior(self.lays[i]), i)
        heapq.heappush(self.heap, key)

    def _reset(self, st, hi=None):
        hi = self.r if hi is None else hi
        st.update(lo=-1, hi=hi, p99=0.0, p99_known=hi == self.r, zero=None)

    def _begin(self, lay, st):
        # the start rate, then at once the lowest one where it passes (a fill
        # wait too long for the target shows there: the next deadline)
        self.cell.step(lay, st, self.s0)
        if st["lo"] >= 0 and self.s0 > 0:
            self.cell.step(lay, st, 0)
        self._lowest(lay, st)

    def _lowest(self, lay, st):
        """Where the lowest rate fails: the next deadline, if any is left."""
        if st["zero"] is False:
            st.update(lo=-1, hi=0)
            if st["gd"] + 1 < len(st["gds"]):
                st["gd"] += 1
                self._reset(st)
                self._begin(lay, st)

    def top(self):
        """The family's best layout, ``(index, layout, state)``, or None (the
        same until :meth:`demote`)."""
        if not hasattr(self, "_top"):
            self._top = self._next()
        return self._top

    def _next(self):
        cell = self.cell
        while self.heap:
            i = heapq.heappop(self.heap)[-1]
            lay, st = self.lays[i], self.state[i]
            early = st["acc"] is None and not lay.scheme.exact and st["lo"] >= 0
            if st["hi"] - st["lo"] > 1 and not early:  # one rate further
                cell.step(lay, st, st["lo"] + 1 if st["lo"] >= 0 else st["hi"] - 1)
                self._lowest(lay, st)
            elif st["lo"] >= 0 and st["zero"] is None:
                cell.step(lay, st, 0)
                self._lowest(lay, st)
            elif st["acc"] is None:
                if self.tried >= self.tries and i not in self.free:
                    self.parked.append(i)  # its bound is above what comes out
                    continue
                self.tried += 1
                acc = self.judge(lay)
                if acc["reason"]:
                    self.failed.append({"name": lay.name, "reason": acc["reason"]})
                    continue
                st["acc"] = acc
                true = policy(lay, acc["num_responses"])
                if getattr(true, "num_responses", None) != getattr(
                    st["pol"], "num_responses", None
                ):  # a larger N: no faster, so below the old bracket's top
                    st["pol"] = true
                    self._reset(st, hi=st["hi"])
            elif not st["p99_known"]:  # its tie-break, at its own N
                q = cell.cfg.screen_queries
                pt = cell.point(lay, st["pol"], cell.grid[st["hi"]],
                                st["gds"][st["gd"]], q)  # fmt: skip
                st["p99"], st["p99_known"] = pt["latency_ms"]["99"], True
            else:
                key = sim_key(lay, st["pol"])
                if key not in self.seen:
                    self.seen.add(key)
                    return i, lay, st
                continue
            self._push(i)
        return None

    def demote(self, i: int, row: dict) -> None:
        """Layout ``i``'s bisection (``row``) checked it below its screening:
        back in line at the checked bracket, once."""
        st, cell = self.state[i], self.cell
        st.update(lo=row["level"], hi=row["level"] + 1, demoted=True)
        if st["hi"] < self.r:
            pt = cell.point(self.lays[i], st["pol"], cell.grid[st["hi"]],
                            st["gds"][st["gd"]], cell.cfg.num_queries)  # fmt: skip
            st["p99"] = pt["latency_ms"]["99"]
        self.seen.discard(sim_key(self.lays[i], st["pol"]))
        self._push(i)
        del self._top

    def resume(self, rate: float) -> bool:
        """The layouts left unmeasured by the cap whose screened bracket reaches
        above ``rate`` (the cell's best coded rate) go back in line, free of
        the cap, and the family's best is looked for again; True if any did."""
        grid = self.cell.grid
        back = [i for i in self.parked
                if (grid[self.state[i]["hi"]] if self.state[i]["hi"] < self.r
                    else math.inf) > rate]  # fmt: skip
        if not back:
            return False
        self.parked = [i for i in self.parked if i not in back]
        self.free.update(back)
        for i in back:
            self._push(i)
        top = self.__dict__.pop("_top", None)
        if top is not None:  # the old best goes back in line with them
            i = top[0]
            self.seen.discard(sim_key(self.lays[i], self.state[i]["pol"]))
            self._push(i)
        return True

    def record(self) -> dict:
        return {"layouts": len(self.lays), "accuracy_measured": self.tried,
                "failed": self.failed, "capped": len(self.parked),
                "resumed": len(self.free)}  # fmt: skip


def _finalists(cell: Cell, searches: dict, families: dict) -> None:
    """Step 3: each family's best as a report row (``families[f]["best"]``),
    bisected for the ``finalists`` best coded and plain ones by their
    screening, the best systematic one dispatched on arrival, and in each of
    these three groups any whose screened bracket reaches above the group's
    best bisected rate; a family whose bisected best checks below its
    screening gives its next best (:meth:`_Family.demote`)."""
    grid, cfg = cell.grid, cell.cfg
    best = {f: s.top() for f, s in searches.items()}
    done: dict = {}  # family -> bisected row

    def settle(f):
        while best[f] is not None:
            i, lay, st = best[f]
            row = _row(cell, lay, st, True)
            if row["level"] >= st["lo"] or st.get("demoted"):
                done[f] = row
                return
            searches[f].demote(i, row)
            best[f] = searches[f].top()
        done[f] = None

    def score(f):
        st = best[f][2]
        return (st["lo"], -st["p99"])

    def groups():
        fams = [f for f in best if best[f] is not None]
        coded = [f for f in fams if f not in PLAIN]
        return (([f for f in fams if f in PLAIN], cfg.finalists),
                (coded, cfg.finalists),
                ([f for f in coded if on_arrival(best[f][1])], 1))  # fmt: skip

    def bisect_finalists():
        changed = True
        while changed:
            changed = False
            for fams, count in groups():
                fams = sorted(fams, key=score, reverse=True)
                top = [f for f in fams[:count] if f not in done]
                got = max((done[f]["max_rate"] for f in fams if done.get(f)),
                          default=0.0)  # fmt: skip
                for f in fams[count:]:  # a screened bracket that reaches above
                    st = best[f][2]
                    reach = grid[st["hi"]] if st["hi"] < len(grid) else math.inf
                    if f not in done and st["lo"] >= 0 and reach > got:
                        top.append(f)
                for f in top:
                    settle(f)
                    changed = True

    bisect_finalists()
    # the cap on accuracy measurements never decides the cell: a layout it left
    # unmeasured whose bracket reaches above the best coded rate is measured
    while True:
        got = max((d["max_rate"] for f, d in done.items() if d and f not in PLAIN),
                  default=0.0)  # fmt: skip
        back = [f for f in searches if f not in PLAIN and searches[f].resume(got)]
        if not back:
            break
        for f in back:
            old, best[f] = best[f], searches[f].top()
            if best[f] is None or old is None or best[f][0] != old[0]:
                done.pop(f, None)  # a new best: bisected afresh if it competes
        bisect_finalists()
    for f, v in families.items():
        if done.get(f) is not None:
            v["best"] = [done[f]]
        elif best[f] is not None:
            v["best"] = [_row(cell, best[f][1], best[f][2], False)]
        else:
            v["best"] = []
        v.update(searches[f].record())


def search_cell(
    cfg: LoadConfig, delay: str, m: int, target: float, base: float,
    memo: dict | None = None, show_progress: bool = True,
) -> dict:  # fmt: skip
    """Every family's best layouts at M workers under one delay model (see the
    module); ``target``: the accuracy target, ``base``: an uncoded worker's
    median error; ``memo``: accuracies kept between cells."""
    t0 = time.perf_counter()
    memo = {} if memo is None else memo
    inj = injector(cfg, delay)
    mean = mean_service(inj, m)
    hi = cfg.grid_top * m / mean
    grid = np.geomspace(hi / cfg.grid_span, hi, cfg.num_rates)
    cell = Cell(cfg, inj, grid)
    latency = cfg.latency(delay)
    by_family: dict[str, list] = {}
    for lay in candidates(cfg, m):
        by_family.setdefault(family(lay), []).append(lay)

    # the answers' order depends on the layout's G only where workers are slowed
    # together (racks: a group's workers are spread over them)
    racks = "rack=" in DELAY_MODELS[delay]
    misses = memo.setdefault("misses", Counter())

    def judge(lay):
        g = lay.groups if racks else None
        key = (lay.scheme.name, lay.group_inputs, lay.group_workers, g, delay)
        if key not in memo:
            memo[key] = got = accuracy(cfg, lay, latency, target, base)
            fewest = getattr(policy(lay), "num_responses", None)
            if got["reason"] or (got["num_responses"] or 0) > (fewest or 0):
                misses[lay.scheme.name] += 1
        return memo[key]

    def prior(lay):
        return misses[lay.scheme.name]

    # accuracy_tries per scheme of the family and cell; a family that met the
    # target nowhere yet after that many: one more per cell (each measurement
    # costs a decoder's compile)
    found = memo.setdefault("found", Counter())
    failures = memo.setdefault("failures", Counter())

    def tries(fam):
        schemes = len({lay.scheme.name for lay in by_family[fam]})
        hopeless = not found[fam] and failures[fam] >= cfg.accuracy_tries * schemes
        return 1 if hopeless else cfg.accuracy_tries * schemes

    plain = [f for f in by_family if f in PLAIN]
    order = plain + [f for f in by_family if f not in PLAIN]
    bar = runkit.progress(order, desc=f"{delay} M={m}", disable=not show_progress)
    families, searches, start = {}, {}, len(grid) // 2
    for fam in bar:
        searches[fam] = _Family(cell, by_family[fam], start, judge, prior, tries(fam))
        families[fam] = {}
        if fam in PLAIN and fam == plain[-1]:  # the best plain layout's rate
            tops = [searches[f].top() for f in plain]
            start = max((t[2]["lo"] for t in tops if t is not None), default=0)
    _finalists(cell, searches, families)
    for fam, v in families.items():
        failures[fam] += len(v["failed"])
        found[fam] += bool(v["best"]) and fam not in PLAIN
    return {
        "delay": delay,
        "num_workers": m,
        "mean_service_ms": 1e3 * mean,
        "grid": grid.tolist(),
        "families": families,
        "simulations": cell.sims,
        "simulation_seconds": cell.sim_seconds,
        "seconds": time.perf_counter() - t0,
        "_cell": cell,
    }
