"""The learned-parity code (ParM): known truth, decode semantics, bad input, serving.

Known truth: for a linear base model without bias F(x) = x W, the base model is its
own exact parity model (F(x_1 + ... + x_k) = F(x_1) + ... + F(x_k)), so every
decodable mask decodes to x W: checked in float64 against numpy. The contract
(jit, vmap, batched, one program, NaN as missing) is in tests/test_codes.py.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from codedjax.serving import FixedN, Injector, Server, SimulatedCluster

K, G = 6, 3  # two groups of 3: M = 8
CODE = cj.parity_code(num_inputs=K, group=G)
M = CODE.num_workers
_rng = np.random.default_rng(0)
W = _rng.standard_normal((5, 4))
X = _rng.standard_normal((K, 5))


def _single_losses():
    """Every mask that loses at most one worker per group of k + 1 (decodable)."""
    groups = [list(range(g * G, g * G + G)) + [K + g] for g in range(K // G)]
    masks = []
    for lost in itertools.product(*[[None] + grp for grp in groups]):
        m = np.ones(M, bool)
        m[[i for i in lost if i is not None]] = False
        masks.append(m)
    return np.stack(masks)  # 4 x 4 = 16 masks


def test_layout_roles_and_encode():
    assert (CODE.num_workers, CODE.threshold, CODE.num_groups) == (8, 6, 2)
    assert CODE.roles == ("base",) * 6 + ("parity",) * 2
    assert hash(CODE) == hash(cj.parity_code(num_inputs=6, group=3))
    u = np.asarray(CODE.encode(jnp.asarray(X, jnp.float32)))
    np.testing.assert_allclose(u[:K], X, rtol=1e-6)
    np.testing.assert_allclose(u[K:], X.reshape(2, 3, 5).sum(1), rtol=1e-6)


def test_linear_model_is_its_own_exact_parity_in_float64():
    masks = _single_losses()
    with jax.enable_x64(True):
        x = jnp.asarray(X)
        y = CODE.encode(x) @ jnp.asarray(W)  # every worker, parity ones too, runs F
        r = CODE.decode_batched(y, jnp.asarray(masks), shared_y=True)
        assert r.value.dtype == jnp.float64
        assert np.all(np.asarray(r.ok))
        np.testing.assert_allclose(
            np.asarray(r.value), np.broadcast_to(X @ W, r.value.shape), atol=1e-12
        )
        # cond: 1 when nothing was rebuilt, k when a base answer was
        rebuilt = ~masks[:, :K].all(axis=1)
        np.testing.assert_array_equal(np.asarray(r.cond), np.where(rebuilt, G, 1.0))
        # the rebuilt value is the linear map of the decoding matrix
        for mk in masks[[1, 7, 15]]:
            a = np.asarray(CODE.decoding_matrix(jnp.asarray(mk), dtype=jnp.float64))
            np.testing.assert_allclose(a @ np.asarray(y), X @ W, atol=1e-12)


def test_two_losses_in_a_group_are_data_not_nan():
    y = jnp.asarray(CODE.encode(jnp.asarray(X, jnp.float32)) @ jnp.asarray(W, "f4"))
    for lost in ([0, 1], [2, K], [3, 4, 5], [K + 1, 4]):
        mask = jnp.ones(M, bool).at[jnp.asarray(lost)].set(False)
        r = CODE.decode(y, mask)
        assert not bool(r.ok) and int(r.status) == int(cj.Status.TOO_FEW_RESPONSES)
        assert np.all(np.asarray(r.value) == 0) and np.isinf(float(r.error))
        assert not CODE.may_decode(np.asarray(mask))
        assert np.all(np.asarray(CODE.decoding_matrix(mask)) == 0)
    # a lost parity alone costs nothing: the base answers are copied bit for bit,
    # with the workers' own rounding as the predicted error (docs/parity.md)
    r = CODE.decode(y, jnp.ones(M, bool).at[K].set(False))
    assert bool(r.ok) and float(r.cond) == 1
    np.testing.assert_array_equal(np.asarray(r.value), np.asarray(y[:K]))
    err = float(np.max(np.abs(np.asarray(r.value, np.float64) - X @ W)))
    assert err <= float(r.error) < 1e-4


@pytest.mark.parametrize("mode", ["eager", "jit", "vmap"])
def test_error_states_the_parity_models_error(mode):
    """A rebuilt answer's error is its rounding plus the stated parity_error; left
    unstated, the rounding part only: ``ok`` with a finite error, as every
    approximate code reports it (BACC, NeRCC: docs/decoding.md), never inf."""
    y = jnp.asarray(CODE.encode(jnp.asarray(X, jnp.float32)) @ jnp.asarray(W, "f4"))
    mask = jnp.ones(M, bool).at[1].set(False)
    stated_code = cj.parity_code(num_inputs=K, group=G, parity_error=0.25)

    def run(code):
        if mode == "eager":
            return code.decode(y, mask)
        if mode == "jit":
            return jax.jit(code.decode)(y, mask)
        r = jax.vmap(code.decode)(jnp.stack([y, y]), jnp.stack([mask, mask]))
        return jax.tree_util.tree_map(lambda v: v[1], r)

    unknown, stated = run(CODE), run(stated_code)
    assert bool(unknown.ok) and np.isfinite(float(unknown.error))
    rounding = float(stated.error) - 0.25
    # the rounding of k + 1 float32 answers of size ~5, added to the stated error
    assert 0 < rounding < 1e-4
    # (the stated sum is a float32 near 0.25: the rounding known to its spacing)
    spacing = float(np.spacing(np.float32(0.25)))
    np.testing.assert_allclose(float(unknown.error), rounding, rtol=0, atol=spacing)
    err = float(np.max(np.abs(np.asarray(stated.value) - X @ W)))
    assert err <= rounding  # F is its own exact parity model: rounding only
    np.testing.assert_array_equal(np.asarray(unknown.value), np.asarray(stated.value))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(num_inputs=12, group=5), ValueError, "multiple of group=5"),
        (dict(num_inputs=12, group=1), ValueError, "group must be >= 2"),
        (dict(num_inputs=12.0, group=3), TypeError, "num_inputs must be a Python"),
        (dict(num_inputs=12, group=3, parity_error="x"), TypeError, "parity_error"),
        (dict(num_inputs=12, group=3, parity_error=np.inf), ValueError, "finite"),
    ],
)
def test_bad_settings_name_the_function(kwargs, exc, match):
    with pytest.raises(exc, match=f"^parity_code: .*{match}"):
        cj.parity_code(**kwargs)


# ------------------------------------------------------------------ serving

_W32 = jnp.asarray(W, jnp.float32)


def base_fn(v):
    """A nonlinear base model (its exact parity model does not exist)."""
    return jnp.tanh(v @ _W32)


def parity_fn(p):
    """A stand-in parity model: any function of the parity query's shape."""
    return jnp.tanh(p @ _W32) * 2.0


