"""Every code of the catalogue, under the premise of the prediction and beyond it."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import codedjax as cj
import runkit

from .config import CIRCLE_VARIANTS, CODES, WORKER_DTYPES, CalibrationConfig
from .single import CalibrationSummary

SETTINGS = {"linear": (4, 10, 1), "quadratic": (3, 9, 2)}
PAYLOAD_WIDTH = 4  # P
#: the catalogue's two kinds of answers: "premise", the exact f of the coded
#: queries rounded once to the workers' dtype (what ``error`` models), and
#: "worker", f computed by the workers in their dtype (beyond the premise)
ANSWERS = ("premise", "worker")


def catalogue_scheme(
    name: str, setting: str, worker_dtype: str, seed: int = 0
) -> cj.Scheme | None:
    """The entry of :func:`codedjax.catalogue` for ``name`` of :data:`CODES` on
    ``setting`` (f(x) = (x W)^d, linear without bias for d = 1): a circle variant
    of :data:`CIRCLE_VARIANTS` with its packing and decoder, ParM with group size
    k = 2; None where it does not apply (a linear-only code on the quadratic
    workload)."""
    if name not in CODES:
        raise ValueError(f"catalogue_scheme: name must be one of {CODES}, got {name!r}")
    k, m, d = SETTINGS[setting]
    wl = cj.Workload(setting, d, linear=d == 1, description="f(x) = (x W)^d")
    base, knobs = name, {}
    if name in CIRCLE_VARIANTS:
        pack, decoder = CIRCLE_VARIANTS[name]
        base, knobs = "circle", dict(circle_pack=pack, circle_decoder=decoder)
    entries = cj.catalogue(
        wl, k, m, worker_dtype=worker_dtype, names=[base], seed=seed, **knobs
    )
    if base == "parity":  # the recorded tables' group size
        entries = tuple(s for s in entries if s.name == "parity k=2")
    return entries[0] if entries and entries[0].applies else None


def catalogue_code(name: str, setting: str, worker_dtype: str, seed: int = 0):
    """The code of :func:`catalogue_scheme` (None where it does not apply)."""
    s = catalogue_scheme(name, setting, worker_dtype, seed)
    return None if s is None else s.code


def catalogue_worker(q, w, degree: int, pairs: bool):
    """f(x) = (x W)^d on coded queries q [..., P], in q's dtype; on (real,
    imaginary) pairs q [..., 2, P] (the circle codes) in complex arithmetic."""
    hi = jax.lax.Precision.HIGHEST  # no TF32: the workers' dtype is q's
    if not pairs:
        p = jnp.matmul(q, w, precision=hi)
        out = p
        for _ in range(degree - 1):
            out = out * p
        return out
    a = jnp.matmul(q[..., 0, :], w, precision=hi)
    b = jnp.matmul(q[..., 1, :], w, precision=hi)
    re, im = a, b
    for _ in range(degree - 1):
        re, im = re * a - im * b, re * b + im * a
    return jnp.stack([re, im], axis=-2)


def _decode_all(code, y, mask, order):
    return code.decode_answers_batched(cj.Answers(y, mask, order))


_decode_all = jax.jit(_decode_all, static_argnums=0)


def _catalogue_answers(code, x, w, degree, dtype):
    """Every worker's answers [B, M, ..., P] to inputs x [B, K, P] (float64 numpy)
    computed by a worker in ``dtype``: queries encoded from float32 inputs and
    rounded to ``dtype``, W rounded once to it, every product rounded (float64
    throughout for ``dtype`` float64: the exact f of the coded queries)."""
    pairs = tuple(code.coded_shape) == (2,)
    xdt = jnp.float64 if dtype == "float64" else jnp.float32
    q = jax.vmap(code.encode)(jnp.asarray(x, xdt)).astype(dtype)
    return catalogue_worker(q, jnp.asarray(w, dtype), degree, pairs)


def _premise_answers(y64, dtype):
    """The answers of the premise: the exact (float64) f of the coded queries
    rounded once, to nearest, to the workers' ``dtype``."""
    return jnp.asarray(np.asarray(y64).astype(jnp.dtype(dtype)))


