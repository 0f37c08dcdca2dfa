import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import linalg, sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_dof import (
    DoFNystroem,
    _exact_screen,
    _landmark_block,
    _linalg,
    _ridge,
    _ridge_solve,
    _tiles,
    config_context,
    degrees_of_freedom,
)
from sklearn_dof._ridge import DoFKernelRidge, DoFKernelRidgeCV

from .conftest import load_shared

ALPHAS = (0.3, 1.0, 3.0, 10.0, 30.0)
GAMMA = 0.05


def _make_data(n_samples, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, size=(n_samples, 2))
    f = np.c_[np.sin(X[:, 0]) + np.cos(X[:, 1]), X[:, 0] * np.cos(X[:, 1])]
    y = f + 0.3 * rng.randn(n_samples, 2) + np.array([2.0, -1.0])
    sample_weight = rng.uniform(0.2, 3.0, size=n_samples)
    return X, y, sample_weight


@pytest.fixture(scope="module")
def data():
    return _make_data(150)


@pytest.fixture(scope="module")
def small_data():
    return _make_data(80, seed=1)


def _targets(y, multioutput):
    return y if multioutput else y[:, 0]


def _fitted_features(model, X):
    """``K(X, I) R^{-1}``, ``R^T R = K(I, I) + s I``: the features a fit on a
    shifted landmark block solves the ridge problem with."""
    nystroem = model.nystroem_
    gram = nystroem._landmark_gram()
    n_train = X.shape[0]  # the training rows
    penalty = model.alpha * nystroem.n_components_ / n_train
    R = _linalg.shifted_landmark_cholesky(gram, penalty)[0]
    K = rbf_kernel(X, nystroem.components_, gamma=nystroem.gamma)
    return linalg.solve_triangular(R, K.T, trans="T").T


def _route_atol(model):
    """Tolerance of a comparison of ``model`` with the pseudo-inverse
    features of ``DoFNystroem``.

    Where ``_landmark_cholesky`` refuses ``K(I, I)`` (reciprocal condition
    below ``_linalg.PINV_RTOL``; the smooth kernel of GAMMA on these data), the fit
    factors ``K(I, I) + s I`` instead of computing ``K(I, I)^{+1/2}``: the two
    Nystroem approximations differ in the directions of ``K(I, I)`` with
    eigenvalues near the shift, at about 1e-6 of the predictions here.
    """
    gram = model.nystroem_._landmark_gram()
    return 1e-8 if _linalg.landmark_cholesky(gram) is not None else 1e-5


