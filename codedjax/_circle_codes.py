"""The circle code: workers at the roots of unity (Ramamoorthy and Tang's rotation
embedding).

:class:`CircleCode` (least squares over every responder) and
:class:`CircleThresholdCode` (the papers' square solve on the first D arrivals) put
the workers at the M-th roots of unity and carry complex numbers as (real,
imaginary) pairs: their ``coded_shape`` is ``(2,)``, so ``encode`` returns
[M, 2, ...], ``decode`` takes answers [M, 2, ...] and ``decoding_matrix`` is
[K, M, 2]. The kernels are in ``codedjax._circle_kernels``; :func:`circle_code` is
the factory. With ``systematic=True`` (K' dividing M, so that the data roots are
worker roots) a query whose own worker answered is decoded as that answer
(``codedjax._systematic``).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_int
from ._circle_kernels import (
    circle_decode_unchecked,
    circle_encode_unchecked,
    circle_generator,
    circle_threshold_decode_unchecked,
)
from ._code import Code, acc_of
from ._lagrange_codes import ThresholdCode
from ._lagrange_threshold import spread_order_unchecked
from ._systematic import copy_systematic, decodable_with_copies


@dataclasses.dataclass(frozen=True)
class CircleCode(Code):
    """The circle code, least squares over every finite response
    (:func:`circle_code`, ``decoder="ls"``).

    Attributes:
        degree: d, the degree of the worker function (1 with ``pack``).
        pack: two real inputs per complex input (linear workloads): K' =
            ceil(K / 2) complex data points; an odd K is padded with a zero input.
        systematic: the data roots are worker roots (K' divides M): worker
            j = i M / K' is sent complex input i itself, and a decode returns its
            answer for the query (or the two packed queries) it carries where it
            answered (:func:`circle_code`).
    """

    degree: int = 1
    pack: bool = False
    systematic: bool = False

    answers_chunk = 32  # least squares on LAPACK (see Code.answers_chunk)

    def __post_init__(self):
        if self.systematic:
            _check_systematic(type(self).__name__, self.data_points, self.num_workers)

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
        """D = d (K' - 1) + 1; systematic: min(D, K'), since the K' systematic
        answers decode on their own."""
        if self.systematic:
            return min(self.num_coeffs, self.data_points)
        return self.num_coeffs

    @property
    def systematic_workers(self) -> tuple[int, ...] | None:
        """The worker at the data root of query k's complex input (i M / K' for
        input i; packed, queries i and K' + i share it); None unless
        ``systematic``."""
        if not self.systematic:
            return None
        return tuple(int(w) for w in self._sources()[0])

    def _sources(self):
        """(workers [K], parts [K], 2): query k's answer is part ``parts[k]``
        (0 real, 1 imaginary) of worker ``workers[k]``'s pair."""
        kp, step = self.data_points, self.num_workers // self.data_points
        q = np.arange(self.num_inputs)
        return (q % kp) * step, q // kp, 2

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """At least D responders; systematic: also the K' systematic workers."""
        if not self.systematic:
            return super().may_decode(mask)
        return self.decodable_queries(mask).all(axis=-1)

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """All K together from D responders; systematic: query k also from its
        own worker."""
        if not self.systematic:
            return super().decodable_queries(mask)
        whole = np.asarray(mask, bool).sum(axis=-1) >= self.num_coeffs
        return decodable_with_copies(mask, self._sources()[0], whole)

    @property
    def exact(self) -> bool:
        return True

    def generator(self) -> np.ndarray:
        """V = [alpha_j^m] [M, D], complex128: the generator in the monomial basis
        whose responders' rows' condition number ``decode`` reports."""
        return circle_generator(self.num_workers, self.data_points, self.num_coeffs)

    def _statics(self):
        return dict(num_inputs=self.padded_inputs, degree=self.degree, pack=self.pack)

    def _encode(self, x):
        if self.padded_inputs != self.num_inputs:
            x = jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])
        out = circle_encode_unchecked(x, num_workers=self.num_workers, pack=self.pack)
        if self.systematic:  # the data roots' rows: the inputs as they are
            kp, step = self.data_points, self.num_workers // self.data_points
            w = np.arange(kp) * step
            xs = x.astype(out.dtype)
            im = xs[kp:] if self.pack else jnp.zeros_like(xs)
            out = out.at[w, 0].set(xs[:kp]).at[w, 1].set(im)
        return out

    def _unpad(self, r):
        return r._replace(value=r.value[: self.num_inputs])

    def _copies(self, r, y, mask):
        """The fit's result with each query whose own worker answered replaced
        by that answer's part (a systematic code; ``r`` otherwise)."""
        if not self.systematic:
            return r
        return copy_systematic(r, y, mask, *self._sources(), r.value.dtype)

    def _decode(self, y, mask):
        r = circle_decode_unchecked(y, mask, acc=acc_of(y), **self._statics())
        return self._copies(self._unpad(r), y, mask)


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
            order = spread_order_unchecked(mask, self.num_coeffs)
        r = circle_threshold_decode_unchecked(
            y, mask, order.astype(jnp.int32), acc=acc_of(y), **self._statics()
        )
        return self._copies(self._unpad(r), y, mask)