def approximate_at(scheme: cj.Scheme, n: int, degree: int) -> bool:
    """Whether the decode of ``scheme`` from n answers approximates f (measured
    then against the same decode of float64 answers): the catalogue's inexact
    schemes at every N (BACC, NeRCC and RepApprox: their ``error`` predicts the
    rounding part only; RepApprox is exact where no group is lost, and its
    float64 decode is then f(X)), the graceful decoder below D (its smooth
    branch, whose ``error`` is the prior's posterior spread)."""
    if not scheme.exact:
        return True
    k = scheme.code.num_inputs
    return scheme.name == "graceful" and n < cj.recovery_threshold(k, degree)


def _catalogue_cell(cfg, code, ys, y64, truth, approx, n, key):
    """One (code, dtype, N) cell: per kind of answers in ``ys`` (name -> answers)
    the (actual, predicted, ok) of ``num_masks`` requests, the actual error
    against ``truth`` (float64 f(X)) or, where ``approx`` (the decode at this N
    approximates f), against the same decode of the float64 answers ``y64``; and
    for the approximate decodes the actual error against f(X) (else None)."""
    arr = cj.sample_arrivals(
        key, num_workers=code.num_workers, num_responses=n, shape=(cfg.num_masks,)
    )
    ref_ok = True
    ref = truth
    if approx:  # the same decode of float64 answers
        with jax.enable_x64(True):
            r64 = jax.device_get(_decode_all(code, y64, arr.mask, arr.order))
        ref_ok, ref = np.asarray(r64.ok), np.asarray(r64.value)
    out = {}
    for kind, y in ys.items():
        r = jax.device_get(_decode_all(code, y, arr.mask, arr.order))
        value = np.asarray(r.value, np.float64)
        flat = np.abs(value - ref).reshape(len(value), -1)
        to_f = None
        if approx:
            to_f = np.abs(value - truth).reshape(len(value), -1).max(axis=1)
        out[kind] = (
            flat.max(axis=1),
            np.asarray(r.error, np.float64),
            np.asarray(r.ok) & ref_ok,
            to_f,
        )
    return out


def _catalogue_row(setting, name, wdt, code, n, kind, approx, act, pred, ok, to_f):
    """One row of the catalogue's table (ok decodes only in act, pred, to_f)."""
    ratio = pred / np.maximum(act, np.finfo(np.float64).tiny)
    have = bool(ok.any())
    return {
        "setting": setting,
        "code": name,
        "worker_dtype": wdt,
        "answers": kind,
        "reference": "float64 decode" if approx else "f(X)",
        "K": code.num_inputs,
        "M": code.num_workers,
        "threshold": code.threshold,
        "N": n,
        "requests": int(ok.sum()),
        "not_ok": int((~ok).sum()),
        "covered": float(np.mean(ratio >= 1)) if have else None,
        "median_ratio": float(np.median(ratio)) if have else None,
        "actual_median": float(np.median(act)) if have else None,
        "predicted_median": float(np.median(pred)) if have else None,
        # an approximate decode against f(X): the approximation error, which
        # ``error`` does not predict (reported, not a target)
        "covered_f": float(np.mean(pred >= to_f)) if have and approx else None,
    }


