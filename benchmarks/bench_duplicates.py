"""Duplicated rows: the landmark block is singular, and the fit stays cheap.

Real data sets repeat rows; uniform landmarks then repeat points, ``K(I, I)``
is singular and its Cholesky factorisation fails.  ``DoFKernelRidge``
factors ``K(I, I) + s I`` instead of eigendecomposing it (see the scaling
page).  This script measures the fit on kin40k (``../shared/data``, pooled,
standardised, shuffled once: 32,000 training rows, of which 1,200 are
appended a second time, and 8,000 test rows), RBF ``gamma = 1/8``,
``p = 3000`` uniform landmarks, at ``lambda`` = 1e-5 and 1e-8, each fit in a
fresh process with ``--threads`` threads; beside it, the test error of ridge
regression on the pseudo-inverse features of ``DoFNystroem`` (the route
that needs the eigendecomposition) on the same landmarks.

Usage::

    python benchmarks/bench_duplicates.py
    # the same measurement of another checkout (e.g. before a change):
    PYTHONPATH=/path/to/other/checkout python benchmarks/bench_duplicates.py \\
        --output-dir /tmp/other

Results: ``results/duplicates/results.json``; the headline (per penalty
and system: fit seconds, test MSE, repeated landmarks) appended to
``results/duplicates/history.jsonl``.
"""

import argparse
import os
import resource
import time

import numpy as np
from _common import load_pooled
from _harness import (
    SHARED_DATA,
    add_arguments,
    append_history,
    child_main,
    run_child,
    start_run,
    write_results,
)

BENCHMARK = "duplicates"
DATA = SHARED_DATA / "kin40k.npz"
GAMMA, P, N_TRAIN, N_DUPLICATED = 1.0 / 8.0, 3000, 32_000, 1200


def load(n_train=N_TRAIN):
    X_train, y_train, X_test, y_test = load_pooled(DATA, n_train)
    n_train = X_train.shape[0]
    again = np.random.RandomState(1).choice(
        n_train, min(N_DUPLICATED, n_train), replace=False
    )
    X_train = np.r_[X_train, X_train[again]]
    y_train = np.r_[y_train, y_train[again]]
    return X_train, y_train, X_test, y_test


def child(case):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    import sklearn_dof

    X, y, X_test, y_test = load(case.get("n_train", N_TRAIN))
    alpha = X.shape[0] * case["lambda"]
    params = dict(
        alpha=alpha, gamma=GAMMA, n_components=case.get("p", P), random_state=0
    )
    if case["system"] == "ours":
        model = sklearn_dof.DoFKernelRidge(**params)
    else:
        model = make_pipeline(
            sklearn_dof.DoFNystroem(**params), Ridge(alpha=alpha, solver="svd")
        )
    t = time.perf_counter()
    model.fit(X, y)
    out = dict(case, fit_s=time.perf_counter() - t)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["test_mse"] = float(np.mean((model.predict(X_test) - y_test) ** 2))
    nystroem = model.nystroem_ if case["system"] == "ours" else model[0]
    landmarks = nystroem.component_indices_
    out["repeated_landmarks"] = int(
        len(landmarks) - np.unique(X[landmarks], axis=0).shape[0]
    )
    out["library"] = os.path.dirname(sklearn_dof.__file__)
    return out


def headline(payload):
    """Per penalty and system: fit seconds, test MSE, repeated landmarks."""
    return {
        f"{r['system']} lambda={r['lambda']:g}": {
            "fit_s": r.get("fit_s"),
            "test_mse": r.get("test_mse"),
            "repeated_landmarks": r.get("repeated_landmarks"),
            **({"error": r["error"]} if "error" in r else {}),
        }
        for r in payload["results"]
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n-train", type=int, default=N_TRAIN, help="training rows (smoke runs)"
    )
    parser.add_argument("--p", type=int, default=P, help="landmarks")
    add_arguments(parser, BENCHMARK)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run = start_run(args.threads)
    results = []
    for lam in (1e-5, 1e-8):
        for system in ("ours", "pseudo-inverse features + Ridge(svd)"):
            case = {"system": system, "lambda": lam, "threads": args.threads}
            if (args.n_train, args.p) != (N_TRAIN, P):
                case.update(n_train=args.n_train, p=args.p)
            result = run_child(__file__, case, args.threads, check=False)
            print(result, flush=True)
            results.append(result)
    out = args.output_dir / "results.json"
    write_results(out, {"results": results}, run)
    payload = {"results": results}
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)


if __name__ == "__main__":
    main()
