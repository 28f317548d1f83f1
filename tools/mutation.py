"""Mutation testing of the numerical modules with cosmic-ray (not part of CI).

    make mutation                                   # the default modules
    .venv/bin/python tools/mutation.py codedjax/_chebyshev.py codedjax/bounds.py
    .venv/bin/python tools/mutation.py --worktree codedjax/bounds.py  # uncommitted

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
mutant: half an hour for ``_chebyshev.py``, hours for ``bounds.py`` on 2 cores
(``--max N`` runs a random sample of N mutants per module, ``--seed`` fixes it).

Needs ``pip install -e '.[mutation]'`` (``make mutation`` does it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module -> the tests that exercise it (its doctests are added)
TESTS = {
    "codedjax/_chebyshev.py": ["tests/test_chebyshev.py"],
    "codedjax/bounds.py": ["tests/test_bounds.py", "tests/test_bounds_edges.py"],
    # the decoders and codes: their own tests plus the Code contract (test_codes,
    # test_properties) and the edge-input table, which exercise them through the
    # public API
    "codedjax/_polynomial.py": [
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    # the Code modules (split from the former _codes.py): the same tests
    "codedjax/_code.py": [
        "tests/test_codes.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
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
    "codedjax/_parity.py": [
        "tests/test_parity.py",
        "tests/test_codes.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_berrut.py": ["tests/test_berrut.py"],
    "codedjax/_nercc.py": ["tests/test_nercc.py"],
    "codedjax/_repapprox.py": ["tests/test_repapprox.py"],
    "codedjax/_sampling.py": ["tests/test_sampling.py"],
    "codedjax/_lsq.py": [
        "tests/test_lsq.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    # split from _lsq.py: the same tests, and the square kernel's own
    "codedjax/_square.py": [
        "tests/test_square.py",
        "tests/test_lsq.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
    "codedjax/_linalg.py": [
        "tests/test_lsq.py",
        "tests/test_square.py",
        "tests/test_polynomial.py",
        "tests/test_properties.py",
        "tests/test_edge_inputs.py",
    ],
}
DEFAULT = ["codedjax/_chebyshev.py", "codedjax/bounds.py"]

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


def _config(module: str, tests: list[str], timeout: float) -> str:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += tests + [module]
    excl = ", ".join(json.dumps(e) for e in EXCLUDE)
    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module)}\n"
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


def _sample(session: Path, keep: int, seed: int) -> None:
    """Mark all but a random sample of ``keep`` pending mutants as skipped.

    The sample is drawn from the mutants ordered by what they change (module,
    operator, occurrence, position), not by cosmic-ray's job ids, which are random
    per session: the same module source, ``keep`` and ``seed`` give the same mutants
    in every run, so a run before a change of the tests and one after it compare
    the same sample.
    """
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.pending_work_items)
        pending = [item.job_id for item in sorted(items, key=_mutation_key)]
        chosen = set(random.Random(seed).sample(pending, min(keep, len(pending))))
        for job in pending:
            if job not in chosen:
                db.set_result(
                    job,
                    WorkResult(
                        output="not sampled", worker_outcome=WorkerOutcome.SKIPPED
                    ),
                )


def run_module(work: Path, module: str, args) -> dict:
    tests = TESTS.get(module)
    if tests is None:
        raise SystemExit(f"mutation: no tests known for {module}; add it to TESTS")
    env = dict(os.environ, CODEDJAX_NO_PROGRESS="1", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = str(work)
    tag = Path(module).stem.strip("_")
    cfg, session = work / f"mutation_{tag}.toml", work / f"mutation_{tag}.sqlite"
    cfg.write_text(_config(module, tests, args.timeout))
    bindir = Path(sys.executable).parent

    def cr(*a: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(bindir / a[0]), *a[1:]],
            cwd=work,
            env=env,
            check=check,
            capture_output=True,
            text=True,
        )

    t0 = time.time()
    base = cr("cosmic-ray", "baseline", str(cfg), check=False)
    if base.returncode != 0:
        raise SystemExit(
            f"mutation: the unmutated tests fail for {module}:\n{base.stdout[-3000:]}"
            f"{base.stderr[-3000:]}"
        )
    cr("cosmic-ray", "init", str(cfg), str(session))
    cr("cr-filter-operators", str(session), str(cfg))
    if args.max is not None:
        _sample(session, args.max, args.seed)
    cr("cosmic-ray", "exec", str(cfg), str(session))
    dump = cr("cosmic-ray", "dump", str(session)).stdout
    counts: dict[str, int] = {}
    survivors = []
    lines = (work / module).read_text().splitlines()
    for row in dump.splitlines():
        item, result = json.loads(row)
        if result is None:
            continue
        outcome = (
            result["worker_outcome"]
            if result["worker_outcome"] != "normal"
            else result["test_outcome"]
        )
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "survived":
            mut = item["mutations"][0]
            line = mut["start_pos"][0]
            survivors.append(
                {
                    "line": line,
                    "operator": mut["operator_name"],
                    "occurrence": mut["occurrence"],
                    "source": lines[line - 1].strip(),
                    "diff": result.get("diff") or "",
                }
            )
    return {
        "module": module,
        "tests": tests,
        "counts": counts,
        "seconds": round(time.time() - t0, 1),
        "survivors": sorted(survivors, key=lambda s: s["line"]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("modules", nargs="*", default=DEFAULT)
    p.add_argument("--worktree", action="store_true", help="mutate the working tree")
    p.add_argument("--max", type=int, default=None, help="sample N mutants/module")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    p.add_argument("--out", default="results/mutation", help="report folder")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    with tempfile.TemporaryDirectory(prefix="codedjax-mutation-") as tmp:
        work = Path(tmp)
        _snapshot(work, args.worktree)
        for module in args.modules:
            rep = run_module(work, module, args)
            reports.append(rep)
            print(
                f"{module}: {rep['counts']} in {rep['seconds']} s "
                f"({len(rep['survivors'])} survived)",
                flush=True,
            )
            for s in rep["survivors"]:
                print(f"  line {s['line']}: {s['operator']}  | {s['source']}")
            (out / "mutation.json").write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