_DECODERS = {"ls": CircleCode, "threshold": CircleThresholdCode}


def circle_code(
    *,
    num_inputs: int,
    num_workers: int,
    degree: int,
    decoder: str = "ls",
    pack: bool | None = None,
    systematic: bool = False,
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
    dominated by its matrix products; ``codedjax._circle_kernels`` states the costs).

    With ``pack`` (linear f only, the papers' choice) two real inputs share one
    complex input, K' = ceil(K / 2) (an odd K is padded with a zero input), so the
    threshold is about K / 2; without it K' = K and the threshold is
    D = d (K - 1) + 1, as for :func:`lagrange_code`. ``DecodeResult.cond`` is the
    2-norm condition number of the responders' rows of V = [alpha_j^m] (N x D),
    the figure the papers tabulate; with every worker it is 1 (V^H V = M I for
    D <= M).

    With ``systematic=True`` the code is systematic: when K' divides M the K'-th
    roots are M-th roots, so worker i M / K' sits at data root i and is sent
    complex input i itself (its coded row is set to the input exactly). A
    decode fits every answer as before and returns, for each query whose own
    worker answered, that answer's real part (packed: the real part for query i
    and the imaginary part for query K' + i), the fit for the others; K'
    systematic answers decode on their own (``threshold`` min(D, K')). Other M
    have no worker at the data roots: a ValueError says so.

    Args:
        num_inputs: K >= 1. num_workers: M >= D. degree: d >= 1.
        decoder: ``"ls"`` (:class:`CircleCode`, least squares over every
            responder) or ``"threshold"`` (:class:`CircleThresholdCode`, the square
            solve on the first D responders of ``decode(..., order=)``).
        pack: two real inputs per complex input; default: True for degree 1,
            False otherwise (True needs degree 1).
        systematic: the workers at the data roots answer their queries
            (above); needs K' to divide M.

    Returns:
        The decoder's :class:`CircleCode`.

    Raises:
        ValueError: unknown decoder, degree < 1, pack with degree != 1, M < D (the
            degree cannot be decoded at this M: the monomials z^m, m < D, are
            distinct on the M-th roots only for D <= M), systematic with K' not
            dividing M.
        TypeError: non-int sizes, a pack or systematic that is not a bool.

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
    if not isinstance(systematic, bool):
        raise TypeError(
            f"{fname}: systematic must be True or False, got {systematic!r}"
        )
    kp = (k + k % 2) // 2 if pack else k
    if systematic:
        _check_systematic(fname, kp, m)
    code = _DECODERS[decoder](k, m, degree=d, pack=pack, systematic=systematic)
    if code.num_coeffs > m:
        raise ValueError(
            f"{fname}: degree {d} with K'={code.data_points} complex inputs (K={k}"
            f"{', packed' if pack else ''}) needs D = d (K' - 1) + 1 = "
            f"{code.num_coeffs} coefficients, more than num_workers M={m}"
        )
    return code


def _check_systematic(fname: str, kp: int, m: int) -> None:
    """A systematic circle code needs the K'-th roots among the M-th roots."""
    if m % kp:
        raise ValueError(
            f"{fname}: systematic=True needs K'={kp} complex data points to divide "
            f"num_workers M={m}: the data roots (the K'-th roots of unity) are "
            f"worker roots (the M-th) only when K' divides M, and no other worker "
            f"is sent a query as it is (use M = {m + (-m) % kp} or "
            f"{max(kp, m - m % kp)})"
        )
