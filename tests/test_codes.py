"""The Code contract, checked the same way for every code (as lineax tests solvers).

Every code: jit equals eager, vmap over masks equals a loop, one compiled program for
every mask, a NaN/Inf worker counts as missing, fewer than ``threshold`` usable answers
give ``ok=False`` with zeros, exact codes recover exactly with every worker,
``decode_batched`` equals a loop of ``decode``, and ``decoding_matrix`` is the linear
map ``decode`` applies.
"""

import dataclasses
import functools
import logging
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj

K, M, DEG = 3, 12, 2  # D = 5

# (factory, settings) of every code the contract checks: one entry per decoder of
# lagrange_code and per other factory (test_contract_covers_every_code_factory)
CASES = {
    "chebyls": (cj.lagrange_code, dict(num_inputs=K, num_workers=M, degree=DEG)),
    "chebyls-second": (
        cj.lagrange_code,
        dict(num_inputs=K, num_workers=M, degree=DEG, kind=2),
    ),
    "threshold": (
        cj.lagrange_code,
        dict(num_inputs=K, num_workers=M, degree=DEG, decoder="threshold"),
    ),
    # the robust decoder's noise level is the workers' rounding: these float32
    # answers are declared as coming from bf16 workers (a float32 fit rounds at the
    # level of float32 workers, see lagrange_code); its decoding_matrix is ChebyLS's,
    # which its decode equals on clean answers (tests/test_robust_code.py: with
    # suspects)
    "robust": (
        cj.lagrange_code,
        dict(
            num_inputs=K,
            num_workers=M,
            degree=DEG,
            decoder="robust",
            max_corrupted=1,
            worker_dtype="bfloat16",
        ),
    ),
    "graceful": (
        cj.lagrange_code,
        dict(
            num_inputs=K,
            num_workers=M,
            degree=DEG,
            decoder="graceful",
            worker_dtype="bfloat16",
        ),
    ),
    "bacc": (cj.bacc_code, dict(num_inputs=K, num_workers=M)),
    "nercc": (
        cj.nercc_code,
        dict(num_inputs=K, num_workers=M, smoothing=(1e-4, 1e-3)),
    ),
    "repapprox": (
        cj.repapprox_code,
        dict(num_inputs=K, num_workers=M, replication=3),
    ),
    "replication": (cj.replication_code, dict(num_inputs=K, num_workers=M)),
    "uncoded": (cj.uncoded_code, dict(num_inputs=K)),
    # K = 3 queries in one group of 3 and its parity worker: M = 4
    "parity": (cj.parity_code, dict(num_inputs=K, group=3)),
    # the circle codes' queries and answers are (real, imaginary) pairs
    # (coded_shape (2,)); their workers evaluate the polynomial in complex arithmetic
    "circle": (cj.circle_code, dict(num_inputs=K, num_workers=M, degree=DEG)),
    "circle-threshold": (
        cj.circle_code,
        dict(num_inputs=K, num_workers=M, degree=DEG, decoder="threshold"),
    ),
    # linear workloads only: two real inputs per complex one (odd K padded), and
    # the Gaussian random code
    "circle-packed": (cj.circle_code, dict(num_inputs=K, num_workers=M, degree=1)),
    "random": (cj.random_code, dict(num_inputs=K, num_workers=M, seed=5)),
}
CODES = {name: factory(**kw) for name, (factory, kw) in CASES.items()}


LINEAR = {"circle-packed", "random"}  # codes exact on linear workers only


def worker(v):
    """A degree-2 worker function (inside every Lagrange code's function class)."""
    return v**2 - 0.5 * v


# The function each role's workers run (Code.roles). The parity code's parity
# workers run a stand-in parity model (the worker function itself): the contract
# checks the decoder's mechanics; tests/test_parity.py checks a rebuilt answer
# against an exact parity model. A base worker runs the function of the code's
# class (linear_worker for the linear-only codes).
ROLE_FNS = {"base": worker, "parity": worker}


def linear_worker(v):
    return 1.5 * v


def _fn(code):
    """The worker function inside the code's function class."""
    return linear_worker if _key(code) in LINEAR else worker


