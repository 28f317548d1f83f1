"""codedjax.serving: per-worker roles and requests served in rounds.

Roles: a small sum-parity code (K = 2 queries, worker 2 computes a parity function
of x_1 + x_2) whose decode is exact only if worker 2 ran its own role's function.
Rounds: two linear layers with a ReLU between them, decoded round by round, exact
in float64 on the simulated cluster; the latency follows the per-round model
(shift + work x (draw - shift), one draw per request and worker) on the virtual
clock, with the master's measured work added.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    FixedN,
    Injector,
    Pipeline,
    PipelineServer,
    Round,
    Server,
    SimulatedCluster,
    ThreadCluster,
    WorkerFunctions,
    latency_shift,
)


@dataclasses.dataclass(frozen=True)
class SumParity(cj.Code):
    """K = 2, M = 3: workers 0 and 1 get x_1 and x_2 (role "base"), worker 2 gets
    x_1 + x_2 (role "parity"); a missing base answer is the parity answer minus
    the other one."""

    num_inputs: int = 2
    num_workers: int = 3

    @property
    def name(self):
        return "sum-parity"

    @property
    def threshold(self):
        return 2

    @property
    def exact(self):
        return True

    @property
    def roles(self):
        return ("base", "base", "parity")

    def _encode(self, x):
        return jnp.concatenate([x, x[:1] + x[1:]], axis=0)

    def _decode(self, y, mask):
        acc = cj.accumulation_dtype(y.dtype)
        y = jnp.where(mask.reshape((-1,) + (1,) * (y.ndim - 1)), y, 0).astype(acc)
        v0 = jnp.where(mask[0], y[0], y[2] - y[1])
        v1 = jnp.where(mask[1], y[1], y[2] - y[0])
        n = mask.sum()
        status = jnp.where(n >= 2, 0, int(cj.Status.TOO_FEW_RESPONSES))
        ok = status == 0
        value = jnp.where(ok, jnp.stack([v0, v1]), 0)
        err = jnp.where(ok, jnp.asarray(0.0, acc), jnp.inf)
        return cj.DecodeResult(
            value, ok, jnp.asarray(1.0, acc), n.astype(jnp.int32),
            status.astype(jnp.int32), err,
        )  # fmt: skip


PARITY = SumParity()
W = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 0.25]], np.float32)  # [3, 2]
B = np.array([1.0, -1.0], np.float32)


def base_fn(v):
    """An affine base model f(v) = v W + b."""
    return v @ jnp.asarray(W) + jnp.asarray(B)


def parity_fn(p):
    """Its exact parity model for sums of 2 queries: f(x1) + f(x2) = p W + 2 b."""
    return p @ jnp.asarray(W) + 2 * jnp.asarray(B)


FNS = {"base": base_fn, "parity": parity_fn}
# small integers and halves: every product and sum is exact in float32
X = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 4.0]], np.float32)
WANT = X @ W + B


def test_code_roles_default_to_base_and_stay_hashable():
    code = cj.lagrange_code(num_inputs=3, num_workers=5, degree=1)
    assert code.roles == ("base",) * 5
    assert hash(PARITY) == hash(SumParity()) and PARITY.roles[2] == "parity"


@pytest.mark.parametrize("lost", [0, 1])
def test_each_worker_runs_its_roles_function(lost):
    inj = Injector(latency=cj.Constant(0.001), failed_workers={lost: "raise"})
    with Server(PARITY, FNS, backend=SimulatedCluster(injector=inj),
                policy=FixedN(2)) as server:  # fmt: skip
        assert server.roles == PARITY.roles
        r = server.infer(X)
    assert r.ok and r.mask.tolist() == [i != lost for i in range(3)]
    # the parity worker's answer is parity_fn of its row: the lost query is exact
    np.testing.assert_array_equal(r.responses[2], X.sum(0) @ W + 2 * B)
    np.testing.assert_array_equal(r.value, WANT)
    # a base function on the parity worker would be off by b
    with Server(PARITY, base_fn, backend=SimulatedCluster(injector=inj),
                policy=FixedN(2)) as server:  # fmt: skip
        wrong = server.infer(X)
    np.testing.assert_array_equal(wrong.value[lost], WANT[lost] - B)


def test_roles_on_the_thread_cluster_and_unvectorised_simulator():
    # worker 0 answers NaN well before the two others answer (no tie with the
    # decision, even on a loaded machine: 2 ms against 40 ms)
    lat = cj.PersistentSlowdown(cj.Constant(0.002), workers=(1, 2), factor=20.0)
    inj = Injector(latency=lat, failed_workers={0: "nan"})
    for backend in (ThreadCluster(injector=inj),
                    SimulatedCluster(injector=inj, vectorize=False)):  # fmt: skip
        with Server(PARITY, FNS, backend=backend, policy=FixedN(2)) as server:
            rs = server.serve(np.stack([X, 2 * X]), max_in_flight=2)
        np.testing.assert_array_equal(rs[0].value, WANT)
        np.testing.assert_array_equal(rs[1].value, 2 * X @ W + B)
        assert all(r.failed[0] and r.mask.tolist() == [False, True, True] for r in rs)


def test_roles_are_checked_by_the_server():
    sim = SimulatedCluster
    with pytest.raises(ValueError, match=r"Server: worker_fn has no function for "
                       r"role 'parity'"):  # fmt: skip
        Server(PARITY, {"base": base_fn}, backend=sim())
    with pytest.raises(ValueError, match=r"Server: worker_fn has a function for "
                       r"role 'other'"):  # fmt: skip
        Server(PARITY, {**FNS, "other": base_fn}, backend=sim())
    with pytest.raises(TypeError, match=r"Server: worker_fn\['parity'\] must be"):
        Server(PARITY, {"base": base_fn, "parity": 3}, backend=sim())

    def narrow(p):
        return parity_fn(p)[:1]

    with Server(PARITY, {"base": base_fn, "parity": narrow}, backend=sim()) as s:
        with pytest.raises(ValueError, match=r"Server: the function of role "
                           r"'parity' returns float32 \(1,\).*'base' role's "
                           r"returns float32 \(2,\)"):  # fmt: skip
            s.infer(X)

    @dataclasses.dataclass(frozen=True)
    class BadRoles(SumParity):
        @property
        def roles(self):
            return ("base", "parity")

    with pytest.raises(ValueError, match=r"Server: code.roles must be M = 3"):
        Server(BadRoles(), FNS, backend=sim())


def test_worker_functions_group_each_distinct_function_once():
    table = WorkerFunctions([[base_fn, base_fn, parity_fn], [parity_fn] * 3])
    groups = table.groups(0)
    assert [f for f, _ in groups] == [base_fn, parity_fn]
    assert [w.tolist() for _, w in groups] == [[0, 1], [2]]
    assert table.distinct() == (base_fn, parity_fn)
    assert WorkerFunctions.of(base_fn, 4).functions == ((base_fn,) * 4,)
    with pytest.raises(ValueError, match="same number of workers"):
        WorkerFunctions([[base_fn] * 3, [base_fn] * 2])


# ------------------------------------------------------------------ rounds

K, M = 2, 5
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 2
_rng = np.random.default_rng(0)
W1 = _rng.standard_normal((4, 4))  # both layers 4 -> 4: one decode program
B1 = _rng.standard_normal(4)
W2 = _rng.standard_normal((4, 4))
B2 = _rng.standard_normal(4)


@functools.cache
def _pipeline(dtype, policy=None):
    """One pipeline per dtype (policy None: FixedN(), the threshold), shared by
    the tests so that its functions compile once."""
    w1, b1, w2, b2 = (jnp.asarray(a, dtype) for a in (W1, B1, W2, B2))
    return Pipeline([
        Round(CODE, lambda v: v @ w1, policy=policy,
              master_fn=lambda h, x, x0: jax.nn.relu(h + b1[None, :])),
        Round(CODE, lambda v: v @ w2, policy=policy,
              master_fn=lambda h, x, x0: h + b2[None, :]),
    ])  # fmt: skip


def _reference(x):
    x = np.asarray(x, np.float64)
    return np.maximum(x @ W1 + B1, 0) @ W2 + B2


def _slow_injector(**kw):
    # worker 0 is 10x slower in every round of every request
    lat = cj.PersistentSlowdown(cj.ShiftedExponential(0.002, 0.003), (0,), 10.0)
    return Injector(latency=lat, seed=4, **kw)


def test_two_linear_layers_with_relu_are_exact_in_float64_through_two_rounds(x64):
    inj = _slow_injector()
    xs = np.random.default_rng(1).standard_normal((4, K, 4))
    with PipelineServer(_pipeline(jnp.float64, FixedN(3)),
                        backend=SimulatedCluster(injector=inj),
                        charge_master=False) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=1)
        one = server.infer(xs[0])  # request 4: its own draws
    delays, _ = inj.plan(np.arange(5), M)
    s = latency_shift(inj.latency)
    assert s == 0.002
    for i, r in enumerate(rs + [one]):
        x = xs[i % 4]
        assert r.ok and r.failed_round is None and len(r.rounds) == 2
        assert r.value.dtype == np.float64
        np.testing.assert_allclose(r.value, _reference(x), rtol=0, atol=1e-12)
        # each round: s + work (T - s), work = 1/2, the same draw T per worker
        rounds = s + 0.5 * (delays[i] - s)
        for res in r.rounds:
            assert res.request_id == i and res.num_used == 3
            got = res.arrival_times[res.mask]
            np.testing.assert_allclose(got, rounds[res.mask], rtol=0, atol=1e-12)
            assert not res.mask[0]  # the slow worker is slow in both rounds
        # the workers' time alone: the 3rd answer of each round, twice
        want = 2 * np.sort(rounds)[2]
        assert r.latency == pytest.approx(want, abs=1e-12)
        np.testing.assert_allclose(np.isnan(r.errors), False)
        assert r.error == max(r.errors)


def test_the_master_work_is_measured_and_charged_to_the_virtual_clock():
    inj = _slow_injector()
    x = np.random.default_rng(2).standard_normal((K, 4)).astype(np.float32)
    with PipelineServer(
        _pipeline(jnp.float32), backend=SimulatedCluster(injector=inj)
    ) as server:
        r = server.infer(x)
    d, _ = inj.plan_one(0, M)
    s = latency_shift(inj.latency)
    ideal = 2 * np.sort(s + 0.5 * (d - s))[CODE.threshold - 1]
    master = r.encode_time.sum() + r.decode_time.sum() + r.step_time.sum()
    assert (r.encode_time > 0).all() and (r.decode_time > 0).all()
    assert (r.step_time > 0).all()
    assert r.latency == pytest.approx(ideal + master, rel=1e-9)
    # the rounds' latencies and the last master step add up to the request's
    assert r.latency == pytest.approx(
        sum(res.latency for res in r.rounds) + r.step_time[-1], rel=1e-9
    )
    assert r.sent_at[1] > r.sent_at[0] + r.rounds[0].decided_at
    np.testing.assert_allclose(r.value, _reference(x), rtol=1e-4, atol=1e-4)


def test_a_round_that_cannot_decode_ends_the_request():
    # every worker answers NaN in round 1
    pipe = _pipeline(jnp.float32)
    w2 = jnp.asarray(W2, jnp.float32)
    nan = Round(CODE, lambda v: v @ w2 * jnp.float32(np.nan))
    pipe = Pipeline([pipe.rounds[0], nan])
    inj = _slow_injector()
    x = np.ones((K, 4), np.float32)
    with PipelineServer(pipe, backend=SimulatedCluster(injector=inj)) as server:
        r = server.infer(x)
    assert not r.ok and r.failed_round == 1 and len(r.rounds) == 2
    assert r.status == int(cj.Status.TOO_FEW_RESPONSES) and r.error == np.inf
    assert r.value.shape == (K, 4) and not r.value.any()
    assert np.isnan(r.step_time[1]) and r.rounds[0].ok
    assert r.rounds[1].failed.all() and r.rounds[1].num_used == 0


def test_rounds_on_the_thread_cluster():
    inj = Injector(latency=cj.ShiftedExponential(0.002, 0.002), seed=3)
    xs = np.random.default_rng(3).standard_normal((3, K, 4)).astype(np.float32)
    with PipelineServer(_pipeline(jnp.float32),
                        backend=ThreadCluster(injector=inj)) as server:  # fmt: skip
        rs = server.serve(xs, max_in_flight=2)
    delays, _ = inj.plan(np.arange(3), M)
    s = latency_shift(inj.latency)
    for i, r in enumerate(rs):
        assert r.ok
        np.testing.assert_allclose(r.value, _reference(xs[i]), rtol=1e-4, atol=1e-4)
        for res in r.rounds:  # no answer before its round's delay
            want = (s + 0.5 * (delays[i] - s))[res.mask]
            assert (res.arrival_times[res.mask] >= want - 1e-9).all()
        assert r.latency >= sum(res.decided_at for res in r.rounds)


def test_round_work_and_bad_pipelines_are_clear_errors():
    inj = Injector(latency=cj.RandomSlowdown(cj.Pareto(0.001, 1.5, shift=0.004),
                                             prob=0.5, factor=3.0), seed=1)  # fmt: skip
    d, f = inj.plan_one(7, 6)
    d2, f2 = inj.plan_one(7, 6, work=0.25)
    np.testing.assert_array_equal(f, f2)
    np.testing.assert_allclose(d2, 0.004 + 0.25 * (d - 0.004), rtol=0, atol=1e-15)
    assert latency_shift(cj.Constant(0.01)) == 0.0
    with pytest.raises(ValueError, match="Injector.plan_one: work must be"):
        inj.plan_one(0, 6, work=0.0)
    fn = base_fn
    with pytest.raises(ValueError, match="Pipeline: needs at least one Round"):
        Pipeline([])
    other = cj.lagrange_code(num_inputs=K, num_workers=M + 1, degree=1)
    with pytest.raises(ValueError, match=r"same K and M.*\(2, 5\), \(2, 6\)"):
        Pipeline([Round(CODE, fn), Round(other, fn)])
    with pytest.raises(ValueError, match="round 1's work must be finite and > 0"):
        Pipeline([Round(CODE, fn), Round(CODE, fn, work=-1.0)])
    with pytest.raises(TypeError, match="PipelineServer: pipeline must be"):
        PipelineServer([Round(CODE, fn)])
    with pytest.raises(ValueError, match="PipelineServer: round 1: worker_fn has a "
                       "function for role 'x'"):  # fmt: skip
        PipelineServer(Pipeline([Round(CODE, fn), Round(CODE, {"base": fn, "x": fn})]))
