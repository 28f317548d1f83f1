"""Train LeNet5 or the small ViT on the vendored MNIST subset, with checkpoints.

Usage::

    python -m models.train_mnist --model lenet5 --out results/mnist
    python -m models.train_mnist --model vit --out results/mnist [--quick] [--retrain]

Training uses optax AdamW with a cosine learning-rate decay on the fixed 3,500-image
training split of :mod:`models.mnist`; the 500 validation images choose nothing here
(they are kept for tuning the NeRCC codes) and the 1,000 test images are only evaluated.
The checkpoint is written to ``--out`` (``<model>[-quick].msgpack``) and reused when
its stored configuration and data fingerprint match; ``--retrain`` forces training.
The test accuracy is printed and written to ``summary.json`` (one entry per model) and
``report.md``.

:func:`load_or_train` is the importable entry point that the NeRCC experiment uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from models.common import load_checkpoint, progress, save_checkpoint
from models.lenet import LeNet5
from models.mnist import MnistSplit, check_images, load_mnist
from models.vit import SmallViT

__all__ = [
    "MODEL_NAMES",
    "TrainConfig",
    "accuracy",
    "build_model",
    "checkpoint_path",
    "default_config",
    "load_or_train",
    "logits_fn",
    "main",
    "train",
]

MODEL_NAMES = ("lenet5", "vit")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How one model is trained.

    Attributes:
        model: ``"lenet5"`` or ``"vit"``.
        epochs: passes over the training images.
        batch_size: images per optimiser step.
        learning_rate: peak AdamW learning rate (cosine decay to 0 after a 1-epoch
            linear warm-up when ``epochs > 1``).
        weight_decay: AdamW decoupled weight decay.
        shift: random translation of each training image by up to this many pixels
            (0 turns augmentation off).
        seed: seed of the initialisation and of the batch order.
        max_train: use only the first ``max_train`` training images (None = all); for
            shrunken tests.
    """

    model: str = "lenet5"
    epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    shift: int = 0
    seed: int = 0
    max_train: int | None = None

    def __post_init__(self):
        if self.model not in MODEL_NAMES:
            raise ValueError(
                f"TrainConfig: model must be one of {MODEL_NAMES}, got {self.model!r}"
            )
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"TrainConfig: {name} must be >= 1, got {getattr(self, name)}"
                )
        if self.shift < 0:
            raise ValueError(f"TrainConfig: shift must be >= 0, got {self.shift}")


# Full and quick presets, set by hand; the validation accuracy of each run is kept in
# the checkpoint metadata (the test split plays no part in choosing them).
_PRESETS = {
    ("lenet5", False): dict(epochs=12, learning_rate=2e-3, shift=0),
    ("lenet5", True): dict(epochs=4, learning_rate=3e-3, shift=0),
    ("vit", False): dict(epochs=30, learning_rate=1e-3, shift=2),
    ("vit", True): dict(epochs=12, learning_rate=1.5e-3, shift=2),
}


def default_config(model: str, *, quick: bool = False) -> TrainConfig:
    """The training preset of ``model`` (full, or the short ``quick`` schedule)."""
    if model not in MODEL_NAMES:
        raise ValueError(
            f"default_config: model must be one of {MODEL_NAMES}, got {model!r}"
        )
    return TrainConfig(model=model, **_PRESETS[(model, quick)])


def build_model(name: str, *, seed: int = 0) -> nnx.Module:
    """A freshly initialised ``"lenet5"`` (:class:`LeNet5`) or ``"vit"``
    (:class:`SmallViT`, patch 7, width 64, depth 3, 4 heads)."""
    rngs = nnx.Rngs(seed)
    if name == "lenet5":
        return LeNet5(rngs=rngs)
    if name == "vit":
        return SmallViT(rngs=rngs, patch=7, width=64, depth=3, heads=4, mlp_ratio=2)
    raise ValueError(f"build_model: name must be one of {MODEL_NAMES}, got {name!r}")


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

    @jax.jit
    def apply(state, x):
        return nnx.merge(graphdef, state)(x).astype(jnp.float32)

    def f(images) -> jax.Array:
        check_images(images, func="logits_fn")
        x = jnp.asarray(images, dtype=jnp.float32)
        b = x.shape[0]
        # pad small batches to a power of two so that few programs get compiled
        size = chunk if b >= chunk else 1 << max(b - 1, 0).bit_length()
        outs = []
        for start in range(0, b, size):
            part = x[start : start + size]
            pad = size - part.shape[0]
            if pad:
                part = jnp.concatenate(
                    [part, jnp.zeros((pad, *part.shape[1:]), x.dtype)]
                )
            outs.append(apply(state, part)[: size - pad])
        return jnp.concatenate(outs) if len(outs) > 1 else outs[0]

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


