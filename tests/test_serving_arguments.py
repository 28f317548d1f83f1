"""The serving library's entry points refuse bad arguments with clear errors.

The contract (``docs/serving.md``, "Faults and bad inputs"): an argument of the
wrong kind (None where an object is needed, a string where numbers are, a truthy
string where a bool is) is a TypeError, one of the right kind but the wrong shape
or value a ValueError, each naming the public function and the argument, what was
expected and what came; never an AttributeError, numpy's casting message or a
decoder's internal one. A table of entry point x bad argument, on one tiny code
(K = 2, M = 5) and constant delays; nothing here compiles a decode beyond the
shape check of an empty batch.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import codedjax as cj
from codedjax import serving as sv

K, M = 2, 5
CODE = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)
INJ = sv.Injector(latency=cj.Constant(0.001))
X = np.arange(6.0, dtype=np.float32).reshape(K, 3)


class _Policy:
    """A user's wait policy (the WaitPolicy protocol, plus a vectorised rule)."""

    def __init__(self, deadline=None, times=None):
        self.deadline = deadline
        self._times = times

    def decide(self, arrivals):
        return arrivals.num_arrived >= 3

    def decision_times(self, times):
        if self._times is not None:
            return self._times(times)
        return np.minimum(times.sorted[:, 2], times.all_done)


def _load(policy=None, **kw):
    args = dict(code=CODE, injector=INJ, arrivals=[0.0, 0.001], group_deadline=0.1)
    args.update(kw)
    return sv.simulate_load(
        args.pop("code"), sv.FixedN() if policy is None else policy,
        args.pop("injector"), args.pop("arrivals"), **args,
    )  # fmt: skip


def _latency(policy=None, **kw):
    args = dict(code=CODE, injector=INJ, num_requests=3)
    args.update(kw)
    return sv.simulate_latency(
        args.pop("code"), sv.FixedN() if policy is None else policy,
        args.pop("injector"), args.pop("num_requests"), **args,
    )  # fmt: skip


def _server(policy):
    return sv.Server(CODE, lambda v: 2.0 * v, backend=sv.SimulatedCluster(),
                     policy=policy)  # fmt: skip


@pytest.fixture(scope="module")
def front():
    with sv.StreamingServer(_server(None), group_deadline=0.01) as f:
        yield f


# a policy's deadline: every entry point that reads it, one check
BAD_DEADLINE = [
    ("string", "abc", TypeError, r"must be a number of seconds .*got 'abc'$"),
    ("bool", True, TypeError, r"must be a number of seconds .*got True$"),
    ("list", [0.1], TypeError, r"must be a number of seconds .*got \[0\.1\]$"),
    ("nan", math.nan, ValueError, r"must be finite and >= 0, got nan$"),
    (
        "inf",
        math.inf,
        ValueError,
        r"must be finite and >= 0, got inf \(no deadline is None\)$",
    ),
    ("negative", -0.5, ValueError, r"must be finite and >= 0, got -0\.5$"),
]
READS_DEADLINE = [
    ("simulate_load", lambda p: _load(p)),
    ("simulate_latency", lambda p: _latency(p)),
    ("Server", _server),
]

