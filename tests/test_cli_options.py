"""Every command line, given a bad option, exits non-zero with one line naming it.

The command lines are discovered (every ``__main__.py`` of ``theory/``, ``models/``
and ``benchmarks/``, and every module there that runs ``main()`` when executed),
and each one's parser is read from its ``main`` without running it. Every option
is then given the bad values of its kind (a non-numeric or negative count, a
NaN, infinite or negative number, an unknown choice, a bad list item), through
``main(argv)`` in this process. Each must end in ``SystemExit`` with a non-zero
status, one line on stderr that names the option, and no traceback, raised
while the arguments are parsed, before any work (the run kit's entry points of
work are made to fail loudly should one start). Config values out of range that
only the command can judge are a table of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import pathlib
import re
import time

import pytest

import runkit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("theory", "models", "benchmarks")


def discover() -> list[str]:
    """The module names of every command line of the applications."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            if path.name == "__main__.py" or 'if __name__ == "__main__"' in text:
                parts = path.relative_to(ROOT).with_suffix("").parts
                out.append(".".join(parts))
    return out


# every command line with the required arguments it needs to parse at all
# (values that parse; the bad option then fails the parse on its own)
COMMANDS = {
    "theory.beyond": [], "theory.calibration": [], "theory.collect": [],
    "theory.demo": [], "theory.nercc_vs_bacc": [],
    "theory.plan.__main__": ["--workers", "5", "--inputs", "2", "--degree", "1"],
    "theory.robust.__main__": [], "theory.verify.__main__": ["--out", "OUT"],
    "models.coded_dcn.__main__": ["--out", "OUT"],
    "models.nercc_experiment.__main__": ["--out", "OUT"],
    "models.parity_experiment.__main__": ["--out", "OUT"],
    "models.serve_dcn.__main__": [],
    "models.train_dcn.__main__": ["--out", "OUT"],
    "models.train_mnist.__main__": ["--out", "OUT", "--model", "lenet5"],
    "models.train_parity.__main__": ["--out", "OUT", "--model", "mlp", "--group",
                                     "2"],
    "benchmarks.decode": [], "benchmarks.fuzz_ok": [], "benchmarks.latency": [],
    "benchmarks.load.__main__": [], "benchmarks.mc_speed": [],
    "benchmarks.profile_decode": [], "benchmarks.regimes.__main__": [],
    "benchmarks.robust_serving": [], "benchmarks.run": [],
    "benchmarks.schemes.__main__": ["--out", "OUT"],
    "benchmarks.serving.__main__": [],
}  # fmt: skip


def test_every_command_line_is_covered():
    assert sorted(COMMANDS) == sorted(discover())


class _Parser(Exception):
    pass


@contextlib.contextmanager
def _no_work(monkeypatch):
    """The run kit's entry points of work fail the test should one be reached."""

    def work(*args, **kwargs):
        raise AssertionError("a command started work before refusing a bad option")

    for name in ("progress", "write_summary", "environment"):
        monkeypatch.setattr(runkit, name, work)
    yield


def _parser(module: str) -> argparse.ArgumentParser:
    """The parser ``main`` builds (read at its first parse; nothing runs)."""
    mod = importlib.import_module(module)
    original = argparse.ArgumentParser.parse_known_args

    def grab(self, args=None, namespace=None):
        raise _Parser(self)

    argparse.ArgumentParser.parse_known_args = grab
    try:
        mod.main([])
    except _Parser as got:
        return got.args[0]
    finally:
        argparse.ArgumentParser.parse_known_args = original
    raise AssertionError(f"{module}.main parsed no arguments")


def _bad_values(action: argparse.Action) -> list[str]:
    kind = action.type
    if action.choices is not None and kind in (None, str):
        return ["no-such-choice"]
    if kind is runkit.count:
        return ["abc", "-1", "1.5"]
    if kind is runkit.nonneg_float:
        return ["abc", "nan", "inf", "-1"]
    name = getattr(kind, "__name__", "")
    if name == "list of count":
        return ["1,abc", "1,-1"]
    if name == "list of nonneg_float":
        return ["1,abc", "1,nan"]
    return []


