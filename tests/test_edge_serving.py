"""Bad inputs and faults in the serving runtime: a clear error or data, never a hang.

The contract (``docs/serving.md``, "Faults and bad inputs"): a static mistake (a
number out of range, a worker function that cannot run on a coded row or returns
something other than one floating array) raises a ValueError or TypeError naming
the public function and the argument, what was expected and what came; trouble
that depends on the run (a worker that raises, blocks or hangs) is data, a result
with ``ok`` and ``status`` for every request.

Each class is one parametrized table over data: the numeric arguments of every
public serving function, the worker outputs, the faults. The servers are tiny
(K = 2, M = 5, payload [3], Constant latencies) and share their compiled programs.
"""

from __future__ import annotations

import inspect
import math
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import serving as sv

K, M = 2, 5
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)
X = np.arange(6.0, dtype=np.float32).reshape(K, 3)
INJ = sv.Injector(latency=cj.Constant(0.001))
TOO_FEW = int(cj.Status.TOO_FEW_RESPONSES)


def double(v):
    return 2.0 * v


# ----------------------------------------------------------------------------------
# every numeric argument of the serving API

BAD_NUMBER = [
    ("nan", math.nan, ValueError),
    ("inf", math.inf, ValueError),
    ("-inf", -math.inf, ValueError),
    ("negative", -1.0, ValueError),
    ("string", "1", TypeError),
    ("bool", True, TypeError),
]
BAD_INT = [
    ("negative", -1, ValueError),
    ("float", 1.5, TypeError),
    ("nan", math.nan, TypeError),
    ("string", "3", TypeError),
    ("bool", True, TypeError),
]
ZERO = [("zero", 0, ValueError)]
ZERO_F = [("zero", 0.0, ValueError)]


def _server():
    return sv.Server(CODE, double, backend=sv.SimulatedCluster())


def _load(**kw):
    args = dict(group_deadline=0.1)
    args.update(kw)
    arrivals = args.pop("arrivals", [0.0])
    return sv.simulate_load(CODE, sv.FixedN(), INJ, arrivals, **args)