# (function as the error names it, argument, call, exception, message after
# "function: ")
TABLE = [
    # simulate_load
    ("simulate_load", "code", lambda: _load(code=None), TypeError,
     r"code must be a codedjax Code .*got None without 'num_inputs'"),
    ("simulate_load", "injector", lambda: _load(injector=None), TypeError,
     r"injector must be a codedjax\.serving\.Injector.*got None$"),
    ("simulate_load", "injector", lambda: _load(injector=cj.Constant(0.001)),
     TypeError, r"injector must be .*got Constant$"),
    ("simulate_load", "policy",
     lambda: sv.simulate_load(CODE, None, INJ, [0.0], group_deadline=0.1),
     TypeError, r"the policy must state its rule .*got None without one"),
    ("simulate_load", "arrivals", lambda: _load(arrivals=None), TypeError,
     r"arrivals must be \[Q\] finite .*got None$"),
    ("simulate_load", "arrivals", lambda: _load(arrivals=["0.1"]), TypeError,
     r"arrivals must be \[Q\] .*got dtype <U3"),
    ("simulate_load", "arrivals", lambda: _load(arrivals=[[0.0, 0.1]]),
     ValueError, r"arrivals must be \[Q\] .*got shape \(1, 2\)$"),
    ("simulate_load", "arrivals", lambda: _load(arrivals=[0.0, 0.2, 0.1]),
     ValueError,
     r"arrivals must be non-decreasing .*got arrivals\[1\] = 0\.2 > "
     r"arrivals\[2\] = 0\.1$"),
    ("simulate_load", "arrivals", lambda: _load(arrivals=[0.0, math.nan]),
     ValueError, r"arrivals must be finite .*got arrivals\[1\] = nan$"),
    ("simulate_load", "queueing", lambda: _load(queueing="no"), TypeError,
     r"queueing must be True or False, got 'no'$"),
    ("simulate_load", "per_query", lambda: _load(per_query=1), TypeError,
     r"per_query must be True or False, got 1$"),
    ("simulate_load", "decision_times",
     lambda: _load(_Policy(0.1, lambda t: t.sorted[:, :2])), ValueError,
     r"_Policy\.decision_times must return \[R\] = \[1\] .*got shape \(1, 2\)$"),
    ("simulate_load", "decision_times",
     lambda: _load(_Policy(0.1, lambda t: ["soon"] * t.num_requests)), TypeError,
     r"_Policy\.decision_times must return \[R\] = \[1\] .*got list"),
    # simulate_latency
    ("simulate_latency", "code", lambda: _latency(code=None), TypeError,
     r"code must be a codedjax Code .*got None without 'num_workers'"),
    ("simulate_latency", "injector", lambda: _latency(injector=None), TypeError,
     r"injector must be a codedjax\.serving\.Injector.*got None$"),
    ("simulate_latency", "policy",
     lambda: sv.simulate_latency(CODE, None, INJ, 3), TypeError,
     r"the policy must state its rule .*got None without one"),
    ("simulate_latency", "responses",
     lambda: _latency(responses=np.zeros((M - 1, 2), np.float32)), ValueError,
     r"responses must be \[M, \.\.\.\] = \[5, \.\.\.\] .*got shape \(4, 2\)$"),
    ("simulate_latency", "responses",
     lambda: _latency(responses=np.zeros((M - 1, 2), np.float32), check_ok=True),
     ValueError, r"responses must be \[M, \.\.\.\] = \[5, \.\.\.\] .*\(4, 2\)$"),
    ("simulate_latency", "responses", lambda: _latency(responses=np.float32(1)),
     ValueError, r"responses must be \[M, \.\.\.\] .*got shape \(\)$"),
    ("simulate_latency", "responses",
     lambda: _latency(responses=np.zeros((M, 0), np.float32)), ValueError,
     r"responses of shape \(5, 0\) \(float32\) are not answers of this code: "
     r"ChebyLSCode\.decode_batched: y must not be empty"),
    ("simulate_latency", "responses", lambda: _latency(responses=[["a"]] * M),
     TypeError, r"responses must be .*floating.*got dtype <U1"),
    ("simulate_latency", "responses",
     lambda: _latency(responses=np.ones((M, 2), np.int32)), TypeError,
     r"responses must be .*floating.*got dtype int32"),
    ("simulate_latency", "responses",
     lambda: _latency(responses=np.where(np.eye(M, 2) > 0, np.nan, 1.0)),
     ValueError, r"responses must be .*finite.*got nan at \(0, 0\)$"),
    ("simulate_latency", "check_ok", lambda: _latency(check_ok="yes"), TypeError,
     r"check_ok must be True or False, got 'yes'$"),
    ("simulate_latency", "decision_times",
     lambda: _latency(_Policy(None, lambda t: t.sorted[:1, 2])), ValueError,
     r"_Policy\.decision_times must return \[R\] = \[3\] .*got shape \(1,\)$"),
    ("simulate_latency", "decision_times",
     lambda: _latency(_Policy(None, lambda t: t.sorted[:, 2] * np.nan)),
     ValueError, r"_Policy\.decision_times must return .*\(3,\) with NaN$"),
]  # fmt: skip
TABLE += [
    (fname, "the policy's deadline", lambda c=call, v=value: c(_Policy(v)), exc,
     r"the policy's deadline \(_Policy\.deadline\) " + msg)
    for fname, call in READS_DEADLINE
    for _, value, exc, msg in BAD_DEADLINE
]  # fmt: skip
IDS = [f"{f}.{a}-{i}" for i, (f, a, *_) in enumerate(TABLE)]


