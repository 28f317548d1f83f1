"""RepVGG: the fused network equals the multi-branch one, block fusion against a
float64 scipy reference, bad configurations and checkpoints of the other form."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.signal
from flax import nnx

from models import checkpoint as ckpt
from models.lenet import LeNet5
from models.repvgg import (
    RepVGG,
    RepVGGBlock,
    checkpoint_form,
    fuse_block,
    reparameterize,
)
from models.train_mnist import MODELS, TrainConfig, load_or_train

# flax/optax internals rely on implicit dtype promotion
pytestmark = pytest.mark.loose_promotion


# ---------------------------------------------------------------------------- helpers


def _randomize_batch_norms(model: nnx.Module, rng: np.random.Generator) -> None:
    """Random running statistics and affine parameters in every batch norm (signed
    scales, variances from 0.25 to 4), all in the parameter dtype."""
    for _, bn in nnx.iter_modules(model):
        if not isinstance(bn, nnx.BatchNorm):
            continue
        n = bn.mean.shape
        dtype = bn.scale.dtype  # the parameter dtype, which the statistics share
        sign = rng.choice([-1.0, 1.0], size=n)
        bn.mean.set_value(jnp.asarray(rng.normal(0.0, 0.5, n), dtype))
        bn.var.set_value(jnp.asarray(rng.uniform(0.25, 4.0, n), dtype))
        bn.scale.set_value(jnp.asarray(sign * rng.uniform(0.5, 1.5, n), dtype))
        bn.bias.set_value(jnp.asarray(rng.normal(0.0, 0.5, n), dtype))


def _reset_batch_norms(model: nnx.Module) -> None:
    """Batch norms as flax initialises them: mean 0, variance 1, scale 1, bias 0."""
    for _, bn in nnx.iter_modules(model):
        if isinstance(bn, nnx.BatchNorm):
            for var, value in ((bn.mean, 0), (bn.var, 1), (bn.scale, 1), (bn.bias, 0)):
                var.set_value(jnp.asarray(np.full(var.shape, value), var.dtype))


def _draw(make, rng: np.random.Generator, dtype=np.float32) -> nnx.Module:
    """The module ``make()`` builds, with parameters drawn by numpy (normal kernels
    scaled by 1/sqrt(fan-in), random batch norms) instead of flax's initialisers:
    abstract shapes from ``nnx.eval_shape``, then values, so that no initialiser is
    compiled."""
    graphdef, state = nnx.split(nnx.eval_shape(make))

    def draw(leaf):
        shape = leaf.shape
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        return jnp.asarray(rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape), dtype)

    model = nnx.merge(graphdef, jax.tree.map(draw, state))
    _randomize_batch_norms(model, rng)
    return model


def _build(rng: np.random.Generator, dtype=np.float32, **config) -> RepVGG:
    """A :class:`RepVGG` of ``config`` with parameters from :func:`_draw`."""
    return _draw(lambda: RepVGG(rngs=nnx.Rngs(0), **config), rng, dtype)


def _lenet_skeleton() -> LeNet5:
    """LeNet5's structure without running its initialisers (names and types only)."""
    return nnx.eval_shape(lambda: LeNet5(rngs=nnx.Rngs(0)))


@functools.lru_cache(maxsize=None)
def _jitted(graphdef):
    return jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))


def _apply(model: nnx.Module):
    """``model`` as a jitted numpy function (one program per structure and input
    shape: models of the same structure share it)."""
    graphdef, state = nnx.split(model)
    fn = _jitted(graphdef)
    return lambda x: np.asarray(fn(state, jnp.asarray(x)))