def _apply(code, fn, coded):
    """fn on each coded query; on (real, imaginary) pairs (coded_shape (2,)) fn in
    complex arithmetic, answered as a pair again."""
    if tuple(code.coded_shape) == ():
        return fn(coded)
    w = fn(jax.lax.complex(coded[:, 0], coded[:, 1]))
    return jnp.stack([jnp.real(w), jnp.imag(w)], axis=1)


def answers(code, coded):
    """The workers' answers to the coded rows [M, ...], each by its role's function."""
    roles = np.asarray(code.roles)
    out = jnp.zeros_like(coded)
    for role in set(code.roles):
        fn = _fn(code) if role == "base" else ROLE_FNS[role]
        rows = jnp.asarray(roles == role).reshape((-1,) + (1,) * (coded.ndim - 1))
        out = jnp.where(rows, _apply(code, fn, coded), out)
    return out


def _data(code, seed=0, f=3):
    x = jax.random.uniform(jax.random.key(seed), (K, f), minval=-1.0, maxval=1.0)
    return x, answers(code, code.encode(x))


def _matmul(a, y):
    """decoding_matrix [K, M, *coded_shape] applied to y [M, *coded_shape, F]."""
    a = np.asarray(a)
    return np.tensordot(a, np.asarray(y), axes=a.ndim - 1)


def _masks(code, n, count, seed=1):
    return cj.sample_masks(
        jax.random.key(seed),
        num_workers=code.num_workers,
        num_responses=n,
        shape=(count,),
    )


def _n_ok(code):
    """A number of responses that decodes (all workers for the uncoded baseline)."""
    m = code.num_workers
    return m if code.threshold >= m else min(max(code.threshold + 3, m - 3), m - 1)


@pytest.fixture(params=sorted(CODES))
def code(request):
    return CODES[request.param]


def _key(code):
    """The CASES name of a code of CODES."""
    return next(n for n, c in CODES.items() if c is code)


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=atol)


def test_attributes(code):
    assert code.num_inputs == K
    assert 1 <= code.threshold <= code.num_workers
    assert isinstance(code.name, str) and code.name
    assert type(code.exact) is bool  # a property, not a method
    assert hash(code) == hash(type(code)(**vars(code)))  # hashable, by value


def test_encode_shape_and_dtype(code):
    x, y = _data(code)
    assert y.shape == (code.num_workers, *code.coded_shape, 3)
    with pytest.raises(ValueError, match=r"encode: x must have shape \[K, \.\.\.\]"):
        code.encode(jnp.zeros((K + 1, 3)))


# One compiled program per code holds every transform the contract checks (the
# user's jit around decode, vmap over masks, decode_batched with a shared and with
# per-mask payloads, jvp, grad, the decoding matrix): each code compiles its decoder
# a few times for the whole file, not once per test.
B = 6  # masks per batch, in every batched call of this file


@functools.cache
def _inputs(name):
    """y, B decodable masks then B with too few answers, one mask, dy, g."""
    code = CODES[name]
    x, y = _data(code)
    n = code.threshold - 1
    few = _masks(code, n, B) if n > 0 else jnp.zeros((B, code.num_workers), bool)
    masks = jnp.concatenate([_masks(code, _n_ok(code), B), few])
    mask = _masks(code, _n_ok(code), 1, seed=7)[0]
    dy = jax.random.normal(jax.random.key(8), y.shape)
    g = jax.random.normal(jax.random.key(9), (K, y.shape[-1]))
    return y, masks, mask, dy, g


@functools.cache
def _program(name):
    """The contract's transforms of one code as one jitted function of its inputs."""
    code = CODES[name]

    @jax.jit
    def run(y, masks, mask, dy, g):
        f = lambda yy: code.decode(yy, mask).value  # noqa: E731
        _, tangent = jax.jvp(f, (y,), (dy,))
        cot = jax.grad(lambda yy: jnp.sum(g * f(yy)))(y)
        # the same 2B masks in every batched form (XLA then shares their work)
        ys = jnp.broadcast_to(y, masks.shape[:1] + y.shape)
        return dict(
            decode=code.decode(y, mask),  # decode inside the user's jit
            vmap=jax.vmap(lambda mk: code.decode(y, mk))(masks),
            shared=code.decode_batched(y, masks, shared_y=True),
            per=code.decode_batched(ys, masks),
            answers=code.decode_answers_batched(cj.Answers(ys, masks)),
            tangent=tangent,
            cot=cot,
            matrix=code.decoding_matrix(mask),
        )

    return run


