"""Serving the trained DCNv2 through the thread cluster: latency against accuracy.

Usage::

    python -m models.serve_dcn --quick --out results/serve_dcn   # < 1 min after
                                                                  # models.coded_dcn
    python -m models.serve_dcn --out results/serve_dcn           # the whole test set

The test queries of Adult are served in groups of K = 8 by M = 40 worker threads
(:class:`codedjax.serving.ThreadCluster`) that compute in bfloat16. The master embeds
a group in float32; worker i receives one Cross input and one Deep input and answers
(cross logit, deep logit) of its inputs; the master decodes the Cross branch with a
Lagrange code (ChebyLS from the first N answers, or the threshold decoder from the
first D = 22) and the Deep branch with RepApprox (c = 4 replicas per query, 8 extra
Berrut-coded servers), from the same answers. Baselines: ``uncoded`` (K workers, one
query each, wait for all) and ``replication`` (the same M workers, c = 5 replicas
of each query, decode once every query has an answer). Every worker's service time
is 5 ms + Exp(mean 5 ms), 10 times slower with probability 0.1 per request, with the
same draws for every scheme (:class:`codedjax.serving.Injector`).

Reported per scheme: test AUC and logloss, the relative L2 error of a group's logits
against the float32 model, latency percentiles, the load average of the machine, and
a latency-accuracy plot (p99 latency against logloss).

Modules: ``config`` (:class:`ServeDCNConfig`), ``branches`` (:class:`BranchCode`, the
workers, the scheme list), ``pipeline`` (:func:`run_serve_dcn`), ``report`` and
``__main__``.
"""

from .branches import BranchCode as BranchCode
from .branches import make_worker as make_worker
from .branches import schemes as schemes
from .config import ServeDCNConfig as ServeDCNConfig
from .pipeline import ServeDCNSummary as ServeDCNSummary
from .pipeline import run_serve_dcn as run_serve_dcn
from .report import format_table as format_table
from .report import write_outputs as write_outputs


def main(argv=None):
    """``python -m models.serve_dcn``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
