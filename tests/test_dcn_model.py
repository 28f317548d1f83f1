"""Tests for models.dcn (DCNv2), models.checkpoint and models.train_dcn."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _params import numpy_module
from flax import nnx

from models import checkpoint, criteo, train_dcn
from models.dcn import DCNConfig, DCNv2, cast_floating

U_BF16 = 2.0**-8  # unit roundoff of bfloat16
EPS_F32 = float(np.finfo(np.float32).eps)
EPS_F64 = float(np.finfo(np.float64).eps)


def _config(**kw):
    base = dict(vocab_sizes=(11, 7, 5), num_numeric=4, embed_dim=4, deep_sizes=(32, 16))
    base.update(kw)
    return DCNConfig(**base)


# the batch of the tests of the default float32 model, one size for all, so that
# they share its compiled programs (the bfloat16 test's statistics need this many)
BATCH = 256


def _inputs(batch, cfg, seed=0, dtype=np.float32):
    # numpy draws: jax.random would compile a new program for every batch size;
    # device_put copies without a program (jnp.asarray compiles one per shape)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, min(cfg.vocab_sizes), size=(batch, len(cfg.vocab_sizes)))
    num = rng.normal(size=(batch, cfg.num_numeric))
    return jax.device_put(ids.astype(np.int32)), jax.device_put(num.astype(dtype))


@nnx.jit
def _parts(model, ids, num):
    """(x0, cross_logit, deep_logit, logits), compiled as one program (compiling
    every primitive eagerly would dominate the test time)."""
    x0 = model.embed(ids, num)
    return x0, model.cross_logit(x0), model.deep_logit(x0), model(ids, num)


@nnx.jit
def _logits(model, ids, num):
    return model(ids, num)


@nnx.jit
def _x0_logits(model, ids, num):
    """(x0, logits) of any structure, compiled as one program."""
    return model.embed(ids, num), model(ids, num)


# cast_floating compiled as one program per model and dtype (eagerly, every
# parameter's cast would compile on its own)
_cast = nnx.jit(cast_floating, static_argnums=1)


def _drawn(cfg, seed, dtype=np.float32):
    """A DCNv2 with numpy-drawn parameters (``_params.numpy_module``) stored in
    ``dtype``; with float64 (inside enable_x64) and ``dtype=None`` it computes in
    float64."""
    return numpy_module(lambda: DCNv2(cfg, rngs=nnx.Rngs(0)), seed, dtype)


def _params64(model):
    """The model's parameters as a flat dict of float64 numpy arrays."""
    flat = {}

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}/")
            else:
                flat[f"{prefix}{k}"] = np.asarray(v, np.float64)

    walk(nnx.to_pure_dict(nnx.state(model)), "")
    return flat


def _numpy_dcn(p, cfg, ids, num):
    """float64 numpy oracle of DCNv2: returns (x0, cross_logit, deep_logit, logits)."""
    ids, num = np.asarray(ids), np.asarray(num, np.float64)
    parts = [
        p[f"embeddings/{j}/embedding"][ids[:, j]] for j in range(len(cfg.vocab_sizes))
    ]
    if cfg.numeric_mode == "embedded":
        v = p["numeric_embedding"]
        parts.append((num[:, :, None] * v[None]).reshape(len(num), -1))
    else:
        parts.append(num)
    x0 = np.concatenate(parts, axis=1)
    x = x0
    for layer in range(cfg.num_cross_layers):
        pre = f"cross_layers/{layer}/"
        h = x if cfg.low_rank is None else x @ p[pre + "down/kernel"]
        x = x0 * (h @ p[pre + "up/kernel"] + p[pre + "up/bias"]) + x
    h = x0 if cfg.structure == "parallel" else x
    for layer in range(len(cfg.deep_sizes)):
        pre = f"deep_layers/{layer}/"
        h = np.maximum(h @ p[pre + "kernel"] + p[pre + "bias"], 0.0)
    if cfg.structure == "stacked":
        z = (h @ p["deep_head/kernel"])[:, 0] + p["deep_head/bias"][0]
        return x0, None, None, z
    cross = (x @ p["cross_head/kernel"])[:, 0]
    deep = (h @ p["deep_head/kernel"])[:, 0]
    return x0, cross, deep, cross + deep + p["bias"]


