"""Train a DCNv2 on Adult (bundled) or a Criteo file, with early stopping.

Command line::

    python -m models.train_dcn --data adult --out DIR [--quick]
    python -m models.train_dcn --data criteo --path train.txt.gz --out DIR

Library::

    model, metrics = train_dcn(TrainConfig(), adult_dataset())
    model, metrics = load_or_train(TrainConfig.quick(), "checkpoints")

Modules: ``config`` (:class:`TrainConfig`, its flags), ``loop`` (:func:`train_dcn`,
:func:`evaluate`, :func:`load_or_train`), ``report`` (``summary.json``,
``report.md``, the validation curve) and ``__main__``. The data sets are in
:mod:`models.tabular`, the checkpoints in :mod:`models.checkpoint`.
"""

from ..tabular import ArrayData as ArrayData
from ..tabular import CriteoData as CriteoData
from ..tabular import TabularData as TabularData
from ..tabular import adult_dataset as adult_dataset
from ..tabular import criteo_dataset as criteo_dataset
from ..tabular import load_dataset as load_dataset
from .config import DATASETS as DATASETS
from .config import OPTIMIZERS as OPTIMIZERS
from .config import TrainConfig as TrainConfig
from .loop import checkpoint_path as checkpoint_path
from .loop import evaluate as evaluate
from .loop import load_or_train as load_or_train
from .loop import model_config as model_config
from .loop import train_dcn as train_dcn
from .report import TrainSummary as TrainSummary
from .report import write_outputs as write_outputs


def main(argv=None):
    """``python -m models.train_dcn``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
