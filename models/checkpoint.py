"""The one checkpoint path of the models: the file format and the reuse policy.

Every trained model of ``models/`` (DCNv2, the MNIST networks, and any model added to
a trainer's registry) is saved and reused through this module.

File format (one file, written with Flax's own serialisation): a msgpack map
(``flax.serialization.msgpack_serialize``) with the keys

- ``"format"``: the string ``"codedjax-nnx-checkpoint-v1"``,
- ``"metadata"``: a JSON string (configuration, metrics, ...),
- ``"state"``: a flat map ``"path/to/leaf" -> numpy array`` of the model's
  ``nnx.State`` (every variable except RNG state), built with ``nnx.to_pure_dict``.

A human-readable copy of the metadata is written next to it as ``<path>.json``;
loading reads only the msgpack file.

Reuse policy (:func:`load_or_train`, the same for every model): a checkpoint is
named by its kind and a hash of its training configuration
(:func:`checkpoint_path`), and it is reused only when its stored configuration and
data fingerprint equal the requested ones and its training finished. Otherwise (no
file, an unreadable file, a run that was interrupted, a file written for another
configuration or other data) the model is trained again and the file overwritten,
and one line says why: a checkpoint is a cache of a deterministic training run, so
retraining loses nothing but time, and a stale cache never stops a run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from flax import nnx

__all__ = [
    "CHECKPOINT_FORMAT",
    "checkpoint_path",
    "load_checkpoint",
    "load_or_train",
    "read_metadata",
    "save_checkpoint",
]

CHECKPOINT_FORMAT = "codedjax-nnx-checkpoint-v1"
_SEP = "/"


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

    A model with a ``check_checkpoint_variables(names)`` method (RepVGG) is asked
    first, with the saved variable paths, and its ``ValueError`` is raised with the
    file's name (a checkpoint of the model's other form gets that error, not a list
    of missing variables). Then every saved leaf must match a variable of ``model``
    by path and shape; floating
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

    # a model that knows its own checkpoint forms (RepVGG: multi-branch or fused)
    # says what went wrong before the generic variable-by-variable check would
    check = getattr(model, "check_checkpoint_variables", None)
    if callable(check):
        try:
            check(sorted(saved))
        except ValueError as err:
            raise ValueError(f"{where} does not match the model: {err}") from err
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


def read_metadata(path) -> dict:
    """The metadata of a checkpoint, without a model (to build its skeleton).

    Raises:
      ValueError: naming the file, if it is missing, unreadable or not a codedjax
        checkpoint.
    """
    from flax import serialization

    path = Path(path)
    where = f"read_metadata: checkpoint {str(path)!r}"
    if not path.is_file():
        raise ValueError(f"{where} does not exist or is not a file")
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
        if payload.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"format field {payload.get('format')!r}")
        return json.loads(payload["metadata"])
    except Exception as err:  # msgpack raises several unrelated exception types
        raise ValueError(
            f"{where} is unreadable ({type(err).__name__}: {err})"
        ) from err


def checkpoint_path(ckpt_dir, kind: str, config: Mapping[str, Any]) -> Path:
    """``ckpt_dir/<kind>-<hash of config>.msgpack``: one file per configuration.

    Args:
      ckpt_dir: the checkpoint folder.
      kind: the model's name (``"dcn-adult"``, ``"lenet5"``, ...).
      config: the JSON-able training configuration (its SHA-256, 12 hex digits).
    """
    digest = hashlib.sha256(
        json.dumps(dict(config), sort_keys=True).encode()
    ).hexdigest()[:12]
    return Path(ckpt_dir) / f"{kind}-{digest}.msgpack"


def load_or_train(
    path,
    want: Mapping[str, Any],
    *,
    build: Callable[[dict], nnx.Module],
    train: Callable[[], tuple[nnx.Module, dict]],
    retrain: bool = False,
    log: Callable[[str], None] | None = None,
) -> tuple[nnx.Module, dict, bool]:
    """Loads the checkpoint at ``path`` when it matches ``want``, else trains.

    Args:
      path: the checkpoint file (usually :func:`checkpoint_path`).
      want: the metadata entries the checkpoint must hold unchanged (the training
        configuration, the data fingerprint): a file whose entries differ was
        written for another model and is retrained.
      build: metadata -> a model skeleton of the stored structure, which the
        checkpoint is loaded into.
      train: () -> ``(model, metadata)``: trains the model (it may write interim
        checkpoints to ``path``, without ``"complete"``); the final checkpoint is
        written here with ``want``, the metadata and ``"complete": True``.
      retrain: train even when a matching checkpoint exists.
      log: where the one line saying why a file was not reused goes (None:
        nowhere).

    Returns:
      ``(model, metadata, loaded)``: ``loaded`` is True when the model was read
      from the checkpoint.
    """
    path = Path(path)
    say = log or (lambda _msg: None)
    if path.is_file() and not retrain:
        try:
            meta = read_metadata(path)
        except ValueError as err:
            say(f"ignoring an unusable checkpoint ({err}); retraining")
        else:
            if any(meta.get(k) != v for k, v in want.items()):
                say(f"checkpoint {path} is for another configuration; retraining")
            elif not meta.get("complete"):
                say(f"checkpoint {path} is from an interrupted run; retraining")
            else:
                model = build(meta)
                return model, load_checkpoint(path, model), True
    model, meta = train()
    meta = {**meta, **want, "complete": True}
    save_checkpoint(path, model, metadata=meta)
    return model, meta, False
