"""Tests for models.metrics (AUC, logloss), models.adult and models.criteo."""

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from models import adult, checkpoint, criteo, metrics

# --------------------------------------------------------------------------- metrics


def _auc_bruteforce(y, s):
    pos = [si for yi, si in zip(y, s, strict=True) if yi == 1]
    neg = [si for yi, si in zip(y, s, strict=True) if yi == 0]
    total = 0.0
    for p, n in itertools.product(pos, neg):
        total += 1.0 if p > n else (0.5 if p == n else 0.0)
    return total / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_auc_matches_pairwise_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=200)
    y[:2] = [0, 1]
    s = rng.integers(0, 15, size=200).astype(np.float64)  # many ties
    assert metrics.binary_auc(y, s) == pytest.approx(_auc_bruteforce(y, s), abs=1e-14)


def test_binary_auc_known_values():
    assert metrics.binary_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert metrics.binary_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert metrics.binary_auc([0, 1], [0.5, 0.5]) == 0.5
    # invariant under a monotone transform of the scores
    rng = np.random.default_rng(3)
    y, s = rng.integers(0, 2, 50), rng.normal(size=50)
    assert metrics.binary_auc(y, s) == metrics.binary_auc(y, np.exp(s))


def test_binary_logloss_matches_direct_formula_and_is_stable():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=300)
    z = rng.normal(scale=3.0, size=300)
    p = 1.0 / (1.0 + np.exp(-z))
    direct = -np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))
    assert metrics.binary_logloss(y, z) == pytest.approx(direct, rel=1e-12)
    # known truth: z = 0 gives log 2; huge logits stay finite and exact
    assert metrics.binary_logloss([0, 1], [0.0, 0.0]) == pytest.approx(np.log(2.0))
    assert metrics.binary_logloss([1, 0], [-1000.0, 1000.0]) == pytest.approx(1000.0)
    assert metrics.binary_logloss([1, 0], [1000.0, -1000.0]) == 0.0


