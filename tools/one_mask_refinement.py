"""How many refinement steps the one-mask semi-normal decode needs, on this CPU.

The one-mask ChebyLS decode (and the circle and random codes' least squares) in
float32 solves the corrected semi-normal equations and refines its decoding
matrix through the rows, ``codedjax._basis_lsq.REFINEMENT_STEPS`` times
(docs/decoding.md). For 1 and 2 steps this prints, against the Householder QR
route of the same decoder (``exact_cond=True``) and the float64 least squares of
the same float32 answers:

* the mask of ``tests/test_edge_inputs.py``'s edge-of-range test (M = 40, K = 8,
  D = 22, N = 30, cond about 374): each route's error, the prediction and cond;
* a sweep of random masks (N = 26, 27, 28, 30; ``--masks`` each, three payloads):
  per cond bucket, the one-mask error over the QR route's (median and largest)
  and the largest error over its own prediction (above 1: not covered); and the
  same for the batched kernel (``chebyls_decode_batched`` of each N's masks at
  once: with 16 or more masks its semi-normal kernel, which keeps one step).

The payloads are Chebyshev series of degree D - 1 (exact polynomials), rounded
once to float32. Results depend on the CPU (its BLAS and XLA's kernels); the
figures in docs/decoding.md come from

    python -m tools.one_mask_refinement

(about 15 s on 2 cores).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax import _basis_lsq
from runkit import environment

M, K, D = 40, 8, 22
BUCKETS = ((0, 50), (50, 150), (150, 300), (300, 512), (512, np.inf))


ALPHA, BETA = cj.chebyshev_points(M), cj.chebyshev_points(K)
T = np.polynomial.chebyshev.chebvander(np.asarray(ALPHA, np.float64), D - 1)
TB = np.polynomial.chebyshev.chebvander(np.asarray(BETA, np.float64), D - 1)


def _payload(seed: int):
    """float32 answers of a Chebyshev series of degree D - 1 and its float64
    values at the data points."""
    c = np.asarray(jax.random.normal(jax.random.key(seed), (D, 4)), np.float64)
    return (T @ c).astype(np.float32), TB @ c


def _decode(y, mask, exact):
    return cj.chebyls_decode(y, mask, ALPHA, BETA, num_coeffs=D, exact_cond=exact)


@jax.jit
def _each_mask(y, masks):
    """The one-mask decode and the QR route of every mask, one program (a
    ``lax.map``: each mask through the one-mask kernel, not the batched one)."""
    return jax.lax.map(lambda m: (_decode(y, m, False), _decode(y, m, True)), masks)


def _errors(r, ref) -> np.ndarray:
    """Largest absolute error of each decode in ``r`` (leading axis: masks)."""
    v = np.asarray(r.value, np.float64)
    return np.abs(v - ref).reshape(v.shape[0], -1).max(axis=1)


def edge_mask() -> None:
    y, ref = _payload(0)
    masks = cj.sample_masks(
        jax.random.key(1), num_workers=M, num_responses=30, shape=(2,)
    )[:1]
    r, q = _each_mask(jnp.asarray(y), masks)
    mk = np.asarray(masks[0])
    c64 = np.linalg.lstsq(T[mk], y[mk].astype(np.float64), rcond=None)[0]
    print(
        f"  edge mask: cond {float(q.cond[0]):.0f}; error one-mask "
        f"{_errors(r, ref)[0]:.3g} (predicted {float(r.error[0]):.3g}), QR route "
        f"{_errors(q, ref)[0]:.3g}, float64 lstsq of the float32 answers "
        f"{np.abs(TB @ c64 - ref).max():.3g}"
    )


def sweep(num_masks: int, with_batched: bool) -> None:
    """Columns: the QR route's cond, the error, the QR route's error, the
    prediction; for the one-mask decode and (``with_batched``) the batched one."""
    rows, batched = [], []
    for n in (26, 27, 28, 30):
        for seed in range(3):
            y, ref = _payload(seed)
            y = jnp.asarray(y)
            key = jax.random.key(100 + seed + n)
            masks = cj.sample_masks(
                key, num_workers=M, num_responses=n, shape=(num_masks,)
            )
            r, q = _each_mask(y, masks)
            cond, e_qr = np.asarray(q.cond, np.float64), _errors(q, ref)
            rows.append(np.stack([cond, _errors(r, ref), e_qr, r.error], axis=1))
            if with_batched:
                b = cj.chebyls_decode_batched(y, masks, ALPHA, BETA, num_coeffs=D)
                batched.append(np.stack([cond, _errors(b, ref), e_qr, b.error], 1))
    for label, got in (("one-mask", rows), ("batched", batched)):
        if not got:
            continue
        a = np.concatenate(got)
        for lo, hi in BUCKETS:
            s = (a[:, 0] >= lo) & (a[:, 0] < hi)
            if not s.any():
                continue
            ratio, cover = a[s, 1] / a[s, 2], a[s, 1] / a[s, 3]
            print(
                f"  {label}, cond [{lo:g}, {hi:g}): {int(s.sum())} masks; error / "
                f"QR route's median {np.median(ratio):.2f}, largest "
                f"{ratio.max():.2f}; largest error / predicted {cover.max():.2f}"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.one_mask_refinement",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("--masks", type=int, default=64, help="masks per N and payload")
    args = p.parse_args(argv)
    if args.masks < 1:
        p.error(f"--masks must be at least 1, got {args.masks}")
    env = environment()
    print(f"CPU: {env['device_name']}; jax {env['jax_version']}")
    default = _basis_lsq.REFINEMENT_STEPS
    try:
        for steps in (1, 2):
            _basis_lsq.REFINEMENT_STEPS = steps
            jax.clear_caches()  # the programs are traced again with this count
            print(f"{steps} refinement step(s):")
            edge_mask()
            sweep(args.masks, with_batched=steps == 1)  # its kernel: one step
    finally:
        _basis_lsq.REFINEMENT_STEPS = default
        jax.clear_caches()


if __name__ == "__main__":
    main()
