"""Fuzz the decoders' ``ok`` flag: random masks, N from 0 to M, NaN/Inf workers.

For every decoder path (batched ChebyLS, ``jax.vmap`` of ChebyLS, the threshold,
Berrut and NeRCC decoders) B random masks are drawn with N uniform in 0..M responders,
and 40% of the masks get NaN or Inf in some workers' payloads. A wrong ``ok`` is

* ``ok`` True with a value that is not finite or is off the float64 reference by more
  than a tolerance from the dtype and the conditioning, or
* ``ok`` False although the mask is decodable (enough finite responders, and for
  ChebyLS a condition number well below 1 / eps).

``python -m benchmarks.fuzz_ok`` (100,000 masks per path) prints one line per path;
``tests/test_fuzz_ok.py`` runs the same check on fewer masks.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

M, K, DEG, F = 10, 3, 1, 2
D = cj.recovery_threshold(K, DEG)  # 3


def _inputs(seed: int, b: int):
    rng = np.random.default_rng(seed)
    n = rng.integers(0, M + 1, size=b)
    u = rng.random((b, M))
    rank = np.argsort(np.argsort(u, axis=1), axis=1)
    masks = rank < n[:, None]
    bad = (rng.random(b) < 0.4)[:, None] & (rng.random((b, M)) < 0.3)
    kind = rng.integers(0, 3, size=(b, M))
    return masks, bad, kind


def _payload(alpha, bad, kind):
    a = np.asarray(alpha, np.float64)
    base = np.stack([1 + a - a**2, 0.5 * a**2 - a], axis=1)  # degree < D
    y = np.broadcast_to(base, bad.shape + (F,)).copy()
    vals = np.array([np.nan, np.inf, -np.inf])[kind]
    y[bad] = vals[bad][:, None]
    return y.astype(np.float32), base


def _cond_table(alpha, d):
    """cond of the equilibrated rows for every selection pattern (2^M)."""
    a = np.asarray(alpha, np.float64)
    scale = np.full(d, np.sqrt(2.0 / a.size))
    scale[0] = np.sqrt(1.0 / a.size)
    u = np.polynomial.chebyshev.chebvander(a, d - 1) * scale
    table = np.full(2**M, np.inf)
    for bits in itertools.product([0, 1], repeat=M):
        s = np.array(bits, bool)
        if s.sum() >= d:
            table[int("".join(map(str, bits[::-1])), 2)] = np.linalg.cond(u[s])
    return table


def _codes(sel):
    return (sel.astype(np.int64) << np.arange(M)).sum(axis=1)


def check_path(path: str, b: int, seed: int = 0) -> dict:
    """Wrong-ok count of one decoder path over ``b`` random masks."""
    masks, bad, kind = _inputs(seed, b)
    if path in ("berrut", "nercc"):
        beta, alpha = cj.bacc_points(K, M)
    else:
        alpha, beta = cj.chebyshev_points(M), cj.chebyshev_points(K)
    y, base = _payload(alpha, bad, kind)
    sel = masks & ~bad
    n = sel.sum(axis=1)
    ym, mk = jnp.asarray(y), jnp.asarray(masks)
    if path == "chebyls_batched":
        r = cj.chebyls_decode_batched(ym, mk, alpha, beta, num_coeffs=D, shared_y=False)
    elif path == "chebyls_vmap":
        f = jax.jit(jax.vmap(lambda yy, m: cj.chebyls_decode(yy, m, alpha, beta, D)))
        r = f(ym, mk)
    elif path == "threshold":
        order = jnp.arange(M, dtype=jnp.int32)
        f = jax.jit(
            jax.vmap(lambda yy, m: cj.threshold_decode(yy, m, alpha, beta, D, order))
        )
        r = f(ym, mk)
    elif path == "berrut":
        r = jax.jit(jax.vmap(lambda yy, m: cj.berrut_decode(yy, m, alpha, beta)))(
            ym, mk
        )
    elif path == "nercc":
        r = jax.jit(jax.vmap(lambda yy, m: cj.nercc_decode(yy, m, alpha, beta)))(ym, mk)
    else:
        raise ValueError(f"unknown path {path!r}")
    ok = np.asarray(r.ok)
    value = np.asarray(r.value, np.float64)
    eps = float(np.finfo(np.float32).eps)
    if path in ("berrut", "nercc"):
        need = 1 if path == "berrut" else 2
        decodable = n >= need
        ambiguous = np.zeros(b, bool)
        finite = np.all(np.isfinite(value), axis=(1, 2))
        wrong_value = ok & ~finite
    else:
        if path == "threshold":
            # the first D usable workers in index order
            first = np.cumsum(sel, axis=1) <= D
            sel = sel & first
        cond = _cond_table(alpha, D)[_codes(sel)]
        decodable = (n >= D) & (cond * eps < 0.5)
        ambiguous = (n >= D) & (cond * eps >= 0.5) & (cond * eps <= 2)
        a = np.asarray(alpha, np.float64)
        tb = np.polynomial.chebyshev.chebvander(np.asarray(beta, np.float64), D - 1)
        ta = np.polynomial.chebyshev.chebvander(a, D - 1)
        c, *_ = np.linalg.lstsq(ta, base, rcond=None)  # the exact polynomial
        truth = tb @ c
        tol = 64 * M * eps * np.maximum(cond, 1.0)[:, None, None] * np.max(np.abs(base))
        off = np.abs(value - truth[None]) > tol
        wrong_value = ok & (
            np.any(off, axis=(1, 2)) | ~np.all(np.isfinite(value), (1, 2))
        )
    wrong = (wrong_value | (~ok & decodable) | (ok & ~decodable)) & ~ambiguous
    return {
        "path": path,
        "masks": b,
        "ok": int(ok.sum()),
        "wrong_ok": int(wrong.sum()),
        "ambiguous": int(ambiguous.sum()),
    }


PATHS = ("chebyls_batched", "chebyls_vmap", "threshold", "berrut", "nercc")


@dataclasses.dataclass(frozen=True)
class FuzzConfig:
    """The fuzz's size: ``num_masks`` random masks per decoder path, drawn from
    ``seed``."""

    num_masks: int = 100_000
    seed: int = 0

    def __post_init__(self):
        runkit.check_fields("FuzzConfig", self, at_least={"num_masks": 1})


def _run(cfg: FuzzConfig, cmd: runkit.Invocation) -> list[dict]:
    out = []
    for path in runkit.progress(PATHS, desc="decoder paths"):
        res = check_path(path, cfg.num_masks, cfg.seed)
        print(res, flush=True)
        out.append(res)
    runkit.write_summary(
        os.path.join(cmd.out, "summary.json"),
        {"paths": out, "environment": runkit.environment()},
    )
    rows = runkit.md_table(["path", "result"], enumerate(out))
    cmd.write_page(title="The ok flag under fuzzed masks", body="\n".join(rows))
    return out


def main(argv=None) -> list[dict]:
    """Command-line entry point; returns one record per decoder path."""
    return runkit.main(
        FuzzConfig, _run, argv, prog="python -m benchmarks.fuzz_ok",
        description=__doc__.splitlines()[0], flags={"num_masks": "--num-masks"},
        out="results/fuzz_ok",
    )  # fmt: skip


if __name__ == "__main__":
    main()
