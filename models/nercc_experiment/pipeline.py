"""The NeRCC experiment's pipeline: every scheme in every cell (K, M, S) of the grid.

For every model and every cell, the K query images of a batch are the data that is
coded (the images are encoded, not features): each scheme's :class:`codedjax.Code`
encodes the batch into M coded images, every worker runs the model on its coded image
(all workers of all batches in one batched call), S random workers are dropped (T
uniform straggler patterns per cell, drawn from one key per cell and shared by every
batch, scheme and model), and the responders' logits are decoded back into K logit
vectors by the code's ``decode_batched`` (one payload, every mask).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from runkit import CachedFn, environment, progress

from ..mnist import MnistSplit, check_images, load_mnist
from ..train_mnist import MODELS, deployed, load_or_train, logits_fn
from .config import SCHEMES, ExperimentConfig
from .metrics import compare_schemes, decoded_metrics
from .report import PAPER_CLAIM, PAPER_DATA, PROTOTYPE_NOTE, table, write_outputs

__all__ = [
    "NerccSummary",
    "cell_codes",
    "cell_key",
    "run_cell",
    "run_experiment",
]


class NerccSummary(TypedDict):
    """What :func:`run_experiment` returns (and writes to ``summary.json``)."""

    command: str
    config: dict[str, Any]
    models: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    comparison: dict[str, dict[str, Any]]
    paper_claim: str
    paper_data: str
    prototype: str
    seconds: float
    jax_version: str
    backend: str
    environment: dict[str, Any]


def cell_codes(
    k: int, m: int, *, replication: int, smoothing: tuple[float, float]
) -> dict[str, cj.Code]:
    """The codes of one cell: BACC, NeRCC with its ``smoothing`` pair, and RepApprox
    with c = ``replication`` where M >= c K (data points: K first-kind Chebyshev
    points; worker points: M second-kind points for BACC and NeRCC)."""
    network = cj.Workload("network", None)  # a ReLU network: not a polynomial
    entries = cj.catalogue(
        network, k, m, names=("bacc", "nercc", "repapprox"),
        replicas=replication, nercc_smoothing=smoothing,
    )  # fmt: skip
    return {s.name: s.code for s in entries if s.applies}


def _run_workers(fn, code: cj.Code, x) -> jax.Array:
    """x [B, K, 28, 28, 1] -> logits [B, M, F]: encode every batch (the batch rides
    along as trailing features), one batched model call."""
    coded = jnp.moveaxis(code.encode(jnp.moveaxis(x, 0, 1)), 0, 1)
    b, m = coded.shape[:2]
    out = jnp.asarray(fn(coded.reshape((b * m,) + coded.shape[2:])))
    return out.reshape(b, m, -1).astype(jnp.float32)


def _decode(code: cj.Code, y, masks):
    """y [B, M, F], masks [T, M] -> value [B, T, K, F], ok [T]."""
    r = code.decode_batched(jnp.moveaxis(y, 0, 1), masks, shared_y=True)
    return jnp.moveaxis(r.value, 2, 0), r.ok


def _check_int(fname: str, name: str, v) -> None:
    if not isinstance(v, int | np.integer) or isinstance(v, bool):
        raise TypeError(f"{fname}: {name} must be an int, got {type(v).__name__}")


def _check_cell(fname, test_x, test_y, val_x, k, m, s):
    check_images(test_x, name="test_x", func=fname)
    check_images(val_x, name="val_x", func=fname)
    n_test, n_val = np.shape(test_x)[0], np.shape(val_x)[0]
    if np.shape(test_y) != (n_test,):
        raise ValueError(
            f"{fname}: test_y must have shape [{n_test}] (one label per test image), "
            f"got {np.shape(test_y)}"
        )
    for name, v in (("K", k), ("M", m), ("S", s)):
        _check_int(fname, name, v)
    if k < 2:
        raise ValueError(f"{fname}: K (num_inputs) must be >= 2, got {k}")
    for what, count in (("test", n_test), ("validation", n_val)):
        if k > count:
            raise ValueError(
                f"{fname}: K (num_inputs) = {k} is larger than the number of {what} "
                f"images {count}"
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


def _tune(fn, xv, key_val, k, m, n, config: ExperimentConfig):
    """NeRCC's smoothing pair for the cell, tuned on the validation images."""
    code = cj.nercc_code(num_inputs=k, num_workers=m, smoothing=(0.0, 0.0))
    val_masks = cj.sample_masks(
        key_val, num_workers=m, num_responses=n, shape=(config.val_masks,)
    )
    return cj.tune_nercc(
        key_val,
        fn,
        xv,
        num_workers=m,
        beta=code.beta(),
        alpha=code.alpha(),
        grid=config.smoothing_grid,
        masks=val_masks,
    )


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
            :class:`runkit.CachedFn` to reuse model runs across cells.
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

    key_test, key_val = jax.random.split(cell_key(config.seed, k, m, s))
    masks = cj.sample_masks(
        key_test, num_workers=m, num_responses=n, shape=(config.test_masks,)
    )
    extra: dict[str, dict[str, Any]] = {}
    smoothing = (0.0, 0.0)
    if "nercc" in schemes:
        t = _tune(fn, xv, key_val, k, m, n, config)
        smoothing = (t.encoder_smoothing, t.decoder_smoothing)
        extra["nercc"] = {
            "encoder_smoothing": t.encoder_smoothing,
            "decoder_smoothing": t.decoder_smoothing,
            "val_mse": t.mse,
            "val_mse_at_zero": float(t.grid_mse[0, 0]),
            "num_val_groups": v,
            "num_val_masks": config.val_masks,
        }
    codes = cell_codes(k, m, replication=config.replication, smoothing=smoothing)
    base = {"K": k, "M": m, "S": s, "N": n, "num_batches": b}
    base["num_masks"] = config.test_masks
    rows = []
    for scheme in (x for x in schemes if x in codes):
        code = codes[scheme]
        dec, ok = _decode(code, _run_workers(fn, code, x), masks)
        row = {"scheme": scheme, **base}
        row.update(decoded_metrics(dec, ok, truth, labels, uncoded_correct))
        row.update(extra.get(scheme, {}))
        if getattr(code, "layout", None) is not None:  # replicas: exact queries
            holds = np.asarray(code.layout.task)[None, :] == np.arange(k)[:, None]
            exact = np.any(np.asarray(masks)[:, None, :] & holds[None], axis=-1)
            row.update(
                replication=code.layout.replication,
                exact_fraction=float(np.mean(exact)),
            )
        rows.append(row)
    return rows


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def _load_models(config, split, say) -> dict[str, tuple[Callable, dict]]:
    out = {}
    for name in config.models:
        model, meta = load_or_train(
            name, config.ckpt_dir, config.quick_train, split=split, log=say
        )
        # the coded workers run the deployed network (the trained one unless the
        # model's registry entry says otherwise: RepVGG's fused network)
        deploy = MODELS[name].deploy
        meta = {**meta, "deploy": None if deploy is None else deploy.__name__}
        out[name] = (logits_fn(deployed(name, model), chunk=1024), meta)
    return out


