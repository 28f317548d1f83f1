"""Codes on a dense basis: the circle code (roots of unity) and the random code.

:class:`CircleCode` (least squares over every responder) and
:class:`CircleThresholdCode` (the papers' square solve on the first D arrivals) put
the workers at the M-th roots of unity and carry complex numbers as (real,
imaginary) pairs: their ``coded_shape`` is ``(2,)``, so ``encode`` returns
[M, 2, ...], ``decode`` takes answers [M, 2, ...] and ``decoding_matrix`` is
[K, M, 2] (``codedjax._circle``). :class:`RandomCode` is the Gaussian random code
for linear workloads, decoded by least squares, with the seed of its draw among its
settings (``codedjax._random_code``). :func:`circle_code` and :func:`random_code`
are the factories.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _circle as circ
from . import _random_code as rnd
from ._code import Code, acc_of
from ._dtypes import check_int
from ._lagrange_codes import ThresholdCode
from ._polynomial import spread_order


@dataclasses.dataclass(frozen=True)
class CircleCode(Code):
    """The circle code, least squares over every finite response
    (:func:`circle_code`, ``decoder="ls"``).

    Attributes:
        degree: d, the degree of the worker function (1 with ``pack``).
        pack: two real inputs per complex input (linear workloads): K' =
            ceil(K / 2) complex data points; an odd K is padded with a zero input.
    """

    degree: int = 1
    pack: bool = False

    answers_chunk = 32  # least squares on LAPACK (see Code.answers_chunk)

    @property
    def name(self) -> str:
        return "circle-packed" if self.pack else "circle"

    @property
    def coded_shape(self) -> tuple[int, ...]:
        """(2,): every query and answer is a (real, imaginary) pair."""
        return (2,)

    @property
    def padded_inputs(self) -> int:
        """K rounded up to even with ``pack`` (the inputs the functions see)."""
        return self.num_inputs + (self.num_inputs % 2 if self.pack else 0)

    @property
    def data_points(self) -> int:
        """K', the complex data points (the K'-th roots of unity)."""
        k = self.padded_inputs
        return k // 2 if self.pack else k

    @property
    def num_coeffs(self) -> int:
        """D = d (K' - 1) + 1 monomial coefficients."""
        return self.degree * (self.data_points - 1) + 1

    @property
    def threshold(self) -> int:
        """D = d (K' - 1) + 1."""
        return self.num_coeffs

    @property
    def exact(self) -> bool:
        return True

    def generator(self) -> np.ndarray:
        """V = [alpha_j^m] [M, D], complex128: the generator in the monomial basis
        whose responders' rows' condition number ``decode`` reports."""
        u = circ._tables(self.num_workers, self.data_points, self.num_coeffs)[0]
        return u * np.sqrt(self.num_workers)

    def _statics(self):
        return dict(num_inputs=self.padded_inputs, degree=self.degree, pack=self.pack)

    def _encode(self, x):
        if self.padded_inputs != self.num_inputs:
            x = jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])
        return circ._circle_encode(x, num_workers=self.num_workers, pack=self.pack)

    def _unpad(self, r):
        return r._replace(value=r.value[: self.num_inputs])

    def _decode(self, y, mask):
        r = circ._ls_vmappable(y, mask, acc=acc_of(y), **self._statics())
        return self._unpad(r)


@dataclasses.dataclass(frozen=True)
class CircleThresholdCode(CircleCode):
    """The circle code's square solve on the first D responders in arrival order
    (:func:`circle_code`, ``decoder="threshold"``); without an order, the D
    responders spread most evenly around the circle (:func:`spread_order`)."""

    answer_fields = ("y", "mask", "order")

    @property
    def name(self) -> str:
        return super().name + "-threshold"

    # the arrival order is checked and batched as for the Lagrange threshold code
    decode = ThresholdCode.decode
    decode_batched = ThresholdCode.decode_batched
    decode_answers = ThresholdCode.decode_answers
    _check_order = ThresholdCode._check_order
    _batch_axes = ThresholdCode._batch_axes

    def _decode(self, y, mask, order=None):
        if order is None:
            order = spread_order(mask, num_coeffs=self.num_coeffs)
        r = circ._th_vmappable(
            y, mask, order.astype(jnp.int32), acc=acc_of(y), **self._statics()
        )
        return self._unpad(r)


