"""Compare the automatic-rank Nystroem model with exact kernel ridge regression.

Run ``python -m sklearn_dof`` (or the ``sklearn-dof`` console script) to fit

* ``make_pipeline(DoFNystroem(alpha=a), Ridge(alpha=a, fit_intercept=False))``,
  whose rank ``p`` follows the estimated degrees of freedom, and
* ``KernelRidge(alpha=a)`` with the same kernel and the same ``alpha``

on one train/test split and print, per data set and landmark sampling rule,
the estimated degrees of freedom, the chosen rank, both test errors, their
ratio and both fit times.  ``alpha`` is on scikit-learn's scale,
``alpha = n_train * lambda`` with the paper's ``lambda``.

Without arguments the data are the synthetic periodic-spline problems of
Bach (COLT 2013, Section 4), built in memory by
:func:`~sklearn_dof.datasets.make_periodic_spline` (kernel eigenvalues
``i^(-2 beta)`` for ``beta`` in 1 and 2, target coefficients ``i^(-8)``,
unit noise); their test error is measured against the noiseless target.
With ``--data`` the data are a user's CSV or NPZ file, standardised on the
training split; their test error is measured against the observed target.

Examples
--------
The default comparison (a few seconds on two cores)::

    python -m sklearn_dof

A CSV file whose target is the column named ``price``, exact ridge skipped::

    python -m sklearn_dof --data houses.csv --target price --no-exact

An NPZ file holding arrays ``X`` and ``y``, a Laplacian kernel, greedy
pivoted landmarks only::

    python -m sklearn_dof --data cpu_small.npz --kernel laplacian --sampling pivoted
"""

import argparse
import csv
import sys
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ._nystroem import DoFNystroem
from .datasets import make_periodic_spline

# The default problems, as (beta, delta, lambda).  delta = 8 is the target of
# the paper's Figure 2; beta = 4 and 8 are left out because their kernel
# matrix is summed term by term, which takes tens of seconds for 3000 points.
# lambda minimises the test error of exact kernel ridge against the
# noiseless target, averaged over three problems with n_train=2000,
# n_test=1000, noise=1 and seeds 101-103 (none of them the default seed 0),
# on the grid 10 ** (-3 + k / 8); the minimum is flat within a factor of
# about 2 in lambda.  The values are tuned for the default --n-train.
DEFAULT_PROBLEMS = ((1, 8, 0.024), (2, 8, 0.0075))
DEFAULT_NOISE = 1.0
DEFAULT_N_TRAIN = 2000
DEFAULT_N_TEST = 1000

# User data: exact kernel ridge costs O(n^3) time and O(n^2) memory.
DEFAULT_N_SAMPLES = 5000
DEFAULT_TEST_SIZE = 0.25

# Default penalty for user data: lambda on this grid, picked by K-fold
# cross-validation of exact kernel ridge on a subsample of the training rows
# so that the search costs far less than the comparison itself.
CV_LAMBDAS = np.logspace(-6, 0, 13)
CV_MAX_ROWS = 1000
CV_FOLDS = 3

# Positive semi-definite kernels of sklearn.metrics.pairwise: the Nystroem
# method needs a PSD kernel, so "sigmoid" and the chi2 kernels are left out.
KERNELS = ("rbf", "laplacian", "polynomial", "linear", "cosine")

COLUMNS = (
    "data",
    "sampling",
    "n",
    "alpha",
    "d_max",
    "d_eff",
    "p",
    "MSE nystroem",
    "MSE exact",
    "ratio",
    "t nystroem",
    "t exact",
)


class InputError(ValueError):
    """A problem with the user's input, reported as a usage error."""


