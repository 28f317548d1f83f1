"""The load benchmark: latency against offered load (``python -m benchmarks.load``).

For a fixed cluster (K = 8 queries per coding group; M = 10, 12, 16, 40 workers)
and the delay models of ``benchmarks.serving``: p50 / p99 / p99.9 against the
offered query rate, up to saturation, for uncoded serving, replication (at equal
workers, and of as many queries as the spare workers allow), ChebyLS and the
graceful decoder at the N they need, BACC, NeRCC and ParM's parity code; the
largest rate each sustains under a p99 target, at the accuracy target; the
discrete-event simulator against the thread cluster; no query lost under faults.
``docs/serving.md`` (Under load) has the figures.
"""
