"""NeRCC's experiment on MNIST: BACC against NeRCC against RepApprox, LeNet5 and a ViT.

Usage::

    python -m models.nercc_experiment --quick --out results/nercc   # < 5 min, 2 CPUs
    python -m models.nercc_experiment --out results/nercc           # the full grid

For every model and every cell (K queries, M workers, S stragglers) of the grid, the
K query images of a batch are the data that is coded (the images are encoded, not
features): each scheme encodes the batch into M coded images, every worker runs the
model on its coded image (all workers of all batches in one batched call), S random
workers are dropped (T uniform straggler patterns per cell, drawn from one key per
cell and shared by every batch, scheme and model), and the responders' logits are
decoded back into K logit vectors. BACC and NeRCC decode with the library's decoding
matrices (one matrix per mask, applied to every batch by matmul); RepApprox with
``repapprox_decode``. Reported per scheme:

- ``mse``: mean over batches, masks, queries and the 10 logits of (decoded logit -
  uncoded logit)^2, and ``nmse`` = mse / mean(uncoded logit^2), comparable across
  models;
- ``rel_acc``: accuracy of the argmax of the decoded logits on the true labels, divided
  by the uncoded model's accuracy on the same images (LeTCC's and NeRCC's RelAcc);
- conservative standard errors (``mse_se``, ``rel_acc_se``): the standard errors
  over image batches and over masks added in quadrature (for RelAcc, of the change
  coded minus uncoded accuracy), and for NeRCC the smoothing pair chosen on the
  VALIDATION images (with its validation MSE, and that of (0, 0)).

Schemes (data points beta: K first-kind Chebyshev points; worker points alpha: M
second-kind points, for BACC and NeRCC alike):

- ``bacc``: Berrut encoder and decoder (Jahani-Nezhad & Maddah-Ali).
- ``nercc``: smoothing-spline encoder and decoder; (lambda_e, lambda_d) are tuned
  jointly for each cell by :func:`codedjax.tune_nercc` on the validation split, under
  the cell's straggler model (uniform N = M - S of M), never on test images.
- ``repapprox``: replication c (``--replication``, default 2) plus M - Kc coded
  servers, where M >= Kc, with the library's default layout and unified Berrut
  decoder (every query with a responding replica is exact).

Run time on 2 CPU cores (jax 0.10.2): ``--quick`` about 3 CPU-minutes including the
training of both quick models; the full grid about 7 CPU-minutes including full
training. Checkpoints in ``--ckpt-dir`` are reused.

References:
    P. Moradi, B. Tahmasebi and M. A. Maddah-Ali, NeRCC: nested-regression coded
    computing for resilient distributed prediction serving systems, arXiv:2402.04377;
    T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
    arXiv:2009.08327.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from models.common import progress
from models.mnist import MnistSplit, check_images, load_mnist
from models.train_mnist import MODEL_NAMES, load_or_train, logits_fn

__all__ = [
    "SCHEMES",
    "CachedFn",
    "ExperimentConfig",
    "compare_schemes",
    "main",
    "quick_config",
    "run_cell",
    "run_experiment",
    "straggler_counts",
]

SCHEMES = ("bacc", "nercc", "repapprox")
PAPER_CLAIM = "NeRCC reports up to 23% lower MSE than BACC (LeNet5, RepVGG, ViT)"
PROTOTYPE_NOTE = (
    "a prototype made while designing (LeNet5 at 95% test accuracy, K in {10, 20}, "
    "M in {2K, 3K, 4K}, S up to 40%) found tuned NeRCC below BACC in 24 of 24 cells, "
    "mean MSE ratio 0.52, RelAcc a tie within noise"
)


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """The grid and the sample sizes of the experiment.

    Attributes:
        models: model names (``"lenet5"``, ``"vit"``).
        num_inputs: the K values (queries coded together).
        worker_factors: M = factor * K for each factor.
        straggler_fractions: S = round(fraction * M) for each fraction (duplicates
            and values with fewer than 2 responders dropped).
        num_test: test images used (the first ``num_test`` of the fixed test split,
            cut to a multiple of K: B = num_test // K batches).
        num_val: validation images for tuning NeRCC (V = num_val // K groups).
        test_masks: straggler patterns per cell (T), shared by every test batch and
            every scheme.
        val_masks: straggler patterns in the NeRCC tuning (drawn independently).
        smoothing_grid: values tried for lambda_e and lambda_d (0 always included).
        replication: RepApprox replication factor c.
        quick_train: use the quick training preset (and its checkpoint).
        ckpt_dir: directory of the model checkpoints.
        seed: root seed of the straggler masks.
    """

    models: tuple[str, ...] = MODEL_NAMES
    num_inputs: tuple[int, ...] = (10, 20)
    worker_factors: tuple[int, ...] = (2, 3, 4, 5)
    straggler_fractions: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4)
    num_test: int = 1000
    num_val: int = 500
    test_masks: int = 64
    val_masks: int = 32
    smoothing_grid: tuple[float, ...] = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    replication: int = 2
    quick_train: bool = False
    ckpt_dir: str = "checkpoints"
    seed: int = 0

    def __post_init__(self):
        fname = "ExperimentConfig"
        bad = [m for m in self.models if m not in MODEL_NAMES]
        if bad:
            raise ValueError(f"{fname}: models must be in {MODEL_NAMES}, got {bad}")
        if not self.num_inputs or min(self.num_inputs) < 2:
            raise ValueError(
                f"{fname}: num_inputs (K) must be >= 2, got {self.num_inputs}"
            )
        if not self.worker_factors or min(self.worker_factors) < 1:
            raise ValueError(
                f"{fname}: worker_factors must be >= 1, got {self.worker_factors}"
            )
        if not self.straggler_fractions or not all(
            0.0 <= f < 1.0 for f in self.straggler_fractions
        ):
            raise ValueError(
                f"{fname}: straggler_fractions (S/M) must lie in [0, 1), got "
                f"{self.straggler_fractions}"
            )
        for name in ("num_test", "num_val", "test_masks", "val_masks", "replication"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"{fname}: {name} must be >= 1, got {getattr(self, name)}"
                )
        if max(self.num_inputs) > self.num_test:
            raise ValueError(
                f"{fname}: K = {max(self.num_inputs)} is larger than num_test = "
                f"{self.num_test} test images"
            )
        if max(self.num_inputs) > self.num_val:
            raise ValueError(
                f"{fname}: K = {max(self.num_inputs)} is larger than num_val = "
                f"{self.num_val} validation images"
            )
        if any(g < 0 or not math.isfinite(g) for g in self.smoothing_grid):
            raise ValueError(
                f"{fname}: smoothing_grid must hold finite values >= 0, got "
                f"{self.smoothing_grid}"
            )


def quick_config(**overrides) -> ExperimentConfig:
    """The ``--quick`` configuration: M in {2K, 3K, 4K}, 400 test and 200 validation
    images, fewer masks and a coarser smoothing grid, quick-trained models."""
    base = dict(
        worker_factors=(2, 3, 4),
        num_test=400,
        num_val=200,
        test_masks=32,
        val_masks=16,
        smoothing_grid=(0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
        quick_train=True,
    )
    base.update(overrides)
    return ExperimentConfig(**base)


def straggler_counts(num_workers: int, fractions: Sequence[float]) -> list[int]:
    """S = round(f M) for each fraction, unique, sorted, keeping N = M - S >= 2."""
    out = sorted({int(round(f * num_workers)) for f in fractions})
    return [s for s in out if num_workers - s >= 2]


class CachedFn:
    """Memoise a batched model by the exact bytes of its input.

    NeRCC's tuning runs the model on the same coded validation images for every
    straggler count of a (K, M) pair; the cache returns the stored logits instead of
    recomputing them. Keys are SHA-1 digests of the input's bytes with its shape and
    dtype, so only an identical input is served from the cache.
    """

    def __init__(self, fn: Callable[[jax.Array], jax.Array]):
        self.fn = fn
        self.cache: dict[tuple, jax.Array] = {}
        self.images_run = 0

    def __call__(self, x) -> jax.Array:
        arr = np.ascontiguousarray(np.asarray(x))
        key = (arr.shape, arr.dtype.str, hashlib.sha1(arr.tobytes()).hexdigest())
        hit = self.cache.get(key)
        if hit is None:
            hit = jnp.asarray(self.fn(arr))
            self.cache[key] = hit
            self.images_run += arr.shape[0]
        return hit


# ------------------------------------------------------------------------ coding

_HI = jax.lax.Precision.HIGHEST


@functools.partial(jax.jit, static_argnames=("num_workers", "shape"))
def uniform_masks(key, num_responses, *, num_workers: int, shape: tuple[int, ...]):
    """bool [*shape, M]: N = ``num_responses`` random responders of M, every subset
    equally likely.

    The same construction as :func:`codedjax.sample_masks` (the N workers of lowest
    rank under i.i.d. uniforms respond), but N is a traced argument, so one compiled
    program serves every straggler count of a given M instead of one per N.
    """
    u = jax.random.uniform(key, shape + (num_workers,))
    rank = jnp.argsort(jnp.argsort(u, axis=-1, stable=True), axis=-1, stable=True)
    return rank < num_responses


def _pad(points: jax.Array, size: int) -> jax.Array:
    """Pad a point vector to ``size`` with distinct values outside [-1, 1]."""
    extra = size - points.shape[0]
    fill = 2.0 + jnp.arange(extra, dtype=points.dtype)
    return jnp.concatenate([points, fill])


@jax.jit
def _bacc_matrices(masks, alpha, beta):
    """Berrut decoding matrices [T, K, M] and ok [T] (cj.berrut_decoding_matrix)."""
    r = jax.vmap(lambda mk: cj.berrut_decoding_matrix(mk, alpha, beta))(masks)
    return r.value, r.ok


@jax.jit
def _nercc_matrices(masks, alpha, beta, lam):
    """NeRCC decoding matrices [T, K, M] and ok [T] (cj.nercc_decoding_matrix)."""
    r = jax.vmap(lambda mk: cj.nercc_decoding_matrix(mk, alpha, beta, smoothing=lam))(
        masks
    )
    return r.value, r.ok


def decoding_matrices(scheme, masks, alpha, beta, *, smoothing=0.0, pad_to=None):
    """The decoding matrices [T, K, M] of ``scheme`` ("bacc" or "nercc") for masks
    [T, M], from the library's public matrix functions.

    The masks and points are padded to ``pad_to = (K', M')`` (unused padded workers:
    mask False; padded evaluation points: sliced off), so that every cell of the grid
    runs one compiled program; the padding does not change the fit, because the
    decoders use only the responding workers.
    """
    t, m = masks.shape
    k = beta.shape[0]
    kp, mp = pad_to if pad_to is not None else (k, m)
    kp, mp = max(kp, k), max(mp, m)
    masks_p = jnp.concatenate([masks, jnp.zeros((t, mp - m), bool)], axis=1)
    alpha_p, beta_p = _pad(alpha, mp), _pad(beta, kp)
    if scheme == "bacc":
        a, ok = _bacc_matrices(masks_p, alpha_p, beta_p)
    else:
        lam = jnp.asarray(smoothing, jnp.float32)
        a, ok = _nercc_matrices(masks_p, alpha_p, beta_p, lam)
    return a[:, :k, :m], ok


@jax.jit
def _apply_encoder(e, x):
    """e [M, K], x [B, K, ...] -> [B, M, ...]."""
    b, k = x.shape[:2]
    flat = x.reshape(b, k, -1)
    out = jnp.einsum("mk,bkp->bmp", e, flat, precision=_HI)
    return out.reshape((b, e.shape[0]) + x.shape[2:])


@jax.jit
def _apply_decoders(a, y):
    """a [T, K, M], y [B, M, F] -> [B, T, K, F]."""
    return jnp.einsum("tkm,bmf->btkf", a, y, precision=_HI)


def _run_workers(fn, coded: jax.Array) -> jax.Array:
    """coded [B, M, 28, 28, 1] -> logits [B, M, F], one batched model call."""
    b, m = coded.shape[:2]
    out = jnp.asarray(fn(coded.reshape((b * m,) + coded.shape[2:])))
    return out.reshape(b, m, -1).astype(jnp.float32)


@jax.jit
def _repapprox_encode_t(x, layout):
    """x [B, K, ...] -> [B, M, ...]: the batch rides along as trailing features."""
    xt = jnp.moveaxis(x, 0, 1)
    return jnp.moveaxis(cj.repapprox_encode(xt, layout), 1, 0)


@jax.jit
def _repapprox_decode_t(y, masks, layout):
    """y [B, M, F], masks [T, M] -> value [B, T, K, F], ok [T], exact [T, K]."""
    yt = jnp.moveaxis(y, 0, 1)  # [M, B, F]
    r = jax.vmap(lambda mk: cj.repapprox_decode(yt, mk, layout))(masks)
    return jnp.moveaxis(r.value, 2, 0), r.ok, r.exact


def _se_two_way(v: np.ndarray) -> float:
    """Standard error of the mean of v [B, T] (B image batches crossed with T masks):
    sqrt(se over batches^2 + se over masks^2), a conservative sum of the two one-way
    standard errors (0 for a factor with a single level)."""
    b, t = v.shape
    se_b = v.mean(axis=1).std(ddof=1) / math.sqrt(b) if b > 1 else 0.0
    se_t = v.mean(axis=0).std(ddof=1) / math.sqrt(t) if t > 1 else 0.0
    return float(math.hypot(se_b, se_t))


def _metrics(dec, ok, truth, labels, uncoded_correct) -> dict:
    """dec [B, T, K, F], ok [T], truth [B, K, F], labels [B, K]."""
    dec = np.asarray(dec, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    sq = ((dec - truth[:, None]) ** 2).mean(axis=(2, 3))  # [B, T]
    mse = float(sq.mean())
    scale = float(np.mean(truth**2))
    pred = dec.argmax(-1)  # [B, T, K]
    correct = (pred == np.asarray(labels)[:, None, :]).mean(axis=2)  # [B, T]
    unc_b = np.asarray(uncoded_correct, dtype=np.float64).mean(axis=1)  # [B]
    unc = float(unc_b.mean())
    acc = float(correct.mean())
    agree = pred == truth.argmax(-1)[:, None, :]
    # the error bar of RelAcc is that of the change the coding causes (coded minus
    # uncoded accuracy of the same batch), divided by the uncoded accuracy
    change_se = _se_two_way(correct - unc_b[:, None])
    return {
        "mse": mse,
        "mse_se": _se_two_way(sq),
        "nmse": mse / scale if scale > 0 else float("nan"),
        "rel_acc": acc / unc if unc > 0 else float("nan"),
        "rel_acc_se": change_se / unc if unc > 0 else float("nan"),
        "accuracy": acc,
        "uncoded_accuracy": unc,
        "agreement": float(agree.mean()),
        "ok_fraction": float(np.mean(np.asarray(ok))),
    }


def _check_cell(fname, test_x, test_y, val_x, k, m, s):
    check_images(test_x, name="test_x", func=fname)
    check_images(val_x, name="val_x", func=fname)
    if np.shape(test_y) != (np.shape(test_x)[0],):
        raise ValueError(
            f"{fname}: test_y must have shape [{np.shape(test_x)[0]}] (one label per "
            f"test image), got {np.shape(test_y)}"
        )
    for name, v in (("K", k), ("M", m), ("S", s)):
        if not isinstance(v, int | np.integer) or isinstance(v, bool):
            raise TypeError(f"{fname}: {name} must be an int, got {type(v).__name__}")
    if k < 2:
        raise ValueError(f"{fname}: K (num_inputs) must be >= 2, got {k}")
    if k > np.shape(test_x)[0]:
        raise ValueError(
            f"{fname}: K (num_inputs) = {k} is larger than the number of test images "
            f"{np.shape(test_x)[0]}"
        )
    if k > np.shape(val_x)[0]:
        raise ValueError(
            f"{fname}: K (num_inputs) = {k} is larger than the number of validation "
            f"images {np.shape(val_x)[0]}"
        )
    if m < 2:
        raise ValueError(f"{fname}: M (num_workers) must be >= 2, got {m}")
    if not 0 <= s < m:
        raise ValueError(
            f"{fname}: S (num_stragglers) must satisfy 0 <= S < M = {m}, got {s}"
        )
    if m - s < 2:
        raise ValueError(
            f"{fname}: S (num_stragglers) = {s} leaves N = M - S = {m - s} responders; "
            "NeRCC's spline needs at least 2"
        )


def cell_key(seed: int, k: int, m: int, s: int) -> jax.Array:
    """The key of a cell: the same straggler masks for every scheme and model."""
    key = jax.random.key(seed)
    for v in (k, m, s):
        key = jax.random.fold_in(key, v)
    return key


def run_cell(
    fn: Callable[[jax.Array], jax.Array],
    test_x,
    test_y,
    val_x,
    *,
    num_inputs: int,
    num_workers: int,
    num_stragglers: int,
    config: ExperimentConfig,
    schemes: Sequence[str] = SCHEMES,
) -> list[dict]:
    """Evaluate every scheme in one cell (K, M, S) of the grid.

    The first B K test images (B = min(n, ``config.num_test``) // K) form B batches
    of K queries. ``config.test_masks`` = T straggler patterns (N = M - S uniform
    responders each) are drawn from the cell's key and applied to every batch and
    every scheme; NeRCC is tuned on V = min(v, ``config.num_val``) // K validation
    groups under ``config.val_masks`` other patterns from the same straggler model.

    Args:
        fn: the model, batched: images [B, 28, 28, 1] -> logits [B, F]. Wrap it in
            :class:`CachedFn` to reuse model runs across cells.
        test_x: [n, 28, 28, 1] test images.
        test_y: [n] labels of ``test_x``.
        val_x: [v, 28, 28, 1] validation images for tuning NeRCC.
        num_inputs: K >= 2.
        num_workers: M >= 2.
        num_stragglers: S with 0 <= S and N = M - S >= 2.
        config: sample sizes, smoothing grid, replication and seed.
        schemes: a subset of :data:`SCHEMES`; ``repapprox`` is skipped when
            M < c K.

    Returns:
        One dict per scheme with ``scheme``, ``K``, ``M``, ``S``, ``N`` and the
        metrics (``mse``, ``nmse``, ``rel_acc``, their standard errors, ...); the
        NeRCC row adds the chosen ``encoder_smoothing``, ``decoder_smoothing`` and
        the validation MSE at the chosen pair and at (0, 0); the RepApprox row
        ``replication`` and the fraction of queries recovered exactly.

    Raises:
        ValueError: images not [n, 28, 28, 1] (naming ``test_x`` or ``val_x``), K
            larger than the number of test (or validation) images, S >= M or fewer
            than 2 responders, an unknown scheme.
        TypeError: non-integer K, M or S.
    """
    fname = "run_cell"
    k, m, s = num_inputs, num_workers, num_stragglers
    _check_cell(fname, test_x, test_y, val_x, k, m, s)
    unknown = [x for x in schemes if x not in SCHEMES]
    if unknown:
        raise ValueError(f"{fname}: schemes must be in {SCHEMES}, got {unknown}")
    n = m - s
    b = min(np.shape(test_x)[0], config.num_test) // k
    v = min(np.shape(val_x)[0], config.num_val) // k
    x = jnp.asarray(np.asarray(test_x)[: b * k].reshape((b, k, 28, 28, 1)))
    labels = np.asarray(test_y)[: b * k].reshape(b, k)
    xv = jnp.asarray(np.asarray(val_x)[: v * k].reshape((v, k, 28, 28, 1)))
    truth = jnp.asarray(fn(x.reshape((b * k, 28, 28, 1)))).reshape(b, k, -1)
    uncoded_correct = np.asarray(truth).argmax(-1) == labels

    beta = cj.chebyshev_points(k, kind=1)
    alpha = cj.chebyshev_points(m, kind=2)
    pad_to = (
        max(max(config.num_inputs), k),
        max(max(config.num_inputs) * max(config.worker_factors), m),
    )
    key_test, key_val = jax.random.split(cell_key(config.seed, k, m, s))
    masks = uniform_masks(key_test, n, num_workers=m, shape=(config.test_masks,))
    base = {
        "K": k,
        "M": m,
        "S": s,
        "N": n,
        "num_batches": b,
        "num_masks": config.test_masks,
    }
    rows = []
    for scheme in schemes:
        if scheme == "bacc":
            # encoding matrix [M, K] = berrut_encode of the identity; the worker
            # points are padded (rows sliced off) so one program serves every M
            e = cj.berrut_encode(
                jnp.eye(k, dtype=jnp.float32), beta, _pad(alpha, pad_to[1])
            )[:m]
            y = _run_workers(fn, _apply_encoder(e, x))
            a, ok = decoding_matrices("bacc", masks, alpha, beta, pad_to=pad_to)
            dec = _apply_decoders(a, y)
            extra = {}
        elif scheme == "nercc":
            val_masks = uniform_masks(
                key_val, n, num_workers=m, shape=(config.val_masks,)
            )
            tuning = cj.tune_nercc(
                key_val,
                fn,
                xv,
                num_workers=m,
                beta=beta,
                alpha=alpha,
                grid=config.smoothing_grid,
                masks=val_masks,
            )
            e = cj.nercc_encoding_matrix(
                beta, alpha, smoothing=tuning.encoder_smoothing
            )
            y = _run_workers(fn, _apply_encoder(e, x))
            a, ok = decoding_matrices(
                "nercc",
                masks,
                alpha,
                beta,
                smoothing=tuning.decoder_smoothing,
                pad_to=pad_to,
            )
            dec = _apply_decoders(a, y)
            extra = {
                "encoder_smoothing": tuning.encoder_smoothing,
                "decoder_smoothing": tuning.decoder_smoothing,
                "val_mse": tuning.mse,
                "val_mse_at_zero": float(tuning.grid_mse[0, 0]),
                "num_val_groups": v,
                "num_val_masks": config.val_masks,
            }
        else:  # repapprox
            c = config.replication
            if m < c * k:
                continue
            layout = cj.repapprox_layout(num_tasks=k, replication=c, num_workers=m)
            y = _run_workers(fn, _repapprox_encode_t(x, layout))
            dec, ok, exact = _repapprox_decode_t(y, masks, layout)
            extra = {
                "replication": c,
                "exact_fraction": float(np.mean(np.asarray(exact))),
            }
        rows.append(
            {
                "scheme": scheme,
                **base,
                **_metrics(dec, ok, truth, labels, uncoded_correct),
                **extra,
            }
        )
    return rows


# ------------------------------------------------------------------------ driver


def compare_schemes(rows: Sequence[Mapping], model: str) -> dict:
    """NeRCC against BACC for one model over the cells where both ran.

    Returns:
        ``cells`` (cells with both schemes), ``nercc_below_bacc`` (cells where
        NeRCC's MSE is smaller), ``nercc_below_bacc_by_2se`` (smaller by more than
        twice the two schemes' standard errors combined in quadrature; conservative,
        since the schemes share images and masks), ``mean_mse_ratio`` (arithmetic
        mean over cells of MSE_NeRCC / MSE_BACC), ``min_mse_ratio``,
        ``max_mse_ratio``, ``mean_rel_acc_diff`` (NeRCC - BACC) and, where RepApprox
        ran, ``repapprox_cells``, ``repapprox_below_bacc`` and
        ``repapprox_mean_mse_ratio``.
    """
    by = {}
    for r in rows:
        if r["model"] == model:
            by[(r["K"], r["M"], r["S"], r["scheme"])] = r
    cells = sorted({(k, m, s) for (k, m, s, _) in by})
    ratios, below, clear, dacc = [], 0, 0, []
    rep_ratios, rep_below = [], 0
    for cell in cells:
        bacc = by.get((*cell, "bacc"))
        ner = by.get((*cell, "nercc"))
        rep = by.get((*cell, "repapprox"))
        if bacc is None:
            continue
        if ner is not None:
            ratios.append(ner["mse"] / bacc["mse"])
            below += ner["mse"] < bacc["mse"]
            gap = 2 * math.hypot(ner["mse_se"], bacc["mse_se"])
            clear += (bacc["mse"] - ner["mse"]) > gap
            dacc.append(ner["rel_acc"] - bacc["rel_acc"])
        if rep is not None:
            rep_ratios.append(rep["mse"] / bacc["mse"])
            rep_below += rep["mse"] < bacc["mse"]
    out = {
        "model": model,
        "cells": len(ratios),
        "nercc_below_bacc": int(below),
        "nercc_below_bacc_by_2se": int(clear),
        "mean_mse_ratio": float(np.mean(ratios)) if ratios else float("nan"),
        "min_mse_ratio": float(np.min(ratios)) if ratios else float("nan"),
        "max_mse_ratio": float(np.max(ratios)) if ratios else float("nan"),
        "mean_rel_acc_diff": float(np.mean(dacc)) if dacc else float("nan"),
    }
    if rep_ratios:
        out.update(
            repapprox_cells=len(rep_ratios),
            repapprox_below_bacc=int(rep_below),
            repapprox_mean_mse_ratio=float(np.mean(rep_ratios)),
        )
    return out


def run_experiment(
    config: ExperimentConfig,
    out_dir,
    *,
    split: MnistSplit | None = None,
    model_fns: Mapping[str, tuple[Callable, dict]] | None = None,
    command: str = "",
    log: Callable[[str], None] | None = print,
) -> dict:
    """Run the whole grid and write ``summary.json``, ``report.md`` and the plots.

    Args:
        config: the grid.
        out_dir: output directory (created).
        split: the MNIST split (default :func:`models.mnist.load_mnist`).
        model_fns: optional ``{name: (fn, metadata)}`` to use instead of the trained
            models of ``config.models`` (tests use a tiny model).
        command: the command line, recorded in the outputs.
        log: where progress lines and the printed table go (None: silent).

    Returns:
        The summary dict written to ``summary.json``.
    """
    say = log or (lambda _msg: None)
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    split = split if split is not None else load_mnist()
    if model_fns is None:
        model_fns = {}
        for name in config.models:
            model, meta = load_or_train(
                name, config.ckpt_dir, config.quick_train, split=split, log=say
            )
            model_fns[name] = (logits_fn(model, chunk=1024), meta)
    grid = [
        (k, f * k, s)
        for k in config.num_inputs
        for f in config.worker_factors
        for s in straggler_counts(f * k, config.straggler_fractions)
    ]
    rows: list[dict] = []
    models_meta = {}
    for name, (fn, meta) in model_fns.items():
        cached = CachedFn(fn)
        tm = time.perf_counter()
        for k, m, s in progress(grid, desc=f"nercc experiment ({name})"):
            for r in run_cell(
                cached,
                split.test_x,
                split.test_y,
                split.val_x,
                num_inputs=k,
                num_workers=m,
                num_stragglers=s,
                config=config,
            ):
                rows.append({"model": name, **r})
        models_meta[name] = {
            **{kk: vv for kk, vv in meta.items() if _jsonable(vv)},
            "images_run": cached.images_run,
            "experiment_seconds": time.perf_counter() - tm,
        }
        say(
            f"[nercc_experiment] {name}: {len(grid)} cells in "
            f"{models_meta[name]['experiment_seconds']:.1f} s, "
            f"{cached.images_run} model evaluations"
        )
    comparison = {name: compare_schemes(rows, name) for name in model_fns}
    summary = {
        "command": command,
        "config": dataclasses.asdict(config),
        "models": models_meta,
        "rows": rows,
        "comparison": comparison,
        "paper_claim": PAPER_CLAIM,
        "prototype": PROTOTYPE_NOTE,
        "seconds": time.perf_counter() - t0,
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
    }
    (out / "summary.json").write_text(
        json.dumps(_clean(summary), indent=1, allow_nan=False) + "\n"
    )
    plots = _plot(rows, out)
    report = _report(summary, plots)
    (out / "report.md").write_text(report)
    say(_table(rows, comparison))
    return summary


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def _clean(obj):
    """NaN and inf -> None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _fmt(v, spec=".3g"):
    return (
        "n/a"
        if v is None or (isinstance(v, float) and not math.isfinite(v))
        else format(v, spec)
    )


def _cell_table(rows, model, k) -> list[str]:
    sub = [r for r in rows if r["model"] == model and r["K"] == k]
    by = {(r["M"], r["S"], r["scheme"]): r for r in sub}
    lines = [
        "| M | S | MSE BACC | MSE NeRCC | ratio | MSE RepApprox | nMSE BACC | "
        "nMSE NeRCC | RelAcc BACC | RelAcc NeRCC | RelAcc RepApprox | "
        "lambda_e | lambda_d |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m, s in sorted({(r["M"], r["S"]) for r in sub}):
        b, n, r = (by.get((m, s, x)) for x in SCHEMES)
        get = lambda row, key, spec=".3g": _fmt(row[key], spec) if row else "-"
        ratio = _fmt(n["mse"] / b["mse"], ".2f") if (b and n) else "-"
        lines.append(
            f"| {m} | {s} | {get(b, 'mse')} ± {get(b, 'mse_se', '.1g')} | "
            f"{get(n, 'mse')} ± {get(n, 'mse_se', '.1g')} | {ratio} | "
            f"{get(r, 'mse')} | {get(b, 'nmse')} | {get(n, 'nmse')} | "
            f"{get(b, 'rel_acc', '.3f')} | {get(n, 'rel_acc', '.3f')} | "
            f"{get(r, 'rel_acc', '.3f')} | {get(n, 'encoder_smoothing', 'g')} | "
            f"{get(n, 'decoder_smoothing', 'g')} |"
        )
    return lines


def _closing(comparison: Mapping) -> list[str]:
    lines = []
    for name, c in comparison.items():
        if not c["cells"]:
            continue
        lines.append(
            f"- **{name}**: NeRCC's MSE is below BACC's in {c['nercc_below_bacc']} of "
            f"{c['cells']} cells ({c['nercc_below_bacc_by_2se']} by more than two "
            f"combined standard errors); mean MSE ratio NeRCC/BACC "
            f"{_fmt(c['mean_mse_ratio'], '.3f')} (range "
            f"{_fmt(c['min_mse_ratio'], '.2f')} to {_fmt(c['max_mse_ratio'], '.2f')}"
            f", i.e. {_fmt(100 * (1 - c['mean_mse_ratio']), '.0f')}% lower on "
            f"average); mean RelAcc difference NeRCC - BACC "
            f"{_fmt(c['mean_rel_acc_diff'], '+.4f')}."
        )
        if "repapprox_cells" in c:
            lines.append(
                f"  RepApprox below BACC in {c['repapprox_below_bacc']} of "
                f"{c['repapprox_cells']} cells, mean MSE ratio RepApprox/BACC "
                f"{_fmt(c['repapprox_mean_mse_ratio'], '.3f')}."
            )
    lines.append(f"- Paper: {PAPER_CLAIM}. Design prototype: {PROTOTYPE_NOTE}.")
    return lines


def _report(summary: Mapping, plots: Sequence[str]) -> str:
    cfg = summary["config"]
    rows = summary["rows"]
    lines = [
        "# NeRCC experiment: BACC, NeRCC and RepApprox on MNIST",
        "",
        f"Command: `{summary['command'] or 'run_experiment(...)'}` "
        f"({summary['seconds']:.0f} s, jax {summary['jax_version']} on "
        f"{summary['backend']}).",
        "",
        f"Grid: K in {cfg['num_inputs']}, M = factor x K for factors "
        f"{cfg['worker_factors']}, S = round(f M) for f in "
        f"{cfg['straggler_fractions']}; B = {cfg['num_test']} // K test batches, "
        f"{cfg['test_masks']} straggler masks each (the same masks for every scheme); "
        f"NeRCC tuned per cell on {cfg['num_val']} validation images with "
        f"{cfg['val_masks']} masks over the grid {cfg['smoothing_grid']} (both "
        f"stages); RepApprox with c = {cfg['replication']} where M >= cK.",
        "MSE: mean squared error of decoded logits against the uncoded logits, "
        "± a conservative standard error (the standard errors over image batches "
        "and over masks, added in quadrature); nMSE = MSE / mean(uncoded "
        "logit^2); RelAcc = accuracy of the decoded argmax / uncoded accuracy on "
        "the same images. ratio = MSE NeRCC / MSE BACC. lambda_e, lambda_d: "
        "NeRCC's smoothing chosen on validation images for that cell.",
        "",
        "## Models",
        "",
        "| model | test accuracy | validation accuracy | loaded from checkpoint |",
        "|---|---|---|---|",
    ]
    for name, meta in summary["models"].items():
        lines.append(
            f"| {name} | {_fmt(meta.get('test_accuracy'), '.4f')} | "
            f"{_fmt(meta.get('val_accuracy'), '.4f')} | {meta.get('loaded', '-')} |"
        )
    lines += ["", "## Closing note", ""] + _closing(summary["comparison"])
    for name in summary["models"]:
        for k in cfg["num_inputs"]:
            lines += ["", f"## {name}, K = {k}", ""] + _cell_table(rows, name, k)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def _table(rows, comparison) -> str:
    head = f"{'model':8} {'K':>3} {'M':>4} {'S':>3} " + " ".join(
        f"{s + ' mse':>14} {s + ' relacc':>16}" for s in SCHEMES
    )
    out = [head]
    by = {(r["model"], r["K"], r["M"], r["S"], r["scheme"]): r for r in rows}
    for model, k, m, s in sorted({(r["model"], r["K"], r["M"], r["S"]) for r in rows}):
        parts = [f"{model:8} {k:>3} {m:>4} {s:>3}"]
        for sc in SCHEMES:
            r = by.get((model, k, m, s, sc))
            parts.append(
                f"{_fmt(r['mse'], '.4g'):>14} {_fmt(r['rel_acc'], '.4f'):>16}"
                if r
                else f"{'-':>14} {'-':>16}"
            )
        out.append(" ".join(parts))
    out += ["", *_closing(comparison)]
    return "\n".join(out)


def _plot(rows, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    models = sorted({r["model"] for r in rows})
    for model in models:
        sub = [r for r in rows if r["model"] == model]
        panels = sorted({(r["K"], r["M"]) for r in sub})
        for metric, label, logy in (
            ("mse", "MSE of decoded logits", True),
            ("rel_acc", "RelAcc", False),
        ):
            ncol = min(len(panels), 4)
            nrow = math.ceil(len(panels) / ncol)
            fig, axes = plt.subplots(
                nrow, ncol, figsize=(3.6 * ncol, 2.9 * nrow), squeeze=False
            )
            for ax, (k, m) in zip(axes.flat, panels, strict=False):
                for scheme, style in zip(SCHEMES, ("o-", "s-", "^-"), strict=True):
                    pts = sorted(
                        (r["S"], r[metric], r[f"{metric}_se"])
                        for r in sub
                        if r["K"] == k and r["M"] == m and r["scheme"] == scheme
                    )
                    if pts:
                        s_, v_, e_ = (
                            np.array(t, dtype=float) for t in zip(*pts, strict=True)
                        )
                        ax.errorbar(
                            s_,
                            v_,
                            yerr=np.nan_to_num(e_),
                            fmt=style,
                            ms=3,
                            capsize=2,
                            label=scheme,
                        )
                ax.set_title(f"K={k}, M={m}", fontsize=9)
                ax.set_xlabel("stragglers S", fontsize=8)
                if logy:
                    ax.set_yscale("log")
                ax.tick_params(labelsize=7)
            for ax in list(axes.flat)[len(panels) :]:
                ax.axis("off")
            axes.flat[0].set_ylabel(label, fontsize=8)
            axes.flat[0].legend(fontsize=7)
            fig.suptitle(f"{model}: {label} against S", fontsize=10)
            fig.tight_layout()
            fname = f"{metric}_{model}.png"
            fig.savefig(out / fname, dpi=110)
            plt.close(fig)
            names.append(fname)
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m models.nercc_experiment",
        description="BACC vs NeRCC vs RepApprox on MNIST (LeNet5 and a small ViT).",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--quick",
        action="store_true",
        help="small grid and quick-trained models (< 5 min on 2 CPUs)",
    )
    p.add_argument("--models", nargs="+", choices=MODEL_NAMES, default=None)
    p.add_argument(
        "--ckpt-dir",
        default="checkpoints",
        help="checkpoint directory (trained models are reused)",
    )
    p.add_argument("--replication", type=int, default=2, help="RepApprox c")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    over = dict(ckpt_dir=args.ckpt_dir, replication=args.replication, seed=args.seed)
    if args.models:
        over["models"] = tuple(args.models)
    config = quick_config(**over) if args.quick else ExperimentConfig(**over)
    command = "python -m models.nercc_experiment " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    run_experiment(config, args.out, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
