"""codedjax.serving: a stream of queries under load.

The streaming frontend groups queries into coding groups of K in arrival order;
workers are machines (one evaluation at a time from their own queue; a decoded
group's queued evaluations dropped); the discrete-event simulator
(``simulate_load``) runs the same queues on the same draws without a model, and
must give the same latencies as the frontend on the simulated cluster, which runs
the real worker functions. The thread-cluster runs check that no query is lost
under the injector's faults; their latencies are measured by ``benchmarks.load``.
"""

from __future__ import annotations

import threading

import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    ArrivalTimes,
    FirstDecodable,
    FixedN,
    Injector,
    QueueFull,
    Server,
    SimulatedCluster,
    StreamingServer,
    ThreadCluster,
    bursty_arrivals,
    poisson_arrivals,
    run_open_loop,
    simulate_load,
)

K, M = 3, 8
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 3
REPL = cj.replication_code(num_inputs=K, num_workers=M)  # workers i -> query i % 3


def affine(v):
    return v * jnp.float32(2) - jnp.float32(1)


LAT = cj.RandomSlowdown(cj.ShiftedExponential(0.001, 0.001), prob=0.1, factor=10.0)
FAULTY = Injector(latency=LAT, fault_kinds=("raise", "hang", "nan"), max_faulty=2,
                  seed=5)  # fmt: skip


def _close_to_affine(r, q):
    """A decoded answer against f(q) = 2 q - 1, within float32 rounding through
    the group's decoding system: 16 cond eps32 max |f|."""
    ref = 2 * q.astype(np.float64) - 1
    cond = 1.0 if r.result is None else r.result.cond  # None: its own worker's
    tol = 16 * cond * float(np.finfo(np.float32).eps) * np.abs(ref).max()
    np.testing.assert_allclose(r.value, ref, rtol=0, atol=tol)


