"""Training an MNIST model (AdamW, cosine decay, optional shifts) and its checkpoint.

Training uses optax AdamW with a cosine learning-rate decay on the fixed 3,500-image
training split of :mod:`models.mnist`; the 500 validation images choose nothing here
(they are kept for tuning the NeRCC codes) and the 1,000 test images are only
evaluated. :func:`load_or_train` reuses a checkpoint by the policy of
:mod:`models.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from runkit import progress

from .. import checkpoint as ckpt
from ..chunked import chunked_apply
from ..mnist import MnistSplit, check_images, load_mnist
from .config import MODELS, TrainConfig, build_model

__all__ = [
    "accuracy",
    "checkpoint_path",
    "fingerprint",
    "load_or_train",
    "logits_fn",
    "train",
]


@functools.lru_cache(maxsize=32)
def _apply_fn(graphdef):
    """Jitted ``(state, images) -> float32 logits``, one per model structure (cached:
    every model of one architecture, and every call, share one compiled program per
    batch shape; the variables are arguments, not constants)."""

    @jax.jit
    def apply(state, x):
        return nnx.merge(graphdef, state)(x).astype(jnp.float32)

    return apply


def logits_fn(
    model: nnx.Module, *, chunk: int = 512
) -> Callable[[np.ndarray], jax.Array]:
    """A function images [B, 28, 28, 1] -> float32 logits [B, 10], jitted once.

    Batches are processed in chunks of ``chunk`` images (the last one padded), so any B
    reuses one compiled program. The model's variables are passed as arguments, not
    baked in as constants.

    Raises:
        ValueError: (from the returned function) on images of the wrong shape.
    """
    graphdef, state = nnx.split(model)
    apply = _apply_fn(graphdef)

    def f(images) -> jax.Array:
        check_images(images, func="logits_fn")
        return chunked_apply(apply, state, jnp.asarray(images, jnp.float32), chunk)

    return f


def accuracy(model: nnx.Module, images, labels) -> float:
    """Top-1 accuracy of ``model`` on images [n, 28, 28, 1] with labels [n]."""
    pred = np.asarray(jnp.argmax(logits_fn(model)(images), axis=-1))
    return float(np.mean(pred == np.asarray(labels)))


def _shift_batch(key, x, max_shift: int):
    """Translate each image by an integer offset in [-max_shift, max_shift]^2 (zero
    fill), by padding and a per-image dynamic slice."""
    b = x.shape[0]
    pad = jnp.pad(x, ((0, 0), (max_shift, max_shift), (max_shift, max_shift), (0, 0)))
    offs = jax.random.randint(key, (b, 2), 0, 2 * max_shift + 1)

    def one(img, off):
        return jax.lax.dynamic_slice(img, (off[0], off[1], 0), (28, 28, 1))

    return jax.vmap(one)(pad, offs)


@functools.lru_cache(maxsize=16)
def _train_fns(
    learning_rate: float, weight_decay: float, warmup: int, total: int, shift: int
):
    """The optax AdamW transformation (cosine decay after a linear warm-up of
    ``warmup`` steps, or plain cosine decay) and the jitted training step, one per
    schedule (cached: two trainings with the same schedule compile one step per
    model structure, the graph definition being a static argument)."""
    if warmup:
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, learning_rate, warmup, total, end_value=0.0
        )
    else:
        schedule = optax.cosine_decay_schedule(learning_rate, total)
    tx = optax.adamw(schedule, weight_decay=weight_decay)

    @functools.partial(jax.jit, static_argnums=0)
    def step(graphdef, params, rest, opt_state, key, x, y):
        if shift:
            x = _shift_batch(key, x, shift)

        def loss_fn(p, r):
            # copy=True: the merged module must not share the traced arrays it is
            # built from (flax refuses to mutate them: TraceContextError)
            model = nnx.merge(graphdef, p, r, copy=True)
            logits = model(x)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, nnx.state(model, nnx.Not(nnx.Param))

        # only the parameters are differentiated; the other variables (batch norm
        # running statistics) go in beside them and come back updated as aux
        (loss, rest), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, rest)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), rest, opt_state, loss

    return tx, step


def train(
    config: TrainConfig, split: MnistSplit, *, show_progress: bool | None = None
) -> tuple[nnx.Module, dict]:
    """Train a fresh model on ``split.train_*`` and evaluate it.

    The model trains in training mode (``model.train()``: batch norms use batch
    statistics and update their running averages) and is returned in evaluation
    mode. Each step differentiates the ``nnx.Param`` variables only; the others
    (running statistics) are carried through the step beside them.

    Args:
        config: the training configuration.
        split: the data (see :func:`models.mnist.load_mnist`).
        show_progress: progress bar (None: tqdm's default, on for terminals).

    Returns:
        ``(model, metrics)`` with ``metrics`` holding ``train_loss`` (mean over the
        last epoch), ``val_accuracy``, ``test_accuracy``, ``train_seconds``,
        ``steps`` and ``num_train``.
    """
    x_train = np.asarray(split.train_x)
    y_train = np.asarray(split.train_y)
    if config.max_train is not None:
        x_train, y_train = x_train[: config.max_train], y_train[: config.max_train]
    check_images(x_train, name="split.train_x", func="train")
    n = x_train.shape[0]
    bs = min(config.batch_size, n)
    steps_per_epoch = n // bs
    total = steps_per_epoch * config.epochs
    warmup = steps_per_epoch if config.epochs > 1 else 0
    tx, step = _train_fns(
        config.learning_rate, config.weight_decay, warmup, total, config.shift
    )
    model = build_model(config.model, seed=config.seed)
    # models are built in evaluation mode; batch norms train on batch statistics
    model.train()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    step = functools.partial(step, graphdef)
    opt_state = tx.init(params)

    rng = np.random.default_rng(config.seed)
    key = jax.random.key(config.seed)
    xj, yj = jnp.asarray(x_train), jnp.asarray(y_train)
    t0 = time.perf_counter()
    losses: list[jax.Array] = []
    hide = None if show_progress is None else not show_progress
    bar = progress(total=total, desc=f"train {config.model}", disable=hide)
    with bar:
        for _ in range(config.epochs):
            perm = rng.permutation(n)
            losses = []
            for s in range(steps_per_epoch):
                idx = jnp.asarray(perm[s * bs : (s + 1) * bs])
                key, sub = jax.random.split(key)
                params, rest, opt_state, loss = step(
                    params, rest, opt_state, sub, xj[idx], yj[idx]
                )
                losses.append(loss)
                bar.update(1)
            bar.set_postfix(loss=f"{float(jnp.mean(jnp.stack(losses))):.4f}")
    model = nnx.merge(graphdef, params, rest)
    model.eval()
    seconds = time.perf_counter() - t0
    metrics = {
        "train_loss": float(jnp.mean(jnp.stack(losses))),
        "val_accuracy": accuracy(model, split.val_x, split.val_y),
        "test_accuracy": accuracy(model, split.test_x, split.test_y),
        "train_seconds": seconds,
        "steps": total,
        "num_train": n,
    }
    return model, metrics


def fingerprint(split: MnistSplit) -> str:
    """A hash of the data (every array of the split), stored with a checkpoint."""
    h = hashlib.sha256()
    for arr in split:
        a = np.ascontiguousarray(arr)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def checkpoint_path(ckpt_dir, config: TrainConfig) -> Path:
    """``<ckpt_dir>/<model>-<hash of the config>.msgpack`` (one file per config)."""
    return ckpt.checkpoint_path(ckpt_dir, config.model, dataclasses.asdict(config))


def load_or_train(
    model_name: str,
    ckpt_dir,
    quick: bool = False,
    *,
    config: TrainConfig | None = None,
    split: MnistSplit | None = None,
    retrain: bool = False,
    show_progress: bool | None = None,
    log: Callable[[str], None] | None = print,
) -> tuple[nnx.Module, dict]:
    """Load a trained model from ``ckpt_dir`` or train it and save the checkpoint.

    The policy of :func:`models.checkpoint.load_or_train` (the same for every
    model): the file named by the configuration's hash is reused only when its
    stored configuration and data fingerprint equal the requested ones (otherwise,
    or when it cannot be read, the model is retrained and the file overwritten).

    Args:
        model_name: a name of :data:`MODELS` (``"lenet5"``, ``"vit"``, ...).
        ckpt_dir: directory of the checkpoints.
        quick: use the short training preset (a separate checkpoint file).
        config: training configuration; default :meth:`TrainConfig.preset`.
        split: the data; default :func:`models.mnist.load_mnist`.
        retrain: train even when a matching checkpoint exists.
        show_progress: progress bar during training.
        log: where the one-line status goes (None: silent).

    Returns:
        ``(model, metadata)``; metadata holds ``config``, ``data``, the metrics of
        :func:`train`, and ``loaded`` (True when read from the checkpoint).

    Raises:
        ValueError: for an unknown ``model_name``.
    """
    if model_name not in MODELS:
        raise ValueError(
            f"load_or_train: model_name must be one of {tuple(MODELS)}, "
            f"got {model_name!r}"
        )
    config = config or TrainConfig.preset(model_name, quick=quick)
    if config.model != model_name:
        raise ValueError(
            f"load_or_train: config.model must equal model_name {model_name!r}, "
            f"got {config.model!r}"
        )
    split = split if split is not None else load_mnist()
    path = checkpoint_path(ckpt_dir, config)
    want = {
        "kind": model_name,
        "config": dataclasses.asdict(config),
        "data": fingerprint(split),
    }
    say = log or (lambda _msg: None)

    def train_it():
        return train(config, split, show_progress=show_progress)

    model, meta, loaded = ckpt.load_or_train(
        path,
        want,
        build=lambda _meta: build_model(model_name, seed=config.seed),
        train=train_it,
        retrain=retrain,
        log=lambda msg: say(f"[train_mnist] {msg}"),
    )
    if loaded:
        say(
            f"[train_mnist] loaded {model_name} from {path} (test accuracy "
            f"{meta['test_accuracy']:.4f})"
        )
    else:
        say(
            f"[train_mnist] trained {model_name} in {meta['train_seconds']:.1f} s: "
            f"test accuracy {meta['test_accuracy']:.4f}, saved {path}"
        )
    return model, {**meta, "loaded": loaded, "checkpoint": str(path)}
