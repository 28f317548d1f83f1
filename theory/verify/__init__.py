"""Check the condition-number and RepApprox recovery bounds against Monte Carlo.

    python -m theory.verify --quick --out results/theory     # about a minute, 2 cores
    python -m theory.verify --out results/theory             # 100,000 trials each
    python -m theory.verify --workers 64 --inputs 5 --degree 2 --out DIR
    python -m theory.verify --workers 40 100 --inputs 8 --degree 3 \\
        --points first second --eta 0.01 --trials 20000 --out DIR
    python -m theory.verify --config grid.toml --out DIR     # TOML or JSON

Your own configuration: ``--workers`` M, ``--inputs`` K and ``--degree`` d (each
may be a list; every combination runs) give D = d (K - 1) + 1 coefficients, printed
for each; ``--points`` first | second (Chebyshev points of the first or second
kind), ``--eta`` the failure probability of the probabilistic bounds (default
0.05), ``--trials`` the random straggler sets per (M, D, N). Such a run checks the
condition-number bounds only (add ``recovery_grid`` etc. in a config file for the
other sections). A config file holds the same keys (``workers``, ``inputs``,
``degree``, ``points``, ``eta``, ``trials``, ``seed``) and any field of
:class:`VerifyConfig` but ``plots`` and ``progress`` (the flags ``--no-plots`` and
``--no-progress``); flags given on the command line override it. Every setting is
checked before any work (``theory.verify.settings``); a bad one is one line naming
the flag, or the file and the key. For example::

    # grid.toml
    workers = [40, 100]
    inputs = 8
    degree = [2, 3]
    points = ["first", "second"]
    eta = 0.01
    trials = 20000
    recovery_grid = [[8, 4, 40]]     # (K, c, M): also check RepApprox

What it does (maths in ``docs/theory.md``, functions in :mod:`codedjax.bounds`):

1. Condition numbers. For each (points, M, D) of the grid and N from D to M,
   uniformly random responding sets (first N of a uniform arrival order),
   cond(T_S) raw and cond(U_S) of the orthonormal basis U of T (first-kind points:
   the column equilibration T Lambda^{-1/2}; second kind: the QR factor), in float64
   (batched SVD, singular values only): median, p95, p99, the (1 - eta) quantile,
   max. Every bound is a bound on cond(U_S); cond(T_S) is within the factor cond(T)
   (sqrt(2) at first-kind points) of it, reported with the bounds. Every bound is
   compared with every trial:

   - deterministic bounds (Prop. B, and Prop. D's gap bound evaluated on each
     trial's own responding set; also cond(T_S) within cond(T) of cond(U_S)) must
     never be exceeded;
   - probabilistic bounds at confidence 1 - eta (generic Chernoff, Chernoff on the
     missing rows, probabilistic gap bound capped by Prop. B): the exceedance rate
     gets a Clopper-Pearson interval, and the bound is *violated* only when the
     whole interval lies above eta; the report gives each check's power, the
     smallest exceedance rate it could have flagged;
   - the exact complement identity (Prop. A, from the missing rows alone) against
     the SVD, wherever float64 can resolve it (tolerance from eps and cond^2).

   A bound that is infinite (vacuous) is not a check that held: it is counted as
   vacuous, and the headline counts only informative (finite) checks. Second-kind
   points get the coherence-based bounds (Prop. B, C and the generic Chernoff bound,
   with the leverage scores of :func:`codedjax.bounds.leverage_scores`); the gap
   bounds assume first-kind points and are "not applicable" there.

2. The exhaustive worst case over all straggler sets for small M (M <= 24, s <= 3)
   for ChebyLS at first-kind points, next to the threshold decoder's worst case (the
   worst D-subset: any D responders can arrive first), cross-checked with
   ``threshold_decode``.
3. First-kind, second-kind and equispaced points, Chebyshev against monomial basis,
   at the threshold N = D.
4. RepApprox: the Monte Carlo rate of exact recovery against the exact formula, the
   union bound and the seed's bound, with intervals; the exact formula against an
   exhaustive enumeration of all subsets.

Intervals: every Clopper-Pearson interval is taken at the per-interval level
1 - (1 - family_confidence) / (number of intervals) (Bonferroni over the informative
probabilistic checks and the RepApprox rows), so that all of them hold together with
probability >= family_confidence (0.99).

Trials are vmapped in chunks and sharded over every device (``jax.shard_map`` over a
1-D mesh); trial t uses the key ``fold_in(key, t)``, so the numbers do not depend on
the device count or the chunk size. Several hosts: run the same command on every
host with ``--distributed`` (Slurm, Open MPI and Cloud TPU are detected, elsewhere
add ``--coordinator host:port --num-processes P --process-id i``); process 0 writes
the outputs. The speed of the Monte Carlo against numpy is measured by
``python -m benchmarks.mc_speed``.

Outputs in ``--out``: ``summary.json`` (``checks``: one ``{"name", "holds", ...}`` per
bound and configuration, ``holds`` null for a vacuous bound; ``headline``;
``bounds``: the per-bound verdicts; ``recovery``: rows ``{"K", "c", "M", "N",
"exact", "union", "seed_bound", "monte_carlo", "ci_low", "ci_high"}``), ``report.md``
and PNG plots. Non-finite numbers (vacuous bounds) are written as ``null``.
"""

from __future__ import annotations

from .._common import BASES as BASES
from .._common import EPS as EPS
from .conditions import analyse_cond as analyse_cond
from .conditions import key as key
from .conditions import orthogonality_checks as orthogonality_checks
from .conditions import stats as stats
from .config import VerifyConfig as VerifyConfig
from .config import coefficients as coefficients
from .config import cond_blocks as cond_blocks
from .config import recovery_rows as recovery_rows
from .config import response_grid as response_grid
from .config import validate as validate
from .pipeline import VerifySummary as VerifySummary
from .pipeline import run as run
from .points import basis_matrices as basis_matrices
from .points import points_comparison as points_comparison
from .recovery import enumerate_recovery as enumerate_recovery
from .recovery import recovery_section as recovery_section
from .settings import build_config as build_config
from .settings import load_config_file as load_config_file
from .worst_case import exhaustive_worst_case as exhaustive_worst_case
