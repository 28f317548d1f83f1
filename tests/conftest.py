"""Shared test set-up: strict promotion, float64 on demand, fresh keys, tolerances.

Every test runs with strict dtype promotion and rank promotion 'raise' unless its
module sets ``pytestmark = pytest.mark.loose_promotion`` (flax/optax model code, whose
internals rely on implicit promotion). Warnings are errors (pyproject.toml). Random
draws come from literal seeds (``@pytest.mark.seed(n)``, default 0), never from test
names.
"""

from __future__ import annotations

import os

os.environ.setdefault("CODEDJAX_NO_PROGRESS", "1")


# How the suite compiles (set before jax starts its backend, so that subprocesses
# and Ray workers the tests start inherit it): see _fast_compile below.
FAST_COMPILE = os.environ.get("CODEDJAX_TEST_XLA", "") != "default"
FUSION_FLAG = "--xla_cpu_use_fusion_emitters=false"
if FAST_COMPILE:
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " " + FUSION_FLAG
        ).strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# Strict promotion is also the process's global setting, made before any test
# module is imported: what a module computes while it is collected (the inputs of
# its parametrised cases) and what threads a test starts compute then run under
# the setting of the tests themselves, so that they share compiled programs with
# the tests (the setting is part of every jit cache key); measured back to back,
# the suite takes about 5% less time than with the global default. Fixtures wider
# than a test (module, session) still run under JAX's default promotion, as the
# applications they drive do.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="session")
def _default_promotion_for_wide_fixtures():
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


@pytest.fixture(autouse=True)
def _strict_promotion(request):
    if request.node.get_closest_marker("loose_promotion") is not None:
        yield
        return
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield


def _fast_compile() -> None:
    """The suite compiles for speed, not for run time: XLA's CPU element-wise
    emitters instead of its MLIR fusion emitters (``--xla_cpu_use_fusion_emitters=
    false``) and without its expensive optimisation passes
    (``jax_disable_most_optimizations``: XLA's backend optimisation level 0).

    The suite's time is mostly compiling (several thousand programs, most run a
    few times on small shapes); these settings compile them in less than half the
    time. The programs compute the same operations; what may change is the last
    bits of a rounding, which the tolerances cover: they come from the dtype and
    the conditioning (docs/design.md, section 4), never from one compiler's bits,
    and the bit-for-bit tests compare two programs of the same suite (jit with
    eager, a batch with a loop, a scaled decode with the unscaled one). Users
    compile with XLA's defaults: ``CODEDJAX_TEST_XLA=default make test`` runs the
    suite that way (slower); an ``XLA_FLAGS`` fusion-emitter setting or a
    ``JAX_DISABLE_MOST_OPTIMIZATIONS`` the caller sets is kept.
    """
    if FAST_COMPILE:
        jax.config.update(
            "jax_disable_most_optimizations",
            os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] not in ("0", "false", ""),
        )


_fast_compile()


@pytest.fixture
def x64():
    """Run the test body with float64 enabled (references and oracles)."""
    with jax.enable_x64(True):
        yield


DEFAULT_SEED = 0


# Test files whose tests call the library's public functions at the same shapes,
# dtypes and static arguments: in one process they share the library's compiled
# programs (jit caches are per process), so that under pytest-xdist (``make test``
# runs ``--dist loadgroup``) each family runs in one worker. Every other test file
# is a group of its own (its module-scoped fixtures stay in one process); the
# doctests are one group.
PROGRAM_FAMILIES = {
    # K = 3 inputs, M = 12 workers, degree 2 (D = 5): the codes of test_codes.py
    "codes-12": (
        "test_codes.py",
        "test_trace_isolation.py",
        "test_properties.py",
        "test_robust_code.py",
        "test_plan.py",
        "test_exact_scaling.py",
    ),
    # K = 8, M = 40, degree 3 (D = 22), B = 256 masks, F = 16
    "chebyshev-40": ("test_polynomial.py", "test_lsq.py", "test_square.py"),
    # M = 20 workers, K = 3, degree 2: the robust decoder
    "robust-20": ("test_robust.py", "test_theory_robust.py"),
}
_FAMILY_OF = {f: g for g, files in PROGRAM_FAMILIES.items() for f in files}


def _program_family(nodeid: str) -> str:
    """The xdist scope of a test: its file's family (PROGRAM_FAMILIES), else its
    file; every doctest is in one scope."""
    path = nodeid.split("::", 1)[0]
    name = path.rsplit("/", 1)[-1]
    if not name.startswith("test_"):
        return "doctests"
    return _FAMILY_OF.get(name, path)


def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup`` (``make test``): whole families and files to one
    worker each (pytest-xdist's own xdist_group marks do not reach its scheduler
    under this pytest: it renames node ids through an attribute pytest 9 no
    longer reads)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FamilyScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _program_family(nodeid)

    return FamilyScheduling(config, log)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "seed(n): the literal seed of the key and np_rng fixtures (default 0)",
    )


def _seed(request) -> int:
    """The test's literal seed: ``@pytest.mark.seed(n)``, else DEFAULT_SEED.

    Never derived from the test's name or id, so renaming or reparametrising a test
    does not change its random draws. Thresholds that depend on the draws are derived
    from the worst case over many seeds (tools/reseed_thresholds.py), not tuned to
    this one.
    """
    mark = request.node.get_closest_marker("seed")
    return DEFAULT_SEED if mark is None else int(mark.args[0])


@pytest.fixture
def key(request):
    """A typed PRNG key from the test's literal seed (see :func:`_seed`)."""
    return jax.random.key(_seed(request))


def rtol_for(dtype) -> float:
    """The unit roundoff of a dtype: the scale every tolerance is built from."""
    return float(jnp.finfo(jnp.dtype(dtype)).eps) / 2.0