@functools.cache
def _transforms(name):
    out = _program(name)(*_inputs(name))
    return jax.tree_util.tree_map(np.asarray, out)


def test_jit_equals_eager(code):
    y, _, mask, *_ = _inputs(_key(code))
    eager = code.decode(y, mask)
    jitted = _transforms(_key(code))["decode"]
    for a, b in zip(eager, jitted, strict=True):
        _close(a, b)


def test_vmap_equals_loop_and_batched(code):
    name = _key(code)
    y, masks, *_ = _inputs(name)
    loop = [code.decode(y, mk) for mk in masks]
    t = _transforms(name)
    for i, r in enumerate(loop):
        assert bool(r.ok) == (i < B)  # B decodable masks, then B with too few
        for batch in (t["vmap"], t["shared"], t["per"], t["answers"]):
            _close(batch.value[i], r.value)
            assert bool(batch.ok[i]) == bool(r.ok)
            assert int(batch.status[i]) == int(r.status)
            assert int(batch.num_used[i]) == int(r.num_used)


def test_one_program_for_every_mask(code, caplog):
    """decode compiles once for a payload shape, then serves every mask."""
    x, y = _data(code)
    code.decode(y, _masks(code, 1, 1, seed=1)[0])
    masks = [_masks(code, n, 1, seed=n)[0] for n in range(2, code.num_workers + 1)]
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        caplog.clear()
        for mk in masks:
            code.decode(y, mk)
        msgs = [r.getMessage() for r in caplog.records]
    assert not [m for m in msgs if "Compiling" in m], msgs


def test_nonfinite_worker_counts_as_missing(code):
    x, y = _data(code)
    m = code.num_workers
    mask = jnp.ones(m, bool)
    for bad in (jnp.nan, jnp.inf, -jnp.inf):
        y_bad = y.at[1, 0].set(bad)
        r_bad = code.decode(y_bad, mask)
        r_missing = code.decode(y, mask.at[1].set(False))
        assert bool(r_bad.ok) == bool(r_missing.ok)
        _close(r_bad.value, r_missing.value)
        assert np.all(np.isfinite(np.asarray(r_bad.value)))


def test_too_few_responses_is_data(code):
    t = _transforms(_key(code))  # masks B..2B-1 have threshold - 1 answers
    for r in (t["shared"], t["per"], t["vmap"]):
        assert not np.any(r.ok[B:])
        assert np.all(r.status[B:] == int(cj.Status.TOO_FEW_RESPONSES))
        assert np.all(r.value[B:] == 0)
        assert np.all(np.isinf(r.error[B:]))


def test_exact_with_every_worker(code):
    x, y = _data(code)
    r = code.decode(y, jnp.ones(code.num_workers, bool))
    truth = _fn(code)(x)
    if code.exact:
        assert bool(r.ok)
        # decoded from first-kind or second-kind Chebyshev systems of cond O(1)
        _close(r.value, truth, atol=50 * float(jnp.finfo(jnp.float32).eps))
    else:
        # approximate codes: close, not exact (Berrut/NeRCC interpolation error)
        assert bool(r.ok)
        assert float(jnp.max(jnp.abs(r.value - truth))) < 0.2


def test_decoding_matrix_is_the_linear_map(code):
    y, _, mask, *_ = _inputs(_key(code))
    a = _transforms(_key(code))["matrix"]
    assert a.shape == (K, code.num_workers, *code.coded_shape)
    assert np.all(a[:, ~np.asarray(mask)] == 0)
    _close(_matmul(a, y), code.decode(y, mask).value, atol=1e-5)