def run_catalogue(
    cfg: CalibrationConfig,
    pick_n=None,
    answers=ANSWERS,
    dtypes=WORKER_DTYPES,
    settings=tuple(SETTINGS),
) -> CalibrationSummary:
    """The calibration of every code of :data:`CODES` named in ``cfg.codes`` (or
    all): on each setting of :data:`SETTINGS` it serves, with bf16 and float32
    answers, at every N from its threshold to its M, ``num_masks`` requests each
    (fresh queries, a uniformly random arrival order), for each kind of
    ``answers`` (:data:`ANSWERS`). The actual error is max |value - f(X)|
    against float64 f(X), or for an approximate decode (:func:`approximate_at`)
    against the same decode of the float64 answers (its ``error`` predicts the
    rounding part only); ok decodes only. ``pick_n(name, code, degree)``, if
    given, names the N of each code in place of every N, and ``answers``,
    ``dtypes`` and ``settings`` may name fewer (a shrunken run)."""
    names = CODES if "all" in cfg.codes else cfg.codes
    bad = [c for c in names if c not in CODES]
    if bad or not names:
        raise ValueError(
            f"run_catalogue: codes must name codes of {CODES} (or 'all'), got "
            f"{cfg.codes!r}"
        )
    rows: list[dict[str, Any]] = []
    cells = []
    for setting, (_, _, deg) in SETTINGS.items():
        if setting not in settings:
            continue
        for wdt in dtypes:
            for name in names:
                sch = catalogue_scheme(name, setting, wdt, cfg.seed)
                if sch is not None:
                    cells.append((setting, deg, wdt, name, sch))
    total = sum(c[4].code.num_workers - c[4].code.threshold + 1 for c in cells)
    bar = runkit.progress(
        total=total, desc="calibration", disable=None if cfg.progress else True
    )
    key = jax.random.key(cfg.seed)
    for i, (setting, deg, wdt, name, sch) in enumerate(cells):
        code = sch.code
        k = code.num_inputs
        rng = np.random.default_rng([cfg.seed, i])
        x = rng.standard_normal((cfg.num_masks, k, PAYLOAD_WIDTH))
        w = rng.standard_normal((PAYLOAD_WIDTH,) * 2) / np.sqrt(PAYLOAD_WIDTH)
        truth = (x @ w) ** deg
        with jax.enable_x64(True):
            y64 = _catalogue_answers(code, x, w, deg, "float64")
        ys = {}
        if "premise" in answers:
            ys["premise"] = _premise_answers(y64, wdt)
        if "worker" in answers:
            ys["worker"] = _catalogue_answers(code, x, w, deg, wdt)
        every = range(max(code.threshold, 1), code.num_workers + 1)
        for n in every if pick_n is None else pick_n(name, code, deg):
            kn = jax.random.fold_in(jax.random.fold_in(key, i), n)
            approx = approximate_at(sch, n, deg)
            cell = _catalogue_cell(cfg, code, ys, y64, truth, approx, n, kn)
            for kind, (act, pred, ok, to_f) in cell.items():
                rows.append(
                    _catalogue_row(
                        setting,
                        name,
                        wdt,
                        code,
                        n,
                        kind,
                        approx,
                        act[ok],
                        pred[ok],
                        ok,
                        None if to_f is None else to_f[ok],
                    )
                )
            bar.update(1)
    bar.close()
    have = [r for r in rows if r["requests"] and r["answers"] == "premise"]
    targets = {
        "premise covered>=0.95": all(r["covered"] >= 0.95 for r in have),
        "premise median_ratio<=10": all(r["median_ratio"] <= 10 for r in have),
    }
    return CalibrationSummary(
        config=dataclasses.asdict(cfg),
        rows=rows,
        targets=targets,
        date=time.strftime("%Y-%m-%d"),
        environment=runkit.environment(),
    )


