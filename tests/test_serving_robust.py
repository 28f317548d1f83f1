"""Corrupted workers in the serving runtime: a robust code's suspects in the result.

A served request decodes with ``code.decode`` on the answers it reports, so a
corrupted worker's id is in ``ServeResult.suspects``/``suspect_ids`` and the value is
the offline robust decode of the same answers, bit for bit. The wait policies ask a
robust code no sooner than its ``correction_threshold`` D + 2A.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    SimulatedCluster,
    simulate_latency,
)

K, M, A = 3, 10, 1  # degree 1: D = 3, D + 2A = 5
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1, decoder="robust",
                        max_corrupted=A)  # fmt: skip
X = np.random.default_rng(0).uniform(-1, 1, (K, 4)).astype(np.float32)


def affine(v):
    """A degree-1 bf16 worker."""
    b = v.astype(jnp.bfloat16)
    return b * jnp.bfloat16(2) - jnp.bfloat16(1)


def _serve(injector, policy, code=CODE, x=X):
    with Server(code, affine, backend=SimulatedCluster(injector=injector),
                policy=policy) as server:  # fmt: skip
        return server.infer(x)


def _offline(r, code=CODE):
    return code.decode_answers(cj.Answers(jnp.asarray(r.responses),
        jnp.asarray(r.mask), jnp.asarray(r.order)))  # fmt: skip


def test_a_corrupted_worker_is_reported_and_the_value_is_the_offline_decode():
    inj = Injector(latency=cj.Constant(0.001), failed_workers={3: "corrupt"},
                   corrupt_scale=0.5)  # fmt: skip
    r = _serve(inj, FixedN(M))
    assert r.ok and r.status == int(cj.Status.SUCCESS)
    assert r.mask[3] and not r.failed[3]  # the answer arrived and was decoded
    assert r.suspects.dtype == bool and r.suspects.shape == (M,)
    assert r.suspect_ids.tolist() == [3]
    assert r.num_used == M - 1
    off = _offline(r)
    np.testing.assert_array_equal(r.value, np.asarray(off.value))
    np.testing.assert_array_equal(r.suspects, np.asarray(off.suspects))
    assert r.error == float(off.error)
    # and it is right: within the decoder's predicted error of the truth
    truth = 2 * X - 1
    assert float(np.max(np.abs(r.value - truth))) <= r.error


def test_a_clean_request_flags_nobody():
    r = _serve(Injector(latency=cj.Constant(0.001)), FixedN(M))
    assert r.ok and r.num_used == M
    assert r.suspects is not None and not r.suspects.any()
    assert r.suspect_ids.size == 0


def test_codes_that_do_not_look_report_none():
    plain = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)
    inj = Injector(latency=cj.Constant(0.001), failed_workers={3: "corrupt"},
                   corrupt_scale=0.5)  # fmt: skip
    r = _serve(inj, FixedN(M), code=plain)
    assert r.ok and r.suspects is None and r.suspect_ids.size == 0


def _first_arrivals(inj, n):
    delays, _ = inj.plan_one(0, M)
    return np.argsort(delays, kind="stable")[:n]


def test_policies_wait_for_d_plus_2a_answers():
    """The first answer to arrive is corrupted: at D answers it would pass unseen."""
    plan = Injector(latency=cj.ShiftedExponential(0.001, 0.01), seed=4)
    first = int(_first_arrivals(plan, 1)[0])
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.01), seed=4,
                   failed_workers={first: "corrupt"}, corrupt_scale=0.5)  # fmt: skip
    need = CODE.correction_threshold
    assert need == 5
    for policy in (FirstDecodable(), FixedN(), Adaptive(budget=1.0, deadline=10.0)):
        r = _serve(inj, policy)
        assert r.ok, policy
        assert int(r.mask.sum()) == need, policy  # the D + 2A first answers
        assert r.suspect_ids.tolist() == [first], policy
    # the latency simulator counts the same answers for FixedN's default
    sim = simulate_latency(CODE, FixedN(), inj, 8)
    assert np.all(sim.num_used == need)


# --- a noise level per answer from the master (Server(..., noise_fn=)) -------------
def amplitude(rows):
    """noise_fn: each worker's error bound from the coded row it was sent, [M]."""
    v = np.asarray(rows, np.float64)
    return (1e-4 + 3e-2 * np.max(np.abs(v), axis=1) ** 6).astype(np.float32)


