"""Which scheme, which N: the catalogue's schemes on one workload and latency model.

The schemes, whether each applies (or why not), their codes, wait policies and
service times are :func:`codedjax.catalogue`'s for the workload (:func:`workload`),
K and M. Each is served by :func:`codedjax.serving.simulate_latency` on the
``--latency`` model (``scheme_requests`` requests; a worker doing
``service_scale`` real evaluations per request, the circle code's two, takes the
model's shift plus that many times the rest of its draw, the rule of
:meth:`codedjax.serving.Injector.plan_one`), its decoded error measured on the
responding sets the simulator reports, for payloads of the workload answered in
the worker dtype. A scheme served at a tuned N runs at the smallest N (bisection)
whose one-sided Clopper-Pearson upper bound of the failure rate is at most
``failure``; ChebyLS at the N of the plan's ChebyLS table. The choice is the
lowest p99 among the schemes that meet the target.

The plan's knobs and rules: the Chebyshev kind of ``--points``; NeRCC's smoothing
tuned once per (K, M) on the workload; RepApprox with c = ``--replication``
(default M // K) served only with c >= 2; equal resources: every scheme gets the M
workers but uncoded (K) and ParM, served with the group size k that fills M = K +
K/k. Workloads: ``polynomial``, f(x) = sum_{j=1..d} c_j x^j elementwise on x in
[-1, 1]^4 (random c_j, no constant term: degree 1 is linear), and ``deep``, a
random ReLU network 4 -> 16 -> 4.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax import serving
from runkit.stats import max_rel_err, percentile

from .config import PlanConfig, replication, selected, unit_roundoff
from .tables import cp_upper

__all__ = ["plan_schemes", "scheme_row", "scheme_table", "workload"]

_P = 4  # payload width
_H = 16  # hidden width of the deep workload


def _polynomial(coef: np.ndarray, x):
    """sum_j coef[j] x^(j+1) elementwise (numpy, complex numpy or jax x)."""
    return sum(c * x ** (j + 1) for j, c in enumerate(coef))


def _relu_net(xp, weights: tuple[np.ndarray, np.ndarray], x):
    """relu(x W1) W2 with ``xp`` numpy or jax.numpy."""
    w1, w2 = weights
    return xp.maximum(x @ w1, 0.0) @ w2


def workload(cfg: PlanConfig) -> cj.Workload:
    """The plan's workload (``cfg.workload``, seeded ``cfg.seed + 7``): ``fn`` in
    jax, ``truth`` in float64 numpy (complex input too, for the circle code),
    ``params`` the coefficients or the ReLU net's weights."""
    rng = np.random.default_rng(cfg.seed + 7)
    if cfg.workload == "polynomial":
        d = cfg.degree
        coef = rng.uniform(0.5, 1.0, d) * rng.choice([-1, 1], d)
        f = functools.partial(_polynomial, coef)
        return cj.Workload(
            "polynomial", d, linear=d == 1, fn=f, truth=f, params=coef,
            description=f"sum_j c_j x^j, j = 1..{d}, elementwise on [-1, 1]^{_P}",
        )  # fmt: skip
    w = (
        rng.normal(size=(_P, _H)) / math.sqrt(_P),
        rng.normal(size=(_H, _P)) / math.sqrt(_H),
    )
    return cj.Workload(
        "deep", None, fn=functools.partial(_relu_net, jnp, w),
        truth=functools.partial(_relu_net, np, w), params=w,
        description=f"a ReLU network {_P} -> {_H} -> {_P}",
    )  # fmt: skip


