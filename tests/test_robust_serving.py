"""benchmarks.robust_serving: its counts of located, missed and falsely alarmed
corruptions on a small served run, and the rounding model of its bf16 worker."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from benchmarks import robust_serving as rs
from codedjax.serving import FirstDecodable, Injector

K, M = 3, 10


def test_robust_serving_benchmark_counts_and_its_rounding_model():
    cfg = rs.RobustServingConfig(num_inputs=K, num_workers=M, num_features=4,
                                 num_requests=6, decode_repeats=1)  # fmt: skip
    xs = rs._inputs(cfg)
    cheb = cj.lagrange_code(num_inputs=K, num_workers=M, degree=3)  # D = 7
    gamma = rs.rounding_gamma(cfg, xs, cheb)
    # cancellation puts it above the dtype model's sqrt((d^2 + 1) / 3) for d = 3
    assert gamma > np.sqrt((3**2 + 1) / 3)
    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=3, decoder="robust",
                            max_corrupted=1, noise_scale=gamma)  # fmt: skip
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.01), seed=2,
                   fault_kinds=("corrupt",), max_faulty=1,
                   corrupt_scale=rs.answer_rms(cfg, xs, cheb))  # fmt: skip
    row = rs.run_scheme(cfg, "robust1-first", code, FirstDecodable(), xs, inj,
                        show_progress=False)  # fmt: skip
    _, faults = inj.plan(np.arange(6), M)
    assert row["requests"] == 6 and row["corrupted"] + row["clean"] == 6
    assert 0 < row["corrupted"] <= int((faults > 0).any(axis=1).sum())
    assert row["located"] + row["missed"] + row["other"] == pytest.approx(1.0)
    assert row["answers"] >= code.correction_threshold  # D + 2A = 9
    # the rounding model of the bf16 worker against its measured errors: each
    # rounding's standard deviation is at most u / sqrt(3), so the errors in units
    # of the model's sigma have rms <= 1
    v = np.random.default_rng(0).uniform(-2, 2, 20000).astype(np.float32)
    got = np.asarray(rs.worker_fn(jnp.asarray(v)), np.float64)
    v64 = v.astype(np.float64)
    exact = v64**3 - v64
    u = 2.0**-8
    sd = u * np.sqrt((((3 * v64**2 - 1) * v64) ** 2 + 2 * v64**6 + exact**2) / 3.0)
    z = (got - exact) / sd
    assert float(np.sqrt(np.mean(z**2))) <= 1.0
    # the per-answer level (the server's noise_fn) bounds each worker's errors:
    # their rms over the worker's features is within its level
    rows = np.asarray(cheb.encode(xs[0]))
    level = rs.rounding_sd(rows)
    assert level.shape == (M,) and level.dtype == np.float32
    err = np.asarray(rs.worker_fn(jnp.asarray(rows)), np.float64) - (
        rows.astype(np.float64) ** 3 - rows.astype(np.float64)
    )
    assert np.all(np.sqrt(np.mean(err**2, axis=1)) <= level)
