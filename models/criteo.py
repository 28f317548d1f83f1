"""Streaming loader for the Criteo display-advertising (Kaggle) format.

Each line holds 40 tab-separated fields: the label (0/1), 13 integer features I1..I13
and 26 categorical features C1..C26 (hashed strings); an empty field is missing. Plain
and gzip files are read line by line, so a file larger than memory can be used.

Encoding:

- integers: :func:`transform_integers`, ``sign(x) log(1 + |x|)`` (``log1p`` for
  x >= 0; the sign-symmetric convention for the few negative values of I2), missing
  -> 0; 13 missing indicators (1.0 = missing) follow, so ``numeric`` has 26 columns;
- categoricals: one vocabulary per column built in a first streaming pass over the
  training lines, keeping values seen at least ``min_count`` times, at indices 1..V;
  index 0 is the out-of-vocabulary slot (rare, unseen and missing values).

Splits are by line number, so they need no line count first: line i (0-based) goes to
validation if ``i % 20 == 18``, to test if ``i % 20 == 19``, else to training (90/5/5).

References:
  Criteo (2014), Display Advertising Challenge data set,
  https://www.kaggle.com/c/criteo-display-ad-challenge.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from runkit import progress

__all__ = [
    "NUM_CATEGORICAL",
    "NUM_FIELDS",
    "NUM_INTEGER",
    "NUM_NUMERIC",
    "CriteoBatch",
    "CriteoVocabulary",
    "build_vocabulary",
    "iter_batches",
    "split_of_line",
    "transform_integers",
]

NUM_INTEGER = 13
NUM_CATEGORICAL = 26
NUM_FIELDS = 1 + NUM_INTEGER + NUM_CATEGORICAL
NUM_NUMERIC = 2 * NUM_INTEGER  # transformed values, then missing indicators
INTEGER_NAMES = tuple(f"I{j + 1}" for j in range(NUM_INTEGER))
CATEGORICAL_NAMES = tuple(f"C{j + 1}" for j in range(NUM_CATEGORICAL))
SPLITS = ("train", "val", "test", "all")
_SPLIT_PERIOD = 20


def split_of_line(index: int) -> str:
    """The split of 0-based data line ``index``: 'val', 'test' or 'train' (90/5/5)."""
    r = index % _SPLIT_PERIOD
    return (
        "val"
        if r == _SPLIT_PERIOD - 2
        else "test"
        if r == _SPLIT_PERIOD - 1
        else ("train")
    )


def transform_integers(raw) -> np.ndarray:
    """Log transform of Criteo integer features.

    .. math:: t(x) = \\mathrm{sign}(x) \\log(1 + |x|), \\quad t(\\text{missing}) = 0

    Args:
      raw: [..., 13] (or any shape) float array, NaN for missing.

    Returns:
      float64 array of the same shape.
    """
    x = np.asarray(raw, dtype=np.float64)
    out = np.sign(x) * np.log1p(np.abs(x))
    return np.where(np.isnan(x), 0.0, out)


@dataclasses.dataclass(frozen=True)
class CriteoVocabulary:
    """Per-column vocabularies built on the training lines.

    Attributes:
      vocabs: 26 dicts, value -> index in 1..V (0 is the OOV slot).
      min_count: the minimum count a value needed to get its own index.
      num_lines: data lines seen in the pass (all splits).
    """

    vocabs: tuple[dict[str, int], ...]
    min_count: int
    num_lines: int

    @property
    def vocab_sizes(self) -> tuple[int, ...]:
        """Embedding table sizes, V + 1 per column."""
        return tuple(len(v) + 1 for v in self.vocabs)


@dataclasses.dataclass(frozen=True)
class CriteoBatch:
    """A batch of encoded lines.

    Attributes:
      categorical: [B, 26] int32 indices (0 = OOV/missing).
      numeric: [B, 26] float32: 13 transformed integers, then 13 missing indicators.
      labels: [B] int32 in {0, 1}.
    """

    categorical: np.ndarray
    numeric: np.ndarray
    labels: np.ndarray


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    raw = gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")


def _iter_fields(path, name: str, *, desc: str, show_progress: bool | None):
    """Yields (data line index, fields) for every line, validating as it goes."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{name}: {str(path)!r} does not exist or is not a file")
    try:
        with _open_text(path) as fh:
            index = 0
            for lineno, line in enumerate(
                progress(fh, desc=desc, disable=None if show_progress else True),
                start=1,
            ):
                line = line.rstrip("\r\n")
                if not line:
                    continue
                fields = line.split("\t")
                if len(fields) != NUM_FIELDS:
                    raise ValueError(
                        f"{name}: {str(path)!r} line {lineno}: expected {NUM_FIELDS} "
                        f"tab-separated fields (label, I1..I13, C1..C26), got "
                        f"{len(fields)}"
                    )
                if fields[0] not in ("0", "1"):
                    raise ValueError(
                        f"{name}: {str(path)!r} line {lineno}, field 'label': "
                        f"expected '0' or '1', got {fields[0]!r}"
                    )
                yield index, lineno, fields
                index += 1
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as err:
        raise ValueError(
            f"{name}: {str(path)!r} is unreadable ({type(err).__name__}: {err})"
        ) from err


def _check_split(name: str, split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"{name}: split must be one of {SPLITS}, got {split!r}")


