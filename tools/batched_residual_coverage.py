"""Coverage of the predicted error: the batched QR kernel against the semi-normal one.

The batched float32 ChebyLS decode runs the semi-normal-equations kernel from
``codedjax._lagrange_lsq.NE_MIN_MASKS`` masks on and the Householder QR kernel below,
each with its own form of the least-squares residual behind the predicted error
(``codedjax._lagrange_lsq.ls_residual_sq``). This decodes the same requests with both
(the setting of ``theory.calibration``: K = 8 queries through a degree-3 cross
tower, M = 40 workers, D = 22; a fresh set of N responders per request) and prints,
per answer dtype (bf16 and float32 workers, float32 decoding) and N, each kernel's
(and, for reference, the one-mask decoder's: ``chebyls_decode`` mask by mask)
share of ok requests whose prediction covers the actual error (max_k |value_k -
f(X_k)| against the float64 model), the median predicted / actual, and how far the
two kernels' predictions, values and cond estimates lie apart. The figures in
``docs/decoding.md`` come from

    python -m tools.batched_residual_coverage

(about 2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax import _lagrange_chebyls
from theory.demo import cross_params, cross_tower

K, M, LAYERS, FEATURES = 8, 40, 2, 16
D = cj.recovery_threshold(K, LAYERS + 1)


def problem(num_masks: int, worker_dtype, seed: int = 0):
    """Answers [B, M] in the workers' dtype and float64 truths [B, K]."""
    alpha, beta = cj.chebyshev_points(M), cj.chebyshev_points(K)
    kp, kx = jax.random.split(jax.random.key(seed))
    params = cross_params(kp, FEATURES, LAYERS)
    x = jax.random.normal(kx, (num_masks, K, FEATURES))
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        truth = np.asarray(
            jax.vmap(lambda xx: cross_tower(p64, xx))(jnp.asarray(x, jnp.float64))
        )
    coded = jax.vmap(lambda xx: cj.lagrange_encode(xx, beta, alpha))(x)
    worker = cj.low_precision_worker(cross_tower, worker_dtype)
    y = jax.vmap(lambda c: worker(params, c))(coded)
    return alpha, beta, y, truth


def one_mask(alpha, beta):
    """``chebyls_decode`` mask by mask (``lax.map``: a loop, so the one-mask QR
    kernel, whose residual comes from its fit at D nodes), the reference."""

    def run(y, masks):
        dec = lambda a: cj.chebyls_decode(a[0], a[1], alpha, beta, num_coeffs=D)  # noqa: E731
        return jax.lax.map(dec, (y, masks))

    return jax.jit(run)


@functools.cache
def decoder(kernel: str):
    return jax.jit(
        functools.partial(_lagrange_chebyls._chebyls_batched_impl, kernel=kernel),
        static_argnames=("num_coeffs", "acc", "per_mask"),
    )


def compare(num_masks: int, worker_dtype, responses) -> list[dict]:
    alpha, beta, y, truth = problem(num_masks, worker_dtype)
    reference = one_mask(alpha, beta)
    rows = []
    for n in responses:
        masks = cj.sample_masks(
            jax.random.fold_in(jax.random.key(7), n),
            num_workers=M, num_responses=n, shape=(num_masks,),
        )  # fmt: skip
        got = {}
        for kernel in ("ne", "qr"):
            r = decoder(kernel)(
                y, masks, alpha, beta, num_coeffs=D, acc=jnp.float32, per_mask=True
            )
            got[kernel] = jax.tree_util.tree_map(np.asarray, r)
        r = reference(y, masks)
        got["one"] = jax.tree_util.tree_map(np.asarray, r)
        ne, qr = got["ne"], got["qr"]
        row = {"N": n, "ok_agree": float(np.mean(ne.ok == qr.ok))}
        both = ne.ok & qr.ok
        for kernel, r in got.items():
            act = np.abs(r.value.astype(np.float64) - truth).max(axis=1)[r.ok]
            ratio = r.error.astype(np.float64)[r.ok] / np.maximum(act, 1e-300)
            row[f"{kernel}_covered"] = float(np.mean(ratio >= 1))
            row[f"{kernel}_median_ratio"] = float(np.median(ratio))
        e_ne, e_qr = ne.error[both].astype(np.float64), qr.error[both]
        rel = np.abs(e_qr / e_ne - 1)
        row["error_rel_diff_max"] = float(np.max(rel))
        # predictions apart by more than 1e-3, and how many of those masks lie on
        # both sides of the residual's cond <= 512 rule (one kernel's estimate
        # above, the other's not)
        apart = rel > 1e-3
        side = (ne.cond[both] <= 512) != (qr.cond[both] <= 512)
        row["apart"], row["apart_straddle"] = (
            int(apart.sum()),
            int((apart & side).sum()),
        )
        scale = np.abs(ne.value[both]).max(axis=1)
        row["value_diff_max"] = float(
            np.max(np.abs(qr.value[both] - ne.value[both]).max(axis=1) / scale)
        )
        c = qr.cond[both].astype(np.float64) / ne.cond[both]
        row["cond_ratio_min"], row["cond_ratio_max"] = float(c.min()), float(c.max())
        rows.append(row)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masks", type=int, default=2000, help="requests per N")
    p.add_argument(
        "--responses", type=int, nargs="+", default=list(range(D, M + 1)), help="N"
    )
    a = p.parse_args(argv)
    if a.masks < 1:
        p.error(f"--masks must be at least 1, got {a.masks}")
    if not all(D <= n <= M for n in a.responses):
        p.error(f"--responses must lie in [D={D}, M={M}], got {a.responses}")
    print(
        "| answers | N | covered (semi-normal / QR / one-mask) | median ratio "
        "(semi-normal / QR / one-mask) | error, QR / semi-normal - 1, max | apart "
        "> 1e-3 (cond on both sides of 512) | value difference, max (relative) "
        "| cond, QR / semi-normal | ok agree |\n|---|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    for dtype in (jnp.bfloat16, jnp.float32):
        for r in compare(a.masks, dtype, a.responses):
            print(
                f"| {jnp.dtype(dtype).name} | {r['N']} | {r['ne_covered']:.4f} / "
                f"{r['qr_covered']:.4f} / {r['one_covered']:.4f} | "
                f"{r['ne_median_ratio']:.2f} / {r['qr_median_ratio']:.2f} / "
                f"{r['one_median_ratio']:.2f} | {r['error_rel_diff_max']:.1e} | "
                f"{r['apart']} ({r['apart_straddle']}) | "
                f"{r['value_diff_max']:.1e} | {r['cond_ratio_min']:.4f} to "
                f"{r['cond_ratio_max']:.4f} | {r['ok_agree']:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
