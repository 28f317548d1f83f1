"""codedjax.serving: a stream's queries answered one by one.

The streaming frontend answers each query when it can be: at its own worker's
answer (a systematic code's, a replica's), at the answer after which a decode
gives it (FirstDecodable: a ParM group rebuilt while another is lost), else at
its group's decision; with dispatch on arrival a systematic code's query goes to
its own workers when it arrives. The discrete-event simulator (``simulate_load``
with its defaults: per query, dispatch on arrival) models the same frontend: on
the simulated cluster, which runs the real worker functions, both must give the
same latencies, waits, answers and work, exactly (to float rounding).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    FillDeadline,
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    SimulatedCluster,
    StreamingServer,
    ThreadCluster,
    poisson_arrivals,
    run_open_loop,
    simulate_load,
)

K = 4
SYS = cj.lagrange_code(num_inputs=K, num_workers=8, degree=1, systematic=True)
PARM = cj.parity_code(num_inputs=K, group=2)  # M = 6: bases 0-3, parities 4, 5
REP = cj.replication_code(num_inputs=K, num_workers=8)  # worker i: query i % 4
NSYS = cj.lagrange_code(num_inputs=K, num_workers=8, degree=1)  # no own workers


def affine(v):
    return v * jnp.float32(2) - jnp.float32(1)


def parity(p):  # ParM's parity model, exact for f = affine: sum_j f(x_j), k = 2
    return p * jnp.float32(2) - jnp.float32(2)


def _fns(code):
    return {"base": affine, "parity": parity} if code is PARM else affine


LAT = cj.RandomSlowdown(cj.ShiftedExponential(0.001, 0.001), prob=0.1, factor=10.0)
FAULTY = Injector(latency=LAT, fault_kinds=("raise", "hang", "nan"), max_faulty=2,
                  seed=5)  # fmt: skip
FILL = FillDeadline(1.5, window=8, maximum=0.01)


def _queries(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def _check_value(r, q):
    """An ok answer against f(q) = 2 q - 1 within float32 rounding through its
    decode, 16 cond eps32 max |f|: cond 1 for an own worker's answer (error
    0.0, no decode), the group's decode's, or 2 for a ParM query rebuilt apart
    from its group's decode (parity minus one answer: row sum of |A| = k); a
    query not answered has a status and zeros."""
    if not r.ok:
        assert r.status != 0 and not r.value.any() and r.error == np.inf
        return
    ref = 2 * q.astype(np.float64) - 1
    apart = r.result is None or not r.result.ok
    cond = 1.0 if r.error == 0 else 2.0 if apart else r.result.cond
    tol = 16 * cond * float(np.finfo(np.float32).eps) * np.abs(ref).max()
    np.testing.assert_allclose(r.value, ref, rtol=0, atol=tol)


def _frontend_and_simulator(code, policy, dispatch, gd, inj, n=80, rate=900.0):
    qs = _queries(n)
    times = poisson_arrivals(rate, n, seed=3)
    server = Server(code, _fns(code), backend=SimulatedCluster(injector=inj),
                    policy=policy)  # fmt: skip
    groups: dict = {}
    with StreamingServer(server, group_deadline=gd, dispatch=dispatch,
                         on_group=groups.__setitem__) as front:  # fmt: skip
        run = run_open_loop(front, qs, times)
    sim = simulate_load(code, policy, inj, times, group_deadline=gd,
                        dispatch=dispatch)  # fmt: skip
    assert run.submitted == run.answered == n and run.lost == run.errors == 0
    rs = run.results
    np.testing.assert_array_equal([r.group for r in rs], sim.group)
    np.testing.assert_allclose(run.latency, sim.latency, rtol=0, atol=1e-9)
    np.testing.assert_allclose([r.waited for r in rs], sim.waited, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(run.ok, sim.ok)
    res = [groups[g] for g in range(len(sim.sent))]
    np.testing.assert_array_equal([r.mask.sum() for r in res], sim.num_used)
    np.testing.assert_array_equal([r.timed_out for r in res], sim.timed_out)
    np.testing.assert_array_equal([r.evaluations for r in res], sim.evaluations)
    np.testing.assert_allclose([r.busy for r in res], sim.busy, rtol=0, atol=1e-9)
    for r, q in zip(rs, qs, strict=True):
        _check_value(r, q)
        # answered by its group's decision; with its group's result, at it
        decided = sim.decided[r.group] - r.arrival
        assert r.latency <= decided + 1e-9
        assert r.result is None or abs(r.latency - decided) < 1e-9
    return rs, sim


@pytest.mark.parametrize(
    "code, policy, dispatch, gd",
    [
        (SYS, FixedN(5, deadline=0.02), "arrival", 0.004),
        (SYS, FirstDecodable(deadline=0.02), "group", FILL),
        (PARM, FirstDecodable(deadline=0.02), "arrival", FILL),
        (PARM, FixedN(4, deadline=0.02), "group", 0.004),
        (REP, FirstDecodable(deadline=0.02), "arrival", 0.004),
        (REP, FixedN(4, deadline=0.02), "arrival", FILL),
        (NSYS, FirstDecodable(deadline=0.02), "arrival", FILL),
        (NSYS, FixedN(5, deadline=0.02), "group", 0.004),
    ],
    ids=[
        "systematic",
        "systematic-first-group-fill",
        "parm-first-fill",
        "parm-group",
        "replication-first",
        "replication-fill",
        "lagrange-fill",
        "lagrange-group",
    ],  # fmt: skip
)
def test_each_query_is_answered_as_the_simulator_answers_it(code, policy, dispatch,
                                                            gd):  # fmt: skip
    rs, sim = _frontend_and_simulator(code, policy, dispatch, gd, FAULTY)
    early = np.array([r.result is None for r in rs])
    if code is NSYS:  # no own workers: every query at its group's decision, and
        assert not early.any()  # dispatch on arrival is dispatch by group
        other = "group" if dispatch == "arrival" else "arrival"
        alt = simulate_load(code, policy, FAULTY, poisson_arrivals(900.0, 80, seed=3),
                            group_deadline=gd, dispatch=other)  # fmt: skip
        np.testing.assert_array_equal(alt.latency, sim.latency)
        return
    # a systematic code answers queries at their own workers, before their
    # group's decision; with dispatch on arrival none waits to be sent
    assert early.sum() > len(rs) // 4
    if dispatch == "arrival":
        assert all(r.waited == 0 for r in rs)
    else:
        assert any(r.waited > 1e-4 for r in rs)


def test_a_parm_group_decodes_on_its_own_while_the_other_is_lost():
    # group 0 (queries 0, 1): base 0 hangs, rebuilt from parity 4 and base 1;
    # group 1 (queries 2, 3): both bases raise, lost
    inj = Injector(latency=LAT, failed_workers={0: "hang", 2: "raise", 3: "raise"},
                   seed=2)  # fmt: skip
    for policy in (FirstDecodable(deadline=0.01), FixedN(3, deadline=0.01)):
        rs, sim = _frontend_and_simulator(PARM, policy, "arrival", 0.004, inj,
                                          n=12, rate=300.0)  # fmt: skip
        slot = np.array([r.slot for r in rs])
        ok = np.array([r.ok for r in rs])
        assert ok[slot < 2].all() and not ok[slot >= 2].any()
        assert all(r.status == cj.Status.TOO_FEW_RESPONSES for r in rs if not r.ok)
        # the group's own decode is not ok (a group lost), its queries still are
        assert all(not r.result.ok for r in rs if r.result is not None)
        own = [r for r in rs if r.slot == 1]
        assert all(r.error == 0 and r.result is None for r in own)
        rebuilt = [r for r in rs if r.slot == 0]
        if isinstance(policy, FirstDecodable):  # at its rebuild, long before the
            assert sim.timed_out.all()  # decision: the deadline (a hung worker)
            assert all(r.result is None and r.error > 0 for r in rebuilt)
            assert all(r.latency < 0.01 for r in rebuilt)
        else:  # at the decision (3 answers: 1, 4, 5), from the answers in hand
            assert not sim.timed_out.any()
            assert all(r.result is not None and r.ok for r in rebuilt)


def test_no_query_is_lost_answered_one_by_one_on_the_thread_cluster_under_faults():
    qs = _queries(48, seed=2)
    times = poisson_arrivals(400.0, len(qs), seed=4)
    server = Server(SYS, affine, backend=ThreadCluster(injector=FAULTY),
                    policy=FixedN(5, deadline=1.0))  # fmt: skip
    ends: dict = {}
    with StreamingServer(server, group_deadline=0.004, example=qs[0],
                         on_group=ends.__setitem__) as front:  # fmt: skip
        run = run_open_loop(front, qs, times, timeout=30.0)
    assert run.submitted == run.answered == len(qs)
    assert run.lost == run.errors == run.rejected == 0
    rs = run.results
    assert all(r.latency >= r.waited >= 0 for r in rs)
    for r, q in zip(rs, qs, strict=True):
        _check_value(r, q)
    # most queries answered by their own workers, before their group's decision
    # (whose evaluations then reach on_group); a hung or NaN own worker's query
    # waits for the decision
    assert sum(r.result is None for r in rs) > len(rs) // 2
    assert all(np.isnan(r.evaluations) == (r.result is None) for r in rs)
    assert sorted(ends) == sorted({r.group for r in rs})
    assert all(0 < res.evaluations <= SYS.num_workers for res in ends.values())


def test_a_query_is_answered_once_and_the_engine_says_so_otherwise():
    server = Server(SYS, affine, backend=SimulatedCluster(), policy=FixedN(5))
    engine = server.engine
    q = _queries(1)[0]
    r = engine.begin(None, q, "test")
    engine.send_query(r, 0, q)
    engine._answer(r, 0, q, True, 0, 0.0, None)
    with pytest.raises(RuntimeError, match="internal error: query 0 of request 0 "
                                           "answered twice"):  # fmt: skip
        engine._answer(r, 0, q, True, 0, 0.0, None)
    engine.abort()
    server.close()


def test_a_failed_warm_up_with_dispatch_on_arrival_fails_every_query():
    server = Server(SYS, lambda v: (v > 0).astype(jnp.int32),
                    backend=SimulatedCluster(), policy=FixedN(5))  # fmt: skip
    with StreamingServer(server, group_deadline=0.01) as front:
        futs = [front.submit(q) for q in _queries(6)]
        for f in futs:
            with pytest.raises(RuntimeError, match="StreamingServer: the server's "
                                                   "warm-up failed"):  # fmt: skip
                f.result()


def test_bad_dispatch_on_group_and_group_deadline_are_clear_errors():
    def make(**kw):
        s = Server(SYS, affine, backend=SimulatedCluster(), policy=FixedN(5))
        return StreamingServer(s, **kw)

    with pytest.raises(ValueError, match="StreamingServer: dispatch must be 'arr"):
        make(group_deadline=0.01, dispatch="now")
    with pytest.raises(ValueError, match="StreamingServer: dispatch must be .*None"):
        make(group_deadline=0.01, dispatch=None)
    with pytest.raises(TypeError, match="StreamingServer: on_group must be callable"):
        make(group_deadline=0.01, on_group=1)
    with pytest.raises(TypeError, match="StreamingServer: group_deadline must be .*"
                                        "FillDeadline"):  # fmt: skip
        make(group_deadline=[0.01])
    with pytest.raises(ValueError, match="FillDeadline: maximum must be >= minimum"):
        FillDeadline(maximum=1e-4)
    with make(group_deadline=FILL, dispatch="group") as front:
        assert front.group_deadline is FILL and front.dispatch == "group"


# ----------------------------------------------------------------------------------
# no query lost with dispatch on arrival: every future gets its answer or an error
# naming the cause, whatever step fails (a marked group: queries of value MARK)

SYS3 = cj.lagrange_code(num_inputs=3, num_workers=6, degree=1, systematic=True)
MARK = 1e3


class _FaultyCode:
    """``SYS3`` whose encode (or decode) raises on the marked group."""

    def __init__(self, step):
        self._step = step

    def __getattr__(self, name):
        return getattr(SYS3, name)

    def encode(self, x):
        if self._step == "encode" and np.abs(np.asarray(x)).max() > 100:
            raise ValueError("encode fault")
        return SYS3.encode(x)

    def decode_answers(self, answers):
        if self._step == "decode" and np.abs(np.asarray(answers.y)).max() > 100:
            raise FloatingPointError("decode fault")
        return SYS3.decode_answers(answers)


_STEPS = ("encode", "dispatch", "decode", "nan", "backend")


def _faulty(base, step, **kw):
    class Faulty(base):
        def submit_part(self, request_id, rows, workers, **kw):
            if step == "dispatch" and request_id == 1:
                raise ConnectionError("dispatch fault")
            return super().submit_part(request_id, rows, workers, **kw)

        def next_completed(self, timeout):
            c = super().next_completed(timeout)
            if c is not None and step == "backend":
                raise OSError("backend fault")
            if c is not None and step == "nan" and c.worker == 1:
                c = c._replace(value=np.full_like(c.value, np.nan))
            return c

    return Faulty(**kw)


@pytest.mark.parametrize(
    "kind, step, want",
    [
        ("sim", "encode", "its group (request 1) failed: ValueError('encode fault')"),
        ("sim", "dispatch", "its group (request 1) failed: ConnectionError("),
        ("sim", "decode", None),  # its queries answered by their own workers
        ("sim", "nan", None),  # query 1's own worker: answered by the decode
        ("sim", "backend", "OSError('backend fault')"),
        ("threads", "dispatch", "its group (request 1) failed: ConnectionError("),
        ("threads", "backend", "OSError('backend fault')"),
    ],
    ids=lambda v: v if v in ("sim", "threads", *_STEPS) else "fails" if v else "ok",
)
def test_no_query_is_lost_with_dispatch_on_arrival_whatever_step_fails(
    kind, step, want
):
    base = {"sim": SimulatedCluster, "threads": ThreadCluster}[kind]
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.001), seed=1)
    code = _FaultyCode(step) if step in ("encode", "decode") else SYS3
    server = Server(code, affine, backend=_faulty(base, step, injector=inj),
                    policy=FixedN(6, deadline=5.0))  # fmt: skip
    qs = _queries(9)
    qs[3:6] = MARK  # group 1
    ends: dict = {}
    with StreamingServer(server, group_deadline=60.0,
                         on_group=ends.__setitem__) as front:  # fmt: skip
        futs = []
        for q in qs:
            try:
                futs.append(front.submit(q))
            except RuntimeError as exc:  # a real clock: the frontend stopped
                assert step == "backend" and want in str(exc)
                futs.append(None)
        got = []
        for f in futs:
            try:
                got.append(None if f is None else f.result(20.0))
            except RuntimeError as exc:
                got.append(exc)
    for i, (g, q) in enumerate(zip(got, qs, strict=True)):
        marked = 3 <= i < 6
        if g is None:
            continue
        if want is None or (step != "backend" and not marked):
            assert not isinstance(g, BaseException), (i, g)
            _check_value(g, q)
            assert g.ok
        else:
            assert isinstance(g, RuntimeError) and want in str(g), (i, g)
            assert g.__cause__ is not None
    if step == "decode":  # the group's own error reaches on_group alone
        assert isinstance(ends[1], FloatingPointError) and all(
            g.result is None for g in got[3:6]
        )


@pytest.mark.parametrize(
    "code",
    [
        cj.repapprox_code(num_inputs=K, num_workers=8, replication=1),
    ],
    ids=["repapprox"],
)
def test_approximate_and_circle_codes_are_answered_as_simulated(code):
    """RepApprox decodes a query from its first answers (Berrut's fallback),
    but not before the group is sent whole."""
    n, times = 30, poisson_arrivals(900.0, 30, seed=3)
    policy = FirstDecodable(deadline=0.02)
    server = Server(code, affine, backend=SimulatedCluster(injector=FAULTY),
                    policy=policy)  # fmt: skip
    with StreamingServer(server, group_deadline=0.004) as front:
        run = run_open_loop(front, _queries(n), times)
    sim = simulate_load(code, policy, FAULTY, times, group_deadline=0.004)
    assert run.answered == n and run.lost == run.errors == 0
    np.testing.assert_allclose(run.latency, sim.latency, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(run.ok, sim.ok)
    assert (sim.latency >= 0).all()


class _Watched:
    """A code that records, at each decode, which query its answers are (the
    queries are i + 0 in every entry, f = affine) and whether that query's
    future was done then; and counts its encodes."""

    def __init__(self, code, futs):
        self._code, self._futs = code, futs
        self.seen: list = []
        self.encodes = 0

    def __getattr__(self, name):
        return getattr(self._code, name)

    def encode(self, x):
        self.encodes += 1
        return self._code.encode(x)

    def decode_answers(self, answers):
        y = np.asarray(answers.y)[np.asarray(answers.mask)]
        i = int(round((float(y[0, 0]) + 1) / 2))
        self.seen.append((i, i < len(self._futs) and self._futs[i].done()))
        return self._code.decode_answers(answers)


@pytest.mark.parametrize("kind", ["sim", "threads"])
def test_an_own_answer_is_settled_before_its_groups_decode_and_no_row_is_encoded(
    kind,
):
    """A query a replica answers is answered at once: its future is done before
    the decode that decides its group (which costs the serving thread a
    compiled call) runs; a group whose every row went out on arrival is not
    encoded again at its close (a code with coded rows is, once a group)."""
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.001), seed=1)
    base = {"sim": SimulatedCluster, "threads": ThreadCluster}[kind]
    qs = np.repeat(np.arange(8, dtype=np.float32)[:, None], 4, axis=1)
    for code, coded in ((cj.replication_code(num_inputs=1, num_workers=3), False),
                        (SYS, True)):  # fmt: skip
        futs: list = []
        watched = _Watched(code, futs)
        server = Server(watched, affine, backend=base(injector=inj),
                        policy=FirstDecodable(deadline=1.0))  # fmt: skip
        with StreamingServer(server, group_deadline=0.05, example=qs[0]) as front:
            watched.seen.clear()
            futs.append(front.submit(qs[0]))
            futs[0].result(10.0)  # (the frontend's one probe of the code)
            before = watched.encodes
            for q in qs[1 : code.num_inputs] if coded else qs[1:]:
                futs.append(front.submit(q))
            got = [f.result(10.0) for f in futs]
        assert all(g.ok for g in got)
        if coded:  # the first group, its K queries in: encoded at its close
            assert watched.encodes - before == 1
            continue
        assert watched.encodes == before
        assert sorted(i for i, _ in watched.seen) == list(range(len(qs)))
        assert all(done for _, done in watched.seen), watched.seen
        assert all(g.result is None and g.error == 0 for g in got)