# (function as the error names it, argument, call with the bad value, bad values)
NUMERIC = [
    ("SimulatedCluster", "compute_time",
     lambda v: sv.SimulatedCluster(compute_time=v), BAD_NUMBER),
    ("ThreadCluster", "threads", lambda v: sv.ThreadCluster(threads=v),
     BAD_INT + ZERO),
    ("Injector", "fault_prob",
     lambda v: sv.Injector(fault_prob=v, fault_kinds=("raise",)),
     BAD_NUMBER + [("above one", 1.5, ValueError)]),
    ("Injector", "corrupt_scale", lambda v: sv.Injector(corrupt_scale=v), BAD_NUMBER),
    ("Injector", "max_faulty",
     lambda v: sv.Injector(max_faulty=v, fault_kinds=("raise",)), BAD_INT),
    ("Injector", "seed", lambda v: sv.Injector(seed=v), BAD_INT),
    ("Injector", "failed_workers", lambda v: sv.Injector(failed_workers={v: "hang"}),
     BAD_INT),
    ("Injector.plan", "num_workers", lambda v: INJ.plan([0], v), BAD_INT + ZERO),
    ("Injector.plan", "request_ids", lambda v: INJ.plan([v], M),
     [("negative", -1, ValueError), ("float", 1.5, TypeError)]),
    ("Injector.plan_one", "request_id", lambda v: INJ.plan_one(v, M), BAD_INT),
    ("Injector.plan_one", "num_workers", lambda v: INJ.plan_one(0, v), BAD_INT + ZERO),
    ("Injector.plan_one", "work", lambda v: INJ.plan_one(0, M, work=v),
     BAD_NUMBER + ZERO_F),
    ("simulate_latency", "num_requests",
     lambda v: sv.simulate_latency(CODE, sv.FixedN(), INJ, v), BAD_INT),
    ("simulate_latency", "first_request",
     lambda v: sv.simulate_latency(CODE, sv.FixedN(), INJ, 2, first_request=v),
     BAD_INT),
    ("FixedN", "num_responses", lambda v: sv.FixedN(v), BAD_INT + ZERO),
    ("FixedN", "deadline", lambda v: sv.FixedN(deadline=v), BAD_NUMBER),
    ("FirstDecodable", "deadline", lambda v: sv.FirstDecodable(deadline=v),
     BAD_NUMBER),
    ("Deadline", "deadline", lambda v: sv.Deadline(v), BAD_NUMBER),
    ("Adaptive", "budget", lambda v: sv.Adaptive(v, 1.0), BAD_NUMBER + ZERO_F),
    ("Adaptive", "deadline", lambda v: sv.Adaptive(1.0, v), BAD_NUMBER),
    ("Adaptive", "min_responses", lambda v: sv.Adaptive(1.0, 1.0, min_responses=v),
     BAD_INT + ZERO),
    ("poisson_arrivals", "rate", lambda v: sv.poisson_arrivals(v, 3),
     BAD_NUMBER + ZERO_F),
    ("poisson_arrivals", "count", lambda v: sv.poisson_arrivals(1.0, v), BAD_INT),
    ("poisson_arrivals", "seed", lambda v: sv.poisson_arrivals(1.0, 3, seed=v),
     BAD_INT),
    ("poisson_arrivals", "max_time",
     lambda v: sv.poisson_arrivals(1.0, 3, max_time=v), BAD_NUMBER + ZERO_F),
    ("bursty_arrivals", "rate", lambda v: sv.bursty_arrivals(v, 3),
     BAD_NUMBER + ZERO_F),
    ("bursty_arrivals", "count", lambda v: sv.bursty_arrivals(1.0, v), BAD_INT),
    ("bursty_arrivals", "seed", lambda v: sv.bursty_arrivals(1.0, 3, seed=v),
     BAD_INT),
    *[
        ("bursty_arrivals", p, lambda v, p=p: sv.bursty_arrivals(1.0, 3, **{p: v}),
         BAD_NUMBER + ZERO_F)
        for p in ("peak", "duty", "burst", "max_time")
    ],
    ("simulate_load", "group_deadline", lambda v: _load(group_deadline=v),
     BAD_NUMBER + ZERO_F),
    ("simulate_load", "first_group", lambda v: _load(first_group=v), BAD_INT),
    ("simulate_load", "shards", lambda v: _load(shards=v), BAD_INT + ZERO),
    ("simulate_load", "work", lambda v: _load(work=v), BAD_NUMBER + ZERO_F),
    ("FillDeadline", "factor", lambda v: sv.FillDeadline(v), BAD_NUMBER + ZERO_F),
    ("FillDeadline", "window", lambda v: sv.FillDeadline(window=v), BAD_INT + ZERO),
    ("FillDeadline", "minimum", lambda v: sv.FillDeadline(minimum=v),
     BAD_NUMBER + ZERO_F),
    ("FillDeadline", "maximum", lambda v: sv.FillDeadline(maximum=v),
     BAD_NUMBER + ZERO_F),
    ("simulate_load", "arrivals", lambda v: _load(arrivals=[v]),
     [("nan", math.nan, ValueError), ("inf", math.inf, ValueError),
      ("negative", -1.0, ValueError)]),
    ("Server.serve", "max_in_flight", lambda v: _server().serve([], max_in_flight=v),
     BAD_INT + ZERO),
    ("SimulatedCluster.start", "num_workers",
     lambda v: sv.SimulatedCluster().start(double, v), BAD_INT + ZERO),
    ("ThreadCluster.start", "num_workers",
     lambda v: sv.ThreadCluster().start(double, v), BAD_INT + ZERO),
    ("WorkerFunctions.of", "num_workers", lambda v: sv.WorkerFunctions.of(double, v),
     BAD_INT + ZERO),
    # checked before Ray is imported (Ray is an optional extra)
    ("RayCluster", "num_actors", lambda v: sv.RayCluster(num_actors=v),
     BAD_INT + ZERO),
    ("RayCluster", "slots_per_actor", lambda v: sv.RayCluster(slots_per_actor=v),
     BAD_INT + ZERO),
    ("RayCluster", "poll", lambda v: sv.RayCluster(poll=v), BAD_NUMBER + ZERO_F),
]  # fmt: skip


def _cases(table):
    """One pytest case per (name, argument, bad value) of a table of rows
    (name, argument, call, [(label, value, exception), ...])."""
    return [
        pytest.param(name, arg, call, value, exc, id=f"{name}.{arg}-{label}")
        for name, arg, call, bad in table
        for label, value, exc in bad
    ]


