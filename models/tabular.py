"""The tabular data sets as the DCNv2 trainer and the coded experiments read them.

:class:`ArrayData` holds in-memory splits (Adult, or any arrays); :class:`CriteoData`
streams a Criteo file from disk; both follow :class:`TabularData`, what
:func:`models.train_dcn.train_dcn` needs. :func:`load_dataset` opens the data set a
training configuration names. Reading and preprocessing are in :mod:`models.adult`
and :mod:`models.criteo`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from . import adult, criteo

__all__ = [
    "ArrayData",
    "CriteoData",
    "TabularData",
    "adult_dataset",
    "criteo_dataset",
    "load_dataset",
]


class TabularData(Protocol):
    """What :func:`train_dcn` needs from a data set."""

    vocab_sizes: tuple[int, ...]
    num_numeric: int

    def train_batches(
        self, rng: np.random.Generator, batch_size: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]: ...

    def eval_batches(
        self, split: str, batch_size: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]: ...

    def num_train_batches(self, batch_size: int) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class ArrayData:
    """In-memory splits: each a ``(categorical [B, n_cat] int32, numeric [B, n_num]
    float32, labels [B] int32)`` tuple."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]
    val: tuple[np.ndarray, np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray, np.ndarray]
    vocab_sizes: tuple[int, ...]
    num_numeric: int

    def num_train_batches(self, batch_size: int) -> int:
        return len(self.train[2]) // batch_size

    def train_batches(self, rng, batch_size):
        cat, num, y = self.train
        perm = rng.permutation(len(y))
        for i in range(len(y) // batch_size):
            idx = perm[i * batch_size : (i + 1) * batch_size]
            yield cat[idx], num[idx], y[idx]

    def eval_batches(self, split, batch_size):
        cat, num, y = getattr(self, split)
        for i in range(0, len(y), batch_size):
            yield (
                cat[i : i + batch_size],
                num[i : i + batch_size],
                y[i : i + batch_size],
            )


def adult_dataset(path=None) -> ArrayData:
    """The Adult splits (:func:`models.adult.load_adult`) as :class:`ArrayData`."""
    data = adult.load_adult(adult.DEFAULT_PATH if path is None else path)

    def t(s):
        return (s.categorical, s.numeric, s.labels)

    return ArrayData(
        t(data.train), t(data.val), t(data.test), data.vocab_sizes, data.num_numeric
    )


@dataclasses.dataclass(frozen=True)
class CriteoData:
    """A Criteo file streamed from disk (splits by line number, see models.criteo).

    Training batches go through a shuffle buffer of ``shuffle_batches`` batches.
    """

    path: str
    vocab: criteo.CriteoVocabulary
    max_lines: int | None = None
    shuffle_batches: int = 64
    show_progress: bool | None = False

    @property
    def vocab_sizes(self):
        return self.vocab.vocab_sizes

    @property
    def num_numeric(self):
        return criteo.NUM_NUMERIC

    def num_train_batches(self, batch_size):
        return None

    def _stream(self, split, batch_size, drop):
        for b in criteo.iter_batches(
            self.path,
            self.vocab,
            batch_size=batch_size,
            split=split,
            max_lines=self.max_lines,
            drop_remainder=drop,
            show_progress=self.show_progress,
        ):
            yield b.categorical, b.numeric, b.labels

    def train_batches(self, rng, batch_size):
        buf = []

        def flush():
            cat, num, y = (np.concatenate(p) for p in zip(*buf, strict=True))
            perm = rng.permutation(len(y))
            for i in range(len(y) // batch_size):
                idx = perm[i * batch_size : (i + 1) * batch_size]
                yield cat[idx], num[idx], y[idx]

        for batch in self._stream("train", batch_size, True):
            buf.append(batch)
            if len(buf) == self.shuffle_batches:
                yield from flush()
                buf = []
        if buf:
            yield from flush()

    def eval_batches(self, split, batch_size):
        return self._stream(split, batch_size, False)


def criteo_dataset(path, *, min_count=10, max_lines=None, show_progress=None):
    """Builds the Criteo vocabulary (first pass) and returns a :class:`CriteoData`."""
    vocab = criteo.build_vocabulary(
        path, min_count=min_count, max_lines=max_lines, show_progress=show_progress
    )
    return CriteoData(
        str(path), vocab, max_lines=max_lines, show_progress=show_progress
    )


def load_dataset(config, *, show_progress=None) -> TabularData:
    """The data set a :class:`models.train_dcn.TrainConfig` names (its ``data``,
    ``path``, ``criteo_min_count`` and ``criteo_max_lines``)."""
    if config.data == "adult":
        return adult_dataset(config.path)
    return criteo_dataset(
        config.path,
        min_count=config.criteo_min_count,
        max_lines=config.criteo_max_lines,
        show_progress=show_progress,
    )
