"""Where a fit's time goes, pass by pass, at a given thread count.

One ``DoFKernelRidge`` fit (uniform landmarks, ``p`` fixed, the problem of
``bench_scaling.py``) under :mod:`cProfile`, which sees the calling thread:
a parallel pass shows as the time its caller waits for the workers.  The
report gives the cumulative seconds of the fit's phases, found by function
name in the profile (the Gram pass ``normal_equations``, the refinement
passes ``_apply``, the landmark factorisation), and beside them three rates
measured in the same process at the same thread count:

* ``gemm_gflops``: numpy's threaded float64 GEMM (the floor's rate);
* ``worker_syrk_gflops``: one ``B^T B`` per thread at once, each on one
  BLAS thread, ``n p^2`` flops counted (what the workers of a Gram pass
  reach);
* ``worker_kernel_s``: the RBF kernel of all ``n`` rows by blocks of
  ``--block-rows`` rows, one group of blocks per thread, each thread
  reusing one output block (memory touched once), as in a pass.

    OMP_NUM_THREADS=16 python benchmarks/profile_fit.py --n 1000000 \\
        --output out.json
"""

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
import bench_scaling  # noqa: E402
from _common import seconds_in_threads  # noqa: E402

PHASES = {
    "gram_pass": "normal_equations",
    "refine_passes": "_apply",
    "landmark_factor": "landmark_cholesky",
}


def _threads():
    return int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())


def worker_syrk_rate(p, rows=1024, repeats=4):
    threads = _threads()
    blocks = [
        np.random.default_rng(i).standard_normal((rows, p)) for i in range(threads)
    ]
    scratch = [np.empty((p, p)) for _ in range(threads)]

    def work(i):
        for _ in range(repeats):
            np.matmul(blocks[i].T, blocks[i], out=scratch[i])

    with threadpool_limits(1, user_api="blas"):
        seconds = min(seconds_in_threads(work, threads) for _ in range(2))
    return threads * repeats * rows * p * p / seconds


def worker_kernel_seconds(X, landmarks, block_rows):
    threads = _threads()
    bounds = np.linspace(0, X.shape[0], threads + 1).astype(int)

    def work(i):
        out = np.empty((block_rows, landmarks.shape[0]))
        for lo in range(bounds[i], bounds[i + 1], block_rows):
            hi = min(lo + block_rows, bounds[i + 1])
            bench_scaling._rbf_rows(
                X[lo:hi], landmarks, bench_scaling.GAMMA, out[: hi - lo]
            )

    with threadpool_limits(1, user_api="blas"):
        return seconds_in_threads(work, threads)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--p", type=int, default=2000)
    parser.add_argument("--block-rows", type=int, default=700)
    parser.add_argument("--working-memory", type=float, default=None)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    import sklearn

    X, y, X_test, y_test, f_test = bench_scaling.make_data(args.n, 8)
    model = bench_scaling.make_model("ours", args.n, args.p)
    budget = args.working_memory or sklearn.get_config()["working_memory"]
    profile = cProfile.Profile()
    t = time.perf_counter()
    with sklearn.config_context(working_memory=budget):
        profile.enable()
        model.fit(X, y)
        profile.disable()
    out = dict(n=args.n, p=args.p, threads=_threads(), working_memory=budget)
    out["fit_s"] = time.perf_counter() - t
    stats = pstats.Stats(profile).stats
    for phase, name in PHASES.items():
        calls = [(v[1], v[3]) for k, v in stats.items() if k[2] == name]
        out[phase + "_s"] = sum(c[1] for c in calls)
        out[phase + "_calls"] = sum(c[0] for c in calls)
    out["refine_passes"] = getattr(model, "_n_refine_passes", None)
    out["test_mse"] = float(np.mean((model.predict(X_test) - f_test) ** 2))
    out["gemm_gflops"] = bench_scaling.gemm_rate() / 1e9
    out["worker_syrk_gflops"] = worker_syrk_rate(args.p) / 1e9
    out["worker_kernel_s"] = worker_kernel_seconds(X, X[: args.p], args.block_rows)
    out["floor_kernel_s"] = bench_scaling.kernel_seconds(X, X[: args.p], args.n)
    out["syrk_floor_s"] = args.n * args.p**2 / (out["gemm_gflops"] * 1e9)
    print(json.dumps(out), flush=True)
    if args.output:
        with args.output.open("a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