@dataclass
class Task:
    """One train/test problem and the models' settings for it."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    alpha: float
    kernel: str
    kernel_params: dict = field(default_factory=dict)
    # User data are standardised inside the models; the synthetic problems
    # come as kernel matrices with a centred target, which need no scaling.
    standardize: bool = False


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text):
    value = float(text)
    if not value > 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _fraction(text):
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1: {text}")
    return value


def build_parser():
    """Command-line parser of ``python -m sklearn_dof``.

    Returns
    -------
    parser : argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_dof",
        description=(
            "Fit the Nystroem model whose rank follows the estimated degrees of "
            "freedom (DoFNystroem + Ridge) and exact KernelRidge with the same "
            "kernel and alpha, and print their test errors and fit times. "
            "Without --data: the periodic-spline problems of Bach (COLT 2013), "
            "beta = 1 and 2, delta = 8, noise 1, test error against the "
            "noiseless target."
        ),
        epilog=(
            "alpha is on scikit-learn's scale: alpha = n_train * lambda. "
            "Table columns: d_max and d_eff are the estimated maximal marginal "
            "and effective degrees of freedom, p the rank chosen from d_max, "
            "ratio = MSE nystroem / MSE exact, t the fit times in seconds."
        ),
    )
    parser.add_argument(
        "--alpha",
        type=_positive_float,
        default=None,
        help=(
            "ridge penalty of both models (default: for --data, "
            f"n_train * lambda with lambda chosen by {CV_FOLDS}-fold "
            f"cross-validation of exact KernelRidge on at most {CV_MAX_ROWS} "
            "training rows over lambda = 1e-6, 10^-5.5, ..., 1; for the "
            "default data, a lambda tuned once per problem on other seeds)"
        ),
    )
    parser.add_argument(
        "--sampling",
        choices=("uniform", "pivoted", "both"),
        default="both",
        help="landmark selection; 'both' gives one row per rule (default: both)",
    )
    parser.add_argument(
        "--random-state",
        type=int,
        default=0,
        help="seed of the data, the split and the landmarks (default: 0)",
    )
    parser.add_argument(
        "--no-exact",
        action="store_true",
        help="skip exact KernelRidge (its columns then show '-')",
    )

    user = parser.add_argument_group("user data (only with --data)")
    user.add_argument(
        "--data",
        metavar="PATH",
        help=(
            "a .npz file with arrays X (n, d) and y (n,) (other arrays, such "
            "as a fixed split 'is_test', are ignored), or a numeric .csv file "
            "with an optional header row"
        ),
    )
    user.add_argument(
        "--target",
        metavar="NAME_OR_INDEX",
        help="CSV only: target column, by header name or index (default: last)",
    )
    user.add_argument(
        "--kernel",
        choices=KERNELS,
        default=None,
        help="kernel (default: rbf)",
    )
    user.add_argument(
        "--gamma",
        type=_positive_float,
        default=None,
        help=(
            "kernel parameter gamma (default: 1 / (n_features * X.var()) on "
            "the standardised training rows, scikit-learn's 'scale')"
        ),
    )
    user.add_argument(
        "--n-samples",
        type=_positive_int,
        default=None,
        help=(
            "use at most this many rows, drawn at random, since exact kernel "
            f"ridge is O(n^3) (default: {DEFAULT_N_SAMPLES})"
        ),
    )
    user.add_argument(
        "--test-size",
        type=_fraction,
        default=None,
        help=f"fraction of rows held out for testing (default: {DEFAULT_TEST_SIZE})",
    )

    synthetic = parser.add_argument_group("default synthetic data (without --data)")
    synthetic.add_argument(
        "--n-train",
        type=_positive_int,
        default=None,
        help=(
            f"training points (default: {DEFAULT_N_TRAIN}; the built-in lambdas "
            "are tuned for this size)"
        ),
    )
    synthetic.add_argument(
        "--n-test",
        type=_positive_int,
        default=None,
        help=f"test points (default: {DEFAULT_N_TEST})",
    )
    return parser


def _check_options(args, parser):
    """Refuse options that do not apply to the chosen data, rather than ignore them."""
    user_only = ["target", "kernel", "gamma", "n_samples", "test_size"]
    synthetic_only = ["n_train", "n_test"]
    wrong = synthetic_only if args.data is not None else user_only
    given = [name for name in wrong if getattr(args, name) is not None]
    given = ["--" + name.replace("_", "-") for name in given]
    if given:
        where = "only without" if args.data is not None else "only with"
        parser.error(f"{', '.join(given)} can be used {where} --data")


# ---------------------------------------------------------------------------
# Reading the user's data


def _load_npz(path):
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read {path} as an NPZ file: {exc}") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"{path} holds a single array, not arrays X and y")
    with archive:
        missing = [key for key in ("X", "y") if key not in archive.files]
        if missing:
            raise InputError(
                f"{path} has no array {' or '.join(missing)}; an NPZ file needs "
                f"arrays X and y (found: {', '.join(archive.files) or 'none'})"
            )
        try:
            X, y = archive["X"], archive["y"]
        except ValueError as exc:  # object arrays need pickle, which is refused
            raise InputError(f"cannot read X and y from {path}: {exc}") from exc
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise InputError(
            f"{path}: X must have shape (n, d) and y shape (n,); "
            f"got {X.shape} and {y.shape}"
        )
    return X, y


