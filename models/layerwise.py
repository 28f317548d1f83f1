"""Layer-wise coding of a deep network: every linear layer a round of a degree-1 code.

A round's workers compute only matrix products ``v W`` on their coded rows (in the
workers' dtype); the master decodes the K products (exact for a degree-1 code from
any D = K answers, so from M = K + 1 workers on), adds the bias and applies what is
not a matrix product (a ReLU; a cross layer's ``x0 * h + x_l`` with its own x0 and
x_l), and encodes the result for the next round. Exact for any network, at one
round trip per layer; with N > K answers ChebyLS averages the workers' rounding at
every layer.

A round may hold several branches side by side (the DCNv2's cross and deep layers
of the same depth): the master's state is their concatenation, a worker splits its
row by the branches' input widths and answers the concatenated products.

* :func:`layer_pipeline`: a :class:`~codedjax.serving.Pipeline` from rounds of
  ``(weights, master_fn)``.
* :func:`dcn_rounds`: the rounds of a parallel DCNv2 (``models.dcn``): round j the
  j-th cross layer and the j-th deep layer, the heads at the last master step.
* :func:`mlp_rounds`: the rounds of a ReLU MLP given as (W, b) pairs;
  :func:`mlp_layers` reads those pairs from a trained MLP (``models.mlp``), and
  :func:`mlp_worker` is the whole MLP on one worker (one-shot coding's worker).
* :func:`straggler` and :func:`sweep_n`: the simulated comparisons of
  ``models.serve_dcn --layerwise`` and ``models.nercc_experiment --layerwise``:
  a straggler model of :data:`LATENCIES` with its delays drawn once, and the
  layer-wise answers and latencies at every N from K up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import (
    FixedN,
    Injector,
    Pipeline,
    Round,
    latency_shift,
    simulate_latency,
)

__all__ = [
    "LATENCIES",
    "CachedPlan",
    "dcn_rounds",
    "layer_pipeline",
    "layer_worker",
    "latency_text",
    "mlp_layers",
    "mlp_rounds",
    "mlp_worker",
    "pipeline_values",
    "reference",
    "straggler",
    "sweep_n",
]

#: one round: the branches' weight matrices [F_in_b, F_out_b] and the master's step
#: ``master_fn(products, x, x0) -> next state`` (products [K, sum F_out_b])
LayerRound = tuple[Sequence[np.ndarray], Callable]


class CachedPlan:
    """An :class:`~codedjax.serving.Injector` whose plan of R requests on M workers
    is drawn once: ``simulate_latency`` of every policy of a comparison sees the
    same delays without drawing them again (only ``plan`` is forwarded)."""

    def __init__(self, injector):
        self.injector = injector
        self._plans: dict = {}

    def plan(self, request_ids, num_workers):
        ids = np.asarray(request_ids, np.int64)
        key = (int(ids[0]), ids.size, int(num_workers))
        if key not in self._plans:
            self._plans[key] = self.injector.plan(ids, num_workers)
        return self._plans[key]


#: the straggler models of the regime map (``benchmarks.regimes``), text form
#: (``codedjax.parse_latency``; ``persistent``: two slow workers, see
#: :func:`straggler`)
LATENCIES = {
    "independent": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms",
    "heavy-tail": "shifted-pareto:5ms,1ms,1.5",
    "racks": "shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5",
    "persistent": "shifted-exp:5ms,5ms; workers={} factor=10",
}


def latency_text(name: str, m: int, seed: int) -> str:
    """The text of :data:`LATENCIES`' ``name`` for M workers (``persistent``: two
    slow workers of the M drawn from ``(seed, M)``, as the regime map's)."""
    if name not in LATENCIES:
        raise ValueError(
            f"latency_text: name must be one of {tuple(LATENCIES)}, got {name!r}"
        )
    if name != "persistent":
        return LATENCIES[name]
    rng = np.random.default_rng([seed, 24, m])
    slow = sorted(int(w) for w in rng.choice(m, 2, replace=False))
    return LATENCIES[name].format(",".join(map(str, slow)))


def straggler(name: str, m: int, seed: int) -> tuple[str, CachedPlan, float]:
    """The straggler model ``name`` on M workers: (its text, an injector whose
    delays of ``seed`` are drawn once for every policy compared, its shift: the
    cost of each extra round)."""
    text = latency_text(name, m, seed)
    model = cj.parse_latency(text)
    return text, CachedPlan(Injector(latency=model, seed=seed)), latency_shift(model)


