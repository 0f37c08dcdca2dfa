"""Kernel logistic regression on auto-rank Nystroem features, on real data.

Two parts, on ``--n-train`` / ``--n-test`` rows drawn from the fixed splits of
LIBSVM ijcnn1 and a9a (Adult), RBF kernel with a fixed ``gamma`` per data set:

1. Accuracy and fit time, side by side, of

   * :class:`sklearn.svm.SVC` (RBF, same ``gamma``) over a grid of ``C``;
   * :class:`sklearn_dof.DoFKernelLogisticRegression` with
     ``n_components="auto"`` (uniform and pivoted landmarks) over a grid of
     ``alpha``;
   * exact kernel logistic regression at the same ``alpha``: scikit-learn's
     :class:`~sklearn.linear_model.LogisticRegression` (``newton-cholesky``,
     ``C = 1 / alpha``, the same ``tol``) on the features ``L`` of the
     Cholesky factorisation ``K + 1e-8 I = L L^T`` of the full kernel matrix
     (``n`` features).

2. Iterations and time of the solvers at ``alpha`` in {1e-2, 1e-4, 1e-6,
   1e-8} on one fixed Nystroem feature map (``--n-components`` uniform
   landmarks): :class:`sklearn_dof.DoFKernelLogisticRegression` at that
   rank with Cholesky Newton steps and with Newton-CG steps (chosen by
   ``max_hessian_bytes``; its fit time includes the feature map, whose time
   alone is printed in the header), scikit-learn's ``newton-cholesky`` and
   ``lbfgs`` on the same features with the same ``tol`` (``max_iter=10000``),
   and the objective each reaches, ``sum_i loss_i + alpha / 2 ||coef||^2``,
   above the best of them.

BLAS runs single-threaded by default (``--threads``): on a shared machine
oversubscribed BLAS threads make timings meaningless.  Every fit runs in
this one process (the solvers are compared on one feature matrix).

Usage::

    python benchmarks/bench_logistic.py           # about 5 minutes
    python benchmarks/bench_logistic.py --quick   # 1000 / 1000 rows, ~30 s

Results: ``results/logistic/results.json`` (every row printed); the headline
(per data set: the best accuracy of each method, and per penalty the Newton
steps and seconds of each solver) appended to
``results/logistic/history.jsonl``.
"""

import argparse
import warnings

import numpy as np
from _harness import (
    SHARED_DATA,
    add_arguments,
    append_history,
    start_run,
    timed,
    write_results,
)
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFKernelLogisticRegression, DoFNystroem

BENCHMARK = "logistic"
DATA_DIR = SHARED_DATA

# gamma of the RBF kernel and the penalties of part 1, per data set: the
# penalties bracket the best test accuracy of logistic regression.
SETTINGS = {
    "ijcnn1": {"gamma": 0.1, "alphas": [1e-1, 1e-2, 1e-3]},
    "a9a_adult": {"gamma": 0.01, "alphas": [1.0, 1e-1, 1e-2]},
}
SVC_CS = [0.1, 1.0, 10.0, 100.0, 1000.0]
SOLVER_ALPHAS = [1e-2, 1e-4, 1e-6, 1e-8]


def load_split(name, n_train, n_test, seed=0):
    data = np.load(DATA_DIR / f"{name}.npz")
    X, y, is_test = data["X"], data["y"], data["is_test"]
    rng = np.random.RandomState(seed)
    train = rng.choice(np.flatnonzero(~is_test), n_train, replace=False)
    test = rng.choice(np.flatnonzero(is_test), n_test, replace=False)
    return X[train], y[train], X[test], y[test]


