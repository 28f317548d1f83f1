"""The exhaustive worst and average condition number of the literature's codes:
their generator rows (circle, Chebyshev, monomial, Gaussian random) and every
responding set of a size examined by batched float64 SVDs (docs/theory.md
section 8)."""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np

from ._argchecks import check_int
from ._bounds_args import check_responses, check_seeds, check_sizes
from ._exact_condition import chebyshev_rows, missing_set_blocks

#: The evaluation bases of the condition-number study: the generator matrices
#: :func:`generator_matrix` builds and :func:`exhaustive_condition` examines. They
#: are the bases of the catalogue's codes whose decoders solve a system
#: (``codedjax.catalogue``; :data:`BASIS` maps each such code family to its
#: basis), ``"chebyshev"`` (the Lagrange codes), ``"circle"`` and ``"random"``,
#: and two references: ``"monomial"`` (the real Vandermonde baseline of
#: polynomial codes) and ``"chebyshev_equilibrated"`` (the Chebyshev rows scaled
#: as ChebyLS factorises them). Bases, not serving schemes: which schemes exist
#: and where they apply is the catalogue's.
BASES = ("circle", "chebyshev", "chebyshev_equilibrated", "monomial", "random")

#: The basis of :data:`BASES` in which each code family of the catalogue
#: (``codedjax.Scheme.family``) decodes; the other families (uncoded,
#: replication, Berrut, NeRCC, RepApprox, parity) solve no such system.
BASIS = {"lagrange": "chebyshev", "circle": "circle", "random": "random"}


class ExhaustiveCondition(NamedTuple):
    """Result of :func:`exhaustive_condition`.

    Attributes:
        worst: the largest condition number over every responding set of the size
            (for ``"random"``: over every set of every draw).
        mean: the average over every responding set (for ``"random"``: over every
            set of every draw, each draw weighted equally).
        mask: bool [M], a responding set that attains ``worst`` (in the draw that
            attains it).
        num_examined: responding sets evaluated, C(M, N) per draw.
        draws_worst: per draw, its worst case (one entry for a deterministic code).
        draws_mean: per draw, its average.
    """

    worst: float
    mean: float
    mask: np.ndarray
    num_examined: int
    draws_worst: tuple[float, ...]
    draws_mean: tuple[float, ...]


def _scheme(fname: str, scheme: Any) -> str:
    if scheme not in BASES:
        raise ValueError(
            f"{fname}: scheme must be one of the bases {BASES}, got {scheme!r}"
        )
    return scheme


def generator_matrix(
    *, scheme: str, num_workers: int, num_coeffs: int, seed: int = 0
) -> np.ndarray:
    r"""The float64 generator rows [M, D] whose responding rows a decoder solves.

    - ``"circle"``: V[j, m] = alpha_j^m, alpha_j = exp(2 pi i j / M) (complex; the
      circle code of Ramamoorthy and Tang, whose rotation embedding realises each
      entry as a 2 x 2 rotation with the same condition numbers);
    - ``"chebyshev"``: T[j, m] = T_m(cos((2j + 1) pi / (2M))), the raw
      Chebyshev-Vandermonde matrix at first-kind points (Fahim and Cadambe);
      ``"chebyshev_equilibrated"``: its columns scaled to unit norm over all M
      workers, the matrix ChebyLS factorises (docs/theory.md section 2);
    - ``"monomial"``: x_j^m at M equispaced points x = linspace(-1, 1, M) (the real
      Vandermonde baseline of polynomial codes);
    - ``"random"``: :func:`codedjax._random_kernels.gaussian_encoding_matrix` with
      ``jax.random.key(seed)`` (N(0, 1/K) entries, D = K; drawn in float32, so the
      same numbers with or without float64).

    Args:
        scheme: the basis, one of :data:`BASES`.
        num_workers: M. num_coeffs: D <= M (K for ``"random"``).
        seed: the draw of ``"random"`` (ignored otherwise).

    Returns:
        [M, D] float64 (complex128 for ``"circle"``).

    Raises:
        ValueError: an unknown basis, D > M. TypeError: non-int sizes or seed.

    Examples:
        >>> import numpy as np, codedjax.bounds as cb
        >>> v = cb.generator_matrix(scheme="circle", num_workers=8, num_coeffs=3)
        >>> bool(np.allclose(v.conj().T @ v, 8 * np.eye(3)))
        True
    """
    fname = "generator_matrix"
    sc = _scheme(fname, scheme)
    m, d = check_sizes(fname, num_workers, num_coeffs)
    s = check_int(fname, "seed", seed, minimum=0)
    if sc == "circle":
        t = 2.0 * np.pi * np.mod(np.arange(m)[:, None] * np.arange(d)[None, :], m) / m
        return np.cos(t) + 1j * np.sin(t)
    if sc == "chebyshev":
        return chebyshev_rows(m, d, "raw")
    if sc == "chebyshev_equilibrated":
        return chebyshev_rows(m, d, "equilibrated")
    if sc == "monomial":
        return np.vander(np.linspace(-1.0, 1.0, m), d, increasing=True)
    import jax  # the draw itself: codedjax's Gaussian encoding matrix

    from ._random_kernels import gaussian_encoding_matrix

    g = gaussian_encoding_matrix(jax.random.key(s), num_inputs=d, num_workers=m)
    return np.asarray(g, dtype=np.float64)


