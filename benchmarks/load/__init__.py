"""The load benchmark: does coding pay on my cluster, and with which scheme?
(``python -m benchmarks.load``).

For clusters of M = 10, 12, 16, 40 workers and the delay models of
``benchmarks.serving``, every layout of the M workers as G groups of a scheme on
K' queries and M' workers (the catalogue's schemes with their systematic
variants, uncoded serving and replication; :func:`codedjax.layouts`) is
searched on the serving simulator (``codedjax.serving.simulate_load``: dispatch
on arrival, per-query answers, a group deadline that follows the rate) for the
largest Poisson rate it sustains with p99 under the target, at the accuracy
target; the report gives each family's best, the best coded over the best
replication layout, the simulator against the thread cluster and a run with
faults that loses no query. ``docs/results/load.md`` has the figures.
"""
