"""Straggler models: uniform N-of-M masks, latency-driven arrivals, worst-case sets.

The latency models themselves are in ``codedjax._latency``.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_int, check_vector, is_concrete
from ._latency import LatencyModel, ShiftedExponential

_DEFAULT_MODEL = ShiftedExponential(shift=1.0, mean=1.0)


def _check_key(fname: str, key: Any) -> None:
    if not isinstance(key, jax.Array) or not (
        jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        or (key.dtype == jnp.uint32 and key.shape[-1:] == (2,))
    ):
        raise TypeError(
            f"{fname}: key must be a PRNG key from jax.random.key, got "
            f"{type(key).__name__} {getattr(key, 'dtype', '')}"
        )


def _check_shape(fname: str, shape: Any) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{fname}: shape must be a tuple of ints, got {shape!r}"
        ) from err
    if any(s < 0 for s in shape):
        raise ValueError(f"{fname}: shape must be non-negative, got {shape}")
    return shape


def sample_masks(
    key: jax.Array, num_workers: int, num_responses: int, shape: tuple[int, ...] = ()
) -> jax.Array:
    """Uniformly random responding sets: exactly N of the M workers, every subset
    equally likely.

    The rank of i.i.d. uniforms is a uniform random permutation; the N workers of
    lowest rank respond. Ties are broken by a stable sort, so every row has exactly
    N True entries. Works under ``jax.vmap`` over keys.

    Args:
        key: a typed PRNG key (``jax.random.key``).
        num_workers: M >= 1.
        num_responses: N with 0 <= N <= M.
        shape: leading batch shape.

    Returns:
        bool [*shape, M].

    Raises:
        ValueError: N > M, M < 1 or N < 0. TypeError: key is not a PRNG key.

    Examples:
        >>> import jax, codedjax as cj
        >>> m = cj.sample_masks(jax.random.key(0), num_workers=5, num_responses=3,
        ...                     shape=(2,))
        >>> m.shape, m.sum(-1).tolist()
        ((2, 5), [3, 3])
    """
    fname = "sample_masks"
    _check_key(fname, key)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    n = check_int(fname, "num_responses", num_responses, minimum=0)
    if n > m:
        raise ValueError(
            f"{fname}: num_responses (N) must be at most num_workers (M={m}), got {n}"
        )
    shape = _check_shape(fname, shape)
    # N is passed as data: one compiled program serves every N (same shapes)
    return _sample_masks(key, jnp.asarray(n, jnp.int32), m, shape)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _sample_masks(key, n, m, shape):
    u = jax.random.uniform(key, shape + (m,))
    rank = jnp.argsort(jnp.argsort(u, axis=-1, stable=True), axis=-1, stable=True)
    return rank < n.astype(rank.dtype)


class Arrivals(NamedTuple):
    """First-N arrivals of a latency model.

    Attributes:
        mask: bool [..., M], the N workers that answered first.
        order: int32 [..., M], all workers in arrival order (first entry first).
        time: [...] the time at which the N-th response arrived.
        latencies: [..., M] the sampled per-worker latencies.
    """

    mask: jax.Array
    order: jax.Array
    time: jax.Array
    latencies: jax.Array


def first_arrivals(latencies: ArrayLike, *, num_responses: int) -> Arrivals:
    """The mask of the first N arrivals, the arrival order and the N-th arrival time.

    A NaN latency means the worker never answers (it sorts after every finite and
    infinite latency): it is never in ``mask`` while N other workers can answer,
    and ``time`` is inf when fewer than N workers have a finite latency (the N-th
    response never arrives), never NaN.

    Args:
        latencies: [..., M] per-worker response times.
        num_responses: N with 1 <= N <= M.

    Returns:
        Arrivals(mask, order, time, latencies).

    Raises:
        ValueError: N outside [1, M] or latencies not floating with M >= 1.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> a = cj.first_arrivals(jnp.array([3.0, 1.0, 2.0]), num_responses=2)
        >>> a.mask.tolist(), a.order.tolist(), float(a.time)
        ([False, True, True], [1, 2, 0], 2.0)
    """
    return _checked_first_arrivals("first_arrivals", latencies, num_responses)


def _checked_first_arrivals(fname, latencies, num_responses):
    try:
        lat = jnp.asarray(latencies)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{fname}: latencies must be a floating array [..., M], got "
            f"{type(latencies).__name__}"
        ) from err
    if not jnp.issubdtype(lat.dtype, jnp.floating) or lat.ndim < 1:
        raise ValueError(
            f"{fname}: latencies must be a floating array [..., M], got shape "
            f"{tuple(lat.shape)} dtype {lat.dtype}"
        )
    m = lat.shape[-1]
    n = check_int(fname, "num_responses", num_responses, minimum=1)
    if n > m:
        raise ValueError(f"{fname}: num_responses (N) must be at most M={m}, got {n}")
    return _first_arrivals(lat, jnp.asarray(n, jnp.int32))


@jax.jit
def _first_arrivals(lat, n):
    return _arrivals(lat, lat, n)


@jax.jit
def _arrivals(keys, lat, n):
    """Arrival order by ``keys`` (increasing; NaN last), times from ``lat``."""
    # NaN sorts last (jnp.argsort puts NaN after +inf); its time is +inf
    order = jnp.argsort(keys, axis=-1, stable=True).astype(jnp.int32)
    rank = jnp.argsort(order, axis=-1, stable=True)
    mask = rank < n.astype(rank.dtype)
    nth = jnp.broadcast_to(n - 1, order.shape[:-1] + (1,))
    clean = jnp.where(jnp.isnan(lat), jnp.asarray(jnp.inf, lat.dtype), lat)
    time = jnp.take_along_axis(
        clean, jnp.take_along_axis(order, nth, axis=-1), axis=-1
    )[..., 0]
    return Arrivals(mask, order, time, lat)


def sample_arrivals(
    key: jax.Array,
    *,
    num_workers: int,
    num_responses: int,
    model: LatencyModel = _DEFAULT_MODEL,
    shape: tuple[int, ...] = (),
) -> Arrivals:
    r"""Per-worker latencies from a latency model, and the first N arrivals.

    The model is one of the library's latency models (:class:`ShiftedExponential`,
    the standard model of coded-computing papers, Lee et al. 2018, and the
    default, 1 + Exp(mean 1); :class:`Pareto` for heavy tails; :class:`Uniform`
    for a uniformly random arrival order; :class:`Constant`; stragglers on top:
    :class:`RandomSlowdown`, :class:`PersistentSlowdown`), drawn in float32 with
    ``model.sample_jax``. For i.i.d. models the arrival order is a uniformly random
    permutation and the mask is uniform over N-subsets (the same responder law as
    :func:`sample_masks`); the models differ in ``time``. The order of a base
    model comes from its random part before the common shift is added, so a large
    shift cannot tie the latencies in float32.

    Args:
        key: typed PRNG key.
        num_workers: M. num_responses: N (1..M).
        model: a :class:`LatencyModel` (e.g. ``ShiftedExponential(shift=1.0,
            mean=1.0)``, ``parse_latency("pareto:1,2")``).
        shape: leading batch shape.

    Returns:
        Arrivals(mask [*shape, M], order [*shape, M], time [*shape], latencies).

    Raises:
        ValueError: N outside [1, M]. TypeError: model not a latency model, key
            not a PRNG key.

    Examples:
        >>> import jax, codedjax as cj
        >>> a = cj.sample_arrivals(jax.random.key(0), num_workers=6, num_responses=4)
        >>> int(a.mask.sum()), a.order.shape
        (4, (6,))
        >>> p = cj.sample_arrivals(jax.random.key(0), num_workers=6, num_responses=4,
        ...                        model=cj.Pareto(scale=1.0, shape=1.5))
        >>> bool(p.time >= 1.0)
        True

    References:
        K. Lee et al., Speeding up distributed machine learning using codes,
        IEEE Trans. Inf. Theory 64(3), 2018, arXiv:1512.02673.
    """
    fname = "sample_arrivals"
    _check_key(fname, key)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    n = check_int(fname, "num_responses", num_responses, minimum=1)
    if n > m:
        raise ValueError(f"{fname}: num_responses (N) must be at most M={m}, got {n}")
    shape = _check_shape(fname, shape)
    if not isinstance(model, LatencyModel):
        raise TypeError(
            f"{fname}: model must be a latency model (codedjax.ShiftedExponential, "
            f"Pareto, Uniform, Constant, RandomSlowdown, PersistentSlowdown or "
            f"parse_latency(text)), got {type(model).__name__} {model!r}"
        )
    offset, rel, order = model._jax(key, shape + (m,))
    return _arrivals(order, offset + rel, jnp.asarray(n, jnp.int32))


class WorstCase(NamedTuple):
    """Result of :func:`worst_case_mask`.

    Attributes:
        mask: numpy bool [M], the responding set found.
        cond: its condition number (float64, equilibrated Chebyshev-Vandermonde).
        exhaustive: True when every responding set of size N was examined.
        num_examined: how many responding sets were evaluated.
    """

    mask: np.ndarray
    cond: float
    exhaustive: bool
    num_examined: int


def _cond_rows(u: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """cond of u[rows] for a batch of row-index sets keep [B, N] (float64)."""
    sv = np.linalg.svd(u[keep], compute_uv=False)
    with np.errstate(divide="ignore"):
        return np.where(sv[:, -1] > 0, sv[:, 0] / sv[:, -1], np.inf)


def worst_case_mask(
    alpha: ArrayLike,
    *,
    num_coeffs: int,
    num_responses: int,
    max_candidates: int = 1_000_000,
    chunk: int = 20_000,
) -> WorstCase:
    """The responding set of size N that maximises the decoding condition number.

    Exhaustive over all C(M, N) sets when there are at most ``max_candidates``
    (evaluated in float64 on the host, in chunks of batched SVDs). Beyond that, a
    greedy search removes one worker at a time (the removal that raises the condition
    number most) and then improves the set by single swaps until no swap helps; the
    result is a lower bound on the true worst case (``exhaustive`` False).

    Args:
        alpha: [M] worker points.
        num_coeffs: D. num_responses: N with D <= N <= M.
        max_candidates: largest number of sets searched exhaustively (1e6).
        chunk: sets per batched SVD.

    Returns:
        WorstCase(mask, cond, exhaustive, num_examined).

    Raises:
        ValueError: if N < D or N > M, non-finite alpha, chunk < 1 or
            max_candidates < 0.
        TypeError: non-integer sizes, a traced alpha.

    Examples:
        >>> import codedjax as cj
        >>> w = cj.worst_case_mask(cj.chebyshev_points(8), num_coeffs=3,
        ...                        num_responses=6)
        >>> w.exhaustive, int(w.mask.sum())
        (True, 6)

    References:
        M. Fahim and V. R. Cadambe, Numerically stable polynomially coded computing,
        arXiv:1903.08326 (worst case over all subsets of a Chebyshev grid).
    """
    fname = "worst_case_mask"
    alpha = check_vector(fname, "alpha", alpha)
    if not is_concrete(alpha):
        raise TypeError(f"{fname}: alpha must be concrete (a host-side search)")
    x = np.asarray(alpha, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"{fname}: alpha must be finite, got {x[bad]} at index {bad}")
    m = x.shape[0]
    d = check_int(fname, "num_coeffs", num_coeffs, minimum=1)
    n = check_int(fname, "num_responses", num_responses, minimum=1)
    check_int(fname, "max_candidates", max_candidates, minimum=0)
    chunk = check_int(fname, "chunk", chunk, minimum=1)
    if not d <= n <= m:
        raise ValueError(
            f"{fname}: need num_coeffs (D={d}) <= num_responses <= M={m}, got "
            f"num_responses={n}"
        )
    scale = np.full(d, np.sqrt(2.0 / m))
    scale[0] = np.sqrt(1.0 / m)
    u = np.polynomial.chebyshev.chebvander(x, d - 1) * scale
    total = math.comb(m, n)
    if total <= max_candidates:
        best, best_keep = -1.0, None
        it = itertools.combinations(range(m), n)
        examined = 0
        while True:
            block = np.array(list(itertools.islice(it, chunk)), dtype=np.int64)
            if block.size == 0:
                break
            block = block.reshape(-1, n)
            c = _cond_rows(u, block)
            examined += block.shape[0]
            i = int(np.argmax(c))
            if c[i] > best:
                best, best_keep = float(c[i]), block[i]
        mask = np.zeros(m, bool)
        mask[best_keep] = True
        return WorstCase(mask, best, True, examined)
    # greedy removal, then single-swap local search
    keep = np.ones(m, bool)
    examined = 0
    for _ in range(m - n):
        cand = np.flatnonzero(keep)
        sets = np.array([np.flatnonzero(keep & (np.arange(m) != j)) for j in cand])
        c = _cond_rows(u, sets)
        examined += len(cand)
        keep[cand[int(np.argmax(c))]] = False
    best = float(_cond_rows(u, np.flatnonzero(keep)[None])[0])
    improved = True
    while improved:
        improved = False
        ins, outs = np.flatnonzero(keep), np.flatnonzero(~keep)
        sets = []
        for i in ins:
            for o in outs:
                s = keep.copy()
                s[i], s[o] = False, True
                sets.append(np.flatnonzero(s))
        if not sets:
            break
        sets = np.array(sets)
        c = _cond_rows(u, sets)
        examined += len(sets)
        j = int(np.argmax(c))
        if c[j] > best * (1 + 1e-12):
            best = float(c[j])
            keep = np.zeros(m, bool)
            keep[sets[j]] = True
            improved = True
    return WorstCase(keep, best, False, examined)
