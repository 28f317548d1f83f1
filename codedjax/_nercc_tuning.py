"""NeRCC's joint tuning: the encoder and decoder smoothing weights chosen together.

:func:`tune_nercc` codes validation queries with each encoder weight, runs the
worker function on them, decodes every straggler pattern with each decoder weight
and keeps the pair of least validation MSE (the smoothers are in
``codedjax._nercc_kernels``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import (
    check_floating,
    check_int,
    check_mask,
    check_vector,
    concrete_finite,
    concrete_points,
)
from ._batched_linalg import HI
from ._chebyshev import chebyshev_points
from ._dtypes import resolve_accum_dtype
from ._nercc_kernels import spline_encoding_matrix, spline_matrix
from ._sampling import sample_masks
from ._threads import serialised_call

#: Default smoothing grid of :func:`tune_nercc` (always includes 0, interpolation).
DEFAULT_SMOOTHING_GRID = (0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


class NerccTuning(NamedTuple):
    """Record of :func:`tune_nercc`.

    Attributes:
        encoder_smoothing: chosen lambda_e (a Python float).
        decoder_smoothing: chosen lambda_d (a Python float).
        mse: validation MSE of the decoded predictions at the chosen pair.
        grid_mse: numpy [Le, Ld], the validation MSE of every pair.
        encoder_grid: numpy [Le], the lambda_e values tried (sorted, with 0).
        decoder_grid: numpy [Ld], the lambda_d values tried (sorted, with 0).
        num_masks: number of straggler patterns averaged over.
        num_responses: N, responders per pattern (None for user masks of varying
            size).
    """

    encoder_smoothing: float
    decoder_smoothing: float
    mse: float
    grid_mse: np.ndarray
    encoder_grid: np.ndarray
    decoder_grid: np.ndarray
    num_masks: int
    num_responses: int | None


def _grid(fname: str, name: str, grid: Sequence[float]) -> np.ndarray:
    g = np.asarray(grid, dtype=np.float64).reshape(-1)
    if g.size == 0 or not np.all(np.isfinite(g)) or np.any(g < 0):
        raise ValueError(
            f"{fname}: {name} must be a non-empty sequence of finite numbers >= 0, "
            f"got {list(np.asarray(grid).reshape(-1))}"
        )
    return np.unique(np.concatenate([[0.0], g]))


@jax.jit
def _grid_decoders(masks, alpha, beta, lams):
    """[Ld, T, K, M] decoding matrices and ok [Ld, T] for every (lam_d, mask)."""

    def one(mk, lam):
        a, count = spline_matrix(alpha, mk, beta, lam)
        return a, count >= 2

    return jax.vmap(jax.vmap(one, in_axes=(0, None)), in_axes=(None, 0))(masks, lams)


@jax.jit
def _grid_mse(dec, ok, y, truth):
    """MSE [Ld] of decoded predictions for every decoder value, averaged over masks.

    dec [Ld, T, K, M], ok [Ld, T], y [V, M, F], truth [V, K, F]. A scan over Ld
    keeps the memory at one [T, V, K, F] error array.
    """

    def one_lam(args):
        a, good = args  # [T, K, M], [T]
        err = jnp.einsum("tkm,vmf->tvkf", a, y, precision=HI) - truth[None]
        per_mask = jnp.mean(err * err, axis=(1, 2, 3))
        per_mask = jnp.where(good, per_mask, jnp.asarray(jnp.inf, y.dtype))
        return jnp.mean(per_mask)

    return jax.lax.map(one_lam, (dec, ok))


def tune_nercc(
    key: jax.Array,
    fn: Callable[[jax.Array], jax.Array],
    x_val: Any,
    *,
    num_workers: int,
    num_responses: int | None = None,
    beta: ArrayLike = None,
    alpha: ArrayLike = None,
    grid: Sequence[float] = DEFAULT_SMOOTHING_GRID,
    decoder_grid: Sequence[float] | None = None,
    num_masks: int = 64,
    masks: ArrayLike = None,
    progress: Callable | None = None,
) -> NerccTuning:
    r"""Choose NeRCC's (encoder, decoder) smoothing jointly on validation data.

    For every lambda_e of the grid the validation inputs are encoded, the model is
    run once on all coded inputs (one batched call of ``fn``), and the predictions
    are decoded with every lambda_d of the grid under every straggler pattern; the
    pair with the smallest mean squared error against the uncoded predictions
    ``fn(x)`` is chosen:

    .. math::
        (\lambda_e, \lambda_d) = \arg\min \frac{1}{T V K} \sum_{t, v, k}
        \lVert \hat f_{\lambda_e, \lambda_d, S_t}(X_{v,k}) - f(X_{v,k})
        \rVert^2 / F.

    The decoding matrices depend only on (mask, lambda_d) and are built once and
    reused for every lambda_e. Both grids always include 0 (interpolation).

    Args:
        key: typed PRNG key for the straggler patterns (unused when ``masks`` is
            given).
        fn: the model, batched: [B, ...] -> [B, ...] (called eagerly, once per
            lambda_e, on B = V * M coded inputs; wrap it with
            :func:`low_precision_worker` to simulate low-precision workers).
        x_val: [V, K, ...] validation inputs: V groups of the K queries coded
            together.
        num_workers: M (static).
        num_responses: N responders per pattern (uniform straggler model, patterns
            from :func:`sample_masks`); not needed when ``masks`` is given.
        beta: [K] data points (default first-kind Chebyshev).
        alpha: [M] worker points (default second-kind Chebyshev).
        grid: smoothing values tried for both stages (0 is added).
        decoder_grid: optional separate grid for lambda_d.
        num_masks: T, number of random patterns (ignored when ``masks`` is given).
        masks: optional bool [T, M] patterns of any straggler model (e.g. the
            ``mask`` of :func:`sample_arrivals`).
        progress: optional callable that wraps an iterable to show progress over
            the encoder grid, e.g. ``tqdm.tqdm`` (the library itself depends on no
            progress-bar package).

    Returns:
        NerccTuning with the chosen pair, its MSE and the whole MSE grid.

    Raises:
        ValueError: bad grids (negative, non-finite, empty), x_val not [V, K, ...]
            with K >= 2, N < 2, neither num_responses nor masks, masks not [T, M],
            an ``fn`` output whose leading axis is not the batch.
        TypeError: non-floating x_val, non-int sizes, bad key.

    Examples:
        >>> import jax, jax.numpy as jnp, codedjax as cj
        >>> x = jax.random.normal(jax.random.key(0), (4, 5, 3))
        >>> t = cj.tune_nercc(jax.random.key(1), jnp.tanh, x, num_workers=12,
        ...                   num_responses=9, grid=(1e-3,), num_masks=8)
        >>> t.grid_mse.shape, t.encoder_grid.tolist()
        ((2, 2), [0.0, 0.001])

    References:
        P. Moradi and M. A. Maddah-Ali, NeRCC: nested-regression coded
        computing for resilient distributed prediction serving systems,
        arXiv:2402.04377.
    """
    fname = "tune_nercc"
    m = check_int(fname, "num_workers", num_workers, minimum=2)
    x_val = check_floating(fname, "x_val", x_val)
    if x_val.ndim < 2 or x_val.shape[1] < 2:
        raise ValueError(
            f"{fname}: x_val must have shape [V, K, ...] with K >= 2, got "
            f"{tuple(x_val.shape)}"
        )
    v, k = x_val.shape[:2]
    if 0 in x_val.shape:
        raise ValueError(
            f"{fname}: x_val must not be empty (at least one validation query, "
            f"every axis at least one entry), got shape {tuple(x_val.shape)}"
        )
    acc = resolve_accum_dtype("tune_nercc", x_val.dtype)
    enc_grid = _grid(fname, "grid", grid)
    dec_grid = _grid(
        fname, "decoder_grid", grid if decoder_grid is None else decoder_grid
    )
    beta = (
        chebyshev_points(k, kind=1, dtype=acc)
        if beta is None
        else check_vector(fname, "beta", beta, length=k)
    )
    alpha = (
        chebyshev_points(m, kind=2, dtype=acc)
        if alpha is None
        else check_vector(fname, "alpha", alpha, length=m)
    )
    concrete_points(fname, "beta", beta)
    concrete_finite(fname, "alpha", alpha)
    beta, alpha = beta.astype(acc), alpha.astype(acc)
    if masks is None:
        if num_responses is None:
            raise ValueError(f"{fname}: give num_responses (N) or masks, got neither")
        n = check_int(fname, "num_responses", num_responses, minimum=2)
        if n > m:
            raise ValueError(
                f"{fname}: num_responses (N) must be at most num_workers (M={m}), "
                f"got {n}"
            )
        t = check_int(fname, "num_masks", num_masks, minimum=1)
        masks = sample_masks(key, m, n, shape=(t,))
    else:
        masks = check_mask(fname, masks, m, name="masks")
        if masks.ndim != 2:
            raise ValueError(
                f"{fname}: masks must have shape [T, M] = [T, {m}], got "
                f"{tuple(masks.shape)}"
            )
        sizes = np.unique(np.asarray(masks.sum(-1)))
        n = int(sizes[0]) if sizes.size == 1 else None
    t = masks.shape[0]

    x_flat = x_val.astype(acc).reshape(v, k, -1)
    truth = _call(fname, fn, x_val.reshape((v * k,) + x_val.shape[2:]), v * k)
    truth = truth.astype(acc).reshape(v, k, -1)

    # batched Cholesky inside: one such program at a time on CPU
    dec, ok = serialised_call(
        _grid_decoders, masks, alpha, beta, jnp.asarray(dec_grid, acc)
    )
    rows = []
    it = enc_grid
    if progress is not None and progress is not False:
        if not callable(progress):
            raise TypeError(
                f"{fname}: progress must be a callable wrapping an iterable (e.g. "
                f"tqdm.tqdm) or None, got {type(progress).__name__}"
            )
        it = progress(enc_grid)
    for lam_e in it:
        e = spline_encoding_matrix(beta, alpha, jnp.asarray(lam_e, acc))  # [M, K]
        coded = jnp.einsum("mk,vkf->vmf", e, x_flat, precision=HI)
        coded = coded.reshape((v * m,) + x_val.shape[2:])
        y = _call(fname, fn, coded, v * m).astype(acc).reshape(v, m, -1)
        rows.append(np.asarray(_grid_mse(dec, ok, y, truth), dtype=np.float64))
    grid_mse = np.stack(rows)
    score = np.where(np.isfinite(grid_mse), grid_mse, np.inf)
    ie, id_ = np.unravel_index(int(np.argmin(score)), score.shape)
    return NerccTuning(
        encoder_smoothing=float(enc_grid[ie]),
        decoder_smoothing=float(dec_grid[id_]),
        mse=float(grid_mse[ie, id_]),
        grid_mse=grid_mse,
        encoder_grid=enc_grid,
        decoder_grid=dec_grid,
        num_masks=t,
        num_responses=n,
    )


def _call(fname, fn, x, batch):
    out = jnp.asarray(fn(x))
    if out.ndim < 1 or out.shape[0] != batch:
        raise ValueError(
            f"{fname}: fn must map [B, ...] to [B, ...] (batched model), got output "
            f"shape {tuple(out.shape)} for B = {batch}"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"{fname}: fn must return a floating array, got {out.dtype}")
    return out
