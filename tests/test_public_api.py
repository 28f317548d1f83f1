"""The public name set is pinned, and imports run one way (docs/design.md)."""

import ast
import functools
import pathlib
import sys

import codedjax as cj

ROOT = pathlib.Path(__file__).resolve().parents[1]

PUBLIC = {
    "__version__",
    # precision
    "accumulation_dtype",
    "low_precision_worker",
    "unit_roundoff",
    # points and bases
    "chebyshev_points",
    "chebyshev_vandermonde",
    # latency models
    "Constant",
    "LatencyModel",
    "Pareto",
    "PersistentSlowdown",
    "RandomSlowdown",
    "ShiftedExponential",
    "Uniform",
    "parse_latency",
    # straggler models
    "Arrivals",
    "WorstCase",
    "first_arrivals",
    "sample_arrivals",
    "sample_masks",
    "worst_case_mask",
    # decode results
    "DecodeResult",
    "Status",
    "lapack_lock",
    # polynomial codes
    "chebyls_decode",
    "chebyls_decode_batched",
    "chebyls_decoding_matrix",
    "lagrange_encode",
    "recovery_threshold",
    "spread_order",
    "threshold_decode",
    # decoding that knows its own error: graceful and robust decoders
    "graceful_decode",
    "smooth_chebyshev_decode",
    "RobustDecodeResult",
    "robust_decode",
    # the catalogue of schemes
    "SCHEME_NAMES",
    "Scheme",
    "Workload",
    "catalogue",
    "Layout",
    "layouts",
    # approximate codes
    "bacc_points",
    "berrut_decode",
    "berrut_decoding_matrix",
    "berrut_encode",
    "NerccTuning",
    "nercc_decode",
    "nercc_decoding_matrix",
    "nercc_encode",
    "nercc_encoding_matrix",
    "tune_nercc",
    "RepApproxLayout",
    "RepApproxResult",
    "repapprox_decode",
    "repapprox_encode",
    "repapprox_layout",
    "exact_recovery_probability",
    "recovery_probability_bound",
    "recovery_probability_union",
    # code objects
    "Answers",
    "Code",
    "LagrangeCode",
    "ChebyLSCode",
    "ThresholdCode",
    "GracefulCode",
    "RobustCode",
    "BaccCode",
    "NerccCode",
    "RepApproxCode",
    "ReplicationCode",
    "ParityCode",
    "lagrange_code",
    "bacc_code",
    "nercc_code",
    "repapprox_code",
    "replication_code",
    "uncoded_code",
    "parity_code",
    "CircleCode",
    "CircleThresholdCode",
    "RandomCode",
    "circle_code",
    "random_code",
    # bounds (a public submodule)
    "bounds",
}

# Layering inside the library: a module may import only modules of lower rank.
RANK = {
    "_dtypes": 0,
    "_argchecks": 0.25,
    # the bounds (codedjax.bounds re-exports them): host numpy, no jax
    "_bounds_args": 0.3,
    "_leverage": 0.35,
    "_intervals": 0.35,
    "_exact_condition": 0.4,
    "_condition_bounds": 0.45,
    "_gap_bounds": 0.5,
    "_errors": 0.5,
    "_result": 1,
    "_threads": 1,
    "_argcache": 1,
    "_batching": 1,
    "_chebyshev": 1,
    "_latency": 1,
    "_latency_text": 1.1,
    "_sampling": 2,
    "_batched_linalg": 1,
    "_lagrange_lsq": 2,
    "_lagrange_square": 2,
    "_basis_lsq": 1.5,
    "_lagrange_qr": 1.5,
    "_nodes": 2,
    "_lagrange_encoding": 2.5,
    "_lagrange_chebyls": 3,
    "_lagrange_threshold": 3.25,
    "_circle_kernels": 3.5,
    "_random_kernels": 3,
    "_exhaustive_condition": 3.25,  # the random basis is the random code's draw
    "_lagrange_graceful": 3,
    "_lagrange_robust": 4,
    "_berrut_kernels": 4,
    "_nercc_kernels": 4,
    "_nercc_tuning": 4.5,
    "_repapprox_kernels": 5,
    "_code_checks": 5.5,
    "_code_points": 5.5,
    "_code_programs": 5.5,
    "_code": 6,
    "_systematic": 5.5,
    "_lagrange_codes": 6.5,
    "_circle_codes": 6.75,
    "_random_codes": 6.5,
    "_approx_codes": 6.5,
    "_replication_codes": 6.5,
    "_parity": 6.5,
    "_catalogue": 6.9,
    "_layouts": 6.95,
    "bounds": 6,
    "__init__": 7,
}
ALLOWED_THIRD_PARTY = {"jax", "jaxlib", "numpy", "scipy"}


