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

On a classification set the leave-one-out log-loss of a logistic fit has
no closed form: the per-row log-losses of a stratified 10-fold
cross-validation of ``LogisticRegression(C=1/alpha,
solver="newton-cholesky")`` on the same features stand in for it (a check
of the certificate's approximate leave-one-out, not the same estimate).
The held-out test log-loss of each rank over the exact fit's is printed
beside.

Usage::

    python benchmarks/loo_limit.py --set pumadyn32nm --seed 2 --ranks 84,268,536
    python benchmarks/loo_limit.py --set a9a_adult --ranks 90,256,725
"""

import argparse
import sys
import types
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_predict

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


def cv_log_losses(Phi, y, alpha, Phi_test, target):
    """Per-row log-losses of a 10-fold cross-validation of the logistic fit
    on ``Phi``, and the test log-loss of the fit on every row."""
    model = LogisticRegression(C=1.0 / alpha, solver="newton-cholesky", max_iter=200)
    folds = StratifiedKFold(10, shuffle=True, random_state=0)
    proba = cross_val_predict(model, Phi, y, cv=folds, method="predict_proba")
    classes = np.unique(y)
    picked = proba[np.arange(y.shape[0]), np.searchsorted(classes, y)]
    test = log_loss(target, model.fit(Phi, y).predict_proba(Phi_test), labels=classes)
    return -np.log(np.clip(picked, 1e-15, 1.0)), test


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
    if case.params["kernel"] != "rbf":
        raise SystemExit("--set: a data set of bench_auto_rank.py")
    classification = case.estimator != "ridge"
    X, y, n = case.X_fit, np.asarray(case.y), case.n_train
    order = np.random.RandomState(args.seed).permutation(n)

    def losses(q):
        """Per-row losses (and the test error, classification) at rank q."""
        nystroem = DoFNystroem(
            alpha=case.alpha,
            gamma=case.params["gamma"],
            n_components=q,
            sampling=order[:q],
        ).fit(X)
        Phi = np.asarray(nystroem.transform(X), dtype=np.float64)
        if classification:
            Phi_test = nystroem.transform(case.X_eval)
            return cv_log_losses(Phi, y, case.alpha, Phi_test, case.target)
        return loo_squares(Phi, y.astype(np.float64), case.alpha), None

    exact, exact_test = losses(n)
    estimate = "10-fold log-loss" if classification else "leave-one-out"
    print(f"{args.set} seed {args.seed}, {n} rows, lambda {case.lambda_:.1e}")
    for q in (int(v) for v in args.ranks.split(",")):
        rows = np.ones(n, dtype=bool)
        rows[order[:q]] = False
        per_row, test = losses(q)
        differences = per_row[rows] - exact[rows]
        reference = exact[rows].mean()
        excess = differences.mean() / reference
        se = differences.std(ddof=1) / np.sqrt(rows.sum()) / reference
        held_out = ""
        if test is not None:
            held_out = f"; test {100 * (test / exact_test - 1):+.2f}%"
        print(
            f"  rank {q:5d}: {estimate} excess {100 * excess:+.2f}% "
            f"+- {100 * se:.2f}% (one standard error; {rows.sum()} rows){held_out}"
        )


if __name__ == "__main__":
    main()