def noisy(v):
    """A degree-1 worker whose error, a bounded pseudo-random term of amplitude
    ``amplitude(v)``, grows steeply with its input (as a cancelling worker's
    rounding does)."""
    a = 1e-4 + 3e-2 * jnp.max(jnp.abs(v)) ** 6
    return 2 * v - 1 + a * jnp.sin(1e3 * v + 0.5)


BF16 = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1, decoder="robust",
                        max_corrupted=A, worker_dtype="bfloat16")  # fmt: skip


def test_noise_fn_locates_a_corruption_below_one_global_levels_reach():
    rows = np.asarray(BF16.encode(X))
    sd = amplitude(rows)
    q = int(np.argmin(sd))  # the quietest worker
    # one global gamma must cover the loudest answer (as the benchmark's
    # rounding_gamma): gamma u s_i with s_i the decoder's answer size
    y = np.asarray(jax.vmap(noisy)(jnp.asarray(rows)), np.float64)
    size = np.sqrt(np.mean(y**2, axis=1) + np.mean(y**2) / 4)
    u = 2.0**-8
    gamma = float(np.max(sd / (u * size)))
    glob = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1, decoder="robust",
                            max_corrupted=A, worker_dtype="bfloat16",
                            noise_scale=gamma)  # fmt: skip
    c = 20 * float(sd[q])  # 20 of its own levels, under one of the global level's
    assert c < gamma * u * size[q]
    inj = Injector(latency=cj.Constant(0.001), failed_workers={q: "corrupt"},
                   corrupt_scale=c)  # fmt: skip
    with Server(BF16, noisy, backend=SimulatedCluster(injector=inj),
                policy=FixedN(M), noise_fn=amplitude) as server:  # fmt: skip
        r = server.infer(X)
    assert r.ok and r.suspect_ids.tolist() == [q]
    # bit for bit the offline decode with the same levels
    off = cj.robust_decode(jnp.asarray(r.responses), jnp.asarray(r.mask),
                                   BF16.alpha(), BF16.beta(), num_coeffs=3,
                                   max_corrupted=A, worker_dtype="bfloat16",
                                   noise_sd=jnp.asarray(sd))  # fmt: skip
    np.testing.assert_array_equal(r.value, np.asarray(off.value))
    np.testing.assert_array_equal(r.suspects, np.asarray(off.suspects))
    assert r.error == float(off.error) and r.status == int(off.status)
    truth = 2 * X.astype(np.float64) - 1
    assert float(np.max(np.abs(r.value - truth))) <= r.error
    # the one global level misses it (decoded, nobody flagged)
    r_glob = _serve(inj, FixedN(M), code=glob)
    assert r_glob.ok and r_glob.suspect_ids.size == 0
    # and a clean request flags nobody with the per-answer levels
    with Server(BF16, noisy, backend=SimulatedCluster(), policy=FixedN(M),
                noise_fn=amplitude) as server:  # fmt: skip
        clean = server.infer(X)
    assert clean.ok and clean.suspect_ids.size == 0


@pytest.mark.parametrize(
    "code, noise_fn, error, match",
    [
        (BF16, "sd", TypeError, "Server: noise_fn must be callable"),
        (cj.lagrange_code(num_inputs=K, num_workers=M, degree=1), amplitude,
         ValueError, "Server: noise_fn needs a code whose decode takes a per-answer"),
        (BF16, lambda rows: amplitude(rows)[:-1], ValueError,
         r"Server.infer: noise_fn must return a floating .* shape \[M\] = \[10\]"),
        (BF16, lambda rows: np.ones(M, np.int32), ValueError,
         "Server.infer: noise_fn must return a floating array"),
    ],
)  # fmt: skip
def test_bad_noise_fn_is_a_clear_error(code, noise_fn, error, match):
    with pytest.raises(error, match=match):
        with Server(code, affine, backend=SimulatedCluster(),
                    noise_fn=noise_fn) as server:  # fmt: skip
            server.infer(X)
