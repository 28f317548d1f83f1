"""The regime map: where coded computing beats replication at equal workers.

``python -m benchmarks.regimes [--quick] --out DIR`` runs the simulator
(``codedjax.serving.simulate_latency``) over K, M/K, four workloads (parts of a
DCNv2: degrees 1, 2, 3 and the non-polynomial Deep branch) and four straggler
models, every scheme of the library at the same M (a scheme that cannot serve a
cell says why in its row), decodes the simulated masks on real payloads of bf16
workers, and draws one winner map per workload and straggler model: the scheme
with the lowest p99 among those meeting the accuracy target. How to read it:
``docs/serving.md``.
"""

from .config import STRAGGLERS, RegimesConfig, latency_model
from .merge import merge_dirs, merge_summaries
from .pipeline import cell_schemes, layerwise_value, run_block
from .report import format_report, winners
from .run import headline, run_regimes
from .workloads import WORKLOADS, inputs, rounds, workload

__all__ = [
    "STRAGGLERS",
    "WORKLOADS",
    "RegimesConfig",
    "cell_schemes",
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
