"""Benchmark case tables: every hot path of codedjax against its best baseline.

Each table row is a dict of parameters; the case name spells all of them. Builders
create the inputs once (seeded), the float64 reference, the accuracy check and the
baselines (numpy in float64, the way a user would write them without codedjax).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpy.polynomial import chebyshev as npcheb

import codedjax as cj

from .harness import Built, Case

EPS32 = float(np.finfo(np.float32).eps)

# ---------------------------------------------------------------------------------
# tables

CHEBYLS = [
    # the headline case first (M = 40, N = 30, D = 22, K = 8)
    dict(M=40, N=30, D=22, K=8, F=64, B=4096, dtype="float32"),
    dict(M=40, N=30, D=22, K=8, F=64, B=4096, dtype="bfloat16"),
    dict(M=100, N=80, D=46, K=16, F=64, B=1024, dtype="float32"),
    dict(M=200, N=160, D=91, K=31, F=64, B=512, dtype="float32"),
]
ENCODE = [
    dict(code="lagrange", K=8, M=40, F=65536),
    dict(code="berrut", K=8, M=40, F=65536),
]
COND_MC = [
    dict(M=40, N=30, D=22, B=16384),
    dict(M=100, N=80, D=46, B=2048),
]
CODED_DCN = [
    dict(K=8, M=40, N=30, G=256),
]
QUICK = {
    "chebyls": CHEBYLS[:3],
    "encode": ENCODE,
    "cond_mc": COND_MC[:1],
    "coded_dcn": CODED_DCN,
}
FULL = {
    "chebyls": CHEBYLS,
    "encode": ENCODE,
    "cond_mc": COND_MC,
    "coded_dcn": CODED_DCN,
}


def _name(group: str, p: dict) -> str:
    return group + "[" + ",".join(f"{k}={v}" for k, v in p.items()) + "]"


def _equilibrated(x: np.ndarray, d: int) -> np.ndarray:
    m = len(x)
    scale = np.r_[np.sqrt(1.0 / m), np.full(d - 1, np.sqrt(2.0 / m))]
    return npcheb.chebvander(x, d - 1) * scale


# ---------------------------------------------------------------------------------
# batched ChebyLS decoding


def chebyls_flops_per_mask(m: int, d: int, k: int, f: int) -> dict[str, float]:
    """Operations the float32 batched ChebyLS decode performs per mask, by stage.

    The stages are the named scopes of ``codedjax._lagrange_lsq.ne_decoding_matrices``
    and of the result (``benchmarks.profile_decode`` times the same stages):
    packed Gram (2 M P, P = D(D+1)/2), sweep (3 P D), Z = T_b H^-1 and A = Z U^T
    (2 K D^2 + 2 K D M), the refinement (A U, dZ = R H^-1, dZ U^T: 2 K D M + 2 K D^2
    + 2 K D M), the cond estimate on H^-1 (a start vector of two products, 8
    Lanczos products: 20 D^2) and on H = U^T W U (6 Lanczos products and a start
    vector through the shared U: 13 x 2 M D), the residual of the fit for the
    predicted error (two refined solves of 4 sketch columns through the rows:
    32 M D + 16 D^2), the noise level (2 M F) and the payload A y (2 K M F).
    Transpositions, the bisection on the small tridiagonal matrices and the QR tier
    (about 1% of the masks) count nothing.
    """
    p = d * (d + 1) // 2
    return {
        "gram": 2.0 * m * p,
        "sweep": 3.0 * p * d,
        "decoding_matrix": 2.0 * k * d * d + 2.0 * k * d * m,
        "refinement": 4.0 * k * d * m + 2.0 * k * d * d,
        "cond_inverse": 20.0 * d * d,
        "cond_gram": 26.0 * m * d,
        "residual": 32.0 * m * d + 16.0 * d * d,
        "error": 2.0 * m * f,
        "payload": 2.0 * k * m * f,
    }


def _chebyls(p: dict) -> Built:
    m, n, d, k, f, b = p["M"], p["N"], p["D"], p["K"], p["F"], p["B"]
    dt = jnp.dtype(p["dtype"])
    alpha, beta = cj.chebyshev_points(m), cj.chebyshev_points(k)
    a64, b64 = np.asarray(alpha, np.float64), np.asarray(beta, np.float64)
    rng = np.random.default_rng(0)
    coef = rng.standard_normal((d, f))
    t, tb = npcheb.chebvander(a64, d - 1), npcheb.chebvander(b64, d - 1)
    y = jnp.asarray(t @ coef, dt)  # responses of a random degree D-1 polynomial
    y64 = np.asarray(y, np.float64)  # what the decoder really receives
    masks = cj.sample_masks(
        jax.random.key(0), num_workers=m, num_responses=n, shape=(b,)
    )
    mk = np.asarray(masks)

    def lstsq_loop():
        out = np.empty((b, k, f))
        for i in range(b):
            c, *_ = np.linalg.lstsq(t[mk[i]], y64[mk[i]], rcond=None)
            out[i] = tb @ c
        return out

    def batched_qr():
        ts = t[None, :, :] * mk[:, :, None]
        q, r = np.linalg.qr(ts)
        c = np.linalg.solve(r, np.swapaxes(q, 1, 2) @ y64)
        return tb @ c

    rows = np.argsort(~mk, axis=1, kind="stable")[:, :n]  # the N responders

    def batched_qr_cheap_order():
        # the strongest numpy version: only the N responding rows, and the same
        # evaluation order as codedjax, A = (T_b R^-1) Q^T then A @ y
        q, r = np.linalg.qr(t[rows])
        w = np.linalg.solve(np.swapaxes(r, 1, 2), np.broadcast_to(tb.T, (b, d, k)))
        return (np.swapaxes(w, 1, 2) @ np.swapaxes(q, 1, 2)) @ y64[rows]

    ref = lstsq_loop()  # float64 least squares on the same rows and inputs
    u = _equilibrated(a64, d)
    cond = np.linalg.cond(u[None] * mk[:, :, None])

    def check(out: np.ndarray) -> dict:
        err = np.linalg.norm((out - ref).reshape(b, -1), axis=1) / np.linalg.norm(
            ref.reshape(b, -1), axis=1
        )
        backward = err / (cond * EPS32)
        return {
            "median_err": float(np.median(err)),
            "max_err": float(err.max()),
            "max_err_over_cond_eps": float(backward.max()),
            "ok": bool(np.median(err) <= 1e-5 and backward.max() <= 100),
        }

    def fn(yy, ms):  # the whole result (value, ok, cond, error, ...), as a caller
        return cj.chebyls_decode_batched(yy, ms, alpha, beta, num_coeffs=d)  # gets it

    def cond_stats(res) -> dict:
        """The reported condition numbers (an estimate in float32) against numpy's
        exact ones, from the case's own checked output."""
        okm = np.asarray(res.ok)
        ratio = np.asarray(res.cond, np.float64)[okm] / cond[okm]
        return {
            "cond_ratio_min": float(ratio.min()),
            "cond_ratio_median": float(np.median(ratio)),
            "cond_ratio_max": float(ratio.max()),
            "cond_within_1e-3": float(np.mean(np.abs(ratio - 1) <= 1e-3)),
            "ok_agrees_with_exact": float(np.mean(okm == (cond * EPS32 < 1))),
        }

    flops = b * sum(chebyls_flops_per_mask(m, d, k, f).values())
    return Built(
        fn,
        (y, masks),
        check,
        {
            "lstsq_loop": lstsq_loop,
            "numpy_batched_qr": batched_qr,
            "numpy_batched_qr_cheap_order": batched_qr_cheap_order,
        },
        flops=flops,
        inspect=cond_stats,
    )


