"""Locating corrupted workers: the robust decoders against corrupted answers.

    python -m theory.robust --out results/robust [--quick]

The bf16 cross-tower setting of :mod:`theory.demo` (K = 8, M = 40, D = 22, N = 30):
every request draws fresh queries and a uniformly random set of N responders; A of
the responders (chosen uniformly) add +-size x RMS(answers) to their answer. Reported:

* Lagrange-coded answers, :func:`codedjax.robust_decode` (``max_corrupted``
  = 4, the most N = 30 = D + 2 * 4 allows), with two noise models: ``noise_sd``
  from a first-order rounding analysis of the bf16 tower at each coded input
  (:func:`cross_tower_rounding_sd`), and the dtype-only model (no ``noise_sd``).
  Reported: the rate at which exactly the corrupted workers are located (also
  among the requests whose corrupted workers have leverage below 0.9), the
  false-alarm rate on clean requests, the UNDECIDABLE rate and the decoded error
  after exclusion relative to the clean decode of the same request, against the
  number of corrupted workers (1-4, at 1 x RMS) and against the error size
  (0.01-10 x RMS, one corrupted worker).
* Berrut-coded answers (BACC points): a leave-one-out locator (each answer against
  the Berrut interpolant of the others, robust scale, remove the worst, repeat)
  side by side with ApproxIFER's locator reimplemented from its description (a
  rational fit P(z_i) = y_i Q(z_i) with deg Q = A, the A responders with the
  smallest |Q(z_i)| excluded), both followed by Berrut decoding of the rest.

The maths is in ``docs/decoding.md``. Modules: ``config`` (:class:`RobustConfig`),
``answers`` (the bf16 workers and :func:`cross_tower_rounding_sd`), ``locators``
(the reference locators, public), ``pipeline`` (:func:`run_robust`), ``report`` and
``__main__``.
"""

from .answers import cross_tower_rounding_sd as cross_tower_rounding_sd
from .config import RobustConfig as RobustConfig
from .locators import approxifer_locate as approxifer_locate
from .locators import berrut_denominator as berrut_denominator
from .locators import leverages as leverages
from .locators import loo_locate as loo_locate
from .locators import ml_located as ml_located
from .pipeline import RobustSummary as RobustSummary
from .pipeline import run_berrut as run_berrut
from .pipeline import run_lagrange as run_lagrange
from .pipeline import run_robust as run_robust
from .report import format_tables as format_tables
from .report import plot_rates as plot_rates
from .report import write_outputs as write_outputs


def main(argv=None):
    """``python -m theory.robust``'s entry point (see ``__main__``)."""
    from .__main__ import main as _main

    return _main(argv)