def format_catalogue(summary: dict) -> tuple[str, str, str]:
    """(the short table of the premise's answers, the short table of the answers
    the workers compute in their dtype: per setting and code, for each dtype the
    coverage at the threshold, the lowest coverage and the largest median ratio
    over N; the full table, one row per setting, code, dtype, answers and N)."""
    c = summary["config"]
    head = (
        f"{c['num_masks']} requests per code, dtype and N (fresh queries, a "
        "uniformly random arrival order); covered = P(predicted >= actual) over "
        "the ok decodes, ratio = predicted / actual; f(x) = (x W)^d, P = "
        f"{PAYLOAD_WIDTH}; settings {SETTINGS} as (K, M, d)"
    )

    def part(rs, field, pick):
        rs = [r for r in rs if r["requests"]]
        if not rs:
            return "-"
        best = pick(rs, key=lambda r: r[field])
        return (
            f"{best[field]:.3f} ({best['N']})"
            if field == "covered"
            else (f"{best[field]:.1f} ({best['N']})")
        )

    def short(kind):
        groups: dict[tuple[str, str], dict[str, list]] = {}
        for r in summary["rows"]:
            if r.get("answers", "worker") != kind:
                continue
            g = groups.setdefault((r["setting"], r["code"]), {})
            g.setdefault(r["worker_dtype"], []).append(r)
        lines = [
            head,
            "",
            "| setting | code | M | N | covered at threshold (bf16 / f32) | lowest "
            "covered, at N (bf16 / f32) | largest median ratio, at N (bf16 / f32) |",
            "|---|---|---|---|---|---|---|",
        ]
        for (setting, name), g in groups.items():
            dts = [g.get(dt, []) for dt in WORKER_DTYPES]
            first = next(rs for rs in dts if rs)
            at_t = []
            for rs in dts:
                t = [r for r in rs if r["N"] == r["threshold"] and r["requests"]]
                at_t.append(f"{t[0]['covered']:.3f}" if t else "-")
            lines.append(
                f"| {setting} | {name} | {first[0]['M']} | {first[0]['threshold']}.."
                f"{first[0]['M']} | {' / '.join(at_t)} | "
                f"{' / '.join(part(rs, 'covered', min) for rs in dts)} | "
                f"{' / '.join(part(rs, 'median_ratio', max) for rs in dts)} |"
            )
        return "\n".join(lines)

    full = [
        head + "; answers: premise (exact f rounded once) or worker (computed in "
        "the dtype); reference: f(X), or the float64 decode for an approximate "
        "decode, whose coverage against f(X) (the approximation error, not "
        "predicted) is the last column",
        "",
        "| setting | code | dtype | answers | N | ok | not ok | covered | median "
        "ratio | median actual | median predicted | reference | covered vs f(X) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        lead = (
            f"| {r['setting']} | {r['code']} | {r['worker_dtype']} | "
            f"{r.get('answers', 'worker')} | {r['N']} | "
        )
        ref = r.get("reference", "f(X)")
        cf = r.get("covered_f")
        cf = "-" if cf is None else f"{cf:.3f}"
        if not r["requests"]:
            full.append(f"{lead}0 | {r['not_ok']} | - | - | - | - | {ref} | - |")
            continue
        full.append(
            f"{lead}{r['requests']} | {r['not_ok']} | {r['covered']:.3f} | "
            f"{r['median_ratio']:.1f} | {r['actual_median']:.2e} | "
            f"{r['predicted_median']:.2e} | {ref} | {cf} |"
        )
    return short("premise"), short("worker"), "\n".join(full)


def write_catalogue(summary: CalibrationSummary, out: str) -> str:
    """``summary.json`` and ``report.md`` (the short and the full table, headed by
    the command, the commit and the date, as the pages of docs/results/) in
    ``out``; returns the short table."""
    os.makedirs(out, exist_ok=True)
    premise, worker, full = format_catalogue(summary)
    runkit.write_summary(os.path.join(out, "summary.json"), summary)
    env = summary["environment"]
    command = summary.get("command", "python -m theory.calibration --codes ...")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(
            "# Calibration of the predicted error: every code\n\n"
            f"- Command: `{command}`\n"
            f"- Recorded at: commit `{env.get('git_revision', 'unknown')}` "
            f"({summary['date']}), jax {env.get('jax_version', '?')}, backend "
            f"{env.get('backend', '?')} ({env.get('device_kind', '?')})\n\n"
            "## Under the premise: the exact f rounded once per answer\n\n"
            f"{premise}\n\nTargets met: {summary['targets']}\n\n"
            "## Beyond the premise: workers computing f in their dtype\n\n"
            f"{worker}\n\n## Every N\n\n{full}\n"
        )
    return premise
