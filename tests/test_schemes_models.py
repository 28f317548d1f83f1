"""benchmarks.schemes' model panel on a shrunken setup.

A random-initialised tiny parallel DCNv2 (L = 2, so D = 10 with K = 4) on synthetic
data, M = 16 workers, two arrival orders per group, N in (D, M): every row of the
panel decodes; known truths: at N = M replication returns the workers' own bf16
branches (the uncoded bf16-branch logits exactly), the exact codes decode the
logits to the bf16 workers' level, and the circle workers' (real, imaginary) Cross
tower equals the complex tower evaluated in float64.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from benchmarks.schemes import SchemesConfig, main
from benchmarks.schemes import models as bm
from models.coded_dcn.served import ServedDCN
from models.dcn import DCNConfig, DCNv2
from models.train_dcn import ArrayData

K, M, D = 4, 16, 10
# a Lagrange, a circle, a RepApprox and a replication decoder: four programs; the
# model, the data's shapes, K, M, c = 3 and two orders per group are
# tests/test_coded_dcn.py's, so the suite compiles the ChebyLS and RepApprox
# decoders and the served model once for both
ROWS = ("chebyls+repapprox", "circle+repapprox", "replication")


def _data(seed: int = 1) -> ArrayData:
    rng = np.random.default_rng(seed)

    def split(n):
        cat = rng.integers(0, 6, size=(n, 2)).astype(np.int32)
        num = rng.standard_normal((n, 3)).astype(np.float32)
        y = (np.arange(n) % 3 == 0).astype(np.int32)  # both classes
        return cat, num, y

    return ArrayData(split(16), split(64), split(45), (5, 7), 3)


@pytest.fixture(scope="module")
def model():
    cfg = DCNConfig(
        vocab_sizes=(5, 7),
        num_numeric=3,
        embed_dim=4,
        num_cross_layers=2,
        deep_sizes=(16,),
    )
    return nnx.jit(lambda: DCNv2(cfg, rngs=nnx.Rngs(params=0)))()


@pytest.fixture(scope="module")
def panel(model):
    cfg = dataclasses.replace(
        SchemesConfig(num_inputs=K, num_workers=M),
        model_responses=(D, M),
        model_repetitions=2,
        model_rows=ROWS,
    )
    # conftest's strict promotion modes, entered here as tests/test_coded_dcn.py
    # does (they key the compiled programs the two modules share)
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        return bm.run_model_panel(cfg, show_progress=False, model=model, data=_data())


def test_every_row_decodes_and_the_known_truths(panel):
    assert panel["num_coeffs"] == D and panel["responses"] == [D, M]
    assert set(panel["not_applicable"]) == {"random", "circle-packed"}
    floor = panel["uncoded_worker_branches"]["logit_rel_err_median"]
    assert tuple(panel["rows"]) == ROWS
    for name, row in panel["rows"].items():
        full = row["by_n"][str(M)]
        assert full["cross_ok"] == 1.0 and full["deep_ok"] == 1.0, name
        assert full["answered"] == full["whole"] == 1.0, name
        low = row["by_n"][str(D)]  # a query needs both branches: whole <= answered
        assert low["whole"] <= low["answered"], name
        assert low["whole"] <= min(low["cross_ok"], low["deep_ok"]), name
        assert 0.0 <= full["auc"] <= 1.0 and np.isfinite(full["logloss"]), name
    # replication at N = M: each query's own worker answers, summed as uncoded
    rep = panel["rows"]["replication"]["by_n"][str(M)]
    assert rep["logit_rel_err_median"] == pytest.approx(floor, rel=1e-6)
    # exact Cross codes with an exact Deep (every replica answered): bf16 level
    for name in ("chebyls+repapprox", "circle+repapprox"):
        err = panel["rows"][name]["by_n"][str(M)]["logit_rel_err_median"]
        assert err < 5e-2, name
    text = bm.format_model_panel(panel)
    assert "| circle+repapprox |" in text and "- random: does not apply" in text


def test_the_circle_workers_pair_tower_against_complex_float64(model):
    served = ServedDCN(model, "float32")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, model.config.input_dim)).astype(np.float32)
    got = np.asarray(bm._cross_pair_jit(served.g32, served.s32, x, jnp.float32))
    z0 = x[:, 0].astype(np.float64) + 1j * x[:, 1]
    z = z0
    for layer in model.cross_layers:
        w = np.asarray(layer.up.kernel[...], np.float64)
        b = np.asarray(layer.up.bias[...], np.float64)
        z = z0 * (z @ w + b) + z
    want = z @ np.asarray(model.cross_head.kernel[...], np.float64)[:, 0]
    np.testing.assert_allclose(got[:, 0] + 1j * got[:, 1], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--model-responses", "3"], "--model-responses"),
        (["--workloads", "none"], "--workloads"),
        (["--model-rows", "nothing"], "--model-rows"),
    ],
)
def test_bad_model_options_exit_with_one_line(tmp_path, capsys, argv, flag):
    models = [] if flag == "--workloads" else ["--models"]
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path), "--no-exhaustive"] + models + argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err