NUMERIC_CASES = _cases(NUMERIC)


@pytest.mark.parametrize("fname,arg,call,value,exc", NUMERIC_CASES)
def test_every_numeric_argument_refuses_bad_values_naming_it(
    fname, arg, call, value, exc
):
    with pytest.raises(exc) as info:
        call(value)
    msg = str(info.value)
    assert msg.startswith(f"{fname}: {arg}"), msg
    assert "must be" in msg and "got" in msg, msg


def test_the_numeric_table_covers_every_public_class_and_function():
    """A new public class or function of codedjax.serving must join the table (or
    be named here as one that takes no numbers of its own)."""
    takes_no_numbers = {
        "Backend", "Completion", "WorkerFault", "latency_shift",
        "LoadRun", "SimulatedLoad", "Pipeline", "PipelineResult", "Round",
        "ArrivalState", "ArrivalTimes", "WaitPolicy", "ServeResult",
        "SimulatedLatency", "QueryResult", "QueueFull",
        "PipelineServer",  # its serve shares Server.serve's check
    }  # fmt: skip
    tested_below = {"StreamingServer", "run_open_loop"}
    tabled = {fname.split(".")[0] for fname, *_ in NUMERIC}
    public = {
        n for n in dir(sv)
        if not n.startswith("_")
        and (inspect.isclass(getattr(sv, n)) or inspect.isfunction(getattr(sv, n)))
    }  # fmt: skip
    assert public - takes_no_numbers - tested_below - tabled == set()
    assert takes_no_numbers | tested_below | tabled <= public


def test_the_stream_frontend_refuses_bad_numbers_naming_them():
    server = _server()
    for kw, exc in [
        (dict(group_deadline=math.nan), ValueError),
        (dict(group_deadline=-1.0), ValueError),
        (dict(group_deadline=math.inf), ValueError),
        (dict(group_deadline="1"), TypeError),
        (dict(group_deadline=0.1, poll=0.0), ValueError),
        (dict(group_deadline=0.1, max_pending=0), ValueError),
        (dict(group_deadline=0.1, max_pending=2.5), TypeError),
    ]:
        with pytest.raises(exc, match=rf"^StreamingServer: {list(kw)[-1]} must be"):
            sv.StreamingServer(server, **kw)
    with sv.StreamingServer(server, group_deadline=0.01) as front:
        for at, exc in [(math.nan, ValueError), (math.inf, ValueError),
                        ("1", TypeError)]:  # fmt: skip
            with pytest.raises(exc, match=r"^StreamingServer.submit: at must be"):
                front.submit(X[0], at=at)
    for kw in [dict(max_seconds=-1.0), dict(timeout=math.nan)]:
        with sv.StreamingServer(_server(), group_deadline=0.01) as front:
            with pytest.raises(ValueError, match=rf"^run_open_loop: {next(iter(kw))}"):
                sv.run_open_loop(front, X, [0.0, 0.0], **kw)


# ----------------------------------------------------------------------------------
# what a worker returns: one floating array, or a clear error naming worker_fn


@pytest.mark.parametrize(
    "fn,came",
    [
        (lambda v: (v, v), "a tuple of 2 (float32 (3,), float32 (3,))"),
        (lambda v: [v], "a list of 1 (float32 (3,))"),
        (lambda v: {"a": v}, "a dict"),
        (lambda v: v.astype(jnp.int32), "int32 (3,)"),
        (lambda v: v > 0, "bool (3,)"),
    ],
    ids=["tuple", "list", "dict", "int", "bool"],
)
@pytest.mark.parametrize("backend", ["sim", "threads"])
def test_a_worker_output_that_is_not_one_floating_array_names_worker_fn(
    fn, came, backend
):
    be = sv.SimulatedCluster() if backend == "sim" else sv.ThreadCluster()
    with sv.Server(CODE, fn, backend=be) as server:
        with pytest.raises(TypeError) as info:
            server.infer(X)
    msg = str(info.value)
    assert msg.startswith("Server: worker_fn must return one floating array"), msg
    assert "float32 (3,)" in msg and msg.endswith(came), msg


