"""Approximate codes for any worker function: BACC (Berrut) and NeRCC.

Both put the data points at first-kind Chebyshev points and the workers at
second-kind points; the decoders are linear smoothers of the responding points
(Berrut's rational interpolant, NeRCC's smoothing spline), so every response set
with enough distinct points decodes, with an error that falls as more respond.
Berrut's interpolant passes through its nodes, so BACC at worker points that
contain the data points is systematic (``bacc_code(..., systematic=True)``);
NeRCC's spline smooths its nodes and has no such variant.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argchecks import check_int
from ._berrut_kernels import (
    berrut_decode_unchecked,
    berrut_decoding_matrix_unchecked,
    berrut_encode_unchecked,
)
from ._chebyshev import systematic_points_f64
from ._code import Code, acc_of
from ._code_points import check_code_points, points
from ._dtypes import accumulation_dtype
from ._nercc_kernels import (
    nercc_decode_unchecked,
    nercc_decoding_matrix_unchecked,
    nercc_encode_unchecked,
)


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
    """Berrut approximate coded computing (see :func:`bacc_code`).

    Attributes:
        systematic: the worker points contain the data points (the second-kind
            points with the K nearest to the data points moved onto them):
            worker ``systematic_workers[k]`` is sent query k itself, and the
            Berrut interpolant, which passes through its nodes, returns its
            answer for query k where it answered.
    """

    systematic: bool = False

    def __post_init__(self):
        if not self.systematic:
            return super().__post_init__()
        check_code_points(type(self).__name__, "beta", self.num_inputs, 1)
        _systematic_points(type(self).__name__, self.num_inputs, self.num_workers)

    @property
    def name(self) -> str:
        return "bacc"

    @property
    def systematic_workers(self) -> tuple[int, ...] | None:
        """The worker at data point beta_k (None unless ``systematic``)."""
        if not self.systematic:
            return None
        return systematic_points_f64(self.num_inputs, self.num_workers, 2)[1]

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M]: second-kind Chebyshev (systematic: with the data
        points among them)."""
        if self.systematic:
            a, _ = systematic_points_f64(self.num_inputs, self.num_workers, 2)
            return jnp.asarray(a, dtype=dtype)
        return super().alpha(dtype)

    @property
    def threshold(self) -> int:
        return 1

    def _encode(self, x):
        acc = acc_of(x)
        return berrut_encode_unchecked(x, self.beta(acc), self.alpha(acc), acc)

    def _decode(self, y, mask):
        acc = acc_of(y)
        return berrut_decode_unchecked(y, mask, self.alpha(acc), self.beta(acc), acc)

    def _matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return berrut_decoding_matrix_unchecked(
            mask, self.alpha(acc), self.beta(acc), acc
        ).value


def bacc_code(
    *, num_inputs: int, num_workers: int, systematic: bool = False
) -> BaccCode:
    """Berrut approximate coded computing (BACC) for any worker function.

    Encoder and decoder are Berrut rational interpolants: first-kind data points,
    second-kind worker points (:func:`bacc_points`). Any single response decodes
    (``threshold`` 1); the error falls as more workers respond.

    With ``systematic=True`` the worker points are the second-kind points with
    the K nearest to the data points moved onto them (the rule of a systematic
    :func:`lagrange_code`, on BACC's own points): the Berrut interpolant through
    the inputs is the input itself there, so worker ``systematic_workers[k]`` is
    sent query k as it is, and the decoder's interpolant, which passes through
    its nodes, returns that worker's answer for query k wherever it answered
    (copied bit for bit).

    Args:
        num_inputs: K >= 2 (a spline needs two knots). num_workers: M >= 2.
        systematic: worker points that contain the data points (M >= K + 1).

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
    if not isinstance(systematic, bool):
        raise TypeError(
            f"bacc_code: systematic must be True or False, got {systematic!r}"
        )
    if systematic:
        _systematic_points("bacc_code", k, m)
    return BaccCode(k, m, systematic=systematic)


def _systematic_points(fname: str, k: int, m: int) -> None:
    """A systematic BACC code's points exist (a ValueError naming ``fname``)."""
    try:
        systematic_points_f64(k, m, 2)
    except ValueError as e:
        raise ValueError(f"{fname}: systematic=True: {e}") from None


@dataclasses.dataclass(frozen=True)
class NerccCode(_ApproximateCode):
    """NeRCC smoothing-spline coded computing (see :func:`nercc_code`)."""

    smoothing: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        # the settings are checked here, once per code (the kernels' unchecked
        # entries rely on them); a spline needs two knots (nercc_code)
        super().__post_init__()
        cls = type(self).__name__
        check_int(cls, "num_inputs", self.num_inputs, minimum=2)
        check_int(cls, "num_workers", self.num_workers, minimum=2)
        _smoothing_pair(cls, self.smoothing)

    @property
    def name(self) -> str:
        return "nercc"

    @property
    def threshold(self) -> int:
        return 2

    def _encode(self, x):
        acc = acc_of(x)
        return nercc_encode_unchecked(
            x, self.beta(acc), self.alpha(acc), self.smoothing[0], acc
        )

    def _decode(self, y, mask):
        acc = acc_of(y)
        return nercc_decode_unchecked(
            y, mask, self.alpha(acc), self.beta(acc), self.smoothing[1], acc
        )

    def _matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return nercc_decoding_matrix_unchecked(
            mask, self.alpha(acc), self.beta(acc), self.smoothing[1], acc
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
