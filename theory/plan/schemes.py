"""Which scheme, which layout, which N: the catalogue's schemes on one workload
and latency model.

The schemes, whether each applies (or why not), their codes, wait policies and
service times are :func:`codedjax.catalogue`'s for the workload (:func:`workload`),
K and M, with their systematic variants. Each is searched over its layouts as
:func:`runkit.choice.cell_layouts` prunes them (the rule the regime map shares:
K' = K and K/2 queries per group, M' the most workers a group may have, G = M // M'
groups that serve the K queries together; replication, ParM at its smallest group
size that fits, uncoded and layer-wise coding whole) and, per layout, every N from
the fewest answers that answer every query (:func:`runkit.choice.full_answers`) to
M' (a threshold code at its threshold, a first-decodable one at its first
decodable moment). A candidate is served by
:func:`codedjax.serving.simulate_latency` on the ``--latency`` model
(``scheme_requests`` requests; each group on its own workers of the M, a worker
doing ``service_scale`` real evaluations per request, the circle code's two,
takes the model's shift plus that many times the rest of its draw:
:func:`runkit.choice.simulate_layout`); its latency is per query (each query
answered at its own worker's answer or at the decode that gives it), its decoded
error measured on the responding sets the simulator reports, for requests of K
queries of the workload answered in the worker dtype. A candidate meets the target
when the one-sided Clopper-Pearson upper bound of its failure rate is at most
``failure``; ChebyLS on the whole cell (K' = K, not systematic) runs at the N of
the plan's ChebyLS table. Each scheme's row is its candidate with the lowest
per-query p99 that meets the target (ties: the least work per query), found
lazily in that order (:func:`runkit.choice.first_meeting`), and the choice is the
lowest of those rows (:func:`runkit.choice.choose`: the regime map's rule).

The plan's knobs: the Chebyshev kind of ``--points``; NeRCC's smoothing tuned once
per (K, M) on the workload (used at every layout); RepApprox with c =
``--replication`` (default M // K). Workloads: ``polynomial``, f(x) = sum_{j=1..d}
c_j x^j elementwise on x in [-1, 1]^4 (random c_j, no constant term: degree 1 is
linear), and ``deep``, a random ReLU network 4 -> 16 -> 4.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax import serving
from runkit.choice import (
    cell_layouts,
    first_meeting,
    full_answers,
    layout_fields,
    ranked,
    simulate_layout,
)
from runkit.stats import max_rel_err, percentile

from .config import PlanConfig, replication, selected, unit_roundoff
from .tables import cp_upper

__all__ = ["plan_layouts", "scheme_row", "scheme_table", "workload"]

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


def plan_layouts(
    cfg: PlanConfig, wl: cj.Workload, names: tuple[str, ...]
) -> tuple[dict[str, list[cj.Layout]], dict[str, str]]:
    """The layouts searched for each of ``names`` at K = ``cfg.inputs``, M =
    ``cfg.workers`` (:func:`runkit.choice.cell_layouts` with the plan's knobs), and
    the catalogue's reason for each scheme without one; both in the catalogue's
    order."""
    k, m = cfg.inputs, cfg.workers
    if k > m:
        why = f"does not apply: K = {k} inputs on M = {m} < K workers"
        return {}, {n: why for n in cj.SCHEME_NAMES if n in names}
    tune = "nercc" in names and m >= 2 and k >= 2
    smoothing = _nercc_smoothing(cfg, wl) if tune else (1e-4, 1e-3)
    return cell_layouts(
        wl, k, m, names, worker_dtype=cfg.worker_dtype,
        replicas=max(replication(cfg), 1), nercc_smoothing=smoothing,
        kind=1 if cfg.points == "first" else 2, seed=cfg.seed,
    )  # fmt: skip


def _errors(code, wl, cfg, masks, x) -> np.ndarray:
    """Relative decode error (per unit of max |f(X)|) of each request x [B, K, P]
    whose groups of K' queries answer with masks [B n, M'], the workers answering
    F in the worker dtype (a parity worker F_P = F; the circle code's (real,
    imaginary) pairs, ``coded_shape`` (2,), F in complex arithmetic); inf where a
    group's decode is not ok."""
    b = x.shape[0]
    xg = x.reshape(masks.shape[0], -1, x.shape[-1])
    truth = wl.truth(x)
    enc = np.asarray(jax.vmap(code.encode)(jnp.asarray(xg, jnp.float32)), np.float64)
    if tuple(code.coded_shape) == (2,):
        z = wl.truth(enc[:, :, 0] + 1j * enc[:, :, 1])
        ans = np.stack([z.real, z.imag], axis=2)
    else:
        ans = wl.truth(enc)
    y = jnp.asarray(ans, jnp.dtype(cfg.worker_dtype))
    r = jax.device_get(code.decode_batched(y, jnp.asarray(masks)))
    val = np.asarray(r.value, np.float64).reshape(truth.shape)
    ok = np.asarray(r.ok).reshape(b, -1).all(axis=1)
    return np.where(ok, max_rel_err(val, truth), np.inf)


def _candidates(lay: cj.Layout, chebyls_n: int | None, whole: bool):
    """The N to try on a layout, in order, and the policy for each."""
    s = lay.scheme
    if s.name == "chebyls" and whole:
        return [] if chebyls_n is None else [(chebyls_n, serving.FixedN(chebyls_n))]
    if s.policy == "first":
        return [(None, serving.FirstDecodable())]
    if s.policy == "threshold":
        return [(s.min_responses, serving.FixedN(s.min_responses))]
    lo = max(s.min_responses, full_answers(lay.code))  # every query answered
    return [(n, serving.FixedN(n)) for n in range(lo, lay.group_workers + 1)]


