"""Code objects: one interface for every coding scheme, including the baselines.

A :class:`Code` bundles what a scheme needs (its points, degree, decoder and settings)
into an immutable, hashable object with four operations: ``encode`` (what each worker
is sent), ``decode`` (one straggler mask), ``decode_batched`` (many masks) and
``decoding_matrix``. Because a code is hashable it is a valid static argument of
``jax.jit``, and its methods are jitted once per code: one compiled program serves
every mask. The layering (points -> decoders -> codes -> serving -> applications) is
described in ``docs/design.md``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._berrut import berrut_decode, berrut_decoding_matrix, berrut_encode
from ._dtypes import (
    accumulation_dtype,
    check_floating,
    check_int,
    check_mask,
    check_worker_dtype,
)
from ._graceful import graceful_decode
from ._nercc import nercc_decode, nercc_decoding_matrix, nercc_encode
from ._polynomial import (
    chebyls_decode,
    chebyls_decode_batched,
    chebyls_decoding_matrix,
    lagrange_encode,
    recovery_threshold,
    spread_order,
    threshold_decode,
)
from ._repapprox import repapprox_decode, repapprox_encode, repapprox_layout
from ._result import DecodeResult, Status, finish
from ._robust import MAX_CORRUPTED, RobustDecodeResult, chebyls_decode_robust
from ._threads import serialised_call

_POINT_KINDS = {"first": 1, "second": 2}


@functools.lru_cache(maxsize=256)
def _points_np(n: int, kind: int) -> np.ndarray:
    """Chebyshev points in float64 numpy, as ``chebyshev_points`` computes them."""
    den = 2.0 * n if kind == 1 else 2.0 * (n - 1)
    x = np.sin(np.pi * (n - 1 - 2 * np.arange(n)) / den)
    x.setflags(write=False)
    return x


def _pts(n: int, kind: int, dtype: Any) -> jax.Array:
    return jnp.asarray(_points_np(n, kind), dtype=dtype)


@functools.lru_cache(maxsize=256)
def _pts_device(n: int, kind: int, dtype: Any) -> jax.Array:
    """``_pts`` once per (n, kind, dtype): the robust decode's point arguments."""
    return _pts(n, kind, dtype)


def _acc(y: jax.Array) -> jnp.dtype:
    return accumulation_dtype(y.dtype)


