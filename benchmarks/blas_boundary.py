"""Where the BLAS crashes: p x p products and factorisations, one per process.

Which calls with a ``p x p`` output end the process (a segmentation fault in
OpenBLAS's threaded syrk, see ``sklearn_dof/_tiles.py``), at which order,
``k`` (the inner dimension of a product) and number of BLAS threads: the
boundary below which ``_tiles`` keeps every such call.  Each case runs in a
child process, so that a crash is a recorded exit code, not the end of the
benchmark.  That the package's own tiled calls run where these crash is a
slow test (``tests/test_tiles.py``), not measured here: benchmarks use the
public API only.

    python benchmarks/blas_boundary.py                    # the default grid
    python benchmarks/blas_boundary.py --cases numpy_syrk:18250:256:2

Writes ``benchmarks/results/blas_boundary/latest.json`` (``--output``): per
case, the exit code (-11: segmentation fault) and the seconds of the call.
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

# op:n:k:threads: the BLAS's own calls around the crashing orders.
DEFAULT_CASES = [
    "numpy_syrk:18000:256:2",
    "numpy_syrk:18250:256:2",
    "numpy_syrk:16384:512:2",
    "numpy_syrk:16384:1024:2",
    "numpy_syrk:8192:8192:2",
    "numpy_syrk:8192:2048:16",
    "numpy_syrk:20000:256:1",
    "scipy_syrk:18250:256:2",
    "numpy_gemm:20000:4096:2",
    "scipy_syr2k:18250:256:2",
    "scipy_trsm:20000:2000:2",
    "numpy_cholesky:15000:0:2",
    "numpy_cholesky:16384:0:2",
    "numpy_cholesky:8192:0:16",
]

CHILD = """
import sys, time
import numpy as np
from threadpoolctl import threadpool_limits

op, n, k, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)


def spd(n):
    from sklearn.metrics.pairwise import rbf_kernel

    A = rbf_kernel(rng.random((n, 3)), gamma=1.0)
    A[np.diag_indices(n)] += 1e-3
    return A


with threadpool_limits(threads):
    if op.endswith("cholesky"):
        A = spd(n)
    elif op == "scipy_trsm":
        A = np.tril(rng.random((n, n))) + n * np.eye(n)
        R = rng.random((n, k))
    else:
        B = rng.random((k, n))
        C = rng.random((k, n)) if op in ("numpy_gemm", "scipy_syr2k") else None
    start = time.perf_counter()
    if op == "numpy_syrk":
        B.T @ B
    elif op == "numpy_gemm":
        B.T @ C
    elif op == "scipy_syrk":
        from scipy.linalg import blas

        blas.dsyrk(1.0, B.T, lower=1)
    elif op == "scipy_syr2k":
        from scipy.linalg import blas

        blas.dsyr2k(1.0, B.T, C.T, lower=1)
    elif op == "scipy_trsm":
        from scipy.linalg import blas

        blas.dtrsm(1.0, A, R, lower=1)
    elif op == "numpy_cholesky":
        np.linalg.cholesky(A)
    else:
        raise SystemExit(f"unknown op {op}")
    print(time.perf_counter() - start)
"""


def run_case(case, timeout):
    op, n, k, threads = case.split(":")
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, "-c", CHILD, op, n, k, threads],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, out = result.returncode, result.stdout.strip()
    except subprocess.TimeoutExpired:
        code, out = None, ""
    record = {
        "op": op,
        "n": int(n),
        "k": int(k),
        "threads": int(threads),
        "exit_code": code,
        "crashed": code is not None and code < 0,
        "call_seconds": round(float(out), 2) if code == 0 and out else None,
        "process_seconds": round(time.perf_counter() - started, 2),
    }
    if code not in (0, None) and code > 0:
        record["stderr"] = result.stderr[-500:]
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=DEFAULT_CASES)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--output",
        type=Path,
        default=Path(__file__).parent / "results" / "blas_boundary" / "latest.json",
    )
    args = parser.parse_args()
    import numpy as np
    import scipy
    import scipy.linalg  # noqa: F401  (load scipy's BLAS too, for the record)
    from threadpoolctl import threadpool_info

    records = []
    for case in args.cases:
        record = run_case(case, args.timeout)
        records.append(record)
        print(json.dumps(record), flush=True)
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": [
            {k: info.get(k) for k in ("internal_api", "version", "architecture")}
            for info in threadpool_info()
        ],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": machine, "cases": records}, indent=1))


if __name__ == "__main__":
    main()