def run_experiment(
    config: ExperimentConfig,
    out_dir,
    *,
    split: MnistSplit | None = None,
    model_fns: Mapping[str, tuple[Callable, dict]] | None = None,
    command: str = "",
    log: Callable[[str], None] | None = print,
) -> NerccSummary:
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
        The summary written to ``summary.json``.
    """
    say = log or (lambda _msg: None)
    t0 = time.perf_counter()
    split = split if split is not None else load_mnist()
    if model_fns is None:
        model_fns = _load_models(config, split, say)
    grid = config.cells()
    rows: list[dict] = []
    models_meta = {}
    for name, (fn, meta) in model_fns.items():
        cached = CachedFn(fn)
        tm = time.perf_counter()
        for k, m, s in progress(grid, desc=f"nercc experiment ({name})"):
            cell = run_cell(
                cached,
                split.test_x,
                split.test_y,
                split.val_x,
                num_inputs=k,
                num_workers=m,
                num_stragglers=s,
                config=config,
            )
            rows += [{"model": name, **r} for r in cell]
        seconds = time.perf_counter() - tm
        models_meta[name] = {
            **{kk: vv for kk, vv in meta.items() if _jsonable(vv)},
            "images_run": cached.images_run,
            "experiment_seconds": seconds,
        }
        say(
            f"[nercc_experiment] {name}: {len(grid)} cells in {seconds:.1f} s, "
            f"{cached.images_run} model evaluations"
        )
    comparison = {name: compare_schemes(rows, name) for name in model_fns}
    summary = NerccSummary(
        command=command,
        config=dataclasses.asdict(config),
        models=models_meta,
        rows=rows,
        comparison=comparison,
        paper_claim=PAPER_CLAIM,
        paper_data=PAPER_DATA,
        prototype=PROTOTYPE_NOTE,
        seconds=time.perf_counter() - t0,
        jax_version=jax.__version__,
        backend=jax.default_backend(),
        environment=environment(),
    )
    write_outputs(summary, Path(out_dir))
    say(table(rows, comparison))
    return summary
