"""codedjax.serving: the server, its policies, the simulated and thread backends.

The reliability claims are checked on the simulated cluster (10,000 requests, a
deterministic virtual clock) and on the thread cluster (a few hundred requests with
short injected delays). No test asserts a wall time: on the thread cluster the
timing claims are checked as orderings (decided at or after the deadline, released
by cancellation), their sizes are measured by ``python -m benchmarks.serving``.
"""

from __future__ import annotations

import ast
import functools
import gc
import pathlib
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    Backend,
    Deadline,
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    SimulatedCluster,
    StreamingServer,
    ThreadCluster,
    simulate_latency,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def affine(v):
    """A degree-1 bf16 worker (D = K) for the cheap reliability runs."""
    b = v.astype(jnp.bfloat16)
    return b * jnp.bfloat16(2) - jnp.bfloat16(1)


# one code for most tests (K = 3, M = 8, degree 1: D = 3), so they share compilations
K, M = 3, 8
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)


def affine32(v):
    """The same affine map in float32 (exact recovery check)."""
    return v * jnp.float32(2) - jnp.float32(1)


def _offline(code, r):
    """The offline decode of the answers and mask a ServeResult reports."""
    return code.decode_answers(cj.Answers(jnp.asarray(r.responses),
        jnp.asarray(r.mask), jnp.asarray(r.order)))  # fmt: skip


@functools.cache
def _vmapped(worker):
    return jax.jit(jax.vmap(worker))


def _expected_answers(code, worker, x):
    """What the M workers answer on x, computed apart from the server."""
    return np.asarray(_vmapped(worker)(code.encode(x)))


# ------------------------------------------------------------------ known truth


def test_infer_recovers_an_affine_map_exactly_in_float32():
    x = np.random.default_rng(0).uniform(-1, 1, (K, 4)).astype(np.float32)
    with Server(CODE, affine32, backend=SimulatedCluster(),
                policy=FixedN(6)) as server:  # fmt: skip
        r = server.infer(x)
    assert r.ok and r.status == int(cj.Status.SUCCESS) and r.num_used == 6
    ref = 2 * x.astype(np.float64) - 1
    # float32 workers and float32 decode: error <= cond * O(eps32) * |f|
    tol = 16 * r.cond * float(np.finfo(np.float32).eps) * np.abs(ref).max()
    np.testing.assert_allclose(r.value, ref, atol=tol, rtol=0)
    assert r.mask.sum() == 6 and r.cancelled.sum() == M - 6
    np.testing.assert_array_equal(np.isfinite(r.arrival_times), ~r.cancelled)


