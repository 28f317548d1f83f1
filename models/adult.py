"""UCI Adult census income: reading, preprocessing and the fixed split.

The bundled file ``data/adult.csv.gz`` (48,842 rows; CC BY 4.0, Becker & Kohavi 1996)
has a header row, 6 integer and 8 categorical columns and the label ``income``
(``>50K`` -> 1, ``<=50K`` -> 0; the spellings ``>50K.``/``<=50K.`` of the original test
file are accepted). ``?`` (or an empty field) marks a missing value.

Preprocessing is fitted on the training split only:

- categorical: one vocabulary per column, sorted values seen in training at indices
  1..V; index 0 is the out-of-vocabulary slot, used for missing values and for
  categories never seen in training (at inference too);
- numeric: ``log1p`` for ``fnlwgt``, ``capital-gain`` and ``capital-loss`` (heavy
  tailed), then standardised with the training mean and standard deviation; a missing
  numeric value becomes the training mean (0 after standardisation).

The split is a fixed permutation (seed :data:`SPLIT_SEED`) cut 70/15/15 into
train/validation/test.

References:
  Becker, B. & Kohavi, R. (1996), Adult, UCI Machine Learning Repository,
  doi:10.24432/C5XW20.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "CATEGORICAL_COLUMNS",
    "COLUMNS",
    "DEFAULT_PATH",
    "LABEL_COLUMN",
    "NUMERIC_COLUMNS",
    "SPLIT_FRACTIONS",
    "SPLIT_SEED",
    "AdultData",
    "AdultPreprocessor",
    "AdultRaw",
    "Split",
    "load_adult",
    "read_adult",
]

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "data" / "adult.csv.gz"
COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "educational-num", "marital-status",
    "occupation", "relationship", "race", "gender", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
)  # fmt: skip
LABEL_COLUMN = "income"
CATEGORICAL_COLUMNS = (
    "workclass", "education", "marital-status", "occupation", "relationship", "race",
    "gender", "native-country",
)  # fmt: skip
NUMERIC_COLUMNS = (
    "age", "fnlwgt", "educational-num", "capital-gain", "capital-loss",
    "hours-per-week",
)  # fmt: skip
LOG_COLUMNS = ("fnlwgt", "capital-gain", "capital-loss")
MISSING = ("?", "")
POSITIVE = (">50K", ">50K.")
NEGATIVE = ("<=50K", "<=50K.")
SPLIT_SEED = 20_240_601
SPLIT_FRACTIONS = (0.70, 0.15, 0.15)

_CAT_IDX = tuple(COLUMNS.index(c) for c in CATEGORICAL_COLUMNS)
_NUM_IDX = tuple(COLUMNS.index(c) for c in NUMERIC_COLUMNS)
_LABEL_IDX = COLUMNS.index(LABEL_COLUMN)


@dataclasses.dataclass(frozen=True)
class AdultRaw:
    """The file's rows, validated but not yet encoded.

    Attributes:
      categorical: [B, 8] object array of stripped strings ('' for missing).
      numeric: [B, 6] float64, NaN for missing.
      labels: [B] int32 in {0, 1}.
    """

    categorical: np.ndarray
    numeric: np.ndarray
    labels: np.ndarray


@dataclasses.dataclass(frozen=True)
class Split:
    """One split, encoded.

    Attributes:
      categorical: [B, 8] int32 vocabulary indices (0 = OOV/missing).
      numeric: [B, 6] float32, standardised.
      labels: [B] int32 in {0, 1}.
    """

    categorical: np.ndarray
    numeric: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _parse_float(value: str, path: Path, lineno: int, column: str) -> float:
    if value in MISSING:
        return float("nan")
    try:
        out = float(value)
    except ValueError:
        raise ValueError(
            f"read_adult: {str(path)!r} line {lineno}, field {column!r}: expected a "
            f"number or '?', got {value!r}"
        ) from None
    if not np.isfinite(out):
        raise ValueError(
            f"read_adult: {str(path)!r} line {lineno}, field {column!r}: expected a "
            f"finite number, got {value!r}"
        )
    return out


def read_adult(path=DEFAULT_PATH) -> AdultRaw:
    """Reads and validates an Adult CSV file (plain or gzip).

    Args:
      path: the file; its first line must be the header :data:`COLUMNS`.

    Returns:
      An :class:`AdultRaw` with every row of the file.

    Raises:
      ValueError: naming the file (and line and field where there is one) if the file
        is missing or unreadable, the header is wrong, a row does not have 15 fields,
        a numeric field is not a number, or the label is not one of the two classes.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"read_adult: {str(path)!r} does not exist or is not a file")
    cats, nums, labels = [], [], []
    try:
        with _open_text(path) as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != COLUMNS:
                raise ValueError(
                    f"read_adult: {str(path)!r} line 1: expected the header "
                    f"{','.join(COLUMNS)}, got {header!r}"
                )
            for lineno, row in enumerate(reader, start=2):
                if not row:
                    continue  # a blank line
                if len(row) != len(COLUMNS):
                    raise ValueError(
                        f"read_adult: {str(path)!r} line {lineno}: expected "
                        f"{len(COLUMNS)} comma-separated fields, got {len(row)}"
                    )
                row = [v.strip() for v in row]
                label = row[_LABEL_IDX]
                if label in POSITIVE:
                    labels.append(1)
                elif label in NEGATIVE:
                    labels.append(0)
                else:
                    raise ValueError(
                        f"read_adult: {str(path)!r} line {lineno}, field "
                        f"{LABEL_COLUMN!r}: expected one of "
                        f"{POSITIVE + NEGATIVE}, got {label!r}"
                    )
                cats.append(["" if row[i] in MISSING else row[i] for i in _CAT_IDX])
                nums.append(
                    [_parse_float(row[i], path, lineno, COLUMNS[i]) for i in _NUM_IDX]
                )
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as err:
        raise ValueError(
            f"read_adult: {str(path)!r} is unreadable ({type(err).__name__}: {err})"
        ) from err
    if not labels:
        raise ValueError(f"read_adult: {str(path)!r} has no data rows")
    return AdultRaw(
        categorical=np.array(cats, dtype=object).reshape(-1, len(CATEGORICAL_COLUMNS)),
        numeric=np.array(nums, dtype=np.float64).reshape(-1, len(NUMERIC_COLUMNS)),
        labels=np.array(labels, dtype=np.int32),
    )


