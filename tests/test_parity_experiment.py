"""Per-query counting (models.parity_experiment.queries) and ParM on random masks.

Known truths, by enumerating every mask of N = 8 answers from M = 12 workers
(495 masks):

* ParM, K = 8, k = 2 (four groups of two queries and a parity worker): a group
  decodes unless it lost two of its three workers, on C(9,4) + 3 C(9,3) = 126 +
  252 = 378 masks; every group at once only when each lost exactly one, 3^4 = 81
  masks; a query is answered on the 378 masks and on the C(9,2) = 36 where its
  group lost the other two workers: 414.
* Replication, K = 8 on M = 12 (queries 0-3 on workers q and q + 8, queries 4-7
  on one worker): a query with two replicas is lost only with both, on C(10,2) =
  45 masks (450 answered), one with one replica on C(11,4) = 330 masks answered;
  every query at once needs workers 4-7 and one of each pair, 2^4 = 16 masks.

The answered queries' values are the truth (a linear map is its own exact parity
model): copied answers bit for bit, rebuilt ones to float32 rounding.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import codedjax as cj
from models.parity_experiment import exact_shares, parm_predictions, table
from models.parity_experiment.queries import (
    answered_shares,
    decode_per_query,
    decoding_kind,
)
from models.train_parity import ParityTask

pytestmark = pytest.mark.loose_promotion  # flax model code (the linear task)

K, M, N = 8, 12, 8


def _all_masks(m: int, n: int) -> np.ndarray:
    sets = list(itertools.combinations(range(m), n))
    masks = np.zeros((len(sets), m), bool)
    for i, s in enumerate(sets):
        masks[i, list(s)] = True
    return masks


MASKS = _all_masks(M, N)


def _decoder(code):
    def decode(y, masks):
        r = code.decode_batched(jnp.asarray(y), jnp.asarray(masks))
        return np.asarray(r.value), np.asarray(r.ok)

    return decode


def _run(code):
    """Every mask of N = 8 on queries x [495, K, 3] (f = identity, the linear
    map's own parity model): (x, answered, value, ok)."""
    x = np.random.default_rng(0).standard_normal((len(MASKS), K, 3))
    x = x.astype(np.float32)
    y = np.asarray(jax.vmap(code.encode)(x))
    decode = _decoder(code)
    value, ok = decode(y, MASKS)
    value, answered = decode_per_query(code, y, MASKS, value, ok, decode)
    return x, answered, value, ok, y


def test_parm_counts_each_group_on_its_own():
    code = cj.parity_code(num_inputs=K, group=2)
    x, answered, value, ok, y = _run(code)
    assert len(MASKS) == 495 and decoding_kind(code) == "per group"
    groups = answered.reshape(-1, 4, 2).all(axis=-1)  # [495, G]
    assert groups.sum(axis=0).tolist() == [378] * 4
    assert int(answered.all(axis=-1).sum()) == 81 == int(ok.sum())
    assert answered.sum(axis=0).tolist() == [414] * K
    shares = answered_shares(answered)
    assert shares == pytest.approx({"answered": 414 / 495, "whole": 81 / 495})
    assert exact_shares(code, N) == pytest.approx(shares)
    # a base answer that arrived is copied bit for bit; a rebuilt one is
    # (x_q + x_p) - x_p in float32: within 2 roundings of |x_q| + |x_p|
    own = MASKS[:, :K]
    np.testing.assert_array_equal(value[own], x[own])
    rebuilt = answered & ~own
    assert rebuilt.sum() == 414 * K - own.sum()
    eps = np.finfo(np.float32).eps
    bound = (
        2
        * eps
        * (np.abs(x) + np.abs(x.reshape(-1, 4, 2, 3)[:, :, ::-1]).reshape(x.shape))
    )
    assert np.all(np.abs(value - x)[rebuilt] <= bound[rebuilt])


def test_replication_counts_each_query_by_its_replicas():
    code = cj.replication_code(num_inputs=K, num_workers=M)
    x, answered, value, ok, _ = _run(code)
    assert decoding_kind(code) == "per query"
    assert answered.sum(axis=0).tolist() == [450] * 4 + [330] * 4
    assert int(answered.all(axis=-1).sum()) == 16 == int(ok.sum())
    np.testing.assert_array_equal(value[answered], x[answered])


def test_a_code_whose_decode_mixes_queries_is_refused():
    """A code that claims its queries decode apart but whose decode of one uses
    another query's worker: the check with two made-up answers names it."""
    par = cj.parity_code(num_inputs=4, group=2)

    class Mixing:
        name, num_inputs, num_workers = "mixing", 4, 6
        own_workers = par.own_workers
        decodable_queries = staticmethod(par.decodable_queries)

    def decode(y, masks):  # every query: the sum of every answer
        total = (y * masks[..., None]).sum(axis=1, keepdims=True)
        return np.repeat(total, 4, axis=1), masks.sum(axis=-1) >= 4

    # query 1 rebuilt from group 0's parity; group 1 lost both base answers
    masks = np.array([[True, False, False, False, True, False]])
    y = np.ones((1, 6, 1), np.float32)
    with pytest.raises(RuntimeError, match="mixing"):
        decode_per_query(Mixing(), y, masks, np.zeros((1, 4, 1)), [False], decode)
    with pytest.raises(ValueError, match=r"masks must be \[B, M = 6\]"):
        decode_per_query(par, y, masks[:, :5], np.zeros((1, 4, 1)), [False], decode)


D, C, NQ = 6, 3, 48


def _task():
    rng = np.random.default_rng(0)
    base = nnx.Linear(D, C, use_bias=False, rngs=nnx.Rngs(0))
    x = rng.standard_normal((NQ, D)).astype(np.float32)
    out = (x @ np.asarray(base.kernel[...])).astype(np.float32)
    labels = np.argmax(out, axis=1)
    return ParityTask(
        "mlp", base, {"test": x}, {"test": out}, {"test": labels},
        lambda s: nnx.Linear(D, C, use_bias=False, rngs=nnx.Rngs(s)),
        "mnist", {}, {},
    )  # fmt: skip


def test_parm_on_random_masks_answers_the_decodable_queries_with_the_base_outputs():
    """K = 12, k = 3 (M = 16), 4 answers lost at random: the linear base model is
    its own parity model, so every answered query is the base output and the
    answered share is the masks' decodable share."""
    task = _task()
    code = cj.parity_code(num_inputs=12, group=3)
    masks = np.asarray(
        cj.sample_masks(jax.random.key(1), num_workers=16, num_responses=12,
                        shape=(6,))
    )  # fmt: skip
    value, answered, labels = parm_predictions(code, task, task.base, masks)
    assert value.shape == (6, NQ, C) and answered.shape == (6, NQ)
    want = np.tile(code.decodable_queries(masks), (1, NQ // 12))
    np.testing.assert_array_equal(answered, want)
    assert 0 < answered.mean() < 1 and not answered.all(axis=-1).all()
    base = np.broadcast_to(task.outputs["test"], value.shape)
    # F(x1 + x2 + x3) - F(x2) - F(x3) against F(x1): four dot products of D
    # terms and a sum of three queries, each within (D + 2) eps of its terms'
    # magnitudes (the group's |x| |W|), a factor 2 for the subtractions
    xw = np.abs(task.queries["test"]) @ np.abs(np.asarray(task.base.kernel[...]))
    group = np.repeat(xw.reshape(-1, 3, C).sum(axis=1), 3, axis=0)  # [NQ, C]
    bound = 2 * (D + 2) * np.finfo(np.float32).eps * group
    err = np.abs(value - base)
    assert np.all(err[answered] <= np.broadcast_to(bound, err.shape)[answered])
    np.testing.assert_array_equal(labels, task.labels["test"])
    row = {
        "model": "mlp", "group": 3, "M": 16, "lost": 4,
        "base": {"top1": 1.0}, "parm_degraded": {"top1": 0.9},
        "parm_masks": {"top1": 0.8, "answered": 0.85, "whole": 0.4,
                       "exact": {"answered": 0.86, "whole": 0.41}},
        "bacc": {"top1": 0.7}, "nercc": {"top1": 0.6}, "nercc_smoothing": [0, 0],
    }  # fmt: skip
    text = table([row])
    assert "ParM, same masks (per-group decoding)" in text
    assert "| 0.8000 | 85% (86%) / 40% (41%) |" in text
