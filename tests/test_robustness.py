"""Robustness of every entry point (issue 7).

Bad input must raise an error of the right type that names the problem;
degenerate but valid input must give a finite, correct answer; numerically
hopeless requests (a penalty below the float64 resolution, a kernel that is
not positive semi-definite) must warn and still return the best float64
answer.  Also: determinism across runs and ``n_jobs``, predictions from
several threads, grid searches in worker processes, and skops refusing
untrusted types.  The property-based tests live in ``test_properties.py``.
"""

import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
    degrees_of_freedom,
    dof_rank,
    estimate_degrees_of_freedom,
    leverage_score_bounds,
    pivoted_cholesky,
    theoretical_rank,
    uniform_columns,
)
from sklearn_dof.__main__ import main
from sklearn_dof._validation import (
    NonPSDKernelWarning,
    PenaltyResolutionWarning,
    _max_asymmetry,
)
from sklearn_dof.datasets import make_periodic_spline

ESTIMATORS = [
    DoFNystroem,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFKernelLogisticRegression,
]
NAMES = [cls.__name__ for cls in ESTIMATORS]
N = 40


def _samplings():
    """Every named landmark sampler the estimators accept."""
    for constraint in DoFNystroem._parameter_constraints["sampling"]:
        if hasattr(constraint, "options"):
            return sorted(constraint.options)
    return ["pivoted", "uniform"]


SAMPLINGS = _samplings()


def _data(n=N, n_features=3, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, n_features))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.randn(n)
    return X, y


def _target(cls, y):
    """Class labels for the classifier, y itself for the regressors."""
    if cls is not DoFKernelLogisticRegression or len(y) == 0:
        return y
    return (y > np.median(y)).astype(int)


def _fit(cls, X, y, **params):
    params.setdefault("random_state", 0)
    est = cls(**params)
    if cls is DoFNystroem:
        return est.fit(X)
    return est.fit(X, _target(cls, y))


def _output(est, X):
    """What a user reads from the fitted model, as floats."""
    if isinstance(est, DoFNystroem):
        return est.transform(X)
    if isinstance(est, DoFKernelLogisticRegression):
        return est.predict_proba(X)
    return est.predict(X)


def _alpha(cls, value):
    return {"alphas": [value]} if cls is DoFKernelRidgeCV else {"alpha": value}


def _with(X, i, j, value):
    X = X.copy()
    X[i, j] = value
    return X


# ---------------------------------------------------------------------------
# Bad input data: every estimator raises a ValueError that names it.

BAD_X = {
    "NaN": (lambda X: _with(X, 3, 1, np.nan), "Input X contains NaN"),
    "inf": (lambda X: _with(X, 3, 1, np.inf), "Input X contains infinity"),
    "-inf": (lambda X: _with(X, 0, 0, -np.inf), "Input X contains infinity"),
    "empty": (lambda X: X[:0], r"0 sample\(s\)"),
    "no feature": (lambda X: X[:, :0], r"0 feature\(s\)"),
    "1d": (lambda X: X[:, 0], "Expected 2D array"),
    "3d": (lambda X: X[:, :, None], "dim 3"),
    "strings": (lambda X: np.full(X.shape, "a"), "could not convert string"),
    "complex": (lambda X: X + 1j, "Complex data not supported"),
}


@pytest.mark.parametrize("case", list(BAD_X))
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_bad_X_at_fit(cls, case):
    X, y = _data()
    transform, message = BAD_X[case]
    bad = transform(X)
    with pytest.raises(ValueError, match=message):
        _fit(cls, bad, y[: bad.shape[0]])


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_nan_is_not_allowed_by_the_tags(cls):
    assert not cls().__sklearn_tags__().input_tags.allow_nan


@pytest.mark.parametrize(
    "case, message",
    [
        ("NaN", "Input X contains NaN"),
        ("inf", "Input X contains infinity"),
        ("features", "X has 2 features, but .* is expecting 3 features"),
    ],
)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_bad_X_at_predict(cls, case, message):
    X, y = _data()
    est = _fit(cls, X, y)
    bad = {
        "NaN": _with(X, 0, 0, np.nan),
        "inf": _with(X, 0, 0, np.inf),
        "features": X[:, :2],
    }[case]
    with pytest.raises(ValueError, match=message):
        _output(est, bad)


@pytest.mark.parametrize("cls", ESTIMATORS[1:], ids=NAMES[1:])
def test_bad_y(cls):
    X, y = _data()
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        cls().fit(X, _target(cls, y)[:30])
    with pytest.raises(ValueError, match="Input y contains NaN"):
        cls().fit(X, _with(y[:, None], 2, 0, np.nan)[:, 0])
    with pytest.raises(ValueError, match="Input y contains infinity"):
        cls().fit(X, _with(y[:, None], 2, 0, np.inf)[:, 0])


@pytest.mark.parametrize("cls", ESTIMATORS[1:], ids=NAMES[1:])
def test_bad_sample_weight(cls):
    X, y = _data()
    y = _target(cls, y)
    with pytest.raises(ValueError, match="Negative values in data passed to"):
        cls().fit(X, y, sample_weight=-np.ones(N))
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        cls().fit(X, y, sample_weight=np.full(N, np.nan))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(30,\)"):
        cls().fit(X, y, sample_weight=np.ones(30))
    with pytest.raises(ValueError, match="at least one non-zero"):
        cls().fit(X, y, sample_weight=np.zeros(N))


