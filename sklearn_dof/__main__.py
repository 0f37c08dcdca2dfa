"""Compare the automatic-rank Nystroem model with exact kernel ridge regression.

``python -m sklearn_dof`` (or the ``sklearn-dof`` script) fits
:class:`~sklearn_dof.DoFKernelRidge`, whose rank ``p`` follows the estimated
degrees of freedom, and :class:`~sklearn.kernel_ridge.KernelRidge` with the
same kernel and ``alpha`` (scikit-learn's scale: ``n_train`` times the paper's
``lambda``) on a train/test split, and prints per data set and landmark rule
the degrees of freedom, the rank, both test errors and both fit times.

Without ``--data``: the periodic-spline problems of Bach (COLT 2013, Sec. 4),
kernel eigenvalues ``i^(-2 beta)`` for ``beta`` in 1 and 2, target
coefficients ``i^(-8)``, unit noise, test error against the noiseless target.
With ``--data``: a CSV or NPZ file, standardised on the training rows, test
error against the observed target, ``lambda`` chosen by
:class:`~sklearn.model_selection.GridSearchCV` unless ``--alpha`` is given.

Examples
--------
::

    python -m sklearn_dof
    python -m sklearn_dof --data houses.csv --target price --no-exact
    python -m sklearn_dof --data cpu_small.npz --kernel laplacian --sampling pivoted
"""

import argparse
import math
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV, KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_dof import DoFKernelRidge
from sklearn_dof.datasets import make_periodic_spline

# (beta, delta, lambda).  beta = 4 and 8 are left out: their kernel is summed
# term by term, tens of seconds for 3000 points.  Each lambda minimises the
# exact ridge error on seeds 101-103 (not the default 0) at n_train = 2000,
# hence suits the default --n-train; the minimum is flat within a factor 2.
SPLINE_PROBLEMS = ((1, 8, 0.024), (2, 8, 0.0075))
# Exact kernel ridge costs O(n^3): a user's rows are capped by default.
N_SAMPLES, TEST_SIZE = 5000, 0.25
# The search runs on a subsample so that it costs less than the comparison.
CV_LAMBDAS, CV_FOLDS, CV_MAX_ROWS = np.logspace(-6, 0, 13), 3, 1000
# Positive semi-definite kernels only: the Nystroem method needs one.
KERNELS = ("rbf", "laplacian", "polynomial", "linear", "cosine")
# The table's columns and the format of their values.
COLUMNS = {"data": "", "sampling": "", "n": "d", "alpha": ".4g", "d_max": ".1f"}
COLUMNS |= {"d_eff": ".1f", "p": "d", "MSE nystroem": ".4g", "MSE exact": ".4g"}
COLUMNS |= {"ratio": ".3f", "t nystroem": ".2f", "t exact": ".2f"}
ROW = (  # "data" takes the width w of the longest name
    "{:<{w}}  {:<8}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}"
    "  {:>12}  {:>9}  {:>5}  {:>10}  {:>7}"
)
LEGEND = (
    "d_max, d_eff: estimated maximal marginal and effective degrees of freedom; "
    "p: Nystroem rank, on the spline problems the paper's rule from d_max "
    '(n_components="dof"), on --data the certified rank (n_components="auto"); '
    "ratio = MSE nystroem / MSE exact "
    "(KernelRidge, same kernel and alpha); t: fit times in seconds."
)


def _number(kind, low, high=np.inf):
    """An argparse ``type``: a number of ``kind`` in the open ``(low, high)``."""

    def parse(text):
        value = kind(text)
        if not low < value < high:
            raise argparse.ArgumentTypeError(f"must lie in ({low}, {high}): {text}")
        return value

    return parse


def _parser():
    """The options; :func:`main` refuses those of the other kind of data."""
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_dof",
        description=__doc__.split("\n\n")[0],
        epilog=f"Default alpha: n_train * lambda, lambda tuned per spline problem "
        f"on other seeds or, with --data, chosen by {CV_FOLDS}-fold GridSearchCV "
        f"on at most {CV_MAX_ROWS} training rows among 1e-6, 10^-5.5, ..., 1.  "
        + LEGEND,
    )
    positive, count = _number(float, 0), _number(int, 0)
    add = parser.add_argument
    add("--alpha", type=positive, help="penalty of both models (default: below)")
    add(
        "--sampling",
        choices=("uniform", "pivoted", "both"),
        default="both",
        help="landmark rule; 'both' prints a row for each (default: both)",
    )
    add("--random-state", type=int, default=0, help="seed of data, split, landmarks")
    add("--no-exact", action="store_true", help="skip exact KernelRidge")
    add = parser.add_argument_group("user data (only with --data)").add_argument
    add("--data", metavar="PATH", help=".npz (arrays X, y) or numeric .csv file")
    add("--target", help="CSV target column, by header name or index (default: -1)")
    add("--kernel", choices=KERNELS, help="kernel (default: rbf)")
    add(
        "--gamma",
        type=positive,
        help="kernel parameter (default: 1 / (n_features * X.var()) of the "
        "standardised training rows, scikit-learn's 'scale')",
    )
    add(
        "--n-samples",
        type=count,
        help="use at most this many rows, drawn at random, as exact kernel ridge "
        f"costs O(n^3) (default: {N_SAMPLES})",
    )
    add(
        "--test-size",
        type=_number(float, 0, 1),
        help=f"fraction of the rows held out for testing (default: {TEST_SIZE})",
    )
    add = parser.add_argument_group("spline data (without --data)").add_argument
    add(
        "--n-train",
        type=count,
        help="training points (default: 2000, the size the lambdas are tuned for)",
    )
    add("--n-test", type=count, help="test points (default: 1000)")
    return parser


