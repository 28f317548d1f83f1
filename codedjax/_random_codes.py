"""The Gaussian random code for linear workloads.

:class:`RandomCode` is decoded by least squares over every responder, with the seed
of its draw among its settings; the kernels are in ``codedjax._random_kernels``.
:func:`random_code` is the factory.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_int
from ._code import Code, acc_of
from ._random_kernels import (
    gaussian_encoding_matrix,
    random_decode_unchecked,
    random_encode_unchecked,
    seed_key,
)


@dataclasses.dataclass(frozen=True)
class RandomCode(Code):
    """The Gaussian random code for linear workloads, decoded by least squares
    over every finite response (:func:`random_code`).

    Attributes:
        seed: the seed of the draw, any int >= 0: G = ``gaussian_encoding_matrix(
            seed_key(seed), ...)``, N(0, 1/K) entries drawn in float32
            (``seed_key(seed)`` is ``jax.random.key(seed)`` for seeds below 2^32;
            :func:`codedjax._random_kernels.seed_key`).
    """

    seed: int = 0

    def __post_init__(self):
        check_int(type(self).__name__, "seed", self.seed, minimum=0)

    @property
    def name(self) -> str:
        return "random"

    @property
    def threshold(self) -> int:
        """K: any K responders determine the K outputs (with probability one)."""
        return self.num_inputs

    @property
    def exact(self) -> bool:
        """True on linear workloads (the code's function class)."""
        return True

    def generator(self, dtype: Any = jnp.float32) -> jax.Array:
        """G [M, K], the encoding matrix of the code's seed, in ``dtype``."""
        return jnp.asarray(
            _generator(self.seed, self.num_inputs, self.num_workers), dtype
        )

    def _encode(self, x):
        return random_encode_unchecked(x, self.generator(acc_of(x)))

    def _decode(self, y, mask):
        acc = acc_of(y)
        return random_decode_unchecked(y, mask, self.generator(acc), acc=acc)


@functools.lru_cache(maxsize=64)
def _generator(seed: int, k: int, m: int) -> np.ndarray:
    """The float32 draw as a read-only host array (a constant of every trace)."""
    with jax.ensure_compile_time_eval():
        g = gaussian_encoding_matrix(seed_key(seed), num_inputs=k, num_workers=m)
        out = np.asarray(g)
    out.setflags(write=False)
    return out


def random_code(*, num_inputs: int, num_workers: int, seed: int = 0) -> RandomCode:
    """The Gaussian random code for linear workloads: worker j is sent
    sum_i G[j, i] X_i, G [M, K] with N(0, 1/K) entries drawn from ``seed``.

    The unstructured baseline of the stable-coding papers, decoded by least squares
    over every responder (G_S^+ y_S, Householder QR); ``cond`` is that of G_S. Any
    K responders decode (with probability one). Exact only for linear workers.

    Args:
        num_inputs: K >= 1. num_workers: M >= K. seed: any int >= 0 (a Python
            or numpy int, however large), the draw's (kept in the code, which
            stays hashable); the same draw with and without float64 enabled.

    Returns:
        A :class:`RandomCode` with ``threshold`` K.

    Raises:
        ValueError: M < K, a negative seed. TypeError: non-int sizes or seed.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> code = cj.random_code(num_inputs=3, num_workers=6, seed=1)
        >>> x = jnp.arange(6.0).reshape(3, 2)
        >>> r = code.decode(3 * code.encode(x), jnp.arange(6) > 1)
        >>> bool(r.ok), bool(jnp.allclose(r.value, 3 * x, atol=1e-4))
        (True, True)
    """
    fname = "random_code"
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    s = check_int(fname, "seed", seed, minimum=0)  # a numpy int becomes an int
    if m < k:
        raise ValueError(
            f"{fname}: a random code needs num_workers >= num_inputs (K={k}), got M={m}"
        )
    return RandomCode(k, m, seed=s)
