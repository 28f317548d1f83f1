"""models.serve_dcn counts each query: the branch code's per-query interface and
the served results' per-query answers.

Known truths on replication, K = 4 on M = 6 (query q on workers q and q + 4 for
q < 2, on worker q alone for q = 2, 3): with workers 0-2 answering, queries 0-2
have a replica and query 3 none, so the group is not ok but three of its queries
are answered with their replicas' answers; a request the server never decided
answered nothing; a Lagrange Cross branch answers every query with its group.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import codedjax as cj
from models.serve_dcn import BranchCode
from models.serve_dcn.pipeline import per_query
from models.serve_dcn.report import format_table

K, M = 4, 6
REP = cj.replication_code(num_inputs=K, num_workers=M)


def _result(mask, ok, responses, latency=0.01):
    value = responses[:K] if ok else np.zeros((K, 2), np.float32)
    order = np.argsort(~np.asarray(mask), kind="stable").astype(np.int32)
    return SimpleNamespace(
        ok=ok, value=value, mask=np.asarray(mask), order=order,
        responses=np.where(np.asarray(mask)[:, None], responses, 0.0),
        latency=latency,
    )  # fmt: skip


def test_branch_code_queries_follow_both_branches():
    code = BranchCode(REP, REP)
    mask = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1]], bool)
    assert code.decodable_queries(mask).tolist() == [
        [True, True, True, False],
        [True, True, True, True],
    ]
    np.testing.assert_array_equal(code.own_workers, REP.own_workers)
    times = np.array([1.0, 2.0, 3.0, 4.0, 0.5, 9.0])
    assert code.decodable_from_per_query(times).tolist() == [0.5, 2.0, 3.0, 4.0]
    lag = cj.lagrange_code(num_inputs=K, num_workers=M, degree=1)
    mixed = BranchCode(lag, REP)  # a Cross branch decoded with its group
    assert mixed.own_workers is None
    assert mixed.decodable_queries(mask).tolist() == [[False] * K, [True] * K]


def test_served_results_are_counted_per_query():
    code = BranchCode(REP, REP)
    y = np.arange(2 * M, dtype=np.float32).reshape(M, 2) + 1.0
    res = [
        _result([1] * M, True, y),
        _result([1, 1, 1, 0, 0, 0], False, y),  # query 3 lost: the group not ok
        _result([1] * M, False, y, latency=np.inf),  # never decided
    ]
    ok, value, answered = per_query(code, res)
    assert ok.tolist() == [True, False, False]
    assert answered.tolist() == [[True] * K, [True, True, True, False], [False] * K]
    np.testing.assert_array_equal(value[1, :3], y[:3])  # the replicas' answers
    np.testing.assert_array_equal(value[1, 3], 0.0)


def test_the_table_shows_the_answered_share():
    row = {
        "auc": 0.9, "logloss": 0.3, "logit_rel_err_median": 1e-3,
        "logit_rel_err_p95": 2e-3, "latency_ms": {50: 1.0, 99: 2.0, 99.9: 3.0},
        "num_used_median": 16, "ok_fraction": 0.9, "answered_fraction": 0.975,
        "loadavg": 1.0,
    }  # fmt: skip
    summary = {
        "float32_model": {"auc": 0.9, "logloss": 0.3},
        "schemes": {"replication": row},
        "queries": 8,
        "config": {"num_inputs": K},
        "cpu_count": 2,
        "adaptive_budget": 0.1,
    }
    text = format_table(summary)
    assert "| ok | answered |" in text and "| 16 | 0.900 | 0.975 |" in text


def test_answered_by_names_the_decoded_workers_or_none_for_an_own_answer():
    from models.serve_dcn.http import answered_by

    group = SimpleNamespace(mask=np.array([1, 0, 1, 1, 0, 0], bool))
    assert answered_by(SimpleNamespace(result=group)) == [0, 2, 3]
    assert answered_by(SimpleNamespace(result=None)) is None