def _load(path, target):
    """``X`` and ``y`` of a user's file; ValueError if unusable."""
    path, suffix = Path(path), Path(path).suffix.lower()
    if not path.is_file():
        raise ValueError("no such file")
    if suffix not in (".npz", ".csv"):
        raise ValueError("expected a .npz or .csv file")
    if suffix == ".npz":
        if target is not None:
            raise ValueError("--target applies to CSV files; an NPZ file has its y")
        with open(path, "rb") as handle:
            archive = np.load(handle, allow_pickle=False)
            names = getattr(archive, "files", [])  # a lone array has no names
            if "X" not in names or "y" not in names:
                raise ValueError(f"has no array X or y, only {', '.join(names) or '-'}")
            X, y = archive["X"], archive["y"]
    else:
        with open(path, encoding="utf-8-sig") as handle:
            header = [cell.strip() for cell in handle.readline().split(",")]
        if header == [""]:
            raise ValueError("the file is empty")
        try:
            np.asarray(header, dtype=np.float64)
            header = None  # numbers, not column names
        except ValueError:
            pass
        try:
            data = np.loadtxt(
                path, delimiter=",", skiprows=int(header is not None), ndmin=2
            )
        except ValueError as exc:
            raise ValueError(f"cannot read it as a numeric CSV file: {exc}") from None
        index = -1 if target is None else target
        index = header.index(target) if header and target in header else index
        try:  # a name not in the header, a non-integer, or an index out of range
            X, y = np.delete(data, int(index), axis=1), data[:, int(index)]
        except (ValueError, IndexError):
            names = f"; columns: {', '.join(header)}" if header else ""
            raise ValueError(f"--target {target!r} is not a column{names}") from None
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    X = X[:, None] if X.ndim == 1 else X
    if X.ndim != 2 or y.shape != X.shape[:1] or X.shape[1] == 0:
        raise ValueError(f"need X (n, d >= 1) and y (n,), not {X.shape}, {y.shape}")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError("holds NaN or infinite values; impute them first")
    return X, y


def _nystroem(args, kernel, gamma, **params):
    # No intercept, since exact kernel ridge has none.  The spline problems
    # are scored against the noiseless target, the paper's metric, which
    # the paper's rank rule is for; the certified rank bounds the loss of
    # test error on noisy targets, what the user's data are scored on.
    rank = "auto" if args.data is not None else "dof"
    params |= {"kernel": kernel, "gamma": gamma, "random_state": args.random_state}
    return DoFKernelRidge(fit_intercept=False, n_components=rank, **params)


def _scaled(model):
    # Neither model has an intercept, so y is centred (and scaled) for both.
    return TransformedTargetRegressor(
        make_pipeline(StandardScaler(), model), transformer=StandardScaler()
    )


def _spline_problems(args):
    """Print what the default problems are, and yield them."""
    n_train, n_test = args.n_train or 2000, args.n_test or 1000
    print(
        "Periodic-spline problems of Bach (COLT 2013, Sec. 4): precomputed kernel, "
        "noise sd 1; test MSE against the noiseless target f."
    )
    for beta, delta, lam in SPLINE_PROBLEMS:
        data = make_periodic_spline(
            n_train + n_test, beta=beta, delta=delta, random_state=args.random_state
        )
        K, train, test = data.K, slice(n_train), slice(n_train, None)
        split = K[train, train], K[test, train], data.y[train], data.f[test]
        alpha = args.alpha or n_train * lam
        yield f"spline beta={beta} delta={delta}", split, alpha, "precomputed", None


