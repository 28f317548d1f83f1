"""Tests of models.coded_dcn: coded DCNv2 inference end to end on a shrunken setup.

A random-initialised tiny parallel DCNv2 (L = 2, so D = 10 with K = 4) on synthetic
data is served by M = 16 workers (RepApprox: c = 3 replicas, 4 extra Berrut
servers); one module-scoped run covers every scheme at N = D and N = M, so the
compiled decoders are shared by the tests.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import codedjax as cj
import codedjax.bounds as cb
from models.coded_dcn import (
    SCHEMES,
    CodedDCNConfig,
    DCNScheme,
    build_schemes,
    format_table,
    metrics,
    run_coded_dcn,
)
from models.coded_dcn import pipeline as pl
from models.coded_dcn.__main__ import main
from models.coded_dcn.schemes import Sizes, exact_tasks
from models.dcn import DCNConfig, DCNv2
from models.train_dcn import ArrayData, TrainConfig

K, M, C = 4, 16, 3
L = 2
D = (L + 1) * (K - 1) + 1  # 10
N_TEST = 45  # not a multiple of K: the last group wraps around
U_F32 = float(jnp.finfo(jnp.float32).eps) / 2


def _data(seed: int, n_test: int = N_TEST) -> ArrayData:
    rng = np.random.default_rng(seed)

    def split(n):
        cat = rng.integers(0, 6, size=(n, 2)).astype(np.int32)
        num = rng.standard_normal((n, 3)).astype(np.float32)
        y = (np.arange(n) % 3 == 0).astype(np.int32)  # both classes
        return cat, num, y

    return ArrayData(split(16), split(64), split(n_test), (5, 7), 3)


def _model_config(*, layers: int = L, structure: str = "parallel") -> DCNConfig:
    return DCNConfig(
        vocab_sizes=(5, 7),
        num_numeric=3,
        embed_dim=4,
        num_cross_layers=layers,
        deep_sizes=(16,),
        structure=structure,
    )


def _abstract_model(**kw) -> DCNv2:
    """A model skeleton without parameter values (enough for the argument checks)."""
    return nnx.eval_shape(lambda: DCNv2(_model_config(**kw), rngs=nnx.Rngs(0)))


def _config(**over) -> CodedDCNConfig:
    base = dict(
        train=TrainConfig(embed_dim=4, deep_sizes=(16,), num_cross_layers=L),
        num_inputs=K,
        num_workers=M,
        replication=C,
        responses=(D, M),
        num_repetitions=2,
        nercc_grid=(0.0, 1e-4),
        nercc_val_groups=4,
        nercc_num_masks=4,
    )
    return CodedDCNConfig(**{**base, **over})


@pytest.fixture(scope="module")
def model():
    # built under one jit: one compilation instead of one per initialiser op
    return nnx.jit(lambda: DCNv2(_model_config(), rngs=nnx.Rngs(params=0)))()


@pytest.fixture(scope="module")
def run(tmp_path_factory, model):
    # module fixtures are set up before conftest's per-test strict-promotion
    # fixture: enter the same mode here, so the run is checked under it and the
    # tests reuse its compiled programs
    out = tmp_path_factory.mktemp("coded_dcn")
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        summary = run_coded_dcn(
            _config(), model=model, data=_data(1), out=out, show_progress=False
        )
    return summary, out


def _row(summary, scheme, n):
    (row,) = [r for r in summary["coded"] if r["scheme"] == scheme and r["N"] == n]
    return row


def test_end_to_end_writes_summary_report_and_plots(run):
    summary, out = run
    on_disk = json.loads((out / "summary.json").read_text())
    assert set(on_disk["uncoded"]) >= {"auc", "logloss"}
    assert set(on_disk["uncoded_bf16"]) >= {"auc", "logloss", "logit_rel_err_median"}
    required = {
        "scheme",
        "N",
        "auc",
        "logloss",
        "logit_rel_err_median",
        "logit_rel_err_p95",
        "deep_exact_fraction",
    }
    assert len(on_disk["coded"]) == len(SCHEMES) * 2
    for row in on_disk["coded"]:
        assert required <= set(row)
        assert row["scheme"] in SCHEMES and row["N"] in (D, M)
        assert 0.0 <= row["auc"] <= 1.0 and math.isfinite(row["logloss"])
    assert on_disk["config"]["num_coeffs"] == D
    assert on_disk["config"]["num_test_queries"] == N_TEST
    assert on_disk["config"]["num_groups"] == math.ceil(N_TEST / K)
    # NeRCC's smoothing is recorded for every N and taken from the grid
    assert set(on_disk["nercc"]) == {str(D), str(M)}
    for v in on_disk["nercc"].values():
        assert v["encoder_smoothing"] in (0.0, 1e-4)
        assert v["decoder_smoothing"] in (0.0, 1e-4)
    report = (out / "report.md").read_text()
    for png in ("auc_vs_n.png", "logit_error_vs_n.png", "deep_exact_vs_n.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in report  # relative links
    for scheme in SCHEMES:
        assert f"== {scheme}" in format_table(summary)


def test_chebyls_and_threshold_agree_at_threshold(run):
    # at N = D the first D arrivals are every responder: the same square system, so
    # the two decoders' logits agree to the solvers' rounding (D cond eps32), and
    # the Deep branch (the same RepApprox decode) is identical
    summary, _ = run
    target = summary["targets"]["chebyls_equals_threshold_at_N_eq_D"]
    assert target["met"], target
    assert summary["rel_diff_at_threshold"] == target["value"]
    a = _row(summary, "chebyls+repapprox", D)
    b = _row(summary, "threshold+repapprox", D)
    assert target["limit"] == D * a["cross_cond_median"] * 2.0**-23
    for key in ("deep_exact_fraction", "deep_all_exact_fraction"):
        assert a[key] == b[key], key


def test_all_responses_every_deep_task_exact_and_small_error(run):
    summary, _ = run
    row = _row(summary, "chebyls+repapprox", M)
    assert row["deep_exact_fraction"] == 1.0
    assert row["deep_all_exact_fraction"] == 1.0
    assert row["deep_all_exact_probability"] == 1.0
    assert row["cross_ok_fraction"] == 1.0
    # With all M responses the least-squares fit averages the workers' bf16 noise
    # (per-output noise gain ||T_beta T_S^+||_F^2 / K = D / M < 1), so the decoded
    # logits are no further from float32 than the uncoded bf16 branches (their
    # floor), up to the encoding's Lebesgue constant on the input rounding: bound
    # 1.5x (the seed's target ratio).
    floor = summary["uncoded_bf16_branches"]["logit_rel_err_median"]
    assert row["logit_rel_err_median"] <= 1.5 * floor
    # against the uncoded bf16 model: both differ from float32 by bf16 rounding in
    # the L + 1 stages of the Cross tower and the head, so by at most 2 (L + 2) u
    u_bf16 = cj.unit_roundoff(jnp.bfloat16)
    assert row["logit_rel_err_bf16_median"] <= 2 * (L + 2) * u_bf16


def test_scheme_dictionary_holds_codes_of_the_run_sizes():
    schemes = build_schemes(Sizes(K, M, C, L + 1))
    assert tuple(schemes) == SCHEMES
    for name, scheme in schemes.items():
        assert isinstance(scheme, DCNScheme)
        for code in scheme:
            assert isinstance(code, cj.Code)
            assert (code.num_inputs, code.num_workers) == (K, M)
        # BACC and NeRCC feed both branches from one coded input
        assert scheme.shared == (name in ("bacc", "nercc"))
        assert scheme.tuned == (name == "nercc")
    assert schemes["chebyls+repapprox"].cross.threshold == D
    tuned = schemes["nercc"].with_smoothing((1e-4, 1e-3))
    assert tuned.shared and tuned.cross.smoothing == (1e-4, 1e-3)


def test_schemes_are_the_catalogues_codes_and_say_why_not():
    # each branch's code is the catalogue's for its workload: the Cross branch a
    # polynomial of degree L + 1, the Deep branch not a polynomial
    (s,) = build_schemes(Sizes(K, M, C, L + 1), ("chebyls+repapprox",)).values()
    cross = cj.Workload("cross", L + 1)
    deep = cj.Workload("deep", None)
    assert s.cross == cj.catalogue(cross, K, M, names=["chebyls"])[0].code
    assert s.deep == cj.catalogue(deep, K, M, names=["repapprox"], replicas=C)[0].code
    # below D the Cross branch's Lagrange code does not apply: the catalogue's reason
    with pytest.raises(ValueError, match=r"the cross branch: does not apply: M = 9"):
        build_schemes(Sizes(K, D - 1, 1, L + 1), ("chebyls+repapprox",))
    with pytest.raises(ValueError, match=r"build_schemes: names must be among"):
        build_schemes(Sizes(K, M, C, L + 1), ("lcc",))


def test_one_compiled_decoder_for_every_n(run):
    # the mask is data: a decode at another N reuses the run's program (same code,
    # same shapes: B = R G = 12 patterns of the module run)
    del run
    code = build_schemes(Sizes(K, M, C, L + 1))["chebyls+repapprox"].cross
    b = 2 * math.ceil(N_TEST / K)
    arr = cj.sample_arrivals(
        jax.random.key(5),
        num_workers=M,
        num_responses=M,
        model=cj.Uniform(0.0, 1.0),
        shape=(b,),
    )
    orders = np.asarray(arr.order, np.int32)
    ranks = np.argsort(orders, axis=-1, kind="stable")
    y = np.zeros((b, M), np.float32)
    pl.decode_masks(code, y, ranks < D, orders)
    before = pl.decode_masks._cache_size()
    for n in (D + 3, M):
        pl.decode_masks(code, y, ranks < n, orders)
    assert pl.decode_masks._cache_size() == before


def test_float32_workers_recover_uncoded_logits(model):
    # Known truth: with float32 workers and no stragglers, ChebyLS + RepApprox returns
    # the uncoded float32 logits up to float32 rounding times the conditioning: the
    # Lebesgue constant of the encoding, cond(T_S) of the decoder and the dot
    # products of length d0 in each of the L + 1 multiplicative stages.
    summary = run_coded_dcn(
        _config(responses=(M,), schemes=("chebyls+repapprox",), worker_dtype="float32"),
        model=model,
        data=_data(2),
        show_progress=False,
    )
    row = _row(summary, "chebyls+repapprox", M)
    d0 = model.config.input_dim
    code = build_schemes(Sizes(K, M, C, L + 1))["chebyls+repapprox"].cross
    enc = code.encode(jnp.eye(K, dtype=jnp.float32))
    lebesgue = float(jnp.max(jnp.sum(jnp.abs(enc), axis=1)))  # 2.23 at K=8, M=40
    cond = row["cross_cond_median"]  # cond(T_S) of the full system, about 1
    # gamma_n, n = (L + 1)(d0 + 2) roundings along the Cross tower; times 4 for the
    # Deep branch, the sum with the bias and the decoder's own rounding
    tol = 4 * lebesgue * cond * (L + 1) * (d0 + 2) * U_F32
    assert row["deep_exact_fraction"] == 1.0
    assert row["logit_rel_err_p95"] <= tol
    assert row["logit_rel_err_median"] <= tol
    assert summary["uncoded_bf16"]["dtype"] == "float32"


def test_exact_tasks_agree_with_the_decoder():
    # the pipeline's count of exact Deep tasks (from the layout) is what the
    # library's RepApprox decoder reports as exact
    code = build_schemes(Sizes(K, M, C, L + 1))["chebyls+repapprox"].deep
    masks = np.asarray(
        cj.sample_masks(jax.random.key(9), num_workers=M, num_responses=6, shape=(16,))
    )
    y = np.linspace(-1.0, 1.0, M, dtype=np.float32)
    ref = jax.vmap(lambda mk: cj.repapprox_decode(y, mk, code.layout).exact)(masks)
    got = exact_tasks(code, masks)
    np.testing.assert_array_equal(got, np.asarray(ref))
    assert 0 < got.mean() < 1  # both outcomes occur at N = 6


def test_deep_exact_rate_matches_exact_probability():
    # a statistical claim tested as one: the fraction of groups whose K Deep tasks
    # all have a responding replica, over T independent uniform masks, against the
    # exact inclusion-exclusion probability (99% Clopper-Pearson interval)
    n, t = 8, 2004
    code = build_schemes(Sizes(K, M, C, L + 1))["chebyls+repapprox"].deep
    arr = cj.sample_arrivals(
        jax.random.key(7),
        num_workers=M,
        num_responses=n,
        model=cj.Uniform(0.0, 1.0),
        shape=(t,),
    )
    exact = exact_tasks(code, np.asarray(arr.mask))
    all_exact = exact.all(axis=1)
    lo, hi = cb.clopper_pearson(int(all_exact.sum()), t, confidence=0.99)
    assert lo <= cj.exact_recovery_probability(K, C, M, n) <= hi
    p_task = metrics.task_exact_probability(K, C, M, n)
    lo, hi = cb.clopper_pearson(int(exact.sum()), exact.size, confidence=0.99)
    assert lo <= p_task <= hi


def test_task_exact_probability_against_enumeration():
    # float64 reference: brute force over all C(8, n) subsets of a small system
    from itertools import combinations

    k, c, m = 2, 3, 8
    for n in range(0, m + 1):
        hits = sum(
            0 in {w // c for w in s if w < k * c} for s in combinations(range(m), n)
        )
        brute = hits / math.comb(m, n)
        assert metrics.task_exact_probability(k, c, m, n) == pytest.approx(
            brute, rel=1e-12, abs=1e-15
        )


def test_group_indices_wrap_around():
    g = metrics.group_indices(10, 4)
    assert g.shape == (3, 4)
    assert g.ravel().tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]


@pytest.mark.parametrize(
    ("over", "err", "match"),
    [
        (dict(responses=(17,)), ValueError, r"CodedDCNConfig: .*D <= N <= M.*\[17\]"),
        (dict(responses=(9,)), ValueError, r"CodedDCNConfig: .*D = 10.*\[9\]"),
        (dict(responses=()), ValueError, "CodedDCNConfig: responses"),
        (dict(responses=(30, 30)), ValueError, "distinct"),
        (dict(replication=5), ValueError, r"CodedDCNConfig: .*K c = 4 \* 5 = 20"),
        (dict(schemes=("lcc",)), ValueError, "CodedDCNConfig: schemes"),
        (dict(worker_dtype="int8"), ValueError, "CodedDCNConfig: worker_dtype"),
        (dict(num_repetitions=0), ValueError, "num_repetitions must be >= 1"),
        (dict(num_repetitions=1.5), TypeError, "num_repetitions must be an int"),
        (dict(num_inputs=1), ValueError, "num_inputs"),
        (dict(nercc_grid=(-1.0,)), ValueError, "nercc_grid"),
        (dict(train=TrainConfig(structure="stacked")), ValueError, "parallel"),
        (dict(train="adult"), TypeError, "TrainConfig"),
    ],
)
def test_config_rejects_bad_values(over, err, match):
    with pytest.raises(err, match=match):
        _config(**over)


def test_run_rejects_bad_models_and_data():
    cfg = _config(responses=(M,), schemes=("bacc",))
    with pytest.raises(ValueError, match="run_coded_dcn: .*parallel"):
        run_coded_dcn(cfg, model=_abstract_model(structure="stacked"), data=_data(0))
    with pytest.raises(ValueError, match="run_coded_dcn: the model has L = 3"):
        run_coded_dcn(cfg, model=_abstract_model(layers=3), data=_data(0))
    with pytest.raises(TypeError, match="run_coded_dcn: model must be"):
        run_coded_dcn(cfg, model=object(), data=_data(0))
    with pytest.raises(ValueError, match="run_coded_dcn: the test split needs"):
        run_coded_dcn(cfg, model=_abstract_model(), data=_data(0, n_test=K - 1))


def test_main_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--quick", "--repetitions", "0"])
    err = capsys.readouterr().err
    assert "--repetitions" in err and "got 0" in err