# ---------------------------------------------------------------------------------
# encoding


def _barycentric_np(nodes: np.ndarray, z: np.ndarray, berrut: bool) -> np.ndarray:
    order = np.argsort(nodes)
    if berrut:
        w = np.empty(len(nodes))
        w[order] = (-1.0) ** np.arange(len(nodes))
    else:
        diff = nodes[:, None] - nodes[None, :]
        np.fill_diagonal(diff, 1.0)
        w = 1.0 / np.prod(diff, axis=1)
    dz = z[:, None] - nodes[None, :]
    hit = dz == 0
    tt = w / np.where(hit, 1.0, dz)
    e = tt / tt.sum(1, keepdims=True)
    return np.where(hit.any(1, keepdims=True), hit.astype(float), e)


# the codes whose encoders are timed: name -> (K, M) -> Code
ENCODE_CODES = {
    "lagrange": lambda k, m: cj.lagrange_code(num_inputs=k, num_workers=m, degree=1),
    "berrut": lambda k, m: cj.bacc_code(num_inputs=k, num_workers=m),
}


def _encode(p: dict) -> Built:
    k, m, f = p["K"], p["M"], p["F"]
    code = ENCODE_CODES[p["code"]](k, m)
    beta, alpha = code.beta(), code.alpha()
    x64 = np.random.default_rng(1).standard_normal((k, f))
    x = jnp.asarray(x64, jnp.float32)
    e = _barycentric_np(
        np.asarray(beta, np.float64),
        np.asarray(alpha, np.float64),
        p["code"] == "berrut",
    )
    ref = e @ np.asarray(x, np.float64)
    lebesgue = np.abs(e).sum(1).max()
    e32, xn = e.astype(np.float32), np.asarray(x)

    def numpy_f32():  # build the M x K matrix in float64, encode with a BLAS matmul
        return (
            _barycentric_np(
                np.asarray(beta, np.float64),
                np.asarray(alpha, np.float64),
                p["code"] == "berrut",
            ).astype(np.float32)
            @ xn
        )

    def check(out):
        err = np.abs(out - ref).max() / np.abs(x64).max()
        return {"max_err": float(err), "ok": bool(err <= 8 * k * lebesgue * EPS32)}

    del e32
    return Built(
        code.encode,
        (x,),
        check,
        {"numpy_f32": numpy_f32},
        flops=2.0 * m * k * f,
    )


# ---------------------------------------------------------------------------------
# condition-number Monte Carlo


