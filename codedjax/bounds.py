r"""Condition-number and recovery bounds for ChebyLS and RepApprox.

Plain float64 functions on the host (numpy and scipy; nothing here is traced). They
state, for M workers at first-kind Chebyshev points, D Chebyshev coefficients and a
responding set S of N workers (s = M - N missing), how large the condition number of
the decoding system can be, and for RepApprox how likely exact recovery is.

Notation. T [M, D] is the Chebyshev-Vandermonde matrix T_ij = T_j(alpha_i) at the
first-kind points alpha_i = cos(theta_i), theta_i = (2i+1) pi / (2M), ordered as
``chebyshev_points(M, kind=1)`` (theta increasing with the worker index). Its columns
are exactly orthogonal, T^T T = diag(M, M/2, ..., M/2), so U = T Lambda^{-1/2} has
orthonormal columns. ``cond`` below always means cond(U_S) = cond(T~_S), the condition
number of the *equilibrated* rows of the responders (the matrix ChebyLS factorises);
the raw matrix satisfies cond(U_S) / sqrt(2) <= cond(T_S) <= sqrt(2) cond(U_S).
Every bound below is a bound on cond(U_S); multiply it by sqrt(2) for a bound on the
raw cond(T_S) that published tables (Fahim and Cadambe) quote.
:func:`raw_condition_number` gives cond(T_S) itself, and
:func:`worst_case_condition` the exact worst case over every missing set of a given
size in either scaling.
Leverage scores l_i = ||u_i||^2 sum to D; the coherence is mu = (M/D) max_i l_i, and
L = M max_i l_i = mu D.

What is in here, with its source (derivations in ``docs/theory.md``):

- leverage scores and coherence, closed form at first-kind points;
- :func:`complement_condition_number`, the exact identity from the missing rows
  (Prop. A): cond(U_S)^2 = (1 - lambda_min(G_miss)) / (1 - lambda_max(K_miss));
- :func:`deterministic_condition_bound`, (1 - s L / M)^{-1/2} (Prop. B);
- :func:`sampling_condition_bound`, the generic coherence / matrix-Chernoff bound on
  the N sampled rows (Tropp 2012, Thm 1.1, the with-replacement form; it also holds
  without replacement by Tropp 2011, Thm 2.2), and
  :func:`missing_rows_condition_bound`, the without-replacement matrix Chernoff bound
  on the s missing rows (Prop. C);
- :func:`gap_condition_bound` (deterministic) and
  :func:`gap_condition_bound_probabilistic` (run-length tail of the missing set),
  Prop. D, from the Marcinkiewicz-Zygmund inequality of Groechenig;
- :func:`clopper_pearson` intervals for Monte Carlo rates;
- the RepApprox recovery probabilities (exact, union bound, seed bound).

References:
    J. A. Tropp, User-friendly tail bounds for sums of random matrices, Found.
    Comput. Math. 12, 2012, arXiv:1004.4389 (Thm 1.1).
    J. A. Tropp, Improved analysis of the subsampled randomized Hadamard transform,
    Adv. Adapt. Data Anal. 3, 2011, arXiv:1011.1595 (Thm 2.2, without replacement).
    I. C. F. Ipsen and T. Wentworth, The effect of coherence on sampling from
    matrices with orthonormal columns, and preconditioned least squares problems,
    SIAM J. Matrix Anal. Appl. 35(4), 2014, arXiv:1203.4809.
    K. Groechenig, Reconstruction algorithms in irregular sampling, Math. Comp. 59,
    1992; H. G. Feichtinger, K. Groechenig and T. Strohmer, Efficient numerical
    methods in non-uniform sampling theory, Numer. Math. 69, 1995.
    C. J. Clopper and E. S. Pearson, The use of confidence or fiducial limits
    illustrated in the case of the binomial, Biometrika 26(4), 1934.
    M. Fahim and V. R. Cadambe, Numerically stable polynomially coded computing,
    arXiv:1903.08326.
"""

from __future__ import annotations

from ._condition_bounds import chernoff_delta as chernoff_delta
from ._condition_bounds import (
    deterministic_condition_bound as deterministic_condition_bound,
)
from ._condition_bounds import (
    missing_rows_condition_bound as missing_rows_condition_bound,
)
from ._condition_bounds import sampling_condition_bound as sampling_condition_bound
from ._condition_bounds import sufficient_responses as sufficient_responses
from ._exact_condition import WorstCaseCondition as WorstCaseCondition
from ._exact_condition import complement_condition_number as complement_condition_number
from ._exact_condition import raw_condition_number as raw_condition_number
from ._exact_condition import worst_case_condition as worst_case_condition
from ._exhaustive_condition import BASES as BASES
from ._exhaustive_condition import BASIS as BASIS
from ._exhaustive_condition import ExhaustiveCondition as ExhaustiveCondition
from ._exhaustive_condition import exhaustive_condition as exhaustive_condition
from ._exhaustive_condition import generator_matrix as generator_matrix
from ._gap_bounds import gap_condition_bound as gap_condition_bound
from ._gap_bounds import (
    gap_condition_bound_probabilistic as gap_condition_bound_probabilistic,
)
from ._gap_bounds import gap_quantile as gap_quantile
from ._gap_bounds import gap_tail_bound as gap_tail_bound
from ._gap_bounds import max_gap as max_gap
from ._intervals import clopper_pearson as clopper_pearson
from ._leverage import chebyshev_coherence as chebyshev_coherence
from ._leverage import chebyshev_leverage_scores as chebyshev_leverage_scores
from ._leverage import coherence as coherence
from ._leverage import leverage_scores as leverage_scores
from ._repapprox_kernels import exact_recovery_probability as exact_recovery_probability
from ._repapprox_kernels import recovery_probability_bound as recovery_probability_bound
from ._repapprox_kernels import recovery_probability_union as recovery_probability_union

__all__ = [
    "BASES",
    "BASIS",
    "chebyshev_coherence",
    "chebyshev_leverage_scores",
    "chernoff_delta",
    "clopper_pearson",
    "coherence",
    "complement_condition_number",
    "deterministic_condition_bound",
    "exhaustive_condition",
    "ExhaustiveCondition",
    "exact_recovery_probability",
    "gap_condition_bound",
    "gap_condition_bound_probabilistic",
    "gap_quantile",
    "gap_tail_bound",
    "generator_matrix",
    "leverage_scores",
    "max_gap",
    "missing_rows_condition_bound",
    "raw_condition_number",
    "recovery_probability_bound",
    "recovery_probability_union",
    "sampling_condition_bound",
    "sufficient_responses",
    "worst_case_condition",
    "WorstCaseCondition",
]
