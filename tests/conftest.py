"""Shared test set-up: strict promotion, float64 on demand, fresh keys, tolerances.

Every test runs with strict dtype promotion and rank promotion 'raise' unless its
module sets ``pytestmark = pytest.mark.loose_promotion`` (flax/optax model code, whose
internals rely on implicit promotion). Warnings are errors (pyproject.toml). Random
draws come from literal seeds (``@pytest.mark.seed(n)``, default 0), never from test
names.
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


@pytest.fixture(autouse=True, scope="module")
def _application_compile(request):
    """Application tests (a module with ``APPLICATION_TEST = True``: the experiments
    of theory/, models/, benchmarks/ and the run kit, end to end) compile without
    XLA's expensive optimisation passes (``jax_disable_most_optimizations``). Their
    programs are many and run a few times each, so compiling them dominates their
    time; the assertions, tolerances and oracles are the same, and the library's
    own tests compile as users do."""
    if not getattr(request.module, "APPLICATION_TEST", False):
        yield
        return
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


@pytest.fixture
def x64():
    """Run the test body with float64 enabled (references and oracles)."""
    with jax.enable_x64(True):
        yield


DEFAULT_SEED = 0


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "seed(n): the literal seed of the key and np_rng fixtures (default 0)",
    )


def _seed(request) -> int:
    """The test's literal seed: ``@pytest.mark.seed(n)``, else DEFAULT_SEED.

    Never derived from the test's name or id, so renaming or reparametrising a test
    does not change its random draws. Thresholds that depend on the draws are derived
    from the worst case over many seeds (tools/reseed_thresholds.py), not tuned to
    this one.
    """
    mark = request.node.get_closest_marker("seed")
    return DEFAULT_SEED if mark is None else int(mark.args[0])


@pytest.fixture
def key(request):
    """A typed PRNG key from the test's literal seed (see :func:`_seed`)."""
    return jax.random.key(_seed(request))


def rtol_for(dtype) -> float:
    """The unit roundoff of a dtype: the scale every tolerance is built from."""
    return float(jnp.finfo(jnp.dtype(dtype)).eps) / 2.0


@pytest.fixture
def np_rng(request):
    """A numpy Generator from the test's literal seed (see :func:`_seed`)."""
    return np.random.default_rng(_seed(request))