def exact_klr(X_train, y_train, X_test, y_test, gamma, alpha, tol):
    """Newton on exact kernel features: accuracy, seconds, Newton steps.

    scikit-learn's ``newton-cholesky`` with ``C = 1 / alpha`` minimises
    ``sum_i loss_i + alpha / 2 ||coef||^2`` (intercept unpenalised), the
    objective of :class:`~sklearn_dof.DoFKernelLogisticRegression`, here on
    the ``n`` features ``L`` with ``L L^T = K + 1e-8 I``.
    """

    def fit():
        K = rbf_kernel(X_train, gamma=gamma)
        K[np.diag_indices_from(K)] += 1e-8
        L = linalg.cholesky(K, lower=True)
        ref = LogisticRegression(
            C=1.0 / alpha, solver="newton-cholesky", tol=tol, max_iter=1000
        )
        ref.fit(L, y_train)
        return L, ref

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        (L, ref), seconds = timed(fit)
    Phi_test = linalg.solve_triangular(
        L, rbf_kernel(X_train, X_test, gamma=gamma), lower=True
    ).T
    n_iter = f"{ref.n_iter_[0]}" + (" *" if caught else "")
    return float(ref.score(Phi_test, y_test)), seconds, n_iter


def objective(coef, intercept, Phi, labels, alpha):
    raw = Phi @ np.ravel(coef) + np.ravel(intercept)[0]
    return float(
        np.logaddexp(0, raw).sum() - raw @ labels + 0.5 * alpha * np.sum(coef**2)
    )


def part_accuracy(name, split, tol):
    X_train, y_train, X_test, y_test = split
    gamma, alphas = SETTINGS[name]["gamma"], SETTINGS[name]["alphas"]
    n = X_train.shape[0]
    rows = []
    for C in SVC_CS:
        svc, seconds = timed(SVC(C=C, gamma=gamma).fit, X_train, y_train)
        rows.append(("SVC", f"C={C:g}", n, svc.score(X_test, y_test), seconds, ""))
    for alpha in alphas:
        for sampling in ["uniform", "pivoted"]:
            clf = DoFKernelLogisticRegression(
                alpha=alpha, gamma=gamma, sampling=sampling, tol=tol, random_state=0
            )
            _, seconds = timed(clf.fit, X_train, y_train)
            rows.append(
                (
                    f"DoF-KLR {sampling}",
                    f"alpha={alpha:g}",
                    clf.n_components_,
                    clf.score(X_test, y_test),
                    seconds,
                    f"{clf.n_iter_[0]} (d_max {clf.dof_:.0f}, "
                    f"d_eff {clf.effective_dof_:.0f})",
                )
            )
        accuracy, seconds, n_iter = exact_klr(
            X_train, y_train, X_test, y_test, gamma, alpha, tol
        )
        rows.append(("exact KLR", f"alpha={alpha:g}", n, accuracy, seconds, n_iter))

    print(f"\n## {name}: accuracy, {n} train / {len(y_test)} test, gamma={gamma}")
    print(f"{'method':<18} {'param':<12} {'p':>5} {'acc':>7} {'fit s':>7}  Newton")
    for method, param, p, acc, seconds, extra in rows:
        print(f"{method:<18} {param:<12} {p:>5} {acc:>7.4f} {seconds:>7.2f}  {extra}")
    best_svc = max(r[3] for r in rows if r[0] == "SVC")
    best_dof = max(r[3] for r in rows if r[0].startswith("DoF"))
    best_exact = max(r[3] for r in rows if r[0] == "exact KLR")
    print(
        f"best accuracy: SVC {best_svc:.4f}, DoF-KLR {best_dof:.4f}, "
        f"exact KLR {best_exact:.4f}"
    )
    columns = ("method", "param", "p", "accuracy", "fit_s", "newton")
    return [dict(zip(columns, row, strict=True)) for row in rows]


