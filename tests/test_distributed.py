"""The sharded Monte Carlo across devices and processes: two processes on localhost.

Two Python processes join one JAX run (``jax.distributed``, CPU gloo collectives, a
free port on 127.0.0.1), each with two CPU devices, so the mesh spans four devices
of two processes, no process can address the other's devices, and within a process
the LAPACK calls go one matrix at a time (several CPU devices share one thread
pool). Both run the three Monte Carlo kernels of ``theory.montecarlo`` with another
chunk size than this process, which has one device, and must return, each of them,
exactly (bit for bit) the numbers of this one-device run with the same keys and
trial counts: a trial's result depends only on (key, trial index), not on the chunk
size, the number of devices or of processes, and every reduction sees every
trial.

Each subprocess runs under a timeout, so a hang (a process that never joins, a
collective that never completes) fails the test instead of blocking the suite.

This file is also the worker: ``python tests/test_distributed.py OUT PORT P I``.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 120  # per subprocess; the pair normally finishes in a few seconds


def compute(chunk: int, memory_bytes: int = 128 << 20) -> dict[str, np.ndarray]:
    """A small run of every kernel (odd trial counts: the last chunk is padded;
    a small ``memory_bytes`` vmaps the cond trials in several steps)."""
    import jax

    from theory import montecarlo as mc

    key = jax.random.key(20240517)
    mesh = mc.make_mesh()
    s = mc.cond_monte_carlo(
        jax.random.fold_in(key, 1),
        num_workers=16,
        num_coeffs=5,
        responses=(5, 6, 9, 15, 16),
        num_trials=45,
        chunk=chunk,
        width=20,
        mesh=mesh,
        keep_orders=20,
        memory_bytes=memory_bytes,
    )
    v, _ = mc.bases(16, 5)
    q = mc.square_cond_monte_carlo(
        jax.random.fold_in(key, 2),
        np.stack([np.asarray(v), np.asarray(v)[::-1]]),
        num_coeffs=5,
        num_trials=37,
        chunk=chunk,
        width=20,
        mesh=mesh,
    )
    r = mc.recovery_monte_carlo(
        jax.random.fold_in(key, 3),
        num_inputs=3,
        replication=2,
        num_workers=9,
        num_trials=101,
        chunk=chunk,
        width=20,
        mesh=mesh,
    )
    return dict(
        raw=s.raw,
        eq=s.eq,
        gap=s.gap,
        wratio=s.wratio,
        orders=s.orders,
        square=q,
        recovery=r,
        num_devices=np.array(mesh.devices.size),
        writer=np.array(mc.is_writer()),
        sequential=np.array(mc.sequential_linalg(mesh)),
    )


def _worker(out: str, port: int, num_processes: int, process_id: int) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 2)
    from theory import montecarlo as mc

    mc.initialize_distributed(f"127.0.0.1:{port}", num_processes, process_id)
    np.savez(out, **compute(chunk=16))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_pair(tmp_path: pathlib.Path) -> list[dict[str, np.ndarray]]:
    port = _free_port()
    # the workers compile as this process does (conftest: FAST_COMPILE, inherited)
    env = dict(os.environ, CODEDJAX_NO_PROGRESS="1", PYTHONPATH=str(ROOT))
    # jax_num_cpu_devices sets two devices per process: no device count from here
    env["XLA_FLAGS"] = " ".join(
        f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f
    )
    outs = [tmp_path / f"process{i}.npz" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, str(outs[i]), str(port), "2", str(i)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=TIMEOUT_S)[0])
    except subprocess.TimeoutExpired as err:
        for p in procs:
            p.kill()
        for p in procs:
            p.communicate()
        raise AssertionError(f"2-process run did not finish in {TIMEOUT_S} s") from err
    for i, (p, log) in enumerate(zip(procs, logs, strict=True)):
        assert p.returncode == 0, f"process {i} failed:\n{log[-4000:]}"
    return [dict(np.load(o)) for o in outs]


def test_four_devices_in_two_processes_equal_one_device(tmp_path):
    results = _run_pair(tmp_path)
    # this process: its own devices (one, unless XLA_FLAGS says otherwise), another
    # chunk size, the trials vmapped in memory-bounded steps
    ref = compute(chunk=40, memory_bytes=1 << 16)
    assert int(ref["num_devices"]) != 4 and bool(ref["writer"])
    for i, got in enumerate(results):
        assert int(got["num_devices"]) == 4  # the mesh spans both processes
        assert bool(got["sequential"])  # two local CPU devices: one matrix per call
        assert bool(got["writer"]) == (i == 0)  # only process 0 writes
        for name in ("raw", "eq", "gap", "wratio", "orders", "square", "recovery"):
            assert got[name].shape == ref[name].shape, name
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    # the kernels did real work: every trial is a permutation, RepApprox counts
    # rise to every trial at N = M
    assert (np.sort(ref["orders"], axis=1) == np.arange(16)).all()
    assert ref["recovery"][-1] == 101 and ref["recovery"][0] == 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