def _all_sets_cond(v: np.ndarray, n: int, chunk: int) -> tuple[np.ndarray, int]:
    """cond of every N-row subset of v [M, D] (missing sets in lexicographic order)
    and the index of the first worst set's missing tuple; float64 batched SVDs."""
    s = v.shape[0] - n
    return np.concatenate([c for _, c in missing_set_blocks(v, s, chunk)]), s


def _mask_of(index: int, m: int, s: int) -> np.ndarray:
    """The responding mask of the ``index``-th missing s-set (lexicographic)."""
    miss = next(itertools.islice(itertools.combinations(range(m), s), index, None))
    mask = np.ones(m, bool)
    mask[list(miss)] = False
    return mask


def exhaustive_condition(
    *,
    scheme: str,
    num_workers: int,
    num_coeffs: int,
    num_responses: int | None = None,
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    max_sets: int = 1_000_000,
    chunk: int = 20_000,
) -> ExhaustiveCondition:
    r"""Exhaustive worst-case and average condition number over every responding set.

    .. math::
        \max_{|S| = N} \kappa(B_S), \qquad
        \binom{M}{N}^{-1} \sum_{|S| = N} \kappa(B_S),

    for the generator rows B of :func:`generator_matrix` (every N-subset of the M
    rows, N = D by default: the square systems that the papers' threshold decoders
    solve). Batched float64 SVDs over chunks of sets (C(31, 29) = 465 sets take a
    few milliseconds, C(20, 16) = 4,845 about 0.1 s). For ``"random"`` every set of
    every draw in ``seeds`` is evaluated; ``worst`` and ``mean`` pool the draws and
    ``draws_worst`` / ``draws_mean`` give each draw.

    Known values (docs/theory.md section 8): at M = 31, D = 29 the raw Chebyshev
    worst case is 1.22e4 (the figure Fahim and Cadambe publish) and the
    equilibrated one 8.87e3; with every worker responding the circle and the
    equilibrated Chebyshev matrices have cond 1 (their columns are orthogonal and of
    equal norm).

    Args:
        scheme: the basis, one of :data:`BASES`.
        num_workers: M. num_coeffs: D <= M (K for ``"random"``).
        num_responses: N with D <= N <= M (default D).
        seeds: the draws of ``"random"`` (ignored otherwise), at least one.
        max_sets: refuse (ValueError) when C(M, N) exceeds it.
        chunk: sets per batched SVD.

    Returns:
        ExhaustiveCondition(worst, mean, mask, num_examined, draws_worst,
        draws_mean). Values above about 1e15 are not resolved by float64.

    Raises:
        ValueError: an unknown basis, D > M, N outside [D, M], C(M, N) > max_sets,
            no seeds.
        TypeError: non-int sizes or seeds.

    Examples:
        >>> import codedjax.bounds as cb
        >>> r = cb.exhaustive_condition(scheme="circle", num_workers=8, num_coeffs=6)
        >>> round(r.worst, 3), r.num_examined
        (7.249, 28)

    References:
        A. Ramamoorthy and L. Tang, Numerically stable coded matrix computations via
        circulant and rotation matrix embeddings, arXiv:1910.06515; M. Fahim and
        V. R. Cadambe, Numerically stable polynomially coded computing,
        arXiv:1903.08326.
    """
    fname = "exhaustive_condition"
    sc = _scheme(fname, scheme)
    m, d = check_sizes(fname, num_workers, num_coeffs)
    n = d if num_responses is None else check_responses(fname, num_responses, m)
    if n < d:
        raise ValueError(
            f"{fname}: num_responses (N) must be at least num_coeffs (D={d}), got {n}"
        )
    max_sets = check_int(fname, "max_sets", max_sets, minimum=1)
    chunk = check_int(fname, "chunk", chunk, minimum=1)
    # checked for every scheme (a bad value is a mistake even where it is unused)
    seeds = check_seeds(fname, seeds)
    total = math.comb(m, n)
    if total > max_sets:
        raise ValueError(
            f"{fname}: C(M, N) = C({m}, {n}) = {total} responding sets exceed "
            f"max_sets={max_sets}; pass a larger max_sets or a smaller configuration"
        )
    draws = seeds if sc == "random" else (0,)
    worst, mean, best_mask = [], [], None
    for s in draws:
        v = generator_matrix(scheme=sc, num_workers=m, num_coeffs=d, seed=s)
        c, miss = _all_sets_cond(v, n, chunk)
        i = int(np.argmax(c))
        if not worst or c[i] > max(worst):
            best_mask = _mask_of(i, m, miss)
        worst.append(float(c[i]))
        mean.append(float(np.mean(c)))
    return ExhaustiveCondition(
        max(worst),
        float(np.mean(mean)),
        best_mask,
        total * len(draws),
        tuple(worst),
        tuple(mean),
    )
