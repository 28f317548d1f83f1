"""Decoders that degrade gracefully near the recovery threshold.

* :func:`smooth_chebyshev_decode`: the posterior mean of the Chebyshev coefficients
  under a Gaussian prior whose variances decay geometrically with the degree
  (least squares regularised toward smooth coefficients), with the decay and the
  scale chosen per mask and per payload by maximising the marginal likelihood of the
  answers (empirical Bayes). It returns a usable approximation from any number of
  answers, and its posterior variance is its predicted error.
* :func:`graceful_decode`: ChebyLS where its predicted error is small, the smooth
  decoder where ChebyLS's predicted error exceeds twice the smooth decoder's.

Both run on one mask (vmap them for many) from one SVD per prior decay; the maths is
in ``docs/decoding.md``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_chebyshev_decode, check_worker_dtype
from ._chebyshev import equilibrated_vandermondes
from ._dtypes import finite_rows, ldexp_exact, max_exponent, points_valid
from ._errors import error_quantile, noise_level, rounding_floors
from ._result import DecodeResult, finish, status_of

# Prior decays rho of the Chebyshev coefficients (c_j ~ N(0, s^2 rho^(2j))) and
# prior scales s / rms(y) searched by the marginal likelihood.
PRIOR_DECAYS = (1.0, 0.9, 0.8, 0.7)
PRIOR_SCALES = tuple(float(v) for v in np.logspace(-3, 2, 41))
# graceful_decode keeps ChebyLS unless its predicted error exceeds this many times
# the smooth decoder's (ChebyLS's prediction rests on the rounding model alone, the
# smooth decoder's on its prior as well).
PREFER_LS = 2.0
# the SVDs' own rounding, in units of the accumulation dtype's u, as a noise level of
# the answers: float32 answers decoded in float32 at N = D (K = 8, M = 40, D = 22)
# come out up to 2.6 times the prediction at u_acc alone (95th percentile), within
# it at 4 u_acc (docs/decoding.md); answers from coarser workers (bf16) are not
# affected
SOLVE_ROUNDING = 4.0


def check_smooth_args(
    fname, y, mask, alpha, beta, num_coeffs, worker_dtype, accum_dtype
):
    y, mask, alpha, beta, d, acc = check_chebyshev_decode(
        fname, y, mask, alpha, beta, num_coeffs, accum_dtype
    )
    wdt = check_worker_dtype(fname, y.dtype if worker_dtype is None else worker_dtype)
    return y, mask, alpha, beta, d, acc, wdt


def _svd_fits(y, sel, alpha, beta, d, acc, wdt):
    """Both fits of one mask. Returns a dict of the LS and smooth quantities."""
    m = alpha.shape[0]
    t, tb = equilibrated_vandermondes(alpha, beta, d, acc)
    flat = y.reshape(m, -1)
    rows = sel[:, None] & jnp.isfinite(flat)
    # everything below is homogeneous of degree 1 in each column of y (the
    # marginal likelihood too: its terms are ratios within a column): it runs on
    # column f divided by 2^e_f, its largest answer's power of two (exact, from the
    # bits: subnormal answers included), so that squaring answers near the top of
    # the range (1e30 in float32) cannot overflow and small ones cannot underflow
    # or be flushed; the values and errors are scaled back at the end. An all-zero
    # column takes the largest column's exponent (its floors then stay negligible)
    none = int(jnp.iinfo(jnp.int32).min)  # (the exponent of a column of zeros)
    ef = max_exponent(flat, rows, axis=0, empty=none)  # [F]
    live = ef != none
    top = jnp.max(ef)
    top = jnp.where(top != none, top, 0)
    ef = jnp.where(live, ef, top)
    flat = ldexp_exact(flat, -ef[None, :], acc, subnormal_out=False)
    flat = jnp.where(rows, flat, jnp.zeros((), acc))
    n = jnp.sum(sel, dtype=jnp.int32)
    eps = jnp.finfo(acc).eps
    # a noise level whose square and inverse square stay finite (an all-zero
    # payload has no rounding at all)
    tiny = jnp.sqrt(jnp.asarray(float(jnp.finfo(acc).tiny), acc))

    rho = jnp.asarray(PRIOR_DECAYS, acc)
    wts = rho[:, None] ** jnp.arange(d, dtype=acc)[None, :]  # [R, D]
    ts = jnp.where(sel[:, None], t, jnp.zeros((), acc))
    w_mats = ts[None, :, :] * wts[:, None, :]  # [R, M, D]
    # one SVD per decay (lax.map): a LAPACK call with a batch axis can deadlock
    # XLA:CPU's thread pool when several threads decode at once (README, Concurrency)
    u, s, vh = jax.lax.map(
        lambda w: jnp.linalg.svd(w, full_matrices=False), w_mats
    )  # [R,M,D] [R,D] [R,D,D]
    keep = s > s[:, :1] * (d * eps)  # numerically non-zero singular values
    zc = jnp.einsum("rmd,mf->rdf", u, flat)  # [R, D, F]
    zc = jnp.where(keep[:, :, None], zc, jnp.zeros((), acc))

    # ---- least squares (rho = 1, the first decay): ChebyLS through the SVD
    s0, keep0, u0, v0 = s[0], keep[0], u[0], jnp.swapaxes(vh[0], 0, 1)
    sinv0 = jnp.where(keep0, 1.0 / jnp.where(keep0, s0, 1.0), 0.0)
    p0 = tb @ v0  # [K, D]
    value_ls = p0 @ (sinv0[:, None] * zc[0])  # [K, F]
    gain_sq_ls = jnp.max(jnp.sum((p0 * sinv0[None, :]) ** 2, axis=1))
    fitted = u0 @ zc[0]  # [M, F], zero off the selected rows
    resid = jnp.where(sel[:, None], flat - fitted, jnp.zeros((), acc))
    rss = jnp.sum(resid * resid, axis=0)  # [F]
    dof = n - d
    sigma = noise_level(  # [F]
        flat, sel, wdt, acc, rss, dof, solve_factor=SOLVE_ROUNDING, scale_exp=ef
    )
    sigma = jnp.maximum(sigma, tiny)
    full_rank = jnp.all(keep0) & (n >= d)
    cond = jnp.where(full_rank, s0[0] / s0[-1], jnp.asarray(jnp.inf, acc))

    # ---- smooth decoder: empirical Bayes over (decay, scale)
    rms = jnp.sqrt(jnp.sum(flat * flat, axis=0) / jnp.maximum(n, 1).astype(acc))
    rms = jnp.maximum(rms, sigma)
    scales = jnp.asarray(PRIOR_SCALES, acc)
    sf = scales[:, None] * rms[None, :]  # [T, F]
    s2 = jnp.where(keep, s, 0.0) ** 2  # [R, D]
    sig2 = (sigma**2)[None, None, None, :]
    v = sf[None, :, None, :] ** 2 * s2[:, None, :, None] + sig2  # [R, T, D, F]
    z2 = zc[:, None, :, :] ** 2  # [R, 1, D, F]
    # the evidence up to terms that are the same for every (decay, scale): the sum
    # of z^2 / sigma^2 (about 1e15 for float32 answers, whose rounding in float32
    # would swamp the differences between candidates) and of log sigma^2 are left
    # out
    quad = -jnp.sum(z2 / v, axis=(2, 3))
    logdet = jnp.sum(jnp.log(v / sig2), axis=(2, 3))
    loglik = 0.5 * (quad - logdet)  # [R, T]
    best = jnp.argmax(loglik.reshape(-1))
    r_i, t_i = best // scales.shape[0], best % scales.shape[0]
    vb = v[r_i, t_i]  # [D, F]
    shrink = sf[t_i][None, :] ** 2 * jnp.where(keep[r_i], s[r_i], 0.0)[:, None] / vb
    pb = (tb * wts[r_i][None, :]) @ jnp.swapaxes(vh[r_i], 0, 1)  # [K, D]
    value_sm = pb @ (shrink * zc[r_i])  # [K, F]
    post_var = (sf[t_i][None, :] ** 2 * sigma[None, :] ** 2) / vb  # [D, F]
    var_k = (pb**2) @ post_var  # [K, F]
    # the smooth decoder's noise gain: A_f = P_b diag(shrink_f) U^T
    gain_sq_sm = jnp.max((pb**2) @ (shrink**2))
    return dict(
        scale_exp=ef,
        top_exp=top,
        live=live,
        gain_sq_sm=gain_sq_sm,
        flat=flat,
        n=n,
        value_ls=value_ls,
        gain_sq_ls=gain_sq_ls,
        sigma=sigma,
        cond=cond,
        full_rank=full_rank,
        value_sm=value_sm,
        var_sm=var_k,
        decay=rho[r_i],
        prior_scale=scales[t_i],
    )


def _errors(fits, k, f, acc):
    """Both predicted errors in units of 2^E, E = ``fits["top_exp"]`` the largest
    column exponent (``fits`` is in units of each column's own 2^e_f), each with
    the absolute floors (:func:`codedjax._errors.rounding_floors`: what flushing
    subnormal numbers in the products can cost, and the spacing a value in the
    subnormal range is rounded to)."""
    z = error_quantile(k * f)
    sigma, n, top = fits["sigma"], fits["n"], fits["top_exp"]
    # an all-zero column decodes to exact zeros: its noise level is the floor
    # that keeps the algebra finite, not a rounding error
    to_top = jnp.where(fits["live"], fits["scale_exp"] - top, -(2**20))  # [F]
    # (a column far below the largest one adds nothing: flushed, not rounded)
    top_units = functools.partial(ldexp_exact, subnormal_in=False, subnormal_out=False)
    sig_top = top_units(sigma, to_top)  # [F] in units of 2^E (exact)
    var_top = top_units(fits["var_sm"] + sigma[None, :] ** 2, 2 * to_top[None, :])
    err_ls = z * jnp.sqrt(fits["gain_sq_ls"] + 1.0) * jnp.max(sig_top)
    err_sm = z * jnp.sqrt(jnp.max(var_top))
    err_ls = err_ls + rounding_floors(fits["gain_sq_ls"], n, top, acc)
    # (answers flushed to zero are lost to the smooth decoder as much as to the
    # least-squares one, whichever shrinks the rest more)
    gain_sm = jnp.maximum(fits["gain_sq_sm"], fits["gain_sq_ls"])
    err_sm = err_sm + rounding_floors(gain_sm, n, top, acc)
    return err_ls, err_sm


def _finish(y, fits, value, cond, n, status, err):
    """The result in the answers' units: each column of ``value`` times its 2^e_f,
    ``err`` (in units of 2^E) times 2^E, exactly (a prediction in the subnormal
    range rounded up)."""
    value = ldexp_exact(value, fits["scale_exp"][None, :], subnormal_in=False)
    err = ldexp_exact(err, fits["top_exp"], round_up=True, subnormal_in=False)
    value = value.reshape(value.shape[:1] + y.shape[1:])
    return finish(value, cond, n, status, err.astype(value.dtype))


def _smooth_impl(y, mask, alpha, beta, num_coeffs, acc, wdt):
    sel = mask & finite_rows(y)
    fits = _svd_fits(y, sel, alpha, beta, num_coeffs, acc, wdt)
    k, f = beta.shape[0], fits["flat"].shape[1]
    _, err_sm = _errors(fits, k, f, acc)
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta), enough=fits["n"] >= 1
    )
    return _finish(y, fits, fits["value_sm"], fits["cond"], fits["n"], status, err_sm)


def _graceful_impl(y, mask, alpha, beta, num_coeffs, acc, wdt):
    sel = mask & finite_rows(y)
    fits = _svd_fits(y, sel, alpha, beta, num_coeffs, acc, wdt)
    k, f = beta.shape[0], fits["flat"].shape[1]
    err_ls, err_sm = _errors(fits, k, f, acc)
    ls_ok = fits["full_rank"] & (fits["cond"] * jnp.finfo(acc).eps < 1)
    use_ls = ls_ok & (err_ls <= PREFER_LS * err_sm)
    value = jnp.where(use_ls, fits["value_ls"], fits["value_sm"])
    err = jnp.where(use_ls, err_ls, err_sm)
    status = status_of(
        points_ok=points_valid(alpha) & points_valid(beta), enough=fits["n"] >= 1
    )
    return _finish(y, fits, value, fits["cond"], fits["n"], status, err)


_smooth = jax.jit(_smooth_impl, static_argnames=("num_coeffs", "acc", "wdt"))
_graceful = jax.jit(_graceful_impl, static_argnames=("num_coeffs", "acc", "wdt"))


def smooth_chebyshev_decode(
    y: ArrayLike,
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    num_coeffs: int,
    *,
    worker_dtype: Any = None,
    accum_dtype: Any = None,
) -> DecodeResult:
    r"""Chebyshev least squares regularised toward smooth coefficients, empirically.

    With the equilibrated Chebyshev-Vandermonde rows T_S of the responders and the
    prior c_j ~ N(0, s^2 rho^{2j}) on the D coefficients, the answers are
    y_S ~ N(0, s^2 T_S W^2 T_S^T + sigma^2 I) (W = diag(rho^j), sigma the noise
    level of :func:`codedjax.chebyls_decode`'s predicted error). For each decay
    rho in (1, 0.9, 0.8, 0.7) one SVD T_S W = U diag(S) V^T gives the marginal
    likelihood on a grid of scales s (relative to the rms of each payload column) in
    closed form; the maximiser (rho, s) fixes the posterior mean

    .. math::
        \hat f(\beta) = T_\beta W V \,\mathrm{diag}\!\left(
            \frac{s^2 S_j}{s^2 S_j^2 + \sigma^2}\right) U^T y_S,

    and ``error`` is z sqrt(max_k posterior variance + sigma^2) with z as in the
    predicted error of every decoder (``docs/decoding.md``). Any number of answers
    N >= 1 decodes (an approximation below D); with many answers beyond D the
    prior stops mattering and the result tends to ChebyLS's.

    Args:
        y: [M, ...] worker responses (any floating dtype; NaN/Inf rows count as
            missing).
        mask: bool [M] responders.
        alpha: [M] worker points; beta: [K] data points.
        num_coeffs: D, the number of Chebyshev coefficients fitted (static).
        worker_dtype: the dtype the workers computed in (default ``y.dtype``; pass
            it when the answers were widened after the workers rounded them).
        accum_dtype: float32 or float64 (default: float32 for bf16/f16/f32
            responses, float64 for float64).

    Returns:
        DecodeResult: ``value`` [K, ...]; ``cond`` the condition number of the
        equilibrated rows (as ChebyLS's; inf below D); ``error`` the posterior
        prediction of the absolute error; ``status`` TOO_FEW_RESPONSES when no
        finite answer arrived.

    Raises:
        ValueError: shapes that disagree, num_coeffs > M, bad concrete points.
        TypeError: non-floating y or worker_dtype, non-boolean mask.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(12), cj.chebyshev_points(3)
        >>> r = cj.smooth_chebyshev_decode(alpha**2, jnp.ones(12, bool), alpha, beta,
        ...                                num_coeffs=3)
        >>> bool(r.ok), bool(jnp.allclose(r.value, beta**2, atol=1e-5))
        (True, True)

    References:
        C. E. Rasmussen and C. K. I. Williams, Gaussian Processes for Machine
        Learning, MIT Press 2006, ch. 2 and 5 (posterior mean, marginal
        likelihood); D. J. C. MacKay, Bayesian interpolation, Neural Computation
        4(3), 1992.
    """
    fname = "smooth_chebyshev_decode"
    y, mask, alpha, beta, d, acc, wdt = check_smooth_args(
        fname, y, mask, alpha, beta, num_coeffs, worker_dtype, accum_dtype
    )
    return _smooth(y, mask, alpha, beta, num_coeffs=d, acc=acc, wdt=wdt)


def graceful_decode(
    y: ArrayLike,
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    num_coeffs: int,
    *,
    worker_dtype: Any = None,
    accum_dtype: Any = None,
) -> DecodeResult:
    r"""ChebyLS where it is predicted accurate, the smooth decoder where it is not.

    Both decoders run on the same answers from the same SVDs
    (:func:`smooth_chebyshev_decode`; the decay rho = 1 factorisation is ChebyLS's).
    With e_LS and e_sm their predicted errors, the result is ChebyLS's when it is
    well posed (N >= D, cond < 1/eps) and e_LS <= 2 e_sm, else the smooth
    decoder's; ``error`` is the chosen decoder's prediction. Near the threshold, where
    a few clustered stragglers make ChebyLS's noise gain explode, the prior takes
    over; with a few answers beyond D the two agree and ChebyLS is kept.

    Args:
        y, mask, alpha, beta, num_coeffs, worker_dtype, accum_dtype: as
            :func:`smooth_chebyshev_decode`.

    Returns:
        DecodeResult as :func:`smooth_chebyshev_decode` (``cond`` is ChebyLS's).

    Raises:
        ValueError, TypeError: as :func:`smooth_chebyshev_decode`.

    Examples:
        >>> import jax, jax.numpy as jnp, codedjax as cj
        >>> alpha, beta = cj.chebyshev_points(20), cj.chebyshev_points(3)
        >>> mask = cj.sample_masks(jax.random.key(0), num_workers=20, num_responses=9)
        >>> r = cj.graceful_decode(alpha**3, mask, alpha, beta, num_coeffs=4)
        >>> bool(r.ok), bool(jnp.allclose(r.value, beta**3, atol=1e-5))
        (True, True)
    """
    fname = "graceful_decode"
    y, mask, alpha, beta, d, acc, wdt = check_smooth_args(
        fname, y, mask, alpha, beta, num_coeffs, worker_dtype, accum_dtype
    )
    return graceful_decode_unchecked(y, mask, alpha, beta, d, acc, wdt)


def graceful_decode_unchecked(y, mask, alpha, beta, num_coeffs, acc, wdt):
    """:func:`graceful_decode` after its checks (a GracefulCode's: its points and D
    checked when it was built, y and mask by its ``decode``): the points in any
    floating dtype (cast to ``acc`` here), ``wdt`` the workers' dtype."""
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    return _graceful(y, mask, alpha, beta, num_coeffs=num_coeffs, acc=acc, wdt=wdt)
