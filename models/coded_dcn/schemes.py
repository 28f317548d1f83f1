"""The coded DCNv2 schemes: one :class:`DCNScheme` (a Cross code and a Deep code) each.

A parallel DCNv2's logit is ``w_c . x_L + w_d . deep(x_0) + b``: the Cross branch with
its head is a polynomial of degree d = L + 1 in x_0, the Deep branch is a ReLU MLP. A
scheme codes each branch with a :class:`codedjax.Code`. When the two codes are the
same object, one coded input per worker feeds both branches (BACC, NeRCC); otherwise
every worker computes both branches, the Cross branch on its Cross input and the Deep
branch on its Deep input.

To add a scheme, add an entry to :data:`SCHEME_BUILDERS`: a function of the run's
:class:`Sizes` that returns a :class:`DCNScheme`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import codedjax as cj

__all__ = ["SCHEMES", "SCHEME_BUILDERS", "DCNScheme", "Sizes", "build_schemes"]


class Sizes(NamedTuple):
    """The sizes a scheme is built for: K queries coded together, M workers, c
    RepApprox replicas, d the degree of the Cross branch."""

    num_inputs: int
    num_workers: int
    replication: int
    degree: int


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


def _lagrange(s: Sizes, decoder: str) -> cj.Code:
    return cj.lagrange_code(
        num_inputs=s.num_inputs,
        num_workers=s.num_workers,
        degree=s.degree,
        decoder=decoder,
    )


def _repapprox(s: Sizes) -> cj.Code:
    return cj.repapprox_code(
        num_inputs=s.num_inputs, num_workers=s.num_workers, replication=s.replication
    )


def _same(code: cj.Code) -> DCNScheme:
    return DCNScheme(code, code)


SCHEME_BUILDERS: dict[str, Callable[[Sizes], DCNScheme]] = {
    # the seed's scheme: Lagrange + ChebyLS on Cross, RepApprox on Deep
    "chebyls+repapprox": lambda s: DCNScheme(_lagrange(s, "chebyls"), _repapprox(s)),
    # the classical LCC baseline: the first D arrivals, square solve
    "threshold+repapprox": lambda s: DCNScheme(
        _lagrange(s, "threshold"), _repapprox(s)
    ),
    # ChebyLS where its predicted error is small, the smoothness-regularised fit
    # near the threshold (codedjax.graceful_decode); the experiment's workers
    # answer in bf16, widened to float32 before decoding
    "graceful+repapprox": lambda s: DCNScheme(
        cj.lagrange_code(
            num_inputs=s.num_inputs,
            num_workers=s.num_workers,
            degree=s.degree,
            decoder="graceful",
            worker_dtype="bfloat16",
        ),
        _repapprox(s),
    ),
    "bacc": lambda s: _same(
        cj.bacc_code(num_inputs=s.num_inputs, num_workers=s.num_workers)
    ),
    # smoothing tuned per N on the validation split (DCNScheme.tuned)
    "nercc": lambda s: _same(
        cj.nercc_code(
            num_inputs=s.num_inputs, num_workers=s.num_workers, smoothing=(0.0, 0.0)
        )
    ),
}
SCHEMES = tuple(SCHEME_BUILDERS)


def build_schemes(sizes: Sizes, names=SCHEMES) -> dict[str, DCNScheme]:
    """The schemes ``names`` built for ``sizes``."""
    return {name: SCHEME_BUILDERS[name](sizes) for name in names}


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
