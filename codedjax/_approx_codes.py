"""Approximate codes for any worker function: BACC (Berrut) and NeRCC.

Both put the data points at first-kind Chebyshev points and the workers at
second-kind points; the decoders are linear smoothers of the responding points
(Berrut's rational interpolant, NeRCC's smoothing spline), so every response set
with enough distinct points decodes, with an error that falls as more respond.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._berrut import berrut_decode, berrut_decoding_matrix, berrut_encode
from ._code import Code, acc_of, check_code_points, points
from ._dtypes import accumulation_dtype, check_int
from ._nercc import nercc_decode, nercc_decoding_matrix, nercc_encode


@dataclasses.dataclass(frozen=True)
class _ApproximateCode(Code):
    """Approximate codes: first-kind data points, second-kind worker points."""

    def __post_init__(self):
        # the points are fixed by the settings: checked here, once per code
        if self.num_workers >= 2:  # the factories require M >= 2
            check_code_points(type(self).__name__, "alpha", self.num_workers, 2)
        check_code_points(type(self).__name__, "beta", self.num_inputs, 1)

    @property
    def exact(self) -> bool:
        return False

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M] (second-kind Chebyshev)."""
        return points(self.num_workers, 2, dtype)

    def beta(self, dtype: Any = jnp.float32) -> jax.Array:
        """Data points [K] (first-kind Chebyshev)."""
        return points(self.num_inputs, 1, dtype)


@dataclasses.dataclass(frozen=True)
class BaccCode(_ApproximateCode):
    """Berrut approximate coded computing (see :func:`bacc_code`)."""

    @property
    def name(self) -> str:
        return "bacc"

    @property
    def threshold(self) -> int:
        return 1

    def _encode(self, x):
        acc = acc_of(x)
        return berrut_encode(x, self.beta(acc), self.alpha(acc))

    def _decode(self, y, mask):
        acc = acc_of(y)
        return berrut_decode(y, mask, self.alpha(acc), self.beta(acc))

    def _matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return berrut_decoding_matrix(
            mask, self.alpha(acc), self.beta(acc), accum_dtype=acc
        ).value


def bacc_code(*, num_inputs: int, num_workers: int) -> BaccCode:
    """Berrut approximate coded computing (BACC) for any worker function.

    Encoder and decoder are Berrut rational interpolants: first-kind data points,
    second-kind worker points (:func:`bacc_points`). Any single response decodes
    (``threshold`` 1); the error falls as more workers respond.

    Args:
        num_inputs: K >= 2 (a spline needs two knots). num_workers: M >= 2.

    Examples:
        >>> import codedjax as cj
        >>> cj.bacc_code(num_inputs=4, num_workers=10).threshold
        1

    References:
        T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
        arXiv:2009.08327.
    """
    k = check_int("bacc_code", "num_inputs", num_inputs, minimum=1)
    m = check_int("bacc_code", "num_workers", num_workers, minimum=2)
    return BaccCode(k, m)


@dataclasses.dataclass(frozen=True)
class NerccCode(_ApproximateCode):
    """NeRCC smoothing-spline coded computing (see :func:`nercc_code`)."""

    smoothing: tuple[float, float] = (0.0, 0.0)

    @property
    def name(self) -> str:
        return "nercc"

    @property
    def threshold(self) -> int:
        return 2

    def _encode(self, x):
        acc = acc_of(x)
        return nercc_encode(
            x, self.beta(acc), self.alpha(acc), smoothing=self.smoothing[0]
        )

    def _decode(self, y, mask):
        acc = acc_of(y)
        return nercc_decode(
            y, mask, self.alpha(acc), self.beta(acc), smoothing=self.smoothing[1]
        )

    def _matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return nercc_decoding_matrix(
            mask,
            self.alpha(acc),
            self.beta(acc),
            smoothing=self.smoothing[1],
            accum_dtype=acc,
        ).value


def _smoothing_pair(fname: str, smoothing: Any) -> tuple[float, float]:
    try:
        enc, dec = (float(s) for s in smoothing)
    except (TypeError, ValueError):
        raise ValueError(
            f"{fname}: smoothing must be a pair (encoder, decoder) of numbers >= 0, "
            f"got {smoothing!r}"
        ) from None
    if not (np.isfinite(enc) and np.isfinite(dec) and enc >= 0 and dec >= 0):
        raise ValueError(
            f"{fname}: smoothing must be a pair of finite numbers >= 0, got "
            f"{smoothing!r}"
        )
    return enc, dec


def nercc_code(
    *, num_inputs: int, num_workers: int, smoothing: tuple[float, float]
) -> NerccCode:
    """NeRCC: smoothing-spline encoder and decoder with weights (lambda_e, lambda_d).

    Points as :func:`bacc_code`; tune the pair with :func:`tune_nercc`. The decoder
    needs at least 2 distinct responding points (``threshold`` 2).

    Args:
        num_inputs: K >= 2 (a spline needs two knots). num_workers: M >= 2.
        smoothing: (encoder, decoder) weights, finite and >= 0 (static).

    Examples:
        >>> import codedjax as cj
        >>> cj.nercc_code(num_inputs=4, num_workers=10, smoothing=(1e-4, 1e-3)).name
        'nercc'

    References:
        P. Moradi and M. A. Maddah-Ali, NeRCC: nested-regression coded computing
        for resilient distributed prediction serving systems, arXiv:2402.04377;
        P. Moradi, B. Tahmasebi and M. A. Maddah-Ali, Coded computing for resilient
        distributed computing: a learning-theoretic framework, arXiv:2406.00300.
    """
    # a spline through the inputs needs two knots (nercc_encode)
    k = check_int("nercc_code", "num_inputs", num_inputs, minimum=2)
    m = check_int("nercc_code", "num_workers", num_workers, minimum=2)
    return NerccCode(k, m, smoothing=_smoothing_pair("nercc_code", smoothing))
