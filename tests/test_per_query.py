"""Per-query decodability: ``Code.decodable_queries`` and
``Code.decodable_from_per_query``, for every code of the catalogue.

Host side only (no program is compiled): which of the K queries a set of answers
gives, from the code's structure alone. ``may_decode`` is the all-K case of it for
every code; ParM's groups and the systematic codes' own workers decode queries
apart.
"""

import itertools
from math import comb

import numpy as np
import pytest

import codedjax as cj

K, M = 4, 12
WORKLOADS = (
    cj.Workload("quadratic", 2),
    cj.Workload("linear", 1, linear=True),
    cj.Workload("net", None),
)


def _every_code():
    """Every code the catalogue builds, systematic variants included, for a
    quadratic, a linear and a non-polynomial workload (deduplicated)."""
    out = {}
    for wl in WORKLOADS:
        for s in cj.catalogue(wl, K, M, systematic=True):
            if s.applies:
                out.setdefault(s.code, f"{wl.name}/{s.name}")
    return {name: code for code, name in out.items()}


CODES = _every_code()


def _all_masks(m):
    return np.array(list(itertools.product([False, True], repeat=m)), bool)


@pytest.fixture(params=sorted(CODES))
def code(request):
    return CODES[request.param]


def test_the_catalogue_lists_the_systematic_variants():
    """The fixture covers every family and its systematic variants."""
    names = {n.split("/")[1] for n in CODES}
    for base in ("chebyls", "threshold", "graceful", "robust", "circle", "bacc"):
        assert {base, f"{base} systematic"} <= names
    assert {"uncoded", "replication", "repapprox", "nercc", "random"} <= names
    assert {"parity k=2", "parity k=4"} <= names


def test_may_decode_is_all_the_queries_and_the_rule_is_monotone(code):
    """On every mask of the code's workers: decodable_queries is bool [..., K],
    may_decode is its all-K case, and one more responder never loses a query."""
    masks = _all_masks(code.num_workers)
    dq = code.decodable_queries(masks)
    assert dq.shape == (len(masks), code.num_inputs) and dq.dtype == bool
    np.testing.assert_array_equal(code.may_decode(masks), dq.all(axis=-1))
    # masks[j] is j in binary (worker 0 the highest bit): masks[j | bit] adds
    # worker i to masks[j]
    index = np.arange(len(masks))
    for i in range(code.num_workers):
        more = index | (1 << (code.num_workers - 1 - i))
        assert np.all(dq[more] >= dq), i
    # leading axes pass through
    assert code.decodable_queries(masks.reshape(2, -1, code.num_workers)).shape == (
        2,
        len(masks) // 2,
        code.num_inputs,
    )


def test_systematic_codes_say_so_and_name_their_workers(code):
    """``systematic`` is True for ParM, replication, uncoded, RepApprox and the
    variants, False for the others; a systematic code's query k is decodable from
    its own worker alone (but the robust decoder's, which copies only answers its
    fit checked)."""
    name = next(n for n, c in CODES.items() if c is code).split("/")[1]
    base = name.split()[0]
    expect = base in ("uncoded", "replication", "repapprox", "parity") or name.endswith(
        "systematic"
    )
    assert code.systematic is expect
    if not expect:
        assert code.systematic_workers is None
        return
    w = code.systematic_workers
    assert len(w) == code.num_inputs
    for k in range(code.num_inputs):
        alone = np.zeros(code.num_workers, bool)
        alone[w[k]] = True
        # (the robust decoder decodes nothing below D, checked or not)
        assert code.decodable_queries(alone)[k] != (base == "robust"), k


