"""Shared test set-up: strict promotion, float64 on demand, fresh keys, tolerances.

Every test runs with strict dtype promotion and rank promotion 'raise' unless its
module sets ``pytestmark = pytest.mark.loose_promotion`` (flax/optax model code, whose
internals rely on implicit promotion). Warnings are errors (pyproject.toml).
"""

from __future__ import annotations

import os

os.environ.setdefault("CODEDJAX_NO_PROGRESS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _strict_promotion(request):
    if request.node.get_closest_marker("loose_promotion") is not None:
        yield
        return
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield


@pytest.fixture
def x64():
    """Run the test body with float64 enabled (references and oracles)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def key(request):
    """A fresh typed PRNG key per test (literal seed mixed with the test name)."""
    seed = sum(map(ord, request.node.nodeid)) % (2**31)
    return jax.random.key(seed)


def rtol_for(dtype) -> float:
    """The unit roundoff of a dtype: the scale every tolerance is built from."""
    return float(jnp.finfo(jnp.dtype(dtype)).eps) / 2.0


@pytest.fixture
def np_rng(request):
    seed = sum(map(ord, request.node.nodeid)) % (2**31)
    return np.random.default_rng(seed)
