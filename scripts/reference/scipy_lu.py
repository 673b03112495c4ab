#!/usr/bin/env python3
"""Reference for hostbench's `cpu.linpack`: SciPy LU solve (OpenBLAS dgetrf + dgetrs).

Same problem as hostbench: A (n x n) and b uniform in [-0.5, 0.5), LU with partial pivoting and
solve, HPL flop count (2/3 n^3 + 3/2 n^2) and HPL scaled residual
||Ax - b||_inf / (eps * (||A||_inf ||x||_inf + ||b||_inf) * n), PASSED when < 16.
Only lu_factor + lu_solve are timed; generation, the copy kept for the residual, and the residual
are not.

usage: scipy_lu.py N THREADS [REPEATS]
prints one line per repeat: n=.. threads=.. seconds=.. gflops=.. residual=.. passed=..
"""
import sys
import time

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    n = int(sys.argv[1])
    threads = int(sys.argv[2])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = np.random.default_rng(42)
    with threadpool_limits(limits=threads, user_api="blas"):
        for _ in range(repeats):
            a = rng.random((n, n)) - 0.5
            b = rng.random(n) - 0.5
            a_orig = a.copy()
            # Fortran order so dgetrf works in place without a transposing copy.
            a = np.asfortranarray(a)
            t0 = time.perf_counter()
            lu, piv = scipy.linalg.lu_factor(a, overwrite_a=True, check_finite=False)
            x = scipy.linalg.lu_solve((lu, piv), b, check_finite=False)
            secs = time.perf_counter() - t0
            flops = 2.0 / 3.0 * n**3 + 1.5 * n**2
            r = a_orig @ x - b
            eps = np.finfo(np.float64).eps
            norm_a = np.abs(a_orig).sum(axis=1).max()
            resid = np.abs(r).max() / (
                eps * (norm_a * np.abs(x).max() + np.abs(b).max()) * n
            )
            print(
                f"n={n} threads={threads} seconds={secs:.4f} gflops={flops / secs / 1e9:.2f} "
                f"residual={resid:.4g} passed={resid < 16.0}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
