"""Latency models: their laws on both samplers, stragglers, the text form, bad values.

Every model samples on the host (numpy Generator) and from a jax key (float32); both
must follow the model's law (Kolmogorov-Smirnov against scipy's distribution, or a
binomial rate inside its 99.9% Wilson interval). The straggler models the serving
and planning code relies on must be expressible: a slowed fraction with an extra
delay, heavy tails with a shift, racks slowed together, persistently slow workers.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

import codedjax as cj
from codedjax.serving import Injector

T = 20_000
MS = 1e-3


def _wilson(k, n, z=3.29):
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def _both(model, shape, seed=0):
    """(host float64 sample, jax float32 sample as float64) of ``shape``."""
    host = model.sample(np.random.default_rng(seed), shape)
    dev = np.asarray(model.sample_jax(jax.random.key(seed), shape), np.float64)
    assert host.shape == dev.shape == shape
    return host, dev


@pytest.mark.parametrize(
    "model, law",
    [
        (cj.ShiftedExponential(5 * MS, 5 * MS), stats.expon(5 * MS, 5 * MS)),
        (cj.Pareto(1 * MS, 1.5, shift=5 * MS), stats.pareto(1.5, 5 * MS, 1 * MS)),
        (cj.Pareto(2.0, 3.0), stats.pareto(3.0, 0.0, 2.0)),
        (cj.Uniform(1.0, 3.0), stats.uniform(1.0, 2.0)),
    ],
    ids=["shifted-exp", "shifted-pareto", "pareto", "uniform"],
)
def test_base_models_have_their_laws_on_both_samplers(model, law):
    for s in _both(model, (T, 1)):
        assert stats.kstest(s[:, 0], law.cdf).pvalue > 1e-4


def test_constant_is_constant():
    host, dev = _both(cj.Constant(0.25), (3, 4))
    assert np.all(host == 0.25) and np.allclose(dev, 0.25)


def test_random_slowdown_with_an_extra_delay():
    """(a) 5 ms + Exp(5 ms), and with probability 0.05 a further Exp(mean 100 ms):
    the slowed fraction is 0.05 and the extra delay is Exp(100 ms)."""
    base = cj.ShiftedExponential(5 * MS, 5 * MS)
    model = cj.RandomSlowdown(base, prob=0.05, extra=cj.ShiftedExponential(0, 0.1))
    assert cj.parse_latency("shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms") == model
    for s in _both(model, (T, 2)):
        x = s.reshape(-1)
        # the mixture's CDF: 0.95 F_base + 0.05 (F_base * Exp(100 ms)) ~ hypoexponential
        lo, hi = _wilson(np.sum(x > 0.08), x.size)
        tail = 0.95 * stats.expon(5 * MS, 5 * MS).sf(0.08) + 0.05 * _hypo_sf(0.075)
        assert lo <= tail <= hi
        assert x.min() >= 5 * MS * (1 - 1e-6)


def _hypo_sf(t, a=5 * MS, b=0.1):
    """P(E_a + E_b > t) for independent exponentials of means a and b."""
    return (b * np.exp(-t / b) - a * np.exp(-t / a)) / (b - a)


def test_racks_are_slowed_together():
    """(c) racks of 5 consecutive workers slowed together by Exp(mean 100 ms) with
    probability 0.05: within a rack the extra delay is one draw, across racks the
    slowdowns are independent, at rate 0.05."""
    base = cj.Constant(5 * MS)
    model = cj.RandomSlowdown(
        base, prob=0.05, extra=cj.ShiftedExponential(0, 0.1), group_size=5
    )
    assert cj.parse_latency("const:5ms; slow=0.05 extra=exp:100ms rack=5") == model
    for s in _both(model, (T // 10, 12)):
        racks = s[:, :10].reshape(-1, 2, 5)
        np.testing.assert_allclose(racks, racks[..., :1].repeat(5, -1), rtol=1e-6)
        slow = s[:, ::5] > 5 * MS * (1 + 1e-5)  # rack 2 has workers 10, 11 only
        lo, hi = _wilson(slow.sum(), slow.size)
        assert lo <= 0.05 <= hi
        assert (
            stats.kstest(s[:, 0][slow[:, 0]] - 5 * MS, stats.expon(0, 0.1).cdf).pvalue
            > 1e-4
        )


def test_persistent_slowdown_and_multiplicative_slowdowns():
    """(d) two workers of every M ten times slower; and the classical random
    slowdown by a factor."""
    base = cj.ShiftedExponential(5 * MS, 5 * MS)
    slow2 = cj.PersistentSlowdown(base, workers=(0, -1), factor=10.0)
    for m in (4, 9):
        host, dev = _both(slow2, (T // 4, m))
        for s in (host, dev):
            law = stats.expon(50 * MS, 50 * MS)
            assert stats.kstest(s[:, 0], law.cdf).pvalue > 1e-4
            assert stats.kstest(s[:, m - 1], law.cdf).pvalue > 1e-4
            assert stats.kstest(s[:, 1], stats.expon(5 * MS, 5 * MS).cdf).pvalue > 1e-4
    fact = cj.RandomSlowdown(cj.Constant(1.0), prob=0.25, factor=10.0)
    for s in _both(fact, (T, 1)):
        assert set(np.unique(np.round(s, 4))) == {1.0, 10.0}
        lo, hi = _wilson(np.sum(s > 5), s.size)
        assert lo <= 0.25 <= hi


def test_heavy_tail_with_a_shift_from_text():
    """(b) 5 ms + Pareto(scale 1 ms, shape 1.5)."""
    m = cj.parse_latency("shifted-pareto:5ms,1ms,1.5")
    assert m == cj.Pareto(scale=1e-3, shape=1.5, shift=5e-3)


@pytest.mark.parametrize(
    "spec",
    [
        "const:0",
        "uniform:0,1",
        "exp:2ms",
        "shifted-exp:5ms,5ms",
        "pareto:1ms,1.5",
        "shifted-pareto:5ms,1ms,1.5",
        "shifted-exp:1ms,1ms; slow=0.1 factor=10",
        "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5",
        "shifted-exp:5ms,5ms; workers=0,1 factor=10; slow=0.01 factor=3",
    ],
)
def test_text_form_round_trips(spec):
    model = cj.parse_latency(spec)
    assert isinstance(model, cj.LatencyModel)
    assert cj.parse_latency(str(model)) == model
    assert hash(model) == hash(cj.parse_latency(str(model)))


@pytest.mark.parametrize(
    "spec, match",
    [
        ("gamma:1,2", "expected a model"),
        ("shifted-exp:5ms", "shifted-exp takes shifted-exp:SHIFT,MEAN"),
        ("exp:5 parsecs", "cannot read a duration"),
        ("pareto:1,1e-3", "Pareto: shape makes most samples infinite"),
        ("exp:1; slow=0.5", "RandomSlowdown: a slowdown needs factor"),
        ("exp:1; slow=1.5 factor=2", r"RandomSlowdown: prob must be in \[0, 1\]"),
        ("exp:1; slow=0.1 factor=2 color=red", "a slow= modifier takes"),
        ("exp:1; workers=0,1", "a workers= modifier takes factor="),
        ("exp:1; fast", "expected KEY=VALUE"),
    ],
)
def test_bad_text_is_a_clear_error(spec, match):
    with pytest.raises(ValueError, match="parse_latency: " + match):
        cj.parse_latency(spec)


def test_the_injector_draws_the_model_per_worker_stream():
    """The injector's delays are the model's, worker i from its own stream: they do
    not depend on M, and the slowed fraction is the model's."""
    model = cj.parse_latency("shifted-exp:1ms,1ms; slow=0.2 factor=10 rack=2")
    inj = Injector(latency=model, seed=5)
    d6, _ = inj.plan(np.arange(600), 6)
    d10, _ = inj.plan(np.arange(600), 10)
    np.testing.assert_array_equal(d6, d10[:, :6])
    # a slowed worker takes 10 (1 ms + E) >= 10 ms; an unslowed one exceeds 10 ms
    # with probability exp(-9)
    slow = d10[:, ::2] >= 10 * MS
    lo, hi = _wilson(slow.sum(), slow.size)
    assert lo <= 0.2 + 0.8 * np.exp(-9.0) <= hi
    # racks of 2: both workers of a rack slowed together
    assert np.mean(slow == (d10[:, 1::2] >= 10 * MS)) >= 1 - 4 * np.exp(-9.0)
    with pytest.raises(TypeError, match="Injector: latency must be a codedjax"):
        Injector(latency="shifted-exp:1ms,1ms")
