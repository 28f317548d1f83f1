"""Lagrange (polynomial) coded computing: the recovery threshold and the encoder.

Workers i = 0..M-1 evaluate f(u(alpha_i)), where u is the degree K-1 polynomial with
u(beta_k) = X_k. The answers are samples of h = f o u, a polynomial of degree
D - 1 = d (K - 1), which the decoders (:mod:`codedjax._lagrange_chebyls`,
:mod:`codedjax._lagrange_threshold`) fit in the Chebyshev basis and evaluate at
beta.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._argcache import DECODE_CHECKS
from ._argchecks import (
    check_floating,
    check_int,
    check_return_ok,
    check_vector,
    concrete_points,
)
from ._dtypes import encoder_points_ok, points_valid, resolve_accum_dtype
from ._result import apply_decoding


def recovery_threshold(num_inputs: int, degree: int) -> int:
    """Recovery threshold D = d (K - 1) + 1 of Lagrange coded computing.

    Args:
        num_inputs: K >= 1, the number of inputs coded together.
        degree: d >= 0, the total degree of the polynomial f the workers compute.

    Returns:
        D, the number of Chebyshev coefficients of h = f o u.

    Raises:
        ValueError: for K < 1 or d < 0.

    Examples:
        >>> recovery_threshold(8, 3)
        22

    References:
        Q. Yu et al., Lagrange Coded Computing, AISTATS 2019, arXiv:1806.00939.
    """
    k = check_int("recovery_threshold", "num_inputs", num_inputs, minimum=1)
    d = check_int("recovery_threshold", "degree", degree, minimum=0)
    return d * (k - 1) + 1


def _barycentric_matrix(nodes: jax.Array, z: jax.Array) -> jax.Array:
    """L[i, k] = l_k(z_i), Lagrange basis on ``nodes`` (second barycentric form).

    Exact unit rows where z_i coincides with a node (no 0/0).
    """
    diff = nodes[:, None] - nodes[None, :]
    k = nodes.shape[0]
    diff = jnp.where(jnp.eye(k, dtype=bool), jnp.ones_like(diff), diff)
    # weights w_k = 1 / prod_{j != k} (beta_k - beta_j), scaled for range safety
    logw = -jnp.sum(jnp.log(jnp.abs(diff)), axis=1)
    sign = jnp.prod(jnp.sign(diff), axis=1)
    w = sign * jnp.exp(logw - jnp.max(logw))
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    any_hit = jnp.any(hit, axis=1, keepdims=True)
    safe = jnp.where(hit, jnp.ones_like(dz), dz)
    t = w[None, :] / safe
    basis = t / jnp.sum(t, axis=1, keepdims=True)
    return jnp.where(any_hit, hit.astype(dz.dtype), basis)


def lagrange_encode(
    x: Any, beta: Any, alpha: Any, *, return_ok: bool = False
) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""Lagrange encoding: worker i receives u(alpha_i), u(beta_k) = X_k, deg u = K-1.

    .. math::
        \tilde X_i = \sum_k \ell_k(\alpha_i) X_k, \qquad
        \ell_k(z) = \frac{w_k / (z - \beta_k)}{\sum_j w_j / (z - \beta_j)}.

    Computed in the barycentric form (stable on Chebyshev points; never through
    monomials), in the accumulation dtype of ``x``. The inputs are scaled by a power
    of two per column before the product, so the result overflows only where the
    exact answer does.

    Under ``jit`` the points cannot be checked (nothing traced can raise); there,
    invalid points (repeated or non-finite data points, non-finite worker points)
    make every coded input NaN, so every worker's answer is NaN and a decoder
    reports ``ok`` False (``TOO_FEW_RESPONSES``) instead of a silently wrong
    value; ``return_ok=True`` also returns the points' validity as data.

    Args:
        x: [K, ...] the K inputs, any floating dtype.
        beta: [K] distinct data points.
        alpha: [M] worker evaluation points.
        return_ok: also return ``ok``, a bool scalar: False when the (traced)
            points are invalid, and then every coded row is NaN.

    Returns:
        [M, ...] coded inputs in the accumulation dtype (float32 for bf16/f16/f32
        input, float64 for float64); with ``return_ok``, the pair (coded, ok).

    Raises:
        ValueError: on shape mismatch, or duplicate / non-finite concrete points.
        TypeError: non-floating x or points, a ``return_ok`` that is not a bool.

    Examples:
        >>> import jax, codedjax as cj
        >>> beta, alpha = cj.chebyshev_points(2), cj.chebyshev_points(4)
        >>> enc = cj.lagrange_encode(beta[:, None], beta, alpha)  # u(z) = z
        >>> bool(jax.numpy.allclose(enc[:, 0], alpha))
        True

    References:
        Q. Yu et al., Lagrange Coded Computing, AISTATS 2019, arXiv:1806.00939;
        J.-P. Berrut and L. N. Trefethen, Barycentric Lagrange interpolation,
        SIAM Review 46(3), 2004.
    """
    fname = "lagrange_encode"
    want_ok = check_return_ok(fname, return_ok)
    points = (beta, alpha)
    key = DECODE_CHECKS.key(fname, (x,), points, ())
    acc = DECODE_CHECKS.get(key, points)  # the checks memoised per code (_argcache)
    if acc is None:
        x = check_floating(fname, "x", x)
        if x.ndim < 1:
            raise ValueError(f"{fname}: x must have shape [K, ...], got a scalar")
        k = x.shape[0]
        beta = check_vector(fname, "beta", beta, length=k)
        alpha = check_vector(fname, "alpha", alpha)
        concrete_points(fname, "beta", beta)
        concrete_points(fname, "alpha", alpha)
        acc = resolve_accum_dtype(fname, x.dtype)
        DECODE_CHECKS.put(key, points, acc)
    # one program: the casts, the M x K matrix and the product (every value made
    # in the caller's trace, if any, stays in it)
    coded = _lagrange_encode(x, beta, alpha, acc=acc)
    if want_ok:
        return coded, encoder_points_ok(beta.astype(acc), alpha.astype(acc))
    return coded


