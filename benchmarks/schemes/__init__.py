"""Every code of the library head to head: the same inputs, the same straggler masks.

Usage::

    python -m benchmarks.schemes --out results/schemes           # ~15 min, 2 cores
    python -m benchmarks.schemes --quick --out results/schemes   # a few minutes
    python -m benchmarks.schemes --models --workloads none --out results/m  # model

Two workloads on K = 8 queries of 16 features: a linear map f(x) = x W (no bias)
and the degree-3 DCNv2 cross tower (2 cross layers x_{l+1} = x0 (W_l x_l + b_l) +
x_l, then a linear head to one logit). Workers compute in bf16 or float32
(:func:`codedjax.low_precision_worker`), the master decodes in float32. For every
number of responders N, ``trials`` requests draw fresh queries and one arrival
pattern each (i.i.d. shifted-exponential latencies: a uniformly random responding
set, and its arrival order for the threshold decoders); **every scheme decodes the
same queries and the same pattern**. Error: the relative l2 error of the K decoded
outputs against the float64 uncoded model, per request (inf when ``ok`` is False:
it counts in the percentiles); cond: what each code's ``DecodeResult.cond``
reports (each code's own: Chebyshev-basis systems for the Lagrange codes, V_S for
the circle codes, G_S for the random code, the interpolant's for BACC/NeRCC).

Every scheme goes through the generic interface only: ``code.encode``, one worker
function per ``code.roles`` entry, ``code.decode_answers(Answers(y, mask,
order))`` under ``jax.vmap``, and ``code.coded_shape`` to feed (real, imaginary)
pairs to the workers of the circle codes.

**Work per worker.** A real code's worker evaluates f once on one coded query
("work 1"). A circle worker evaluates f on a complex query: for the linear map two
real products (x_re W, x_im W), for the cross tower two real matrix products per
layer plus a complex elementwise product (4 real multiplications and 2 additions
instead of 1), about two real evaluations ("work 2"). The packed linear circle
code carries two real queries per complex one, so its threshold is K/2 workers.
Equal work per worker for a real code: two coded queries per worker ("-2q": the
code at 2M points, worker j holds points j and j + M and both its answers arrive
together); for the linear workload circle-packed and chebyls-2q then have the same
work AND the same threshold (4 workers); for the cross tower they cannot both hold
(circle: threshold 22 at work 2; chebyls: 22 at work 1; chebyls-2q: 11 at work 2).

ParM's worker count M = K + K/k (k = 2: M = 12) fixes a second panel on the linear
workload, where the codes that decode at that M are compared; the parity code
joins it when the library has ``codedjax.parity_code`` (its workers: the linear
base model itself, the exact parity model of a linear model without bias).

Outputs: ``summary.json`` (every figure), ``report.md`` (the tables, the exhaustive
condition-number table of :func:`codedjax.bounds.exhaustive_condition`, and which
scheme wins where), one plot per panel (``*.png``, when matplotlib is installed).

``--models`` adds the model panels (``--model-panels adult,mnist``, both by
default): :mod:`benchmarks.schemes.models`, the Adult DCNv2 with every code that
fits each branch (AUC, logloss), and :mod:`benchmarks.schemes.mnist`, ParM's MNIST
MLP with every code that applies to a non-polynomial network, at ParM's M and at
``--workers`` (top-1); ``docs/schemes.md``.

Layout: ``config`` (the settings and the schemes), ``workloads``, ``pipeline`` (one
panel, the exhaustive table, the whole run), ``models``, ``mnist`` (the MNIST
panel) and ``mnist_report`` (its tables, verdict and plot), ``report``, ``__main__``.
"""

import codedjax as cj

from .config import Scheme, SchemesConfig, schemes
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
    Workload,
    cross_params,
    cross_tower,
    cross_tower_pair,
    linear_map,
    workloads,
)


def main(argv: list[str] | None = None) -> dict:
    """``python -m benchmarks.schemes``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)


__all__ = [
    "AUTHORS_CODE_FIGURES",
    "PAPER_FIGURES",
    "Scheme",
    "SchemesConfig",
    "Workload",
    "cj",
    "compare",
    "cross_params",
    "cross_tower",
    "cross_tower_pair",
    "exhaustive_table",
    "format_report",
    "linear_map",
    "main",
    "panel_key",
    "panel_table",
    "plot_panels",
    "run",
    "run_panel",
    "schemes",
    "verdict",
    "winners",
    "workloads",
]