def build_vocabulary(
    path,
    *,
    min_count: int = 10,
    split: str = "train",
    max_lines: int | None = None,
    show_progress: bool | None = None,
) -> CriteoVocabulary:
    """First streaming pass: counts categorical values and keeps the frequent ones.

    Memory grows with the number of distinct values per column (not with the file);
    for the full 45M-line Kaggle file that is a few GB, so use ``max_lines`` to build
    from a prefix if needed.

    Args:
      path: Criteo file (plain or gzip).
      min_count: a value seen fewer times than this maps to the OOV slot 0.
      split: which lines to count ('train', 'val', 'test' or 'all').
      max_lines: stop after this many data lines (all splits counted).
      show_progress: ``False`` hides the progress bar.

    Returns:
      A :class:`CriteoVocabulary` (values sorted by decreasing count, then by value).

    Raises:
      ValueError: naming the file and line for a wrong field count or a label that is
        not 0/1, or if ``min_count < 1`` or ``split`` is unknown.
    """
    name = "build_vocabulary"
    if min_count < 1:
        raise ValueError(f"{name}: min_count must be >= 1, got {min_count}")
    _check_split(name, split)
    counters = [Counter() for _ in range(NUM_CATEGORICAL)]
    seen = 0
    for index, _, fields in _iter_fields(
        path, name, desc="criteo vocabulary", show_progress=show_progress
    ):
        if max_lines is not None and index >= max_lines:
            break
        seen = index + 1
        if split != "all" and split_of_line(index) != split:
            continue
        for counter, value in zip(counters, fields[1 + NUM_INTEGER :], strict=True):
            if value:
                counter[value] += 1
    vocabs = []
    for counter in counters:
        kept = sorted(
            (v for v, c in counter.items() if c >= min_count),
            key=lambda v, counter=counter: (-counter[v], v),
        )
        vocabs.append({v: i + 1 for i, v in enumerate(kept)})
    return CriteoVocabulary(vocabs=tuple(vocabs), min_count=min_count, num_lines=seen)


def _encode(rows, vocab: CriteoVocabulary, path, name) -> CriteoBatch:
    n = len(rows)
    labels = np.empty(n, dtype=np.int32)
    raw = np.empty((n, NUM_INTEGER), dtype=np.float64)
    cat = np.empty((n, NUM_CATEGORICAL), dtype=np.int32)
    for r, (lineno, fields) in enumerate(rows):
        labels[r] = 1 if fields[0] == "1" else 0
        for j in range(NUM_INTEGER):
            value = fields[1 + j]
            if value == "":
                raw[r, j] = np.nan
                continue
            try:
                raw[r, j] = float(value)
            except ValueError:
                raise ValueError(
                    f"{name}: {str(path)!r} line {lineno}, field {INTEGER_NAMES[j]!r}: "
                    f"expected an integer or an empty field, got {value!r}"
                ) from None
        for j, voc in enumerate(vocab.vocabs):
            cat[r, j] = voc.get(fields[1 + NUM_INTEGER + j], 0)
    bad = ~np.isfinite(raw) & ~np.isnan(raw)
    if bad.any():
        r, j = np.argwhere(bad)[0]
        raise ValueError(
            f"{name}: {str(path)!r} line {rows[r][0]}, field {INTEGER_NAMES[j]!r}: "
            f"expected a finite integer, got {rows[r][1][1 + j]!r}"
        )
    numeric = np.concatenate(
        [transform_integers(raw), np.isnan(raw).astype(np.float64)], axis=1
    ).astype(np.float32)
    return CriteoBatch(categorical=cat, numeric=numeric, labels=labels)


def iter_batches(
    path,
    vocab: CriteoVocabulary,
    *,
    batch_size: int,
    split: str = "all",
    max_lines: int | None = None,
    drop_remainder: bool = False,
    show_progress: bool | None = None,
) -> Iterator[CriteoBatch]:
    """Second streaming pass: yields encoded batches, reading line by line.

    Args:
      path: Criteo file (plain or gzip).
      vocab: vocabularies from :func:`build_vocabulary`.
      batch_size: lines per batch (the last one may be shorter).
      split: which lines to yield ('train', 'val', 'test' or 'all').
      max_lines: stop after this many data lines (all splits counted).
      drop_remainder: drop a last batch shorter than ``batch_size``.
      show_progress: ``False`` hides the progress bar.

    Yields:
      :class:`CriteoBatch` objects in file order.

    Raises:
      ValueError: naming the file and line for a wrong field count, a label that is
        not 0/1 or an integer field that is not a number; if ``batch_size < 1`` or
        ``split`` is unknown.
    """
    name = "iter_batches"
    if batch_size < 1:
        raise ValueError(f"{name}: batch_size must be >= 1, got {batch_size}")
    _check_split(name, split)
    rows = []
    for index, lineno, fields in _iter_fields(
        path, name, desc=f"criteo {split}", show_progress=show_progress
    ):
        if max_lines is not None and index >= max_lines:
            break
        if split != "all" and split_of_line(index) != split:
            continue
        rows.append((lineno, fields))
        if len(rows) == batch_size:
            yield _encode(rows, vocab, path, name)
            rows = []
    if rows and not drop_remainder:
        yield _encode(rows, vocab, path, name)
