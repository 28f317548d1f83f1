"""The coded DCNv2 schemes: one :class:`DCNScheme` (a Cross code and a Deep code) each.

A parallel DCNv2's logit is ``w_c . x_L + w_d . deep(x_0) + b``: the Cross branch with
its head is a polynomial of degree d = L + 1 in x_0, the Deep branch is a ReLU MLP. A
scheme codes each branch with a code of :func:`codedjax.catalogue` for that branch's
workload (:data:`SCHEME_PAIRS`: the pairs of catalogue entries). When the two codes
are equal, one coded input per worker feeds both branches (BACC, NeRCC); otherwise
every worker computes both branches, the Cross branch on its Cross input and the Deep
branch on its Deep input.

To add a scheme, add a pair of catalogue names to :data:`SCHEME_PAIRS`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

import codedjax as cj

__all__ = [
    "SCHEMES",
    "SCHEME_PAIRS",
    "DCNScheme",
    "Sizes",
    "branch_entries",
    "build_schemes",
]


class Sizes(NamedTuple):
    """The sizes a scheme is built for: K queries coded together, M workers, c
    RepApprox replicas, d the degree of the Cross branch, and the workers' dtype
    (the graceful decoder sizes its noise floor by it)."""

    num_inputs: int
    num_workers: int
    replication: int
    degree: int
    worker_dtype: str = "bfloat16"


class DCNScheme(NamedTuple):
    """A coded DCNv2 scheme: the code of the Cross branch and of the Deep branch."""

    cross: cj.Code
    deep: cj.Code

    @property
    def shared(self) -> bool:
        """One coded input per worker feeds both branches."""
        return self.cross == self.deep

    @property
    def tuned(self) -> bool:
        """The scheme's smoothing pair is tuned per N on the validation split."""
        return isinstance(getattr(self.cross, "smoothing", None), tuple)

    def with_smoothing(self, smoothing: tuple[float, float]) -> DCNScheme:
        """The scheme with its code rebuilt with the (encoder, decoder) pair."""
        code = dataclasses.replace(self.cross, smoothing=tuple(smoothing))
        return DCNScheme(code, code)


#: the schemes: (Cross entry, Deep entry) of :func:`codedjax.catalogue`; an entry
#: named twice feeds both branches from one coded input
SCHEME_PAIRS: dict[str, tuple[str, str]] = {
    # the seed's scheme: Lagrange + ChebyLS on Cross, RepApprox on Deep
    "chebyls+repapprox": ("chebyls", "repapprox"),
    # the classical LCC baseline: the first D arrivals, square solve
    "threshold+repapprox": ("threshold", "repapprox"),
    # ChebyLS where its predicted error is small, the smoothness-regularised fit
    # near the threshold (codedjax.graceful_decode), sized for the workers' dtype
    "graceful+repapprox": ("graceful", "repapprox"),
    "bacc": ("bacc", "bacc"),
    # smoothing tuned per N on the validation split (DCNScheme.tuned)
    "nercc": ("nercc", "nercc"),
}
SCHEMES = tuple(SCHEME_PAIRS)


def branch_entries(
    degree: int, k: int, m: int, names: tuple, **knobs
) -> tuple[dict[str, cj.Scheme], dict[str, cj.Scheme]]:
    """The :func:`codedjax.catalogue` entries of a parallel DCNv2's two branches on
    K queries and M workers: the Cross branch's workload is a polynomial of
    ``degree`` (L + 1), the Deep branch's is not. ``names``: (Cross names, Deep
    names); ``knobs``: the catalogue's (``replicas``, ``worker_dtype``, ...).

    Raises:
        ValueError: a named entry does not apply to its branch (the reason).
    """
    out = []
    branches = (
        cj.Workload("cross", degree, description="the Cross tower and its head"),
        cj.Workload("deep", None, description="the Deep MLP and its head"),
    )
    for wl, wanted in zip(branches, names, strict=True):
        entries = cj.catalogue(wl, k, m, names=wanted, **knobs)
        bad = [s.reason for s in entries if not s.applies]
        if bad:
            raise ValueError(f"branch_entries: the {wl.name} branch: {'; '.join(bad)}")
        out.append({s.name: s for s in entries})
    return out[0], out[1]


def build_schemes(sizes: Sizes, names=SCHEMES) -> dict[str, DCNScheme]:
    """The schemes ``names`` built for ``sizes`` (:func:`branch_entries`; RepApprox
    with c replicas, NeRCC's pair (0, 0) until tuned)."""
    unknown = [n for n in names if n not in SCHEME_PAIRS]
    if unknown:
        raise ValueError(f"build_schemes: names must be among {SCHEMES}, got {unknown}")
    cross, deep = branch_entries(
        sizes.degree,
        sizes.num_inputs,
        sizes.num_workers,
        tuple({SCHEME_PAIRS[n][i] for n in names} for i in (0, 1)),
        replicas=sizes.replication,
        worker_dtype=sizes.worker_dtype,
        nercc_smoothing=(0.0, 0.0),
    )
    return {
        n: DCNScheme(cross[SCHEME_PAIRS[n][0]].code, deep[SCHEME_PAIRS[n][1]].code)
        for n in names
    }


def exact_tasks(code: cj.Code, masks: np.ndarray) -> np.ndarray | None:
    """bool [B, K]: the tasks a responding replica returns exactly, for codes that
    replicate (RepApprox: task k's replicas are the workers of ``layout.task == k``);
    None for the others."""
    layout = getattr(code, "layout", None)
    if layout is None:
        return None
    task = np.asarray(layout.task)
    holds = task[None, :] == np.arange(code.num_inputs)[:, None]  # [K, M]
    return np.any(masks[:, None, :] & holds[None], axis=-1)
