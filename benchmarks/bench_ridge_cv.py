"""Penalty selection: efficient leave-one-out against grid searches.

On the same data and in the same run, times

1. ``DoFKernelRidgeCV(alphas)``: the rank and the landmarks are chosen once,
   at ``min(alphas)``; every penalty is then scored by exact leave-one-out on
   these fixed features from one ``p x p`` eigendecomposition, and the model
   is refitted at the best one;
2. ``GridSearchCV(DoFKernelRidge(n_components=p), {"alpha": alphas}, cv=5)``
   with the same rank ``p``: ``5 * n_alphas`` fits and a refit, each choosing
   its landmarks and solving its ridge problem;
3. at a smaller ``n`` (``--n-loo``): the same grid search with
   ``cv=LeaveOneOut()`` (``n * n_alphas`` fits, each reselecting landmarks),
   and ``GridSearchCV(Ridge(), cv=LeaveOneOut())`` on the fixed features of
   1., the brute-force computation of exactly what 1. computes.

All searches score by mean squared error.  BLAS runs on one thread and the
searches on one job.

Problems:

* ``spline``: the periodic spline problem of Bach (2013), ``beta = 2``,
  ``delta = 2``, unit noise, precomputed kernel, ``alpha = n * lambda`` with
  13 values of ``lambda`` in ``[1e-5, 1e-2]``;
* ``gaussian``: ``X ~ N(0, I_8)``, ``f(x) = sin x_1 + cos(x_2) / 2 +
  x_3 x_4 / 4``, noise of standard deviation 2, RBF kernel with
  ``gamma = 0.05``, 13 values of ``alpha`` in ``[1, 1e4]``.

Usage::

    python benchmarks/bench_ridge_cv.py                  # a few minutes
    python benchmarks/bench_ridge_cv.py --problems spline --n-loo 0

Every search runs in this one process, one after the other.  Results:
``results/ridge_cv/results.json`` (every row printed); the headline (per
problem and method: fits, seconds, the penalty chosen, its time over
``DoFKernelRidgeCV``'s) appended to ``results/ridge_cv/history.jsonl``.
"""

import argparse
import warnings

import numpy as np
from _harness import (
    add_arguments,
    append_history,
    start_run,
    timed,
    write_results,
)
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV
from sklearn_dof.datasets import make_periodic_spline

BENCHMARK = "ridge_cv"
N_ALPHAS = 13


def make_data(problem, n_samples, seed=0):
    """``X`` (or the Gram matrix), ``y``, the estimator parameters, alphas."""
    if problem == "spline":
        data = make_periodic_spline(
            n_samples, beta=2, delta=2, noise=1.0, random_state=seed
        )
        alphas = n_samples * np.logspace(-5, -2, N_ALPHAS)
        return data.K, data.y, {"kernel": "precomputed"}, alphas
    rng = np.random.RandomState(seed)
    X = rng.randn(n_samples, 8)
    f = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1]) + 0.25 * X[:, 2] * X[:, 3]
    y = f + 2.0 * rng.randn(n_samples)
    return X, y, {"kernel": "rbf", "gamma": 0.05}, np.logspace(0, 4, N_ALPHAS)


def subset(X, y, params, n):
    rows = np.arange(n)
    X = X[np.ix_(rows, rows)] if params["kernel"] == "precomputed" else X[rows]
    return X, y[rows]


