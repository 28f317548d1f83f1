"""One panel: every scheme on the same queries and arrivals, for each N; the
exhaustive condition-number table; the whole run."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import codedjax.bounds as cb
from models.parity_experiment.queries import (
    answered_shares,
    decode_per_query,
    decoding_kind,
)
from runkit import environment, l2_rel_err, percentile, progress

from .config import SchemesConfig, schemes
from .report import verdict
from .workloads import pair_fn, truth, workloads


def _worker_answers(code: cj.Code, wl: cj.Workload, coded, dtype):
    """Each worker's answer to its coded query, computed in ``dtype``: one function
    per role (the linear base model for every role here), pairs for coded_shape
    (2,)."""
    pair = tuple(code.coded_shape) == (2,)
    fn = pair_fn(wl) if pair else wl.fn
    worker = cj.low_precision_worker(fn, dtype)
    roles = code.roles
    if len(set(roles)) > 1 and wl.degree != 1:
        raise ValueError(f"{code.name}: per-role models only for the linear workload")
    return worker(wl.params, coded)


def _answers_program(sc: cj.Scheme, wl: cj.Workload, dtype):
    """jit(x [T, K, F] -> answers [T, M', ...] in float32): encode, then every
    worker in ``dtype``, its answer widened to float32 on arrival (so one decode
    program serves bf16 and float32 workers)."""
    code = sc.code

    def one(x):
        y = _worker_answers(code, wl, code.encode(x), dtype)
        return y.astype(jnp.float32)

    return jax.jit(jax.vmap(one))


@functools.cache
def _decode_program(code: cj.Code, copies: int):
    """jit((y, mask [T, M], order [T, M]) -> (value, ok, cond)): the code's
    ``decode_answers`` under vmap; with ``copies`` > 1, worker j holds points j,
    j + M, ... and its answers arrive together."""

    def one(y, mask, order):
        if copies > 1:
            m = mask.shape[0]
            mask = jnp.concatenate([mask] * copies)
            order = jnp.stack([order + i * m for i in range(copies)], axis=-1)
            order = order.reshape(-1)
        r = code.decode_answers(cj.Answers(y, mask, order=order))
        return r.value, r.ok, r.cond

    return jax.jit(jax.vmap(one))


def _per_query(sc: cj.Scheme, y, arr, value, ok, dec):
    """(value [T, K, ...], answered [T, K]): each query counted where the code's
    responders give it (:func:`models.parity_experiment.queries.decode_per_query`:
    ParM per group, replication and RepApprox per replica), its value filled in
    where the request is not ok."""
    order = arr.order.astype(jnp.int32)
    masks = np.tile(np.asarray(arr.mask), (1, sc.copies))  # the code's M' points
    m = arr.mask.shape[1]

    def again(y2, masks2):  # (a code at M copies points is not systematic)
        v, o, _ = dec(jnp.asarray(y2), jnp.asarray(masks2[:, :m]), order)
        return np.asarray(v), np.asarray(o)

    return decode_per_query(sc.code, np.asarray(y), masks, value, ok, again)


def _rel_err(value, ref, ok):
    """Per request, the l2 error of its K outputs relative to the truth's; inf
    where ``ok`` is False (a query of the request unanswered)."""
    t = ref.shape[0]
    e = l2_rel_err(np.reshape(value, (t, -1)), np.reshape(ref, (t, -1)))
    return np.where(np.asarray(ok), e, np.inf)


def run_panel(
    cfg: SchemesConfig,
    wl: cj.Workload,
    m: int,
    dtype: str,
    show_progress: bool,
) -> dict:
    k = cfg.num_inputs
    sch = [
        s for s in schemes(k, m, wl.degree, dtype) if not cfg.only or s.name in cfg.only
    ]
    if not sch:
        raise ValueError(f"schemes: no scheme of {cfg.only} fits {wl.name} at M={m}")
    low = max(1, min(s.code.threshold for s in sch if s.copies == 1))
    ns = list(range(low, m + 1, cfg.n_step))
    if ns[-1] != m:
        ns.append(m)
    answers = {s.name: _answers_program(s, wl, jnp.dtype(dtype)) for s in sch}
    key = jax.random.fold_in(jax.random.key(cfg.seed), wl.degree * 1000 + m)
    rows = []
    seconds: dict[str, float] = {}  # compile and run, per scheme
    desc = f"{wl.name} M={m} {dtype}"
    for n in progress(ns, desc=desc, disable=None if show_progress else True):
        kx, ka = jax.random.split(jax.random.fold_in(key, n))
        xs = jax.random.normal(kx, (cfg.trials, k, cfg.features))
        ref = truth(wl, xs)
        arr = cj.sample_arrivals(
            ka, num_workers=m, num_responses=n, shape=(cfg.trials,)
        )
        row: dict[str, Any] = {"N": n}
        for s in sch:
            t = time.perf_counter()
            y = answers[s.name](xs)
            dec = _decode_program(s.code, s.copies)
            value, ok, cond = dec(y, arr.mask, arr.order.astype(jnp.int32))
            value = np.asarray(value)
            value, answered = _per_query(s, y, arr, value, ok, dec)
            seconds[s.name] = seconds.get(s.name, 0.0) + time.perf_counter() - t
            e = _rel_err(value, ref, answered.all(axis=-1))
            cond = np.asarray(cond, np.float64)
            row[s.name] = {
                "err_median": percentile(e, 50, order_statistic=True),
                "err_p95": percentile(e, 95, order_statistic=True),
                "ok": float(np.mean(np.asarray(ok))),
                **answered_shares(answered),  # per query; every query answered
                "cond_median": percentile(cond, 50, order_statistic=True),
                "cond_p95": percentile(cond, 95, order_statistic=True),
                "cond_worst": float(np.max(cond)),
            }
        rows.append(row)
    slow = sorted(seconds.items(), key=lambda kv: -kv[1])
    print(
        f"{desc}: {sum(seconds.values()):.0f} s ("
        + ", ".join(f"{n} {t:.1f}" for n, t in slow)
        + ")",
        file=sys.stderr,
        flush=True,
    )
    ub = cj.low_precision_worker(wl.fn, jnp.dtype(dtype))(wl.params, xs)
    floor = _rel_err(ub, ref, np.ones(cfg.trials, bool))
    return {
        "workload": wl.name,
        "degree": wl.degree,
        "num_workers": m,
        "dtype": dtype,
        "schemes": {
            s.name: {
                "code": repr(s.code),
                "threshold_workers": math.ceil(s.code.threshold / s.copies),
                "work": s.service_scale,  # real evaluations of f per worker
                "copies": s.copies,
                "decoding": decoding_kind(s.code),
                "seconds": seconds[s.name],
            }
            for s in sch
        },
        "uncoded_err_median": percentile(floor, 50, order_statistic=True),
        "rows": rows,
    }


#: Figures the papers print for these configurations, (worst, mean), None where
#: not printed: Fahim and Cadambe's worst case of the raw Chebyshev-Vandermonde
#: matrix at n = 31, s = 2 (as docs/theory.md section 8 records it). Ramamoorthy and
#: Tang's tables were not located; their rows stay empty (their code's figures:
#: AUTHORS_CODE_FIGURES).
PAPER_FIGURES: dict[tuple[int, int, str], tuple[float | None, float | None]] = {
    (31, 29, "chebyshev"): (1.22e4, None),
}


#: The same exhaustive search run by Ramamoorthy and Tang's published code
#: (github.com/litangsky/stableCodedComputing, "matrix vector multiplication local
#: (python)/matVecMul.py": ``findWorkerSet2WorstCond`` on
#: ``getRotEmbedEncodingMat(k, n)`` (the circle code's rotation embedding, 2 x 2
#: blocks) and ``getRealVandEncodingMat(k, n)`` (monomials at n equispaced points
#: of [-1, 1]); numpy's ``cond``), (worst, mean) as it prints them: figures from
#: running their code, not from their paper (whose tables were not located).
AUTHORS_CODE_FIGURES: dict[tuple[int, int, str], tuple[float, float]] = {
    (31, 29, "circle"): (54.964025, 12.348829),
    (31, 29, "monomial"): (29545442037887.945, 11287243826423.625),
    (20, 16, "circle"): (462.627962, 27.978804),
    (20, 16, "monomial"): (116726813.427802, 12026368.601317),
}


def exhaustive_table() -> list[dict]:
    rows = []
    for m, d in ((31, 29), (20, 16)):
        for scheme in cb.BASES:
            r = cb.exhaustive_condition(scheme=scheme, num_workers=m, num_coeffs=d)
            paper = PAPER_FIGURES.get((m, d, scheme))
            theirs = AUTHORS_CODE_FIGURES.get((m, d, scheme))
            rows.append(
                {
                    "n": m,
                    "k": d,
                    "scheme": scheme,
                    "worst": r.worst,
                    "mean": r.mean,
                    "sets": r.num_examined,
                    "paper_worst": None if paper is None else paper[0],
                    "paper_mean": None if paper is None else paper[1],
                    "authors_code_worst": None if theirs is None else theirs[0],
                    "authors_code_mean": None if theirs is None else theirs[1],
                }
            )
    return rows


def run(cfg: SchemesConfig, show_progress: bool = True) -> dict:
    t0 = time.perf_counter()
    panels = []
    k = cfg.num_inputs
    parm_m = k + k // cfg.parm_group
    for wl in workloads(cfg):
        if wl.name not in cfg.workloads:
            continue
        for dtype in cfg.dtypes:
            panels.append(run_panel(cfg, wl, cfg.num_workers, dtype, show_progress))
            if wl.degree == 1 and parm_m != cfg.num_workers:
                panels.append(run_panel(cfg, wl, parm_m, dtype, show_progress))
    summary: dict[str, Any] = {
        "config": dataclasses.asdict(cfg),
        "panels": panels,
        "parity_code": hasattr(cj, "parity_code"),
        "exhaustive": exhaustive_table() if cfg.exhaustive else [],
    }
    if cfg.models and "adult" in cfg.model_panels:
        from .models import run_model_panel  # flax and the model only when asked

        summary["model_panel"] = run_model_panel(cfg, show_progress)
    if cfg.models and "mnist" in cfg.model_panels:
        from .mnist import run_mnist_panel

        summary["mnist_panel"] = run_mnist_panel(cfg, show_progress)
    summary["verdict"] = verdict(summary)
    summary["environment"] = environment()
    summary["seconds"] = time.perf_counter() - t0
    return summary