def test_a_role_function_is_named_by_its_role():
    code = cj.parity_code(num_inputs=2, group=2)
    fns = {"base": double, "parity": lambda v: v.astype(jnp.int32)}
    with sv.Server(code, fns, backend=sv.SimulatedCluster()) as server:
        with pytest.raises(TypeError, match=r"^Server: worker_fn\['parity'\] must"):
            server.infer(np.ones((2, 3), np.float32))


# ----------------------------------------------------------------------------------
# a worker that raises: at its first request, as at any other


def _failing_while(armed):
    """A worker function that raises while ``armed`` is set (at run time, in a
    host callback, on every row it is given), else answers 2 v."""

    def host(v):
        if armed.is_set():
            raise RuntimeError("armed fault")
        return v

    def fn(v):
        out = jax.ShapeDtypeStruct(v.shape, v.dtype)
        return 2.0 * jax.pure_callback(host, out, v, vmap_method="expand_dims")

    return fn


@pytest.mark.parametrize("backend", ["sim", "sim-rows", "threads"])
def test_a_worker_that_raises_at_its_first_request_counts_as_failed(backend):
    # the warm-up runs the function too (the simulated cluster) and never
    # raises its runtime fault; the first request's workers all fail, the next
    # request (fault gone) decodes
    be = {
        "sim": lambda: sv.SimulatedCluster(injector=INJ),
        "sim-rows": lambda: sv.SimulatedCluster(injector=INJ, vectorize=False),
        "threads": sv.ThreadCluster,
    }[backend]()
    armed = threading.Event()
    armed.set()
    with sv.Server(CODE, _failing_while(armed), backend=be,
                   policy=sv.FixedN(3, deadline=5.0)) as server:  # fmt: skip
        first = server.infer(X)
        armed.clear()
        second = server.infer(X)
    assert not first.ok and first.status == TOO_FEW and first.failed.all()
    assert np.all(first.value == 0) and first.error == math.inf
    assert sorted(w for w, _ in first.failures) == list(range(M))
    assert all("armed fault" in what for _, what in first.failures)
    assert second.ok and not second.failed.any() and second.failures == ()
    np.testing.assert_allclose(second.value, 2.0 * X, rtol=1e-5, atol=1e-5)


def test_a_worker_that_raises_when_traced_once_serves_and_always_is_refused():
    calls = [0]

    def flaky(v):  # raises while traced the first time only
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("first trace")
        return 2.0 * v

    with sv.Server(CODE, flaky, backend=sv.SimulatedCluster()) as server:
        r = server.infer(X)
    assert r.ok
    np.testing.assert_allclose(r.value, 2.0 * X, rtol=1e-5, atol=1e-5)

    def broken(v):
        raise ValueError("no such layer")

    with sv.Server(CODE, broken, backend=sv.SimulatedCluster()) as server:
        with pytest.raises(ValueError) as info:
            server.infer(X)
    msg = str(info.value)
    assert msg.startswith("Server: worker_fn cannot run on a coded row (float32 (3,))")
    assert msg.endswith("ValueError: no such layer")


# ----------------------------------------------------------------------------------
# a worker that blocks holds up its own worker only


def test_blocked_workers_do_not_hold_up_the_others():
    rows = np.asarray(CODE.encode(X))
    release = threading.Event()
    blocked = 3  # workers 0..2 (more than the cores of a small machine): D = 2 left

    def host(v):
        if any(np.array_equal(v, rows[j]) for j in range(blocked)):
            release.wait(30.0)  # a blocked worker's row: blocks until teardown
        return v

    def fn(v):
        return 2.0 * jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    t0 = time.perf_counter()
    server = sv.Server(CODE, fn, backend=sv.ThreadCluster(), policy=sv.FixedN(2))
    try:
        # more requests than workers: each leaves a task at every blocked worker
        results = server.serve([X] * (M + 2), max_in_flight=1)
        wall = time.perf_counter() - t0
    finally:
        release.set()
        server.close()
    for r in results:
        assert r.ok and r.num_used == 2 and not r.mask[:blocked].any()
        np.testing.assert_allclose(r.value, 2.0 * X, rtol=1e-4, atol=1e-4)
    assert wall < 15.0  # the warm-up included: nothing waited for the release


# ----------------------------------------------------------------------------------
# a hung worker and a policy that waits for it: never decided, as data


