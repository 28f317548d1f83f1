"""Calibration of the predicted error (the ``error`` field of every decode).

    python -m theory.calibration --out results/calibration
    python -m theory.calibration --payload series --worker-dtype float32 ...
    python -m theory.calibration --codes all --masks 500 --out results/calibration

The bf16 cross-tower setting of :mod:`theory.demo` (K = 8 queries through a degree-3
DCNv2 cross tower, M = 40 workers at first-kind Chebyshev points, D = 22): for each N
and each of ``num_masks`` requests (a fresh batch of K queries and a uniformly
random set of N responders per request), the workers answer in bf16, the master
decodes in float32, and the actual error max_k |value_k - f(X_k)| (against the
float64 model) is compared with the decoder's predicted error. Reported per decoder
and N: the fraction of requests whose prediction is at least the actual error
(target >= 95%) and the median of predicted / actual (target <= 10); a scatter
plot of predicted against actual. The maths is in ``docs/decoding.md``.

Other payloads (``--payload``): ``series``, answers that are a random Chebyshev
series of degree D - 1 in the worker points (``columns`` payload columns,
coefficients N(0, decay^(2j)) in the equilibrated basis, ``--decay``), computed in
float64 and rounded once to the workers' dtype; the truth is the series at the data
points. ``--worker-dtype float32`` gives float32 answers (the cross tower then runs
in float32), whose rounding is that of the decoder itself.

Every code (``--codes all``, or names from :data:`CODES`): each scheme of
:func:`codedjax.catalogue` that serves a request in one round, the circle code as
its four variants (:func:`catalogue_scheme`), on the workloads of
:data:`SETTINGS` it serves, f(x) = (x W)^d (linear, K = 4, M = 10: every code;
quadratic, K = 3, M = 9: the codes exact for degree 2 and the interpolating
ones), with bf16 and float32 answers (both in one run), at every N from the code's
threshold to its M, ``--masks`` requests each, two kinds of answers: under the
premise of the prediction, the exact (float64) f of the coded queries rounded
once to the workers' dtype, and beyond it, f computed by the workers in their
dtype (several roundings). The actual error against float64 f(X), or for the
approximate decodes (BACC, NeRCC and RepApprox, whose ``error`` predicts
the rounding part only, and the graceful decoder below D, whose ``error`` is
its prior's posterior spread) against the same decode of the float64 answers.
``--payload``, ``--responses``, ``--decoders``, ``--worker-dtype``,
``--columns`` and ``--decay`` apply to the tower and series runs only.
``report.md`` holds two short tables (premise and beyond; per code and dtype:
the coverage at the threshold, the lowest coverage and the largest median ratio
over N) and the full one, headed by the commit and the date.
"""

from .catalogue import ANSWERS as ANSWERS
from .catalogue import PAYLOAD_WIDTH as PAYLOAD_WIDTH
from .catalogue import SETTINGS as SETTINGS
from .catalogue import approximate_at as approximate_at
from .catalogue import catalogue_code as catalogue_code
from .catalogue import catalogue_scheme as catalogue_scheme
from .catalogue import catalogue_worker as catalogue_worker
from .catalogue import format_catalogue as format_catalogue
from .catalogue import run_catalogue as run_catalogue
from .catalogue import write_catalogue as write_catalogue
from .config import CIRCLE_VARIANTS as CIRCLE_VARIANTS
from .config import CODES as CODES
from .config import DECODERS as DECODERS
from .config import PAYLOADS as PAYLOADS
from .config import WORKER_DTYPES as WORKER_DTYPES
from .config import CalibrationConfig as CalibrationConfig
from .single import CalibrationSummary as CalibrationSummary
from .single import format_table as format_table
from .single import plot as plot
from .single import run_calibration as run_calibration
from .single import write_outputs as write_outputs