def sweep_n(code, rounds: Sequence[LayerRound], x, injector, requests: int, shift):
    """Layer-wise coding of ``rounds`` on ``code`` at N = K, K + 1, ..., M: yields
    (N, values [E, K, ...] of x [E, K, F] decoded under the first E of
    ``requests`` simulated requests' masks (:func:`pipeline_values`), their
    latencies [requests] plus ``shift`` per round after the first). The caller
    stops at the first N it accepts."""
    for n in range(code.num_inputs, code.num_workers + 1):
        sim = simulate_latency(code, FixedN(n), injector, requests)
        values = pipeline_values(code, rounds, x, sim.masks[: len(x)])
        yield n, values, sim.latency + (len(rounds) - 1) * shift


def layer_worker(weights: Sequence[np.ndarray], dtype) -> Callable:
    """A round's worker: its coded row [sum F_in_b] split by the branches' input
    widths, each part times its matrix, in ``dtype``: [sum F_out_b]."""
    ws = [jnp.asarray(w, dtype) for w in weights]
    cuts = np.cumsum([w.shape[0] for w in weights])[:-1].tolist()

    def worker(v):
        parts = jnp.split(v.astype(dtype), cuts, axis=-1) if cuts else [v.astype(dtype)]
        return jnp.concatenate([p @ w for p, w in zip(parts, ws, strict=True)], -1)

    return worker


def layer_pipeline(
    code, rounds: Sequence[LayerRound], *, dtype=jnp.bfloat16, policy=None
) -> Pipeline:
    """The :class:`~codedjax.serving.Pipeline` of ``rounds`` on ``code`` (a degree-1
    code, the same for every round), workers in ``dtype``, every round waiting by
    ``policy`` (default: the code's threshold); equal work per round."""
    return Pipeline(
        [
            Round(code, layer_worker(w, dtype), policy=policy, master_fn=fn)
            for w, fn in rounds
        ]
    )


def pipeline_values(
    code,
    rounds: Sequence[LayerRound],
    x,
    masks,
    *,
    dtype=jnp.bfloat16,
    chunk: int = 256,
) -> np.ndarray:
    """What :func:`layer_pipeline` answers, vectorised over requests: x [B, K, F]
    with the same mask [B, M] in every round (a slow worker is slow in every
    round, so the first N answers are the same workers in every round), in chunks
    of ``chunk`` requests (one compiled program)."""
    fn = _values_fn(code, tuple(id(r) for r in rounds), dtype, rounds)
    x, masks = np.asarray(x), np.asarray(masks)
    outs = []
    for s in range(0, x.shape[0], chunk):
        xb, mb = x[s : s + chunk], masks[s : s + chunk]
        b = xb.shape[0]
        if b < chunk:  # pad to the compiled size
            xb = np.concatenate([xb, np.repeat(xb[-1:], chunk - b, 0)])
            mb = np.concatenate([mb, np.repeat(mb[-1:], chunk - b, 0)])
        outs.append(np.asarray(fn(jnp.asarray(xb), jnp.asarray(mb)))[:b])
    return np.concatenate(outs)


_VALUES: dict = {}


def _values_fn(code, key, dtype, rounds):
    k = (code, key, jnp.dtype(dtype).name)
    if k not in _VALUES:
        enc = jax.vmap(code.encode)
        workers = [jax.vmap(jax.vmap(layer_worker(w, dtype))) for w, _ in rounds]
        fns = [fn for _, fn in rounds]

        def run(x, masks):
            x0 = xs = x
            for wk, fn in zip(workers, fns, strict=True):
                h = code.decode_batched(wk(enc(xs)), masks).value
                xs = fn(h, xs, x0)
            return xs

        _VALUES[k] = (jax.jit(run), rounds)  # rounds kept alive: ids stay unique
    return _VALUES[k][0]


def reference(rounds: Sequence[LayerRound], x: np.ndarray, dtype=np.float64):
    """The network of ``rounds`` on x [B, F] without coding, in ``dtype`` (numpy):
    the truth a pipeline's answer is compared with."""
    x0 = xs = np.asarray(x, dtype)
    for weights, fn in rounds:
        cuts = np.cumsum([w.shape[0] for w in weights])[:-1]
        parts = np.split(xs, cuts, axis=-1)
        prods = np.concatenate(
            [p @ np.asarray(w, dtype) for p, w in zip(parts, weights, strict=True)], -1
        )
        xs = np.asarray(fn(prods, xs, x0, np), dtype)
    return xs


