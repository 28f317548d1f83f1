"""runkit.main: one command line from a config class, ``--quick`` read in one place.

A toy config goes through :func:`runkit.main` as every entry point's does: the
flags come from its fields, ``--quick`` picks ``Config.quick`` (and nothing else
reads the flag: the applications are searched for a read of a ``quick``
attribute that is not a preset's call), given flags override the preset, the
config's own checks and ``validate`` are refused in one line naming the flag, and
the run gets the command line as typed.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

import runkit

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class _Cfg:
    requests: int = 100
    scale: float = 1.0
    names: tuple[str, ...] = ("a",)
    plots: bool = True
    seed: int = 7
    progress: bool = True

    def __post_init__(self):
        if self.requests < 1:
            raise ValueError(f"_Cfg: requests must be >= 1, got {self.requests}")

    @classmethod
    def quick(cls, **overrides) -> _Cfg:
        """Ten requests.

        (Not this paragraph.)"""
        return cls(**{"requests": 10, "scale": 0.5, **overrides})


FLAGS = {
    "requests": "--requests",
    "scale": "--scale",
    "names": "--names",
    "plots": "--no-plots",
}


def _main(argv, **kw):
    got = {}

    def run(cfg, cmd):
        got.update(cfg=cfg, cmd=cmd)
        return "ran"

    kw = {"prog": "python -m toy", "description": "A toy.", "flags": FLAGS, **kw}
    assert runkit.main(_Cfg, run, argv, **kw) == "ran"
    return got["cfg"], got["cmd"]


def test_quick_is_the_preset_and_given_flags_override_it():
    cfg, cmd = _main(["--out", "o"])
    assert cfg == _Cfg(seed=0)  # --seed's default 0 is given; the rest untouched
    cfg, _ = _main(["--out", "o", "--quick"])
    assert cfg == _Cfg.quick(seed=0)
    cfg, cmd = _main(
        ["--out", "o", "--quick", "--scale", "2", "--names", "x,y", "--no-plots",
         "--no-progress", "--seed", "3"]
    )  # fmt: skip
    assert cfg == _Cfg(requests=10, scale=2.0, names=("x", "y"), plots=False,
                       seed=3, progress=False)  # fmt: skip
    assert cmd.out == "o" and cmd.progress is False and cmd.show_progress is False
    assert cmd.command == (
        "python -m toy --out o --quick --scale 2 --names x,y --no-plots "
        "--no-progress --seed 3"
    )
    # the run arguments can leave the config's own seed alone
    cfg, cmd = _main(["--out", "o"], seed=None)
    assert cfg.seed == 7 and cmd.progress is True and cmd.show_progress is None


def test_the_quick_flag_and_its_help_follow_the_config(capsys):
    parser = runkit.command_parser(_Cfg, prog="p", description="d", flags=FLAGS)
    help_text = " ".join(parser.format_help().split())
    assert "--quick Ten requests." in help_text and "Not this" not in help_text

    @dataclasses.dataclass(frozen=True)
    class NoPreset:
        requests: int = 1

    parser = runkit.command_parser(NoPreset, prog="p", description="d", out="o")
    assert "--quick" not in parser.format_help()
    assert not hasattr(parser.parse_args([]), "quick")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--requests", "0"], "python -m toy: error: --requests: must be >= 1, got 0"),
        (["--scale", "3"], "python -m toy: error: --scale: at most 2, got 3.0"),
        (["--names", "a,b", "--requests", "5"],
         "python -m toy: error: --names: not with --requests"),
    ],
)  # fmt: skip
def test_a_refused_config_is_one_line_naming_the_flag(argv, line, capsys):
    def validate(cfg):
        if cfg.scale > 2:
            raise ValueError(f"toy: scale: at most 2, got {cfg.scale}")

    def check(parser, args):
        if args.names and args.requests:
            parser.error("--names: not with --requests")

    with pytest.raises(SystemExit) as info:
        _main(["--out", "o", *argv], validate=validate, check=check)
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [line]


def test_a_command_with_modes_builds_the_config_of_its_mode():
    @dataclasses.dataclass(frozen=True)
    class Other:
        scale: float = 9.0
        seed: int = 1

        @classmethod
        def quick(cls, **overrides):
            return cls(**{"scale": 4.0, **overrides})

    cmd = runkit.parse_command(
        _Cfg, ["--out", "o", "--quick"], prog="p", description="d", flags=FLAGS
    )
    assert cmd.config(Other, FLAGS) == Other(scale=4.0, seed=0)
    assert cmd.config(_Cfg, FLAGS) == _Cfg.quick(seed=0)
    seen = []
    runkit.main(None, lambda cfg, c: seen.append(cfg), ["--out", "o"],
                prog="p", description="d", seed=False)  # fmt: skip
    assert seen == [None]


def _quick_reads(path: pathlib.Path) -> list[str]:
    """Every read of an attribute ``quick`` in ``path`` that is not a call (a
    preset is called: ``Config.quick(...)``), and every ``getattr(_, "quick")``."""
    tree = ast.parse(path.read_text())
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "quick":
            if id(node) not in called:
                out.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and any(getattr(a, "value", None) == "quick" for a in node.args)
        ):
            out.append(ast.unparse(node))
    return out


def test_nothing_but_runkit_preset_reads_the_quick_flag(tmp_path):
    reads = {}
    for pkg in ("theory", "models", "benchmarks", "runkit"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found = _quick_reads(path)
            if found:
                reads[str(path.relative_to(ROOT))] = sorted(found)
    assert reads == {
        # the registry's quick training presets (a field of MnistModel)
        "models/train_mnist/config.py": ["spec.quick"],
        # runkit.preset, and the --quick help read from Config.quick's docstring
        "runkit/command.py": ["config.quick", "getattr(args, 'quick', False)",
                              "getattr(config, 'quick', None)"],
    }  # fmt: skip
    # and the search finds a read of the flag
    probe = tmp_path / "probe.py"
    probe.write_text("def f(args):\n    return 1 if args.quick else 2\n")
    assert _quick_reads(probe) == ["args.quick"]


def test_every_command_line_is_built_by_the_run_kit():
    """No entry point builds its own parser: each calls runkit.main, or
    runkit.parse_command / runkit.command_parser for a command with modes."""
    commands = 0
    for pkg in ("theory", "models", "benchmarks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            if path.name != "__main__.py" and 'if __name__ == "__main__"' not in text:
                continue
            commands += 1
            assert "ArgumentParser(" not in text, f"{path} builds its own parser"
            assert any(
                f"runkit.{name}(" in text
                for name in ("main", "parse_command", "command_parser")
            ), f"{path}: no runkit.main"
    assert commands >= 25
