"""Where the BLAS crashes: p x p products and factorisations, one per process.

Which calls with a ``p x p`` output end the process (a segmentation fault in
OpenBLAS's threaded syrk, see ``sklearn_dof/_tiles.py``), at which order,
``k`` (the inner dimension of a product) and number of BLAS threads: the
boundary below which ``_tiles`` keeps every such call.  Each case runs in a
child process of the harness (:func:`_harness.run_child`), so that a crash
is a recorded exit code, not the end of the benchmark.  That the package's
own tiled calls run where these crash is a slow test
(``tests/test_tiles.py``), not measured here: benchmarks use the public API
only.  A lasting check: the boundary belongs to the BLAS build, so rerun it
when numpy, scipy or OpenBLAS change (the history keeps their versions).

    python benchmarks/blas_boundary.py                    # the default grid
    python benchmarks/blas_boundary.py --cases numpy_syrk:18250:256:2

Writes ``benchmarks/results/blas_boundary/results.json`` (``--output-dir``):
per case, the exit code (-11: segmentation fault) and the seconds of the
call; the headline (the cases that crashed, and how many ran) is appended
to ``results/blas_boundary/history.jsonl``.
"""

import argparse
import json
import time

import numpy as np
from _harness import (
    add_arguments,
    append_history,
    child_main,
    run_child,
    start_run,
    write_results,
)

BENCHMARK = "blas_boundary"

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


def _spd(rng, n):
    from sklearn.metrics.pairwise import rbf_kernel

    A = rbf_kernel(rng.random((n, 3)), gamma=1.0)
    A[np.diag_indices(n)] += 1e-3
    return A


def child(case):
    """One call of the BLAS; its seconds (a crash ends the process)."""
    from scipy.linalg import blas
    from threadpoolctl import threadpool_limits

    op, n, k, threads = case["op"], case["n"], case["k"], case["threads"]
    rng = np.random.default_rng(0)
    with threadpool_limits(threads):
        if op.endswith("cholesky"):
            A = _spd(rng, n)
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
            blas.dsyrk(1.0, B.T, lower=1)
        elif op == "scipy_syr2k":
            blas.dsyr2k(1.0, B.T, C.T, lower=1)
        elif op == "scipy_trsm":
            blas.dtrsm(1.0, A, R, lower=1)
        elif op == "numpy_cholesky":
            np.linalg.cholesky(A)
        else:
            raise SystemExit(f"unknown op {op}")
        return dict(case, call_seconds=time.perf_counter() - start)


def run_case(spec, timeout):
    op, n, k, threads = spec.split(":")
    case = {"op": op, "n": int(n), "k": int(k), "threads": int(threads)}
    started = time.perf_counter()
    result = run_child(__file__, case, case["threads"], check=False, timeout=timeout)
    code = result.get("exit_code", 0)
    record = dict(
        case,
        exit_code=code,
        crashed=code is not None and code < 0,
        call_seconds=(
            round(result["call_seconds"], 2) if "call_seconds" in result else None
        ),
        process_seconds=round(time.perf_counter() - started, 2),
    )
    if code not in (0, None) and code > 0:
        record["stderr"] = result["error"]
    return record


def headline(payload):
    """The cases that crashed (``op:n:k:threads``), those that timed out,
    and how many ran."""
    cases = payload["cases"]

    def spec(r):
        return f"{r['op']}:{r['n']}:{r['k']}:{r['threads']}"

    return {
        "cases": len(cases),
        "crashed": [spec(r) for r in cases if r["crashed"]],
        "timed_out": [spec(r) for r in cases if r["exit_code"] is None],
        "failed": [
            spec(r)
            for r in cases
            if r["exit_code"] not in (0, None) and not r["crashed"]
        ],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=DEFAULT_CASES)
    parser.add_argument("--timeout", type=float, default=900)
    add_arguments(parser, BENCHMARK, threads=None)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run = start_run()
    records = []
    for case in args.cases:
        record = run_case(case, args.timeout)
        records.append(record)
        print(json.dumps(record), flush=True)
    payload = {"cases": records}
    out = args.output_dir / "results.json"
    write_results(out, payload, run)
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)


if __name__ == "__main__":
    main()