def _nercc_smoothing(cfg: PlanConfig, wl: cj.Workload) -> tuple[float, float]:
    """NeRCC's smoothing pair, tuned on the workload at N = 3M/4 random responders
    (:func:`codedjax.tune_nercc`)."""
    m, k, key = cfg.workers, cfg.inputs, jax.random.PRNGKey
    x = jax.random.uniform(key(cfg.seed), (16, k, _P), minval=-1)
    n = max(2, (3 * m) // 4)
    t = cj.tune_nercc(key(cfg.seed + 1), wl.fn, x, num_workers=m, num_responses=n,
                      num_masks=16)  # fmt: skip
    return (t.encoder_smoothing, t.decoder_smoothing)


def plan_schemes(
    cfg: PlanConfig, wl: cj.Workload, names: tuple[str, ...]
) -> dict[str, cj.Scheme]:
    """The catalogue's entry for each of ``names`` at K = ``cfg.inputs``, M =
    ``cfg.workers``, in its order, with the plan's knobs and rules (above)."""
    k, m = cfg.inputs, cfg.workers
    if k > m:
        why = f"does not apply: K = {k} inputs on M = {m} < K workers"
        return {n: cj.Scheme(n, "", reason=why) for n in cj.SCHEME_NAMES if n in names}
    tune = "nercc" in names and m >= 2
    smoothing = _nercc_smoothing(cfg, wl) if tune else (1e-4, 1e-3)
    c = replication(cfg)
    entries = cj.catalogue(
        wl, k, m, worker_dtype=cfg.worker_dtype, names=names, replicas=max(c, 1),
        nercc_smoothing=smoothing, kind=1 if cfg.points == "first" else 2,
        seed=cfg.seed,
    )  # fmt: skip
    out: dict[str, cj.Scheme] = {}
    for s in entries:
        if s.family == "parity":
            if "parity" in out:
                continue
            group = [p for p in entries if p.family == "parity"]
            fits = [p for p in group if p.applies and p.workers == m]
            if fits:
                s = fits[0]
            elif s.applies:
                used = ", ".join(str(p.workers) for p in group)
                s = cj.Scheme("parity", "parity", reason=(
                    f"does not apply: the group sizes that fit occupy K + K/k = "
                    f"{used} workers, not M = {m} (equal resources)"
                ))  # fmt: skip
            out["parity"] = s
            continue
        if s.family == "repapprox" and s.applies and c < 2:
            s = dataclasses.replace(
                s, code=None, reason=f"does not apply: c = {c} < 2 replicas"
            )
        out[s.name] = s
    return out


def _errors(code, wl, cfg, masks, rng) -> np.ndarray:
    """Relative decode error (per unit of max |f(X)|) of each mask's request, the
    workers answering F in the worker dtype (a parity worker F_P = F; the circle
    code's (real, imaginary) pairs, ``coded_shape`` (2,), F in complex arithmetic)."""
    x = rng.uniform(-1.0, 1.0, (masks.shape[0], cfg.inputs, _P))
    truth = wl.truth(x)
    enc = np.asarray(jax.vmap(code.encode)(jnp.asarray(x, jnp.float32)), np.float64)
    if tuple(code.coded_shape) == (2,):
        z = wl.truth(enc[:, :, 0] + 1j * enc[:, :, 1])
        ans = np.stack([z.real, z.imag], axis=2)
    else:
        ans = wl.truth(enc)
    y = jnp.asarray(ans, jnp.dtype(cfg.worker_dtype))
    r = jax.device_get(code.decode_batched(y, jnp.asarray(masks)))
    val = np.asarray(r.value, np.float64).reshape(truth.shape)
    return np.where(np.asarray(r.ok), max_rel_err(val, truth), np.inf)


@dataclasses.dataclass(frozen=True)
class _Busier:
    """An injector's draws for a worker doing ``scale`` real evaluations per
    request: the latency model's shift once, ``scale`` times the rest of a draw
    (what :func:`codedjax.serving.simulate_latency` asks of an injector: ``plan``)."""

    base: serving.Injector
    scale: float

    def plan(self, request_ids, num_workers):
        d, f = self.base.plan(request_ids, num_workers)
        s = serving.latency_shift(self.base.latency)
        return s + self.scale * (d - s), f


def _candidates(cfg: PlanConfig, s: cj.Scheme, chebyls_n: int | None):
    """The N to try, in order, and the policy for each (None: the policy as is)."""
    if s.name == "chebyls":
        return [] if chebyls_n is None else [(chebyls_n, serving.FixedN(chebyls_n))]
    if s.policy == "first":
        return [(None, serving.FirstDecodable())]
    if s.policy == "threshold":
        return [(s.min_responses, serving.FixedN(s.min_responses))]
    lo = max(s.min_responses, 1)
    return [(n, serving.FixedN(n)) for n in range(lo, s.workers + 1)]


def _evaluate(cfg, s, wl, injector, n, policy, ndec, rng, chebyls):
    """Latency and decoded error of scheme ``s`` served with ``policy`` (N = n)."""
    if s.service_scale != 1:
        injector = _Busier(injector, float(s.service_scale))
    sim = serving.simulate_latency(s.code, policy, injector, cfg.scheme_requests)
    if s.name == "chebyls":  # the plan's own error model chose this N (section 1)
        t = {r["N"]: r for r in chebyls["rows"]}[n]
        upper, fails, ndec = t["upper"], t["failures"], t["trials"]
        med, worst = t["median_error"], t["max_error"]
    else:
        err = _errors(s.code, wl, cfg, sim.masks[:ndec], rng)
        fails = int(np.sum(~(err <= cfg.target_error)))
        upper = cp_upper(fails, ndec, cfg.confidence)
        med, worst = float(np.median(err)), float(np.max(err))
    ok_rate = float(np.mean(sim.ok))
    return {
        "N": n if n is not None else int(np.median(sim.num_used)),
        "policy": repr(policy),
        "workers": s.workers,
        "service_scale": s.service_scale,
        "p50": percentile(sim.latency, 50),
        "p99": percentile(sim.latency, 99),
        "ok_rate": ok_rate,
        "decodes": int(ndec),
        "median_error": med,
        "max_error": worst,
        "failures": fails,
        "upper": float(upper),
        "meets": bool(upper <= cfg.failure and ok_rate >= 1 - cfg.failure),
    }


def scheme_row(
    cfg: PlanConfig, s: cj.Scheme, wl: cj.Workload, injector, chebyls: dict | None
) -> dict[str, Any]:
    """One scheme's row: N, policy, p50/p99 latency, error, whether it meets."""
    row: dict[str, Any] = {"scheme": s.name, "applies": s.applies, "reason": s.reason}
    if not s.applies:
        return row
    cands = _candidates(cfg, s, chebyls["chosen_N"] if chebyls else None)
    if not cands:
        row.update(applies=False, reason="does not meet the target at any N <= M")
        return row
    rng = np.random.default_rng(cfg.seed + 11)
    # enough decodes that zero failures can show a rate below the failure level
    need = 1.5 * -math.log(1.0 - cfg.confidence) / cfg.failure
    ndec = min(cfg.scheme_requests, max(200, math.ceil(need)))

    def run(i: int) -> dict[str, Any]:
        n, policy = cands[i]
        return _evaluate(cfg, s, wl, injector, n, policy, ndec, rng, chebyls)

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
    row.update(best)
    if cands[hi][0] is None:
        row["N"] = f"median {row['N']} (first replica of every input)"
    if not row["meets"] and len(cands) > 1:
        row["reason"] = "does not meet the target at any N <= M"
    return row


def scheme_table(cfg: PlanConfig, chebyls: dict | None) -> dict[str, Any]:
    """Every selected scheme's row, the choice and the ranking with reasons."""
    wl = workload(cfg)
    injector = serving.Injector(latency=cj.parse_latency(cfg.latency), seed=cfg.seed)
    schemes = plan_schemes(cfg, wl, selected(cfg.schemes))
    rows = [scheme_row(cfg, s, wl, injector, chebyls) for s in schemes.values()]
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
