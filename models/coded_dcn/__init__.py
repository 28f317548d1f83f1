"""Coded DCNv2 inference on Adult: ChebyLS + RepApprox against the baselines.

Usage::

    python -m models.coded_dcn --quick --out results/coded_dcn   # < 5 min, 2 CPUs
    python -m models.coded_dcn --out results/coded_dcn           # more masks

Library::

    summary = run_coded_dcn(CodedDCNConfig.quick(), out="results/coded_dcn")

The seed paper's headline experiment. The test queries of Adult are served in groups
of K = 8 by M = 40 workers that compute in bfloat16 (inputs, parameters and
arithmetic); the model is a parallel DCNv2 with L = 2 cross layers, whose Cross
branch with its linear head, ``w_c . x_L``, is a polynomial of degree d = L + 1 = 3 in
x_0 (D = d (K - 1) + 1 = 22 coefficients) while the Deep branch is a ReLU MLP. The
schemes (:data:`SCHEMES`: pairs of :func:`codedjax.catalogue` entries, one code for
each branch, built in :mod:`models.coded_dcn.schemes`):

- ``chebyls+repapprox`` (the seed's): Cross = Lagrange code at M first-kind Chebyshev
  points decoded by least squares in the Chebyshev basis over all N responders;
  Deep = RepApprox, each query replicated on c = 4 workers (worker i replicates query
  i // c) and E = M - K c = 8 extra Berrut-coded servers, decoded by the unified
  Berrut interpolant (exact where a replica answered).
- ``threshold+repapprox`` (the classical LCC baseline): the same encodings; Cross
  decoded from the first D responders in arrival order by a square solve. At N = D it
  is the same system as ChebyLS.
- ``bacc``: one Berrut-coded input per worker (K first-kind data points, M
  second-kind worker points) feeds both branches; both decoded by Berrut
  interpolation (Jahani-Nezhad & Maddah-Ali).
- ``nercc``: the same with smoothing splines; the (encoder, decoder) smoothing pair is
  tuned jointly for each N on the VALIDATION split (:func:`codedjax.tune_nercc`, with
  the bf16 workers and the uniform straggler model), never on test data.

Modules: ``config`` (:class:`CodedDCNConfig`), ``schemes`` (the scheme dictionary),
``served`` (the model at the master and on the workers), ``pipeline``
(:func:`run_coded_dcn`), ``report`` (tables, plots, ``report.md``) and ``__main__``.

References:
    The more the merrier: numerically accurate coded computing for ML inference (seed
    paper of codedjax); Q. Yu et al., Lagrange Coded Computing, arXiv:1806.00939;
    M. Fahim and V. R. Cadambe, arXiv:1903.08326; T. Jahani-Nezhad and M. A.
    Maddah-Ali, Berrut approximated coded computing, arXiv:2009.08327; P. Moradi
    and M. A. Maddah-Ali, NeRCC, arXiv:2402.04377; R. Wang et al., DCN
    V2, arXiv:2008.13535.
"""

from .config import QUICK_TRAIN as QUICK_TRAIN
from .config import CodedDCNConfig as CodedDCNConfig
from .pipeline import CodedDCNSummary as CodedDCNSummary
from .pipeline import run_coded_dcn as run_coded_dcn
from .report import format_table as format_table
from .report import write_outputs as write_outputs
from .schemes import SCHEME_PAIRS as SCHEME_PAIRS
from .schemes import SCHEMES as SCHEMES
from .schemes import DCNScheme as DCNScheme
from .schemes import branch_entries as branch_entries
from .schemes import build_schemes as build_schemes