def test_simulated_latency_is_the_order_statistic_of_the_delays():
    inj = Injector(
        latency=cj.RandomSlowdown(
            cj.ShiftedExponential(0.001, 0.002), prob=0.2, factor=10.0
        ),
        seed=3,
    )
    x = np.ones((20, K, 4), np.float32)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=FixedN(6)) as server:  # fmt: skip
        rs = server.serve(x, max_in_flight=1)
    delays, _ = inj.plan(np.arange(20), M)
    want = np.sort(delays, axis=1)[:, 5]
    np.testing.assert_allclose([r.latency for r in rs], want, rtol=0, atol=1e-9)
    sim = simulate_latency(CODE, FixedN(6), inj, 20)
    np.testing.assert_allclose(sim.latency, want, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(sim.masks, np.stack([r.mask for r in rs]))
    # the decoding policies (one batched decode per answer count) on a Berrut code
    # (threshold 1, a cheap decoder): both decide at the first answer
    bacc = cj.bacc_code(num_inputs=K, num_workers=M)
    answers = np.asarray(bacc.encode(jnp.ones((K, 4))))  # representative answers
    for policy in (FirstDecodable(), Adaptive(1e30, 1.0)):
        got = simulate_latency(bacc, policy, inj, 20, responses=answers, check_ok=True)
        np.testing.assert_array_equal(got.latency, np.sort(delays, axis=1)[:, 0])
        assert got.ok.all() and (got.num_used == 1).all()
    # a policy that decides on the answers' values is refused without them (zeros
    # would make every predicted error 0: a silently optimistic latency)
    with pytest.raises(ValueError, match=r"^simulate_latency: Adaptive.*responses"):
        simulate_latency(bacc, Adaptive(1e30, 1.0), inj, 20)


# ------------------------------------------------------------------ reliability


def test_thousands_of_requests_with_faults_none_lost_each_ok_bit_exact():
    # M = 8, K = 3, degree 1: D = 3; N = 5, so up to M - N = 3 workers fail per
    # request (raise, hang or NaN, at random); the deadline backstops the hangs
    k, m, n, code = K, M, 5, CODE
    inj = Injector(latency=cj.parse_latency("shifted-exp:1ms,1ms; slow=0.1 factor=10"),
                   fault_kinds=("raise", "hang", "nan"), max_faulty=m - n,
                   seed=7)  # fmt: skip
    g = 2_000  # the plan still spends the whole fault budget (asserted below)
    xs = np.random.default_rng(1).uniform(-1, 1, (g, k, 4)).astype(np.float32)
    policy = FixedN(n, deadline=0.5)
    with Server(code, affine, backend=SimulatedCluster(injector=inj),
                policy=policy) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=16)
    assert len(rs) == g and sorted(r.request_id for r in rs) == list(range(g))
    _, faults = inj.plan(np.arange(g), m)
    assert (faults > 0).sum(axis=1).max() == m - n  # the plan used the full budget
    ok = np.array([r.ok for r in rs])
    assert ok.all()  # at most M - N failures leave N >= D answers
    # every request decided by the policy at its N-th answer, never by the deadline
    assert not any(r.timed_out for r in rs)
    assert all(r.num_used == n and r.mask.sum() == n for r in rs)
    for r in rs:
        assert not (r.mask & r.failed).any()
        assert r.mask.sum() == n and np.isfinite(r.arrival_times[r.mask]).all()
    # on a sample: the answers are what the workers compute, the value is the
    # offline decode of those answers on the same mask, bit for bit
    workers = _vmapped(affine)
    for i in np.random.default_rng(2).choice(g, 300, replace=False):
        r = rs[i]
        want = np.asarray(workers(code.encode(xs[i])))
        np.testing.assert_array_equal(r.responses[r.mask], want[r.mask])
        off = _offline(code, r)
        np.testing.assert_array_equal(r.value, np.asarray(off.value))
        assert r.cond == float(off.cond)


@pytest.mark.parametrize("kind", ["raise", "hang", "nan"])
def test_too_many_failures_give_ok_false_and_zeros_by_the_deadline(kind):
    k, m, code = K, M, CODE  # D = 3
    failed = {w: kind for w in range(m - 3 + 1)}  # M - D + 1 workers fail
    inj = Injector(latency=cj.Constant(0.001), failed_workers=failed, seed=0)
    x = np.ones((k, 4), np.float32)
    with Server(code, affine, backend=SimulatedCluster(injector=inj),
                policy=FixedN(m, deadline=0.2)) as server:  # fmt: skip
        r = server.infer(x)
    assert not r.ok and r.status == int(cj.Status.TOO_FEW_RESPONSES)
    assert np.all(r.value == 0) and r.value.shape == (k, 4)
    assert r.num_used <= 2 and np.isinf(r.error)
    if kind == "hang":  # waits for the deadline, not longer (virtual clock: exact)
        assert r.timed_out and r.latency == pytest.approx(0.2, abs=1e-9)
    else:  # every worker answered (some with failures): no reason to wait
        assert not r.timed_out and r.latency == pytest.approx(0.001, abs=1e-9)
        assert r.failed.sum() == m - 2


