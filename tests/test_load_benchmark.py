"""benchmarks.load: the sweep's bisection and the command line (the figures are
measured by ``python -m benchmarks.load``, never asserted here)."""

from __future__ import annotations

import numpy as np
import pytest

import codedjax as cj
from benchmarks.load.__main__ import main
from benchmarks.load.config import LoadConfig
from benchmarks.load.schemes import Layout
from benchmarks.load.sweep import simulate_point, sweep_scheme
from codedjax.serving import FixedN, Injector


def test_the_largest_sustained_rate_is_bracketed_by_the_p99_target():
    # one worker, 2 ms per query: capacity 500 q/s; p99 <= 10 ms somewhere below
    cfg = LoadConfig(num_queries=1500, bisection=5, p99_target=0.01, warmup=0.05)
    one = cj.catalogue(cj.Workload("w", 1), 1, 1, names=("uncoded",))[0]
    s = Layout("one", one, FixedN(1))
    assert s.workers_used == 1 and s.family == "uncoded" and s.applies
    inj = Injector(latency=cj.Constant(0.002))
    grid = np.geomspace(50.0, 1000.0, 6)
    got = sweep_scheme(cfg, s, inj, grid)
    lo, hi = got["bracket"]
    assert 50 < lo == got["max_rate"] < hi < 500 and hi / lo < 1.1
    assert simulate_point(cfg, s, inj, lo)["latency_ms"]["99"] <= 10.0
    assert simulate_point(cfg, s, inj, hi)["latency_ms"]["99"] > 10.0
    p99 = [p["latency_ms"]["99"] for p in got["curve"]]
    assert p99 == sorted(p99) and p99[0] > 2.0  # queueing shows in the tail
    assert got["curve"][0]["latency_ms"]["50"] == pytest.approx(2.0)  # idle at 10%
    # the curve stops once saturated (p99 above 10x the target)
    assert len(got["curve"]) < len(grid) or p99[-1] <= 100.0


def test_bad_options_exit_naming_the_option(capsys):
    for argv, flag in (
        (["--delays", "nope"], "--delays"),
        (["--check-delay", "nope"], "--check-delay"),
        (["--workers", "8"], "--workers"),
        (["--p99-target", "0"], "--p99-target"),
        (["--queries", "0"], "--queries"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code != 0 and flag in capsys.readouterr().err