def test_classifier_targets():
    X, y = _data()
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        DoFKernelLogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match="only one class"):
        DoFKernelLogisticRegression().fit(X, np.zeros(N, dtype=int))
    labels = np.where(y > 0, "yes", "no")  # string labels are fine
    clf = DoFKernelLogisticRegression(random_state=0).fit(X, labels)
    assert set(clf.predict(X)) <= {"yes", "no"}


# ---------------------------------------------------------------------------
# Bad parameters: InvalidParameterError (a ValueError) naming the parameter,
# or a ValueError naming the kernel parameter the kernel would ignore.


def _answers_with(value):
    def kernel(x, y):
        return value

    return kernel


def _linear(x, y):
    return float(x @ y)


BAD_PARAMS = {
    "alpha=0": (lambda cls: _alpha(cls, 0.0), InvalidParameterError, "alpha"),
    "alpha<0": (lambda cls: _alpha(cls, -1.0), InvalidParameterError, "alpha"),
    "alpha=nan": (lambda cls: _alpha(cls, np.nan), InvalidParameterError, "alpha"),
    "alpha=inf": (lambda cls: _alpha(cls, np.inf), InvalidParameterError, "alpha"),
    "kernel name": (
        lambda cls: {"kernel": "gaussian"},
        InvalidParameterError,
        "'kernel' parameter",
    ),
    "kernel_params typo": (
        lambda cls: {"kernel_params": {"gama": 0.5}},
        ValueError,
        r"kernel_params has \['gama'\], which the 'rbf' kernel does not take",
    ),
    "kernel_params not taken": (
        lambda cls: {"kernel": "linear", "kernel_params": {"gamma": 0.5}},
        ValueError,
        "the 'linear' kernel does not take",
    ),
    "kernel_params gamma<0": (
        lambda cls: {"kernel_params": {"gamma": -1.0}},
        InvalidParameterError,
        "'gamma' parameter of the 'rbf' kernel",
    ),
    "kernel_params gamma str": (
        lambda cls: {"kernel_params": {"gamma": "auto"}},
        InvalidParameterError,
        "'gamma' parameter of the 'rbf' kernel",
    ),
    "gamma twice": (
        lambda cls: {"gamma": 0.5, "kernel_params": {"gamma": 2.0}},
        ValueError,
        r"\['gamma'\] given both as a parameter and in kernel_params",
    ),
    "kernel_params list": (
        lambda cls: {"kernel_params": [0.5]},
        InvalidParameterError,
        "'kernel_params' parameter",
    ),
    "gamma<0": (lambda cls: {"gamma": -1.0}, InvalidParameterError, "'gamma'"),
    "degree<1": (
        lambda cls: {"kernel": "poly", "degree": 0},
        InvalidParameterError,
        "'degree'",
    ),
    "gamma with callable": (
        lambda cls: {"kernel": _linear, "gamma": 1.0},
        ValueError,
        r"\['gamma'\] cannot be used with a callable or precomputed kernel",
    ),
    "n_components=0": (
        lambda cls: {"n_components": 0},
        InvalidParameterError,
        "'n_components'",
    ),
    "n_components=2.5": (
        lambda cls: {"n_components": 2.5},
        InvalidParameterError,
        "'n_components'",
    ),
    "sampling": (lambda cls: {"sampling": "foo"}, InvalidParameterError, "sampling"),
    "tol=0": (lambda cls: {"tol": 0.0}, InvalidParameterError, "'tol'"),
    "random_state": (
        lambda cls: {"random_state": "seed"},
        InvalidParameterError,
        "'random_state'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PARAMS))
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_bad_parameters(cls, case):
    X, y = _data()
    params, error, message = BAD_PARAMS[case]
    with pytest.raises(error, match=message):
        _fit(cls, X, y, **params(cls))


GIVEN_LANDMARKS = {
    "out of range": ([0, 100], "out of range"),
    "negative": ([-1, 3], "out of range"),
    "duplicated": ([1, 1, 2], "duplicated row indices"),
    "empty": ([], "non-empty 1d array of integer row indices"),
    "floats": ([0.5, 1.5], "non-empty 1d array of integer row indices"),
    "2d": ([[0, 1]], "non-empty 1d array of integer row indices"),
}


@pytest.mark.skipif(
    "array-like" not in DoFNystroem._parameter_constraints["sampling"],
    reason="landmarks cannot be given",
)
@pytest.mark.parametrize("case", list(GIVEN_LANDMARKS))
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_bad_given_landmarks(cls, case):
    X, y = _data()
    sampling, message = GIVEN_LANDMARKS[case]
    with pytest.raises(ValueError, match=message):
        _fit(cls, X, y, sampling=sampling)


BAD_KERNELS = {
    "callable returns array": (
        lambda x, y: np.array([1.0, 2.0]),
        "must return a scalar k\\(x, y\\) .* array of shape \\(2,\\)",
    ),
    "callable returns (1,)": (
        lambda x, y: np.array([x @ y]),
        "must return a scalar k\\(x, y\\) .* array of shape \\(1,\\)",
    ),
    "callable returns str": (lambda x, y: "1.0x", "must return a real number"),
    "callable returns None": (lambda x, y: None, "must return a real number"),
    "callable returns NaN": (_answers_with(np.nan), "'kernel' returned non-finite"),
    "callable returns inf": (_answers_with(np.inf), "'kernel' returned non-finite"),
}


@pytest.mark.parametrize("case", list(BAD_KERNELS))
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_bad_callable_kernel(cls, case):
    X, y = _data(n=12)
    kernel, message = BAD_KERNELS[case]
    with pytest.raises(ValueError, match=message):
        _fit(cls, X, y, kernel=kernel)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_kernel_overflow_is_an_error_not_nan(cls):
    X, y = _data()
    with pytest.raises(ValueError, match="'poly' returned non-finite values"):
        with np.errstate(over="ignore"):
            _fit(cls, 1e110 * X, y, kernel="poly")
    # The same at predict time, on a fitted model.
    est = _fit(cls, X, y, kernel="poly", degree=3)
    with pytest.raises(ValueError, match="'poly' returned non-finite values"):
        with np.errstate(over="ignore"):
            _output(est, 1e110 * X)


def test_callable_kernel_that_works_gives_the_builtin_result():
    X, y = _data()
    builtin = _fit(DoFKernelRidge, X, y, kernel="linear", n_components=3)
    custom = _fit(DoFKernelRidge, X, y, kernel=_linear, n_components=3)
    np.testing.assert_allclose(custom.predict(X), builtin.predict(X), atol=1e-10)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_precomputed_kernel_shapes(cls):
    X, y = _data()
    K = rbf_kernel(X, gamma=0.5)
    with pytest.raises(ValueError, match=r"must be square; got X of shape \(40, 3\)"):
        _fit(cls, X, y, kernel="precomputed")
    with pytest.raises(ValueError, match="kernel_params cannot be used with kernel="):
        _fit(cls, K, y, kernel="precomputed", kernel_params={"gamma": 1.0})
    est = _fit(cls, K, y, kernel="precomputed")
    with pytest.raises(ValueError, match="X has 30 features, but .* expecting 40"):
        _output(est, K[:5, :30])
    assert np.isfinite(_output(est, K[:5])).all()


# ---------------------------------------------------------------------------
# Warnings: told, and what is computed is said.


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_n_components_above_n_samples_is_clipped(cls):
    X, y = _data()
    with pytest.warns(UserWarning, match="n_components=100 > n_samples=40"):
        est = _fit(cls, X, y, n_components=100)
    assert est.n_components_ == N
    assert np.isfinite(_output(est, X)).all()


@pytest.mark.parametrize(
    "kernel, params",
    [
        ("sigmoid", {}),
        ("sigmoid", {"gamma": 0.5, "coef0": -1.0}),
        ("additive_chi2", {}),
    ],
)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_non_psd_kernel_warns_and_says_what_is_computed(cls, kernel, params):
    X, y = _data()
    X = np.abs(X)  # additive_chi2 needs non-negative data
    with pytest.warns(NonPSDKernelWarning, match="not positive semi-definite") as rec:
        est = _fit(cls, X, y, kernel=kernel, **params)
    message = str(rec[0].message)
    assert "negative part is dropped" in message and "PSD part" in message
    assert np.isfinite(_output(est, X)).all()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_non_psd_and_asymmetric_precomputed_kernels_warn(cls):
    X, y = _data()
    K = rbf_kernel(X, gamma=0.5)
    with pytest.warns(NonPSDKernelWarning, match="'precomputed' is not positive"):
        est = _fit(cls, K - 0.5 * np.eye(N) - 0.5, y, kernel="precomputed")
    assert np.isfinite(_output(est, K[:5])).all()
    with pytest.warns(NonPSDKernelWarning) as record:
        _fit(cls, K + np.triu(0.3 * np.ones_like(K), 1), y, kernel="precomputed")
    messages = " ".join(str(w.message) for w in record)
    assert "not symmetric on the landmarks" in messages
    assert "symmetric part (K + K^T) / 2" in messages


@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 600])
def test_max_asymmetry_is_the_largest_entry_of_a_minus_its_transpose(n):
    # By tiles, each pair once: the same as the dense definition, whatever
    # the tiles' fit to the matrix (one entry moved off symmetry anywhere).
    rng = np.random.RandomState(n)
    A = rng.randn(n, n)
    assert _max_asymmetry(A) == np.abs(A - A.T).max()
    S = A + A.T
    assert _max_asymmetry(S) == 0.0
    i, j = rng.randint(n, size=2)
    S[i, j] += 0.5
    assert _max_asymmetry(S) == np.abs(S - S.T).max()


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "linear", "poly", "cosine"])
def test_psd_kernels_do_not_warn(kernel):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPSDKernelWarning)
        warnings.simplefilter("error", PenaltyResolutionWarning)
        for sampling in SAMPLINGS:
            _fit(DoFKernelRidge, X, y, kernel=kernel, sampling=sampling)
        _fit(DoFKernelRidge, X, y, kernel=kernel, n_components=N)  # every row


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_penalty_below_float64_resolution_warns(cls):
    X, y = _data()
    assert issubclass(PenaltyResolutionWarning, ConvergenceWarning)
    with pytest.warns(PenaltyResolutionWarning, match="alpha=1e-300 is below"):
        est = _fit(cls, X, y, **_alpha(cls, 1e-300))
    assert np.isfinite(_output(est, X)).all()


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("alpha", [1e-14, 1e-17, 1e-22])
def test_unresolved_penalty_beta8_as_good_as_exact_float64(alpha, sampling):
    # The paper's beta = 8 problem: eigenvalues i^-16 fall below float64's
    # resolution after about ten; K(I, I) and Phi^T Phi are singular at
    # machine precision and alpha regularises rounding noise only.
    data = make_periodic_spline(300, beta=8, delta=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # KernelRidge: "Singular matrix"
        exact = KernelRidge(alpha=alpha, kernel="precomputed").fit(data.K, data.y)
    model = DoFKernelRidge(
        alpha=alpha,
        kernel="precomputed",
        sampling=sampling,
        fit_intercept=False,
        random_state=0,
    )
    with pytest.warns(PenaltyResolutionWarning, match="not resolved"):
        model.fit(data.K, data.y)
    error = np.mean((model.predict(data.K) - data.f) ** 2)
    exact_error = np.mean((exact.predict(data.K) - data.f) ** 2)
    assert np.isfinite(error)
    assert error <= 1.01 * exact_error


def test_resolved_penalty_does_not_warn():
    data = make_periodic_spline(300, beta=8, delta=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PenaltyResolutionWarning)
        DoFKernelRidge(alpha=1e-9, kernel="precomputed", random_state=0).fit(
            data.K, data.y
        )


def test_cv_never_selects_a_nan_score():
    # At alpha = 1e-300 and p = n the leave-one-out residuals of the
    # features are 0 / 0 (GCV's too).  The exact fit of every row (the "loo"
    # default on these 40 rows) computes them from (K + alpha I)^-1
    # instead: finite, for the interpolant of the distinct rows.
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for criterion in ("loo", "gcv"):
            model = DoFKernelRidgeCV(
                alphas=[1e-300, 1.0],
                criterion=criterion,
                fit_intercept=False,
                random_state=0,
            ).fit(X, y)
            assert np.isfinite(model.best_score_)
            if criterion == "gcv":
                assert model.alpha_ == 1.0
            else:
                assert model.nystroem_.exact_ and model.alpha_ in (1e-300, 1.0)


# ---------------------------------------------------------------------------
# Degenerate but valid data: finite and correct.


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_one_sample(cls):
    X, y = _data()
    if cls is DoFKernelRidgeCV:
        with pytest.raises(ValueError, match="at least 2 samples; got n_samples=1"):
            _fit(cls, X[:1], y[:1])
    elif cls is DoFKernelLogisticRegression:
        with pytest.raises(ValueError, match="only one class"):
            _fit(cls, X[:1], y[:1])
    else:
        est = _fit(cls, X[:1], y[:1])
        out = _output(est, X[:5])
        assert np.isfinite(out).all() and out.shape[0] == 5
        if cls is DoFKernelRidge:  # the intercept alone: y[0]
            np.testing.assert_allclose(out, y[0])


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_one_feature_and_two_samples(cls):
    X, y = _data()
    est = _fit(cls, X[:, :1], y)
    assert np.isfinite(_output(est, X[:, :1])).all()
    est = _fit(cls, X[:2], np.array([0.0, 1.0]))
    assert np.isfinite(_output(est, X[:5])).all()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_constant_column_changes_nothing(cls):
    # An RBF kernel only sees differences: a constant column is invisible.
    X, y = _data()
    wider = np.column_stack([X, np.full(N, 7.0)])
    a = _output(_fit(cls, X, y, gamma=0.5), X)
    b = _output(_fit(cls, wider, y, gamma=0.5), wider)
    np.testing.assert_allclose(b, a, atol=1e-10)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "cosine"])
