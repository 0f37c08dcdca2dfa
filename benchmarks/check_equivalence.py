"""Fingerprints of a fixed set of fits, to compare two versions of the code.

A refactoring must leave every fit as it was: the same landmarks,
coefficients and fitted attributes for a fixed ``random_state``.  This
script fits every sampling rule (int and ``"auto"`` ranks, given rows, a
selector), the transformer and the three estimators, in memory and on
Dask arrays, and saves their fitted arrays::

    python benchmarks/check_equivalence.py --save before.npz   # old commit
    python benchmarks/check_equivalence.py --compare before.npz  # new one

``--compare`` prints the largest difference of each array and fails when
one exceeds ``--atol`` (1e-12) or a shape or a key differs.  Run both on
the same machine with the same thread count: fits are reproducible for a
given ``n_jobs``, not across BLAS builds.  Public API only.
"""

import argparse
import sys
import warnings

import numpy as np
from sklearn.linear_model import Ridge

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
)

TRANSFORMER_ATTRIBUTES = (
    "n_components_",
    "component_indices_",
    "components_",
    "normalization_",
    "dof_",
    "effective_dof_",
    "averaged_dof_",
    "dof_columns_",
)


class FirstRows:
    """A selector returning points (the first rows, shifted), not indices."""

    def select(self, X, n_components, random_state):
        return np.asarray(X[:n_components]) + 0.01


