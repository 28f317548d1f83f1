"""The trained DCNv2's ``summary.json``, ``report.md`` and validation curve."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypedDict

import runkit

__all__ = ["TrainSummary", "write_outputs"]


class TrainSummary(TypedDict, total=False):
    """What ``summary.json`` holds: the configuration, the model's, the checkpoint
    and the environment, then the metrics of :func:`models.train_dcn.train_dcn`
    (``test_auc``, ``test_logloss``, ``val_auc``, ``val_logloss``, ``best_eval``,
    ``best_epoch``, ``steps``, ``train_seconds``, ``curve``, ...)."""

    config: dict[str, Any]
    model_config: dict[str, Any]
    checkpoint: str
    jax_version: str
    backend: str
    environment: dict[str, Any]
    test_auc: float
    test_logloss: float


def write_outputs(out, config, mcfg, metrics, ckpt) -> TrainSummary:
    """``summary.json``, ``report.md`` and ``val_curve.png`` in ``out``; prints the
    table; returns the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = runkit.environment()
    summary = TrainSummary(
        config=config.to_dict(),
        model_config=mcfg.to_dict(),
        checkpoint=str(ckpt),
        jax_version=env["jax_version"],
        backend=env["backend"],
        environment=env,
        **metrics,
    )
    rows = [
        ("test AUC", f"{metrics['test_auc']:.4f}"),
        ("test logloss", f"{metrics['test_logloss']:.4f}"),
        ("validation AUC (best)", f"{metrics['val_auc']:.4f}"),
        ("validation logloss (best)", f"{metrics['val_logloss']:.4f}"),
        ("best epoch", str(metrics["best_epoch"])),
        ("steps", str(metrics["steps"])),
        ("training seconds", f"{metrics['train_seconds']:.1f}"),
    ]
    curve = metrics["curve"]
    curve_rows = [
        [c["eval"], c["epoch"], c["step"]]
        + [f"{c[k]:.4f}" for k in ("train_loss", "val_logloss", "val_auc")]
        for c in curve
    ]
    arch = (
        f"{mcfg.structure} DCNv2, L = {mcfg.num_cross_layers} cross layers "
        f"({'full rank' if mcfg.low_rank is None else f'rank {mcfg.low_rank}'}), "
        f"embedding dim {mcfg.embed_dim}, numeric {mcfg.numeric_mode}, deep "
        f"{list(mcfg.deep_sizes)}, d0 = {mcfg.input_dim}"
    )
    head = ["eval", "epoch", "step", "train loss", "val logloss", "val AUC"]
    report = "\n".join([
        f"# DCNv2 on {config.data}", "",
        f"{arch}; {config.optimizer} lr {config.learning_rate}, batch "
        f"{config.batch_size}, patience {config.patience}.", "",
        *runkit.md_table(["metric", "value"], rows), "", "## Validation curve", "",
        *runkit.md_table(head, curve_rows), "", f"Checkpoint: `{ckpt}`.", "",
        "![validation curve](val_curve.png)", "",
    ])  # fmt: skip
    runkit.write_report(out, summary, report)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are an optional extra
        print("matplotlib not installed: no plot written", file=sys.stderr)
    else:
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
        steps = [c["step"] for c in curve]
        ax[0].plot(steps, [c["train_loss"] for c in curve], "o-", label="train")
        ax[0].plot(steps, [c["val_logloss"] for c in curve], "s-", label="validation")
        ax[0].set_xlabel("step")
        ax[0].set_ylabel("logloss")
        ax[0].legend()
        ax[1].plot(steps, [c["val_auc"] for c in curve], "s-")
        ax[1].set_xlabel("step")
        ax[1].set_ylabel("validation AUC")
        for a in ax:
            a.axvline(curve[metrics["best_eval"]]["step"], color="grey", ls=":")
        fig.suptitle(f"DCNv2 on {config.data}")
        fig.tight_layout()
        fig.savefig(out / "val_curve.png", dpi=120)
        plt.close(fig)
    width = max(len(k) for k, _ in rows)
    print(f"DCNv2 on {config.data}: {arch}")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    print(f"  wrote {out / 'summary.json'}, {out / 'report.md'}; checkpoint {ckpt}")
    return summary
