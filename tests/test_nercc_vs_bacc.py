"""``python -m theory.nercc_vs_bacc``: NeRCC against BACC on random MLPs, one tiny
cell end to end (tuning, the paired bootstrap, the verdict, the outputs)."""

from __future__ import annotations

import pytest

from theory import nercc_vs_bacc as nvb


def test_theory_script_with_a_shrunken_config(tmp_path):
    """``python -m theory.nercc_vs_bacc``: the logic on one tiny cell."""
    cfg = nvb.Config(
        models=("tanh",),
        num_inputs=4,
        workers=(10,),
        straggler_fractions=(0.3,),
        dims=(3, 16, 2),
        val_groups=6,
        test_groups=6,
        tune_masks=8,
        test_masks=8,
        grid=(0.0, 1e-3, 1e-1),
        bootstrap=50,
    )
    summary = nvb.run(cfg, progress=False)
    (row,) = summary["rows"]
    assert (row["M"], row["S"], row["N"], row["K"]) == (10, 3, 7, 4)
    assert row["all_ok"]
    assert row["ratio"] == pytest.approx(row["mse_nercc"] / row["mse_bacc"])
    lo, hi = row["ratio_ci95"]
    assert lo <= row["ratio"] <= hi
    assert row["lambda_e"] in cfg.grid and row["lambda_d"] in cfg.grid
    assert row["val_mse"] <= row["val_mse_interp"]  # (0, 0) is in the grid
    v = summary["verdict"]["tanh"]
    assert v["nercc_better_significant"] + v["tie"] + v["bacc_better_significant"] == 1
    table = nvb.write_outputs(summary, str(tmp_path))
    assert "| tanh | 10 | 3 | 7 |" in table
    for name in ("summary.json", "report.md", "ratios.png"):
        assert (tmp_path / name).stat().st_size > 0