def test_thread_cluster_requests_with_faults_match_offline_decode():
    k, m, n, code = K, M, 5, CODE  # D = 3
    inj = Injector(latency=cj.ShiftedExponential(0.0002, 0.0003),
                   fault_kinds=("raise", "hang", "nan"), max_faulty=m - n,
                   seed=11)  # fmt: skip
    g = 200
    xs = np.random.default_rng(3).uniform(-1, 1, (g, k, 4)).astype(np.float32)
    with Server(code, affine, backend=ThreadCluster(injector=inj),
                policy=FixedN(n, deadline=5.0)) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=8)
    assert len(rs) == g and all(r.ok for r in rs)
    for x, r in zip(xs[:60], rs[:60], strict=True):
        want = _expected_answers(code, affine, x)
        np.testing.assert_array_equal(r.responses[r.mask], want[r.mask])
        np.testing.assert_array_equal(r.value, np.asarray(_offline(code, r).value))
    _, faults = inj.plan(np.arange(g), m)
    for r, f in zip(rs, faults, strict=True):
        assert not r.mask[f > 0].any()  # a failed worker is never decoded


def test_hung_worker_never_holds_a_request_past_its_deadline_nor_the_next():
    k, m, code = K, M, CODE  # D = 3
    inj = Injector(latency=cj.Constant(0.0), failed_workers={0: "hang"}, seed=0)
    backend = ThreadCluster(injector=inj)
    xs = np.random.default_rng(4).uniform(-1, 1, (4, k, 4)).astype(np.float32)
    with Server(code, affine, backend=backend,
                policy=FixedN(m, deadline=0.3)) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=1)
        assert all(r.ok and r.timed_out for r in rs)
        # decided at the deadline (not before), with every live worker's answer
        assert all(r.decided_at >= 0.3 for r in rs)
        assert all(r.num_used == m - 1 and r.cancelled[0] for r in rs)
        # the hung worker was released by each cancellation, so the next request's
        # task did not wait behind it: worker 0 was cancelled, never answered
        assert len(backend.release_delays) >= len(rs) - 1
        # with a policy that does not need it, the hung worker costs nothing
        server.policy = FixedN(3, deadline=5.0)
        r = server.infer(xs[0])
        assert r.ok and not r.timed_out and r.num_used == 3


def test_thread_cluster_queues_the_next_task_of_a_busy_worker():
    # each worker is busy with request 0 for its delay d, so the answers to request
    # 1, sent right after, come no sooner than 2 d after request 0 was sent
    d = 0.05
    backend = ThreadCluster(injector=Injector(latency=cj.Constant(d)))
    backend.start(affine, 2)
    rows = np.ones((2, 4), np.float32)
    try:
        backend.warmup(rows)
        t0 = backend.now()
        backend.submit(0, rows)
        backend.submit(1, rows)
        got = [backend.next_completed(5.0) for _ in range(4)]
    finally:
        backend.close()
    assert all(c is not None for c in got)
    first = {c.worker: c.time for c in got if c.request_id == 0}
    second = {c.worker: c.time for c in got if c.request_id == 1}
    assert sorted(first) == sorted(second) == [0, 1]
    assert min(first.values()) >= t0 + d
    assert min(second.values()) >= t0 + 2 * d
    np.testing.assert_array_equal(got[0].value, np.asarray(affine(rows[0])))
    assert backend.alive_threads == 0