@pytest.mark.parametrize("fn", [metrics.binary_auc, metrics.binary_logloss])
def test_metrics_reject_bad_input(fn):
    with pytest.raises(ValueError, match=fn.__name__):
        fn([0, 1, 2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=fn.__name__):
        fn([0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=fn.__name__):
        fn([0, 1], [0.1, np.nan])


def test_binary_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        metrics.binary_auc([1, 1], [0.1, 0.2])


# --------------------------------------------------------------------------- adult


def _write_adult(path, rows, header=None, gz=True):
    header = header or ",".join(adult.COLUMNS)
    text = header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        Path(path).write_text(text)


def _adult_row(i, label):
    return [
        20 + i % 50,
        "Private" if i % 3 else "?",
        100000 + i,
        "HS-grad",
        9,
        "Never-married",
        "Sales",
        "Own-child",
        "White",
        "Male" if i % 2 else "Female",
        0 if i % 5 else 5000,
        0,
        40,
        "United-States",
        label,
    ]


def test_adult_bundled_file_split_and_preprocessing():
    data = adult.load_adult()
    n_total = sum(len(split.labels) for split in (data.train, data.val, data.test))
    assert n_total == 48842
    assert len(data.train.labels) == pytest.approx(0.7 * n_total, abs=1)
    # the positive rate of the whole file is 23.9% (data/README.md)
    all_y = np.concatenate([data.train.labels, data.val.labels, data.test.labels])
    assert all_y.mean() == pytest.approx(0.239, abs=0.001)
    assert data.train.categorical.shape == (len(data.train.labels), 8)
    assert data.train.numeric.shape == (len(data.train.labels), 6)
    assert data.train.categorical.dtype == np.int32
    assert data.train.numeric.dtype == np.float32
    # normalisation fitted on train: mean 0, std 1 there
    # (float64 statistics of the float32 values: only their rounding, ~1e-7, remains)
    num64 = data.train.numeric.astype(np.float64)
    np.testing.assert_allclose(num64.mean(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(num64.std(0), 1.0, atol=1e-6)
    # indices lie inside the vocabularies (slot 0 = OOV/missing)
    for j, size in enumerate(data.vocab_sizes):
        assert data.train.categorical[:, j].min() >= 0
        assert data.test.categorical[:, j].max() < size
    # the split is fixed: a second load gives the same arrays
    again = adult.load_adult()
    np.testing.assert_array_equal(again.test.categorical, data.test.categorical)
    np.testing.assert_array_equal(again.test.labels, data.test.labels)


def test_adult_missing_and_unknown_categories_map_to_oov(tmp_path):
    rows = [_adult_row(i, ">50K" if i % 4 == 0 else "<=50K") for i in range(60)]
    path = tmp_path / "a.csv.gz"
    _write_adult(path, rows)
    data = adult.load_adult(path)
    pre = data.preprocessor
    wc = adult.CATEGORICAL_COLUMNS.index("workclass")
    # '?' is missing -> slot 0; a known value gets a slot >= 1
    enc_cat, _ = pre.transform_rows([_adult_row(0, "<=50K"), _adult_row(1, "<=50K")])
    assert enc_cat[0, wc] == 0 and enc_cat[1, wc] >= 1
    # a category never seen in training -> slot 0
    unseen = _adult_row(1, "<=50K")
    unseen[1] = "Martian-gov"
    enc_cat, _ = pre.transform_rows([unseen])
    assert enc_cat[0, wc] == 0
    # '>50K.' (the test-file spelling) is accepted as the positive class
    rows2 = rows + [_adult_row(61, ">50K.")]
    _write_adult(tmp_path / "b.csv", rows2, gz=False)
    d2 = adult.load_adult(tmp_path / "b.csv")
    total = sum(int(s.labels.sum()) for s in (d2.train, d2.val, d2.test))
    assert total == 16


def test_adult_wrong_column_count_names_file_and_line(tmp_path):
    rows = [_adult_row(i, "<=50K") for i in range(10)]
    rows[4] = rows[4][:-2] + [rows[4][-1]]
    path = tmp_path / "bad.csv"
    _write_adult(path, rows, gz=False)
    with pytest.raises(ValueError, match=r"bad\.csv.*line 6.*15.*14"):
        adult.load_adult(path)


def test_adult_bad_label_names_file_line_and_field(tmp_path):
    rows = [_adult_row(i, "<=50K") for i in range(10)]
    rows[2][-1] = "maybe"
    path = tmp_path / "badlabel.csv.gz"
    _write_adult(path, rows)
    with pytest.raises(ValueError, match=r"badlabel\.csv\.gz.*line 4.*income.*maybe"):
        adult.load_adult(path)


def test_adult_bad_header_and_missing_file(tmp_path):
    path = tmp_path / "h.csv"
    _write_adult(path, [_adult_row(0, "<=50K")], header="a,b,c", gz=False)
    with pytest.raises(ValueError, match=r"h\.csv.*header"):
        adult.load_adult(path)
    with pytest.raises(ValueError, match="nope.csv"):
        adult.load_adult(tmp_path / "nope.csv")


# --------------------------------------------------------------------------- criteo


def _criteo_lines(n, seed=0):
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        label = str(int(rng.random() < 0.3))
        ints = []
        for j in range(13):
            r = rng.random()
            ints.append(
                ""
                if r < 0.1
                else str(
                    int(rng.integers(-2, 1000)) if j == 1 else int(rng.integers(0, 500))
                )
            )
        cats = []
        for j in range(26):
            r = rng.random()
            cats.append("" if r < 0.1 else f"{j:02d}{int(rng.integers(0, 6)):06x}")
        if i == 0:
            ints[0], cats[0] = "7", "deadbeef"  # a category seen once
        lines.append("\t".join([label, *map(str, ints), *cats]))
    return lines


def _write_lines(path, lines, gz=False):
    text = "".join(line + "\n" for line in lines)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        Path(path).write_text(text)


def test_criteo_numeric_transform_known_values():
    raw = np.array([[0.0, 1.0, np.e - 1.0, -1.0, np.nan]])
    got = criteo.transform_integers(raw)
    np.testing.assert_allclose(got, [[0.0, np.log(2.0), 1.0, -np.log(2.0), 0.0]])


@pytest.mark.parametrize("gz", [False, True])
def test_criteo_vocab_and_batches(tmp_path, gz):
    lines = _criteo_lines(57)
    path = tmp_path / ("day.tsv.gz" if gz else "day.tsv")
    _write_lines(path, lines, gz=gz)
    vocab = criteo.build_vocabulary(path, min_count=2)
    assert len(vocab.vocabs) == 26
    # the single-occurrence category was dropped (min_count = 2) and maps to OOV
    assert "deadbeef" not in vocab.vocabs[0]
    # a direct count of column C1 agrees
    counts = {}
    for line in lines:
        v = line.split("\t")[14]
        if v:
            counts[v] = counts.get(v, 0) + 1
    assert set(vocab.vocabs[0]) == {v for v, c in counts.items() if c >= 2}
    assert all(i >= 1 for i in vocab.vocabs[0].values())
    batches = list(criteo.iter_batches(path, vocab, batch_size=10))
    assert [len(b.labels) for b in batches] == [10, 10, 10, 10, 10, 7]
    cat = np.concatenate([b.categorical for b in batches])
    num = np.concatenate([b.numeric for b in batches])
    y = np.concatenate([b.labels for b in batches])
    assert cat.shape == (57, 26) and num.shape == (57, 26) and y.shape == (57,)
    assert cat[0, 0] == 0  # 'deadbeef' -> OOV
    expect_y = np.array([int(line.split("\t")[0]) for line in lines])
    np.testing.assert_array_equal(y, expect_y)
    # numeric: 13 log-transformed values then 13 missing indicators
    first = lines[3].split("\t")[1:14]
    raw = np.array([float(v) if v else np.nan for v in first])
    np.testing.assert_allclose(
        num[3, :13], criteo.transform_integers(raw[None])[0], rtol=1e-6
    )
    np.testing.assert_array_equal(num[3, 13:], [0.0 if v else 1.0 for v in first])
    for j in range(26):
        assert cat[:, j].max() < vocab.vocab_sizes[j]


def test_criteo_streams_without_reading_the_whole_file(tmp_path):
    path = tmp_path / "s.tsv"
    _write_lines(path, _criteo_lines(30))
    vocab = criteo.build_vocabulary(path, min_count=1)
    gen = criteo.iter_batches(path, vocab, batch_size=4)
    assert next(gen).labels.shape == (4,)  # a generator, consumed lazily
    gen.close()


def test_criteo_bad_column_count_names_file_and_line(tmp_path):
    lines = _criteo_lines(8)
    lines[5] = "\t".join(lines[5].split("\t")[:-1])
    path = tmp_path / "bad.tsv"
    _write_lines(path, lines)
    with pytest.raises(ValueError, match=r"bad\.tsv.*line 6.*40.*39"):
        criteo.build_vocabulary(path, min_count=1)


def test_criteo_bad_label_names_file_and_line(tmp_path):
    lines = _criteo_lines(8)
    lines[2] = "2" + lines[2][1:]
    path = tmp_path / "lab.tsv"
    _write_lines(path, lines)
    with pytest.raises(ValueError, match=r"lab\.tsv.*line 3.*label.*'2'"):
        criteo.build_vocabulary(path, min_count=1)
    good = tmp_path / "good.tsv"
    _write_lines(good, _criteo_lines(8))
    vocab = criteo.build_vocabulary(good, min_count=1)
    with pytest.raises(ValueError, match=r"lab\.tsv.*line 3"):
        list(criteo.iter_batches(path, vocab, batch_size=4))


def test_criteo_bad_integer_field(tmp_path):
    lines = _criteo_lines(4)
    parts = lines[1].split("\t")
    parts[3] = "abc"
    lines[1] = "\t".join(parts)
    path = tmp_path / "int.tsv"
    _write_lines(path, lines)
    vocab = criteo.build_vocabulary(tmp_path / "int.tsv", min_count=1)
    with pytest.raises(ValueError, match=r"int\.tsv.*line 2.*I3.*'abc'"):
        list(criteo.iter_batches(path, vocab, batch_size=4))


def test_checkpoint_metadata_sidecar_is_json(tmp_path):
    from flax import nnx

    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    checkpoint.save_checkpoint(
        tmp_path / "sub" / "m.ckpt", model, metadata={"x": [1, 2]}
    )
    side = json.loads((tmp_path / "sub" / "m.ckpt.json").read_text())
    assert side == {"x": [1, 2]}