def _queries(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


@pytest.mark.parametrize(
    "code, policy, times_out",
    [
        (CODE, FixedN(5, deadline=0.02), True),
        # D = 3 of 8 with at most 4 faulty: a decodable prefix always comes
        (CODE, FirstDecodable(deadline=0.02), False),  # Code.decodable_from
        (REPL, FirstDecodable(deadline=0.02), True),  # its closed form for replicas
    ],
    ids=["chebyls", "chebyls-first", "replication"],
)
def test_the_simulator_reproduces_the_frontend_on_the_simulated_cluster(
    code, policy, times_out
):
    # 240 queries at 900/s: groups of 3 every ~3.3 ms on workers busy ~2 ms each
    # (10x with p = 0.1): the queues are long enough to matter
    qs = _queries(240)
    times = poisson_arrivals(900.0, len(qs), seed=3)
    gd = 0.004
    # up to 4 faulty workers: a group with a hung one and 3 others faulty waits
    # for its deadline
    inj = Injector(latency=LAT, fault_kinds=("raise", "hang", "nan"), max_faulty=4,
                   seed=5)  # fmt: skip
    server = Server(code, affine, backend=SimulatedCluster(injector=inj),
                    policy=policy)  # fmt: skip
    groups: dict = {}  # every group's ServeResult (a query answered early has none)
    with StreamingServer(server, group_deadline=gd,
                         on_group=groups.__setitem__) as front:  # fmt: skip
        run = run_open_loop(front, qs, times)
    sim = simulate_load(code, policy, inj, times, group_deadline=gd)
    assert run.submitted == run.answered == len(qs) and run.lost == run.errors == 0
    rs = run.results
    np.testing.assert_array_equal([r.group for r in rs], sim.group)
    np.testing.assert_allclose(run.latency, sim.latency, rtol=0, atol=1e-9)
    np.testing.assert_allclose([r.waited for r in rs], sim.waited, rtol=0, atol=1e-9)
    np.testing.assert_array_equal([r.ok for r in rs], sim.ok)
    res = [groups[g] for g in range(len(sim.sent))]
    np.testing.assert_array_equal([r.mask.sum() for r in res], sim.num_used)
    np.testing.assert_array_equal([r.timed_out for r in res], sim.timed_out)
    np.testing.assert_array_equal([r.evaluations for r in res], sim.evaluations)
    np.testing.assert_allclose([r.busy for r in res], sim.busy, rtol=0, atol=1e-9)
    # queueing shows: some groups' evaluations were dropped before they began
    assert (sim.evaluations < M).any()
    assert sim.timed_out.any() == times_out and sim.ok.all() != times_out
    # the answers are the workers' map of each query (degree 1: exact to rounding)
    for r, q in zip(rs, qs, strict=True):
        if r.ok:
            _close_to_affine(r, q)
    # without queueing (idle workers) the latencies are shorter, never longer
    idle = simulate_load(code, policy, inj, times, group_deadline=gd,
                         queueing=False)  # fmt: skip
    assert (idle.latency <= sim.latency + 1e-12).all()
    assert (idle.latency < sim.latency - 1e-6).any()


def test_groups_fill_in_arrival_order_or_leave_at_their_deadline_padded():
    # arrivals 0, 1, 2 ms (a full group), then 10 ms and 30 ms (alone each)
    times = np.array([0.0, 0.001, 0.002, 0.010, 0.030])
    qs = _queries(5, seed=1)
    inj = Injector(latency=cj.Constant(0.002))
    server = Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                    policy=FixedN(K))  # fmt: skip
    with StreamingServer(server, group_deadline=0.005) as front:
        run = run_open_loop(front, qs, times)
    rs = run.results
    assert [r.group for r in rs] == [0, 0, 0, 1, 2]
    assert [r.slot for r in rs] == [0, 1, 2, 0, 0]
    assert [r.group_size for r in rs] == [3, 3, 3, 1, 1]
    waited = [0.002, 0.001, 0.0, 0.005, 0.005]
    np.testing.assert_allclose([r.waited for r in rs], waited, atol=1e-12)
    np.testing.assert_allclose(run.latency, np.add(waited, 0.002), atol=1e-12)
    for r, q in zip(rs, qs, strict=True):
        _close_to_affine(r, q)
    # a lone query's group was padded with copies of it: every worker computed
    assert rs[3].evaluations == M and rs[0].evaluations == pytest.approx(M / 3)


def test_simulated_workers_queue_and_a_decoded_request_drops_its_queued_work():
    inj = Injector(latency=cj.Constant(0.01))
    backend = SimulatedCluster(injector=inj)
    backend.start(affine, 2)
    rows = np.ones((2, 4), np.float32)
    backend.submit(0, rows)
    backend.submit(1, rows)
    backend.submit(2, rows)
    c = backend.next_completed(None)
    assert (c.request_id, c.time) == (0, 0.01)
    backend.cancel(0)  # worker 1 abandons request 0 at t = 0.01
    got = [backend.next_completed(None) for _ in range(2)]
    assert {(g.request_id, g.worker) for g in got} == {(1, 0), (1, 1)}
    assert all(g.time == pytest.approx(0.02) for g in got)
    backend.cancel(1)
    backend.cancel(2)  # both queued: dropped, never begun
    assert backend.work(0) == (2, pytest.approx(0.02))
    assert backend.work(1) == (2, pytest.approx(0.02))
    assert backend.work(2) == (0, 0.0)
    np.testing.assert_allclose(backend.busy_time, [0.02, 0.02])


