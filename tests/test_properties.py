"""Property-based tests (hypothesis) of the invariants of issue 7.

Random shapes (n <= 60), scales and parameters; every test runs a bounded,
derandomised set of examples so that the file stays fast and CI is
reproducible.
"""

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics.pairwise import pairwise_kernels

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
    uniform_columns,
)

# 25 fixed examples per test in CI; SKLEARN_DOF_HYPOTHESIS_EXAMPLES=2000 runs
# that many random ones instead, to hunt for counterexamples.
_EXAMPLES = os.environ.get("SKLEARN_DOF_HYPOTHESIS_EXAMPLES")
SETTINGS = settings(
    max_examples=int(_EXAMPLES or 25),
    deadline=None,
    derandomize=_EXAMPLES is None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

KERNELS = ["rbf", "laplacian", "linear", "poly", "cosine"]


def _samplings():
    """Every named landmark sampler the estimators accept."""
    for constraint in DoFNystroem._parameter_constraints["sampling"]:
        if hasattr(constraint, "options"):
            return sorted(constraint.options)
    return ["pivoted", "uniform"]


SAMPLINGS = _samplings()
# Samplers driven by the residual diagonal: no landmark when it is all zero.
SCALES = [1e-3, 1e-1, 1.0, 10.0, 1e3]
# Rounding allowance, relative to the largest kernel value.  The feature map
# drops eigenvalues of K(I, I) below 1e-12 of the largest, which moves
# Phi Phi^T by up to about sqrt(1e-12) of the kernel's scale.
RTOL = 1e-5


@st.composite
def data(draw, min_n=2, max_n=60, max_features=4):
    """(X, scale): bounded floats times a scale, zeros and repeats included."""
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, max_features))
    scale = draw(st.sampled_from(SCALES))
    elements = st.floats(-1, 1, allow_nan=False, allow_infinity=False)
    X = draw(arrays(np.float64, (n, d), elements=elements))
    return X * scale, scale


@st.composite
def kernels(draw, scale, n_features):
    """(kernel, params) with gamma set relative to the data's scale."""
    kernel = draw(st.sampled_from(KERNELS))
    relative = draw(st.sampled_from([0.01, 0.3, 3.0, 100.0]))
    params = {}
    if kernel in ("rbf", "laplacian", "poly"):
        params["gamma"] = relative / (n_features * scale**2)
    if kernel == "poly":
        params.update(degree=draw(st.sampled_from([1, 2, 3])), coef0=1.0)
    return kernel, params


def _kernel_matrix(X, kernel, params):
    return pairwise_kernels(X, metric=kernel, filter_params=True, **params)


def _penalty(draw, K):
    """alpha from 1e-6 to 1e3 times the kernel's scale (resolved in float64)."""
    exponent = draw(st.integers(-6, 3))
    scale = float(np.abs(np.diag(K)).max())
    return 10.0**exponent * (scale if scale > 0 else 1.0)


def _exact_tolerance(K, alpha):
    """Accuracy of the "exact" scores: the eigendecomposition of K leaves
    rounding eigenvalues of about n eps ||K||, which t / (t + alpha) turns
    into score errors of that over alpha."""
    n = K.shape[0]
    return 1e-9 + 10 * n * np.finfo(float).eps * float(np.trace(np.abs(K))) / alpha


