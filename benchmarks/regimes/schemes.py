"""The schemes of one cell of the map: which apply at (K, M, workload), and why not.

Equal resources: every scheme of a cell has the same M workers. How each uses them:

* ``uncoded``: K of the M workers (the other M - K idle), waits for all K.
* ``replication``: worker i computes query i mod K (the replicas of a query are K
  workers apart, so racks of up to K consecutive workers never hold two of them);
  decodes at the first moment every query has an answer (``FirstDecodable``).
* ``chebyls``, ``graceful``, ``bacc``, ``nercc``, ``repapprox``, ``layerwise``: all M
  coded rows, decode at the N-th answer (``FixedN(N)``) for the smallest N of the
  tried grid that meets the accuracy target (the N is in the row).
* ``threshold``: all M coded rows, decodes from the first D answers.
* ``parity`` (ParM): K systematic workers and K/k parity workers for the smallest
  group size k that fits (the other M - K - K/k workers idle), decodes at the first
  moment every group has lost at most one answer and its parity arrived. Its parity
  model here is the workload itself on the group's sum (no parity model is trained
  for the map): exact for a linear map without bias, an approximation otherwise.

A scheme that cannot serve the cell is a row with its reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import codedjax as cj

from .config import RegimesConfig
from .workloads import Workload

__all__ = ["Scheme", "schemes"]


@dataclasses.dataclass(frozen=True, eq=False)
class Scheme:
    """One scheme of a cell.

    Attributes:
        name: the row's name.
        code: its code (None when it does not apply).
        policy: "fixed" (FixedN over ``n_grid``), "first" (FirstDecodable) or
            "threshold" (FixedN(D)).
        n_grid: the N tried (policy "fixed").
        reason: why it does not apply (None when it does).
        rounds: the number of rounds of a request (layer-wise coding: L).
        note: how it uses the workers.
    """

    name: str
    code: Any = None
    policy: str = "fixed"
    n_grid: tuple[int, ...] = ()
    reason: str | None = None
    rounds: int = 1
    note: str = ""


def schemes(
    cfg: RegimesConfig, k: int, m: int, wl: Workload, nercc_smoothing
) -> list[Scheme]:
    """Every scheme of the cell (K, M, workload), in the map's order."""
    out = [
        Scheme(
            "uncoded",
            cj.uncoded_code(num_inputs=k),
            "threshold",
            note=f"K = {k} of the {m} workers",
        ),
        Scheme(
            "replication",
            cj.replication_code(num_inputs=k, num_workers=m),
            "first",
            note=f"query i mod K on worker i, {m // k}-{-(-m // k)} replicas each",
        ),
    ]
    if wl.degree is None:
        why = (
            f"does not apply: the {wl.name} workload is not a polynomial (ReLU); "
            "a Lagrange code is exact only for polynomial workers"
        )
        out += [Scheme(n, reason=why) for n in ("chebyls", "threshold", "graceful")]
    else:
        d = cj.recovery_threshold(k, wl.degree)
        if m < d:
            why = f"does not apply: M = {m} < D = {d} (degree {wl.degree})"
            out += [Scheme(n, reason=why) for n in ("chebyls", "threshold", "graceful")]
        else:
            cheb = cj.lagrange_code(num_inputs=k, num_workers=m, degree=wl.degree)
            thr = cj.lagrange_code(
                num_inputs=k, num_workers=m, degree=wl.degree, decoder="threshold"
            )
            out.append(Scheme("chebyls", cheb, n_grid=tuple(cfg.n_grid(d, m))))
            out.append(Scheme("threshold", thr, "threshold", note=f"N = D = {d}"))
            grc = cj.lagrange_code(
                num_inputs=k,
                num_workers=m,
                degree=wl.degree,
                decoder="graceful",
                worker_dtype="bfloat16",
            )
            out.append(Scheme("graceful", grc, n_grid=tuple(cfg.n_grid(d, m))))
    approx = tuple(cfg.n_grid(k, m))
    out.append(Scheme("bacc", cj.bacc_code(num_inputs=k, num_workers=m), n_grid=approx))
    out.append(
        Scheme(
            "nercc",
            cj.nercc_code(num_inputs=k, num_workers=m, smoothing=nercc_smoothing),
            n_grid=approx,
            note=f"smoothing {nercc_smoothing} tuned for (K, M)",
        )
    )
    c = m // k
    out.append(
        Scheme(
            "repapprox",
            cj.repapprox_code(num_inputs=k, num_workers=m, replication=c),
            n_grid=approx,
            note=f"c = {c} replicas, {m - k * c} Berrut-coded extras",
        )
    )
    groups = [g for g in range(2, k + 1) if k % g == 0 and k + k // g <= m]
    if not groups:
        out.append(
            Scheme(
                "parity",
                reason=f"does not apply: M = {m} < K + K/k for "
                f"every group size k >= 2 dividing K = {k}",
            )
        )
    else:
        g = min(groups)  # the most parity workers that fit
        out.append(
            Scheme(
                "parity",
                cj.parity_code(num_inputs=k, group=g),
                "first",
                note=f"k = {g}: {k + k // g} of the {m} workers; parity "
                "model = the workload itself (untrained; exact for the "
                "linear map, whose bias is 0)",
            )
        )
    if m < k + 1:
        out.append(Scheme("layerwise", reason=f"does not apply: M = {m} < K + 1"))
    else:
        lin = cj.lagrange_code(num_inputs=k, num_workers=m, degree=1)
        out.append(
            Scheme(
                "layerwise",
                lin,
                n_grid=tuple(cfg.n_grid(k, m)),
                rounds=wl.num_layers,
                note=f"{wl.num_layers} rounds of a degree-1 ChebyLS code (D = K)",
            )
        )
    return out