@dataclasses.dataclass(frozen=True)
class Code:
    """Base class of every code: K inputs coded onto M workers.

    Subclasses are frozen dataclasses of static settings (hashable, so a code can be a
    static argument of ``jax.jit``). Arrays (points, layouts) are derived from the
    settings on demand, in the dtype of the data.

    Attributes:
        num_inputs: K, the number of inputs coded together.
        num_workers: M, the number of workers.
    """

    num_inputs: int
    num_workers: int

    # --- what every code states about itself -------------------------------------
    @property
    def name(self) -> str:
        """Short name of the scheme (for tables and reports)."""
        raise NotImplementedError

    @property
    def threshold(self) -> int:
        """The fewest responses from which ``decode`` can return ``ok``."""
        raise NotImplementedError

    @property
    def exact(self) -> bool:
        """True when decoding with every worker is exact on the code's function class
        (polynomials of the code's degree for Lagrange codes, any function for
        replication, uncoded and RepApprox)."""
        raise NotImplementedError

    @property
    def correction_threshold(self) -> int:
        """The fewest responses from which ``decode`` also corrects the corrupted
        answers it is built to correct: D + 2A for a robust Lagrange code, equal to
        ``threshold`` for every code that corrects none."""
        return self.threshold

    @property
    def uses_noise_sd(self) -> bool:
        """True when ``decode`` takes a per-answer noise level ``noise_sd`` (a robust
        Lagrange code); every other code raises when given one."""
        return False

    # --- the four operations -----------------------------------------------------
    def encode(self, x: ArrayLike) -> jax.Array:
        """What each worker is sent: x [K, ...] -> [M, ...]."""
        x = check_floating(f"{type(self).__name__}.encode", "x", x)
        if x.ndim < 1 or x.shape[0] != self.num_inputs:
            raise ValueError(
                f"{type(self).__name__}.encode: x must have shape [K, ...] = "
                f"[{self.num_inputs}, ...], got {tuple(x.shape)}"
            )
        return _encode_jit(self, x)

    def decode(
        self,
        y: ArrayLike,
        mask: ArrayLike,
        *,
        order: ArrayLike | None = None,
        noise_sd: ArrayLike | None = None,
    ) -> DecodeResult | RobustDecodeResult:
        """Decode one straggler pattern.

        Args:
            y: [M, ...] worker responses in any floating dtype (rows of workers that
                did not respond are ignored, NaN/Inf rows count as missing).
            mask: bool [M], True for the workers that responded.
            order: int [M], worker indices in arrival order (used by the threshold
                decoder, ignored by the others).
            noise_sd: float [M], the standard deviation of each answer's error (its
                rounding, e.g. from a first-order rounding analysis of the worker at
                its coded input); robust codes only (``uses_noise_sd``), where it
                replaces the code's one ``noise_scale`` (see
                :func:`chebyls_decode_robust`). A worker whose level is not finite
                and positive counts as missing.

        Returns:
            DecodeResult with ``value`` [K, ...] in the accumulation dtype; a robust
            code returns a :class:`RobustDecodeResult` (the same fields first, then
            ``suspects`` bool [M], the workers it excluded as corrupted).

        Raises:
            ValueError: y or mask not [M, ...] / [M]; noise_sd given to a code that
                does not use it, or not of shape [M].
            TypeError: y or noise_sd not floating, mask not boolean.
        """
        fname = f"{type(self).__name__}.decode"
        y, mask = self._check(fname, y, mask, batched=False)
        if order is not None:
            order = jnp.asarray(order)
        noise_sd = self._check_noise(fname, noise_sd, (self.num_workers,), "[M]")
        return self._decode_one(y, mask, order, noise_sd)

    def decode_batched(
        self,
        y: ArrayLike,
        masks: ArrayLike,
        *,
        order: ArrayLike | None = None,
        shared_y: bool = False,
        noise_sd: ArrayLike | None = None,
    ) -> DecodeResult | RobustDecodeResult:
        """Decode B straggler patterns at once.

        Args:
            y: [B, M, ...] one payload per mask, or [M, ...] shared by every mask when
                ``shared_y`` is True.
            masks: bool [B, M].
            order: int [B, M] arrival orders (threshold decoder only).
            shared_y: whether ``y`` is one payload for every mask (static).
            noise_sd: the answers' noise levels, shaped like y's leading axes:
                [B, M], or [M] when ``shared_y`` (robust codes only, as in
                :meth:`decode`).

        Returns:
            DecodeResult (RobustDecodeResult for a robust code) with a leading B
            axis on every field; equal to a loop of :meth:`decode` up to rounding.

        Raises:
            ValueError: shapes that disagree (y, masks, order, noise_sd); noise_sd
                given to a code that does not use it.
            TypeError: y or noise_sd not floating, masks not boolean.
        """
        fname = f"{type(self).__name__}.decode_batched"
        y = check_floating(fname, "y", y)
        masks = check_mask(fname, masks, self.num_workers, name="masks")
        if masks.ndim != 2:
            raise ValueError(
                f"{fname}: masks must have shape [B, M] = [B, {self.num_workers}], "
                f"got {tuple(masks.shape)}"
            )
        b = masks.shape[0]
        lead = (self.num_workers,) if shared_y else (b, self.num_workers)
        if y.shape[: len(lead)] != lead:
            want = "[M, ...]" if shared_y else "[B, M, ...]"
            raise ValueError(
                f"{fname}: y must have shape {want} = {list(lead) + ['...']} "
                f"(shared_y={shared_y}), got {tuple(y.shape)}"
            )
        if order is not None:
            order = jnp.asarray(order)
            if order.shape != (b, self.num_workers):
                raise ValueError(
                    f"{fname}: order must have shape [B, M] = [{b}, "
                    f"{self.num_workers}], got {tuple(order.shape)}"
                )
        noise_sd = self._check_noise(
            fname, noise_sd, lead, "[M] (shared_y)" if shared_y else "[B, M]"
        )
        # vmapped decoders run batched LAPACK (QR, Cholesky) on CPU: one such
        # program at a time in the process (see codedjax._threads)
        return serialised_call(
            _decode_batched_jit, self, y, masks, order, bool(shared_y), noise_sd
        )

    def decoding_matrix(
        self, mask: ArrayLike, *, dtype: Any = jnp.float32
    ) -> jax.Array:
        """The linear map from responses to outputs for one mask, [K, M].

        Zero columns for workers outside the mask; all zeros when the mask cannot
        be decoded. For every code but the graceful and robust ones the decode is
        linear in the responses: ``decode(y, mask).value == decoding_matrix(mask) @
        y`` up to rounding. The graceful decode is ChebyLS's (this matrix) where it
        keeps ChebyLS and a smoothing chosen from y elsewhere. The robust decode is
        not linear (which workers it excludes, and its row weights, depend on y):
        its matrix is ChebyLS's, and ``decode(y, mask).value`` equals
        ``decoding_matrix(mask & ~suspects) @ y`` up to the workers' rounding level.
        """
        mask = check_mask(
            f"{type(self).__name__}.decoding_matrix", mask, self.num_workers
        )
        return _matrix_jit(self, mask, jnp.dtype(dtype))

    # --- hooks for subclasses (traced) ----------------------------------------------
    def _check(self, fname, y, mask, *, batched):
        y = check_floating(fname, "y", y)
        mask = check_mask(fname, mask, self.num_workers)
        if y.ndim < 1 or y.shape[0] != self.num_workers:
            raise ValueError(
                f"{fname}: y must have shape [M, ...] = [{self.num_workers}, ...], "
                f"got {tuple(y.shape)}"
            )
        return y, mask

    def _check_noise(self, fname, noise_sd, shape, want):
        if noise_sd is None:
            return None
        if not self.uses_noise_sd:
            raise ValueError(
                f"{fname}: noise_sd applies only to a robust code "
                f"(lagrange_code(..., decoder='robust')), got noise_sd with the "
                f"{self.name!r} code"
            )
        noise_sd = check_floating(fname, "noise_sd", noise_sd)
        if noise_sd.shape != tuple(shape):
            raise ValueError(
                f"{fname}: noise_sd must have shape {want} = {list(shape)} (one "
                f"standard deviation per answer), got {tuple(noise_sd.shape)}"
            )
        return noise_sd

    def _decode_one(self, y, mask, order, noise_sd):
        """``decode`` after its checks: the code's jitted program."""
        return _decode_jit(self, y, mask, order, noise_sd)

    def _encode(self, x):
        raise NotImplementedError

    def _decode(self, y, mask, order):
        raise NotImplementedError

    def _decode_batched(self, y, masks, order, shared_y, noise_sd=None):
        if noise_sd is not None:  # a robust code: map the levels with the payloads

            def one(yy, mk, od, sd):
                return self._decode(yy, mk, od, noise_sd=sd)

            ax = None if shared_y else 0  # noise_sd is shaped like y's lead axes
            ax_od = None if order is None else 0
            return jax.vmap(one, in_axes=(ax, 0, ax_od, ax))(y, masks, order, noise_sd)
        if order is None:
            fn = jax.vmap(lambda yy, mk: self._decode(yy, mk, None))
        else:
            fn = jax.vmap(self._decode)
        if shared_y:
            if order is None:
                return jax.vmap(lambda mk: self._decode(y, mk, None))(masks)
            return jax.vmap(lambda mk, od: self._decode(y, mk, od))(masks, order)
        return fn(y, masks) if order is None else fn(y, masks, order)

    def _matrix(self, mask, dtype):
        # every code here decodes linearly: decode the identity payload
        eye = jnp.eye(self.num_workers, dtype=dtype)
        return self._decode(eye, mask, None).value