def _public_names():
    return {n for n in dir(cj) if not n.startswith("_") or n == "__version__"} - {
        # submodules appear as attributes once imported
        name
        for name in dir(cj)
        if type(getattr(cj, name)).__name__ == "module" and name != "bounds"
    }


def test_public_name_set_is_pinned():
    names = _public_names()
    missing = PUBLIC - names
    assert not missing, f"public names missing: {sorted(missing)}"
    extra = names - PUBLIC
    assert not extra, f"unpinned public names: {sorted(extra)}"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield 0, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                yield node.level, node.module
            else:  # from . import name
                for a in node.names:
                    yield node.level, a.name


def test_library_imports_only_jax_numpy_scipy_and_lower_layers():
    for path in sorted((ROOT / "codedjax").glob("*.py")):
        me = path.stem
        assert me in RANK, f"{path.name} has no layer in RANK"
        for level, mod in _imports(path):
            top = mod.split(".")[0]
            if level == 0:
                assert (
                    top in ALLOWED_THIRD_PARTY
                    or top in sys.stdlib_module_names
                    or top == "__future__"
                ), f"{path.name} imports {mod}"
                assert top != "codedjax", f"{path.name} imports itself absolutely"
            else:
                assert top in RANK, f"{path.name} imports .{mod}"
                assert RANK[top] < RANK[me], f"{path.name} imports .{mod} (upward)"


def _imported_names(path):
    """(level, module, name) for every ``from module import name``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                yield node.level, node.module or "", a.name


def test_consumers_use_public_names_only():
    for folder in ("runkit", "theory", "models", "benchmarks", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for level, mod in _imports(path):
                if level == 0 and mod.startswith("codedjax."):
                    assert mod in ("codedjax.bounds", "codedjax.serving"), (
                        f"{path} imports {mod}"
                    )
    # `from codedjax import _private` too; tests of private kernels may do it
    for folder in ("runkit", "theory", "models", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for level, mod, name in _imported_names(path):
                if level == 0 and mod.split(".")[0] == "codedjax":
                    assert not name.startswith("_"), f"{path} imports {mod}.{name}"


def test_no_private_name_imported_across_library_modules():
    for path in sorted((ROOT / "codedjax").rglob("*.py")):
        for level, mod, name in _imported_names(path):
            if level > 0 and mod:  # from ._x import name
                assert not name.startswith("_"), (
                    f"{path.name} imports the private name {name} from .{mod}"
                )


# The application layer: codedjax <- runkit <- {theory, models, benchmarks}.
APPS = ("runkit", "theory", "models", "benchmarks")
# which application packages each may import (their public modules and names)
MAY_IMPORT = {
    "runkit": set(),
    "theory": {"runkit"},  # theory and models are siblings
    "models": {"runkit"},
    "benchmarks": {"runkit", "theory", "models"},
}
RUNKIT_THIRD_PARTY = {"numpy", "tqdm", "jax"}  # jax: the environment record only


@functools.lru_cache(maxsize=None)
def _tree(path):
    return ast.parse(path.read_text())


def _absolute_imports(path):
    """(absolute module, imported names) of every import of an application file."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = parts[:-1]  # a module's package; an __init__'s is its own
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            if node.level == 0:
                yield node.module, names
                continue
            base = package[: len(package) - (node.level - 1)]
            mod = ".".join(base + ((node.module,) if node.module else ()))
            if node.module:
                yield mod, names
            else:  # from . import name: each name is a module
                for n in names:
                    yield f"{mod}.{n}", ()


def _app_files():
    for top in APPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield top, path


def test_application_layering():
    for top, path in _app_files():
        for mod, _ in _absolute_imports(path):
            first = mod.split(".")[0]
            if first in APPS and first != top:
                assert first in MAY_IMPORT[top], f"{path} imports {mod} (layering)"
            if top == "runkit" and first not in APPS:
                assert (
                    first in RUNKIT_THIRD_PARTY
                    or first in sys.stdlib_module_names
                    or first in ("__future__", "codedjax")
                ), f"{path} imports {mod}: the run kit needs only numpy, tqdm, jax"


