"""Shared helpers of the applications: checkpoints, progress bars, metrics, reports.

The one home of what ``models/``, ``theory/`` and ``benchmarks/`` all need: the progress
bar switch (:func:`progress`, ``--no-progress`` and ``CODEDJAX_NO_PROGRESS=1``), the
command-line arguments every experiment shares (:func:`add_run_arguments`), strict JSON
(:func:`json_clean`, :func:`write_json`), number formatting (:func:`fmt`), and the
binary metrics. Flax and tqdm are imported only where they are used, so the module
imports with jax, numpy and scipy alone (``theory/`` and ``benchmarks/`` use it).
Confidence intervals for Monte Carlo rates come from
:func:`codedjax.bounds.clopper_pearson`.

Checkpoint format (one file, written with Flax's own serialisation):
a msgpack map (``flax.serialization.msgpack_serialize``) with the keys

- ``"format"``: the string ``"codedjax-nnx-checkpoint-v1"``,
- ``"metadata"``: a JSON string (configuration, metrics, ...),
- ``"state"``: a flat map ``"path/to/leaf" -> numpy array`` of the model's
  ``nnx.State`` (every variable except RNG state), built with ``nnx.to_pure_dict``.

A human-readable copy of the metadata is written next to it as ``<path>.json``; loading
reads only the msgpack file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from flax import nnx

__all__ = [
    "CHECKPOINT_FORMAT",
    "NO_PROGRESS_ENV",
    "CachedFn",
    "add_run_arguments",
    "apply_run_arguments",
    "binary_auc",
    "binary_logloss",
    "fmt",
    "json_clean",
    "load_checkpoint",
    "progress",
    "progress_disabled",
    "save_checkpoint",
    "write_json",
]

CHECKPOINT_FORMAT = "codedjax-nnx-checkpoint-v1"
_SEP = "/"


# ------------------------------------------------------------------------- checkpoints


def _model_state(model: nnx.Module) -> nnx.State:
    from flax import nnx

    # RNG streams hold typed key arrays that msgpack cannot store, and they are not
    # learned parameters; everything else (Param, BatchStat, ...) is saved.
    return nnx.state(model, nnx.Not(nnx.RngState))


def _flatten(tree: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{_SEP}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def _unflatten_into(template: Mapping[Any, Any], flat: Mapping[str, Any], prefix=""):
    out = {}
    for key, value in template.items():
        name = f"{prefix}{_SEP}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out[key] = _unflatten_into(value, flat, name)
        else:
            out[key] = flat[name]
    return out


def save_checkpoint(path, model: nnx.Module, *, metadata: dict) -> None:
    """Writes the model's variables and a metadata dict to one msgpack file.

    The write is atomic (a temporary file renamed into place), parent directories are
    created, and a readable copy of ``metadata`` goes to ``<path>.json``.

    Args:
      path: file to write (str or ``Path``).
      model: an ``nnx.Module``; all its variables except RNG state are saved as float or
        integer numpy arrays.
      metadata: JSON-serialisable dict (configuration, metrics, ...).

    Raises:
      TypeError: if ``metadata`` is not a dict or not JSON-serialisable.
    """
    if not isinstance(metadata, dict):
        raise TypeError(
            f"save_checkpoint: metadata must be a dict, got {type(metadata).__name__}"
        )
    try:
        meta_json = json.dumps(metadata, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"save_checkpoint: metadata must be JSON-serialisable ({err})"
        ) from err
    from flax import nnx, serialization

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pure = nnx.to_pure_dict(_model_state(model))
    flat = {k: np.asarray(v) for k, v in _flatten(pure).items()}
    payload = {"format": CHECKPOINT_FORMAT, "metadata": meta_json, "state": flat}
    data = serialization.msgpack_serialize(payload)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    path.with_name(path.name + ".json").write_text(
        json.dumps(metadata, indent=2, sort_keys=True) + "\n"
    )


def load_checkpoint(path, model: nnx.Module) -> dict:
    """Loads a checkpoint written by :func:`save_checkpoint` into ``model`` in place.

    Every saved leaf must match a variable of ``model`` by path and shape; floating
    values are cast to the dtype of the model's variable (so a float32 checkpoint loads
    into a bfloat16 model), integer leaves must keep their kind.

    Args:
      path: the checkpoint file.
      model: an ``nnx.Module`` with the same structure as the saved one (updated in
        place with ``nnx.update``).

    Returns:
      The metadata dict stored with the checkpoint.

    Raises:
      ValueError: naming the file, if it is missing, unreadable, not a codedjax
        checkpoint, or does not match the model (missing/extra variables, shapes).
    """
    from flax import nnx, serialization

    path = Path(path)
    where = f"load_checkpoint: checkpoint {str(path)!r}"
    if not path.is_file():
        raise ValueError(f"{where} does not exist or is not a file")
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
    except Exception as err:  # msgpack raises several unrelated exception types
        raise ValueError(
            f"{where} is unreadable (not a msgpack checkpoint: "
            f"{type(err).__name__}: {err})"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload)
        raise ValueError(
            f"{where} is not a {CHECKPOINT_FORMAT} file (format field: {got!r})"
        )
    try:
        metadata = json.loads(payload["metadata"])
        saved = dict(payload["state"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where} is corrupt ({type(err).__name__}: {err})") from err

    state = _model_state(model)
    template = nnx.to_pure_dict(state)
    want = _flatten(template)
    missing = sorted(set(want) - set(saved))
    extra = sorted(set(saved) - set(want))
    if missing or extra:
        raise ValueError(
            f"{where} does not match the model: missing variables {missing[:5]}, "
            f"unexpected variables {extra[:5]}"
        )
    cast = {}
    for name, ref in want.items():
        ref_arr = np.asarray(ref)
        value = np.asarray(saved[name])
        if value.shape != ref_arr.shape:
            raise ValueError(
                f"{where} does not match the model: variable {name!r} has shape "
                f"{value.shape} in the file, the model expects {ref_arr.shape}"
            )
        ref_float = np.issubdtype(ref_arr.dtype, np.floating) or (
            ref_arr.dtype.name == "bfloat16"
        )
        val_float = np.issubdtype(value.dtype, np.floating) or (
            value.dtype.name == "bfloat16"
        )
        if ref_float != val_float:
            raise ValueError(
                f"{where} does not match the model: variable {name!r} has dtype "
                f"{value.dtype} in the file, the model expects {ref_arr.dtype}"
            )
        cast[name] = np.asarray(value).astype(ref_arr.dtype)
    nnx.replace_by_pure_dict(state, _unflatten_into(template, cast))
    nnx.update(model, state)
    return metadata


# --------------------------------------------------------------------------- progress


NO_PROGRESS_ENV = "CODEDJAX_NO_PROGRESS"


def progress_disabled(disable: bool | None = None) -> bool | None:
    """The one progress switch: ``True`` when the environment variable
    ``CODEDJAX_NO_PROGRESS`` is ``1`` (set by ``--no-progress``), else ``disable``
    (``None``: tqdm's rule, on for terminals)."""
    if os.environ.get(NO_PROGRESS_ENV, "") == "1":
        return True
    return disable


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    disable: bool | None = None,
):
    """A tqdm progress bar (to stderr), off when ``CODEDJAX_NO_PROGRESS=1``.

    Args:
      iterable: what to iterate over (``None`` for a manually updated bar).
      total: number of steps, when ``iterable`` has no length.
      desc: label shown before the bar.
      disable: ``True`` hides the bar; ``None`` (default) hides it when stderr is not a
        terminal (tqdm's rule) or when the environment variable
        ``CODEDJAX_NO_PROGRESS`` is ``1``.

    Returns:
      A ``tqdm`` object (iterable, and usable as a context manager).
    """
    from tqdm.auto import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        disable=progress_disabled(disable),
        leave=False,
    )