def test_a_hung_worker_without_a_deadline_is_never_decided_everywhere():
    inj = sv.Injector(latency=cj.Constant(0.001), failed_workers={1: "hang"})
    sim = sv.simulate_latency(CODE, sv.FixedN(M), inj, 3)
    assert not sim.ok.any() and np.all(sim.status == TOO_FEW)
    assert np.all(np.isinf(sim.latency)) and not sim.timed_out.any()
    assert not sim.masks[:, 1].any() and np.all(sim.num_used == M - 1)
    for be in (sv.SimulatedCluster(injector=inj), sv.ThreadCluster(injector=inj)):
        with sv.Server(CODE, double, backend=be, policy=sv.FixedN(M)) as server:
            live = server.serve([X] * 3, max_in_flight=2)
        assert [r.ok for r in live] == [False] * 3
        assert [r.status for r in live] == [TOO_FEW] * 3
        assert all(math.isinf(r.latency) and np.all(r.value == 0) for r in live)
    # the same policy decides where the hung worker is not needed
    ok = sv.simulate_latency(CODE, sv.FixedN(M - 1), inj, 3)
    assert ok.ok.all() and np.all(ok.status == int(cj.Status.SUCCESS))
    assert np.all(np.isfinite(ok.latency)) and not ok.masks[:, 1].any()


def test_simulated_and_live_never_decided_requests_agree_request_by_request():
    inj = sv.Injector(latency=cj.Uniform(0.001, 0.002), fault_kinds=("hang",),
                      fault_prob=0.15, seed=3)  # fmt: skip
    n = 12
    sim = sv.simulate_latency(CODE, sv.FixedN(M), inj, n)
    assert sim.ok.any() and not sim.ok.all()  # both outcomes occur
    with sv.Server(CODE, double, backend=sv.SimulatedCluster(injector=inj,
                   queueing=False), policy=sv.FixedN(M)) as server:  # fmt: skip
        live = server.serve([X] * n, max_in_flight=1)
    np.testing.assert_array_equal([r.ok for r in live], sim.ok)
    np.testing.assert_array_equal([r.status for r in live], sim.status)
    np.testing.assert_allclose([r.latency for r in live], sim.latency)


# ----------------------------------------------------------------------------------
# latency models: every parameter of every model (the injector's service times,
# sample_arrivals, theory.plan --latency)

BASE = cj.ShiftedExponential(0.005, 0.005)
NOT_A_NUMBER = [("string", "1", TypeError), ("bool", True, TypeError)]
NON_FINITE = [("nan", math.nan, ValueError), ("inf", math.inf, ValueError)]
NEGATIVE = [("negative", -1.0, ValueError)]
# a median sample beyond float32: most (for a slowdown every slowed) samples inf
OVERFLOW = [("overflow", 1e39, ValueError)]

