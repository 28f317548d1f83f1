"""Confidence intervals for the Monte Carlo rates that check the bounds."""

from __future__ import annotations

from scipy import stats

from ._argchecks import check_int
from ._bounds_args import check_probability


def clopper_pearson(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
    r"""Exact (Clopper-Pearson) two-sided confidence interval for a binomial rate.

    .. math::
        [\,B^{-1}(\alpha/2;\,k,\,n-k+1),\ B^{-1}(1-\alpha/2;\,k+1,\,n-k)\,],
        \quad \alpha = 1 - \text{confidence},

    with B^{-1} the beta quantile (``scipy.stats.beta.ppf``); the lower end is 0
    for k = 0 and the upper end 1 for k = n. Its coverage is at least the
    confidence for every true rate.

    Args:
        successes: k with 0 <= k <= n. trials: n >= 1.
        confidence: in (0, 1), default 0.95.

    Returns:
        (low, high) floats.

    Raises:
        ValueError: k outside [0, n], n < 1, confidence outside (0, 1).

    Examples:
        >>> import codedjax.bounds as cb
        >>> lo, hi = cb.clopper_pearson(0, 100)
        >>> lo, round(hi, 4)
        (0.0, 0.0362)

    References:
        Clopper and Pearson, Biometrika 26(4), 1934.
    """
    fname = "clopper_pearson"
    n = check_int(fname, "trials", trials, minimum=1)
    k = check_int(fname, "successes", successes, minimum=0)
    if k > n:
        raise ValueError(f"{fname}: successes must be at most trials={n}, got {k}")
    conf = check_probability(fname, confidence, "confidence")
    a = 1.0 - conf
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2.0, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - a / 2.0, k + 1, n - k))
    return lo, hi
