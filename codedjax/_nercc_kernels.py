"""NeRCC: natural cubic smoothing splines as linear smoothers (the joint tuning of
the two smoothing weights is in ``codedjax._nercc_tuning``).

The smoothing spline through (t_i, y_i), i = 1..n, t increasing,

    g = argmin_{g in W^{2,2}} sum_i (y_i - g(t_i))^2 + lam * int g''(s)^2 ds,

is a natural cubic spline with knots at the t_i (Reinsch 1967). With h_i = t_{i+1} -
t_i, Q the n x (n-2) second-difference matrix and R the (n-2) x (n-2) tridiagonal
matrix of the Reinsch form, the second derivatives at the interior knots solve

    (R + lam Q^T Q) gamma = Q^T y,    and the fitted values are g = y - lam Q gamma

(gamma_1 = gamma_n = 0). For lam = 0 this is the natural interpolating spline, with
no special case. The matrix R + lam Q^T Q squares the conditioning of Q (entries ~
1/h), so the fitted values are formed instead from the orthogonal factor of
[L^T; sqrt(lam) Q] (R = L L^T), as the residual projector of a least-squares problem,
and gamma from R gamma = Q^T g; this is accurate to O(M^2 u) even for clustered knots
and large lam, where scipy's banded solve loses up to ~1e-10. Both g and gamma are
linear in y, so the whole fit-and-evaluate map is a matrix, built once per
(mask, lam) and applied to any payload by matmul.

Missing workers: the responding nodes are compacted to the front (by rank, with
pairwise comparisons on a fixed shape), the Reinsch system is built on them with
identity rows for the unused slots, and the columns are mapped back, so one compiled
program serves every mask and the result is exactly the fit through the responders
only (zero-weight knots are never used: with lam = 0 they would make the system
singular).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from jax.typing import ArrayLike

from ._argchecks import (
    check_decode_inputs,
    check_floating,
    check_return_ok,
    check_vector,
    concrete_finite,
    concrete_points,
    is_concrete,
)
from ._dtypes import cast_exact, encoder_points_ok, resolve_accum_dtype, unit_roundoff
from ._nodes import distinct_representatives, finite_selection
from ._result import (
    DecodeResult,
    apply_decoding,
    finish,
    predicted_error,
    status_of,
)

_HI = jax.lax.Precision.HIGHEST


# ----------------------------------------------------------------------------------
# kernel


def spline_matrix(nodes: jax.Array, sel: jax.Array, z: jax.Array, lam: jax.Array):
    """Natural cubic smoothing spline through the distinct selected nodes, at z.

    Several selected workers at one node are merged (the one of lowest index is
    taken, as in the Berrut decoder).

    Args:
        nodes: [M] points (may repeat). sel: bool [M]. z: [Q] evaluation points.
        lam: scalar smoothing weight >= 0 (scipy's ``lam``).

    Returns:
        (A [Q, M] with g(z) = A @ y and zero columns for unused workers, count int32
        number of distinct selected nodes). Outside the knot range g continues
        linearly (natural boundary conditions).
    """
    dt = nodes.dtype
    m = nodes.shape[0]
    rep, rank, count = distinct_representatives(nodes, sel)
    idx = jnp.arange(m, dtype=jnp.int32)
    valid = idx < count
    # compaction: position p < count holds the representative of rank p
    back = (idx[:, None] == rank[None, :]) & rep[None, :]  # [m (compact), m (worker)]
    t = jnp.sum(jnp.where(back, nodes[None, :], jnp.zeros_like(nodes)[None, :]), axis=1)
    last = jnp.sum(jnp.where(idx == count - 1, t, jnp.zeros_like(t)))
    t = jnp.where(valid, t, last + (idx - count + 1).astype(dt))  # padded, increasing
    h = t[1:] - t[:-1]  # [m-1]
    hv = idx[:-1] + 1 < count  # valid intervals
    h = jnp.where(hv, h, jnp.ones_like(h))
    ones = jnp.ones((), dt)

    # interior knots j = 1..m-2 <-> columns c = j-1 (static sparsity patterns)
    colv = idx[1:-1] + 1 < count
    hl, hr = h[:-1], h[1:]
    rr = np.arange(m)[:, None]
    cc = np.arange(m - 2)[None, :]
    q = (
        jnp.asarray(rr == cc, dt) * (ones / hl)[None, :]
        + jnp.asarray(rr == cc + 1, dt) * (-ones / hl - ones / hr)[None, :]
        + jnp.asarray(rr == cc + 2, dt) * (ones / hr)[None, :]
    )
    q = jnp.where(colv[None, :], q, jnp.zeros_like(q))  # [m, m-2]
    diag = jnp.where(colv, (hl + hr) / 3, ones)
    off = jnp.where(colv[:-1] & colv[1:], hr[:-1] / 6, jnp.zeros_like(hr[:-1]))
    off = jnp.concatenate([off, jnp.zeros((1,), dt)])  # off[c] couples c and c+1
    ci = np.arange(m - 2)
    r = (
        jnp.asarray(ci[:, None] == ci[None, :], dt) * diag[:, None]
        + jnp.asarray(ci[:, None] + 1 == ci[None, :], dt) * off[:, None]
        + jnp.asarray(ci[:, None] == ci[None, :] + 1, dt) * off[None, :]
    )
    if m > 2:
        # Fitted values g = S y with S = I - lam Q (R + lam Q^T Q)^{-1} Q^T. The
        # middle factor is a normal-equations matrix (it squares the conditioning
        # of Q, whose entries grow like 1/h), so S is formed from the orthogonal
        # factor of B = [L^T; sqrt(lam) Q], R = L L^T, instead:
        # S = I - U U^T with U the last M rows of the Q-factor of B (the residual
        # projector of a least-squares problem, accurate even for clustered
        # knots). The knot second derivatives follow from the fitted values
        # through the well-conditioned tridiagonal R: R gamma = Q^T g.
        low = jnp.linalg.cholesky(r)
        root = jnp.sqrt(jnp.maximum(lam, jnp.zeros_like(lam)))
        stacked = jnp.concatenate([low.T, root * q], axis=0)
        qb, _ = jnp.linalg.qr(stacked)
        u = qb[m - 2 :]  # [m, m-2]
        fit = jnp.eye(m, dtype=dt) - jnp.matmul(u, u.T, precision=_HI)
        qtf = jnp.matmul(q.T, fit, precision=_HI)
        g = cho_solve((low, True), qtf)  # gamma at interior knots, [m-2, m]
    else:
        fit = jnp.eye(m, dtype=dt)  # two knots: the straight line through them
        g = jnp.zeros((0, m), dt)
    zero = jnp.zeros((1, m), dt)
    gam = jnp.concatenate([zero, g, zero], axis=0)  # [m, m], rows beyond count zero

    # evaluation: rows picked by one-hot selectors (exact: a single 1 per row)
    n1 = jnp.clip(count - 1, 1, m - 1)  # index of the last knot (>= 1)
    i = jnp.sum(t[None, :] <= z[:, None], axis=1, dtype=jnp.int32) - 1
    i = jnp.clip(i, 0, n1 - 1)
    pick = jnp.concatenate(
        [(idx[None, :] == i[:, None]), (idx[None, :] == i[:, None] + 1)], axis=0
    ).astype(dt)
    ends = jnp.stack([idx == 0, idx == 1, idx == n1 - 1, idx == n1]).astype(dt)
    sel_all = jnp.concatenate([pick, ends], axis=0)  # [2Q + 4, m]
    both = jnp.matmul(
        sel_all, jnp.concatenate([fit, gam, t[:, None]], axis=1), precision=_HI
    )
    nq = z.shape[0]
    f_rows, g_rows, t_rows = both[:, :m], both[:, m : 2 * m], both[:, 2 * m]
    fit_i, fit_i1 = f_rows[:nq], f_rows[nq : 2 * nq]
    gam_i, gam_i1 = g_rows[:nq], g_rows[nq : 2 * nq]
    ti, ti1 = t_rows[:nq], t_rows[nq : 2 * nq]
    t0, t1_, tb, tn = (t_rows[2 * nq + k] for k in range(4))
    f0, f1, fb, fn = (f_rows[2 * nq + k] for k in range(4))
    g1, gb = g_rows[2 * nq + 1], g_rows[2 * nq + 2]
    aa = (z - ti)[:, None]
    bb = (ti1 - z)[:, None]
    hh = (ti1 - ti)[:, None]
    inside = (aa * fit_i1 + bb * fit_i) / hh - aa * bb / 6 * (
        (1 + aa / hh) * gam_i1 + (1 + bb / hh) * gam_i
    )
    h0, hn = t1_ - t0, tn - tb
    d_left = (f1 - f0) / h0 - h0 * g1 / 6
    d_right = (fn - fb) / hn + hn * gb / 6
    left = f0[None, :] + (z - t0)[:, None] * d_left[None, :]
    right = fn[None, :] + (z - tn)[:, None] * d_right[None, :]
    e = jnp.where((z < t0)[:, None], left, jnp.where((z > tn)[:, None], right, inside))
    out = jnp.matmul(e, back.astype(dt), precision=_HI)  # columns back to workers
    out = jnp.where(count >= 2, out, jnp.zeros_like(out))
    return out, count


def check_smoothing(fname: str, smoothing: Any, acc) -> jax.Array:
    lam = jnp.asarray(smoothing)
    if lam.ndim != 0:
        raise ValueError(
            f"{fname}: smoothing must be a scalar, got shape {tuple(lam.shape)}"
        )
    if not (
        jnp.issubdtype(lam.dtype, jnp.floating)
        or jnp.issubdtype(lam.dtype, jnp.integer)
    ):
        raise TypeError(f"{fname}: smoothing must be a real number, got {lam.dtype}")
    if is_concrete(lam):
        v = float(lam)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(
                f"{fname}: smoothing must be a finite number >= 0, got {v}"
            )
    return lam.astype(acc)


# ----------------------------------------------------------------------------------
# public API


def nercc_encode(
    x: ArrayLike,
    beta: ArrayLike,
    alpha: ArrayLike,
    *,
    smoothing: Any = 0.0,
    return_ok: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""NeRCC encoding: the smoothing spline through (beta_k, X_k), sampled at alpha.

    .. math::
        u = \arg\min_{u \in W^{2,2}} \sum_k \lVert u(\beta_k) - X_k \rVert^2
            + \lambda_e \int u''(s)^2\,ds, \qquad \tilde X_i = u(\alpha_i),

    per coordinate of X, i.e. ``scipy.interpolate.make_smoothing_spline(beta, X,
    lam=smoothing)``; ``smoothing = 0`` gives the natural cubic interpolating spline.
    Outside the range of beta the spline continues linearly. Computed as one [M, K]
    matrix (Reinsch form) applied by matmul, in the accumulation dtype.

    Under ``jit`` the points and the smoothing cannot be checked (nothing traced
    can raise); there, invalid ones (repeated or non-finite data points,
    non-finite worker points, a negative or non-finite smoothing) make every coded
    input NaN, so every worker's answer is NaN and a decoder reports ``ok`` False
    (``TOO_FEW_RESPONSES``) instead of a silently wrong value; ``return_ok=True``
    also returns their validity as data.

    Args:
        x: [K, ...] inputs (K >= 2), any floating dtype.
        beta: [K] distinct finite data points (any order).
        alpha: [M] finite worker points.
        smoothing: lambda_e >= 0, scipy's ``lam`` (a Python float or a scalar
            array; may be traced).
        return_ok: also return ``ok``, a bool scalar: False when the (traced)
            points or smoothing are invalid, and then every coded row is NaN.

    Returns:
        [M, ...] coded inputs in the accumulation dtype of ``x``; with
        ``return_ok``, the pair (coded, ok).

    Raises:
        ValueError: K < 2, shapes that disagree, duplicate or non-finite concrete
            points, negative or non-finite concrete smoothing.
        TypeError: non-floating inputs, a ``return_ok`` that is not a bool.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> beta, alpha = cj.bacc_points(4, 7)
        >>> u = cj.nercc_encode(3 * beta[:, None] + 1, beta, alpha, smoothing=0.1)
        >>> bool(jnp.allclose(u[:, 0], 3 * alpha + 1, atol=1e-5))   # lines are kept
        True

    References:
        P. Moradi and M. A. Maddah-Ali, NeRCC: nested-regression coded
        computing for resilient distributed prediction serving systems,
        arXiv:2402.04377; C. H. Reinsch, Smoothing by spline functions, Numer. Math.
        10, 1967.
    """
    fname = "nercc_encode"
    want_ok = check_return_ok(fname, return_ok)
    x = check_floating(fname, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
    if x.shape[0] < 2:
        raise ValueError(
            f"{fname}: x must hold at least K = 2 inputs (a spline needs 2 knots), "
            f"got K = {x.shape[0]}"
        )
    beta = check_vector(fname, "beta", beta, length=x.shape[0])
    alpha = check_vector(fname, "alpha", alpha)
    concrete_points(fname, "beta", beta)
    concrete_finite(fname, "alpha", alpha)
    acc = resolve_accum_dtype(fname, x.dtype)
    lam = check_smoothing(fname, smoothing, acc)
    coded = nercc_encode_unchecked(x, beta, alpha, lam, acc)
    if want_ok:
        return coded, _encoding_ok(beta.astype(acc), alpha.astype(acc), lam)
    return coded


def nercc_encode_unchecked(x, beta, alpha, smoothing, acc):
    """:func:`nercc_encode` after its checks (a code's: its points and smoothing
    checked when it was built, x by its ``encode``), in the accumulation dtype
    ``acc``."""
    lam = jnp.asarray(smoothing).astype(acc)
    e = spline_encoding_matrix(beta.astype(acc), alpha.astype(acc), lam)  # [M, K]
    return _matmul_rows(e, x.astype(acc))


@jax.jit
def _matmul_rows(a, x):
    """[R, K] @ x [K, ...] -> [R, ...] (non-finite inputs propagate)."""
    return apply_decoding(a, x, x.dtype, zero_nonfinite=False)


def nercc_encoding_matrix(
    beta: ArrayLike,
    alpha: ArrayLike,
    *,
    smoothing: Any = 0.0,
    accum_dtype: Any = jnp.float32,
    return_ok: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """The NeRCC encoding matrix E [M, K]: ``nercc_encode(x) == E @ x``.

    As :func:`nercc_encode`, invalid traced points or smoothing give an all-NaN
    matrix, and ``return_ok=True`` also returns their validity.

    Args:
        beta: [K] distinct data points (K >= 2). alpha: [M] worker points.
        smoothing: lambda_e >= 0. accum_dtype: float32 (default) or float64.
        return_ok: also return ``ok``, a bool scalar (see :func:`nercc_encode`).

    Returns:
        [M, K] in ``accum_dtype``; with ``return_ok``, the pair (E, ok).

    Raises:
        ValueError, TypeError: as :func:`nercc_encode`.

    Examples:
        >>> import codedjax as cj
        >>> beta, alpha = cj.bacc_points(4, 6)
        >>> cj.nercc_encoding_matrix(beta, alpha).shape
        (6, 4)
    """
    fname = "nercc_encoding_matrix"
    want_ok = check_return_ok(fname, return_ok)
    acc = resolve_accum_dtype(fname, jnp.float32, accum_dtype)
    beta = check_vector(fname, "beta", beta)
    if beta.shape[0] < 2:
        raise ValueError(
            f"{fname}: beta must hold at least 2 points, got {beta.shape[0]}"
        )
    alpha = check_vector(fname, "alpha", alpha)
    concrete_points(fname, "beta", beta)
    concrete_finite(fname, "alpha", alpha)
    lam = check_smoothing(fname, smoothing, acc)
    e = spline_encoding_matrix(beta.astype(acc), alpha.astype(acc), lam)
    if want_ok:
        return e, _encoding_ok(beta.astype(acc), alpha.astype(acc), lam)
    return e


@jax.jit
def _encoding_ok(beta, alpha, lam):
    """The traced validity of an encoding's points and smoothing."""
    return encoder_points_ok(beta, alpha) & (lam >= 0) & jnp.isfinite(lam)


@jax.jit
def spline_encoding_matrix(beta, alpha, lam):
    """E [M, K]; all NaN when the points or the smoothing are invalid (traced)."""
    e = spline_matrix(beta, jnp.ones(beta.shape, bool), alpha, lam)[0]
    return jnp.where(_encoding_ok(beta, alpha, lam), e, jnp.full_like(e, jnp.nan))


def _check_decode(fname, y, mask, alpha, beta, smoothing, accum_dtype):
    # a spline needs 2 knots
    y, mask, alpha, beta = check_decode_inputs(
        fname, y, mask, alpha, beta, min_workers=2
    )
    concrete_finite(fname, "alpha", alpha)
    concrete_finite(fname, "beta", beta)
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    lam = check_smoothing(fname, smoothing, acc)
    return y, mask, alpha.astype(acc), beta.astype(acc), lam, acc


def _count_distinct_concrete(y, mask, alpha) -> int | None:
    if not (is_concrete(y) and is_concrete(mask) and is_concrete(alpha)):
        return None
    yy = np.asarray(y)
    if yy.dtype not in (np.float32, np.float64):
        yy = yy.astype(np.float32)  # bf16/f16: exact, keeps NaN/Inf
    fin = np.all(np.isfinite(yy.reshape(yy.shape[0], -1)), axis=1)
    a = np.asarray(alpha, dtype=np.float64)
    sel = np.asarray(mask) & fin & np.isfinite(a)
    return int(np.unique(a[sel]).size)


def nercc_decode(
    y: ArrayLike,
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    *,
    smoothing: Any = 0.0,
    accum_dtype: Any = None,
) -> DecodeResult:
    r"""NeRCC decoding: the smoothing spline through the responses, evaluated at beta.

    .. math::
        g = \arg\min_{g \in W^{2,2}} \sum_{i \in S} \lVert g(\alpha_i) - y_i
            \rVert^2 + \lambda_d \int g''(s)^2\,ds, \qquad \hat f(X_k) = g(\beta_k),

    i.e. ``scipy.interpolate.make_smoothing_spline(alpha_S, y_S, lam=smoothing)``
    over the sorted distinct responding nodes (several responders at one node are
    merged: the one of lowest worker index is taken); ``smoothing = 0`` is the natural
    cubic interpolating spline. Outside the range of the responding nodes the spline
    continues linearly. A response holding NaN or Inf is treated as missing.

    Args:
        y: [M, ...] responses, any floating dtype.
        mask: bool [M] responders.
        alpha: [M] finite worker points. beta: [K] finite data points.
        smoothing: lambda_d >= 0, scipy's ``lam`` (Python float or scalar array;
            may be traced).
        accum_dtype: float32 or float64 (default: float32 for bf16/f16/f32,
            float64 for float64).

    Returns:
        DecodeResult: ``value`` [K, ...] in the accumulation dtype (zeros when not
        ``ok``); ``ok`` False with fewer than 2 distinct finite responding nodes
        (possible only under jit), a negative traced smoothing, or a non-finite
        result; ``cond`` the infinity norm of the decoding matrix (inf when not
        ``ok``); ``num_used`` the number of distinct responding nodes.

    Raises:
        ValueError: fewer than 2 distinct finite responding nodes in a concrete
            mask, negative or non-finite concrete smoothing, shapes that disagree,
            non-finite concrete points.
        TypeError: non-floating y, non-boolean mask.

    Examples:
        >>> import jax, codedjax as cj
        >>> beta, alpha = cj.bacc_points(4, 20)
        >>> mask = cj.sample_masks(jax.random.key(0), num_workers=20, num_responses=15)
        >>> r = cj.nercc_decode(alpha[:, None] ** 2, mask, alpha, beta, smoothing=0.0)
        >>> bool(r.ok), bool(jax.numpy.allclose(r.value[:, 0], beta ** 2, atol=1e-2))
        (True, True)

    References:
        P. Moradi and M. A. Maddah-Ali, NeRCC, arXiv:2402.04377; P. Moradi,
        B. Tahmasebi and M. A. Maddah-Ali, LeTCC, arXiv:2406.00300; C. H. Reinsch,
        Numer. Math. 10, 1967.
    """
    fname = "nercc_decode"
    y, mask, alpha, beta, lam, acc = _check_decode(
        fname, y, mask, alpha, beta, smoothing, accum_dtype
    )
    n = _count_distinct_concrete(y, mask, alpha)
    if n is not None and n < 2:
        raise ValueError(
            f"{fname}: mask must select at least 2 distinct worker points with "
            f"finite responses (a spline needs 2 knots), got {n}"
        )
    return nercc_decode_unchecked(y, mask, alpha, beta, lam, acc)


def nercc_decode_unchecked(y, mask, alpha, beta, smoothing, acc):
    """:func:`nercc_decode` after its checks (a code's: its points and smoothing
    checked when it was built, y and mask by its ``decode``), in the accumulation
    dtype ``acc``. Fewer than 2 distinct responding nodes give ``ok`` False."""
    alpha, beta = alpha.astype(acc), beta.astype(acc)
    lam = jnp.asarray(smoothing).astype(acc)
    # cast first (exact, subnormal answers included, keeps NaN/Inf), so one
    # program serves every worker dtype;
    # the decoding matrix is built without seeing the payload shape
    worker = y.dtype
    y = cast_exact(y, acc)
    sel = finite_selection(y, mask)
    return _decode_finish(_decoding_matrix(sel, alpha, beta, lam), y, sel, worker)


@functools.partial(jax.jit, static_argnames=("worker",))
def _decode_finish(res, y, sel, worker):
    value = apply_decoding(res.value, y, y.dtype, rows=sel)
    flat = y.reshape(y.shape[0], math.prod(y.shape[1:]))
    error = predicted_error(res.value, flat, sel, worker)
    out = finish(value, res.cond, res.num_used, res.status, error)
    cond = jnp.where(out.ok, out.cond, jnp.asarray(jnp.inf, y.dtype))
    return out._replace(cond=cond)


def nercc_decoding_matrix(
    mask: ArrayLike,
    alpha: ArrayLike,
    beta: ArrayLike,
    *,
    smoothing: Any = 0.0,
    accum_dtype: Any = jnp.float32,
) -> DecodeResult:
    """The NeRCC decoding matrix A [K, M] for one mask (zero columns for unused).

    Args:
        mask: bool [M]. alpha: [M]. beta: [K]. smoothing: lambda_d >= 0.
        accum_dtype: float32 (default) or float64.

    Returns:
        DecodeResult with ``value`` = A [K, M]; ``ok``, ``cond``, ``num_used`` as in
        :func:`nercc_decode` (no ValueError for too few responders: ``ok`` False).

    Raises:
        ValueError, TypeError: static argument errors as :func:`nercc_decode`.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> beta, alpha = cj.bacc_points(3, 8)
        >>> cj.nercc_decoding_matrix(jnp.ones(8, bool), alpha, beta).value.shape
        (3, 8)
    """
    fname = "nercc_decoding_matrix"
    alpha = check_vector(fname, "alpha", alpha)
    acc = resolve_accum_dtype(fname, jnp.float32, accum_dtype)
    y = jnp.zeros((alpha.shape[0],), acc)
    _, mask, alpha, beta, lam, acc = _check_decode(
        fname, y, mask, alpha, beta, smoothing, accum_dtype
    )
    return nercc_decoding_matrix_unchecked(mask, alpha, beta, lam, acc)


def nercc_decoding_matrix_unchecked(mask, alpha, beta, smoothing, acc):
    """:func:`nercc_decoding_matrix` of a checked mask [M] (a code's), in the
    accumulation dtype ``acc``."""
    lam = jnp.asarray(smoothing).astype(acc)
    return _decoding_matrix(mask, alpha.astype(acc), beta.astype(acc), lam)


@jax.jit
def _decoding_matrix(mask, alpha, beta, lam):
    a, count = spline_matrix(alpha, mask, beta, lam)
    points_ok = (
        (lam >= 0)
        & jnp.isfinite(lam)
        & jnp.all(jnp.isfinite(alpha))
        & jnp.all(jnp.isfinite(beta))
    )
    status = status_of(
        points_ok=points_ok, enough=count >= 2, solved=jnp.all(jnp.isfinite(a))
    )
    gain = jnp.max(jnp.sum(jnp.abs(a), axis=1), initial=0.0)
    cond = jnp.where(status == 0, gain, jnp.asarray(jnp.inf, a.dtype))
    # error per unit of max |y|, for responses in the accumulation dtype
    return finish(a, cond, count, status, unit_roundoff(a.dtype) * gain)
