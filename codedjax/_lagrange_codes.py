"""Lagrange codes: exact for workers that compute a polynomial of degree d.

One class per decoder, all subclasses of :class:`LagrangeCode` (which holds K, M, the
degree, the kind of the worker points and whether they contain the data points):
:class:`ChebyLSCode`, :class:`ThresholdCode`, :class:`GracefulCode` and
:class:`RobustCode`. The settings of a decoder live on the class that uses them;
:func:`lagrange_code` is the factory. A systematic code (``systematic=True``)
returns a query whose own worker answered as that answer
(``codedjax._systematic``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_floating, check_int, check_worker_dtype, errors_named
from ._chebyshev import points_f64, systematic_points_f64
from ._code import Answers, Code, acc_of
from ._code_checks import (
    check_answer_fields,
    check_answers,
    check_answers_batched,
    refuse_keywords,
)
from ._code_points import check_code_points, device_points, points
from ._dtypes import accumulation_dtype
from ._lagrange_chebyls import (
    chebyls_decode_batched_unchecked,
    chebyls_decode_unchecked,
    chebyls_decoding_matrix_unchecked,
)
from ._lagrange_encoding import (
    encode_with_matrix,
    encoding_matrix_constant,
    recovery_threshold,
)
from ._lagrange_graceful import graceful_decode_unchecked
from ._lagrange_robust import (
    MAX_CORRUPTED,
    RobustDecodeResult,
    robust_decode_unchecked,
)
from ._lagrange_threshold import spread_order_unchecked, threshold_decode_unchecked
from ._result import DecodeResult
from ._systematic import (
    copy_systematic,
    copy_systematic_batched,
    decodable_with_copies,
    systematic_matrix,
)


@dataclasses.dataclass(frozen=True)
class LagrangeCode(Code):
    """Lagrange coded computing with a Chebyshev-basis decoder (see
    :func:`lagrange_code`): the base of the four decoder classes.

    Attributes:
        degree: d, the degree of the worker function.
        kind: 1 or 2, the kind of the Chebyshev worker points (the data points
            are of the first kind).
        systematic: the worker points contain the data points (the Chebyshev
            points of ``kind`` with the K nearest to the data points moved onto
            them, ``codedjax._chebyshev.systematic_points_f64``): worker
            ``systematic_workers[k]`` is sent query k itself, and a decode returns
            its answer for query k where it answered (:func:`lagrange_code`).
    """

    degree: int = 1
    kind: int = 1
    systematic: bool = False

    answers_chunk = 32  # QR, SVD and LU decoders (see Code.answers_chunk)

    #: a systematic decode with every query's own answer is ``ok`` without the
    #: fit (False for the robust decoder, which trusts no unchecked answer)
    _copies_decode = True

    def __post_init__(self):
        # the points and sizes are fixed by the settings: checked here, once per
        # code (the decoders' unchecked entries rely on it)
        cls = type(self).__name__
        if self.systematic and self.kind in (1, 2):
            _systematic_points(cls, self.num_inputs, self.num_workers, self.kind)
        elif self.kind in (1, 2):
            check_code_points(cls, "alpha", self.num_workers, self.kind)
        check_code_points(cls, "beta", self.num_inputs, 1)
        _check_redundancy(cls, self.num_coeffs, self.num_workers, 0)

    @property
    def num_coeffs(self) -> int:
        """D = d (K - 1) + 1."""
        return recovery_threshold(self.num_inputs, self.degree)

    @property
    def _fit_threshold(self) -> int:
        """The fewest answers from which the fit decodes every query: D."""
        return self.num_coeffs

    @property
    def threshold(self) -> int:
        """D = d (K - 1) + 1; a systematic code (not robust): min(D, K), since the
        K systematic answers decode on their own."""
        if self.systematic and self._copies_decode:
            return min(self._fit_threshold, self.num_inputs)
        return self._fit_threshold

    @property
    def exact(self) -> bool:
        return True

    @property
    def systematic_workers(self) -> tuple[int, ...] | None:
        """The worker at data point beta_k, sent query k itself (None unless
        ``systematic``)."""
        if not self.systematic:
            return None
        return systematic_points_f64(self.num_inputs, self.num_workers, self.kind)[1]

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """At least ``threshold`` responders; a systematic code: also every
        query's own worker (:meth:`decodable_queries` for all K)."""
        if not (self.systematic and self._copies_decode):
            return super().may_decode(mask)
        return self.decodable_queries(mask).all(axis=-1)

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """All K together (at least D responders; 1 for the graceful decoder);
        a systematic code's query k also where its own worker answered (not the
        robust decoder's, which decodes none below D)."""
        if not (self.systematic and self._copies_decode):
            return super().decodable_queries(mask)
        whole = np.asarray(mask, bool).sum(axis=-1) >= self._fit_threshold
        return decodable_with_copies(mask, self.systematic_workers, whole)

    @property
    def encoder_key(self) -> tuple:
        """("lagrange", K, M, kind) (and "systematic" for a systematic code): every
        Lagrange code on these points encodes alike, whatever its degree and
        decoder."""
        key = ("lagrange", self.num_inputs, self.num_workers, self.kind)
        return key + (("systematic",) if self.systematic else ())

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M] (Chebyshev, of the code's kind; a systematic code's
        with the data points among them)."""
        if self.systematic:
            a, _ = systematic_points_f64(self.num_inputs, self.num_workers, self.kind)
            return jnp.asarray(a, dtype=dtype)
        return points(self.num_workers, self.kind, dtype)

    def _device_alpha(self, dtype: Any) -> jax.Array:
        """:meth:`alpha` made once per dtype, outside any trace (an argument)."""
        if self.systematic:
            return _device_systematic(
                self.num_inputs, self.num_workers, self.kind, jnp.dtype(dtype)
            )
        return device_points(self.num_workers, self.kind, dtype)

    def beta(self, dtype: Any = jnp.float32) -> jax.Array:
        """Data points [K] (first-kind Chebyshev)."""
        return points(self.num_inputs, 1, dtype)

    # The hooks below run inside the code's jitted programs, after its methods
    # checked the call's arguments (and __post_init__ the code's points): they call
    # the kernels' unchecked entries, so nothing is checked twice.
    def _encode(self, x):
        acc = acc_of(x)
        return encode_with_matrix(x, self._encoding_matrix(acc), acc)

    def _encoding_matrix(self, acc) -> np.ndarray:
        """The M x K encoding matrix in ``acc``, made once per dtype for the codes
        of this :attr:`encoder_key` (a constant of the encode program)."""
        k, m = self.num_inputs, self.num_workers
        return _encoding_matrix(k, m, self.kind, self.systematic, jnp.dtype(acc))

    def _chebyls_matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        r = chebyls_decoding_matrix_unchecked(
            mask, self.alpha(acc), self.beta(acc), self.num_coeffs, acc
        )
        if not self.systematic:
            return r.value
        return systematic_matrix(
            r.value, r.ok, mask, *self._sources(), rescue=self._copies_decode
        )

    def _sources(self):
        """(workers [K], parts [K], 1): where each query's own answer is."""
        k = self.num_inputs
        return np.asarray(self.systematic_workers), np.zeros(k, int), 1

    def _copies(self, r, y, mask, **kw):
        """The fit's result ``r`` with each query whose own worker answered
        replaced by that answer (a systematic code; ``r`` otherwise)."""
        if not self.systematic:
            return r
        return copy_systematic(
            r, y, mask, *self._sources(), r.value.dtype,
            rescue=self._copies_decode, **kw,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ChebyLSCode(LagrangeCode):
    """ChebyLS: least squares in the Chebyshev basis over every finite response
    (:func:`chebyls_decode`)."""

    @property
    def name(self) -> str:
        return "chebyls"

    def _decode(self, y, mask):
        acc = acc_of(y)
        r = chebyls_decode_unchecked(
            y, mask, self.alpha(acc), self.beta(acc), self.num_coeffs, acc
        )
        return self._copies(r, y, mask)

    def _decode_batched(self, y, masks, shared_y):
        acc = acc_of(y)
        r = chebyls_decode_batched_unchecked(
            y, masks, self.alpha(acc), self.beta(acc), self.num_coeffs, acc, shared_y
        )
        if not self.systematic:
            return r
        return copy_systematic_batched(
            r, y, masks, shared_y, *self._sources(), acc, rescue=True
        )

    def _matrix(self, mask, dtype):
        return self._chebyls_matrix(mask, dtype)


@dataclasses.dataclass(frozen=True)
class ThresholdCode(LagrangeCode):
    """The classical threshold decoder: the square system of the first D
    responders in arrival order (:func:`threshold_decode`); without an order, the
    D responders spread most evenly (:func:`spread_order`)."""

    answer_fields = ("y", "mask", "order")

    @property
    def name(self) -> str:
        return "threshold"

    def decode(
        self,
        y: ArrayLike,
        mask: ArrayLike,
        *,
        order: ArrayLike | None = None,
        **unknown: Any,
    ) -> DecodeResult:
        """Decode one straggler pattern from the first D responders of ``order``.

        Args:
            y: [M, ...] worker responses (NaN/Inf rows count as missing).
            mask: bool [M] responders.
            order: int [L] (L <= M) worker indices in arrival order; None takes
                the D responders spread most evenly (:func:`spread_order`).

        Returns:
            DecodeResult with ``value`` [K, ...] in the accumulation dtype.

        Raises:
            ValueError: y, mask or order of the wrong shape.
            TypeError: y not floating, mask not boolean, order not integer; a
                keyword it does not take (``noise_sd``: robust codes only).
        """
        if unknown:
            refuse_keywords(self, "decode", unknown)
        fname = f"{type(self).__name__}.decode"
        y, mask = check_answers(self, fname, y, mask)
        order = self._check_order(fname, order, ())
        return self._decode_one(y, mask, order=order)

    def decode_batched(
        self,
        y: ArrayLike,
        masks: ArrayLike,
        *,
        order: ArrayLike | None = None,
        shared_y: bool = False,
        **unknown: Any,
    ) -> DecodeResult:
        """:meth:`Code.decode_batched` with arrival orders ``order`` int [B, M]."""
        if unknown:
            refuse_keywords(self, "decode_batched", unknown)
        fname = f"{type(self).__name__}.decode_batched"
        y, masks, _ = check_answers_batched(self, fname, y, masks, shared_y)
        order = self._check_order(fname, order, (masks.shape[0],))
        return self._decode_many(y, masks, shared_y, order=order)

    def decode_answers(self, answers: Answers) -> DecodeResult:
        """Decodes ``answers.y``, ``answers.mask`` in ``answers.order`` (a
        ``noise_sd`` is refused, as by :meth:`Code.decode_answers`)."""
        check_answer_fields(self, "decode_answers", answers)
        return self.decode(answers.y, answers.mask, order=answers.order)

    def _check_order(self, fname, order, batch):
        if order is None:
            return None
        order = jnp.asarray(order)
        m = self.num_workers
        if not jnp.issubdtype(order.dtype, jnp.integer):
            raise TypeError(
                f"{fname}: order must be an integer array of worker indices, got "
                f"dtype {order.dtype}"
            )
        rank_ok = order.ndim == len(batch) + 1 and tuple(order.shape[:-1]) == batch
        if not rank_ok or (batch and order.shape[-1] != m) or order.shape[-1] > m:
            want = f"[B, M] = [{batch[0]}, {m}]" if batch else f"[L] with L <= M={m}"
            raise ValueError(
                f"{fname}: order must have shape {want} (worker indices in arrival "
                f"order), got {tuple(order.shape)}"
            )
        return order

    def _batch_axes(self, shared_y):
        return {"order": 0}  # one order per mask, shared payload or not

    def _decode(self, y, mask, order=None):
        acc = acc_of(y)
        if order is None:
            order = spread_order_unchecked(mask, self.num_coeffs)
        r = threshold_decode_unchecked(
            y,
            mask,
            self.alpha(acc),
            self.beta(acc),
            order.astype(jnp.int32),
            self.num_coeffs,
            acc,
        )
        return self._copies(r, y, mask)


@dataclasses.dataclass(frozen=True)
class GracefulCode(LagrangeCode):
    """ChebyLS where its predicted error is small, the smoothness-regularised fit
    elsewhere (:func:`graceful_decode`).

    Attributes:
        worker_dtype: the dtype the workers compute in (its rounding sets the
            noise level), when the answers arrive widened; None: the answers'.
    """

    worker_dtype: str | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.worker_dtype is not None:
            check_worker_dtype(type(self).__name__, self.worker_dtype)

    @property
    def name(self) -> str:
        return "graceful"

    @property
    def _fit_threshold(self) -> int:
        return 1

    @property
    def threshold(self) -> int:
        """1: the smooth fallback decodes (``ok``, with a larger predicted error)
        from any number of answers."""
        return 1

    def _decode(self, y, mask):
        acc = acc_of(y)
        wdt = jnp.dtype(y.dtype if self.worker_dtype is None else self.worker_dtype)
        r = graceful_decode_unchecked(
            y, mask, self.alpha(acc), self.beta(acc), self.num_coeffs, acc, wdt
        )
        return self._copies(r, y, mask)

    def _matrix(self, mask, dtype):
        # the matrix of its ChebyLS branch (its smooth branch depends on y)
        return self._chebyls_matrix(mask, dtype)


@dataclasses.dataclass(frozen=True)
class RobustCode(LagrangeCode):
    """ChebyLS that locates and excludes up to A corrupted answers
    (:func:`robust_decode`); ``decode`` returns a :class:`RobustDecodeResult`.

    Attributes:
        worker_dtype: the workers' dtype, for the noise level (None: y's).
        max_corrupted: A, the most corrupted answers corrected.
        false_alarm: the probability of flagging a clean request.
        noise_scale: gamma (None: :func:`robust_decode`'s default).
    """

    worker_dtype: str | None = None
    max_corrupted: int = 0
    false_alarm: float = 0.01
    noise_scale: float | None = None

    answer_fields = ("y", "mask", "noise_sd")
    _copies_decode = False  # copies only answers the fit checked (not suspects)

    def __post_init__(self):
        super().__post_init__()
        cls = type(self).__name__
        if self.worker_dtype is not None:
            check_worker_dtype(cls, self.worker_dtype)
        _robust_settings(cls, self.max_corrupted, self.false_alarm, self.noise_scale)
        _check_redundancy(cls, self.num_coeffs, self.num_workers, self.max_corrupted)

    @property
    def name(self) -> str:
        return "robust"

    @property
    def correction_threshold(self) -> int:
        """D + 2A: from this many responses the decoder corrects A corrupted ones."""
        return self.threshold + 2 * self.max_corrupted

    def decode(
        self,
        y: ArrayLike,
        mask: ArrayLike,
        *,
        noise_sd: ArrayLike | None = None,
        **unknown: Any,
    ) -> RobustDecodeResult:
        """Decode one straggler pattern, excluding the answers located as corrupted.

        Args:
            y: [M, ...] worker responses (NaN/Inf rows count as missing).
            mask: bool [M] responders.
            noise_sd: float [M], the standard deviation of each answer's error
                (its rounding, e.g. from a first-order rounding analysis of the
                worker at its coded input); replaces the code's one
                ``noise_scale`` (see :func:`robust_decode`). A worker whose level
                is not finite and positive counts as missing.

        Returns:
            RobustDecodeResult: the :class:`DecodeResult` fields, then
            ``suspects`` bool [M] (the workers excluded as corrupted).

        Raises:
            ValueError: y, mask or noise_sd of the wrong shape.
            TypeError: y or noise_sd not floating, mask not boolean.
        """
        if unknown:
            refuse_keywords(self, "decode", unknown)
        fname = f"{type(self).__name__}.decode"
        y, mask = check_answers(self, fname, y, mask)
        noise_sd = self._check_noise(fname, noise_sd, (self.num_workers,), "[M]")
        return self._decode_one(y, mask, noise_sd=noise_sd)

    def decode_batched(
        self,
        y: ArrayLike,
        masks: ArrayLike,
        *,
        shared_y: bool = False,
        noise_sd: ArrayLike | None = None,
        **unknown: Any,
    ) -> RobustDecodeResult:
        """:meth:`Code.decode_batched` with per-answer noise levels ``noise_sd``
        shaped like y's leading axes: [B, M], or [M] when ``shared_y``."""
        if unknown:
            refuse_keywords(self, "decode_batched", unknown)
        fname = f"{type(self).__name__}.decode_batched"
        y, masks, lead = check_answers_batched(self, fname, y, masks, shared_y)
        want = "[M] (shared_y)" if shared_y else "[B, M]"
        noise_sd = self._check_noise(fname, noise_sd, lead, want)
        return self._decode_many(y, masks, shared_y, noise_sd=noise_sd)

    def decode_answers(self, answers: Answers) -> RobustDecodeResult:
        """Decodes ``answers.y``, ``answers.mask`` at the levels ``answers.noise_sd``
        (the code's ``noise_scale`` when None)."""
        return self.decode(answers.y, answers.mask, noise_sd=answers.noise_sd)

    def _check_noise(self, fname, noise_sd, shape, want):
        if noise_sd is None:
            return None
        noise_sd = check_floating(fname, "noise_sd", noise_sd)
        if noise_sd.shape != tuple(shape):
            raise ValueError(
                f"{fname}: noise_sd must have shape {want} = {list(shape)} (one "
                f"standard deviation per answer), got {tuple(noise_sd.shape)}"
            )
        return noise_sd

    def _decode_one(self, y, mask, noise_sd=None):
        # the points as arguments, not constants folded into the program: the
        # program is robust_decode's own, so code.decode equals it (with the
        # code's points) bit for bit, without its Python checks
        acc = acc_of(y)
        a = self._device_alpha(acc)
        b = device_points(self.num_inputs, 1, acc)
        with errors_named(f"{type(self).__name__}.decode"):
            return _decode_points_jit(self, y, mask, noise_sd, a, b)

    def _decode(self, y, mask, noise_sd=None, points=None):
        acc = acc_of(y)
        a, b = (self.alpha(acc), self.beta(acc)) if points is None else points
        wdt = jnp.dtype(y.dtype if self.worker_dtype is None else self.worker_dtype)
        r = robust_decode_unchecked(
            y,
            mask,
            a,
            b,
            noise_sd,
            num_coeffs=self.num_coeffs,
            acc=acc,
            wdt=wdt,
            max_corrupted=self.max_corrupted,
            false_alarm=self.false_alarm,
            noise_scale=self.noise_scale,
        )
        # a suspect's answer is never copied, and the copies never decode alone
        return self._copies(r, y, mask, exclude=r.suspects)

    def _matrix(self, mask, dtype):
        # ChebyLS's (its exclusions and row weights depend on y)
        return self._chebyls_matrix(mask, dtype)


@functools.partial(jax.jit, static_argnums=0)
def _decode_points_jit(code, y, mask, noise_sd, alpha, beta):
    return code._decode(y, mask, noise_sd=noise_sd, points=(alpha, beta))


@functools.lru_cache(maxsize=64)
def _encoding_matrix(k: int, m: int, kind: int, systematic: bool, acc) -> np.ndarray:
    """The encoding matrix of the Lagrange codes on these points in ``acc`` (its
    points rounded to ``acc`` first, as the decoders see them)."""
    alpha = systematic_points_f64(k, m, kind)[0] if systematic else points_f64(m, kind)
    beta = points_f64(k, 1)
    return encoding_matrix_constant(beta.astype(acc), alpha.astype(acc), acc)


@functools.lru_cache(maxsize=64)
def _device_systematic(k: int, m: int, kind: int, dtype: Any) -> jax.Array:
    """A systematic code's worker points in ``dtype``, made once outside any trace
    (as ``device_points``)."""
    with jax.ensure_compile_time_eval():
        return jnp.asarray(systematic_points_f64(k, m, kind)[0], dtype=dtype)


def _systematic_points(fname: str, k: int, m: int, kind: int) -> None:
    """A systematic code's points exist (raises a ValueError naming ``fname``)."""
    try:
        systematic_points_f64(k, m, kind)
    except ValueError as e:
        raise ValueError(f"{fname}: systematic=True: {e}") from None


_CLASSES = {
    "chebyls": ChebyLSCode,
    "threshold": ThresholdCode,
    "graceful": GracefulCode,
    "robust": RobustCode,
}
# the decoder-specific arguments of lagrange_code, and the decoders that take them
_TAKEN_BY = {
    "worker_dtype": ("graceful", "robust"),
    "max_corrupted": ("robust",),
    "false_alarm": ("robust",),
    "noise_scale": ("robust",),
}


def lagrange_code(
    *,
    num_inputs: int,
    num_workers: int,
    degree: int,
    decoder: str = "chebyls",
    kind: int = 1,
    worker_dtype: Any = None,
    max_corrupted: int | None = None,
    false_alarm: float | None = None,
    noise_scale: float | None = None,
    systematic: bool = False,
) -> LagrangeCode:
    """A Lagrange code: exact for workers that compute a polynomial of degree d.

    Inputs sit at first-kind Chebyshev data points beta [K], workers at Chebyshev
    points alpha [M] of kind ``kind``; worker i is sent u(alpha_i) where u is the
    degree K - 1 polynomial with u(beta_k) = X_k. The decoder picks the class:

    - ``"chebyls"`` (:class:`ChebyLSCode`): every finite response, least squares
      in the Chebyshev basis (:func:`chebyls_decode`).
    - ``"threshold"`` (:class:`ThresholdCode`): the square system of the first D
      responders in arrival order (``decode(..., order=)``,
      :func:`threshold_decode`; without an order the D responders spread most
      evenly, :func:`spread_order`).
    - ``"graceful"`` (:class:`GracefulCode`): ChebyLS where its predicted error is
      small and the smoothness-regularised fit elsewhere (:func:`graceful_decode`).
    - ``"robust"`` (:class:`RobustCode`): ChebyLS that locates and excludes up to
      A = ``max_corrupted`` corrupted answers (:func:`robust_decode`) and returns a
      :class:`RobustDecodeResult` whose ``suspects`` [M] are the excluded workers.

    The robust code's ``threshold`` stays D: from N >= D answers it decodes, but it
    can *correct* A corrupted answers only from N >= D + 2A
    (``correction_threshold``). Below that it corrects floor((N - D) / 2) of them;
    with D + 1 <= N answers a corruption it cannot correct is still seen (status
    ``UNDECIDABLE``, ``ok`` False), while at N = D every answer fits exactly and a
    corrupted one goes unnoticed. Its ``decoding_matrix`` is ChebyLS's (the robust
    decode is not linear in y). Its noise level is the workers' rounding
    (``worker_dtype``) plus the fit's own rounding, so workers coarser than the
    decode (bf16 workers, float32 decoding) are checked at their own level, while
    answers computed in the accumulation dtype itself are checked at the fit's
    rounding (about 1e-5 relative in float32 at D = 22: decode in float64 to see
    smaller corruptions). The level is gamma u_w times each answer's size
    (``noise_scale`` gamma, by default the rounding of a homogeneous degree-d
    worker, :func:`robust_decode`); a worker whose arithmetic cancels (large
    intermediate values, small answers) needs the larger gamma its own rounding
    analysis gives, or clean requests get flagged. One gamma must cover the worst
    answer; a per-answer level, each answer's rounding standard deviation from
    the worker's computation at its coded input, is sharper:
    ``code.decode(y, mask, noise_sd=sd)`` (and ``Server(..., noise_fn=)`` in
    ``codedjax.serving``) replaces gamma with it.

    **Systematic codes** (``systematic=True``): the worker points are the Chebyshev
    points of ``kind`` with the K nearest to the data points moved onto them
    (``systematic_workers[k]`` sits at beta_k and is sent query k itself; at
    K = 8, M = 40 the first-kind points contain the data points already, and the
    points are those of ``systematic=False``). Why these points: they move K of
    the M points by at most half a spacing, so the rest keep the Chebyshev spacing
    that conditions the least-squares fit on any subset; the data points with
    the Chebyshev points of the other M - K repeat points at M = 2K and condition
    worse at M = 40, degree 3 (``codedjax._chebyshev.systematic_points_f64``).
    What they cost against today's points, measured (``benchmarks/systematic.py``,
    ``docs/decoding.md`` section 4): at K = 8, M = 12 the median cond at N = D is
    18.6 against 11.9, and 1.41 against 1 at N = M; nothing at M = 40. The decoder
    fits every answer as before (least squares over every responder, the first
    D for the threshold decoder) and then returns, for each query whose own
    worker answered, that answer as it is: the fit interpolates it only
    approximately, while the answer is the query's value up to the worker's own
    rounding (an uncoded worker's accuracy). The fit serves the other queries.
    ``error`` is then the larger of the copies' predicted rounding and the
    fit's; ``decoding_matrix`` has unit rows for the copied queries. K
    systematic answers decode on their own, so ``threshold`` is min(D, K) and
    ``decodable_queries`` gives query k from its own worker below D. The robust
    decoder copies only answers its fit checked (never a suspect's) and never
    decodes below D (its ``threshold`` stays D).

    Args:
        num_inputs: K >= 1. num_workers: M >= D (M >= D + 2A for the robust
            decoder). degree: d >= 0.
        decoder: "chebyls", "threshold", "graceful" or "robust".
        kind: 1 or 2, the kind of the Chebyshev worker points (second kind needs
            M >= 2).
        worker_dtype: graceful and robust decoders only: the dtype the workers
            compute in, for the noise level when the answers arrive widened
            (default: the answers' dtype).
        max_corrupted: robust decoder only (required): A >= 0, the most corrupted
            answers it corrects (A = 0 only detects).
        false_alarm: robust decoder only: the probability of flagging a clean
            request, in (0, 1) (default 0.01).
        noise_scale: robust decoder only: gamma > 0, one answer's rounding error
            in units of u_w times its size (default: ``robust_decode``'s, from K
            and D).
        systematic: worker points that contain the data points (above); needs
            M >= K (M >= K + 1 with ``kind=2``).

    Returns:
        The decoder's :class:`LagrangeCode` subclass, with ``threshold`` D = d (K -
        1) + 1 (1 for the graceful decoder; min(D, K) for a systematic code but a
        robust one) and ``correction_threshold`` D + 2A (the threshold for the
        other decoders).

    Raises:
        ValueError: unknown decoder or kind, M < D, a decoder-specific argument
            with a decoder that does not use it, the robust decoder without
            max_corrupted, A < 0, M < D + 2A, false_alarm outside (0, 1),
            noise_scale not finite and > 0, systematic points that do not exist
            (M < K).
        TypeError: a worker_dtype that is not a floating dtype, a max_corrupted
            that is not an int, a systematic that is not a bool.

    Examples:
        >>> import jax, jax.numpy as jnp, codedjax as cj
        >>> code = cj.lagrange_code(num_inputs=2, num_workers=6, degree=2)
        >>> x = jnp.array([[1.0], [2.0]])
        >>> y = code.encode(x) ** 2
        >>> mask = jnp.array([True, False, True, True, False, True])
        >>> r = code.decode(y, mask)
        >>> type(code).__name__, code.threshold, bool(r.ok)
        ('ChebyLSCode', 3, True)
        >>> jnp.round(r.value[:, 0], 4).tolist()
        [1.0, 4.0]
        >>> robust = cj.lagrange_code(num_inputs=2, num_workers=8, degree=2,
        ...                           decoder="robust", max_corrupted=1)
        >>> y = (robust.encode(x) ** 2).astype(jnp.bfloat16)  # bf16 workers
        >>> r = robust.decode(y.at[6].add(1.0), jnp.ones(8, bool))  # 6 corrupted
        >>> robust.correction_threshold, bool(r.ok), jnp.flatnonzero(r.suspects)
        (5, True, Array([6], dtype=int32))
    """
    fname = "lagrange_code"
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    d = check_int(fname, "degree", degree, minimum=0)
    if decoder not in _CLASSES:
        raise ValueError(
            f"{fname}: decoder must be 'chebyls', 'threshold', 'graceful' or "
            f"'robust', got {decoder!r}"
        )
    given = dict(
        worker_dtype=worker_dtype,
        max_corrupted=max_corrupted,
        false_alarm=false_alarm,
        noise_scale=noise_scale,
    )
    for name, v in given.items():
        if v is not None and decoder not in _TAKEN_BY[name]:
            users = " or ".join(f"decoder={u!r}" for u in _TAKEN_BY[name])
            raise ValueError(
                f"{fname}: {name} applies only to {users}, got {name}={v!r} with "
                f"decoder={decoder!r}"
            )
    if isinstance(kind, bool) or kind not in (1, 2):
        raise ValueError(
            f"{fname}: kind must be 1 or 2 (the kind of the Chebyshev worker "
            f"points), got {kind!r}"
        )
    if kind == 2 and m < 2:
        raise ValueError(f"{fname}: second-kind points (kind=2) need M >= 2, got {m}")
    settings: dict[str, Any] = {}
    if worker_dtype is not None:
        settings["worker_dtype"] = check_worker_dtype(fname, worker_dtype).name
    if decoder == "robust":
        settings.update(
            _robust_settings(fname, max_corrupted, false_alarm, noise_scale)
        )
    num_coeffs = recovery_threshold(k, d)
    _check_redundancy(fname, num_coeffs, m, settings.get("max_corrupted", 0))
    if not isinstance(systematic, bool):
        raise TypeError(
            f"{fname}: systematic must be True or False, got {systematic!r}"
        )
    if systematic:
        _systematic_points(fname, k, m, int(kind))
    return _CLASSES[decoder](
        k, m, degree=d, kind=int(kind), systematic=systematic, **settings
    )


def _check_redundancy(fname, num_coeffs, m, a):
    """M >= D (every decoder) and M >= D + 2A (the robust decoder's A)."""
    if num_coeffs > m:
        raise ValueError(
            f"{fname}: num_workers M={m} is below the recovery threshold "
            f"D = d (K - 1) + 1 = {num_coeffs}"
        )
    if num_coeffs + 2 * a > m:
        raise ValueError(
            f"{fname}: correcting max_corrupted A={a} corrupted answers needs "
            f"D + 2A = {num_coeffs + 2 * a} answers, more than num_workers "
            f"M={m} (D = {num_coeffs})"
        )


def _robust_settings(fname, max_corrupted, false_alarm, noise_scale):
    """The robust code's {max_corrupted, false_alarm, noise_scale}, checked."""
    if max_corrupted is None:
        raise ValueError(
            f"{fname}: decoder='robust' needs max_corrupted (A >= 0, the most "
            f"corrupted answers to correct), got None"
        )
    a = check_int(fname, "max_corrupted", max_corrupted, minimum=0)
    if a > MAX_CORRUPTED:
        raise ValueError(
            f"{fname}: max_corrupted (A) must be at most {MAX_CORRUPTED} (the robust "
            f"search compiles a program that grows as A^4), got {a}"
        )
    fa = 0.01 if false_alarm is None else false_alarm
    try:
        fa = float(fa)
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: false_alarm must be a number in (0, 1), got {false_alarm!r}"
        ) from None
    if not 0.0 < fa < 1.0:
        raise ValueError(
            f"{fname}: false_alarm must lie in (0, 1), got {false_alarm!r}"
        )
    gamma = None
    if noise_scale is not None:
        try:
            gamma = float(noise_scale)
        except (TypeError, ValueError):
            raise TypeError(
                f"{fname}: noise_scale must be a number > 0, got {noise_scale!r}"
            ) from None
        if not (np.isfinite(gamma) and gamma > 0):
            raise ValueError(
                f"{fname}: noise_scale must be finite and > 0, got {noise_scale!r}"
            )
    return dict(max_corrupted=a, false_alarm=fa, noise_scale=gamma)
