"""codedjax.serving: one model of the workers, each wait policy's rule stated once.

``simulate_latency`` is ``simulate_load``'s model when every request finds its
workers idle: at an arrival rate so low that the workers are always idle, the two
give the same decisions on the same requests (the same draws). And a built-in
policy's ``decide`` (one event at a time, what the server asks) and its
``decision_times`` (R requests at once, what the simulators ask) are one rule:
on random arrival sequences they decide at the same answer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    ArrivalState,
    ArrivalTimes,
    Deadline,
    FirstDecodable,
    FixedN,
    Injector,
    simulate_latency,
    simulate_load,
)

K, M = 3, 8
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 3
REPL = cj.replication_code(num_inputs=K, num_workers=9)  # workers i -> query i % 3
ROBUST = cj.lagrange_code(num_inputs=K, num_workers=10, degree=1, decoder="robust",
                          max_corrupted=1)  # fmt: skip  # D + 2A = 5
LAT = cj.RandomSlowdown(cj.ShiftedExponential(0.001, 0.001), prob=0.1, factor=10.0)
FAULTY = Injector(latency=LAT, fault_kinds=("raise", "hang", "nan", "corrupt"),
                  max_faulty=3, seed=5)  # fmt: skip


@pytest.mark.parametrize(
    "policy",
    [FixedN(5, deadline=0.02), FixedN(deadline=0.0022), Deadline(0.006)],
    ids=["fixedn5", "fixedn-tight", "deadline"],
)
def test_simulate_latency_is_simulate_load_on_idle_workers(policy):
    # one query a second, each group released at most 20 ms after its fan-out:
    # every group finds its workers idle, a group of one sent at its deadline
    r, first, gd = 150, 40, 0.004
    a = np.arange(r) * 1.0 + 0.25
    load = simulate_load(CODE, policy, FAULTY, a, group_deadline=gd,
                         first_group=first)  # fmt: skip
    idle = simulate_load(CODE, policy, FAULTY, a, group_deadline=gd,
                         first_group=first, queueing=False)  # fmt: skip
    for got, want in zip(load, idle, strict=True):  # the queues never mattered
        np.testing.assert_array_equal(got, want)
    lat = simulate_latency(CODE, policy, FAULTY, r, first_request=first)
    np.testing.assert_array_equal(load.group, np.arange(r))
    np.testing.assert_array_equal(load.sent, a + gd)
    # the same draws decide the same answers ...
    np.testing.assert_array_equal(load.num_used, lat.num_used)
    np.testing.assert_array_equal(load.timed_out, lat.timed_out)
    np.testing.assert_array_equal(load.ok, lat.ok)
    # ... at the same time from the fan-out, up to the one rounding of the load's
    # absolute times (sent + delay)
    tol = np.finfo(np.float64).eps * load.decided.max()
    np.testing.assert_allclose(load.decided - load.sent, lat.latency, rtol=0,
                               atol=tol)  # fmt: skip
    assert lat.timed_out.any() and not lat.timed_out.all()
    assert (lat.num_used < M).any()  # faults and stragglers shape the masks


def test_an_answer_at_the_decision_is_an_evaluation_in_both_simulators():
    # zero service: every answer comes at the fan-out, the decision too; the
    # evaluations that answered by the decision count (as the cluster counts an
    # answered one), never fewer than the answers in hand
    a = np.arange(30) * 0.001
    inj = Injector(latency=cj.Constant(0.0))
    for queueing in (True, False):
        sim = simulate_load(CODE, FixedN(K), inj, a, group_deadline=0.004,
                            queueing=queueing)  # fmt: skip
        np.testing.assert_array_equal(sim.num_used, M)
        np.testing.assert_array_equal(sim.evaluations, M)
        np.testing.assert_array_equal(sim.busy, 0.0)


# ------------------------------------------------------------------ one rule


class _Decoded(NamedTuple):
    ok: np.ndarray
    error: np.ndarray


_WEIGHTS = np.random.default_rng(3).integers(1, 2**16, 10)


def _fake_decode(masks):
    """A deterministic stand-in decode of the answers in hand (ok and the max
    predicted error a function of the mask), for both sides of the rule."""
    h = (np.asarray(masks, np.int64) * _WEIGHTS[: masks.shape[-1]]).sum(axis=-1)
    return h % 3 != 0, (h % 101) / 100.0


def _arrivals(r, m, seed):
    """[R, M] successful arrival times (inf: failed or hung) and [R] when every
    worker is done (inf when one hangs)."""
    rng = np.random.default_rng(seed)
    t = rng.exponential(1.0, (r, m))
    failed = rng.random((r, m)) < 0.2
    hung = rng.random((r, m)) < 0.03
    success = np.where(failed | hung, np.inf, t)
    all_done = np.where(hung.any(axis=1), np.inf, t.max(axis=1))
    return success, all_done


def _event_times(policy, code, success, all_done):
    """The server's way: ask ``decide`` after each successful answer, in arrival
    order; when it never says yes, the request ends when every worker is done."""
    out = all_done.copy()
    for r in range(len(success)):
        order = np.argsort(success[r], kind="stable")
        mask = np.zeros(code.num_workers, bool)
        for n, i in enumerate(order[np.isfinite(success[r][order])]):
            mask[i] = True
            ok, err = _fake_decode(mask[None])
            decoded = _Decoded(ok[0], np.array([err[0], err[0] / 2]))
            state = ArrivalState(code, mask.copy(), order[: n + 1], success[r, i], 0,
                                 None, lambda d=decoded: d)  # fmt: skip
            if policy.decide(state):
                out[r] = success[r, i]
                break
    return out


@pytest.mark.parametrize("code", [CODE, REPL, ROBUST],
                         ids=["chebyls", "replication", "robust"])  # fmt: skip
def test_each_policy_decides_at_the_same_answer_one_by_one_and_all_at_once(code):
    m = code.num_workers
    success, all_done = _arrivals(120, m, seed=m)
    policies = [
        FixedN(), FixedN(m - 2), Deadline(2.0), FirstDecodable(),
        Adaptive(0.5, 2.0), Adaptive(0.3, 2.0, min_responses=m - 3),
    ]  # fmt: skip
    early = {}  # the fraction decided before every worker is done
    for policy in policies:
        events = _event_times(policy, code, success, all_done)
        early[repr(policy)] = np.mean(events < all_done)
        for deadline in (None, 0.9):
            times = ArrivalTimes(code, success, all_done, deadline, _fake_decode)
            at_once = policy.decision_times(times)
            dl = np.inf if deadline is None else deadline
            np.testing.assert_array_equal(
                np.minimum(at_once, dl), np.minimum(events, dl), err_msg=repr(policy)
            )
    # Deadline waits for every worker; the others decide early on some requests,
    # and some wait to the end on some (the accepting and refusing branches)
    assert early.pop(repr(policies[2])) == 0
    assert 0 < min(early.values()) < 1, early
