"""Section 3: first-kind, second-kind and equispaced points, Chebyshev against
monomial basis, at the threshold N = D."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj

from .. import _common as C
from .. import montecarlo as mc
from .conditions import key, stats
from .config import VerifyConfig

BASES = C.BASES


def basis_matrices(m: int, d: int) -> np.ndarray:
    """[5, M, D] full matrices in the order of ``BASES`` (float64)."""
    c1 = np.asarray(cj.chebyshev_points(m, kind=1, dtype=jnp.float64))
    c2 = np.asarray(cj.chebyshev_points(m, kind=2, dtype=jnp.float64))
    eq = np.linspace(1.0, -1.0, m)
    cheb = np.polynomial.chebyshev.chebvander
    mono = lambda x: np.vander(x, d, increasing=True)  # noqa: E731
    return np.stack(
        [cheb(c1, d - 1), cheb(c2, d - 1), cheb(eq, d - 1), mono(eq), mono(c1)]
    )


def points_comparison(
    cfg: VerifyConfig, progress: Callable[[int], object] | None, **plan_kw
) -> tuple[list[dict], list[dict]]:
    """cond(T_S) of random D-subsets for every point set and basis; one check per D."""
    rows, checks = [], []
    m = cfg.points_workers
    for d in cfg.points_coeffs:
        with jax.enable_x64(True):
            mats = jnp.asarray(basis_matrices(m, d))
        conds = mc.square_cond_monte_carlo(
            key(cfg.seed, 2, m, d),
            mats,
            num_coeffs=d,
            num_trials=cfg.points_trials,
            progress=progress,
            **plan_kw,
        )
        row = {"M": m, "D": d, "N": d, "trials": cfg.points_trials}
        for b, name in enumerate(BASES):
            row[name] = stats(conds[:, b])
        rows.append(row)
        med = {name: np.median(conds[:, b]) for b, name in enumerate(BASES)}
        checks.append(
            {
                "name": f"Chebyshev points+basis beat equispaced monomial "
                f"(median) M={m} D={d}",
                "kind": "claim",
                "M": m,
                "D": d,
                "cheb1": med[BASES[0]],
                "equispaced_monomial": med[BASES[3]],
                "holds": bool(med[BASES[0]] < med[BASES[3]]),
            }
        )
    return rows, checks
