"""The architecture the design page describes (docs/design.md, sections 2.3 and 6):
the catalogue is the only table of schemes, and every experiment's workload is the
library's ``Workload``."""

import ast
import pathlib

import codedjax as cj

ROOT = pathlib.Path(__file__).resolve().parents[1]
APPS = ("theory", "models", "benchmarks")

# the library's code factories: an application module that builds three or more
# kinds of code is deciding which schemes exist, which is the catalogue's job
FACTORIES = {
    "lagrange_code",
    "circle_code",
    "random_code",
    "bacc_code",
    "nercc_code",
    "repapprox_code",
    "replication_code",
    "uncoded_code",
    "parity_code",
}


def _app_modules():
    for top in APPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path, ast.parse(path.read_text(), filename=str(path))


def _factories_called(tree) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name in FACTORIES:
                out.add(name)
    return out


def test_the_catalogue_is_the_only_table_of_schemes():
    """No application module builds three or more kinds of code by hand, nor
    defines its own Scheme or Workload class."""
    tables, classes = [], []
    for path, tree in _app_modules():
        rel = path.relative_to(ROOT)
        made = _factories_called(tree)
        if len(made) >= 3:
            tables.append(f"{rel}: {sorted(made)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in ("Scheme", "Workload"):
                classes.append(f"{rel}:{node.lineno} class {node.name}")
    assert not tables, "scheme tables outside codedjax.catalogue:\n" + "\n".join(tables)
    assert not classes, "use codedjax.Scheme / codedjax.Workload:\n" + "\n".join(
        classes
    )


def test_the_rule_sees_a_table():
    """The check above would catch the tables this project used to keep."""
    src = (
        "import codedjax as cj\n"
        "def schemes(k, m):\n"
        "    return [cj.lagrange_code(num_inputs=k, num_workers=m, degree=1),\n"
        "            cj.bacc_code(num_inputs=k, num_workers=m),\n"
        "            cj.replication_code(num_inputs=k, num_workers=m)]\n"
    )
    assert len(_factories_called(ast.parse(src))) == 3


def test_the_catalogue_names_every_factory_family():
    """Every code family a factory builds has a catalogue entry."""
    families = {
        s.family
        for s in cj.catalogue(cj.Workload("linear", 1, linear=True), 4, 10)
        if s.applies
    }
    families |= {
        s.family
        for s in cj.catalogue(
            cj.Workload("deep", None, layers=((0, 0, "relu"),)), 4, 10
        )
        if s.applies
    }
    assert families >= {
        "uncoded",
        "replication",
        "lagrange",
        "circle",
        "random",
        "berrut",
        "nercc",
        "repapprox",
        "parity",
    }


def test_no_application_or_serving_module_over_450_lines():
    """Modules hold one idea: the applications, the run kit and the serving
    package stay at most 450 lines each."""
    roots = [ROOT / top for top in (*APPS, "runkit")] + [ROOT / "codedjax" / "serving"]
    long = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            n = len(path.read_text().splitlines())
            if n > 450:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, "\n".join(long)
