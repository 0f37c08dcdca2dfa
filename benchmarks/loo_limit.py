"""What the training rows can tell of a rank's loss, at best.

For one regression case of ``bench_auto_rank.py`` (``--set``, ``--seed``,
``--n-train``), grows the uniform factor of the seed to every row (the
complete factor: exact kernel ridge at its last rank) and, for each of
``--ranks``, prints the leave-one-out excess of the ridge fit on the first
``q`` landmarks over the exact fit, paired over the rows that are no
landmark among them (as :class:`sklearn_dof._certificate.LossCertificate`
pairs them), relative to the exact fit's error, with its standard error.

This is the most the certified rank could know: its rounds see the same
differences on a factor of fewer columns, plus a tail.  A rank whose excess
is several standard errors above the tolerance cannot be certified from
these rows, whatever a held-out test set says of it.

Usage::

    python benchmarks/loo_limit.py --set pumadyn32nm --seed 2 --ranks 84,268,536
"""

import argparse
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_auto_rank as bench  # noqa: E402

from sklearn_dof._certificate import loo_curve  # noqa: E402
from sklearn_dof._kernels import KernelColumns  # noqa: E402
from sklearn_dof._samplers import SAMPLING_RULES, partial_cholesky_of  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="pumadyn32nm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--ranks", default="64,128,256,512")
    args = parser.parse_args()
    sizes = types.SimpleNamespace(
        n_train=args.n_train, n_test=4000, n_train_classification=args.n_train
    )
    case = bench.make_case(args.set, args.seed, sizes)
    if case.estimator != "ridge" or case.params["kernel"] != "rbf":
        raise SystemExit("--set: a regression set of bench_auto_rank.py")
    n = case.n_train
    access = KernelColumns(
        np.asarray(case.X_fit, dtype=np.float64), "rbf", {"gamma": case.params["gamma"]}
    )
    chol = partial_cholesky_of(access)
    # The certified rank's landmark order for this seed (its first rounds).
    SAMPLING_RULES["uniform"].growth(chol, n, args.seed, case.alpha)(n)
    ranks, squares = loo_curve(chol, case.y[:, None], case.alpha, True, n_ranks=n)
    position = np.full(n, chol.rank)
    pivots = np.asarray(chol.column_pivots)
    known = pivots >= 0
    position[pivots[known]] = np.flatnonzero(known)
    print(
        f"{args.set} seed {args.seed}, {n} rows, lambda {case.lambda_:.1e}: "
        f"complete factor of rank {chol.rank}"
    )
    for q in (int(v) for v in args.ranks.split(",")):
        j = min(int(np.searchsorted(ranks, q)), ranks.shape[0] - 1)
        rows = position >= ranks[j]
        differences = squares[rows, j] - squares[rows, -1]
        reference = squares[rows, -1].mean()
        excess = differences.mean() / reference
        se = differences.std(ddof=1) / np.sqrt(rows.sum()) / reference
        print(
            f"  rank {ranks[j]:5d}: leave-one-out excess {100 * excess:+.2f}% "
            f"+- {100 * se:.2f}% (one standard error; {rows.sum()} rows)"
        )


if __name__ == "__main__":
    main()