def _user_problem(args, X, y):
    """Subsample, split, and choose gamma and alpha for a user's data."""
    print(f"Data {args.data}: test MSE against the observed target y.")
    n_samples = args.n_samples or N_SAMPLES
    if len(y) > n_samples:
        print(f"using {n_samples} of {len(y)} rows, drawn at random (--n-samples)")
        rng = np.random.RandomState(args.random_state)
        rows = np.sort(rng.choice(len(y), n_samples, replace=False))
        X, y = X[rows], y[rows]
    split = train_test_split(
        X, y, test_size=args.test_size or TEST_SIZE, random_state=args.random_state
    )
    kernel, gamma = args.kernel or "rbf", args.gamma
    if gamma is None:  # gamma="scale" on the rows the kernel sees, 1 if constant
        variance = StandardScaler().fit_transform(split[0]).var()
        gamma = 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
    print(f"kernel={kernel}, gamma={gamma:.4g}; X standardised, y centred and scaled")
    alpha = args.alpha
    if alpha is None:
        # The split shuffled the rows: the first ones are a random subsample.
        X_cv, y_cv = split[0][:CV_MAX_ROWS], split[2][:CV_MAX_ROWS]
        # lambda, not alpha, carries over from the folds to all training rows.
        n_fit = len(y_cv) * (CV_FOLDS - 1) // CV_FOLDS
        search = GridSearchCV(
            _scaled(_nystroem(args, kernel, gamma)),
            {"regressor__dofkernelridge__alpha": n_fit * CV_LAMBDAS},
            scoring="neg_mean_squared_error",
            cv=KFold(CV_FOLDS, shuffle=True, random_state=args.random_state),
            refit=False,
        ).fit(X_cv, y_cv)
        lam = search.best_params_["regressor__dofkernelridge__alpha"] / n_fit
        alpha = len(split[2]) * lam
        print(
            f"alpha = n_train * lambda, lambda = {lam:.3g} chosen by {CV_FOLDS}-fold "
            f"cross-validation (GridSearchCV) on {len(y_cv)} training rows"
        )
    return Path(args.data).name, split, alpha, kernel, gamma


def _cell(value, spec):
    return "-" if value is None else format(value, spec)


def _fit(model, X_train, X_test, y_train, y_test):
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
    # The fitted estimator itself, out of the wrapping of _scaled.
    return mse, seconds, getattr(model, "regressor_", [model])[-1]


def main(argv=None):
    """Entry point of ``python -m sklearn_dof`` and ``sklearn-dof``.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments without the program name; ``sys.argv[1:]`` if None.

    Returns
    -------
    status : int
        0 on success; usage and input errors exit with status 2 instead.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    # Refuse options that do not apply to the data, rather than ignore them.
    user = ["target", "kernel", "gamma", "n_samples", "test_size"]
    wrong = user if args.data is None else ["n_train", "n_test"]
    given = [f"--{name.replace('_', '-')}" for name in wrong if vars(args)[name]]
    if given:
        where = "only with" if args.data is None else "only without"
        parser.error(f"{', '.join(given)} can be used {where} --data")
    if args.data is None:
        problems, wrap = list(_spline_problems(args)), lambda model: model
    else:
        try:
            X, y = _load(args.data, args.target)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            parser.error(f"--data {args.data}: {exc}")
        n_rows = min(len(y), args.n_samples or N_SAMPLES)
        n_train = n_rows - math.ceil(n_rows * (args.test_size or TEST_SIZE))
        if n_train < 2 * CV_FOLDS:  # too few for the folds of the search
            parser.error(
                f"--data {args.data} with --n-samples and --test-size: {n_train} "
                f"training rows of {len(y)}; at least {2 * CV_FOLDS} are needed"
            )
        problems, wrap = [_user_problem(args, X, y)], _scaled
    samplings = ("uniform", "pivoted") if args.sampling == "both" else (args.sampling,)
    rows = []
    for name, split, alpha, kernel, gamma in problems:
        exact = (None, None)
        if not args.no_exact:
            ridge = KernelRidge(alpha=alpha, kernel=kernel, gamma=gamma)
            exact = _fit(wrap(ridge), *split)
        for sampling in samplings:
            model = _nystroem(args, kernel, gamma, alpha=alpha, sampling=sampling)
            mse, seconds, model = _fit(wrap(model), *split)
            dof = model.dof_, model.effective_dof_, model.n_components_
            # No ratio where exact ridge predicts the test targets exactly.
            ratio = mse / exact[0] if exact[0] else None
            row = (name, sampling, len(split[2]), alpha, *dof, mse, exact[0], ratio)
            rows.append((*row, seconds, exact[1]))
    width = max([4] + [len(row[0]) for row in rows])  # at least len("data")
    print("\n" + ROW.format(*COLUMNS, w=width))
    for row in rows:
        print(ROW.format(*map(_cell, row, COLUMNS.values()), w=width))
    print("\n" + LEGEND)
    if any(row[6] >= row[2] / 2 for row in rows):
        print(
            "Some rows have p >= n / 2: at this alpha the degrees of freedom leave "
            "little to save over exact kernel ridge; a larger --alpha lowers p."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