@functools.cache
def _served(lost):
    inj = Injector(
        latency=cj.Constant(0.001), failed_workers={i: "raise" for i in lost}
    )
    with Server(
        CODE,
        {"base": base_fn, "parity": parity_fn},
        backend=SimulatedCluster(injector=inj),
        policy=FixedN(M - len(lost)),  # every answer that arrives
    ) as server:
        return server.infer(np.asarray(X, np.float32))


@pytest.mark.parametrize("lost", [(1, 3), (2, K + 1)])
def test_served_degraded_decode_equals_the_offline_decode(lost):
    r = _served(lost)
    mask = np.ones(M, bool)
    mask[list(lost)] = False
    assert r.ok and r.mask.tolist() == mask.tolist()
    # offline: every worker's answer by its role's function, decoded with the mask
    u = CODE.encode(jnp.asarray(X, jnp.float32))
    y = jnp.concatenate([base_fn(u[:K]), parity_fn(u[K:])])
    np.testing.assert_allclose(r.responses[mask], np.asarray(y)[mask], rtol=1e-6)
    off = CODE.decode(y, jnp.asarray(mask))
    np.testing.assert_allclose(r.value, np.asarray(off.value), rtol=1e-6, atol=1e-6)
    assert r.cond == float(off.cond)
    # rows whose own answer arrived are the base model's answers
    keep = [i for i in range(K) if mask[i]]
    np.testing.assert_allclose(r.value[keep], np.asarray(y)[keep], rtol=1e-6)


def test_server_rejects_a_parity_model_of_another_shape():
    def narrow(p):
        return parity_fn(p)[..., :2]

    with Server(CODE, {"base": base_fn, "parity": narrow},
                backend=SimulatedCluster()) as server:  # fmt: skip
        with pytest.raises(ValueError, match=r"^Server: the function of role 'parity'"):
            server.infer(np.asarray(X, np.float32))