@pytest.mark.parametrize("fname,arg,call,exc,msg", TABLE, ids=IDS)
def test_a_bad_argument_is_a_clear_error_naming_the_function(
    fname, arg, call, exc, msg
):
    with pytest.raises(exc) as info:
        call()
    text = str(info.value)
    assert text.startswith(f"{fname}: "), text
    assert arg in text, text
    assert info.type is exc  # not a subclass raised from inside numpy or Python
    assert re.search(msg, text), text


OPEN_LOOP = [
    ("frontend", lambda f: sv.run_open_loop(None, X, [0.0, 0.0]), TypeError,
     r"frontend must be a StreamingServer, got None$"),
    ("queries", lambda f: sv.run_open_loop(f, None, [0.0]), TypeError,
     r"queries must be \[Q, \.\.\.\] .*got None$"),
    ("queries", lambda f: sv.run_open_loop(f, np.float32(1), [0.0]), TypeError,
     r"queries must be \[Q, \.\.\.\] .*got np\.float32\(1\.0\)$"),
    ("times", lambda f: sv.run_open_loop(f, X, [0.3, 0.1]), ValueError,
     r"times must be non-decreasing .*got times\[0\] = 0\.3 > times\[1\] = 0\.1$"),
    ("times", lambda f: sv.run_open_loop(f, X, [0.0, -1.0]), ValueError,
     r"times must be finite times >= 0 .*got times\[1\] = -1\.0$"),
    ("times", lambda f: sv.run_open_loop(f, X, [0.0]), ValueError,
     r"times must be \[Q\] = \[2\] \(one per query\) .*got shape \(1,\)$"),
    ("times", lambda f: sv.run_open_loop(f, X, None), TypeError,
     r"times must be \[Q\] = \[2\] .*got None$"),
    ("times", lambda f: sv.run_open_loop(f, X, "ab"), TypeError,
     r"times must be \[Q\] = \[2\] .*got dtype <U2"),
    ("times", lambda f: sv.run_open_loop(f, X, [True, True]), TypeError,
     r"times must be \[Q\] = \[2\] .*got dtype bool"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arg,call,exc,msg", OPEN_LOOP, ids=[f"{a}-{i}" for i, (a, *_) in
                                        enumerate(OPEN_LOOP)]
)  # fmt: skip
def test_run_open_loop_names_the_argument_and_the_first_bad_entry(
    front, arg, call, exc, msg
):
    with pytest.raises(exc, match=rf"^run_open_loop: {msg}"):
        call(front)


def test_zero_arrivals_are_an_empty_load_as_zero_requests_are_an_empty_latency():
    """Empty input is a valid empty result at every simulator and generator."""
    load = _load(arrivals=[])
    for name, v in load._asdict().items():
        assert isinstance(v, np.ndarray) and v.shape == (0,), name
    assert load.group.dtype == load.group_size.dtype == np.int64
    shard = _load(arrivals=np.zeros(0), shards=3, queueing=False)
    assert all(v.shape == (0,) for v in shard)
    lat = _latency(num_requests=0)
    assert lat.latency.shape == (0,) and lat.masks.shape == (0, M)
    assert sv.poisson_arrivals(1.0, 0).shape == (0,)


def test_a_zero_deadline_is_valid_and_decides_at_the_fan_out():
    """0 is in the built-in policies' range (finite and >= 0): a user's policy
    with it is accepted everywhere and decides with nothing in hand."""
    lat = _latency(_Policy(0.0))
    assert lat.timed_out.all() and not lat.ok.any()
    np.testing.assert_array_equal(lat.num_used, 0)
    load = _load(_Policy(0.0))
    assert load.timed_out.all() and not load.ok.any()
    np.testing.assert_allclose(load.decided, load.sent)
    assert _server(_Policy(0.0)).policy.deadline == 0.0
