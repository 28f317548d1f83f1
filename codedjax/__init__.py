"""codedjax: numerically accurate coded computing for machine-learning inference.

Polynomial parts of a network are coded with Lagrange encoding and decoded by ChebyLS
(least squares in the Chebyshev basis over every responder); non-polynomial parts by
Berrut (BACC), NeRCC smoothing splines, or RepApprox (replication plus approximation).
This module only re-exports; implementations live in the private modules.
"""

__version__ = "0.1.0"

# precision and dtype policy
from ._dtypes import accumulation_dtype as accumulation_dtype
from ._dtypes import low_precision_worker as low_precision_worker
from ._dtypes import unit_roundoff as unit_roundoff

# points and bases
from ._chebyshev import chebyshev_points as chebyshev_points
from ._chebyshev import chebyshev_vandermonde as chebyshev_vandermonde

# latency models (one vocabulary for the sampler, the serving injector, the planner)
from ._latency import Constant as Constant
from ._latency import LatencyModel as LatencyModel
from ._latency import Pareto as Pareto
from ._latency import PersistentSlowdown as PersistentSlowdown
from ._latency import RandomSlowdown as RandomSlowdown
from ._latency import ShiftedExponential as ShiftedExponential
from ._latency import Uniform as Uniform
from ._latency_text import parse_latency as parse_latency

# straggler models
from ._sampling import Arrivals as Arrivals
from ._sampling import WorstCase as WorstCase
from ._sampling import first_arrivals as first_arrivals
from ._sampling import sample_arrivals as sample_arrivals
from ._sampling import sample_masks as sample_masks
from ._sampling import worst_case_mask as worst_case_mask

# decode results
from ._result import DecodeResult as DecodeResult
from ._result import Status as Status

# concurrency: the lock around programs with batched CPU LAPACK calls
from ._threads import lapack_lock as lapack_lock

# polynomial codes
from ._lagrange_chebyls import chebyls_decode as chebyls_decode
from ._lagrange_chebyls import chebyls_decode_batched as chebyls_decode_batched
from ._lagrange_chebyls import chebyls_decoding_matrix as chebyls_decoding_matrix
from ._lagrange_encoding import lagrange_encode as lagrange_encode
from ._lagrange_encoding import recovery_threshold as recovery_threshold
from ._lagrange_threshold import spread_order as spread_order
from ._lagrange_threshold import threshold_decode as threshold_decode

# decoding that knows its own error: graceful and robust decoders
from ._lagrange_graceful import graceful_decode as graceful_decode
from ._lagrange_graceful import smooth_chebyshev_decode as smooth_chebyshev_decode
from ._lagrange_robust import RobustDecodeResult as RobustDecodeResult
from ._lagrange_robust import robust_decode as robust_decode

# --- approximate codes (Berrut / NeRCC / RepApprox): add re-exports below ---
from ._berrut_kernels import bacc_points as bacc_points
from ._berrut_kernels import berrut_decode as berrut_decode
from ._berrut_kernels import berrut_decoding_matrix as berrut_decoding_matrix
from ._berrut_kernels import berrut_encode as berrut_encode
from ._nercc_tuning import NerccTuning as NerccTuning
from ._nercc_kernels import nercc_decode as nercc_decode
from ._nercc_kernels import nercc_decoding_matrix as nercc_decoding_matrix
from ._nercc_kernels import nercc_encode as nercc_encode
from ._nercc_kernels import nercc_encoding_matrix as nercc_encoding_matrix
from ._nercc_tuning import tune_nercc as tune_nercc
from ._repapprox_kernels import RepApproxLayout as RepApproxLayout
from ._repapprox_kernels import RepApproxResult as RepApproxResult
from ._repapprox_kernels import exact_recovery_probability as exact_recovery_probability
from ._repapprox_kernels import recovery_probability_bound as recovery_probability_bound
from ._repapprox_kernels import recovery_probability_union as recovery_probability_union
from ._repapprox_kernels import repapprox_decode as repapprox_decode
from ._repapprox_kernels import repapprox_encode as repapprox_encode
from ._repapprox_kernels import repapprox_layout as repapprox_layout

# code objects: one interface for every scheme, baselines included
from ._code import Answers as Answers
from ._code import Code as Code
from ._lagrange_codes import ChebyLSCode as ChebyLSCode
from ._lagrange_codes import GracefulCode as GracefulCode
from ._lagrange_codes import LagrangeCode as LagrangeCode
from ._lagrange_codes import RobustCode as RobustCode
from ._lagrange_codes import ThresholdCode as ThresholdCode
from ._lagrange_codes import lagrange_code as lagrange_code
from ._approx_codes import BaccCode as BaccCode
from ._approx_codes import NerccCode as NerccCode
from ._approx_codes import bacc_code as bacc_code
from ._approx_codes import nercc_code as nercc_code
from ._replication_codes import RepApproxCode as RepApproxCode
from ._replication_codes import ReplicationCode as ReplicationCode
from ._replication_codes import repapprox_code as repapprox_code
from ._replication_codes import replication_code as replication_code
from ._replication_codes import uncoded_code as uncoded_code
from ._parity import ParityCode as ParityCode
from ._parity import parity_code as parity_code
from ._circle_codes import CircleCode as CircleCode
from ._circle_codes import CircleThresholdCode as CircleThresholdCode
from ._circle_codes import circle_code as circle_code
from ._random_codes import RandomCode as RandomCode
from ._random_codes import random_code as random_code
from ._catalogue import SCHEME_NAMES as SCHEME_NAMES
from ._catalogue import Scheme as Scheme
from ._catalogue import Workload as Workload
from ._catalogue import catalogue as catalogue
from ._layouts import Layout as Layout
from ._layouts import layouts as layouts

# --- bounds (codedjax.bounds is a public submodule): re-exports below ---
from . import bounds as bounds