def test_thread_cluster_holds_answers_their_delay_and_frees_a_worker_in_its_call():
    # uncoded K = 3: worker i computes x[i]; worker 0 is held inside its (Python,
    # not jitted) call while its row is marked, so it is cancelled mid-call
    code = cj.uncoded_code(num_inputs=3)
    gate = threading.Event()

    def worker(v):
        if isinstance(v, np.ndarray) and v[0] == 99.0:  # not while tracing
            gate.wait(10.0)
        return v * np.float32(2)

    backend = ThreadCluster(injector=Injector(latency=cj.Constant(0.02)), jit=False,
                            threads=2)  # fmt: skip
    x = np.ones((3, 4), np.float32)
    marked = x.copy()
    marked[0, 0] = 99.0
    with Server(code, worker, backend=backend, policy=FixedN(2)) as server:
        server.infer(x)  # compiles and warms up on an unmarked request
        r = server.infer(marked)
        # decided at the 2 answers of workers 1 and 2, each held its service time
        assert r.mask.tolist() == [False, True, True] and r.cancelled[0]
        assert (r.arrival_times[1:] >= 0.02).all()
        # worker 0 is still inside its call: not released yet
        assert len(backend.release_delays_in_call) == 0
        assert not gate.is_set()
        gate.set()
        r2 = server.infer(x)  # the next request is served (worker 0 freed)
        assert r2.mask.sum() == 2 and (r2.arrival_times[r2.mask] >= 0.02).all()
    # its release was recorded when the call returned, after the cancellation
    assert len(backend.release_delays_in_call) == 1
    assert backend.release_delays_in_call[0] > 0
    assert set(backend.release_delays_in_call) <= set(backend.release_delays)
    assert backend.alive_threads == 0


# ------------------------------------------------------------------ policies


def test_adaptive_decodes_at_threshold_with_a_loose_budget_and_waits_with_a_tight():
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.001), seed=5)
    x = np.random.default_rng(5).uniform(-1, 1, (K, 4)).astype(np.float32)
    backend = SimulatedCluster(injector=inj)
    with Server(CODE, affine, backend=backend, policy=Adaptive(1e30, 1.0)) as server:
        loose = server.infer(x)
        server.policy = Adaptive(1e-30, 0.5)
        tight = server.infer(x)
    assert loose.ok and loose.num_used == CODE.threshold and not loose.timed_out
    assert loose.error <= 1e30
    # no decode reaches 1e-30: every answer is waited for
    assert tight.ok and tight.num_used == M and tight.error > 1e-30
    # with all answers in, the server stops waiting at once (not at the deadline)
    assert not tight.timed_out and tight.latency < 0.5


def test_adaptive_accepts_the_first_prefix_under_budget():
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.001), seed=6)
    x = np.random.default_rng(6).uniform(-1, 1, (K, 4)).astype(np.float32)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=FixedN(M)) as server:  # fmt: skip
        full = server.infer(x)
    errs = []
    for n in range(CODE.threshold, M + 1):
        mask = np.zeros(M, bool)
        mask[full.order[:n]] = True
        errs.append(float(CODE.decode(jnp.asarray(full.responses),
                                      jnp.asarray(mask)).error))  # fmt: skip
    budget = float(np.median(errs))
    first = CODE.threshold + int(np.argmax(np.asarray(errs) <= budget))
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=Adaptive(budget, 1.0)) as server:  # fmt: skip
        r = server.infer(x)
    assert r.num_used == first and r.error <= budget


def test_first_decodable_waits_until_every_input_has_a_replica():
    code = cj.replication_code(num_inputs=3, num_workers=9)
    inj = Injector(latency=cj.Pareto(0.001, 1.5), seed=8)
    xs = np.random.default_rng(8).uniform(-1, 1, (30, 3, 2)).astype(np.float32)
    with Server(code, affine, backend=SimulatedCluster(injector=inj),
                policy=FirstDecodable()) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=1)  # each request meets idle workers
    delays, _ = inj.plan(np.arange(30), 9)
    covered = np.max([np.min(delays[:, code.task == t], axis=1) for t in range(3)], 0)
    np.testing.assert_allclose([r.latency for r in rs], covered, atol=1e-9, rtol=0)
    assert all(r.ok for r in rs)
    sim = simulate_latency(code, FirstDecodable(), inj, 30)
    np.testing.assert_allclose(sim.latency, covered, atol=1e-12, rtol=0)


class _EveryOther:
    """A user policy: decode at the 4th answer (decide only: not simulable)."""

    deadline = None

    def decide(self, arrivals):
        return arrivals.num_arrived >= 4


class _EveryOtherSimulable(_EveryOther):
    def decision_times(self, times):
        return np.minimum(times.sorted[:, 3], times.all_done)


