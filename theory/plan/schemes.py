"""Which scheme, which N: every scheme of the library on one workload and latency model.

For each scheme: the wait policy it is served with, its p99 latency from
:func:`codedjax.serving.simulate_latency` (the library's zero-overhead simulator on
the ``--latency`` model, ``scheme_requests`` requests), and its decoded error on
the responding sets that simulator reports, for payloads of the workload answered
in the worker dtype. A scheme with a knob N (the answers it waits for) is run at
the smallest N whose error meets the target with probability 1 - failure (the
one-sided Clopper-Pearson upper bound of the failure rate at most ``failure``),
found by bisection over N (assuming the failure rate falls as N grows); ChebyLS
uses the N of the plan's own ChebyLS table (its error model). The choice is the
lowest p99 among the schemes that meet the target. Equal resources: every scheme
gets the same M workers, except uncoded (K of them) and parity (K + K/k = M).

Workloads: ``polynomial``, f(x) = sum_{j=1..d} c_j x^j elementwise on x in
[-1, 1]^4 (random c_j, no constant term, so a degree-1 f is linear and a parity
model for it is exact); ``deep``, a random ReLU network 4 -> 16 -> 4, for which no
Lagrange, circle, random or parity code is exact.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import codedjax.bounds as cb
from codedjax import serving

from .config import SCHEMES as SCHEMES
from .config import WORKLOADS as WORKLOADS
from .config import PlanConfig, replication, selected, unit_roundoff

_P = 4  # payload width
_H = 16  # hidden width of the deep workload


class Workload:
    """The worker function in float64 numpy (complex too, for the circle code)."""

    def __init__(self, cfg: PlanConfig):
        rng = np.random.default_rng(cfg.seed + 7)
        self.kind = cfg.workload
        self.degree = cfg.degree
        if self.kind == "polynomial":
            self.coef = rng.uniform(0.5, 1.0, cfg.degree) * rng.choice(
                [-1, 1], cfg.degree
            )
        else:
            self.w1 = rng.normal(size=(_P, _H)) / math.sqrt(_P)
            self.w2 = rng.normal(size=(_H, _P)) / math.sqrt(_H)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "polynomial":
            return sum(c * x ** (j + 1) for j, c in enumerate(self.coef))
        return np.maximum(x @ self.w1, 0.0) @ self.w2

    def jnp_fn(self, x: jax.Array) -> jax.Array:
        if self.kind == "polynomial":
            return sum(c * x ** (j + 1) for j, c in enumerate(self.coef))
        return jnp.maximum(x @ self.w1, 0.0) @ self.w2


def _not_applicable(cfg: PlanConfig, name: str) -> str | None:
    """Why ``name`` cannot serve this workload on M workers (None: it can)."""
    m, k, d = cfg.workers, cfg.inputs, cfg.num_coeffs
    poly = cfg.workload == "polynomial"
    if name in ("chebyls", "threshold", "graceful", "circle") and not poly:
        return "does not apply: a Lagrange-type code needs a polynomial workload"
    if name in ("chebyls", "threshold", "circle") and m < d:
        return f"does not apply: M = {m} < D = {d}"
    if name in ("random", "parity") and not (poly and cfg.degree == 1):
        return "does not apply: exact only for a linear (degree-1) workload"
    if name in ("bacc", "nercc") and m < 2:
        return f"does not apply: M = {m} < 2"
    if name == "repapprox":
        c = replication(cfg)
        if c < 2:
            return f"does not apply: c = M // K = {c} < 2 replicas"
    if name == "parity":
        if m <= k or k % (m - k) or k // (m - k) < 2:
            return (
                f"does not apply: needs M = K + K/k for a group k >= 2 dividing "
                f"K = {k}, got M = {m}"
            )
    return None


def _code(cfg: PlanConfig, name: str, wl: Workload) -> Any:
    m, k, d = cfg.workers, cfg.inputs, cfg.degree
    if name == "uncoded":
        return cj.uncoded_code(num_inputs=k)
    if name == "replication":
        return cj.replication_code(num_inputs=k, num_workers=m)
    if name in ("chebyls", "threshold", "graceful"):
        kind = 1 if cfg.points == "first" else 2
        return cj.lagrange_code(
            num_inputs=k, num_workers=m, degree=d, decoder=name, kind=kind
        )
    if name == "bacc":
        return cj.bacc_code(num_inputs=k, num_workers=m)
    if name == "nercc":
        x = jax.random.uniform(jax.random.PRNGKey(cfg.seed), (16, k, _P), minval=-1)
        t = cj.tune_nercc(  # once per (K, M), at N = 3M/4 random responders
            jax.random.PRNGKey(cfg.seed + 1),
            wl.jnp_fn,
            x,
            num_workers=m,
            num_responses=max(2, (3 * m) // 4),
            num_masks=16,
        )
        return cj.nercc_code(
            num_inputs=k,
            num_workers=m,
            smoothing=(t.encoder_smoothing, t.decoder_smoothing),
        )
    if name == "repapprox":
        return cj.repapprox_code(
            num_inputs=k, num_workers=m, replication=replication(cfg)
        )
    if name == "circle":
        return cj.circle_code(num_inputs=k, num_workers=m, degree=d)
    if name == "random":
        return cj.random_code(num_inputs=k, num_workers=m, seed=cfg.seed)
    return cj.parity_code(num_inputs=k, group=k // (m - k), parity_error=0.0)


def _answers(code: Any, wl: Workload, x: np.ndarray, dtype: str):
    """Every worker's answer [B, M, ...] to inputs x [B, K, P], in the worker dtype:
    F on every query (a parity code's parity workers run F_P = F: exact for the
    linear workloads it serves); on (real, imaginary) pairs (``coded_shape`` (2,),
    the circle code) F in complex arithmetic."""
    enc = np.asarray(jax.vmap(code.encode)(jnp.asarray(x, jnp.float32)), np.float64)
    if tuple(code.coded_shape) == (2,):
        z = wl(enc[:, :, 0] + 1j * enc[:, :, 1])
        y = np.stack([z.real, z.imag], axis=2)
    else:
        y = wl(enc)
    return jnp.asarray(y, jnp.dtype(dtype))


def _errors(code, wl, cfg, masks, rng) -> np.ndarray:
    """Relative decode error (per unit of max |f(X)|) of each mask's request."""
    b = masks.shape[0]
    x = rng.uniform(-1.0, 1.0, (b, cfg.inputs, _P))
    truth = wl(x)
    y = _answers(code, wl, x, cfg.worker_dtype)
    r = jax.device_get(code.decode_batched(y, jnp.asarray(masks)))
    val = np.asarray(r.value, np.float64).reshape(truth.shape)
    err = np.abs(val - truth).reshape(b, -1).max(axis=1)
    err /= np.abs(truth).reshape(b, -1).max(axis=1)
    return np.where(np.asarray(r.ok), err, np.inf)


