"""MNIST loader and split, LeNet5 and the small ViT, brief training and checkpoints."""

from __future__ import annotations

import csv
import dataclasses
import gzip

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.lenet import LeNet5
from models.mlp import MLP
from models.mnist import (
    MNIST_PATH,
    check_images,
    load_mnist,
    read_mnist_csv,
    split_mnist,
)
from models.train_mnist import (
    TrainConfig,
    build_model,
    checkpoint_path,
    load_or_train,
    logits_fn,
)
from models.vit import SmallViT, patchify

# flax/optax internals rely on implicit dtype promotion
pytestmark = pytest.mark.loose_promotion


@pytest.fixture(scope="module")
def mnist():
    return read_mnist_csv(MNIST_PATH)


@pytest.fixture(scope="module")
def split():
    return load_mnist()


# ----------------------------------------------------------------------------- loader


def test_read_matches_csv_module(mnist):
    images, labels = mnist
    assert images.shape == (5000, 28, 28, 1) and images.dtype == np.float32
    assert labels.shape == (5000,) and labels.dtype == np.int32
    assert np.bincount(labels).tolist() == [500] * 10
    # independent reference: the stdlib csv reader on three rows
    with gzip.open(MNIST_PATH, "rt") as f:
        rows = [r for _, r in zip(range(3), csv.reader(f), strict=False)]
    for i, row in enumerate(rows):
        ref = np.array([int(v) for v in row], dtype=np.float64)
        np.testing.assert_allclose(
            images[i].reshape(-1), ref[:784] / 255.0, rtol=2**-23, atol=0
        )
        assert labels[i] == int(ref[784])
    assert images.min() == 0.0 and images.max() == 1.0


def test_split_sizes_disjoint_stratified_fixed(mnist, split):
    assert [len(a) for a in split] == [3500, 3500, 500, 500, 1000, 1000]
    assert np.bincount(split.test_y).tolist() == [100] * 10
    assert np.bincount(split.val_y).tolist() == [50] * 10
    keys = [
        {a.tobytes() for a in part}
        for part in (split.train_x, split.val_x, split.test_x)
    ]
    # the few exact duplicate digits of MNIST could collide; demand near-disjointness
    assert len(keys[0] & keys[2]) <= 2 and len(keys[1] & keys[2]) <= 2
    assert len(keys[0] & keys[1]) <= 2
    again = split_mnist(*mnist)
    for a, b in zip(split, again, strict=True):
        np.testing.assert_array_equal(a, b)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def _row(label=3, pixel=7):
    return ",".join([str(pixel)] * 784 + [str(label)])


def test_header_line_is_skipped(tmp_path):
    header = ",".join([f"p{i}" for i in range(784)] + ["label"])
    p = _write(tmp_path / "h.csv", [header, _row(1), _row(2)])
    images, labels = read_mnist_csv(p)
    assert labels.tolist() == [1, 2]
    np.testing.assert_array_equal(images, np.full((2, 28, 28, 1), np.float32(7 / 255)))


@pytest.mark.parametrize(
    "bad_line, message",
    [
        (",".join(["0"] * 784), "line 3: expected 785 columns"),
        (_row(label=10), "line 3: label must be in 0..9, got 10"),
        (_row(label=-1), "line 3: label must be in 0..9, got -1"),
        (_row(pixel=256), "line 3: pixels must be in 0..255, got 256"),
        (_row().replace("7", "x", 1), "line 3: expected integers, got 'x'"),
    ],
)
def test_bad_file_names_file_and_line(tmp_path, bad_line, message):
    p = _write(tmp_path / "bad.csv", [_row(), _row(), bad_line, _row()])
    with pytest.raises(ValueError, match="read_mnist_csv") as err:
        read_mnist_csv(p)
    assert str(p) in str(err.value) and message in str(err.value)


def test_bad_header_and_empty_file(tmp_path):
    p = _write(tmp_path / "h.csv", ["a,b,label", _row()])
    with pytest.raises(ValueError, match="line 1 .header.: expected 785 columns"):
        read_mnist_csv(p)
    p = _write(tmp_path / "e.csv", [""])
    with pytest.raises(ValueError, match="no data line"):
        read_mnist_csv(p)


def test_check_images_names_argument():
    check_images(np.zeros((2, 28, 28, 1)))
    with pytest.raises(ValueError, match=r"f: imgs must have shape \[n, 28, 28, 1\]"):
        check_images(np.zeros((2, 28, 28)), name="imgs", func="f")


# ----------------------------------------------------------------------------- models


def test_patchify_matches_numpy():
    x = np.arange(2 * 28 * 28, dtype=np.float32).reshape(2, 28, 28, 1)
    got = np.asarray(patchify(jnp.asarray(x), 7))
    assert got.shape == (2, 16, 49)
    # patch (r, c) of image b is x[b, 7r:7r+7, 7c:7c+7] in row-major order
    for b in range(2):
        for r in range(4):
            for c in range(4):
                ref = x[b, 7 * r : 7 * r + 7, 7 * c : 7 * c + 7, 0].reshape(-1)
                np.testing.assert_array_equal(got[b, 4 * r + c], ref)
    assert patchify(jnp.asarray(x), 4).shape == (2, 49, 16)


