"""Serving the trained DCNv2 through the thread cluster: latency against accuracy.

Usage::

    python -m models.serve_dcn --quick --out results/serve_dcn   # < 1 min after
                                                                  # models.coded_dcn
    python -m models.serve_dcn --out results/serve_dcn           # the whole test set

The test queries of Adult are served in groups of K = 8 by M = 40 worker threads
(:class:`codedjax.serving.ThreadCluster`) that compute in bfloat16. The master embeds
a group in float32; worker i receives one Cross input and one Deep input and answers
(cross logit, deep logit) of its inputs; the master decodes the Cross branch with a
Lagrange code (ChebyLS from the first N answers, or the threshold decoder from the
first D = 22) and the Deep branch with RepApprox (c = 4 replicas per query, 8 extra
Berrut-coded servers), from the same answers. Baselines: ``uncoded`` (K workers, one
query each, wait for all) and ``replication`` (the same M workers, c = 5 replicas
of each query, decode once every query has an answer). Every worker's service time
is 5 ms + Exp(mean 5 ms), 10 times slower with probability 0.1 per request, with the
same draws for every scheme (:class:`codedjax.serving.Injector`).

Reported per scheme: test AUC and logloss, the relative L2 error of a group's logits
against the float32 model, latency percentiles, the load average of the machine, and
a latency-accuracy plot (p99 latency against logloss).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import codedjax as cj
from codedjax.serving import (
    Adaptive,
    FirstDecodable,
    FixedN,
    Injector,
    Server,
    ShiftedExponential,
    SimulatedCluster,
    ThreadCluster,
)

from .common import binary_auc, binary_logloss, progress
from .dcn import DCNv2, cast_floating
from .train_dcn import TrainConfig, load_dataset, load_or_train

# the trained models of models.coded_dcn (same configurations: same checkpoints)
FULL_TRAIN = TrainConfig(data="adult", num_cross_layers=2, structure="parallel")
QUICK_TRAIN = TrainConfig(
    data="adult", num_cross_layers=2, structure="parallel", deep_sizes=(64, 32),
    max_epochs=4, patience=2,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ServeDCNConfig:
    """Everything that fixes a serving run.

    Attributes:
        train: the model (trained when its checkpoint is missing).
        num_inputs: K. num_workers: M. replication: c of RepApprox (K c <= M).
        responses: the N of the ChebyLS schemes.
        max_groups: serve only the first this many groups of K test queries
            (None: every test query).
        shift, mean, slow_prob, slow_factor: the latency model.
        calibration_groups, calibration_responses: the adaptive policy's budget
            is the median predicted error (``DecodeResult.error``) of ChebyLS +
            RepApprox with this many responses on this many VALIDATION groups.
        deadline: the adaptive policy's deadline (seconds).
        seed: of the delay draws.
        ckpt_dir: checkpoint directory.
    """

    train: TrainConfig = FULL_TRAIN
    num_inputs: int = 8
    num_workers: int = 40
    replication: int = 4
    responses: tuple[int, ...] = (26, 30, 34)
    max_groups: int | None = None
    shift: float = 0.005
    mean: float = 0.005
    slow_prob: float = 0.1
    slow_factor: float = 10.0
    calibration_groups: int = 32
    calibration_responses: int = 30
    deadline: float = 0.25
    seed: int = 0
    ckpt_dir: str = "checkpoints"

    @classmethod
    def quick(cls, **overrides) -> ServeDCNConfig:
        return cls(**{**dict(train=QUICK_TRAIN, max_groups=100), **overrides})

    @property
    def num_coeffs(self) -> int:
        return cj.recovery_threshold(self.num_inputs, self.train.num_cross_layers + 1)


@dataclasses.dataclass(frozen=True)
class BranchCode:
    """Two codes over the same workers: worker i gets a Cross and a Deep input.

    ``encode`` stacks the two encodings ([M, 2, d0]); a worker answers (cross logit,
    deep logit) [2]; ``decode`` decodes each branch with its code from the same
    mask and returns value [K, 2]. It follows the ``Code`` interface the server
    needs (a user-written code: the server knows nothing about branches).
    """

    cross: Any
    deep: Any

    @property
    def num_inputs(self) -> int:
        return self.cross.num_inputs

    @property
    def num_workers(self) -> int:
        return self.cross.num_workers

    @property
    def threshold(self) -> int:
        return max(self.cross.threshold, self.deep.threshold)

    @property
    def name(self) -> str:
        return f"{self.cross.name}+{self.deep.name}"

    @property
    def task(self):
        """The replication layout, when both branches are replicated."""
        if getattr(self.cross, "task", None) is None or self.cross != self.deep:
            return None
        return self.cross.task

    def encode(self, x):
        return _branch_encode(self, jnp.asarray(x))

    def decode(self, y, mask, *, order=None):
        m = self.num_workers
        order = jnp.arange(m, dtype=jnp.int32) if order is None else order
        return _branch_decode(
            self, jnp.asarray(y), jnp.asarray(mask), jnp.asarray(order)
        )


@functools.partial(jax.jit, static_argnums=0)
def _branch_encode(code: BranchCode, x):
    return jnp.stack([code.cross.encode(x), code.deep.encode(x)], axis=1)


@functools.partial(jax.jit, static_argnums=0)
def _branch_decode(code: BranchCode, y, mask, order):
    rc = code.cross.decode(y[:, 0], mask, order=order)
    rd = code.deep.decode(y[:, 1], mask, order=order)
    ok = rc.ok & rd.ok
    return cj.DecodeResult(
        value=jnp.stack([rc.value, rd.value], axis=-1),
        ok=ok,
        cond=jnp.maximum(rc.cond, rd.cond),
        num_used=jnp.maximum(rc.num_used, rd.num_used),
        status=jnp.where(rc.ok, rd.status, rc.status),
        error=jnp.where(ok, rc.error + rd.error, jnp.inf),
    )


def make_worker(model: DCNv2, dtype) -> Any:
    """A worker: row [2, d0] -> (cross logit of row 0, deep logit of row 1) [2], with
    parameters, inputs and arithmetic in ``dtype``."""
    gw, sw = nnx.split(cast_floating(model, dtype))

    def worker(row):
        m = nnx.merge(gw, sw)
        r = row.astype(dtype)
        return jnp.stack([m.cross_logit(r[0:1])[0], m.deep_logit(r[1:2])[0]])

    return worker


def schemes(cfg: ServeDCNConfig, budget: float) -> list[tuple[str, Any, Any]]:
    """(name, code, policy) of every scheme; ``budget`` is the adaptive policy's."""
    k, m, c, d = cfg.num_inputs, cfg.num_workers, cfg.replication, cfg.train
    deg = d.num_cross_layers + 1
    rep = cj.repapprox_code(num_inputs=k, num_workers=m, replication=c)
    cheb = BranchCode(cj.lagrange_code(num_inputs=k, num_workers=m, degree=deg), rep)
    thr = BranchCode(
        cj.lagrange_code(num_inputs=k, num_workers=m, degree=deg, decoder="threshold"),
        rep,
    )
    repl = cj.replication_code(num_inputs=k, num_workers=m)
    unc = cj.uncoded_code(num_inputs=k)
    out = [
        ("uncoded", BranchCode(unc, unc), FixedN(k)),
        ("replication", BranchCode(repl, repl), FirstDecodable()),
        ("threshold+repapprox", thr, FixedN(cfg.num_coeffs)),
    ]
    out += [(f"chebyls+repapprox N={n}", cheb, FixedN(n)) for n in cfg.responses]
    out.append(("adaptive", cheb, Adaptive(budget, cfg.deadline)))
    return out