def test_no_query_is_lost_on_the_thread_cluster_under_faults():
    # 300 queries at 200/s, workers raising, hanging or answering NaN at random
    qs = _queries(300, seed=2)
    times = poisson_arrivals(200.0, len(qs), seed=4)
    server = Server(CODE, affine, backend=ThreadCluster(injector=FAULTY),
                    policy=FixedN(4, deadline=1.0))  # fmt: skip
    with StreamingServer(server, group_deadline=0.004, example=qs[0]) as front:
        run = run_open_loop(front, qs, times, timeout=30.0)
    assert run.submitted == run.answered == len(qs)
    assert run.lost == run.errors == run.rejected == 0
    rs = run.results
    assert all(r.latency >= r.waited >= 0 for r in rs)
    # every answer is the decode of its group's answers (ok, or not with a status)
    for r, q in zip(rs, qs, strict=True):
        if r.ok:
            _close_to_affine(r, q)
        else:
            assert r.status != 0 and not r.value.any()
    # how many decode depends on the machine's speed (a group late past the
    # policy's deadline does not), so only that some do
    assert any(r.ok for r in rs)
    assert all(0 < r.evaluations <= M for r in rs)


def test_submit_from_many_threads_on_the_thread_cluster():
    qs = _queries(60, seed=3)
    server = Server(CODE, affine, backend=ThreadCluster(), policy=FixedN(K))
    futs: list = [None] * len(qs)
    with StreamingServer(server, group_deadline=0.002, example=qs[0]) as front:

        def client(c):
            for i in range(c, len(qs), 4):
                futs[i] = front.submit(qs[i])

        ts = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        got = [f.result(10.0) for f in futs]
    assert all(g.ok for g in got)
    for g, q in zip(got, qs, strict=True):
        _close_to_affine(g, q)


def test_bad_input_and_back_pressure_are_clear_errors():
    def make(**kw):
        s = Server(CODE, affine, backend=SimulatedCluster(), policy=FixedN(K))
        return StreamingServer(s, **kw)

    for gd in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="StreamingServer: group_deadline must"):
            make(group_deadline=gd)
    with pytest.raises(TypeError, match="StreamingServer: group_deadline must be"):
        make(group_deadline="1s")
    with pytest.raises(ValueError, match="StreamingServer: max_pending must be"):
        make(group_deadline=0.01, max_pending=0)
    front = make(group_deadline=0.01, max_pending=4)
    q = _queries(1)[0]
    for _ in range(4):
        front.submit(q)
    with pytest.raises(QueueFull, match=r"StreamingServer.submit: 4 queries.*max"):
        front.submit(q)
    assert front.rejected == 1
    with pytest.raises(ValueError, match=r"StreamingServer.submit: every query must"):
        front.submit(np.ones(5, np.float32))
    with pytest.raises(TypeError, match=r"StreamingServer.submit: a query must be"):
        front.submit(np.ones(4, np.int32))
    with pytest.raises(ValueError, match=r"StreamingServer.submit: arrivals must"):
        front.submit(q, at=-1.0)
    with pytest.raises(RuntimeError, match=r"Server.infer: a StreamingServer owns"):
        front.server.infer(np.ones((K, 4), np.float32))
    front.drain()
    assert front.pending == 0
    front.close()
    with pytest.raises(RuntimeError, match="StreamingServer.submit: .* closed"):
        front.submit(q)
    with pytest.raises(TypeError, match="StreamingServer: server must be"):
        StreamingServer(object(), group_deadline=0.01)
    with pytest.raises(RuntimeError, match="StreamingServer: the server is closed"):
        StreamingServer(front.server, group_deadline=0.01)
    with pytest.raises(TypeError, match="run_open_loop: frontend must be"):
        run_open_loop(object(), [q], [0.0])
    with make(group_deadline=0.01) as f2:
        with pytest.raises(ValueError, match=r"run_open_loop: times must be \[Q\]"):
            run_open_loop(f2, [q, q], [0.0])
        with pytest.raises(ValueError, match="run_open_loop: times must be non-dec"):
            run_open_loop(f2, [q, q], [0.1, 0.0])
        with pytest.raises(ValueError, match="run_open_loop: max_seconds must be"):
            run_open_loop(f2, [q], [0.0], max_seconds=-1.0)
    with pytest.raises(ValueError, match="poisson_arrivals: rate must be"):
        poisson_arrivals(0.0, 10)
    with pytest.raises(ValueError, match="bursty_arrivals: need peak"):
        bursty_arrivals(10.0, 10, peak=5.0, duty=0.5)
    with pytest.raises(TypeError, match="simulate_load: the policy must state"):
        simulate_load(CODE, object(), FAULTY, [0.0], group_deadline=0.01)
    # Adaptive decides on the answers' values: no rule without a decode
    adaptive = Adaptive(1e-2, deadline=0.05)
    with pytest.raises(TypeError, match="simulate_load: .*got Adaptive"):
        simulate_load(CODE, adaptive, FAULTY, [0.0], group_deadline=0.01)
    with pytest.raises(ValueError, match="simulate_load: workers can hang"):
        simulate_load(CODE, FixedN(3), FAULTY, [0.0], group_deadline=0.01)


