"""Strict JSON for every ``summary.json``, and numbers for tables.

The applications' summaries hold floats that can be NaN or infinite (a vacuous
bound, a rate over an empty set, a failed decode). Python's ``json`` writes them as
``NaN`` and ``Infinity``, which are not JSON and which strict readers (``jq``,
JavaScript, ``json.loads(..., parse_constant=...)``) reject. :func:`write_summary`
writes ``null`` for NaN, ``inf`` and ``-inf`` (the reader's "no number here"; a
report that needs to tell them apart says so in its own fields) and refuses to write
anything else that is not JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import numpy as np

__all__ = ["fmt", "json_clean", "write_summary"]


def _key(k: Any) -> str:
    """A mapping key as ``json`` would write it (``True`` -> ``"true"``, ...)."""
    if isinstance(k, str):
        return k
    if isinstance(k, np.generic):
        k = k.item()
    if k is None or isinstance(k, bool | int | float):
        return json.dumps(k)
    return str(k)


def json_clean(obj: Any) -> Any:
    """A strict-JSON copy of ``obj``.

    NaN, inf and -inf become ``None``; tuples become lists; numpy scalars and arrays
    become Python numbers and (nested) lists; dataclass instances become dicts;
    paths and enum members become strings (an enum's name); mapping keys become
    strings as ``json`` writes them.

    Raises:
      TypeError: naming ``json_clean`` and the type, for any other object.
    """
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return json_clean(obj.tolist())
    if isinstance(obj, np.generic):
        return json_clean(obj.item())
    if isinstance(obj, Mapping):
        return {_key(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return json_clean(dataclasses.asdict(obj))
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.name
    raise TypeError(
        f"json_clean: cannot write a {type(obj).__name__} as JSON ({obj!r:.60})"
    )


def write_summary(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> Path:
    """Writes :func:`json_clean` of ``obj`` to ``path`` as strict JSON.

    The parent folder is created. NaN and infinities are written as ``null``; the
    file never holds a ``NaN`` or ``Infinity`` token.

    Returns:
      The path written.

    Raises:
      TypeError: if ``obj`` holds something that is not JSON (see
        :func:`json_clean`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_clean(obj), indent=indent, allow_nan=False)
    path.write_text(text + "\n")
    return path


def fmt(value: Any, spec: str = ".3g", missing: str = "n/a") -> str:
    """``format(value, spec)``, or ``missing`` for None and non-finite floats."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, spec)
