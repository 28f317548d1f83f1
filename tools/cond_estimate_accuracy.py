"""How close the batched kernel's cond estimate is to the exact condition number.

The float32 batched ChebyLS kernel (``codedjax._lagrange_lsq.ne_decoding_matrices``)
reports an estimate of kappa, the 2-norm condition number of the equilibrated selected
rows, from two short Lanczos runs. This prints, per kind of points and number of
responders N, the distribution of estimate / exact (numpy, float64) over random
masks with kappa <= 512 (the masks the Lanczos estimate serves; the others go to the
QR tier): the median, the share within 1e-3, the 1% quantile, the smallest and the
largest ratio. The figures quoted in ``codedjax/_lagrange_lsq.py`` come from

    python tools/cond_estimate_accuracy.py [--masks 4096]

(under a minute on 2 cores).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj
from codedjax import _lagrange_lsq

K, M, D = 8, 40, 22


def _equilibrated(x, d):
    m = len(x)
    scale = np.r_[np.sqrt(1 / m), np.full(d - 1, np.sqrt(2 / m))]
    return npcheb.chebvander(x, d - 1) * scale


def ratios(kind: int, n: int, num_masks: int) -> np.ndarray:
    """estimate / exact over ``num_masks`` random masks with kappa <= 512."""
    alpha, beta = cj.chebyshev_points(M, kind=kind), cj.chebyshev_points(K)
    masks = np.asarray(
        cj.sample_masks(
            jax.random.key(n), num_workers=M, num_responses=n, shape=(num_masks,)
        )
    )
    _, _, cond, _ = jax.jit(
        lambda s: _lagrange_lsq.ne_decoding_matrices(s, alpha, beta, D, jnp.float32)
    )(jnp.asarray(masks))
    exact = np.linalg.cond(
        _equilibrated(np.asarray(alpha, np.float64), D)[None] * masks[:, :, None]
    )
    keep = exact <= 512
    return np.asarray(cond, np.float64)[keep] / exact[keep]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masks", type=int, default=4096)
    a = p.parse_args()
    if a.masks < 1:
        p.error(f"--masks must be at least 1, got {a.masks}")
    for kind in (1, 2):
        for n in (24, 26, 30, 34):
            r = ratios(kind, n, a.masks)
            print(
                f"kind {kind} N={n}: median {np.median(r):.4f}, within 1e-3 "
                f"{100 * np.mean(np.abs(r - 1) <= 1e-3):.1f}%, 1% quantile "
                f"{np.quantile(r, 0.01):.3f}, smallest {r.min():.3f}, largest "
                f"{r.max():.4f} ({r.size} masks)",
                flush=True,
            )


if __name__ == "__main__":
    main()