def _data(n=900, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    X[-40:] = X[:40]  # duplicated rows: singular landmark blocks
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.randn(n)
    return X, y


def _record(out, prefix, model, names):
    for name in names:
        value = getattr(model, name, None)
        if value is None:
            continue
        out[f"{prefix}/{name}"] = np.asarray(value, dtype=float)


def fingerprints():
    X, y = _data()
    X_test, _ = _data(200, seed=1)
    y_class = (y > np.median(y)).astype(int)
    out = {}
    samplings = {
        "uniform": "uniform",
        "pivoted": "pivoted",
        "leverage": "leverage",
        "rpcholesky": "rpcholesky",
        "rows": np.arange(0, 900, 7),
        "selector": FirstRows(),
    }
    for name, sampling in samplings.items():
        for rank in ("auto", 60):
            for alpha in (1e-3, 1.0):
                key = f"nystroem/{name}/{rank}/{alpha:g}"
                params = dict(
                    alpha=alpha,
                    gamma=0.5,
                    n_components=rank,
                    sampling=sampling,
                    random_state=0,
                )
                nys = DoFNystroem(**params).fit(X)
                _record(out, key, nys, TRANSFORMER_ATTRIBUTES)
                out[f"{key}/transform"] = nys.transform(X_test)
                ridge = DoFKernelRidge(**params).fit(X, y)
                key = f"ridge/{name}/{rank}/{alpha:g}"
                _record(
                    out,
                    key,
                    ridge,
                    ("coef_", "dual_coef_", "intercept_", "n_components_", "dof_"),
                )
                _record(out, key, ridge.nystroem_, TRANSFORMER_ATTRIBUTES)
                out[f"{key}/predict"] = ridge.predict(X_test)
    # The kernel basis, float32, weights, a precomputed kernel.
    weights = np.linspace(0.5, 2.0, X.shape[0])
    for rank in ("auto", 80):
        ridge = DoFKernelRidge(alpha=1e-2, gamma=0.5, n_components=rank, random_state=1)
        ridge.fit(X, y, sample_weight=weights)
        out[f"ridge/weighted/{rank}/predict"] = ridge.predict(X_test)
        ridge = DoFKernelRidge(alpha=1e-2, gamma=0.5, n_components=rank, random_state=1)
        ridge.fit(X.astype(np.float32), y)
        out[f"ridge/float32/{rank}/predict"] = ridge.predict(X_test)
    from sklearn.metrics.pairwise import rbf_kernel

    K = rbf_kernel(X, gamma=0.5)
    ridge = DoFKernelRidge(alpha=1e-2, kernel="precomputed", random_state=0).fit(K, y)
    out["ridge/precomputed/predict"] = ridge.predict(rbf_kernel(X_test, X, gamma=0.5))
    for sampling in ("uniform", "pivoted", "rpcholesky"):
        for rank in ("auto", 70):
            cv = DoFKernelRidgeCV(
                alphas=(1e-3, 1e-2, 1.0),
                store_cv_results=True,
                gamma=0.5,
                n_components=rank,
                sampling=sampling,
                random_state=0,
            ).fit(X, y)
            key = f"cv/{sampling}/{rank}"
            _record(out, key, cv, ("alpha_", "coef_", "intercept_", "n_components_"))
            _record(out, key, cv, ("cv_results_",))
            out[f"{key}/predict"] = cv.predict(X_test)
    for sampling in ("uniform", "pivoted", "leverage"):
        for rank in ("auto", 50):
            clf = DoFKernelLogisticRegression(
                alpha=0.1,
                gamma=0.5,
                n_components=rank,
                sampling=sampling,
                random_state=0,
            ).fit(X, y_class)
            key = f"logistic/{sampling}/{rank}"
            _record(out, key, clf, ("coef_", "intercept_", "n_components_", "n_iter_"))
            out[f"{key}/proba"] = clf.predict_proba(X_test)
    # The transformer in a pipeline, as users write it.
    nys = DoFNystroem(gamma=0.5, alpha=1e-2, random_state=0).fit(X)
    out["pipeline/coef"] = Ridge(alpha=1e-2).fit(nys.transform(X), y).coef_
    try:
        import dask
        import dask.array as da
    except ImportError:  # the distributed extra is optional
        print("dask not installed: no Dask fits", file=sys.stderr)
        return out
    Xd = da.from_array(X, chunks=(300, 3))
    yd = da.from_array(y, chunks=300)
    with dask.config.set(scheduler="synchronous"):
        for sampling in ("uniform", "pivoted", "rpcholesky"):
            for rank in ("auto", 40):
                key = f"dask/{sampling}/{rank}"
                params = dict(
                    alpha=1e-2,
                    gamma=0.5,
                    n_components=rank,
                    sampling=sampling,
                    random_state=0,
                )
                nys = DoFNystroem(**params).fit(Xd)
                _record(out, key, nys, TRANSFORMER_ATTRIBUTES)
                ridge = DoFKernelRidge(**params).fit(Xd, yd)
                _record(out, f"{key}/ridge", ridge, ("coef_", "intercept_"))
                out[f"{key}/predict"] = np.asarray(ridge.predict(X_test))
        cv = DoFKernelRidgeCV(alphas=(1e-2, 1.0), gamma=0.5, random_state=0)
        cv.fit(Xd, yd)
        _record(out, "dask/cv", cv, ("alpha_", "coef_", "intercept_"))
        clf = DoFKernelLogisticRegression(gamma=0.5, n_components=40, random_state=0)
        clf.fit(Xd, da.from_array(y_class, chunks=300))
        _record(out, "dask/logistic", clf, ("coef_", "intercept_"))
    return out


def _flatten(out):
    flat = {}
    for key, value in out.items():
        if value.dtype == object:  # cv_results_ and friends: skip
            continue
        flat[key] = value
    return flat


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="NPZ")
    group.add_argument("--compare", metavar="NPZ")
    parser.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _flatten(fingerprints())
    if args.save:
        np.savez(args.save, **out)
        print(f"{len(out)} arrays saved to {args.save}")
        return 0
    before = dict(np.load(args.compare))
    failures = []
    for key in sorted(set(before) | set(out)):
        if key not in out or key not in before:
            failures.append(f"{key}: only in {'before' if key in before else 'after'}")
            continue
        a, b = before[key], out[key]
        if a.shape != b.shape:
            failures.append(f"{key}: shape {a.shape} -> {b.shape}")
            continue
        scale = max(1.0, float(np.max(np.abs(a), initial=0.0)))
        diff = float(np.max(np.abs(a - b), initial=0.0)) / scale
        if not diff <= args.atol:
            failures.append(f"{key}: max difference {diff:.3g}")
    print(f"{len(out)} arrays compared, {len(failures)} differ beyond {args.atol:g}")
    for line in failures:
        print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
