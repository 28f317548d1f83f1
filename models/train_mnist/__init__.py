"""Train the MNIST models (LeNet5, ParM's MLP, a small ViT, RepVGG) on the subset.

Usage::

    python -m models.train_mnist --model lenet5 --out results/mnist
    python -m models.train_mnist --model vit --out results/mnist [--quick] [--retrain]
    python -m models.train_mnist --model repvgg --out results/mnist --quick

The models are a registry (:data:`MODELS` in ``config``): each entry says how to
build the model and its full and quick training presets, so adding a model is one
entry there. The checkpoint is written to ``--out`` (``<model>-<hash of the
config>.msgpack``) and reused by the policy of :mod:`models.checkpoint` (its stored
configuration and data fingerprint must match; otherwise it is retrained);
``--retrain`` forces training. The test accuracy is printed and written to
``summary.json`` (one entry per model, the models trained before kept) and
``report.md``; for a model served in another form than it is trained (RepVGG: the
fused network of :func:`models.repvgg.reparameterize`) the deployed network's test
accuracy is reported beside it.

Models with batch norm (RepVGG) train in training mode (``model.train()``: batch
statistics, running averages updated) and are returned in evaluation mode; the
training step differentiates the ``nnx.Param`` variables only and carries the others
(the running statistics) through the step beside them.

:func:`load_or_train` is the importable entry point that the NeRCC experiment uses.
Modules: ``config`` (the registry, :class:`TrainConfig`), ``loop`` (:func:`train`,
:func:`logits_fn`, :func:`load_or_train`), ``report`` and ``__main__``.
"""

from .config import MODEL_NAMES as MODEL_NAMES
from .config import MODELS as MODELS
from .config import MnistModel as MnistModel
from .config import TrainConfig as TrainConfig
from .config import build_model as build_model
from .config import deployed as deployed
from .loop import accuracy as accuracy
from .loop import checkpoint_path as checkpoint_path
from .loop import fingerprint as fingerprint
from .loop import load_or_train as load_or_train
from .loop import logits_fn as logits_fn
from .loop import train as train


def main(argv=None) -> int:
    """``python -m models.train_mnist``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
