"""Degraded-mode accuracy of learned parity models (ParM) against BACC and NeRCC.

Usage::

    python -m models.parity_experiment --out results/parity --quick
    python -m models.parity_experiment --out results/parity

For the Adult DCNv2 (AUC and logloss) and the MNIST LeNet5 and MLP (top-1), k = 2,
3 and 4, at the same number of workers M = K + K/k (K = 12) for every scheme: the
base model, ParM's degraded mode (one answer of every group lost, the rebuilt
predictions, :func:`codedjax.parity_code`), ParM on BACC's and NeRCC's random
patterns of lost answers with per-group decoding (each query counted on its own:
``queries``, :func:`~models.parity_experiment.queries.decode_per_query`), and BACC
and NeRCC with the same number of lost answers (:func:`codedjax.bacc_code`,
:func:`codedjax.nercc_code` tuned by :func:`codedjax.tune_nercc`). The base and
parity models are trained (or loaded) in ``--out`` by :mod:`models.train_dcn`,
:mod:`models.train_mnist` and :mod:`models.train_parity`. Writes ``summary.json``,
``report.md`` and ``degraded.png``.

Modules: ``config`` (:class:`ExperimentConfig`), ``queries`` (per-query decoding,
shared with :mod:`benchmarks.schemes` and :mod:`models.serve_dcn`), ``pipeline``
(:func:`run_cell`, :func:`run_experiment`), ``report``, ``__main__``.
"""

from .config import ExperimentConfig as ExperimentConfig
from .pipeline import coded_predictions as coded_predictions
from .pipeline import exact_shares as exact_shares
from .pipeline import parm_predictions as parm_predictions
from .pipeline import run_cell as run_cell
from .pipeline import run_experiment as run_experiment
from .report import table as table
from .report import write_outputs as write_outputs


def main(argv=None) -> int:
    """``python -m models.parity_experiment``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