def part_solvers(name, split, n_components, tol):
    X_train, y_train, _, _ = split
    gamma = SETTINGS[name]["gamma"]
    nystroem = DoFNystroem(gamma=gamma, n_components=n_components, random_state=0)
    Phi, feature_seconds = timed(nystroem.fit_transform, X_train)
    labels = (y_train == np.unique(y_train)[1]).astype(int)
    print(
        f"\n## {name}: solvers on {Phi.shape[1]} fixed Nystroem features, "
        f"n={Phi.shape[0]}, tol={tol:g} (the feature map alone: "
        f"{feature_seconds:.3f} s, in the DoF-KLR times)"
    )
    print(
        f"{'alpha':>7} {'solver':<22} {'iters':>6} {'seconds':>8} "
        f"{'objective - best':>17}"
    )
    out = []
    for alpha in SOLVER_ALPHAS:
        results = []
        # The estimator's inner solver follows max_hessian_bytes: any budget
        # holds the (p + 1)^2 Hessian of two classes, none gives Newton-CG.
        for budget in [2**62, 0]:
            clf = DoFKernelLogisticRegression(
                alpha=alpha,
                gamma=gamma,
                n_components=n_components,
                random_state=0,
                tol=tol,
                max_hessian_bytes=budget,
            )
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                _, seconds = timed(clf.fit, X_train, y_train)
            # The same landmarks, so the same features as Phi.
            assert np.array_equal(
                clf.nystroem_.component_indices_, nystroem.component_indices_
            )
            label = f"DoF-KLR {clf.solver_}" + (" *" if caught else "")
            obj = objective(clf.coef_, clf.intercept_, Phi, labels, alpha)
            results.append((label, clf.n_iter_[0], seconds, obj))
        for solver, max_iter in [("newton-cholesky", 1000), ("lbfgs", 10_000)]:
            ref = LogisticRegression(
                C=1.0 / alpha, solver=solver, tol=tol, max_iter=max_iter
            )
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                _, seconds = timed(ref.fit, Phi, labels)
            flag = " *" if caught else ""
            obj = objective(ref.coef_, ref.intercept_, Phi, labels, alpha)
            results.append((f"sklearn {solver}{flag}", ref.n_iter_[0], seconds, obj))
        best = min(r[3] for r in results)
        for label, n_iter, seconds, obj in results:
            print(
                f"{alpha:>7.0e} {label:<22} {n_iter:>6} {seconds:>8.3f} "
                f"{obj - best:>17.3e}"
            )
            out.append(
                dict(
                    alpha=alpha,
                    solver=label,
                    n_iter=int(n_iter),
                    fit_s=seconds,
                    objective_over_best=obj - best,
                )
            )
    print("(* = stopped with a ConvergenceWarning)")
    return {"feature_s": feature_seconds, "rows": out}


def headline(payload):
    """Per data set: the best test accuracy of SVC, of DoF-KLR and of exact
    KLR; per penalty of the solvers part, each solver's Newton steps and
    seconds."""
    out = {}
    for name, entry in payload["datasets"].items():
        rows = entry["accuracy"]
        best = {
            method: max(
                (r["accuracy"] for r in rows if r["method"].startswith(method)),
                default=None,
            )
            for method in ("SVC", "DoF-KLR", "exact KLR")
        }
        solvers = {
            f"alpha={r['alpha']:g} {r['solver']}": [r["n_iter"], r["fit_s"]]
            for r in entry["solvers"]["rows"]
        }
        out[name] = {"best_accuracy": best, "solvers_steps_s": solvers}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--n-components", type=int, default=500)
    parser.add_argument("--tol", type=float, default=1e-8)
    add_arguments(parser, BENCHMARK, threads=1, child=False)
    parser.add_argument("--datasets", nargs="+", default=list(SETTINGS))
    parser.add_argument(
        "--quick", action="store_true", help="1000 / 1000 rows, 200 components"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.n_train, args.n_test, args.n_components = 1000, 1000, 200
    run = start_run(args.threads)
    machine = run["machine"]
    print(
        f"scikit-learn {machine['scikit-learn']}, numpy {machine['numpy']}, "
        f"BLAS threads {args.threads}"
    )
    datasets = {}
    with threadpool_limits(args.threads):
        for name in args.datasets:
            if not (DATA_DIR / f"{name}.npz").exists():
                print(f"\n## {name}: {DATA_DIR / name}.npz not found, skipped")
                continue
            split = load_split(name, args.n_train, args.n_test)
            datasets[name] = {
                "accuracy": part_accuracy(name, split, args.tol),
                "solvers": part_solvers(name, split, args.n_components, args.tol),
            }
    config = {k: getattr(args, k) for k in ("n_train", "n_test", "n_components", "tol")}
    payload = {"config": config, "datasets": datasets}
    out = args.output_dir / "results.json"
    write_results(out, payload, run)
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)


if __name__ == "__main__":
    main()
