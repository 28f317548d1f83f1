"""codedjax.catalogue against known truth: which schemes apply, why not, what they cost.

The tables below are written out by hand from the rules of ``docs/design.md``
(section 2.3), for three workloads: ``linear`` (degree 1, no bias), ``cross`` (a
two-layer DCNv2 cross tower: degree 3) and ``deep`` (a ReLU network: not a
polynomial, given as two layers), at (K, M) = (8, 40), (8, 12) and (4, 10). Every
code the catalogue builds for the linear workload then encodes and decodes one
small request, compared with its float64 reference.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
import codedjax.bounds as cb

LINEAR = cj.Workload("linear", 1, linear=True)
CROSS = cj.Workload("cross", 3)
DEEP = cj.Workload("deep", None, layers=(("W1", "b1", "relu"), ("W2", "b2", "linear")))
WORKLOADS = {"linear": LINEAR, "cross": CROSS, "deep": DEEP}
SIZES = ((8, 40), (8, 12), (4, 10))

LAGRANGE = ("chebyls", "threshold", "graceful", "robust")
NOT_POLY = (
    "does not apply: the deep workload is not a polynomial; a Lagrange code is "
    "exact only for polynomial workers"
)
NOT_LINEAR = "does not apply: exact only for a linear workload (degree 1, no bias)"
CIRCLE_12 = (
    "does not apply: circle_code: degree 3 with K'=8 complex inputs (K=8) needs "
    "D = d (K' - 1) + 1 = 22 coefficients, more than num_workers M=12"
)


def _parities(k, m):
    """The ParM entries: a group size k >= 2 dividing K with K + K/k <= M."""
    return [f"parity k={g}" for g in range(2, k + 1) if k % g == 0 and k + k // g <= m]


def _not_layers(name):
    return f"does not apply: the {name} workload is not given as layers"


def _expected(wl_name, k, m):
    """{entry name: reason or None}, in the catalogue's order (the truth)."""
    d = {"linear": 1, "cross": 3, "deep": None}[wl_name]
    out = {"uncoded": None, "replication": None}
    for name in LAGRANGE:
        extra = 2 if name == "robust" else 0
        if d is None:
            out[name] = NOT_POLY
        elif m < (k - 1) * d + 1 + extra:
            what = "D" if not extra else f"D + 2r = {(k - 1) * d + 1} + 2"
            out[name] = (
                f"does not apply: M = {m} < {what} = {(k - 1) * d + 1 + extra} "
                f"(degree {d})"
            )
        else:
            out[name] = None
    out["circle"] = {
        "linear": None,
        "cross": CIRCLE_12 if m == 12 else None,
        "deep": "does not apply: the deep workload is not a polynomial",
    }[wl_name]
    out["random"] = None if wl_name == "linear" else NOT_LINEAR
    out.update(bacc=None, nercc=None, repapprox=None)
    out.update({p: None for p in _parities(k, m)})
    out["layerwise"] = None if wl_name == "deep" else _not_layers(wl_name)
    return out


@pytest.mark.parametrize("k, m", SIZES)
@pytest.mark.parametrize("wl_name", list(WORKLOADS))
def test_which_schemes_apply_and_why_not(wl_name, k, m):
    entries = cj.catalogue(WORKLOADS[wl_name], k, m)
    want = _expected(wl_name, k, m)
    assert [s.name for s in entries] == list(want)
    for s in entries:
        assert s.reason == want[s.name], s.name
        assert s.applies == (s.reason is None) == (s.code is not None), s.name
        assert s.family in {
            "uncoded", "replication", "lagrange", "circle", "random", "berrut",
            "nercc", "repapprox", "parity",
        }  # fmt: skip
        assert s.name.split(" ")[0] in cj.SCHEME_NAMES


def test_the_truth_tables_are_not_vacuous():
    # the hand tables above distinguish the workloads and sizes: they must
    # disagree where the rules do
    assert sum(r is None for r in _expected("cross", 8, 12).values()) == 8
    assert sum(r is None for r in _expected("linear", 8, 40).values()) == 14
    assert sum(r is None for r in _expected("deep", 4, 10).values()) == 8


