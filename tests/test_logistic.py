import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFNystroem, _newton
from sklearn_dof._blocks import FeatureBlocks
from sklearn_dof._logistic import DoFKernelLogisticRegression
from sklearn_dof._newton import CHOLESKY_MAX_FEATURES, hessian_nbytes, logistic_newton

from .conftest import SHARED_DATA

# Checks this estimator cannot pass, by design.
EXPECTED_FAILED_CHECKS = {
    # Integer weights are not equivalent to repeated rows: the landmarks are
    # drawn among the rows (a repeated row is more likely to be drawn, and the
    # draw of the same seed differs between the two data sets) and the
    # automatic rank follows the degrees of freedom of the kernel matrix of
    # the rows, which repetition changes.  The logistic fit itself is
    # weight-equivalent (test_solver_weights_equal_repetitions); so is a
    # full-rank feature map (test_zero_weights_equal_removal).
    "check_sample_weight_equivalence_on_dense_data": (
        "the Nystroem landmarks and rank are drawn from the rows, not the weights"
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "the Nystroem landmarks and rank are drawn from the rows, not the weights"
    ),
}


@parametrize_with_checks(
    [DoFKernelLogisticRegression()],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _problem(n_classes, n_samples=300, seed=0):
    X, y = make_classification(
        n_samples,
        n_features=6,
        n_informative=4,
        n_classes=n_classes,
        n_clusters_per_class=1,
        flip_y=0.05,
        random_state=seed,
    )
    weights = np.random.RandomState(seed).randint(0, 4, n_samples).astype(float)
    return X, y, weights


def _reference(Phi, y, alpha, fit_intercept, sample_weight, **kwargs):
    params = dict(solver="newton-cholesky", tol=1e-10, max_iter=1000)
    params.update(kwargs)
    return LogisticRegression(C=1.0 / alpha, fit_intercept=fit_intercept, **params).fit(
        Phi, y, sample_weight=sample_weight
    )


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 1e-2])
@pytest.mark.parametrize(
    "solver, max_hessian_bytes",
    [("auto", 2**28), ("auto", 0), ("newton-cholesky", 2**28)],
)
def test_matches_sklearn_newton_cholesky(
    n_classes, fit_intercept, weighted, alpha, solver, max_hessian_bytes
):
    # Same objective as LogisticRegression(C=1/alpha) on the same features;
    # scikit-learn >= 1.6 fits multiclass newton-cholesky as a multinomial.
    # "auto" is Newton-CG from three classes on or when the Hessian is over
    # max_hessian_bytes; =0 also leaves it the Hessian's diagonal as its
    # preconditioner.
    X, y, weights = _problem(n_classes)
    sample_weight = weights if weighted else None
    clf = DoFKernelLogisticRegression(
        alpha=alpha,
        gamma=0.2,
        n_components=40,
        fit_intercept=fit_intercept,
        tol=1e-10,
        max_hessian_bytes=max_hessian_bytes,
        solver=solver,
        random_state=0,
    ).fit(X, y, sample_weight=sample_weight)
    cholesky = solver != "auto" or (n_classes == 2 and max_hessian_bytes > 0)
    assert clf.solver_ == ("newton-cholesky" if cholesky else "newton-cg")
    Phi = clf.nystroem_.transform(X)
    ref = _reference(Phi, y, alpha, fit_intercept, sample_weight)

    assert clf.coef_.shape == ref.coef_.shape == (n_classes if n_classes > 2 else 1, 40)
    assert clf.intercept_.shape == ref.intercept_.shape
    assert_allclose(clf.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert_allclose(clf.intercept_, ref.intercept_, rtol=0, atol=1e-6)
    assert_allclose(clf.predict_proba(X), ref.predict_proba(Phi), atol=1e-8)
    assert_allclose(clf.decision_function(X), ref.decision_function(Phi), atol=1e-6)
    assert clf.n_iter_[0] <= 15


@pytest.mark.parametrize("max_hessian_bytes", [2**20, 2**17, 2**12])
def test_newton_cg_on_many_classes_matches_cholesky(max_hessian_bytes):
    # Forced Cholesky steps against Newton-CG ("auto"); a Hessian over the
    # budget (5 classes x 81 parameters: 1.3 MB).  In 1 MiB the Gram matrix
    # (52 kB) and the 5 diagonal blocks (262 kB) fit (the switch to
    # block-Jacobi is open), in 128 kiB only the Gram matrix, in 4 kiB
    # neither (the Hessian's diagonal).
    X, y, weights = _problem(5, n_samples=400)
    params = dict(alpha=1e-2, gamma=0.2, n_components=80, tol=1e-10, random_state=0)
    chol = DoFKernelLogisticRegression(solver="newton-cholesky", **params)
    chol.fit(X, y, sample_weight=weights)
    cg = DoFKernelLogisticRegression(max_hessian_bytes=max_hessian_bytes, **params)
    cg.fit(X, y, sample_weight=weights)
    assert hessian_nbytes(80, 5) > max_hessian_bytes
    assert (chol.solver_, cg.solver_) == ("newton-cholesky", "newton-cg")
    assert_allclose(cg.coef_, chol.coef_, rtol=0, atol=1e-6)
    assert_allclose(cg.intercept_, chol.intercept_, rtol=0, atol=1e-6)


@pytest.mark.parametrize("sample_weights", [False, True])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_newton_cg_on_kernel_blocks_matches_the_features(
    n_classes, sample_weights, monkeypatch
):
    # Features too large to keep: Newton-CG runs on the kernel blocks in the
    # Cholesky basis (streamed passes, R^{-1} on the coefficients' side,
    # the landmarks' Gram matrix as preconditioner) and never forms them.
    # Same optimum as on the features themselves.
    from sklearn_dof import _logistic

    X, y, weights = _problem(n_classes, n_samples=400)
    weights = weights if sample_weights else None
    params = dict(alpha=1e-2, gamma=0.2, n_components=80, tol=1e-10, random_state=0)
    ref = DoFKernelLogisticRegression(solver="newton-cg", **params)
    ref.fit(X, y, sample_weight=weights)
    problems = []
    init = _newton._Problem.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        problems.append(self)

    monkeypatch.setattr(_newton._Problem, "__init__", spy)
    formed = []
    features_of = _newton._Problem._features_of
    monkeypatch.setattr(
        _newton._Problem,
        "_features_of",
        lambda self, K_b: formed.append(K_b.shape) or features_of(self, K_b),
    )
    monkeypatch.setattr(_logistic, "_feature_cache_bytes", lambda: 0)
    clf = DoFKernelLogisticRegression(solver="newton-cg", **params)
    clf.fit(X, y, sample_weight=weights)
    assert problems[-1].basis is not None and not formed
    assert clf.solver_ == "newton-cg"
    assert_allclose(clf.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert_allclose(clf.intercept_, ref.intercept_, rtol=0, atol=1e-6)
    assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=1e-7)
    # "auto" picks the Cholesky steps for two classes at this size: on the
    # features, whatever their memory.
    problems.clear()
    auto = DoFKernelLogisticRegression(**params).fit(X, y, sample_weight=weights)
    expected = "newton-cholesky" if n_classes == 2 else "newton-cg"
    assert auto.solver_ == expected
    assert (problems[-1].basis is None) == (n_classes == 2)


@pytest.mark.parametrize(
    "n_classes, solver, expected",
    [
        (2, "auto", "newton-cholesky"),
        (3, "auto", "newton-cg"),
        (2, "auto-large", "newton-cg"),
        (2, "newton-cg", "newton-cg"),
        (3, "newton-cholesky", "newton-cholesky"),
    ],
)
def test_solver_parameter_picks_the_newton_step(n_classes, solver, expected):
    # "auto": Cholesky steps for two classes and few landmarks (the Hessian
    # fits the budget), Newton-CG from three classes or CHOLESKY_MAX_FEATURES
    # landmarks on; either can be forced, and both reach the same
    # coefficients.
    X, y, _ = _problem(n_classes, n_samples=600 if solver == "auto-large" else 300)
    params = dict(alpha=1e-2, gamma=0.2, n_components=40, tol=1e-10, random_state=0)
    if solver == "auto-large":
        solver = "auto"
        params["n_components"] = CHOLESKY_MAX_FEATURES
    clf = DoFKernelLogisticRegression(solver=solver, **params).fit(X, y)
    assert clf.solver_ == expected
    other = {"newton-cholesky": "newton-cg", "newton-cg": "newton-cholesky"}
    ref = DoFKernelLogisticRegression(solver=other[expected], **params).fit(X, y)
    assert ref.solver_ == other[expected]
    assert_allclose(clf.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert_allclose(clf.intercept_, ref.intercept_, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n_classes", [3, 4])
def test_newton_cg_buys_the_blocks_only_when_curvature_is_uneven(n_classes):
    # At alpha = 10 the Gram matrix's preconditioner resolves every step
    # within the switch's budget of products (16 products in all with 3
    # classes); nearly unpenalised, a step outruns it and the rest of the
    # fit runs on the Hessian's blocks.  The probabilities are the Cholesky
    # steps' either way.
    X, y, _ = _problem(n_classes, n_samples=600)
    Phi = DoFKernelLogisticRegression(gamma=0.2, n_components=60, random_state=0)
    Phi = Phi.fit(X, y).nystroem_.transform(X)
    modes = {}
    for alpha in (10.0, 1e-6):
        problem = _newton._Problem(
            FeatureBlocks.from_array(Phi), y, n_classes, alpha, np.ones(len(y)), True
        )
        preconditioner = _newton._Preconditioner(problem, 2**28)
        theta = np.zeros((problem.m, problem.q))
        theta, _, converged = _newton._newton_loop(
            problem, theta, 1e-10, 100, preconditioner
        )
        assert converged
        modes[alpha] = preconditioner.mode
        ref = logistic_newton(Phi, y, alpha, tol=1e-10, inner_solver="cholesky")
        # Probabilities: at alpha = 1e-6 the tolerance does not pin the
        # coefficients down (see test_small_alpha_few_newton_steps).
        ref_theta = np.column_stack([ref.coef, ref.intercept])
        assert_allclose(
            problem.probabilities(problem.raw(theta)),
            problem.probabilities(problem.raw(ref_theta)),
            rtol=0,
            atol=1e-6,
        )
    assert modes == {10.0: "gram", 1e-6: "blocks"}


def _objective(coef, intercept, Phi, y, alpha):
    """sum_i loss_i + alpha / 2 ||coef||^2 for labels 0, 1."""
    raw = Phi @ coef.ravel() + intercept[0]
    return np.logaddexp(0, raw).sum() - raw @ y + 0.5 * alpha * np.sum(coef**2)


@pytest.mark.parametrize("max_hessian_bytes", [2**28, 0])
def test_small_alpha_few_newton_steps(max_hessian_bytes):
    # Nearly unpenalised logistic regression on 300 RBF features of a noisy
    # problem: Newton needs 24 steps (Newton-CG 23) where lbfgs at the same
    # tol needs ~400 and stops on its objective test before the gradient one
    # (measured with scikit-learn 1.9).  The objectives agree to the
    # tolerance (the stopping rule bounds the suboptimality of the objective
    # divided by n by about tol); at this conditioning (Hessian eigenvalues
    # down to alpha / n = 1e-11) it does not pin the coefficients down.
    X, y = make_classification(
        1000, n_features=10, n_informative=5, flip_y=0.05, random_state=0
    )
    alpha = 1e-8
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = DoFKernelLogisticRegression(
            alpha=alpha,
            gamma=0.05,
            n_components=300,
            max_hessian_bytes=max_hessian_bytes,
            random_state=0,
        ).fit(X, y)
    assert clf.n_iter_[0] <= 30
    Phi = clf.nystroem_.transform(X)
    ref = _reference(Phi, y, alpha, True, None, tol=1e-8)
    ours = _objective(clf.coef_, clf.intercept_, Phi, y, alpha)
    theirs = _objective(ref.coef_, ref.intercept_, Phi, y, alpha)
    # Newton-CG (max_hessian_bytes=0, diagonal preconditioner) reads the
    # Newton decrement off an inexact step, which underestimates it at this
    # conditioning: measured 2.9e-8 above the optimum per row with
    # tol = 1e-8 (the Cholesky steps' decrement is exact).
    slack = 1 if clf.solver_ == "newton-cholesky" else 5
    assert abs(ours - theirs) <= slack * len(y) * clf.tol


def _load_split(name, n_train, n_test, seed=0):
    path = SHARED_DATA / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    data = np.load(path)
    X, y, is_test = data["X"], data["y"], data["is_test"]
    rng = np.random.RandomState(seed)
    train = rng.choice(np.flatnonzero(~is_test), n_train, replace=False)
    test = rng.choice(np.flatnonzero(is_test), n_test, replace=False)
    return X[train], y[train], X[test], y[test]


def test_small_alpha_real_data_newton_vs_lbfgs():
    X, y, _, _ = _load_split("ijcnn1", 1000, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = DoFKernelLogisticRegression(
            alpha=1e-8, gamma=0.1, n_components=100, random_state=0
        ).fit(X, y)
    # Measured: 19 Newton steps; lbfgs with the same tol, 7241 iterations.
    assert clf.n_iter_[0] <= 30
    Phi = clf.nystroem_.transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lbfgs = LogisticRegression(C=1e8, tol=clf.tol, max_iter=20_000).fit(Phi, y)
    assert lbfgs.n_iter_[0] > 10 * clf.n_iter_[0]


def test_real_data_accuracy_close_to_svc():
    # 3000 / 2000 rows of Adult (a9a), RBF kernel: the auto-rank model
    # (~730 of 3000 features) is within a point of the best SVC of a small
    # grid of C at the same gamma (measured: 0.845 against 0.841).
    X_train, y_train, X_test, y_test = _load_split("a9a_adult", 3000, 2000)
    gamma = 0.01
    # One BLAS thread: the machine is shared and threads oversubscribe it.
    with threadpool_limits(1):
        clf = DoFKernelLogisticRegression(
            alpha=0.3, gamma=gamma, sampling="pivoted", random_state=0
        ).fit(X_train, y_train)
        accuracy = clf.score(X_test, y_test)
        svc = max(
            SVC(C=C, gamma=gamma).fit(X_train, y_train).score(X_test, y_test)
            for C in [0.3, 1.0, 3.0, 10.0]
        )
    assert clf.n_components_ < 3000 // 2
    assert accuracy >= svc - 0.01


@pytest.mark.parametrize("n_classes", [2, 3])
def test_string_labels_and_probabilities(n_classes):
    X, y, _ = _problem(n_classes, n_samples=200)
    names = np.array(["cat", "dog", "emu"])[:n_classes]
    labels = names[y]
    clf = DoFKernelLogisticRegression(gamma=0.2, random_state=0).fit(X, labels)
    assert_array_equal(clf.classes_, names)
    proba = clf.predict_proba(X)
    assert proba.shape == (200, n_classes)
    assert_allclose(proba.sum(axis=1), 1.0)
    assert_allclose(clf.predict_log_proba(X), np.log(proba), atol=1e-12)
    assert_array_equal(clf.predict(X), names[proba.argmax(axis=1)])
    scores = clf.decision_function(X)
    assert scores.shape == ((200,) if n_classes == 2 else (200, n_classes))
    assert clf.score(X, labels) > 0.8
    assert clf.n_components_ == clf.nystroem_.n_components_ == clf.coef_.shape[1]
    assert clf.dof_ == clf.nystroem_.dof_
    assert clf.effective_dof_ == clf.nystroem_.effective_dof_


def test_predict_log_proba_is_finite_when_saturated():
    X = np.r_[np.zeros((5, 1)), np.ones((5, 1))]
    y = np.r_[np.zeros(5), np.ones(5)]
    clf = DoFKernelLogisticRegression(alpha=1e-6, gamma=50.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    assert np.isfinite(clf.predict_log_proba(np.array([[-10.0], [10.0]]))).all()


def test_pickle_round_trip():
    X, y, _ = _problem(3, n_samples=150)
    clf = DoFKernelLogisticRegression(gamma=0.2, random_state=0).fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    assert_array_equal(clone.predict(X), clf.predict(X))
    assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize("alpha", [0.0, -1.0, "1"])
def test_invalid_alpha(alpha):
    X, y, _ = _problem(2, n_samples=50)
    with pytest.raises(InvalidParameterError, match="'alpha'"):
        DoFKernelLogisticRegression(alpha=alpha).fit(X, y)


def test_one_weighted_class_is_an_error():
    X, y, _ = _problem(2, n_samples=50)
    with pytest.raises(ValueError, match="at least 2 classes"):
        DoFKernelLogisticRegression().fit(X, y, sample_weight=(y == 1).astype(float))


def test_max_iter_warns():
    X, y, _ = _problem(2, n_samples=100)
    clf = DoFKernelLogisticRegression(max_iter=1, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge after 1"):
        clf.fit(X, y)
    assert clf.n_iter_[0] == 1


def test_zero_weights_equal_removal():
    # Zero weights are removed before the landmarks are chosen, so the whole
    # model, feature map included, is that of the remaining rows.
    X, y, weights = _problem(3, n_samples=120)
    params = dict(gamma=0.2, tol=1e-10, random_state=0)
    keep = weights > 0
    weighted = DoFKernelLogisticRegression(**params).fit(X, y, sample_weight=keep * 1.0)
    removed = DoFKernelLogisticRegression(**params).fit(X[keep], y[keep])
    assert_array_equal(weighted.nystroem_.components_, removed.nystroem_.components_)
    assert_allclose(weighted.coef_, removed.coef_, atol=1e-8)
    assert_allclose(weighted.predict_proba(X), removed.predict_proba(X), atol=1e-8)


def test_precomputed_kernel_full_rank_equals_rbf():
    # At full rank the feature map spans the kernel at the training points of
    # positive weight (the representer theorem), whichever landmarks it has:
    # a precomputed kernel (zero-weight rows kept as landmarks) and the RBF
    # kernel (zero-weight rows removed) give the same classifier.
    rng = np.random.RandomState(0)
    X, X_test = rng.randn(120, 3), rng.randn(20, 3)
    y = (X[:, 0] + 0.3 * rng.randn(120) > 0).astype(int)
    weights = rng.randint(0, 3, 120).astype(float)
    params = dict(n_components=120, tol=1e-10, random_state=0)
    K = rbf_kernel(X, gamma=0.5)
    pre = DoFKernelLogisticRegression(kernel="precomputed", **params)
    pre.fit(K, y, sample_weight=weights)
    rbf = DoFKernelLogisticRegression(gamma=0.5, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components clipped
        rbf.fit(X, y, sample_weight=weights)
    assert pre.n_components_ == 120 and rbf.n_components_ == (weights > 0).sum()
    assert_allclose(
        pre.predict_proba(rbf_kernel(X_test, X, gamma=0.5)),
        rbf.predict_proba(X_test),
        atol=1e-8,
    )


# --- the solver on its own -------------------------------------------------


@pytest.mark.parametrize("inner_solver", ["cholesky", "cg"])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_solver_weights_equal_repetitions(inner_solver, n_classes):
    rng = np.random.RandomState(0)
    Phi = rng.randn(60, 5)
    y = rng.randint(0, n_classes, 60)
    counts = rng.randint(0, 4, 60)
    kwargs = dict(n_classes=n_classes, tol=1e-12, inner_solver=inner_solver)
    weighted = logistic_newton(Phi, y, 0.1, sample_weight=counts, **kwargs)
    repeated = logistic_newton(
        np.repeat(Phi, counts, axis=0), np.repeat(y, counts), 0.1, **kwargs
    )
    assert weighted.converged and repeated.converged
    assert weighted.inner_solver == inner_solver
    assert_allclose(weighted.coef, repeated.coef, atol=1e-9)
    assert_allclose(weighted.intercept, repeated.intercept, atol=1e-9)


def test_solver_multinomial_is_symmetric():
    # Penalised coefficients sum to zero over the classes at the optimum and
    # the (unpenalised) intercepts are centred.
    rng = np.random.RandomState(1)
    Phi = rng.randn(100, 4)
    y = rng.randint(0, 3, 100)
    for inner_solver in ["cholesky", "cg"]:
        res = logistic_newton(Phi, y, 1.0, tol=1e-12, inner_solver=inner_solver)
        assert_allclose(res.coef.sum(axis=0), 0.0, atol=1e-9)
        assert abs(res.intercept.sum()) < 1e-12


def test_solver_input_errors():
    Phi = np.ones((4, 2))
    y = np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match="non-zero"):
        logistic_newton(Phi, y, 1.0, sample_weight=np.zeros(4))
    with pytest.raises(ValueError, match="non-negative"):
        logistic_newton(Phi, y, 1.0, sample_weight=-np.ones(4))
    with pytest.raises(ValueError, match="class indices"):
        logistic_newton(Phi, y + 1, 1.0, n_classes=2)
    with pytest.raises(InvalidParameterError, match="'alpha'"):
        logistic_newton(Phi, y, 0.0)
    start = logistic_newton(Phi, y, 1.0)
    with pytest.raises(ValueError, match="start has coefficients"):
        logistic_newton(Phi[:, :1], y, 1.0, start=start)


@pytest.mark.parametrize("inner_solver", ["cholesky", "cg"])
def test_solver_warm_start_on_nested_features(inner_solver):
    # A start on the first features (their zeros completing it) reaches the
    # cold start's optimum; at the optimum itself no step is taken.
    rng = np.random.RandomState(0)
    Phi = rng.randn(400, 12)
    y = (Phi[:, :3].sum(axis=1) + 0.5 * rng.randn(400) > 0).astype(int)
    kwargs = dict(tol=1e-10, inner_solver=inner_solver)
    cold = logistic_newton(Phi, y, 1.0, **kwargs)
    prefix = logistic_newton(Phi[:, :6], y, 1.0, **kwargs)
    warm = logistic_newton(Phi, y, 1.0, start=prefix, **kwargs)
    assert_allclose(warm.coef, cold.coef, atol=1e-7)
    assert_allclose(warm.intercept, cold.intercept, atol=1e-7)
    assert logistic_newton(Phi, y, 1.0, start=cold, **kwargs).n_iter == 0


@pytest.mark.parametrize(
    "n_classes, n_components, bound", [(2, "dof", 0.25), (3, "dof", 0.5)]
)
def test_dof_rank_reads_the_degrees_of_freedom_at_the_curvature_bound(
    n_classes, n_components, bound
):
    # The rank of the degrees-of-freedom rule is that of ridge regression at
    # alpha / c, c the loss's largest curvature (1/4 binomial, 1/2
    # multinomial): DoFNystroem's at that penalty, a smaller rank than at
    # alpha itself, while the logistic fit keeps its penalty.
    X, y, _ = _problem(n_classes, n_samples=600)
    alpha = 5.0
    clf = DoFKernelLogisticRegression(
        alpha=alpha, gamma=0.5, n_components=n_components, random_state=0
    ).fit(X, y)
    at_bound = DoFNystroem(
        alpha=alpha / bound, gamma=0.5, n_components="dof", random_state=0
    ).fit(X)
    at_alpha = DoFNystroem(
        alpha=alpha, gamma=0.5, n_components="dof", random_state=0
    ).fit(X)
    assert clf.n_components_ == at_bound.n_components_ < at_alpha.n_components_
    assert_allclose(clf.dof_, at_bound.dof_)
    assert clf.nystroem_.alpha == alpha


def test_solver_without_the_decrement_stops_at_the_gradient_test(monkeypatch):
    # check_decrement=False: a start whose gradient meets tol is the
    # result, with no Hessian formed for a step or a decrement (the
    # certificate's leave-one-out pass takes that exact step itself).
    rng = np.random.RandomState(0)
    Phi = rng.randn(400, 12)
    y = (Phi[:, :3].sum(axis=1) + 0.5 * rng.randn(400) > 0).astype(int)
    rough = logistic_newton(Phi, y, 1.0, tol=1e-4, inner_solver="cholesky")
    P = 1 / (1 + np.exp(-(Phi @ rough.coef[0] + rough.intercept[0])))
    gradient = np.r_[Phi.T @ (P - y) / 400 + rough.coef[0] / 400, (P - y).mean()]
    tol = 2 * np.abs(gradient).max()
    checked = logistic_newton(
        Phi, y, 1.0, tol=tol, inner_solver="cholesky", start=rough
    )

    def no_hessian(self, P):
        raise AssertionError("no Hessian past the gradient test")

    monkeypatch.setattr(_newton._Problem, "hessian", no_hessian)
    result = logistic_newton(
        Phi,
        y,
        1.0,
        tol=tol,
        inner_solver="cholesky",
        start=rough,
        check_decrement=False,
    )
    assert result.converged and result.n_iter == 0
    assert_allclose(result.coef, rough.coef)
    # With the decrement, the same start forms the Hessian (and may step).
    assert checked.converged
    with pytest.raises(AssertionError, match="no Hessian"):
        logistic_newton(Phi, y, 1.0, tol=tol, inner_solver="cholesky", start=rough)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_two_class_newton_cg_takes_the_landmarks_gram(monkeypatch, n_classes):
    # On features K(x, I) R^{-1}, two classes precondition Newton-CG with
    # R R^T / p (no pass of n p^2 for the Gram matrix); more classes, whose
    # products cost m times more, with the exact Gram matrix.  The same
    # optimum either way.
    X, y = make_classification(
        1500,
        n_features=5,
        n_informative=4,
        n_redundant=0,
        n_classes=n_classes,
        n_clusters_per_class=1,
        random_state=0,
    )
    grams = []
    landmarks_gram = _newton._Problem._nystroem_gram

    def counted(self, cholesky):
        grams.append(cholesky.shape)
        return landmarks_gram(self, cholesky)

    monkeypatch.setattr(_newton._Problem, "_nystroem_gram", counted)
    params = dict(n_components=400, random_state=0, gamma=0.3, alpha=0.1, tol=1e-8)
    model = DoFKernelLogisticRegression(solver="newton-cg", **params).fit(X, y)
    assert model.solver_ == "newton-cg"
    # (The Gram matrix is made once per fit: R R^T / p, or the pass.)
    assert grams == ([(400, 400)] if n_classes == 2 else [])
    reference = DoFKernelLogisticRegression(solver="newton-cholesky", **params)
    reference.fit(X, y)
    assert_allclose(
        model.decision_function(X), reference.decision_function(X), atol=1e-5
    )


def test_gram_preconditioner_is_refactored_only_when_the_curvature_moves(
    monkeypatch,
):
    # Newton-CG's Gram preconditioner c G + lam keeps its Cholesky factor
    # while the mean curvature c stays within 25% of the factored one: fewer
    # factorisations than steps, the optimum of the Cholesky steps.
    rng = np.random.RandomState(0)
    Phi = rng.randn(3000, 60)
    y = (Phi[:, :5].sum(axis=1) + 0.8 * rng.randn(3000) > 0).astype(int)
    reference = logistic_newton(Phi, y, 1.0, tol=1e-10, inner_solver="cholesky")
    factored = []
    cho_factor = _newton._cho_factor

    def counted(H):
        factored.append(H.shape[0])
        return cho_factor(H)

    monkeypatch.setattr(_newton, "_cho_factor", counted)
    result = logistic_newton(Phi, y, 1.0, tol=1e-10, inner_solver="cg")
    assert result.converged
    assert 1 <= len(factored) < result.n_iter
    assert_allclose(result.coef, reference.coef, atol=1e-6)
    assert_allclose(result.intercept, reference.intercept, atol=1e-6)
