"""The Code interface: one object per coding scheme, the baselines included.

A :class:`Code` bundles what a scheme needs (its points, degree, decoder and settings)
into an immutable, hashable object with four operations: ``encode`` (what each worker
is sent), ``decode`` (one straggler mask), ``decode_batched`` (many masks) and
``decoding_matrix``. Because a code is hashable it is a valid static argument of
``jax.jit``, and its methods are jitted once per code: one compiled program serves
every mask.

A runtime (the server, the latency simulator, an experiment) hands a code
everything it knows about a request's answers as one :class:`Answers` and calls
:meth:`Code.decode_answers`; each code reads the fields that apply to it (the
threshold code the arrival order, a robust code the per-answer noise levels), so
nothing outside a code looks at its type or name. :meth:`Code.may_decode` states,
from the code's structure alone, which responder sets can decode at all (a
replication code needs a replica of every input), :meth:`Code.decodable_queries`
which queries each set gives (``docs/design.md``). Each method checks its arguments
once (``codedjax._code_checks``) and runs one jitted program
(``codedjax._code_programs``); the codes live in ``codedjax._lagrange_codes``,
``_circle_codes``, ``_random_codes``, ``_approx_codes``, ``_replication_codes`` and
``_parity``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_one_mask, errors_named
from ._code_checks import (
    check_answer_fields,
    check_answers,
    check_answers_batched,
    check_inputs,
    refuse_keywords,
    remember,
    remembered,
    signature,
)
from ._code_programs import (
    decode_batched_program,
    decode_program,
    empty_batch,
    encode_program,
    matrix_program,
)
from ._dtypes import accumulation_dtype
from ._result import DecodeResult
from ._systematic import first_per_query
from ._threads import serialised_call

#: the role of a worker that runs the model itself (:attr:`Code.roles`)
BASE_ROLE = "base"


def acc_of(y: jax.Array) -> jnp.dtype:
    """The accumulation dtype of answers (or inputs) ``y``."""
    return accumulation_dtype(y.dtype)


class Answers(NamedTuple):
    """Everything a runtime knows about one request's answers (a pytree).

    Built by the server, the latency simulator or an experiment and handed to
    :meth:`Code.decode_answers`, which reads the fields that apply to the code:
    every code reads ``y`` and ``mask``; the threshold code also ``order``; a
    robust code also ``noise_sd``. A field the runtime does not know is None.

    Attributes:
        y: [M, ...] the answers (any floating dtype; rows outside ``mask`` are
            ignored).
        mask: bool [M], the workers whose answer arrived (and is finite).
        order: int [M], every worker index once, the answered ones first in
            arrival order; None when the arrival order is not known.
        noise_sd: float [M], the standard deviation of each answer's error (from
            the server's ``noise_fn``); None when not known.
    """

    y: Any
    mask: Any
    order: Any = None
    noise_sd: Any = None


@dataclasses.dataclass(frozen=True)
class Code:
    """Base class of every code: K inputs coded onto M workers.

    Subclasses are frozen dataclasses of static settings (hashable, so a code is a
    static argument of ``jax.jit``). Arrays (points, layouts) are derived from the
    settings on demand, in the dtype of the data.

    A subclass implements the traced hooks ``_encode(x)`` and ``_decode(y, mask,
    **extras)`` (the keyword arguments its own :meth:`decode` adds, e.g. the
    threshold code's ``order``), and may override ``_decode_batched``, ``_matrix``,
    :meth:`decode_answers` (to read more fields of :class:`Answers`),
    :meth:`may_decode` and :meth:`decodable_queries` (its per-query form).

    Attributes:
        num_inputs: K, the number of inputs coded together.
        num_workers: M, the number of workers.
    """

    num_inputs: int
    num_workers: int

    #: the fields of :class:`Answers` that :meth:`decode_answers` reads
    answer_fields = ("y", "mask")

    #: requests decoded per vectorised step by :meth:`decode_answers_batched`
    #: (None: the whole batch in one step). A decoder built on LAPACK (QR, SVD,
    #: least squares) sets a chunk: jaxlib's CPU LAPACK kernels split a large
    #: batch over the intra-op thread pool and block until it is done, and two
    #: independent such kernels at once can take every pool thread and deadlock
    #: (seen on 2 cores from 256 masks a batch, never at 128 or fewer)
    answers_chunk = None

    def __getstate__(self):
        # the signatures the methods have checked (codedjax._code_checks.remember)
        # are not pickled
        state = dict(self.__dict__)
        state.pop("_checked", None)
        return state

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
    def coded_shape(self) -> tuple[int, ...]:
        """The axes a worker's query and answer have before the payload's own.

        ``()`` for every code whose workers compute on real queries: ``encode``
        returns [M, ...], ``decode`` takes y [M, ...] and ``decoding_matrix`` is
        [K, M]. ``(2,)`` for the circle code, whose coded queries and answers are
        complex numbers as (real, imaginary) pairs: [M, 2, ...], and its decoding
        matrix [K, M, 2].
        """
        return ()

    @property
    def roles(self) -> tuple[str, ...]:
        """The role of each worker, M names: which function worker i runs.

        A serving runtime is given one function per role
        (``Server(code, {role: fn})``) and runs worker i with the function of
        ``roles[i]``. Every worker of every code here is ``"base"`` (the model
        itself); a code whose workers run different functions (a parity code:
        ``"base"`` for the systematic workers, ``"parity"`` for the parity
        workers) overrides this. Names only, never functions, so a code stays
        hashable.
        """
        return (BASE_ROLE,) * self.num_workers

    @property
    def encoder_key(self) -> Any:
        """A hashable key of what :meth:`encode` computes: two codes with equal
        keys send every worker the same query for the same inputs, so one set of
        worker answers serves both decoders. The code itself by default; a
        Lagrange code's depends on K, M and its worker points only (not on its
        degree or decoder)."""
        return self

    def may_decode(self, mask: ArrayLike) -> np.ndarray:
        """Whether ``decode`` can return ``ok`` from these responders, judged on
        the code's structure alone (host side, no answers needed).

        A necessary condition: False means no answers from these workers decode;
        True means a decode may succeed (it still reports ``ok`` from the values:
        conditioning, non-finite answers). At least ``threshold`` responders for
        most codes; a replica of every input for replication.

        Args:
            mask: bool [..., M] responders (numpy or jax, concrete).

        Returns:
            numpy bool [...].
        """
        return np.asarray(mask).sum(axis=-1) >= self.threshold

    def decodable_from(self, times: ArrayLike) -> np.ndarray:
        """When the answers in hand first may decode (:meth:`may_decode`), from
        the time each worker's answer arrives (host side, no answers needed).

        :meth:`may_decode` is monotone (more responders never make a mask
        undecodable), so this is the arrival after which the workers answered by
        then may decode.

        Args:
            times: float [..., M], when each worker's answer arrives (inf for an
                answer that never does).

        Returns:
            numpy float [...]: that arrival's time; inf where no set of the
            arrived answers may decode.
        """
        t = np.asarray(times, np.float64)
        ts = np.sort(t, axis=-1)
        # masks[..., n, i]: worker i has answered by the n-th arrival
        masks = t[..., None, :] <= ts[..., :, None]
        can = np.asarray(self.may_decode(masks), bool) & np.isfinite(ts)
        first = np.take_along_axis(ts, np.argmax(can, axis=-1)[..., None], axis=-1)
        return np.where(can.any(axis=-1), first[..., 0], np.inf)

    @property
    def systematic(self) -> bool:
        """K workers are sent the queries themselves, and a query whose own worker
        answered is that answer (ParM, replication, RepApprox, systematic=True)."""
        return False

    @property
    def systematic_workers(self) -> tuple[int, ...] | None:
        """[K]: the worker sent query k itself (None if not :attr:`systematic`)."""
        return None

    @property
    def own_workers(self) -> np.ndarray | None:
        """bool [K, M]: worker i answers query k as it is, with no decode (query
        k's systematic worker, or any of its replicas); None when no worker does
        (a code that is not :attr:`systematic`). A server answers a query at the
        first of these answers without waiting for a decode."""
        workers = self.systematic_workers
        if workers is None:
            return None
        out = np.zeros((self.num_inputs, self.num_workers), bool)
        out[np.arange(self.num_inputs), np.asarray(workers)] = True
        return out

    def decodable_queries(self, mask: ArrayLike) -> np.ndarray:
        """Which of the K queries responders ``mask`` [..., M] give, bool [..., K]
        (host side): :meth:`may_decode` (its all-K case) per query, as necessary and
        monotone; all K together unless queries decode apart (replication, ParM,
        systematic codes)."""
        may = np.asarray(self.may_decode(mask), bool)
        return np.repeat(may[..., None], self.num_inputs, axis=-1)

    def decodable_from_per_query(self, times: ArrayLike) -> np.ndarray:
        """:meth:`decodable_from` per query, float [..., K] from arrival times
        [..., M] (inf: never); its max over the queries is ``decodable_from``."""
        return first_per_query(self.decodable_queries, times)

    # --- the four operations -----------------------------------------------------
    def encode(self, x: ArrayLike) -> jax.Array:
        """What each worker is sent: x [K, ...] -> [M, *coded_shape, ...]."""
        sig = signature("encode", (x,))
        if remembered(self, sig):
            try:  # these shapes and dtypes passed the checks below before
                return encode_program(self, x)
            except (ValueError, TypeError):
                pass  # (a retrace that fails: the checked path names the error)
        fname = f"{type(self).__name__}.encode"
        x = check_inputs(self, fname, x)
        with errors_named(fname):
            out = encode_program(self, x)
        remember(self, sig)
        return out

    def decode(self, y: ArrayLike, mask: ArrayLike, **unknown: Any) -> DecodeResult:
        """Decode one straggler pattern.

        Args:
            y: [M, ...] worker responses in any floating dtype (rows of workers that
                did not respond are ignored, NaN/Inf rows count as missing).
            mask: bool [M], True for the workers that responded.

        Returns:
            DecodeResult with ``value`` [K, ...] in the accumulation dtype.

        Raises:
            ValueError: y or mask not [M, ...] / [M].
            TypeError: y not floating, mask not boolean; a keyword this code's
                decode does not take (``order``: threshold codes only;
                ``noise_sd``: robust codes only), named with the codes that do.
        """
        if unknown:
            refuse_keywords(self, "decode", unknown)
        sig = signature("decode", (y, mask))
        if remembered(self, sig):
            try:  # these shapes and dtypes passed the checks below before
                return decode_program(self, y, mask, {})
            except (ValueError, TypeError):
                pass  # (a retrace that fails: the checked path names the error)
        y, mask = check_answers(self, f"{type(self).__name__}.decode", y, mask)
        out = self._decode_one(y, mask)
        remember(self, sig)
        return out

    def decode_batched(
        self,
        y: ArrayLike,
        masks: ArrayLike,
        *,
        shared_y: bool = False,
        **unknown: Any,
    ) -> DecodeResult:
        """Decode B straggler patterns at once.

        Args:
            y: [B, M, ...] one payload per mask, or [M, ...] shared by every mask when
                ``shared_y`` is True.
            masks: bool [B, M].
            shared_y: whether ``y`` is one payload for every mask (static).

        Returns:
            DecodeResult with a leading B axis on every field; equal to a loop of
            :meth:`decode` up to rounding.

        Raises:
            ValueError: shapes that disagree (y, masks).
            TypeError: y not floating, masks not boolean; a keyword this code
                does not take (as :meth:`decode`).
        """
        if unknown:
            refuse_keywords(self, "decode_batched", unknown)
        fname = f"{type(self).__name__}.decode_batched"
        y, masks, _ = check_answers_batched(self, fname, y, masks, shared_y)
        return self._decode_many(y, masks, shared_y)

    def decoding_matrix(
        self, mask: ArrayLike, *, dtype: Any = jnp.float32
    ) -> jax.Array:
        """The linear map from responses to outputs for one mask, [K, M]
        ([K, M, *coded_shape]: ``value[k] = sum A[k, j, c] y[j, c]``).

        Zero columns for workers outside the mask; all zeros when the mask cannot
        be decoded. For every code but the graceful and robust ones the decode is
        linear in the responses: ``decode(y, mask).value == decoding_matrix(mask) @
        y`` up to rounding (the graceful and robust codes say what their matrix
        is).
        """
        mask = check_one_mask(
            f"{type(self).__name__}.decoding_matrix", mask, self.num_workers
        )
        with errors_named(f"{type(self).__name__}.decoding_matrix"):
            return matrix_program(self, mask, jnp.dtype(dtype))

    def decode_answers(self, answers: Answers) -> DecodeResult:
        """Decode one request from everything the runtime knows about its answers.

        The one entry point of a runtime: every code reads the fields of
        :class:`Answers` that apply to it (``answer_fields``) and ignores the
        others. Works under ``jax.jit`` and ``jax.vmap`` (map the fields of
        ``answers`` together).

        ``order`` is known to every runtime and read only by the codes that use
        it; ``noise_sd`` is refused by a code that does not take it (a
        ``TypeError`` naming this method and the codes that do), as by
        :meth:`decode`.

        Args:
            answers: :class:`Answers` (``y`` [M, ...], ``mask`` [M], optional
                ``order`` [M] and ``noise_sd`` [M]).

        Returns:
            What :meth:`decode` returns.
        """
        check_answer_fields(self, "decode_answers", answers)
        return self.decode(answers.y, answers.mask)

    def decode_answers_batched(self, answers: Answers) -> DecodeResult:
        """Decode B requests inside a traced program: :meth:`decode_answers`
        mapped over a leading B axis of every field of ``answers``.

        For the many requests of an experiment or a simulation, under the
        caller's ``jax.jit`` (the code a static argument). The requests are
        vmapped together, or in chunks of ``answers_chunk`` for the decoders
        that run LAPACK (a sequential loop over vmapped chunks, so a batched
        LAPACK kernel never takes the whole CPU thread pool); the values are
        those of a loop of :meth:`decode_answers`, up to rounding.

        Args:
            answers: :class:`Answers` with a leading B axis on each field that is
                not None (``y`` [B, M, ...], ``mask`` [B, M], ...).

        Returns:
            What :meth:`decode_answers` returns, with a leading B axis on every
            field.
        """
        check_answer_fields(self, "decode_answers_batched", answers)
        if self.answers_chunk is None:
            return jax.vmap(self.decode_answers)(answers)
        return jax.lax.map(
            self.decode_answers, answers, batch_size=int(self.answers_chunk)
        )

    # --- the jitted programs, after the checks (shared by the subclasses) ------
    def _decode_one(self, y, mask, **extras):
        """``decode`` after its checks: the code's jitted program."""
        with errors_named(f"{type(self).__name__}.decode"):
            return decode_program(self, y, mask, extras)

    def _decode_many(self, y, masks, shared_y, **extras):
        """``decode_batched`` after its checks: the code's jitted program.

        Vmapped decoders run batched LAPACK (QR, Cholesky) on CPU: one such
        program at a time in the process (see ``codedjax._threads``).
        """
        with errors_named(f"{type(self).__name__}.decode_batched"):
            if masks.shape[0] == 0:
                return empty_batch(self, y, masks, bool(shared_y), extras)
            return serialised_call(
                decode_batched_program, self, y, masks, bool(shared_y), extras
            )

    # --- hooks for subclasses (traced) -------------------------------------------
    def _encode(self, x):
        raise NotImplementedError

    def _decode(self, y, mask, **extras):
        raise NotImplementedError

    def _batch_axes(self, shared_y):
        """{extra: in_axis} for the extras of ``_decode`` under the default batched
        decode that are not shaped like y's leading axes (those are mapped unless
        ``shared_y``)."""
        return {}

    def _decode_batched(self, y, masks, shared_y, **extras):
        """B masks: ``_decode`` vmapped over the masks (and y unless shared)."""
        ax = None if shared_y else 0
        names = tuple(extras)

        def one(yy, mk, *vals):
            return self._decode(yy, mk, **dict(zip(names, vals, strict=True)))

        axes = self._batch_axes(shared_y)
        ex_axes = tuple(axes.get(n, ax) for n in names)
        vals = tuple(extras[n] for n in names)
        return jax.vmap(one, in_axes=(ax, 0) + ex_axes)(y, masks, *vals)

    def _matrix(self, mask, dtype):
        # a code that decodes linearly: decode the identity payload
        cs = tuple(self.coded_shape)
        n = self.num_workers * int(np.prod(cs, dtype=int))
        eye = jnp.eye(n, dtype=dtype).reshape((self.num_workers,) + cs + (n,))
        a = self._decode(eye, mask).value  # [K, n]
        return a.reshape((a.shape[0], self.num_workers) + cs)