@pytest.mark.parametrize("cls", ESTIMATORS[1:3], ids=NAMES[1:3])
def test_constant_data_predicts_the_mean(cls, kernel):
    X, y = _data()
    for Z in (np.ones((N, 3)), np.zeros((N, 3))):
        with warnings.catch_warnings():
            # a zero cosine or linear kernel: nothing to warn about
            warnings.simplefilter("error", NonPSDKernelWarning)
            est = _fit(cls, Z, y, kernel=kernel)
        np.testing.assert_allclose(est.predict(Z[:3]), y.mean(), atol=1e-8)


def test_constant_data_classifier_predicts_the_prior():
    X, y = _data()
    labels = (y > 1.0).astype(int)
    with warnings.catch_warnings():
        # Not asserted: the Newton solver warns spuriously when it starts at
        # the optimum (see the issue-7 report).
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = DoFKernelLogisticRegression(kernel="linear").fit(np.zeros((N, 3)), labels)
    np.testing.assert_allclose(clf.predict_proba(X[:3])[:, 1], labels.mean(), rtol=1e-6)


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_duplicated_rows_and_duplicated_landmarks(cls, sampling):
    X, y = _data(n=10)
    X, y = np.repeat(X, 4, axis=0), np.repeat(y, 4)
    # n_components=N takes every row, so each landmark is there four times.
    est = _fit(cls, X, y, n_components=N, sampling=sampling, gamma=0.5)
    assert np.isfinite(_output(est, X)).all()
    if cls is DoFNystroem:
        Phi = est.transform(X)
        np.testing.assert_allclose(Phi @ Phi.T, rbf_kernel(X, gamma=0.5), atol=1e-8)


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_duplicated_landmarks_match_exact_kernel_ridge(sampling):
    X, y = _data(n=10)
    X, y = np.repeat(X, 3, axis=0), np.repeat(y, 3)
    kw = dict(alpha=0.1, kernel="rbf", gamma=0.5)
    exact = KernelRidge(**kw).fit(X, y).predict(X)
    model = DoFKernelRidge(
        n_components=30, sampling=sampling, fit_intercept=False, **kw
    ).fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact, atol=1e-8)