@functools.partial(jax.jit, static_argnames=("acc",))
def _lagrange_encode(x, beta, alpha, acc):
    e = _encoding_matrix(beta.astype(acc), alpha.astype(acc))
    x = x.astype(acc)
    return apply_decoding(e, x, x.dtype, zero_nonfinite=False)


def _encoding_matrix(beta, alpha):
    e = _barycentric_matrix(beta, alpha)
    # traced invalid points: every coded input NaN (see the docstring)
    valid = points_valid(beta) & jnp.all(jnp.isfinite(alpha))
    return jnp.where(valid, e, jnp.full_like(e, jnp.nan))


# ----------------------------------------------------------------------------------
# Unchecked entries, for the Lagrange codes (codedjax._lagrange_codes): a code checks
# its settings and points once, when it is built, and each call's arguments once, in
# its own method (Code.encode, Code.decode, ...); inside its jitted program it then
# calls these, which check nothing. ``acc`` is the accumulation dtype, the points are
# arrays of any floating dtype (cast inside), y and mask are one request's.


def encoding_matrix_constant(beta, alpha, acc) -> np.ndarray:
    """The M x K Lagrange encoding matrix of fixed points (a code's) in ``acc``:
    the second barycentric form of :func:`lagrange_encode`, evaluated on the host
    in float64 (each entry rounded once to ``acc``). A constant of the code's
    encode program, which then runs the product alone (:func:`encode_with_matrix`).
    """
    nodes, z = np.asarray(beta, np.float64), np.asarray(alpha, np.float64)
    k = nodes.size
    diff = nodes[:, None] - nodes[None, :] + np.eye(k)
    logw = -np.sum(np.log(np.abs(diff)), axis=1)
    w = np.prod(np.sign(diff), axis=1) * np.exp(logw - logw.max())
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = w[None, :] / np.where(hit, 1.0, dz)
        basis = t / t.sum(axis=1, keepdims=True)
    basis = np.where(hit.any(axis=1, keepdims=True), hit.astype(np.float64), basis)
    return basis.astype(acc)


def encode_with_matrix(x, e, acc):
    """:func:`lagrange_encode` of checked inputs x [K, ...] by the encoding matrix
    ``e`` [M, K] in ``acc`` (:func:`encoding_matrix_constant`)."""
    return apply_decoding(jnp.asarray(e), x.astype(acc), acc, zero_nonfinite=False)
