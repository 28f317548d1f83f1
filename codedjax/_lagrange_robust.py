"""Robust ChebyLS: locate and exclude workers whose answers are wrong.

The N - D answers beyond the recovery threshold make the least-squares fit
over-determined; a corrupted answer shows up as a residual far beyond the workers'
rounding level. :func:`robust_decode`:

1. fits every answer once: its residuals r and residual projector P = I - H;
2. excludes in turn every set of at most two responders, and for each size a from
   three to A = ``max_corrupted`` the sets made of one of the 16 sets of a - 1 that
   lower the residual sum of squares the most and one more worker (a beam), each by
   the deletion formulas of the mean-shift outlier model (one small Cholesky factor
   of P_SS per set, no refit); a set is consistent when every kept answer is within
   tau of its fit and N >= D + 2|set| (unique decoding);
3. excludes the smallest consistent set (the fewest corruptions that explain the
   answers, as Berlekamp-Welch decoding does; ties by the smaller residual) and
   returns the weighted ChebyLS decode of the rest. No consistent set: the status
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

from ._argchecks import check_number
from ._batched_linalg import HI
from ._chebyshev import equilibrated_vandermondes
from ._dtypes import (
    exact_pow2,
    finite_rows,
    float_parts,
    ldexp_exact,
    max_exponent,
    nonzero,
    points_valid,
)
from ._errors import error_quantile, pow2_clipped, rounding_floors, rounding_level
from ._lagrange_graceful import check_smooth_args
from ._result import Status, apply_decoding, finish, status_of


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

    Returns the coefficients, residuals and their sum of squares, the orthonormal
    basis u of the active rows (for the residual projector I - u u^T), the map
    ``proj`` from u^T y to the values at beta (its row norms: the noise gain) and
    the condition number.
    """
    d = t.shape[1]
    w = jnp.where(active[:, None], t, jnp.zeros((), acc))
    u, s, vh = jnp.linalg.svd(w, full_matrices=False)
    keep = s > s[:1] * (d * jnp.finfo(acc).eps)
    sinv = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    u = jnp.where(keep[None, :], u, jnp.zeros((), acc))
    yw = jnp.where(active[:, None], flat, jnp.zeros((), acc))
    coef = vh.T @ (sinv[:, None] * (u.T @ yw))  # [D, F]
    resid = jnp.where(active[:, None], flat - t @ coef, jnp.zeros((), acc))
    return dict(
        coef=coef,
        resid=resid,
        rss=jnp.sum(resid * resid, axis=0),
        proj=(tb @ vh.T) * sinv[None, :],  # [K, D]: value = proj @ u^T y
        u=u,
        cond=jnp.where(jnp.all(keep), s[0] / s[-1], jnp.asarray(jnp.inf, acc)),
    )


def _room_floor(acc) -> float:
    """1 - h at or below this: the answer is interpolated by the fit and cannot be
    checked (and a pivot of P_SS this small leaves the fit undetermined): 1e-6, or
    64 eps of the accumulation dtype when that is larger (its rounding of 1 - h)."""
    return max(1e-6, 64.0 * float(jnp.finfo(acc).eps))


def _pow2_scale(x):
    """2^ceil(log2 x) elementwise, exactly, clipped to the normal powers of two of
    the dtype (1 where x is 0 or not finite): dividing by it is exact and brings x
    into (1/2, 1] (x between the smallest normal and the largest finite power of
    two)."""
    ok = jnp.isfinite(x) & (x > 0)
    fi = jnp.finfo(x.dtype)  # 2^(maxexp - 1) is the largest finite power of two
    # ceil(log2 x) from the exponent of x = m 2^k, m in [1/2, 1): k, or k - 1 at
    # m = 1/2 (exact: jnp.log2 and jnp.exp2 go through log and exp)
    m, k = jnp.frexp(jnp.where(ok, x, 1.0))
    e = jnp.clip(jnp.where(m == 0.5, k - 1, k), fi.minexp, fi.maxexp - 1)
    return jnp.where(ok, exact_pow2(e, x.dtype), 1.0)


