"""Batched dense linear-algebra helpers shared by the decoding kernels.

The LAPACK serialisation of the batched kernels (:func:`after`, :func:`each`: why
it is needed is in their docstrings and in ``codedjax._threads``), batched matrix
products in full float32, and the estimates of the largest eigenvalue of PSD
matrices behind the float32 condition-number estimates of the least-squares
(``codedjax._lagrange_lsq``, ``codedjax._basis_lsq``) and square
(``codedjax._lagrange_square``) kernels: a certified bracket from matrix squarings
(:func:`lambda_max_bounds`) and a Lanczos estimate (:func:`lanczos_lambda_max`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

HI = jax.lax.Precision.HIGHEST

# Squarings q used by the condition-number estimate of the batched kernels: the
# bracket on lambda_max of a D x D PSD matrix from ||G^(2^q)||_F^(2^-q) has ratio
# D^(2^-(q+1)) (q = 3: 22^(1/16) = 1.21 for lambda, 1.10 for a singular value).
SQUARINGS = 3
# The semi-normal equations (with one refinement step through the rows) decode a
# mask when its estimated cond satisfies cond^2 * eps <= 1/32 (cond <= 512 in
# float32): then the refined result is within a few cond * eps of the float64 one
# (measured max 1.5 cond * eps); every other mask (and any whose factorisation met a
# non-positive pivot or produced a non-finite value) is decoded by Householder QR.
# Shared by the batched kernel (codedjax._lagrange_lsq) and the one-mask kernel
# (codedjax._basis_lsq).
NE_COND_SQ_EPS = 1.0 / 32
# Bisection steps for the largest eigenvalue of the Lanczos tridiagonal matrix.
BISECTION_STEPS = 32


def after(x, dep):
    """``x`` unchanged, but with a data dependency on ``dep``.

    XLA:CPU runs independent operations concurrently. Two *batched* LAPACK custom
    calls running at once (say orgqr and a triangular solve) can deadlock jaxlib's
    CPU thread pool on machines with few cores: each blocks in ParallelBatchMap
    waiting for pool workers that the other one holds (observed with jax 0.10 on 2
    cores). Chaining every LAPACK call of a kernel through real data dependencies
    serialises them (an optimization_barrier is not enough: the CPU runtime tracks
    dependencies per buffer). Costs one elementwise pass over ``x``.
    """
    d = dep.reshape(-1)[0]
    d = jnp.where(jnp.isfinite(d), d, jnp.zeros_like(d)).astype(x.dtype)
    return x + d * 0


def each(fn, *xs):
    """``fn`` applied to one matrix at a time over the leading axis of ``xs``.

    A LAPACK custom call with a batch axis splits the batch over XLA:CPU's intra-op
    thread pool and blocks its pool thread until the pieces are done
    (``jax::ParallelBatchMap``, jaxlib 0.10); two such programs running at once
    from different Python threads can leave every pool thread waiting, a deadlock
    (see ``codedjax._threads``). A call on ONE matrix runs inline and cannot block
    on the pool, so the batched kernels loop over their masks (``lax.map``) around
    every LAPACK call and no LAPACK call in them has a batch axis.
    """
    return jax.lax.map(lambda t: fn(*t), xs)


def mT(x):
    return jnp.swapaxes(x, -1, -2)


def bmm(a, b):
    return jnp.matmul(a, b, precision=HI)


def lambda_max_bounds(g, squarings):
    """Certified bounds (lower, upper) on lambda_max of PSD matrices g [..., D, D].

    upper = ||G^p||_F^(1/p) with p = 2^squarings lies in
    [lambda_max, D^(1/(2p)) lambda_max] (||G^p||_F is the 2p-norm of the eigenvalues
    raised to p). Only G is normalised, by its Frobenius norm c_0: every power of
    X = G / c_0 then has entries of size at most 1 and a largest eigenvalue of at
    least D^(-p/2) (5e-6 at D = 22, p = 8), so the squarings neither overflow nor
    underflow and need no renormalisation: ||G^p||_F^(1/p) = c_0 ||X^p||_F^(1/p).
    lower = max(v^T G v / v^T v, upper / D^(1/(2p))), v the column of G^p of
    largest norm (the first such): a Rayleigh quotient (never above lambda_max)
    after p power steps, which is exact when the top eigenvalue is repeated (e.g.
    G = I). Both hold up to rounding of relative size O(D^2 u).
    """
    d = g.shape[-1]
    c = jnp.sqrt(jnp.sum(g * g, axis=(-2, -1)))
    safe = jnp.where(c > 0, c, jnp.ones_like(c))
    x = g / safe[..., None, None]
    for _ in range(squarings):
        x = bmm(x, x)
    norms = jnp.sum(x * x, axis=-2)  # [..., D] squared column norms of X^p
    cp = jnp.sqrt(jnp.sum(norms, axis=-1))
    upper = jnp.where(c > 0, safe * cp ** (0.5**squarings), jnp.zeros_like(c))
    # the first column of largest norm (argmax takes the first), by a product with
    # its indicator (a gather across the batch is slow on XLA:CPU; a cumsum over
    # the columns, which found the same one, costs a chain of five kernels)
    cols = jnp.arange(d).reshape((1,) * (norms.ndim - 1) + (d,))
    first = cols == jnp.argmax(norms, axis=-1)[..., None]
    v = jnp.einsum("...ij,...j->...i", x, first.astype(x.dtype), precision=HI)
    gv = jnp.einsum("...ij,...j->...i", g, v, precision=HI)
    vv = jnp.sum(v * v, axis=-1)
    rq = jnp.sum(v * gv, axis=-1) / jnp.where(vv > 0, vv, jnp.ones_like(vv))
    lower = jnp.maximum(rq, upper / float(d) ** (0.5 ** (squarings + 1)))
    return jnp.minimum(lower, upper), upper


def tridiagonal_lambda_max(diag, off, steps=BISECTION_STEPS):
    """Largest eigenvalue of B symmetric tridiagonal m x m matrices, by bisection.

    ``diag``: m arrays [B]; ``off``: m - 1 arrays [B]. Sturm count: the number of
    eigenvalues below x is the number of negative pivots of T - x I. The bracket
    starts at [max diag, Gershgorin bound]; returns its upper end after ``steps``
    halvings (relative width <= 2^-steps of the start).
    """
    m = len(diag)
    lo = diag[0]
    hi = diag[0] + (jnp.abs(off[0]) if m > 1 else 0)
    for i in range(1, m):
        lo = jnp.maximum(lo, diag[i])
        row = diag[i] + jnp.abs(off[i - 1]) + (jnp.abs(off[i]) if i < m - 1 else 0)
        hi = jnp.maximum(hi, row)
    tiny = jnp.finfo(lo.dtype).tiny

    def all_below(x):  # True where every eigenvalue is < x
        count = jnp.zeros(x.shape, jnp.int32)
        piv = diag[0] - x
        for i in range(m):
            if i > 0:
                piv = diag[i] - x - off[i - 1] ** 2 / piv
            count = count + (piv < 0).astype(jnp.int32)
            piv = jnp.where(piv == 0, -tiny, piv)
        return count == m

    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        below = all_below(mid)
        return jnp.where(below, lo, mid), jnp.where(below, mid, hi)

    lo, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return hi


def lanczos_lambda_max(matvec, v, steps):
    """Estimate lambda_max of B symmetric PSD matrices from a Krylov space.

    ``steps`` Lanczos steps (one ``matvec`` each; the three-term recurrence, no
    reorthogonalisation) from the start vectors ``v`` [B, D], then the largest Ritz
    value, a lower bound on lambda_max up to rounding (Golub and Van Loan, Matrix
    Computations, 4th ed., sec. 10.1). Without reorthogonalisation the basis loses
    orthogonality once a Ritz value converges, but every Ritz value still lies in
    [lambda_min, lambda_max] up to a small multiple of eps ||A|| (C. C. Paige,
    Linear Algebra Appl. 34 (1980) 235-258): lost orthogonality adds copies of
    converged values, never a larger one. Measured against the fully
    reorthogonalised recurrence over 4096 masks per N (M = 40, D = 22, N = 24 to 34,
    both kinds of points) the cond estimates agree to 1e-5 and the worst ratios to
    the exact cond are the same; the reorthogonalisation took about 2.5 ms of a
    17-21 ms decode of 4096 masks (CPU).
    Not certified: a start vector nearly orthogonal to the top eigenvector leaves it
    out of a short Krylov space (4 steps from :func:`two_column_start` gave 0.67
    kappa for one mask at M = 40, D = 22); the decoders take 8 steps (see
    ``codedjax._lagrange_lsq.ne_decoding_matrices`` for the measured accuracy).
    """

    def norm(x):
        return jnp.sqrt(jnp.sum(x * x, axis=1))

    n0 = norm(v)[:, None]
    q = v / jnp.where(n0 > 0, n0, jnp.ones_like(n0))
    prev, diag, off = None, [], []
    tol = jnp.sqrt(jnp.finfo(v.dtype).eps)
    for j in range(steps):
        w = matvec(q)
        a = jnp.sum(w * q, axis=1)
        diag.append(a)
        if j == steps - 1:
            break
        size = norm(w)
        w = w - a[:, None] * q
        if prev is not None:
            w = w - off[-1][:, None] * prev
        nrm = norm(w)
        # breakdown: what is left is rounding noise, not a new direction: the
        # Krylov space is invariant, so stop here (zero vector, zero coupling; the
        # rest of the tridiagonal matrix then decouples with zero entries)
        live = nrm > tol * size
        off.append(jnp.where(live, nrm, jnp.zeros_like(nrm)))
        scale = jnp.where(live, 1 / jnp.where(live, nrm, jnp.ones_like(nrm)), 0)
        prev, q = q, w * scale[:, None]
    return tridiagonal_lambda_max(diag, off)


def two_column_start(g):
    """Lanczos start vectors [B, D] for symmetric g [B, D, D]: two columns.

    The column of the largest diagonal entry plus, sign-aligned, the largest one of
    the other index parity, both normalised: close to the top eigenvector for a
    generic g (one power step from the best coordinate vector) and present in both
    blocks when g splits into even and odd indices.
    """
    d = g.shape[-1]
    diag = jnp.diagonal(g, axis1=1, axis2=2)
    first = jnp.argmax(diag, axis=1)
    odd = jnp.asarray(np.arange(d) % 2 == 1)
    other_parity = odd[None, :] != odd[first][:, None]
    second = jnp.argmax(jnp.where(other_parity, diag, -jnp.inf), axis=1)

    # each column by a matrix-vector product with its indicator (exact: one
    # nonzero term per entry), not a gather across the batch (slow on XLA:CPU);
    # two such products cost about half of one [D, D] x [D, 2] product per mask
    idx = jnp.arange(d)[None, :]

    def column(i):
        pick = (idx == i[:, None]).astype(g.dtype)
        c = jnp.einsum("bde,be->bd", g, pick, precision=HI)
        n = jnp.sqrt(jnp.sum(c * c, axis=1, keepdims=True))
        return c / jnp.where(n > 0, n, jnp.ones_like(n))

    a, b = column(first), column(second)
    sign = jnp.where(jnp.sum(a * b, axis=1, keepdims=True) >= 0, 1.0, -1.0)
    return a + sign.astype(g.dtype) * b
