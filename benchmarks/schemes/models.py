"""The model panel (``--models``): the Adult DCNv2 coded by every code that fits it.

The model is the one :mod:`models.coded_dcn` and :mod:`models.serve_dcn` serve in
their quick mode (``models.coded_dcn.QUICK_TRAIN``, loaded from ``ckpt_dir`` or
trained there when its checkpoint is missing; the data is ``data/adult.csv.gz``).
Its logit is ``cross(x0) + deep(x0) + b``: the Cross tower with its head is a
polynomial of degree 3 in x0 (D = 22 for K = 8), the Deep branch a ReLU MLP. Every
row codes the two branches with a pair of :class:`codedjax.Code` objects (the same
object: one coded input per worker feeds both branches), the workers compute in the
worker dtype (bf16), and the master decodes in float32 from the first N arrivals of
one uniformly random arrival order per group of K test queries and repetition: the
same masks for every row. The Cross codes: ChebyLS, the threshold decoder, the
circle code (complex queries as (real, imaginary) pairs, work 2) and its threshold
decoder; the Deep codes: RepApprox (c = 4, as models.coded_dcn), BACC, NeRCC and
replication: :data:`PAIRS` of the head-to-head's rows (``codedjax.catalogue``'s
codes). The random and the packed circle codes are linear-only and cannot code
the degree-3 tower (the panel gives the catalogue's reasons). NeRCC's smoothing
pair is fixed at (1e-4, 1e-3) here (models.coded_dcn tunes it per N on the
validation split).

The decode, the worker model and the metrics are models.coded_dcn's
(:func:`models.coded_dcn.pipeline.decode_masks`,
:class:`models.coded_dcn.served.ServedDCN`,
:func:`models.coded_dcn.metrics.decoded_metrics`): test AUC and logloss of the
decoded logits, and their relative error against the uncoded float32 model. Each
query is counted on its own: answered where both branches give it
(:func:`models.parity_experiment.queries.decode_per_query`: replication and
RepApprox per replica, the other codes with their request), logit 0 otherwise;
``answered`` and ``whole`` are the shares of queries answered and of requests with
every query answered.
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
from models.coded_dcn import QUICK_TRAIN, DCNScheme
from models.coded_dcn.metrics import decoded_metrics, group_indices, uncoded_metrics
from models.coded_dcn.pipeline import decode_branches, decode_masks, encode_groups
from models.coded_dcn.served import ServedDCN
from models.parity_experiment.queries import answered_shares, decode_per_query
from models.tabular import load_dataset
from models.train_dcn import load_or_train
from runkit import fmt, progress

from .config import schemes

#: the panel's rows: (Cross row, Deep row) of the head-to-head
#: (:func:`benchmarks.schemes.schemes`); a row named once feeds both branches from
#: one coded input
PAIRS = (
    ("chebyls", "repapprox"),
    ("threshold", "repapprox"),
    ("circle", "repapprox"),
    ("circle-threshold", "repapprox"),
    ("chebyls", "bacc"),
    ("chebyls", "nercc"),
    ("chebyls", "replication"),
    ("bacc", "bacc"),
    ("nercc", "nercc"),
    ("replication", "replication"),
)


def model_rows(k: int, m: int, degree: int) -> dict[str, tuple[cj.Code, cj.Code]]:
    """name -> (Cross code, Deep code): the head-to-head's codes for the Cross
    tower (a polynomial of ``degree``) and for the Deep MLP (not a polynomial);
    equal codes for a shared row (one input feeds both)."""
    cross = {s.name: s.code for s in schemes(k, m, degree, "bfloat16")}
    deep = {s.name: s.code for s in schemes(k, m, None, "bfloat16")}
    return {
        c if c == d else f"{c}+{d}": (cross[c], deep[d])
        for c, d in PAIRS
        if c in cross and d in deep
    }


def not_applicable(k: int, m: int, degree: int) -> dict[str, str]:
    """Why the linear-only codes have no row (the catalogue's reasons)."""
    wl = cj.Workload("cross", degree)
    (rnd,) = cj.catalogue(wl, k, m, names=["random"])
    (packed,) = cj.catalogue(wl, k, m, names=["circle"], circle_pack=True)
    return {"random": rnd.reason, "circle-packed": packed.reason}


@functools.partial(jax.jit, static_argnames=("graphdef", "dtype"))
def _cross_pair_jit(graphdef, state, x, dtype):
    """The Cross tower with its head on complex queries x [B, 2, d0] (real,
    imaginary) in real arithmetic of ``dtype``: -> [B, 2]."""
    model = nnx.merge(graphdef, state)
    x = x.astype(dtype)
    a0, b0 = x[:, 0], x[:, 1]
    xr, xi = a0, b0
    for layer in model.cross_layers:
        hr = xr if layer.down is None else layer.down(xr)
        hi = xi if layer.down is None else layer.down(xi)
        tr = layer.up(hr)  # W h_re + b
        ti = hi @ layer.up.kernel[...]  # W h_im (the bias is real)
        xr, xi = a0 * tr - b0 * ti + xr, a0 * ti + b0 * tr + xi
    head = model.cross_head
    return jnp.stack([head(xr)[:, 0], head(xi)[:, 0]], axis=-1)


def _workers(served: ServedDCN, code: cj.Code, xg: np.ndarray) -> np.ndarray:
    """Worker outputs, widened to float32: real codes [G, M, 2] (cross, deep); the
    circle codes [G, M, 2] (cross real, cross imaginary)."""
    if tuple(code.coded_shape) == (2,):
        coded = code.encode(jnp.swapaxes(jnp.asarray(xg), 0, 1))  # [M, 2, G, d0]
        coded = jnp.transpose(coded, (2, 0, 1, 3))  # [G, M, 2, d0]
        g, m = coded.shape[:2]
        flat = coded.reshape(g * m, 2, -1)
        y = _cross_pair_jit(served.gw, served.sw, flat, served.wdt)
        return np.asarray(y.astype(jnp.float32)).reshape(g, m, 2)
    return served.run_workers(encode_groups(code, xg))


def run_model_panel(
    cfg, show_progress: bool = True, *, model: Any = None, data: Any = None
) -> dict:
    """The model panel for a :class:`benchmarks.schemes.SchemesConfig` (its
    ``model_*`` fields, ``num_inputs``, ``num_workers``, ``seed``, ``ckpt_dir``).

    ``model`` (a parallel DCNv2) and ``data`` (splits with a ``test`` tuple
    ``(categorical, numeric, labels)``) default to the quick Adult model and data."""
    t0 = time.perf_counter()
    if data is None:
        data = load_dataset(QUICK_TRAIN, show_progress=show_progress)
    if model is None:
        model, _ = load_or_train(
            QUICK_TRAIN, cfg.ckpt_dir, data=data, show_progress=show_progress
        )
    k, m, r = cfg.num_inputs, cfg.num_workers, cfg.model_repetitions
    degree = model.config.num_cross_layers + 1
    d = cj.recovery_threshold(k, degree)
    ns = [n for n in cfg.model_responses if d <= n <= m]
    if not ns:
        raise ValueError(
            f"--model-responses: need D = {d} <= N <= M = {m}, got "
            f"{list(cfg.model_responses)}"
        )
    cat, num, labels = (np.asarray(a) for a in data.test)
    if cfg.model_queries:
        cat, num, labels = (a[: cfg.model_queries] for a in (cat, num, labels))
    labels = labels.astype(np.int32)
    served = ServedDCN(model, cfg.model_dtype)
    x0 = served.embed(cat, num)
    gidx = group_indices(int(labels.shape[0]), k)
    ref = uncoded_metrics(served, x0, labels, gidx, cfg.model_dtype)
    arrivals = cj.sample_arrivals(
        jax.random.fold_in(jax.random.key(cfg.seed), 7),
        num_workers=m,
        num_responses=m,
        model=cj.Uniform(0.0, 1.0),
        shape=(r, len(gidx)),
    )
    orders = np.asarray(arrivals.order, np.int32).reshape(-1, m)
    ranks = np.argsort(orders, axis=-1, kind="stable")
    xg = x0[gidx]  # [G, K, d0]
    g = len(gidx)
    rows_codes = model_rows(k, m, degree)
    if cfg.model_rows:
        unknown = sorted(set(cfg.model_rows) - set(rows_codes))
        if unknown:
            raise ValueError(
                f"--model-rows: choose from {', '.join(rows_codes)}; got {unknown}"
            )
        rows_codes = {n: c for n, c in rows_codes.items() if n in cfg.model_rows}
    outputs: dict[cj.Code, np.ndarray] = {}

    def out_of(code):
        if code not in outputs:
            y = _workers(served, code, xg)
            outputs[code] = np.broadcast_to(y[None], (r,) + y.shape).reshape(
                (r * g,) + y.shape[1:]
            )
        return outputs[code]

    answered: dict[cj.Code, np.ndarray] = {}  # per code: the last decode's

    def again(code):
        def run(y2, masks2):
            v, o, _ = decode_masks(code, y2, masks2, orders)
            return np.asarray(v), np.asarray(o)

        return run

    def dec(code, y, masks):
        value, ok, cond = decode_masks(code, y, masks, orders)
        value, answered[code] = decode_per_query(code, y, masks, value, ok, again(code))
        return value.reshape((r, g) + value.shape[1:]), np.asarray(ok), cond

    results: dict[str, dict[str, Any]] = {name: {} for name in rows_codes}
    seconds = dict.fromkeys(rows_codes, 0.0)
    disable = None if show_progress else True
    for n in progress(ns, desc=f"DCNv2 Adult M={m} {cfg.model_dtype}", disable=disable):
        masks = ranks < n
        for name, (cc, dc) in rows_codes.items():
            t = time.perf_counter()
            scheme = DCNScheme(cc, dc)
            cross, deep, okc, okd, _ = decode_branches(scheme, out_of, dec, masks)
            both = answered[cc] & answered[dc]  # [r G, K]: a query needs both
            z = cross.astype(np.float32) + deep.astype(np.float32) + served.bias
            # an unanswered query is answered with logit 0 (p = 1/2)
            z = np.where(both.reshape(z.shape), z, np.float32(0.0))
            met = decoded_metrics(z, labels, gidx, ref, cross)
            results[name][n] = {
                "auc": met["auc"],
                "logloss": met["logloss"],
                "logit_rel_err_median": met["logit_rel_err_median"],
                "logit_rel_err_p95": met["logit_rel_err_p95"],
                "cross_ok": float(np.mean(okc)),
                "deep_ok": float(np.mean(okd)),
                **answered_shares(both),
            }
            seconds[name] += time.perf_counter() - t
    print(
        f"model panel: {time.perf_counter() - t0:.0f} s ("
        + ", ".join(f"{a} {b:.1f}" for a, b in seconds.items())
        + ")",
        file=sys.stderr,
        flush=True,
    )
    return {
        "model": "DCNv2 (parallel, L = 2) on Adult, models.coded_dcn.QUICK_TRAIN",
        "num_inputs": k,
        "num_workers": m,
        "num_coeffs": d,
        "dtype": cfg.model_dtype,
        "repetitions": r,
        "test_queries": int(labels.shape[0]),
        "responses": ns,
        "uncoded": ref["uncoded"],
        "uncoded_worker": ref["uncoded_bf16"],
        "uncoded_worker_branches": ref["uncoded_bf16_branches"],
        "rows": {
            name: {
                "cross": repr(cc),
                "deep": repr(dc),
                "shared": cc == dc,
                "seconds": seconds[name],
                "by_n": {str(n): v for n, v in results[name].items()},
            }
            for name, (cc, dc) in rows_codes.items()
        },
        "not_applicable": not_applicable(k, m, degree),
    }


def format_model_panel(p: dict) -> str:
    """The panel's markdown: AUC / logloss per row and N, and the logit error."""
    ns = [str(n) for n in p["responses"]]
    u, uw = p["uncoded"], p["uncoded_worker"]
    lines = [
        f"## Model panel: {p['model']} (K = {p['num_inputs']}, M = "
        f"{p['num_workers']}, D = {p['num_coeffs']}, {p['dtype']} workers)",
        "",
        f"{p['test_queries']} test queries, {p['repetitions']} arrival orders per "
        f"group (the same masks for every row). Uncoded float32: AUC "
        f"{u['auc']:.4f}, logloss {u['logloss']:.4f}; uncoded {p['dtype']}: AUC "
        f"{uw['auc']:.4f}, logloss {uw['logloss']:.4f}. Cells: AUC / logloss "
        f"(mean over orders) (median relative logit error vs float32); `*`: "
        f"some queries unanswered (logit 0; a query is answered where both branches "
        f"give it: replication and RepApprox per replica, the other codes with "
        f"their request).",
        "",
        "| scheme (Cross+Deep) | " + " | ".join(f"N={n}" for n in ns) + " |",
        "|---|" + "---|" * len(ns),
    ]
    for name, row in p["rows"].items():
        cells = []
        for n in ns:
            c = row["by_n"][n]
            star = "*" if c.get("answered", 1.0) < 1.0 else ""
            cells.append(
                f"{fmt(c['auc'], '.4f', '-')} / {fmt(c['logloss'], '.4f', '-')} "
                f"({fmt(c['logit_rel_err_median'], '.2g', '-')}){star}"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, why in p["not_applicable"].items():
        lines.append(f"- {name}: {why}.")
    return "\n".join(lines) + "\n"