def _typical_rms(x, sel):
    """The rms of the selected entries of x >= 0 that are at most 1000 times their
    (lower) median (all of them when the median is 0), scaled by a power of two so
    that nothing squared overflows or underflows; 0 when none is selected."""
    n = jnp.sum(sel, dtype=jnp.int32)
    srt = jnp.sort(jnp.where(sel, x, jnp.inf))
    med = srt[jnp.maximum((n - 1) // 2, 0)]
    keep = sel & ((x <= 1e3 * med) | (med <= 0))
    sc = _pow2_scale(jnp.max(jnp.where(keep, x, 0)))
    vals = jnp.where(keep, x / sc, 0.0)
    q = jnp.maximum(jnp.sum(keep, dtype=jnp.int32), 1)
    return sc * jnp.sqrt(jnp.sum(vals * vals) / q.astype(x.dtype))


def _stud(resid, room, check, sig_w, floor):
    """|r_i| / sqrt(sigma_w^2 (1 - h_i) + floor^2): the studentised residual, with
    the fit's own rounding (``floor``, absolute, per column) added to the answers'
    noise. Zero where ``check`` is False. [M, F]."""
    var = (
        sig_w[None, :] ** 2 * jnp.where(check, room, 1.0)[:, None] + floor[None, :] ** 2
    )
    return jnp.where(check[:, None], jnp.abs(resid) / jnp.sqrt(var), 0.0)


def _exclusion(ids, p, r, sel, sig_w, floor, n, d, tau):
    """Exclude the workers ``ids`` (int [W], -1 pads) from the fit of every answer.

    Deletion formulas of the mean-shift outlier model (``docs/decoding.md``): with
    P = I - H the residual projector of the fit of every answer and r its residuals,
    excluding the set S leaves the residuals r - P[:, S] P_SS^{-1} r_S, the rooms
    1 - h_i - P_iS P_SS^{-1} P_Si, and lowers the residual sum of squares by
    r_S^T P_SS^{-1} r_S: one W x W Cholesky factor per subset, no refit.

    Returns:
        (drop of the residual sum of squares, valid, consistent, excluded bool [M]):
        valid when every excluded worker responded, the rest determine the fit and
        N >= D + 2|S|; consistent when also every kept answer is within tau.
    """
    m, w = p.shape[0], ids.shape[0]
    acc = p.dtype
    v = ids >= 0
    idc = jnp.where(v, ids, 0)
    pss = jnp.where(v[:, None] & v[None, :], p[idc][:, idc], jnp.eye(w, dtype=acc))
    pcol = jnp.where(v[None, :], p[:, idc], jnp.zeros((), acc))  # [M, W]
    rs = jnp.where(v[:, None], r[idc], jnp.zeros((), acc))  # [W, F]
    # P_SS = L L^T unrolled (W is static and small), then X = L^{-1} P_S. and
    # z = L^{-1} r_S by forward substitution; a pivot at or below the floor means the
    # rest cannot check (or even determine) the fit without S
    room_min = _room_floor(acc)
    low = [[None] * w for _ in range(w)]
    xs, zs, pivots = [], [], []
    for j in range(w):
        piv = pss[j, j] - sum(low[j][k] ** 2 for k in range(j))
        pivots.append(piv)
        low[j][j] = jnp.sqrt(jnp.where(piv > room_min, piv, 1.0))
        for i in range(j + 1, w):
            dot = sum(low[i][k] * low[j][k] for k in range(j))
            low[i][j] = (pss[i, j] - dot) / low[j][j]
        xs.append((pcol[:, j] - sum(low[j][k] * xs[k] for k in range(j))) / low[j][j])
        zs.append((rs[j] - sum(low[j][k] * zs[k] for k in range(j))) / low[j][j])
    x, z = jnp.stack(xs), jnp.stack(zs)  # [W, M], [W, F]
    resid = r - x.T @ z
    room = jnp.diagonal(p) - jnp.sum(x * x, axis=0)
    excluded = jnp.zeros((m + 1,), bool).at[jnp.where(v, ids, m)].set(True)[:m]
    check = sel & ~excluded & (room > room_min)
    worst = jnp.max(_stud(resid, room, check, sig_w, floor))
    valid = (
        jnp.all(~v | sel[idc])
        & (n >= d + 2 * jnp.sum(v, dtype=jnp.int32))
        & jnp.all(jnp.stack(pivots) > room_min)
    )
    return jnp.sum(z * z), valid, valid & (worst <= tau), excluded


def _small_sets(m: int, max_corrupted: int) -> np.ndarray:
    """Every set of at most min(A, 2) of m workers, as rows of ids (-1 padded to
    width max(A, 1)): the search's exhaustive part (static)."""
    sets = [()]
    for a in range(1, min(max_corrupted, 2) + 1):
        sets += list(itertools.combinations(range(m), a))
    out = np.full((len(sets), max(max_corrupted, 1)), -1, np.int32)
    for i, c in enumerate(sets):
        out[i, : len(c)] = c
    return out


_BEAM = 16  # sets of a - 1 workers extended by one to search the sets of a >= 3
# the search's program grows as A^4 (an unrolled A x A Cholesky factor per beam
# level): measured 11 s to compile at A = 6, 24 s at A = 12 and 84 s at A = 18
MAX_CORRUPTED = 10


def _robust_impl(
    y, mask, alpha, beta, noise_sd, num_coeffs, acc, wdt, max_corrupted, tau, gamma
):
    m, d, k = alpha.shape[0], num_coeffs, beta.shape[0]
    t0, tb = equilibrated_vandermondes(alpha, beta, d, acc)
    flat0 = y.reshape(m, -1)
    sel = mask & finite_rows(y)
    if noise_sd is not None:  # an answer without a valid noise level counts as missing
        neg, _, _ = float_parts(noise_sd)  # (from the bits: a subnormal level is > 0)
        sel = sel & jnp.isfinite(noise_sd) & nonzero(noise_sd) & ~neg
    # the decoder is homogeneous of degree 1 in y: it runs on y / 2^E, 2^E the
    # power of two of the largest used answer (exact, from the bits: answers in or
    # near the subnormal range, which XLA would flush to zero, included), and its
    # value and predicted error are scaled back exactly at the end
    scale_exp = max_exponent(flat0, sel[:, None])
    flat0 = ldexp_exact(flat0, -scale_exp, acc, subnormal_out=False)
    flat0 = jnp.where(sel[:, None], flat0, jnp.zeros((), acc))
    f = flat0.shape[1]
    u_w = rounding_level(wdt, acc)
    tiny = jnp.finfo(acc).tiny
    # magnitudes go through powers of two (exact) before anything is squared, so
    # answers from 1e-30 to 1e38 (a flipped exponent bit) neither overflow nor
    # underflow: each row by its largest entry, then the weighted answers by c
    row_scale = _pow2_scale(jnp.max(jnp.abs(flat0), axis=1))  # [M]
    row_rms = row_scale * jnp.sqrt(jnp.mean((flat0 / row_scale[:, None]) ** 2, axis=1))
    if noise_sd is None:
        # an answer's rounding scales with its own size, floored at half the rms of
        # the responders (an answer near zero still carries the rounding of the
        # intermediate values it came from), leaving out answers over 1000 times
        # the median: a huge corrupted answer must not raise everybody's level
        size = jnp.hypot(row_rms, 0.5 * _typical_rms(row_rms, sel))
        # an answer in the workers' subnormal range rounds to their absolute
        # spacing (the smallest normal number times u), not relative to its size
        # (2^(minexp_w - E) in the units of y / 2^E)
        size = jnp.maximum(size, pow2_clipped(jnp.finfo(wdt).minexp - scale_exp, acc))
        base = gamma * u_w  # one answer's noise, relative to its size
    else:
        # the caller's standard deviation of each answer's rounding error (in the
        # units of y / 2^E); an answer beyond the float range in units of it
        # counts as non-finite
        size = jnp.abs(ldexp_exact(noise_sd, -scale_exp, acc, subnormal_out=False))
        base = 1.0
        sel = sel & jnp.isfinite(size)
        sel = sel & jnp.isfinite(row_scale / jnp.maximum(size, tiny))
        flat0 = jnp.where(sel[:, None], flat0, jnp.zeros((), acc))
    n = jnp.sum(sel, dtype=jnp.int32)
    size = jnp.where(sel, jnp.maximum(size, tiny), jnp.ones((), acc))
    wmax = _pow2_scale(jnp.max(jnp.where(sel, 1.0 / size, 0)))
    t = t0 * ((1.0 / size) / wmax)[:, None]  # rows weighted by 1 / size, <= 1
    flat = flat0 / size[:, None]  # the weighted answers, unit noise level base
    c = _pow2_scale(jnp.max(jnp.abs(flat), axis=0))  # [F]
    flat = flat / c[None, :]
    sig_w = base / c  # a weighted answer's noise, in these units: [F]

    # the fit of every answer: its residuals and residual projector P = I - U U^T
    # (rows of non-responders zero) are all the subset search needs
    fit0 = _fit(t, tb, flat, sel, acc)
    # the fit's own rounding of a residual, |dr_i| <~ 6 eps ||y_w|| measured for
    # backward-stable least squares at D = 5..22; 2 sqrt(D) eps ||y_w|| bounds it
    # with room (docs/decoding.md): float32 decodes of float32 answers stay decidable
    floor = 2.0 * d**0.5 * jnp.finfo(acc).eps * jnp.sqrt(jnp.sum(flat * flat, axis=0))
    proj = jnp.diag(sel.astype(acc)) - fit0["u"] @ fit0["u"].T

    def search(ids):  # in blocks of sets: memory [block, M, F], not [sets, M, F]
        return jax.lax.map(
            lambda i: _exclusion(i, proj, fit0["resid"], sel, sig_w, floor, n, d, tau),
            ids,
            batch_size=128,
        )

    ids = jnp.asarray(_small_sets(m, max_corrupted))
    found = [search(ids)]  # (drop, valid, consistent, excluded) per set
    for a in range(3, max_corrupted + 1):
        # sets of a: the _BEAM valid sets of a - 1 that lower the residual sum of
        # squares the most, each extended by every worker (a repeated or missing
        # worker makes its set invalid)
        size_prev = jnp.sum(ids >= 0, axis=1)
        score = jnp.where(found[-1][1] & (size_prev == a - 1), found[-1][0], -jnp.inf)
        _, top = jax.lax.top_k(score, min(_BEAM, score.shape[0]))
        workers = jnp.tile(jnp.arange(m, dtype=jnp.int32), top.shape[0])
        ids = jnp.repeat(ids[top], m, axis=0).at[:, a - 1].set(workers)
        found.append(search(ids))
    drop_rss, _, consistent, drop = (
        jnp.concatenate(v) for v in zip(*found, strict=True)
    )
    sizes = jnp.sum(drop, axis=1, dtype=jnp.int32)
    # the fewest exclusions that explain the answers (the Berlekamp-Welch
    # principle), ties broken by the larger drop of the residual sum of squares
    fewest = jnp.min(jnp.where(consistent, sizes, max_corrupted + 1))
    best = jnp.argmax(jnp.where(consistent & (sizes == fewest), drop_rss, -jnp.inf))
    decided = jnp.any(consistent)
    suspects = drop[best] & decided
    # one SVD at a time: a LAPACK call with a batch axis can deadlock XLA:CPU's
    # thread pool when several threads decode at once (README, Concurrency)
    kept = sel & ~suspects
    # the refit of the kept answers, rescaled without the excluded ones (a huge
    # corrupted answer must not push the others toward underflow)
    c2 = _pow2_scale(jnp.max(jnp.where(kept[:, None], jnp.abs(flat), 0), axis=0))
    final = _fit(t, tb, flat / c2[None, :], kept, acc)
    cond, rss = final["cond"], final["rss"]
    back = c2 * c / wmax  # [F]: from the fit's units to the answers'
    # the value is the weighted fit's decoding matrix applied to the answers as
    # they came: proj U^T diag(1 / size) / wmax, homogeneous of degree 0 in y (its
    # weights are ratios of sizes), so it applies to y itself, each feature scaled
    # exactly by its own power of two (a feature of subnormal answers beside a
    # normal one decodes as accurately as alone)
    w_rows = jnp.where(kept, (1.0 / size) / wmax, jnp.zeros((), acc))
    a_kept = jnp.matmul(final["proj"], final["u"].T, precision=HI) * w_rows[None, :]
    value = apply_decoding(a_kept, y, acc, rows=kept)
    # noise gain in weighted units: A_w = proj U^T, ||A_w row||^2 = ||proj row||^2;
    # a weighted answer's noise is sig_w (or the residual's level, when larger)
    gain_sq = jnp.max(jnp.sum(final["proj"] ** 2, axis=1))
    n_kept = n - jnp.sum(suspects, dtype=jnp.int32)
    dof = n_kept - d
    # the answers' noise, or the fit's own rounding when larger (float32 answers
    # decoded in float32)
    flat2 = jnp.where(kept[:, None], flat / c2[None, :], 0)
    floor2 = 2.0 * d**0.5 * jnp.finfo(acc).eps * jnp.sqrt(jnp.sum(flat2**2, axis=0))
    sig_f = jnp.maximum(sig_w / c2, floor2)
    sig = jnp.where(
        dof > 0,
        jnp.maximum(sig_f, jnp.sqrt(rss / jnp.maximum(dof, 1).astype(acc))),
        sig_f,
    )
    z = error_quantile(k * f)
    # ||A_w row|| sig in the answers' units, and the rounding every worker shares
    # (u_w times the kept answers' rms)
    rk = _pow2_scale(jnp.max(jnp.where(kept, row_rms, 0)))
    rms_kept = rk * jnp.sqrt(
        jnp.sum(jnp.where(kept, (row_rms / rk) ** 2, 0))
        / jnp.maximum(n_kept, 1).astype(acc)
    )
    err = z * jnp.hypot(jnp.sqrt(gain_sq) * jnp.max(sig * back), u_w * rms_kept)
    # what flushing numbers far below the largest answer to zero can cost, and
    # the spacing a value in the subnormal range is rounded to; the decoding
    # matrix in the answers' units is proj U^T diag(1 / size) / wmax, its rows at
    # most ||proj row|| max(1 / size) / wmax
    gain_ans = gain_sq * (jnp.max(jnp.where(kept, 1.0 / size, 0)) / wmax) ** 2
    err = err + rounding_floors(gain_ans, n_kept, scale_exp, acc)
    # back to the answers' units, exactly (a prediction in the subnormal range
    # rounded up)
    err = ldexp_exact(err, scale_exp, round_up=True, subnormal_in=False)
    eps = jnp.finfo(acc).eps
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta),
        enough=n >= d,
        solved=jnp.isfinite(cond) & (cond * eps < 1),
    )
    status = jnp.where(
        (status == int(Status.SUCCESS)) & ~decided, int(Status.UNDECIDABLE), status
    )
    # a value or predicted error beyond the dtype's range is not a decode
    status = jnp.where(
        (status == int(Status.SUCCESS)) & ~jnp.isfinite(err), int(Status.NONFINITE),
        status,
    ).astype(jnp.int32)  # fmt: skip
    r = finish(value, cond, n_kept, status, err.astype(acc))
    return RobustDecodeResult(*r, suspects)


