"""Train a DCNv2 on Adult (bundled) or a Criteo file, with early stopping.

Command line::

    python -m models.train_dcn --data adult --out DIR
    python -m models.train_dcn --data criteo --path train.txt.gz --out DIR

Library::

    model, metrics = train_dcn(TrainConfig(), adult_dataset())
    model, metrics = load_or_train(TrainConfig(), "checkpoints")

Training minimises the mean binary cross-entropy with optax Adam/AdamW on shuffled
minibatches; the validation logloss is measured after every epoch (or every
``steps_per_eval`` steps), the best parameters are kept and written with
:func:`models.common.save_checkpoint`, and training stops after ``patience``
evaluations without improvement. Test AUC and logloss are measured with the best
parameters.

References:
  Kingma, D. P. & Ba, J. (2015), Adam: A Method for Stochastic Optimization,
  arXiv:1412.6980. Loshchilov, I. & Hutter, F. (2019), Decoupled Weight Decay
  Regularization, arXiv:1711.05101. Wang, R. et al. (2021), DCN V2, arXiv:2008.13535.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
import optax
from flax import nnx

from . import adult, criteo
from .common import (
    binary_auc,
    binary_logloss,
    load_checkpoint,
    progress,
    save_checkpoint,
)
from .dcn import DCNConfig, DCNv2

__all__ = [
    "ArrayData",
    "CriteoData",
    "TrainConfig",
    "adult_dataset",
    "checkpoint_path",
    "criteo_dataset",
    "evaluate",
    "load_dataset",
    "load_or_train",
    "main",
    "model_config",
    "train_dcn",
]

DATASETS = ("adult", "criteo")
OPTIMIZERS = ("adam", "adamw")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that fixes a trained model (data, architecture, optimisation).

    Attributes:
      data: ``"adult"`` or ``"criteo"``.
      path: data file; ``None`` is the bundled Adult file (required for Criteo).
      embed_dim, numeric_mode, num_cross_layers, low_rank, deep_sizes, structure:
        the DCNv2 architecture (see :class:`models.dcn.DCNConfig`).
      optimizer: ``"adam"`` or ``"adamw"``.
      learning_rate: Adam step size.
      weight_decay: decoupled weight decay (AdamW only).
      batch_size: training minibatch size (the last incomplete batch of an epoch is
        dropped; the data are reshuffled every epoch).
      max_epochs: upper bound on passes over the training split.
      patience: evaluations without a better validation logloss before stopping.
      steps_per_eval: evaluate every this many steps (``None``: after each epoch).
      seed: parameter initialisation and shuffling seed.
      criteo_min_count: Criteo vocabulary minimum count.
      criteo_max_lines: read only this many lines of the Criteo file (``None``: all).
      eval_batch_size: batch size for evaluation (padded, so one compiled program).
    """

    data: str = "adult"
    path: str | None = None
    embed_dim: int = 8
    numeric_mode: str = "embedded"
    num_cross_layers: int = 2
    low_rank: int | None = None
    deep_sizes: tuple[int, ...] = (128, 64)
    structure: str = "parallel"
    optimizer: str = "adamw"
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    batch_size: int = 512
    max_epochs: int = 30
    patience: int = 3
    steps_per_eval: int | None = None
    seed: int = 0
    criteo_min_count: int = 10
    criteo_max_lines: int | None = None
    eval_batch_size: int = 4096

    def __post_init__(self):
        name = "TrainConfig"
        object.__setattr__(self, "deep_sizes", tuple(int(h) for h in self.deep_sizes))
        if self.data not in DATASETS:
            raise ValueError(
                f"{name}: data must be one of {DATASETS}, got {self.data!r}"
            )
        if self.data == "criteo" and self.path is None:
            raise ValueError(f"{name}: data='criteo' needs path (the Criteo file)")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"{name}: optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"
            )
        for field in ("batch_size", "max_epochs", "patience", "eval_batch_size"):
            if getattr(self, field) < 1:
                raise ValueError(
                    f"{name}: {field} must be >= 1, got {getattr(self, field)}"
                )
        if not self.learning_rate > 0:
            raise ValueError(
                f"{name}: learning_rate must be > 0, got {self.learning_rate}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["deep_sizes"] = list(self.deep_sizes)
        return out


# --------------------------------------------------------------------------- data


class TabularData(Protocol):
    """What :func:`train_dcn` needs from a data set."""

    vocab_sizes: tuple[int, ...]
    num_numeric: int

    def train_batches(
        self, rng: np.random.Generator, batch_size: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]: ...

    def eval_batches(
        self, split: str, batch_size: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]: ...

    def num_train_batches(self, batch_size: int) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class ArrayData:
    """In-memory splits: each a ``(categorical [B, n_cat] int32, numeric [B, n_num]
    float32, labels [B] int32)`` tuple."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]
    val: tuple[np.ndarray, np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray, np.ndarray]
    vocab_sizes: tuple[int, ...]
    num_numeric: int

    def num_train_batches(self, batch_size: int) -> int:
        return len(self.train[2]) // batch_size

    def train_batches(self, rng, batch_size):
        cat, num, y = self.train
        perm = rng.permutation(len(y))
        for i in range(len(y) // batch_size):
            idx = perm[i * batch_size : (i + 1) * batch_size]
            yield cat[idx], num[idx], y[idx]

    def eval_batches(self, split, batch_size):
        cat, num, y = getattr(self, split)
        for i in range(0, len(y), batch_size):
            yield (
                cat[i : i + batch_size],
                num[i : i + batch_size],
                y[i : i + batch_size],
            )


def adult_dataset(path=None) -> ArrayData:
    """The Adult splits (:func:`models.adult.load_adult`) as :class:`ArrayData`."""
    data = adult.load_adult(adult.DEFAULT_PATH if path is None else path)

    def t(s):
        return (s.categorical, s.numeric, s.labels)

    return ArrayData(
        t(data.train), t(data.val), t(data.test), data.vocab_sizes, data.num_numeric
    )


@dataclasses.dataclass(frozen=True)
class CriteoData:
    """A Criteo file streamed from disk (splits by line number, see models.criteo).

    Training batches go through a shuffle buffer of ``shuffle_batches`` batches.
    """

    path: str
    vocab: criteo.CriteoVocabulary
    max_lines: int | None = None
    shuffle_batches: int = 64
    show_progress: bool | None = False

    @property
    def vocab_sizes(self):
        return self.vocab.vocab_sizes

    @property
    def num_numeric(self):
        return criteo.NUM_NUMERIC

    def num_train_batches(self, batch_size):
        return None

    def _stream(self, split, batch_size, drop):
        for b in criteo.iter_batches(
            self.path,
            self.vocab,
            batch_size=batch_size,
            split=split,
            max_lines=self.max_lines,
            drop_remainder=drop,
            show_progress=self.show_progress,
        ):
            yield b.categorical, b.numeric, b.labels

    def train_batches(self, rng, batch_size):
        buf = []

        def flush():
            cat, num, y = (np.concatenate(p) for p in zip(*buf, strict=True))
            perm = rng.permutation(len(y))
            for i in range(len(y) // batch_size):
                idx = perm[i * batch_size : (i + 1) * batch_size]
                yield cat[idx], num[idx], y[idx]

        for batch in self._stream("train", batch_size, True):
            buf.append(batch)
            if len(buf) == self.shuffle_batches:
                yield from flush()
                buf = []
        if buf:
            yield from flush()

    def eval_batches(self, split, batch_size):
        return self._stream(split, batch_size, False)


def criteo_dataset(path, *, min_count=10, max_lines=None, show_progress=None):
    """Builds the Criteo vocabulary (first pass) and returns a :class:`CriteoData`."""
    vocab = criteo.build_vocabulary(
        path, min_count=min_count, max_lines=max_lines, show_progress=show_progress
    )
    return CriteoData(
        str(path), vocab, max_lines=max_lines, show_progress=show_progress
    )


def load_dataset(config: TrainConfig, *, show_progress=None) -> TabularData:
    """The data set named by ``config``."""
    if config.data == "adult":
        return adult_dataset(config.path)
    return criteo_dataset(
        config.path,
        min_count=config.criteo_min_count,
        max_lines=config.criteo_max_lines,
        show_progress=show_progress,
    )


# --------------------------------------------------------------------------- training


def model_config(config: TrainConfig, data: TabularData) -> DCNConfig:
    """The :class:`DCNConfig` for ``config`` on ``data`` (float32 parameters)."""
    return DCNConfig(
        vocab_sizes=tuple(data.vocab_sizes),
        num_numeric=data.num_numeric,
        embed_dim=config.embed_dim,
        numeric_mode=config.numeric_mode,
        num_cross_layers=config.num_cross_layers,
        low_rank=config.low_rank,
        deep_sizes=config.deep_sizes,
        structure=config.structure,
    )


@functools.lru_cache(maxsize=32)
def _logits_fn(graphdef):
    """Jitted ``(state, cat, num) -> logits``, one per model structure (cached, so
    repeated evaluations and trainings of the same architecture compile once)."""

    @jax.jit
    def logits_fn(state, cat, num):
        return nnx.merge(graphdef, state)(cat, num)

    return logits_fn


@functools.lru_cache(maxsize=32)
def _train_fns(graphdef, optimizer: str, learning_rate: float, weight_decay: float):
    """The optax transformation and the jitted training step (cached)."""
    if optimizer == "adam":
        tx = optax.adam(learning_rate)
    else:
        tx = optax.adamw(learning_rate, weight_decay=weight_decay)

    @jax.jit
    def train_step(state, opt_state, cat, num, y):
        def loss_fn(state):
            z = nnx.merge(graphdef, state)(cat, num)
            return optax.sigmoid_binary_cross_entropy(z, y.astype(z.dtype)).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state)
        updates, opt_state = tx.update(grads, opt_state, state)
        return optax.apply_updates(state, updates), opt_state, loss

    return tx, train_step


def evaluate(
    model: DCNv2,
    data: TabularData,
    split: str,
    *,
    batch_size: int = 4096,
    logits_fn=None,
) -> dict[str, float]:
    """AUC and logloss of ``model`` on one split (float64 metrics on the host).

    Batches are padded to ``batch_size`` so one compiled program serves them all.

    Returns:
      ``{"auc", "logloss", "n"}``.
    """
    graphdef, state = nnx.split(model)
    logits_fn = logits_fn or _logits_fn(graphdef)
    zs, ys = [], []
    for cat, num, y in data.eval_batches(split, batch_size):
        n = len(y)
        if n < batch_size:
            cat = np.concatenate(
                [cat, np.zeros((batch_size - n, cat.shape[1]), cat.dtype)]
            )
            num = np.concatenate(
                [num, np.zeros((batch_size - n, num.shape[1]), num.dtype)]
            )
        zs.append(np.asarray(logits_fn(state, cat, num), np.float64)[:n])
        ys.append(np.asarray(y))
    if not ys:
        raise ValueError(f"evaluate: the {split!r} split is empty")
    z, y = np.concatenate(zs), np.concatenate(ys)
    return {"auc": binary_auc(y, z), "logloss": binary_logloss(y, z), "n": int(len(y))}


def _metadata(config, mcfg, metrics):
    return {
        "kind": "dcnv2",
        "train_config": config.to_dict(),
        "model_config": mcfg.to_dict(),
        "metrics": metrics,
    }


def train_dcn(
    config: TrainConfig,
    data: TabularData,
    *,
    ckpt_path=None,
    show_progress: bool | None = None,
    max_steps: int | None = None,
) -> tuple[DCNv2, dict[str, Any]]:
    """Trains a DCNv2 with early stopping on the validation logloss.

    Args:
      config: the training configuration.
      data: a data set (:func:`adult_dataset`, :func:`criteo_dataset` or an
        :class:`ArrayData`).
      ckpt_path: if given, the best parameters are written there (with the config and
        metrics as metadata) whenever the validation logloss improves, and once more
        at the end with the test metrics.
      show_progress: ``False`` hides the progress bars.
      max_steps: stop after this many optimisation steps (for tests and smoke runs).

    Returns:
      ``(model, metrics)``: the model holding the best parameters, and a dict with
      ``test_auc``, ``test_logloss``, ``val_auc``, ``val_logloss``, ``best_eval``,
      ``steps``, ``train_seconds`` and ``curve`` (one dict per evaluation: ``eval``,
      ``epoch``, ``step``, ``train_loss``, ``val_logloss``, ``val_auc``).
    """
    mcfg = model_config(config, data)
    model = DCNv2(mcfg, rngs=nnx.Rngs(params=config.seed))
    graphdef, state = nnx.split(model)
    tx, train_step = _train_fns(
        graphdef,
        config.optimizer,
        float(config.learning_rate),
        float(config.weight_decay),
    )
    opt_state = tx.init(state)
    logits_fn = _logits_fn(graphdef)
    rng = np.random.default_rng(config.seed)
    best_state, best_val, best_eval, since_best = state, np.inf, -1, 0
    curve: list[dict[str, Any]] = []
    step, losses = 0, []
    t0 = time.perf_counter()
    stop = False

    def run_eval(epoch):
        nonlocal best_state, best_val, best_eval, since_best, losses
        model_now = nnx.merge(graphdef, state)
        val = evaluate(
            model_now,
            data,
            "val",
            batch_size=config.eval_batch_size,
            logits_fn=logits_fn,
        )
        curve.append(
            {
                "eval": len(curve),
                "epoch": epoch,
                "step": step,
                "train_loss": float(np.mean(losses)) if losses else float("nan"),
                "val_logloss": val["logloss"],
                "val_auc": val["auc"],
            }
        )
        losses = []
        if val["logloss"] < best_val:
            best_state, best_val, best_eval, since_best = (
                state,
                val["logloss"],
                (len(curve) - 1),
                0,
            )
            if ckpt_path is not None:
                save_checkpoint(
                    ckpt_path,
                    model_now,
                    metadata=_metadata(
                        config,
                        mcfg,
                        {
                            "val_logloss": val["logloss"],
                            "val_auc": val["auc"],
                            "step": step,
                        },
                    ),
                )
        else:
            since_best += 1
        return since_best >= config.patience

    for epoch in progress(
        range(config.max_epochs), desc="epochs", disable=None if show_progress else True
    ):
        bar = progress(
            data.train_batches(rng, config.batch_size),
            total=data.num_train_batches(config.batch_size),
            desc=f"epoch {epoch}",
            disable=None if show_progress else True,
        )
        for cat, num, y in bar:
            state, opt_state, loss = train_step(state, opt_state, cat, num, y)
            losses.append(float(loss))
            step += 1
            if config.steps_per_eval and step % config.steps_per_eval == 0:
                if run_eval(epoch):
                    stop = True
                    break
            if max_steps is not None and step >= max_steps:
                stop = True
                break
        if stop:
            break
        if not config.steps_per_eval and run_eval(epoch):
            break
    if losses or not curve:
        run_eval(epoch)
    seconds = time.perf_counter() - t0

    best = nnx.merge(graphdef, best_state)
    test = evaluate(
        best, data, "test", batch_size=config.eval_batch_size, logits_fn=logits_fn
    )
    metrics = {
        "test_auc": test["auc"],
        "test_logloss": test["logloss"],
        "test_n": test["n"],
        "val_auc": curve[best_eval]["val_auc"],
        "val_logloss": curve[best_eval]["val_logloss"],
        "best_eval": best_eval,
        "best_epoch": curve[best_eval]["epoch"],
        "steps": step,
        "train_seconds": seconds,
        "curve": curve,
    }
    if ckpt_path is not None:
        save_checkpoint(ckpt_path, best, metadata=_metadata(config, mcfg, metrics))
    return best, metrics


def checkpoint_path(config: TrainConfig, ckpt_dir) -> Path:
    """``ckpt_dir/dcn-<data>-<hash of the config>.msgpack`` (one file per config)."""
    digest = hashlib.sha256(
        json.dumps(config.to_dict(), sort_keys=True).encode()
    ).hexdigest()[:12]
    return Path(ckpt_dir) / f"dcn-{config.data}-{digest}.msgpack"


def load_or_train(
    config: TrainConfig,
    ckpt_dir="checkpoints",
    *,
    data: TabularData | None = None,
    show_progress: bool | None = None,
) -> tuple[DCNv2, dict[str, Any]]:
    """Loads the checkpoint for ``config`` from ``ckpt_dir``, or trains and saves one.

    Args:
      config: the training configuration (its hash names the checkpoint file).
      ckpt_dir: checkpoint directory (created if needed).
      data: the data set, loaded from ``config`` when ``None`` and training is needed.
      show_progress: ``False`` hides progress bars.

    Returns:
      ``(model, metrics)`` as :func:`train_dcn` (metrics from the checkpoint).

    A checkpoint left by an interrupted run (written at a validation improvement,
    without test metrics) is retrained and overwritten.

    Raises:
      ValueError: if a checkpoint file exists but is unreadable or was written for
        another configuration.
    """
    path = checkpoint_path(config, ckpt_dir)
    if path.exists():
        meta = _read_metadata(path)
        if meta.get("train_config") != config.to_dict():
            raise ValueError(
                f"load_or_train: checkpoint {str(path)!r} was written for another "
                f"configuration; delete it to retrain"
            )
        if "test_auc" in meta.get("metrics", {}):
            model = DCNv2(
                DCNConfig.from_dict(meta["model_config"]), rngs=nnx.Rngs(params=0)
            )
            meta = load_checkpoint(path, model)
            return model, meta["metrics"]
        # else: a run that was interrupted before it finished: train again
    if data is None:
        data = load_dataset(config, show_progress=show_progress)
    return train_dcn(config, data, ckpt_path=path, show_progress=show_progress)


def _read_metadata(path: Path) -> dict:
    """Metadata of a checkpoint without a model (to build the model skeleton)."""
    from flax import serialization

    try:
        payload = serialization.msgpack_restore(path.read_bytes())
        return json.loads(payload["metadata"])
    except Exception as err:
        raise ValueError(
            f"load_or_train: checkpoint {str(path)!r} is unreadable "
            f"({type(err).__name__}: {err})"
        ) from err


# --------------------------------------------------------------------------- CLI


def _write_outputs(out: Path, config, mcfg, metrics, ckpt) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "config": config.to_dict(),
        "model_config": mcfg.to_dict(),
        "checkpoint": str(ckpt),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        **metrics,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = [
        ("test AUC", f"{metrics['test_auc']:.4f}"),
        ("test logloss", f"{metrics['test_logloss']:.4f}"),
        ("validation AUC (best)", f"{metrics['val_auc']:.4f}"),
        ("validation logloss (best)", f"{metrics['val_logloss']:.4f}"),
        ("best epoch", str(metrics["best_epoch"])),
        ("steps", str(metrics["steps"])),
        ("training seconds", f"{metrics['train_seconds']:.1f}"),
    ]
    curve_rows = "\n".join(
        f"| {c['eval']} | {c['epoch']} | {c['step']} | {c['train_loss']:.4f} | "
        f"{c['val_logloss']:.4f} | {c['val_auc']:.4f} |"
        for c in metrics["curve"]
    )
    arch = (
        f"{mcfg.structure} DCNv2, L = {mcfg.num_cross_layers} cross layers "
        f"({'full rank' if mcfg.low_rank is None else f'rank {mcfg.low_rank}'}), "
        f"embedding dim {mcfg.embed_dim}, numeric {mcfg.numeric_mode}, deep "
        f"{list(mcfg.deep_sizes)}, d0 = {mcfg.input_dim}"
    )
    report = (
        f"# DCNv2 on {config.data}\n\n{arch}; {config.optimizer} lr "
        f"{config.learning_rate}, batch {config.batch_size}, patience "
        f"{config.patience}.\n\n| metric | value |\n|---|---|\n"
        + "\n".join(f"| {k} | {v} |" for k, v in rows)
        + "\n\n## Validation curve\n\n| eval | epoch | step | train loss | val logloss "
        "| val AUC |\n|---|---|---|---|---|---|\n" + curve_rows + "\n\n"
        f"Checkpoint: `{ckpt}`.\n\n![validation curve](val_curve.png)\n"
    )
    (out / "report.md").write_text(report)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are an optional extra
        print("matplotlib not installed: no plot written", file=sys.stderr)
    else:
        curve = metrics["curve"]
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
        steps = [c["step"] for c in curve]
        ax[0].plot(steps, [c["train_loss"] for c in curve], "o-", label="train")
        ax[0].plot(steps, [c["val_logloss"] for c in curve], "s-", label="validation")
        ax[0].set_xlabel("step")
        ax[0].set_ylabel("logloss")
        ax[0].legend()
        ax[1].plot(steps, [c["val_auc"] for c in curve], "s-")
        ax[1].set_xlabel("step")
        ax[1].set_ylabel("validation AUC")
        for a in ax:
            a.axvline(curve[metrics["best_eval"]]["step"], color="grey", ls=":")
        fig.suptitle(f"DCNv2 on {config.data}")
        fig.tight_layout()
        fig.savefig(out / "val_curve.png", dpi=120)
        plt.close(fig)
    width = max(len(k) for k, _ in rows)
    print(f"DCNv2 on {config.data}: {arch}")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    print(f"  wrote {out / 'summary.json'}, {out / 'report.md'}; checkpoint {ckpt}")


def main(argv=None) -> dict[str, Any]:
    """Command-line entry point; returns the metrics."""
    d = TrainConfig()
    p = argparse.ArgumentParser(
        prog="python -m models.train_dcn", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--data", choices=DATASETS, default="adult")
    p.add_argument("--path", default=None, help="data file (required for criteo)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--embed-dim", type=int, default=d.embed_dim)
    p.add_argument(
        "--numeric-mode", choices=("normalised", "embedded"), default=d.numeric_mode
    )
    p.add_argument("--cross-layers", type=int, default=d.num_cross_layers)
    p.add_argument("--low-rank", type=int, default=None)
    p.add_argument(
        "--deep-sizes",
        default=",".join(map(str, d.deep_sizes)),
        help="comma-separated hidden widths",
    )
    p.add_argument("--structure", choices=("parallel", "stacked"), default=d.structure)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer)
    p.add_argument("--lr", type=float, default=d.learning_rate)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--epochs", type=int, default=d.max_epochs)
    p.add_argument("--patience", type=int, default=d.patience)
    p.add_argument("--steps-per-eval", type=int, default=None)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--min-count", type=int, default=d.criteo_min_count)
    p.add_argument("--max-lines", type=int, default=None)
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.data == "criteo" and a.path is None:
        p.error("--data criteo needs --path FILE")
    config = TrainConfig(
        data=a.data,
        path=a.path,
        embed_dim=a.embed_dim,
        numeric_mode=a.numeric_mode,
        num_cross_layers=a.cross_layers,
        low_rank=a.low_rank,
        deep_sizes=tuple(int(h) for h in a.deep_sizes.split(",") if h),
        structure=a.structure,
        optimizer=a.optimizer,
        learning_rate=a.lr,
        weight_decay=a.weight_decay,
        batch_size=a.batch_size,
        max_epochs=a.epochs,
        patience=a.patience,
        steps_per_eval=a.steps_per_eval,
        seed=a.seed,
        criteo_min_count=a.min_count,
        criteo_max_lines=a.max_lines,
    )
    show = False if a.no_progress else None
    data = load_dataset(config, show_progress=show)
    ckpt = checkpoint_path(config, a.ckpt_dir)
    model, metrics = train_dcn(config, data, ckpt_path=ckpt, show_progress=show)
    _write_outputs(Path(a.out), config, model.config, metrics, ckpt)
    return metrics


if __name__ == "__main__":
    main()