def test_applications_import_no_private_module_of_another_package():
    for top, path in _app_files():
        for mod, names in _absolute_imports(path):
            first = mod.split(".")[0]
            if first == top or first not in APPS + ("codedjax",):
                continue  # a package's own private modules are its business
            private = [p for p in mod.split(".") if p.startswith("_")]
            assert not private, f"{path} imports the private module {mod}"
            bad = [n for n in names if n.startswith("_")]
            assert not bad, f"{path} imports the private names {bad} from {mod}"


def _code_classes():
    """The names of every Code class the library defines (public or not)."""
    names = set()
    for path in sorted((ROOT / "codedjax").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and (
                node.name == "Code"
                or any(getattr(b, "id", "").endswith("Code") for b in node.bases)
            ):
                names.add(node.name)
    return names


def test_nothing_outside_a_code_dispatches_on_its_type():
    """A consumer (the serving runtime, the applications) asks a code what it
    needs (``may_decode``, ``decodable_from``, ``encoder_key``,
    ``answers_chunk``, ...) instead of testing which class it is."""
    classes = _code_classes()
    assert {"Code", "LagrangeCode", "ReplicationCode", "BaccCode"} <= classes
    files = [p for _, p in _app_files()]
    files += sorted((ROOT / "codedjax" / "serving").glob("*.py"))
    for path in files:
        for node in ast.walk(_tree(path)):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("isinstance", "issubclass")
                and len(node.args) == 2
            ):
                continue
            kinds = node.args[1]
            elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            named = {getattr(e, "attr", getattr(e, "id", None)) for e in elts}
            assert not named & classes, (
                f"{path.relative_to(ROOT)}:{node.lineno} dispatches on the code's "
                f"type {sorted(named & classes)}"
            )