# --------------------------------------------------------------------------- model


@pytest.mark.parametrize(
    "numeric_mode, low_rank, structure",
    [  # pairwise coverage of the three options
        ("normalised", None, "parallel"),
        ("embedded", 3, "parallel"),
        ("embedded", None, "stacked"),
        ("normalised", 3, "stacked"),
    ],
)
def test_dcn_matches_float64_numpy_oracle(numeric_mode, low_rank, structure):
    cfg = _config(numeric_mode=numeric_mode, low_rank=low_rank, structure=structure)
    with jax.enable_x64(True):
        model = _drawn(cfg, 0, np.float64)
        ids, num = _inputs(16, cfg, dtype=np.float64)
        x0, cross, deep, z = _numpy_dcn(_params64(model), cfg, ids, num)
        if structure == "parallel":
            got = [np.asarray(a) for a in _parts(model, ids, num)]
        else:
            x0_got, z_got = _x0_logits(model, ids, num)
            got = [np.asarray(x0_got), None, None, np.asarray(z_got)]
    assert got[0].shape == (16, cfg.input_dim) and got[3].shape == (16,)
    assert got[3].dtype == np.float64
    np.testing.assert_allclose(got[0], x0, rtol=0, atol=0)  # a lookup: exact
    # a few dozen float64 operations per output: errors ~ 1e2 eps * scale
    tol = 1e2 * EPS_F64 * np.abs(z).max()
    np.testing.assert_allclose(got[3], z, rtol=0, atol=tol)
    if structure == "parallel":
        np.testing.assert_allclose(got[1], cross, rtol=0, atol=tol)
        np.testing.assert_allclose(got[2], deep, rtol=0, atol=tol)


def test_parallel_logits_are_cross_plus_deep_plus_bias():
    cfg = _config()
    model = _drawn(cfg, 1)
    # a nonzero bias, so the test sees it
    model.bias[...] = jax.device_put(np.float32(0.75))
    ids, num = _inputs(32, cfg)
    _, cross, deep, z = _parts(model, ids, num)
    # float32 sums in numpy: the same roundings as jax's
    parts = np.asarray(cross) + np.asarray(deep) + np.asarray(model.output_bias())
    assert parts.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(z), parts)
    assert float(model.output_bias()) == 0.75


@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("low_rank", [None, 2])
def test_cross_logit_is_polynomial_of_degree_L_plus_1(num_layers, low_rank):
    """Along x0 = a + t b, cross_logit is a degree-(L+1) polynomial in t, not L."""
    cfg = _config(num_cross_layers=num_layers, low_rank=low_rank)
    degree = num_layers + 1
    with jax.enable_x64(True):
        model = _drawn(cfg, 2, np.float64)
        rng = np.random.default_rng(3)
        a = rng.normal(size=cfg.input_dim)
        b = rng.normal(size=cfg.input_dim)
        t_fit = np.cos(np.pi * (np.arange(24) + 0.5) / 24)  # Chebyshev points
        t_new = np.linspace(-0.97, 0.93, 11)  # points not used in the fit
        # both sets of points in one batch (row by row, one shape to compile)
        t = np.concatenate([t_fit, t_new])
        x0 = jax.device_put(a[None, :] + t[:, None] * b[None, :])
        y = np.asarray(model.cross_logit(x0))
        y_fit, y_new = y[: len(t_fit)], y[len(t_fit) :]
    cheb = np.polynomial.chebyshev
    scale = np.abs(y_fit).max()
    # evaluation roundoff (~1e2 eps scale) times the norm of the least-squares fit at
    # Chebyshev points (< 2 for these sizes)
    tol = 1e3 * EPS_F64 * scale
    coef = cheb.chebfit(t_fit, y_fit, degree)
    # exact fit up to float64 roundoff (well conditioned basis), also off the fit points
    assert np.abs(cheb.chebval(t_fit, coef) - y_fit).max() <= tol
    assert np.abs(cheb.chebval(t_new, coef) - y_new).max() <= tol
    # the degree L + 1 term is really there: a degree-L fit misses by far more than
    # roundoff (the higher terms are small at initialisation, but not that small)
    low = cheb.chebfit(t_fit, y_fit, degree - 1)
    assert np.abs(cheb.chebval(t_fit, low) - y_fit).max() >= 1e4 * tol
    assert abs(coef[-1]) >= 1e4 * tol
    assert model.config.cross_degree == degree