def test_the_simulator_asks_the_policy_for_its_rule():
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.002), seed=4)
    with pytest.raises(TypeError, match=r"decision_times.*Server on a SimulatedCl"):
        simulate_latency(CODE, _EveryOther(), inj, 5)
    sim = simulate_latency(CODE, _EveryOtherSimulable(), inj, 12)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=_EveryOther()) as server:  # fmt: skip
        rs = server.serve(np.ones((12, K, 4), np.float32), max_in_flight=1)
    np.testing.assert_allclose(sim.latency, [r.latency for r in rs], atol=1e-9)
    np.testing.assert_array_equal(sim.masks, np.stack([r.mask for r in rs]))


def test_deadline_policy_waits_for_every_worker_or_the_deadline():
    inj = Injector(latency=cj.ShiftedExponential(0.01, 0.05), seed=9)
    xs = np.ones((20, K, 4), np.float32)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=Deadline(0.05)) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=1)
    delays, _ = inj.plan(np.arange(20), M)
    want = np.minimum(delays.max(axis=1), 0.05)
    np.testing.assert_allclose([r.latency for r in rs], want, atol=1e-9, rtol=0)
    for r, d in zip(rs, delays, strict=True):
        np.testing.assert_array_equal(r.mask, d <= 0.05)


def test_a_user_written_policy_is_accepted():
    class EvenCount:
        deadline = None

        def decide(self, arrivals):
            return arrivals.num_arrived >= 4 and arrivals.num_arrived % 2 == 0

    with Server(CODE, affine, backend=SimulatedCluster(
            injector=Injector(seed=1)), policy=EvenCount()) as server:  # fmt: skip
        r = server.infer(np.ones((K, 4), np.float32))
    assert r.ok and r.num_used == 4


# ------------------------------------------------------------------ injection


def test_injector_draws_depend_only_on_the_request_number():
    inj = Injector(latency=cj.RandomSlowdown(cj.Pareto(0.002, 2.0), prob=0.3,
                                             factor=10.0),
                   fault_kinds=("nan",), fault_prob=0.1, seed=4)  # fmt: skip
    d_all, f_all = inj.plan(np.arange(300), 12)
    d_one, f_one = inj.plan([257], 12)
    np.testing.assert_array_equal(d_all[257], d_one[0])
    np.testing.assert_array_equal(f_all[257], f_one[0])
    d_cached, f_cached = inj.plan_one(257, 12)
    np.testing.assert_array_equal(d_cached, d_one[0])
    assert (d_all >= 0.002 * (1 - 1e-6)).all()  # Pareto support starts at the scale


def test_correlated_slowdowns_hit_whole_groups():
    inj = Injector(latency=cj.RandomSlowdown(cj.Constant(0.001), prob=0.5,
                                             factor=10.0, group_size=4),
                   seed=2)  # fmt: skip
    d, _ = inj.plan(np.arange(400), 12)
    groups = d.reshape(400, 3, 4)
    np.testing.assert_allclose(groups, groups[..., :1].repeat(4, axis=-1))
    assert set(np.round(np.unique(d), 6)) == {0.001, 0.01}
    frac = (groups[..., 0] > 0.005).mean()
    # 1200 independent group coins with p = 1/2: 99.9% interval half-width ~ 0.048
    assert abs(frac - 0.5) < 0.05


def test_fault_counts_stay_within_max_faulty():
    inj = Injector(fault_kinds=("raise", "hang", "nan", "corrupt"), max_faulty=3,
                   seed=12)  # fmt: skip
    _, f = inj.plan(np.arange(2000), 10)
    counts = (f > 0).sum(axis=1)
    assert counts.max() == 3 and counts.min() == 0
    assert set(np.unique(f[f > 0])) == {1, 2, 3, 4}