def test_parity_groups_decode_on_their_own():
    """K = 8 in groups of k = 2 (M = 12), N = 8 answers: one given group decodes
    on 378 of the C(12, 8) = 495 masks (it lost at most one of its three
    workers: C(9, 4) + 3 C(9, 3)), all four groups on 81 (one lost in each)."""
    code = cj.parity_code(num_inputs=8, group=2)
    masks = _all_masks(12)
    masks = masks[masks.sum(axis=1) == 8]
    assert len(masks) == comb(12, 8) == 495
    dq = code.decodable_queries(masks)
    group0 = dq[:, :2].all(axis=1)
    assert group0.sum() == comb(9, 4) + 3 * comb(9, 3) == 378
    assert code.may_decode(masks).sum() == dq.all(axis=1).sum() == 3**4 == 81
    # a group decodes both its queries or, with its parity lost, the ones answered
    np.testing.assert_array_equal(dq[:, 0] & dq[:, 1], group0)
    lost_parity = ~masks[:, 8]
    np.testing.assert_array_equal(dq[lost_parity, :2], masks[lost_parity, :2])


def test_systematic_lagrange_query_decodes_from_its_own_worker_below_d():
    """A systematic Lagrange code (D = 7 > K = 4): query k from its own worker
    alone, all K together from D answers; the robust decoder never below D."""
    code = cj.lagrange_code(num_inputs=K, num_workers=M, degree=2, systematic=True)
    w = np.asarray(code.systematic_workers)
    mask = np.zeros(M, bool)
    mask[w[:2]] = True
    np.testing.assert_array_equal(code.decodable_queries(mask), [1, 1, 0, 0])
    assert code.threshold == K and not code.may_decode(mask)
    mask[w] = True
    assert code.may_decode(mask)
    other = np.ones(M, bool)
    other[w] = False  # D = 7 of the 8 others
    other[np.flatnonzero(other)[0]] = False
    assert code.decodable_queries(other).all()
    robust = cj.lagrange_code(
        num_inputs=K,
        num_workers=M,
        degree=2,
        decoder="robust",
        max_corrupted=1,
        systematic=True,
    )
    assert robust.threshold == robust.num_coeffs == 7
    assert not robust.decodable_queries(mask).any()


def _brute_force(code, times):
    """For each row and query, the first finite arrival after which the query is
    decodable, one arrival at a time."""
    want = np.full(times.shape[:-1] + (code.num_inputs,), np.inf)
    for r, row in enumerate(times):
        for tn in np.sort(row[np.isfinite(row)]):
            dq = code.decodable_queries(row <= tn)
            new = dq & np.isinf(want[r])
            want[r, new] = tn
    return want


def test_decodable_from_per_query_is_the_first_arrival_for_each_query(code):
    """Code.decodable_from_per_query (the closed forms of replication and ParM,
    and the base rule) against the arrivals one by one; its largest value is
    decodable_from."""
    m = code.num_workers
    rng = np.random.default_rng(7)
    t = rng.exponential(1.0, (30, m))
    t[rng.random((30, m)) < 0.3] = np.inf  # answers that never arrive
    t[0] = np.inf  # no answer at all
    t[1, : m // 2] = 0.5  # ties
    want = _brute_force(code, t)
    got = code.decodable_from_per_query(t)
    assert got.shape == (30, code.num_inputs)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(cj.Code.decodable_from_per_query(code, t), want)
    np.testing.assert_array_equal(got.max(axis=-1), code.decodable_from(t))
    assert np.isinf(got[0]).all()
    # leading axes
    assert code.decodable_from_per_query(t.reshape(3, 10, m)).shape == (
        3,
        10,
        code.num_inputs,
    )


def test_a_code_with_only_may_decode_gets_the_per_query_defaults():
    """A user's code that states only ``may_decode`` (here: worker 0 and one
    more) decodes all K queries together."""

    class Mine(cj.Code):
        @property
        def name(self):
            return "mine"

        @property
        def threshold(self):
            return 2

        def may_decode(self, mask):
            mask = np.asarray(mask, bool)
            return mask[..., 0] & (mask.sum(axis=-1) >= 2)

    code = Mine(3, 5)
    masks = _all_masks(5)
    dq = code.decodable_queries(masks)
    assert dq.shape == (32, 3)
    np.testing.assert_array_equal(dq, np.repeat(code.may_decode(masks)[:, None], 3, 1))
    assert not code.systematic and code.systematic_workers is None
    t = np.array([[3.0, 1.0, 2.0, np.inf, 5.0], [np.inf, 1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_array_equal(
        code.decodable_from_per_query(t), [[3.0] * 3, [np.inf] * 3]
    )