def _simulate(cfg, lay, n, policy, injector, shift) -> dict[str, Any]:
    """A candidate: the layout at N = n simulated, its per-query latency."""
    sim = simulate_layout(lay, policy, injector, cfg.scheme_requests,
                          num_inputs=cfg.inputs, shift=shift)  # fmt: skip
    per_request = sim.query.reshape(sim.query.shape[0], -1).max(axis=1)
    return {
        **layout_fields(lay),
        "N": n if n is not None else int(np.median(sim.masks.sum(axis=-1))),
        "first": n is None,
        "policy": repr(policy),
        "workers": lay.group_workers,
        "p50": sim.percentile(50),
        "p99": sim.percentile(99),
        "request_p99": percentile(per_request, 99),
        "ok_rate": float(np.mean(sim.ok)),
        "_sim": sim,
        "_layout": lay,
    }


def scheme_row(
    cfg: PlanConfig,
    name: str,
    layouts: list[cj.Layout],
    wl: cj.Workload,
    injector,
    chebyls: dict | None,
) -> dict[str, Any]:
    """One scheme's row: its best layout and N (see the module docstring), its
    per-query p50/p99, its error and whether it meets the target; ``tried``
    lists the candidates judged."""
    row: dict[str, Any] = {"scheme": name, "applies": True, "reason": None}
    shift = serving.latency_shift(injector.latency)
    k = cfg.inputs
    # enough decodes that zero failures can show a rate below the failure level
    need = 1.5 * -math.log(1.0 - cfg.confidence) / cfg.failure
    ndec = min(cfg.scheme_requests, max(200, math.ceil(need)))
    x = np.random.default_rng(cfg.seed + 11).uniform(-1.0, 1.0, (ndec, k, _P))
    cheb_n = chebyls["chosen_N"] if chebyls else None
    streams = []
    for lay in layouts:
        whole = lay.group_inputs == k and lay.scheme.name == "chebyls"
        streams.append([
            functools.partial(_simulate, cfg, lay, n, pol, injector, shift)
            for n, pol in _candidates(lay, cheb_n, whole)
        ])  # fmt: skip

    def meets(c: dict) -> bool:
        lay, sim = c["_layout"], c["_sim"]
        if lay.scheme.name == "chebyls" and lay.group_inputs == k and chebyls:
            t = {r["N"]: r for r in chebyls["rows"]}[c["N"]]  # the table's N
            upper, fails, nd = t["upper"], t["failures"], t["trials"]
            med, worst = t["median_error"], t["max_error"]
        else:
            ng = sim.masks.shape[1]
            err = _errors(lay.code, wl, cfg, sim.request_masks(ndec * ng), x)
            fails = int(np.sum(~(err <= cfg.target_error)))
            upper, nd = cp_upper(fails, ndec, cfg.confidence), ndec
            med, worst = float(np.median(err)), float(np.max(err))
        c.update(decodes=int(nd), median_error=med, max_error=worst,
                 failures=fails, upper=float(upper))  # fmt: skip
        c["meets"] = bool(upper <= cfg.failure and c["ok_rate"] >= 1 - cfg.failure)
        return c["meets"]

    best, tried = first_meeting(streams, meets)
    if not tried:
        row.update(applies=False, reason="does not meet the target at any N <= M")
        return row
    if best is None:  # the closest: fewest failures, then the lowest p99
        best = min(tried, key=lambda c: (c["failures"], c["p99"]))
        row["reason"] = "does not meet the target at any layout and N searched"
    row.update({key: v for key, v in best.items() if not key.startswith("_")})
    if best["first"]:
        row["N"] = f"median {row['N']} (first decodable)"
    row["tried"] = [
        {"layout": c["layout"], "N": c["N"], "p99": c["p99"], "meets": c["meets"]}
        for c in tried
    ]
    return row


def scheme_table(cfg: PlanConfig, chebyls: dict | None) -> dict[str, Any]:
    """Every selected scheme's row, the choice and the ranking with reasons."""
    wl = workload(cfg)
    injector = serving.Injector(latency=cj.parse_latency(cfg.latency), seed=cfg.seed)
    layouts, reasons = plan_layouts(cfg, wl, selected(cfg.schemes))
    rows = []
    for name in (n for n in cj.SCHEME_NAMES if n in layouts or n in reasons):
        if name in layouts:
            rows.append(scheme_row(cfg, name, layouts[name], wl, injector, chebyls))
        else:
            rows.append({"scheme": name, "applies": False, "reason": reasons[name]})
    ok = ranked(rows)
    choice = ok[0] if ok else None
    ranking = []
    for r in ok:
        ratio = r["p99"] / ok[0]["p99"]
        ranking.append(
            f"{r['scheme']}: {r['layout']}, N = {r['N']}, p99 {r['p99'] * 1e3:.3g} ms "
            f"per query, work {r['work_per_query']:.3g} per query"
            + ("" if r is choice else f", {ratio:.3g}x {choice['scheme']}'s")
        )
    for r in rows:
        if not r.get("meets"):
            text = r["reason"] or "misses the target"
            if r.get("p99") is not None:
                text += (
                    f" (closest: {r['layout']} at N = {r['N']}: {r['failures']} of "
                    f"{r['decodes']} decodes over {cfg.target_error:g}, p99 "
                    f"{r['p99'] * 1e3:.3g} ms)"
                )
            ranking.append(f"{r['scheme']}: {text}")
    return {
        "workload": cfg.workload,
        "requests": cfg.scheme_requests,
        "unit_roundoff": unit_roundoff(cfg.worker_dtype),
        "rows": rows,
        "choice": choice["scheme"] if choice else None,
        "choice_layout": choice["layout"] if choice else None,
        "ranking": ranking,
    }
