"""benchmarks.schemes' MNIST panel on a shrunken setup.

A random-initialised MLP (the panel's 784-200-100-10 network) on 32 synthetic
digits, K = 4, ParM's k = 2 so M = K + K/k = 6 (the head-to-head's M too: one
panel), float32 workers, two arrival orders per group, N in (K, M). Checked: every
row has every cell; every code of the library has a row or a reason; known truth:
at N = M (no straggler) every exact scheme returns the base model's predictions,
so its top-1 is the base model's.
"""

from __future__ import annotations

import numpy as np
import pytest
from _params import numpy_module
from flax import nnx

from benchmarks.schemes import SchemesConfig, main, mnist_report, schemes
from benchmarks.schemes import mnist as bm
from models.mlp import MLP
from models.train_parity import ParityTask

K, GROUP, M, NQ = 4, 2, 6, 32
EXACT = ("parity", "replication", "repapprox", "random-layerwise")
# left out of the run (not of the check that every code has a row or a reason):
# ChebyLS's batched least-squares kernel and NeRCC's spline compile for seconds
# each; the layer-wise ChebyLS row is the random code's loop with another code
NOT_RUN = ("chebyls-layerwise", "nercc")


def _mlp(seed):
    """The panel's MLP with numpy-drawn parameters (``_params.numpy_module``)."""
    return numpy_module(lambda: MLP(rngs=nnx.Rngs(0)), seed)


@pytest.fixture(scope="module")
def panel():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 1.0, (NQ, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, NQ)
    task = ParityTask(
        "mlp", _mlp(0), {"test": x}, {}, {"test": labels}, _mlp, "mnist", {}, {},
    )  # fmt: skip
    cfg = SchemesConfig(
        num_inputs=K,
        num_workers=M,
        parm_group=GROUP,
        dtypes=("float32",),
        model_repetitions=2,
        mnist_responses=(K, M),
        mnist_rows=EXACT + ("bacc",),
    )
    parity = _mlp(1)  # any parity model: at N = M none is rebuilt
    return bm.run_mnist_panel(cfg, show_progress=False, task=task, parity=parity)


def test_rows_complete_and_every_code_has_a_row_or_a_reason(panel):
    assert [p["num_workers"] for p in panel["panels"]] == [M]
    p = panel["panels"][0]
    assert p["responses"] == [K, M] and p["dtype"] == "float32"
    assert set(p["rows"]) == set(EXACT) | {"bacc"}
    assert set(p["not_run"]) == set(NOT_RUN)
    for name, row in p["rows"].items():
        assert set(row["by_n"]) == {str(K), str(M)}, name
        for c in row["by_n"].values():
            assert 0.0 <= c["top1"] <= 1.0 and 0.0 <= c["ok"] <= 1.0, name
    # every code of the head-to-head at this K (at ParM's M and at M = 2K, where
    # RepApprox joins), and the uncoded baseline: a row or a reason
    names = {s.name for m in (M, 2 * K) for s in schemes(K, m, 1, "float32")}
    missing = names | {"parity", "uncoded"}
    missing -= set(p["rows"]) | set(p["not_run"]) | set(p["not_applicable"])
    assert not missing
    for name in ("chebyls", "random"):  # coded layer by layer instead
        assert f"{name}-layerwise" in p["not_applicable"][name]
    text = mnist_report.format_mnist_panel(panel) + mnist_report.mnist_verdict(panel)
    assert all(f"| {name} |" in text for name in p["rows"])
    assert "- circle-packed: two real queries" in text


def test_exact_schemes_at_n_equal_m_return_the_base_models_predictions(panel):
    rows = panel["panels"][0]["rows"]
    base = panel["base_top1_float32"]
    for name in EXACT:
        full = rows[name]["by_n"][str(M)]
        assert full["ok"] == 1.0 and full["agree_float32"] == 1.0, name
        assert full["top1"] == base, name
    # below M ParM and replication decode only some masks; the MDS-style layer-wise
    # code decodes every mask from K answers
    assert rows["random-layerwise"]["by_n"][str(K)]["ok"] == 1.0
    assert rows["replication"]["by_n"][str(K)]["ok"] < 1.0


def test_parm_and_replication_count_each_query(panel):
    """At N = K = 4 of M = 6 a ParM request is whole on 9 of the 15 masks (each
    group loses one of its three workers) but a query is answered on 13 (all but
    the two that lose it and a worker of its group); replication (queries 0, 1 on
    two workers, 2, 3 on one) is whole on 4 masks, a query answered on 12 of 15 on
    average. Each row's top-1 counts the unanswered queries as misses; a layer-wise
    row decodes every query with its request."""
    rows = panel["panels"][0]["rows"]
    assert rows["parity"]["decoding"] == "per group"
    assert rows["replication"]["decoding"] == "per query"
    assert rows["random-layerwise"]["decoding"] == "all or nothing"
    for name in ("parity", "replication"):
        c = rows[name]["by_n"][str(K)]
        assert c["whole"] == c["ok"] < c["answered"] < 1.0, name
        assert c["top1"] <= c["answered"], name
        assert c["top1"] == pytest.approx(c["answered"] * c["top1_answered"]), name
        # an unanswered query has no prediction (-1), so agrees with none
        assert c["agree_float32"] <= c["answered"], name
    lw = rows["random-layerwise"]["by_n"][str(K)]
    assert lw["answered"] == lw["whole"] == lw["ok"]
    text = mnist_report.format_mnist_panel(panel)
    assert "| parity | whole model, per-group decoding |" in text
    assert "| replication | whole model, per query |" in text
    verdict = mnist_report.mnist_verdict(panel)
    assert f"Answered per query at N = {K}: parity " in verdict


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--mnist-model", "resnet"], "--mnist-model"),
        (["--model-panels", "cifar"], "--model-panels"),
        (["--model-panels", "mnist", "--mnist-rows", "chebyls"], "--mnist-rows"),
    ],
)
def test_bad_mnist_options_exit_with_one_line(tmp_path, capsys, argv, flag):
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path), "--no-exhaustive", "--models"] + argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err
