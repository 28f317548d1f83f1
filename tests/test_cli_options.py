"""Every command line, given a bad option, exits non-zero with one line naming it.

The command lines are discovered (every ``__main__.py`` of ``theory/``, ``models/``
and ``benchmarks/``, and every module there that runs ``main()`` when executed),
and each one's parser is read from its ``main`` without running it. Every option
is then given the bad values of its kind (empty, zero, negative, non-numeric, NaN
or infinite, an unknown name or choice, an empty or bad list item; less the values
:data:`ACCEPTED` says it takes), through ``main(argv)`` in this process. Each must
end in ``SystemExit`` with a non-zero status, one line on stderr that names the
option, and no traceback, raised while the arguments are parsed, before any work
(the run kit's entry points of work are made to fail loudly should one start).
Tables of their own: config values out of range that only the command can judge,
one option against another (the line names both), ``--out`` naming a file, and
bad keys of a ``--config`` file (the line names the file and the key).
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
    "theory.beyond": [], "theory.calibration.__main__": [], "theory.collect": [],
    "theory.demo": [], "theory.example": [], "theory.nercc_vs_bacc": [],
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
    "benchmarks.ray_cost": [], "benchmarks.robust_serving": [], "benchmarks.run": [],
    "benchmarks.systematic": [],
    "benchmarks.device_table": ["--out", "OUT", "--device", "cpu"],
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


# the values an option takes that its kind's table would call bad (a count for
# which 0 means "none" or "all", a seed, a folder name that a run creates)
ACCEPTED = {
    "--seed": {"0"},
    "--process-id": {"0"},
    ("benchmarks.regimes.__main__", "--spot-requests"): {"0"},
    ("benchmarks.load.__main__", "--bisection"): {"0"},  # the grid's own rates
    ("benchmarks.regimes.__main__", "--master-requests"): {"0"},
    ("benchmarks.schemes.__main__", "--model-queries"): {"0"},
    ("benchmarks.schemes.__main__", "--mnist-queries"): {"0"},
    ("theory.plan.__main__", "--worst-exact"): {"0"},
    ("theory.plan.__main__", "--worst-greedy"): {"0"},
    ("theory.plan.__main__", "--exhaustive-limit"): {"0"},  # Monte Carlo only
    ("theory.demo", "--cross-layers"): {"0"},  # a linear tower, degree 1
    ("models.train_dcn.__main__", "--cross-layers"): {"0"},
    ("models.train_dcn.__main__", "--weight-decay"): {"0"},
    ("models.train_dcn.__main__", "--min-count"): {"0"},
}


def _bad_values(module: str, action: argparse.Action) -> list[str]:
    """Every bad value of the option's kind: empty, zero, negative, non-finite,
    not a number, unknown; less what :data:`ACCEPTED` says it takes."""
    kind = action.type
    name = getattr(kind, "__name__", "")
    if action.choices is not None:
        values = ["no-such-choice", ""]
    elif kind is runkit.count or name == "workers_arg":
        values = ["abc", "-1", "1.5", "", "0"]
    elif kind is runkit.nonneg_float or name == "seconds_arg":
        values = ["abc", "nan", "inf", "-inf", "-1", "", "0"]
    elif name == "list of count":
        values = ["1,abc", "1,-1", "", "1,,2", "0"]
    elif name == "list of nonneg_float":
        values = ["1,abc", "1,nan", "", "1,,2", "0"]
    elif name == "list of text":
        values = ["", "1,,2", "no-such-choice"]
    elif kind is runkit.out_folder:
        values = [""]  # a new folder's name is fine; a file is a table of its own
    elif kind in (runkit.text, runkit.input_file) or name == "_run_dir":
        values = ["", "no-such-choice"]  # a name, a file to read, an earlier run
    elif name == "block_file":  # a file to rewrite between markers
        values = ["", "no-such-choice", "page.txt"]
    elif name == "page_file":
        values = ["", "no-such-choice", "page.txt"]  # a results page: a .md file
    elif name == "_host_port":
        values = ["", "no-such-choice", "host:0", "host:70000", ":80"]
    else:
        return []
    flag = action.option_strings[0]
    ok = ACCEPTED.get(flag, set()) | ACCEPTED.get((module, flag), set())
    return [v for v in values if v not in ok]


def _cases():
    out = []
    for module in COMMANDS:
        parser = _parser(module)
        for action in parser._actions:
            if not action.option_strings:
                continue
            flag = action.option_strings[0]
            values = _bad_values(module, action)
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
    assert {"abc", "-1", "0", "", "nan", "inf", "no-such-choice", "1,-1"} <= kinds
    # every command has some (--out at least)
    assert {c.values[0] for c in CASES} == set(COMMANDS)
    # every option that takes a value has a kind the table knows
    for module in COMMANDS:
        for action in _parser(module)._actions:
            if action.option_strings and action.nargs != 0:
                assert _bad_values(module, action), (module, action.option_strings)
    # what the table accepts is an option of that command
    options = {
        (m, s) for m in COMMANDS for a in _parser(m)._actions for s in a.option_strings
    }
    assert {k for k in ACCEPTED if isinstance(k, tuple)} <= options


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
    ("benchmarks.load.__main__", ["--workers", "1"], "--workers"),
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
    ("models.train_parity.__main__", ["--steps", "0"], "--steps"),
    ("models.parity_experiment.__main__", ["--groups", "1"], "--groups"),
    # the user's report, and more of each class
    ("models.train_parity.__main__", ["--group", "5"], "--group"),
    ("models.parity_experiment.__main__", ["--groups", "5"], "--groups"),
    ("benchmarks.load.__main__", ["--check-workers", "1"], "--check-workers"),
    ("benchmarks.load.__main__", ["--thread-rates", "0.5,1.5"], "--thread-rates"),
    ("benchmarks.load.__main__", ["--workers", "10,1"], "--workers"),
    ("benchmarks.regimes.__main__", ["--workloads", "nosuch"], "--workloads"),
    ("benchmarks.regimes.__main__", ["--ratios", "0.5"], "--ratios"),
    ("benchmarks.latency", ["--dispatch", "eager"], "--dispatch"),
    ("benchmarks.ray_cost", ["--workers", "8,2"], "--workers"),
    ("benchmarks.ray_cost", ["--workers", "8", "--actors", "16"], "--actors"),
    ("benchmarks.regimes.__main__", ["--k", "1"], "--k"),
    ("benchmarks.serving.__main__", ["--sim-requests", "100"], "--sim-requests"),
    ("benchmarks.schemes.__main__", ["--dtypes", "float32,int8"], "--dtypes"),
    ("benchmarks.schemes.__main__", ["--schemes", "chebyls,nosuch"], "--schemes"),
    ("theory.beyond", ["--eta", "1"], "--eta"),
    ("theory.calibration.__main__", ["--responses", "50"], "--responses"),
    ("theory.calibration.__main__", ["--payload", "series", "--decay", "1.5"],
     "--decay"),
    ("theory.plan.__main__", ["--latency", "nosuch:5ms"], "--latency"),
    ("theory.plan.__main__", ["--scheme-requests", "50", "--schemes", "all",
                              "--latency", "exp:5ms"], "--scheme-requests"),
    ("theory.verify.__main__", ["--points", "third"], "--points"),
    ("models.serve_dcn.__main__", ["--http", "8000", "--group-deadline", "0"],
     "--group-deadline"),
    ("models.nercc_experiment.__main__", ["--layerwise", "--models", "vit"],
     "--models"),
]  # fmt: skip

# the counts each command needs >= 1 (runkit.at_least): zero is refused
AT_LEAST_ONE = {
    "benchmarks.systematic": ["--masks", "--requests"],
    "theory.beyond": ["--workers", "--coeffs", "--trials"],
    "theory.demo": ["--inputs", "--workers", "--masks", "--responses"],
    "theory.calibration.__main__": ["--masks", "--responses", "--columns"],
    "theory.robust.__main__": ["--requests"],
    "theory.verify.__main__": ["--workers", "--inputs", "--degree",
                               "--num-processes", "--cpu-devices"],
    "benchmarks.decode": ["--repeats"], "benchmarks.fuzz_ok": ["--num-masks"],
    "benchmarks.latency": ["--calls"], "benchmarks.load.__main__": ["--check-workers"],
    "benchmarks.mc_speed": ["--workers", "--coeffs", "--trials", "--repeats"],
    "benchmarks.profile_decode": ["--calls"], "benchmarks.ray_cost": ["--requests"],
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
        {"recovery_grid": [[4, 3]]}, {"recovery_grid": [[4, 3, 10]]},
        {"recovery_grid": [[4, 3, "12"]]}, {"enumeration_grid": [[2, 2, 30]]},
        {"cond_grid": [[10, [20]]]}, {"cond_grid": [[10]]},
        {"cond_grid": [[10, [5], "third"]]}, {"points_coeffs": [50]},
        {"exhaustive_workers": [3], "exhaustive_missing": 3},
        {"family_confidence": 1.0}, {"identity_trials": -1}, {"wrokers": 3},
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
    # "error: --config FILE: key: what was expected, got what came"
    assert any(f"error: --config {path}: {k}: " in lines[0] for k in setting), lines
    assert took < 5.0


# one option against another, refused before any work with both flags named: the
# line is led by one and names the other ("RUN" is the folder of an earlier run)
CROSS = [
    ("benchmarks.regimes.__main__", ["--error-requests", "50", "--requests", "20"],
     ("--error-requests", "--requests")),
    ("benchmarks.regimes.__main__", ["--merge", "RUN", "RUN", "--requests", "5"],
     ("--requests", "--merge")),
    ("benchmarks.schemes.__main__", ["--inputs", "50"], ("--inputs", "--workers")),
    ("benchmarks.schemes.__main__", ["--model-rows", "x"],
     ("--model-rows", "--models")),
    ("benchmarks.schemes.__main__", ["--models", "--model-panels", "mnist",
                                     "--model-dtype", "float32"],
     ("--model-dtype", "--model-panels")),
    ("benchmarks.schemes.__main__", ["--models", "--workers", "20"],
     ("--model-responses", "--workers")),
    ("benchmarks.schemes.__main__", ["--schemes", "parity", "--workloads", "linear"],
     ("--schemes", "--workers")),
    ("benchmarks.mc_speed", ["--workers", "10", "--coeffs", "20"],
     ("--coeffs", "--workers")),
    ("theory.beyond", ["--workers", "10", "--coeffs", "20"], ("--coeffs", "--workers")),
    ("theory.demo", ["--inputs", "30"], ("--workers", "--inputs")),
    ("theory.demo", ["--responses", "50"], ("--responses", "--workers")),
    ("theory.calibration.__main__", ["--decay", "0.5"], ("--decay", "--payload")),
    ("theory.calibration.__main__", ["--codes", "all", "--responses", "30"],
     ("--responses", "--codes")),
    ("theory.plan.__main__", ["--workers", "3", "--inputs", "5"],
     ("--degree", "--workers")),
    ("theory.plan.__main__", ["--p99-target", "30ms"], ("--p99-target", "--workers")),
    ("theory.plan.__main__", ["--scheme-requests", "500"],
     ("--scheme-requests", "--schemes")),
    ("theory.plan.__main__", ["--schemes", "all"], ("--schemes", "--latency")),
    ("theory.verify.__main__", ["--workers", "3", "--inputs", "5", "--degree", "1"],
     ("--workers", "--inputs")),
    ("theory.verify.__main__", ["--workers", "40", "--inputs", "5"],
     ("--degree", "--workers")),
    ("theory.verify.__main__", ["--coordinator", "host:1234"],
     ("--coordinator", "--distributed")),
    ("theory.verify.__main__", ["--distributed", "--num-processes", "2",
                                "--process-id", "2"],
     ("--process-id", "--num-processes")),
    ("models.serve_dcn.__main__", ["--layerwise", "--http", "8000"],
     ("--http", "--layerwise")),
    ("models.serve_dcn.__main__", ["--group-deadline", "0.01"],
     ("--group-deadline", "--http")),
    ("models.nercc_experiment.__main__", ["--layerwise", "--replication", "3"],
     ("--replication", "--layerwise")),
    ("models.train_dcn.__main__", ["--data", "criteo"], ("--data", "--path")),
    ("models.train_dcn.__main__", ["--optimizer", "adam", "--weight-decay", "0.1"],
     ("--weight-decay", "--optimizer")),
    ("models.train_dcn.__main__", ["--min-count", "3"], ("--min-count", "--data")),
]  # fmt: skip


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory):
    """The folder of an earlier run (its summary.json), for --merge."""
    path = tmp_path_factory.mktemp("run")
    (path / "summary.json").write_text("{}")
    return path


@pytest.mark.parametrize(
    "module,argv,flags", CROSS, ids=[f"{m} {' '.join(a)}" for m, a, _ in CROSS]
)
def test_one_option_against_another_exits_with_one_line_naming_both(
    module, argv, flags, out_dir, earlier_run, capsys, monkeypatch
):
    argv = [str(earlier_run) if a == "RUN" else a for a in argv]
    with _no_work(monkeypatch):
        code, err, took = _run(module, [*COMMANDS[module], *argv], out_dir, capsys)
    assert not any(out_dir.iterdir())
    assert code not in (0, None)
    lead, other = flags
    line = _one_line(err, lead)
    assert re.search(rf"{re.escape(other)}\b", line.split(lead, 1)[1]), line
    assert took < 5.0


@pytest.mark.parametrize("module", COMMANDS)
def test_an_out_folder_that_is_a_file_or_cannot_be_made_is_refused(
    module, tmp_path, capsys, monkeypatch
):
    """--out naming an existing file, or a folder under a file, before any work."""
    afile = tmp_path / "afile"
    afile.write_text("")
    argv = [a for a in COMMANDS[module] if a != "OUT"]
    argv = [a for a in argv if a != "--out"]
    for out in (afile, afile / "below"):
        with _no_work(monkeypatch):
            code, err, took = _run(module, [*argv, "--out", str(out)], tmp_path,
                                   capsys)  # fmt: skip
        assert code not in (0, None)
        line = _one_line(err, "--out")
        assert str(afile) in line and took < 5.0
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]