@pytest.mark.parametrize("cls", ESTIMATORS[1:3], ids=NAMES[1:3])
def test_huge_gamma_kernel_is_identity(cls):
    # K == I in float64: kernel ridge shrinks y by 1 / (1 + alpha).
    X, y = _data()
    kw = dict(gamma=1e6, fit_intercept=False, **_alpha(cls, 0.5))
    # Its spectrum is flat at 1, above the penalty at every rank: each
    # column carries 1 / 1.5 d.o.f., and the plateau of the leave-one-out
    # error (which such a kernel cannot lower) certifies no rank, so the
    # rounds end with every row, exact kernel ridge ...
    auto = _fit(cls, X, y, **kw)
    assert auto.n_components_ == N and auto.nystroem_.exact_
    np.testing.assert_allclose(auto.predict(X), y / 1.5, atol=1e-10)
    # ... and the degrees of freedom, n / (1 + alpha) for every point, all.
    est = _fit(cls, X, y, n_components="dof", **kw)
    assert est.n_components_ == N
    np.testing.assert_allclose(est.predict(X), y / 1.5, atol=1e-10)
    np.testing.assert_allclose(est.predict(X + 1.0), 0.0, atol=1e-10)


@pytest.mark.parametrize("cls", ESTIMATORS[1:3], ids=NAMES[1:3])
def test_tiny_gamma_kernel_is_all_ones(cls):
    # K is all ones up to 1e-12: one landmark, the intercept does the rest.
    X, y = _data()
    est = _fit(cls, X, y, gamma=1e-14)
    assert est.n_components_ <= 3
    np.testing.assert_allclose(est.predict(X), y.mean(), atol=1e-6)


