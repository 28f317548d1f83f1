"""An HTTP endpoint for the coded DCNv2: ``POST /predict`` through the streaming
frontend.

Starlette and uvicorn (the optional extra ``codedjax[http]``) are imported here
only; the library never imports them. One request carries one query::

    POST /predict  {"categorical": [c_1, ..., c_n_cat], "numerical": [v_1, ...]}

(integer ids in ``[0, vocab_size)`` and normalised numeric values finite in the
model's compute dtype and at most ``max_abs``, the model's raw inputs). The
master embeds it (``DCNv2.embed``), submits x_0 to a
:class:`codedjax.serving.StreamingServer`, which codes it with the queries that
arrive around it in a group of K, and answers::

    {"ok": true, "status": 0, "status_name": "SUCCESS", "error": 1.2e-3,
     "logit": -0.41, "probability": 0.399, "latency_ms": 12.3, "waited_ms": 4.1,
     "group": 7, "slot": 2, "group_size": 8, "answered_by": [0, 3, ...]}

``error`` is the decoder's predicted absolute error of the group (null when not
ok), ``logit`` and ``probability`` are null when the query was not answered
(``ok`` is the frontend's answer for this query; a status says why),
``answered_by`` lists the workers whose answers were decoded (null for a query
answered before its group's decision, by its own worker's answer).
A body that is not such a query gets a 400 with a message naming the field and
what came, and never joins a coding group (its value would reach every answer of
the group); a full queue
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

__all__ = ["answered_by", "embedding_error", "make_app", "parse_query"]


def _came(v: Any) -> str:
    """What a JSON value is, short enough for an error message."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        digits = len(str(abs(v)))
        return f"an integer of {digits} digits" if digits > 24 else str(v)
    if isinstance(v, float):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(
            repr(v), repr(v)
        )
    if isinstance(v, str):
        return f"a string {v[:40]!r}" + ("..." if len(v) > 40 else "")
    if isinstance(v, list):
        return f"a list of {len(v)}"
    return f"a JSON {type(v).__name__}"


def _number(name: str, v: Any, dtypes: tuple, max_abs: float | None) -> float:
    """``v`` as a float finite in every dtype of ``dtypes`` (and at most
    ``max_abs`` in absolute value), or a ValueError naming ``name``."""
    names = " and ".join(dict.fromkeys(np.dtype(d).name for d in dtypes))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{name} must be a number, got {_came(v)}")
    try:
        f = float(v)
    except OverflowError:  # an integer beyond float64
        f = math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        finite = math.isfinite(f) and all(
            np.isfinite(np.asarray(f, d).astype(np.float32)) for d in dtypes
        )
    if not finite:
        raise ValueError(
            f"{name} must be a number finite in {names} (the model's compute "
            f"dtype), got {_came(v)}"
        )
    if max_abs is not None and abs(f) > max_abs:
        raise ValueError(
            f"{name} must be at most {max_abs:.3g} in absolute value (the "
            f"endpoint's max_abs: a coded group mixes its queries), got {_came(v)}"
        )
    return f


def parse_query(
    body: Any,
    vocab_sizes,
    num_numeric: int,
    *,
    dtype: Any = np.float32,
    max_abs: float | None = None,
):
    """(cat int32 [n_cat], num float32 [n_num]) of a request body, or ValueError
    with a message for the client naming the field and what came.

    Args:
        body: the parsed JSON body.
        vocab_sizes: each categorical field's vocabulary size (ids below it).
        num_numeric: the number of numerical fields.
        dtype: the model's compute dtype: every numerical value must be finite
            in it and in float32 (the endpoint's input dtype), so 1e39 (finite
            in JSON, infinite in float32), NaN, Infinity and integers of
            hundreds of digits are refused.
        max_abs: optional bound on the numerical values' absolute value.
    """
    if not isinstance(body, dict):
        raise ValueError(
            'the body must be a JSON object {"categorical": [...], "numerical": '
            f"[...]}}, got {_came(body)}"
        )
    extra = sorted(set(body) - {"categorical", "numerical"})
    if extra:
        raise ValueError(f"unknown fields {extra}; expected categorical, numerical")
    n_cat = len(vocab_sizes)
    cat, num = body.get("categorical"), body.get("numerical")
    for field, v, n, what in (("categorical", cat, n_cat, "integer ids"),
                              ("numerical", num, num_numeric, "numbers")):  # fmt: skip
        if field not in body:
            raise ValueError(f"missing field {field!r}: a list of {n} {what}")
        if not isinstance(v, list) or len(v) != n:
            raise ValueError(f"{field} must be a list of {n} {what}, got {_came(v)}")
    for j, (c, v) in enumerate(zip(cat, vocab_sizes, strict=True)):
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < v:
            raise ValueError(
                f"categorical[{j}] must be an integer id in [0, {v}), got {_came(c)}"
            )
    dtypes = (np.float32, dtype)
    values = [_number(f"numerical[{j}]", v, dtypes, max_abs) for j, v in enumerate(num)]
    return np.asarray(cat, np.int32), np.asarray(values, np.float32)