def _cp_upper(k: int, n: int, confidence: float) -> float:
    return cb.clopper_pearson(k, n, confidence=2.0 * confidence - 1.0)[1]


def _candidates(cfg: PlanConfig, name: str, code: Any, chebyls_n: int | None):
    """The N to try, in order, and the policy for each (None: the policy as is)."""
    if name == "uncoded":
        return [(cfg.inputs, serving.FixedN(cfg.inputs))]
    if name in ("replication", "parity"):
        return [(None, serving.FirstDecodable())]
    if name == "chebyls":
        return [] if chebyls_n is None else [(chebyls_n, serving.FixedN(chebyls_n))]
    if name == "threshold":
        return [(code.threshold, serving.FixedN(code.threshold))]
    lo = max(int(code.threshold), 1)
    return [(n, serving.FixedN(n)) for n in range(lo, cfg.workers + 1)]


def _evaluate(cfg, name, wl, code, injector, n, policy, ndec, rng, chebyls):
    """Latency and decoded error of ``code`` served with ``policy`` (N = n)."""
    sim = serving.simulate_latency(code, policy, injector, cfg.scheme_requests)
    if name == "chebyls":  # the plan's own error model chose this N (section 1)
        t = {r["N"]: r for r in chebyls["rows"]}[n]
        upper, fails, ndec = t["upper"], t["failures"], t["trials"]
        med, worst = t["median_error"], t["max_error"]
    else:
        err = _errors(code, wl, cfg, sim.masks[:ndec], rng)
        fails = int(np.sum(~(err <= cfg.target_error)))
        upper = _cp_upper(fails, ndec, cfg.confidence)
        med, worst = float(np.median(err)), float(np.max(err))
    ok_rate = float(np.mean(sim.ok))
    return {
        "N": n if n is not None else int(np.median(sim.num_used)),
        "policy": repr(policy),
        "workers": int(code.num_workers),
        "p50": float(np.quantile(sim.latency, 0.5)),
        "p99": float(np.quantile(sim.latency, 0.99)),
        "ok_rate": ok_rate,
        "decodes": int(ndec),
        "median_error": med,
        "max_error": worst,
        "failures": fails,
        "upper": float(upper),
        "meets": bool(upper <= cfg.failure and ok_rate >= 1 - cfg.failure),
    }