@SETTINGS
@given(st.data())
def test_features_reproduce_the_kernel_on_landmark_columns(hyp):
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    n_components = hyp.draw(st.sampled_from(["auto", 1, 5, 30, 60]))
    sampling = hyp.draw(st.sampled_from(SAMPLINGS))
    K = _kernel_matrix(X, kernel, params)
    nys = DoFNystroem(
        kernel=kernel,
        kernel_params=params,
        n_components=n_components,
        sampling=sampling,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components > n_samples
        Phi = nys.fit_transform(X)
    atol = RTOL * max(float(np.abs(K).max()), np.finfo(float).tiny)
    idx = nys.component_indices_
    assert Phi.shape == (X.shape[0], nys.n_components_)
    assert np.isfinite(Phi).all()
    L = Phi @ Phi.T
    # Exact on the landmark columns ...
    np.testing.assert_allclose(L[:, idx], K[:, idx], atol=atol)
    # ... and below K in the Loewner order elsewhere (diag(K - L) >= 0).
    assert np.diag(K - L).min() >= -atol
    assert np.linalg.eigvalsh(K - L).min() >= -atol * X.shape[0]


@SETTINGS
@given(st.data())
def test_exact_leverage_scores_and_dof_ordering(hyp):
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    K = _kernel_matrix(X, kernel, params)
    alpha = _penalty(hyp.draw, K)
    dof = degrees_of_freedom(K, alpha)
    n = X.shape[0]
    scores = dof.leverage_scores
    assert ((scores >= -1e-12) & (scores <= 1 + 1e-12)).all()
    assert dof.d_eff == pytest.approx(scores.sum())
    assert dof.d_max == pytest.approx(n * scores.max())
    assert dof.d_ave <= dof.d_eff * (1 + 1e-12) + 1e-12
    assert dof.d_eff <= dof.d_max * (1 + 1e-12) + 1e-12
    assert dof.d_max <= n * (1 + 1e-12)


@SETTINGS
@given(st.data())
def test_fitted_dof_estimates_keep_their_order(hyp):
    # d_ave <= d_eff <= d_max also for the estimates a fitted DoFNystroem
    # reports.
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    K = _kernel_matrix(X, kernel, params)
    sampling = hyp.draw(st.sampled_from(SAMPLINGS))
    nys = DoFNystroem(
        kernel=kernel,
        kernel_params=params,
        alpha=_penalty(hyp.draw, K),
        n_components=hyp.draw(st.sampled_from(["auto", 1, 5, 30])),
        sampling=sampling,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components > n_samples
        nys.fit(X)
    tol = 1e-9 * X.shape[0]
    assert 0 <= nys.averaged_dof_ <= nys.effective_dof_ + tol
    assert nys.effective_dof_ <= nys.dof_ + tol
    assert nys.dof_ <= X.shape[0] * (1 + 1e-9)


@SETTINGS
@given(st.data())
def test_dof_decrease_with_alpha(hyp):
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    K = _kernel_matrix(X, kernel, params)
    small = _penalty(hyp.draw, K)
    large = small * hyp.draw(st.sampled_from([1.0 + 1e-6, 2.0, 1e3]))
    a, b = degrees_of_freedom(K, small), degrees_of_freedom(K, large)
    tol = 1e-10
    assert (a.leverage_scores >= b.leverage_scores - tol).all()
    assert a.d_eff >= b.d_eff - tol * X.shape[0]
    assert a.d_max >= b.d_max - tol * X.shape[0]
    assert a.d_ave >= b.d_ave - tol * X.shape[0]


@SETTINGS
@given(st.data())
def test_estimated_bounds_bracket_the_exact_scores(hyp):
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    K = _kernel_matrix(X, kernel, params)
    alpha = _penalty(hyp.draw, K)
    n_columns = hyp.draw(st.sampled_from([None, 1, 3, 10, 60]))
    sampling = hyp.draw(st.sampled_from(SAMPLINGS))
    estimate = estimate_degrees_of_freedom(
        X,
        alpha,
        kernel=kernel,
        kernel_params=params,
        n_columns=n_columns,
        sampling=sampling,
        random_state=0,
    )
    exact = degrees_of_freedom(K, alpha).leverage_scores
    lower, upper = estimate.lower, estimate.upper
    tol = _exact_tolerance(K, alpha)
    assert ((lower >= -tol) & (upper <= 1 + tol)).all()
    assert (lower <= exact + tol).all() and (exact <= upper + tol).all()
    assert (lower <= estimate.leverage_scores + tol).all()
    assert (estimate.leverage_scores <= upper + tol).all()
    if sampling == "leverage":  # its columns depend on alpha
        return
    # Same columns, larger penalty: the lower bounds can only shrink.
    more = estimate_degrees_of_freedom(
        X,
        2.0 * alpha,
        kernel=kernel,
        kernel_params=params,
        n_columns=max(1, estimate.n_columns),
        sampling=sampling,
        random_state=0,
    )
    assert (more.lower <= lower + tol).all()


@SETTINGS
@given(st.data())
def test_pivoted_cholesky_and_bounds_on_its_factor(hyp):
    X, scale = hyp.draw(data())
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    K = _kernel_matrix(X, kernel, params)
    p = hyp.draw(st.integers(1, 60))
    pivots, G = pivoted_cholesky(K, p)
    n = X.shape[0]
    atol = RTOL * max(float(np.abs(K).max()), np.finfo(float).tiny)
    assert len(pivots) == G.shape[1] <= min(p, n)
    assert len(set(pivots.tolist())) == len(pivots)
    np.testing.assert_allclose((G @ G.T)[:, pivots], K[:, pivots], atol=atol)
    residual = np.diag(K) - (G * G).sum(axis=1)
    assert residual.min() >= -atol
    alpha = _penalty(hyp.draw, K)
    lower, estimate, upper = leverage_score_bounds(
        G, pivots, np.clip(residual, 0, None), alpha
    )
    exact = degrees_of_freedom(K, alpha).leverage_scores
    tol = _exact_tolerance(K, alpha)
    assert (lower <= exact + tol).all() and (exact <= upper + tol).all()
    assert (lower <= estimate + 1e-12).all() and (estimate <= upper + 1e-12).all()


ESTIMATORS = [
    DoFNystroem,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFKernelLogisticRegression,
]


def _fit_and_output(cls, X, y, params, sample_weight=None, X_out=None):
    X_out = X if X_out is None else X_out
    est = cls(**params)
    if cls is DoFNystroem:
        Phi = est.fit(X).transform(X_out)
        return est, Phi @ Phi.T
    est.fit(X, y, sample_weight=sample_weight)
    if cls is DoFKernelLogisticRegression:
        return est, est.predict_proba(X_out)
    return est, est.predict(X_out)


def _labels(y):
    return (y > np.median(y)).astype(int)


@SETTINGS
@given(st.data())
def test_every_estimator_is_finite_on_random_problems(hyp):
    X, scale = hyp.draw(data(min_n=4))
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    cls = hyp.draw(st.sampled_from(ESTIMATORS))
    K = _kernel_matrix(X, kernel, params)
    alpha = _penalty(hyp.draw, K)
    y = hyp.draw(arrays(np.float64, X.shape[0], elements=st.floats(-1e3, 1e3)))
    if cls is DoFKernelLogisticRegression:
        y = _labels(y)
        assume(len(np.unique(y)) == 2)
    sampling = hyp.draw(st.sampled_from(SAMPLINGS))
    est_params = {
        "kernel": kernel,
        "kernel_params": params,
        "n_components": hyp.draw(st.sampled_from(["auto", 1, 7, 60])),
        "sampling": sampling,
        "random_state": 0,
        **({"alphas": [alpha, 10 * alpha]} if cls is DoFKernelRidgeCV else {}),
        **({} if cls is DoFKernelRidgeCV else {"alpha": alpha}),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components > n_samples
        est, out = _fit_and_output(cls, X, y, est_params)
    assert np.isfinite(out).all()
    assert 1 <= est.n_components_ <= X.shape[0]
    assert np.isfinite([est.dof_, est.effective_dof_]).all()
    assert 0 <= est.effective_dof_ <= X.shape[0] * (1 + 1e-9)
    assert 0 <= est.dof_ <= X.shape[0] * (1 + 1e-9)


@SETTINGS
@given(st.data())
def test_predictions_invariant_to_row_order_with_all_rows_as_landmarks(hyp):
    # n_components = n: the landmark set is the whole training set whatever
    # its order, so a permutation of the rows must not change predictions.
    X, scale = hyp.draw(data(min_n=4, max_n=40))
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    cls = hyp.draw(st.sampled_from(ESTIMATORS[1:]))
    n = X.shape[0]
    K = _kernel_matrix(X, kernel, params)
    alpha = _penalty(hyp.draw, K)
    rng = np.random.RandomState(hyp.draw(st.integers(0, 2**16)))
    y = rng.randn(n)
    if cls is DoFKernelLogisticRegression:
        y = _labels(y)
        assume(len(np.unique(y)) == 2)
        alpha = max(alpha, 1e-3)  # well-posed Newton problem
    weights = rng.uniform(0.5, 2.0, n) if hyp.draw(st.booleans()) else None
    perm = rng.permutation(n)
    sampling = hyp.draw(st.sampled_from(SAMPLINGS))
    est_params = {
        "kernel": kernel,
        "kernel_params": params,
        "n_components": n,
        "sampling": sampling,
        "fit_intercept": hyp.draw(st.booleans()),
        "random_state": 0,
        # One penalty for the CV: two can tie exactly on degenerate data (a
        # single informative row), and rounding then picks either.
        **({"alphas": [alpha]} if cls is DoFKernelRidgeCV else {"alpha": alpha}),
    }
    est_a, a = _fit_and_output(cls, X, y, est_params, weights)
    w_perm = None if weights is None else weights[perm]
    est_b, b = _fit_and_output(cls, X[perm], y[perm], est_params, w_perm, X_out=X)
    atol = 1e-5 if cls is DoFKernelLogisticRegression else 1e-6
    np.testing.assert_allclose(b, a, atol=atol * max(1.0, float(np.abs(a).max())))
    if cls is DoFKernelRidgeCV:  # the leave-one-out score is a sum over rows
        assert est_b.best_score_ == pytest.approx(est_a.best_score_, rel=1e-6)


@SETTINGS
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(10, 60),
    n_features=st.integers(1, 4),
    p=st.integers(1, 9),
    scale=st.sampled_from(SCALES),
    fit_intercept=st.booleans(),
)
def test_pivoted_landmarks_predictions_invariant_to_row_order(
    seed, n, n_features, p, scale, fit_intercept
):
    # Greedy pivots are chosen by the data, not by their order (no ties with
    # continuous data and a kernel of varying diagonal): same landmark set.
    rng = np.random.RandomState(seed)
    X = scale * rng.randn(n, n_features)
    y = rng.randn(n)
    perm = rng.permutation(n)
    params = dict(
        kernel="poly",
        degree=2,
        gamma=1.0 / scale**2,
        alpha=1.0,
        n_components=p,
        sampling="pivoted",
        fit_intercept=fit_intercept,
    )
    a = DoFKernelRidge(**params).fit(X, y)
    b = DoFKernelRidge(**params).fit(X[perm], y[perm])
    assert sorted(perm[b.nystroem_.component_indices_]) == sorted(
        a.nystroem_.component_indices_
    )
    np.testing.assert_allclose(b.predict(X), a.predict(X), rtol=1e-6, atol=1e-8)


@SETTINGS
@given(st.data())
def test_ridge_predictions_are_linear_in_y(hyp):
    # The landmarks never look at y, so predictions scale with the targets.
    X, scale = hyp.draw(data(min_n=3))
    kernel, params = hyp.draw(kernels(scale, X.shape[1]))
    cls = hyp.draw(st.sampled_from([DoFKernelRidge, DoFKernelRidgeCV]))
    y = np.random.RandomState(0).randn(X.shape[0])
    factor = hyp.draw(st.sampled_from([-3.0, 1e-3, 1e3]))
    est_params = {"kernel": kernel, "kernel_params": params, "random_state": 0}
    _, a = _fit_and_output(cls, X, y, est_params)
    _, b = _fit_and_output(cls, X, factor * y, est_params)
    np.testing.assert_allclose(b, factor * a, rtol=1e-7, atol=1e-9 * abs(factor))


@SETTINGS
@given(
    d=st.lists(st.floats(0, 1e4), min_size=2, max_size=2),
    n=st.integers(1, 10**6),
    sampling=st.sampled_from(["uniform", "pivoted"]),
)
def test_auto_rank_is_monotone_and_bounded(d, n, sampling):
    low, high = sorted(d)
    p_low, p_high = dof_rank(low, sampling, n), dof_rank(high, sampling, n)
    assert 1 <= p_low <= p_high <= n
    assert p_high >= min(n, high)


@SETTINGS
@given(n=st.integers(1, 500), p=st.integers(1, 600), seed=st.integers(0, 2**16))
def test_uniform_columns_are_nested_distinct_and_in_range(n, p, seed):
    columns = uniform_columns(n, p, random_state=seed)
    assert len(columns) == min(n, p) == len(set(columns.tolist()))
    assert ((0 <= columns) & (columns < n)).all()
    fewer = uniform_columns(n, max(1, p // 2), random_state=seed)
    np.testing.assert_array_equal(columns[: len(fewer)], fewer)
