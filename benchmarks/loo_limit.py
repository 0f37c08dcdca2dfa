"""What the training rows can tell of a rank's loss, at best.

For one regression case of ``bench_auto_rank.py`` (``--set``, ``--seed``,
``--n-train``), landmarks in a uniform random order of the seed: for each
of ``--ranks`` and for every row as a landmark (exact kernel ridge), the
exact leave-one-out residuals of ``Ridge(alpha)`` with an intercept on
``DoFNystroem`` features of the first ``q`` landmarks; then each rank's
leave-one-out excess over the exact fit, paired over the rows that are no
landmark among its first ``q`` (as the certificate pairs them), relative to
the exact fit's error, with its standard error.

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

from sklearn_dof import DoFNystroem  # noqa: E402


def loo_squares(Phi, y, alpha):
    """Squared leave-one-out residuals of ridge regression with an
    unpenalised intercept on the features ``Phi``."""
    n = Phi.shape[0]
    Phi = Phi - Phi.mean(axis=0)
    centred = y - y.mean()
    A = Phi.T @ Phi + alpha * np.eye(Phi.shape[1])
    solved = np.linalg.solve(A, Phi.T)  # A^-1 Phi^T
    leverage = np.einsum("ij,ji->i", Phi, solved) + 1.0 / n
    fit = Phi @ (solved @ centred)
    return ((centred - fit) / (1.0 - leverage)) ** 2


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
    X, y, n = case.X_fit, np.asarray(case.y, dtype=np.float64), case.n_train
    order = np.random.RandomState(args.seed).permutation(n)

    def squares(q):
        features = DoFNystroem(
            alpha=case.alpha,
            gamma=case.params["gamma"],
            n_components=q,
            sampling=order[:q],
        ).fit_transform(X)
        return loo_squares(np.asarray(features, dtype=np.float64), y, case.alpha)

    exact = squares(n)
    print(f"{args.set} seed {args.seed}, {n} rows, lambda {case.lambda_:.1e}")
    for q in (int(v) for v in args.ranks.split(",")):
        rows = np.ones(n, dtype=bool)
        rows[order[:q]] = False
        differences = squares(q)[rows] - exact[rows]
        reference = exact[rows].mean()
        excess = differences.mean() / reference
        se = differences.std(ddof=1) / np.sqrt(rows.sum()) / reference
        print(
            f"  rank {q:5d}: leave-one-out excess {100 * excess:+.2f}% "
            f"+- {100 * se:.2f}% (one standard error; {rows.sum()} rows)"
        )


if __name__ == "__main__":
    main()
