"""The DCNv2 training loop: early stopping on the validation logloss, evaluation.

Training minimises the mean binary cross-entropy with optax Adam/AdamW on shuffled
minibatches; the validation logloss is measured after every epoch (or every
``steps_per_eval`` steps), the best parameters are kept (and written to the
checkpoint whenever they improve, so an interrupted run leaves them), and training
stops after ``patience`` evaluations without improvement. Test AUC and logloss are
measured with the best parameters.

References:
  Kingma, D. P. & Ba, J. (2015), Adam: A Method for Stochastic Optimization,
  arXiv:1412.6980. Loshchilov, I. & Hutter, F. (2019), Decoupled Weight Decay
  Regularization, arXiv:1711.05101. Wang, R. et al. (2021), DCN V2, arXiv:2008.13535.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from runkit import progress

from .. import checkpoint as ckpt
from ..dcn import DCNConfig, DCNv2
from ..metrics import binary_auc, binary_logloss
from ..tabular import TabularData, load_dataset
from .config import TrainConfig

__all__ = [
    "KIND",
    "checkpoint_path",
    "evaluate",
    "load_or_train",
    "model_config",
    "train_dcn",
]

KIND = "dcnv2"


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
        "kind": KIND,
        "config": config.to_dict(),
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
                ckpt.save_checkpoint(
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
        meta = {**_metadata(config, mcfg, metrics), "complete": True}
        ckpt.save_checkpoint(ckpt_path, best, metadata=meta)
    return best, metrics


def checkpoint_path(config: TrainConfig, ckpt_dir) -> Path:
    """``ckpt_dir/dcn-<data>-<hash of the config>.msgpack`` (one file per config)."""
    return ckpt.checkpoint_path(ckpt_dir, f"dcn-{config.data}", config.to_dict())


def load_or_train(
    config: TrainConfig,
    ckpt_dir="checkpoints",
    *,
    data: TabularData | None = None,
    show_progress: bool | None = None,
    retrain: bool = False,
    log=None,
) -> tuple[DCNv2, dict[str, Any]]:
    """Loads the checkpoint for ``config`` from ``ckpt_dir``, or trains and saves one.

    The policy of :func:`models.checkpoint.load_or_train` (the same for every model):
    the file named by the configuration's hash is reused when it holds this
    configuration and a finished training; otherwise (missing, unreadable,
    interrupted, another configuration) the model is trained and the file
    overwritten.

    Args:
      config: the training configuration (its hash names the checkpoint file).
      ckpt_dir: checkpoint directory (created if needed).
      data: the data set, loaded from ``config`` when ``None`` and training is needed.
      show_progress: ``False`` hides progress bars.
      retrain: train even when a matching checkpoint exists.
      log: where a line saying why a checkpoint was not reused goes (None: nowhere).

    Returns:
      ``(model, metrics)`` as :func:`train_dcn` (metrics from the checkpoint).
    """
    path = checkpoint_path(config, ckpt_dir)

    def build(meta):
        return DCNv2(DCNConfig.from_dict(meta["model_config"]), rngs=nnx.Rngs(params=0))

    def train():
        nonlocal data
        if data is None:
            data = load_dataset(config, show_progress=show_progress)
        model, metrics = train_dcn(
            config, data, ckpt_path=path, show_progress=show_progress
        )
        return model, _metadata(config, model.config, metrics)

    want = {"kind": KIND, "config": config.to_dict()}
    model, meta, _ = ckpt.load_or_train(
        path, want, build=build, train=train, retrain=retrain, log=log
    )
    return model, meta["metrics"]
