"""The catalogue of schemes: every way the library can serve one workload.

For a workload (a polynomial of some degree, or not a polynomial), K queries, M
workers and the workers' dtype, :func:`catalogue` lists every scheme of the library
in one order: built as a :class:`~codedjax.Code` where it applies, with the reason
where it does not, the workers it occupies, the evaluations of f each of them
performs per request (its service-time accounting) and how it is served (the wait
policy's kind). Every experiment of the project takes its schemes from here, so
that which codes exist, where they apply and what they cost is decided once.

The rules (``docs/design.md``, "The catalogue of schemes"):

* ``uncoded``: K of the M workers, one query each; waits for all K.
* ``replication``: worker i computes query i mod K; decodes when every query has
  an answer (``policy="first"``).
* Lagrange codes (``chebyls``, ``threshold``, ``graceful``, ``robust``): a
  polynomial workload of degree d and M >= D = (K - 1) d + 1 (robust: D + 2 r).
  ``threshold`` decodes at N = D; the others at a tuned N >= D.
* ``circle``: the rotation-embedded code; complex queries, so each worker
  evaluates f on a real and an imaginary part: ``work`` = 2 real evaluations (the
  model's real parameters act on each part; the elementwise complex products of a
  higher degree cost four real ones, negligible beside the matrix products).
  A linear workload packs two real queries into one complex one (f(a + ib) =
  f(a) + i f(b) needs f linear without bias).
* ``random``: Gaussian encoding, least squares; exact only for a linear workload.
* ``bacc`` (Berrut) and ``nercc`` (smoothing splines): approximate, any workload,
  M >= 2 (``nercc``: K >= 2 too); ``nercc`` takes its (encoder, decoder)
  smoothing pair from the caller (tuned for the workload,
  :func:`codedjax.tune_nercc`).
* ``repapprox``: c = ``replicas`` (default M // K) copies of each query, the
  spare workers Berrut-coded; needs c >= 1.
* ``parity`` (ParM): one entry per group size k >= 2 dividing K with K + K/k <= M
  workers; its parity model is exact only for a linear workload without bias
  (``Workload.linear``), an approximation otherwise.
* ``layerwise``: a workload given as ``layers`` served one layer per round with a
  degree-1 ChebyLS code (M >= K + 1).
* ``systematic=True``: after each of ``chebyls``, ``threshold``, ``graceful``,
  ``robust``, ``circle`` and ``bacc``, its systematic variant, named
  ``"<name> systematic"`` (K workers answer their own query as it is; the
  circle code's needs K' to divide M). ``uncoded``, ``replication``,
  ``repapprox`` and ``parity`` are systematic already (``code.systematic``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ._approx_codes import bacc_code, nercc_code
from ._circle_codes import circle_code
from ._code import Code
from ._lagrange_codes import lagrange_code
from ._lagrange_encoding import recovery_threshold
from ._parity import parity_code
from ._random_codes import random_code
from ._replication_codes import repapprox_code, replication_code, uncoded_code

__all__ = ["SCHEME_NAMES", "POLICIES", "Scheme", "Workload", "catalogue"]

#: every scheme of the catalogue, in its order
SCHEME_NAMES = (
    "uncoded",
    "replication",
    "chebyls",
    "threshold",
    "graceful",
    "robust",
    "circle",
    "random",
    "bacc",
    "nercc",
    "repapprox",
    "parity",
    "layerwise",
)

#: the schemes with a systematic variant (``catalogue(..., systematic=True)``)
SYSTEMATIC_NAMES = ("chebyls", "threshold", "graceful", "robust", "circle", "bacc")

#: how a scheme is served: ``"fixed"`` decodes at a tuned N-th answer
#: (``FixedN(N)``), ``"threshold"`` at its code's threshold (``FixedN(threshold)``),
#: ``"first"`` at the first moment the answers in hand may decode
#: (``FirstDecodable``)
POLICIES = ("fixed", "threshold", "first")


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
    """What each worker computes, as the catalogue and the experiments see it.

    Attributes:
        name: the workload's name.
        degree: the polynomial degree of f, or None when f is not a polynomial.
        linear: f(x + y) = f(x) + f(y) (a linear map without bias): a parity model
            equal to f is exact, and the random code applies.
        fn: f on one query row (jax), or None.
        truth: f in float64 on [..., F] (numpy), or None.
        layers: the workload as layers ``(W, b, kind)`` for layer-wise coding
            (empty: not offered).
        description: one line for reports.
        params: anything the experiment's functions need (weights, coefficients).
    """

    name: str
    degree: int | None
    linear: bool = False
    fn: Callable | None = None
    truth: Callable | None = None
    layers: tuple = ()
    description: str = ""
    params: Any = None

    def __post_init__(self):
        d = self.degree
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1):
            raise ValueError(
                f"Workload: degree must be an int >= 1 or None (not a polynomial), "
                f"got {d!r}"
            )
        if self.linear and d != 1:
            raise ValueError(
                f"Workload: a linear workload has degree 1, got degree {d!r}"
            )

    @property
    def num_layers(self) -> int:
        return len(self.layers)


@dataclasses.dataclass(frozen=True, eq=False)
class Scheme:
    """One entry of the catalogue.

    Attributes:
        name: the scheme's name (one of :data:`SCHEME_NAMES`, with a suffix for a
            variant: ``"parity k=2"``, ``"chebyls kind=2"``).
        family: the code family (``"uncoded"``, ``"replication"``,
            ``"lagrange"``, ``"circle"``, ``"random"``, ``"berrut"``,
            ``"nercc"``, ``"repapprox"``, ``"parity"``).
        code: the code of one request (None when the scheme does not apply).
        reason: why it does not apply (None when it does).
        policy: how it is served, one of :data:`POLICIES`.
        workers: the workers it occupies (at most M; the others idle).
        min_responses: the fewest answers it may decode from (its N's lower end).
        work: real evaluations of f per worker per coded query (the circle
            code's complex query: 2).
        copies: coded queries per worker per request.
        rounds: rounds of a request (layer-wise coding: one per layer).
        exact: it decodes f exactly (up to rounding) when it decodes.
        note: how it uses the workers, for reports.
    """

    name: str
    family: str
    code: Code | None = None
    reason: str | None = None
    policy: str = "fixed"
    workers: int = 0
    min_responses: int = 0
    work: int = 1
    copies: int = 1
    rounds: int = 1
    exact: bool = True
    note: str = ""

    @property
    def applies(self) -> bool:
        return self.reason is None

    @property
    def service_scale(self) -> int:
        """A worker's service time per request in units of one real evaluation
        of f: ``work * copies``."""
        return self.work * self.copies


def _int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"catalogue: {name} must be an int >= {low}, got {value!r}")
    return value


def catalogue(
    workload: Workload,
    num_inputs: int,
    num_workers: int,
    *,
    worker_dtype: Any = "bfloat16",
    names: Sequence[str] | None = None,
    replicas: int | None = None,
    nercc_smoothing: tuple[float, float] = (1e-4, 1e-3),
    max_corrupted: int = 1,
    kind: int = 1,
    circle_pack: bool | None = None,
    circle_decoder: str = "ls",
    seed: int = 0,
    systematic: bool = False,
) -> tuple[Scheme, ...]:
    """Every scheme of the library for ``workload`` on K queries and M workers.

    Args:
        workload: what each worker computes (:class:`Workload`).
        num_inputs: K, the queries of one request.
        num_workers: M, the workers available.
        worker_dtype: the workers' dtype (the graceful and robust decoders size
            their noise floor by it).
        names: the schemes to list (default every one of :data:`SCHEME_NAMES`), in the
            catalogue's order whatever the order given.
        replicas: RepApprox's copies per query c (default M // K).
        nercc_smoothing: NeRCC's (encoder, decoder) smoothing pair.
        max_corrupted: the robust decoder's r.
        kind: the Chebyshev points of the Lagrange codes (1 or 2).
        circle_pack: pack two real queries per complex one (default: for a
            linear workload; "does not apply" for any other).
        circle_decoder: the circle code's decoder, ``"ls"`` (least squares over
            every answer) or ``"threshold"`` (the first D).
        seed: the random code's seed.
        systematic: also list the systematic variant of each scheme of
            :data:`SYSTEMATIC_NAMES`, right after it, as ``"<name> systematic"``
            (the same rules, and the circle code's needs K' to divide M; a
            systematic ``threshold`` is served ``"first"``: its K systematic
            answers decode below D).

    Returns:
        A tuple of :class:`Scheme`: the ``parity`` name gives one entry per
        group size that fits; every other name one entry (two with
        ``systematic`` for the names of :data:`SYSTEMATIC_NAMES`).

    Raises:
        ValueError: a bad argument, naming it.
    """
    if not isinstance(workload, Workload):
        raise TypeError(
            f"catalogue: workload must be a codedjax.Workload, got "
            f"{type(workload).__name__}"
        )
    k = _int("num_inputs", num_inputs, 1)
    m = _int("num_workers", num_workers, 1)
    if k > m:
        raise ValueError(
            f"catalogue: num_inputs must be at most num_workers = {m}, got {k}"
        )
    if isinstance(names, str):
        raise TypeError(
            f"catalogue: names must be a sequence of names, got the str {names!r}"
        )
    wanted = SCHEME_NAMES if names is None else tuple(names)
    bad = [n for n in wanted if n not in SCHEME_NAMES]
    if bad:
        raise ValueError(f"catalogue: names must be among {SCHEME_NAMES}, got {bad}")
    c = m // k if replicas is None else _int("replicas", replicas, 1)
    _int("max_corrupted", max_corrupted, 0)
    if isinstance(kind, bool) or kind not in (1, 2):
        raise ValueError(f"catalogue: kind must be 1 or 2, got {kind!r}")
    if circle_pack is not None and not isinstance(circle_pack, bool):
        raise TypeError(
            f"catalogue: circle_pack must be True, False or None, got {circle_pack!r}"
        )
    if circle_decoder not in ("ls", "threshold"):
        raise ValueError(
            f"catalogue: circle_decoder must be 'ls' or 'threshold', got "
            f"{circle_decoder!r}"
        )
    if not isinstance(systematic, bool):
        raise TypeError(
            f"catalogue: systematic must be True or False, got {systematic!r}"
        )
    build = _Builder(
        workload,
        k,
        m,
        worker_dtype,
        c,
        tuple(nercc_smoothing),
        max_corrupted,
        kind,
        circle_pack,
        circle_decoder,
        seed,
    )
    out: list[Scheme] = []
    for name in SCHEME_NAMES:
        if name in wanted:
            out += getattr(build, name)()
            if systematic and name in SYSTEMATIC_NAMES:
                out += dataclasses.replace(build, systematic=True).variant(name)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class _Builder:
    wl: Workload
    k: int
    m: int
    dtype: Any
    c: int
    smoothing: tuple[float, float]
    r: int
    kind: int
    pack: bool | None
    circle_decoder: str
    seed: int
    systematic: bool = False  # build the systematic variants (variant())

    def _no(self, name: str, family: str, why: str) -> list[Scheme]:
        return [Scheme(name, family, reason=f"does not apply: {why}")]

    def variant(self, name: str) -> list[Scheme]:
        """The systematic variant of scheme ``name`` (a builder with
        ``systematic`` set), named ``"<name> systematic"``."""
        note = "systematic: K workers answer their own query as it is"
        out = []
        for s in getattr(self, name)():
            policy = "first" if s.policy == "threshold" else s.policy
            extra = f"; {s.note}" if s.note else ""
            out.append(
                dataclasses.replace(
                    s, name=f"{s.name} systematic", policy=policy, note=note + extra
                )
            )
        return out

    def uncoded(self) -> list[Scheme]:
        code = uncoded_code(num_inputs=self.k)
        return [
            Scheme(
                "uncoded",
                "uncoded",
                code,
                policy="threshold",
                workers=self.k,
                min_responses=self.k,
                note=f"K = {self.k} of the {self.m} workers",
            )
        ]

    def replication(self) -> list[Scheme]:
        k, m = self.k, self.m
        code = replication_code(num_inputs=k, num_workers=m)
        note = f"query i mod K on worker i, {m // k}-{-(-m // k)} replicas each"
        return [
            Scheme(
                "replication",
                "replication",
                code,
                policy="first",
                workers=m,
                min_responses=k,
                note=note,
            )
        ]

    def _lagrange_reason(self, extra: int = 0) -> str | None:
        d = self.wl.degree
        if d is None:
            return (
                f"the {self.wl.name} workload is not a polynomial; a Lagrange code "
                "is exact only for polynomial workers"
            )
        need = recovery_threshold(self.k, d) + extra
        if self.m < need:
            what = "D" if not extra else f"D + 2r = {need - extra} + {extra}"
            return f"M = {self.m} < {what} = {need} (degree {d})"
        return None

    def _lagrange(self, name: str, decoder: str, policy: str, **kw) -> list[Scheme]:
        extra = 2 * self.r if decoder == "robust" else 0
        why = self._lagrange_reason(extra)
        if why:
            return self._no(name, "lagrange", why)
        try:
            code = lagrange_code(
                num_inputs=self.k,
                num_workers=self.m,
                degree=self.wl.degree,
                decoder=decoder,
                kind=self.kind,
                systematic=self.systematic,
                **kw,
            )
        except ValueError as e:  # (systematic points that do not exist)
            return self._no(name, "lagrange", str(e))
        return [
            Scheme(
                name,
                "lagrange",
                code,
                policy=policy,
                workers=self.m,
                min_responses=code.threshold,
            )
        ]

    def chebyls(self) -> list[Scheme]:
        return self._lagrange("chebyls", "chebyls", "fixed")

    def threshold(self) -> list[Scheme]:
        out = self._lagrange("threshold", "threshold", "threshold")
        if out[0].applies:
            out = [dataclasses.replace(out[0], note=f"N = D = {out[0].min_responses}")]
        return out

    def graceful(self) -> list[Scheme]:
        return self._lagrange("graceful", "graceful", "fixed", worker_dtype=self.dtype)

    def robust(self) -> list[Scheme]:
        return self._lagrange(
            "robust", "robust", "fixed", worker_dtype=self.dtype, max_corrupted=self.r
        )

    def circle(self) -> list[Scheme]:
        d = self.wl.degree
        if d is None:
            return self._no(
                "circle", "circle", f"the {self.wl.name} workload is not a polynomial"
            )
        pack = self.wl.linear if self.pack is None else self.pack
        if pack and not self.wl.linear:
            return self._no(
                "circle",
                "circle",
                f"packing two real queries into one complex one needs a linear "
                f"workload (no bias); the {self.wl.name} workload is not",
            )
        try:
            code = circle_code(
                num_inputs=self.k,
                num_workers=self.m,
                degree=d,
                pack=pack,
                decoder=self.circle_decoder,
                systematic=self.systematic,
            )
        except ValueError as e:
            return self._no("circle", "circle", str(e))
        policy = "threshold" if self.circle_decoder == "threshold" else "fixed"
        return [
            Scheme(
                "circle",
                "circle",
                code,
                policy=policy,
                workers=self.m,
                work=2,
                min_responses=code.threshold,
                note="complex queries: f on a real and an imaginary part",
            )
        ]

    def random(self) -> list[Scheme]:
        if not self.wl.linear:
            return self._no(
                "random",
                "random",
                "exact only for a linear workload (degree 1, no bias)",
            )
        code = random_code(num_inputs=self.k, num_workers=self.m, seed=self.seed)
        return [
            Scheme(
                "random", "random", code, workers=self.m, min_responses=code.threshold
            )
        ]

    def bacc(self) -> list[Scheme]:
        if self.m < 2:
            return self._no("bacc", "berrut", f"M = {self.m} < 2")
        try:
            code = bacc_code(
                num_inputs=self.k, num_workers=self.m, systematic=self.systematic
            )
        except ValueError as e:  # (systematic points that do not exist)
            return self._no("bacc", "berrut", str(e))
        return [
            Scheme("bacc", "berrut", code, workers=self.m, min_responses=1, exact=False)
        ]

    def nercc(self) -> list[Scheme]:
        if self.m < 2:
            return self._no("nercc", "nercc", f"M = {self.m} < 2")
        if self.k < 2:  # a smoothing spline through one data point
            return self._no("nercc", "nercc", "K = 1 < 2 (a spline needs 2 points)")
        code = nercc_code(
            num_inputs=self.k, num_workers=self.m, smoothing=self.smoothing
        )
        return [
            Scheme(
                "nercc",
                "nercc",
                code,
                workers=self.m,
                min_responses=2,
                exact=False,
                note=f"smoothing {self.smoothing}",
            )
        ]

    def repapprox(self) -> list[Scheme]:
        k, m, c = self.k, self.m, self.c
        if c < 1 or k * c > m:
            return self._no(
                "repapprox",
                "repapprox",
                f"c = {c} replicas of K = {k} queries need {k * c} > M = {m} workers",
            )
        code = repapprox_code(num_inputs=k, num_workers=m, replication=c)
        return [
            Scheme(
                "repapprox",
                "repapprox",
                code,
                workers=m,
                min_responses=1,
                exact=False,
                note=f"c = {c} replicas, {m - k * c} Berrut-coded extras",
            )
        ]

    def parity(self) -> list[Scheme]:
        k, m = self.k, self.m
        groups = [g for g in range(2, k + 1) if k % g == 0 and k + k // g <= m]
        if not groups:
            return self._no(
                "parity",
                "parity",
                f"M = {m} < K + K/k for every group size k >= 2 dividing K = {k}",
            )
        exact = self.wl.linear
        out = []
        for g in groups:
            code = parity_code(
                num_inputs=k, group=g, parity_error=0.0 if exact else None
            )
            used = k + k // g
            model = (
                "f itself, exact (linear, no bias)"
                if exact
                else ("f itself on the group's sum, an approximation")
            )
            out.append(
                Scheme(
                    f"parity k={g}",
                    "parity",
                    code,
                    policy="first",
                    workers=used,
                    min_responses=k,
                    exact=exact,
                    note=f"k = {g}: {used} of the {m} workers; parity model {model}",
                )
            )
        return out

    def layerwise(self) -> list[Scheme]:
        if not self.wl.layers:
            return self._no(
                "layerwise",
                "lagrange",
                f"the {self.wl.name} workload is not given as layers",
            )
        if self.m < self.k + 1:
            return self._no("layerwise", "lagrange", f"M = {self.m} < K + 1")
        code = lagrange_code(
            num_inputs=self.k, num_workers=self.m, degree=1, kind=self.kind
        )
        n = self.wl.num_layers
        return [
            Scheme(
                "layerwise",
                "lagrange",
                code,
                workers=self.m,
                min_responses=code.threshold,
                rounds=n,
                note=f"{n} rounds of a degree-1 ChebyLS code (D = K)",
            )
        ]