def add_run_arguments(parser: argparse.ArgumentParser, *, out: str | None = None):
    """The arguments every experiment's ``__main__`` shares: ``--out`` (required
    unless a default is given), ``--quick``, ``--seed`` and ``--no-progress``."""
    parser.add_argument(
        "--out", required=out is None, default=out, help="output directory"
    )
    parser.add_argument(
        "--quick", action="store_true", help="the small configuration (Config.quick())"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help=f"no progress bars (the same as {NO_PROGRESS_ENV}=1)",
    )


def apply_run_arguments(args: argparse.Namespace) -> None:
    """Honour ``--no-progress`` by setting ``CODEDJAX_NO_PROGRESS=1``, so that every
    progress bar of the run (the experiment's and the training's) is off."""
    if getattr(args, "no_progress", False):
        os.environ[NO_PROGRESS_ENV] = "1"


class CachedFn:
    """Memoise a batched function by the exact bytes of its input.

    An experiment that runs the model on the same coded inputs more than once (NeRCC's
    tuning for every straggler count of a (K, M) pair; two schemes sharing an
    encoding) gets the stored outputs back instead of recomputing them. Keys are
    SHA-1 digests of the input's bytes with its shape and dtype, so only an identical
    input is served from the cache.

    Attributes:
        fn: the wrapped function, input [B, ...] -> output [B, ...].
        images_run: rows the wrapped function has computed (cache misses).
    """

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn
        self.cache: dict[tuple, Any] = {}
        self.images_run = 0

    def __call__(self, x) -> Any:
        arr = np.ascontiguousarray(np.asarray(x))
        key = (arr.shape, arr.dtype.str, hashlib.sha1(arr.tobytes()).hexdigest())
        hit = self.cache.get(key)
        if hit is None:
            hit = self.fn(arr)
            self.cache[key] = hit
            self.images_run += arr.shape[0]
        return hit


