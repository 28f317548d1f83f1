"""codedjax.serving.RayCluster on an embedded local Ray instance (a few actors).

Skipped, with the reason, when Ray is not installed (``pip install 'codedjax[ray]'``).
"""

from __future__ import annotations

import threading

import jax.numpy as jnp
import numpy as np
import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: pip install 'codedjax[ray]'"
)

import codedjax as cj  # noqa: E402
from codedjax.serving import (  # noqa: E402
    FixedN,
    Injector,
    RayCluster,
    Server,
    ThreadCluster,
)

# ray.init forks its helper processes from this (multithreaded, JAX) process
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")

K, M = 3, 8
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 3


def _make_affine():
    # a closure: cloudpickle ships it to the actors by value (the test module is
    # not importable there)
    def affine(v):
        b = v.astype(jnp.bfloat16)
        return b * jnp.bfloat16(2) - jnp.bfloat16(1)

    return affine


affine = _make_affine()


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """One embedded Ray instance for the module (2 CPUs, no dashboard)."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
        log_to_driver=False,
    )
    yield
    ray.shutdown()


def test_ray_backend_same_values_as_threads_and_survives_a_killed_actor(ray_session):
    xs = np.random.default_rng(0).uniform(-1, 1, (3, K, 4)).astype(np.float32)
    with Server(CODE, affine, backend=ThreadCluster(), policy=FixedN(M)) as server:
        want = server.serve(xs)
    # workers i, i + 2, i + 4, ... share actor i % 2; every answer takes 0.3 s
    inj = Injector(latency=cj.Constant(0.3))
    backend = RayCluster(num_actors=2, slots_per_actor=M, injector=inj)
    with Server(CODE, affine, backend=backend, policy=FixedN(M, deadline=60.0)) as s:
        got = s.serve(xs, max_in_flight=2)
        for a, b in zip(got, want, strict=True):
            assert a.ok and b.ok and a.num_used == b.num_used == M
            np.testing.assert_array_equal(a.responses, b.responses)
            np.testing.assert_array_equal(a.value, b.value)
        # kill actor 0 while its four workers hold their answers, mid-request
        timer = threading.Timer(0.1, backend.kill_actor, args=(0,))
        timer.start()
        r = s.infer(xs[0])
        timer.join()
        assert r.ok and not r.timed_out  # every worker answered, four as failures
        np.testing.assert_array_equal(r.failed, np.arange(M) % 2 == 0)
        np.testing.assert_array_equal(r.mask, np.arange(M) % 2 == 1)
        assert r.num_used == M // 2
        # the value is the decode of the surviving answers (the same bits as the
        # thread backend's answers) on that mask
        off = CODE.decode_answers(cj.Answers(jnp.asarray(want[0].responses),
        jnp.asarray(r.mask), jnp.asarray(r.order)))  # fmt: skip
        np.testing.assert_array_equal(r.value, np.asarray(off.value))
        # the next request finds the dead actor's workers failing at once
        r2 = s.infer(xs[1])
        assert r2.ok and r2.failed.sum() == M // 2


def _make_rounds():
    # closures (shipped by value): a 2-role round (the last worker runs a function
    # of its own) and a second round of another function
    def base(v):
        return v * jnp.float32(2)

    def other(v):
        return v * jnp.float32(2) + jnp.float32(0)

    def second(v):
        return v - jnp.float32(1)

    return base, other, second


def test_ray_backend_streams_roles_and_rounds_like_the_simulator(ray_session):
    import dataclasses

    from codedjax.serving import (
        Pipeline,
        PipelineServer,
        Round,
        SimulatedCluster,
        StreamingServer,
    )

    @dataclasses.dataclass(frozen=True)
    class Tagged(type(CODE)):
        @property
        def roles(self):
            return ("base",) * (M - 1) + ("other",)

    tagged = Tagged(*[getattr(CODE, f.name) for f in dataclasses.fields(CODE)])
    base, other, second = _make_rounds()
    pipe = Pipeline([Round(tagged, {"base": base, "other": other}, policy=FixedN(M)),
                     Round(CODE, second, policy=FixedN(M))])  # fmt: skip
    xs = np.random.default_rng(1).uniform(-1, 1, (2, K, 4)).astype(np.float32)
    with PipelineServer(pipe, backend=SimulatedCluster()) as server:
        want = server.serve(xs)
    # the same requests as a stream of queries (groups of K in arrival order)
    # one actor starts faster; one object per answer (batch_answers=False): the
    # other way of returning them gives the same results
    backend = RayCluster(num_actors=1, slots_per_actor=M, batch_answers=False)
    front = StreamingServer(PipelineServer(pipe, backend=backend), group_deadline=30.0)
    with front:
        futs = [front.submit(q) for q in xs.reshape(-1, 4)]
        got = [f.result(60.0) for f in futs]
    for i, g in enumerate(got):
        b = want[i // K]
        assert g.ok and b.ok and (g.group, g.slot) == (i // K, i % K)
        for ra, rb in zip(g.result.rounds, b.rounds, strict=True):
            np.testing.assert_array_equal(ra.responses, rb.responses)
        np.testing.assert_array_equal(g.value, b.value[i % K])
        assert g.evaluations == 2 * M / K  # every evaluation of both rounds


def test_ray_cost_splits_each_request_and_leaves_a_running_ray_up(
    ray_session, tmp_path
):
    """benchmarks.ray_cost at its tiniest (M = 4, one actor, 5 requests per
    mode): both ways of returning the answers decode every request, the parts
    are times (the engine's, the remainder, is the encode and decode: > 0), the
    page holds the table, and Ray, started by someone else, stays up."""
    from benchmarks import ray_cost

    page = tmp_path / "ray.md"
    argv = ["--workers", "4", "--actors", "1", "--requests", "5", "--no-progress"]
    s = ray_cost.main(argv + ["--out", str(tmp_path / "run"),
                              "--results-page", str(page)])  # fmt: skip
    assert ray.is_initialized()
    (cell,) = s["cells"]
    assert (cell["M"], cell["K"], cell["actors"]) == (4, 2, 1)
    for mode in ray_cost.MODES:
        parts = cell["modes"][mode]
        assert all(parts[p]["p50"] >= 0 for p in ("submit", "wait", "fetch"))
        assert parts["engine"]["p50"] > 0
        assert parts["latency"]["p50"] >= parts["wait"]["p50"]
    assert cell["ray_fanout"]["p50"] > 0 and s["threads"][0]["latency"]["p50"] > 0
    text = page.read_text()
    assert "| 4 | 1 | batched |" in text and "| 4 | 1 | each |" in text
    assert "python -m benchmarks.ray_cost " + " ".join(argv) in text