def mlp_rounds(
    layers: Sequence[tuple[np.ndarray, np.ndarray]], *, last_relu: bool = True
) -> list[LayerRound]:
    """A ReLU MLP ``relu(... relu(x W1 + b1) ...)``, one round per layer (the last
    layer without ReLU when ``last_relu`` is False, as a classifier's logits)."""
    out = []
    for j, (w, b) in enumerate(layers):
        relu = last_relu or j < len(layers) - 1
        b = np.asarray(b)

        def fn(h, x, x0, xp=jnp, b=b, relu=relu):
            z = h + xp.asarray(b, h.dtype)
            return xp.maximum(z, 0) if relu else z

        out.append(([np.asarray(w)], fn))
    return out


def mlp_layers(model) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (W [F_in, F_out], b [F_out]) pairs, float32, of an MLP whose linear
    layers are its attributes ``fc1``, ``fc2``, ... (``models.mlp.MLP``); the
    network is ``relu(x W1 + b1)`` ... with the logits last (no ReLU)."""
    out, j = [], 1
    while hasattr(model, f"fc{j}"):
        fc = getattr(model, f"fc{j}")
        out.append(
            (
                np.asarray(fc.kernel[...], np.float32),
                np.asarray(fc.bias[...], np.float32),
            )
        )
        j += 1
    if not out:
        raise ValueError("mlp_layers: the model has no linear layers fc1, fc2, ...")
    return out


def mlp_worker(layers: Sequence[tuple[np.ndarray, np.ndarray]], dtype) -> Callable:
    """The whole MLP of ``layers`` on one (flattened) row, every product, bias and
    ReLU in ``dtype``, logits without ReLU: what a worker of one-shot coding (or of
    replication) computes."""
    ws = [(jnp.asarray(w, dtype), jnp.asarray(b, dtype)) for w, b in layers]

    def worker(v):
        h = v.astype(dtype)
        for j, (w, b) in enumerate(ws):
            h = h @ w + b
            if j < len(ws) - 1:
                h = jnp.maximum(h, 0)
        return h

    return worker


def dcn_rounds(model) -> list[LayerRound]:
    """A parallel DCNv2's logit as rounds: round j codes the j-th cross layer
    (``x_l W``) beside the j-th deep layer; the master adds the biases, forms
    ``x0 * h + x_l`` and the ReLU, and after the last round the heads and the
    output bias (dot products, at the master). Needs as many cross layers as deep
    layers, a full-rank cross, and the parallel structure."""
    cfg = model.config
    if cfg.structure != "parallel" or cfg.low_rank is not None:
        raise ValueError(
            "dcn_rounds: needs a parallel DCNv2 with full-rank cross layers"
        )
    if len(model.cross_layers) != len(model.deep_layers):
        raise ValueError(
            f"dcn_rounds: needs as many cross as deep layers, got "
            f"{len(model.cross_layers)} and {len(model.deep_layers)}"
        )

    def arr(p):
        return np.asarray(p[...], np.float32)

    d0 = cfg.input_dim
    wc_head = arr(model.cross_head.kernel)[:, 0]
    wd_head = arr(model.deep_head.kernel)[:, 0]
    bias = float(np.asarray(model.bias[...]).reshape(()))
    n = len(model.cross_layers)
    out = []
    for j, (c, d) in enumerate(zip(model.cross_layers, model.deep_layers, strict=True)):
        bc, bd = arr(c.up.bias), arr(d.bias)
        last = j == n - 1

        def fn(h, x, x0, xp=jnp, bc=bc, bd=bd, last=last):
            xc = x0 * (h[..., :d0] + xp.asarray(bc, h.dtype)) + x[..., :d0]
            xd = xp.maximum(h[..., d0:] + xp.asarray(bd, h.dtype), 0)
            if not last:
                return xp.concatenate([xc, xd], -1)
            z = xc @ xp.asarray(wc_head, h.dtype) + xd @ xp.asarray(wd_head, h.dtype)
            return (z + bias)[..., None]

        ws = [arr(c.up.kernel), arr(d.kernel)]
        if j == 0:
            # round 0's input is x0 alone: both branches read it
            ws = [np.concatenate([arr(c.up.kernel), arr(d.kernel)], 1)]
        out.append((ws, fn))
    return out
