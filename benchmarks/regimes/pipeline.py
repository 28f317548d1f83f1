"""The regime map's cells: per-query latency (``simulate_latency``) and decoded
error on real payloads, for the layouts of every scheme of every cell.

A cell's schemes are the catalogue's (:func:`codedjax.catalogue`) at (workload,
K, M) with their systematic variants, each searched over its layouts as
:func:`runkit.choice.cell_layouts` prunes them (K' = K and K/2, M' the most a
group may have, replication, ParM, uncoded and layer-wise coding whole; see
``runkit.choice``); a scheme with no layout is a row with the catalogue's reason.
A layout's latency is per query (``simulate_latency(...).query_latency`` of the
groups a request's K queries go to, each on its own columns of the cell's delay
plan); its error is that of the cell's requests (their K queries over the
groups), decoded from the masks of the same simulation. The map's own choices:
ParM's parity model the workload itself (untrained), NeRCC's smoothing tuned per
(K, M) (:func:`tune_block`; used at every layout of the cell), the N grid of a
scheme served at a tuned N (:func:`n_grid`, per layout), and the accuracy target
(:func:`runkit.stats.accuracy_target` of the cell's uncoded bf16 errors). Each
scheme's row is its best layout and N by the shared rule
(:func:`runkit.choice.first_meeting`, ``benchmarks.regimes.search``).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import FirstDecodable, FixedN, Injector, latency_shift
from models.layerwise import CachedPlan, pipeline_values
from runkit import max_rel_err
from runkit.choice import cell_layouts, full_answers, simulate_layout

from .config import RegimesConfig, latency_model
from .workloads import batched_worker, inputs, rounds, workload

__all__ = [
    "NAMES",
    "Cell",
    "cell_search",
    "layerwise_value",
    "n_grid",
    "tune_block",
]

#: the catalogue's schemes on the map, in its order
NAMES = ("uncoded", "replication", "chebyls", "threshold", "graceful", "bacc",
         "nercc", "repapprox", "parity", "layerwise")  # fmt: skip

_CHUNK = 256
#: payloads are widened to this many columns by repeating their own, so one decode
#: program per code serves every workload (the error is read on the first F)
_WIDTH = 32


def cell_search(k: int, m: int, wl: cj.Workload, nercc_smoothing, names=NAMES):
    """The layouts searched in the cell (K, M, workload) and the reasons of the
    schemes without one (:func:`runkit.choice.cell_layouts` of ``names``, by
    default :data:`NAMES`)."""
    return cell_layouts(wl, k, m, names, nercc_smoothing=tuple(nercc_smoothing))


def n_grid(cfg: RegimesConfig, s: cj.Scheme, k: int) -> list[int]:
    """The N a scheme tries on its K' = ``k`` queries: its code's threshold
    unless served at a tuned N (``policy == "fixed"``), then ``cfg.n_grid`` from
    D for a Lagrange code (its ``num_coeffs``), from K' for the others (never
    below :func:`runkit.choice.full_answers`: every query answered)."""
    if s.policy != "fixed":
        return [s.code.threshold]
    low = max(k, getattr(s.code, "num_coeffs", k), full_answers(s.code))
    return cfg.n_grid(low, s.code.num_workers)


def _chunks(n):
    return [slice(s, min(n, s + _CHUNK)) for s in range(0, n, _CHUNK)]


def _decode_values(code, y, masks, order):
    """Decoded values [B, K', F'] and ok [B] of y [B, M', F'] with masks [B, M']."""
    vals, oks = [], []
    for sl in _chunks(y.shape[0]):
        reads = "order" in getattr(code, "answer_fields", ())
        kw = {"order": jnp.asarray(order[sl])} if reads else {}
        r = code.decode_batched(y[sl], jnp.asarray(masks[sl]), **kw)
        vals.append(np.asarray(r.value))
        oks.append(np.asarray(r.ok))
    return np.concatenate(vals), np.concatenate(oks)


def _request_errors(val, ok, truth, start=0):
    """Relative error of each of E requests (their K queries over the n groups
    decoded as rows of ``val`` [E n, K', F']; columns ``start`` on) against
    truth [E, K, F]; inf where a group's decode is not ok."""
    e, f = truth.shape[0], truth.shape[-1]
    part = val[..., start : start + f].reshape(e, -1, f)
    ok = ok.reshape(e, -1).all(axis=1)
    return np.where(ok, max_rel_err(part, truth), np.inf)


def _joint_errors(code, ys, masks, order, truths):
    """Request errors of several workloads' payloads ys [E n, M', F'] under the
    same masks, decoded side by side in one call (every decoder here is linear
    column by column, and ok depends on the masks alone once every answer is
    finite; with a non-finite answer each workload is decoded alone)."""
    y = jnp.concatenate(ys, -1)
    if len(ys) > 1 and not bool(jnp.isfinite(y).all()):
        return [
            _joint_errors(code, [yi], masks, order, [t])[0]
            for yi, t in zip(ys, truths, strict=True)
        ]
    val, ok = _decode_values(code, y, masks, order)
    out, start = [], 0
    for yi, t in zip(ys, truths, strict=True):
        out.append(_request_errors(val, ok, t, start))
        start += yi.shape[-1]
    return out


def layerwise_value(code, wl: cj.Workload, x, masks) -> np.ndarray:
    """Layer-wise coding's answers to requests x [E, K, F] with masks [E, M]: the
    workload's layers as rounds of ``code`` (``models.layerwise``), bf16 workers."""
    return pipeline_values(code, _rounds(wl), x, masks)


@functools.cache
def _rounds(wl: cj.Workload):
    return rounds(wl)


def tune_block(cfg: RegimesConfig, k: int, m: int) -> tuple[float, float]:
    """NeRCC's smoothing for (K, M): tuned once on the Deep branch (bf16 workers,
    random masks of ceil(nercc_responses M) answers), used in every cell."""
    wl = workload("deep", cfg.width, cfg.seed)
    x_val = inputs(cfg.seed + 1, cfg.nercc_groups, k, cfg.width)
    fn = jax.jit(jax.vmap(wl.fn))
    n = max(2, math.ceil(cfg.nercc_responses * m))
    t = cj.tune_nercc(
        jax.random.key(cfg.seed),
        lambda v: fn(v).astype(jnp.float32),
        jnp.asarray(x_val),
        num_workers=m,
        num_responses=n,
        grid=(1e-6, 1e-4, 1e-2),
        num_masks=32,
    )
    return (t.encoder_smoothing, t.decoder_smoothing)


@functools.lru_cache(maxsize=256)
def _batched_encode(code):
    """jit(vmap(encode)) per code: compiled once per run, not once per cell."""
    return jax.jit(jax.vmap(code.encode))


class Cell:
    """One (K, M, straggler model) block's shared state: the delay plan drawn
    once, the layouts of each workload, the simulations (a FixedN simulation
    depends on a code only through M', its groups and which workers answer
    their own query, so codes share it), the payloads, and the decodes of the
    workloads that share a code (done together).

    Attributes:
        cfg, k, m: the run's config, K and M. shift: the latency model's fixed
        part (what an extra round of layer-wise coding costs).
        x: the E decoded requests [E, K, F]. truths: {workload: f(x) in float64}.
        search: {workload: (layouts, reasons)} (:func:`cell_search` of
        ``names``, by default :data:`NAMES`).
    """

    def __init__(self, cfg: RegimesConfig, k: int, m: int, straggler: str,
                 names=NAMES):  # fmt: skip
        self.cfg, self.k, self.m = cfg, k, m
        model = latency_model(straggler, m, cfg.seed)
        self.inj = CachedPlan(Injector(latency=model, seed=cfg.seed))
        self.shift = latency_shift(model)
        self.x = inputs(cfg.seed, cfg.error_requests, k, cfg.width)
        self.wls = {w: workload(w, cfg.width, cfg.seed) for w in cfg.workloads}
        self.truths = {w: wl.truth(self.x) for w, wl in self.wls.items()}
        smoothing = _nercc_cache(cfg, k, m)
        self.search = {
            w: cell_search(k, m, wl, smoothing, names) for w, wl in self.wls.items()
        }
        # the workloads whose cell has each code (a Lagrange code is one
        # workload's: its degree; the others serve every workload)
        self.users: dict = {}
        for w in cfg.workloads:
            for name, lays in self.search[w][0].items():
                if name == "layerwise":  # decoded round by round (its own)
                    continue
                for lay in lays:
                    names = self.users.setdefault(lay.code, [])
                    if w not in names:
                        names.append(w)
        self._sims: dict = {}
        self._payloads: dict = {}
        self._decoded: dict = {}

    def sim(self, lay: cj.Layout, n: int | None):
        """(:class:`runkit.choice.LayoutLatency` of the layout at N = ``n``
        (None: ``FirstDecodable``), the masks of the E decoded requests' groups
        [E n_groups, M'])."""
        code = lay.code
        if n is None:
            key = ("first", code, lay.groups, lay.scheme.service_scale)
        else:
            own = code.own_workers
            own = None if own is None else np.asarray(own).tobytes()
            alone = None if n >= code.threshold else code
            key = ("fixed", lay.group_workers, lay.groups,
                   lay.scheme.service_scale, n, own, alone)  # fmt: skip
        if key not in self._sims:
            pol = FirstDecodable() if n is None else FixedN(n)
            s = simulate_layout(lay, pol, self.inj, self.cfg.num_requests,
                                num_inputs=self.k, shift=self.shift)  # fmt: skip
            e = self.cfg.error_requests * s.masks.shape[1]
            self._sims[key] = (s, s.request_masks(e))
        return self._sims[key]

    def _order(self, lay: cj.Layout, rows: int) -> np.ndarray:
        """int32 [rows, M']: each decoded group's workers by arrival."""
        e, mp = self.cfg.error_requests, lay.group_workers
        delays, _ = self.inj.plan(np.arange(self.cfg.num_requests), self.m)
        cols = lay.placement[: rows // e]  # the decoded groups' workers
        d = delays[:e][:, cols].reshape(rows, mp)
        return np.argsort(d, axis=1, kind="stable").astype(np.int32)

    def _payload(self, lay: cj.Layout, w: str):
        """Workload w's answers to the E requests' groups [E n, M', _WIDTH]."""
        code = lay.code
        key = (w, code.encoder_key)
        if key not in self._payloads:
            x = self.x.reshape(-1, lay.group_inputs, self.x.shape[-1])
            y = batched_worker(self.wls[w])(_batched_encode(code)(jnp.asarray(x)))
            reps = -(-_WIDTH // y.shape[-1])
            self._payloads[key] = jnp.concatenate([y] * reps, -1)[..., :_WIDTH]
        return self._payloads[key]

    def errors(self, lay: cj.Layout, n, masks: np.ndarray, w: str) -> np.ndarray:
        """Relative error of each of the E requests (its K queries) decoded by
        the layout's groups from ``masks`` [E n, M']; the first workload that
        asks for (code, N) decodes every workload that has the code."""
        code = lay.code
        key = (code, n, masks.shape[0])
        if key not in self._decoded:
            names = self.users[code]
            ys = [self._payload(lay, v) for v in names]
            order = self._order(lay, masks.shape[0])
            errs = _joint_errors(
                code, ys, masks, order, [self.truths[v] for v in names]
            )
            self._decoded[key] = dict(zip(names, errs, strict=True))
        return self._decoded[key][w]

    def layerwise_errors(self, lay: cj.Layout, masks: np.ndarray, w: str):
        """Layer-wise coding's request errors (K' = K: one group)."""
        val = layerwise_value(lay.code, self.wls[w], self.x, masks)
        return max_rel_err(val, self.truths[w])


@functools.lru_cache(maxsize=16)
def _nercc_cache(cfg, k, m):
    if cfg.nercc_smoothing is not None:
        return tuple(cfg.nercc_smoothing)
    return tune_block(cfg, k, m)
