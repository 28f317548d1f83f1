"""The serving model's rules in the simulators, on cases worked by hand.

Each query is answered when it can be (its own worker's answer, or the decode
that gives it), a systematic code's own workers get a query at its arrival, a
group's deadline may follow the arrival rate (FillDeadline), and a code may be
laid out as G groups of M' workers (``codedjax.layouts``). docs/serving.md, "The
serving model".
"""

import math

import numpy as np
import pytest

import codedjax as cj
from codedjax import _layouts
from codedjax.serving import (
    FillDeadline,
    FirstDecodable,
    FixedN,
    Injector,
    simulate_latency,
    simulate_load,
)

LIN = cj.Workload("linear", 1, linear=True)


def _const(ms: float) -> Injector:
    return Injector(latency=cj.parse_latency(f"const:{ms}ms"))


# ------------------------------------------------------------------ own workers


def test_own_workers_name_the_answers_a_query_needs_no_decode_for():
    par = cj.parity_code(num_inputs=4, group=2)
    np.testing.assert_array_equal(par.own_workers, np.eye(4, 6, dtype=bool))
    rep = cj.replication_code(num_inputs=2, num_workers=5)
    np.testing.assert_array_equal(rep.own_workers, [[1, 0, 1, 0, 1], [0, 1, 0, 1, 0]])
    sysm = cj.lagrange_code(num_inputs=3, num_workers=6, degree=1, systematic=True)
    own = sysm.own_workers
    assert own.shape == (3, 6) and own.sum() == 3
    np.testing.assert_array_equal(own.argmax(axis=1), sysm.systematic_workers)
    assert cj.lagrange_code(num_inputs=3, num_workers=6, degree=1).own_workers is None
    ra = cj.repapprox_code(num_inputs=2, num_workers=5, replication=2)
    # every own worker's answer makes its query decodable on its own
    for k in range(2):
        for i in np.flatnonzero(ra.own_workers[k]):
            mask = np.zeros(5, bool)
            mask[i] = True
            assert ra.decodable_queries(mask)[k]


# ------------------------------------------------------------------ per query


def test_a_parm_group_decodes_on_its_own_while_another_is_lost():
    """K = 4, k = 2: workers 0 and 1 (group 0's base) fail; group 1 answers."""
    code = cj.parity_code(num_inputs=4, group=2)
    inj = Injector(latency=cj.parse_latency("const:5ms"),
                   failed_workers={0: "raise", 1: "raise"})  # fmt: skip
    a = np.zeros(4)
    pol = FirstDecodable(deadline=0.05)
    per = simulate_load(code, pol, inj, a, group_deadline=0.01)
    np.testing.assert_array_equal(per.ok, [False, False, True, True])
    # queries 2, 3 at their own answers (5 ms); the lost ones fail when every
    # worker is done (5 ms: nothing more can come), not at the deadline
    np.testing.assert_allclose(per.latency, [0.005] * 4)
    whole = simulate_load(code, pol, inj, a, group_deadline=0.01, per_query=False)
    assert not whole.ok.any()


def test_a_count_policy_answers_at_the_own_answer_or_at_the_decision():
    """Systematic ChebyLS K = 2, M = 4 (D = 2) on idle workers. FixedN(4) decides
    at the last answer; each query's own worker answers before it. FirstDecodable
    answers a query at its own answer or at the D-th answer, whichever first."""
    code = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1, systematic=True)
    own = list(code.systematic_workers)
    inj = Injector(latency=cj.parse_latency("shifted-exp:1ms,2ms"), seed=4)
    d, _ = inj.plan(np.arange(300), 4)
    fixed = simulate_latency(code, FixedN(4), inj, 300)
    np.testing.assert_allclose(fixed.query_latency, d[:, own])
    np.testing.assert_allclose(fixed.latency, d.max(axis=1))
    first = simulate_latency(code, FirstDecodable(), inj, 300)
    second = np.sort(d, axis=1)[:, 1:2]
    np.testing.assert_allclose(first.query_latency, np.minimum(d[:, own], second))
    # without an own answer (not systematic), at the decision
    plain = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1)
    q = simulate_latency(plain, FixedN(3), inj, 300).query_latency
    np.testing.assert_allclose(q, np.sort(d, axis=1)[:, [2, 2]])


