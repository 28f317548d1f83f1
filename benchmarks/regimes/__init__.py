"""The regime map: where coded computing beats replication at equal workers.

``python -m benchmarks.regimes [--quick] --out DIR`` runs the simulator
(``codedjax.serving.simulate_latency``) over K, M/K, four workloads (parts of a
DCNv2: degrees 1, 2, 3 and the non-polynomial Deep branch) and four straggler
models. In each cell every scheme of the library, with its systematic variant,
is searched over its layouts on the M workers (``runkit.choice``: K' = K and K/2
queries per group, M' = M // ceil(K / K') workers per group, G = M // M' groups
serving the K queries together; replication, ParM, uncoded and layer-wise coding
on the whole cell) and its N grid (a scheme that cannot serve a cell says why in
its row); the simulated masks are decoded on real payloads of bf16 workers. The
latency is per query (each query answered at its own worker's answer or at the
decode that gives it), and each row reports its layout's work per query. One
winner map per workload and straggler model: the shared rule's choice
(``runkit.choice.choose``, the planner's too): the lowest per-query p99 among
the layouts meeting the accuracy target, ties to the least work per query. How
to read it: ``docs/serving.md``.
"""

from .config import STRAGGLERS, RegimesConfig, latency_model
from .merge import merge_dirs, merge_summaries
from .pipeline import cell_search, layerwise_value
from .report import format_report, winners
from .run import headline, run_regimes
from .search import run_block
from .workloads import WORKLOADS, inputs, rounds, workload

__all__ = [
    "STRAGGLERS",
    "WORKLOADS",
    "RegimesConfig",
    "cell_search",
    "format_report",
    "headline",
    "inputs",
    "latency_model",
    "layerwise_value",
    "merge_dirs",
    "merge_summaries",
    "run_block",
    "rounds",
    "run_regimes",
    "winners",
    "workload",
]