def test_bfloat16_model_computes_in_bfloat16():
    """Cast params and inputs to bf16: outputs are bf16 and carry bf16 roundoff."""
    cfg = _config()
    model = _drawn(cfg, 4)
    ids, num = _inputs(BATCH, cfg)
    m16 = _cast(model, jnp.bfloat16)
    # the inputs cast in numpy (ml_dtypes rounds to nearest even, as XLA does)
    num16_np = np.asarray(num).astype(jnp.bfloat16)
    num16 = jax.device_put(num16_np)
    x0, cross, deep, z16 = _parts(m16, ids, num16)
    assert all(a.dtype == jnp.bfloat16 for a in (x0, cross, deep, z16))
    # the f32 model is untouched
    z_f32_model = _logits(model, ids, num)
    assert z_f32_model.dtype == jnp.float32
    # reference: the same bf16-rounded parameters and inputs, float64 arithmetic
    with jax.enable_x64(True):
        m64 = _cast(m16, jnp.float64)
        ref = np.asarray(_logits(m64, ids, jax.device_put(num16_np.astype(np.float64))))
    rms = np.sqrt(np.mean(ref**2))
    err16 = np.abs(np.asarray(z16, np.float64) - ref) / rms
    # float32 arithmetic on the same rounded values: only float32 roundoff
    m32 = _cast(m16, jnp.float32)
    z32 = np.asarray(_logits(m32, ids, jax.device_put(num16_np.astype(np.float32))))
    err32 = np.abs(z32 - ref) / rms
    # a few roundings of size <= u each along every path: the typical (median)
    # error is a fraction of u to a few u; f32 arithmetic would be ~1e4 times smaller
    assert U_BF16 / 8 <= np.median(err16) <= 2 * U_BF16
    assert err32.max() <= 64 * EPS_F32
    # and against the float32 model (parameters not rounded): also about u
    err_f32_model = np.abs(np.asarray(z16, np.float64) - np.asarray(z_f32_model))
    assert U_BF16 / 8 <= np.median(err_f32_model) / rms <= 2 * U_BF16


def test_stacked_has_no_branch_logits():
    cfg = _config(structure="stacked")
    model = _drawn(cfg, 0)
    ids, num = _inputs(8, cfg)
    assert _logits(model, ids, num).shape == (8,)
    x0 = jax.device_put(np.zeros((8, cfg.input_dim), np.float32))
    with pytest.raises(ValueError, match="cross_logit.*parallel.*stacked"):
        model.cross_logit(x0)
    with pytest.raises(ValueError, match="deep_logit.*parallel"):
        model.deep_logit(x0)


def test_out_of_vocabulary_ids_use_slot_zero():
    cfg = _config()
    model = _drawn(cfg, 0)
    ids, num = _inputs(BATCH, cfg)
    bad, oov = np.array(ids), np.array(ids)
    bad[0, 0], bad[1, 1] = 99, -3
    oov[0, 0], oov[1, 1] = 0, 0
    bad, oov = jax.device_put(bad), jax.device_put(oov)
    z_bad = np.asarray(_logits(model, bad, num))
    np.testing.assert_array_equal(z_bad, np.asarray(_logits(model, oov, num)))
    assert np.all(np.isfinite(z_bad))


