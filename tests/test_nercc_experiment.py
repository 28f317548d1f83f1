"""The NeRCC experiment on a shrunken grid with a tiny model: end to end, known truths,
the tuning property, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codedjax as cj
from models import nercc_experiment as ne
from models.mnist import load_mnist

EPS32 = float(jnp.finfo(jnp.float32).eps)

# K = 4, M = 8 (c = 2 fits exactly, so RepApprox runs with E = 0 extra servers) and
# S in {0, 2}: every test below uses these shapes, so the programs compile once.
TINY = ne.ExperimentConfig(
    models=("lenet5",),
    num_inputs=(4,),
    worker_factors=(2,),
    straggler_fractions=(0.0, 0.25),
    num_test=40,
    num_val=24,
    test_masks=6,
    val_masks=6,
    smoothing_grid=(0.0, 1e-3, 1e-1),
    replication=2,
)


@pytest.fixture(scope="module")
def split():
    return load_mnist()


@pytest.fixture(scope="module")
def tiny_model(split):
    """A briefly trained tiny classifier: 64 fixed random tanh features of the
    pixels, and a linear head fitted by least squares to one-hot labels on 1,500
    training digits (float64 numpy). Returns a batched jitted fn and its test
    accuracy."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((784, 64)) / math.sqrt(784.0) * 3.0
    x = split.train_x[:1500].reshape(1500, -1).astype(np.float64)
    feats = np.tanh(x @ w1)
    feats = np.concatenate([feats, np.ones((1500, 1))], axis=1)
    onehot = np.eye(10)[split.train_y[:1500]]
    head = np.linalg.lstsq(feats, onehot, rcond=None)[0]
    w1j = jnp.asarray(w1, jnp.float32)
    hw, hb = jnp.asarray(head[:-1], jnp.float32), jnp.asarray(head[-1], jnp.float32)

    @jax.jit
    def fn(images):
        flat = images.reshape(images.shape[0], -1).astype(jnp.float32)
        return jnp.tanh(flat @ w1j) @ hw + hb[None, :]

    acc = float(np.mean(np.asarray(fn(split.test_x)).argmax(-1) == split.test_y))
    return fn, acc


@pytest.fixture(scope="module")
def experiment(tmp_path_factory, split, tiny_model):
    fn, acc = tiny_model
    out = tmp_path_factory.mktemp("nercc")
    # module-scoped fixtures run outside conftest's per-test strict mode: set it here
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        summary = ne.run_experiment(
            TINY,
            out,
            split=split,
            model_fns={"tiny": (fn, {"test_accuracy": acc})},
            command="pytest",
            log=None,
        )
    return out, summary


