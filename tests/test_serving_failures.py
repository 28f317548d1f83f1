"""No query lost on any failure path of the serving layer.

The contract (``docs/serving.md``, "Failures"): every query a
:class:`StreamingServer` accepts is resolved, with its answer or with an error
naming the cause, whatever fails: the server's warm-up, a group's encode, its
dispatch to the backend, a worker's answer, the decode, the backend itself, the
close. A group's own fault fails that group alone and the service goes on; a
worker's bad answer (an exception, another shape or dtype, not an array, NaN) is
that worker's failure, like a crash; a warm-up that fails (a model that cannot
serve the queries) or a broken backend stops the frontend, and every waiting
query ends with that error. On every cluster a fault is the faulty worker's alone.

Tiny servers (K = 3, M = 6, degree 1, queries [4]); every wait is bounded.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax import serving as sv

K, M = 3, 6
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)  # D = 3
BOUND = 20.0  # seconds any future may take here (an answer takes milliseconds)
MARK = 1e3  # queries of this value mark their group for a fault
BIG = 100.0  # |value| above which a row, an input or an answer is marked
BAD_WORKERS = (1, 4)  # the workers whose answers to group 0 are bad
TOO_FEW = int(cj.Status.TOO_FEW_RESPONSES)


def affine(v):
    return v * jnp.float32(2) - jnp.float32(1)


def _queries(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def _close_to_affine(r, q):
    """A decoded answer against 2 q - 1, within float32 rounding through the
    group's decoding system: 16 cond eps32 max |f|."""
    ref = 2 * q.astype(np.float64) - 1
    tol = 16 * r.result.cond * float(np.finfo(np.float32).eps) * np.abs(ref).max()
    np.testing.assert_allclose(r.value, ref, rtol=0, atol=tol)


# ----------------------------------------------------------------------------------
# the faults, one per step of the frontend


class _FaultyCode:
    """``CODE`` whose encode (or decode) raises on a marked group."""

    def __init__(self, step):
        self._step = step

    def __getattr__(self, name):
        return getattr(CODE, name)

    def encode(self, x):
        if self._step == "encode" and np.abs(np.asarray(x)).max() > BIG:
            raise ValueError("encode fault")
        return CODE.encode(x)

    def decode_answers(self, answers):
        y = np.asarray(answers.y, np.float32)
        if self._step == "decode" and np.abs(y).max() > BIG:
            raise FloatingPointError("decode fault")
        return CODE.decode_answers(answers)


BAD_ANSWERS = {
    "shape": lambda v: v[:-1],
    "dtype": lambda v: v.astype(np.float64),
    "raise": lambda v: ConnectionResetError("worker lost"),
    "none": lambda v: None,
    "nan": lambda v: np.full_like(v, np.nan),
}
WHY = {
    "shape": "answered float32 (3,); worker_fn returns float32 (4,)",
    "dtype": "answered float64 (4,); worker_fn returns float32 (4,)",
    "raise": "raised ConnectionResetError: worker lost",
    "none": "answered a NoneType, not an array",
    "nan": "answered a non-finite value",
}


def _backend(kind, fault=None, injector=None, workers=BAD_WORKERS, requests=(0,)):
    """A thread or simulated cluster with ``fault``: ``"dispatch"`` (submit of
    request 1 raises), ``"backend"`` (its first answer raises: the backend
    broke), or a bad answer of ``BAD_ANSWERS`` from ``workers`` to ``requests``."""
    base = {"threads": sv.ThreadCluster, "sim": sv.SimulatedCluster}[kind]

    class Faulty(base):
        def submit(self, request_id, rows, **kw):
            if fault == "dispatch" and request_id == 1:
                raise ConnectionError("dispatch fault")
            return super().submit(request_id, rows, **kw)

        def next_completed(self, timeout):
            c = super().next_completed(timeout)
            if c is None:
                return c
            if fault == "backend":
                raise OSError("backend fault")
            if (
                fault in BAD_ANSWERS
                and c.request_id in requests
                and c.worker in workers
            ):
                c = c._replace(value=BAD_ANSWERS[fault](c.value))
            return c

    return Faulty(injector=injector)


def _int_model(v):
    return (v * 100).astype(jnp.int32)


def _broken_model(v):
    raise KeyError("no such layer")


HANG = sv.Injector(latency=cj.Constant(0.001), failed_workers={0: "hang"})

