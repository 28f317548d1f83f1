"""models.serve_dcn.http: POST /predict through the streaming frontend, over HTTP.

A small random DCNv2 (the endpoint does not care whether it was trained) is
served by uvicorn on a local port; concurrent requests from a real HTTP client
(httpx) must get the offline decode of their coding group (the group rebuilt from
the answers' group and slot, encoded, computed by the same worker function and
decoded on the mask the answer names); bad bodies get a 400 with a message.
"""

from __future__ import annotations

import asyncio
import json
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
from models.serve_dcn.http import make_app  # noqa: E402

pytestmark = pytest.mark.loose_promotion  # flax model code

K, M, N = 4, 8, 7  # cross degree 2: D = 7


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
        (json.dumps({"categorical": [0], "numerical": [0, 0, 0]}), "categorical"),
        (json.dumps({"categorical": [0, 9], "numerical": [0, 0, 0]}), r"\[1\]"),
        (json.dumps({"categorical": [0, 1], "numerical": [0, "a", 0]}), "finite"),
        (b'{"categorical": [0, 1], "numerical": [0, NaN, 0]}', "finite"),
        (json.dumps({"categorical": [0, 1], "numerical": [0, 0, 0], "x": 1}),
         "unknown fields"),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while not web.started:
            assert thread.is_alive() and time.monotonic() - t0 < 60
            time.sleep(0.01)

        async def clients():
            async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:
                good = await asyncio.gather(*(c.post("/predict", json=q) for q in qs))
                wrong = await asyncio.gather(
                    *(c.post("/predict", content=b) for b, _ in bad)
                )
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