def _drawn(make, seed=0):
    """The module ``make()`` builds, its parameters drawn by numpy from ``seed``
    (kernels N(0, 1/fan_in), layer-norm scales about 1, the rest N(0, 0.1^2)), so
    that no flax initialiser is compiled (their truncated normal compiles once per
    parameter shape)."""
    rng = np.random.default_rng(seed)
    graphdef, state = nnx.split(nnx.eval_shape(make))

    def draw(path, s):
        names = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)]
        name = names[-1] if names else None
        if name == "kernel":
            value = rng.normal(0.0, 1.0 / np.sqrt(np.prod(s.shape[:-1])), s.shape)
        elif name == "scale":
            value = 1.0 + rng.normal(0.0, 0.1, s.shape)
        else:
            value = rng.normal(0.0, 0.1, s.shape)
        # device_put copies without a program (jnp.asarray compiles a 'stage'
        # program per shape)
        return jax.device_put(value.astype(s.dtype))

    return nnx.merge(graphdef, jax.tree_util.tree_map_with_path(draw, state))


@pytest.mark.parametrize(
    "make",
    [  # LeNet5 and the MLP as the trainer builds them (compiled there anyway), the
        # ViTs with numpy-drawn parameters
        lambda: LeNet5(rngs=nnx.Rngs(0)),
        lambda: MLP(rngs=nnx.Rngs(0)),
        lambda: _drawn(
            lambda: SmallViT(rngs=nnx.Rngs(0), patch=7, width=32, depth=1, heads=2)
        ),
        lambda: _drawn(
            lambda: SmallViT(rngs=nnx.Rngs(0), patch=4, width=16, depth=1, heads=4)
        ),
    ],
    ids=["lenet5", "mlp", "vit-p7", "vit-p4"],
)
def test_model_shapes_and_bad_input(make):
    model = make()
    graphdef, state = nnx.split(model)
    apply = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))  # eager is slow
    # inputs drawn and set in numpy: eager jax ops would each compile a program
    out = np.asarray(apply(state, np.zeros((3, 28, 28, 1), np.float32)))
    assert out.shape == (3, 10) and np.all(np.isfinite(out))
    # a per-image model: image 0 of the batch does not depend on image 1
    x = np.random.default_rng(0).uniform(size=(3, 28, 28, 1)).astype(np.float32)
    y = x.copy()
    y[1:] = 0.0
    np.testing.assert_allclose(
        np.asarray(apply(state, x))[0],
        np.asarray(apply(state, y))[0],
        rtol=1e-5,
        atol=1e-6,
    )
    name = type(model).__name__
    with pytest.raises(
        ValueError, match=rf"{name}: x must have shape \[B, 28, 28, 1\]"
    ):
        apply(state, np.zeros((3, 28, 28), np.float32))


def test_mlp_is_parms_784_200_100_10():
    model = build_model("mlp")
    sizes = [(lay.in_features, lay.out_features) for lay in (model.fc1, model.fc2,
             model.fc3)]  # fmt: skip
    assert sizes == [(784, 200), (200, 100), (100, 10)]
    n = sum(v.size for v in jax.tree.leaves(nnx.state(model, nnx.Param)))
    assert n == 784 * 200 + 200 + 200 * 100 + 100 + 100 * 10 + 10


def test_vit_bad_settings():
    with pytest.raises(ValueError, match="patch must divide 28"):
        SmallViT(rngs=nnx.Rngs(0), patch=5)
    with pytest.raises(ValueError, match="heads must divide width"):
        SmallViT(rngs=nnx.Rngs(0), width=30, heads=4)


def test_logits_fn_equals_direct_call_any_batch():
    model = build_model("lenet5", seed=1)
    f = logits_fn(model, chunk=8)
    x = np.random.default_rng(1).uniform(size=(19, 28, 28, 1)).astype(np.float32)
    graphdef, state = nnx.split(model)
    ref = np.asarray(jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))(state, x))
    for b in (1, 5, 19):  # below, not a power of two, and above one chunk
        np.testing.assert_allclose(np.asarray(f(x[:b])), ref[:b], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="logits_fn: images"):
        f(np.zeros((3, 28, 28)))


def test_config_and_model_name_errors(tmp_path, split):
    with pytest.raises(ValueError, match="TrainConfig: model"):
        TrainConfig(model="resnet")
    with pytest.raises(ValueError, match="TrainConfig: epochs"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="load_or_train: model_name"):
        load_or_train("resnet", tmp_path, split=split)


def test_brief_training_learns_and_checkpoint_is_reused(tmp_path, split):
    """Two epochs on 640 images lift LeNet5 far above chance (0.1) on the 500
    validation digits; the second call loads the checkpoint instead of training,
    and the loaded model computes the same logits."""
    config = TrainConfig(
        model="lenet5", epochs=2, batch_size=32, learning_rate=3e-3, max_train=640
    )
    model, meta = load_or_train(
        "lenet5", tmp_path, config=config, split=split, show_progress=False, log=None
    )
    assert meta["loaded"] is False and meta["steps"] == 40
    assert meta["val_accuracy"] > 0.5, meta
    assert checkpoint_path(tmp_path, config).is_file()
    again, meta2 = load_or_train(
        "lenet5", tmp_path, config=config, split=split, show_progress=False, log=None
    )
    assert meta2["loaded"] is True
    assert meta2["test_accuracy"] == meta["test_accuracy"]
    x = split.test_x[:16]
    np.testing.assert_array_equal(
        np.asarray(logits_fn(again)(x)), np.asarray(logits_fn(model)(x))
    )
    # a different configuration (another seed: the same schedule, so the same
    # compiled step) is not served from this checkpoint
    other = dataclasses.replace(config, seed=1)
    _, meta3 = load_or_train(
        "lenet5", tmp_path, config=other, split=split, show_progress=False, log=None
    )
    assert meta3["loaded"] is False and meta3["config"]["seed"] == 1
    assert checkpoint_path(tmp_path, other) != checkpoint_path(tmp_path, config)