# Answers at the low edge of float32 (columns of the payload scaled by 2^shift,
# rounded once by numpy, which keeps subnormal numbers): every answer subnormal,
# the largest just above the normal range (the rest and the products below it),
# and one feature of normal answers beside two of subnormal ones.
EDGE = (
    ("subnormal", -140, [0, 1, 2]),
    ("near", -124, [0, 1, 2]),
    ("mixed", -140, [1, 2]),
)
# codes whose decode of these workers approximates (BACC, NeRCC, RepApprox's
# fallback, a parity model that is not exact): their prediction is the rounding
# part only (docs/decoding.md)
APPROX = {"bacc", "nercc", "repapprox", "parity"}


def _edge_payload(y, shift, cols):
    """(small, big): y with the columns ``cols`` scaled by 2^shift and rounded
    once (subnormal answers), and those answers scaled back by 2^-shift
    (exactly: the same answers at a normal size)."""
    small = np.array(y, np.float32)
    small[..., cols] = np.ldexp(small[..., cols], shift)
    big = small.copy()
    big[..., cols] = np.ldexp(small[..., cols], -shift)
    return small, big


def test_answers_at_the_low_edge_of_float32_decode_in_every_form(code):
    """Answers in or near the subnormal range decode as the same answers scaled
    up would, scaled back: bit for bit (rounded once into the subnormal range)
    for every code that decodes linearly, within the predicted error for the
    graceful and robust decoders; eager, inside the user's jit, under vmap and
    batched (the programs of this file, run on other values), with ``ok`` as at
    a normal size and a finite prediction that covers the error against the
    worker function's exact values."""
    name = _key(code)
    y, masks, mask, dy, g = _inputs(name)
    x, _ = _data(code)
    truth = np.asarray(_fn(code)(x.astype(jnp.float32)), np.float64)
    linear = not isinstance(code, (cj.GracefulCode, cj.RobustCode))
    for tag, shift, cols in EDGE:
        small, big = (jnp.asarray(v) for v in _edge_payload(y, shift, cols))
        got = jax.tree_util.tree_map(
            np.asarray, _program(name)(small, masks, mask, dy, g)
        )
        ref = jax.tree_util.tree_map(
            np.asarray, _program(name)(big, masks, mask, dy, g)
        )
        got["eager"] = jax.tree_util.tree_map(np.asarray, code.decode(small, mask))
        ref["eager"] = ref["decode"]
        scale = np.zeros(truth.shape[-1], int)
        scale[cols] = shift
        for form in ("eager", "decode", "vmap", "shared", "per", "answers"):
            r, rb, where = got[form], ref[form], f"{name} {tag} {form}"
            np.testing.assert_array_equal(r.ok, rb.ok, err_msg=where)
            ok = np.asarray(r.ok, bool)
            want = np.ldexp(rb.value, scale).astype(np.float32)  # rounded once
            err = np.abs(r.value.astype(np.float64) - want)
            if linear:
                np.testing.assert_array_equal(r.value, want, err_msg=where)
            else:
                pred = r.error.reshape(r.error.shape + (1,) * (err.ndim - ok.ndim))
                assert np.all(err <= pred, where=ok.reshape(pred.shape)), where
            assert np.all(np.isfinite(r.error[ok])), where
            if name not in APPROX and form in ("eager", "decode"):
                exact = np.ldexp(truth, scale)
                assert float(np.abs(r.value - exact).max()) <= float(r.error), where