@pytest.mark.parametrize("k, m", SIZES)
@pytest.mark.parametrize("wl_name", list(WORKLOADS))
def test_thresholds_workers_and_service_time(wl_name, k, m):
    wl = WORKLOADS[wl_name]
    d = wl.degree
    for s in cj.catalogue(wl, k, m):
        if not s.applies:
            continue
        assert s.min_responses == s.code.threshold, s.name
        assert s.copies == 1 and s.service_scale == s.work * s.copies, s.name
        assert s.work == (2 if s.name == "circle" else 1), s.name
        assert s.rounds == (2 if s.name == "layerwise" else 1), s.name
        if s.name in ("chebyls", "threshold", "robust"):
            assert s.min_responses == (k - 1) * d + 1  # D; robust corrects from D+2r
            assert s.code.correction_threshold == (k - 1) * d + 1 + 2 * (
                s.name == "robust"
            )
        if s.name == "circle":  # degree 1 packs two real queries per complex one
            want = math.ceil(k / 2) if d == 1 else (k - 1) * d + 1
            assert s.min_responses == want
        if s.name in ("uncoded", "replication", "layerwise") or s.family == "parity":
            assert s.min_responses == k
        if s.name == "uncoded":
            assert s.workers == s.code.num_workers == k
        elif s.family == "parity":
            g = int(s.name.split("=")[1])
            assert s.workers == s.code.num_workers == k + k // g
            assert s.exact == (wl_name == "linear")
        else:
            assert s.workers == s.code.num_workers == m, s.name
        if s.name in ("bacc", "nercc", "repapprox"):
            assert not s.exact
        elif s.family != "parity":
            assert s.exact, s.name
        policy = {"uncoded": "threshold", "replication": "first"}
        policy["threshold"] = "threshold"
        want = "first" if s.family == "parity" else policy.get(s.name, "fixed")
        assert s.policy == want, s.name


def test_parity_gives_one_entry_per_fitting_group():
    entries = cj.catalogue(LINEAR, 12, 16, names=["parity"])
    # k = 2 needs 18 > 16 workers; 3, 4, 6, 12 fit (16, 15, 14, 13 workers)
    assert [s.name for s in entries] == [f"parity k={g}" for g in (3, 4, 6, 12)]
    assert [s.workers for s in entries] == [16, 15, 14, 13]
    (none,) = cj.catalogue(LINEAR, 3, 3, names=["parity"])
    assert none.name == "parity" and none.code is None
    assert none.reason == (
        "does not apply: M = 3 < K + K/k for every group size k >= 2 dividing K = 3"
    )