# ----------------------------------------------------------------------- json, format


def json_clean(obj: Any) -> Any:
    """A strict-JSON copy of ``obj``: NaN and inf -> None, tuples -> lists, numpy
    scalars and arrays -> Python numbers and lists, mapping keys -> str."""
    if isinstance(obj, np.ndarray):
        return json_clean(obj.tolist())
    if isinstance(obj, np.generic):
        return json_clean(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    return obj


def write_json(path, obj: Any) -> None:
    """Writes :func:`json_clean` of ``obj`` to ``path`` (strict JSON, indent 2)."""
    text = json.dumps(json_clean(obj), indent=2, allow_nan=False)
    Path(path).write_text(text + "\n")


def fmt(value: Any, spec: str = ".3g", missing: str = "n/a") -> str:
    """``format(value, spec)``, or ``missing`` for None and non-finite floats."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, spec)


# --------------------------------------------------------------------------- metrics


def _binary_inputs(name, labels, values):
    y = np.asarray(labels)
    s = np.asarray(values, dtype=np.float64)
    if y.ndim != 1 or s.ndim != 1 or y.shape != s.shape:
        raise ValueError(
            f"{name}: labels and scores must be 1-d of equal length, got shapes "
            f"{y.shape} and {s.shape}"
        )
    if y.size == 0:
        raise ValueError(f"{name}: got empty inputs")
    ok = (y == 0) | (y == 1)
    if not np.all(ok):
        bad = np.unique(y[~ok])[:5]
        raise ValueError(f"{name}: labels must be 0 or 1, got values {bad.tolist()}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{name}: scores/logits must be finite")
    return y.astype(np.float64), s


def binary_auc(labels, scores) -> float:
    """Area under the ROC curve, exactly, from ranks (Mann-Whitney U).

    .. math:: \\mathrm{AUC} = \\frac{\\sum_{i: y_i=1} r_i - P(P+1)/2}{P\\,Q}

    with :math:`r_i` the average rank of score :math:`s_i` (ties share the mean rank,
    which counts a tied positive/negative pair as 1/2), P positives and Q negatives.
    Computed in float64 on the host.

    Args:
      labels: [B] array of 0/1.
      scores: [B] finite scores (logits or probabilities; only their order matters).

    Returns:
      The AUC as a Python float.

    Raises:
      ValueError: on shape mismatch, labels outside {0, 1}, non-finite scores, or if
        only one class is present.

    References:
      Hanley, J. A. & McNeil, B. J. (1982), The meaning and use of the area under a
      receiver operating characteristic (ROC) curve, Radiology 143(1).
    """
    from scipy.stats import rankdata

    y, s = _binary_inputs("binary_auc", labels, scores)
    num_pos = float(y.sum())
    num_neg = float(y.size) - num_pos
    if num_pos == 0 or num_neg == 0:
        raise ValueError(
            f"binary_auc: needs both classes, got {int(num_pos)} positives and "
            f"{int(num_neg)} negatives"
        )
    ranks = rankdata(s, method="average")
    u = float(ranks[y == 1].sum()) - num_pos * (num_pos + 1.0) / 2.0
    return u / (num_pos * num_neg)


def binary_logloss(labels, logits) -> float:
    """Mean binary cross-entropy from logits, stable for any magnitude.

    .. math:: \\ell = \\frac1B \\sum_i \\log(1 + e^{z_i}) - y_i z_i

    evaluated as ``logaddexp(0, z) - y z`` in float64.

    Args:
      labels: [B] array of 0/1.
      logits: [B] finite logits z.

    Returns:
      The mean logloss (natural log) as a Python float.

    Raises:
      ValueError: on shape mismatch, labels outside {0, 1} or non-finite logits.
    """
    y, z = _binary_inputs("binary_logloss", labels, logits)
    return float(np.mean(np.logaddexp(0.0, z) - y * z))