@pytest.mark.parametrize(
    "method", ["decode", "decode_batched", "decode_answers", "decode_answers_batched"]
)
def test_a_keyword_the_code_does_not_take_is_refused_naming_its_method(code, method):
    """``noise_sd`` given to a code that does not take it (all but a robust code),
    and ``order`` to a decode without one (all but a threshold code): a TypeError
    that names the code's own method and the codes that take it, eagerly and
    inside the user's jit, never Python's message naming ``Code.decode``.
    :class:`Answers` carry the arrival order to every code (a runtime knows it);
    a ``noise_sd`` there is refused as by ``decode``."""
    y, masks, mask, *_ = _inputs(_key(code))
    ys = jnp.broadcast_to(y, masks.shape[:1] + y.shape)
    m, b = code.num_workers, masks.shape[0]
    extra = {
        "noise_sd": (jnp.ones(m), jnp.ones((b, m)), "noise_sd", "robust"),
        "order": (jnp.arange(m), jnp.tile(jnp.arange(m), (b, 1)), "order", "thresh"),
    }
    for kw, (one, many, field, who) in extra.items():
        if field in code.answer_fields:
            continue  # the code takes it
        if kw == "order" and method.startswith("decode_answers"):
            continue  # every code is given the arrival order, and reads it or not
        one_kw, many_kw = {kw: one}, {kw: many}

        def call(yy, one_kw=one_kw, many_kw=many_kw):
            if method == "decode":
                return code.decode(yy, mask, **one_kw)
            if method == "decode_batched":
                return code.decode_batched(yy, masks, shared_y=True, **one_kw)
            if method == "decode_answers":
                return code.decode_answers(cj.Answers(yy, mask, **one_kw))
            yb = jnp.broadcast_to(yy, ys.shape)
            return code.decode_answers_batched(cj.Answers(yb, masks, **many_kw))

        want = (
            rf"^{type(code).__name__}\.{method}: {kw} \(.*\) is taken only by a {who}"
        )
        for run in (call, jax.jit(call)):
            with pytest.raises(TypeError, match=want):
                run(y)


def test_forward_and_reverse_derivatives_agree(code):
    """jax.jvp and jax.grad of decode work for every code and are one linear map:
    <g, J dy> == <J^T g, dy>; for a code whose decode is linear in y, J dy is its
    decoding matrix times dy."""
    y, _, mask, dy, g = _inputs(_key(code))
    t = _transforms(_key(code))
    _close(t["decode"].value, code.decode(y, mask).value)
    lhs = float(np.sum(np.asarray(g) * t["tangent"]))
    rhs = float(np.sum(t["cot"] * np.asarray(dy)))
    assert abs(lhs - rhs) <= 1e-4 * (abs(lhs) + 1.0)
    # linear in y, except graceful (its smoothing is chosen from y) and robust (its
    # weights are the answers' sizes and its suspects come from y)
    if not isinstance(code, (cj.GracefulCode, cj.RobustCode)):
        _close(t["tangent"], _matmul(t["matrix"], dy), atol=1e-4)


def test_decode_answers_batched_in_chunks_equals_the_batched_decode():
    """A LAPACK decoder maps decode_answers over chunks of answers_chunk requests
    (a loop of vmapped chunks): 2 full chunks and a remainder give the values of
    one vmapped decode_batched."""
    code = CODES["chebyls"]
    assert code.answers_chunk == 32 and CODES["bacc"].answers_chunk is None
    y, *_ = _inputs("chebyls")
    b = 2 * code.answers_chunk + 6
    masks = _masks(code, _n_ok(code), b, seed=3)
    ys = jnp.broadcast_to(y, (b,) + y.shape)
    got = jax.jit(lambda yy, mk: code.decode_answers_batched(cj.Answers(yy, mk)))(
        ys, masks
    )
    ref = code.decode_batched(y, masks, shared_y=True)
    assert got.value.shape == (b, K, y.shape[-1])
    _close(got.value, ref.value)
    np.testing.assert_array_equal(np.asarray(got.ok), np.asarray(ref.ok))


def test_decodable_from_is_the_first_arrival_that_may_decode(code):
    """Code.decodable_from (a replication code's closed form too) against the
    arrivals one by one: the first after which may_decode holds."""
    m = code.num_workers
    rng = np.random.default_rng(4)
    t = rng.exponential(1.0, (40, m))
    t[rng.random((40, m)) < 0.3] = np.inf  # answers that never arrive
    t[0] = np.inf  # no answer at all
    t[1, : m // 2] = 0.5  # ties
    want = np.full(len(t), np.inf)
    for r, row in enumerate(t):
        for tn in np.sort(row[np.isfinite(row)]):
            if code.may_decode(row <= tn):
                want[r] = tn
                break
    got = code.decodable_from(t)
    assert got.shape == (len(t),)
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[0]) and np.isfinite(got).any()
    # the base rule gives the same as an override
    np.testing.assert_array_equal(cj.Code.decodable_from(code, t), want)


