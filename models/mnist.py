"""The vendored MNIST subset: loading, validation and a fixed train/validation/test
split.

``data/mnist_5k.csv.gz`` holds 5,000 MNIST digits (500 per class), one per line: 784
pixel values in 0..255 (row-major 28x28) and then the label 0..9. An optional header
line (any first line whose first field is not an integer) is checked for its column
count and skipped. Licence and source: ``data/README.md`` (CC BY-SA 3.0, LeCun, Cortes &
Burges).

The split is fixed by the code, not by a seed the caller passes: per class, a
permutation drawn from ``numpy.random.default_rng(SPLIT_SEED)`` sends 100 digits to
test and 400 to train, and 50 of those 400 to validation. So test = 1,000 (100 per
class), train = 3,500 and validation = 500, and the validation digits never appear in
training or test. The numbers are arguments of :func:`split_mnist` for shrunken tests.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "MNIST_PATH",
    "NUM_CLASSES",
    "NUM_PIXELS",
    "SPLIT_SEED",
    "MnistSplit",
    "check_images",
    "load_mnist",
    "read_mnist_csv",
    "split_mnist",
]

MNIST_PATH = Path(__file__).resolve().parents[1] / "data" / "mnist_5k.csv.gz"
NUM_PIXELS = 28 * 28
NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28, 1)
SPLIT_SEED = 20240206  # fixed: the split is part of the experiment's definition


class MnistSplit(NamedTuple):
    """Images [n, 28, 28, 1] float32 in [0, 1] and labels [n] int32 for each part."""

    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def _is_int(field: str) -> bool:
    try:
        int(field)
    except ValueError:
        return False
    return True


def read_mnist_csv(path: str | Path = MNIST_PATH) -> tuple[np.ndarray, np.ndarray]:
    """Read an MNIST CSV (gzip or plain): 784 pixels 0..255 then a label 0..9 per line.

    Args:
        path: the file; ``.gz`` files are decompressed.

    Returns:
        ``(images, labels)``: images [n, 28, 28, 1] float32 scaled to [0, 1], labels
        [n] int32.

    Raises:
        ValueError: naming the file and the 1-based line, when a line has the wrong
            number of columns, a non-integer field, a pixel outside 0..255 or a label
            outside 0..9, or when the file holds no data line.
        FileNotFoundError: when the file does not exist.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    want = NUM_PIXELS + 1
    first = 0
    if lines and lines[0].strip() and not _is_int(lines[0].split(",")[0].strip()):
        ncols = lines[0].count(",") + 1
        if ncols != want:
            raise ValueError(
                f"read_mnist_csv: {path} line 1 (header): expected {want} columns "
                f"(784 pixels and the label), got {ncols}"
            )
        first = 1
    body = [(i, line) for i, line in enumerate(lines[first:], start=first + 1)]
    body = [(i, line) for i, line in body if line.strip()]
    if not body:
        raise ValueError(f"read_mnist_csv: {path} holds no data line")
    for lineno, line in body:
        ncols = line.count(",") + 1
        if ncols != want:
            raise ValueError(
                f"read_mnist_csv: {path} line {lineno}: expected {want} columns "
                f"(784 pixels and the label), got {ncols}"
            )
    try:
        data = np.loadtxt(
            io.StringIO("\n".join(line for _, line in body)),
            delimiter=",",
            dtype=np.int64,
            ndmin=2,
        )
    except ValueError:
        for lineno, line in body:
            bad = [v for v in line.split(",") if not _is_int(v.strip())]
            if bad:
                raise ValueError(
                    f"read_mnist_csv: {path} line {lineno}: expected integers, "
                    f"got {bad[0]!r}"
                ) from None
        raise
    linenos = np.array([i for i, _ in body])
    pixels, labels = data[:, :NUM_PIXELS], data[:, NUM_PIXELS]
    bad_label = np.flatnonzero((labels < 0) | (labels >= NUM_CLASSES))
    if bad_label.size:
        r = bad_label[0]
        raise ValueError(
            f"read_mnist_csv: {path} line {linenos[r]}: label must be in 0..9, "
            f"got {labels[r]}"
        )
    bad_pix = np.flatnonzero(((pixels < 0) | (pixels > 255)).any(axis=1))
    if bad_pix.size:
        r = bad_pix[0]
        v = pixels[r][(pixels[r] < 0) | (pixels[r] > 255)][0]
        raise ValueError(
            f"read_mnist_csv: {path} line {linenos[r]}: pixels must be in 0..255, "
            f"got {v}"
        )
    images = (pixels.astype(np.float32) / np.float32(255.0)).reshape((-1, *IMAGE_SHAPE))
    return images, labels.astype(np.int32)


def split_mnist(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    test_per_class: int = 100,
    val_per_class: int = 50,
) -> MnistSplit:
    """Fixed stratified split: per class, ``test_per_class`` to test and
    ``val_per_class`` to validation; the rest trains.

    The per-class permutation comes from ``numpy.random.default_rng(SPLIT_SEED)``, so
    the split depends only on the file. Within each part the rows are shuffled with the
    same generator so that classes interleave.

    Raises:
        ValueError: when a class has fewer than ``test_per_class + val_per_class + 1``
            digits, or the arrays disagree in length.
    """
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"split_mnist: images and labels must have the same length, got "
            f"{images.shape[0]} and {labels.shape[0]}"
        )
    rng = np.random.default_rng(SPLIT_SEED)
    parts: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for c in range(NUM_CLASSES):
        idx = np.flatnonzero(labels == c)
        need = test_per_class + val_per_class + 1
        if idx.size < need:
            raise ValueError(
                f"split_mnist: class {c} needs at least {need} digits, has {idx.size}"
            )
        idx = rng.permutation(idx)
        parts["test"].append(idx[:test_per_class])
        parts["val"].append(idx[test_per_class : test_per_class + val_per_class])
        parts["train"].append(idx[test_per_class + val_per_class :])
    out = {}
    for name, chunks in parts.items():
        idx = rng.permutation(np.concatenate(chunks))
        out[name] = (images[idx], labels[idx])
    return MnistSplit(
        out["train"][0],
        out["train"][1],
        out["val"][0],
        out["val"][1],
        out["test"][0],
        out["test"][1],
    )


def load_mnist(path: str | Path = MNIST_PATH) -> MnistSplit:
    """Read ``path`` and return the fixed 3,500 / 500 / 1,000 split."""
    return split_mnist(*read_mnist_csv(path))


def check_images(images, *, name: str = "images", func: str = "check_images") -> None:
    """Raise ``ValueError`` unless ``images`` has shape [n, 28, 28, 1] with n >= 1."""
    shape = tuple(np.shape(images))
    if len(shape) != 4 or shape[1:] != IMAGE_SHAPE or shape[0] < 1:
        raise ValueError(
            f"{func}: {name} must have shape [n, 28, 28, 1] with n >= 1, got {shape}"
        )