@dataclasses.dataclass(frozen=True)
class AdultPreprocessor:
    """Vocabularies and numeric normalisation, fitted on training rows.

    Attributes:
      vocabs: one dict per categorical column, value -> index in 1..V (0 is OOV).
      mean: [6] float64 training mean of the (log-transformed) numeric columns.
      std: [6] float64 training standard deviation (1 where it is 0).
    """

    vocabs: tuple[dict[str, int], ...]
    mean: np.ndarray
    std: np.ndarray

    @property
    def vocab_sizes(self) -> tuple[int, ...]:
        """Embedding table sizes, V + 1 per column (slot 0 = OOV/missing)."""
        return tuple(len(v) + 1 for v in self.vocabs)

    @staticmethod
    def _log(numeric: np.ndarray) -> np.ndarray:
        out = np.array(numeric, dtype=np.float64, copy=True)
        for c in LOG_COLUMNS:
            j = NUMERIC_COLUMNS.index(c)
            out[:, j] = np.sign(out[:, j]) * np.log1p(np.abs(out[:, j]))
        return out

    @classmethod
    def fit(cls, raw: AdultRaw) -> AdultPreprocessor:
        """Builds the vocabularies and normalisation from (training) rows."""
        vocabs = []
        for j in range(len(CATEGORICAL_COLUMNS)):
            values = sorted({v for v in raw.categorical[:, j] if v != ""})
            vocabs.append({v: i + 1 for i, v in enumerate(values)})
        logged = cls._log(raw.numeric)
        mean = np.nanmean(logged, axis=0)
        mean = np.where(np.isfinite(mean), mean, 0.0)
        std = np.nanstd(logged, axis=0)
        std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
        return cls(vocabs=tuple(vocabs), mean=mean, std=std)

    def transform(self, raw: AdultRaw) -> Split:
        """Encodes rows: categories to indices (unknown/missing: 0), scales numbers."""
        cat = np.zeros(raw.categorical.shape, dtype=np.int32)
        for j, vocab in enumerate(self.vocabs):
            cat[:, j] = [vocab.get(v, 0) for v in raw.categorical[:, j]]
        num = (self._log(raw.numeric) - self.mean) / self.std
        num = np.where(np.isnan(num), 0.0, num).astype(np.float32)
        return Split(categorical=cat, numeric=num, labels=raw.labels.copy())

    def transform_rows(self, rows: Sequence[Sequence]) -> tuple[np.ndarray, np.ndarray]:
        """Encodes raw records (for inference on new data).

        Args:
          rows: B records in file column order, 14 feature fields (a 15th, the label,
            is ignored); numbers may be given as numbers or strings, ``'?'`` = missing.

        Returns:
          ``(categorical [B, 8] int32, numeric [B, 6] float32)``.

        Raises:
          ValueError: if a record has the wrong length or a numeric field is not a
            number.
        """
        cats, nums = [], []
        for i, row in enumerate(rows):
            if len(row) not in (len(COLUMNS) - 1, len(COLUMNS)):
                raise ValueError(
                    f"AdultPreprocessor.transform_rows: record {i} has {len(row)} "
                    f"fields, expected {len(COLUMNS) - 1} (or {len(COLUMNS)})"
                )
            vals = [str(v).strip() for v in row]
            cats.append(["" if vals[k] in MISSING else vals[k] for k in _CAT_IDX])
            nums.append(
                [
                    _parse_float(vals[k], Path("<records>"), i, COLUMNS[k])
                    for k in _NUM_IDX
                ]
            )
        raw = AdultRaw(
            categorical=np.array(cats, dtype=object).reshape(-1, len(_CAT_IDX)),
            numeric=np.array(nums, dtype=np.float64).reshape(-1, len(_NUM_IDX)),
            labels=np.zeros(len(cats), dtype=np.int32),
        )
        split = self.transform(raw)
        return split.categorical, split.numeric


