"""models.serve_dcn.http: POST /predict through the streaming frontend, over HTTP.

A small random DCNv2 (the endpoint does not care whether it was trained) is
served by uvicorn on a local port; concurrent requests from a real HTTP client
(httpx) must get the offline decode of their coding group (the group rebuilt from
the answers' group and slot, encoded, computed by the same worker function and
decoded on the mask the answer names); bad bodies get a 400 with a message naming
the field and what came, and never join a group: the valid queries sent
concurrently with them all decode.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _params import numpy_module

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from flax import nnx  # noqa: E402

import codedjax as cj  # noqa: E402
from codedjax.serving import FixedN, Injector, Server, ThreadCluster  # noqa: E402
from models.dcn import DCNConfig, DCNv2  # noqa: E402
from models.serve_dcn.branches import BranchCode, make_worker  # noqa: E402
from models.serve_dcn.http import (  # noqa: E402
    embedding_error,
    make_app,
    parse_query,
)

pytestmark = pytest.mark.loose_promotion  # flax model code

K, M, N = 4, 8, 7  # cross degree 2: D = 7
# make_app's default bound on |x_0|: finfo(float32).max ** (1 / (2 d)), d = 2
MAX_ABS = float(np.finfo(np.float32).max) ** (1 / 4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drawn_dcn(cfg, seed):
    """A DCNv2 with numpy-drawn parameters (``_params.numpy_module``)."""
    return numpy_module(lambda: DCNv2(cfg, rngs=nnx.Rngs(0)), seed)


def test_concurrent_http_queries_get_the_offline_decode_and_bad_bodies_a_400():
    cfg = DCNConfig(vocab_sizes=(5, 7), num_numeric=3, embed_dim=4,
                    num_cross_layers=1, deep_sizes=(16,))  # fmt: skip
    model = _drawn_dcn(cfg, 0)
    code = BranchCode(
        cj.lagrange_code(num_inputs=K, num_workers=M, degree=2),
        cj.repapprox_code(num_inputs=K, num_workers=M, replication=2),
    )
    worker = make_worker(model, jnp.bfloat16)
    inj = Injector(latency=cj.ShiftedExponential(0.001, 0.002), seed=1)
    server = Server(code, worker, backend=ThreadCluster(injector=inj),
                    policy=FixedN(N))  # fmt: skip
    for v, exc in (("1", TypeError), (True, TypeError), (0.0, ValueError),
                   (math.inf, ValueError), (math.nan, ValueError)):  # fmt: skip
        with pytest.raises(exc, match=r"^make_app: max_abs must be"):
            make_app(model, server, group_deadline=0.01, max_abs=v)
    app = make_app(model, server, group_deadline=0.01)
    port = _free_port()
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                        log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    rng = np.random.default_rng(0)
    qs = [
        {"categorical": [int(rng.integers(5)), int(rng.integers(7))],
         "numerical": rng.normal(size=3).round(3).tolist()}
        for _ in range(14)
    ]  # fmt: skip
    bad = [
        (b"not json", "must be JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps({"categorical": [0], "numerical": [0, 0, 0]}),
         r"^categorical must be a list of 2 integer ids, got a list of 1$"),
        (json.dumps({"categorical": [0, 9], "numerical": [0, 0, 0]}),
         r"^categorical\[1\] must be .*\[0, 7\), got 9$"),
        (json.dumps({"categorical": [0, 1], "numerical": [0, "a", 0]}),
         r"^numerical\[1\] must be a number, got a string 'a'$"),
        (b'{"categorical": [0, 1], "numerical": [0, NaN, 0]}',
         r"^numerical\[1\] must be .*finite in float32.*got NaN$"),
        (json.dumps({"categorical": [0, 1], "numerical": [0, 0, 0], "x": 1}),
         "unknown fields"),
        # finite in JSON (float64), infinite in float32: it used to join a group
        # and fail the group's other queries
        (b'{"categorical": [0, 1], "numerical": [0, 0, 1e39]}',
         r"^numerical\[2\] must be .*finite in float32.*got 1e\+39$"),
        # an integer beyond float64 (used to escape as an OverflowError: a 500)
        (b'{"categorical": [0, 1], "numerical": [' + b"9" * 400 + b', 0, 0]}',
         r"^numerical\[0\] must be .*float32.*an integer of 400 digits$"),
        # finite in float32, but its degree-2 products overflow a coded group
        (b'{"categorical": [0, 1], "numerical": [0, 1e20, 0]}',
         rf"^numerical\[1\] must be at most {re.escape(f'{MAX_ABS:.3g}')} .*"
         r"got 1e\+20$"),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while not web.started:
            assert thread.is_alive() and time.monotonic() - t0 < 60
            time.sleep(0.01)

        async def clients():
            async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:
                # the bad bodies interleaved with the good ones, all at once: the
                # bad never join the good ones' groups
                posts = [c.post("/predict", json=q) for q in qs]
                for i, (b, _) in enumerate(bad):
                    posts.insert(2 * i + 1, c.post("/predict", content=b))
                got = await asyncio.gather(*posts)
                at_bad = {2 * i + 1 for i in range(len(bad))}
                wrong = [got[i] for i in sorted(at_bad)]
                good = [r for i, r in enumerate(got) if i not in at_bad]
                health = await c.get("/health")
                return good, wrong, health

        good, wrong, health = asyncio.run(clients())
    finally:
        web.should_exit = True
        thread.join(60)
    assert not thread.is_alive()
    assert health.status_code == 200 and health.json()["num_workers"] == M
    for r, (_, msg) in zip(wrong, bad, strict=True):
        assert r.status_code == 400
        assert re.search(msg, r.json()["error"]), r.json()
    assert all(r.status_code == 200 for r in good)
    answers = [r.json() for r in good]
    assert all(a["ok"] and a["status"] == 0 and a["error"] > 0 for a in answers)
    assert all(len(a["answered_by"]) == N for a in answers)
    # the offline decode of every group, rebuilt from (group, slot)
    embed = jax.jit(lambda c, u: model.embed(c, u))
    compute = jax.jit(worker)
    bias = float(np.asarray(model.output_bias(), np.float32))
    groups: dict[int, dict[int, int]] = {}
    for i, a in enumerate(answers):
        groups.setdefault(a["group"], {})[a["slot"]] = i
    assert sum(len(g) for g in groups.values()) == len(qs)
    for members in groups.values():
        idx = [members[s] for s in sorted(members)]
        assert sorted(members) == list(range(len(idx)))
        assert answers[idx[0]]["group_size"] == len(idx)
        idx += [idx[-1]] * (K - len(idx))  # padded with its last query
        cat = jnp.asarray([qs[i]["categorical"] for i in idx], jnp.int32)
        num = jnp.asarray([qs[i]["numerical"] for i in idx], jnp.float32)
        rows = code.encode(embed(cat, num))
        y = jnp.stack([compute(rows[w]) for w in range(M)])
        mask = np.zeros(M, bool)
        mask[answers[idx[0]]["answered_by"]] = True
        res = code.decode(y, jnp.asarray(mask))
        logits = np.asarray(res.value, np.float64).sum(axis=-1) + bias
        for slot in range(len(members)):
            got = answers[idx[slot]]["logit"]
            np.testing.assert_allclose(got, logits[slot], rtol=1e-5, atol=1e-6)


def test_a_bad_port_or_group_deadline_exits_naming_the_option(capsys):
    from models.serve_dcn.__main__ import main

    for argv, flag in ((["--http", "0"], "--http"),
                       (["--http", "8000", "--group-deadline", "0"],
                        "--group-deadline")):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code != 0 and flag in capsys.readouterr().err


# parse_query alone (no server): every class of bad value, each a ValueError whose
# message names the field and says what came
_Q = {"categorical": [0, 1], "numerical": [0.0, 0.5, -1.0]}


def _with(field, j, v):
    body = {k: list(u) for k, u in _Q.items()}
    body[field][j] = v
    return body


@pytest.mark.parametrize(
    "body,dtype,max_abs,msg",
    [
        (_with("numerical", 0, 1e39), np.float32, None,
         r"^numerical\[0\] .*finite in float32.*got 1e\+39$"),
        (_with("numerical", 1, -int("9" * 400)), np.float32, None,
         r"^numerical\[1\] .*finite in float32.*got an integer of 400 digits$"),
        (_with("numerical", 2, math.nan), np.float32, None,
         r"^numerical\[2\] .*finite.*got NaN$"),
        (_with("numerical", 2, -math.inf), np.float32, None,
         r"^numerical\[2\] .*finite.*got -Infinity$"),
        (_with("numerical", 0, 7e4), jnp.float16, None,
         r"^numerical\[0\] .*finite in float32 and float16.*got 70000\.0$"),
        # finite in float32, beyond bfloat16's largest value (3.39e38)
        (_with("numerical", 0, 3.4e38), jnp.bfloat16, None,
         r"^numerical\[0\] .*finite in float32 and bfloat16.*got 3\.4e\+38$"),
        (_with("numerical", 1, 11.0), np.float32, 10.0,
         r"^numerical\[1\] must be at most 10 .*got 11\.0$"),
        (_with("numerical", 1, True), np.float32, None,
         r"^numerical\[1\] must be a number, got true$"),
        (_with("numerical", 1, [1.0]), np.float32, None,
         r"^numerical\[1\] must be a number, got a list of 1$"),
        (_with("numerical", 1, None), np.float32, None,
         r"^numerical\[1\] must be a number, got null$"),
        (_with("numerical", 1, {"v": 1}), np.float32, None,
         r"^numerical\[1\] must be a number, got a JSON dict$"),
        (_with("categorical", 1, 10**400), np.float32, None,
         r"^categorical\[1\] .*\[0, 7\), got an integer of 401 digits$"),
        (_with("categorical", 0, -1), np.float32, None,
         r"^categorical\[0\] .*\[0, 5\), got -1$"),
        (_with("categorical", 0, 1.0), np.float32, None,
         r"^categorical\[0\] .*integer id.*got 1\.0$"),
        (_with("categorical", 0, False), np.float32, None,
         r"^categorical\[0\] .*got false$"),
        (_with("categorical", 0, "3"), np.float32, None,
         r"^categorical\[0\] .*got a string '3'$"),
        ({"categorical": [0, 1], "numerical": [0.0, 0.5]}, np.float32, None,
         r"^numerical must be a list of 3 numbers, got a list of 2$"),
        ({"categorical": [0, 1], "numerical": "0 0 0"}, np.float32, None,
         r"^numerical must be a list of 3 numbers, got a string '0 0 0'$"),
        ({"categorical": [0, 1]}, np.float32, None,
         r"^missing field 'numerical'"),
        ({"numerical": [0.0, 0.0, 0.0], "categorical": None}, np.float32, None,
         r"^categorical must be a list of 2 integer ids, got null$"),
        ("x", np.float32, None, r"must be a JSON object .*got a string 'x'$"),
    ],
    ids=["1e39", "huge-int", "nan", "-inf", "f16-overflow", "bf16-overflow",
         "max_abs", "bool", "nested", "null", "object", "cat-huge", "cat-negative",
         "cat-float", "cat-bool", "cat-string", "short", "string-list", "missing",
         "cat-null", "not-object"],
)  # fmt: skip
def test_parse_query_refuses_every_bad_value_naming_the_field(body, dtype, max_abs,
                                                              msg):  # fmt: skip
    with pytest.raises(ValueError, match=msg):
        parse_query(body, (5, 7), 3, dtype=dtype, max_abs=max_abs)


def test_parse_query_keeps_values_finite_in_the_compute_dtype():
    big = float(np.finfo(np.float32).max)
    cat, num = parse_query(_with("numerical", 0, big), (5, 7), 3)
    assert cat.dtype == np.int32 and num.dtype == np.float32
    assert num[0] == np.float32(big) and np.isfinite(num).all()
    cat, num = parse_query(_with("numerical", 0, 6e4), (5, 7), 3, dtype=jnp.float16)
    assert num[0] == np.float32(6e4)
    cat, num = parse_query(_with("categorical", 1, 6), (5, 7), 3)
    np.testing.assert_array_equal(cat, [0, 6])


def test_an_embedding_beyond_max_abs_or_not_finite_is_refused_naming_numerical():
    """What parse_query cannot see: x_0's entries (a value times its learned
    vector in the "embedded" numeric mode) are checked too, NaN included."""
    num = np.asarray([0.5, 2.0], np.float32)
    assert embedding_error(np.asarray([1.0, -3.0], np.float32), num, 3.0) is None
    for x0, top in (([1.0, -3.5], "3.5"), ([1.0, math.inf], "inf"),
                    ([math.nan, 0.0], "nan")):  # fmt: skip
        msg = embedding_error(np.asarray(x0, np.float32), num, 3.0)
        assert re.fullmatch(
            rf"numerical: .*x_0 has an entry of {top} in float32 \(from numerical "
            rf"= \[0\.5, 2\.0\]\), beyond max_abs = 3: .*",
            msg,
        ), msg