def _read_header(path):
    """Column names if the first line of the CSV is not numeric, else None."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        first = next(csv.reader(handle), None)
    if first is None:
        raise InputError(f"{path} is empty")
    try:
        [float(cell) for cell in first]
    except ValueError:
        return [cell.strip() for cell in first]
    return None


def _target_index(target, header, n_columns):
    """Column index of ``--target``: a header name first, then an integer."""
    if target is None:
        return n_columns - 1
    if header is not None and target in header:
        return header.index(target)
    try:
        index = int(target)
    except ValueError:
        names = "" if header is None else f"; columns: {', '.join(header)}"
        raise InputError(f"--target {target!r} is not a column{names}") from None
    if not -n_columns <= index < n_columns:
        raise InputError(
            f"--target {index} is out of range for a file with {n_columns} columns"
        )
    return index % n_columns


def _load_csv(path, target):
    header = _read_header(path)
    try:
        data = np.loadtxt(
            path,
            delimiter=",",
            skiprows=0 if header is None else 1,
            ndmin=2,
            encoding="utf-8-sig",
        )
    except ValueError as exc:
        raise InputError(f"cannot read {path} as a numeric CSV file: {exc}") from exc
    if data.shape[1] < 2:
        raise InputError(f"{path} needs at least two columns (features and target)")
    index = _target_index(target, header, data.shape[1])
    return np.delete(data, index, axis=1), data[:, index]


def load_data(path, target=None):
    """Read a user's NPZ or CSV file.

    Parameters
    ----------
    path : str or Path
        ``.npz`` file with arrays ``X`` and ``y``, or numeric ``.csv`` file.
    target : str, default=None
        CSV only: name or index of the target column, the last if None.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)

    Raises
    ------
    InputError
        If the file is missing, unreadable, or not numeric and finite.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        if target is not None:
            raise InputError("--target applies to CSV files; an NPZ file has its y")
        X, y = _load_npz(path)
    elif suffix == ".csv":
        X, y = _load_csv(path, target)
    else:
        raise InputError(f"{path}: expected a .npz or .csv file")
    try:
        X, y = X.astype(np.float64), y.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path}: X and y must be numeric ({exc})") from exc
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise InputError(f"{path} holds NaN or infinite values; impute them first")
    if X.shape[0] < 2 * CV_FOLDS:
        raise InputError(f"{path} has {X.shape[0]} rows; at least 6 are needed")
    return X, y


# ---------------------------------------------------------------------------
# Problems


def synthetic_tasks(n_train, n_test, random_state):
    """The default periodic-spline problems, one per kernel decay ``beta``.

    The kernel matrix is precomputed: the models see the train block
    ``K[train][:, train]`` and the test block ``K[test][:, train]``, and the
    test targets are the noiseless values ``f``.

    Yields
    ------
    task : Task
    """
    train, test = slice(0, n_train), slice(n_train, n_train + n_test)
    for beta, delta, lam in DEFAULT_PROBLEMS:
        data = make_periodic_spline(
            n_train + n_test,
            beta=beta,
            delta=delta,
            design="uniform",
            noise=DEFAULT_NOISE,
            random_state=random_state,
        )
        yield Task(
            name=f"spline beta={beta} delta={delta}",
            X_train=data.K[train, train],
            y_train=data.y[train],
            X_test=data.K[test, train],
            y_test=data.f[test],
            alpha=n_train * lam,
            kernel="precomputed",
        )


