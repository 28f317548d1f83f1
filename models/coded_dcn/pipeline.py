"""The coded DCNv2 pipeline: serve Adult's test queries with every scheme, measure.

The test queries are served in groups of K by M workers that compute in the worker
dtype (bf16 for the experiment); the master embeds the queries in float32, encodes
them with each scheme's codes (:mod:`models.coded_dcn.schemes`), every worker runs
the Cross tower on its Cross input and the Deep MLP on its Deep input, and the master
decodes (in float32) from the N workers that answered first. A worker that straggles
is lost for both branches (one mask per group of queries, shared by the branches and
by every scheme).

Straggler model: i.i.d. uniform latencies, i.e. a uniformly random arrival order per
group and repetition (:func:`codedjax.sample_arrivals` with ``cj.Uniform(0, 1)``); the
mask for N is the first N arrivals of that order, so the masks are nested in N and
identical for every scheme. Reported per scheme and N: test AUC and logloss (every
test query; the last group is completed by wrapping around to the first queries,
which are scored once), the median and 95th percentile over groups (and repetitions)
of the relative L2 error of a group's K logits against the uncoded float32 model and
against the uncoded bf16 model, and for RepApprox the fraction of Deep tasks (and of
groups) recovered exactly next to the exact probabilities.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from runkit import CachedFn, environment, progress

from ..dcn import DCNv2
from ..tabular import load_dataset
from ..train_dcn import load_or_train
from .config import CodedDCNConfig
from .metrics import (
    decoded_metrics,
    exact_metrics,
    group_indices,
    rel_err,
    uncoded_metrics,
)
from .report import targets, write_outputs
from .schemes import DCNScheme, Sizes, build_schemes
from .served import ServedDCN

__all__ = ["CodedDCNSummary", "decode_branches", "run_coded_dcn"]

# at N = D the first D arrivals are every responder: the same square system
_IDENTICAL_AT_D = ("chebyls+repapprox", "threshold+repapprox")


class CodedDCNSummary(TypedDict):
    """What :func:`run_coded_dcn` returns (and writes to ``summary.json``)."""

    uncoded: dict[str, Any]
    uncoded_bf16: dict[str, Any]
    uncoded_bf16_branches: dict[str, Any]
    coded: list[dict[str, Any]]
    nercc: dict[str, dict[str, float]]
    config: dict[str, Any]
    train_metrics: dict[str, Any]
    identical_at_threshold: bool | None
    rel_diff_at_threshold: float | None
    timing: dict[str, float]
    backend: str
    jax_version: str
    environment: dict[str, Any]
    targets: dict[str, Any]


def encode_groups(code: cj.Code, x: np.ndarray) -> jax.Array:
    """[G, K, ...] -> [G, M, ...]: the groups ride along as trailing features."""
    return jnp.swapaxes(code.encode(jnp.swapaxes(jnp.asarray(x), 0, 1)), 0, 1)


@functools.partial(jax.jit, static_argnums=0)
def decode_masks(code: cj.Code, y, masks, orders):
    """y [B, M, ...], masks and arrival orders [B, M] -> value [B, K, ...], ok [B],
    cond [B]: one compiled program for every N (the mask is data)."""
    r = code.decode_answers_batched(cj.Answers(y, masks, orders))
    return r.value, r.ok, r.cond


def decode_branches(scheme: DCNScheme, outputs, decode, masks):
    """Both branches of ``scheme`` decoded under the same masks: (cross, deep, ok
    of the Cross decode, ok of the Deep decode, cond of the Cross decode).

    ``outputs(code)``: the workers' answers [..., M, 2] to ``code``'s inputs,
    (cross, deep), or (real, imaginary) of the Cross branch for a code of complex
    queries (``coded_shape`` (2,)); ``decode(code, y, masks)`` -> (value, ok,
    cond). A shared scheme decodes both branches from one answer of each worker.
    """
    if scheme.shared:  # one coded input feeds both branches
        val, ok, cond = decode(scheme.cross, outputs(scheme.cross), masks)
        return val[..., 0], val[..., 1], ok, ok, cond
    yc = outputs(scheme.cross)
    pair = tuple(scheme.cross.coded_shape) == (2,)
    cross, okc, cond = decode(scheme.cross, yc if pair else yc[..., 0], masks)
    deep, okd, _ = decode(scheme.deep, outputs(scheme.deep)[..., 1], masks)
    return cross, deep, okc, okd, cond


def _check_model(fname: str, model: Any, config: CodedDCNConfig) -> None:
    if not isinstance(model, DCNv2):
        raise TypeError(
            f"{fname}: model must be a models.dcn.DCNv2, got {type(model).__name__}"
        )
    mcfg = model.config
    if mcfg.structure != "parallel":
        raise ValueError(
            f"{fname}: coded inference needs a parallel DCNv2, got structure "
            f"{mcfg.structure!r}"
        )
    if mcfg.num_cross_layers != config.train.num_cross_layers:
        raise ValueError(
            f"{fname}: the model has L = {mcfg.num_cross_layers} cross layers, the "
            f"config says train.num_cross_layers = {config.train.num_cross_layers}"
        )


def _tune(scheme, served, data, config, key, disable) -> dict[int, dict[str, float]]:
    """NeRCC's (encoder, decoder) smoothing per N, tuned on the validation split."""
    fname, k = "run_coded_dcn", config.num_inputs
    vcat, vnum, _ = (np.asarray(a) for a in data.val)
    nv = min(config.nercc_val_groups * k, (len(vcat) // k) * k)
    if nv < k:
        raise ValueError(
            f"{fname}: NeRCC tuning needs at least K = {k} validation queries, got "
            f"{len(vcat)}"
        )
    x_val = jnp.asarray(served.embed(vcat[:nv], vnum[:nv]).reshape(nv // k, k, -1))
    keys = jax.random.split(key, len(config.responses))
    code, choice = scheme.cross, {}
    pairs = list(zip(config.responses, keys, strict=True))
    for n, kn in progress(pairs, desc="tune NeRCC (validation)", disable=disable):
        t = cj.tune_nercc(
            kn,
            served.worker_total,
            x_val,
            num_workers=config.num_workers,
            num_responses=n,
            beta=code.beta(),
            alpha=code.alpha(),
            grid=config.nercc_grid,
            num_masks=config.nercc_num_masks,
        )
        choice[n] = {
            "encoder_smoothing": t.encoder_smoothing,
            "decoder_smoothing": t.decoder_smoothing,
            "val_mse": t.mse,
        }
    return choice


class _Run:
    """The state one run shares between its steps: the served model, the grouped
    queries, the references, the straggler patterns and the worker outputs."""

    def __init__(self, config, served, xg, ref, labels, gidx, orders):
        self.config, self.served, self.xg = config, served, xg
        self.ref, self.labels, self.gidx, self.orders = ref, labels, gidx, orders
        self.r, self.g = config.num_repetitions, gidx.shape[0]
        self.workers = CachedFn(served.run_workers)  # equal encodings run once
        self._outputs: dict[cj.Code, np.ndarray] = {}

    def outputs(self, code: cj.Code) -> np.ndarray:
        """Worker outputs [R G, M, 2] for ``code``'s inputs, one copy per pattern."""
        if code not in self._outputs:
            y = self.workers(encode_groups(code, self.xg))  # [G, M, 2]
            self._outputs[code] = np.broadcast_to(y[None], (self.r,) + y.shape).reshape(
                (self.r * self.g,) + y.shape[1:]
            )
        return self._outputs[code]

    def decode(self, code: cj.Code, y, masks):
        value, ok, cond = decode_masks(code, y, masks, self.orders)
        shape = (self.r, self.g, code.num_inputs) + y.shape[2:]
        return np.asarray(value).reshape(shape), np.asarray(ok), np.asarray(cond)

    def row(self, name: str, scheme: DCNScheme, n: int, masks) -> tuple[dict, Any]:
        """One scheme at one N: decode both branches, the row of metrics and z."""
        row: dict[str, Any] = {"scheme": name, "N": n}
        cross, deep, okc, okd, cond = decode_branches(
            scheme, self.outputs, self.decode, masks
        )
        if scheme.shared:
            row.update(
                ok_fraction=float(okc.mean()), cond_median=float(np.median(cond))
            )
        else:
            row.update(
                cross_ok_fraction=float(okc.mean()),
                deep_ok_fraction=float(okd.mean()),
                cross_cond_median=float(np.median(cond)),
            )
        if scheme.tuned:
            row["encoder_smoothing"], row["decoder_smoothing"] = scheme.cross.smoothing
        z = cross.astype(np.float32) + deep.astype(np.float32) + self.served.bias
        row.update(decoded_metrics(z, self.labels, self.gidx, self.ref, cross))
        row.update(exact_metrics(scheme.deep, masks, n, deep, self.ref["deep_w"]))
        row["auc_diff"] = row["auc"] - self.ref["uncoded"]["auc"]
        row["logloss_diff"] = row["logloss"] - self.ref["uncoded"]["logloss"]
        return row, z


def _test_queries(fname: str, config: CodedDCNConfig, data: Any):
    """The test split (cut to ``max_test_queries``): categorical, numeric, labels."""
    cat, num, labels = (np.asarray(a) for a in data.test)
    if config.max_test_queries is not None:
        cat, num, labels = (a[: config.max_test_queries] for a in (cat, num, labels))
    k, nq = config.num_inputs, int(labels.shape[0])
    if nq < k:
        raise ValueError(
            f"{fname}: the test split needs at least K = {k} queries, got {nq}"
        )
    return cat, num, labels.astype(np.int32)


def _decode_all(run: _Run, schemes, tuning, ranks, disable):
    """Every scheme at every N: the rows, and how far apart ChebyLS and the
    threshold decoder's logits are at N = D (the same square system)."""
    coded, identical_at_d = [], None
    for n in progress(run.config.responses, desc="decode per N", disable=disable):
        masks = ranks < n  # [R G, M], shared by every scheme
        zs = {}
        for name, scheme in schemes.items():
            if name in tuning:
                ch = tuning[name][n]
                pair = (ch["encoder_smoothing"], ch["decoder_smoothing"])
                scheme = scheme.with_smoothing(pair)
            row, zs[name] = run.row(name, scheme, n, masks)
            coded.append(row)
        if n == run.config.num_coeffs and all(s in zs for s in _IDENTICAL_AT_D):
            a, b = (zs[s] for s in _IDENTICAL_AT_D)
            # the same square system: equal up to the two solvers' rounding
            identical_at_d = {
                "identical": bool(np.array_equal(a, b)),
                "median_rel_diff": float(np.median(rel_err(a, b))),
            }
    return coded, identical_at_d


def run_coded_dcn(
    config: CodedDCNConfig,
    *,
    model: DCNv2 | None = None,
    data: Any = None,
    out: str | Path | None = None,
    show_progress: bool | None = None,
) -> CodedDCNSummary:
    """Runs the coded-inference experiment and returns its summary.

    Args:
        config: the run configuration.
        model: a parallel DCNv2 to serve (default: ``load_or_train(config.train,
            config.ckpt_dir)``, which trains when no checkpoint is present).
        data: the splits (``val`` and ``test`` tuples ``(categorical, numeric,
            labels)``, e.g. an :class:`models.tabular.ArrayData`); default: the
            data set named by ``config.train``.
        out: if given, ``summary.json``, ``report.md`` and the PNG plots are
            written there.
        show_progress: ``False`` hides the progress bars.

    Returns:
        The summary: ``uncoded`` and ``uncoded_bf16`` (the whole uncoded model in
        the worker dtype) metrics, ``uncoded_bf16_branches`` (the uncoded
        worker-dtype branches summed with the bias in float32, the floor of the
        coded schemes), ``coded`` (one dict per scheme and N), ``nercc`` (chosen
        smoothing per N), ``identical_at_threshold``, ``targets``, ``config``,
        ``train_metrics`` and ``timing``.

    Raises:
        ValueError: a stacked model, a model whose number of cross layers differs
            from ``config.train`` (D would differ), test or validation splits that
            are too small.
        TypeError: a model that is not a DCNv2.
    """
    fname = "run_coded_dcn"
    t_start = time.perf_counter()
    timing: dict[str, float] = {}
    train_metrics: dict[str, Any] = {}
    if data is None:
        data = load_dataset(config.train, show_progress=show_progress)
    if model is None:
        t0 = time.perf_counter()
        model, train_metrics = load_or_train(
            config.train, config.ckpt_dir, data=data, show_progress=show_progress
        )
        timing["model_seconds"] = time.perf_counter() - t0
    _check_model(fname, model, config)
    k, m, r = config.num_inputs, config.num_workers, config.num_repetitions
    disable = True if show_progress is False else (False if show_progress else None)
    cat, num, labels = _test_queries(fname, config, data)
    nq = int(labels.shape[0])

    t0 = time.perf_counter()
    served = ServedDCN(model, config.worker_dtype)
    x0 = served.embed(cat, num)  # [Q, d0] float32 (master)
    gidx = group_indices(nq, k)  # [G, K]
    ref = uncoded_metrics(served, x0, labels, gidx, config.worker_dtype)
    timing["uncoded_seconds"] = time.perf_counter() - t0

    # one uniformly random arrival order per (repetition, group); the mask for N is
    # its first N arrivals, so the masks are nested in N
    k_arr, k_tune = jax.random.split(jax.random.key(config.seed))
    arrivals = cj.sample_arrivals(
        k_arr,
        num_workers=m,
        num_responses=m,
        model=cj.Uniform(0.0, 1.0),
        shape=(r, len(gidx)),
    )
    orders = np.asarray(arrivals.order, np.int32).reshape(-1, m)
    ranks = np.argsort(orders, axis=-1, kind="stable")  # arrival rank of each worker
    sizes = Sizes(k, m, config.replication, config.degree, config.worker_dtype)
    schemes = build_schemes(sizes, config.schemes)

    t0 = time.perf_counter()
    tuning = {
        name: _tune(s, served, data, config, k_tune, disable)
        for name, s in schemes.items()
        if s.tuned
    }
    timing["nercc_tuning_seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    run = _Run(config, served, x0[gidx], ref, labels, gidx, orders)
    coded, identical_at_d = _decode_all(run, schemes, tuning, ranks, disable)
    timing["decode_seconds"] = time.perf_counter() - t0
    timing["total_seconds"] = time.perf_counter() - t_start

    summary = CodedDCNSummary(
        uncoded=ref["uncoded"],
        uncoded_bf16=ref["uncoded_bf16"],
        uncoded_bf16_branches=ref["uncoded_bf16_branches"],
        coded=coded,
        nercc={str(n): v for n, v in tuning.get("nercc", {}).items()},
        config=_config_record(config, model, len(gidx), nq),
        train_metrics={k_: v for k_, v in train_metrics.items() if k_ != "curve"},
        identical_at_threshold=identical_at_d["identical"] if identical_at_d else None,
        rel_diff_at_threshold=identical_at_d["median_rel_diff"]
        if identical_at_d
        else None,
        timing=timing,
        backend=jax.default_backend(),
        jax_version=jax.__version__,
        environment=environment(),
        targets={},
    )
    summary["targets"] = targets(summary)
    if out is not None:
        write_outputs(summary, out)
    return summary


def _config_record(config: CodedDCNConfig, model: DCNv2, g: int, nq: int) -> dict:
    mcfg = model.config
    k, m, c = config.num_inputs, config.num_workers, config.replication
    return {
        **config.to_dict(),
        "num_coeffs": config.num_coeffs,
        "num_extra_servers": m - k * c,
        "degree": mcfg.cross_degree,
        "model": mcfg.to_dict(),
        "input_dim": mcfg.input_dim,
        "num_groups": g,
        "num_test_queries": nq,
        "straggler_model": "uniform arrival order; mask = first N arrivals",
        "cross_points": "Lagrange: K and M first-kind Chebyshev points",
        "bacc_nercc_points": "K first-kind data points, M second-kind workers",
        "deep_assignment": "worker i replicates query i // c; workers K c.. are "
        "extra Berrut-coded servers",
    }