def train(
    config: TrainConfig, split: MnistSplit, *, show_progress: bool | None = None
) -> tuple[nnx.Module, dict]:
    """Train a fresh model on ``split.train_*`` and evaluate it.

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
    if warmup:
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, config.learning_rate, warmup, total, end_value=0.0
        )
    else:
        schedule = optax.cosine_decay_schedule(config.learning_rate, total)
    tx = optax.adamw(schedule, weight_decay=config.weight_decay)

    model = build_model(config.model, seed=config.seed)
    graphdef, params = nnx.split(model)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, key, x, y):
        if config.shift:
            x = _shift_batch(key, x, config.shift)

        def loss_fn(p):
            logits = nnx.merge(graphdef, p)(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

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
                params, opt_state, loss = step(params, opt_state, sub, xj[idx], yj[idx])
                losses.append(loss)
                bar.update(1)
            bar.set_postfix(loss=f"{float(jnp.mean(jnp.stack(losses))):.4f}")
    model = nnx.merge(graphdef, params)
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


def _fingerprint(split: MnistSplit) -> str:
    h = hashlib.sha256()
    for arr in split:
        a = np.ascontiguousarray(arr)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def checkpoint_path(ckpt_dir, model_name: str, *, quick: bool = False) -> Path:
    """``<ckpt_dir>/<model_name>[-quick].msgpack``."""
    return Path(ckpt_dir) / f"{model_name}{'-quick' if quick else ''}.msgpack"


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

    The checkpoint is reused only when its stored configuration and data fingerprint
    equal the requested ones (otherwise, or when it cannot be read, the model is
    retrained and the file overwritten).

    Args:
        model_name: ``"lenet5"`` or ``"vit"``.
        ckpt_dir: directory of the checkpoints.
        quick: use the short training preset (a separate checkpoint file).
        config: training configuration; default :func:`default_config`.
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
    if model_name not in MODEL_NAMES:
        raise ValueError(
            f"load_or_train: model_name must be one of {MODEL_NAMES}, "
            f"got {model_name!r}"
        )
    config = config or default_config(model_name, quick=quick)
    if config.model != model_name:
        raise ValueError(
            f"load_or_train: config.model must equal model_name {model_name!r}, "
            f"got {config.model!r}"
        )
    split = split if split is not None else load_mnist()
    path = checkpoint_path(ckpt_dir, model_name, quick=quick)
    want = {"config": dataclasses.asdict(config), "data": _fingerprint(split)}
    say = log or (lambda _msg: None)
    if path.is_file() and not retrain:
        model = build_model(model_name, seed=config.seed)
        try:
            meta = load_checkpoint(path, model)
        except ValueError as err:
            say(f"[train_mnist] ignoring unusable checkpoint ({err}); retraining")
        else:
            if all(meta.get(k) == v for k, v in want.items()):
                say(
                    f"[train_mnist] loaded {model_name} from {path} (test accuracy "
                    f"{meta['test_accuracy']:.4f})"
                )
                return model, {**meta, "loaded": True, "checkpoint": str(path)}
            say(f"[train_mnist] checkpoint {path} is for another config; retraining")
    model, metrics = train(config, split, show_progress=show_progress)
    meta = {**want, **metrics}
    save_checkpoint(path, model, metadata=meta)
    say(
        f"[train_mnist] trained {model_name} in {metrics['train_seconds']:.1f} s: "
        f"test accuracy {metrics['test_accuracy']:.4f}, saved {path}"
    )
    return model, {**meta, "loaded": False, "checkpoint": str(path)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m models.train_mnist", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", nargs="+", choices=MODEL_NAMES, required=True)
    p.add_argument("--out", required=True, help="directory for checkpoints and results")
    p.add_argument("--quick", action="store_true", help="short training schedule")
    p.add_argument("--retrain", action="store_true", help="ignore existing checkpoints")
    p.add_argument("--epochs", type=int, default=None, help="override the preset")
    args = p.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    split = load_mnist()
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    for name in args.model:
        config = default_config(name, quick=args.quick)
        if args.epochs is not None:
            config = dataclasses.replace(config, epochs=args.epochs)
        _, meta = load_or_train(
            name, out, args.quick, config=config, split=split, retrain=args.retrain
        )
        key = f"{name}{'-quick' if args.quick else ''}"
        summary[key] = {
            "model": name,
            "quick": args.quick,
            "test_accuracy": meta["test_accuracy"],
            "val_accuracy": meta["val_accuracy"],
            "train_seconds": meta["train_seconds"],
            "config": meta["config"],
            "checkpoint": meta["checkpoint"],
            "command": "python -m models.train_mnist "
            + " ".join(sys.argv[1:] if argv is None else argv),
        }
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    lines = [
        "# MNIST training",
        "",
        "| model | test accuracy | validation accuracy | epochs | train seconds |",
        "|---|---|---|---|---|",
    ]
    for key, row in sorted(summary.items()):
        lines.append(
            f"| {key} | {row['test_accuracy']:.4f} | {row['val_accuracy']:.4f} | "
            f"{row['config']['epochs']} | {row['train_seconds']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