def test_jit_equals_eager():
    # the one test that runs the model eagerly (op by op)
    cfg = _config()
    model = _drawn(cfg, 0)
    ids, num = _inputs(BATCH, cfg)
    np.testing.assert_allclose(
        np.asarray(_logits(model, ids, num)),
        np.asarray(model(ids, num)),
        rtol=8 * EPS_F32,
        atol=8 * EPS_F32,
    )


def test_bad_inputs_and_configs():
    cfg = _config()
    model = _drawn(cfg, 0)
    ids, num = _inputs(4, cfg)
    # the wrong inputs made in numpy (eager jax ops would compile a program each)
    ids_np, num_np = np.asarray(ids), np.asarray(num)
    with pytest.raises(TypeError, match="DCNv2.embed.*integer"):
        model.embed(jax.device_put(ids_np.astype(np.float32)), num)
    with pytest.raises(TypeError, match="DCNv2.embed.*floating"):
        model.embed(ids, jax.device_put(num_np.astype(np.int32)))
    with pytest.raises(ValueError, match=r"DCNv2.embed.*\[B, 3\].*\(4, 2\)"):
        model.embed(jax.device_put(ids_np[:, :2]), num)
    with pytest.raises(ValueError, match=r"DCNv2.embed.*numeric.*\(4, 3\)"):
        model.embed(ids, jax.device_put(num_np[:, :3]))
    with pytest.raises(ValueError, match="DCNConfig.*structure"):
        _config(structure="tower")
    with pytest.raises(ValueError, match="DCNConfig.*numeric_mode"):
        _config(numeric_mode="raw")
    with pytest.raises(ValueError, match="DCNConfig.*low_rank"):
        _config(low_rank=0)
    with pytest.raises(ValueError, match="DCNConfig.*precision"):
        _config(precision="max")


# ------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    cfg = _config()
    model = _drawn(cfg, 5)
    ids, num = _inputs(BATCH, cfg)
    path = tmp_path / "ck" / "dcn.msgpack"
    checkpoint.save_checkpoint(
        path, model, metadata={"config": cfg.to_dict(), "auc": 0.5}
    )
    other = _drawn(cfg, 6)
    z = np.asarray(_logits(model, ids, num))
    assert not np.array_equal(np.asarray(_logits(other, ids, num)), z)
    meta = checkpoint.load_checkpoint(path, other)
    assert meta == {"config": cfg.to_dict(), "auc": 0.5}
    assert DCNConfig.from_dict(meta["config"]) == cfg
    np.testing.assert_array_equal(np.asarray(_logits(other, ids, num)), z)


def test_checkpoint_errors_name_the_file(tmp_path):
    cfg = _config()
    model = _drawn(cfg, 0)
    missing = tmp_path / "none.msgpack"
    with pytest.raises(ValueError, match=r"none\.msgpack.*does not exist"):
        checkpoint.load_checkpoint(missing, model)
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"\xc1\xff not a checkpoint")
    with pytest.raises(ValueError, match=r"garbage\.msgpack.*unreadable"):
        checkpoint.load_checkpoint(garbage, model)
    truncated = tmp_path / "trunc.msgpack"
    checkpoint.save_checkpoint(truncated, model, metadata={})
    truncated.write_bytes(truncated.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"trunc\.msgpack"):
        checkpoint.load_checkpoint(truncated, model)
    # a checkpoint of another architecture
    wide = tmp_path / "wide.msgpack"
    bigger_vocab = _drawn(_config(vocab_sizes=(12, 7, 5)), 0)
    checkpoint.save_checkpoint(wide, bigger_vocab, metadata={})
    with pytest.raises(ValueError, match=r"wide\.msgpack.*embeddings/0.*shape"):
        checkpoint.load_checkpoint(wide, model)
    shallow = tmp_path / "shallow.msgpack"
    one_layer = _drawn(_config(num_cross_layers=1), 0)
    checkpoint.save_checkpoint(shallow, one_layer, metadata={})
    with pytest.raises(ValueError, match=r"shallow\.msgpack.*missing variables"):
        checkpoint.load_checkpoint(shallow, model)
    # and the other way round: more variables in the file than in the model
    with pytest.raises(ValueError, match=r"trunc2\.msgpack.*unexpected variables"):
        checkpoint.save_checkpoint(tmp_path / "trunc2.msgpack", model, metadata={})
        checkpoint.load_checkpoint(tmp_path / "trunc2.msgpack", one_layer)


