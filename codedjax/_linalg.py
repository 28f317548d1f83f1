"""Batched dense linear-algebra helpers shared by the decoding kernels.

The LAPACK serialisation of the batched kernels (:func:`after`, :func:`each`: why
it is needed is in their docstrings and in ``codedjax._threads``), batched matrix
products in full float32, and the certified bracket on the largest eigenvalue of
PSD matrices behind the float32 condition-number estimates of the least-squares
(``codedjax._lsq``) and square (``codedjax._square``) kernels.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HI = jax.lax.Precision.HIGHEST

# Squarings q used by the condition-number estimate of the batched kernels: the
# bracket on lambda_max of a D x D PSD matrix from ||G^(2^q)||_F^(2^-q) has ratio
# D^(2^-(q+1)) (q = 3: 22^(1/16) = 1.21 for lambda, 1.10 for a singular value).
SQUARINGS = 3


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
    # the first column of largest norm, by a product with its indicator (a gather
    # across the batch is slow on XLA:CPU)
    top = norms == jnp.max(norms, axis=-1, keepdims=True)
    first = top & (jnp.cumsum(top, axis=-1) == 1)
    v = jnp.einsum("...ij,...j->...i", x, first.astype(x.dtype), precision=HI)
    gv = jnp.einsum("...ij,...j->...i", g, v, precision=HI)
    vv = jnp.sum(v * v, axis=-1)
    rq = jnp.sum(v * gv, axis=-1) / jnp.where(vv > 0, vv, jnp.ones_like(vv))
    lower = jnp.maximum(rq, upper / float(d) ** (0.5 ** (squarings + 1)))
    return jnp.minimum(lower, upper), upper