# (step, worker_fn, code fault, backend fault, injector, policy, want): want is
# None (every query answered), a text (the marked group's queries fail with an
# error containing it, the others are answered) or a list of texts (the frontend
# stops: every query fails with an error containing them)
STEPS = [
    ("warm-up-int", _int_model, None, None, None, sv.FixedN(M),
     ["worker_fn must return one floating array", "got int32 (4,)"]),
    ("warm-up-raise", _broken_model, None, None, None, sv.FixedN(M),
     ["worker_fn cannot run on a coded row", "no such layer"]),
    ("encode", affine, "encode", None, None, sv.FixedN(M), "encode fault"),
    ("dispatch", affine, None, "dispatch", None, sv.FixedN(M), "dispatch fault"),
    *[(f"answer-{bad}", affine, None, bad, None, sv.FixedN(M), None)
      for bad in BAD_ANSWERS],
    ("decode", affine, "decode", None, None, sv.FixedN(M), "decode fault"),
    ("backend", affine, None, "backend", None, sv.FixedN(M), ["backend fault"]),
    ("close-nowait", affine, None, None, HANG, sv.FixedN(M, deadline=30.0),
     ["closed before its answer"]),
    ("close-wait", affine, None, None, HANG, sv.FixedN(M - 1, deadline=5.0), None),
]  # fmt: skip


def _outcome(fut, timeout):
    """The future's answer or its error; a future not resolved in time fails."""
    try:
        return fut.result(timeout)
    except TimeoutError:
        pytest.fail(f"a query was not resolved within {timeout} s")
    except Exception as exc:
        return exc


@pytest.mark.parametrize("kind", ["threads", "sim"])
@pytest.mark.parametrize(
    "step, fn, code_fault, backend_fault, injector, policy, want",
    STEPS,
    ids=[s[0] for s in STEPS],
)
def test_every_query_is_resolved_whatever_step_fails(
    kind, step, fn, code_fault, backend_fault, injector, policy, want
):
    # three full groups; the middle one (queries 3-5) is marked; the close rows
    # add a partial group that only the close sends (or ends)
    closing = step.startswith("close")
    qs = _queries(3 * K + closing)
    qs[K : 2 * K] = MARK
    code = CODE if code_fault is None else _FaultyCode(code_fault)
    backend = _backend(kind, backend_fault, injector)
    server = sv.Server(code, fn, backend=backend, policy=policy)
    # a long group deadline: groups form by count alone, whatever the load
    front = sv.StreamingServer(server, group_deadline=60.0)
    futs = []
    for q in qs:
        try:
            futs.append(front.submit(q))
        except RuntimeError as exc:  # a real clock: the frontend stopped already
            assert isinstance(want, list) and "stopped on an error" in str(exc)
            futs.append(exc)
    if closing:
        front.close(wait=step == "close-wait")
        assert all(f.done() for f in futs)  # resolved by the close itself
    got = [f if isinstance(f, Exception) else _outcome(f, BOUND) for f in futs]
    for i, (g, q) in enumerate(zip(got, qs, strict=True)):
        group = i // K
        if isinstance(want, list):  # the frontend stopped: every query fails
            expect = " ".join(want)
        elif isinstance(want, str):  # the marked group's own fault
            expect = want if group == 1 else None
        else:
            expect = None
        if expect is None:
            assert not isinstance(g, BaseException), (i, g)
            assert g.ok and g.status == 0
            _close_to_affine(g, q)
        else:
            assert isinstance(g, RuntimeError), (i, g)
            for part in want if isinstance(want, list) else [want]:
                assert part in str(g), (i, str(g))
            assert g.__cause__ is not None
    if step.startswith("warm-up"):  # group 0 is always accepted: it failed first
        assert all("StreamingServer: the server's warm-up failed" in str(g)
                   for g in got[:K])  # fmt: skip
    if step.startswith("answer-"):
        bad = step.removeprefix("answer-")
        r0 = got[0].result
        assert r0.failed.tolist() == [i in BAD_WORKERS for i in range(M)]
        assert [w for w, _ in sorted(r0.failures)] == list(BAD_WORKERS)
        assert all(WHY[bad] in what for _, what in r0.failures)
        assert r0.num_used == M - len(BAD_WORKERS)
        assert all(not g.result.failed.any() for g in got[K:])
    if isinstance(want, list) and not closing:
        # the frontend stopped: a later query is refused, naming the cause
        with pytest.raises(RuntimeError, match="stopped on an error"):
            front.submit(qs[0])
    elif not closing:
        # a group's fault fails that group alone: the service goes on
        more = [_outcome(f, BOUND) for f in [front.submit(q) for q in qs[:K]]]
        assert all(not isinstance(g, BaseException) and g.ok for g in more), more
    front.close()
    assert front.pending == 0
    if kind == "threads":
        assert backend.alive_threads == 0