def test_checkpoint_loads_into_bfloat16_model(tmp_path):
    cfg = _config()
    model = _drawn(cfg, 0)
    checkpoint.save_checkpoint(tmp_path / "m.msgpack", model, metadata={})
    m16 = _cast(_drawn(cfg, 1), jnp.bfloat16)
    checkpoint.load_checkpoint(tmp_path / "m.msgpack", m16)
    ref = _cast(model, jnp.bfloat16)
    for a, b in zip(
        jax.tree.leaves(nnx.state(m16)), jax.tree.leaves(nnx.state(ref)), strict=True
    ):
        assert a.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --------------------------------------------------------------------------- training


def _synthetic(n, seed, flip_val=False):
    """Labels from a logistic model of one category and one numeric field."""
    rng = np.random.default_rng(seed)

    def split(m, flip=False):
        cat = rng.integers(0, 6, size=(m, 2)).astype(np.int32)
        num = rng.normal(size=(m, 3)).astype(np.float32)
        logit = 2.0 * num[:, 0] + np.where(cat[:, 0] % 2 == 0, 1.5, -1.5)
        y = (rng.random(m) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int32)
        return cat, num, (1 - y) if flip else y

    return train_dcn.ArrayData(
        split(n),
        split(n // 2, flip_val),
        split(n // 2),
        vocab_sizes=(6, 6),
        num_numeric=3,
    )


SMALL = train_dcn.TrainConfig(
    embed_dim=2,
    deep_sizes=(8,),
    batch_size=64,
    learning_rate=1e-2,
    max_epochs=3,
    patience=2,
)


@pytest.mark.loose_promotion  # optax bias correction mixes a float and an int32
def test_training_decreases_the_loss(tmp_path):
    data = _synthetic(1024, 0)
    init = DCNv2(train_dcn.model_config(SMALL, data), rngs=nnx.Rngs(params=SMALL.seed))
    before = train_dcn.evaluate(init, data, "train", batch_size=512)
    model, metrics = train_dcn.train_dcn(SMALL, data, show_progress=False, max_steps=20)
    after = train_dcn.evaluate(model, data, "train", batch_size=512)
    assert metrics["steps"] == 20
    assert after["logloss"] < before["logloss"] - 0.05
    assert metrics["test_auc"] == pytest.approx(
        train_dcn.evaluate(model, data, "test", batch_size=512)["auc"], abs=1e-12
    )


@pytest.mark.loose_promotion
def test_early_stopping_keeps_the_best_evaluation():
    # validation labels are the opposite of the training rule: the validation
    # logloss only gets worse, so the first evaluation is the best and training
    # stops `patience` evaluations later
    data = _synthetic(1024, 1, flip_val=True)
    cfg = dataclasses.replace(SMALL, max_epochs=50, patience=2, steps_per_eval=4)
    _, metrics = train_dcn.train_dcn(cfg, data, show_progress=False)
    vals = [c["val_logloss"] for c in metrics["curve"]]
    assert metrics["best_eval"] == int(np.argmin(vals))
    assert len(vals) == metrics["best_eval"] + 1 + cfg.patience
    assert metrics["steps"] < cfg.max_epochs * (1024 // cfg.batch_size)


@pytest.mark.loose_promotion
def test_load_or_train_reuses_the_checkpoint(tmp_path):
    data = _synthetic(512, 2)
    cfg = dataclasses.replace(SMALL, max_epochs=1)
    model, metrics = train_dcn.load_or_train(
        cfg, tmp_path, data=data, show_progress=False
    )
    path = train_dcn.checkpoint_path(cfg, tmp_path)
    stamp = path.stat().st_mtime_ns
    again, metrics2 = train_dcn.load_or_train(cfg, tmp_path, show_progress=False)
    assert path.stat().st_mtime_ns == stamp  # not retrained
    assert metrics2 == json.loads(json.dumps(metrics))
    cat, num, _ = data.test
    np.testing.assert_array_equal(
        np.asarray(_logits(again, cat, num)), np.asarray(_logits(model, cat, num))
    )
    # a different configuration gets its own file
    assert train_dcn.checkpoint_path(dataclasses.replace(cfg, seed=1), tmp_path) != path
    # the one policy of models.checkpoint: an interrupted run (no "complete"), a
    # file written for another configuration and an unreadable file are each
    # retrained (the same deterministic model), with a line saying why
    meta = checkpoint.read_metadata(path)
    interrupted = {"kind": "dcnv2", "config": cfg.to_dict(), "metrics": {"step": 1}}
    other = {**meta, "config": {**cfg.to_dict(), "seed": 1}}
    for bad, why in ((interrupted, "interrupted"), (other, "another configuration")):
        checkpoint.save_checkpoint(path, model, metadata=bad)
        said = []
        _, metrics3 = train_dcn.load_or_train(
            cfg, tmp_path, data=data, show_progress=False, log=said.append
        )
        assert metrics3["test_auc"] == metrics["test_auc"]
        assert len(said) == 1 and why in said[0] and path.name in said[0]
        assert checkpoint.read_metadata(path)["complete"] is True
    path.write_bytes(b"junk")
    said = []
    _, metrics4 = train_dcn.load_or_train(
        cfg, tmp_path, data=data, show_progress=False, log=said.append
    )
    assert metrics4["test_auc"] == metrics["test_auc"]
    assert "unusable" in said[0] and path.name in said[0]


def _write_criteo(path, n, seed):
    """A Criteo-format file whose label is a function of C1 (learnable)."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        ints = [
            str(int(v)) if rng.random() > 0.1 else "" for v in rng.integers(-1, 100, 13)
        ]
        cats = [
            f"{j}-{int(rng.integers(0, 4))}" if rng.random() > 0.1 else ""
            for j in range(26)
        ]
        label = int(cats[0] in ("0-0", "0-1"))
        lines.append("\t".join([str(label), *ints, *cats]))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.loose_promotion
def test_cli_trains_on_a_criteo_file_and_writes_outputs(tmp_path, capsys):
    path = tmp_path / "train.txt"
    _write_criteo(path, 400, 0)
    out = tmp_path / "out"
    metrics = train_dcn.main(
        [
            "--data",
            "criteo",
            "--path",
            str(path),
            "--min-count",
            "2",
            "--out",
            str(out),
            "--ckpt-dir",
            str(tmp_path / "ck"),
            "--epochs",
            "4",
            "--embed-dim",
            "2",
            "--deep-sizes",
            "8",
            "--batch-size",
            "32",
            "--lr",
            "1e-2",
            "--no-progress",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "report.md").is_file() and (out / "val_curve.png").is_file()
    assert summary["test_auc"] == metrics["test_auc"]
    assert "test AUC" in capsys.readouterr().out
    assert summary["model_config"]["vocab_sizes"] == list(
        criteo.build_vocabulary(path, min_count=2, show_progress=False).vocab_sizes
    )
    assert metrics["test_n"] == sum(
        criteo.split_of_line(i) == "test" for i in range(400)
    )
    # the label is a function of C1: the model learns it
    assert metrics["val_auc"] > 0.9
    # the checkpoint reproduces the reported test metrics
    model = DCNv2(DCNConfig.from_dict(summary["model_config"]), rngs=nnx.Rngs(0))
    checkpoint.load_checkpoint(summary["checkpoint"], model)
    data = train_dcn.criteo_dataset(path, min_count=2, show_progress=False)
    again = train_dcn.evaluate(model, data, "test")
    assert again["auc"] == pytest.approx(summary["test_auc"], abs=1e-12)
    assert again["logloss"] == pytest.approx(summary["test_logloss"], abs=1e-12)
