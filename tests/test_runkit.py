"""The run kit: one progress switch, the shared arguments, strict-JSON summaries, the
environment record and the config-to-flags mapping."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math

import numpy as np
import pytest

import runkit


def test_progress_respects_the_switch(monkeypatch):
    monkeypatch.setenv(runkit.NO_PROGRESS_ENV, "1")
    bar = runkit.progress(range(3), desc="x", disable=False)
    assert bar.disable and list(bar) == [0, 1, 2]
    monkeypatch.setenv(runkit.NO_PROGRESS_ENV, "0")
    assert runkit.progress_disabled(False) is False
    assert runkit.progress_disabled(None) is None
    with runkit.progress(total=2, desc="manual", disable=True) as bar:
        bar.update(2)  # a hidden manual bar takes its updates (no-ops)
        bar.set_postfix_str("done")


def test_run_arguments_and_no_progress_sets_the_switch(monkeypatch):
    monkeypatch.delenv(runkit.NO_PROGRESS_ENV, raising=False)
    p = runkit.add_run_arguments(argparse.ArgumentParser(), out="results/x")
    a = p.parse_args([])
    assert (a.out, a.quick, a.seed, a.no_progress) == ("results/x", False, 0, False)
    assert runkit.progress_disabled(None) is None
    a = p.parse_args(["--quick", "--seed", "3", "--no-progress", "--out", "d"])
    assert (a.out, a.quick, a.seed, a.no_progress) == ("d", True, 3, True)
    assert runkit.progress_disabled(False) is True  # every bar of the run is off
    bare = runkit.add_run_arguments(argparse.ArgumentParser(), quick=False, seed=False)
    with pytest.raises(SystemExit):  # --out is required without a default
        bare.parse_args([])
    a = bare.parse_args(["--out", "o"])
    assert not hasattr(a, "quick") and not hasattr(a, "seed")
    a = runkit.add_run_arguments(argparse.ArgumentParser(), seed=None).parse_args(
        ["--out", "o"]
    )
    assert a.seed is None  # the config's own seed applies


@dataclasses.dataclass(frozen=True)
class _Cfg:
    count: int = 3
    scale: float = 1.5
    name: str = "a"
    sizes: tuple[int, ...] = (4, 2)
    ns: tuple[int, ...] = (1, 2)
    limit: int | None = None
    plots: bool = True
    seed: int = 0


def test_config_arguments_override_only_what_is_given(capsys):
    p = argparse.ArgumentParser()
    runkit.add_run_arguments(p, out="o")
    flags = {
        "count": "--count",
        "scale": "--scale",
        "name": ("--name", {"choices": ("a", "b")}),
        "sizes": "--sizes",
        "ns": ("--ns", {"nargs": "+"}),
        "limit": "--limit",
        "plots": "--no-plots",
    }
    runkit.add_config_arguments(p, _Cfg, flags)
    assert runkit.config_overrides(p.parse_args([]), _Cfg) == {"seed": 0}
    a = p.parse_args(
        "--count 5 --scale 0.5 --name b --sizes 8,16 --ns 3 4 --limit 7 --no-plots "
        "--seed 2".split()
    )
    got = runkit.config_overrides(a, _Cfg)
    assert got == dict(
        count=5, scale=0.5, name="b", sizes=(8, 16), ns=(3, 4), limit=7,
        plots=False, seed=2,
    )  # fmt: skip
    assert _Cfg(**got) == _Cfg(5, 0.5, "b", (8, 16), (3, 4), 7, False, 2)
    with pytest.raises(SystemExit):
        p.parse_args(["--name", "c"])
    assert "--name" in capsys.readouterr().err
    with pytest.raises(TypeError, match="add_config_arguments: _Cfg has no field"):
        runkit.add_config_arguments(argparse.ArgumentParser(), _Cfg, {"nope": "--x"})


class _Kind:
    pass


def test_write_summary_is_strict_json(tmp_path):
    obj = {
        "nan": math.nan,
        "inf": math.inf,
        "neg": -np.inf,
        "np": np.float32(0.5),
        "arr": np.array([1.0, np.nan]),
        "tuple": (1, 2),
        "keys": {99.9: 1, 50: 2, True: 3, None: 4},
        "cfg": _Cfg(),
        "path": tmp_path,
    }
    path = runkit.write_summary(tmp_path / "deep" / "summary.json", obj)
    text = path.read_text()

    def reject(token):
        raise AssertionError(f"non-standard JSON token {token}")

    back = json.loads(text, parse_constant=reject)
    assert back["nan"] is None and back["inf"] is None and back["neg"] is None
    assert back["np"] == 0.5 and back["arr"] == [1.0, None] and back["tuple"] == [1, 2]
    # keys as json itself writes them
    assert list(back["keys"]) == ["99.9", "50", "true", "null"]
    assert back["cfg"]["sizes"] == [4, 2] and back["path"] == str(tmp_path)
    with pytest.raises(TypeError, match="json_clean: cannot write a _Kind"):
        runkit.write_summary(tmp_path / "x.json", {"bad": _Kind()})
    assert runkit.fmt(math.nan) == "n/a" and runkit.fmt(0.12345) == "0.123"


def test_environment_record():
    env = runkit.environment()
    for key in (
        "backend", "device_kind", "num_devices", "jax_version", "git_revision",
        "cpu_count", "XLA_FLAGS",
    ):  # fmt: skip
        assert key in env
    import jax

    assert env["jax_version"] == jax.__version__
    assert env["backend"] == jax.default_backend()
    json.dumps(env, allow_nan=False)


def test_cached_fn_runs_each_distinct_input_once():
    calls = []

    def double(x):
        calls.append(x.shape[0])
        return 2 * x

    f = runkit.CachedFn(double)
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(f(x), 2 * x)
    np.testing.assert_array_equal(f(x.copy()), 2 * x)  # equal bytes: served
    f(x.astype(np.float32))  # another dtype: run again
    assert calls == [3, 3] and f.images_run == 6


def _error(p, argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        p.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_every_option_takes_a_value_that_names_something(tmp_path, capsys):
    p = argparse.ArgumentParser(prog="cmd")
    runkit.add_run_arguments(p, out=str(tmp_path / "new" / "deeper"))
    runkit.add_config_arguments(
        p, _Cfg, {"sizes": "--sizes", "name": "--name", "scale": "--scale"}
    )
    p.add_argument("--free")
    # a new folder below an existing one is fine (nothing is created at parse)
    a = p.parse_args(["--sizes", " 8, 16", "--free", "x"])
    assert a.sizes == (8, 16) and not (tmp_path / "new").exists()
    for argv, says in [
        (["--sizes", ""], "--sizes: expected a comma list of integers >= 0"),
        (["--sizes", "8,,16"], "none empty, got '8,,16'"),
        (["--sizes", "8,"], "--sizes: expected a comma list"),
        (["--sizes", "8,-1"], "--sizes: a comma list of integers >= 0"),
        (["--name", ""], "--name: expected a non-empty value, got ''"),
        (["--free", " "], "--free: expected a non-empty value"),
        (["--scale=-inf"], "expected a finite number >= 0, got '-inf'"),
        (["--out", ""], "--out: expected a non-empty value"),
    ]:
        msg = _error(p, argv, capsys)
        flag = argv[0].split("=")[0]
        assert msg.startswith(f"cmd: error: {flag}: ") and says in msg, msg
    afile = tmp_path / "afile"
    afile.write_text("")
    msg = _error(p, ["--out", str(afile)], capsys)
    assert msg == f"cmd: error: --out: expected a folder, got {str(afile)!r} (a file)"
    msg = _error(p, ["--out", str(afile / "x" / "y")], capsys)
    assert (
        "--out: cannot create the folder" in msg and f"{str(afile)!r} is a file" in msg
    )
    # the default is checked too: a run never starts towards an impossible folder
    q = runkit.add_run_arguments(argparse.ArgumentParser(prog="q"), out=str(afile))
    assert "--out: expected a folder" in _error(q, [], capsys)
    assert runkit.input_file(str(afile)) == str(afile)
    for bad, why in ((tmp_path, "a folder"), (tmp_path / "nope", "no such file")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            runkit.input_file(str(bad))


@dataclasses.dataclass(frozen=True)
class _Checked:
    num_requests: int = 10
    error_requests: int = 5
    names: tuple[str, ...] = ("a",)

    def __post_init__(self):
        if self.error_requests > self.num_requests:
            raise ValueError(
                f"_Checked: error_requests must be at most num_requests = "
                f"{self.num_requests}, got {self.error_requests}"
            )
        if not set(self.names) <= {"a", "b"}:
            raise ValueError(f"_Checked: names must be among a, b, got {self.names}")


def test_a_config_error_is_said_in_flags(capsys):
    flags = {"num_requests": "--requests", "error_requests": "--error-requests",
             "names": ("--names", {})}  # fmt: skip
    p = runkit.add_config_arguments(
        runkit.add_run_arguments(argparse.ArgumentParser(prog="cmd"), out="o"),
        _Checked,
        flags,
    )

    def make(argv):
        a = p.parse_args(argv)
        return runkit.make_config(
            p, flags, _Checked, **runkit.config_overrides(a, _Checked)
        )

    assert make(["--names", "b,a"]) == _Checked(names=("b", "a"))
    # one option against another: led by the one, naming the other
    assert _error_of(make, ["--error-requests", "50", "--requests", "20"], capsys) == (
        "cmd: error: --error-requests: must be at most --requests = 20, got 50"
    )
    assert _error_of(make, ["--names", "a,c"], capsys) == (
        "cmd: error: --names: must be among a, b, got ('a', 'c')"
    )
    # a message led by a flag already, or naming no field, is passed on whole
    for err, says in [
        (ValueError("theory.plan: --latency: bad"), "--latency: bad"),
        (ValueError("argument --eta: must lie in (0, 1)"), "--eta: must lie in (0, 1)"),
        (ValueError("f: nothing known"), "f: nothing known"),
        # a label of a value from a file: the file and the key
        (ValueError("Cfg: names: rows of 3"), "--config r.toml: names: rows of 3"),
    ]:
        labels = {**flags, "names": "--config r.toml: names"}
        with pytest.raises(SystemExit):
            runkit.refuse(p, err, labels)
        assert capsys.readouterr().err == f"cmd: error: {says}\n"


def _error_of(make, argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        make(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip()


def test_an_option_that_would_be_ignored_is_refused(capsys):
    p = runkit.add_run_arguments(argparse.ArgumentParser(prog="cmd"), out="o")
    p.add_argument("--distributed", action="store_true")
    p.add_argument("--coordinator")
    p.add_argument("--merge", nargs="+")
    p.add_argument("--requests", type=int)

    def check(argv):
        a = p.parse_args(argv)
        runkit.only_with(p, a, "--distributed", ["--coordinator"])
        runkit.not_with(p, a, "--merge", ["--requests"], why="it runs nothing")
        return a

    check(["--distributed", "--coordinator", "h:1"])
    check(["--merge", "d", "--seed", "3"])
    assert _error_of(check, ["--coordinator", "h:1"], capsys) == (
        "cmd: error: --coordinator: applies only with --distributed"
    )
    assert _error_of(check, ["--merge", "d", "--requests", "0"], capsys) == (
        "cmd: error: --requests: does not apply with --merge (it runs nothing)"
    )


def test_quiet_gc_freezes_the_heap_and_times_each_collection():
    assert runkit.gcpause.GcPauses().summary() == {
        "collections": 0, "total_ms": 0.0, "longest_ms": 0.0}  # fmt: skip
    before = gc.get_freeze_count()
    heap = [[i] for i in range(2000)]  # made before: set aside inside
    with runkit.quiet_gc() as rec:
        assert gc.get_freeze_count() >= before + len(heap)
        gc.collect()
        with runkit.quiet_gc() as inner:  # nested: the outer freeze is kept
            gc.collect()
        assert gc.get_freeze_count() >= len(heap)
    assert rec._callback not in gc.callbacks and inner._callback not in gc.callbacks
    # the outer saw its own collection and the inner's two (its first, then ours)
    assert len(rec.pauses) >= 3 and len(inner.pauses) >= 1
    s = rec.summary()
    assert s["collections"] == len(rec.pauses) and s["longest_ms"] > 0
    assert s["total_ms"] == pytest.approx(1e3 * sum(rec.pauses))
    assert s["total_ms"] >= s["longest_ms"]
    if before == 0:
        assert gc.get_freeze_count() == 0  # unfrozen on exit
    del heap