def test_query_latency_of_simulate_latency_is_per_query():
    code = cj.replication_code(num_inputs=2, num_workers=4)
    inj = Injector(latency=cj.parse_latency("shifted-exp:1ms,2ms"), seed=3)
    sim = simulate_latency(code, FirstDecodable(), inj, 200)
    delays, _ = inj.plan(np.arange(200), 4)
    want = np.stack([delays[:, [0, 2]].min(1), delays[:, [1, 3]].min(1)], axis=1)
    np.testing.assert_allclose(sim.query_latency, want)
    np.testing.assert_allclose(sim.latency, want.max(axis=1))


# ------------------------------------------------------------------ dispatch


def test_dispatch_on_arrival_spares_the_fill_wait():
    """Two queries 10 ms apart, K = 2, workers at 1 ms: with dispatch on arrival
    query 0 is answered by its own worker 1 ms after it arrives; at the group's
    close (10 ms) otherwise."""
    code = cj.lagrange_code(num_inputs=2, num_workers=4, degree=1, systematic=True)
    a = np.array([0.0, 0.01])
    kw = dict(group_deadline=0.05, queueing=False)
    now = simulate_load(code, FixedN(3), _const(1), a, **kw)
    np.testing.assert_allclose(now.latency, [0.001, 0.001])
    np.testing.assert_allclose(now.waited, [0.0, 0.0])
    late = simulate_load(code, FixedN(3), _const(1), a, dispatch="group", **kw)
    np.testing.assert_allclose(late.latency, [0.011, 0.001])
    np.testing.assert_allclose(late.waited, [0.01, 0.0])
    with pytest.raises(ValueError, match="simulate_load: dispatch must be"):
        simulate_load(code, FixedN(3), _const(1), a, dispatch="now", **kw)


def test_work_scales_the_service_time():
    code = cj.uncoded_code(num_inputs=1)
    a = np.array([0.0])
    sim = simulate_load(code, FixedN(1), _const(2), a, group_deadline=0.01, work=2)
    np.testing.assert_allclose(sim.latency, [0.004])
    with pytest.raises(ValueError, match="simulate_load: work must be"):
        simulate_load(code, FixedN(1), _const(2), a, group_deadline=0.01, work=0)


# ------------------------------------------------------------------ deadlines


def test_fill_deadline_follows_the_arrival_rate():
    fd = FillDeadline(2.0, window=4, minimum=1e-3, maximum=0.1)
    assert fd.seconds(5, math.nan) == 0.1  # nothing known yet: the maximum
    assert math.isclose(fd.seconds(5, 0.002), 2.0 * 4 * 0.002)
    assert fd.seconds(5, 1.0) == 0.1 and fd.seconds(5, 0.0) == 1e-3  # clipped
    a = np.arange(20) * 0.002  # 2 ms gaps
    sim = simulate_load(cj.uncoded_code(num_inputs=5), FixedN(5), _const(1), a,
                        group_deadline=fd)  # fmt: skip
    assert sim.group_size.tolist() == [5] * 4
    # group 0 knows no gap; group 1 the 4 gaps before it: 2 x 4 x 2 ms
    assert sim.deadline[0] == 0.1 and math.isclose(sim.deadline[1], 0.016)
    # a slow stream closes its groups at the deadline, short
    slow = simulate_load(cj.uncoded_code(num_inputs=5), FixedN(5), _const(1),
                         np.arange(20) * 0.05, group_deadline=fd)  # fmt: skip
    assert slow.group_size.max() < 5


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(factor=0.0), ValueError, "FillDeadline: factor must be finite and > 0"),
        (dict(factor=math.inf), ValueError, "FillDeadline: factor"),
        (dict(window=0), ValueError, "FillDeadline: window must be an int >= 1"),
        (dict(minimum=-1.0), ValueError, "FillDeadline: minimum"),
        (dict(minimum=0.1, maximum=0.01), ValueError, "maximum must be >= minimum"),
        (dict(factor="1"), TypeError, "FillDeadline: factor must be a number"),
    ],
)
def test_fill_deadline_refuses_bad_parameters(kw, err, match):
    with pytest.raises(err, match=match):
        FillDeadline(**kw)


def test_group_deadline_must_be_seconds_or_a_fill_deadline():
    with pytest.raises(TypeError, match="simulate_load: group_deadline must be"):
        simulate_load(cj.uncoded_code(num_inputs=1), FixedN(1), _const(1), [0.0],
                      group_deadline="10ms")  # fmt: skip
    with pytest.raises(ValueError, match="simulate_load: group_deadline must be"):
        simulate_load(cj.uncoded_code(num_inputs=1), FixedN(1), _const(1), [0.0],
                      group_deadline=math.nan)  # fmt: skip


