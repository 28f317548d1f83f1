"""Model parameters drawn by numpy for the model tests (imported by test modules;
pytest puts this directory on ``sys.path``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def numpy_module(make, seed: int, dtype=None) -> nnx.Module:
    """The module ``make()`` builds, its parameters drawn by numpy from ``seed``
    instead of flax's initialisers (whose random draws compile once per parameter
    shape): matrices N(0, 1/rows), the rest N(0, 0.1^2) (nonzero biases, so that an
    oracle sees them), float32 values stored in ``dtype`` (default: each parameter's
    own dtype; a wider one is exact)."""
    rng = np.random.default_rng(seed)
    graphdef, state = nnx.split(nnx.eval_shape(make))

    def draw(s):
        assert jnp.issubdtype(s.dtype, jnp.floating), s  # parameters only
        scale = 1.0 / np.sqrt(s.shape[0]) if len(s.shape) == 2 else 0.1
        value = rng.normal(0.0, scale, s.shape).astype(np.float32)
        # device_put copies without a program (jnp.asarray compiles a 'stage'
        # program per shape and dtype)
        return jax.device_put(value.astype(dtype or s.dtype))

    return nnx.merge(graphdef, jax.tree.map(draw, state))
