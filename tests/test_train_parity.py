"""models.train_parity and models.parity_experiment on a tiny linear task.

Known truth: for a linear base model without bias, the base model is its own exact
parity model: trained from the base model's weights the MSE stays at rounding level,
and the degraded-mode predictions equal the base model's. A fresh parity model's
MSE falls with training. Bad settings and options fail with one clear line.
"""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

import codedjax as cj
from models import parity_experiment, train_parity
from models.train_parity import ParityConfig, ParityTask

pytestmark = pytest.mark.loose_promotion  # flax and optax model code

D, C, N = 6, 3, 240


def _task(seed=0):
    rng = np.random.default_rng(seed)
    base = nnx.Linear(D, C, use_bias=False, rngs=nnx.Rngs(seed))
    q = {
        s: rng.standard_normal((N, D)).astype(np.float32)
        for s in train_parity.loop.SPLITS
    }
    w = np.asarray(base.kernel[...])
    out = {s: (x @ w).astype(np.float32) for s, x in q.items()}
    labels = {s: np.argmax(o, axis=1) for s, o in out.items()}
    return ParityTask(
        "mlp", base, q, out, labels,
        lambda s: nnx.Linear(D, C, use_bias=False, rngs=nnx.Rngs(s)),
        "mnist", {}, {},
    )  # fmt: skip


TASK = _task()


def _copy_of_base():
    m = nnx.Linear(D, C, use_bias=False, rngs=nnx.Rngs(5))
    m.kernel[...] = TASK.base.kernel[...]
    return m


def test_linear_base_is_its_own_parity_model_and_decodes_exactly():
    cfg = ParityConfig(model="mlp", group=3, steps=20, learning_rate=1e-4)
    exact, metrics = train_parity.train_parity(
        cfg, TASK, parity=_copy_of_base(), show_progress=False
    )
    assert metrics["val_mse"] < 1e-6 and metrics["steps"] == 20
    rebuilt, labels, info = train_parity.degraded_predictions(TASK, exact, 3)
    assert info["ok"] and info["n"] == N and info["cond"] == 3
    # the rebuilt answers are the base model's, up to rounding of a few float32 sums
    np.testing.assert_allclose(rebuilt, TASK.outputs["test"], atol=5e-3)
    m = train_parity.task_metrics("mnist", rebuilt, labels)
    assert m["top1"] > 0.97


def test_a_fresh_parity_model_learns_and_the_rebuild_uses_it():
    # group 3 and batch 32 as above: the same compiled training step
    cfg = ParityConfig(model="mlp", group=3, steps=150, learning_rate=3e-2)
    fresh = TASK.new_parity(1)
    before = train_parity.val_mse(TASK, fresh, 3)
    model, metrics = train_parity.train_parity(cfg, TASK, show_progress=False)
    assert metrics["val_mse"] < 0.05 * before
    code = cj.parity_code(num_inputs=12, group=2)
    masks = train_parity.metrics.degraded_masks(code)
    assert masks.shape == (2, 18) and masks.sum() == 2 * 12
    assert all(code.may_decode(masks))


def test_bad_parity_model_and_settings():
    wide = nnx.Linear(D, C + 1, use_bias=False, rngs=nnx.Rngs(0))
    cfg = ParityConfig(model="mlp", group=2, steps=1)
    msg = r"^train_parity: the parity model's output shape \(4,\) differs from"
    with pytest.raises(ValueError, match=msg + r" the base model's \(3,\)"):
        train_parity.train_parity(cfg, TASK, parity=wide)
    with pytest.raises(ValueError, match="^ParityConfig: group must be >= 2"):
        ParityConfig(model="mlp", group=1)
    with pytest.raises(ValueError, match="^ParityConfig: model must be one of"):
        ParityConfig(model="vit", group=2)
    assert ParityConfig(group=2).batch_size == 64
    assert ParityConfig(group=3).batch_size == 32
    with pytest.raises(ValueError, match="multiple of every group"):
        parity_experiment.ExperimentConfig(groups=(5,))


@pytest.mark.parametrize(
    "module, argv, text",
    [
        (train_parity, ["--model", "mlp", "--group", "1", "--out", "x"],
         "group must be >= 2"),
        (train_parity, ["--model", "resnet", "--group", "2", "--out", "x"],
         "--model"),
        (parity_experiment, ["--groups", "5", "--out", "x"], "multiple of every"),
        (parity_experiment, ["--steps", "0", "--out", "x"], "--steps"),
    ],
)  # fmt: skip
def test_bad_options_exit_with_one_line(module, argv, text, capsys):
    with pytest.raises(SystemExit) as exc:
        module.main(argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert text in err and "Traceback" not in err