def scheme_row(
    cfg: PlanConfig, name: str, wl: Workload, injector, chebyls: dict | None
) -> dict[str, Any]:
    """One scheme's row: N, policy, p50/p99 latency, error, whether it meets."""
    why = _not_applicable(cfg, name)
    row: dict[str, Any] = {"scheme": name, "applies": why is None, "reason": why}
    if why is not None:
        return row
    try:
        code = _code(cfg, name, wl)
    except ValueError as err:  # a size the code's own constructor refuses
        row.update(applies=False, reason=f"does not apply: {err}")
        return row
    chosen_n = chebyls["chosen_N"] if chebyls else None
    cands = _candidates(cfg, name, code, chosen_n)
    if not cands:
        row.update(applies=False, reason="does not meet the target at any N <= M")
        return row
    rng = np.random.default_rng(cfg.seed + 11)
    # enough decodes that zero failures can show a rate below the failure level
    need = 1.5 * -math.log(1.0 - cfg.confidence) / cfg.failure
    ndec = min(cfg.scheme_requests, max(200, math.ceil(need)))

    def run(i: int) -> dict[str, Any]:
        n, policy = cands[i]
        return _evaluate(cfg, name, wl, code, injector, n, policy, ndec, rng, chebyls)

    # bisection for the smallest N that meets (the failure rate falls with N)
    lo, hi = 0, len(cands) - 1
    best = run(hi)
    if best["meets"]:
        while lo < hi:
            mid = (lo + hi) // 2
            r = run(mid)
            if r["meets"]:
                best, hi = r, mid
            else:
                lo = mid + 1
    n = cands[hi][0]
    row.update(best)
    if n is None:
        row["N"] = f"median {row['N']} (first replica of every input)"
    if not row["meets"] and len(cands) > 1:
        row["reason"] = "does not meet the target at any N <= M"
    return row


def scheme_table(cfg: PlanConfig, chebyls: dict | None) -> dict[str, Any]:
    """Every selected scheme's row, the choice and the ranking with reasons."""
    wl = Workload(cfg)
    injector = serving.Injector(latency=cj.parse_latency(cfg.latency), seed=cfg.seed)
    rows = [scheme_row(cfg, s, wl, injector, chebyls) for s in selected(cfg.schemes)]
    ok = sorted((r for r in rows if r.get("meets")), key=lambda r: r["p99"])
    choice = ok[0]["scheme"] if ok else None
    ranking = []
    for r in ok:
        ratio = r["p99"] / ok[0]["p99"]
        ranking.append(
            f"{r['scheme']}: p99 {r['p99'] * 1e3:.3g} ms"
            + ("" if r is ok[0] else f", {ratio:.3g}x {choice}'s at equal accuracy")
        )
    for r in rows:
        if not r.get("meets"):
            text = r["reason"] or "misses the target"
            if r.get("p99") is not None:
                text += (
                    f" (at N = {r['N']}: {r['failures']} of {r['decodes']} decodes "
                    f"over {cfg.target_error:g}, p99 {r['p99'] * 1e3:.3g} ms)"
                )
            ranking.append(f"{r['scheme']}: {text}")
    return {
        "workload": cfg.workload,
        "requests": cfg.scheme_requests,
        "unit_roundoff": unit_roundoff(cfg.worker_dtype),
        "rows": rows,
        "choice": choice,
        "ranking": ranking,
    }