def embedding_error(x0: np.ndarray, num: np.ndarray, max_abs: float) -> str | None:
    """The 400 message of a query whose embedding x_0 [d0] has an entry that is not
    finite or beyond ``max_abs`` (e.g. a numerical value times its learned vector,
    ``numeric_mode="embedded"``), or None when it may join a group."""
    top = float(np.max(np.abs(x0.astype(np.float32)), initial=0.0))
    if top <= max_abs:
        return None
    return (
        f"numerical: the query's embedding x_0 has an entry of {top:.3g} in "
        f"{x0.dtype.name} (from numerical = {num.tolist()}), beyond max_abs = "
        f"{max_abs:.3g}: it cannot join a coded group"
    )


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def answered_by(r) -> list[int] | None:
    """The workers whose answers gave the query ``r`` (a ``QueryResult``): its
    group's decoded responders; None for a query answered before its group's
    decision (by its own worker's answer, a per-query frontend: ``r.result``
    None)."""
    result = getattr(r, "result", None)
    if result is None:
        return None
    return np.flatnonzero(np.asarray(result.mask)).tolist()


def make_app(
    model: DCNv2,
    server: Server,
    *,
    group_deadline: float,
    max_pending: int = 1024,
    max_abs: float | None = None,
):
    """A Starlette app serving ``model`` through ``server`` (a ``Server`` over the
    branch code of ``models.serve_dcn.branches``, answers [K, 2]: cross and deep
    logits) behind a :class:`StreamingServer` with ``group_deadline``. The
    frontend starts with the app and closes (answering every accepted query)
    when it shuts down; ``app.state.frontend`` is it while the app runs.

    A coded group mixes its K queries into every worker's input, so one query's
    value reaches every answer of its group: a query whose numerical values are
    not finite in the model's compute dtype (float32 for a float32 model), or
    whose embedding x_0 has an entry beyond ``max_abs``, is answered with a 400
    and never joins a group.

    Args:
        max_abs: the largest absolute value of a numerical field and of an entry
            of x_0. Default: ``finfo(dtype).max ** (1 / (2 d))`` for the compute
            dtype and the Cross branch's degree d (4.3e9 for float32, d = 2), at
            which the degree-d products of a coded row stay a factor
            ``finfo.max ** (1/2)`` (1.8e19) below overflow. The group's
            predicted error (``error``) scales with its largest query; set
            ``max_abs`` to the data's range to bound that too.

    Raises:
        ImportError: Starlette is not installed (``pip install 'codedjax[http]'``).
        TypeError, ValueError: a max_abs that is not a finite number > 0.
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
    if max_abs is not None:
        if isinstance(max_abs, bool) or not isinstance(max_abs, (int, float)):
            raise TypeError(f"make_app: max_abs must be a number, got {max_abs!r}")
        if not 0 < max_abs < math.inf:
            raise ValueError(
                f"make_app: max_abs must be finite and > 0, got {max_abs!r}"
            )
    cfg = model.config
    vocab, n_num = tuple(cfg.vocab_sizes), int(cfg.num_numeric)
    embed = jax.jit(lambda c, u: model.embed(c, u))
    bias = float(np.asarray(model.output_bias(), np.float32))
    example = np.asarray(
        embed(jnp.zeros((1, len(vocab)), jnp.int32), jnp.zeros((1, n_num)))
    )[0]
    dtype = example.dtype  # the model's compute dtype (x_0's)
    if max_abs is None:
        max_abs = float(jnp.finfo(dtype).max) ** (1 / (2 * cfg.cross_degree))
    max_abs = float(max_abs)

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
        except Exception as exc:  # not UTF-8, not JSON, nested too deep
            return bad(f"the body must be JSON (one query object): {exc}")
        try:
            cat, num = parse_query(body, vocab, n_num, dtype=dtype, max_abs=max_abs)
        except ValueError as exc:
            return bad(str(exc))
        x0 = np.asarray(embed(jnp.asarray(cat[None]), jnp.asarray(num[None])))[0]
        wrong = embedding_error(x0, num, max_abs)
        if wrong is not None:
            return bad(wrong)
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
                "answered_by": answered_by(r),
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
                "max_abs": max_abs,
                "query": {
                    "categorical": f"{len(vocab)} ids < {list(vocab)}",
                    "numerical": f"{n_num} numbers, |v| <= {max_abs:.3g}",
                },  # fmt: skip
            }
        )

    routes = [
        Route("/predict", predict, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
