"""Robust ChebyLS: locate and exclude workers whose answers are wrong.

The N - D answers beyond the recovery threshold make the least-squares fit
over-determined; a corrupted answer shows up as a residual far beyond the workers'
rounding level. :func:`chebyls_decode_robust`:

1. fits every answer and takes as candidates the A + 2 responders with the largest
   studentised residuals |r_i| / (sigma_i sqrt(1 - h_i)) (h_i the leverage, sigma_i
   the noise level of answer i: from the worker dtype, or the caller's
   ``noise_sd``), and two more from the fit without the worst of them (a second
   corrupted answer that the first one's smear hides);
2. refits without every subset of at most A = ``max_corrupted`` candidates; a subset
   is consistent when every kept answer is within tau of its fit and N >= D + 2|subset|
   (unique decoding);
3. excludes the smallest consistent subset (the fewest corruptions that explain the
   answers, as Berlekamp-Welch decoding does; ties by the smaller residual) and
   returns the weighted ChebyLS decode of the rest. No consistent subset: the status
   is UNDECIDABLE.

The maths, the threshold and what it assumes: ``docs/decoding.md``.
"""

from __future__ import annotations

import itertools
from statistics import NormalDist
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._chebyshev import chebyshev_vandermonde, orthonormal_column_scale
from ._dtypes import finite_rows, points_valid
from ._errors import error_quantile, rounding_level
from ._graceful import check_smooth_args
from ._result import Status, finish, status_of


class RobustDecodeResult(NamedTuple):
    """A :class:`DecodeResult` plus the workers the robust decoder excluded.

    Attributes:
        value, ok, cond, num_used, status, error: as :class:`DecodeResult`
            (``num_used`` counts the responders kept; ``status`` is
            ``Status.UNDECIDABLE`` when the decoder cannot tell which workers are
            corrupted).
        suspects: bool [..., M], the workers located as corrupted and excluded.
    """

    value: jax.Array
    ok: jax.Array
    cond: jax.Array
    num_used: jax.Array
    status: jax.Array
    error: jax.Array
    suspects: jax.Array


def worker_noise_scale(num_inputs: int, num_coeffs: int) -> float:
    """gamma: a worker's rounding error in units of u rms(y) (Lagrange codes).

    A worker of a degree-d code (d = (D - 1) / (K - 1)) rounds its coded input
    (each entry by a relative error of standard deviation u / sqrt(3)), which a
    homogeneous degree-d polynomial amplifies by at most d (Euler's identity), and
    rounds its answer (u / sqrt(3) again): gamma = sqrt((d^2 + 1) / 3), 1.83 for
    d = 3. Rounding of the parameters is common to every worker and leaves no
    residual.
    """
    d = (num_coeffs - 1) / max(num_inputs - 1, 1)
    return float(((d * d + 1.0) / 3.0) ** 0.5)


def outlier_threshold(num_tests: int, false_alarm: float) -> float:
    """tau: P(max of ``num_tests`` |N(0, 1)| > tau) <= false_alarm (Bonferroni)."""
    return NormalDist().inv_cdf(1.0 - false_alarm / (2.0 * max(num_tests, 1)))


def _fit(t, tb, flat, active, acc):
    """SVD least-squares fit on the active rows (already weighted).

    Returns residuals, leverages, the value at beta, the noise gain and the
    prediction-variance factor 1 + x^T (T_S^T T_S)^+ x at every worker point.
    """
    d = t.shape[1]
    w = jnp.where(active[:, None], t, jnp.zeros((), acc))
    u, s, vh = jnp.linalg.svd(w, full_matrices=False)
    keep = s > s[:1] * (d * jnp.finfo(acc).eps)
    sinv = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    u = jnp.where(keep[None, :], u, jnp.zeros((), acc))
    yw = jnp.where(active[:, None], flat, jnp.zeros((), acc))
    coef = vh.T @ (sinv[:, None] * (u.T @ yw))  # [D, F]
    pred = t @ coef
    resid = jnp.where(active[:, None], flat - pred, jnp.zeros((), acc))
    lev = jnp.where(active, jnp.sum(u * u, axis=1), jnp.zeros((), acc))
    q = (t @ vh.T) * sinv[None, :]  # [M, D]
    full = jnp.all(keep)
    return dict(
        coef=coef,
        pred=pred,
        resid=resid,
        lev=lev,
        pvar=1.0 + jnp.sum(q * q, axis=1),
        rss=jnp.sum(resid * resid, axis=0),
        proj=(tb @ vh.T) * sinv[None, :],  # [K, D]: value = proj @ u^T y
        u=u,
        cond=jnp.where(full, s[0] / s[-1], jnp.asarray(jnp.inf, acc)),
    )


