"""The MNIST panel (``--models``): top-1 of an MNIST model coded by every code.

The model is ParM's MNIST base model, the 784-200-100-10 ReLU MLP (``--mnist-model
mlp``, the default; ``lenet5`` for LeNet5), trained by :mod:`models.train_mnist`
and its parity model by :mod:`models.train_parity` (the quick presets with
``--quick``, the full ones otherwise; loaded from ``ckpt_dir`` or trained there:
the same checkpoints as ``python -m models.train_parity --model mlp --group k``
writes). Data: the vendored MNIST subset's 1,000 test digits
(``data/mnist_5k.csv.gz``, :func:`models.mnist.load_mnist`).

The test digits are served K at a time. For each number of workers M (ParM's M =
K + K/k and the head-to-head's ``num_workers``) and each worker dtype (bf16,
float32), every row decodes the same masks: the first N arrivals of one uniformly
random arrival order per group of K digits and repetition. Workers compute in the
worker dtype (parameters, inputs, arithmetic), the master decodes in float32.
Queries are counted one by one: a query is answered where the responders give it
(``code.decodable_queries``: ParM per parity group, replication and RepApprox per
replica, every other code with its request) and its value is finite
(:func:`models.parity_experiment.queries.decode_per_query`). Top-1 is over every
query, an unanswered one a miss (a served system has no answer for it);
``answered`` is the share of queries answered, ``whole`` of requests with every
query answered, ``ok`` of requests whose decode is ``ok``.

**Work per worker.** Whole-model rows (replication, RepApprox, BACC, NeRCC, ParM):
every worker runs the network once on one (coded) digit: the base model, or for
ParM's parity workers the parity model, which has the base model's architecture.
Layer-wise rows (the MLP only, :mod:`models.layerwise`): a degree-1 code per linear
layer, each worker computes its coded row's product with each layer's weight matrix
(the same multiply-adds as one forward pass; the biases and the ReLUs move to the
master), at three round trips instead of one: exact for the network from any K
answers. The polynomial codes cannot code the whole network (it is not a
polynomial); the codes whose workers do twice the work (complex pairs, two coded
queries) are not at this panel's work per worker. Their reasons are in the panel.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import codedjax as cj
from models.coded_dcn.pipeline import decode_masks
from models.layerwise import layer_worker, mlp_rounds
from models.parity_experiment.queries import (
    answered_shares,
    decode_per_query,
    decoding_kind,
)
from models.train_parity import ParityConfig, ParityTask, load_task
from models.train_parity import load_or_train as load_parity
from runkit import progress

MNIST_MODELS = ("mlp", "lenet5")
#: the whole-model rows, by the catalogue's entries (ParM's: ``parity k=<group>``)
WHOLE = ("parity", "replication", "repapprox", "bacc", "nercc")
#: codes whose rows run layer by layer (MLP only), by the scheme name they stand for
LAYERWISE = ("chebyls", "random")
#: why the panel runs no row of the other codes of the head-to-head (the Lagrange
#: codes' reasons follow the catalogue's for the whole network)
NOTES = {
    "chebyls-kind2": "layer-wise, chebyls-layerwise's first-kind points stand for "
    "the Chebyshev points (not run twice)",
    "threshold": "layer-wise, a threshold decode needs each round's arrival order, "
    "which the vectorised layer-wise run does not pass (not run)",
    "graceful": "layer-wise, ChebyLS with a fallback below the threshold (not run: "
    "chebyls-layerwise is its branch at N >= K)",
    "robust1": "layer-wise, ChebyLS that also locates corrupted answers (none here; "
    "not run)",
    "chebyls-2q": "two coded queries per worker: work 2, not this panel's work per "
    "worker (one network, or its layers' products, per worker)",
    "circle": "complex queries as (real, imaginary) pairs: work 2, not this "
    "panel's work per worker",
    "circle-packed": "two real queries per complex one: work 2 (threshold K/2), not "
    "this panel's work per worker",
    "circle-packed-threshold": "as circle-packed (work 2)",
    "uncoded": "K workers, every one must answer: the base model's top-1 (the "
    "panel's header); with more workers it is replication",
}
_LAGRANGE = {"chebyls-kind2": "chebyls", "threshold": "threshold",
             "graceful": "graceful", "robust1": "robust"}  # fmt: skip


@functools.partial(jax.jit, static_argnames=("graphdef", "dtype"))
def _apply_jit(graphdef, state, x, dtype):
    """The network in ``dtype`` (parameters, inputs, arithmetic), widened to
    float32."""
    return nnx.merge(graphdef, state)(x.astype(dtype)).astype(jnp.float32)


class _Served:
    """A network as the workers run it, one dtype each (jitted once per shape)."""

    def __init__(self, model: nnx.Module, chunk: int):
        self.model, self.chunk = model, chunk
        self._split: dict[str, tuple] = {}

    def __call__(self, x: np.ndarray, dtype: str) -> np.ndarray:
        if dtype not in self._split:
            graphdef, state = nnx.split(self.model)
            state = jax.tree.map(
                lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating)
                else a,
                state,
            )  # fmt: skip
            self._split[dtype] = (graphdef, state)
        graphdef, state = self._split[dtype]
        x = np.asarray(x, np.float32)
        b, size = x.shape[0], self.chunk  # one compiled program per dtype
        outs = []
        for s in range(0, b, size):
            part = x[s : s + size]
            pad = size - part.shape[0]
            if pad:
                zeros = np.zeros((pad,) + part.shape[1:], x.dtype)
                part = np.concatenate([part, zeros])
            y = _apply_jit(graphdef, state, jnp.asarray(part), jnp.dtype(dtype))
            outs.append(np.asarray(y)[: size - pad])
        return np.concatenate(outs)


def mnist_rows(
    k: int, m: int, group: int, model_name: str
) -> tuple[dict[str, cj.Code], dict[str, cj.Code], dict[str, str]]:
    """(whole-model rows, layer-wise rows, reasons): every code of the head-to-head
    at K inputs and M workers has a row or a reason. The codes are
    :func:`codedjax.catalogue`'s: for the whole network (not a polynomial; RepApprox
    with c = (M - K) // K, at least 1) and, layer by layer, for one round's
    products ``v W`` (a linear map: the biases and ReLUs are the master's)."""
    net = cj.Workload(f"MNIST {model_name}", None)
    names = WHOLE + tuple(_LAGRANGE.values())
    c = max(1, (m - k) // k)
    entries = {s.name: s for s in cj.catalogue(net, k, m, names=names, replicas=c)}
    whole: dict[str, cj.Code] = {}
    reasons = {}
    for row, note in NOTES.items():
        base = entries.get(_LAGRANGE.get(row, ""))
        why = None if base is None or base.applies else base.reason
        reasons[row] = note if why is None else f"{why}; {note}"
    parm = entries.get(f"parity k={group}")
    if m == k + k // group and parm is not None and parm.applies:
        whole["parity"] = parm.code
    else:
        reasons["parity"] = (
            f"ParM's worker count is M = K + K/k = {k + k // group} (k = {group}), "
            f"not {m}"
        )
    for name in WHOLE[1:]:
        if name in ("replication", "repapprox") and m <= k:
            reasons[name] = "needs M > K"
        elif entries[name].applies:
            whole[name] = entries[name].code
        else:
            reasons[name] = entries[name].reason
    layer: dict[str, cj.Code] = {}
    rounds = cj.Workload("one layer's products", 1, linear=True)
    for s in cj.catalogue(rounds, k, m, names=LAYERWISE):
        if not s.applies:
            reasons[s.name] = s.reason
            continue
        if model_name != "mlp":
            reasons[s.name] = (
                "not a polynomial network; the layer-wise rounds are built for "
                "MLPs (models.layerwise.mlp_rounds), not LeNet5's convolutions and "
                "max pooling"
            )
            continue
        layer[f"{s.name}-layerwise"] = s.code
        reasons[s.name] = (
            f"not a polynomial network (ReLU): no exact decode of the whole "
            f"network; coded layer by layer: row {s.name}-layerwise"
        )
    return whole, layer, reasons


def _layers(model: nnx.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (np.asarray(fc.kernel[...], np.float32), np.asarray(fc.bias[...], np.float32))
        for fc in (model.fc1, model.fc2, model.fc3)
    ]


def _load(cfg, show_progress: bool):
    """The base model's task and its parity model (loaded or trained)."""
    quick = cfg.mnist_quick_train
    log = None if not show_progress else print
    task = load_task(
        cfg.mnist_model, cfg.ckpt_dir, base_quick=quick,
        show_progress=show_progress, log=log,
    )  # fmt: skip
    pcfg = ParityConfig.preset(cfg.mnist_model, cfg.parm_group, quick=quick)
    parity, meta, _ = load_parity(
        pcfg, cfg.ckpt_dir, task=task, show_progress=show_progress, log=log
    )
    info = {
        "config": meta["config"],
        "val_mse": meta["val_mse"],
        "checkpoint": meta["checkpoint"],
    }
    return task, parity, info


def _encode(code: cj.Code, x) -> jax.Array:
    """x [B, K, ...] -> [B, M, ...]: one encode of the batch (riding along as
    trailing features: one compiled program per shape)."""
    return jnp.moveaxis(code.encode(jnp.moveaxis(jnp.asarray(x), 0, 1)), 0, 1)


def _worker_outputs(code, xg, fns, dtype):
    """xg [G, K, ...] -> every worker's answer [G, M, C] in float32: encode, then
    worker i runs the function of its role (``code.roles``) in ``dtype``."""
    coded = np.asarray(_encode(code, xg))  # [G, M, ...]
    g, m = coded.shape[:2]
    out = None
    roles = np.asarray(code.roles)
    for role in dict.fromkeys(code.roles):
        idx = np.flatnonzero(roles == role)
        part = coded[:, idx].reshape((g * idx.size,) + coded.shape[2:])
        y = fns[role](part, dtype)
        if out is None:
            out = np.zeros((g, m) + y.shape[1:], np.float32)
        out[:, idx] = y.reshape((g, idx.size) + y.shape[1:])
    return out


def _responses(cfg, k: int, m: int) -> list[int]:
    if cfg.mnist_responses:
        return sorted({n for n in cfg.mnist_responses if 1 <= n <= m})
    if m - k <= 8:
        return list(range(k, m + 1))
    return sorted({int(round(v)) for v in np.linspace(k, m, 7)})


def layerwise_values(code: cj.Code, rounds, xs, masks, dtype: str):
    """The layer-wise network on x [B, K, F] with mask [B, M] in every round (a slow
    worker is slow in every round): per round, encode, every worker's products in
    ``dtype`` (:func:`models.layerwise.layer_worker`), ``decode_batched`` and the
    master's step of :func:`models.layerwise.mlp_rounds`. Every round's products
    and inputs are zero-padded to the widest layer's (the weights with zero rows:
    the products are unchanged), so one encode and one decode program serve every
    round and dtype. Returns (value [B, K, C], ok [B]: every round decoded)."""
    w_in = max(w.shape[0] for ws, _ in rounds for w in ws)
    w_out = max(w.shape[1] for ws, _ in rounds for w in ws)
    masks = jnp.asarray(masks)
    h = jnp.asarray(xs, jnp.float32)
    ok = np.ones(masks.shape[0], bool)
    for ws, step in rounds:
        (w,) = ws
        f_in, f = w.shape
        worker = layer_worker([np.pad(w, ((0, w_in - f_in), (0, 0)))], dtype)
        hp = jnp.pad(h, ((0, 0), (0, 0), (0, w_in - f_in)))
        y = worker(_encode(code, hp)).astype(jnp.float32)  # [B, M, F]
        y = jnp.pad(y, ((0, 0), (0, 0), (0, w_out - f)))
        res = code.decode_batched(y, masks)
        ok &= np.asarray(res.ok)
        h = step(res.value[..., :f], h, h)
    return np.asarray(h), ok


def _top1(value, answered, labels, gidx, r):
    """value [r G, K, C], answered [r G, K] -> (top-1 with the unanswered queries
    as misses, top-1 over the answered queries, predictions [r, G, K], -1 where
    unanswered)."""
    pred = np.argmax(np.asarray(value), axis=-1).reshape((r,) + gidx.shape)
    answered = np.asarray(answered, bool).reshape(pred.shape)
    hit = (pred == labels[gidx][None]) & answered
    top1 = float(np.mean(hit))
    top1_answered = float(np.mean(hit[answered])) if answered.any() else float("nan")
    return top1, top1_answered, np.where(answered, pred, -1)


def _whole_model(code, y, masks, orders):
    """(value [B, K, C], ok [B], answered [B, K]) of a whole-model row, each query
    counted where the code's responders give it
    (:func:`models.parity_experiment.queries.decode_per_query`)."""
    value, ok, _ = decode_masks(code, y, masks, orders)

    def again(y2, masks2):
        v, o, _ = decode_masks(code, y2, masks2, orders)
        return np.asarray(v), np.asarray(o)

    value, answered = decode_per_query(code, y, masks, value, ok, again)
    return value, np.asarray(ok), answered


def run_mnist_panel(
    cfg,
    show_progress: bool = True,
    *,
    task: ParityTask | None = None,
    parity: nnx.Module | None = None,
) -> dict:
    """The MNIST panel for a :class:`benchmarks.schemes.SchemesConfig` (its
    ``mnist_*`` fields, ``num_inputs``, ``num_workers``, ``parm_group``,
    ``dtypes``, ``model_repetitions``, ``seed``, ``ckpt_dir``).

    ``task`` (a :class:`models.train_parity.ParityTask`: the base model, its test
    queries and labels) and ``parity`` (its parity model) default to the trained
    models of ``cfg.mnist_model``."""
    t0 = time.perf_counter()
    info: dict[str, Any] = {}
    if task is None or parity is None:
        task, parity, info = _load(cfg, show_progress)
    k, group, r = cfg.num_inputs, cfg.parm_group, cfg.model_repetitions
    x, labels = task.queries["test"], np.asarray(task.labels["test"], np.int64)
    if cfg.mnist_queries:
        x, labels = x[: cfg.mnist_queries], labels[: cfg.mnist_queries]
    g = x.shape[0] // k
    if g < 1:
        raise ValueError(f"--mnist-queries: need at least K = {k} test digits")
    gidx = np.arange(g * k).reshape(g, k)
    xg = x[gidx]  # [G, K, 28, 28, 1]
    workers = []
    for m in (k + k // group, cfg.num_workers):
        if m not in workers:
            workers.append(m)
    # every network call in chunks of one size: one program per network and dtype
    chunk = min(1024, 1 << (g * max(workers) - 1).bit_length())
    base, par = _Served(task.base, chunk), _Served(parity, chunk)
    fns = {"base": base, "parity": par}
    ref32 = np.argmax(base(x[: g * k], "float32"), axis=-1)
    base_top1 = {}
    for dt in cfg.dtypes:
        pred = np.argmax(base(x[: g * k], dt), axis=-1)
        base_top1[dt] = float(np.mean(pred == labels[: g * k]))
    layers = _layers(task.base) if cfg.mnist_model == "mlp" else None
    rounds = mlp_rounds(layers, last_relu=False) if layers else None
    panels, seconds = [], {}
    disable = None if show_progress else True
    for m in workers:
        whole, layer, reasons = mnist_rows(k, m, group, cfg.mnist_model)
        not_run = []
        if cfg.mnist_rows:
            keep = set(cfg.mnist_rows)
            not_run = sorted(set(whole) - keep) + sorted(set(layer) - keep)
            whole = {n: c for n, c in whole.items() if n in keep}
            layer = {n: c for n, c in layer.items() if n in keep}
        ns = _responses(cfg, k, m)
        arrivals = cj.sample_arrivals(
            jax.random.fold_in(jax.random.key(cfg.seed), 11 + m),
            num_workers=m,
            num_responses=m,
            model=cj.Uniform(0.0, 1.0),
            shape=(r, g),
        )
        orders = np.asarray(arrivals.order, np.int32).reshape(-1, m)
        ranks = np.argsort(orders, axis=-1, kind="stable")
        xs = np.broadcast_to(xg[None], (r,) + xg.shape).reshape((r * g, k, -1))
        for dt in cfg.dtypes:
            outputs = {
                name: np.broadcast_to(y[None], (r,) + y.shape).reshape(
                    (r * g,) + y.shape[1:]
                )
                for name, code in whole.items()
                for y in [_worker_outputs(code, xg, fns, dt)]
            }
            rows: dict[str, dict] = {
                name: {
                    "code": repr(code),
                    "kind": "layer-wise" if name in layer else "whole model",
                    "rounds": len(rounds) if name in layer else 1,
                    "decoding": decoding_kind(code),
                    "work": 1,
                    "by_n": {},
                }
                for name, code in {**whole, **layer}.items()
            }
            desc = f"MNIST {cfg.mnist_model} M={m} {dt}"
            for n in progress(ns, desc=desc, disable=disable):
                masks = ranks < n
                for name, code in {**whole, **layer}.items():
                    t = time.perf_counter()
                    if name in layer:  # all or nothing: every round decodes
                        value, ok = layerwise_values(code, rounds, xs, masks, dt)
                        answered = np.repeat(ok[:, None], k, axis=1)
                    else:
                        value, ok, answered = _whole_model(
                            code, outputs[name], masks, orders
                        )
                    top1, top1_answered, pred = _top1(value, answered, labels, gidx, r)
                    rows[name]["by_n"][str(n)] = {
                        "top1": top1,
                        "top1_answered": top1_answered,
                        "ok": float(np.mean(ok)),
                        **answered_shares(answered),
                        "agree_float32": float(np.mean(pred == ref32[gidx][None])),
                    }
                    key = f"{name} M={m}"
                    seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t
            panels.append(
                {
                    "num_workers": m,
                    "dtype": dt,
                    "responses": ns,
                    "rows": rows,
                    "not_applicable": reasons,
                    "not_run": not_run,  # rows left out by --mnist-rows
                }
            )
    total = time.perf_counter() - t0
    print(
        f"MNIST panel: {total:.0f} s ("
        + ", ".join(f"{a} {b:.1f}" for a, b in seconds.items())
        + ")",
        file=sys.stderr,
        flush=True,
    )
    return {
        "model": cfg.mnist_model,
        "num_inputs": k,
        "group": group,
        "repetitions": r,
        "test_queries": int(g * k),
        "base_top1": base_top1,
        "base_top1_float32": float(np.mean(ref32 == labels[: g * k])),
        "parity_model": info,
        "panels": panels,
        "seconds": total,
    }
