"""Reference locators and the rational view of Berrut-coded answers (float64 numpy).

These are the experiment's references, public so that their tests can check them
against brute force: :func:`ml_located`, the maximum-likelihood locator told the
number of corrupted workers (what any locator can at best achieve on the given
masks and noise); :func:`loo_locate`, a leave-one-out locator for Berrut-coded
answers; :func:`approxifer_locate`, ApproxIFER's rational-fit locator reimplemented
from its description; :func:`berrut_denominator`, which turns BACC-coded answers of
a polynomial worker into a Lagrange code's; :func:`leverages`, each responder's
leverage in its request's fit. None of them is a decoder of the library.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = [
    "approxifer_locate",
    "berrut_denominator",
    "leverages",
    "loo_locate",
    "ml_located",
]


def leverages(alpha, masks, num_coeffs: int) -> np.ndarray:
    """[B, M] leverage of each responder in its request's degree < D fit (0 off)."""
    a = np.asarray(alpha, np.float64)
    t = np.polynomial.chebyshev.chebvander(a, num_coeffs - 1)
    out = np.zeros(masks.shape)
    for i, mk in enumerate(np.asarray(masks)):
        q, _ = np.linalg.qr(t[mk])
        out[i, mk] = np.sum(q * q, axis=1)
    return out


def ml_located(alpha, masks, y, sd, bad, num_coeffs: int) -> float:
    """Share of requests where the maximum-likelihood locator *told the number of
    corrupted workers* finds exactly them (float64 numpy; a reference, not a decoder).

    With Gaussian answer errors of standard deviation ``sd`` and A shifted answers
    at unknown places, the likelihood is highest for the set S of A responders
    whose exclusion lowers the weighted residual sum of squares the most,
    r_S^T P_SS^{-1} r_S (P = I - H of the weighted fit of every responder, r its
    residuals). It needs no threshold and pays nothing for false alarms, so no
    locator that must also decide how many answers are wrong does better on
    average: its rate is what these masks and this noise allow.
    """
    a64 = np.asarray(alpha, np.float64)
    t = np.polynomial.chebyshev.chebvander(a64, num_coeffs - 1)
    hits = 0
    count = int(bad[0].sum())
    for i, mk in enumerate(np.asarray(masks)):
        idx = np.flatnonzero(mk)
        w = 1.0 / np.asarray(sd[i, idx], np.float64)
        q, _ = np.linalg.qr(t[idx] * w[:, None])
        yw = np.asarray(y[i, idx], np.float64) * w
        p = np.eye(idx.size) - q @ q.T
        r = p @ yw
        sets = np.array(list(itertools.combinations(range(idx.size), count)))
        pss = p[sets[:, :, None], sets[:, None, :]]  # [S, A, A]
        rs = r[sets]  # [S, A]
        with np.errstate(all="ignore"):
            drop = np.einsum(
                "sa,sa->s", rs, np.linalg.solve(pss, rs[..., None])[..., 0]
            )
        drop = np.where(np.isfinite(drop), drop, -np.inf)
        hits += set(idx[sets[np.argmax(drop)]]) == set(np.flatnonzero(bad[i]))
    return hits / len(masks)


def _loo_deviation(x, y):
    """y_i minus Berrut's interpolant of the other answers at x_i (x sorted)."""
    n = x.size
    idx = np.arange(n)
    # Berrut weights alternate over the remaining sorted nodes: j > i shifts by one
    sign = np.where(idx[None, :] < idx[:, None], 1.0, -1.0) * (-1.0) ** idx[None, :]
    dz = x[:, None] - x[None, :]
    off = ~np.eye(n, dtype=bool)
    t = np.where(off, sign / np.where(off, dz, 1.0), 0.0)
    return y - (t @ y) / t.sum(axis=1)


def loo_locate(x, y, max_corrupted, tau):
    """Leave-one-out Berrut locator on the responders (x sorted, y answers).

    Each answer against the Berrut interpolant of the other kept answers; the scale
    is 1.4826 times the median absolute deviation of those deleted residuals (robust
    to a few outliers, which spoil only their neighbours' predictions); the worst
    beyond tau scales is excluded and the search repeats, at most max_corrupted
    times. Returns a bool mask over the responders.
    """
    keep = np.ones(x.size, bool)
    for _ in range(max_corrupted):
        idx = np.flatnonzero(keep)
        dev = _loo_deviation(x[idx], y[idx])
        scale = 1.4826 * np.median(np.abs(dev)) + 1e-300
        j = int(np.argmax(np.abs(dev)))
        if np.abs(dev[j]) / scale <= tau:
            break
        keep[idx[j]] = False
    return ~keep


def approxifer_locate(x, y, num_errors, deg_p):
    """ApproxIFER's locator: the rational fit P(x_i) = y_i Q(x_i), deg Q = A.

    The coefficients of P (Chebyshev, degree ``deg_p``) and Q (degree A) are the
    right singular vector of [T_p(x), -diag(y) T_A(x)] of the smallest singular
    value; the A responders with the smallest |Q(x_i)| are flagged. Returns a bool
    mask over the responders.
    """
    tp = np.polynomial.chebyshev.chebvander(x, deg_p)
    tq = np.polynomial.chebyshev.chebvander(x, num_errors)
    mat = np.concatenate([tp, -y[:, None] * tq], axis=1)
    norms = np.maximum(np.linalg.norm(mat, axis=0), 1e-300)  # column equilibration
    _, _, vt = np.linalg.svd(mat / norms, full_matrices=True)
    cq = (vt[-1] / norms)[deg_p + 1 :]
    q = np.abs(tq @ cq)
    flagged = np.zeros(x.size, bool)
    flagged[np.argsort(q)[:num_errors]] = True
    return flagged


def berrut_denominator(beta, z) -> np.ndarray:
    """B(z) = sum_k w_k prod_{j != k} (z - beta_j), w_k = (-1)^(rank of beta_k).

    Berrut's interpolant of the data is u(z) = A(z) / B(z) with A and B polynomials
    of degree K - 1, B fixed by the data points alone. So a worker that computes a
    polynomial f of degree d answers y_i = f(u(z_i)), and y_i B(z_i)^d = P(z_i) with
    P = sum_j c_j A^j B^(d - j) a polynomial of degree d (K - 1) = D - 1: BACC-coded
    answers of a polynomial worker, times B^d, are a Lagrange code's answers, and
    f(x_k) = P(beta_k) / B(beta_k)^d exactly (float64 numpy).
    """
    b = np.asarray(beta, np.float64)
    zz = np.asarray(z, np.float64)
    w = np.empty(b.size)
    w[np.argsort(b)] = (-1.0) ** np.arange(b.size)
    diff = zz[:, None] - b[None, :]  # [Z, K]
    out = np.zeros(zz.size)
    for k in range(b.size):
        out += w[k] * np.prod(np.delete(diff, k, axis=1), axis=1)
    return out