def _calibrate(cfg: ServeDCNConfig, data, model, worker) -> float:
    """The adaptive budget: median predicted error of ChebyLS at N responses on
    validation groups (no delays: a simulated cluster)."""
    k, n = cfg.num_inputs, cfg.calibration_responses
    cat, num, _ = (np.asarray(a) for a in data.val)
    q = min(len(cat) // k, cfg.calibration_groups) * k
    embed = jax.jit(lambda c, u: model.embed(c, u))
    x0 = np.asarray(
        embed(jnp.asarray(cat[:q], jnp.int32), jnp.asarray(num[:q], jnp.float32))
    )
    cheb = schemes(cfg, 1.0)[-1][1]
    inj = Injector(latency=ShiftedExponential(cfg.shift, cfg.mean), seed=cfg.seed + 1)
    with Server(cheb, worker, backend=SimulatedCluster(injector=inj),
                policy=FixedN(n)) as server:  # fmt: skip
        res = server.serve(x0.reshape(-1, k, x0.shape[-1]))
    return float(np.median([r.error for r in res if r.ok]))


def _pct(a, q) -> float:
    a = np.asarray(a, np.float64)
    return float(np.percentile(a, q)) if a.size else math.nan


def run_serve_dcn(cfg: ServeDCNConfig, *, out=None, show_progress=None) -> dict:
    """Serves the test set with every scheme and returns the summary."""
    t_start = time.perf_counter()
    data = load_dataset(cfg.train, show_progress=show_progress)
    model, _ = load_or_train(cfg.train, cfg.ckpt_dir, data=data,
                             show_progress=show_progress)  # fmt: skip
    cat, num, labels = (np.asarray(a) for a in data.test)
    k = cfg.num_inputs
    g = len(labels) // k
    if cfg.max_groups is not None:
        g = min(g, cfg.max_groups)
    nq = g * k
    cat, num, labels = cat[:nq], num[:nq], labels[:nq].astype(np.int32)
    x0 = np.asarray(jax.jit(lambda c, n: model.embed(c, n))(
        jnp.asarray(cat, jnp.int32), jnp.asarray(num, jnp.float32)))  # fmt: skip
    z32 = np.asarray(jax.jit(model.logits_from_x0)(jnp.asarray(x0)), np.float64)
    bias = float(np.asarray(model.output_bias(), np.float32))
    groups = x0.reshape(g, k, -1)
    worker = make_worker(model, jnp.bfloat16)
    inj = Injector(latency=ShiftedExponential(cfg.shift, cfg.mean),
                   slow_prob=cfg.slow_prob, slow_factor=cfg.slow_factor,
                   seed=cfg.seed)  # fmt: skip
    budget = _calibrate(cfg, data, model, worker)
    rows = {}
    ref = {"auc": binary_auc(labels, z32), "logloss": binary_logloss(labels, z32)}
    todo = schemes(cfg, budget)
    disable = True if show_progress is False else (False if show_progress else None)
    bar = progress(todo, total=len(todo), desc="serving schemes", disable=disable)
    for name, code, policy in bar:
        load = os.getloadavg()[0]
        with Server(code, worker, backend=ThreadCluster(injector=inj),
                    policy=policy) as server:  # fmt: skip
            res = server.serve(groups, max_in_flight=1)
        ok = np.array([r.ok for r in res])
        vals = np.stack([r.value for r in res]).astype(np.float64)  # [G, K, 2]
        z = (vals.sum(axis=-1) + bias).reshape(-1)
        # a group that could not be decoded is answered with logit 0 (p = 1/2)
        z = np.where(np.repeat(ok, k), z, 0.0)
        zg, rg = z.reshape(g, k), z32.reshape(g, k)
        rel = np.linalg.norm(zg - rg, axis=1) / np.linalg.norm(rg, axis=1)
        lat = np.array([r.latency for r in res])
        rows[name] = {
            "code": code.name,
            "policy": repr(policy),
            "groups": g,
            "ok_fraction": float(ok.mean()),
            "auc": binary_auc(labels, z),
            "logloss": binary_logloss(labels, z),
            "logit_rel_err_median": _pct(rel, 50),
            "logit_rel_err_p95": _pct(rel, 95),
            "latency_ms": {q: 1e3 * _pct(lat, q) for q in (50, 99, 99.9)},
            "num_used_median": float(np.median([r.mask.sum() for r in res])),
            "loadavg": load,
        }
    summary = {
        "config": {**dataclasses.asdict(cfg), "train": cfg.train.to_dict()},
        "float32_model": ref,
        "adaptive_budget": budget,
        "queries": nq,
        "schemes": rows,
        "cpu_count": os.cpu_count(),
        "seconds": time.perf_counter() - t_start,
    }
    if out is not None:
        write_outputs(summary, out)
    return summary


def format_table(summary: dict) -> str:
    ref = summary["float32_model"]
    rows = summary["schemes"]
    load = [v["loadavg"] for v in rows.values()]
    lines = [
        f"Adult test set, {summary['queries']} queries in groups of "
        f"{summary['config']['num_inputs']}, bf16 workers on the thread cluster "
        f"(load average {min(load):.1f}-{max(load):.1f} on {summary['cpu_count']} "
        f"CPUs). Float32 model: AUC {ref['auc']:.4f}, logloss {ref['logloss']:.4f}. "
        f"Adaptive budget (predicted absolute logit error): "
        f"{summary['adaptive_budget']:.3g}.",
        "",
        "| scheme | AUC | logloss | logit rel err median | p95 | p50 ms | p99 ms | "
        "p99.9 ms | answers used | ok |",
        "|" + "---|" * 10,
    ]
    for name, v in rows.items():
        lat = v["latency_ms"]
        lines.append(
            f"| {name} | {v['auc']:.4f} | {v['logloss']:.4f} | "
            f"{v['logit_rel_err_median']:.2e} | {v['logit_rel_err_p95']:.2e} | "
            f"{lat[50]:.1f} | {lat[99]:.1f} | {lat[99.9]:.1f} | "
            f"{v['num_used_median']:.0f} | {v['ok_fraction']:.3f} |"
        )
    return "\n".join(lines)


def _plot(summary: dict, out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    markers = "osD^v<>phX*"
    for i, (name, v) in enumerate(summary["schemes"].items()):
        ax.scatter(v["latency_ms"][99], v["logloss"], s=36, marker=markers[i % 11],
                   label=name)  # fmt: skip
    ax.axhline(summary["float32_model"]["logloss"], color="gray", lw=0.8, ls="--",
               label="float32 model, no stragglers")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("p99 latency (ms, thread cluster)")
    ax.set_ylabel("test logloss")
    ax.set_title("Serving DCNv2 on Adult: latency against accuracy")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path = out / "latency_vs_logloss.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path.name


def write_outputs(summary: dict, out) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot = _plot(summary, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = "# Serving the coded DCNv2\n\n" + format_table(summary) + "\n"
    if plot:
        text += f"\n![p99 latency against logloss]({plot})\n"
    (out / "report.md").write_text(text)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m models.serve_dcn",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument(
        "--quick",
        action="store_true",
        help="the small model of models.coded_dcn --quick, 100 groups",
    )
    p.add_argument("--out", default="results/serve_dcn")
    p.add_argument("--max-groups", type=int, default=None)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.no_progress:
        os.environ["CODEDJAX_NO_PROGRESS"] = "1"
    over: dict[str, Any] = {"ckpt_dir": a.ckpt_dir}
    if a.max_groups is not None:
        over["max_groups"] = a.max_groups
    cfg = ServeDCNConfig.quick(**over) if a.quick else ServeDCNConfig(**over)
    summary = run_serve_dcn(cfg, out=a.out,
                            show_progress=False if a.no_progress else None)  # fmt: skip
    print(format_table(summary))
    print(f"wrote {a.out} ({summary['seconds']:.0f} s)", file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
