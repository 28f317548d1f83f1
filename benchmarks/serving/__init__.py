"""Serving benchmark: tail latency and accuracy of coded serving against the baselines.

Usage::

    python -m benchmarks.serving --quick --out results/serving   # ~4 min on 2 CPUs
    python -m benchmarks.serving --out results/serving           # more requests

K = 8 queries per request, M = 40 workers that compute f(x) = x^3 - x on F = 64
features in bfloat16 (degree d = 3, so D = d (K - 1) + 1 = 22), each worker's service
time 5 ms + Exp(mean 5 ms), 10 times slower with probability 0.1 per request. Every
scheme sees the same delay draws (worker i on request r has the same delay in every
scheme, :class:`codedjax.serving.Injector`):

- ``uncoded``: K workers, one query each; wait for all K.
- ``replication``: the same M workers, worker i computes query i mod K (c = 5);
  decode when every query has a replica (:class:`~codedjax.serving.FirstDecodable`).
- ``threshold``: Lagrange code, the first D answers in arrival order, square solve.
- ``chebyls-N``: Lagrange code, least squares over the first N answers.
- ``adaptive``: ChebyLS, decode at the first answer where the decoder's predicted
  error is below a budget (four bf16 roundings at the scale of the coded answers),
  with a deadline backstop.

Measured on the thread cluster (M workers in this process, each answer held until
its injected delay has passed, cancellable): p50 / p99 / p99.9 latency, the ideal
latency of the same draws (what a zero-overhead server would achieve), the engine's
overhead (latency - ideal per request) and where it goes (answers delivered late,
encode + decode), how fast cancelled stragglers are released, and the decoded error
(max |value - f(x)| / max |f(x)|, float64 truth). Then the same schemes on the
vectorised simulator (:func:`codedjax.serving.simulate_latency`) over 1e5 requests,
with independent and correlated (rack) slowdowns, and with fewer workers per query
(a linear worker, M = 2K: replication c = 2 against an MDS-like Lagrange code). The
machine load (``os.getloadavg``) is recorded with every timed number.

Modules: ``config`` (:class:`ServingConfig`, the schemes, the injector),
``workload`` (the workers, the requests, the errors: shared with
``benchmarks.robust_serving``), ``threads`` and ``simulated`` (the tables),
``floor`` (the engine with a no-op worker against the fan-out floor, at
M = 12, 16 and 40, every policy),
``pipeline`` (:func:`run_serving`), ``report`` and ``__main__``.
"""

from .config import ServingConfig as ServingConfig
from .config import injector as injector
from .config import request_inputs as request_inputs
from .config import schemes as schemes
from .floor import run_engine_floor as run_engine_floor
from .pipeline import ServingSummary as ServingSummary
from .pipeline import run_serving as run_serving
from .pipeline import targets as targets
from .report import format_tables as format_tables
from .report import write_outputs as write_outputs
from .simulated import run_simulated as run_simulated
from .simulated import run_simulated_linear as run_simulated_linear
from .threads import run_engine_overhead as run_engine_overhead
from .threads import run_threads as run_threads
from .threads import run_throughput as run_throughput
from .workload import worker_fn as worker_fn


def main(argv=None):
    """``python -m benchmarks.serving``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