@dataclasses.dataclass(frozen=True)
class AdultData:
    """The encoded train/validation/test splits and the fitted preprocessor."""

    train: Split
    val: Split
    test: Split
    preprocessor: AdultPreprocessor

    @property
    def vocab_sizes(self) -> tuple[int, ...]:
        return self.preprocessor.vocab_sizes

    @property
    def num_numeric(self) -> int:
        return len(NUMERIC_COLUMNS)


def _take(raw: AdultRaw, idx: np.ndarray) -> AdultRaw:
    return AdultRaw(raw.categorical[idx], raw.numeric[idx], raw.labels[idx])


def load_adult(path=DEFAULT_PATH, *, seed: int = SPLIT_SEED) -> AdultData:
    """Reads Adult, splits it 70/15/15 with a fixed permutation and encodes it.

    Args:
      path: the CSV file (default: the bundled ``data/adult.csv.gz``).
      seed: seed of the numpy permutation that fixes the split (keep the default for
        comparable numbers).

    Returns:
      An :class:`AdultData`; the preprocessor is fitted on the training split only.

    Raises:
      ValueError: see :func:`read_adult`.
    """
    raw = read_adult(path)
    n = raw.labels.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    n_train = int(round(SPLIT_FRACTIONS[0] * n))
    n_val = int(round(SPLIT_FRACTIONS[1] * n))
    parts = np.split(perm, [n_train, n_train + n_val])
    train_raw, val_raw, test_raw = (_take(raw, np.sort(p)) for p in parts)
    pre = AdultPreprocessor.fit(train_raw)
    return AdultData(
        train=pre.transform(train_raw),
        val=pre.transform(val_raw),
        test=pre.transform(test_raw),
        preprocessor=pre,
    )