@dataclasses.dataclass(frozen=True)
class RandomCode(Code):
    """The Gaussian random code for linear workloads, decoded by least squares
    over every finite response (:func:`random_code`).

    Attributes:
        seed: the seed of the draw, any int >= 0: G = ``gaussian_encoding_matrix(
            seed_key(seed), ...)``, N(0, 1/K) entries drawn in float32
            (``seed_key(seed)`` is ``jax.random.key(seed)`` for seeds below 2^32;
            :func:`codedjax._random_code.seed_key`).
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
        return rnd._encode(x, self.generator(acc_of(x)))

    def _decode(self, y, mask):
        acc = acc_of(y)
        return rnd._vmappable(y, mask, self.generator(acc), acc=acc)


@functools.lru_cache(maxsize=64)
def _generator(seed: int, k: int, m: int) -> np.ndarray:
    """The float32 draw as a read-only host array (a constant of every trace)."""
    with jax.ensure_compile_time_eval():
        g = rnd.gaussian_encoding_matrix(
            rnd.seed_key(seed), num_inputs=k, num_workers=m
        )
        out = np.asarray(g)
    out.setflags(write=False)
    return out


_DECODERS = {"ls": CircleCode, "threshold": CircleThresholdCode}


def circle_code(
    *,
    num_inputs: int,
    num_workers: int,
    degree: int,
    decoder: str = "ls",
    pack: bool | None = None,
) -> CircleCode:
    """A polynomial code on the unit circle (Ramamoorthy and Tang's rotation
    embedding), with real arithmetic on every worker.

    Workers sit at the M-th roots of unity, the data at the K'-th roots; a coded
    query and an answer are complex numbers carried as (real, imaginary) pairs
    (``coded_shape`` (2,)): ``encode(x[K, ...])`` is [M, 2, ...], ``decode`` takes
    y [M, 2, ...] and returns the K real outputs, ``decoding_matrix`` is [K, M, 2].
    A worker evaluates f on its pair: for a linear f, f on each part (a batched
    model does so when given the pair as a batch of two); for degree d > 1, f in
    complex arithmetic written on pairs (about two real evaluations for a network
    dominated by its matrix products; ``codedjax._circle`` states the costs).

    With ``pack`` (linear f only, the papers' choice) two real inputs share one
    complex input, K' = ceil(K / 2) (an odd K is padded with a zero input), so the
    threshold is about K / 2; without it K' = K and the threshold is
    D = d (K - 1) + 1, as for :func:`lagrange_code`. ``DecodeResult.cond`` is the
    2-norm condition number of the responders' rows of V = [alpha_j^m] (N x D),
    the figure the papers tabulate; with every worker it is 1 (V^H V = M I for
    D <= M).

    Args:
        num_inputs: K >= 1. num_workers: M >= D. degree: d >= 1.
        decoder: ``"ls"`` (:class:`CircleCode`, least squares over every
            responder) or ``"threshold"`` (:class:`CircleThresholdCode`, the square
            solve on the first D responders of ``decode(..., order=)``).
        pack: two real inputs per complex input; default: True for degree 1,
            False otherwise (True needs degree 1).

    Returns:
        The decoder's :class:`CircleCode`.

    Raises:
        ValueError: unknown decoder, degree < 1, pack with degree != 1, M < D (the
            degree cannot be decoded at this M: the monomials z^m, m < D, are
            distinct on the M-th roots only for D <= M).
        TypeError: non-int sizes, a pack that is not a bool.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> code = cj.circle_code(num_inputs=3, num_workers=6, degree=1)
        >>> x = jnp.arange(6.0).reshape(3, 2)
        >>> y = 2 * code.encode(x)  # linear workers, on (real, imag) pairs
        >>> r = code.decode(y, jnp.arange(6) != 4)
        >>> code.threshold, y.shape, bool(jnp.allclose(r.value, 2 * x, atol=1e-5))
        (2, (6, 2, 2), True)
    """
    fname = "circle_code"
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    d = check_int(fname, "degree", degree, minimum=1)
    if decoder not in _DECODERS:
        raise ValueError(
            f"{fname}: decoder must be 'ls' or 'threshold', got {decoder!r}"
        )
    if pack is None:
        pack = d == 1
    if not isinstance(pack, bool):
        raise TypeError(f"{fname}: pack must be True, False or None, got {pack!r}")
    if pack and d != 1:
        raise ValueError(
            f"{fname}: pack=True needs a linear workload (degree 1): f(a + ib) = "
            f"f(a) + i f(b) only for linear f; got degree={d} (pass pack=False)"
        )
    code = _DECODERS[decoder](k, m, degree=d, pack=pack)
    if code.num_coeffs > m:
        raise ValueError(
            f"{fname}: degree {d} with K'={code.data_points} complex inputs (K={k}"
            f"{', packed' if pack else ''}) needs D = d (K' - 1) + 1 = "
            f"{code.num_coeffs} coefficients, more than num_workers M={m}"
        )
    return code


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
