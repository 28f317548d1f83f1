"""Training a parity model against a frozen base model, and its checkpoint.

A :class:`ParityTask` holds what training and evaluation need of one base model:
its queries as float arrays (MNIST images; for the DCNv2 the embedded inputs x0,
since categorical indices cannot be summed), its outputs on them (logits), and how
a parity model is built and applied (for the DCNv2 a DCNv2 of the same structure
that starts from x0: :meth:`models.dcn.DCNv2.logits_from_x0`). The base model is
loaded from its own trainer's checkpoint (trained first if missing) and never
changes.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from runkit import progress

from .. import checkpoint as ckpt
from ..chunked import chunked_apply
from .config import ParityConfig

__all__ = [
    "ParityTask",
    "apply_fn",
    "checkpoint_path",
    "load_or_train",
    "load_task",
    "parity_queries",
    "train_parity",
]

SPLITS = ("train", "val", "test")


@dataclasses.dataclass
class ParityTask:
    """One base model and its data, as a parity model sees them.

    Attributes:
        model: the base model's name (``"dcn"``, ``"lenet5"``, ``"mlp"``).
        base: the trained base model (never changed here).
        queries: split -> float32 queries [n, ...] (images, or x0 for the DCNv2).
        outputs: split -> float32 base outputs [n, ...] (logits [n, 10], or [n]).
        labels: split -> int labels [n].
        new_parity: seed -> a fresh parity model of the base model's structure.
        kind: ``"mnist"`` (a model applied to images) or ``"dcn"`` (applied to x0).
        base_meta: the base model's metrics (its checkpoint's metadata).
        base_id: what identifies the base model's checkpoint (its training
            configuration and data), stored with the parity model's.
    """

    model: str
    base: nnx.Module
    queries: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    new_parity: Callable[[int], nnx.Module]
    kind: str
    base_meta: dict
    base_id: dict


def _apply(kind: str, module: nnx.Module, x: jax.Array) -> jax.Array:
    out = module.logits_from_x0(x) if kind == "dcn" else module(x)
    return out.astype(jnp.float32)


@functools.lru_cache(maxsize=32)
def _jitted_apply(kind: str, graphdef):
    @jax.jit
    def run(state, x):
        return _apply(kind, nnx.merge(graphdef, state), x)

    return run


def apply_fn(kind: str, module: nnx.Module, *, chunk: int = 1024):
    """A function queries [B, ...] -> float32 outputs of ``module`` (the base model or
    a parity model), jitted once per structure and run in padded chunks."""
    graphdef, state = nnx.split(module)
    run = _jitted_apply(kind, graphdef)

    def f(x):
        return chunked_apply(run, state, jnp.asarray(x, jnp.float32), chunk)

    return f


def load_task(
    model: str,
    ckpt_dir,
    *,
    base_quick: bool = False,
    show_progress: bool | None = None,
    log: Callable[[str], None] | None = print,
) -> ParityTask:
    """The base model ``model`` (loaded from ``ckpt_dir``, trained there first when
    missing) with its queries and outputs on every split."""
    if model == "dcn":
        from ..dcn import DCNv2
        from ..tabular import adult_dataset
        from ..train_dcn import TrainConfig as DcnConfig
        from ..train_dcn import load_or_train as load_dcn

        cfg = DcnConfig.quick() if base_quick else DcnConfig()
        data = adult_dataset()
        from ..train_dcn import checkpoint_path as dcn_path

        base, meta = load_dcn(
            cfg, ckpt_dir, data=data, show_progress=show_progress, log=log
        )
        meta = {**meta, "checkpoint": str(dcn_path(cfg, ckpt_dir))}
        base_id = {"config": cfg.to_dict()}
        embed = jax.jit(lambda c, n: base.embed(c, n).astype(jnp.float32))
        queries, labels = {}, {}
        for split in SPLITS:
            cat, num, y = getattr(data, split)
            queries[split] = np.asarray(embed(jnp.asarray(cat), jnp.asarray(num)))
            labels[split] = np.asarray(y)

        def new_parity(seed):
            return DCNv2(base.config, rngs=nnx.Rngs(params=seed))

        kind = "dcn"
    else:
        from ..mnist import load_mnist
        from ..train_mnist import build_model
        from ..train_mnist import load_or_train as load_mnist_model

        split = load_mnist()
        base, meta = load_mnist_model(
            model, ckpt_dir, base_quick, split=split, show_progress=show_progress,
            log=log,
        )  # fmt: skip
        base_id = {"config": meta["config"], "data": meta["data"]}
        queries = {s: np.asarray(getattr(split, f"{s}_x"), np.float32) for s in SPLITS}
        labels = {s: np.asarray(getattr(split, f"{s}_y")) for s in SPLITS}

        def new_parity(seed):
            return build_model(model, seed=seed)

        kind = "mnist"
    f = apply_fn(kind, base)
    outputs = {s: np.asarray(f(queries[s])) for s in SPLITS}
    return ParityTask(
        model, base, queries, outputs, labels, new_parity, kind, meta, base_id
    )


def parity_queries(x: np.ndarray, group: int) -> np.ndarray:
    """x [G k, ...] -> [G, ...]: the sum of each group of ``group`` consecutive
    queries (what a parity worker is sent)."""
    g = x.shape[0] // group
    return x[: g * group].reshape((g, group) + x.shape[1:]).sum(axis=1)


@functools.lru_cache(maxsize=16)
def _train_fns(kind, graphdef, group, batch, learning_rate, weight_decay):
    """The optax transformation and the jitted step (cached per structure)."""
    # the paper's PyTorch Adam: L2 weight decay added to the gradient
    tx = optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate))

    @jax.jit
    def step(params, rest, opt_state, key, x, t):
        idx = jax.random.randint(key, (batch, group), 0, x.shape[0])
        p, target = x[idx].sum(axis=1), t[idx].sum(axis=1)

        def loss_fn(pp):
            out = _apply(kind, nnx.merge(graphdef, pp, rest), p)
            return jnp.mean((out - target) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return tx, step


def _check_shapes(task: ParityTask, parity: nnx.Module, group: int):
    """A parity model must answer a parity query in the base model's output shape."""
    x = task.queries["train"][:group]
    p = jax.ShapeDtypeStruct((1,) + x.shape[1:], jnp.float32)
    got = jax.eval_shape(lambda v: _apply(task.kind, parity, v), p)
    want = task.outputs["train"].shape[1:]
    if tuple(got.shape[1:]) != tuple(want):
        raise ValueError(
            f"train_parity: the parity model's output shape {tuple(got.shape[1:])} "
            f"differs from the base model's {tuple(want)}"
        )