# --------------------------------------------------------------------------
# DoFKernelRidge


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
@pytest.mark.parametrize("multioutput", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_ridge_equals_pipeline(
    data, fit_intercept, sampling, multioutput, weighted
):
    X, y, sw = data
    y = _targets(y, multioutput)
    sw = sw if weighted else None
    a = 2.0
    params = dict(gamma=GAMMA, sampling=sampling, random_state=0)
    model = DoFKernelRidge(alpha=a, fit_intercept=fit_intercept, **params)
    model.fit(X, y, sample_weight=sw)
    pipe = make_pipeline(
        DoFNystroem(alpha=a, **params), Ridge(alpha=a, fit_intercept=fit_intercept)
    ).fit(X, y, ridge__sample_weight=sw)

    nys, ridge = pipe[0], pipe[-1]
    assert model.n_components_ == nys.n_components_ < X.shape[0]
    np.testing.assert_array_equal(
        model.nystroem_.component_indices_, nys.component_indices_
    )
    # The estimator's scores come from its certificate's pass, the
    # transformer's (no targets) from a solve of their own: equal up to
    # rounding.
    np.testing.assert_allclose(model.dof_, nys.dof_, rtol=1e-12)
    np.testing.assert_allclose(model.effective_dof_, nys.effective_dof_, rtol=1e-12)
    assert model.coef_.shape == ridge.coef_.shape
    assert np.shape(model.intercept_) == np.shape(ridge.intercept_)
    atol = _route_atol(model)
    if atol == 1e-8:
        # (coef_ of a shifted fit maps its landmark weights through
        # K(I, I)^{+1/2}, ill-conditioned: comparable predictions only.)
        np.testing.assert_allclose(model.coef_, ridge.coef_, rtol=1e-8, atol=atol)
    np.testing.assert_allclose(model.intercept_, ridge.intercept_, atol=atol)
    X_test = _make_data(40, seed=5)[0]
    for Z in (X, X_test):
        np.testing.assert_allclose(
            model.predict(Z), pipe.predict(Z), rtol=1e-8, atol=atol
        )


def test_kernel_ridge_is_low_rank_kernel_ridge(data):
    # Without intercept nor weights: predictions L (L + alpha I)^-1 y with L the
    # Nystroem approximation of the kernel matrix on the chosen columns.
    # (A rougher kernel than GAMMA and a fixed rank keep K(I, I) well
    # conditioned, so that the pseudo-inverse below is an accurate reference.)
    X, y, _ = data
    a, gamma = 1.5, 0.5
    model = DoFKernelRidge(
        a, gamma=gamma, n_components=40, fit_intercept=False, random_state=0
    )
    model.fit(X, y[:, 0])
    K = rbf_kernel(X, gamma=gamma)
    idx = model.nystroem_.component_indices_
    L = K[:, idx] @ np.linalg.pinv(K[np.ix_(idx, idx)]) @ K[idx]
    expected = L @ np.linalg.solve(L + a * np.eye(len(X)), y[:, 0])
    np.testing.assert_allclose(model.predict(X), expected, atol=1e-7)


def test_kernel_ridge_precomputed_matches_rbf(data):
    X, y, _ = data
    X_test = _make_data(30, seed=3)[0]
    model = DoFKernelRidge(1.0, gamma=GAMMA, random_state=0).fit(X, y)
    pre = DoFKernelRidge(1.0, kernel="precomputed", random_state=0)
    pre.fit(rbf_kernel(X, gamma=GAMMA), y)
    np.testing.assert_array_equal(
        pre.nystroem_.component_indices_, model.nystroem_.component_indices_
    )
    # The precomputed kernel takes the pseudo-inverse features.
    np.testing.assert_allclose(
        pre.predict(rbf_kernel(X_test, X, gamma=GAMMA)),
        model.predict(X_test),
        atol=_route_atol(model),
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_failure_falls_back_to_eigh(data, monkeypatch, dtype):
    # float64 fits solve in the kernel basis, where the Cholesky factor is
    # only a preconditioner: its failure is silent and the refinement gives
    # the same answer.  float32 fits solve with the features themselves and
    # say so when they fall back.
    X, y, sw = data
    X = X.astype(dtype)
    model = DoFKernelRidge(1.0, gamma=GAMMA, n_components=40, random_state=0)
    expected = model.fit(X, y, sample_weight=sw).predict(X)

    class BrokenCholesky:
        """_tiles, but for _ridge_solve only, with a failing cho_factor."""

        def __getattr__(self, name):
            return getattr(_tiles, name)

        @staticmethod
        def cho_factor(*args, **kwargs):
            raise linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(_ridge_solve, "_tiles", BrokenCholesky())
    if dtype == np.float32:
        with pytest.warns(linalg.LinAlgWarning, match="eigendecomposition"):
            fallback = clone(model).fit(X, y, sample_weight=sw).predict(X)
        tol = 1e-4
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", linalg.LinAlgWarning)
            fallback = clone(model).fit(X, y, sample_weight=sw).predict(X)
        tol = 1e-8
    np.testing.assert_allclose(fallback, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_exact_kernel_ridge_is_weighted_ridge_on_exact_features(fit_intercept):
    # Every row a landmark: the dual solve must be the weighted ridge on
    # features Phi with Phi Phi^T = K, duplicated rows and zero weights
    # included, for several targets.
    rng = np.random.RandomState(0)
    X = rng.randn(70, 3)
    X = np.vstack([X, X[:10]])
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.randn(80, 2)
    weights = rng.uniform(0.2, 3.0, 80)
    weights[[3, 40]] = 0.0
    K = rbf_kernel(X, gamma=0.5)
    eigvals, eigvecs = linalg.eigh(K)
    Phi = eigvecs * np.sqrt(np.clip(eigvals, 0, None))
    alpha = 0.05
    ridge = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky")
    expected = ridge.fit(Phi, Y, sample_weight=weights).predict(Phi)
    dual, intercept = _ridge_solve.exact_kernel_ridge(
        K.copy(), Y, weights, alpha, fit_intercept
    )
    np.testing.assert_allclose(K @ dual + intercept, expected, atol=1e-8)
    if fit_intercept:
        np.testing.assert_allclose(dual.sum(axis=0), 0.0, atol=1e-9)
    else:
        np.testing.assert_array_equal(intercept, 0.0)


def test_every_row_a_landmark_is_kernel_ridge_at_its_cost(monkeypatch):
    # n_components = n: exact kernel ridge by one Cholesky factorisation of
    # K + alpha I, not the normal equations of n features (no pass over
    # kernel blocks, no factor of K(I, I)).
    rng = np.random.RandomState(1)
    X, X_new = rng.randn(150, 2), rng.randn(40, 2)
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(150)
    weights = rng.uniform(0.5, 2.0, 150)
    monkeypatch.setattr("sklearn_dof._ridge.ridge_problem", None)  # never reached
    monkeypatch.setattr(_linalg, "landmark_cholesky", None)
    model = DoFKernelRidge(
        alpha=1e-3, gamma=1.0, n_components=150, fit_intercept=False, random_state=0
    ).fit(X, y, sample_weight=weights)
    assert model.nystroem_.exact_
    exact = KernelRidge(alpha=1e-3, kernel="rbf", gamma=1.0)
    exact.fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(model.predict(X_new), exact.predict(X_new), atol=1e-8)
    # The transformer's own quantities wait for their first read, and agree.
    features = model.nystroem_.transform(X)
    np.testing.assert_allclose(features @ model.coef_, model.predict(X), atol=1e-8)
    assert 0 < model.effective_dof_ <= model.dof_ <= 150


def test_every_row_a_landmark_below_the_rounding_falls_back():
    # Duplicated rows and a penalty far below the rounding of K: K + alpha I
    # has no Cholesky factor, and the fit takes the pseudo-inverse features
    # (a finite interpolant of the distinct rows) instead of failing or
    # looping in the refinement.
    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    X = np.vstack([X, X[:20]])
    y = np.sin(X[:, 0])
    K = rbf_kernel(X, gamma=1.0)
    assert _ridge_solve.exact_kernel_ridge(K, y[:, None], None, 1e-300, True) is None
    model = DoFKernelRidge(n_components=80, alpha=1e-300, gamma=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the penalty's resolution warning
        model.fit(X, y)
    assert model.nystroem_.exact_
    np.testing.assert_allclose(model.predict(X), y, atol=1e-6)


def test_indefinite_system_falls_back_to_eigh():
    # A Gram matrix made indefinite by rounding, with a penalty below the
    # rounding level: the eigendecomposition solves on the numerical range
    # and leaves the rounding-level direction out instead of dividing by it.
    gram = np.diag([4.0, -1e-17])
    with pytest.warns(linalg.LinAlgWarning, match="Cholesky"):
        W = _ridge_solve._ridge_solver(gram, 1e-30)(np.ones((2, 1)))
    np.testing.assert_allclose(W[:, 0], [0.25, 0.0])


@pytest.mark.parametrize("alpha", [0, 0.0, -1.0])
def test_nonpositive_alpha_is_rejected(data, alpha):
    X, y, _ = data
    with pytest.raises(InvalidParameterError, match="'alpha' parameter"):
        DoFKernelRidge(alpha=alpha).fit(X, y)


@pytest.mark.parametrize("alphas", [(1.0, 0.0), [-1.0], -1.0, 0, (), [[1.0]]])
def test_nonpositive_alphas_are_rejected(data, alphas):
    X, y, _ = data
    with pytest.raises(InvalidParameterError, match="'alphas' parameter"):
        DoFKernelRidgeCV(alphas=alphas).fit(X, y)
    assert issubclass(InvalidParameterError, ValueError)


@pytest.mark.parametrize(
    "model",
    [
        DoFKernelRidge(2.0, gamma=GAMMA, random_state=0),
        DoFKernelRidgeCV(ALPHAS, gamma=GAMMA, sampling="pivoted"),
    ],
)
def test_pickle_round_trip(data, model):
    X, y, _ = data
    model = clone(model).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))


def test_clone_and_set_params(data):
    X, y, _ = data
    model = DoFKernelRidge(1.0, gamma=GAMMA, random_state=0).fit(X, y[:, 0])
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "coef_")
    copy.set_params(alpha=20.0, sampling="pivoted").fit(X, y[:, 0])
    assert copy.alpha == 20.0
    # One penalty drives both the rank and the solve: more penalty, fewer
    # degrees of freedom, fewer columns.
    assert copy.dof_ < model.dof_
    assert copy.n_components_ < model.n_components_
    ref = DoFKernelRidge(20.0, gamma=GAMMA, sampling="pivoted", random_state=0)
    np.testing.assert_allclose(copy.predict(X), ref.fit(X, y[:, 0]).predict(X))

    cv = DoFKernelRidgeCV(ALPHAS).set_params(criterion="gcv", fit_intercept=False)
    assert clone(cv).get_params()["criterion"] == "gcv"


def test_feature_names(data):
    pd = pytest.importorskip("pandas")
    X, y, _ = data
    df = pd.DataFrame(X, columns=["a", "b"])
    for model in (
        DoFKernelRidge(gamma=GAMMA, random_state=0),
        DoFKernelRidgeCV(gamma=GAMMA, random_state=0),
    ):
        model.fit(df, y[:, 0])
        np.testing.assert_array_equal(model.feature_names_in_, ["a", "b"])
        assert model.n_features_in_ == 2
        ref = clone(model).fit(X, y[:, 0])
        np.testing.assert_allclose(model.predict(df), ref.predict(X))


# --------------------------------------------------------------------------
# DoFKernelRidgeCV


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("multioutput", [False, True])
@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_cv_equals_grid_search_leave_one_out(
    small_data, fit_intercept, multioutput, sampling
):
    X, y, _ = small_data
    y = _targets(y, multioutput)
    model = DoFKernelRidgeCV(
        ALPHAS,
        gamma=GAMMA,
        sampling=sampling,
        fit_intercept=fit_intercept,
        store_cv_results=True,
        random_state=0,
    ).fit(X, y)
    Phi = model.nystroem_.transform(X)
    assert Phi.shape[1] == model.n_components_ < X.shape[0]

    search = GridSearchCV(
        Ridge(fit_intercept=fit_intercept),
        {"alpha": ALPHAS},
        cv=LeaveOneOut(),
        scoring="neg_mean_squared_error",
    ).fit(Phi, y)
    assert model.alpha_ == search.best_params_["alpha"]
    assert model.best_score_ == pytest.approx(search.best_score_, rel=1e-8)
    # The whole curve, not just its best point.
    loo_mse = model.cv_results_.reshape(X.shape[0], -1, len(ALPHAS)).mean(axis=(0, 1))
    np.testing.assert_allclose(
        -loo_mse, search.cv_results_["mean_test_score"], rtol=1e-8
    )
    best = search.best_estimator_
    assert model.coef_.shape == best.coef_.shape
    np.testing.assert_allclose(model.coef_, best.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(model.intercept_, best.intercept_, atol=1e-8)
    np.testing.assert_allclose(model.predict(X), best.predict(Phi), atol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("multioutput", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_cv_equals_sklearn_ridge_cv(data, fit_intercept, multioutput, weighted):
    X, y, sw = data
    y = _targets(y, multioutput)
    sw = sw if weighted else None
    model = DoFKernelRidgeCV(
        ALPHAS,
        gamma=GAMMA,
        fit_intercept=fit_intercept,
        store_cv_results=True,
        random_state=0,
    ).fit(X, y, sample_weight=sw)
    Phi = model.nystroem_.transform(X)
    ref = RidgeCV(ALPHAS, fit_intercept=fit_intercept, store_cv_results=True)
    ref.fit(Phi, y, sample_weight=sw)
    assert model.alpha_ == ref.alpha_
    assert model.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    assert model.cv_results_.shape == ref.cv_results_.shape
    # atol: a squared leave-one-out error of 1e-7 agrees to 1e-14 absolute.
    np.testing.assert_allclose(
        model.cv_results_, ref.cv_results_, rtol=1e-7, atol=1e-12
    )
    np.testing.assert_allclose(model.predict(X), ref.predict(Phi), atol=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
def test_cv_on_landmarks_off_the_factor_takes_their_cholesky_basis(data, weighted):
    # Landmarks that are not the rows' factor's columns (an int rank): the
    # features K(x, I) R^{-1} of the block's Cholesky factor, not the
    # eigendecomposition behind normalization_ (which waits for its first
    # read): the scores and fit of RidgeCV on those features, and, up to
    # the eigenvalues the pseudo-inverse drops (none here), on transform's.
    X, y, sw = data
    sw = sw if weighted else None
    model = DoFKernelRidgeCV(
        ALPHAS, gamma=1.0, n_components=40, store_cv_results=True, random_state=0
    ).fit(X, y, sample_weight=sw)
    assert model.nystroem_._normalization is None
    landmarks = model.nystroem_.components_
    R = linalg.cholesky(rbf_kernel(landmarks, gamma=1.0), lower=False)
    Phi = linalg.solve_triangular(R, rbf_kernel(landmarks, X, gamma=1.0), trans="T").T
    ref = RidgeCV(ALPHAS, store_cv_results=True).fit(Phi, y, sample_weight=sw)
    assert model.alpha_ == ref.alpha_
    np.testing.assert_allclose(
        model.cv_results_, ref.cv_results_, rtol=1e-7, atol=1e-12
    )
    np.testing.assert_allclose(model.predict(X), ref.predict(Phi), atol=1e-8)
    transformed = model.nystroem_.transform(X)
    pinv = RidgeCV(ALPHAS).fit(transformed, y, sample_weight=sw)
    np.testing.assert_allclose(model.predict(X), pinv.predict(transformed), atol=1e-7)


def test_cv_with_scoring_equals_sklearn_ridge_cv(data):
    X, y, _ = data
    scoring = "neg_mean_absolute_error"
    model = DoFKernelRidgeCV(
        ALPHAS, gamma=GAMMA, scoring=scoring, store_cv_results=True, random_state=0
    ).fit(X, y[:, 0])
    Phi = model.nystroem_.transform(X)
    ref = RidgeCV(ALPHAS, scoring=scoring, store_cv_results=True).fit(Phi, y[:, 0])
    assert model.alpha_ == ref.alpha_
    assert model.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    # Stored values are the leave-one-out predictions.
    np.testing.assert_allclose(model.cv_results_, ref.cv_results_, rtol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_leave_one_out_is_exact(small_data, fit_intercept):
    # Brute force: refit the weighted ridge without each point in turn, on the
    # same features; zero weights included.
    X, y, sw = small_data
    sw = sw.copy()
    sw[:5] = 0.0
    alphas = (0.5, 5.0)
    model = DoFKernelRidgeCV(
        alphas,
        gamma=GAMMA,
        fit_intercept=fit_intercept,
        store_cv_results=True,
        random_state=0,
    ).fit(X, y, sample_weight=sw)
    Phi = model.nystroem_.transform(X)
    n = X.shape[0]
    for j, a in enumerate(alphas):
        errors = np.empty_like(y)
        for i in range(n):
            keep = np.arange(n) != i
            ridge = Ridge(alpha=a, fit_intercept=fit_intercept)
            ridge.fit(Phi[keep], y[keep], sample_weight=sw[keep])
            errors[i] = y[i] - ridge.predict(Phi[i : i + 1])[0]
        np.testing.assert_allclose(
            model.cv_results_[:, :, j], sw[:, None] * errors**2, rtol=1e-7, atol=1e-12
        )


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcv_matches_explicit_hat_matrix(small_data, fit_intercept, weighted):
    X, y, sw = small_data
    y = y[:, 0]
    sw = sw if weighted else np.ones(X.shape[0])
    model = DoFKernelRidgeCV(
        ALPHAS,
        gamma=GAMMA,
        fit_intercept=fit_intercept,
        criterion="gcv",
        store_cv_results=True,
        random_state=0,
    ).fit(X, y, sample_weight=sw if weighted else None)
    Phi = model.nystroem_.transform(X)
    n, p = Phi.shape
    # Explicit n x n hat matrix of the weighted problem, intercept unpenalised.
    root = np.sqrt(sw)[:, None]
    design = np.hstack([Phi, np.ones((n, 1))]) if fit_intercept else Phi
    penalty = np.eye(design.shape[1])
    if fit_intercept:
        penalty[-1, -1] = 0.0
    scores = []
    for a in ALPHAS:
        A = design.T @ (sw[:, None] * design) + a * penalty
        H = (root * design) @ np.linalg.solve(A, (root * design).T)
        fitted = design @ np.linalg.solve(A, design.T @ (sw * y))
        gcv = np.mean(sw * (y - fitted) ** 2) / (1 - np.trace(H) / n) ** 2
        scores.append(-gcv)
    np.testing.assert_allclose(-model.cv_results_.mean(axis=0), scores, rtol=1e-8)
    assert model.alpha_ == ALPHAS[int(np.argmax(scores))]
    assert model.best_score_ == pytest.approx(max(scores), rel=1e-8)


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_cv_rank_at_smallest_alpha_and_refit_on_same_features(data, sampling):
    # The degrees-of-freedom rule sizes the rank for the smallest penalty.
    X, y, sw = data
    model = DoFKernelRidgeCV(
        ALPHAS, gamma=GAMMA, n_components="dof", sampling=sampling, random_state=0
    ).fit(X, y, sample_weight=sw)
    assert model.nystroem_.alpha == min(ALPHAS)
    nys = DoFNystroem(
        alpha=min(ALPHAS),
        gamma=GAMMA,
        n_components="dof",
        sampling=sampling,
        random_state=0,
    )
    nys.fit(X)
    assert model.n_components_ == nys.n_components_ < X.shape[0]
    assert model.dof_ == nys.dof_
    # The refit at alpha_ is DoFKernelRidge on the same columns.
    refit = DoFKernelRidge(
        model.alpha_,
        gamma=GAMMA,
        sampling=sampling,
        n_components=model.n_components_,
        random_state=0,
    ).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(
        refit.nystroem_.component_indices_, model.nystroem_.component_indices_
    )
    # The CV estimator works with the pseudo-inverse features; coef_ is only
    # comparable when the refit factored K(I, I) itself (coef_ of a shifted
    # fit maps its landmark weights through K(I, I)^{+1/2}, which drops the
    # directions the shift keeps).
    atol = _route_atol(refit)
    if atol == 1e-8:
        np.testing.assert_allclose(refit.coef_, model.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(refit.predict(X), model.predict(X), atol=atol)


@pytest.mark.parametrize("weighted", [False, True])
def test_cv_with_splitter_equals_grid_search(data, weighted):
    X, y, sw = data
    sw = sw if weighted else None
    cv = KFold(5, shuffle=True, random_state=0)
    model = DoFKernelRidgeCV(ALPHAS, gamma=GAMMA, cv=cv, random_state=0)
    model.fit(X, y, sample_weight=sw)
    Phi = model.nystroem_.transform(X)
    search = GridSearchCV(Ridge(), {"alpha": ALPHAS}, cv=cv)
    search.fit(Phi, y, sample_weight=sw)
    assert model.alpha_ == search.best_params_["alpha"]
    assert model.best_score_ == pytest.approx(search.best_score_, rel=1e-10)
    # The model fits on the Cholesky basis of the rows' factor; coef_ maps
    # back through K(I, I)^{1/2}, whose conditioning costs a few digits of
    # the weights, not of the predictions.
    best = search.best_estimator_
    np.testing.assert_allclose(model.predict(X), best.predict(Phi), atol=1e-8)
    np.testing.assert_allclose(model.coef_, best.coef_, rtol=1e-5, atol=1e-6)


def test_cv_errors(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="store_cv_results=True requires cv=None"):
        DoFKernelRidgeCV(cv=3, store_cv_results=True).fit(X, y)
    with pytest.raises(ValueError, match="n_samples=1"):
        DoFKernelRidgeCV().fit(X[:1], y[:1])
    with pytest.raises(InvalidParameterError, match="'criterion' parameter"):
        DoFKernelRidgeCV(criterion="aic").fit(X, y)


def test_cv_default_grid_scales_with_the_total_weight(data):
    # sum_i w (y_i - f_i)^2 + w n lambda ||f||^2 is w times the unweighted
    # objective at n lambda: constant weights must change nothing but
    # alpha_, which the default grid reads as the total weight times lambda.
    X, y, _ = data
    params = dict(gamma=GAMMA, n_components=60, random_state=0)
    plain = DoFKernelRidgeCV(**params).fit(X, y)
    weighted = DoFKernelRidgeCV(**params).fit(X, y, sample_weight=np.full(len(y), 3.0))
    assert weighted.alpha_ == pytest.approx(3.0 * plain.alpha_, rel=1e-12)
    np.testing.assert_allclose(weighted.predict(X), plain.predict(X), atol=1e-8)


def test_cv_scalar_alpha(data):
    X, y, _ = data
    model = DoFKernelRidgeCV(alphas=2.0, gamma=GAMMA, random_state=0).fit(X, y)
    ref = DoFKernelRidge(2.0, gamma=GAMMA, random_state=0).fit(X, y)
    assert model.alpha_ == 2.0
    np.testing.assert_allclose(model.predict(X), ref.predict(X), atol=_route_atol(ref))


# --------------------------------------------------------------------------
# scikit-learn's estimator checks


def _expected_failed_checks(estimator):
    kernel = estimator.get_params().get("kernel")
    learned = isinstance(estimator, DoFKernelRidgeCV) and (
        estimator.criterion == "gcv"
        or kernel is None
        or getattr(kernel, "n_dims", 0) > 0
    )
    if not learned:
        return {}
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "the learned kernel's subsample is drawn from the rows, and its "
            "leave-one-out leaves out a row, not one copy of a repeated row; "
            "the grid follows the penalty learned with it"
        )
    }


@parametrize_with_checks(
    [
        DoFKernelRidge(),
        DoFKernelRidge(sampling="pivoted", fit_intercept=False),
        DoFKernelRidgeCV(),
        DoFKernelRidgeCV(criterion="gcv", sampling="pivoted", alphas=(1.0, 10.0)),
        DoFKernelRidge(kernel=Matern(nu=1.5)),
        DoFKernelRidgeCV(kernel=RBF(1.0, length_scale_bounds="fixed")),
        DoFKernelRidgeCV(kernel=ConstantKernel() * Matern(nu=2.5)),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def wide_data():
    # Smooth kernel, many landmarks: K(I, I) is ill-conditioned, so the Gram
    # matrix summed in the kernel basis carries rounding amplified far above
    # the smaller penalties below; only the refinement makes the fit exact.
    rng = np.random.RandomState(3)
    X = rng.randn(1500, 4)
    y = np.c_[np.sin(X[:, 0]), X[:, 1] * X[:, 2]] + 0.1 * rng.randn(1500, 2)
    return X, y, rng.uniform(0.0, 2.0, size=1500)


@pytest.mark.parametrize("lam", [1e-2, 1e-6, 1e-10, 1e-13])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("gamma", [0.3, 0.05])
def test_kernel_basis_solve_matches_ridge_on_features(
    wide_data, lam, fit_intercept, weighted, gamma
):
    X, y, sw = wide_data
    sw = sw if weighted else None
    alpha = X.shape[0] * lam
    # gamma=0.3: the fit factors K(I, I) and leaves normalization_ for later.
    # gamma=0.05: K(I, I) is too ill-conditioned for Cholesky (reciprocal
    # condition below _linalg.PINV_RTOL); the fit factors K(I, I) + s I, unless the
    # shift s is not below 1% of the penalty on the landmarks' scale
    # (lambda = 1e-13 here): then the basis is normalization_.T.
    p = 400
    params = dict(alpha=alpha, gamma=gamma, n_components=p, random_state=0)
    model = DoFKernelRidge(fit_intercept=fit_intercept, **params).fit(
        X, y, sample_weight=sw
    )
    nystroem = DoFNystroem(**params).fit(X)
    np.testing.assert_array_equal(
        model.nystroem_.component_indices_, nystroem.component_indices_
    )
    gram = nystroem._landmark_gram()
    shifted = None
    if _linalg.landmark_cholesky(gram) is None:
        shifted = _linalg.shifted_landmark_cholesky(gram, alpha * p / X.shape[0])
    route = "cholesky" if gamma == 0.3 else "shifted" if lam > 1e-13 else "pinv"
    assert (shifted is not None) == (route == "shifted")
    assert (model.nystroem_._normalization is None) == (route != "pinv")
    Phi = _fitted_features(model, X) if route == "shifted" else nystroem.transform(X)
    ridge = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="svd")
    ridge.fit(Phi, y, sample_weight=sw)
    # (Off the plain Cholesky route, the block's rounding, 1e-16, is
    # amplified by its condition: the landmark block's kernel evaluation
    # alone moves the answers by up to 2.5e-7 at lambda = 1e-13.)
    atol = 1e-7 if route == "cholesky" else 1e-6
    np.testing.assert_allclose(model.predict(X), ridge.predict(Phi), atol=atol)
    # The Cholesky factor of the kernel-basis Gram matrix preconditions so
    # well that a few passes over the data reach the rounding level; at the
    # smallest penalties rounding swamps it and the fit forms the features,
    # without spending every pass allowed to find out.
    assert 1 <= model._n_refine_passes <= _ridge_solve.REFINE_MAX_PASSES
    if route == "cholesky" or lam >= 1e-2:
        assert model._refined and model._n_refine_passes <= 3
    else:
        assert not model._refined and model._n_refine_passes <= 3


@pytest.mark.parametrize("lam", [1e-2, 1e-4, 1e-6])
def test_shifted_landmark_block_is_as_accurate_as_the_pseudo_inverse(wide_data, lam):
    # An ill-conditioned K(I, I) (gamma=0.05, 400 landmarks among 1500 rows)
    # factored with a shift, never eigendecomposed: the test error against
    # the noise-free target is that of ridge on the pseudo-inverse features.
    X, y, _ = wide_data
    rng = np.random.RandomState(11)
    X_test = rng.randn(2000, X.shape[1])
    f_test = np.c_[np.sin(X_test[:, 0]), X_test[:, 1] * X_test[:, 2]]
    alpha = X.shape[0] * lam
    params = dict(alpha=alpha, gamma=0.05, n_components=400, random_state=0)
    model = DoFKernelRidge(**params).fit(X, y)
    assert model.nystroem_._normalization is None  # no eigendecomposition
    pipe = make_pipeline(DoFNystroem(**params), Ridge(alpha=alpha, solver="svd"))
    pipe.fit(X, y)
    ours = np.mean((model.predict(X_test) - f_test) ** 2)
    pseudo_inverse = np.mean((pipe.predict(X_test) - f_test) ** 2)
    assert ours <= 1.01 * pseudo_inverse


def test_cholesky_basis_defers_normalization(wide_data):
    X, y, _ = wide_data
    params = dict(alpha=1.5, gamma=0.3, n_components=400, random_state=0)
    model = DoFKernelRidge(**params).fit(X, y)
    nystroem = model.nystroem_
    predictions = model.predict(X)
    # Neither fit nor predict needs K(I, I)^{+1/2} (about 9 p^3 flops), and
    # the fitted model keeps no p x p matrix: its pickle holds the landmarks
    # and p weights per target (400 x (4 + 2) floats), not the 400 x 400 map.
    assert nystroem._normalization is None and nystroem._dof is None
    assert not any(
        isinstance(value, np.ndarray) and value.shape == (400, 400)
        for value in vars(nystroem).values()
    )
    assert len(pickle.dumps(model)) < 8 * 400 * 400 / 4
    served = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(served.predict(X), predictions)
    # On demand, normalization_ is the transformer's own, and coef_ the
    # weights of its features that give the same predictions.
    reference = DoFNystroem(**params).fit(X)
    np.testing.assert_array_equal(nystroem.normalization_, reference.normalization_)
    np.testing.assert_array_equal(nystroem.transform(X), reference.transform(X))
    Phi = reference.transform(X)
    np.testing.assert_allclose(
        Phi @ served.coef_.T + served.intercept_, predictions, atol=1e-8
    )
    ridge = Ridge(alpha=1.5, solver="svd").fit(Phi, y)
    np.testing.assert_allclose(served.coef_, ridge.coef_, rtol=1e-6, atol=1e-8)
    # The rough fixed-rank d.o.f., on first read (also of a model pickled
    # before any read), come from a Cholesky factor instead of the
    # eigenvalues: the same numbers.
    assert served.dof_ == pytest.approx(reference.dof_, rel=1e-9)
    assert model.effective_dof_ == pytest.approx(reference.effective_dof_, rel=1e-9)
    assert nystroem.averaged_dof_ == pytest.approx(reference.averaged_dof_, rel=1e-9)
    assert nystroem.dof_columns_ == reference.dof_columns_ == 400


@pytest.mark.parametrize("lam", [1e-2, 1e-8, 1e-13])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("gamma", [0.3, 0.05])
@pytest.mark.parametrize("sampling", ["pivoted", "rpcholesky"])
def test_kernel_basis_sums_from_the_rows_factor(
    wide_data, lam, fit_intercept, gamma, sampling, monkeypatch
):
    # Unweighted fits in the Cholesky basis on the landmarks of a partial
    # Cholesky factor take the kernel-basis sums from the factor, no pass
    # over the data; the refinement still runs on the exact operator, so
    # the fit is the ridge on the transformer's features.  (With gamma=0.05
    # the rpcholesky landmarks' K(I, I) is too ill-conditioned for its
    # Cholesky factor, and the factor's sums, which the pseudo-inverse
    # basis amplifies, are not used; the greedy ones are far enough apart.)
    X, y, _ = wide_data
    alpha = X.shape[0] * lam
    calls = []
    original = _landmark_block.LandmarkFactor.normal_equations

    def spy(self, y):
        calls.append(len(self.landmarks))
        return original(self, y)

    monkeypatch.setattr(_landmark_block.LandmarkFactor, "normal_equations", spy)
    params = dict(gamma=gamma, n_components=300, sampling=sampling, random_state=0)
    model = DoFKernelRidge(alpha=alpha, fit_intercept=fit_intercept, **params)
    model.fit(X, y)
    # The landmarks lead the factor's columns (each block keeps the order
    # its rule drew it in): the features are those columns themselves
    # (DoFNystroem._fit's prefix route), no sums over kernel blocks needed.
    assert calls == []
    # So the features are K(X, I) R^{-1} with R^T R = K(I, I), unshifted
    # whatever the block's conditioning (the factor's pivot tolerance left
    # out the dependent points).
    nystroem = model.nystroem_
    R = linalg.cholesky(nystroem._landmark_gram())
    K = rbf_kernel(X, nystroem.components_, gamma=gamma)
    Phi, atol = linalg.solve_triangular(R, K.T, trans="T").T, 1e-6
    ridge = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="svd").fit(Phi, y)
    np.testing.assert_allclose(model.predict(X), ridge.predict(Phi), atol=atol)
    # Weights of 2 at twice the penalty: the same problem, summed by passes.
    # At tiny penalties the factor's own rounding can spoil the
    # preconditioner, and the fit then sums by passes before it would form
    # the features: never a fallback that the summed route avoids.
    summed = clone(model).set_params(alpha=2 * alpha)
    summed.fit(X, y, sample_weight=np.full(X.shape[0], 2.0))
    assert len(calls) <= 1
    np.testing.assert_allclose(summed.predict(X), model.predict(X), atol=1e-7)
    assert model._refined == summed._refined
    if lam == 1e-2:
        assert model._n_refine_passes == summed._n_refine_passes


@pytest.mark.parametrize("sampling", ["uniform", "pivoted", "rpcholesky", "leverage"])
def test_fixed_rank_dof_is_the_transformers(wide_data, sampling):
    # Inside the estimator the fixed-rank d.o.f. of every rule are those of
    # the standalone transformer (uniform ones on first read, from a
    # Cholesky factor of K(I, I) instead of its eigenvalues; the others,
    # which need the rows' factor, at fit).
    X, y, _ = wide_data
    params = dict(alpha=3.0, gamma=0.3, n_components=200, sampling=sampling)
    model = DoFKernelRidge(random_state=0, **params).fit(X, y)
    assert (model.nystroem_._dof is None) == (sampling == "uniform")
    reference = DoFNystroem(random_state=0, **params).fit(X)
    assert model.dof_ == pytest.approx(reference.dof_, rel=1e-9)
    assert model.effective_dof_ == pytest.approx(reference.effective_dof_, rel=1e-9)
    averaged = model.nystroem_.averaged_dof_
    assert averaged == pytest.approx(reference.averaged_dof_, rel=1e-9)


def test_kernel_basis_falls_back_to_the_features(wide_data, monkeypatch):
    X, y, sw = wide_data
    model = DoFKernelRidge(alpha=1e-8, gamma=0.05, n_components=400, random_state=0)
    expected = model.fit(X, y, sample_weight=sw).predict(X)
    # No pass allowed: the refinement gives up, the fit forms the features.
    monkeypatch.setattr(_ridge_solve, "REFINE_MAX_PASSES", 0)
    calls = []
    original = DoFNystroem._training_features

    def spy(self, X, *args, **kwargs):
        calls.append("kernel" if kwargs.get("kernel_basis") else "triangular")
        return original(self, X, *args, **kwargs)

    monkeypatch.setattr(DoFNystroem, "_training_features", spy)
    fallback = clone(model).fit(X, y, sample_weight=sw).predict(X)
    assert calls == ["kernel", "triangular"]
    np.testing.assert_allclose(fallback, expected, atol=1e-7)


# --------------------------------------------------------------------------
# solver="cg": conjugate gradients with the Nystroem preconditioner


def _cg_data(n=600, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    f = np.c_[np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 1])]
    return X, f + 0.1 * rng.randn(n, 2) + 5.0, rng.uniform(0.5, 2.0, n)


def _objective(model, X, y, sample_weight):
    """``||y_c - Phi_c w||_S^2 + alpha ||w||^2`` of a fitted model, in the
    features of its own landmarks (transform's basis, coef_)."""
    Phi = model.nystroem_.transform(X)
    s = np.ones(len(X)) if sample_weight is None else sample_weight
    residual = y - (Phi @ model.coef_.T + model.intercept_)
    penalty = model.alpha * np.sum(model.coef_**2, axis=-1)
    return np.einsum("i,ij,ij->j", s, residual, residual) + penalty


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("multioutput", [True, False])
def test_cg_solution_is_the_direct_solution(
    monkeypatch, fit_intercept, weighted, multioutput
):
    X, y, sw = _cg_data()
    y = _targets(y, multioutput)
    sw = sw if weighted else None
    params = dict(alpha=0.3, gamma=0.5, n_components=80, random_state=0)
    params["fit_intercept"] = fit_intercept
    direct = DoFKernelRidge(solver="direct", **params).fit(X, y, sample_weight=sw)
    assert direct.n_iter_ is None
    # Run to the rounding floor: the same weights.
    monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the floor
        cg = DoFKernelRidge(solver="cg", **params).fit(X, y, sample_weight=sw)
    assert cg.n_iter_ > 0
    scale = np.abs(direct.dual_coef_).max()
    np.testing.assert_allclose(cg.dual_coef_, direct.dual_coef_, atol=1e-8 * scale)
    np.testing.assert_allclose(cg.intercept_, direct.intercept_, atol=1e-8)
    np.testing.assert_allclose(cg.predict(X), direct.predict(X), atol=1e-8)


@pytest.mark.parametrize("alpha", [0.1, 3.0])
def test_cg_stops_once_the_objective_is_within_tol(alpha):
    X, y, sw = _cg_data(seed=1)
    params = dict(alpha=alpha, gamma=0.5, n_components=100, random_state=0)
    direct = DoFKernelRidge(solver="direct", **params).fit(X, y, sample_weight=sw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        cg = DoFKernelRidge(solver="cg", **params).fit(X, y, sample_weight=sw)
    best = _objective(direct, X, y, sw)
    excess = _objective(cg, X, y, sw) - best
    # r^T P^-1 r estimates the excess; allow the preconditioner's mismatch.
    assert np.all(excess <= 10 * _ridge_solve.PCG_TOL * best)
    # ...and it stopped early: far from the rounding floor.
    assert 0 < cg.n_iter_ < _ridge_solve.PCG_MAX_ITER
    assert np.all(excess > 1e-16 * best)


def test_cg_warns_when_it_stops_short(monkeypatch):
    X, y, _ = _cg_data(seed=2)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 1)
    model = DoFKernelRidge(alpha=0.01, gamma=0.5, n_components=100, solver="cg")
    with pytest.warns(ConvergenceWarning, match="after 1 steps"):
        model.fit(X, y[:, 0])
    assert model.n_iter_ == 1


def test_auto_solver_takes_cg_from_its_threshold(monkeypatch):

    X, y, _ = _cg_data(seed=3)
    model = DoFKernelRidge(alpha=0.3, gamma=0.5, n_components=60, random_state=0)
    assert model.fit(X, y).n_iter_ is None
    monkeypatch.setattr(_ridge_solve, "CG_MIN_COMPONENTS", 60)
    assert model.fit(X, y).n_iter_ > 0


@pytest.mark.parametrize("solver", ["direct", "cg", "cg-then-direct"])
def test_large_landmark_block_is_factored_in_its_own_memory(monkeypatch, solver):
    # From SHIFT_FIRST_COMPONENTS on, the shifted K(I, I) is factored where
    # it lies (a p x p copy less: 3.2 GB at p = 20,000) and recomputed for
    # whichever solve reads it: the same model as with the copy.
    import tracemalloc

    from sklearn_dof import _linalg, _tiles

    X, y, _ = _cg_data(seed=5)
    monkeypatch.setattr(_linalg, "SHIFT_FIRST_COMPONENTS", 64)
    params = dict(alpha=0.3, gamma=0.5, n_components=80, random_state=0)
    params["solver"] = "direct" if solver == "direct" else "cg"
    cho_factor = _tiles.cho_factor

    def refuse_the_preconditioner():
        if solver == "cg-then-direct":  # no preconditioner: the direct solve
            monkeypatch.setattr(_tiles, "cho_factor", _refuse(cho_factor, 2))

    landmark_factor = _linalg.landmark_factor
    calls = []

    def measured(gram, *args, **kwargs):
        tracemalloc.start()
        try:
            factor = landmark_factor(gram, *args, **kwargs)
            calls.append((tracemalloc.get_traced_memory()[1], gram.nbytes, factor[2]))
        finally:
            tracemalloc.stop()
        return factor

    monkeypatch.setattr(_linalg, "landmark_factor", measured)
    refuse_the_preconditioner()
    in_place = DoFKernelRidge(**params).fit(X, y)
    monkeypatch.setattr(_linalg, "_writeable", lambda gram: False)
    refuse_the_preconditioner()
    copied = DoFKernelRidge(**params).fit(X, y)
    (peak, nbytes, consumed), (copy_peak, _, copy_consumed) = calls
    assert consumed and not copy_consumed
    assert peak < 0.5 * nbytes <= copy_peak - 0.5 * nbytes
    if solver != "direct":
        for model in (in_place, copied):
            assert (model.n_iter_ is None) == (solver == "cg-then-direct")
    np.testing.assert_allclose(in_place.predict(X), copied.predict(X), atol=1e-10)
    np.testing.assert_allclose(in_place.dual_coef_, copied.dual_coef_, rtol=1e-9)


def _refuse(cho_factor, refused, dtypes=None):
    """``cho_factor`` refusing its first ``refused`` calls (their dtypes
    appended to ``dtypes``)."""
    dtypes = [] if dtypes is None else dtypes

    def refuse_the_first_calls(A, **kwargs):
        dtypes.append(A.dtype)
        if len(dtypes) <= refused:
            raise linalg.LinAlgError("not positive definite")
        return cho_factor(A, **kwargs)

    return refuse_the_first_calls


@pytest.mark.parametrize("refused", [1, 2])
def test_cg_preconditioner_fallbacks(monkeypatch, refused):
    # refused=1: float32 rounding leaves the preconditioner indefinite, it is
    # factored in float64.  refused=2: no factor of P even in float64, the
    # fit solves directly.  The same solution either way.
    from sklearn_dof import _tiles

    X, y, _ = _cg_data(seed=4)
    params = dict(alpha=0.3, gamma=0.5, n_components=80, random_state=0)
    direct = DoFKernelRidge(solver="direct", **params).fit(X, y)
    # The first calls factor P (float32, then float64); the direct route's
    # own factorisations after them go through.
    dtypes = []
    monkeypatch.setattr(
        _tiles, "cho_factor", _refuse(_tiles.cho_factor, refused, dtypes)
    )
    monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the floor
        cg = DoFKernelRidge(solver="cg", **params).fit(X, y)
    assert dtypes[:2] == [np.float32, np.float64]
    if refused == 1:
        assert len(dtypes) == 2 and cg.n_iter_ > 0
    else:
        assert cg.n_iter_ is None
    np.testing.assert_allclose(cg.predict(X), direct.predict(X), atol=1e-8)


# --------------------------------------------------------------------------
# Exact kernel ridge when the certified rank asks for most rows and K fits
# the budget (max_components=None)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_exact_leave_one_out_residuals_are_brute_force(fit_intercept, weighted):
    rng = np.random.RandomState(3)
    X = rng.randn(40, 2)
    Y = np.column_stack([np.sin(2 * X[:, 0]), X[:, 1]]) + 0.1 * rng.randn(40, 2)
    weights = rng.uniform(0.3, 2.0, 40) if weighted else None
    K = rbf_kernel(X, gamma=0.7)
    alpha = 0.03
    *_, residuals = _ridge_solve.exact_kernel_ridge(
        K.copy(), Y, weights, alpha, fit_intercept, loo=True
    )
    for i in range(40):
        keep = np.arange(40) != i
        w = None if weights is None else weights[keep]
        dual, intercept = _ridge_solve.exact_kernel_ridge(
            K[np.ix_(keep, keep)].copy(), Y[keep], w, alpha, fit_intercept
        )
        left_out = Y[i] - (K[i, keep] @ dual + intercept)
        np.testing.assert_allclose(residuals[i], left_out, rtol=1e-7, atol=1e-10)


def _exact_hungry(n=900, seed=0):
    # Smooth, nearly noiseless targets in few dimensions at a small penalty:
    # the certificate asks for about every row.
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 1e-3 * rng.randn(n)
    return X, y


def test_cv_fits_exact_kernel_ridge_where_the_rank_asks_for_most_rows():
    X, y = _exact_hungry()
    alphas = (1e-4, 1e-2, 1.0)
    model = DoFKernelRidgeCV(alphas, gamma=2.0, random_state=0).fit(X, y)
    assert model.nystroem_.exact_ and model.n_components_ == len(X)
    assert model.alpha_ in alphas
    # Exact kernel ridge at the penalty chosen, with the intercept.
    exact = DoFKernelRidge(
        alpha=model.alpha_, gamma=2.0, n_components=len(X), random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-8)
    # best_score_ is its exact leave-one-out score (minus the mean square).
    _, _, residuals = _ridge_solve.exact_kernel_ridge(
        rbf_kernel(X, gamma=2.0), y[:, None], None, model.alpha_, True, loo=True
    )
    assert model.best_score_ == pytest.approx(-np.mean(residuals**2), rel=1e-8)


def test_an_explicit_cap_or_the_budget_keeps_the_rank():
    X, y = _exact_hungry()
    alphas = (1e-4, 1e-2, 1.0)
    with pytest.warns(UserWarning, match="stopped at max_components=64"):
        capped = DoFKernelRidgeCV(
            alphas, gamma=2.0, max_components=64, random_state=0
        ).fit(X, y)
    assert capped.n_components_ == 64 and not capped.nystroem_.exact_
    from sklearn_dof import _memory

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_memory, "fits_exact", lambda n_samples: False)
        patch.setattr(_memory, "default_max_components", lambda: 96)
        # No room for larger conjugate-gradient fits either: the held-out
        # rounds do not take over (test_heldout.py).
        patch.setattr(_memory, "default_cg_components", lambda: 96)
        message = "stopped at 96 components, the most that the memory budget"
        with pytest.warns(UserWarning, match=message):
            beyond = DoFKernelRidgeCV(alphas, gamma=2.0, random_state=0).fit(X, y)
    # (The factor's numerical rank may end below the cap.)
    assert beyond.n_components_ <= 96 and not beyond.nystroem_.exact_


def test_ridge_fits_exact_past_its_default_cap_within_the_budget(monkeypatch):
    X, y = _exact_hungry()
    from sklearn_dof import _memory

    # The default cap below n: the certificate's request ends the rounds.
    monkeypatch.setattr(_memory, "default_max_components", lambda: 128)
    model = DoFKernelRidge(alpha=1e-3, gamma=2.0, random_state=0).fit(X, y)
    assert model.nystroem_.exact_ and model.n_components_ == len(X)


@pytest.mark.parametrize(
    "params", [{"criterion": "gcv"}, {"store_cv_results": True}, {"cv": 3}]
)
def test_cv_caps_from_memory_and_a_splitter_at_640(params):
    # Only the exact route lifts the cap to every row; the other efficient
    # criteria take the transformer's cap from memory, and a splitter,
    # which holds the n x p features and fits them per fold and penalty,
    # 640.
    X, y = _exact_hungry()
    model = DoFKernelRidgeCV((1e-4, 1e-2, 1.0), gamma=2.0, random_state=0, **params)
    assert model._rank_cap(X) == (640 if "cv" in params else None)
    assert not model._uncapped(X)
    assert DoFKernelRidgeCV()._rank_cap(X) is None and DoFKernelRidgeCV()._uncapped(X)
    assert not DoFKernelRidgeCV()._uncapped(X.astype(np.float32))
    from sklearn_dof import _memory

    # K may take EXACT_BUDGET_RATIO times the budget, not more.
    within = math.ceil(8 * len(X) ** 2 / _memory.EXACT_BUDGET_RATIO)
    with config_context(memory_budget=within):
        assert within < 8 * len(X) ** 2 and DoFKernelRidgeCV()._uncapped(X)
    with config_context(memory_budget=within - 1):
        assert not DoFKernelRidgeCV()._uncapped(X)  # K passes its share


def test_cv_exact_route_scores_zero_weights_as_nothing():
    # A row of zero weight takes no part in the fit, nor in the score: the
    # score is that of the positive rows' exact fit, over all n rows.
    X, y = _exact_hungry(n=300)
    sw = np.random.RandomState(1).uniform(0.5, 2.0, len(y))
    sw[:7] = 0.0
    model = DoFKernelRidgeCV((1e-3, 1e-1), gamma=2.0, random_state=0).fit(
        X, y, sample_weight=sw
    )
    assert model.nystroem_.exact_ and np.isfinite(model.best_score_)
    keep = sw > 0
    *_, residuals = _ridge_solve.exact_kernel_ridge(
        rbf_kernel(X[keep], gamma=2.0),
        y[keep, None],
        sw[keep],
        model.alpha_,
        True,
        loo=True,
    )
    expected = -np.sum(sw[keep] * residuals[:, 0] ** 2) / len(y)
    assert model.best_score_ == pytest.approx(expected, rel=1e-7)


def _exact_loo_scores(X, y, gamma, alphas):
    """Minus the mean squared exact leave-one-out residual of exact kernel
    ridge (with intercept) at each penalty, by brute force over the rows."""
    K = rbf_kernel(X, gamma=gamma)
    n = len(y)
    scores = []
    for alpha in alphas:
        residuals = np.empty(n)
        for i in range(n):
            keep = np.arange(n) != i
            dual, intercept = _ridge_solve.exact_kernel_ridge(
                K[np.ix_(keep, keep)].copy(), y[keep, None], None, alpha, True
            )
            residuals[i] = y[i] - (K[i, keep] @ dual[:, 0] + intercept[0])
        scores.append(-np.mean(residuals**2))
    return np.array(scores)


@pytest.mark.parametrize("rank", ["auto", "every row"])
@pytest.mark.parametrize("seed", [0, 1])
def test_cv_exact_search_finds_the_best_penalty_of_the_grid(monkeypatch, seed, rank):
    # Beyond EXACT_GRID_ROWS the exact fit walks the grid instead of scoring
    # all of it: on a unimodal leave-one-out curve it must land on the same
    # penalty as the whole grid scored by brute force, wherever the rounds
    # stopped, and with an int rank of every row, where no rounds chose a
    # penalty to start from.
    X, y = _exact_hungry(n=160, seed=seed)
    y = y + 0.05 * np.random.RandomState(seed).randn(len(y))
    alphas = np.logspace(-5, 0, 6)
    scores = _exact_loo_scores(X, y, 2.0, alphas)
    best = int(np.argmax(scores))
    # (The walk assumes a unimodal curve; check the data give one.)
    assert np.all(np.diff(scores[: best + 1]) > 0)
    assert np.all(np.diff(scores[best:]) < 0)
    monkeypatch.setattr(_ridge, "EXACT_GRID_ROWS", 10)
    n_components = len(X) if rank == "every row" else rank
    model = DoFKernelRidgeCV(
        alphas, gamma=2.0, random_state=0, n_components=n_components
    ).fit(X, y)
    assert model.nystroem_.exact_
    assert model.alpha_ == pytest.approx(alphas[best])
    assert model.best_score_ == pytest.approx(scores[best], rel=1e-7)
    exact = DoFKernelRidge(
        alpha=model.alpha_, gamma=2.0, n_components=len(X), random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-8)


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_cv_exact_fit_replaces_a_low_rank_fit_it_beats(capsys, sampling):
    # pumadyn32nm: the rounds certify about 170 columns at the penalty
    # low-rank fits prefer (lambda = 1e-3); exact kernel ridge at a smaller
    # penalty has a lower exact leave-one-out error by more than loss_tol.
    # (Whatever the rule, the exact fit's landmarks are every row, in a
    # uniform order: a pivoted factor would stop at the numerical rank.)
    X, y = load_shared("pumadyn32nm", n_samples=3500)
    model = DoFKernelRidgeCV(
        kernel="rbf", random_state=0, sampling=sampling, verbose=1
    ).fit(X, y)
    assert model.nystroem_.sampling == "uniform"
    # One line per exact fit scored, the chosen one among them.
    probes = [
        line
        for line in capsys.readouterr().out.splitlines()
        if "exact kernel ridge at" in line
    ]
    assert 1 <= len(probes) <= 13
    assert any(f"penalty {model.alpha_:.4g}:" in line for line in probes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DoFKernelRidgeCV, "_exact_probe", lambda *args: False)
        low_rank = DoFKernelRidgeCV(
            kernel="rbf", random_state=0, sampling=sampling
        ).fit(X, y)
    assert low_rank.n_components_ < len(X) // 2
    assert model.nystroem_.exact_ and model.n_components_ == len(X)
    assert model.alpha_ < low_rank.alpha_
    assert model.best_score_ > (1 - model.loss_tol) * low_rank.best_score_
    _, _, residuals = _ridge_solve.exact_kernel_ridge(
        rbf_kernel(X, gamma=1.0 / X.shape[1]),
        y[:, None],
        None,
        model.alpha_,
        True,
        loo=True,
    )
    assert model.best_score_ == pytest.approx(-np.mean(residuals**2), rel=1e-8)
    exact = DoFKernelRidge(alpha=model.alpha_, n_components=len(X), random_state=0).fit(
        X, y
    )
    np.testing.assert_allclose(
        model.predict(X[:200]), exact.predict(X[:200]), atol=1e-8
    )


def test_cv_keeps_the_low_rank_fit_an_exact_fit_does_not_beat():
    # abalone: exact kernel ridge at the smaller penalties scores no better
    # than the certified low-rank fit, which is kept as it was.
    X, y = load_shared("abalone", n_samples=2500)
    model = DoFKernelRidgeCV(kernel="rbf", random_state=0).fit(X, y)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DoFKernelRidgeCV, "_exact_probe", lambda *args: False)
        low_rank = DoFKernelRidgeCV(kernel="rbf", random_state=0).fit(X, y)
    assert not model.nystroem_.exact_ and model.n_components_ < len(X) // 2
    assert model.n_components_ == low_rank.n_components_
    assert model.nystroem_.n_components == "auto"
    assert model.alpha_ == low_rank.alpha_
    assert model.best_score_ == low_rank.best_score_
    np.testing.assert_array_equal(model.predict(X), low_rank.predict(X))
    assert sorted(vars(model)) == sorted(vars(low_rank))


def _overfitting_problem():
    """A low-rank fit at the penalty 1 that exact kernel ridge at every
    smaller penalty of the grid overfits (``gamma=30`` on two features)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, size=(2500, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + rng.standard_normal(2500)
    return X, y, (1e-4, 1e-2, 1.0, 100.0)


def test_cv_screen_rules_out_exact_fits_that_cannot_win(capsys, monkeypatch):
    # One factorisation, at the penalty below the low-rank fit's, read on a
    # sample of rows, stands for the exact fits at every smaller penalty
    # (sklearn_dof._exact_screen): the fit is the one they would have kept.
    X, y, alphas = _overfitting_problem()
    model = DoFKernelRidgeCV(alphas, gamma=30.0, random_state=0, verbose=1).fit(X, y)
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if "exact kernel ridge at" in line
    ]
    assert len(lines) == 1 and "every exact fit below ruled out" in lines[0]
    assert not model.nystroem_.exact_ and model.alpha_ == 1.0
    # The claim: no exact fit below beats the low-rank one by loss_tol.
    for alpha in alphas[:2]:
        _, _, residuals = _ridge_solve.exact_kernel_ridge(
            rbf_kernel(X, gamma=30.0), y[:, None], None, alpha, True, loo=True
        )
        assert -np.mean(residuals**2) < (1 - model.loss_tol) * model.best_score_
    # And the fit is the one the exact fits kept.
    monkeypatch.setattr(_exact_screen, "VALUE_Z", np.inf)
    unscreened = DoFKernelRidgeCV(alphas, gamma=30.0, random_state=0, verbose=1).fit(
        X, y
    )
    assert sum("score" in line for line in capsys.readouterr().out.splitlines()) == 2
    assert model.n_components_ == unscreened.n_components_
    assert model.alpha_ == unscreened.alpha_
    assert model.best_score_ == unscreened.best_score_
    np.testing.assert_array_equal(model.predict(X), unscreened.predict(X))


def test_cv_screen_that_does_not_rule_out_spares_its_factorisation(monkeypatch):
    # A screen that cannot rule out (VALUE_Z infinite) finishes its penalty's
    # exact fit from its own factor: as many factorisations as with no
    # screen (the sample's memory refused by one byte), the same fit.
    X, y, alphas = _overfitting_problem()
    n = len(X)
    rows, slope_rows = _exact_screen.sample_sizes(n)
    calls, factored, models = [], {}, {}
    factor_solve = _ridge_solve._exact_factor_solve

    def counted(*args, **kwargs):
        calls.append(args[3])  # the penalty
        return factor_solve(*args, **kwargs)

    monkeypatch.setattr(_ridge_solve, "_exact_factor_solve", counted)
    monkeypatch.setattr(_exact_screen, "VALUE_Z", np.inf)
    for room in (0, -1):
        budget = 8 * (n**2 + rows**2 + n * slope_rows) + room
        with config_context(memory_budget=budget):
            model = DoFKernelRidgeCV(alphas, gamma=30.0, random_state=0)
            models[room] = model.fit(X, y)
        factored[room], calls[:] = list(calls), []
    screened, plain = factored[0], factored[-1]
    assert sorted(screened) == sorted(plain) and len(plain) == 2
    assert models[0].alpha_ == models[-1].alpha_
    assert models[0].best_score_ == models[-1].best_score_
    np.testing.assert_array_equal(models[0].predict(X), models[-1].predict(X))


@pytest.mark.parametrize("room", [0, -1])
def test_cv_screen_holds_the_memory_given_to_it(capsys, room):
    # The sample's rows^2 + n slope_rows numbers beside K, within the exact
    # route's share of the budget: with one byte less, no screen, and the
    # exact fits decide.
    from sklearn_dof import _memory

    X, y, alphas = _overfitting_problem()
    n = len(X)
    rows, slope_rows = _exact_screen.sample_sizes(n)
    need = 8 * (n**2 + rows**2 + n * slope_rows)
    budget = math.ceil(need / _memory.EXACT_BUDGET_RATIO) + room
    with config_context(memory_budget=budget):
        DoFKernelRidgeCV(alphas, gamma=30.0, random_state=0, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert ("sampled on" in out) == (room == 0)
    assert (out.count("score") >= 2) == (room < 0)


def test_cv_screen_leaves_a_low_rank_fit_of_the_mean_to_the_exact_fits(capsys):
    # pumadyn32nm_snelson with gamma = 1 / d: the low-rank fit predicts the
    # mean at the grid's largest penalty, on the plateau where no slope
    # tells what lies below; exact kernel ridge at a smaller penalty wins.
    X, y = load_shared("pumadyn32nm_snelson", n_samples=3500)
    model = DoFKernelRidgeCV(kernel="rbf", random_state=0, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "sampled on" not in out
    assert model.nystroem_.exact_ and model.n_components_ == len(X)


def test_cv_checks_exact_fits_of_positive_definite_kernels_only(monkeypatch):
    # A callable kernel (here a Gaussian, but the estimator cannot know it)
    # is not factored by the exact fit, so no exact fit is tried after the
    # rounds certify a small rank: the landmarks are chosen once.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (600, 3))
    y = np.sin(X[:, 0]) + 0.3 * rng.randn(600)
    calls = []
    fit_nystroem = DoFKernelRidgeCV._new_fitted_nystroem

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("n_components"))
        return fit_nystroem(self, *args, **kwargs)

    def gaussian(a, b):
        return np.exp(-0.5 * np.sum((a - b) ** 2))

    monkeypatch.setattr(DoFKernelRidgeCV, "_new_fitted_nystroem", counted)
    alphas = np.logspace(-4, 2, 7)
    model = DoFKernelRidgeCV(alphas, kernel=gaussian, random_state=0).fit(X, y)
    assert not model.nystroem_.exact_ and model.n_components_ < 300
    assert model.alpha_ > alphas.min()
    assert calls == [None]
    # The same kernel by name is checked against exact fits.
    calls.clear()
    DoFKernelRidgeCV(alphas, gamma=0.5, random_state=0).fit(X, y)
    assert calls == [None, len(X)]


@pytest.mark.parametrize(
    "noise, smallest, exact", [(1e-4, -10, True), (0.05, -5, False)]
)
def test_cv_exact_fits_hold_one_kernel_matrix_at_a_time(
    monkeypatch, capsys, noise, smallest, exact
):
    # The walk recomputes K for each penalty instead of keeping a copy: the
    # fit's peak of traced memory stays near one n x n array (a second one
    # lived on in the idle workers of the parallel pass: 2.0 times, before).
    import tracemalloc

    n = 1500
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + noise * rng.randn(n)
    monkeypatch.setattr(_ridge, "EXACT_GRID_ROWS", 10)
    alphas = np.logspace(smallest, 0, 1 - smallest)
    # (n_jobs=2: the passes run on the pool's workers, as by default outside
    # the tests, whose BLAS is pinned to one thread.)
    model = DoFKernelRidgeCV(alphas, gamma=2.0, random_state=0, n_jobs=2, verbose=1)
    tracemalloc.start()
    try:
        model.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    fits = capsys.readouterr().out.count("exact kernel ridge at penalty")
    assert fits >= 2 and model.nystroem_.exact_ == exact
    assert peak < 1.5 * 8 * n**2


def _smooth_problem(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    return X, y + 0.01 * rng.randn(n)


def test_length_scales_learned_on_a_subsample_are_walked_on_every_row(monkeypatch):
    # 1,000 rows, the kernel learned on 300: the exact fit on every row
    # scales the learned length scales alike while its leave-one-out
    # improves.
    X, y = _smooth_problem(1000)
    params = dict(kernel_subsample=300, random_state=0)
    walked = DoFKernelRidgeCV(**params).fit(X, y)
    monkeypatch.setattr(_ridge, "LENGTH_SCALE_STEPS", 0)
    kept = DoFKernelRidgeCV(**params).fit(X, y)
    assert walked.nystroem_.exact_ and kept.nystroem_.exact_
    assert type(walked.kernel_) is type(kept.kernel_)
    ratio = np.asarray(walked.kernel_.length_scale) / kept.kernel_.length_scale
    steps = np.log(ratio) / np.log(_ridge.LENGTH_SCALE_STEP)
    np.testing.assert_allclose(steps, np.round(steps[0]), atol=1e-9)
    assert 1 <= abs(round(steps[0])) <= 4
    assert walked.best_score_ > kept.best_score_
    # kernel_ is the kernel of the fit: a refit at it, its bounds fixed,
    # predicts the same (to the rounding of a penalty of 3e-8, the rows in
    # another order).
    fixed = walked.kernel_.clone_with_theta(walked.kernel_.theta)
    fixed.length_scale_bounds = "fixed"
    refit = DoFKernelRidgeCV(kernel=fixed, alphas=[walked.alpha_]).fit(X, y)
    X_test, _ = _smooth_problem(200, seed=1)
    np.testing.assert_allclose(
        walked.predict(X_test), refit.predict(X_test), rtol=1e-6, atol=1e-8
    )


def test_length_scales_learned_on_every_row_are_not_walked(monkeypatch):
    X, y = _smooth_problem(300)
    walked = DoFKernelRidgeCV(kernel_subsample=300, random_state=0).fit(X, y)
    monkeypatch.setattr(_ridge, "LENGTH_SCALE_STEPS", 0)
    kept = DoFKernelRidgeCV(kernel_subsample=300, random_state=0).fit(X, y)
    np.testing.assert_array_equal(
        walked.kernel_.length_scale, kept.kernel_.length_scale
    )
    assert walked.alpha_ == kept.alpha_


def test_the_length_scale_walk_keeps_within_the_kernel_s_bounds():
    # The walk would go past twice the learned scales here (it asks for
    # longer ones), but the bounds stop it, as they stop the search.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(700, 3))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] + 0.01 * rng.randn(700)
    kernel = RBF([1.0, 1.0, 1.0], (0.5, 1.0))
    model = DoFKernelRidgeCV(kernel=kernel, kernel_subsample=60, random_state=0)
    model.fit(X, y)
    assert model.nystroem_.exact_
    scales = np.asarray(model.kernel_.length_scale)
    assert np.all((scales >= 0.5) & (scales <= 1.0))
    assert model.kernel == RBF([1.0, 1.0, 1.0], (0.5, 1.0))


def _repeated_rows(n_distinct, n_rows, seed=0):
    rng = np.random.RandomState(seed)
    distinct = rng.uniform(-2, 2, size=(n_distinct, 2))
    X = distinct[rng.randint(0, n_distinct, n_rows)]
    f = np.c_[np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]), X[:, 0] * X[:, 1]]
    y = f + 0.1 * rng.randn(n_rows, 2)
    return X, y, rng.uniform(0.3, 3.0, n_rows)


# A budget whose default cap is 100 columns and whose exact route stops at
# 223 rows (as tests/test_heldout.py's): 600 rows do not fit it, their 190
# or so distinct ones do.
DISTINCT_BUDGET = 8 * 5 * 100**2


@pytest.mark.parametrize(
    "params",
    [
        dict(kernel="rbf", gamma=5.0),
        dict(),  # the learned kernel
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_repeated_rows_past_the_cap_are_fitted_exactly_on_the_distinct_ones(
    params, weighted
):
    # Past its cap the automatic rank hands over to exact kernel ridge on
    # the distinct rows: the fit, penalty and leave-one-out score of exact
    # kernel ridge on every row, where a larger budget lets it run.
    X, y, weight = _repeated_rows(190, 600)
    weight = weight if weighted else None
    with config_context(memory_budget=DISTINCT_BUDGET):
        distinct = DoFKernelRidgeCV(random_state=0, **params).fit(X, y, weight)
    with config_context(memory_budget=8 * 5 * 2000**2):
        every = DoFKernelRidgeCV(random_state=0, **params).fit(X, y, weight)
    assert every.nystroem_.exact_ and every.n_components_ == 600
    n_distinct = np.unique(X, axis=0).shape[0]
    assert distinct.nystroem_.exact_ and distinct.n_components_ == n_distinct
    landmarks = distinct.nystroem_.component_indices_
    assert np.unique(X[landmarks], axis=0).shape[0] == n_distinct
    np.testing.assert_array_equal(distinct.nystroem_.components_, X[landmarks])
    assert distinct.alpha_ == every.alpha_
    assert distinct.best_score_ == pytest.approx(every.best_score_, rel=1e-10)
    X_test = np.random.RandomState(1).uniform(-2, 2, size=(50, 2))
    np.testing.assert_allclose(
        distinct.predict(X_test), every.predict(X_test), rtol=1e-8, atol=1e-10
    )


def test_repeated_rows_walk_their_length_scales_on_the_distinct_ones(monkeypatch):
    # The learned length scales are walked on the distinct rows as on every
    # row: the same scales, penalty and fit.
    rng = np.random.RandomState(3)
    X = rng.uniform(-2, 2, size=(200, 4))[rng.randint(0, 200, 600)]
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    y += 0.01 * rng.randn(600)
    params = dict(kernel_subsample=60, random_state=0)
    with config_context(memory_budget=DISTINCT_BUDGET):
        distinct = DoFKernelRidgeCV(**params).fit(X, y)
    with config_context(memory_budget=8 * 5 * 2000**2):
        every = DoFKernelRidgeCV(**params).fit(X, y)
    monkeypatch.setattr(_ridge, "LENGTH_SCALE_STEPS", 0)
    with config_context(memory_budget=DISTINCT_BUDGET):
        kept = DoFKernelRidgeCV(**params).fit(X, y)
    assert distinct.n_components_ < 600 and every.n_components_ == 600
    assert distinct.kernel_ != kept.kernel_  # the walk moved
    np.testing.assert_allclose(
        distinct.kernel_.length_scale, every.kernel_.length_scale, rtol=1e-12
    )
    assert distinct.alpha_ == every.alpha_
    # To the rounding of a penalty of 6e-9 (dual weights near 3e8), the
    # factorisations of 600 and of 194 rows.
    X_test = np.random.RandomState(1).uniform(-2, 2, size=(50, 4))
    np.testing.assert_allclose(
        distinct.predict(X_test), every.predict(X_test), rtol=1e-5, atol=1e-6
    )


def test_repeated_rows_with_a_zero_weight_keep_the_held_out_route():
    # A row of zero weight has no leave-one-out residual to score: the
    # distinct rows' exact fit is not taken (held-out rounds are).
    X, y, weight = _repeated_rows(190, 600)
    weight[0] = 0.0
    with config_context(memory_budget=DISTINCT_BUDGET), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DoFKernelRidgeCV(kernel="rbf", gamma=5.0, random_state=0)
        model.fit(X, y, weight)
    assert not model.nystroem_.exact_


@pytest.mark.parametrize("weighted", [False, True])
def test_repeated_rows_past_the_cap_fit_exact_kernel_ridge_at_the_penalty_given(
    weighted,
):
    # DoFKernelRidge's automatic rank past its cap: exact kernel ridge on
    # the distinct rows, the fit of exact kernel ridge on every row; a row
    # of zero weight (a group of its own here) takes no part.
    X, y, weight = _repeated_rows(190, 600)
    weight = weight if weighted else None
    if weighted:
        X[0] += 10.0
        weight[0] = 0.0
    params = dict(kernel="rbf", gamma=5.0, alpha=0.05, random_state=0)
    with config_context(memory_budget=DISTINCT_BUDGET):
        distinct = DoFKernelRidge(**params).fit(X, y, weight)
    n_distinct = np.unique(X, axis=0).shape[0]
    assert distinct.nystroem_.exact_ and distinct.n_components_ == n_distinct
    with config_context(memory_budget=8 * 5 * 2000**2):
        every = DoFKernelRidge(**params).fit(X, y, weight)
    assert every.nystroem_.exact_ and every.n_components_ == 600
    X_test = np.random.RandomState(1).uniform(-2, 2, size=(50, 2))
    np.testing.assert_allclose(
        distinct.predict(X_test), every.predict(X_test), rtol=1e-8, atol=1e-10
    )


def test_repeated_rows_walk_length_scales_where_rows_outnumber_the_subsample():
    # 200 distinct rows, 600 rows, the kernel learned on 250: the rows, not
    # the distinct ones, outnumber the subsample, so the length scales are
    # walked as on every row.
    rng = np.random.RandomState(0)
    distinct = rng.uniform(-2, 2, size=(200, 4))
    X = distinct[np.r_[np.repeat(np.arange(10), 41), np.arange(10, 200)]]
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    y += 0.01 * rng.randn(600)
    params = dict(kernel_subsample=250, random_state=0)
    with config_context(memory_budget=DISTINCT_BUDGET):
        grouped = DoFKernelRidgeCV(**params).fit(X, y)
    with config_context(memory_budget=8 * 5 * 2000**2):
        every = DoFKernelRidgeCV(**params).fit(X, y)
    assert grouped.n_components_ == 200 and every.n_components_ == 600
    np.testing.assert_allclose(
        grouped.kernel_.length_scale, every.kernel_.length_scale, rtol=1e-12
    )
    assert grouped.best_score_ == pytest.approx(every.best_score_, rel=1e-8)


@pytest.mark.parametrize("estimator", [DoFKernelRidge, DoFKernelRidgeCV])
def test_repeated_rows_report_the_degrees_of_freedom_of_every_row(estimator):
    # The fit on the distinct rows reports d_max, d_eff and d_ave of the
    # kernel matrix of all the rows, repeats included, at the transformer's
    # penalty.
    X, y, _ = _repeated_rows(190, 600)
    params = dict(kernel="rbf", gamma=5.0, random_state=0)
    if estimator is DoFKernelRidge:
        params["alpha"] = 0.05
    with config_context(memory_budget=DISTINCT_BUDGET):
        model = estimator(**params).fit(X, y)
    assert model.n_components_ < 600
    exact = degrees_of_freedom(rbf_kernel(X, gamma=5.0), model.nystroem_.alpha_)
    assert model.dof_ == pytest.approx(exact.d_max, rel=1e-8)
    assert model.effective_dof_ == pytest.approx(exact.d_eff, rel=1e-8)
    assert model.nystroem_.averaged_dof_ == pytest.approx(exact.d_ave, rel=1e-8)


@pytest.mark.parametrize("sparse_input", [False, True])
@pytest.mark.parametrize("alpha", [0.05, 1.0])
def test_an_exact_fit_reports_its_exact_degrees_of_freedom(alpha, sparse_input):
    # The rounds jump to every row at 128 columns here, where their
    # doubling estimate is still far off (d_eff 309.9 for 167.0 at 0.05).
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(600, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.randn(600)
    data = sparse.csr_matrix(X) if sparse_input else X
    model = DoFKernelRidge(kernel="rbf", gamma=5.0, alpha=alpha).fit(data, y)
    assert model.nystroem_.exact_ and model.n_components_ == 600
    exact = degrees_of_freedom(rbf_kernel(X, gamma=5.0), alpha)
    assert model.effective_dof_ == pytest.approx(exact.d_eff, rel=1e-8)
    assert model.dof_ == pytest.approx(exact.d_max, rel=1e-8)
    assert model.nystroem_.averaged_dof_ == pytest.approx(exact.d_ave, rel=1e-8)
