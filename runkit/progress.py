"""The one progress bar of the applications, and its one switch.

Every bar is a tqdm bar on stderr that disappears when done (``leave=False``). It is
off when the environment variable ``CODEDJAX_NO_PROGRESS`` is ``1`` (what
``--no-progress`` of :func:`runkit.add_run_arguments` sets, so the bars of every part
of a run, the training's included, go off together), when the caller passes
``disable=True``, and, with ``disable=None``, when stderr is not a terminal (tqdm's
rule).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["NO_PROGRESS_ENV", "disable_progress", "progress", "progress_disabled"]

NO_PROGRESS_ENV = "CODEDJAX_NO_PROGRESS"


def disable_progress() -> None:
    """Turn every progress bar of this process off (sets ``CODEDJAX_NO_PROGRESS=1``)."""
    os.environ[NO_PROGRESS_ENV] = "1"


def progress_disabled(disable: bool | None = None) -> bool | None:
    """The switch: ``True`` when ``CODEDJAX_NO_PROGRESS`` is ``1``, else ``disable``
    (``None``: tqdm's rule, on for terminals only)."""
    if os.environ.get(NO_PROGRESS_ENV, "") == "1":
        return True
    return disable


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    disable: bool | None = None,
    **options: Any,
):
    """A progress bar over ``iterable`` (or a manual one, ``iterable=None``).

    Args:
      iterable: what to iterate over; ``None`` for a bar moved by ``update(n)``.
      total: the number of steps, when ``iterable`` has no length.
      desc: the label before the bar.
      disable: ``True`` hides the bar; ``None`` (default) hides it when stderr is not
        a terminal; either way it is hidden when ``CODEDJAX_NO_PROGRESS=1``.
      **options: further tqdm options of how the count is shown (``unit``,
        ``unit_scale``, ``postfix``).

    Returns:
      A ``tqdm`` object: iterable, a context manager, with ``update`` and
      ``set_postfix``/``set_postfix_str`` (no-ops when hidden).
    """
    from tqdm.auto import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        disable=progress_disabled(disable),
        leave=False,
        file=sys.stderr,
        **options,
    )
