"""Layer-wise coding (models.layerwise) on PipelineServer: a DCNv2's cross and deep
layers and the MNIST MLP (ReLU included) exact in float64 through every round, and
the regime map's
vectorised layer-wise answers and latencies equal the served ones (bf16 workers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _params import numpy_module
from flax import nnx

import codedjax as cj
from benchmarks.regimes import inputs, rounds, workload
from codedjax.serving import (
    FixedN,
    Injector,
    PipelineServer,
    SimulatedCluster,
    latency_shift,
    simulate_latency,
)
from models.dcn import DCNConfig, DCNv2
from models.layerwise import (
    LATENCIES,
    dcn_rounds,
    latency_text,
    layer_pipeline,
    mlp_layers,
    mlp_rounds,
    mlp_worker,
    pipeline_values,
    reference,
    straggler,
    sweep_n,
)
from models.mlp import MLP

pytestmark = pytest.mark.loose_promotion

K, M, N = 4, 7, 5


_drawn = numpy_module  # numpy-drawn parameters: the rounds' bias is checked too


# the models' own forward passes as one compiled program each (run eagerly, every
# primitive would compile on its own)
@nnx.jit
def _logits_from_x0(model, x0):
    return model.logits_from_x0(x0)


@nnx.jit
def _apply(model, x):
    return model(x)


@pytest.fixture(scope="module")
def code():
    return cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)


def test_dcn_rounds_give_the_models_logits_in_float64(x64, code):
    cfg = DCNConfig(
        vocab_sizes=(), num_numeric=6, num_cross_layers=2, deep_sizes=(12, 5)
    )
    model = _drawn(lambda: DCNv2(cfg, rngs=nnx.Rngs(0)), 2)
    rounds = dcn_rounds(model)
    x = np.random.default_rng(0).uniform(-1, 1, (K, 6))
    x32 = jax.device_put(x.astype(np.float32))
    want = np.asarray(_logits_from_x0(model, x32), np.float64)
    got = reference(rounds, x)[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    pipe = layer_pipeline(code, rounds, dtype=jnp.float64, policy=FixedN(K))
    with PipelineServer(pipe, backend=SimulatedCluster()) as server:
        r = server.infer(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(r.value)[:, 0], got, rtol=0, atol=1e-10)


def test_vectorised_layerwise_equals_the_served_pipeline_with_bf16_workers(code):
    wl = workload("deep", 8, 0)
    layers = rounds(wl)
    model = cj.RandomSlowdown(
        cj.ShiftedExponential(0.005, 0.005), prob=0.3, factor=10.0
    )
    inj = Injector(latency=model, seed=5)
    xs = inputs(2, 4, K, 8)
    pipe = layer_pipeline(code, layers, policy=FixedN(N))
    with PipelineServer(
        pipe, backend=SimulatedCluster(injector=inj), charge_master=False
    ) as server:
        served = server.serve([jnp.asarray(x) for x in xs], max_in_flight=1)
    sim = simulate_latency(code, FixedN(N), inj, len(xs))
    vals = pipeline_values(code, layers, xs, sim.masks, chunk=8)
    for r, v in zip(served, vals, strict=True):
        np.testing.assert_allclose(np.asarray(r.value), v, rtol=1e-6, atol=1e-6)
    # L rounds of s + (T - s) / L each: the one-shot time plus (L - 1) shifts
    want = sim.latency + (wl.num_layers - 1) * latency_shift(model)
    np.testing.assert_allclose([r.latency for r in served], want, rtol=1e-9)
    err = np.abs(vals - wl.truth(xs)).max() / np.abs(wl.truth(xs)).max()
    assert 1e-5 < err < 3e-2  # bf16 rounding, not an exact float32 answer


def test_mlp_rounds_are_the_mlp_with_logits_last():
    rng = np.random.default_rng(1)
    layers = [
        (rng.normal(size=(6, 5)), rng.normal(size=5)),
        (rng.normal(size=(5, 3)), rng.normal(size=3)),
    ]
    x = rng.normal(size=(4, 6))
    h = np.maximum(x @ layers[0][0] + layers[0][1], 0)
    want = h @ layers[1][0] + layers[1][1]  # no ReLU on the logits
    got = reference(mlp_rounds(layers, last_relu=False), x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_mnist_mlp_layer_wise_is_the_uncoded_mlp_in_float64(x64, code):
    model = _drawn(lambda: MLP(rngs=nnx.Rngs(0)), 3)
    layers = mlp_layers(model)
    assert [w.shape for w, _ in layers] == [(784, 200), (200, 100), (100, 10)]
    rounds = mlp_rounds(layers, last_relu=False)
    x = np.random.default_rng(4).uniform(0, 1, (K, 28, 28, 1))
    # float64: x64 promotes the layers
    want = np.asarray(_apply(model, jax.device_put(x)))
    assert want.dtype == np.float64
    rows = x.reshape(K, -1)
    np.testing.assert_allclose(reference(rounds, rows), want, rtol=1e-12, atol=1e-12)
    whole = jax.jit(jax.vmap(mlp_worker(layers, jnp.float64)))(jax.device_put(rows))
    np.testing.assert_allclose(np.asarray(whole), want, rtol=1e-12, atol=1e-12)
    # three rounds decoding N of M (two straggler patterns), the bias and ReLU at
    # the master: the vectorised pipeline, equal to PipelineServer's answers (above)
    masks = np.zeros((2, M), bool)
    masks[0, [0, 2, 3, 5, 6]] = masks[1, [1, 2, 3, 4, 5]] = True
    got = pipeline_values(
        code, rounds, np.stack([rows] * 2), masks, dtype=jnp.float64, chunk=2
    )
    np.testing.assert_allclose(got, np.stack([want] * 2), rtol=0, atol=1e-10)


def test_sweep_n_walks_n_from_k_on_the_straggler_models_draws(code):
    # the persistent model's two slow workers are drawn from (seed, M): the same
    # two for the same seed, among the M
    text, inj, shift = straggler("persistent", M, 3)
    assert text == latency_text("persistent", M, 3) != LATENCIES["persistent"]
    slow = [int(w) for w in text.split("workers=")[1].split()[0].split(",")]
    assert len(set(slow)) == 2 and all(0 <= w < M for w in slow)
    assert shift == latency_shift(cj.parse_latency(text)) > 0
    with pytest.raises(ValueError, match="latency_text: name must be one of"):
        latency_text("bursty", M, 0)
    wl = workload("deep", 8, 0)
    layers = rounds(wl)
    xs = inputs(1, 6, K, 8)
    got = list(sweep_n(code, layers, xs, inj, 6, shift))
    assert [n for n, _, _ in got] == list(range(K, M + 1))
    for n, values, lat in got:
        sim = simulate_latency(code, FixedN(n), inj, 6)  # the same cached delays
        np.testing.assert_array_equal(
            values, pipeline_values(code, layers, xs, sim.masks)
        )
        np.testing.assert_array_equal(lat, sim.latency + (len(layers) - 1) * shift)
