"""Tests of models.coded_dcn: coded DCNv2 inference end to end on a shrunken setup.

A random-initialised tiny parallel DCNv2 (L = 2, so D = 22 with K = 8) on synthetic
data is served by M = 40 workers; one module-scoped run covers every scheme at
N = D and N = M, so the compiled decoders are shared by the tests.
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
from models import coded_dcn
from models.coded_dcn import SCHEMES, CodedDCNConfig, format_table, run_coded_dcn
from models.dcn import DCNConfig, DCNv2
from models.train_dcn import ArrayData, TrainConfig

K, M, C = 8, 40, 4
L = 2
D = (L + 1) * (K - 1) + 1  # 22
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


def test_chebyls_and_threshold_identical_at_threshold(run):
    # at N = D the first D arrivals are every responder: the same square system
    summary, _ = run
    assert summary["identical_at_threshold"] is True
    a = _row(summary, "chebyls+repapprox", D)
    b = _row(summary, "threshold+repapprox", D)
    for key in (
        "auc",
        "logloss",
        "logit_rel_err_median",
        "logit_rel_err_p95",
        "logit_rel_err_bf16_median",
        "deep_exact_fraction",
    ):
        assert a[key] == b[key], key


def test_all_responses_every_deep_task_exact_and_small_error(run):
    summary, _ = run
    row = _row(summary, "chebyls+repapprox", M)
    assert row["deep_exact_fraction"] == 1.0
    assert row["deep_all_exact_fraction"] == 1.0
    assert row["deep_all_exact_probability"] == 1.0
    assert row["cross_ok_fraction"] == 1.0
    # With all M responses the least-squares fit averages the workers' bf16 noise
    # (per-output noise gain ||T_beta T_S^+||_F^2 / K = 0.55 < 1 at M = 40), so the
    # decoded logits are no further from float32 than the uncoded bf16 branches
    # (their floor), up to the encoding's Lebesgue constant 2.23 on the input
    # rounding: bound 1.5x (the seed's target ratio).
    floor = summary["uncoded_bf16_branches"]["logit_rel_err_median"]
    assert row["logit_rel_err_median"] <= 1.5 * floor
    # against the uncoded bf16 model: both differ from float32 by bf16 rounding in
    # the L + 1 stages of the Cross tower and the head, so by at most 2 (L + 2) u
    u_bf16 = cj.unit_roundoff(jnp.bfloat16)
    assert row["logit_rel_err_bf16_median"] <= 2 * (L + 2) * u_bf16


def test_one_compiled_decoder_for_every_n(run):
    # the mask is data: N = D and N = M (and the float32-worker run) share programs
    del run
    codes = coded_dcn._codes(K, M, C, D)
    for fn in (*codes.poly.values(), *codes.approx.values()):
        assert fn._cache_size() == 1


def test_float32_workers_recover_uncoded_logits(model):
    # Known truth: with float32 workers and no stragglers, ChebyLS + RepApprox returns
    # the uncoded float32 logits up to float32 rounding times the conditioning: the
    # Lebesgue constant of the encoding, cond(T_S) of the decoder and the dot
    # products of length d0 in each of the L + 1 multiplicative stages.
    summary = run_coded_dcn(
        _config(responses=(M,), schemes=("chebyls+repapprox",), worker_dtype="float32"),
        model=model, data=_data(2), show_progress=False,
    )  # fmt: skip
    row = _row(summary, "chebyls+repapprox", M)
    d0 = model.config.input_dim
    codes = coded_dcn._codes(K, M, C, D)
    enc = cj.lagrange_encode(jnp.eye(K, dtype=jnp.float32), codes.beta_l, codes.alpha_l)
    lebesgue = float(jnp.max(jnp.sum(jnp.abs(enc), axis=1)))  # 2.23 for K=8, M=40
    cond = row["cross_cond_median"]  # cond(T_S) of the full system, about 1
    # gamma_n, n = (L + 1)(d0 + 2) roundings along the Cross tower; times 4 for the
    # Deep branch, the sum with the bias and the decoder's own rounding
    tol = 4 * lebesgue * cond * (L + 1) * (d0 + 2) * U_F32
    assert row["deep_exact_fraction"] == 1.0
    assert row["logit_rel_err_p95"] <= tol
    assert row["logit_rel_err_median"] <= tol
    assert summary["uncoded_bf16"]["dtype"] == "float32"


def test_deep_exact_rate_matches_exact_probability():
    # a statistical claim tested as one: the fraction of groups whose K Deep tasks
    # all have a responding replica, over T independent uniform masks, against the
    # exact inclusion-exclusion probability (99% Wilson interval)
    n, b, calls = 30, 12, 167  # b = R G of the module run: its compiled decoder
    t = b * calls
    codes = coded_dcn._codes(K, M, C, D)
    arr = cj.sample_arrivals(jax.random.key(7), num_workers=M, num_responses=n,
                             model="uniform", shape=(calls, b))  # fmt: skip
    y = np.broadcast_to(np.linspace(-1.0, 1.0, M, dtype=np.float32), (b, M))
    masks, orders = np.asarray(arr.mask), np.asarray(arr.order)
    exact = np.concatenate([
        np.asarray(codes.poly["chebyls+repapprox"](y, y, masks[i], orders[i])[-1])
        for i in range(calls)
    ])  # fmt: skip
    all_exact = exact.all(axis=1)
    lo, hi = coded_dcn._wilson(int(all_exact.sum()), t)
    assert lo <= cj.exact_recovery_probability(K, C, M, n) <= hi
    p_task = coded_dcn._task_exact_probability(K, C, M, n)
    lo, hi = coded_dcn._wilson(int(exact.sum()), exact.size)
    assert lo <= p_task <= hi


def test_wilson_interval_known_values():
    # Wilson (1927): 50 of 100 at z = 1.96 gives [0.4038, 0.5962]; 0 of n gives
    # [0, z^2 / (n + z^2)]
    lo, hi = coded_dcn._wilson(50, 100, z=1.96)
    assert lo == pytest.approx(0.40383, abs=1e-5)
    assert hi == pytest.approx(0.59617, abs=1e-5)
    lo, hi = coded_dcn._wilson(0, 20, z=1.96)
    assert lo == 0.0 and hi == pytest.approx(1.96**2 / (20 + 1.96**2), rel=1e-12)


def test_task_exact_probability_against_enumeration():
    # float64 reference: brute force over all C(8, n) subsets of a small system
    from itertools import combinations

    k, c, m = 2, 3, 8
    for n in range(0, m + 1):
        hits = sum(0 in {w // c for w in s if w < k * c}
                   for s in combinations(range(m), n))  # fmt: skip
        brute = hits / math.comb(m, n)
        assert coded_dcn._task_exact_probability(k, c, m, n) == pytest.approx(
            brute, rel=1e-12, abs=1e-15
        )


def test_group_indices_wrap_around():
    g = coded_dcn._group_indices(10, 4)
    assert g.shape == (3, 4)
    assert g.ravel().tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]


@pytest.mark.parametrize(
    ("over", "err", "match"),
    [
        (dict(responses=(41,)), ValueError, r"CodedDCNConfig: .*D <= N <= M.*\[41\]"),
        (dict(responses=(21,)), ValueError, r"CodedDCNConfig: .*D = 22.*\[21\]"),
        (dict(responses=()), ValueError, "CodedDCNConfig: responses"),
        (dict(responses=(30, 30)), ValueError, "distinct"),
        (dict(replication=6), ValueError, r"CodedDCNConfig: .*K c = 8 \* 6 = 48"),
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
        run_coded_dcn(cfg, model=_abstract_model(), data=_data(0, n_test=5))


def test_main_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        coded_dcn.main(["--out", str(tmp_path), "--quick", "--repetitions", "0"])
    assert "num_repetitions" in capsys.readouterr().err