LATENCY = [
    ("Constant", "value", lambda v: cj.Constant(v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW),
    ("Uniform", "low", lambda v: cj.Uniform(v, 2.0),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE),
    ("Uniform", "high", lambda v: cj.Uniform(0.0, v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW + [("zero", 0.0, ValueError)]),
    ("ShiftedExponential", "shift", lambda v: cj.ShiftedExponential(v, 1.0),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW),
    ("ShiftedExponential", "mean", lambda v: cj.ShiftedExponential(0.0, v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW + [("zero", 0.0, ValueError),
                                                       ("beyond float32", 4e38,
                                                        ValueError)]),
    ("Pareto", "scale", lambda v: cj.Pareto(v, 2.0),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW + [("zero", 0.0, ValueError)]),
    ("Pareto", "shape", lambda v: cj.Pareto(1.0, v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + [("zero", 0.0, ValueError),
                                            ("tail index 1e-3", 1e-3, ValueError)]),
    ("Pareto", "shift", lambda v: cj.Pareto(1.0, 2.0, v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + OVERFLOW),
    ("RandomSlowdown", "prob", lambda v: cj.RandomSlowdown(BASE, v, factor=2.0),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + [("above one", 1.5, ValueError)]),
    ("RandomSlowdown", "factor", lambda v: cj.RandomSlowdown(BASE, 0.1, factor=v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + [("zero", 0.0, ValueError),
                                            ("overflow", 1e300, ValueError),
                                            ("beyond float32", 1e39, ValueError)]),
    # each model fine alone, a slowed worker's factor * base + extra overflows
    ("RandomSlowdown", "extra",
     lambda v: cj.RandomSlowdown(cj.Constant(1.0), 0.1, factor=2e38,
                                 extra=cj.Constant(v)),
     [("sum overflows", 2e38, ValueError)]),
    ("RandomSlowdown", "group_size",
     lambda v: cj.RandomSlowdown(BASE, 0.1, factor=2.0, group_size=v),
     [("zero", 0, ValueError), ("float", 1.5, ValueError),
      ("bool", True, ValueError)]),
    ("PersistentSlowdown", "factor", lambda v: cj.PersistentSlowdown(BASE, (0,), v),
     NOT_A_NUMBER + NON_FINITE + NEGATIVE + [("zero", 0.0, ValueError),
                                            ("overflow", 1e300, ValueError)]),
    ("PersistentSlowdown", "workers", lambda v: cj.PersistentSlowdown(BASE, (v,), 2.0),
     [("float", 1.5, TypeError), ("bool", True, TypeError)]),
]  # fmt: skip

LATENCY_CASES = _cases(LATENCY)


@pytest.mark.parametrize("model,arg,call,value,exc", LATENCY_CASES)
def test_every_latency_parameter_refuses_bad_values_naming_model_and_parameter(
    model, arg, call, value, exc
):
    with pytest.raises(exc) as info:
        call(value)
    msg = str(info.value)
    assert msg.startswith(f"{model}: ") and arg.split()[0] in msg, msg


def test_the_latency_table_covers_every_parameter_of_every_model():
    import dataclasses

    models = {
        n: getattr(cj, n)
        for n in ("Constant", "Uniform", "ShiftedExponential", "Pareto",
                  "RandomSlowdown", "PersistentSlowdown")
    }  # fmt: skip
    tabled = {(m, a) for m, a, *_ in LATENCY}
    fields = {
        (n, f.name) for n, cls in models.items() for f in dataclasses.fields(cls)
    } - {("RandomSlowdown", "base"), ("PersistentSlowdown", "base")}  # models
    assert fields == tabled
    assert {c.__name__ for c in cj.LatencyModel.__subclasses__()} == set(models)


@pytest.mark.parametrize(
    "text,model,arg",
    [
        ("pareto:1ms,0.001", "Pareto", "shape"),
        ("pareto:1ms,nan", "Pareto", "shape"),
        ("pareto:0ms,2", "Pareto", "scale"),
        ("const:-1ms", "Constant", "value"),
        ("const:1e39", "Constant", "value"),
        ("exp:0", "ShiftedExponential", "mean"),
        ("uniform:2ms,1ms", "Uniform", "high > low"),
        ("shifted-exp:5ms,5ms; slow=1.5 factor=2", "RandomSlowdown", "prob"),
        ("shifted-exp:5ms,5ms; slow=0.1 factor=1e300", "RandomSlowdown", "factor"),
        ("shifted-exp:5ms,5ms; slow=0.1 extra=pareto:1ms,0.001", "Pareto", "shape"),
        ("shifted-exp:5ms,5ms; workers=0 factor=1e300", "PersistentSlowdown", "factor"),
        ("shifted-exp:5ms,5ms; workers=0 factor=nan", "PersistentSlowdown", "factor"),
    ],  # fmt: skip
)
def test_the_text_form_refuses_what_the_models_refuse(text, model, arg):
    with pytest.raises(ValueError) as info:
        cj.parse_latency(text)
    msg = str(info.value)
    assert msg.startswith(f"parse_latency: {model}: ") and arg in msg, msg
    assert msg.endswith(f"(in {text!r})")


def test_a_slowdown_just_inside_float32_samples_finite_values():
    model = cj.RandomSlowdown(cj.Constant(1.0), 0.5, factor=1e38)
    t = np.asarray(jax.jit(lambda k: model.sample_jax(k, (8, M)))(jax.random.key(0)))
    assert np.isfinite(t).all() and (t > 1e37).any() and (t == 1.0).any()
    host = model.sample(np.random.default_rng(0), (8, M))
    assert np.isfinite(host).all() and (host > 1e37).any()