def user_task(path, X, y, args):
    """Split, subsample and set the kernel of a user's data set.

    Returns
    -------
    task : Task
    notes : list of str
        What was chosen on the user's behalf, to print above the table.
    """
    notes = []
    rng = np.random.RandomState(args.random_state)
    n_samples = args.n_samples or DEFAULT_N_SAMPLES
    if X.shape[0] > n_samples:
        notes.append(
            f"using {n_samples} of {X.shape[0]} rows, drawn at random (--n-samples)"
        )
        rows = np.sort(rng.choice(X.shape[0], n_samples, replace=False))
        X, y = X[rows], y[rows]
    X_train, X_test, y_train, y_test = train_test_split(
        X,
        y,
        test_size=args.test_size or DEFAULT_TEST_SIZE,
        random_state=args.random_state,
    )

    kernel = args.kernel or "rbf"
    gamma = args.gamma
    if gamma is None:
        # scikit-learn's gamma="scale", written out because DoFNystroem and
        # KernelRidge take a number; computed where the kernel sees the data,
        # after standardisation.
        # (Constant features: variance 0, and gamma="scale" then takes 1.)
        variance = StandardScaler().fit_transform(X_train).var()
        gamma = 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
    task = Task(
        name=Path(path).name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        alpha=np.nan,  # set below, from --alpha or by cross-validation
        kernel=kernel,
        kernel_params={"gamma": gamma},
        standardize=True,
    )
    notes.append(
        f"kernel={kernel}, gamma={gamma:.4g}; X standardised and y centred and "
        "scaled on the training rows"
    )
    if args.alpha is not None:
        task = replace(task, alpha=args.alpha)
    else:
        lam, n_cv = select_lambda(task, args.random_state)
        task = replace(task, alpha=X_train.shape[0] * lam)
        notes.append(
            f"alpha = n_train * lambda, lambda = {lam:.3g} chosen by {CV_FOLDS}-fold "
            f"cross-validation of exact KernelRidge on {n_cv} training rows"
        )
    return task, notes


# ---------------------------------------------------------------------------
# Models


def make_models(task, sampling, random_state):
    """The Nystroem model and exact kernel ridge, with the same kernel and alpha.

    Returns
    -------
    nystroem, exact : estimators
    """
    # User data: X standardised for the kernel, fitted on the training rows.
    scale_x = [StandardScaler()] if task.standardize else []
    nystroem = make_pipeline(
        *scale_x,
        DoFNystroem(
            kernel=task.kernel,
            alpha=task.alpha,
            sampling=sampling,
            random_state=random_state,
            **task.kernel_params,
        ),
        # The features already span the kernel's range; an intercept would be
        # an unpenalised extra feature that exact kernel ridge does not have.
        Ridge(alpha=task.alpha, fit_intercept=False),
    )
    exact = make_pipeline(
        *[StandardScaler() for _ in scale_x],
        KernelRidge(alpha=task.alpha, kernel=task.kernel, **task.kernel_params),
    )
    if task.standardize:
        # Neither model has an intercept, so a user's y is centred (and
        # scaled, which changes nothing else) for both.
        nystroem, exact = (
            TransformedTargetRegressor(regressor=model, transformer=StandardScaler())
            for model in (nystroem, exact)
        )
    return nystroem, exact


def _fitted_nystroem(model):
    """The fitted DoFNystroem step of a model built by :func:`make_models`."""
    pipeline = getattr(model, "regressor_", model)
    return pipeline[-2]


def select_lambda(task, random_state):
    """lambda = alpha / n minimising the cross-validated error of exact ridge.

    Returns
    -------
    lam : float
    n_rows : int
        Number of training rows the search used.
    """
    X, y = task.X_train, task.y_train
    if X.shape[0] > CV_MAX_ROWS:
        rows = np.random.RandomState(random_state).choice(
            X.shape[0], CV_MAX_ROWS, replace=False
        )
        X, y = X[rows], y[rows]
    folds = list(KFold(CV_FOLDS, shuffle=True, random_state=random_state).split(X))
    errors = []
    for lam in CV_LAMBDAS:
        error = 0.0
        for fit_rows, val_rows in folds:
            # lambda, not alpha, is what carries over between sample sizes.
            task_cv = replace(task, alpha=lam * len(fit_rows))
            _, exact = make_models(task_cv, "uniform", random_state)
            exact.fit(X[fit_rows], y[fit_rows])
            error += np.mean((exact.predict(X[val_rows]) - y[val_rows]) ** 2)
        errors.append(error)
    return float(CV_LAMBDAS[int(np.argmin(errors))]), X.shape[0]


def _fit_and_score(model, task):
    start = time.perf_counter()
    model.fit(task.X_train, task.y_train)
    seconds = time.perf_counter() - start
    mse = float(np.mean((model.predict(task.X_test) - task.y_test) ** 2))
    return mse, seconds