def test_knobs():
    names = ["repapprox", "circle", "chebyls", "uncoded"]  # any order: the catalogue's
    sc = cj.catalogue(LINEAR, 8, 40, names=names, replicas=2, kind=2,
                      circle_decoder="threshold")  # fmt: skip
    assert [s.name for s in sc] == ["uncoded", "chebyls", "circle", "repapprox"]
    assert sc[1].code.kind == 2
    assert sc[2].policy == "threshold"
    assert sc[3].note == "c = 2 replicas, 24 Berrut-coded extras"
    (rep,) = cj.catalogue(LINEAR, 8, 12, names=["repapprox"], replicas=2)
    assert rep.reason == (
        "does not apply: c = 2 replicas of K = 8 queries need 16 > M = 12 workers"
    )
    (default,) = cj.catalogue(LINEAR, 8, 40, names=["repapprox"])  # c = M // K
    assert default.note == "c = 5 replicas, 0 Berrut-coded extras"
    (unpacked,) = cj.catalogue(LINEAR, 8, 40, names=["circle"], circle_pack=False)
    assert unpacked.min_responses == 8
    (bacc,) = cj.catalogue(LINEAR, 1, 1, names=["bacc"])
    assert bacc.reason == "does not apply: M = 1 < 2"
    (lw,) = cj.catalogue(DEEP, 4, 4, names=["layerwise"])
    assert lw.reason == "does not apply: M = 4 < K + 1"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: cj.catalogue("linear", 8, 40), TypeError,
         "catalogue: workload must be a codedjax.Workload, got str"),
        (lambda: cj.catalogue(LINEAR, 0, 40), ValueError,
         "catalogue: num_inputs must be an int >= 1, got 0"),
        (lambda: cj.catalogue(LINEAR, 8, True), ValueError,
         "catalogue: num_workers must be an int >= 1, got True"),
        (lambda: cj.catalogue(LINEAR, 8, 4), ValueError,
         "catalogue: num_inputs must be at most num_workers = 4, got 8"),
        (lambda: cj.catalogue(LINEAR, 8, 40, names=["turbo", "bacc"]), ValueError,
         f"catalogue: names must be among {cj.SCHEME_NAMES}, got ['turbo']"),
        (lambda: cj.catalogue(LINEAR, 8, 40, replicas=0), ValueError,
         "catalogue: replicas must be an int >= 1, got 0"),
        (lambda: cj.Workload("w", 0), ValueError,
         "Workload: degree must be an int >= 1 or None (not a polynomial), got 0"),
        (lambda: cj.Workload("w", 2, linear=True), ValueError,
         "Workload: a linear workload has degree 1, got degree 2"),
    ],
)  # fmt: skip
def test_bad_arguments_name_themselves(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message


def test_every_exact_code_decodes_a_small_request():
    """Each exact code of the linear workload: encode x [K, F] (the codes of one
    encoder share its program), answer f(q) = q W in float64 (on each part of
    the circle code's complex query: f is real-linear), round to float32 and
    decode with every worker. BACC, NeRCC and RepApprox approximate f: built,
    not checked here (tests/test_error_prediction.py)."""
    k, m, f = 4, 10, 3
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (k, f))
    w = rng.uniform(-1, 1, (f, f))
    truth = x @ w
    u32 = float(np.finfo(np.float32).eps) / 2
    built = [s for s in cj.catalogue(LINEAR, k, m) if s.applies]
    assert len(built) == 13  # every name but layerwise; ParM k = 2 and 4
    assert [s.name for s in built if not s.exact] == ["bacc", "nercc", "repapprox"]
    queries = {}
    for s in built:
        if not s.exact:
            continue
        code = s.code
        if code.encoder_key not in queries:
            q = code.encode(jnp.asarray(x, jnp.float32))
            queries[code.encoder_key] = np.asarray(q, np.float64)
        y = jnp.asarray(queries[code.encoder_key] @ w, jnp.float32)
        r = code.decode(y, jnp.ones(code.num_workers, bool))
        assert bool(r.ok), s.name
        # float32 throughout: the queries (sums of at most M terms), the answers
        # (sums of F) and the decode (sums of at most M) are each within
        # (M + F) u32 of exact (the dot-product bound gamma_n ~ n u), amplified
        # by the decoding system's condition number
        cond = float(r.cond)
        assert np.isfinite(cond) and cond >= 1 - 1e-6, s.name
        tol = 4 * (m + f) * u32 * cond * np.abs(x).sum(1).max() * np.abs(w).max()
        value = np.asarray(r.value, np.float64)
        assert np.abs(value - truth).max() <= tol, s.name
    assert len(queries) == 7  # the four Lagrange codes share one encoder


def test_bounds_bases_are_the_catalogue_codes_bases():
    """codedjax.bounds studies the bases the catalogue's codes decode in (its
    family -> basis map) plus two references; every family of the map is one
    the catalogue builds, and every family the catalogue builds that solves a
    system in a basis is in the map."""
    families = {
        s.family
        for wl in WORKLOADS.values()
        for s in cj.catalogue(wl, 8, 40)
        if s.applies
    }
    assert set(cb.BASIS) <= families
    assert set(cb.BASIS.values()) <= set(cb.BASES)
    assert set(cb.BASES) - set(cb.BASIS.values()) == {
        "monomial",
        "chebyshev_equilibrated",
    }
    solving = {"chebyls", "threshold", "graceful", "robust", "circle", "random"}
    assert {s.family for s in cj.catalogue(LINEAR, 8, 40, names=solving)} == set(
        cb.BASIS
    )


def test_circle_is_exact_for_an_affine_workload():
    k, m, f = 4, 10, 3
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (k, f))
    w = rng.uniform(-1, 1, (f, f))
    b = rng.uniform(1, 2, f)
    (s,) = cj.catalogue(cj.Workload("affine", 1), k, m, names=["circle"])
    assert s.applies and s.exact
    q = np.asarray(s.code.encode(jnp.asarray(x, jnp.float32)), np.float64)
    # f on a complex query a + ib: f(a + ib) = (a W + b) + i (b W), as (re, im)
    y = q @ w + np.stack([b, np.zeros(f)])
    r = s.code.decode(jnp.asarray(y, jnp.float32), jnp.ones(m, bool))
    err = np.abs(np.asarray(r.value, np.float64) - (x @ w + b)).max()
    assert err <= 1e-4 * np.abs(x @ w + b).max()
