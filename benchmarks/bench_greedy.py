"""Greedy pivoted Cholesky: batches of candidates against one pivot at a time.

:meth:`PartialCholesky.add_greedy` computes the residual columns of a
batch of candidates (the largest residuals) by one product against the
factor and takes pivots from them while the largest residual is a
candidate.  A batch one candidate wide is the one-at-a-time algorithm (one
matrix-vector product against the factor per pivot).  Both run here, in
alternation, on the kernel columns of ``X ~ N(0, I_8)`` with the Gaussian
kernel of the performance issue (``gamma = 1 / 18``); the pivots must be the
same.

    python benchmarks/bench_greedy.py [--n 100000] [--pivots 1000] [--repeat 2]
"""

import argparse
import time
from pathlib import Path

import numpy as np
from _common import write_json
from threadpoolctl import threadpool_limits

from sklearn_dof._kernels import KernelColumns
from sklearn_dof._sampling import PartialCholesky

RESULTS = Path(__file__).parent / "results" / "greedy" / "results.json"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--pivots", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    X = np.random.default_rng(0).standard_normal((args.n, 8))
    columns = KernelColumns(X, "rbf", {"gamma": 1 / 18})
    default_width = PartialCholesky._GREEDY_WIDTH
    seconds, pivots = {}, {}
    try:
        with threadpool_limits(args.threads):
            for _ in range(args.repeat):
                for width in (default_width, 1):
                    PartialCholesky._GREEDY_WIDTH = width
                    chol = columns.partial_cholesky()
                    chol.reserve(args.pivots)
                    start = time.perf_counter()
                    chol.add_greedy(args.pivots)
                    seconds.setdefault(width, []).append(time.perf_counter() - start)
                    pivots.setdefault(width, []).append(chol.pivots)
                    print(f"width {width:3d}: {seconds[width][-1]:.2f} s", flush=True)
    finally:
        PartialCholesky._GREEDY_WIDTH = default_width
    same = all(p == pivots[1][0] for runs in pivots.values() for p in runs)
    batched, single = (float(np.median(seconds[w])) for w in (default_width, 1))
    print(
        f"batched {batched:.2f} s, one at a time {single:.2f} s: "
        f"{single / batched:.2f}x; same pivots: {same}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_json(
        RESULTS,
        dict(
            n=args.n,
            pivots=args.pivots,
            threads=args.threads,
            width=default_width,
            batched_s=seconds[default_width],
            one_at_a_time_s=seconds[1],
            speedup=single / batched,
            same_pivots=same,
        ),
    )


if __name__ == "__main__":
    main()