def run_task(task, samplings, exact, random_state):
    """Fit the models on one task.

    Parameters
    ----------
    task : Task
    samplings : tuple of str
        Landmark rules, one table row each.
    exact : bool
        Whether to fit exact kernel ridge (once, shared by the rows).
    random_state : int

    Returns
    -------
    rows : list of dict
    """
    exact_mse = exact_seconds = None
    if exact:
        _, exact_model = make_models(task, samplings[0], random_state)
        exact_mse, exact_seconds = _fit_and_score(exact_model, task)
    rows = []
    for sampling in samplings:
        model, _ = make_models(task, sampling, random_state)
        mse, seconds = _fit_and_score(model, task)
        nys = _fitted_nystroem(model)
        rows.append(
            {
                "data": task.name,
                "sampling": sampling,
                "n": task.X_train.shape[0],
                "alpha": task.alpha,
                "d_max": nys.dof_,
                "d_eff": nys.effective_dof_,
                "p": nys.n_components_,
                "MSE nystroem": mse,
                "MSE exact": exact_mse,
                # No ratio without an exact run, nor when it fits exactly.
                "ratio": None if not exact_mse else mse / exact_mse,
                "t nystroem": seconds,
                "t exact": exact_seconds,
            }
        )
    return rows


# ---------------------------------------------------------------------------
# Output

_FORMATS = {
    "alpha": "{:.4g}",
    "d_max": "{:.1f}",
    "d_eff": "{:.1f}",
    "MSE nystroem": "{:.4g}",
    "MSE exact": "{:.4g}",
    "ratio": "{:.3f}",
    "t nystroem": "{:.2f}",
    "t exact": "{:.2f}",
}


def format_table(rows, columns=COLUMNS):
    """Plain-text table, text left-aligned and numbers right-aligned.

    Parameters
    ----------
    rows : list of dict
        Values by column name; None prints as ``-``.
    columns : sequence of str, default=COLUMNS

    Returns
    -------
    table : str
    """

    def cell(column, value):
        if value is None:
            return "-"
        return _FORMATS.get(column, "{}").format(value)

    cells = [list(columns)] + [[cell(c, row[c]) for c in columns] for row in rows]
    widths = [max(len(line[j]) for line in cells) for j in range(len(columns))]
    left = {"data", "sampling"}

    def render(line):
        return "  ".join(
            text.ljust(width) if column in left else text.rjust(width)
            for column, text, width in zip(columns, line, widths, strict=True)
        ).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([render(cells[0]), rule] + [render(line) for line in cells[1:]])


LEGEND = (
    "d_max, d_eff: estimated maximal marginal and effective degrees of freedom; "
    "p: Nystroem rank chosen from d_max; ratio = MSE nystroem / MSE exact "
    "(KernelRidge, same kernel and alpha); t: fit times in seconds."
)


def main(argv=None):
    """Entry point of ``python -m sklearn_dof`` and ``sklearn-dof``.

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments without the program name; ``sys.argv[1:]``
        if None.

    Returns
    -------
    status : int
        0 on success.  Usage and input errors exit with status 2 through
        :meth:`argparse.ArgumentParser.error`.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_options(args, parser)
    samplings = ("uniform", "pivoted") if args.sampling == "both" else (args.sampling,)

    if args.data is None:
        n_train = args.n_train or DEFAULT_N_TRAIN
        n_test = args.n_test or DEFAULT_N_TEST
        tasks = synthetic_tasks(n_train, n_test, args.random_state)
        if args.alpha is not None:
            tasks = (replace(task, alpha=args.alpha) for task in tasks)
        print(
            "Periodic-spline problems of Bach (COLT 2013, Sec. 4): uniform design "
            f"on [0, 1), noise sd {DEFAULT_NOISE:g}, precomputed kernel; "
            "test MSE against the noiseless target f."
        )
    else:
        try:
            X, y = load_data(args.data, args.target)
        except InputError as exc:
            parser.error(str(exc))
        task, notes = user_task(args.data, X, y, args)
        tasks = [task]
        print(f"Data {args.data}: test MSE against the observed target y.")
        for note in notes:
            print(note)

    rows = []
    for task in tasks:
        rows.extend(run_task(task, samplings, not args.no_exact, args.random_state))
    print()
    print(format_table(rows))
    print()
    print(LEGEND)
    if any(row["p"] >= row["n"] / 2 for row in rows):
        # Not an error, but the comparison then shows no saving: say why.
        print(
            "Some rows have p >= n / 2: at this alpha the degrees of freedom "
            "leave little to save over exact kernel ridge; a larger --alpha "
            "gives a smaller rank."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
