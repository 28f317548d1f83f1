"""Lagrange codes: exact for workers that compute a polynomial of degree d.

One class per decoder, all subclasses of :class:`LagrangeCode` (which holds K, M, the
degree and the kind of the worker points): :class:`ChebyLSCode`,
:class:`ThresholdCode`, :class:`GracefulCode` and :class:`RobustCode`. The settings of
a decoder live on the class that uses them; :func:`lagrange_code` is the factory.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._code import (
    Answers,
    Code,
    acc_of,
    check_answer_fields,
    check_code_points,
    device_points,
    points,
    refuse_keywords,
)
from ._dtypes import (
    accumulation_dtype,
    check_floating,
    check_int,
    check_worker_dtype,
    errors_named,
)
from ._graceful import graceful_decode
from ._polynomial import (
    chebyls_decode,
    chebyls_decode_batched,
    chebyls_decoding_matrix,
    lagrange_encode,
    recovery_threshold,
    spread_order,
    threshold_decode,
)
from ._result import DecodeResult
from ._robust import MAX_CORRUPTED, RobustDecodeResult, robust_decode


@dataclasses.dataclass(frozen=True)
class LagrangeCode(Code):
    """Lagrange coded computing with a Chebyshev-basis decoder (see
    :func:`lagrange_code`): the base of the four decoder classes.

    Attributes:
        degree: d, the degree of the worker function.
        kind: 1 or 2, the kind of the Chebyshev worker points (the data points
            are of the first kind).
    """

    degree: int = 1
    kind: int = 1

    answers_chunk = 32  # QR, SVD and LU decoders (see Code.answers_chunk)

    def __post_init__(self):
        # the points are fixed by the settings: checked here, once per code
        cls = type(self).__name__
        if self.kind in (1, 2):
            check_code_points(cls, "alpha", self.num_workers, self.kind)
        check_code_points(cls, "beta", self.num_inputs, 1)

    @property
    def num_coeffs(self) -> int:
        """D = d (K - 1) + 1."""
        return recovery_threshold(self.num_inputs, self.degree)

    @property
    def threshold(self) -> int:
        """D = d (K - 1) + 1."""
        return self.num_coeffs

    @property
    def exact(self) -> bool:
        return True

    @property
    def encoder_key(self) -> tuple:
        """("lagrange", K, M, kind): every Lagrange code on these points encodes
        alike, whatever its degree and decoder."""
        return ("lagrange", self.num_inputs, self.num_workers, self.kind)

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M] (Chebyshev, of the code's kind)."""
        return points(self.num_workers, self.kind, dtype)

    def beta(self, dtype: Any = jnp.float32) -> jax.Array:
        """Data points [K] (first-kind Chebyshev)."""
        return points(self.num_inputs, 1, dtype)

    def _encode(self, x):
        acc = acc_of(x)
        return lagrange_encode(x, self.beta(acc), self.alpha(acc))

    def _chebyls_matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return chebyls_decoding_matrix(
            mask,
            self.alpha(acc),
            self.beta(acc),
            num_coeffs=self.num_coeffs,
            accum_dtype=acc,
        ).value


@dataclasses.dataclass(frozen=True)
class ChebyLSCode(LagrangeCode):
    """ChebyLS: least squares in the Chebyshev basis over every finite response
    (:func:`chebyls_decode`)."""

    @property
    def name(self) -> str:
        return "chebyls"

    def _decode(self, y, mask):
        acc = acc_of(y)
        return chebyls_decode(
            y, mask, self.alpha(acc), self.beta(acc), num_coeffs=self.num_coeffs
        )

    def _decode_batched(self, y, masks, shared_y):
        acc = acc_of(y)
        return chebyls_decode_batched(
            y,
            masks,
            self.alpha(acc),
            self.beta(acc),
            num_coeffs=self.num_coeffs,
            shared_y=shared_y,
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
        y, mask = self._check(fname, y, mask)
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
        y, masks, _ = self._check_batched(fname, y, masks, shared_y)
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
            order = spread_order(mask, num_coeffs=self.num_coeffs)
        return threshold_decode(
            y,
            mask,
            self.alpha(acc),
            self.beta(acc),
            num_coeffs=self.num_coeffs,
            order=order.astype(jnp.int32),
        )


@dataclasses.dataclass(frozen=True)
class GracefulCode(LagrangeCode):
    """ChebyLS where its predicted error is small, the smoothness-regularised fit
    elsewhere (:func:`graceful_decode`).

    Attributes:
        worker_dtype: the dtype the workers compute in (its rounding sets the
            noise level), when the answers arrive widened; None: the answers'.
    """

    worker_dtype: str | None = None

    @property
    def name(self) -> str:
        return "graceful"

    @property
    def threshold(self) -> int:
        """1: the smooth fallback decodes (``ok``, with a larger predicted error)
        from any number of answers."""
        return 1

    def _decode(self, y, mask):
        acc = acc_of(y)
        return graceful_decode(
            y,
            mask,
            self.alpha(acc),
            self.beta(acc),
            num_coeffs=self.num_coeffs,
            worker_dtype=self.worker_dtype,
        )

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
        y, mask = self._check(fname, y, mask)
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
        y, masks, lead = self._check_batched(fname, y, masks, shared_y)
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
        a = device_points(self.num_workers, self.kind, acc)
        b = device_points(self.num_inputs, 1, acc)
        with errors_named(f"{type(self).__name__}.decode"):
            return _decode_points_jit(self, y, mask, noise_sd, a, b)

    def _decode(self, y, mask, noise_sd=None, points=None):
        acc = acc_of(y)
        a, b = (self.alpha(acc), self.beta(acc)) if points is None else points
        return robust_decode(
            y,
            mask,
            a,
            b,
            num_coeffs=self.num_coeffs,
            max_corrupted=self.max_corrupted,
            worker_dtype=self.worker_dtype,
            false_alarm=self.false_alarm,
            noise_scale=self.noise_scale,
            noise_sd=noise_sd,
        )

    def _matrix(self, mask, dtype):
        # ChebyLS's (its exclusions and row weights depend on y)
        return self._chebyls_matrix(mask, dtype)


@functools.partial(jax.jit, static_argnums=0)
def _decode_points_jit(code, y, mask, noise_sd, alpha, beta):
    return code._decode(y, mask, noise_sd=noise_sd, points=(alpha, beta))


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

    Returns:
        The decoder's :class:`LagrangeCode` subclass, with ``threshold`` D = d (K -
        1) + 1 (1 for the graceful decoder) and ``correction_threshold`` D + 2A (the
        threshold for the other decoders).

    Raises:
        ValueError: unknown decoder or kind, M < D, a decoder-specific argument
            with a decoder that does not use it, the robust decoder without
            max_corrupted, A < 0, M < D + 2A, false_alarm outside (0, 1),
            noise_scale not finite and > 0.
        TypeError: a worker_dtype that is not a floating dtype, a max_corrupted
            that is not an int.

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
    code = _CLASSES[decoder](k, m, degree=d, kind=int(kind), **settings)
    if code.num_coeffs > m:
        raise ValueError(
            f"{fname}: num_workers M={m} is below the recovery threshold "
            f"D = d (K - 1) + 1 = {code.num_coeffs}"
        )
    if code.correction_threshold > m:
        a = settings["max_corrupted"]
        raise ValueError(
            f"{fname}: correcting max_corrupted A={a} corrupted answers needs "
            f"D + 2A = {code.correction_threshold} answers, more than num_workers "
            f"M={m} (D = {code.num_coeffs})"
        )
    return code


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