@pytest.mark.parametrize("kind", ["threads", "sim"])
def test_one_bad_answer_fails_its_worker_and_the_service_goes_on(kind):
    qs = _queries(3 * K, seed=1)
    backend = _backend(kind, "shape", workers=(2,))
    server = sv.Server(CODE, affine, backend=backend, policy=sv.FixedN(M))
    with sv.StreamingServer(server, group_deadline=60.0) as front:
        first = [front.submit(q) for q in qs[:K]]
        first = [f.result(BOUND) for f in first]
        # later submissions, after the bad answer was handled
        later = [front.submit(q) for q in qs[K:]]
        later = [f.result(BOUND) for f in later]
    r0 = first[0].result
    assert r0.ok and r0.failed.tolist() == [i == 2 for i in range(M)]
    assert r0.failures == ((2, f"{WHY['shape']} on a coded row"),)
    assert all(not g.result.failed.any() and g.result.failures == () for g in later)
    for g, q in zip(first + later, qs, strict=True):
        assert g.ok
        _close_to_affine(g, q)


@pytest.mark.parametrize("kind", ["threads", "sim"])
def test_bad_answers_from_every_worker_are_data_not_a_stop(kind):
    # a model that passes the warm-up but whose every answer is bad: each group
    # says it cannot decode and names why; the frontend keeps serving
    qs = _queries(2 * K, seed=2)
    backend = _backend(kind, "dtype", workers=range(M), requests=range(100))
    server = sv.Server(CODE, affine, backend=backend, policy=sv.FixedN(K))
    with sv.StreamingServer(server, group_deadline=60.0) as front:
        got = [f.result(BOUND) for f in [front.submit(q) for q in qs[:K]]]
        got += [f.result(BOUND) for f in [front.submit(q) for q in qs[K:]]]
    for g in got:
        r = g.result
        assert not g.ok and g.status == TOO_FEW and not g.value.any()
        assert g.error == math.inf and r.failed.all() and r.num_used == 0
        assert sorted(w for w, _ in r.failures) == list(range(M))
        assert all(WHY["dtype"] in what for _, what in r.failures)


def _master_raising_on_marked(h, x, x0):
    """A pipeline round's master step that raises (at run time) on a marked
    group's decoded value."""

    def host(v):
        if np.abs(v).max() > BIG:
            raise ArithmeticError("master fault")
        return v

    return jax.pure_callback(host, jax.ShapeDtypeStruct(h.shape, h.dtype), h)


def test_a_pipeline_round_that_raises_fails_its_group_alone():
    pipe = sv.Pipeline([
        sv.Round(CODE, affine, policy=sv.FixedN(M),
                 master_fn=_master_raising_on_marked),
        sv.Round(CODE, affine, policy=sv.FixedN(M)),
    ])  # fmt: skip
    qs = _queries(3 * K, seed=5)
    qs[K : 2 * K] = MARK
    server = sv.PipelineServer(pipe, backend=sv.SimulatedCluster())
    with sv.StreamingServer(server, group_deadline=60.0) as front:
        got = [_outcome(f, BOUND) for f in [front.submit(q) for q in qs]]
    for i, (g, q) in enumerate(zip(got, qs, strict=True)):
        if K <= i < 2 * K:
            assert isinstance(g, RuntimeError) and "master fault" in str(g)
            assert f"its group (request {i // K}) failed" in str(g)
        else:  # f(f(q)) = 4 q - 3 through two decodes: round 1's error (16
            # cond eps max |2q - 1| <= 3) doubled by round 2, plus round 2's own
            ref = 4 * q.astype(np.float64) - 3
            c1, c2 = (rd.cond for rd in g.result.rounds)
            tol = 16 * float(np.finfo(np.float32).eps) * (2 * 3 * c1 + 7 * c2)
            assert g.ok
            np.testing.assert_allclose(g.value, ref, rtol=0, atol=tol)


# ----------------------------------------------------------------------------------
# a fault is the faulty worker's alone, on every cluster

X = _queries(K, seed=3)
ROWS = np.asarray(CODE.encode(X))
FAULTY = (1, 4)


def _raising_on_rows(rows, faulty):
    """2 v - 1, computed through a host callback that raises on the coded rows
    of the ``faulty`` workers (on a vmapped batch that holds one of them too)."""

    def host(v):
        v = np.asarray(v)
        for row in v.reshape(-1, v.shape[-1]):
            for i in faulty:
                if np.allclose(row, rows[i], rtol=1e-6, atol=0):
                    raise RuntimeError(f"row fault at worker {i}")
        return v

    def fn(v):
        out = jax.ShapeDtypeStruct(v.shape, v.dtype)
        return affine(jax.pure_callback(host, out, v, vmap_method="expand_dims"))

    return fn