# ---------------------------------------------------------------------------
# Input types: pandas, sparse, float32, object, lists.


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_pandas_feature_names(cls):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    est = _fit(cls, frame, pd.Series(y))
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c"])
    expected = _output(_fit(cls, X, y), X)
    np.testing.assert_allclose(_output(est, frame), expected, atol=1e-12)
    with pytest.raises(ValueError, match="feature names should match"):
        _output(est, frame.rename(columns={"c": "d"}))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        _output(est, X)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_sparse_input_equals_dense(cls, fmt):
    X, y = _data()
    X[X < 0] = 0.0
    # (On sparse input DoFKernelRidgeCV's default kernel is "rbf", not learned.)
    params = {"kernel": "rbf"} if cls is DoFKernelRidgeCV else {}
    dense = _output(_fit(cls, X, y, **params), X)
    Xs = sparse.csr_matrix(X).asformat(fmt)
    np.testing.assert_allclose(
        _output(_fit(cls, Xs, y, **params), Xs), dense, atol=1e-10
    )


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_sparse_precomputed_kernel(cls):
    X, y = _data()
    K = rbf_kernel(X, gamma=0.5)
    dense = _output(_fit(cls, K, y, kernel="precomputed"), K)
    Ks = sparse.csc_matrix(K)
    est = _fit(cls, Ks, y, kernel="precomputed")
    np.testing.assert_allclose(_output(est, Ks), dense, atol=1e-10)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_float32_and_object_and_list_input(cls):
    X, y = _data()
    expected = _output(_fit(cls, X, y), X)
    est = _fit(cls, X.astype(np.float32), y)
    out = _output(est, X.astype(np.float32))
    if cls is DoFNystroem:
        assert out.dtype == np.float32
        out = out @ out.T
        expected = expected @ expected.T
    np.testing.assert_allclose(out, expected, atol=1e-3)
    for other in (X.astype(object), X.tolist(), X.astype(str)):
        np.testing.assert_allclose(
            _output(_fit(cls, other, y), X), _output(_fit(cls, X, y), X), atol=1e-12
        )


# ---------------------------------------------------------------------------
# Public functions.

_K = rbf_kernel(_data()[0], gamma=0.5)