def test_corrupted_answers_reach_the_decoder():
    inj = Injector(latency=cj.Constant(0.001), failed_workers={3: "corrupt"},
                   corrupt_scale=64.0)  # fmt: skip
    x = np.full((K, 4), 0.5, np.float32)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=FixedN(M)) as server:  # fmt: skip
        r = server.infer(x)
    want = _expected_answers(CODE, affine, x)
    np.testing.assert_array_equal(
        r.responses[3].astype(np.float32), want[3].astype(np.float32) + 64.0
    )
    assert r.mask[3] and not r.failed[3]


# ------------------------------------------------------------------ errors, shutdown


def test_bad_inputs_are_clear_errors():
    code = CODE
    with Server(code, affine, backend=SimulatedCluster()) as server:
        with pytest.raises(ValueError, match=r"K = 3.*got shape \(4, 4\)"):
            server.infer(np.ones((4, 4), np.float32))
        with pytest.raises(TypeError, match="floating"):
            server.infer(np.ones((K, 4), np.int32))
        server.infer(np.ones((K, 4), np.float32))
        with pytest.raises(ValueError, match=r"shape and dtype of the first"):
            server.infer(np.ones((K, 5), np.float32))
    for make in (lambda: FixedN(3, deadline=-1.0), lambda: Deadline(-0.5),
                 lambda: Adaptive(1.0, -2.0)):  # fmt: skip
        with pytest.raises(ValueError, match="deadline must be finite and >= 0"):
            make()
    with pytest.raises(ValueError, match="Adaptive: budget"):
        Adaptive(0.0, 1.0)
    with pytest.raises(ValueError, match="at most the code's M = 8"):
        Server(code, affine, backend=SimulatedCluster(), policy=FixedN(9))
    with pytest.raises(ValueError, match="at most the code's M = 8"):
        simulate_latency(code, FixedN(9), Injector(), 10)
    with pytest.raises(TypeError, match="codedjax Code"):
        Server(object(), affine, backend=SimulatedCluster())
    with pytest.raises(TypeError, match="decide"):
        Server(code, affine, backend=SimulatedCluster(), policy=object())
    with pytest.raises(ValueError, match="ThreadCluster: threads must be an int"):
        ThreadCluster(threads=0)
    with pytest.raises(ValueError, match="max_in_flight"):
        Server(code, affine, backend=SimulatedCluster()).serve([], max_in_flight=0)


class _ShapeShifter(SimulatedCluster):
    """A backend whose worker 2 answers one feature short (a broken worker)."""

    def next_completed(self, timeout):
        c = super().next_completed(timeout)
        if c is not None and c.worker == 2:
            c = c._replace(value=c.value[:-1])
        return c


def test_a_worker_answering_another_shape_is_that_workers_failure():
    # like a crash: left out of the mask, the request decodes from the others
    x = np.ones((K, 4), np.float32)
    with Server(CODE, affine, backend=_ShapeShifter(), policy=FixedN(M)) as server:
        r = server.infer(x)
    assert r.ok and r.failed.tolist() == [i == 2 for i in range(M)]
    assert not r.mask[2] and r.num_used == M - 1
    assert len(r.failures) == 1 and r.failures[0][0] == 2
    assert "answered bfloat16 (3,); worker_fn returns bfloat16 (4,)" in r.failures[0][1]


class _SixMethods:
    """A backend of one's own with the six required methods of the Backend
    protocol and nothing else (no warmup, work, advance or wake), delegating
    to one of the library's clusters; ``without`` drops a required one."""

    def __init__(self, inner, without=None):
        for name in ("start", "now", "submit", "next_completed", "cancel", "close"):
            if name != without:
                setattr(self, name, getattr(inner, name))


