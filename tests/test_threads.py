"""No hang when several Python threads run codedjax's batched decoders at once.

With jaxlib 0.10.2 on CPU, LAPACK calls with a batch axis running concurrently from
several threads deadlock XLA's intra-op thread pool (see ``codedjax._threads``). The
batched ChebyLS and threshold kernels therefore make no LAPACK call with a batch
axis, so programs the caller compiles around them (``jax.jit(jax.vmap(...))``) run
from several threads WITHOUT ``cj.lapack_lock``; without that change both user-level
cases below hung in every run. The threaded run happens in a subprocess with a
timeout, so a hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import threading
    import jax, jax.numpy as jnp
    import codedjax as cj

    M, K = 20, 4  # small programs: the sizes do not matter to the deadlock
    D = cj.recovery_threshold(K, 3)  # 10: N = D + 1 sends masks to the QR tier
    alpha, beta = cj.chebyshev_points(M), cj.chebyshev_points(K)
    masks = cj.sample_masks(jax.random.key(1), num_workers=M, num_responses=D + 1,
                            shape=(64,))
    y = jax.random.normal(jax.random.key(2), (M, 16))
    ref = cj.chebyls_decode_batched(y, masks, alpha, beta, num_coeffs=D)
    # programs the caller compiles itself, run with no lock: 32 masks each (a
    # batch axis is all the deadlock needed; its size does not matter)
    um = masks[:32]
    user_ls = jax.jit(jax.vmap(lambda mk: cj.chebyls_decode(y, mk, alpha, beta,
                                                            num_coeffs=D)))
    tm = cj.sample_masks(jax.random.key(3), num_workers=M, num_responses=D,
                         shape=(32,))
    order = jnp.broadcast_to(jnp.arange(M), (32, M))
    user_th = jax.jit(jax.vmap(lambda mk, o: cj.threshold_decode(
        y, mk, alpha, beta, num_coeffs=D, order=o)))
    ref_ls = user_ls(um)
    ref_th = user_th(tm, order)
    # the case is meaningful: some masks take the QR tier (cond > 512 in float32)
    assert int(jnp.sum(ref_ls.cond > 512)) > 0, "no mask reached the QR tier"
    assert int(jnp.sum(ref_th.ok)) > 0
    errors = []

    def work(i):
        try:
            for _ in range(2):
                r = cj.chebyls_decode_batched(y, masks, alpha, beta, num_coeffs=D)
                assert bool(jnp.all(r.ok == ref.ok)), "ok differs across threads"
                r = user_ls(um)
                assert bool(jnp.all(r.ok == ref_ls.ok)), "vmap chebyls ok differs"
                r = user_th(tm, order)
                assert bool(jnp.all(r.ok == ref_th.ok)), "vmap threshold ok differs"
        except Exception as exc:  # reported by the parent
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("errors", errors)
    assert not errors
    print("done")
    """
)


def test_threaded_batched_decoders_do_not_hang():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    try:
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("4 threads running batched decoders hung (240 s timeout)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "done" in out.stdout
