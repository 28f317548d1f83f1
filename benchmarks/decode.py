"""The batched-ChebyLS headline case alone (M=40, N=30, D=22, K=8, F=64, 4096 masks).

    python -m benchmarks.decode [--out DIR]

Target on CPU: at least 20x a per-mask numpy.linalg.lstsq loop and 3x numpy's batched
QR solve (float64), median relative error <= 1e-5 against the float64 result and every
mask within 100 x cond x float32 eps.
"""

from __future__ import annotations

import argparse

from .run import BenchConfig, run


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/benchmarks_decode")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args(argv)
    return run(
        BenchConfig(
            only=f"chebyls[M=40,N=30,D=22,K=8,F=64,B=4096,dtype={args.dtype}]",
            out=args.out,
        )
    )


if __name__ == "__main__":
    main()
