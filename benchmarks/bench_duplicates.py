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

Results: ``results/duplicates/results.json``.
"""

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np
from _common import load_pooled, run_child

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "kin40k.npz"
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "duplicates"
GAMMA, P, N_TRAIN, N_DUPLICATED = 1.0 / 8.0, 3000, 32_000, 1200


def load():
    X_train, y_train, X_test, y_test = load_pooled(DATA, N_TRAIN)
    again = np.random.RandomState(1).choice(N_TRAIN, N_DUPLICATED, replace=False)
    X_train = np.r_[X_train, X_train[again]]
    y_train = np.r_[y_train, y_train[again]]
    return X_train, y_train, X_test, y_test


def child(case):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    import sklearn_dof

    X, y, X_test, y_test = load()
    alpha = X.shape[0] * case["lambda"]
    params = dict(alpha=alpha, gamma=GAMMA, n_components=P, random_state=0)
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
    print(json.dumps(out), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    results = []
    for lam in (1e-5, 1e-8):
        for system in ("ours", "pseudo-inverse features + Ridge(svd)"):
            case = {"system": system, "lambda": lam, "threads": args.threads}
            result = run_child(__file__, case, args.threads, check=False)
            print(json.dumps(result), flush=True)
            results.append(result)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out = args.output_dir / "results.json"
    out.write_text(json.dumps({"results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
