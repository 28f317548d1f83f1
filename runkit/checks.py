"""The checks every config's ``__post_init__`` repeats: :func:`check_fields`, the
lower bounds and allowed values of a config's fields, each error a ``ValueError``
that names the config and the field (``TrainConfig: batch_size must be >= 1, got
0``), the form :func:`runkit.refuse` turns into the command line's flag."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_fields"]


def check_fields(
    owner: str,
    obj: Any,
    *,
    at_least: Mapping[str, float] | None = None,
    one_of: Mapping[str, Sequence[Any]] | None = None,
    or_none: Mapping[str, float] | None = None,
) -> None:
    """Checks the fields of ``obj`` (any object with attributes) in order.

    Args:
      owner: the name that leads every message (the config class, a function).
      obj: the object whose attributes are checked.
      at_least: field -> least value (a field that is None is not checked).
      one_of: field -> the values it may take (messages show them as given).
      or_none: field -> least value of a field that may also be None.

    Raises:
      ValueError: ``"{owner}: {field} must be one of {choices}, got {value!r}"``
        or ``"{owner}: {field} must be [None or ]>= {low}, got {value}"`` for
        the first field out of place (``one_of``, ``at_least``, ``or_none``).
    """
    for field, choices in (one_of or {}).items():
        value = getattr(obj, field)
        if value not in choices:
            raise ValueError(
                f"{owner}: {field} must be one of {choices}, got {value!r}"
            )
    for field, low in (at_least or {}).items():
        value = getattr(obj, field)
        if value is not None and value < low:
            raise ValueError(f"{owner}: {field} must be >= {low}, got {value}")
    for field, low in (or_none or {}).items():
        value = getattr(obj, field)
        if value is not None and value < low:
            raise ValueError(f"{owner}: {field} must be None or >= {low}, got {value}")
