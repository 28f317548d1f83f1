"""The regime map's cells: simulated latency (``simulate_latency``) and decoded
error on real payloads, for every scheme of every cell.

A cell's schemes are the catalogue's (:func:`codedjax.catalogue`) at (workload,
K, M), each on the same M workers; one that cannot serve the cell is a row with
the catalogue's reason. The map's own choices: ``parity`` at its smallest group
size (its parity model the workload itself, untrained), NeRCC's smoothing tuned
per (K, M) (:func:`tune_block`), and the N grid of a scheme served at a tuned N
(:func:`n_grid`), whose smallest N meeting the accuracy target is kept
(:func:`runkit.stats.accuracy_target` of the cell's uncoded bf16 errors).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import (
    FirstDecodable,
    FixedN,
    Injector,
    latency_shift,
    simulate_latency,
)
from models.layerwise import CachedPlan, pipeline_values
from runkit import accuracy_target, max_rel_err, percentile

from .config import RegimesConfig, latency_model
from .workloads import batched_worker, inputs, rounds, workload

__all__ = ["NAMES", "cell_schemes", "layerwise_value", "run_block", "tune_block"]

#: the catalogue's schemes on the map, in its order
NAMES = ("uncoded", "replication", "chebyls", "threshold", "graceful", "bacc",
         "nercc", "repapprox", "parity", "layerwise")  # fmt: skip

_CHUNK = 256
#: payloads are widened to this many columns by repeating their own, so one decode
#: program per code serves every workload (the error is read on the first F)
_WIDTH = 32


def cell_schemes(k: int, m: int, wl: cj.Workload, nercc_smoothing) -> list[cj.Scheme]:
    """Every scheme of the cell (K, M, workload), in the map's order: the
    catalogue's :data:`NAMES`, ``parity`` at its smallest group size."""
    out = []
    for s in cj.catalogue(wl, k, m, names=NAMES, nercc_smoothing=nercc_smoothing):
        if s.family == "parity":
            if any(r.family == "parity" for r in out):
                continue  # the catalogue lists the group sizes in increasing order
            s = dataclasses.replace(s, name="parity")
        out.append(s)
    return out


def n_grid(cfg: RegimesConfig, s: cj.Scheme, k: int) -> list[int]:
    """The N a scheme tries: its code's threshold unless served at a tuned N
    (``policy == "fixed"``), then ``cfg.n_grid`` from D for a Lagrange code (its
    ``num_coeffs``), from K for the others."""
    if s.policy != "fixed":
        return [s.code.threshold]
    return cfg.n_grid(max(k, getattr(s.code, "num_coeffs", k)), s.code.num_workers)


def _chunks(n):
    return [slice(s, min(n, s + _CHUNK)) for s in range(0, n, _CHUNK)]


def _decode_values(code, y, masks, order):
    """Decoded values [E, K, F'] and ok [E] of y [E, M, F'] with masks [E, M]."""
    vals, oks = [], []
    for sl in _chunks(y.shape[0]):
        reads = "order" in getattr(code, "answer_fields", ())
        kw = {"order": jnp.asarray(order[sl])} if reads else {}
        r = code.decode_batched(y[sl], jnp.asarray(masks[sl]), **kw)
        vals.append(np.asarray(r.value))
        oks.append(np.asarray(r.ok))
    return np.concatenate(vals), np.concatenate(oks)


def _decode_errors(code, y, masks, order, truth):
    """Relative error per request of decoding y [E, M, F'] with masks [E, M]
    (inf where the decode is not ok); truth [E, K, F], F <= F'."""
    val, ok = _decode_values(code, y, masks, order)
    return np.where(ok, max_rel_err(val[..., : truth.shape[-1]], truth), np.inf)


def _joint_errors(code, ys, masks, order, truths):
    """:func:`_decode_errors` of several workloads' payloads ys [E, M, F'] each
    under the same masks, decoded side by side in one call (every decoder here
    is linear column by column, and ok depends on the masks alone once every
    answer is finite; with a non-finite answer each workload is decoded alone)."""
    y = jnp.concatenate(ys, -1)
    if not bool(jnp.isfinite(y).all()):
        return [
            _decode_errors(code, yi, masks, order, t)
            for yi, t in zip(ys, truths, strict=True)
        ]
    val, ok = _decode_values(code, y, masks, order)
    out, start = [], 0
    for yi, t in zip(ys, truths, strict=True):
        part = val[..., start : start + t.shape[-1]]
        out.append(np.where(ok, max_rel_err(part, t), np.inf))
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