def test_a_frontend_closed_without_waiting_fails_its_queries_with_an_error():
    inj = Injector(latency=cj.Constant(0.01), failed_workers={0: "hang"})
    server = Server(CODE, affine, backend=ThreadCluster(injector=inj),
                    policy=FixedN(M, deadline=30.0))  # fmt: skip
    front = StreamingServer(server, group_deadline=0.001)
    fut = front.submit(_queries(1)[0])
    front.close(wait=False)
    with pytest.raises(RuntimeError, match="StreamingServer.*closed before"):
        fut.result(5.0)
    assert server.backend.alive_threads == 0


def test_arrival_processes_have_their_rate_and_bursts():
    n = 20_000
    p = poisson_arrivals(500.0, n, seed=1)
    b = bursty_arrivals(500.0, n, peak=3.0, duty=0.25, burst=0.05, seed=1)
    assert len(p) == len(b) == n and (np.diff(b) >= 0).all()
    for t in (p, b):
        assert abs(n / t[-1] / 500.0 - 1) < 0.05

    # counts in 20 ms windows: Poisson has variance = mean, bursts far more
    def dispersion(t):
        c = np.bincount((t // 0.02).astype(int))
        return c.var() / c.mean()

    assert 0.8 < dispersion(p) < 1.2
    assert dispersion(b) > 3.0
    assert len(poisson_arrivals(500.0, n, seed=1, max_time=1.0)) < 600


@pytest.mark.parametrize("code", [CODE, REPL], ids=["chebyls", "replication"])
def test_arrival_times_without_a_decode_follow_the_code_structure(code):
    """ArrivalTimes without a decode (simulate_load's) give FirstDecodable the
    first arrival from its need on after which the code may decode, within the
    deadline, else all_done: what the general rule gives with a decode that is ok
    exactly where the code may decode."""
    rng = np.random.default_rng(11)
    t = rng.exponential(1.0, (300, M))
    t[rng.random(t.shape) < 0.25] = np.inf  # failed workers
    done = np.where(np.isfinite(t), t, 0.0).max(axis=1) + 0.5
    done[:20] = np.inf  # a hung worker
    policy = FirstDecodable()

    def structural(masks):
        return np.asarray(code.may_decode(masks)), np.zeros(len(masks))

    for deadline in (None, 0.8):
        fast = policy.decision_times(ArrivalTimes(code, t, done, deadline))
        ref = policy.decision_times(ArrivalTimes(code, t, done, deadline, structural))
        np.testing.assert_array_equal(fast, ref)
        assert (fast < done).any()
    assert (fast == done).any()  # some request undecided by the deadline
    with pytest.raises(TypeError, match="ArrivalTimes.decode: these arrival times"):
        ArrivalTimes(code, t, done, None).decode(np.isfinite(t))


def test_the_simulator_shards_the_workers_and_answers_replicas_per_query():
    # shards: S copies of the workers, groups round robin; uncoded single queries
    # at a constant 3 ms on S = 4 workers queue like 4 separate streams
    a = poisson_arrivals(2000.0, 400, seed=6)
    inj = Injector(latency=cj.Constant(0.003))
    one = cj.uncoded_code(num_inputs=1)
    sh = simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, shards=4)
    for s in range(4):
        alone = simulate_load(one, FixedN(1), inj, a[s::4], group_deadline=0.01)
        np.testing.assert_allclose(sh.latency[s::4], alone.latency, atol=1e-12)
    assert sh.latency.max() > 0.003 + 1e-6  # the queues matter at this rate
    # the draws: groups 4 r .. 4 r + 3 take request r's plan of the 4 workers
    inj = Injector(latency=LAT, seed=9)
    idle = simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, shards=4,
                         queueing=False)  # fmt: skip
    plan, _ = inj.plan(np.arange(100), 4)
    np.testing.assert_allclose(idle.latency, plan.reshape(-1), atol=1e-12)
    # a cluster of 7 for the 4 copies: request r's plan of 7 workers, copy s on
    # worker floor(7 s / 4) (spread: 0, 1, 3, 5; 2, 4 and 6 idle)
    wide = simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, shards=4,
                         cluster=7, queueing=False)  # fmt: skip
    plan, _ = inj.plan(np.arange(100), 7)
    np.testing.assert_allclose(
        wide.latency, plan[:, [0, 1, 3, 5]].reshape(-1), atol=1e-12
    )
    same = simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, shards=4,
                         cluster=4, queueing=False)  # fmt: skip
    np.testing.assert_array_equal(same.latency, idle.latency)
    with pytest.raises(ValueError, match=r"cluster must hold the shards' workers, "
                       r"shards x num_workers = 4 x 1 = 4, got cluster=3"):  # fmt: skip
        simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, shards=4, cluster=3)
    with pytest.raises(TypeError, match="simulate_load: cluster must be an int"):
        simulate_load(one, FixedN(1), inj, a, group_deadline=0.01, cluster=4.0)
    # per query: each query answered at its first replica (idle workers: the
    # least delay among its replicas from when it was sent: its group's close
    # with dispatch by group, its own arrival with dispatch on arrival)
    a = poisson_arrivals(300.0, 60, seed=7)
    inj = Injector(latency=LAT, seed=8)
    sim = simulate_load(REPL, FirstDecodable(), inj, a, group_deadline=0.004,
                        queueing=False, dispatch="group")  # fmt: skip
    whole = simulate_load(REPL, FirstDecodable(), inj, a, group_deadline=0.004,
                          queueing=False, dispatch="group",
                          per_query=False)  # fmt: skip
    delays, _ = inj.plan(np.arange(len(sim.sent)), M)
    starts = np.r_[0, np.cumsum(sim.group_size)[:-1]]
    slot = np.arange(len(a)) - starts[sim.group]
    pairs = zip(sim.group, slot, strict=True)
    first = np.array([delays[g][REPL.task == j].min() for g, j in pairs])
    np.testing.assert_allclose(sim.latency, sim.sent[sim.group] + first - a, atol=1e-12)
    np.testing.assert_allclose(sim.decided, whole.decided, atol=0)
    assert (sim.latency <= whole.latency + 1e-12).all()
    assert (sim.latency < whole.latency - 1e-6).any()
    early = simulate_load(REPL, FirstDecodable(), inj, a, group_deadline=0.004,
                          queueing=False)  # fmt: skip
    np.testing.assert_allclose(early.latency, first, atol=1e-12)
    assert (early.waited == 0).all() and (sim.waited > 0).any()
    with pytest.raises(ValueError, match="simulate_load: dispatch must be"):
        simulate_load(CODE, FixedN(3), inj, a, group_deadline=0.01, dispatch="now")
    with pytest.raises(ValueError, match="simulate_load: shards must be an int >= 1"):
        simulate_load(CODE, FixedN(3), inj, a, group_deadline=0.01, shards=0)
    with pytest.raises(ValueError, match="simulate_load: group_deadline must"):
        simulate_load(CODE, FixedN(3), inj, a, group_deadline=0.0)