SERVING = ROOT / "codedjax" / "serving"
# private members a serving module may reach that are no serving module's own:
# the namedtuple API, and the latency models' sampling hook (codedjax/_latency.py)
NOT_SERVINGS = {"_replace", "_asdict", "_fields", "_make"}
# the serving modules that implement backends; the others are the engine's side
BACKEND_MODULES = {"_backends", "_thread_cluster", "_pool", "_virtual", "_ray"}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_members(tree):
    """The private names a module defines: its functions and classes, what it
    assigns (``self._x = ...``, class attributes) and its ``__slots__``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "__slots__" for t in node.targets
        ):
            names |= {e.value for e in ast.walk(node.value)
                      if isinstance(e, ast.Constant)}  # fmt: skip
    return {n for n in names if isinstance(n, str) and _private(n)}


def _members_reached(tree):
    """(line, name) of every member the module reaches on an object:
    ``obj.name``, and ``getattr`` / ``hasattr`` / ``setattr`` with a constant."""
    probes = ("getattr", "hasattr", "setattr", "delattr")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) in probes
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            yield node.lineno, node.args[1].value


def test_no_serving_module_reaches_a_private_member_of_another():
    """The serving modules talk through declared members (docs/serving.md,
    "Architecture"): a private name a module reaches is one it defines itself.
    Name-based: a private name defined in both modules passes."""
    for path in sorted(SERVING.glob("*.py")):
        tree = _tree(path)
        own = _private_members(tree) | NOT_SERVINGS
        for line, name in _members_reached(tree):
            if isinstance(name, str) and _private(name):
                assert name in own, (
                    f"{path.name}:{line} reaches {name}, a private member of "
                    f"another module's object"
                )


def _backend_receiver(node):
    """The expression is a backend: ``backend``, ``cluster``, ``x.backend``,
    ``self.cluster``, ``self._cluster``, ..."""
    name = getattr(node, "id", None) or getattr(node, "attr", None)
    return name in ("backend", "cluster", "_cluster")


def _declared_backend_members():
    """What ``Backend`` and ``BackendBase`` declare: methods and attributes."""
    declared = {}
    for node in _tree(SERVING / "_backends.py").body:
        if isinstance(node, ast.ClassDef) and node.name in ("Backend", "BackendBase"):
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign):
                    names.add(item.target.id)
            declared[node.name] = names
    return declared


def test_the_engine_calls_only_members_the_backend_protocol_declares():
    """Every member the engine's side (the servers, the frontend, the warm-up,
    the load runner) uses on a backend is declared by the Backend protocol or,
    for the optional ones, with its default by BackendBase; none is probed with
    getattr/hasattr (BackendBase.of is the one place that looks)."""
    declared = _declared_backend_members()
    required = {"start", "now", "submit", "next_completed", "cancel", "close"}
    assert declared["Backend"] == required
    optional = {"warmup", "work", "advance", "wake", "virtual_clock", "can_wake"}
    assert optional <= declared["BackendBase"]
    members = declared["Backend"] | declared["BackendBase"]
    for path in sorted(SERVING.glob("*.py")):
        if path.stem in BACKEND_MODULES:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and _backend_receiver(node.value):
                assert node.attr in members, (
                    f"{path.name}:{node.lineno} uses backend.{node.attr}, which "
                    f"the Backend protocol does not declare"
                )
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("getattr", "hasattr")
                and node.args
                and _backend_receiver(node.args[0])
            ):
                raise AssertionError(
                    f"{path.name}:{node.lineno} probes the backend with "
                    f"{node.func.id}: declare the member in BackendBase"
                )
    # the library's clusters have the declared defaults
    clusters = {"_thread_cluster": "ThreadCluster", "_virtual": "SimulatedCluster",
                "_ray": "RayCluster"}  # fmt: skip
    for stem, cls in clusters.items():
        (node,) = [n for n in _tree(SERVING / f"{stem}.py").body
                   if isinstance(n, ast.ClassDef) and n.name == cls]  # fmt: skip
        assert [getattr(b, "id", None) for b in node.bases] == ["BackendBase"], cls


def test_every_command_line_uses_the_run_kit():
    """One way to add --out/--quick/--seed/--no-progress: every ``main`` that
    builds a parser calls runkit.add_run_arguments, and no file defines the flag
    --no-progress itself."""
    for top, path in _app_files():
        text = path.read_text()
        if top == "runkit":
            continue
        assert '"--no-progress"' not in text, f"{path} defines --no-progress itself"
        if "ArgumentParser(" in text:
            assert "add_run_arguments(" in text, f"{path}: a parser without the run kit"
        assert "json.dump(" not in text, f"{path} writes JSON without the run kit"


def test_importing_starts_no_backend():
    """Importing the library and its application layers creates no array: jax's
    backend must still be unstarted, so that ``jax.distributed.initialize`` (which
    must come first) can run after ``import codedjax``."""
    import subprocess

    code = (
        "import jax._src.xla_bridge as xb, codedjax, codedjax.serving, runkit, "
        "theory.montecarlo; print(xb.backends_are_initialized())\n"
        # and a Code whose first call is inside a trace still tells tracers from
        # arrays on later calls (traced at two shapes, then eagerly)
        "import jax, jax.numpy as jnp\n"
        "c = codedjax.lagrange_code(num_inputs=2, num_workers=4, degree=1)\n"
        "for f in (2, 3):\n"
        "    jax.jit(c.encode)(jnp.ones((2, f)))\n"
        "    c.decode(c.encode(jnp.ones((2, f))), jnp.ones(4, bool))"
    )
    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", "an import started jax's backend"


def _module_graph():
    """Every module of the library, the run kit and the applications, with the
    modules it imports (at the top or inside a function: both run)."""
    mods = {}
    for pkg in ("codedjax", "runkit", "theory", "models", "benchmarks"):
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    graph = {}
    for name, path in mods.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            deps.update(t for t in targets if t in mods and t != name)
        # a package and its own modules import each other by design (re-exports)
        graph[name] = {
            d
            for d in deps
            if not (d.startswith(name + ".") or name.startswith(d + "."))
        }
    return graph


def test_no_import_circle_anywhere():
    """No two modules import each other, directly or through others, counting the
    imports inside functions (a circle hidden behind a late import is still one)."""
    graph = _module_graph()
    state, circles = {}, []

    def visit(v, path):
        state[v] = "open"
        for w in sorted(graph[v]):
            if state.get(w) == "open":
                circles.append(path[path.index(w) :] + [w])
            elif w not in state:
                visit(w, path + [w])
        state[v] = "done"

    for v in sorted(graph):
        if v not in state:
            visit(v, [v])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)