def run_block(cfg: RegimesConfig, k: int, m: int, straggler: str, progress=None):
    """Every workload's rows at (K, M) under one straggler model.

    Returns:
        {workload: {"target": ..., "uncoded_error": ..., "rows": [row, ...]}}
    """
    model = latency_model(straggler, m, cfg.seed)
    inj = CachedPlan(Injector(latency=model, seed=cfg.seed))
    shift = latency_shift(model)
    r, e = cfg.num_requests, cfg.error_requests
    delays, _ = inj.plan(np.arange(r), m)
    order = np.argsort(delays[:e], axis=1, kind="stable").astype(np.int32)
    smoothing = _nercc_cache(cfg, k, m)
    sims: dict = {}

    def sim(code, policy: str, n: int | None = None):
        key = (code.num_workers, policy, n if policy != "first" else code.name)
        if key not in sims:
            pol = FirstDecodable() if policy == "first" else FixedN(n)
            s = simulate_latency(code, pol, inj, r)
            sims[key] = (s.latency, s.masks[:e], float(np.mean(s.ok)))
        return sims[key]

    x = inputs(cfg.seed, e, k, cfg.width)
    wls = {name: workload(name, cfg.width, cfg.seed) for name in cfg.workloads}
    truths = {name: wl.truth(x) for name, wl in wls.items()}
    cell = {name: cell_schemes(k, m, wl, smoothing) for name, wl in wls.items()}
    # the workloads whose cell has each code (a Lagrange code is one workload's:
    # its degree; the others serve every workload)
    users: dict = {}
    for name in cfg.workloads:
        for sch in cell[name]:
            if sch.code is not None and name not in users.setdefault(sch.code, []):
                users[sch.code].append(name)
    payloads: dict = {}

    def payload(code, name):
        key = (name, code.encoder_key)
        if key not in payloads:
            enc = _batched_encode(code)(jnp.asarray(x))
            y = batched_worker(wls[name])(enc)
            reps = -(-_WIDTH // y.shape[-1])
            payloads[key] = jnp.concatenate([y] * reps, -1)[..., :_WIDTH]
        return payloads[key]

    joint: dict = {}

    def errors(code, n, masks, name):
        """The first workload that asks for (code, N) decodes the payloads of
        every workload that has the same code at once."""
        names = users[code]
        if len(names) == 1:
            return _decode_errors(code, payload(code, name), masks, order, truths[name])
        if (code, n) not in joint:
            errs = _joint_errors(
                code,
                [payload(code, w) for w in names],
                masks,
                order,
                [truths[w] for w in names],
            )
            joint[(code, n)] = dict(zip(names, errs, strict=True))
        return joint[(code, n)][name]

    out = {}
    for name in cfg.workloads:
        wl, truth = wls[name], truths[name]
        rows = []
        target = uncoded = None
        for sch in cell[name]:
            t0 = time.perf_counter()
            row = {"scheme": sch.name, "note": sch.note}
            if sch.reason is not None:
                rows.append({**row, "applies": False, "reason": sch.reason})
                continue
            ns = n_grid(cfg, sch, k)
            tries = []
            for n in ns:
                if sch.policy == "first":
                    lat, masks, okf = sim(sch.code, "first")
                else:
                    lat, masks, okf = sim(sch.code, "fixed", n)
                if sch.name == "layerwise":
                    val = layerwise_value(sch.code, wl, x, masks)
                    err = max_rel_err(val, truth)
                    lat = lat + (sch.rounds - 1) * shift
                else:
                    err = errors(sch.code, n, masks, name)
                tries.append((n, lat, err, okf))
                if target is None and sch.name == "uncoded":
                    uncoded = percentile(err, 50)
                    target = accuracy_target(err, cfg.error_factor)
                if target is not None and percentile(err, 50) <= target:
                    break  # the smallest N of the grid that meets the target
            n, lat, err, okf = tries[-1]
            med = percentile(err, 50)
            row.update(
                {
                    "applies": True,
                    "n": int(n) if sch.policy != "first" else None,
                    "rounds": sch.rounds,
                    "latency_ms": {q: 1e3 * percentile(lat, q) for q in (50, 99, 99.9)},
                    "ok_fraction": okf,
                    "error_median": med,
                    "error_p99": percentile(err, 99),
                    "meets_target": bool(med <= target),
                    "tried": [
                        {
                            "n": int(t[0]),
                            "p99_ms": 1e3 * percentile(t[1], 99),
                            "error_median": percentile(t[2], 50),
                        }
                        for t in tries
                    ],
                    "seconds": time.perf_counter() - t0,
                }
            )
            rows.append(row)
        out[name] = {
            "target": target,
            "uncoded_error": uncoded,
            "degree": wl.degree,
            "layers": wl.num_layers,
            "rows": rows,
        }
        if progress is not None:
            progress()
    return out


@functools.lru_cache(maxsize=16)
def _nercc_cache(cfg, k, m):
    if cfg.nercc_smoothing is not None:
        return tuple(cfg.nercc_smoothing)
    return tune_block(cfg, k, m)