def _cond_mc(p: dict) -> Built:
    m, n, d, b = p["M"], p["N"], p["D"], p["B"]
    u64 = _equilibrated(np.asarray(cj.chebyshev_points(m), np.float64), d)
    u = jnp.asarray(u64, jnp.float32)
    masks = cj.sample_masks(
        jax.random.key(2), num_workers=m, num_responses=n, shape=(b,)
    )
    mk = np.asarray(masks)

    def fn(ms):
        sv = jnp.linalg.svd(u[None] * ms[:, :, None].astype(u.dtype), compute_uv=False)
        return sv[:, 0] / sv[:, d - 1]

    def numpy_svd_f64():
        sv = np.linalg.svd(u64[None] * mk[:, :, None], compute_uv=False)
        return sv[:, 0] / sv[:, -1]

    ref = numpy_svd_f64()

    def check(out):
        rel = np.abs(out - ref) / ref
        bound = 64 * EPS32 * ref  # sigma_min is accurate to eps * sigma_max
        return {"max_err": float(rel.max()), "ok": bool(np.all(rel <= bound + 1e-6))}

    def numpy_svd_f32():
        sv = np.linalg.svd(
            u64.astype(np.float32)[None] * mk[:, :, None], compute_uv=False
        )
        return sv[:, 0] / sv[:, -1]

    return Built(
        fn,
        (masks,),
        check,
        {
            "numpy_stacked_svd_f64": numpy_svd_f64,
            "numpy_stacked_svd_f32": numpy_svd_f32,
        },
        flops=b * (4 * m * d * d - 4 * d**3 / 3),
        extra={"trials": b},
    )


# ---------------------------------------------------------------------------------
# coded DCNv2 inference throughput


def _coded_dcn(p: dict) -> Built:
    from flax import nnx

    from models.coded_dcn.schemes import Sizes, build_schemes
    from models.dcn import DCNConfig, DCNv2, cast_floating

    k, m, n, g = p["K"], p["M"], p["N"], p["G"]
    cfg = DCNConfig(vocab_sizes=(10, 17, 8, 16, 7, 6, 3, 42), num_numeric=6)
    model = DCNv2(cfg, rngs=nnx.Rngs(0))
    worker = cast_floating(model, jnp.bfloat16)
    scheme = build_schemes(Sizes(k, m, 4, cfg.cross_degree))["chebyls+repapprox"]
    rng = np.random.default_rng(3)
    cat = jnp.asarray(rng.integers(0, 5, size=(g * k, 8)), jnp.int32)
    num = jnp.asarray(rng.standard_normal((g * k, 6)), jnp.float32)
    masks = cj.sample_masks(
        jax.random.key(4), num_workers=m, num_responses=n, shape=(g,)
    )

    def coded(cat, num, masks):
        x0 = model.embed(cat, num).reshape(g, k, -1)  # master, float32
        xc, xd = (jax.vmap(code.encode)(x0) for code in scheme)
        flat = lambda a: a.reshape(g * m, -1).astype(jnp.bfloat16)  # noqa: E731
        yc = worker.cross_logit(flat(xc)).reshape(g, m, 1)  # bf16 workers
        yd = worker.deep_logit(flat(xd)).reshape(g, m)
        c = scheme.cross.decode_batched(yc, masks).value
        dd = scheme.deep.decode_batched(yd, masks).value
        return (c[..., 0] + dd + model.output_bias()).reshape(-1)

    uncoded_f32 = jax.jit(lambda c, x: model(c, x))
    ref = np.asarray(uncoded_f32(cat, num), np.float64)

    def check(out):
        err = np.linalg.norm((out - ref).reshape(g, k), axis=1) / np.linalg.norm(
            ref.reshape(g, k), axis=1
        )
        return {
            "max_err": float(err.max()),
            "median_err": float(np.median(err)),
            "ok": bool(np.median(err) < 5e-2),
        }

    def uncoded():
        return np.asarray(jax.block_until_ready(uncoded_f32(cat, num)))

    per_query = (
        sum(
            int(np.prod(v.shape))
            for v in jax.tree_util.tree_leaves(nnx.state(model))
            if hasattr(v, "shape") and len(v.shape) == 2
        )
        * 2
    )
    return Built(
        coded,
        (cat, num, masks),
        check,
        {"uncoded_f32": uncoded},
        flops=float(g * m * per_query),
        extra={
            "queries": g * k,
            "note": "ratio_vs_uncoded_f32 < 1 is the cost of coding: "
            "M/K = 5x more worker evaluations (simulated on one "
            "device), encoding and decoding",
        },
    )


BUILDERS = {
    "chebyls": _chebyls,
    "encode": _encode,
    "cond_mc": _cond_mc,
    "coded_dcn": _coded_dcn,
}


def cases(quick: bool) -> list[Case]:
    table = QUICK if quick else FULL
    out = []
    for group, rows in table.items():
        for p in rows:
            out.append(
                Case(
                    _name(group, p),
                    group,
                    (lambda p=p, group=group: BUILDERS[group](p)),
                )
            )
    return out