def _studentised(fit, active, sig):
    room = jnp.maximum(1.0 - fit["lev"], 0.0)
    stud = jnp.abs(fit["resid"]) / (sig[None, :] * jnp.sqrt(room)[:, None])
    return jnp.where((active & (room > 1e-6))[:, None], stud, 0.0)


def _robust_impl(
    y, mask, alpha, beta, noise_sd, num_coeffs, acc, wdt, max_corrupted, tau, gamma
):
    m, d, k = alpha.shape[0], num_coeffs, beta.shape[0]
    scale = orthonormal_column_scale(m, d, acc)
    t0 = chebyshev_vandermonde(alpha, d) * scale[None, :]
    tb = chebyshev_vandermonde(beta, d) * scale[None, :]
    flat0 = y.reshape(m, -1).astype(acc)
    sel = mask & finite_rows(y)
    if noise_sd is not None:  # an answer without a valid noise level counts as missing
        sel = sel & jnp.isfinite(noise_sd) & (noise_sd > 0)
    flat0 = jnp.where(sel[:, None], flat0, jnp.zeros((), acc))
    n = jnp.sum(sel, dtype=jnp.int32)
    f = flat0.shape[1]
    u_w = rounding_level(wdt, acc)
    # weights: an answer's rounding error scales with its own size, floored at half
    # the rms of the answers (an answer near zero still carries the rounding of the
    # intermediate values it was computed from)
    rms = jnp.sqrt(jnp.sum(flat0 * flat0, axis=0) / jnp.maximum(n, 1).astype(acc))
    if noise_sd is None:
        size = jnp.sqrt(jnp.mean(flat0 * flat0, axis=1) + 0.25 * jnp.mean(rms * rms))
        sig_w = jnp.full((f,), gamma * u_w, acc)  # noise level in weighted units
    else:
        # the caller's standard deviation of each answer's rounding error: rows
        # weighted by its inverse have unit noise
        size = jnp.where(sel, jnp.abs(noise_sd.astype(acc)), jnp.ones((), acc))
        sig_w = jnp.ones((f,), acc)
    size = jnp.maximum(size, jnp.finfo(acc).tiny)
    wt = 1.0 / size  # [M]
    t = t0 * wt[:, None]
    flat = flat0 * wt[:, None]

    # candidates: the L responders with the largest studentised residuals of the
    # fit to every answer (a corrupted answer is among them, or its smear is)
    fit0 = _fit(t, tb, flat, sel, acc)
    stud0 = jnp.max(_studentised(fit0, sel, sig_w), axis=1)
    num_cand = min(m, max_corrupted + 4)
    first = min(num_cand, max_corrupted + 2)
    _, cand = jax.lax.top_k(jnp.where(sel, stud0, -1.0), first)
    if num_cand > first:
        # the rest from the fit without the worst: a second corrupted answer that
        # the first one's smear hides stands out once that one is excluded
        taken = jnp.zeros((m,), bool).at[cand].set(True)
        act1 = sel & (jnp.arange(m) != cand[0])
        fit1 = _fit(t, tb, flat, act1, acc)
        stud1 = jnp.max(_studentised(fit1, act1, sig_w), axis=1)
        _, more = jax.lax.top_k(jnp.where(act1 & ~taken, stud1, -1.0), num_cand - first)
        cand = jnp.concatenate([cand, more])
    cand = cand.astype(jnp.int32)
    # every subset of at most A candidates (static), as index rows padded with -1
    subsets = [()]
    for a in range(1, max_corrupted + 1):
        subsets += list(itertools.combinations(range(num_cand), a))
    sizes = np.array([len(c) for c in subsets], np.int32)
    table = np.full((len(subsets), max(max_corrupted, 1)), -1, np.int32)
    for i, c in enumerate(subsets):
        table[i, : len(c)] = c
    table = jnp.asarray(table)
    sizes_j = jnp.asarray(sizes)

    def excluded(row):  # bool [M]: the workers a subset excludes
        ids = jnp.where(row >= 0, cand[jnp.maximum(row, 0)], m)
        return jnp.zeros((m + 1,), bool).at[ids].set(True)[:m]

    drop = jax.vmap(excluded)(table)  # [S, M]
    actives = sel[None, :] & ~drop
    # one fit (one SVD) at a time: a LAPACK call with a batch axis can deadlock
    # XLA:CPU's thread pool when several threads decode at once (README, Concurrency)
    fits = jax.lax.map(lambda act: _fit(t, tb, flat, act, acc), actives)
    # consistent: every kept answer within tau of the fit (rounding level from the
    # dtype), the excluded ones were responders, and unique decoding holds
    stud = jax.vmap(_studentised, in_axes=(0, 0, None))(fits, actives, sig_w)
    clean = jnp.max(stud, axis=(1, 2)) <= tau
    valid = jnp.all(~drop | sel[None, :], axis=1) & (n >= d + 2 * sizes_j)
    consistent = clean & valid
    # the fewest exclusions that explain the answers (the Berlekamp-Welch
    # principle), ties broken by the smaller residual
    rss_tot = jnp.sum(fits["rss"], axis=1)
    fewest = jnp.min(jnp.where(consistent, sizes_j, max_corrupted + 1))
    best = jnp.argmin(jnp.where(consistent & (sizes_j == fewest), rss_tot, jnp.inf))
    decided = jnp.any(consistent)
    best = jnp.where(decided, best, 0)
    suspects = drop[best] & decided
    num_bad_final = jnp.sum(suspects, dtype=jnp.int32)
    undecidable = ~decided
    final = jax.tree_util.tree_map(lambda v: v[best], fits)
    kept = sel & ~suspects
    coef, cond, rss = final["coef"], final["cond"], final["rss"]
    value = tb @ coef
    # noise gain in weighted units: A_w = proj U^T, ||A_w row||^2 = ||proj row||^2
    gain_sq = jnp.max(jnp.sum(final["proj"] ** 2, axis=1))
    n_kept = n - num_bad_final
    dof = n_kept - d
    sig = jnp.where(
        dof > 0,
        jnp.maximum(sig_w, jnp.sqrt(rss / jnp.maximum(dof, 1).astype(acc))),
        sig_w,
    )
    z = error_quantile(k * f)
    # the weighted noise sigma is relative to the answer sizes (<= max size)
    big = jnp.max(jnp.where(kept, size, 0))
    err = z * jnp.sqrt(gain_sq * (jnp.max(sig) * big) ** 2 + (u_w * jnp.max(rms)) ** 2)
    eps = jnp.finfo(acc).eps
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta),
        enough=n >= d,
        solved=jnp.isfinite(cond) & (cond * eps < 1),
    )
    status = jnp.where(
        (status == int(Status.SUCCESS)) & undecidable, int(Status.UNDECIDABLE), status
    ).astype(jnp.int32)
    value = value.reshape((k,) + y.shape[1:])
    r = finish(value, cond, n_kept, status, err.astype(acc))
    return RobustDecodeResult(*r, suspects)