def test_codes_with_one_encoder_key_encode_alike():
    """Every Lagrange code on the same K, M and worker points encodes alike,
    whatever its degree and decoder; other codes' keys are themselves."""
    other_degree = cj.lagrange_code(num_inputs=K, num_workers=M, degree=DEG + 1)
    codes = [*CODES.values(), other_degree]
    x, _ = _data(CODES["chebyls"])
    by_key: dict = {}
    for c in codes:
        by_key.setdefault(c.encoder_key, []).append(c)
    lagrange = by_key[CODES["chebyls"].encoder_key]
    assert {c.name for c in lagrange} == {"chebyls", "threshold", "robust", "graceful"}
    assert other_degree in lagrange
    assert CODES["chebyls-second"].encoder_key != CODES["chebyls"].encoder_key
    for key, group in by_key.items():
        hash(key)
        ref = np.asarray(group[0].encode(x))
        for c in group[1:]:
            np.testing.assert_array_equal(np.asarray(c.encode(x)), ref)
        if not isinstance(group[0], cj.LagrangeCode):
            assert group == [key]


def test_contract_covers_every_code_factory():
    """Every code factory the library exports, and every concrete code class it
    exports, has an entry in CASES: a new code cannot skip the contract."""
    factories = {n for n in dir(cj) if n.endswith("_code") and callable(getattr(cj, n))}
    assert {f.__name__ for f, _ in CASES.values()} == factories
    classes = {
        c for c in vars(cj).values() if isinstance(c, type) and issubclass(c, cj.Code)
    }
    bases = {cj.Code, cj.LagrangeCode}  # abstract: no factory returns them
    assert {type(c) for c in CODES.values()} == classes - bases


def test_float64_decoding_matches_numpy_reference():
    """ChebyLS through the Code equals a float64 numpy least-squares fit."""
    code = CODES["chebyls"]
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 2)))
        y = worker(code.encode(x))
        mask = jnp.asarray(np.arange(M) % 4 != 1)
        r = code.decode(y, mask)
        alpha = np.cos((2 * np.arange(M) + 1) * np.pi / (2 * M))
        beta = np.cos((2 * np.arange(K) + 1) * np.pi / (2 * K))
        v = np.polynomial.chebyshev.chebvander(alpha, code.num_coeffs - 1)
        sel = np.asarray(mask)
        coef = np.linalg.lstsq(v[sel], np.asarray(y)[sel], rcond=None)[0]
        ref = np.polynomial.chebyshev.chebvander(beta, code.num_coeffs - 1) @ coef
        assert r.value.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(r.value), ref, atol=1e-12)


def test_may_decode_is_necessary_for_ok(code):
    """may_decode (host, structure only) is False wherever decode is not ok from
    finite answers; for replication it is exactly 'every input has a replica'."""
    y, *_ = _inputs(_key(code))
    m = code.num_workers
    for n in range(1, m + 1, 2):  # 2B masks of n and n + 1 answers: one program
        masks = jnp.concatenate(
            [_masks(code, n, B, seed=n), _masks(code, min(n + 1, m), B, seed=n + 1)]
        )
        out = _program(_key(code))(y, masks, *_inputs(_key(code))[2:])
        ok = np.asarray(out["shared"].ok)
        may = code.may_decode(masks)
        assert may.shape == (2 * B,) and may.dtype == bool
        assert np.all(may | ~ok)
        if isinstance(code, cj.ReplicationCode):
            np.testing.assert_array_equal(may, ok)
    if isinstance(code, cj.ReplicationCode):
        assert bool(code.may_decode(np.arange(m) >= m - K))  # the last replicas


def test_replication_takes_any_replica():
    code = CODES["replication"]
    x, y = _data(code)
    # only the last replica of each input answers
    mask = jnp.zeros(M, bool).at[M - K :].set(True)
    r = code.decode(y, mask)
    assert bool(r.ok) and int(r.num_used) == K
    _close(r.value, worker(x), atol=0)
    r = code.decode(y, mask.at[M - 1].set(False))
    assert not bool(r.ok)