_robust = jax.jit(
    _robust_impl,
    static_argnames=("num_coeffs", "acc", "wdt", "max_corrupted", "tau", "gamma"),
)


def robust_decode(
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

    Every set of at most two responders, and for sets of three to A a beam (the 16
    sets of a - 1 that lower the residual sum of squares the most, each extended
    by every worker), is excluded in turn (weighted least squares, rows scaled by
    1 / s_i, s_i = hypot(rms_f y_if, rms / 2), rms over the answers up to 1000
    times their median, or s_i = ``noise_sd[i]`` with sigma_w = 1 when given; the
    residuals and leverages without a set come from the fit of every answer by the
    deletion formulas, exact up to rounding; magnitudes pass through powers of two,
    so answers up to the float range, a flipped exponent bit included, are
    handled); a set
    is consistent when every kept
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
            needs M >= D + 2A, and A <= 10 (the search's program grows as A^4).
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
        ValueError: shapes that disagree, num_coeffs > M, max_corrupted < 0,
            above 10 or beyond the redundancy (M < D + 2A), false_alarm outside (0, 1),
            noise_scale <= 0, noise_sd not a floating array of shape [M].
        TypeError: non-floating y, non-boolean mask, non-integer max_corrupted.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(16), cj.chebyshev_points(3)
        >>> y = (alpha**2).astype(jnp.bfloat16)      # bf16 workers
        >>> y = y.at[5].add(0.5)                     # worker 5 is corrupted
        >>> r = cj.robust_decode(y, jnp.ones(16, bool), alpha, beta,
        ...                              num_coeffs=3, max_corrupted=2)
        >>> bool(r.ok), jnp.flatnonzero(r.suspects).tolist()
        (True, [5])

    References:
        R. D. Cook and S. Weisberg, Residuals and Influence in Regression, 1982
        (studentised residuals); L. R. Welch and E. R. Berlekamp, Error correction
        for algebraic block codes, US Patent 4,633,470, 1986 (the fewest errors
        that explain the received word).
    """
    fname = "robust_decode"
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
    if max_corrupted > MAX_CORRUPTED:
        raise ValueError(
            f"{fname}: max_corrupted (A) must be at most {MAX_CORRUPTED} (the search "
            f"compiles a program that grows as A^4), got {max_corrupted}"
        )
    false_alarm = check_number(
        fname, "false_alarm", false_alarm, low=0, high=1, open_low=True, open_high=True
    )
    if noise_scale is not None:
        noise_scale = check_number(
            fname, "noise_scale", noise_scale, low=0, open_low=True
        )
    if noise_sd is not None:
        noise_sd = jnp.asarray(noise_sd)
        if noise_sd.shape != (m,) or not jnp.issubdtype(noise_sd.dtype, jnp.floating):
            raise ValueError(
                f"{fname}: noise_sd must be a floating array of shape ({m},) (one "
                f"standard deviation per worker), got {noise_sd.dtype} "
                f"{noise_sd.shape}"
            )
    return robust_decode_unchecked(
        y, mask, alpha, beta, noise_sd, num_coeffs=d, acc=acc, wdt=wdt,
        max_corrupted=max_corrupted, false_alarm=false_alarm,
        noise_scale=noise_scale,
    )  # fmt: skip


def robust_decode_unchecked(
    y, mask, alpha, beta, noise_sd, *, num_coeffs, acc, wdt, max_corrupted,
    false_alarm, noise_scale,
):  # fmt: skip
    """:func:`robust_decode` after its checks (a RobustCode's: its points and
    settings checked when it was built, y, mask and noise_sd by its ``decode``):
    the points in any floating dtype (cast to ``acc`` here), ``wdt`` the workers'
    dtype, ``noise_scale`` None for the default gamma of K and D."""
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    if noise_scale is None:
        noise_scale = worker_noise_scale(beta.shape[0], num_coeffs)
    f = 1
    for s in y.shape[1:]:
        f *= s
    tau = outlier_threshold(y.shape[0] * f, float(false_alarm))
    return _robust(
        y, mask, alpha, beta, noise_sd, num_coeffs=num_coeffs, acc=acc, wdt=wdt,
        max_corrupted=max_corrupted, tau=tau, gamma=float(noise_scale),
    )  # fmt: skip