@pytest.mark.parametrize(
    "make",
    [
        lambda: sv.SimulatedCluster(),
        lambda: sv.SimulatedCluster(vectorize=False),
        lambda: sv.ThreadCluster(),
    ],
    ids=["sim-vmapped", "sim-rows", "threads"],
)
def test_a_raising_row_fails_its_worker_alone_and_the_rest_decode(make):
    fn = _raising_on_rows(ROWS, FAULTY)
    with sv.Server(CODE, fn, backend=make(), policy=sv.FixedN(M)) as server:
        rs = server.serve([X, X], max_in_flight=1)
    for r in rs:
        assert r.ok and r.status == 0
        assert r.failed.tolist() == [i in FAULTY for i in range(M)]
        assert r.mask.tolist() == [i not in FAULTY for i in range(M)]
        assert r.num_used == M - len(FAULTY)
        assert [w for w, _ in sorted(r.failures)] == list(FAULTY)
        for w, what in r.failures:
            assert f"row fault at worker {w}" in what
        ref = 2 * X.astype(np.float64) - 1
        tol = 16 * r.cond * float(np.finfo(np.float32).eps) * np.abs(ref).max()
        np.testing.assert_allclose(r.value, ref, rtol=0, atol=tol)


class _StalledCluster(sv.SimulatedCluster):
    """A simulated cluster whose frontend stalls once (a garbage collection, a
    busy core): the engine's first wait returns nothing, ``stall`` seconds
    later, past the policy's deadline, while the answers arrived within
    milliseconds and wait in the backend; ``woken``: a ``wake()`` was pending
    then, and the first look without waiting finds nothing."""

    def __init__(self, stall, woken, **kwargs):
        super().__init__(**kwargs)
        self.stall, self.stalled, self.woken = stall, False, woken

    def next_completions(self, timeout):
        if not self.stalled and timeout:
            self.stalled = True
            self.advance(self.stall)
            return []
        if self.woken and timeout == 0:  # a wake() pending: one empty look
            self.woken = False
            return []
        return super().next_completions(timeout)


@pytest.mark.parametrize("woken", [False, True])
def test_answers_in_hand_when_a_deadline_is_noticed_late_count(woken):
    backend = _StalledCluster(1.0, woken, compute_time=1e-3)
    policy = sv.FixedN(M, deadline=0.25)
    with sv.Server(CODE, affine, backend=backend, policy=policy) as server:
        r = server.infer(X)
    assert backend.stalled and not backend.woken
    assert r.ok and int(r.mask.sum()) == M, r  # all M answers, none discarded
    assert r.latency >= 1.0  # the stall is the request's: its latency shows it
    ref = 2 * X.astype(np.float64) - 1
    tol = 16 * float(r.cond) * float(np.finfo(np.float32).eps) * np.abs(ref).max()
    np.testing.assert_allclose(r.value, ref, rtol=0, atol=tol)


def test_a_frontend_whose_warm_up_fails_leaves_its_server_usable():
    server = sv.Server(CODE, affine, backend=sv.SimulatedCluster())
    with pytest.raises(TypeError, match="StreamingServer: a query must be"):
        sv.StreamingServer(server, group_deadline=1.0, example=np.ones(4, np.int32))
    with server:
        assert server.infer(X).ok  # not owned by the frontend that failed


@pytest.mark.parametrize("kind", ["threads", "sim"])
def test_a_future_cancelled_by_its_caller_does_not_stop_the_others(kind):
    # answers take 0.1 s: the future is still pending when it is cancelled
    slow = sv.Injector(latency=cj.Constant(0.1))
    backend = {"threads": sv.ThreadCluster, "sim": sv.SimulatedCluster}[kind](
        injector=slow
    )
    server = sv.Server(CODE, affine, backend=backend, policy=sv.FixedN(M))
    with sv.StreamingServer(server, group_deadline=60.0) as front:
        futs = [front.submit(q) for q in _queries(2 * K)]
        assert futs[1].cancel()  # still pending: its caller gives up on it
        got = [futs[0].result(BOUND), futs[2].result(BOUND)]
        got += [f.result(BOUND) for f in futs[K:]]  # the next group too
    assert all(g.ok for g in got) and front.pending == 0


def test_close_from_an_answers_callback_answers_the_rest_then_closes():
    # the callback runs in the dispatcher thread, which cannot join itself: it
    # finishes its work (close waits by default), then closes the server; the
    # answers take 0.1 s, so every query is submitted before the callback runs
    backend = sv.ThreadCluster(injector=sv.Injector(latency=cj.Constant(0.1)))
    server = sv.Server(CODE, affine, backend=backend, policy=sv.FixedN(M))
    front = sv.StreamingServer(server, group_deadline=60.0)
    qs = _queries(2 * K + 1, seed=4)
    first = front.submit(qs[0])  # its group cannot be done yet: not full
    first.add_done_callback(lambda f: front.close())
    futs = [first] + [front.submit(q) for q in qs[1:]]
    got = [f.result(BOUND) for f in futs]  # the partial group too: flushed
    assert all(g.ok for g in got)
    front._thread.join(BOUND)
    assert not front._thread.is_alive() and backend.alive_threads == 0
    with pytest.raises(RuntimeError, match="StreamingServer.submit: .* closed"):
        front.submit(qs[0])
