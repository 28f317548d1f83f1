r"""Choose N: the fewest responses that meet an error target with a failure budget.

    python -m theory.plan --workers 40 --inputs 8 --degree 3 \
        --worker-dtype bfloat16 --target-error 1e-2 --failure 1e-3 \
        --latency shifted-exp:5ms,5ms [--error-model decoder|cond|rowsum] \
        --out results/plan

Given M workers, K inputs, a polynomial of degree d (so D = d (K - 1) + 1 Chebyshev
coefficients), the dtype the workers compute in, a target relative error and a failure
probability, it reports, for a uniformly random set of N responders:

1. **ChebyLS.** For every N from D to M, the probability that the decode error exceeds
   the target: exactly (every responding set listed) when C(M, N) is small, else by
   Monte Carlo with a one-sided Clopper-Pearson upper confidence bound. The smallest N
   whose failure probability (its upper bound) is at most the failure level, for that
   N and every larger one. Next to it, the smallest N where a *proven* bound of
   :mod:`codedjax.bounds` at confidence 1 - failure already guarantees the target
   (the deterministic, missing-row Chernoff, gap and generic Chernoff bounds; first-
   kind points only), or a statement that every bound is vacuous or too weak.
2. **RepApprox** with c replicas per task: the smallest N with P(some task is not
   recovered exactly) at most the failure level, from the exact formula, from the
   union bound, from the seed's bound 1 - K (1 - N/M)^c, and from the Monte Carlo.
3. **Latency** (``--latency``): percentiles of the time to the N-th response for the
   chosen N (and for N = D and N = M), e.g. ``shifted-exp:5ms,5ms`` (shift 5 ms plus
   an exponential of mean 5 ms), ``exp:5ms``, ``pareto:2ms,1.5``.
4. **Worst case** over *every* straggler set: the exact worst cond for s = 1..3
   missing workers (all C(M, s) sets), and how far the greedy search of
   :func:`codedjax.worst_case_mask` falls below it, and its value at larger s.

5. **Which scheme** (``--schemes all`` or a comma list of ``codedjax.SCHEME_NAMES``,
   with ``--latency``; see :mod:`theory.plan.schemes`): the schemes of
   :func:`codedjax.catalogue` with their systematic variants, each searched over
   its layouts (``runkit.choice``, the rule the regime map shares: K' = K and K/2
   queries per group of M' workers, G = M // M' groups) and N, each candidate's
   decoded error on ``--workload`` payloads (``polynomial`` of degree d, or
   ``deep``, a ReLU network) required to meet the target with probability
   1 - failure, its per-query p50/p99 from
   :func:`codedjax.serving.simulate_latency` under the latency model (a circle
   worker serves two real evaluations per request; ChebyLS on the whole cell at
   the N of section 1); each scheme's row is its layout and N with the lowest
   per-query p99 that meets the target (ties: the least work per query), the
   lowest of those is the choice, the ranking gives each scheme's p99 as a
   multiple of the choice's, and a scheme that cannot serve the workload gets a
   "does not apply" row with the catalogue's reason (then D > M is allowed).
6. **How many workers** (``--workers LO..HI`` with ``--schemes`` and ``--latency``,
   optionally ``--p99-target 30ms``; see :mod:`theory.plan.search`): for M = LO ..
   HI, each scheme's smallest M (and its N there) at which it meets the error
   target with probability 1 - failure and, if given, the p99 target; the choice
   is the scheme with the fewest workers, and the report says why one worker fewer
   does not do (the p99 above the target, the error target missed, or "does not
   apply"). Only this section runs then.

The decode error, per unit of the largest answer among the responders
(:mod:`theory.plan.errors`). ``--error-model decoder`` (default): the error the
ChebyLS decoder itself predicts, ``DecodeResult.error``, computed by the library's
decoder on each responding set for one request (a random polynomial of degree < D
answered in the worker dtype), so the planner and a served decode agree about the
same decode; the actual error of that decode against the float64 polynomial is
reported next to it. ``--error-model cond``: cond(U_S) x u_w, the condition number
of the equilibrated Chebyshev-Vandermonde rows ChebyLS factorises times the unit
roundoff of the worker dtype (bfloat16: 2^-8 = 3.9e-3), the first-order model of
docs/theory.md section 9; the proven bounds bound exactly this cond, so the
"proven N" is a guarantee for this model. ``--error-model rowsum``: u_w x
||A_S||_inf with A_S = T_beta T_S^+ the decoding matrix (every response off by up
to u_w relative, row k of A_S adding them up), no proven bound. None counts the
error of the worker's own computation beyond the rounding of its output.

Outputs in ``--out``: ``summary.json`` and ``report.md``; the table is also printed.
"""

from __future__ import annotations

from .config import DTYPES as DTYPES
from .config import ERROR_MODELS as ERROR_MODELS
from .config import PlanConfig as PlanConfig
from .config import replication as replication
from .config import unit_roundoff as unit_roundoff
from .config import validate as validate
from .errors import all_masks as all_masks
from .errors import decode_errors as decode_errors
from .errors import decoder_errors as decoder_errors
from .errors import request_answers as request_answers
from .pipeline import PlanSummary as PlanSummary
from .pipeline import plan as plan
from .report import report as report
from .report import write_outputs as write_outputs
from .schemes import plan_layouts as plan_layouts
from .schemes import scheme_row as scheme_row
from .schemes import scheme_table as scheme_table
from .schemes import workload as workload
from .search import workers_search as workers_search
from .tables import chebyls_table as chebyls_table
from .tables import latency_percentiles as latency_percentiles
from .tables import parse_latency as parse_latency
from .tables import repapprox_table as repapprox_table
from .tables import worst_case_table as worst_case_table