def test_threshold_decoder_uses_the_arrival_order():
    code = CODES["threshold"]
    x, y = _data(code)
    mask = jnp.ones(M, bool)
    order = jnp.arange(M, dtype=jnp.int32)[::-1]
    r = code.decode(y, mask, order=order)
    ref = cj.threshold_decode(
        y,
        mask,
        code.alpha(),
        code.beta(),
        num_coeffs=code.num_coeffs,
        order=order,
    )
    # the last D workers by index: an extrapolation, badly conditioned; jit and
    # eager round differently, within cond * eps of the answers' size
    tol = 10 * float(ref.cond) * float(jnp.finfo(jnp.float32).eps)
    np.testing.assert_allclose(np.asarray(r.value), np.asarray(ref.value), atol=tol)
    other = code.decode(y, mask, order=jnp.arange(M, dtype=jnp.int32))
    assert float(jnp.max(jnp.abs(other.value - r.value))) > 0  # order is used
    # batched: one order per mask, [B, M], each decoded as alone
    orders = jnp.stack([order, jnp.arange(M, dtype=jnp.int32)])
    rb = code.decode_batched(y, jnp.stack([mask, mask]), order=orders, shared_y=True)
    _close(rb.value[0], r.value, atol=tol)
    _close(rb.value[1], other.value, atol=tol)
    for bad in (orders[:1], orders[:, :-1], orders[:, None]):
        with pytest.raises(
            ValueError,
            match=r"ThresholdCode.decode_batched: order must have shape \[B, M\] = "
            rf"\[2, {M}\] \(worker indices in arrival order\), got",
        ):
            code.decode_batched(y, jnp.stack([mask, mask]), order=bad, shared_y=True)


def test_robust_code_checks_the_noise_levels_shape():
    code = CODES["robust"]
    _, y = _data(code)
    mask = jnp.ones(M, bool)
    for bad in (jnp.ones(M - 1), jnp.ones(M + 1), jnp.ones((1, M))):
        with pytest.raises(
            ValueError,
            match=rf"RobustCode.decode: noise_sd must have shape \[M\] = \[{M}\]",
        ):
            code.decode(y, mask, noise_sd=bad)


