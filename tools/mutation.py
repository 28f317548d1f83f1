"""Mutation testing of the numerical modules with cosmic-ray (not part of CI).

    make mutation                                   # the default modules
    .venv/bin/python tools/mutation.py codedjax/_chebyshev.py codedjax/_leverage.py
    .venv/bin/python tools/mutation.py --worktree codedjax/_gap_bounds.py  # uncommitted

Each module is mutated in a throw-away copy of the repository (``git archive HEAD``,
or the working tree's tracked and new files with ``--worktree``), never in the
checkout itself. cosmic-ray plants one mutation at a time (an operator swapped, a
comparison flipped, a number changed, a loop skipped, ...) and runs the module's own
tests plus its doctests in a fresh process; a mutant that every test still passes
*survived*. The survivors are listed with their line, so each can be killed by a new
test or explained (an equivalent mutant, or a path the library never takes).

Operators that produce mostly nonsense for numerical code (bit operators, shifts,
``is`` comparisons, ``%``/``//`` swaps, ``+`` turned into ``**``) are filtered out:
the arithmetic swaps kept are ``+ <-> -``, ``* <-> /``, ``+ <-> *`` and ``**`` into
``*`` or ``/``, next to flipped comparisons, changed numbers, dropped unary minus,
added ``not``, swapped ``and``/``or``, ``True``/``False`` and skipped loops, to spend
the time on the mutations that look like real bugs. A run costs one test process per
mutant (``--max N`` runs a random sample of N mutants per module, ``--seed`` fixes
it). Two things make it cheaper without changing any outcome:

- ``--jobs J`` (default 2) splits the sample over J copies of the repository, each
  running its own mutants, so the cores are used together;
- each copy has its own jax compilation cache, warmed by the unmutated run: a mutant
  recompiles only the programs its mutation changes (the cache key is the compiled
  program itself). The unmutated tests must pass twice, with the cache cold and
  warm, so a test that depends on compiling (a compile count) cannot turn a cache
  hit into a false kill.

``--tests`` replaces the module's test list, to run the tool on a tree whose map
differs (an older checkout). ``--together`` mutates the named modules as one pool:
one session, one sample of ``--max`` mutants drawn from all of them, and the union
of their tests. It compares a module with the modules it was split into, at the
same sample size on each side (``--max 60`` of the one against ``--max 60`` of the
pool, not 60 of each part).

Needs ``pip install -e '.[mutation]'`` (``make mutation`` does it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the modules of codedjax.bounds: the public module and what it re-exports
BOUNDS_MODULES = (
    "bounds",
    "_bounds_args",
    "_leverage",
    "_exact_condition",
    "_exhaustive_condition",
    "_condition_bounds",
    "_gap_bounds",
    "_intervals",
)
# module -> the tests that exercise it (its doctests are added)
TESTS = {
    "codedjax/_chebyshev.py": ["tests/test_chebyshev.py"],
    # codedjax.bounds and the modules it re-exports (split from the one bounds.py)
    **{
        f"codedjax/{m}.py": ["tests/test_bounds.py", "tests/test_bounds_edges.py"]
        for m in BOUNDS_MODULES
    },
    # the decoders and codes: their own tests plus the Code contract (test_codes,
    # test_properties) and the edge-input table, which exercise them through the
    # public API
    **{
        f"codedjax/_lagrange_{m}.py": [
            "tests/test_polynomial.py",
            "tests/test_properties.py",
            "tests/test_edge_inputs.py",
        ]
        for m in ("encoding", "chebyls", "threshold")
    },
    # the Code modules (split from the former _codes.py): the same tests
    "codedjax/_code.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_code_checks.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_code_points.py": [
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_code_programs.py": [
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    # the argument checks shared by the public functions and the codes
    "codedjax/_argchecks.py": [
        "tests/test_edge_inputs.py",
        "tests/test_codes.py",
    ],
    "codedjax/_lagrange_codes.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_approx_codes.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_replication_codes.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    # the circle and random codes and their kernels (the two codes on a given
    # dense basis share the least-squares kernel of _basis_lsq)
    "codedjax/_circle_codes.py": [
        "tests/test_circle.py",
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_circle_kernels.py": [
        "tests/test_circle.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_random_codes.py": [
        "tests/test_random_code.py",
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_random_kernels.py": [
        "tests/test_random_code.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_basis_lsq.py": [
        "tests/test_circle.py",
        "tests/test_random_code.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_parity.py": [
        "tests/test_parity.py",
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_berrut_kernels.py": ["tests/test_berrut.py"],
    "codedjax/_nercc_kernels.py": ["tests/test_nercc.py"],
    "codedjax/_nercc_tuning.py": ["tests/test_nercc.py"],
    "codedjax/_repapprox_kernels.py": ["tests/test_repapprox.py"],
    "codedjax/_lagrange_graceful.py": [
        "tests/test_error_prediction.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_lagrange_robust.py": [
        "tests/test_robust.py",
        "tests/test_robust_code.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_sampling.py": ["tests/test_sampling.py"],
    "codedjax/_lagrange_lsq.py": [
        "tests/test_lsq.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    # split from _lagrange_lsq.py: the same tests (the Householder QR tier)
    "codedjax/_lagrange_qr.py": [
        "tests/test_lsq.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    # split from _lagrange_lsq.py: the same tests, and the square kernel's own
    "codedjax/_lagrange_square.py": [
        "tests/test_square.py",
        "tests/test_lsq.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_batched_linalg.py": [
        "tests/test_lsq.py",
        "tests/test_square.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
}
DEFAULT = ["codedjax/_chebyshev.py", *(f"codedjax/{m}.py" for m in BOUNDS_MODULES[1:])]

# arithmetic swaps kept: + <-> -, * <-> /, + <-> *, ** -> * or /
BINARY_KEPT = "Add_Sub|Sub_Add|Mul_Div|Div_Mul|Add_Mul|Mul_Add|Pow_Mul|Pow_Div"
EXCLUDE = [
    rf"core/ReplaceBinaryOperator_(?!({BINARY_KEPT})$)",
    r"core/ReplaceComparisonOperator_.*_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_",
    r"core/ReplaceUnaryOperator_.*Invert",
    r"core/ExceptionReplacer",
    r"core/VariableReplacer",
    r"core/VariableInserter",
]


def _snapshot(dest: Path, worktree: bool) -> None:
    if worktree:
        files = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
        for f in filter(None, files):
            src = ROOT / f.decode()
            if src.is_file():
                (dest / f.decode()).parent.mkdir(parents=True, exist_ok=True)
                (dest / f.decode()).write_bytes(src.read_bytes())
        return
    archive = subprocess.run(
        ["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def _config(modules: list[str], tests: list[str], timeout: float) -> str:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += tests + modules
    excl = ", ".join(json.dumps(e) for e in EXCLUDE)
    path = modules[0] if len(modules) == 1 else modules
    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(path)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(' '.join(cmd))}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n\n'
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excl}]\n"
    )


def _mutation_key(item) -> tuple:
    """What a work item mutates, as a sortable key independent of its job id."""
    return tuple(
        (str(m.module_path), m.operator_name, m.occurrence, m.start_pos, m.end_pos)
        for m in item.mutations
    )


def _sample(session: Path, keep: int | None, seed: int) -> list[int]:
    """Mark all but a random sample of ``keep`` pending mutants as skipped.

    The sample is drawn from the mutants ordered by what they change (module,
    operator, occurrence, position), not by cosmic-ray's job ids, which are random
    per session: the same module source, ``keep`` and ``seed`` give the same mutants
    in every run, so a run before a change of the tests and one after it compare
    the same sample. Returns the sampled job ids in that order.
    """
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.pending_work_items)
        pending = [item.job_id for item in sorted(items, key=_mutation_key)]
        if keep is None:
            return pending
        chosen = set(random.Random(seed).sample(pending, min(keep, len(pending))))
        for job in pending:
            if job not in chosen:
                db.set_result(
                    job,
                    WorkResult(
                        output="not sampled", worker_outcome=WorkerOutcome.SKIPPED
                    ),
                )
        return [job for job in pending if job in chosen]


def _mutation_ids(session: Path) -> list[str]:
    """Every mutant's job id in a session."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        return [item.job_id for item in db.work_items]