@pytest.mark.parametrize(
    "K, error, message",
    [
        (_with(_K, 1, 2, np.nan), ValueError, "Input K contains NaN"),
        (_with(_K, 1, 2, np.inf), ValueError, "Input K contains infinity"),
        (_K[:, :5], ValueError, r"K must be a square matrix; got shape \(40, 5\)"),
        (np.zeros((0, 0)), ValueError, r"0 sample\(s\)"),
        (_K[0], ValueError, "Expected 2D array"),
        (_K + 1j, ValueError, "Complex data not supported"),
        (sparse.csr_matrix(_K), InvalidParameterError, "'K' parameter"),
    ],
    ids=["NaN", "inf", "not square", "empty", "1d", "complex", "sparse"],
)
@pytest.mark.parametrize("function", [degrees_of_freedom, pivoted_cholesky])
def test_matrix_functions_bad_K(function, K, error, message):
    with pytest.raises(error, match=message):
        function(K, 1.0) if function is degrees_of_freedom else function(K, 5)


def test_matrix_functions_warn_on_non_psd_and_tiny_alpha():
    with pytest.warns(NonPSDKernelWarning, match="K is not positive semi-definite"):
        dof = degrees_of_freedom(-_K, 1.0)
    assert dof.d_eff == 0.0  # the PSD part of -K is zero
    with pytest.warns(NonPSDKernelWarning, match="diagonal has negative entries"):
        pivots, G = pivoted_cholesky(-_K, 5)
    assert G.shape == (N, 0)
    with pytest.warns(PenaltyResolutionWarning, match="alpha=1e-300"):
        dof = degrees_of_freedom(_K, 1e-300)
    assert 0 < dof.d_eff <= N
    with pytest.raises(InvalidParameterError, match="'alpha' parameter"):
        degrees_of_freedom(_K, 0.0)
    with pytest.raises(InvalidParameterError, match="'n_components' parameter"):
        pivoted_cholesky(_K, 0)
    with pytest.raises(InvalidParameterError, match="'rtol' parameter"):
        pivoted_cholesky(_K, 5, rtol=1.0)


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"alpha": 0.0}, InvalidParameterError, "'alpha' parameter"),
        ({"kernel": "gaussian"}, InvalidParameterError, "'kernel' parameter"),
        ({"kernel_params": {"gama": 1}}, ValueError, r"kernel_params has \['gama'\]"),
        ({"gamma": -1.0}, InvalidParameterError, "'gamma' parameter"),
        ({"n_columns": 0}, InvalidParameterError, "'n_columns' parameter"),
        ({"sampling": "x"}, InvalidParameterError, "'sampling' parameter"),
        ({"kernel": "precomputed"}, ValueError, "must be square"),
        ({"kernel": _answers_with(np.nan)}, ValueError, "returned non-finite"),
        ({"X": _with(_K, 0, 0, np.nan)}, ValueError, "Input contains NaN"),
        ({"X": _K + 1j}, ValueError, "Complex data not supported"),
    ],
)
def test_estimate_degrees_of_freedom_bad_input(params, error, message):
    kwargs = {"X": _data(n=12)[0], "alpha": 1.0, **params}
    with pytest.raises(error, match=message):
        estimate_degrees_of_freedom(kwargs.pop("X"), kwargs.pop("alpha"), **kwargs)


def test_estimate_degrees_of_freedom_warns_on_non_psd_kernels():
    X, _ = _data()
    with pytest.warns(NonPSDKernelWarning, match="'sigmoid' is not positive"):
        dof = estimate_degrees_of_freedom(X, 1.0, kernel="sigmoid", random_state=0)
    assert np.isfinite([dof.d_max, dof.d_eff, dof.d_ave]).all()


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((5, 0.0), InvalidParameterError, "alpha must be a float > 0"),
        ((5, -1.0), InvalidParameterError, "alpha must be a float > 0"),
        ((5, np.inf), InvalidParameterError, "alpha must be finite"),
        ((5, 1.0, "nan"), ValueError, "Input G contains NaN"),
        ((5, 1.0, "short"), ValueError, r"residual must have shape \(40,\)"),
        ((5, 1.0, "negative"), ValueError, "must be non-negative"),
        ((5, 1.0, "pivots"), ValueError, "pivots must be a 1d array of row indices"),
    ],
)
def test_leverage_score_bounds_bad_input(args, error, message):
    p, alpha = args[:2]
    pivots, G = pivoted_cholesky(_K, p)
    residual = np.clip(np.diag(_K) - (G * G).sum(1), 0, None)
    case = args[2] if len(args) > 2 else None
    if case == "nan":
        G = _with(G, 0, 0, np.nan)
    elif case == "short":
        residual = residual[:30]
    elif case == "negative":
        residual = residual - 1.0
    elif case == "pivots":
        pivots = np.array([0, 100])
    with pytest.raises(error, match=message):
        leverage_score_bounds(G, pivots, residual, alpha)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dof_rank(np.nan), "'d_max' parameter"),
        (lambda: dof_rank(np.inf), "'d_max' parameter"),
        (lambda: dof_rank(-1.0), "'d_max' parameter"),
        (lambda: dof_rank(1.0, "foo"), "'sampling' parameter"),
        (lambda: dof_rank(1.0, n_samples=0), "'n_samples' parameter"),
        (lambda: theoretical_rank(np.nan, 100, 1.0), "'d_max' parameter"),
        (lambda: theoretical_rank(1.0, 100, 0.0), "'alpha' parameter"),
        (lambda: theoretical_rank(1.0, 0, 1.0), "'n_samples' parameter"),
        (lambda: theoretical_rank(1.0, 100, 1.0, delta=0), "'delta' parameter"),
        (lambda: uniform_columns(0, 1), "'n_samples' parameter"),
        (lambda: uniform_columns(10, 0), "'n_components' parameter"),
        (lambda: uniform_columns(3.5, 1), "'n_samples' parameter"),
    ],
)
def test_rank_and_column_functions_bad_input(call, message):
    with pytest.raises(InvalidParameterError, match=message):
        call()