def val_mse(task: ParityTask, parity: nnx.Module, group: int, split="val") -> float:
    """Mean squared error of F_P(sum of k queries) against the sum of the base
    outputs, over consecutive groups of ``split``."""
    p = parity_queries(task.queries[split], group)
    t = parity_queries(task.outputs[split], group)
    out = np.asarray(apply_fn(task.kind, parity)(p))
    return float(np.mean((out - t) ** 2))


def train_parity(
    config: ParityConfig,
    task: ParityTask,
    *,
    parity: nnx.Module | None = None,
    show_progress: bool | None = None,
) -> tuple[nnx.Module, dict[str, Any]]:
    """Train a parity model for ``task``'s base model (which is not changed).

    Each step draws ``batch_size`` parity queries, each the sum of ``group``
    training queries drawn at random, and takes an Adam step on the mean squared
    error between the parity model's output and the sum of the base model's
    outputs on those queries.

    Args:
        config: the settings.
        task: the base model and its data (:func:`load_task`).
        parity: the model to train (default ``task.new_parity(config.seed + 1)``).
        show_progress: progress bar (None: on for terminals).

    Returns:
        ``(parity model, metrics)``: ``train_mse`` (mean of the last 10% of steps),
        ``val_mse``, ``train_seconds``, ``steps``.

    Raises:
        ValueError: the parity model's output shape differs from the base model's.
    """
    if config.model != task.model:
        raise ValueError(
            f"train_parity: config.model {config.model!r} is not the task's base "
            f"model {task.model!r}"
        )
    parity = parity if parity is not None else task.new_parity(config.seed + 1)
    _check_shapes(task, parity, config.group)
    graphdef, params, rest = nnx.split(parity, nnx.Param, ...)
    tx, step = _train_fns(
        task.kind,
        graphdef,
        config.group,
        config.batch_size,
        config.learning_rate,
        config.weight_decay,
    )
    opt_state = tx.init(params)
    x = jnp.asarray(task.queries["train"])
    t = jnp.asarray(task.outputs["train"])
    key = jax.random.key(config.seed)
    losses = []
    hide = None if show_progress is None else not show_progress
    t0 = time.perf_counter()
    with progress(total=config.steps, desc=f"parity {task.model} k={config.group}",
                  disable=hide) as bar:  # fmt: skip
        for s in range(config.steps):
            params, opt_state, loss = step(
                params, rest, opt_state, jax.random.fold_in(key, s), x, t
            )
            losses.append(loss)
            bar.update(1)
            if (s + 1) % 200 == 0:
                bar.set_postfix(mse=f"{float(loss):.4f}")
    tail = max(1, config.steps // 10)
    train_mse = float(jnp.mean(jnp.stack(losses[-tail:])))
    seconds = time.perf_counter() - t0
    parity = nnx.merge(graphdef, params, rest)
    metrics = {
        "train_mse": train_mse,
        "val_mse": val_mse(task, parity, config.group),
        "train_seconds": seconds,
        "steps": config.steps,
    }
    return parity, metrics


def checkpoint_path(ckpt_dir, config: ParityConfig):
    """``<ckpt_dir>/parity-<model>-k<k>-<hash of the config>.msgpack``."""
    kind = f"parity-{config.model}-k{config.group}"
    return ckpt.checkpoint_path(ckpt_dir, kind, dataclasses.asdict(config))


def load_or_train(
    config: ParityConfig,
    ckpt_dir,
    *,
    task: ParityTask | None = None,
    retrain: bool = False,
    show_progress: bool | None = None,
    log: Callable[[str], None] | None = print,
) -> tuple[nnx.Module, dict, ParityTask]:
    """Load the parity model of ``config`` from ``ckpt_dir`` or train and save it.

    The policy of :func:`models.checkpoint.load_or_train`: the file named by the
    configuration's hash is reused when its configuration and its base model's
    checkpoint are the ones asked for; otherwise it is trained again.

    Returns:
        ``(parity model, metadata, task)``.
    """
    task = task or load_task(
        config.model, ckpt_dir, base_quick=config.base_quick,
        show_progress=show_progress, log=log,
    )  # fmt: skip
    path = checkpoint_path(ckpt_dir, config)
    base_ckpt = task.base_meta.get("checkpoint")
    want = {
        "kind": f"parity-{config.model}",
        "config": dataclasses.asdict(config),
        "base": task.base_id,
    }
    say = log or (lambda _m: None)

    def train():
        model, metrics = train_parity(config, task, show_progress=show_progress)
        return model, {**metrics, "base_checkpoint": base_ckpt}

    model, meta, loaded = ckpt.load_or_train(
        path,
        want,
        build=lambda _m: task.new_parity(config.seed + 1),
        train=train,
        retrain=retrain,
        log=lambda m: say(f"[train_parity] {m}"),
    )
    verb = "loaded" if loaded else f"trained in {meta['train_seconds']:.1f} s:"
    say(
        f"[train_parity] {verb} parity model {config.model} k={config.group} "
        f"(val MSE {meta['val_mse']:.4g}) {path}"
    )
    return model, {**meta, "loaded": loaded, "checkpoint": str(path)}, task
