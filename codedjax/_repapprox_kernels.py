"""RepApprox: replication plus an approximate fallback, and recovery probabilities.

K tasks are replicated on c servers each (disjoint groups), and E = M - K c extra
servers hold coded inputs. Replicas of task k sit at its data point beta_k and the
extra servers at second-kind Chebyshev points, so one interpolant over the distinct
responding nodes, evaluated at beta, returns every task whose group answered exactly
(the interpolant reproduces its node values) and approximates the lost ones (Berrut
by default, as in BACC; NeRCC smoothing splines as an option).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ._argchecks import check_floating, check_int, check_mask, check_payload
from ._berrut_kernels import (
    apply_plan,
    berrut_matrix,
    encode_plan,
    lebesgue,
)
from ._chebyshev import points_f64
from ._dtypes import cast_exact, resolve_accum_dtype
from ._nercc_kernels import check_smoothing, spline_matrix
from ._nodes import finite_selection
from ._result import Status, apply_decoding, predicted_error, status_of


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["task", "nodes", "beta"],
    meta_fields=["num_inputs", "replication", "num_workers"],
)
@dataclasses.dataclass(frozen=True, eq=False)
class RepApproxLayout:
    """Which server computes what in RepApprox (a pytree: passes through jit).

    Servers are numbered so that task k's replicas are servers k c .. k c + c - 1 and
    the E = M - K c extra coded servers come last.

    Attributes:
        num_inputs: K. replication: c. num_workers: M (static metadata).
        task: int32 [M], the task each server replicates; -1 for the extra servers.
        nodes: float64 [M], each server's point: beta_k for replicas of task k, the
            extra points for the extra servers.
        beta: float64 [K], the data points.
    """

    num_inputs: int
    replication: int
    num_workers: int
    task: Any
    nodes: Any
    beta: Any

    @property
    def num_extra(self) -> int:
        """E = M - K c, the number of extra coded servers."""
        return self.num_workers - self.num_inputs * self.replication


class RepApproxResult(NamedTuple):
    """What :func:`repapprox_decode` returns (a pytree).

    :class:`DecodeResult`'s fields first, in its order and with its meaning, with
    one difference: the values of exact tasks are kept when ``ok`` is False
    (``exact`` says which), since they are the replicas' answers themselves; then
    ``exact``.

    Attributes:
        value: [K, ...] decoded outputs in the accumulation dtype: exact tasks
            always, approximated tasks only when ``ok`` (else zeros).
        ok: bool, ``status == Status.SUCCESS``: every task has a value (all exact,
            or the fallback had enough responses) and the result is finite.
        cond: infinity norm of the decoding matrix (1 when every task is exact).
        num_used: int32, number of distinct responding nodes.
        status: int32, a :class:`Status` code.
        error: predicted absolute error of ``value`` (max over the tasks), inf
            when not ``ok``.
        exact: bool [K], task k was returned exactly: a server at beta_k (a replica
            of task k) responded with finite values, and its output was copied.
    """

    value: jax.Array
    ok: jax.Array
    cond: jax.Array
    num_used: jax.Array
    status: jax.Array
    error: jax.Array
    exact: jax.Array


def _check_sizes(fname, num_inputs, replication, num_workers):
    k = check_int(fname, "num_inputs", num_inputs, minimum=1)
    c = check_int(fname, "replication", replication, minimum=1)
    m = check_int(fname, "num_workers", num_workers, minimum=1)
    if m < k * c:
        raise ValueError(
            f"{fname}: num_workers (M) must be at least num_inputs * replication "
            f"(K c = {k} * {c} = {k * c}), got {m}"
        )
    return k, c, m


def repapprox_layout(
    num_inputs: int,
    replication: int,
    num_workers: int,
    *,
    beta: ArrayLike = None,
    extra_nodes: Any = None,
) -> RepApproxLayout:
    r"""The RepApprox layout: K replica groups of size c and E = M - K c extra servers.

    Replicas of task k sit at beta_k (default: first-kind Chebyshev points, as BACC's
    data points), the extra servers at ``extra_nodes`` (default: E second-kind
    Chebyshev points; the single point 0 when E = 1).

    Args:
        num_inputs: K >= 1.
        replication: c >= 1.
        num_workers: M >= K c.
        beta: optional [K] distinct finite data points.
        extra_nodes: optional [E] finite points of the extra servers.

    Returns:
        RepApproxLayout.

    Raises:
        ValueError: K < 1, c < 1, M < K c, beta or extra_nodes of the wrong length,
            duplicate or non-finite points.
        TypeError: non-int sizes.

    Examples:
        >>> import codedjax as cj
        >>> lay = cj.repapprox_layout(2, 2, 6)
        >>> lay.task.tolist(), lay.num_extra
        ([0, 0, 1, 1, -1, -1], 2)

    References:
        The more the merrier: numerically accurate coded computing for ML inference
        (seed paper of codedjax), RepApprox; T. Jahani-Nezhad and M. A. Maddah-Ali,
        Berrut approximated coded computing, arXiv:2009.08327.
    """
    fname = "repapprox_layout"
    k, c, m = _check_sizes(fname, num_inputs, replication, num_workers)
    e = m - k * c
    if beta is None:
        b = points_f64(k, 1)
    else:
        b = np.asarray(beta, dtype=np.float64)
        if b.shape != (k,):
            raise ValueError(
                f"{fname}: beta must have shape [K] = [{k}], got {tuple(b.shape)}"
            )
    if not np.all(np.isfinite(b)) or np.unique(b).size != k:
        raise ValueError(f"{fname}: beta must be {k} distinct finite points, got {b}")
    if extra_nodes is None:
        x = points_f64(e, 2) if e >= 2 else np.zeros(e)
    else:
        x = np.asarray(extra_nodes, dtype=np.float64)
        if x.shape != (e,):
            raise ValueError(
                f"{fname}: extra_nodes must have shape [E] = [M - K c] = [{e}], got "
                f"{tuple(x.shape)}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{fname}: extra_nodes must be finite, got {x}")
    task = np.concatenate([np.repeat(np.arange(k), c), -np.ones(e, int)])
    nodes = np.concatenate([np.repeat(b, c), x])
    return RepApproxLayout(k, c, m, task.astype(np.int32), nodes, b)


def _check_layout(fname: str, layout: Any) -> RepApproxLayout:
    if not isinstance(layout, RepApproxLayout):
        raise TypeError(
            f"{fname}: layout must be a RepApproxLayout (from repapprox_layout), got "
            f"{type(layout).__name__}"
        )
    return layout


def repapprox_encode(x: ArrayLike, layout: RepApproxLayout) -> jax.Array:
    r"""RepApprox encoding: replicas receive X_k, extra servers the Berrut encoding.

    Every server i receives u(z_i), u the Berrut interpolant through (beta_k, X_k)
    (:func:`berrut_encode`) and z_i its node; for a replica z_i = beta_k, so it
    receives X_k itself (copied, bit for bit in the accumulation dtype).

    Args:
        x: [K, ...] inputs, any floating dtype.
        layout: from :func:`repapprox_layout`.

    Returns:
        [M, ...] inputs of the M servers in the accumulation dtype of ``x``.

    Raises:
        ValueError: x.shape[0] != K. TypeError: non-floating x or a bad layout.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> lay = cj.repapprox_layout(2, 2, 5)
        >>> cj.repapprox_encode(jnp.array([[1.0], [2.0]]), lay)[:4, 0].tolist()
        [1.0, 1.0, 2.0, 2.0]

    References:
        T. Jahani-Nezhad and M. A. Maddah-Ali, arXiv:2009.08327.
    """
    fname = "repapprox_encode"
    layout = _check_layout(fname, layout)
    x = check_floating(fname, "x", x)
    if x.ndim < 1 or x.shape[0] != layout.num_inputs:
        raise ValueError(
            f"{fname}: x must have shape [K, ...] = [{layout.num_inputs}, ...], got "
            f"{tuple(x.shape)}"
        )
    acc = resolve_accum_dtype("repapprox_encode", x.dtype)
    return repapprox_encode_unchecked(x, layout, acc)


def repapprox_encode_unchecked(
    x: jax.Array, layout: RepApproxLayout, acc: Any
) -> jax.Array:
    """:func:`repapprox_encode` after its checks (a code's: its layout made when it
    was built, x checked by its ``encode``), in the accumulation dtype ``acc``."""
    beta, nodes = _points(layout, acc)
    b, hit, idx, _ = encode_plan(beta, nodes)
    return apply_plan(b, hit, idx, x.astype(acc))


def _points(layout: RepApproxLayout, acc) -> tuple[jax.Array, jax.Array]:
    """beta and nodes in the accumulation dtype (cast on the host when concrete)."""
    out = []
    for v in (layout.beta, layout.nodes):
        if isinstance(v, np.ndarray):
            out.append(jnp.asarray(v.astype(acc)))
        else:  # traced (the layout passed through jit)
            out.append(jnp.asarray(v).astype(acc))
    return out[0], out[1]


def repapprox_decode(
    y: ArrayLike,
    mask: ArrayLike,
    layout: RepApproxLayout,
    *,
    fallback: str = "berrut",
    smoothing: Any = 0.0,
    accum_dtype: Any = None,
) -> RepApproxResult:
    r"""RepApprox decoding: exact where a replica answered, approximate elsewhere.

    With ``fallback="berrut"`` (default) one Berrut interpolant over the distinct
    responding nodes is evaluated at beta. Because beta_k is a node whenever a
    replica of task k responded, that task's value is the replica's response itself
    (copied bit for bit in the accumulation dtype; among several responding replicas
    the one of lowest server index), and only lost groups are approximated. With
    ``fallback="nercc"`` the lost tasks are taken from the NeRCC smoothing spline
    (:func:`nercc_decode`, weight ``smoothing``) through the distinct responding
    nodes; exact tasks are still copied. A response holding NaN or Inf counts as
    missing.

    Args:
        y: [M, ...] server outputs, any floating dtype.
        mask: bool [M] responders.
        layout: from :func:`repapprox_layout`.
        fallback: "berrut" or "nercc" (static).
        smoothing: NeRCC decoder weight lambda_d >= 0 (only for "nercc").
        accum_dtype: float32 or float64 (default by the dtype of y).

    Returns:
        RepApproxResult(value [K, ...], ok, cond, num_used, status, error, exact
        [K]). ``value`` is
        zero for lost tasks when the fallback had too few responses (Berrut: none;
        NeRCC: fewer than 2 distinct nodes); ``ok`` is then False unless every task
        was exact.

    Raises:
        ValueError: shapes that disagree, unknown fallback, negative smoothing.
        TypeError: non-floating y, non-boolean mask, a bad layout.

    Examples:
        >>> import jax.numpy as jnp, codedjax as cj
        >>> lay = cj.repapprox_layout(2, 2, 5)
        >>> y = cj.repapprox_encode(jnp.array([[1.0], [2.0]]), lay) ** 2
        >>> mask = jnp.array([False, True, False, False, True])
        >>> r = cj.repapprox_decode(y, mask, lay)
        >>> r.exact.tolist(), float(r.value[0, 0])
        ([True, False], 1.0)

    References:
        The more the merrier (seed paper of codedjax); T. Jahani-Nezhad and M. A.
        Maddah-Ali, arXiv:2009.08327; P. Moradi and M. A. Maddah-Ali, NeRCC,
        arXiv:2402.04377.
    """
    fname = "repapprox_decode"
    layout = _check_layout(fname, layout)
    if fallback not in ("berrut", "nercc"):
        raise ValueError(
            f"{fname}: fallback must be 'berrut' or 'nercc', got {fallback!r}"
        )
    y = check_payload(fname, "y", y)
    m = layout.num_workers
    if y.ndim < 1 or y.shape[0] != m:
        raise ValueError(
            f"{fname}: y must have shape [M, ...] = [{m}, ...], got {tuple(y.shape)}"
        )
    mask = check_mask(fname, mask, m)
    if mask.ndim != 1:
        raise ValueError(
            f"{fname}: mask must have shape [M] = [{m}], got {tuple(mask.shape)} "
            "(use jax.vmap for many masks)"
        )
    acc = resolve_accum_dtype(fname, y.dtype, accum_dtype)
    lam = check_smoothing(fname, smoothing, acc)
    return repapprox_decode_unchecked(y, mask, layout, fallback, lam, acc)


def repapprox_decode_unchecked(
    y: jax.Array,
    mask: jax.Array,
    layout: RepApproxLayout,
    fallback: str,
    smoothing: Any,
    acc: Any,
) -> RepApproxResult:
    """:func:`repapprox_decode` after its checks (a code's: its layout, fallback and
    smoothing checked when it was built, y and mask by its ``decode``), in the
    accumulation dtype ``acc``."""
    lam = jnp.asarray(smoothing).astype(acc)
    beta, nodes = _points(layout, acc)
    # cast first (exact, subnormal answers included, keeps NaN/Inf), so one
    # program serves every worker dtype;
    # the decoding matrix is built without seeing the payload shape
    worker = y.dtype
    y = cast_exact(y, acc)
    sel = finite_selection(y, mask)
    plan = _decode_plan(sel, nodes, beta, lam, fallback=fallback)
    return _decode_finish(plan, y, sel, worker=worker)


@functools.partial(jax.jit, static_argnames=("fallback",))
def _decode_plan(sel, nodes, beta, lam, fallback):
    b, hit, idx, count = berrut_matrix(nodes, sel, beta)
    if fallback == "berrut":
        spline = b
        enough = count > 0
    else:
        spline, _ = spline_matrix(nodes, sel, beta, lam)
        enough = (count >= 2) & (lam >= 0)
    lost_ok = jnp.all(hit) | enough
    points_ok = jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(nodes))
    if fallback == "nercc":
        points_ok = points_ok & (lam >= 0) & jnp.isfinite(lam)
    cols = jnp.arange(nodes.shape[0], dtype=jnp.int32)
    unit = (cols[None, :] == idx[:, None]).astype(b.dtype)
    mat = jnp.where(hit[:, None], unit, spline)
    cond = jnp.where(lost_ok, lebesgue(mat), jnp.asarray(jnp.inf, b.dtype))
    status = status_of(
        points_ok=points_ok, enough=lost_ok, solved=jnp.all(jnp.isfinite(mat))
    )
    return mat, hit, idx, count, enough, status, cond


@functools.partial(jax.jit, static_argnames=("worker",))
def _decode_finish(plan, y, sel, worker):
    mat, hit, idx, count, enough, status, cond = plan
    # exact rows copied
    value = apply_decoding(mat, y, y.dtype, hit=hit, hit_idx=idx, rows=sel)
    hit_b = hit.reshape(hit.shape + (1,) * (value.ndim - 1))
    value = jnp.where(hit_b | enough, value, jnp.zeros_like(value))
    finite = jnp.all(jnp.isfinite(value))
    value = jnp.where(finite | hit_b, value, jnp.zeros_like(value))
    status = jnp.where(
        (status == int(Status.SUCCESS)) & ~finite, int(Status.NONFINITE), status
    ).astype(jnp.int32)
    ok = status == int(Status.SUCCESS)
    flat = y.reshape(y.shape[0], math.prod(y.shape[1:]))
    error = predicted_error(mat, flat, sel, worker)
    error = jnp.where(ok, error, jnp.asarray(jnp.inf, error.dtype))
    return RepApproxResult(value, ok, cond, count, status, error, hit)


# ----------------------------------------------------------------------------------
# recovery probabilities (exact integer arithmetic)


def _check_prob_args(fname, num_inputs, replication, num_workers, num_responses):
    k, c, m = _check_sizes(fname, num_inputs, replication, num_workers)
    n = check_int(fname, "num_responses", num_responses, minimum=0)
    if n > m:
        raise ValueError(
            f"{fname}: num_responses (N) must be at most num_workers (M={m}), got {n}"
        )
    return k, c, m, n


def exact_recovery_probability(
    num_inputs: int, replication: int, num_workers: int, num_responses: int
) -> float:
    r"""P(every one of the K replica groups has a responder), N of M uniformly.

    .. math::
        P(\mathcal E) = \sum_{j=0}^{K} (-1)^j \binom{K}{j}
        \frac{\binom{M - jc}{N}}{\binom{M}{N}}

    (inclusion-exclusion over the lost groups), computed exactly with integers and
    rounded once to a float.

    Args:
        num_inputs: K >= 1. replication: c >= 1. num_workers: M >= K c.
        num_responses: N with 0 <= N <= M.

    Returns:
        The probability as a Python float.

    Raises:
        ValueError: sizes out of range. TypeError: non-int sizes.

    Examples:
        >>> import codedjax as cj
        >>> round(cj.exact_recovery_probability(4, 3, 12, 6), 4)
        0.6429

    References:
        The more the merrier (seed paper of codedjax), RepApprox.
    """
    k, c, m, n = _check_prob_args(
        "exact_recovery_probability",
        num_inputs,
        replication,
        num_workers,
        num_responses,
    )
    num = sum(
        (-1) ** j * math.comb(k, j) * math.comb(m - j * c, n) for j in range(k + 1)
    )
    return float(Fraction(num, math.comb(m, n)))


def recovery_probability_union(
    num_inputs: int, replication: int, num_workers: int, num_responses: int
) -> float:
    r"""Union bound P(all exact) >= 1 - K C(M - c, N) / C(M, N) (may be negative).

    Args:
        num_inputs: K. replication: c. num_workers: M >= K c. num_responses: 0..M.

    Returns:
        The bound as a Python float (exact rational arithmetic, rounded once).

    Raises:
        ValueError: sizes out of range. TypeError: non-int sizes.

    Examples:
        >>> import codedjax as cj
        >>> round(cj.recovery_probability_union(4, 3, 12, 6), 4)
        0.6364

    References:
        The more the merrier (seed paper of codedjax), RepApprox.
    """
    k, c, m, n = _check_prob_args(
        "recovery_probability_union",
        num_inputs,
        replication,
        num_workers,
        num_responses,
    )
    return float(1 - Fraction(k * math.comb(m - c, n), math.comb(m, n)))


def recovery_probability_bound(
    num_inputs: int, replication: int, num_workers: int, num_responses: int
) -> float:
    r"""The seed's bound P(all exact) >= 1 - K (1 - N/M)^c (may be negative).

    It follows from the union bound since C(M-c, N)/C(M, N) = prod_{t<c} (M-N-t)/(M-t)
    <= (1 - N/M)^c.

    Args:
        num_inputs: K. replication: c. num_workers: M >= K c. num_responses: 0..M.

    Returns:
        The bound as a Python float (exact rational arithmetic, rounded once).

    Raises:
        ValueError: sizes out of range. TypeError: non-int sizes.

    Examples:
        >>> import codedjax as cj
        >>> cj.recovery_probability_bound(8, 4, 40, 20)
        0.5

    References:
        The more the merrier (seed paper of codedjax), RepApprox.
    """
    k, c, m, n = _check_prob_args(
        "recovery_probability_bound",
        num_inputs,
        replication,
        num_workers,
        num_responses,
    )
    return float(1 - k * Fraction(m - n, m) ** c)