def test_rank_functions_clip():
    with pytest.warns(UserWarning, match="exceeds n_samples=100; capped"):
        assert theoretical_rank(50.0, 100, 1.0) == 100
    assert dof_rank(1e6, n_samples=10) == 10
    assert sorted(uniform_columns(3, 10, random_state=0)) == [0, 1, 2]


def test_dataset_bad_input():
    with pytest.raises(ValueError, match="Exactly one of 'beta' and 'rho'"):
        make_periodic_spline(10, beta=2, rho=1.0)
    with pytest.raises(InvalidParameterError, match="'n_samples' parameter"):
        make_periodic_spline(0)
    with pytest.raises(InvalidParameterError, match="'beta' parameter"):
        make_periodic_spline(10, beta=0.5)


@pytest.mark.parametrize(
    "X, y",
    [
        (np.ones((30, 2)), None),  # constant features: gamma falls back to 1
        (None, np.ones(30)),  # constant target: exact MSE is 0, no ratio
    ],
    ids=["constant X", "constant y"],
)
def test_cli_degenerate_data(tmp_path, capsys, X, y):
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2) if X is None else X
    y = rng.randn(30) if y is None else y
    np.savez(tmp_path / "data.npz", X=X, y=y)
    assert main(["--data", str(tmp_path / "data.npz")]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\b(nan|inf)\b", out.lower()), out


@pytest.mark.parametrize(
    "content, message",
    [
        ("1,2,3\n4,nan,6\n" * 4, "holds NaN or infinite values"),
        ("1,2,3\n4,x,6\n" * 4, "as a numeric CSV file"),
        ("", "is empty"),
        ("1,2,3\n" * 4, "at least 6 are needed"),
    ],
    ids=["NaN", "text", "empty", "few rows"],
)
def test_cli_bad_files(tmp_path, capsys, content, message):
    (tmp_path / "data.csv").write_text(content)
    with pytest.raises(SystemExit) as exc_info:
        main(["--data", str(tmp_path / "data.csv")])
    assert exc_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ---------------------------------------------------------------------------
# Determinism and concurrency.


def _params(cls, sampling):
    return dict(gamma=0.5, sampling=sampling, random_state=0)


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_same_seed_same_result_across_runs_and_n_jobs(cls, sampling):
    X, y = _data(n=120)
    reference = _output(_fit(cls, X, y, **_params(cls, sampling)), X)
    for n_jobs in (None, 1, 2):
        est = _fit(cls, X, y, n_jobs=n_jobs, **_params(cls, sampling))
        np.testing.assert_array_equal(_output(est, X), reference)
    cloned = clone(_fit(cls, X, y, **_params(cls, sampling)))
    if cls is DoFNystroem:
        cloned.fit(X)
    else:
        cloned.fit(X, _target(cls, y))
    np.testing.assert_array_equal(_output(cloned, X), reference)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_predictions_from_several_threads(cls):
    X, y = _data(n=300)
    est = _fit(cls, X, y, gamma=0.5)
    chunks = [X[i : i + 7] for i in range(0, 300, 7)] * 3
    serial = [_output(est, chunk) for chunk in chunks]
    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(lambda chunk: _output(est, chunk), chunks))
    for a, b in zip(serial, concurrent, strict=True):
        np.testing.assert_array_equal(a, b)
    if cls is DoFKernelLogisticRegression:
        with ThreadPoolExecutor(4) as pool:
            labels = list(pool.map(est.predict, chunks))
        for chunk, got in zip(chunks, labels, strict=True):
            np.testing.assert_array_equal(got, est.predict(chunk))


GRIDS = {
    DoFNystroem: {"dofnystroem__alpha": [0.1, 10.0]},
    DoFKernelRidge: {"alpha": [0.1, 10.0]},
    DoFKernelRidgeCV: {"alphas": [(0.1, 1.0), (10.0,)], "criterion": ["loo", "gcv"]},
    DoFKernelLogisticRegression: {"alpha": [0.1, 10.0]},
}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_grid_search_in_processes_raises_nothing(cls):
    X, y = _data(n=60)
    if cls is DoFNystroem:  # a transformer: searched ahead of a Ridge
        model, prefix = (
            make_pipeline(DoFNystroem(random_state=0), Ridge()),
            "dofnystroem__",
        )
    else:
        model, prefix = cls(random_state=0), ""
    grid = {
        **GRIDS[cls],
        prefix + "sampling": SAMPLINGS,
        prefix + "n_components": [5, "auto"],
        prefix + "kernel": ["rbf", "laplacian"],
    }
    search = GridSearchCV(model, grid, cv=2, n_jobs=2, error_score="raise")
    search.fit(X, _target(cls, y))
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == np.prod([len(v) for v in grid.values()])
    assert np.isfinite(scores).all()