def test_a_backend_with_the_six_required_methods_gets_the_optional_defaults():
    """docs/serving.md, "Architecture": the optional members' defaults are
    BackendBase's: nothing compiled ahead, work not counted (-1, nan), a real
    clock, no wake (a StreamingServer polls); a missing required method is a
    TypeError naming the server."""
    x = np.random.default_rng(3).uniform(-1, 1, (K, 4)).astype(np.float32)
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.01), seed=5)
    with Server(CODE, affine, backend=SimulatedCluster(injector=inj),
                policy=FixedN(5)) as server:  # fmt: skip
        want = server.infer(x)
    six = _SixMethods(SimulatedCluster(injector=inj))
    assert isinstance(six, Backend)
    with Server(CODE, affine, backend=six, policy=FixedN(5)) as server:
        got = server.infer(x)
    assert got.ok and want.evaluations == M and not np.isnan(want.busy)
    np.testing.assert_array_equal(got.value, want.value)
    assert got.order.tolist() == want.order.tolist() and got.latency == want.latency
    assert got.evaluations == -1 and np.isnan(got.busy)
    server = Server(CODE, affine, backend=_SixMethods(ThreadCluster()),
                    policy=FixedN(5))  # fmt: skip
    with StreamingServer(server, group_deadline=0.01) as front:
        assert not front.virtual  # no advance: a real clock, a dispatcher thread
        futures = [front.submit(row) for row in x]
        answers = [f.result(timeout=30) for f in futures]
    assert all(a.ok for a in answers) and sum(a.group_size == K for a in answers) == K
    for missing in ("start", "cancel"):
        with pytest.raises(TypeError, match=(
            rf"^Server: backend must implement the Backend interface \(start, now, "
            rf"submit, next_completed, cancel, close\), got _SixMethods without "
            rf"'{missing}'$"
        )):  # fmt: skip
            Server(CODE, affine, backend=_SixMethods(SimulatedCluster(), missing))


def test_close_and_context_manager_stop_the_threads_also_after_an_exception():
    inj = Injector(latency=cj.Constant(0.0), failed_workers={1: "hang"})
    x = np.ones((K, 4), np.float32)
    before = threading.active_count()
    backend = ThreadCluster(injector=inj)
    with pytest.raises(ValueError, match="K = 3"):
        with Server(CODE, affine, backend=backend, policy=FixedN(5)) as server:
            assert backend.alive_threads >= 1
            assert server.infer(x).ok
            server.infer(np.ones((5, 4), np.float32))
    assert backend.alive_threads == 0
    assert threading.active_count() <= before
    with pytest.raises(RuntimeError, match="closed"):
        server.infer(x)
    other = ThreadCluster(injector=inj)
    server = Server(CODE, affine, backend=other, policy=FixedN(M, deadline=30.0))
    # close() from another thread while a request waits for its hung worker: the
    # request ends with an error at once (not at its deadline), the threads stop
    t = threading.Timer(0.2, server.close)
    t.start()
    with pytest.raises(RuntimeError, match="closed"):
        server.infer(x)
    t.join()
    assert other.alive_threads == 0


def test_a_server_and_cluster_dropped_without_close_stop_their_threads():
    x = np.ones((K, 4), np.float32)
    before = set(threading.enumerate())
    server = Server(CODE, affine, backend=ThreadCluster(), policy=FixedN(M))
    assert server.infer(x).ok
    started = [t for t in threading.enumerate() if t not in before]
    assert started and server.backend.alive_threads == len(started)
    del server  # never closed: the cluster's threads hold it weakly
    gc.collect()
    for t in started:
        t.join(5.0)
    assert not any(t.is_alive() for t in started)


# ------------------------------------------------------------------ layering


def test_serving_imports_only_jax_numpy_and_the_library():
    allowed = {"jax", "jaxlib", "numpy", "scipy"}
    for path in sorted((ROOT / "codedjax" / "serving").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                ok = top in allowed or top in sys.stdlib_module_names
                ok = ok or top == "__future__" or (top == "ray" and path.stem == "_ray")
                assert ok, f"{path.name} imports {name}"


def test_worker_delays_do_not_depend_on_the_number_of_workers():
    slow = cj.RandomSlowdown(cj.ShiftedExponential(0.005, 0.005), prob=0.1, factor=10)
    inj = Injector(latency=slow, seed=21)
    d8, _ = inj.plan(np.arange(50), 8)
    d40, _ = inj.plan(np.arange(50), 40)
    np.testing.assert_array_equal(d8, d40[:, :8])
