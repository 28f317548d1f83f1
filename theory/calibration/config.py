"""The calibration's configuration and the names it knows."""

from __future__ import annotations

import dataclasses

import codedjax as cj

DECODERS = ("chebyls", "chebyls_batched", "chebyls_one", "graceful")
PAYLOADS = ("tower", "series")
WORKER_DTYPES = ("bfloat16", "float32")
#: the circle code's variants the calibration runs: name -> (pack, decoder)
CIRCLE_VARIANTS = {
    "circle": (False, "ls"),
    "circle-threshold": (False, "threshold"),
    "circle-packed": (True, "ls"),
    "circle-packed-threshold": (True, "threshold"),
}
_LAST = ("replication", "uncoded", "parity")
#: the catalogue (``--codes``): every scheme of ``codedjax.catalogue`` that serves
#: a request in one round (all but layer-wise coding), the circle code as its
#: variants, in the order of the recorded tables (which seeds each cell): the
#: baselines and ParM last
CODES = (
    *(v for n in cj.SCHEME_NAMES if n not in (*_LAST, "layerwise")
      for v in (CIRCLE_VARIANTS if n == "circle" else (n,))),
    *_LAST,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    num_inputs: int = 8  # K
    num_workers: int = 40  # M
    cross_layers: int = 2  # L: degree d = L + 1
    features: int = 16
    num_masks: int = 2000
    responses: tuple[int, ...] = (22, 24, 26, 30, 40)
    decoders: tuple[str, ...] = DECODERS
    payload: str = "tower"  # or "series" (module docstring)
    worker_dtype: str = "bfloat16"  # or "float32"
    columns: int = 4  # F of a "series" payload (the tower's F is 1)
    decay: float = 0.8  # of a "series" payload's coefficients
    codes: tuple[str, ...] = ()  # catalogue names, or ("all",): run_catalogue
    seed: int = 0
    progress: bool = True