# ------------------------------------------------------------------ layouts


def test_layouts_lay_a_scheme_out_as_groups():
    out = cj.layouts(LIN, 6, group_inputs=(1, 2), names=("uncoded", "replication"))
    got = {(lay.name, lay.groups, lay.idle, lay.work_per_query) for lay in out}
    assert ("uncoded K'=1 M'=1 x6", 6, 0, 1.0) in got
    assert ("replication K'=1 M'=4", 1, 2, 4.0) in got
    assert ("replication K'=2 M'=3 x2", 2, 0, 1.5) in got
    # no redundancy (M' = K') only for uncoded serving
    assert all(lay.group_workers > lay.group_inputs for lay in out
               if lay.scheme.family != "uncoded")  # fmt: skip
    circle = cj.layouts(LIN, 8, group_inputs=(2,), group_workers=(4,),
                        names=("circle",))  # fmt: skip
    assert [lay.work_per_query for lay in circle] == [4.0]  # 4 workers x 2 / 2
    tight = cj.layouts(LIN, 7, group_inputs=(2,), names=("chebyls",), max_idle=0)
    assert {lay.group_workers for lay in tight} == {7}
    # at most one idle worker of 7: M' = 3 (x2) and 6 leave one, 4 and 5 more
    some = cj.layouts(LIN, 7, group_inputs=(2,), names=("chebyls",), max_idle=1)
    assert {lay.group_workers for lay in some} == {3, 6, 7}
    (alone,) = cj.layouts(LIN, 1, group_inputs=(1,), names=("uncoded",))
    assert (alone.groups, alone.group_workers, alone.idle) == (1, 1, 0)


def test_a_layout_spreads_its_groups_over_the_cluster():
    # groups that fill the cluster: strided, group s on s, s + G, ...
    (full,) = cj.layouts(LIN, 15, group_inputs=(1,), group_workers=(3,),
                         names=("replication",))  # fmt: skip
    np.testing.assert_array_equal(full.placement, np.arange(15).reshape(3, 5).T)
    # with idle workers: spread over all M, never packed into the first racks
    for m, mp in ((16, 6), (16, 5), (40, 13), (10, 3), (12, 5)):
        (lay,) = cj.layouts(LIN, m, group_inputs=(2,), group_workers=(mp,),
                            names=("chebyls",))  # fmt: skip
        p = lay.placement
        assert p.shape == (lay.groups, mp) and p.dtype.kind == "i"
        assert len(set(p.ravel().tolist())) == p.size and 0 <= p.min() <= p.max() < m
        for rack in (2, 3, 5):  # every rack of r consecutive workers that lies
            # wholly in the cluster holds floor or ceil of r M' / M of each group
            for lo in range(0, m - rack + 1, rack):
                held = ((p >= lo) & (p < lo + rack)).sum(axis=1)
                assert held.min() >= rack * mp // m and held.max() <= -(-rack * mp // m)
    # one group, groups of one worker: the same rule
    np.testing.assert_array_equal(_layouts.spread_workers(1, 4, 6), [[0, 1, 3, 4]])
    np.testing.assert_array_equal(
        _layouts.spread_workers(4, 1, 7), [[0], [1], [3], [5]]
    )
    with pytest.raises(ValueError, match="spread_workers: 3 groups of 6 workers need "
                       "18 workers, the cluster has num_workers=16"):  # fmt: skip
        _layouts.spread_workers(3, 6, 16)
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="spread_workers: groups must be an int"):
            _layouts.spread_workers(bad, 2, 8)


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(num_workers=0), ValueError, "layouts: num_workers must be >= 1"),
        (dict(num_workers=2.0), TypeError, "layouts: num_workers must be an int"),
        (dict(group_inputs=()), ValueError, "layouts: group_inputs must not be"),
        (dict(group_inputs=(0,)), ValueError, "layouts: group_inputs must be ints"),
        (dict(group_workers="4"), TypeError, "layouts: group_workers must be a"),
        (dict(max_idle=-1), ValueError, "layouts: max_idle must be an int >= 0"),
        (dict(max_idle=True), ValueError, "layouts: max_idle must be an int >= 0"),
    ],
)
def test_layouts_refuse_bad_sizes(kw, err, match):
    args = dict(num_workers=4) | kw
    m = args.pop("num_workers")
    with pytest.raises(err, match=match):
        cj.layouts(LIN, m, **args)