def _keep_only(session: Path, jobs: set[str]) -> None:
    """Mark every pending mutant outside ``jobs`` as done elsewhere (skipped here)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            if item.job_id not in jobs:
                db.set_result(
                    item.job_id,
                    WorkResult(
                        output="another job", worker_outcome=WorkerOutcome.SKIPPED
                    ),
                )


def _tests_for(modules: list[str], given: list[str] | None) -> list[str]:
    """The tests of ``modules`` (the union of the map's, in order), or ``given``."""
    if given:
        return given
    tests: list[str] = []
    for module in modules:
        if module not in TESTS:
            raise SystemExit(f"mutation: no tests known for {module}; add it to TESTS")
        tests += [t for t in TESTS[module] if t not in tests]
    return tests


def run_module(work: Path, modules: list[str], args) -> dict:
    """Mutate ``modules`` as one session (one sample of ``args.max`` mutants)."""
    tests = _tests_for(modules, args.tests)
    tag = "+".join(Path(m).stem.strip("_") for m in modules)
    bindir = Path(sys.executable).parent

    def env_for(copy: Path) -> dict:
        env = dict(os.environ, CODEDJAX_NO_PROGRESS="1", JAX_PLATFORMS="cpu")
        env["PYTHONPATH"] = str(copy)
        env["JAX_COMPILATION_CACHE_DIR"] = str(copy / ".jax-cache")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
        return env

    def cr(copy: Path, *a: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(bindir / a[0]), *a[1:]],
            cwd=copy,
            env=env_for(copy),
            check=check,
            capture_output=True,
            text=True,
        )

    t0 = time.time()
    cfg, session = work / f"mutation_{tag}.toml", work / f"mutation_{tag}.sqlite"
    cfg.write_text(_config(modules, tests, args.timeout))
    shutil.rmtree(work / ".jax-cache", ignore_errors=True)
    for cache in ("cold", "warm"):
        base = cr(work, "cosmic-ray", "baseline", str(cfg), check=False)
        if base.returncode != 0:
            raise SystemExit(
                f"mutation: the unmutated tests fail for {modules} ({cache} compile "
                f"cache):\n{base.stdout[-3000:]}{base.stderr[-3000:]}"
            )
    session.unlink(missing_ok=True)
    cr(work, "cosmic-ray", "init", str(cfg), str(session))
    cr(work, "cr-filter-operators", str(session), str(cfg))
    sample = _sample(session, args.max, args.seed)

    # job j runs every J-th sampled mutant in its own copy (cosmic-ray mutates the
    # module's file in place); copy 0 is the snapshot itself
    copies = [work] + [work.parent / f"{work.name}-job{j}" for j in range(1, args.jobs)]
    for copy in copies[1:]:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(work, copy, symlinks=True)
    running = []
    for j, copy in enumerate(copies):
        _keep_only(copy / session.name, set(sample[j :: args.jobs]))
        cmd = [str(bindir / "cosmic-ray"), "exec", cfg.name, session.name]
        running.append(
            subprocess.Popen(
                cmd,
                cwd=copy,
                env=env_for(copy),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    for proc in running:
        proc.wait()

    counts: dict[str, int] = {}
    if args.max is not None:
        counts["skipped"] = len(_mutation_ids(work / session.name)) - len(sample)
    survivors = []
    lines = {m: (work / m).read_text().splitlines() for m in modules}
    for j, copy in enumerate(copies):
        mine = set(sample[j :: args.jobs])
        dump = cr(copy, "cosmic-ray", "dump", session.name).stdout
        for row in dump.splitlines():
            item, result = json.loads(row)
            if item["job_id"] not in mine:
                continue  # not sampled, or another copy's
            if result is None:
                outcome = "not run"
            elif result["worker_outcome"] != "normal":
                outcome = result["worker_outcome"]
            else:
                outcome = result["test_outcome"]
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome == "survived":
                mut = item["mutations"][0]
                line = mut["start_pos"][0]
                module = str(Path(mut["module_path"]))
                source = lines.get(module, [""] * line)[line - 1].strip()
                survivors.append(
                    {
                        "module": module,
                        "line": line,
                        "operator": mut["operator_name"],
                        "occurrence": mut["occurrence"],
                        "source": source,
                        "diff": result.get("diff") or "",
                    }
                )
        if j:
            shutil.rmtree(copy, ignore_errors=True)
    return {
        "module": modules[0] if len(modules) == 1 else modules,
        "tests": tests,
        "counts": counts,
        "jobs": args.jobs,
        "seconds": round(time.time() - t0, 1),
        "survivors": sorted(survivors, key=lambda s: (s["module"], s["line"])),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("modules", nargs="*", default=DEFAULT)
    p.add_argument("--worktree", action="store_true", help="mutate the working tree")
    p.add_argument("--max", type=int, default=None, help="sample N mutants/module")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    p.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    p.add_argument(
        "--tests", nargs="+", default=None, help="the tests, instead of the map's"
    )
    p.add_argument(
        "--together",
        action="store_true",
        help="one pool of the modules: one sample of --max mutants from all",
    )
    p.add_argument("--out", default="results/mutation", help="report folder")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: expected an integer >= 1, got {args.jobs}")
    if args.max is not None and args.max < 1:
        p.error(f"--max: expected an integer >= 1, got {args.max}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    with tempfile.TemporaryDirectory(prefix="codedjax-mutation-") as tmp:
        work = Path(tmp)
        _snapshot(work, args.worktree)
        pools = [args.modules] if args.together else [[m] for m in args.modules]
        for modules in pools:
            rep = run_module(work, modules, args)
            reports.append(rep)
            print(
                f"{' + '.join(modules)}: {rep['counts']} in {rep['seconds']} s "
                f"({len(rep['survivors'])} survived)",
                flush=True,
            )
            for s in rep["survivors"]:
                print(
                    f"  {s['module']} line {s['line']}: {s['operator']}  | "
                    f"{s['source']}"
                )
            (out / "mutation.json").write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