@pytest.fixture
def np_rng(request):
    """A numpy Generator from the test's literal seed (see :func:`_seed`)."""
    return np.random.default_rng(_seed(request))


# The quick preset of RepVGG's registry entry, shrunk to 20 steps for the tests (1
# epoch over the first 640 training digits, batch 32).
TINY_REPVGG_PRESET = dict(
    epochs=1, batch_size=32, learning_rate=3e-2, shift=0, max_train=640
)


@pytest.fixture(scope="session")
def tiny_repvgg(tmp_path_factory):
    """RepVGG trained once through the MNIST trainer's registry, for every module.

    ``entry`` is ``models.train_mnist.MODELS["repvgg"]`` with a smaller network
    (widths 8/16, blocks 1/2; its parameters drawn by numpy from the seed, so that
    no flax initialiser is compiled, batch norms as flax initialises them) and
    :data:`TINY_REPVGG_PRESET` as both presets; its ``deploy`` is the real entry's
    (the fusion). A test puts it in the registry with
    ``monkeypatch.setitem(MODELS, "repvgg", tiny_repvgg.entry)``; the checkpoint in
    ``ckpt_dir`` is then the one ``load_or_train("repvgg", ckpt_dir, quick=True)``
    reuses. Also returned: ``model`` (the trained multi-branch network) and
    ``meta`` (its training metadata).
    """
    import dataclasses
    import types

    from flax import nnx

    from models.mnist import load_mnist
    from models.repvgg import RepVGG
    from models.train_mnist import MODELS, load_or_train

    def build(seed: int) -> RepVGG:
        rng = np.random.default_rng(seed)
        model = nnx.eval_shape(
            lambda: RepVGG(rngs=nnx.Rngs(0), widths=(8, 16), depths=(1, 2))
        )
        for _, m in nnx.iter_modules(model):
            if isinstance(m, nnx.BatchNorm):
                for var, value in ((m.mean, 0), (m.var, 1), (m.scale, 1), (m.bias, 0)):
                    var.set_value(jnp.full(var.shape, value, var.dtype))
            elif isinstance(m, nnx.Conv | nnx.Linear):
                shape = m.kernel.shape
                fan_in = int(np.prod(shape[:-1]))
                w = rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)
                m.kernel.set_value(jnp.asarray(w, m.kernel.dtype))
                if m.bias is not None:
                    m.bias.set_value(jnp.zeros(m.bias.shape, m.bias.dtype))
        return model

    entry = dataclasses.replace(
        MODELS["repvgg"],
        build=build,
        full=TINY_REPVGG_PRESET,
        quick=TINY_REPVGG_PRESET,
        description="RepVGG (widths 8/16, blocks 1/2) for the tests",
    )
    ckpt_dir = tmp_path_factory.mktemp("tiny_repvgg")
    split = load_mnist()
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)  # as application tests
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(MODELS, "repvgg", entry)
            model, meta = load_or_train(
                "repvgg", ckpt_dir, True, split=split, show_progress=False, log=None
            )
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
    return types.SimpleNamespace(
        entry=entry, ckpt_dir=ckpt_dir, model=model, meta=meta, split=split
    )


# ----------------------------------------------------------------------------------
# The process at the end of each test file (one hook, ~nothing when all is well).
#
# Worker threads: a file that leaves a ThreadCluster's worker threads running (a
# server never closed and still referenced, a worker blocked and never released)
# fails at its last test's teardown. A thread that is leaving gets two seconds.
#
# Memory maps: every compiled XLA:CPU program that jax's caches keep holds about
# three memory maps, and a process that runs the whole suite alone (no xdist) can
# compile enough programs to reach the kernel's limit (vm.max_map_count, 65,530 by
# default): LLVM's next compile then fails to allocate ("Cannot allocate memory")
# and the process dies with SIGSEGV. So once fewer than _MAP_HEADROOM maps are
# left below the limit, jax's caches are cleared: the files after it recompile
# what they use. Above that nothing is cleared, and the program families keep
# sharing their programs. Clearing costs about 5 s (and the recompiles after it):
# a worker of ``make test`` peaks near 35,000 maps, so it never clears, while a
# one-process run of the whole suite clears a few times.
_WORKER_THREAD = "codedjax-worker-"
_reported_threads: set = set()


def _leftover_worker_threads() -> list:
    import gc
    import threading
    import time

    def alive():
        return [
            t
            for t in threading.enumerate()
            if t.name.startswith(_WORKER_THREAD) and t not in _reported_threads
        ]

    left = alive()
    if left:
        gc.collect()  # a cluster dropped without close() stops its threads
        end = time.monotonic() + 2.0
        for t in left:
            t.join(max(0.0, end - time.monotonic()))
        left = alive()
        _reported_threads.update(left)
    return left


def _map_limit() -> int | None:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None  # not Linux: no such limit to watch


_MAP_LIMIT = _map_limit()
# twice the most maps one test file adds (test_edge_inputs.py, about 8,700 in a
# fresh process): what must be left free when a file starts
_MAP_HEADROOM = 16_384


def _map_count() -> int:
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a file's last test and its fixtures' teardown."""
    result = yield
    if nextitem is not None and nextitem.path == item.path:
        return result
    if _MAP_LIMIT is not None and _map_count() > max(
        _MAP_LIMIT // 2, _MAP_LIMIT - _MAP_HEADROOM
    ):
        import gc

        jax.clear_caches()
        gc.collect()
    left = _leftover_worker_threads()
    if left:
        raise RuntimeError(
            f"{item.path.name} left {len(left)} ThreadCluster worker thread(s) "
            f"running ({', '.join(sorted(t.name for t in left))}): close every "
            "server it opens (a with block, or close() in a finally) and release "
            "every worker it blocks"
        )
    return result
