"""The engine takes answers in batches: every answer ready at a wake-up in one
pass, the policy asked once per batch, the round ended at the answer where
asking after every answer would have ended it.

A scripted backend hands the engine fixed batches of answers, so each check is
exact (no thread, no timing): which answers a round decodes, which workers
failed and why, how often the policy is asked and how many decodes it costs.
The thread cluster's own batches are checked for what they hold, not for when.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import (
    Completion,
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    ThreadCluster,
    _backends,
    _request,
)

K, M = 3, 8
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 3


def affine(v):
    return v * jnp.float32(2) - jnp.float32(1)


class Scripted(_backends.BackendBase):
    """A backend that answers each request in the batches ``script`` gives:
    ``[[worker, ...], ...]`` (every worker's true answer, ``affine`` of its
    row), or ``(worker, value)`` for a given value; the clock moves by one
    second per batch."""

    def __init__(self, script):
        self.script = script
        self.batches_sent = 0
        self._t = 0.0
        self._queue: list = []

    def start(self, worker_fn, num_workers):
        self.num_workers = num_workers

    def now(self):
        return self._t

    def submit(self, request_id, rows, **kw):
        answers = np.asarray(jax.vmap(affine)(jnp.asarray(rows)))
        for batch in self.script:
            out = []
            for w in batch:
                w, v = w if isinstance(w, tuple) else (w, answers[w])
                out.append((request_id, w, v))
            self._queue.append(out)

    def next_completed(self, timeout):  # the engine reads batches
        raise AssertionError("the engine must read next_completions")

    def next_completions(self, timeout):
        if not self._queue:
            return []
        self._t += 1.0
        self.batches_sent += 1
        return [Completion(r, w, v, self._t) for r, w, v in self._queue.pop(0)]

    def cancel(self, request_id):
        self._queue.clear()

    def close(self):
        pass


class Counting:
    """``inner``'s rule, counting how often it is asked and how often it
    decodes."""

    def __init__(self, inner):
        self.inner = inner
        self.deadline = inner.deadline
        self.asked = 0
        self.decodes = 0

    def decide(self, arrivals):
        self.asked += 1
        decode = arrivals.decode

        def counted():
            self.decodes += 1
            return decode()

        arrivals.decode = counted
        return self.inner.decide(arrivals)


X = np.random.default_rng(0).uniform(-1, 1, (K, 4)).astype(np.float32)


def _serve(script, policy):
    backend = Scripted(script)
    with Server(CODE, affine, backend=backend, policy=policy) as server:
        return server.infer(X), backend


def test_a_batch_decides_at_its_nth_answer_asked_once_and_bisected():
    # all M answers in one batch: the round still decodes the first N
    policy = Counting(FixedN(5))
    r, backend = _serve([list(range(M))], policy)
    assert r.ok and r.num_used == 5 and r.mask.tolist() == [True] * 5 + [False] * 3
    assert r.order[:5].tolist() == [0, 1, 2, 3, 4]
    # the later answers of the batch count as not arrived
    assert np.isinf(r.arrival_times[5:]).all() and r.cancelled[5:].all()
    assert not r.responses[5:].any()
    # asked about the whole batch, its last but one answer, then a bisection:
    # far fewer than once per answer
    assert 2 <= policy.asked <= 2 + int(np.ceil(np.log2(M)))
    np.testing.assert_allclose(r.value, np.asarray(affine(X)), rtol=0, atol=1e-5)


def test_a_batch_that_does_not_decide_is_asked_about_once():
    policy = Counting(FixedN(6))
    r, backend = _serve([[0, 1], [2, 3, 4], [5, 6, 7]], policy)
    # two batches that do not decide (one question each), then the third
    assert r.num_used == 6 and backend.batches_sent == 3
    assert policy.asked <= 2 + 3


def test_failures_before_and_after_the_deciding_answer():
    bad = np.full(4, np.nan, np.float32)
    script = [[0, (1, ValueError("lost")), 2, (3, bad), 4, (5, bad[:2]), 6, 7]]
    r, _ = _serve(script, FixedN(3))
    # decided at worker 4 (the third success); worker 5's bad answer came after
    assert r.num_used == 3 and r.mask.tolist() == [1, 0, 1, 0, 1, 0, 0, 0]
    assert r.failed.tolist() == [0, 1, 0, 1, 0, 0, 0, 0]
    assert [w for w, _ in r.failures] == [1, 3]
    assert "raised ValueError: lost" in r.failures[0][1]
    assert "non-finite" in r.failures[1][1]
    # every worker but the cut ones answered or failed
    np.testing.assert_array_equal(np.isfinite(r.arrival_times), r.mask | r.failed)


def test_duplicates_in_a_batch_count_once():
    script = [[0, 0, 1, 1, 2], [2, 3]]
    r, _ = _serve(script, FixedN(4))
    assert r.num_used == 4 and r.order[:4].tolist() == [0, 1, 2, 3]


def test_every_answer_failed_ends_the_round_without_a_decision():
    script = [[(w, ValueError("x")) for w in range(M)]]
    r, _ = _serve(script, FixedN(3))
    assert not r.ok and r.failed.all() and r.num_used == 0


def test_a_decoding_policy_decodes_no_more_than_answer_by_answer():
    # the whole batch at once: FirstDecodable decides at the threshold D = 3
    # with one decode once it is known to decode (the first request teaches it)
    policy = Counting(FirstDecodable())
    backend = Scripted([list(range(M))])
    with Server(CODE, affine, backend=backend, policy=policy) as server:
        first = server.infer(X)
        before = policy.decodes
        second = server.infer(X)
    assert first.num_used == second.num_used == CODE.threshold
    assert policy.decodes - before == 1


def test_request_prefix_and_cut_restate_the_answers_as_of_an_answer():
    out = jax.ShapeDtypeStruct((2,), np.float32)
    r = _request.Request(0, 0, 0.0, None, 1)
    r.new_round(4, 0.0, 0.0, np.inf, out)
    v = np.ones(2, np.float32)
    cs = [Completion(0, 2, v, 1.0), Completion(0, 0, ValueError("x"), 1.0),
          Completion(0, 3, v, 2.0), Completion(0, 1, v, 3.0)]  # fmt: skip
    assert r.take(cs, out) == 3
    mask, order, failed = r.prefix(2)
    assert mask.tolist() == [False, False, True, True] and order.tolist() == [2, 3]
    assert failed == 1
    mask, order, failed = r.prefix(1)
    assert order.tolist() == [2] and failed == 0
    r.cut(1)
    assert r.num_ok == 1 and r.num_failed == 0 and r.failures == []
    assert r.mask.tolist() == [False, False, True, False]
    assert np.isinf(r.times[[0, 1, 3]]).all() and r.times[2] == 1.0


def test_the_thread_cluster_hands_over_every_ready_answer_at_once():
    # every answer is due at the same moment (a constant delay, computed long
    # before it): the first wake-up finds several, in due order, each once
    tc = ThreadCluster(injector=Injector(latency=cj.Constant(0.2)), jit=False)
    tc.start(lambda v: v, M)
    try:
        tc.submit(0, np.zeros((M, 2), np.float32))
        got = []
        while sum(map(len, got)) < M:
            batch = tc.next_completions(5.0)
            assert batch, "no answer within 5 s"
            got.append(batch)
        workers = [c.worker for b in got for c in b]
        assert sorted(workers) == list(range(M))
        assert len(got[0]) > 1
    finally:
        tc.close()


@pytest.mark.parametrize("timeout", [0.0, 0.01])
def test_next_completions_returns_nothing_when_nothing_is_due(timeout):
    tc = ThreadCluster(injector=Injector(latency=cj.Constant(10.0)), jit=False)
    tc.start(lambda v: v, 2)
    try:
        tc.submit(0, np.zeros((2, 2), np.float32))
        assert tc.next_completions(timeout) == []
    finally:
        tc.close()