def _cases():
    out = []
    for module in COMMANDS:
        parser = _parser(module)
        for action in parser._actions:
            if not action.option_strings:
                continue
            flag = action.option_strings[0]
            values = _bad_values(action)
            if values:
                out.append(pytest.param(module, flag, values, id=f"{module} {flag}"))
    return out


CASES = _cases()


def _run(module, argv, out, capsys):
    mod = importlib.import_module(module)
    argv = [str(out) if a == "OUT" else a for a in argv]
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as info:
        mod.main(argv)
    took = time.perf_counter() - t0
    err = capsys.readouterr().err
    return info.value.code, err, took


def _one_line(err: str, flag: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    line = lines[0]
    assert re.search(rf"error: (\S+: )?{re.escape(flag)}[:/ ]", line), line
    return line


def test_the_table_has_every_kind_of_bad_value():
    # enough cases, of every kind, that a parser change that drops the checks shows
    kinds = {v for c in CASES for v in c.values[2]}
    assert {"abc", "-1", "nan", "inf", "no-such-choice", "1,-1"} <= kinds
    # every command but theory.collect (--out and --no-progress only) has some
    assert {c.values[0] for c in CASES} == set(COMMANDS) - {"theory.collect"}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    """One --out folder for every case (nothing is written: no case gets that
    far)."""
    return tmp_path_factory.mktemp("cli")


@pytest.mark.parametrize("module,flag,values", CASES)
def test_a_bad_option_exits_with_one_line_naming_it(
    module, flag, values, out_dir, capsys, monkeypatch
):
    with _no_work(monkeypatch):
        for value in values:
            code, err, took = _run(
                module, [*COMMANDS[module], flag, value], out_dir, capsys
            )
            assert code not in (0, None), value
            _one_line(err, flag)
            assert took < 5.0 and not any(out_dir.iterdir())


# config values that parse but that the command refuses before it starts
CONFIG_VALUES = [
    ("theory.plan.__main__", ["--target-error", "1e-9"], "--target-error"),
    ("theory.plan.__main__", ["--target-error", "0"], "--target-error"),
    ("theory.plan.__main__", ["--failure", "1.5"], "--failure"),
    ("theory.plan.__main__", ["--trials", "0"], "--trials"),
    ("theory.plan.__main__", ["--latency", "pareto:1ms,0.001"], "--latency"),
    ("theory.plan.__main__", ["--latency", "exp:5ms", "--schemes", "nope"],
     "--schemes"),
    ("theory.verify.__main__", ["--eta", "1.5"], "--eta"),
    ("theory.verify.__main__", ["--trials", "0"], "--trials"),
    ("theory.verify.__main__", ["--workers", "3", "--inputs", "5", "--degree", "1"],
     "--workers"),
    ("benchmarks.load.__main__", ["--workers", "4"], "--workers"),
    ("benchmarks.load.__main__", ["--p99-target", "0"], "--p99-target"),
    ("models.serve_dcn.__main__", ["--group-deadline", "0"], "--group-deadline"),
    ("models.serve_dcn.__main__", ["--http", "70000"], "--http"),
    ("models.parity_experiment.__main__", ["--steps", "0"], "--steps"),
    ("models.coded_dcn.__main__", ["--schemes", "nope"], "--schemes"),
    ("models.coded_dcn.__main__", ["--repetitions", "-3"], "--repetitions"),
    ("models.coded_dcn.__main__", ["--repetitions", "0"], "--repetitions"),
    ("models.nercc_experiment.__main__", ["--replication", "0"], "--replication"),
    ("models.train_dcn.__main__", ["--embed-dim", "0"], "--embed-dim"),
    ("models.train_dcn.__main__", ["--low-rank", "0"], "--low-rank"),
    ("models.train_dcn.__main__", ["--batch-size", "0"], "--batch-size"),
    ("models.train_dcn.__main__", ["--steps-per-eval", "0"], "--steps-per-eval"),
    ("models.train_dcn.__main__", ["--deep-sizes", "64,0"], "--deep-sizes"),
    ("models.train_mnist.__main__", ["--epochs", "0"], "--epochs"),
    ("models.train_parity.__main__", ["--steps", "0"], "--group/--steps"),
    ("models.parity_experiment.__main__", ["--groups", "1"], "--groups"),
]  # fmt: skip

# the counts each command needs >= 1 (runkit.at_least): zero is refused
AT_LEAST_ONE = {
    "theory.beyond": ["--workers", "--coeffs", "--trials"],
    "theory.demo": ["--inputs", "--workers", "--masks", "--responses"],
    "theory.calibration": ["--masks", "--responses", "--columns"],
    "theory.robust.__main__": ["--requests"],
    "theory.verify.__main__": ["--workers", "--inputs", "--degree",
                               "--num-processes", "--cpu-devices"],
    "benchmarks.decode": ["--repeats"], "benchmarks.fuzz_ok": ["--num-masks"],
    "benchmarks.latency": ["--calls"], "benchmarks.load.__main__": ["--check-workers"],
    "benchmarks.mc_speed": ["--workers", "--coeffs", "--trials", "--repeats"],
    "benchmarks.profile_decode": ["--calls"],
    "benchmarks.robust_serving": ["--requests"], "benchmarks.run": ["--repeats"],
    "benchmarks.schemes.__main__": ["--trials", "--n-step", "--workers", "--inputs"],
    "benchmarks.serving.__main__": ["--requests", "--sim-requests"],
    "benchmarks.regimes.__main__": ["--requests"],
    "models.serve_dcn.__main__": ["--max-groups"],
}  # fmt: skip
CONFIG_VALUES += [
    (module, [flag, "0"], flag)
    for module, flags in AT_LEAST_ONE.items()
    for flag in flags
]


@pytest.mark.parametrize(
    "module,argv,flag",
    CONFIG_VALUES,
    ids=[f"{m} {' '.join(a)}" for m, a, _ in CONFIG_VALUES],  # fmt: skip
)
def test_a_config_value_out_of_range_exits_with_one_line_naming_it(
    module, argv, flag, out_dir, capsys, monkeypatch
):
    with _no_work(monkeypatch):
        code, err, took = _run(module, [*COMMANDS[module], *argv], out_dir, capsys)
    assert not any(out_dir.iterdir())
    assert code not in (0, None)
    _one_line(err, flag)
    assert took < 5.0


@pytest.mark.parametrize(
    "setting",
    [
        {"trials": "abc"}, {"trials": 1.5}, {"eta": "x"}, {"seed": True},
        {"workers": [5], "inputs": [2], "degree": ["a"]}, {"plots": 1},
        {"chunk": 2.5}, {"cond_grid": 3}, {"eta": 2.0}, {"points_trials": 0},
    ],
    ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()),
)  # fmt: skip
def test_a_bad_config_file_value_exits_with_one_line_naming_it(
    setting, out_dir, tmp_path_factory, capsys, monkeypatch
):
    import json

    path = tmp_path_factory.mktemp("config") / "run.json"
    path.write_text(json.dumps(setting))
    module = "theory.verify.__main__"
    with _no_work(monkeypatch):
        code, err, took = _run(module, [*COMMANDS[module], "--config", str(path)],
                               out_dir, capsys)  # fmt: skip
    assert code not in (0, None)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    # "--config: trials must be an int ..." or the key's own flag: "--eta: ..."
    assert any(k.replace("_", "") in lines[0].replace("_", "") for k in setting)
    assert "error: --" in lines[0], lines[0]
