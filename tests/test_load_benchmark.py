"""benchmarks.load: the bisection, the layout search on a tiny synthetic cell,
the report's rows and the command line (the figures are measured by
``python -m benchmarks.load``, never asserted here)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

import codedjax as cj
from benchmarks.load import search
from benchmarks.load.__main__ import main
from benchmarks.load.config import DELAY_MODELS, LoadConfig
from benchmarks.load.report import format_tables, targets
from benchmarks.load.schemes import policy, workload
from benchmarks.load.simulate import Cell, deadline_name
from benchmarks.load.sweep import run_cell
from codedjax.serving import FillDeadline, FixedN, Injector


def test_the_largest_sustained_rate_is_bracketed_by_the_p99_target():
    # one worker, 2 ms per query: capacity 500 q/s; p99 <= 10 ms somewhere below
    cfg = LoadConfig(num_queries=1000, bisection=4, p99_target=0.01, warmup=0.05)
    (one,) = cj.layouts(cj.Workload("w", 1), 1, group_inputs=(1,), names=("uncoded",))
    assert (one.groups, one.group_workers, one.work_per_query) == (1, 1, 1.0)
    grid = np.geomspace(50.0, 1000.0, 6)
    cell = Cell(cfg, Injector(latency=cj.Constant(0.002)), grid)
    got = cell.bisect(one, FixedN(1), 2, FillDeadline())
    lo, hi = got["bracket"]
    assert 50 < lo == got["max_rate"] < hi < 500 and hi / lo < 1.1
    p99 = [cell.point(one, FixedN(1), r, FillDeadline(), 1000)["latency_ms"]["99"]
           for r in (lo, hi)]  # fmt: skip
    assert p99[0] <= 10.0 < p99[1]
    low = cell.point(one, FixedN(1), grid[0], FillDeadline(), 1000)["latency_ms"]
    assert low["50"] == pytest.approx(2.0)  # idle at 10%: no queueing


# a tiny cell: M = 4 workers, K' in {1, 2}; the accuracy is made up (no decoder
# is compiled): BACC misses the target, ChebyLS needs every answer, the graceful
# decoder meets it at its fewest
DELAY = "test-fast"
FAKE = {"bacc": None, "chebyls": 4, "graceful": 2}
NAMES = ("uncoded", "replication", "chebyls", "graceful", "bacc")


def _cfg() -> LoadConfig:
    return LoadConfig(group_inputs=(1, 2), workers=(4,), delays=(DELAY,),
                      replication=(2,), max_idle=0.3, num_queries=600,
                      screen_queries=300, num_rates=5, bisection=2, finalists=2,
                      group_deadlines=(0.004,), p99_target=0.02, grid_top=2.0,
                      grid_span=8.0, accuracy_tries=2)  # fmt: skip


def _candidates(cfg, m, twos=(4,), names=NAMES[2:]):
    """The plain layouts on 1 and 2 workers, and ``names`` at K' = 2 on each M'
    of ``twos``."""
    wl = workload(cfg.num_features, cfg.seed)
    ones = cj.layouts(wl, m, group_inputs=(1,), group_workers=(1, 2),
                      names=NAMES[:2])  # fmt: skip
    return ones + cj.layouts(wl, m, group_inputs=(2,), group_workers=twos,
                             names=names)  # fmt: skip


def _made_up(n, base, missed=False):
    """A made-up accuracy record: N = ``n`` at an uncoded worker's error, or
    ``missed`` the target."""
    if missed:
        return {"num_responses": None, "error": 1.0, "served_error": 1.0,
                "decoded_fraction": 1.0, "errors": {}, "reason": "made up"}  # fmt: skip
    return {"num_responses": n, "error": base, "served_error": base,
            "decoded_fraction": 1.0, "errors": {}, "reason": ""}  # fmt: skip


def _accuracy(cfg, lay, latency, target, base):
    n = FAKE.get(lay.scheme.name, "plain")
    return _made_up(None if n == "plain" else n, base, missed=n is None)


def _tiny_search(mp, candidates=_candidates, accuracy=_accuracy, point=None):
    """Patch the tiny cell in (``mp``: a MonkeyPatch): its delay model, its
    candidate layouts, its made-up accuracy and, if given, made-up points."""
    mp.setitem(DELAY_MODELS, DELAY, "shifted-exp:1ms,1ms; slow=0.05 factor=30")
    mp.setattr(search, "candidates", candidates)
    mp.setattr(search, "accuracy", accuracy)
    if point is not None:
        mp.setattr(Cell, "point", point)


@pytest.fixture(scope="module")
def tiny():
    mp = pytest.MonkeyPatch()
    _tiny_search(mp)
    try:
        cfg = _cfg()
        base = np.full(16, 1e-3)
        yield cfg, run_cell(cfg, DELAY, 4, base, {}, False)
    finally:
        mp.undo()


def test_the_search_picks_the_best_accurate_layout_of_each_family(tiny):
    cfg, cell = tiny
    fams = cell["families"]
    # BACC, the fastest bound (it decodes from one answer), misses the target
    assert not fams["berrut"]["best"]
    assert fams["berrut"]["failed"][0]["reason"] == "made up"
    # brute force: every accurate layout bisected at each deadline, from the top
    grid = np.asarray(cell["grid"])
    brute = Cell(cfg, search.injector(cfg, DELAY), grid)
    best: dict[str, float] = {}
    for lay in _candidates(cfg, 4):
        n = FAKE.get(lay.scheme.name, "plain")
        if n is None:
            continue
        pol = policy(lay, None if n == "plain" else n)
        gds = [FillDeadline()] + ([0.004] if lay.group_inputs > 1 else [])
        rate = max(brute.bisect(lay, pol, len(grid) - 1, g)["max_rate"] for g in gds)
        fam = search.family(lay)
        best[fam] = max(best.get(fam, 0.0), rate)
    assert set(best) == {"uncoded", "replication", "lagrange"}
    for fam, rate in best.items():
        (row,) = fams[fam]["best"]
        assert row["bisected"] and row["max_rate"] == pytest.approx(rate, rel=1e-12)
    # the graceful decoder at N = 2 is as fast as ChebyLS at N = 2 would be,
    # and ChebyLS needs N = 4: the family's best is the graceful layout or ties it
    (lag,) = fams["lagrange"]["best"]
    assert lag["num_responses"] == 2 and lag["scheme"] == "graceful"
    rows = {r["name"]: r for f in fams.values() for r in f["best"]}
    coded = max((r for r in rows.values() if r["family"] == "lagrange"),
                key=lambda r: r["max_rate"])  # fmt: skip
    assert cell["picks"]["best coded"] == coded["name"]
    plain = max((r for r in rows.values() if r["family"] in ("uncoded", "replication")),
                key=lambda r: r["max_rate"])  # fmt: skip
    assert cell["picks"]["best replication"] == plain["name"]


def test_a_fixed_group_deadline_where_the_fill_wait_breaks_the_target(monkeypatch):
    # the tiny cell with a grid reaching 64x below its top: at the lowest rate a
    # group of 2 waits up to the FillDeadline's 50 ms to fill, above the 20 ms
    # p99 target, so the graceful layout sustains nothing with it and the search
    # must go on to the fixed 4 ms deadline (brute force: both deadlines)
    _tiny_search(monkeypatch)
    cfg = dataclasses.replace(_cfg(), grid_span=64.0)
    cell = run_cell(cfg, DELAY, 4, np.full(16, 1e-3), {}, False)
    (lag,) = cell["families"]["lagrange"]["best"]
    assert lag["scheme"] == "graceful" and lag["deadline"] == "4 ms"
    grid = np.asarray(cell["grid"])
    brute = Cell(cfg, search.injector(cfg, DELAY), grid)
    (lay,) = [x for x in _candidates(cfg, 4) if x.scheme.name == "graceful"]
    fill, fixed = (brute.bisect(lay, policy(lay, 2), len(grid) - 1, g)["max_rate"]
                   for g in (FillDeadline(), 0.004))  # fmt: skip
    assert fill == 0 < fixed
    assert lag["max_rate"] == pytest.approx(fixed, rel=1e-12)


def test_the_cap_on_accuracy_measurements_never_decides_the_cell(monkeypatch):
    # four Lagrange layouts (ChebyLS and graceful on 3 and 4 workers), at most
    # two accuracy measurements per family (accuracy_tries 1, two schemes); the
    # first two measured miss the target, the others meet it at their fewest N:
    # the cap parks those, and since their brackets reach above the best coded
    # rate (none yet) they are measured, and the family's best is theirs
    failed: list[str] = []

    def acc(cfg, lay, latency, target, base):
        if lay.scheme.family in ("uncoded", "replication"):
            return _accuracy(cfg, lay, latency, target, base)
        if len(failed) < 2:
            failed.append(lay.name)
            return _made_up(None, base, missed=True)
        return _made_up(policy(lay).num_responses, base)

    cands = functools.partial(_candidates, twos=(3, 4), names=("chebyls", "graceful"))

    _tiny_search(monkeypatch, cands, acc)
    cfg = dataclasses.replace(_cfg(), accuracy_tries=1)
    cell = run_cell(cfg, DELAY, 4, np.full(16, 1e-3), {}, False)
    lag = cell["families"]["lagrange"]
    assert len(failed) == 2 and lag["layouts"] == 4
    assert lag["capped"] == 0 and lag["resumed"] >= 1
    assert 3 <= lag["accuracy_measured"] <= 2 + lag["resumed"]
    grid = np.asarray(cell["grid"])
    brute = Cell(cfg, search.injector(cfg, DELAY), grid)
    rate = max(
        brute.bisect(lay, policy(lay), len(grid) - 1, g)["max_rate"]
        for lay in cands(cfg, 4)
        if lay.group_inputs == 2 and lay.name not in failed
        for g in (FillDeadline(), 0.004)
    )
    (row,) = lag["best"]
    assert row["name"].split(" N=")[0] not in failed
    assert row["bisected"] and row["max_rate"] == pytest.approx(rate, rel=1e-12)
    assert cell["picks"]["best coded"] == row["name"]


# made-up capacities: where screening (``screen_queries`` arrivals) and the check
# (``num_queries``) put a layout's largest passing rate, as a position on the
# cell's grid (2.5: halfway between its third and fourth rate, geometrically),
# and its p99 (ms) where it fails, per (scheme, M') or (scheme, M', deadline);
# every other figure of a point is the simulator's at the lowest rate. The
# cell's best must come out in the grid's bracket BEST[case].
OPTIMISTIC = {
    # within a family: the graceful layout on 4 workers screens best and checks
    # two rates lower; the one on 3 workers checks as it screens
    "demoted": {("graceful", 4): (3.5, 1.5, 400.0), ("graceful", 3): (2.5, 2.5, 400.0),
                ("chebyls", 4): (0.5, 0.5, 400.0), ("chebyls", 3): (0.5, 0.5, 400.0)},
    # demoted and still the best: the layout on 4 workers checks one rate lower,
    # in the bracket where the one on 3 workers screens and checks, but higher
    # in it, and first there by its p99 past it
    "still-best-demoted": {
        ("graceful", 4): (3.5, 2.7, 200.0), ("graceful", 3): (2.5, 2.5, 400.0),
        ("chebyls", 4): (0.5, 0.5, 400.0), ("chebyls", 3): (0.5, 0.5, 400.0)},
    # across families (one finalist): BACC and the graceful decoder screen in
    # the same bracket, BACC first by its p99 past it, and BACC checks near the
    # bracket's bottom: the graceful layout, whose bracket reaches above that,
    # is checked too, and it is the cell's best
    "reach": {("bacc", 4): (2.1, 2.1, 200.0), ("graceful", 4): (2.9, 2.9, 400.0),
              ("chebyls", 4): (0.5, 0.5, 400.0)},
    # the screening's deadline (the fill time) is not the check's best: the
    # fixed 4 ms deadline sustains two rates more at the check
    "deadline": {("graceful", 4, "fill"): (1.5, 1.5, 400.0),
                 ("graceful", 4, "4 ms"): (1.5, 3.5, 400.0),
                 ("chebyls", 4): (0.5, 0.5, 400.0)},
}  # fmt: skip
BEST = {"demoted": 2, "still-best-demoted": 2, "reach": 2, "deadline": 3}


def _positioned(caps):
    """``Cell.point`` with the p99 made up from ``caps`` (see OPTIMISTIC)."""
    real = Cell.point

    def point(self, lay, pol, rate, gd, q):
        pt = dict(real(self, lay, pol, self.grid[0], gd, q))
        key = (lay.scheme.name, lay.group_workers)
        # the plain layouts: below the grid
        at = caps.get(key + (deadline_name(gd),), caps.get(key, (-0.5, -0.5, 500.0)))
        pos = at[0] if q == self.cfg.screen_queries else at[1]
        lo = int(np.floor(pos))
        g = self.grid
        cap = g[lo] * (g[lo + 1] / g[lo]) ** (pos - lo) if lo >= 0 else 0.0
        p99 = 5.0 if rate < cap else at[2]
        return {**pt, "rate": float(rate), "ok": 1.0,
                "latency_ms": {**pt["latency_ms"], "99": p99}}  # fmt: skip

    return point


def _fewest(cfg, lay, latency, target, base):
    """A made-up accuracy: every coded layout meets the target at its fewest N."""
    plain = lay.scheme.family in ("uncoded", "replication")
    return _made_up(None if plain else policy(lay).num_responses, base)


@pytest.mark.parametrize("case", sorted(OPTIMISTIC))
def test_a_screening_that_flatters_a_layout_never_picks_it(monkeypatch, case):
    """The search's best of each family, and of the cell, is the brute-force best
    by the check, when the screening's shorter runs rank a layout above where its
    check puts it: the family's best is demoted (its next best is checked), and a
    family outside the finalists whose screening reaches above the best checked
    rate is checked too, and a best is checked at every deadline."""
    twos = (3, 4) if "demoted" in case else (4,)
    cands = functools.partial(_candidates, twos=twos)
    _tiny_search(monkeypatch, cands, _fewest, _positioned(OPTIMISTIC[case]))
    cfg = dataclasses.replace(_cfg(), finalists=1)
    cell = run_cell(cfg, DELAY, 4, np.full(16, 1e-3), {}, False)
    grid = np.asarray(cell["grid"])
    brute = Cell(cfg, search.injector(cfg, DELAY), grid)
    rates = {}
    for lay in cands(cfg, 4):
        if lay.group_inputs == 2:
            pol = policy(lay, _fewest(cfg, lay, None, None, 0.0)["num_responses"])
            rates[lay.name] = max(
                (
                    brute.bisect(lay, pol, len(grid) - 1, g)
                    for g in (FillDeadline(), 0.004)
                ),
                key=lambda r: r["max_rate"],
            )
    name = max(rates, key=lambda k: rates[k]["max_rate"])
    (row,) = cell["families"]["lagrange"]["best"]
    assert row["name"].split(" N=")[0] == name
    assert row["bisected"] and row["max_rate"] == pytest.approx(
        rates[name]["max_rate"], rel=1e-12
    )
    assert grid[BEST[case]] <= row["max_rate"] < grid[BEST[case] + 1]
    assert row["deadline"] == ("4 ms" if case == "deadline" else "fill")
    assert cell["picks"]["best coded"] == row["name"]


def test_the_cap_leaves_the_layouts_that_cannot_win_unmeasured(monkeypatch):
    # BACC on 4 workers meets the target and is the cell's best (on 3 it
    # sustains nothing, so its accuracy is never asked for); of the four
    # Lagrange layouts, at most two accuracy measurements (one per scheme), the
    # two graceful ones screen best and miss the target: the cap parks the two
    # ChebyLS ones, whose brackets reach no higher than BACC's checked rate, so
    # they are never measured
    caps = {
        ("bacc", 4): (3.5, 3.5, 400.0),
        ("bacc", 3): (-0.5, -0.5, 400.0),  # passes no rate: never measured
        ("graceful", 4): (2.5, 2.5, 400.0),
        ("graceful", 3): (2.5, 2.5, 400.0),
        ("chebyls", 4): (1.5, 1.5, 400.0),
        ("chebyls", 3): (0.5, 0.5, 400.0),
    }
    measured: list[str] = []

    def acc(cfg, lay, latency, target, base):
        if lay.scheme.family in ("uncoded", "replication"):
            return _fewest(cfg, lay, latency, target, base)
        measured.append(f"{lay.scheme.name} {lay.group_workers}")
        if lay.scheme.name == "graceful":
            return _made_up(None, base, missed=True)
        return _fewest(cfg, lay, latency, target, base)

    cands = functools.partial(_candidates, twos=(3, 4))
    _tiny_search(monkeypatch, cands, acc, _positioned(caps))
    cfg = dataclasses.replace(_cfg(), accuracy_tries=1)
    cell = run_cell(cfg, DELAY, 4, np.full(16, 1e-3), {}, False)
    lag = cell["families"]["lagrange"]
    assert sorted(m for m in measured if "bacc" not in m) == [
        "graceful 3",
        "graceful 4",
    ]
    assert lag["accuracy_measured"] == 2 and lag["capped"] == 2
    assert lag["resumed"] == 0 and not lag["best"]
    (row,) = cell["families"]["berrut"]["best"]
    assert row["scheme"] == "bacc" and row["group_workers"] == 4
    assert cell["picks"]["best coded"] == row["name"]


def test_the_report_has_a_row_per_cell_and_per_family(tiny):
    cfg, cell = tiny
    public = {k: v for k, v in cell.items() if not k.startswith("_")}
    summary = {"config": dataclasses.asdict(cfg), "baseline_error": 1e-3,
               "cells": {f"{DELAY} M=4": public}, "threads": {},
               "noloss": {"skipped": "not run here"}}  # fmt: skip
    t = targets(summary)["cells"][f"{DELAY} M=4"]
    rows = {r["name"]: r for f in cell["families"].values() for r in f["best"]}
    rc, rr = rows[t["best_coded"]]["max_rate"], rows[t["best_replication"]]["max_rate"]
    assert rc > 0 and rr > 0 and t["ratio"] == pytest.approx(rc / rr)
    text = format_tables(summary)
    (line,) = [x for x in text.splitlines() if x.startswith(f"| {DELAY} M=4 |")]
    assert line.count("|") == 10 and f"{rc:.0f}" in line and f"{rr:.0f}" in line
    for fam in cell["families"]:
        assert any(x.startswith(f"| {fam} |") for x in text.splitlines()), fam
    assert "| berrut | none within the target (made up)" in text
    assert "No-loss run skipped: not run here." in text
    # the thread runs' lines, with the collector's pauses (and "-" without them)
    ms = {"50": 1.0, "99": 2.0}
    row = {"layout": "x", "rate": 10.0, "queries": 5, "threads_ms": ms,
           "simulator_ms": ms, "ratio": {"50": 1.0, "99": 1.0},
           "loadavg": [0.5, 0.6], "gc": {"collections": 3, "total_ms": 2.0,
                                         "longest_ms": 1.25}}  # fmt: skip
    noloss = {"layout": "x", "rate": 10.0, "policy_deadline": 0.25,
              "faults": {"kinds": ["hang"], "prob": 0.02, "max_faulty": 1},
              "submitted": 5, "answered": 5, "ok": 5, "errors": 0, "rejected": 0,
              "lost": 0, "statuses": {"0": 5}, "latency_ms": ms,
              "query_error_median": 0.01, "seconds": 1.0}  # fmt: skip
    text = format_tables({**summary, "threads": {"a": row, "b": {**row, "gc": None}},
                          "noloss": noloss})  # fmt: skip
    lines = [x for x in text.splitlines() if x.startswith("| x |")]
    assert [x.split("|")[7].strip() for x in lines] == ["3 (1.2)", "-"]
    assert "garbage collections - (the sweep's heap frozen)" in text


def test_the_group_shapes_searched():
    cfg = LoadConfig()
    # replication: its copies c; a code: M' from K' + 1 to K' + max(4 spares,
    # (4 - 1) K'), leaving at most 12.5% of the M idle
    assert cfg.group_workers(1, 16) == (2, 3, 4, 5)
    assert cfg.group_workers(2, 16) == (3, 4, 5, 7, 8)
    assert cfg.group_workers(4, 16) == (5, 7, 8, 14, 15, 16)
    assert cfg.group_workers(8, 40) == (9, 10, 12, 13, 18, 19, 20)
    narrow = dataclasses.replace(cfg, max_redundancy=2.0)
    assert narrow.group_workers(4, 16) == (5, 7, 8)
    with pytest.raises(ValueError, match="max_redundancy must be finite and >= 1"):
        dataclasses.replace(cfg, max_redundancy=0.5)


def test_bad_options_exit_naming_the_option(capsys):
    for argv, flag in (
        (["--delays", "nope"], "--delays"),
        (["--check-delay", "nope"], "--check-delay"),
        (["--workers", "1"], "--workers"),
        (["--group-inputs", "2,4"], "--group-inputs"),
        (["--p99-target", "0"], "--p99-target"),
        (["--queries", "0"], "--queries"),
        (["--max-redundancy", "0.5"], "--max-redundancy"),
        (["--max-spares", "0"], "--max-spares"),
        (["--bisection", "-1"], "--bisection"),
        (["--accuracy-tries", "0"], "--accuracy-tries"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code != 0 and flag in capsys.readouterr().err
