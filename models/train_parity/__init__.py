"""Train ParM parity models for the Adult DCNv2 and the MNIST LeNet5 and MLP.

Usage::

    python -m models.train_parity --model lenet5 --group 2 --out results/parity
    python -m models.train_parity --model dcn mlp --group 2 3 4 --out DIR --quick

A parity model F_P answers the sum of k queries with (an approximation of) the sum
of the base model F's answers on them, so that a lost answer is F_P(P) minus the
others of its group (:func:`codedjax.parity_code`). Training follows the
parity-models paper (Kosaian, Rashmi and Venkataraman, SOSP 2019) where it fits:
the parity model has the base model's architecture, the loss is the mean squared
error between F_P(x_1 + ... + x_k) and F(x_1) + ... + F(x_k) on training queries
drawn at random, Adam at 1e-3 with L2 weight decay 1e-5, batch 64 for k = 2 and 32
for k > 2; the paper trains for 500 epochs, the presets here for a fixed number of
steps (:class:`ParityConfig`). Only the parity model is trained: the base model is
loaded from its own trainer's checkpoint (:mod:`models.train_dcn`,
:mod:`models.train_mnist`; trained there first if missing). For the DCNv2 the
parity query is the sum of the queries' embedded inputs x0 (categorical indices
cannot be summed) and the parity model is a DCNv2 of the same structure applied to
x0 (:meth:`models.dcn.DCNv2.logits_from_x0`).

Checkpoints follow :mod:`models.checkpoint` (``parity-<model>-k<k>-<hash>.msgpack``
in ``--out``, reused when the configuration and the base model's checkpoint match).
``summary.json`` and ``report.md`` give each parity model's validation MSE and its
degraded-mode test metric (every query rebuilt from its group's parity once).

Modules: ``config`` (:class:`ParityConfig`), ``loop`` (:func:`load_task`,
:func:`train_parity`, :func:`load_or_train`), ``__main__``.
"""

from .config import BASE_MODELS as BASE_MODELS
from .config import ParityConfig as ParityConfig
from .loop import ParityTask as ParityTask
from .loop import apply_fn as apply_fn
from .loop import checkpoint_path as checkpoint_path
from .loop import load_or_train as load_or_train
from .loop import load_task as load_task
from .loop import parity_queries as parity_queries
from .loop import train_parity as train_parity
from .loop import val_mse as val_mse
from .metrics import degraded_predictions as degraded_predictions
from .metrics import parm_answers as parm_answers
from .metrics import task_metrics as task_metrics


def main(argv=None) -> int:
    """``python -m models.train_parity``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
