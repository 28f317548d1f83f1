"""One-mask least squares on a dense basis: every least-squares decoder's one mask.

A basis B [M, D] (real or complex) and the matrix E [K, D] that evaluates the
fitted coefficients at the outputs: the equilibrated Chebyshev-Vandermonde rows and
T_beta of the Chebyshev decoders (``codedjax._lagrange_lsq.ls_decoding_matrix``),
complex monomials at roots of unity (the circle codes), a Gaussian encoding matrix
(the random code). Rows of missing workers are zeroed (the mask formulation), so
one compiled program serves every straggler pattern; the decoding matrix
A = E B_S^+ [K, M] has zero columns for unused workers.

:func:`dense_ls_matrix` takes, for one mask, the route of the batched Chebyshev
kernel (``codedjax._lagrange_lsq.ne_decoding_matrices``) with its tiers:

* float32 (complex64): corrected semi-normal equations (:func:`_seminormal`,
  Cholesky of H = B_S^H B_S, two refinement steps through the rows), with ``cond``
  a certified estimate; a mask whose certified upper bound on cond breaks
  cond^2 eps <= 1/32 (cond <= 512), or whose factorisation meets a non-positive
  pivot or a non-finite value, goes to Householder QR (:func:`_householder`, the
  same certified estimate) instead, behind a ``lax.cond`` (the QR route costs
  nothing where it is not taken);
* float64 (the reference precision), or ``exact_cond=True``: Householder QR and
  the exact 2-norm condition number (an SVD of R), as before the cheap route.

With a payload ``y`` it also returns the residual sum of squares of the fit of
each column, in the form of the route taken (semi-normal with two refinement
steps, or (I - Q Q^H) y), for the predicted error.

Batching: :func:`dense_ls_matrices` loops over the masks (``lax.map``) around every
LAPACK call, so no LAPACK call has a batch axis (the CPU deadlock described in
``codedjax._threads`` and README "Concurrency" cannot occur).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._batched_linalg import HI, NE_COND_SQ_EPS, SQUARINGS, after, lambda_max_bounds


class DenseLs(NamedTuple):
    """What the dense kernel returns for one mask (or B masks, leading axis)."""

    a: jax.Array  # [K, M] decoding matrix (real or complex), zero unused columns
    ok: jax.Array  # bool: enough rows, finite, cond < 1/eps
    cond: jax.Array  # real: 2-norm condition number of the selected rows (inf if not)
    num_used: jax.Array  # int32: selected rows
    rss: jax.Array | None  # real [F]: the payload's residual sum of squares (or None)


# Refinement steps of the one-mask semi-normal route's decoding matrix. Two: one
# left the decoded values of a mask at cond 374 (M = 40, N = 30, D = 22) 8 to 10
# times the QR route's error (eager and jitted) and twice their predicted error on
# an Intel CPU (AVX-512), though not on an AMD one; each step shrinks the error by
# about cond^2 eps (<= 1/32 on this route) times a growth factor of the explicit
# inverse, and two bring it to the QR route's or below
# (``python -m tools.one_mask_refinement``).
REFINEMENT_STEPS = 2


def check_exact_cond(fname: str, exact_cond: object) -> bool:
    """The ``exact_cond`` option of a least-squares decoder: True or False."""
    if not isinstance(exact_cond, bool):
        raise TypeError(
            f"{fname}: exact_cond must be True or False, got {exact_cond!r}"
        )
    return exact_cond


def complex_dtype(acc) -> jnp.dtype:
    """complex64 for float32 accumulation, complex128 for float64."""
    return jnp.dtype(jnp.complex128 if jnp.dtype(acc) == jnp.float64 else jnp.complex64)


def _mm(a, b):
    return jnp.matmul(a, b, precision=HI)


def _ct(x):
    """Conjugate transpose (the transpose of a real matrix)."""
    return jnp.conj(x).T if jnp.iscomplexobj(x) else x.T


def _as_real(h):
    """A Hermitian [D, D] as the real symmetric [2D, 2D] [[Re, -Im], [Im, Re]]: the
    same eigenvalues, each twice (a real one is returned unchanged)."""
    if not jnp.iscomplexobj(h):
        return h
    re, im = jnp.real(h), jnp.imag(h)
    return jnp.block([[re, -im], [im, re]])


# Squarings of the one-mask cond estimate: one more than the batched QR kernel's
# (SQUARINGS), 16 power steps: measured against numpy's float64 cond over 500
# random masks per N (M = 40, D = 22, N = 24 to 40, masks with cond < 512) the
# estimate was within 0.6% below (3 squarings: 2.1% at N = 36), for one more
# product of two D x D matrices. (The powers of G / ||G||_F keep a largest
# eigenvalue of at least D^(-8): no underflow in float32 below D ~ 10^4.)
ONE_MASK_SQUARINGS = SQUARINGS + 1


def cond_bounds(gram, gram_inv):
    """(estimate, upper bound) of cond = sqrt(lambda_max(G) lambda_max(G^{-1})).

    The certified bracket of the batched QR kernel (``lambda_max_bounds``, here
    with ``ONE_MASK_SQUARINGS`` squarings) on the Gram matrix G = B_S^H B_S and on
    its computed inverse, both in one batched product per squaring: the estimate
    is the product of the two Rayleigh quotients after 16 power steps (from
    below, within D^(-1/64) of cond, in practice within 0.6%), the upper bound
    that of the two upper ends (within D^(1/64) above cond): both up to the
    rounding of the computed inverse (relative cond^2 eps). A complex G counts as
    its real form of twice the size (2D). NaN where either matrix holds one.
    """
    lo, hi = lambda_max_bounds(
        jnp.stack([_as_real(gram), _as_real(gram_inv)]), ONE_MASK_SQUARINGS
    )
    return jnp.sqrt(lo[0] * lo[1]), jnp.sqrt(hi[0] * hi[1])


def _residual(fit, y, sel):
    """RSS [F] of the selected rows of y - fit (real, y's real dtype)."""
    r = jnp.where(sel[:, None], y - fit, jnp.zeros((), y.dtype))
    return jnp.sum(jnp.real(r * jnp.conj(r)), axis=0)


def _householder(sel, basis, evaluation, acc, y, exact):
    """The QR route: Householder QR of the selected rows, A = (E R^{-1}) Q^H.

    ``exact``: cond from an SVD of R; else :func:`cond_bounds` of R^H R and
    R^{-1} R^{-H} (R^{-T} from the triangular solve that gives E R^{-1}). The
    residual is (I - Q Q^H) y on the selected rows.
    """
    d, k = basis.shape[1], evaluation.shape[0]
    bs = jnp.where(sel[:, None], basis, jnp.zeros_like(basis))
    q, r = jnp.linalg.qr(bs)
    r = after(r, q)  # one LAPACK call after the other (see _batched_linalg.after)
    num_used = jnp.sum(sel, dtype=jnp.int32)
    enough = num_used >= d
    inf = jnp.asarray(jnp.inf, acc)
    eye = jnp.eye(d, dtype=r.dtype)
    if exact:
        sv = jnp.linalg.svd(r, compute_uv=False).astype(acc)
        cond = jnp.where(enough, sv[0] / sv[-1], inf)
        cond = jnp.where(jnp.isnan(cond), inf, cond)
        r_safe = after(jnp.where(enough & jnp.isfinite(cond), r, eye), sv)
        # W = E R^{-1}: solve R^T W^T = E^T (plain transpose, also for complex R)
        w = solve_triangular(r_safe, evaluation.T, trans="T", lower=False)  # [D, K]
    else:
        r_safe = jnp.where(enough, r, eye)
        rhs = jnp.concatenate([evaluation.T, eye], axis=1)  # [D, K + D]
        w = solve_triangular(r_safe, rhs, trans="T", lower=False)
        z = w[:, k:]  # R^{-T}: R^{-1} R^{-H} = Z^T conj(Z)
        cond = cond_bounds(_mm(_ct(r), r), _mm(z.T, jnp.conj(z)))[0].astype(acc)
        cond = jnp.where(enough & ~jnp.isnan(cond), cond, inf)
    a = _mm(w[:, :k].T, _ct(q))  # [K, M]
    usable = enough & jnp.isfinite(cond) & jnp.all(jnp.isfinite(a))
    a = jnp.where(usable & sel[None, :], a, jnp.zeros_like(a))
    ok = usable & (cond * jnp.finfo(acc).eps < 1)
    rss = None
    if y is not None:
        qs = jnp.where(sel[:, None], q, jnp.zeros_like(q))
        rss = _residual(_mm(qs, _mm(_ct(qs), y)), y, sel).astype(acc)
    return DenseLs(a, ok, cond.astype(acc), num_used, rss)


def _seminormal(sel, basis, evaluation, acc, y):
    """The semi-normal route; returns (DenseLs, good): ``good`` where it holds.

    H = B_S^H B_S by one product, its Cholesky factor and inverse (one triangular
    solve), X = H^{-1} B_S^H, A = E X, then two refinement steps through the
    rows, A += (E - A B) X (the residual of A B_S = E, a backward error in the
    rows: the refined A decodes as accurately as a QR solve while cond^2 eps << 1;
    A. Bjorck, BIT 27 (1987) 198-214). The payload's fit likewise: c = X y, two steps
    c += X W (y - B c), then the residual W (y - B c). ``good``: enough rows, a
    finite result and the certified upper bound on cond with cond^2 eps <= 1/32.
    """
    d = basis.shape[1]
    num_used = jnp.sum(sel, dtype=jnp.int32)
    enough = num_used >= d
    w = sel.astype(acc)
    # every product below contracts the last axis of its left factor (XLA:CPU
    # runs the other forms through a slower path, 5-10 us each at D = 22); the
    # barrier keeps XLA from folding the transposition of B_S^H into the product
    # for H, which would make it that form
    bsh = jax.lax.optimization_barrier(_ct(basis) * w[None, :].astype(basis.dtype))
    h = _mm(bsh, jnp.conj(bsh).T)  # B_S^H B_S [D, D] (w = w^2)
    low = jnp.linalg.cholesky(h)  # NaN where H is not numerically positive definite
    # R^{-1} = L^{-H} (H = L L^H = R^H R), then H^{-1} = R^{-1} R^{-H}
    rinv = solve_triangular(
        low,
        jnp.eye(d, dtype=h.dtype),
        lower=True,
        trans="C" if h.dtype.kind == "c" else "T",
    )
    hinv = _mm(rinv, _ct(rinv))
    x = _mm(hinv, bsh)  # H^{-1} B_S^H [D, M]
    a = _mm(evaluation, x)
    # the corrections are added to the computed A (the residual sees its
    # rounding); REFINEMENT_STEPS of them
    for _ in range(REFINEMENT_STEPS):
        a = a + _mm(evaluation - _mm(a, basis), x)
    cond, upper = cond_bounds(h, hinv)
    eps = jnp.finfo(acc).eps
    finite = jnp.isfinite(upper) & jnp.all(jnp.isfinite(a))
    good = enough & finite & (upper * upper * eps <= NE_COND_SQ_EPS)
    a = jnp.where(good & sel[None, :], a, jnp.zeros_like(a))
    cond = jnp.where(good, cond, jnp.asarray(jnp.inf, acc)).astype(acc)
    rss = None
    if y is not None:
        # two steps: each shrinks the error of the fit by about cond^2 eps (<= 1/32
        # here), and one left the residual of float32 answers (their rounding) up
        # to 15 times QR's at cond ~ 400 (M = 40, N = 30, D = 22); two: below QR's
        c = _mm(x, y)
        for _ in range(2):
            c = c + _mm(x, jnp.where(sel[:, None], y - _mm(basis, c), 0))
        rss = _residual(_mm(basis, c), y, sel).astype(acc)
        rss = jnp.where(good, rss, jnp.zeros_like(rss))
    return DenseLs(a, good & (cond * eps < 1), cond, num_used, rss), good


def dense_ls_matrix(sel, basis, evaluation, acc, *, y=None, exact_cond=False):
    """A = E B_S^+ for one mask: the semi-normal route, QR where it does not hold.

    Args:
        sel: bool [M] selected (responding, finite) rows.
        basis: [M, D] real (``acc``) or complex (``complex_dtype(acc)``).
        evaluation: [K, D] same dtype as ``basis``.
        acc: the real accumulation dtype (float32 or float64).
        y: optional payload [M, F] in the dtype of ``basis``, finite (the rows not
            selected are ignored): its residual sum of squares is returned too.
        exact_cond: Householder QR and the exact 2-norm condition number (an SVD of
            R), also in float32 (float64 always takes this route).

    Returns:
        :class:`DenseLs`. ``a`` is zero when fewer than D rows are selected or the
        selected rows are numerically singular (then ``ok`` is False and ``cond``
        inf). ``cond`` is exact (float64, ``exact_cond``) or the estimate of
        :func:`cond_bounds` (within D^(+-1/64), in practice within 0.6% below).
    """
    if exact_cond or jnp.dtype(acc) == jnp.dtype(jnp.float64):
        return _householder(sel, basis, evaluation, acc, y, exact=True)
    ne, good = _seminormal(sel, basis, evaluation, acc, y)
    enough = ne.num_used >= basis.shape[1]
    return jax.lax.cond(
        good | ~enough,
        lambda: ne,
        lambda: _householder(sel, basis, evaluation, acc, y, exact=False),
    )


def dense_ls_matrices(
    sels, basis, evaluation, acc, *, y=None, per_mask=False, exact_cond=False
):
    """:func:`dense_ls_matrix` for B masks [B, M], one mask at a time (``lax.map``).

    ``y``: None, one payload [M, F] shared by every mask, or [B, M, F] with
    ``per_mask``. Every LAPACK call runs on one matrix (see the module docstring).
    """

    def one(s, yy):
        return dense_ls_matrix(s, basis, evaluation, acc, y=yy, exact_cond=exact_cond)

    if y is not None and per_mask:
        return jax.lax.map(lambda t: one(*t), (sels, y))
    return jax.lax.map(lambda s: one(s, y), sels)
