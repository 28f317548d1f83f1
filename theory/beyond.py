r"""Candidate bounds for the practical range N >= M/2, checked against Monte Carlo.

    python -m theory.beyond [--workers 40] [--coeffs 13] [--eta 0.05] [--trials 4000]
    python -m theory.beyond --quick      # 500 trials

Every bound of :mod:`codedjax.bounds` is informative only within a few workers of
N = M at M = 40 (docs/theory.md section 12). This script tries the obvious candidates
for a bound that stays finite down to N = M/2 and prints, for every N, the measured
p95 of cond(U_S) next to:

- ``B``, ``C``, ``D``, ``gen``: the library's bounds at confidence 1 - eta;
- ``trace``: the per-set trace bound (1 - sum of the missing leverages)^{-1/2};
- ``gersh``: Gershgorin on the missing-row kernel K_miss (closed form, entries decay
  with the distance of the points): lambda_max <= max_a sum_b |K_ab|;
- ``cluster``: K_miss split into clusters of missing workers at most r apart (best
  r <= 6); lambda_max <= max over clusters of the cluster's exact lambda_max plus the
  spectral norm of the off-cluster part (Weyl's inequality);
- ``mom-p``: the moment bound P(lambda_max >= t) <= E tr(K_miss^p) / t^p with the
  expectation over the uniform missing set computed exactly (p = 2, 3, 4).

For the per-set candidates (trace, gersh, cluster) the column is the fraction of
sets where the candidate is finite, then the empirical p95 of the candidate (which a
proof would still have to bound); a candidate that is finite on fewer than 1 - eta of
the sets cannot give a finite bound at confidence 1 - eta. Each per-set candidate is
also checked to hold (>= the SVD's cond) on every trial.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import codedjax.bounds as cb
import runkit

_EPS = float(np.finfo(np.float64).eps)


@dataclasses.dataclass(frozen=True)
class BeyondConfig:
    """M workers, D coefficients, the confidence 1 - eta of the bounds, the number
    of random responding sets and their seed."""

    workers: int = 40
    coeffs: int = 13
    eta: float = 0.05
    trials: int = 4000
    seed: int = 0

    def __post_init__(self):
        fields = ("workers", "coeffs", "trials")
        runkit.check_fields("BeyondConfig", self, at_least=dict.fromkeys(fields, 1))
        if self.coeffs > self.workers:
            raise ValueError(
                f"BeyondConfig: coeffs must be at most workers = {self.workers} "
                f"(D <= M), got {self.coeffs}"
            )
        if not 0.0 < self.eta < 1.0:
            raise ValueError(f"BeyondConfig: eta must lie in (0, 1), got {self.eta}")

    @classmethod
    def quick(cls, **overrides: Any) -> BeyondConfig:
        """The ``--quick`` configuration: 500 trials."""
        return cls(**{"trials": 500, **overrides})


class BeyondSummary(TypedDict):
    """What :func:`run` returns: the configuration and one row per N."""

    config: dict[str, Any]
    rows: list[dict[str, Any]]
    environment: dict[str, Any]


def _u(m: int, d: int) -> np.ndarray:
    """U = T Lambda^{-1/2} at M first-kind points: orthonormal columns (float64)."""
    with jax.enable_x64(True):
        alpha = np.asarray(cj.chebyshev_points(m, kind=1, dtype=jnp.float64))
    scale = np.full(d, math.sqrt(2.0 / m))
    scale[0] = math.sqrt(1.0 / m)
    return np.polynomial.chebyshev.chebvander(alpha, d - 1) * scale


def _from_lam(lam: float) -> float:
    return 1.0 / math.sqrt(1.0 - lam) if lam < 1.0 else math.inf


def _cluster_bound(kmat: np.ndarray, miss: np.ndarray, r: int) -> float:
    """Weyl: clusters of missing workers at most r apart, plus ||off-cluster||_2."""
    labels = np.concatenate([[0], np.cumsum(np.diff(miss) > r)])
    lam = 0.0
    off = kmat.copy()
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        lam = max(lam, float(np.linalg.eigvalsh(kmat[np.ix_(idx, idx)])[-1]))
        off[np.ix_(idx, idx)] = 0.0
    return lam + float(np.abs(np.linalg.eigvalsh(off)).max())


def moment_bound(m: int, d: int, s: int, eta: float, p: int) -> float:
    """(1 - t)^{-1/2} with E tr(K_miss^p) / t^p = eta, E over uniform s-subsets."""
    if s == 0:
        return 1.0
    t = (expected_trace_power(m, d, s, p) / eta) ** (1.0 / p)
    return _from_lam(t)


def expected_trace_power(m: int, d: int, s: int, p: int) -> float:
    """E tr(K_miss^p) over a uniformly random set of s missing workers (p = 2, 3).

    tr(K_miss^p) sums K_{a1 a2} K_{a2 a3} ... K_{ap a1} over index tuples of missing
    workers; a tuple with j distinct indices is all-missing with probability
    C(M - j, s - j) / C(M, s), so the expectation is a weighted sum over all tuples.
    """
    if p not in (2, 3):
        raise ValueError(f"expected_trace_power: p must be 2 or 3, got {p}")
    u = _u(m, d)
    k = u @ u.T  # [M, M], K_miss is its principal submatrix on the missing rows
    q = [math.comb(m - j, s - j) / math.comb(m, s) if j <= s else 0.0 for j in range(5)]
    if p == 2:
        diag = np.sum(np.diag(k) ** 2)
        total = q[1] * diag + q[2] * (np.sum(k * k) - diag)
    else:
        idx = np.arange(m)
        total = 0.0
        # sum over index tuples (a_1..a_p) of prod K_{a_i a_{i+1}}, weighted by the
        # probability that all distinct indices are missing
        for tup in itertools.product(range(m), repeat=p - 1):
            # the last index runs vectorised
            chain = list(tup)
            val = 1.0
            for a, b in zip(chain[:-1], chain[1:], strict=False):
                val *= k[a, b]
            prod = val * k[chain[-1], idx] * k[idx, chain[0]]
            distinct = np.array([len(set(chain) | {j}) for j in range(m)])
            total += float(np.sum(prod * np.take(q, distinct)))
    return float(total)


def run(cfg: BeyondConfig) -> BeyondSummary:
    """Every candidate at every N from max(D, M/2) to M (asserted to hold per set)."""
    rows = candidate_rows(cfg.workers, cfg.coeffs, cfg.eta, cfg.trials, cfg.seed)
    return {
        "config": dataclasses.asdict(cfg),
        "rows": rows,
        "environment": runkit.environment(),
    }


def candidate_rows(m: int, d: int, eta: float, trials: int, seed: int) -> list[dict]:
    """The rows of :func:`run`: measured p95, the library's bounds, the candidates."""
    u = _u(m, d)
    kfull = u @ u.T
    lev = np.diag(kfull)
    rng = np.random.default_rng(seed)
    ranks = np.argsort(np.argsort(rng.random((trials, m)), axis=1), axis=1)
    rows = []
    for n in range(max(d, m // 2), m + 1):
        s = m - n
        masks = ranks < n
        sv = np.linalg.svd(
            np.broadcast_to(u, (trials, m, d))[masks].reshape(trials, n, d),
            compute_uv=False,
        )
        cond = sv[:, 0] / sv[:, -1]
        cands = {"trace": [], "gersh": [], "cluster": []}
        for t in range(trials):
            miss = np.flatnonzero(~masks[t])
            if s == 0:
                for v in cands.values():
                    v.append(1.0)
                continue
            km = kfull[np.ix_(miss, miss)]
            cands["trace"].append(_from_lam(float(lev[miss].sum())))
            cands["gersh"].append(_from_lam(float(np.abs(km).sum(axis=1).max())))
            best = min(_cluster_bound(km, miss, r) for r in range(1, 7))
            cands["cluster"].append(_from_lam(best))
        row = {
            "N": n,
            "s": s,
            "p95": float(np.sort(cond)[math.ceil((1 - eta) * trials) - 1]),
        }
        kw = dict(num_workers=m, num_coeffs=d, num_responses=n)
        row["B"] = cb.deterministic_condition_bound(**kw)
        row["C"] = cb.missing_rows_condition_bound(**kw, eta=eta)
        row["D"] = cb.gap_condition_bound_probabilistic(**kw, eta=eta)
        row["gen"] = cb.sampling_condition_bound(**kw, eta=eta)
        # a candidate (1 - lambda)^{-1/2} computed from lambda near 1 carries the
        # relative error ~ M eps / (1 - lambda) ~ M eps cond^2 of 1 - lambda (at
        # M = 20, D = 7 a tight cluster bound fell 3e-9 below cond = 2815)
        tol = np.maximum(1e-9, 8.0 * m * d * _EPS * cond**2)
        for name, vals in cands.items():
            v = np.array(vals)
            assert np.all(v >= cond * (1 - tol)), f"{name} violated at N={n}"
            row[name + "_finite"] = float(np.mean(np.isfinite(v)))
            row[name + "_p95"] = float(np.sort(v)[math.ceil((1 - eta) * v.size) - 1])
        row["mom2"] = moment_bound(m, d, s, eta, 2)
        row["mom3"] = moment_bound(m, d, s, eta, 3) if m <= 64 else math.nan
        rows.append(row)
    return rows


def _g(x: float) -> str:
    return "inf" if x == math.inf else f"{x:.3g}"


def table(rows: list[dict]) -> str:
    """The printed markdown table."""
    cols = ["N", "s", "p95", "B", "C", "D", "gen", "mom2", "mom3"]
    per = ["trace", "gersh", "cluster"]
    head = cols + [f"{c} fin/p95" for c in per]
    cells = [
        [r["N"], r["s"], *(_g(r[c]) for c in cols[2:])]
        + [f"{r[c + '_finite']:.2f} / {_g(r[c + '_p95'])}" for c in per]
        for r in rows
    ]
    return "\n".join(runkit.md_table(head, cells))


FLAGS = {
    "workers": ("--workers", {"help": "M (default 40)"}),
    "coeffs": ("--coeffs", {"help": "D (default 13)"}),
    "eta": "--eta",
    "trials": ("--trials", {"help": "default 4000 (--quick: 500)"}),
}


def _run(cfg: BeyondConfig, cmd: runkit.Invocation) -> BeyondSummary:
    summary = run(cfg)
    text = table(summary["rows"])
    head = "# Candidate bounds beyond N = M / 2\n\n"
    runkit.write_report(cmd.out, summary, head + text + "\n")
    cmd.write_page(title="Candidate bounds beyond N = M / 2", body=text)
    print(text)
    return summary


def main(argv: Sequence[str] | None = None) -> BeyondSummary:
    """Command-line entry point; prints the table and returns the summary."""
    return runkit.main(
        BeyondConfig, _run, argv, prog="python -m theory.beyond", description=__doc__,
        flags=FLAGS, out="results/beyond", quick="BeyondConfig.quick(): 500 trials",
    )  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    main()
