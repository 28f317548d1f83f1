"""The parts of the accelerator table (:mod:`benchmarks.device_table`).

Each part is a function ``(cfg, state) -> dict`` of the table's config (a
:class:`benchmarks.device_table.DeviceTableConfig`) and a dict the parts share (the
trained DCNv2 goes from ``dcn_train`` to ``coded_dcn``). It calls the experiment as
a library, at the config's sizes (``cfg.tiny``: tiny ones), and returns ``ok``
(its own accuracy checks passed), ``ratios`` (same-run speed ratios, as text),
``accuracy`` (one line) and its figures. It runs on whatever device the caller
placed it on (``jax.default_device``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

import runkit

from .cases import BUILDERS, _name, cases
from .harness import Case, matmul_rate, run_case
from .run import select

# --quick: the benchmark rows at tiny sizes (the same builders as benchmarks.run)
TINY_ROWS = {
    "chebyls": [dict(M=12, N=10, D=5, K=3, F=8, B=16, dtype="float32")],
    "encode": [dict(code="lagrange", K=3, M=12, F=64)],
    "cond_mc": [dict(M=12, N=10, D=5, B=64)],
    "coded_dcn": [dict(K=4, M=16, N=12, G=2)],
}


def tiny_cases() -> list[Case]:
    """The benchmark cases of ``--quick``: every group of :mod:`benchmarks.cases`,
    one tiny row each."""
    return [
        Case(_name(g, p), g, lambda g=g, p=p: BUILDERS[g](p))
        for g, rows in TINY_ROWS.items()
        for p in rows
    ]


def benchmark_cases(cfg, state: dict) -> dict:
    selected = select(tiny_cases() if cfg.tiny else cases(False), cfg.only)
    env = runkit.environment()
    records = [
        run_case(
            c, repeats=cfg.repeats, min_seconds=cfg.min_seconds, rate=math.nan, env=env
        )
        for c in selected
    ]
    ok = [bool(r.get("codedjax_ok")) for r in records]
    ratios = [
        f"{r['case'].split('[')[0]} {k.removeprefix('ratio_vs_')} {v:.2f}x"
        for r in records
        for k, v in r.items()
        if k.startswith("ratio_vs_")
    ]
    return {
        "ok": all(ok),
        "ratios": ratios,
        "accuracy": f"{sum(ok)}/{len(ok)} cases accurate (float64 reference)",
        "records": records,
    }


def latency(cfg, state: dict) -> dict:
    from .latency import measure

    res = measure(cfg.latency_calls, seed=cfg.seed)  # raises if a variant is wrong
    ratios = [
        f"{what} {label} {res[f'{what}/{key}']['median']:.2f}x"
        for what in ("decode", "encode+decode")
        for key, label in (
            ("code_over_numpy", "code/numpy_f64"),
            ("public_over_jitted", "public/jitted"),
        )  # fmt: skip
    ]
    errs = [r["max_err"] for r in res.values() if "max_err" in r]
    code = res["encode+decode/code"]
    return {
        "ok": True,
        "ratios": ratios,
        "accuracy": f"max rel. err {max(errs):.1e}; encode+decode/code median "
        f"{code['median_us']:.0f} us, p99 {code['p99_us']:.0f} us",
        "results": res,
    }


def floor(cfg, state: dict) -> dict:
    rate = matmul_rate(cfg.matmul_size, repeats=cfg.repeats)
    return {
        "ok": math.isfinite(rate) and rate > 0,
        "ratios": [],
        "accuracy": f"float32 matmul n={cfg.matmul_size}: {rate / 1e9:.1f} GFLOP/s",
        "matmul_rate_flops": rate,
        "matmul_size": cfg.matmul_size,
    }


def synthetic_data(n: int, seed: int):
    """A tiny tabular data set (2 categorical, 3 numeric fields) whose labels
    follow a logistic model of one field of each kind: learnable in a few steps."""
    from models.tabular import ArrayData

    rng = np.random.default_rng(seed)

    def split(m):
        cat = rng.integers(0, 6, size=(m, 2)).astype(np.int32)
        num = rng.standard_normal((m, 3)).astype(np.float32)
        logit = 2.0 * num[:, 0] + np.where(cat[:, 0] % 2 == 0, 1.5, -1.5)
        y = (rng.random(m) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int32)
        return cat, num, y

    return ArrayData(split(n), split(n // 2), split(n // 2), (6, 6), 3)


def dcn_configs(cfg):
    """(TrainConfig, CodedDCNConfig, data) of the DCNv2 parts."""
    from models.coded_dcn import QUICK_TRAIN, CodedDCNConfig
    from models.train_dcn import TrainConfig, adult_dataset

    if not cfg.tiny:
        return QUICK_TRAIN, CodedDCNConfig.quick(train=QUICK_TRAIN), adult_dataset()
    train = TrainConfig(
        embed_dim=4,
        deep_sizes=(16,),
        batch_size=64,
        learning_rate=1e-2,
        max_epochs=1,
        eval_batch_size=256,
        seed=cfg.seed,
    )
    k, m = 4, 16  # D = 3 (K - 1) + 1 = 10
    coded = CodedDCNConfig(
        train=train,
        num_inputs=k,
        num_workers=m,
        replication=3,
        responses=(10, m),
        schemes=("chebyls+repapprox",),  # the seed's scheme (each compiles its own)
        num_repetitions=1,
        nercc_grid=(0.0, 1e-4),
        nercc_val_groups=4,
        nercc_num_masks=4,
        seed=cfg.seed,
    )
    return train, coded, synthetic_data(2048, cfg.seed)


def dcn_train(cfg, state: dict) -> dict:
    from models.train_dcn import train_dcn

    train, coded, data = dcn_configs(cfg)
    model, metrics = train_dcn(
        train, data, show_progress=False, max_steps=cfg.train_steps
    )
    state["dcn"] = (model, coded, data)
    finite = all(math.isfinite(metrics[k]) for k in ("test_auc", "test_logloss"))
    return {
        "ok": finite,
        "ratios": [],
        "accuracy": f"test AUC {metrics['test_auc']:.4f}, logloss "
        f"{metrics['test_logloss']:.4f} after {metrics['steps']} steps "
        f"({metrics['train_seconds']:.1f} s)",
        "metrics": {k: v for k, v in metrics.items() if k != "curve"},
    }


def coded_dcn(cfg, state: dict) -> dict:
    from models.coded_dcn import run_coded_dcn

    if "dcn" not in state:
        raise RuntimeError("no trained model: the dcn_train part failed")
    model, coded, data = state["dcn"]
    summary = run_coded_dcn(coded, model=model, data=data, show_progress=False)
    u, m = summary["uncoded"], coded.num_workers
    rows = [r for r in summary["coded"] if r["N"] == m]
    if not rows:
        raise RuntimeError(f"run_coded_dcn returned no row at N = M = {m}")
    finite = all(math.isfinite(r["auc"]) and math.isfinite(r["logloss"]) for r in rows)
    best = next((r for r in rows if r["scheme"] == "chebyls+repapprox"), rows[0])
    met = [t["met"] for t in summary["targets"].values()]
    return {
        "ok": finite,
        "ratios": [],
        "accuracy": f"uncoded AUC {u['auc']:.4f}; {best['scheme']} at N=M={m} "
        f"AUC {best['auc']:.4f}, logit err median {best['logit_rel_err_median']:.1e}"
        + (f"; targets met {sum(met)}/{len(met)}" if met else ""),
        "coded": summary["coded"],
        "uncoded": u,
        "targets": summary["targets"],
        "timing": summary["timing"],
    }


def schemes(cfg, state: dict) -> dict:
    from .schemes import SchemesConfig, run

    if cfg.tiny:  # one panel, one scheme: K = 4 on ParM's M = 6, float32 workers
        sc = SchemesConfig(
            num_inputs=4,
            num_workers=6,
            trials=cfg.trials,
            n_step=20,
            dtypes=("float32",),
            exhaustive=False,
            only=("chebyls",),
            workloads=("linear",),
            seed=cfg.seed,
        )
    else:
        sc = dataclasses.replace(SchemesConfig.quick(), trials=cfg.trials)
    summary = run(sc, show_progress=False)
    worst, errs = 1.0, []
    for p in summary["panels"]:
        full = p["rows"][-1]  # N = M: every worker answered
        for r in full.values():
            if isinstance(r, dict) and "ok" in r:
                worst = min(worst, r["ok"])
                errs.append(r["err_median"])
    return {
        "ok": bool(summary["panels"]) and worst == 1.0,
        "ratios": [],
        "accuracy": f"{len(summary['panels'])} panels; at N=M every decode ok: "
        f"{worst == 1.0}; largest median err {max(errs):.1e}",
        "panels": summary["panels"],
        "verdict": summary["verdict"],
    }