@functools.partial(jax.jit, static_argnums=0)
def _encode_jit(code, x):
    return code._encode(x)


@functools.partial(jax.jit, static_argnums=0)
def _decode_jit(code, y, mask, order, noise_sd=None):
    if noise_sd is None:  # the hook of a code without a noise level takes none
        return code._decode(y, mask, order)
    return code._decode(y, mask, order, noise_sd=noise_sd)


@functools.partial(jax.jit, static_argnums=0)
def _decode_points_jit(code, y, mask, noise_sd, alpha, beta):
    return code._decode(y, mask, None, noise_sd=noise_sd, points=(alpha, beta))


@functools.partial(jax.jit, static_argnums=(0, 4))
def _decode_batched_jit(code, y, masks, order, shared_y, noise_sd=None):
    if noise_sd is None:
        return code._decode_batched(y, masks, order, shared_y)
    return code._decode_batched(y, masks, order, shared_y, noise_sd)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _matrix_jit(code, mask, dtype):
    return code._matrix(mask, dtype)


# ------------------------------------------------------------------------------------
# Lagrange codes: exact for polynomials of degree d, ChebyLS or threshold decoding
# ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LagrangeCode(Code):
    """Lagrange coded computing with a Chebyshev-basis decoder (see
    :func:`lagrange_code`)."""

    degree: int = 1
    decoder: str = "chebyls"
    points: str = "first"
    worker_dtype: str | None = None  # graceful, robust: the workers' dtype (y's)
    max_corrupted: int = 0  # robust: A, the most corrupted answers corrected
    false_alarm: float = 0.01  # robust: the probability of flagging a clean request
    noise_scale: float | None = None  # robust: gamma (default worker_noise_scale)

    @property
    def name(self) -> str:
        return self.decoder

    @property
    def num_coeffs(self) -> int:
        """D = d (K - 1) + 1."""
        return recovery_threshold(self.num_inputs, self.degree)

    @property
    def threshold(self) -> int:
        """D; 1 for the graceful decoder, whose smooth fallback decodes (``ok``,
        with a larger predicted error) from any number of answers."""
        return 1 if self.decoder == "graceful" else self.num_coeffs

    @property
    def correction_threshold(self) -> int:
        """D + 2A: from this many responses the robust decoder corrects A corrupted
        ones (``threshold`` for the other decoders, which correct none)."""
        return self.threshold + 2 * self.max_corrupted

    @property
    def uses_noise_sd(self) -> bool:
        """True for the robust decoder: ``decode(..., noise_sd=)`` sets each
        answer's noise level."""
        return self.decoder == "robust"

    @property
    def exact(self) -> bool:
        return True

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M] (Chebyshev, of the code's kind)."""
        return _pts(self.num_workers, _POINT_KINDS[self.points], dtype)

    def beta(self, dtype: Any = jnp.float32) -> jax.Array:
        """Data points [K] (first-kind Chebyshev)."""
        return _pts(self.num_inputs, 1, dtype)

    def _encode(self, x):
        acc = _acc(x)
        return lagrange_encode(x, self.beta(acc), self.alpha(acc))

    def _decode_one(self, y, mask, order, noise_sd):
        if self.decoder == "robust":
            # the points as arguments, not constants folded into the program: the
            # program is chebyls_decode_robust's own, so code.decode equals it
            # (with the code's points) bit for bit, without its Python checks
            acc = _acc(y)
            a = _pts_device(self.num_workers, _POINT_KINDS[self.points], acc)
            b = _pts_device(self.num_inputs, 1, acc)
            return _decode_points_jit(self, y, mask, noise_sd, a, b)
        return super()._decode_one(y, mask, order, noise_sd)

    def _decode(self, y, mask, order, noise_sd=None, points=None):
        acc = _acc(y)
        if points is None:
            a, b = self.alpha(acc), self.beta(acc)
        else:
            a, b = points
        if self.decoder == "chebyls":
            return chebyls_decode(y, mask, a, b, num_coeffs=self.num_coeffs)
        if self.decoder == "graceful":
            d, wdt = self.num_coeffs, self.worker_dtype
            return graceful_decode(y, mask, a, b, num_coeffs=d, worker_dtype=wdt)
        if self.decoder == "robust":
            return chebyls_decode_robust(
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
        if order is None:
            order = spread_order(mask, num_coeffs=self.num_coeffs)
        return threshold_decode(
            y, mask, a, b, num_coeffs=self.num_coeffs, order=order.astype(jnp.int32)
        )

    def _decode_batched(self, y, masks, order, shared_y, noise_sd=None):
        if self.decoder != "chebyls":
            return super()._decode_batched(y, masks, order, shared_y, noise_sd)
        acc = _acc(y)
        return chebyls_decode_batched(
            y,
            masks,
            self.alpha(acc),
            self.beta(acc),
            num_coeffs=self.num_coeffs,
            shared_y=shared_y,
        )

    def _matrix(self, mask, dtype):
        # graceful: the matrix of its ChebyLS branch (its smooth branch depends on y);
        # robust: ChebyLS's (its exclusions and row weights depend on y)
        if self.decoder in ("chebyls", "graceful", "robust"):
            acc = accumulation_dtype(dtype)
            return chebyls_decoding_matrix(
                mask,
                self.alpha(acc),
                self.beta(acc),
                num_coeffs=self.num_coeffs,
                accum_dtype=acc,
            ).value
        return super()._matrix(mask, dtype)


def lagrange_code(
    *,
    num_inputs: int,
    num_workers: int,
    degree: int,
    decoder: str = "chebyls",
    points: str = "first",
    worker_dtype: Any = None,
    max_corrupted: int | None = None,
    false_alarm: float | None = None,
    noise_scale: float | None = None,
) -> LagrangeCode:
    """A Lagrange code: exact for workers that compute a polynomial of degree d.

    Inputs sit at first-kind Chebyshev data points beta [K], workers at Chebyshev
    points alpha [M] of the kind ``points``; worker i is sent u(alpha_i) where u is
    the degree K - 1 polynomial with u(beta_k) = X_k. ``decoder="chebyls"`` fits
    every finite response by least squares in the Chebyshev basis
    (:func:`chebyls_decode`); ``decoder="threshold"`` solves the square system of the
    first D responders in arrival order (:func:`threshold_decode`; without an
    ``order`` it takes the D responders spread most evenly, :func:`spread_order`);
    ``decoder="graceful"`` is ChebyLS where its predicted error is small and the
    smoothness-regularised fit elsewhere (:func:`graceful_decode`);
    ``decoder="robust"`` is ChebyLS that locates and excludes up to A =
    ``max_corrupted`` corrupted answers (:func:`chebyls_decode_robust`) and returns
    a :class:`RobustDecodeResult` whose ``suspects`` [M] are the excluded workers.

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
    smaller corruptions). The
    level is gamma u_w times each answer's size (``noise_scale`` gamma, by default
    the rounding of a homogeneous degree-d worker, :func:`chebyls_decode_robust`);
    a worker whose arithmetic cancels (large intermediate values, small answers)
    needs the larger gamma its own rounding analysis gives, or clean requests get
    flagged. One gamma must cover the worst answer; a per-answer level, each
    answer's rounding standard deviation from the worker's computation at its
    coded input, is sharper: ``code.decode(y, mask, noise_sd=sd)`` (and
    ``Server(..., noise_fn=)`` in ``codedjax.serving``) replaces gamma with it.

    Args:
        num_inputs: K >= 1. num_workers: M >= D (M >= D + 2A for the robust
            decoder). degree: d >= 0.
        decoder: "chebyls", "threshold", "graceful" or "robust". points: "first"
            or "second".
        worker_dtype: the dtype the workers compute in, for the graceful and robust
            decoders' noise level when the answers arrive widened (default: the
            answers' dtype).
        max_corrupted: A >= 0, the most corrupted answers the robust decoder
            corrects (required for it; A = 0 only detects). Robust decoder only.
        false_alarm: the probability that the robust decoder flags a clean request,
            in (0, 1) (default 0.01). Robust decoder only.
        noise_scale: gamma > 0, one answer's rounding error in units of u_w times
            its size (default: ``chebyls_decode_robust``'s, from K and D). Robust
            decoder only.

    Returns:
        LagrangeCode with ``threshold`` D = d (K - 1) + 1 and
        ``correction_threshold`` D + 2A (D for the other decoders).

    Raises:
        ValueError: unknown decoder or points, M < D, max_corrupted,
            false_alarm or noise_scale with another decoder, the robust decoder
            without max_corrupted, A < 0, M < D + 2A, false_alarm outside (0, 1),
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
        >>> code.threshold, bool(r.ok), jnp.round(r.value[:, 0], 4).tolist()
        (3, True, [1.0, 4.0])
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
    if decoder not in _DECODERS:
        raise ValueError(
            f"{fname}: decoder must be 'chebyls', 'threshold', 'graceful' or "
            f"'robust', got {decoder!r}"
        )
    a, fa, gamma = _robust_settings(
        fname, decoder, max_corrupted, false_alarm, noise_scale
    )
    if worker_dtype is not None:
        worker_dtype = check_worker_dtype(fname, worker_dtype).name
    if points not in _POINT_KINDS:
        raise ValueError(f"{fname}: points must be 'first' or 'second', got {points!r}")
    if points == "second" and m < 2:
        raise ValueError(f"{fname}: second-kind points need M >= 2, got {m}")
    code = LagrangeCode(
        k,
        m,
        degree=d,
        decoder=decoder,
        points=points,
        worker_dtype=worker_dtype,
        max_corrupted=a,
        false_alarm=fa,
        noise_scale=gamma,
    )
    if code.num_coeffs > m:
        raise ValueError(
            f"{fname}: num_workers M={m} is below the recovery threshold "
            f"D = d (K - 1) + 1 = {code.num_coeffs}"
        )
    if code.correction_threshold > m:
        raise ValueError(
            f"{fname}: correcting max_corrupted A={a} corrupted answers needs "
            f"D + 2A = {code.correction_threshold} answers, more than num_workers "
            f"M={m} (D = {code.num_coeffs})"
        )
    return code


_DECODERS = ("chebyls", "threshold", "graceful", "robust")


def _robust_settings(fname, decoder, max_corrupted, false_alarm, noise_scale):
    """(A, false_alarm, gamma) of a robust code; (0, 0.01, None) for the others."""
    given = dict(
        max_corrupted=max_corrupted, false_alarm=false_alarm, noise_scale=noise_scale
    )
    if decoder != "robust":
        for name, v in given.items():
            if v is not None:
                raise ValueError(
                    f"{fname}: {name} applies only to decoder='robust', got "
                    f"{name}={v!r} with decoder={decoder!r}"
                )
        return 0, 0.01, None
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
    return a, fa, gamma


# ------------------------------------------------------------------------------------
# Approximate codes: BACC (Berrut) and NeRCC (smoothing splines)
# ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _ApproximateCode(Code):
    """Approximate codes: first-kind data points, second-kind worker points."""

    @property
    def exact(self) -> bool:
        return False

    def alpha(self, dtype: Any = jnp.float32) -> jax.Array:
        """Worker points [M] (second-kind Chebyshev)."""
        return _pts(self.num_workers, 2, dtype)

    def beta(self, dtype: Any = jnp.float32) -> jax.Array:
        """Data points [K] (first-kind Chebyshev)."""
        return _pts(self.num_inputs, 1, dtype)


@dataclasses.dataclass(frozen=True)
class BerrutCode(_ApproximateCode):
    """Berrut approximate coded computing (see :func:`bacc_code`)."""

    @property
    def name(self) -> str:
        return "bacc"

    @property
    def threshold(self) -> int:
        return 1

    def _encode(self, x):
        acc = _acc(x)
        return berrut_encode(x, self.beta(acc), self.alpha(acc))

    def _decode(self, y, mask, order):
        acc = _acc(y)
        return berrut_decode(y, mask, self.alpha(acc), self.beta(acc))

    def _matrix(self, mask, dtype):
        acc = accumulation_dtype(dtype)
        return berrut_decoding_matrix(
            mask, self.alpha(acc), self.beta(acc), accum_dtype=acc
        ).value


def bacc_code(*, num_inputs: int, num_workers: int) -> BerrutCode:
    """Berrut approximate coded computing (BACC) for any worker function.

    Encoder and decoder are Berrut rational interpolants: first-kind data points,
    second-kind worker points (:func:`bacc_points`). Any single response decodes
    (``threshold`` 1); the error falls as more workers respond.

    Args:
        num_inputs: K >= 1. num_workers: M >= 2.

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
    return BerrutCode(k, m)


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
        acc = _acc(x)
        return nercc_encode(
            x, self.beta(acc), self.alpha(acc), smoothing=self.smoothing[0]
        )

    def _decode(self, y, mask, order):
        acc = _acc(y)
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
        num_inputs: K >= 1. num_workers: M >= 2.
        smoothing: (encoder, decoder) weights, finite and >= 0 (static).

    Examples:
        >>> import codedjax as cj
        >>> cj.nercc_code(num_inputs=4, num_workers=10, smoothing=(1e-4, 1e-3)).name
        'nercc'

    References:
        P. Moradi, B. Tahmasebi and M. A. Maddah-Ali, Coded computing for resilient
        distributed computing: a learning-theoretic framework, arXiv:2406.00300.
    """
    k = check_int("nercc_code", "num_inputs", num_inputs, minimum=1)
    m = check_int("nercc_code", "num_workers", num_workers, minimum=2)
    return NerccCode(k, m, smoothing=_smoothing_pair("nercc_code", smoothing))


# ------------------------------------------------------------------------------------
# RepApprox, replication and uncoded
# ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _layout(k: int, c: int, m: int):
    return repapprox_layout(k, c, m)


@dataclasses.dataclass(frozen=True)
class RepApproxCode(Code):
    """Replication with an approximate fallback (see :func:`repapprox_code`)."""

    replication: int = 1
    fallback: str = "berrut"
    smoothing: float = 0.0

    @property
    def name(self) -> str:
        return "repapprox" if self.fallback == "berrut" else "repapprox-nercc"

    @property
    def threshold(self) -> int:
        return 1 if self.fallback == "berrut" else 2

    @property
    def exact(self) -> bool:
        return True

    @property
    def layout(self):
        """The :class:`RepApproxLayout` (which server computes what)."""
        return _layout(self.num_inputs, self.replication, self.num_workers)

    def _encode(self, x):
        return repapprox_encode(x, self.layout)

    def _decode(self, y, mask, order):
        r = repapprox_decode(
            y, mask, self.layout, fallback=self.fallback, smoothing=self.smoothing
        )
        return DecodeResult(*(getattr(r, f) for f in DecodeResult._fields))


def repapprox_code(
    *,
    num_inputs: int,
    num_workers: int,
    replication: int,
    fallback: str = "berrut",
    smoothing: float = 0.0,
) -> RepApproxCode:
    """RepApprox: each input on c servers, an approximation where a group is lost.

    Task k's replicas are servers k c .. k c + c - 1 (placed at the data point
    beta_k), the E = M - K c extra servers are coded (second-kind points). A task with
    a responding replica is returned exactly; a lost one by the Berrut (or NeRCC)
    interpolant over the responding points (:func:`repapprox_decode`).

    Args:
        num_inputs: K >= 1. num_workers: M >= K c. replication: c >= 1.
        fallback: "berrut" or "nercc". smoothing: NeRCC decoder weight (>= 0).

    Examples:
        >>> import codedjax as cj
        >>> code = cj.repapprox_code(num_inputs=8, num_workers=40, replication=4)
        >>> code.layout.num_extra, code.exact
        (8, True)
    """
    fname = "repapprox_code"
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    c = check_int(fname, "replication", replication, minimum=1)
    if fallback not in ("berrut", "nercc"):
        raise ValueError(
            f"{fname}: fallback must be 'berrut' or 'nercc', got {fallback!r}"
        )
    lam = float(smoothing)
    if not (np.isfinite(lam) and lam >= 0):
        raise ValueError(
            f"{fname}: smoothing must be finite and >= 0, got {smoothing!r}"
        )
    _layout(k, c, m)  # validates K c <= M with the layout's own error
    return RepApproxCode(k, m, replication=c, fallback=fallback, smoothing=lam)


def _first_replica(sel: jax.Array, task: np.ndarray, k: int) -> jax.Array:
    """One-hot [K, M]: for each task the lowest-index selected worker computing it."""
    onehot = (task[None, :] == np.arange(k)[:, None]) & sel[None, :]
    first = jnp.cumsum(onehot, axis=1) == 1
    return onehot & first


@dataclasses.dataclass(frozen=True)
class ReplicationCode(Code):
    """Plain replication (see :func:`replication_code`)."""

    @property
    def name(self) -> str:
        return "replication" if self.num_workers > self.num_inputs else "uncoded"

    @property
    def threshold(self) -> int:
        return self.num_inputs

    @property
    def exact(self) -> bool:
        return True

    @property
    def task(self) -> np.ndarray:
        """int [M]: the input each worker computes (i mod K)."""
        return np.arange(self.num_workers) % self.num_inputs

    def _encode(self, x):
        return x[self.task]

    def _decode(self, y, mask, order):
        acc = _acc(y)
        flat = y.reshape(y.shape[0], -1)
        fin = jnp.all(jnp.isfinite(flat), axis=1)
        sel = mask & fin
        pick = _first_replica(sel, self.task, self.num_inputs)
        have = jnp.any(pick, axis=1)
        n_used = jnp.sum(have).astype(jnp.int32)
        ok = jnp.all(have)
        safe = jnp.where(sel[:, None], flat, 0).astype(acc)
        value = jnp.matmul(pick.astype(acc), safe, precision=jax.lax.Precision.HIGHEST)
        value = value.reshape((self.num_inputs,) + y.shape[1:])
        status = jnp.where(
            ok, int(Status.SUCCESS), int(Status.TOO_FEW_RESPONSES)
        ).astype(jnp.int32)
        cond = jnp.where(ok, 1.0, jnp.inf).astype(acc)
        # a copied response carries only the worker's own rounding
        return finish(value, cond, n_used, status, jnp.zeros((), acc))


def replication_code(*, num_inputs: int, num_workers: int) -> ReplicationCode:
    """Replication: worker i computes input i mod K; decoding takes any replica.

    The baseline a coded scheme must beat with the same workers: exact for any
    function, ``ok`` once every input has a responding replica (so ``threshold`` is
    K, though K responses need not suffice).

    Args:
        num_inputs: K >= 1. num_workers: M >= K.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> code = cj.replication_code(num_inputs=2, num_workers=5)
        >>> code.encode(jnp.array([[1.0], [2.0]]))[:, 0].tolist()
        [1.0, 2.0, 1.0, 2.0, 1.0]
    """
    k = check_int("replication_code", "num_inputs", num_inputs, minimum=1)
    m = check_int("replication_code", "num_workers", num_workers, minimum=1)
    if m < k:
        raise ValueError(
            f"replication_code: num_workers must be at least num_inputs K={k}, got {m}"
        )
    return ReplicationCode(k, m)


def uncoded_code(*, num_inputs: int) -> ReplicationCode:
    """No coding: M = K workers, worker k computes input k; every one must answer.

    Examples:
        >>> import codedjax as cj
        >>> code = cj.uncoded_code(num_inputs=3)
        >>> code.num_workers, code.threshold, code.name
        (3, 3, 'uncoded')
    """
    k = check_int("uncoded_code", "num_inputs", num_inputs, minimum=1)
    return ReplicationCode(k, k)