_robust = jax.jit(
    _robust_impl,
    static_argnames=("num_coeffs", "acc", "wdt", "max_corrupted", "tau", "gamma"),
)


def chebyls_decode_robust(
    y: Any,
    mask: Any,
    alpha: Any,
    beta: Any,
    num_coeffs: int,
    *,
    max_corrupted: int,
    worker_dtype: Any = None,
    false_alarm: float = 0.01,
    noise_scale: float | None = None,
    noise_sd: Any = None,
    accum_dtype: Any = None,
) -> RobustDecodeResult:
    r"""ChebyLS that locates and excludes up to A corrupted workers.

    The candidates are the A + 2 responders with the largest studentised residual
    |r_i| / (sigma_w sqrt(1 - h_i)) and two more from the fit without the worst of
    them; every subset of at most A candidates is excluded in
    turn and the rest refitted (weighted least squares, rows scaled by 1 / s_i,
    s_i = sqrt(mean_f y_if^2 + rms^2 / 4), or s_i = ``noise_sd[i]`` with
    sigma_w = 1 when given); a subset is consistent when every kept
    answer's studentised residual is at most

    .. math::
        \tau = \Phi^{-1}\!\left(1 - \frac{\alpha_{fa}}{2 M F}\right)

    and N >= D + 2 |subset|; the smallest consistent subset is excluded (ties by
    the smaller residual). Here sigma_w = gamma u (in units of s_i) is the noise
    level of one answer from the worker dtype (gamma from
    :func:`worker_noise_scale`, 1.83 for a degree-3 code). A clean
    request is flagged with probability at most ``false_alarm`` while the workers'
    errors stay within sigma_w (Bonferroni over the M F answers that may come).
    A corrupted answers can be corrected only from N >= D + 2A answers (two
    different sets of A corruptions must not explain the same answers); when no
    subset within that bound explains the answers, ``status`` is UNDECIDABLE
    (``ok`` False).

    Args:
        y: [M, ...] worker responses (NaN/Inf rows count as missing).
        mask: bool [M] responders.
        alpha: [M] worker points; beta: [K] data points.
        num_coeffs: D (static).
        max_corrupted: A >= 0, the most corrupted answers to look for (static);
            needs M >= D + 2A.
        worker_dtype: the dtype the workers computed in (default ``y.dtype``).
        false_alarm: the probability of flagging a clean request, in (0, 1).
        noise_scale: gamma (default :func:`worker_noise_scale` of K and D).
        noise_sd: optional float [M], the standard deviation of each worker's
            answer error (e.g. a first-order rounding analysis of the worker's
            computation at its coded input, which the master knows); replaces
            the dtype-only model (``noise_scale`` is then unused). A worker whose
            level is not finite and positive counts as missing.
        accum_dtype: as :func:`codedjax.chebyls_decode`.

    Returns:
        RobustDecodeResult: the decode without the suspects, and ``suspects``
        bool [M].

    Raises:
        ValueError: shapes that disagree, num_coeffs > M, max_corrupted < 0 or
            beyond the redundancy (M < D + 2A), false_alarm outside (0, 1),
            noise_scale <= 0, noise_sd not a floating array of shape [M].
        TypeError: non-floating y, non-boolean mask, non-integer max_corrupted.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(16), cj.chebyshev_points(3)
        >>> y = (alpha**2).astype(jnp.bfloat16)      # bf16 workers
        >>> y = y.at[5].add(0.5)                     # worker 5 is corrupted
        >>> r = cj.chebyls_decode_robust(y, jnp.ones(16, bool), alpha, beta,
        ...                              num_coeffs=3, max_corrupted=2)
        >>> bool(r.ok), jnp.flatnonzero(r.suspects).tolist()
        (True, [5])

    References:
        R. D. Cook and S. Weisberg, Residuals and Influence in Regression, 1982
        (studentised residuals); L. R. Welch and E. R. Berlekamp, Error correction
        for algebraic block codes, US Patent 4,633,470, 1986 (the fewest errors
        that explain the received word).
    """
    fname = "chebyls_decode_robust"
    y, mask, alpha, beta, d, acc, wdt = check_smooth_args(
        fname, y, mask, alpha, beta, num_coeffs, worker_dtype, accum_dtype
    )
    if isinstance(max_corrupted, bool) or not isinstance(max_corrupted, int):
        raise TypeError(f"{fname}: max_corrupted must be an int, got {max_corrupted!r}")
    m = y.shape[0]
    if max_corrupted < 0 or d + 2 * max_corrupted > m:
        raise ValueError(
            f"{fname}: max_corrupted (A) must satisfy 0 <= A and D + 2A <= M (A "
            f"corrupted answers need at least D + 2A answers; D={d}, M={m}), got "
            f"{max_corrupted}"
        )
    if not 0.0 < float(false_alarm) < 1.0:
        raise ValueError(f"{fname}: false_alarm must lie in (0, 1), got {false_alarm}")
    k = beta.shape[0]
    gamma = worker_noise_scale(k, d) if noise_scale is None else float(noise_scale)
    if not gamma > 0:
        raise ValueError(f"{fname}: noise_scale must be > 0, got {noise_scale}")
    f = 1
    for s in y.shape[1:]:
        f *= s
    tau = outlier_threshold(m * f, float(false_alarm))
    if noise_sd is not None:
        noise_sd = jnp.asarray(noise_sd)
        if noise_sd.shape != (m,) or not jnp.issubdtype(noise_sd.dtype, jnp.floating):
            raise ValueError(
                f"{fname}: noise_sd must be a floating array of shape ({m},) (one "
                f"standard deviation per worker), got {noise_sd.dtype} "
                f"{noise_sd.shape}"
            )
    return _robust(
        y, mask, alpha, beta, noise_sd, num_coeffs=d, acc=acc, wdt=wdt,
        max_corrupted=max_corrupted, tau=tau, gamma=gamma,
    )  # fmt: skip
