"""Where a run ran: the record every summary and benchmark line carries."""

from __future__ import annotations

import os
import platform
import subprocess

import numpy as np

__all__ = ["environment"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_output(*args: str, timeout: float = 10) -> str | None:
    """``git <args>`` in this checkout: its stripped stdout, or None when git is
    missing, fails or takes longer than ``timeout`` seconds."""
    try:
        out = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=_ROOT,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_revision() -> str:
    return git_output("rev-parse", "--short", "HEAD", timeout=5) or "unknown"


def _device_name(dev) -> str:
    """The accelerator's name, or the CPU model on the CPU backend."""
    if dev.platform != "cpu":
        return str(dev.device_kind)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def environment() -> dict:
    """Backend, devices, versions, git revision and thread settings of this run.

    Returns:
      ``{"backend", "device_kind", "device_name", "num_devices", "jax_version",
      "numpy_version", "python", "git_revision", "cpu_count",
      "OPENBLAS_NUM_THREADS", "XLA_FLAGS"}``; thread settings change timings (BLAS
      busy-waiting under load, XLA's intra-op pool), so they are recorded with them.
    """
    import jax

    dev = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device_kind": dev.device_kind,
        "device_name": _device_name(dev),
        "num_devices": jax.device_count(),
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "git_revision": _git_revision(),
        "cpu_count": os.cpu_count(),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
    }