def test_settings_of_the_classes_and_their_factories():
    """A class built from its required fields equals its factory's default code;
    RepApprox's fallback names it and sets its threshold; the smallest sizes."""
    rep = cj.repapprox_code(num_inputs=K, num_workers=M, replication=3)
    assert cj.RepApproxCode(num_inputs=K, num_workers=M, replication=3) == rep
    assert (rep.name, rep.threshold) == ("repapprox", 1)
    nr = cj.repapprox_code(num_inputs=K, num_workers=M, replication=3, fallback="nercc")
    assert (nr.name, nr.threshold) == ("repapprox-nercc", 2)
    robust = cj.lagrange_code(
        num_inputs=K, num_workers=M, degree=DEG, decoder="robust", max_corrupted=0
    )
    assert cj.RobustCode(num_inputs=K, num_workers=M, degree=DEG) == robust
    one = cj.bacc_code(num_inputs=1, num_workers=3)  # K = 1 is a code
    assert (one.num_inputs, one.num_workers) == (1, 3)
    for factory, kw, name in [
        (cj.bacc_code, dict(num_inputs=0, num_workers=3), "num_inputs"),
        (cj.lagrange_code, dict(num_inputs=2, num_workers=0, degree=1), "num_workers"),
        (cj.replication_code, dict(num_inputs=1, num_workers=0), "num_workers"),
    ]:
        with pytest.raises(
            ValueError, match=rf"^{factory.__name__}: {name} must be >= 1, got 0$"
        ):
            factory(**kw)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (cj.lagrange_code, dict(num_inputs=8, num_workers=10, degree=3), "below the"),
        (
            cj.lagrange_code,
            dict(num_inputs=2, num_workers=10, degree=1, decoder="qr"),
            "decoder must be",
        ),
        (
            cj.lagrange_code,
            dict(num_inputs=2, num_workers=10, degree=1, kind=3),
            "kind must be 1 or 2",
        ),
        (cj.nercc_code, dict(num_inputs=2, num_workers=5, smoothing=1.0), "pair"),
        (
            cj.nercc_code,
            dict(num_inputs=2, num_workers=5, smoothing=(1.0, -1.0)),
            ">= 0",
        ),
        (cj.replication_code, dict(num_inputs=4, num_workers=3), "at least"),
        (cj.parity_code, dict(num_inputs=12, group=5), "multiple of group"),
        (cj.parity_code, dict(num_inputs=12, group=1), "group must be >= 2"),
        (cj.parity_code, dict(num_inputs=4, group=2, parity_error=-1.0), ">= 0"),
        (
            cj.repapprox_code,
            dict(num_inputs=4, num_workers=10, replication=3),
            "repapprox",
        ),
        (
            cj.circle_code,
            dict(num_inputs=8, num_workers=10, degree=3),
            r"circle_code: degree 3 .* D = d \(K' - 1\) \+ 1 = 22 .* M=10",
        ),
        (
            cj.circle_code,
            dict(num_inputs=4, num_workers=10, degree=2, pack=True),
            "circle_code: pack=True needs a linear workload",
        ),
        (
            cj.circle_code,
            dict(num_inputs=4, num_workers=10, degree=1, decoder="chebyls"),
            "circle_code: decoder must be 'ls' or 'threshold'",
        ),
        (
            cj.random_code,
            dict(num_inputs=4, num_workers=3),
            "random_code: a random code needs num_workers >= num_inputs",
        ),
    ],
)
def test_factories_reject_bad_settings(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_decode_rejects_bad_shapes():
    code = CODES["chebyls"]
    with pytest.raises(ValueError, match=r"ChebyLSCode.decode: y must have shape"):
        code.decode(jnp.zeros((M + 1, 2)), jnp.ones(M, bool))
    with pytest.raises(
        ValueError,
        match=rf"decode_batched: y must have shape \[B, M, \.\.\.\] = \[3, {M}, "
        r"'\.\.\.'\] \(shared_y=False\), got \(12, 2\)",
    ):
        code.decode_batched(jnp.zeros((M, 2)), jnp.ones((3, M), bool))


def test_remembered_signature_gives_the_checked_results():
    """After a checked call, ``encode`` and ``decode`` skip the checks for the same
    signature (shapes, dtypes, placement; numpy inputs by shape and dtype): the
    results stay bit for bit those of the checked call and of a fresh, equal
    code's, and another signature is checked again (a tracer too:
    test_jit_equals_eager)."""
    code = CODES["chebyls"]
    m = code.num_workers
    x, y = _data(code)
    mask = _masks(code, _n_ok(code), 1)[0]
    fresh = dataclasses.replace(code)  # equal, nothing remembered yet
    assert fresh == code and "_checked" not in fresh.__dict__
    runs = [(c.encode(x), *c.decode(y, mask)) for c in (code, code, fresh)]
    assert "_checked" in code.__dict__
    assert len(fresh.__dict__["_checked"]) == 2  # encode's and decode's signatures
    for run in runs[1:]:  # the remembered path, then a checked one
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert "_checked" not in pickle.loads(pickle.dumps(code)).__dict__
    for bad in (jnp.ones((2, m), bool), mask.astype(jnp.int32)):
        with pytest.raises((ValueError, TypeError), match=r"^ChebyLSCode.decode: "):
            code.decode(y, bad)
    with pytest.raises(TypeError, match=r"^ChebyLSCode.encode: "):
        code.encode(np.asarray(x).astype(np.int32))
    # numpy answers: checked once, then the remembered path (the program converts
    # them): the same values as the device arrays', and a bad one still refused
    yn, mn, xn = np.asarray(y), np.asarray(mask), np.asarray(x)
    before = len(code.__dict__["_checked"])
    for _ in range(2):
        np.testing.assert_array_equal(
            np.asarray(code.decode(yn, mn).value), np.asarray(runs[0][1])
        )
        np.testing.assert_array_equal(np.asarray(code.encode(xn)), runs[0][0])
    assert len(code.__dict__["_checked"]) == before + 2
    with pytest.raises(TypeError, match=r"^ChebyLSCode.decode: "):
        code.decode(yn, mn.astype(np.int32))
    with pytest.raises(ValueError, match=r"^ChebyLSCode.decode: "):
        code.decode(yn[:-1], mn[:-1])