def run(problem, n_samples, n_loo, seed):
    X, y, params, alphas = make_data(problem, n_samples, seed)
    rows = []

    cv_model, t_cv = timed(
        lambda: DoFKernelRidgeCV(alphas, random_state=seed, **params).fit(X, y)
    )
    p = cv_model.n_components_
    rows.append(
        (
            n_samples,
            p,
            "DoFKernelRidgeCV (efficient LOO)",
            1,
            t_cv,
            cv_model.alpha_,
            -cv_model.best_score_,
        )
    )

    folds = KFold(5, shuffle=True, random_state=seed)
    base = DoFKernelRidge(n_components=p, random_state=seed, **params)
    search = GridSearchCV(
        base, {"alpha": alphas}, cv=folds, scoring="neg_mean_squared_error"
    )
    search, t_grid = timed(lambda: search.fit(X, y))
    rows.append(
        (
            n_samples,
            p,
            "GridSearchCV(DoFKernelRidge, cv=5)",
            5 * N_ALPHAS + 1,
            t_grid,
            search.best_params_["alpha"],
            -search.best_score_,
        )
    )

    if n_loo:
        X_s, y_s = subset(X, y, params, n_loo)
        small, t_small = timed(
            lambda: DoFKernelRidgeCV(alphas, random_state=seed, **params).fit(X_s, y_s)
        )
        p_s = small.n_components_
        rows.append(
            (
                n_loo,
                p_s,
                "DoFKernelRidgeCV (efficient LOO)",
                1,
                t_small,
                small.alpha_,
                -small.best_score_,
            )
        )
        Phi = small.nystroem_.transform(X_s)
        fixed = GridSearchCV(
            Ridge(),
            {"alpha": alphas},
            cv=LeaveOneOut(),
            scoring="neg_mean_squared_error",
        )
        fixed, t_fixed = timed(lambda: fixed.fit(Phi, y_s))
        rows.append(
            (
                n_loo,
                p_s,
                "GridSearchCV(Ridge on fixed features, LOO)",
                n_loo * N_ALPHAS + 1,
                t_fixed,
                fixed.best_params_["alpha"],
                -fixed.best_score_,
            )
        )
        base = DoFKernelRidge(n_components=p_s, random_state=seed, **params)
        loo = GridSearchCV(
            base,
            {"alpha": alphas},
            cv=LeaveOneOut(),
            scoring="neg_mean_squared_error",
        )
        loo, t_loo = timed(lambda: loo.fit(X_s, y_s))
        rows.append(
            (
                n_loo,
                p_s,
                "GridSearchCV(DoFKernelRidge, LOO)",
                n_loo * N_ALPHAS + 1,
                t_loo,
                loo.best_params_["alpha"],
                -loo.best_score_,
            )
        )
        reference = {n_samples: t_cv, n_loo: t_small}
    else:
        reference = {n_samples: t_cv}

    print(
        f"\n== {problem}: {N_ALPHAS} penalties in "
        f"[{alphas[0]:.3g}, {alphas[-1]:.3g}], seed {seed}"
    )
    header = (
        f"{'n':>5} {'p':>5}  {'method':<44} {'fits':>6} {'time [s]':>9} "
        f"{'x slower':>9} {'alpha':>9} {'CV MSE':>8}"
    )
    print(header)
    print("-" * len(header))
    out = []
    for n, p, name, fits, t, alpha, mse in rows:
        ratio = t / reference[n]
        print(
            f"{n:>5} {p:>5}  {name:<44} {fits:>6} {t:>9.3f} {ratio:>9.1f} "
            f"{alpha:>9.4g} {mse:>8.4f}"
        )
        out.append(
            dict(
                n=n,
                p=int(p),
                method=name,
                fits=fits,
                seconds=t,
                over_efficient_loo=ratio,
                alpha=float(alpha),
                cv_mse=float(mse),
            )
        )
    return out


def headline(payload):
    """Per problem and method: rows, rank, fits, seconds, the time over
    ``DoFKernelRidgeCV``'s on the same rows, the penalty chosen."""
    return {
        problem: {
            f"{r['method']} n={r['n']}": {
                "fits": r["fits"],
                "seconds": r["seconds"],
                "over_efficient_loo": r["over_efficient_loo"],
                "alpha": r["alpha"],
            }
            for r in rows
        }
        for problem, rows in payload["problems"].items()
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problems",
        nargs="+",
        choices=["spline", "gaussian"],
        default=["spline", "gaussian"],
    )
    parser.add_argument("--n", type=int, default=2000, help="training points")
    parser.add_argument(
        "--n-loo",
        type=int,
        default=500,
        help="training points of the leave-one-out grid searches (0: skip)",
    )
    parser.add_argument(
        "--loo-problems",
        nargs="*",
        choices=["spline", "gaussian"],
        default=["spline"],
        help="problems on which to run the leave-one-out grid searches "
        "(the gaussian one needs p close to n and takes about 10 minutes)",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_arguments(parser, BENCHMARK, threads=1, child=False)
    args = parser.parse_args(argv)
    record = start_run(args.threads)
    # Leave-one-out fits at p = n_loo ask for one column more than they have.
    warnings.filterwarnings("ignore", message="n_components=.* > n_samples=")
    problems = {}
    with threadpool_limits(limits=args.threads):
        for problem in args.problems:
            n_loo = args.n_loo if problem in args.loo_problems else 0
            problems[problem] = run(problem, args.n, n_loo, args.seed)
    config = {k: getattr(args, k) for k in ("n", "n_loo", "loo_problems", "seed")}
    payload = {"config": config, "problems": problems}
    out = args.output_dir / "results.json"
    write_results(out, payload, record)
    append_history(args.output_dir, BENCHMARK, record, headline(payload), results=out)


if __name__ == "__main__":
    main()
