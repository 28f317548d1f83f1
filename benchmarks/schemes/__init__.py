"""Every code of the library head to head: the same inputs, the same straggler masks.

Usage::

    python -m benchmarks.schemes --out results/schemes           # ~15 min, 2 cores
    python -m benchmarks.schemes --quick --out results/schemes   # a few minutes
    python -m benchmarks.schemes --models --workloads none --out results/m  # model

Two workloads on K = 8 queries of 16 features (:func:`workloads`, each a
:class:`codedjax.Workload`): a linear map f(x) = x W (no bias) and the degree-3
DCNv2 cross tower. The rows are :func:`codedjax.catalogue`'s entries that apply
(:func:`schemes`: the codes, their work and copies per worker; ``chebyls-2q`` is
ChebyLS at 2M points, two coded queries per worker). Workers compute in bf16 or
float32 (:func:`codedjax.low_precision_worker`), the master decodes in float32. For
every number of responders N, ``trials`` requests draw fresh queries and one
arrival pattern each, and **every scheme decodes the same queries and the same
pattern**, through the generic interface only (``code.encode``, one worker
function per role, ``code.decode_answers`` under ``jax.vmap``, ``code.coded_shape``
for the (real, imaginary) pairs of the circle codes). Queries are counted one by
one: a query is answered where ``code.decodable_queries`` gives it and its value
is finite (ParM per parity group, replication and RepApprox per replica: their
values filled in where the request is not ``ok``,
:func:`models.parity_experiment.queries.decode_per_query`); ``answered`` is the
share of queries answered, ``whole`` and ``ok`` the shares of requests with every
query answered and decoded whole. Error: the relative l2 error of the K decoded
outputs against the float64 uncoded model (inf when a query is unanswered); cond:
each code's ``DecodeResult.cond``. ParM's M = K + K/k adds a panel on the linear
workload. What is compared and how the work per worker is counted:
``docs/schemes.md``.

Outputs: ``summary.json``, ``report.md`` (the tables, the exhaustive
condition-number table of :func:`codedjax.bounds.exhaustive_condition`, which
scheme wins where), one plot per panel. ``--models`` adds the model panels:
:mod:`benchmarks.schemes.models` (the Adult DCNv2, AUC and logloss) and
:mod:`benchmarks.schemes.mnist` (ParM's MNIST MLP, top-1).

Layout: ``config`` (the settings and the rows), ``workloads``, ``pipeline`` (one
panel, the exhaustive table, the whole run), ``models``, ``mnist`` and
``mnist_report``, ``report``, ``__main__``.
"""

import codedjax as cj

from .config import SchemesConfig, schemes
from .pipeline import (
    AUTHORS_CODE_FIGURES,
    PAPER_FIGURES,
    exhaustive_table,
    run,
    run_panel,
)
from .report import (
    compare,
    format_report,
    panel_key,
    panel_table,
    plot_panels,
    verdict,
    winners,
)
from .workloads import (
    cross_params,
    cross_tower,
    cross_tower_pair,
    linear_map,
    pair_fn,
    truth,
    workloads,
)


def main(argv: list[str] | None = None) -> dict:
    """``python -m benchmarks.schemes``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)


__all__ = [
    "AUTHORS_CODE_FIGURES",
    "PAPER_FIGURES",
    "SchemesConfig",
    "cj",
    "compare",
    "cross_params",
    "cross_tower",
    "cross_tower_pair",
    "exhaustive_table",
    "format_report",
    "linear_map",
    "main",
    "pair_fn",
    "panel_key",
    "panel_table",
    "plot_panels",
    "run",
    "run_panel",
    "schemes",
    "truth",
    "verdict",
    "winners",
    "workloads",
]
