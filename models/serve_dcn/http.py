"""An HTTP endpoint for the coded DCNv2: ``POST /predict`` through the streaming
frontend.

Starlette and uvicorn (the optional extra ``codedjax[http]``) are imported here
only; the library never imports them. One request carries one query::

    POST /predict  {"categorical": [c_1, ..., c_n_cat], "numerical": [v_1, ...]}

(integer ids in ``[0, vocab_size)`` and finite normalised numeric values, the
model's raw inputs). The master embeds it (``DCNv2.embed``), submits x_0 to a
:class:`codedjax.serving.StreamingServer`, which codes it with the queries that
arrive around it in a group of K, and answers::

    {"ok": true, "status": 0, "status_name": "SUCCESS", "error": 1.2e-3,
     "logit": -0.41, "probability": 0.399, "latency_ms": 12.3, "waited_ms": 4.1,
     "group": 7, "slot": 2, "group_size": 8, "answered_by": [0, 3, ...]}

``error`` is the decoder's predicted absolute error of the group (null when not
ok), ``logit`` and ``probability`` are null when the group did not decode (a
status says why), ``answered_by`` lists the workers whose answers were decoded.
A body that is not such a query gets a 400 with a message; a full queue
(back-pressure) or a stopped frontend a 503 with one. ``GET /health`` describes
the endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
from codedjax.serving import QueueFull, Server, StreamingServer

from ..dcn import DCNv2

__all__ = ["make_app", "parse_query"]


def parse_query(body: Any, vocab_sizes, num_numeric: int):
    """(cat int32 [n_cat], num float32 [n_num]) of a request body, or ValueError
    with a message for the client."""
    if not isinstance(body, dict):
        raise ValueError(
            'the body must be a JSON object {"categorical": [...], "numerical": '
            f"[...]}}, got a JSON {type(body).__name__}"
        )
    extra = sorted(set(body) - {"categorical", "numerical"})
    if extra:
        raise ValueError(f"unknown fields {extra}; expected categorical, numerical")
    n_cat = len(vocab_sizes)
    cat, num = body.get("categorical"), body.get("numerical")
    if not isinstance(cat, list) or len(cat) != n_cat:
        raise ValueError(f"categorical must be a list of {n_cat} integer ids")
    for j, (c, v) in enumerate(zip(cat, vocab_sizes, strict=True)):
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < v:
            raise ValueError(
                f"categorical[{j}] must be an integer id in [0, {v}), got {c!r}"
            )
    if not isinstance(num, list) or len(num) != num_numeric:
        raise ValueError(f"numerical must be a list of {num_numeric} numbers")
    for j, v in enumerate(num):
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
        ):
            raise ValueError(f"numerical[{j}] must be a finite number, got {v!r}")
    return np.asarray(cat, np.int32), np.asarray(num, np.float32)


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def make_app(
    model: DCNv2,
    server: Server,
    *,
    group_deadline: float,
    max_pending: int = 1024,
):
    """A Starlette app serving ``model`` through ``server`` (a ``Server`` over the
    branch code of ``models.serve_dcn.branches``, answers [K, 2]: cross and deep
    logits) behind a :class:`StreamingServer` with ``group_deadline``. The
    frontend starts with the app and closes (answering every accepted query)
    when it shuts down; ``app.state.frontend`` is it while the app runs.

    Raises:
        ImportError: Starlette is not installed (``pip install 'codedjax[http]'``).
    """
    try:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            "models.serve_dcn.http needs Starlette and uvicorn: pip install "
            "'codedjax[http]'"
        ) from exc
    cfg = model.config
    vocab, n_num = tuple(cfg.vocab_sizes), int(cfg.num_numeric)
    embed = jax.jit(lambda c, u: model.embed(c, u))
    bias = float(np.asarray(model.output_bias(), np.float32))
    example = np.asarray(
        embed(jnp.zeros((1, len(vocab)), jnp.int32), jnp.zeros((1, n_num)))
    )[0]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        front = StreamingServer(server, group_deadline=group_deadline,
                                max_pending=max_pending, example=example)  # fmt: skip
        app.state.frontend = front
        try:
            yield
        finally:
            await asyncio.to_thread(front.close)

    def bad(message: str, code: int = 400):
        return JSONResponse({"error": message}, status_code=code)

    async def predict(request):
        try:
            body = await request.json()
        except Exception:
            return bad("the body must be JSON (one query object)")
        try:
            cat, num = parse_query(body, vocab, n_num)
        except ValueError as exc:
            return bad(str(exc))
        x0 = np.asarray(embed(jnp.asarray(cat[None]), jnp.asarray(num[None])))[0]
        front = request.app.state.frontend
        try:
            fut = front.submit(x0)
        except QueueFull as exc:
            return bad(str(exc), 503)
        except RuntimeError as exc:
            return bad(str(exc), 503)
        try:
            r = await asyncio.wrap_future(fut)
        except RuntimeError as exc:
            return bad(str(exc), 503)
        logit = float(np.asarray(r.value, np.float64).sum() + bias) if r.ok else None
        return JSONResponse(
            {
                "ok": bool(r.ok),
                "status": int(r.status),
                "status_name": cj.Status(int(r.status)).name,
                "error": _finite(r.error),
                "logit": logit,
                "probability": None if logit is None else 1 / (1 + math.exp(-logit)),
                "latency_ms": 1e3 * r.latency,
                "waited_ms": 1e3 * r.waited,
                "group": int(r.group),
                "slot": int(r.slot),
                "group_size": int(r.group_size),
                "answered_by": np.flatnonzero(np.asarray(r.result.mask)).tolist(),
            }
        )

    async def health(request):
        code = server.code
        return JSONResponse(
            {
                "code": getattr(code, "name", type(code).__name__),
                "num_inputs": int(code.num_inputs),
                "num_workers": int(code.num_workers),
                "policy": repr(server.policy),
                "group_deadline_s": group_deadline,
                "query": {
                    "categorical": f"{len(vocab)} ids < {list(vocab)}",
                    "numerical": f"{n_num} numbers",
                },  # fmt: skip
            }
        )

    routes = [
        Route("/predict", predict, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