def _fan_in(model: RepVGG) -> int:
    """The longest sum one output of a layer adds up: a 3x3 convolution over the
    widest input, its 1x1 and identity branches, or the average pool and head."""
    widest = max((model.in_channels, *model.widths))
    pool = (model.image_size // int(np.prod(model.strides))) ** 2
    return max(9 * widest + widest + 1, pool + model.widths[-1])


def _network_rtol(model: RepVGG, dtype) -> float:
    """Unit roundoff times the longest sum times the number of layers: the worst-case
    growth of rounding errors (gamma_n per layer) through the network, relative to
    the largest logit."""
    u = float(jnp.finfo(dtype).eps) / 2.0
    layers = sum(model.depths) + 1
    return u * _fan_in(model) * layers


def _names(model: nnx.Module) -> list[str]:
    """The ``/``-joined variable paths of a model's state (the checkpoint's keys)."""
    flat = nnx.to_flat_state(nnx.state(model, nnx.Not(nnx.RngState)))
    return ["/".join(str(k) for k in path) for path, _ in flat]


# Two configurations: the MNIST default, and one with 8 input channels, a side of
# 12, identity branches from the first block on and a stride-2 block that keeps the
# width (so only its shape change rules out the identity branch). (Channel counts
# below 8 make XLA's CPU float64 convolutions slow to compile.)
_CONFIGS = {
    "mnist-default": {},
    "c8-s12": dict(
        widths=(8, 8), depths=(2, 2), strides=(1, 2), image_size=12, in_channels=8
    ),
}


@pytest.fixture(scope="module")
def float64_networks():
    """{name: (multi-branch, fused, inputs, multi-branch apply, fused apply)} in
    float64 with random batch norms; the apply functions are jitted once."""
    out = {}
    with jax.enable_x64(True):
        for i, (name, cfg) in enumerate(_CONFIGS.items()):
            rng = np.random.default_rng(10 + i)
            model = _build(rng, np.float64, param_dtype=jnp.float64, **cfg)
            side, ch = model.image_size, model.in_channels
            x = np.random.default_rng(20 + i).uniform(0.0, 1.0, (6, side, side, ch))
            fused = reparameterize(model)
            out[name] = (model, fused, x, _apply(model), _apply(fused))
    return out


@pytest.fixture(scope="module")
def trained_float32(tiny_repvgg):
    """The small RepVGG that the trainer's registry trained (conftest's
    ``tiny_repvgg``: 20 AdamW steps of 32 MNIST digits in training mode), read back
    from its checkpoint by ``load_or_train``, its fused network, 256 test digits and
    the training metadata of both calls."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(MODELS, "repvgg", tiny_repvgg.entry)
        model, meta = load_or_train(
            "repvgg",
            tiny_repvgg.ckpt_dir,
            True,
            split=tiny_repvgg.split,
            show_progress=False,
            log=None,
        )
    return model, reparameterize(model), tiny_repvgg.split.test_x[:256], meta


# ----------------------------------------------------------- fused == multi-branch


@pytest.mark.parametrize("name", list(_CONFIGS))
def test_fused_equals_multibranch_float64(float64_networks, name, x64):
    model, fused, x, apply_model, apply_fused = float64_networks[name]
    assert fused.deploy and not model.deploy
    assert fused.config() == {**model.config(), "deploy": True}
    ref = apply_model(x)
    got = apply_fused(x)
    assert ref.dtype == got.dtype == np.float64
    assert ref.shape == (x.shape[0], 10)
    scale = np.max(np.abs(ref))
    assert scale > 0.1  # the random batch norms did not wash the signal out
    np.testing.assert_allclose(
        got, ref, rtol=0, atol=_network_rtol(model, "f8") * scale
    )


def test_fused_equals_multibranch_trained_float32(trained_float32, tiny_repvgg):
    model, fused, x, meta = trained_float32
    # the checkpoint was reused (the same network, bit for bit), the model is in
    # evaluation mode and it did learn: its validation accuracy (500 digits) is far
    # above chance (0.1; one standard error is 0.013)
    assert meta["loaded"] is True and tiny_repvgg.meta["loaded"] is False
    assert meta["steps"] == 20 and meta["val_accuracy"] > 0.15, meta
    ref = _apply(model)(x)
    np.testing.assert_array_equal(ref, _apply(tiny_repvgg.model)(x))
    bns = [m for _, m in nnx.iter_modules(model) if isinstance(m, nnx.BatchNorm)]
    assert bns and all(bn.use_running_average for bn in bns)
    # the training step carried the running statistics through as aux: they are
    # trained, not the initial ones (mean 0, variance 1)
    assert np.max(np.abs(np.asarray(model.blocks[0].bn3.var[...]) - 1.0)) > 0.1
    assert np.max(np.abs(np.asarray(model.blocks[1].bn1.mean[...]))) > 0.01
    got = _apply(fused)(x)
    assert ref.dtype == got.dtype == np.float32
    atol = _network_rtol(model, "f4") * np.max(np.abs(ref))
    np.testing.assert_allclose(got, ref, rtol=0, atol=atol)
    # the same predictions, wherever the top two logits are further apart than the
    # rounding can move them
    top2 = np.sort(ref, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * atol
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(np.argmax(got, -1)[clear], np.argmax(ref, -1)[clear])


def test_built_in_eval_mode_is_per_image(float64_networks, x64):
    """A network as built uses running statistics: image 0's logits do not depend on
    the rest of the batch. model.train() switches every batch norm to batch
    statistics, model.eval() back."""
    model, fused, x, apply_model, apply_fused = float64_networks["mnist-default"]
    y = x.copy()
    y[1:] = 0.0
    for f in (apply_model, apply_fused):
        np.testing.assert_allclose(f(y)[0], f(x)[0], rtol=1e-13, atol=0)
    built = nnx.eval_shape(lambda: RepVGG(rngs=nnx.Rngs(0), widths=(4,), depths=(2,)))
    bns = [m for _, m in nnx.iter_modules(built) if isinstance(m, nnx.BatchNorm)]
    assert len(bns) == 5 and all(bn.use_running_average for bn in bns)
    built.train()
    assert not any(bn.use_running_average for bn in bns)
    built.eval()
    assert all(bn.use_running_average for bn in bns)


# ------------------------------------------------------ one block against scipy


def _correlate_nhwc(x, kernel, stride, pad):
    """Cross-correlation of x [B, H, W, I] with kernel [k, k, I, O], zero padding
    ``pad``, then every ``stride``-th output: scipy.signal.correlate per channel
    pair, summed over I."""
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    b, _, _, cin = x.shape
    cout = kernel.shape[-1]
    rows = []
    for n in range(b):
        chans = []
        for o in range(cout):
            acc = sum(
                scipy.signal.correlate(xp[n, :, :, i], kernel[:, :, i, o], "valid")
                for i in range(cin)
            )
            chans.append(acc[::stride, ::stride])
        rows.append(np.stack(chans, axis=-1))
    return np.stack(rows)


def _bn_numpy(y, bn):
    mean, var = np.asarray(bn.mean[...]), np.asarray(bn.var[...])
    scale, bias = np.asarray(bn.scale[...]), np.asarray(bn.bias[...])
    return (y - mean) / np.sqrt(var + bn.epsilon) * scale + bias


def _block_numpy(x, block: RepVGGBlock):
    """The multi-branch block in evaluation mode, in float64 numpy/scipy."""
    s = block.stride
    y3 = _correlate_nhwc(x, np.asarray(block.conv3.kernel[...]), s, 1)
    y1 = _correlate_nhwc(x, np.asarray(block.conv1.kernel[...]), s, 0)
    y = _bn_numpy(y3, block.bn3) + _bn_numpy(y1, block.bn1)
    if block.bn_id is not None:
        y = y + _bn_numpy(x, block.bn_id)
    return np.maximum(y, 0.0)


@pytest.mark.parametrize(
    "cin, cout, stride, identity",
    [(3, 3, 1, True), (3, 5, 2, False), (4, 4, 2, False)],
    ids=["identity", "stride2-widen", "stride2-same-width"],
)
def test_block_fusion_matches_scipy_float64(x64, cin, cout, stride, identity):
    block = _draw(
        lambda: RepVGGBlock(
            cin, cout, stride, rngs=nnx.Rngs(1), param_dtype=jnp.float64
        ),
        np.random.default_rng(2),
        np.float64,
    )
    assert (block.bn_id is not None) == identity
    x = np.random.default_rng(3).normal(size=(2, 8, 8, cin))
    ref = _block_numpy(x, block)
    assert ref.shape == (2, 8 // stride, 8 // stride, cout)
    kernel, bias = fuse_block(block)
    assert kernel.shape == (3, 3, cin, cout) and bias.shape == (cout,)
    assert kernel.dtype == bias.dtype == np.float64
    # the fused kernel and bias, applied by scipy, reproduce the three branches
    fused = np.maximum(_correlate_nhwc(x, kernel, stride, 1) + bias, 0.0)
    fan_in = 9 * cin + cin + 1
    tol = fan_in * float(np.finfo(np.float64).eps) * np.max(np.abs(ref))
    np.testing.assert_allclose(fused, ref, rtol=0, atol=tol)
    # and the flax block computes what the scipy reference does
    got = _apply(block)(x)
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(widths=(0, 8), depths=(1, 1)), "every entry of widths must be >= 1"),
        (dict(widths=(8, 8), depths=(1, 0)), "every entry of depths must be >= 1"),
        (dict(strides=(1, 0, 2)), "every entry of strides must be >= 1"),
        (dict(widths=(), depths=(), strides=()), "at least one stage"),
        (dict(widths=(8, 16), depths=(1,)), "one entry per stage"),
        (dict(strides=(2, 2, 2)), "do not divide image_size 28: stage 2 gets 7x7"),
        (dict(image_size=30), "do not divide image_size 30: stage 2 gets 15x15"),
        (dict(num_classes=0), "num_classes must be >= 1"),
        (dict(in_channels=0), "in_channels must be >= 1"),
        (dict(image_size=0), "image_size must be >= 1"),
    ],
)
def test_bad_configuration_raises_value_error(kwargs, message):
    with pytest.raises(ValueError, match="RepVGG: ") as err:
        RepVGG(rngs=nnx.Rngs(0), **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "kwargs",
    [dict(widths=8), dict(widths=(8.0,), depths=(1,)), dict(depths=(1, True, 2))],
)
def test_bad_configuration_types_raise_type_error(kwargs):
    with pytest.raises(TypeError, match="RepVGG: "):
        RepVGG(rngs=nnx.Rngs(0), **kwargs)


def test_wrong_input_shape_names_the_model(float64_networks):
    model, fused, *_ = float64_networks["mnist-default"]
    for m in (model, fused):
        with pytest.raises(
            ValueError, match=r"RepVGG: x must have shape \[B, 28, 28, 1\]"
        ):
            m(jnp.zeros((2, 28, 28)))


def test_fusing_twice_is_refused(float64_networks):
    _, fused, *_ = float64_networks["c8-s12"]
    with pytest.raises(ValueError, match="reparameterize: the model is already fused"):
        reparameterize(fused)
    with pytest.raises(TypeError, match="reparameterize: model must be a RepVGG"):
        reparameterize(_lenet_skeleton())
    with pytest.raises(TypeError, match="fuse_block: block must be a RepVGGBlock"):
        fuse_block(fused.blocks[0])


# ------------------------------------------------------------------ checkpoints


def test_checkpoint_of_the_other_form_is_refused(float64_networks):
    model, fused, *_ = float64_networks["c8-s12"]
    multi_names, fused_names = _names(model), _names(fused)
    assert checkpoint_form(multi_names) == "multi-branch"
    assert checkpoint_form(fused_names) == "fused"
    assert checkpoint_form(_names(_lenet_skeleton())) is None
    # the same form passes; a checkpoint of another model is left to the loader
    model.check_checkpoint_variables(multi_names)
    fused.check_checkpoint_variables(fused_names)
    fused.check_checkpoint_variables(_names(_lenet_skeleton()))
    with pytest.raises(
        ValueError,
        match=r"RepVGG: the checkpoint holds the multi-branch .* model is the fused",
    ):
        fused.check_checkpoint_variables(multi_names)
    with pytest.raises(
        ValueError, match=r"RepVGG: the checkpoint holds the fused .* multi-branch"
    ):
        model.check_checkpoint_variables(fused_names)


def test_loader_refuses_a_checkpoint_of_the_other_form(
    trained_float32, tiny_repvgg, tmp_path
):
    """models.checkpoint.load_checkpoint asks the model first: the trained
    (multi-branch) file into a fused skeleton, and a fused file into a multi-branch
    skeleton, each get RepVGG's error with the file's name, not a list of missing
    variables."""
    model, fused, x, _ = trained_float32
    multi_path = tmp_path / "multi.msgpack"
    fused_path = tmp_path / "fused.msgpack"
    ckpt.save_checkpoint(multi_path, model, metadata={})
    ckpt.save_checkpoint(fused_path, fused, metadata={})
    # skeletons of both forms with other values (the registry entry's build from
    # another seed, and its fused network)
    other = tiny_repvgg.entry.build(1)
    skeleton = {False: other, True: reparameterize(other)}
    with pytest.raises(ValueError) as err:
        ckpt.load_checkpoint(multi_path, skeleton[True])
    msg = str(err.value)
    assert str(multi_path) in msg and "holds the multi-branch" in msg
    assert "missing variables" not in msg
    with pytest.raises(ValueError) as err:
        ckpt.load_checkpoint(fused_path, skeleton[False])
    assert str(fused_path) in str(err.value) and "holds the fused" in str(err.value)
    # each form loads into its own skeleton, and computes what it saved
    for path, form, saved in ((multi_path, False, model), (fused_path, True, fused)):
        assert not np.array_equal(_apply(skeleton[form])(x), _apply(saved)(x))
        ckpt.load_checkpoint(path, skeleton[form])
        np.testing.assert_array_equal(_apply(skeleton[form])(x), _apply(saved)(x))


def test_registry_entry_is_the_default_repvgg_fused_for_serving():
    """The registry's real entry (not the tests' small one): the multi-branch
    default network (16/32/64 channels, 1/2/2 blocks), its presets, and the fusion
    as the deploy step."""
    entry = MODELS["repvgg"]
    assert entry.deploy is reparameterize
    model = nnx.eval_shape(lambda: entry.build(0))
    assert isinstance(model, RepVGG) and not model.deploy
    assert model.config() == dict(
        widths=(16, 32, 64),
        depths=(1, 2, 2),
        strides=(1, 2, 2),
        num_classes=10,
        image_size=28,
        in_channels=1,
        deploy=False,
    )
    quick, full = TrainConfig.quick("repvgg"), TrainConfig.preset("repvgg")
    assert quick.epochs < full.epochs and quick.model == full.model == "repvgg"


def test_train_mnist_command_reports_the_fused_accuracy(
    tiny_repvgg, monkeypatch, capsys
):
    """``python -m models.train_mnist --model repvgg --quick`` reuses the trained
    checkpoint and reports the test accuracy of the trained network and of the
    fused one the coded workers run: the same predictions up to near-ties."""
    import json

    from models import train_mnist

    monkeypatch.setitem(MODELS, "repvgg", tiny_repvgg.entry)
    out = str(tiny_repvgg.ckpt_dir)
    assert train_mnist.main(["--model", "repvgg", "--quick", "--out", out]) == 0
    assert "loaded repvgg from" in capsys.readouterr().out
    row = json.loads((tiny_repvgg.ckpt_dir / "summary.json").read_text())[
        "repvgg-quick"
    ]
    assert row["test_accuracy"] == tiny_repvgg.meta["test_accuracy"]
    # 1,000 test digits: at most two predictions flipped by the fusion's rounding
    assert abs(row["deployed_test_accuracy"] - row["test_accuracy"]) <= 0.002
    report = (tiny_repvgg.ckpt_dir / "report.md").read_text()
    assert "| repvgg-quick |" in report and "deployed network" in report