def test_end_to_end_writes_files_with_required_keys(experiment, tiny_model):
    out, summary = experiment
    assert tiny_model[1] > 0.5  # the tiny model has learned something
    on_disk = json.loads((out / "summary.json").read_text())
    rows = on_disk["rows"]
    # 2 cells (S = 0, 2) x 3 schemes (M = 8 = K c, so RepApprox runs)
    assert len(rows) == 6
    assert {(r["S"], r["scheme"]) for r in rows} == {
        (s, x) for s in (0, 2) for x in ne.SCHEMES
    }
    for r in rows:
        for key in (
            "model",
            "scheme",
            "K",
            "M",
            "S",
            "mse",
            "rel_acc",
            "nmse",
            "mse_se",
            "rel_acc_se",
            "ok_fraction",
        ):
            assert key in r, key
        assert r["model"] == "tiny" and r["K"] == 4 and r["M"] == 8
        assert r["ok_fraction"] == 1.0
        assert math.isfinite(r["mse"]) and r["mse"] >= 0
        assert 0 < r["rel_acc"] < 2
    nercc = [r for r in rows if r["scheme"] == "nercc"]
    for r in nercc:
        assert r["encoder_smoothing"] in TINY.smoothing_grid
        assert r["decoder_smoothing"] in TINY.smoothing_grid
    comp = on_disk["comparison"]["tiny"]
    mse = {(r["S"], r["scheme"]): r["mse"] for r in rows}
    below = sum(mse[s, "nercc"] < mse[s, "bacc"] for s in (0, 2))
    assert comp["cells"] == 2 and comp["nercc_below_bacc"] == below
    ratios = [mse[s, "nercc"] / mse[s, "bacc"] for s in (0, 2)]
    assert comp["mean_mse_ratio"] == pytest.approx(np.mean(ratios), rel=1e-12)
    report = (out / "report.md").read_text()
    assert "## Closing note" in report and "| M | S | MSE BACC |" in report
    assert "NeRCC's MSE is below BACC's in" in report
    for name in ("mse_tiny.png", "rel_acc_tiny.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_repapprox_without_stragglers_is_exact(experiment, split, tiny_model):
    """c = 2, S = 0: every replica answers, so every query is its replica's output,
    copied bit for bit. The replica ran the model in a batch of another size than
    the uncoded reference, which may change float32 summation order only: the
    error is bounded by the 784-term dot-product rounding, 784 eps32 relative."""
    fn, _ = tiny_model
    _, summary = experiment
    (row,) = [r for r in summary["rows"] if r["scheme"] == "repapprox" and r["S"] == 0]
    assert row["exact_fraction"] == 1.0
    scale = float(np.mean(np.asarray(fn(split.test_x[:40])) ** 2))
    assert row["mse"] <= (784 * EPS32) ** 2 * scale
    assert row["rel_acc"] == 1.0


def test_tuned_nercc_not_worse_than_zero_smoothing_on_validation(
    experiment, split, tiny_model
):
    """The search includes (0, 0), so the chosen pair's validation MSE is at most
    the MSE of plain interpolation on the same validation data and masks. The (0, 0)
    MSE is recomputed here independently: nercc_encode / nercc_decode per group and
    per mask, the masks rebuilt from the cell's key. The model runs on every group's
    queries, and on every group's coded queries, in one batched call each (the
    shapes of the experiment's tuning, so its model programs are reused); the
    groups and masks are sliced on the host, so no slicing program is compiled."""
    fn, _ = tiny_model
    _, summary = experiment
    k, m = 4, 8
    for row in [r for r in summary["rows"] if r["scheme"] == "nercc"]:
        s, n = row["S"], row["N"]
        _, key_val = jax.random.split(ne.cell_key(TINY.seed, k, m, s))
        masks = np.asarray(
            cj.sample_masks(
                key_val, num_workers=m, num_responses=n, shape=(TINY.val_masks,)
            )
        )
        v = TINY.num_val // k
        xv = np.asarray(split.val_x[: v * k]).reshape(v, k, 28, 28, 1)
        beta = cj.chebyshev_points(k, kind=1)
        alpha = cj.chebyshev_points(m, kind=2)
        coded = [
            np.asarray(cj.nercc_encode(jax.device_put(xg), beta, alpha, smoothing=0.0))
            for xg in xv
        ]
        truth = np.asarray(fn(jax.device_put(xv.reshape(v * k, 28, 28, 1))))
        truth = truth.reshape(v, k, -1)
        ys = np.asarray(fn(jax.device_put(np.concatenate(coded)))).reshape(v, m, -1)
        errs, conds = [], []
        for g in range(v):
            y = jax.device_put(ys[g])
            for t in range(TINY.val_masks):
                mask = jax.device_put(masks[t])
                r = cj.nercc_decode(y, mask, alpha, beta, smoothing=0.0)
                assert bool(r.ok)
                errs.append(float(np.mean((np.asarray(r.value) - truth[g]) ** 2)))
                conds.append(float(r.cond))
        mse00 = float(np.mean(errs))
        # float32 rounding of two code paths for the same quantity: relative error
        # of order (number of summed terms M) * eps32 * (decoder's Lebesgue constant)
        tol = m * EPS32 * max(conds) * 4
        assert row["val_mse_at_zero"] == pytest.approx(mse00, rel=tol)
        assert row["val_mse"] <= mse00 * (1 + tol)


def test_linear_data_and_model_are_recovered_by_nercc(split):
    """Known truth: when the K queries lie on a line in beta (X_k = A + beta_k D) and
    the model is affine, f(u(z)) is affine in z for every smoothing value (a natural
    spline reproduces lines), so NeRCC decodes exactly up to float32 rounding.
    Berrut reproduces a line only through an even number of nodes (its weights
    (-1)^i then sum to 0): with K = 4 the encoder is exact, but with S = 1 the
    decoder interpolates N = 7 nodes and BACC is not."""
    k, m = 4, 8
    beta = np.asarray(cj.chebyshev_points(k, kind=1), np.float64)
    rng = np.random.default_rng(1)
    b = 10
    a_img = rng.uniform(0.3, 0.7, (b, 1, 28, 28, 1))
    d_img = rng.uniform(-0.3, 0.3, (b, 1, 28, 28, 1))
    x = (a_img + beta[None, :, None, None, None] * d_img).astype(np.float32)
    x = x.reshape(b * k, 28, 28, 1)
    labels = np.arange(b * k) % 10
    w = jax.device_put((rng.standard_normal((784, 10)) / 28.0).astype(np.float32))

    @jax.jit  # one program per batch size, not one per operation
    def fn(images):
        return images.reshape(images.shape[0], -1) @ w

    rows = ne.run_cell(
        fn, x, labels, x, num_inputs=k, num_workers=m, num_stragglers=1, config=TINY
    )
    by = {r["scheme"]: r for r in rows}
    scale = float(np.mean(np.asarray(fn(jax.device_put(x))) ** 2))
    # rounding: 784-term products and M-term codes in float32, times a factor 10
    # for the encoder's and decoder's Lebesgue constants (about 1 to 5 at K = 4,
    # M = 8)
    tol = (784 + m) * EPS32 * 10
    assert by["nercc"]["mse"] <= (tol**2) * scale
    assert by["bacc"]["mse"] > 100 * (tol**2) * scale  # far above rounding


def test_cell_codes():
    codes = ne.cell_codes(4, 8, replication=2, smoothing=(1e-3, 1e-1))
    assert list(codes) == list(ne.SCHEMES)
    assert codes["nercc"].smoothing == (1e-3, 1e-1)
    for code in codes.values():
        assert (code.num_inputs, code.num_workers) == (4, 8)
    # RepApprox needs M >= c K
    assert "repapprox" not in ne.cell_codes(4, 7, replication=2, smoothing=(0, 0))


def test_compare_schemes_counts():
    rows = []
    for s, (b, n) in enumerate([(1.0, 0.5), (2.0, 3.0), (4.0, 1.0)]):
        for scheme, mse in (("bacc", b), ("nercc", n)):
            rows.append(
                {
                    "model": "x",
                    "K": 2,
                    "M": 4,
                    "S": s,
                    "scheme": scheme,
                    "mse": mse,
                    "mse_se": 0.1,
                    "rel_acc": 1.0,
                }
            )
    c = ne.compare_schemes(rows, "x")
    assert c["cells"] == 3 and c["nercc_below_bacc"] == 2
    assert c["nercc_below_bacc_by_2se"] == 2
    assert c["mean_mse_ratio"] == pytest.approx((0.5 + 1.5 + 0.25) / 3)
    assert c["max_mse_ratio"] == 1.5


def test_straggler_counts():
    assert ne.straggler_counts(20, (0.0, 0.1, 0.2, 0.3, 0.4)) == [0, 2, 4, 6, 8]
    assert ne.straggler_counts(3, (0.0, 0.34, 0.9)) == [0, 1]  # N >= 2 kept


# ------------------------------------------------------------------------ bad input


def _cell(split, fn=None, **kw):
    args = dict(num_inputs=4, num_workers=8, num_stragglers=2, config=TINY)
    args.update(kw)
    test_x = args.pop("test_x", split.test_x[:40])
    val_x = args.pop("val_x", split.val_x[:24])
    test_y = args.pop("test_y", split.test_y[: len(test_x)])
    return ne.run_cell(fn or (lambda z: z), test_x, test_y, val_x, **args)


def test_bad_image_shapes(split):
    with pytest.raises(ValueError, match=r"run_cell: test_x must have shape"):
        _cell(split, test_x=split.test_x[:40, :, :, 0])
    with pytest.raises(ValueError, match=r"run_cell: val_x must have shape"):
        _cell(split, val_x=np.zeros((24, 28, 28, 3), np.float32))
    with pytest.raises(ValueError, match=r"run_cell: test_y must have shape"):
        _cell(split, test_y=split.test_y[:3])


def test_k_larger_than_test_images(split):
    with pytest.raises(
        ValueError,
        match=r"run_cell: K \(num_inputs\) = 4 is larger "
        r"than the number of test images 3",
    ):
        _cell(split, test_x=split.test_x[:3])
    with pytest.raises(ValueError, match=r"K = 20 is larger than num_test"):
        ne.ExperimentConfig(num_inputs=(20,), num_test=10)


def test_s_not_below_m(split):
    with pytest.raises(
        ValueError,
        match=r"S \(num_stragglers\) must satisfy 0 <= S "
        r"< M = 8, got 8",
    ):
        _cell(split, num_stragglers=8)
    with pytest.raises(ValueError, match=r"S \(num_stragglers\) = 7 leaves N = M - S"):
        _cell(split, num_stragglers=7)
    with pytest.raises(ValueError, match=r"straggler_fractions \(S/M\) must lie in"):
        ne.ExperimentConfig(straggler_fractions=(0.0, 1.0))
    with pytest.raises(TypeError, match=r"run_cell: S must be an int"):
        _cell(split, num_stragglers=2.0)


def test_unknown_scheme_and_model(split):
    with pytest.raises(ValueError, match=r"run_cell: schemes must be in"):
        _cell(split, schemes=("lcc",))
    with pytest.raises(ValueError, match=r"ExperimentConfig: models must be in"):
        ne.ExperimentConfig(models=("resnet",))


def test_main_maps_quick_to_the_quick_config(monkeypatch, tmp_path):
    from models.nercc_experiment import __main__ as entry

    seen = {}

    def fake(config, out, *, command):
        seen.update(config=config, out=out, command=command)
        return {"config": config}

    monkeypatch.setattr(entry, "run_experiment", fake)
    got = entry.main(["--quick", "--out", str(tmp_path), "--models", "lenet5"])
    assert got == {"config": seen["config"]}
    assert seen["config"] == ne.ExperimentConfig.quick(models=("lenet5",))
    assert "--quick" in seen["command"]
    entry.main(["--out", str(tmp_path)])
    assert seen["config"] == ne.ExperimentConfig()


def test_layerwise_option_serves_the_mlp_only(monkeypatch, tmp_path, capsys):
    from models.nercc_experiment import __main__ as entry
    from models.nercc_experiment import layerwise as lw

    seen = {}

    def fake(cfg):
        seen["cfg"] = cfg
        return {"seconds": 0.0}

    monkeypatch.setattr(lw, "run_layerwise", fake)
    monkeypatch.setattr(lw, "format_layerwise", lambda res: "table")
    entry.main(["--layerwise", "--quick", "--out", str(tmp_path)])
    assert seen["cfg"] == ne.LayerwiseConfig.quick()
    assert (tmp_path / "layerwise.md").read_text() == "table\n"
    assert json.loads((tmp_path / "layerwise.json").read_text())["environment"]
    with pytest.raises(SystemExit) as e:
        entry.main(["--layerwise", "--models", "lenet5", "--out", str(tmp_path)])
    assert e.value.code != 0
    assert "--layerwise" in capsys.readouterr().err.strip().splitlines()[-1]
    with pytest.raises(ValueError, match="LayerwiseConfig: stragglers"):
        ne.LayerwiseConfig(stragglers=("cosmic-rays",))
    with pytest.raises(ValueError, match="need requests >= 1000"):
        ne.LayerwiseConfig(requests=999)


def test_repvgg_coded_workers_run_the_fused_network(
    tiny_repvgg, split, monkeypatch, tmp_path
):
    """RepVGG in the experiment through the registry, at the smallest grid (one
    cell of TINY: K = 4, M = 8, S = 2): the checkpoint the trainer wrote is reused,
    the coded workers run the fused network (the registry's deploy step), and the
    report puts RepVGG's NeRCC/BACC ratio in the per-cell table with the paper's
    claim and data set beside it."""
    from models.nercc_experiment import pipeline
    from models.train_mnist import MODELS

    monkeypatch.setitem(MODELS, "repvgg", tiny_repvgg.entry)
    served = []

    def spy(model, **kw):
        served.append(model)
        return pipeline_logits_fn(model, **kw)

    pipeline_logits_fn = pipeline.logits_fn
    monkeypatch.setattr(pipeline, "logits_fn", spy)
    config = dataclasses.replace(
        TINY,
        models=("repvgg",),
        straggler_fractions=(0.25,),
        quick_train=True,
        ckpt_dir=str(tiny_repvgg.ckpt_dir),
    )
    # strict promotion, as in the experiment fixture: the decoders' programs of
    # that fixture's S = 2 cell are reused
    summary = ne.run_experiment(config, tmp_path, split=split, log=None)
    (model,) = served
    assert model.deploy is True and all(
        b.__class__.__name__ == "FusedBlock" for b in model.blocks
    )
    meta = summary["models"]["repvgg"]
    assert meta["loaded"] is True and meta["deploy"] == "reparameterize"
    rows = summary["rows"]
    assert {(r["model"], r["S"], r["scheme"]) for r in rows} == {
        ("repvgg", 2, x) for x in ne.SCHEMES
    }
    by = {r["scheme"]: r for r in rows}
    ratio = by["nercc"]["mse"] / by["bacc"]["mse"]
    comp = summary["comparison"]["repvgg"]
    assert comp["cells"] == 1 and comp["mean_mse_ratio"] == pytest.approx(ratio)
    assert "CIFAR-10" in summary["paper_data"] and "MNIST" in summary["paper_data"]
    report = (tmp_path / "report.md").read_text()
    assert "| K | M | S | repvgg |" in report
    assert f"| 4 | 8 | 2 | {ratio:.3f} |" in report
    assert "up to 23%" in report and "RepVGG on CIFAR-10" in report