# ---------------------------------------------------------------------------
# Serving safety.


def _skops_file(est, tmp_path):
    sio = pytest.importorskip("skops.io")
    path = tmp_path / "model.skops"
    sio.dump(est, path)
    return sio, path


@pytest.mark.parametrize("cls", ESTIMATORS, ids=NAMES)
def test_skops_refuses_untrusted_types_by_default(cls, tmp_path):
    X, y = _data()
    est = _fit(cls, X, y)
    sio, path = _skops_file(est, tmp_path)
    from skops.io.exceptions import UntrustedTypesFoundException

    with pytest.raises(UntrustedTypesFoundException):
        sio.load(path)
    untrusted = sio.get_untrusted_types(file=path)
    # (A learned kernel is a scikit-learn kernel object, which skops does
    # not trust by default either.)
    trusted = ("sklearn_dof.", "sklearn.gaussian_process.kernels.")
    assert untrusted and all(t.startswith(trusted) for t in untrusted)
    loaded = sio.load(path, trusted=untrusted)
    np.testing.assert_array_equal(_output(loaded, X), _output(est, X))


def test_skops_lists_a_callable_kernel_as_untrusted(tmp_path):
    # A user function travels with the model: the documented check (only
    # sklearn_dof.* types) flags it instead of running it blindly.
    X, y = _data()
    est = DoFKernelRidge(kernel=_linear, n_components=3).fit(X, y)
    sio, path = _skops_file(est, tmp_path)
    untrusted = sio.get_untrusted_types(file=path)
    assert any(not t.startswith("sklearn_dof.") for t in untrusted), untrusted


def test_readme_documents_serving_safety():
    readme = (Path(__file__).resolve().parents[1] / "README.rst").read_text()
    section = readme.split("Persistence and serving")[1].split("Development")[0]
    assert "execute code" in section and "trust" in section
    assert "get_untrusted_types" in section and "trusted=" in section


def test_penalty_below_rounding_does_not_blow_up_the_ridge_solve():
    # Eigenvalues of Phi^T Phi at rounding level must not be divided by a
    # penalty below them (the solve keeps to the numerical range).
    data = make_periodic_spline(400, beta=8, delta=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DoFKernelRidge(
            alpha=1e-30, kernel="precomputed", fit_intercept=False, random_state=0
        ).fit(data.K, data.y)
    assert np.mean((model.predict(data.K) - data.f) ** 2) < 1.0


@pytest.mark.parametrize("sampling", ["pivoted", "rpcholesky", "leverage"])
def test_kernel_vanishing_on_the_data_fits_an_intercept(sampling):
    X, y = np.zeros((4, 2)), np.arange(4.0)
    model = DoFKernelRidge(kernel="linear", sampling=sampling, random_state=0)
    np.testing.assert_allclose(model.fit(X, y).predict(X), 1.5)
    assert model.n_components_ == 1


def test_newton_started_at_the_optimum_converges_without_warning():
    y = np.array([0, 1] * 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = DoFKernelLogisticRegression(kernel="linear").fit(np.zeros((40, 3)), y)
    assert clf.n_iter_[0] == 0
    np.testing.assert_allclose(clf.predict_proba(np.zeros((1, 3))), 0.5)


def _fit_transformer(X, y):
    return DoFNystroem(n_components=50).fit(X, y)


def _fit_in_pipeline(X, y):
    return make_pipeline(DoFNystroem(n_components=50), Ridge()).fit(X, y)


def _fit_ridge(X, y):
    return DoFKernelRidge(n_components=50).fit(X, y)


def _fit_capped(X, y):
    # At this tiny penalty the certificate asks for more than 4 columns.
    return DoFKernelRidge(alpha=1e-6, gamma=2.0, max_components=4, random_state=0).fit(
        X, y
    )


def _fit_cv_capped(X, y):
    return DoFKernelRidgeCV(
        alphas=[1e-6, 1e-5], gamma=2.0, max_components=4, random_state=0
    ).fit(X, y)


def _fit_logistic(X, y):
    return DoFKernelLogisticRegression(alpha=1e-6, max_iter=1).fit(X, y > 0)


def _rank_beyond_n(X, y):
    return theoretical_rank(30.0, X.shape[0], 1e-3)


@pytest.mark.parametrize(
    "entry_point",
    [
        _fit_transformer,
        _fit_in_pipeline,
        _fit_ridge,
        _fit_capped,
        _fit_cv_capped,
        _fit_logistic,
        _rank_beyond_n,
    ],
)
def test_warnings_point_at_the_callers_line(entry_point):
    # However deep in the package a warning is raised, and through
    # scikit-learn's wrappers and Pipeline, it names the user's file: here
    # this one.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (40, 2))
    y = np.sin(3 * X[:, 0]) + 0.05 * rng.randn(40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entry_point(X, y)
    assert caught, "the entry point no longer warns: the test lost its subject"
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}, [
        (w.filename, str(w.message)[:60]) for w in caught
    ]
