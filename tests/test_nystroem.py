import pickle
import tracemalloc

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import pairwise_kernels, rbf_kernel
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFNystroem, degrees_of_freedom
from sklearn_dof._kernels import KernelColumns
from sklearn_dof._landmark_block import LandmarkFactor, rows_factor
from sklearn_dof._linalg import PINV_RTOL, LandmarkBasis, landmark_cholesky
from sklearn_dof._nystroem import _TriangularFeatures
from sklearn_dof._samplers import partial_cholesky_of
from sklearn_dof.datasets import make_periodic_spline


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(300, 3))
    return X, np.sin(X).sum(1) + 0.1 * rng.randn(300)


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_features_reproduce_nystroem_approximation(data, sampling):
    X, _ = data
    nys = DoFNystroem(gamma=0.3, n_components=40, sampling=sampling, random_state=0)
    Phi = nys.fit_transform(X)
    K = rbf_kernel(X, gamma=0.3)
    idx = nys.component_indices_
    L = K[:, idx] @ np.linalg.pinv(K[np.ix_(idx, idx)]) @ K[idx]
    np.testing.assert_allclose(Phi @ Phi.T, L, atol=1e-8)
    # On the landmark columns the approximation is exact.
    np.testing.assert_allclose((Phi @ Phi.T)[:, idx], K[:, idx], atol=1e-8)
    np.testing.assert_array_equal(nys.components_, X[idx])
    assert nys.n_components_ == 40 == Phi.shape[1]


def test_uniform_matches_sklearn_nystroem_on_same_landmarks(data):
    X, _ = data
    nys = DoFNystroem(gamma=0.3, n_components=30, random_state=0).fit(X)
    ref = Nystroem(gamma=0.3, n_components=30).fit(X[nys.component_indices_])
    Phi, Psi = nys.transform(X), ref.transform(X)
    np.testing.assert_allclose(Phi @ Phi.T, Psi @ Psi.T, atol=1e-8)


def test_ridge_on_features_is_low_rank_kernel_ridge(data):
    X, y = data
    a = 0.5
    nys = DoFNystroem(gamma=0.3, alpha=a, n_components=50, random_state=0)
    z = make_pipeline(nys, Ridge(alpha=a, fit_intercept=False)).fit(X, y).predict(X)
    Phi = nys.transform(X)
    L = Phi @ Phi.T
    np.testing.assert_allclose(
        z, L @ np.linalg.solve(L + a * np.eye(300), y), atol=1e-8
    )


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
def test_auto_rank_follows_estimated_dof(sampling):
    data = make_periodic_spline(800, beta=2, delta=8, random_state=0)
    alpha = 800 * 1e-3
    nys = DoFNystroem(
        kernel="precomputed", alpha=alpha, sampling=sampling, random_state=0
    ).fit(data.K)
    exact = degrees_of_freedom(data.K, alpha)
    assert nys.dof_ == pytest.approx(exact.d_max, rel=0.2)
    assert nys.effective_dof_ == pytest.approx(exact.d_eff, rel=0.2)
    assert exact.d_max <= nys.n_components_ <= 4 * exact.d_max


def _in_sample_errors(data, alpha, sampling, seed, n_components):
    """Mean squared errors against the noiseless target of the pipeline's
    and of exact kernel ridge's fitted values."""
    nys = DoFNystroem(
        kernel="precomputed",
        alpha=alpha,
        n_components=n_components,
        sampling=sampling,
        random_state=seed,
    )
    model = make_pipeline(nys, Ridge(alpha=alpha, fit_intercept=False))
    z = model.fit(data.K, data.y).predict(data.K)
    w, U = np.linalg.eigh(data.K)
    z_exact = U @ (w / (w + alpha) * (U.T @ data.y))
    return np.mean((z - data.f) ** 2), np.mean((z_exact - data.f) ** 2), model


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
@pytest.mark.parametrize(
    "beta, delta, lam", [(1, 8, 4.6e-2), (2, 2, 1e-3), (4, 2, 7e-7)]
)
def test_dof_rank_keeps_in_sample_error_within_one_percent(sampling, beta, delta, lam):
    # The paper's rule on the paper's problems and metric, the excess risk
    # ||z - f||^2: lam is the penalty minimising the exact error at n = 1000
    # (the calibration of doc/design/paper_rule.rst); the promise is on
    # average over draws.
    ratios = []
    for seed in range(6):
        data = make_periodic_spline(1000, beta=beta, delta=delta, random_state=seed)
        approx, exact, _ = _in_sample_errors(data, 1000 * lam, sampling, seed, "dof")
        ratios.append(approx / exact)
    assert np.mean(ratios) <= 1.01


@pytest.mark.parametrize("sampling", ["uniform", "pivoted"])
@pytest.mark.parametrize(
    "beta, delta, lam", [(1, 8, 4.6e-2), (2, 2, 1e-3), (4, 2, 7e-7)]
)
def test_certified_rank_keeps_prediction_error_within_tolerance(
    sampling, beta, delta, lam
):
    # The certified rank promises the error of a prediction of a fresh noisy
    # observation, noise included: sigma^2 + ||z - f||^2 / n, within
    # loss_tol = 1% of exact kernel ridge's, and a rank below the paper's.
    ratios = []
    for seed in range(6):
        data = make_periodic_spline(1000, beta=beta, delta=delta, random_state=seed)
        noise = np.mean((data.y - data.f) ** 2)
        approx, exact, model = _in_sample_errors(
            data, 1000 * lam, sampling, seed, "auto"
        )
        ratios.append((noise + approx) / (noise + exact))
        nys = model[0]
        assert 0 <= nys.loss_estimate_ <= nys.loss_tol
        assert nys.n_components_ < 1000
    assert max(ratios) <= 1.02
    assert np.mean(ratios) <= 1.01


def test_fit_never_allocates_the_kernel_matrix():
    n = 8000  # the n x n float64 matrix would be 512 MB
    X = np.random.RandomState(0).randn(n, 4)
    nys = DoFNystroem(gamma=0.1, alpha=n * 1e-2, random_state=0)
    tracemalloc.start()
    nys.fit(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 0.1 * n * n * 8
    assert nys.n_components_ < 1000


def test_precomputed_kernel_fit_and_transform(data):
    X, _ = data
    X_train, X_test = X[:200], X[200:]
    K_train = rbf_kernel(X_train, gamma=0.3)
    K_test = rbf_kernel(X_test, X_train, gamma=0.3)
    pre = DoFNystroem(kernel="precomputed", n_components=25, random_state=0)
    raw = DoFNystroem(gamma=0.3, n_components=25, random_state=0)
    np.testing.assert_allclose(
        pre.fit(K_train).transform(K_test),
        raw.fit(X_train).transform(X_test),
        atol=1e-10,
    )
    with pytest.raises(ValueError, match="200 features"):
        pre.transform(K_test[:, :150])
    with pytest.raises(ValueError, match="square"):
        DoFNystroem(kernel="precomputed").fit(K_test)


@pytest.mark.parametrize("kernel", ["linear", "poly", "laplacian", "chi2", "cosine"])
def test_other_kernels(kernel):
    X = np.abs(np.random.RandomState(0).randn(100, 3))
    nys = DoFNystroem(kernel=kernel, n_components=20, random_state=0).fit(X)
    Phi = nys.transform(X)
    idx = nys.component_indices_
    K = pairwise_kernels(X, metric=kernel)
    np.testing.assert_allclose((Phi @ Phi.T)[:, idx], K[:, idx], atol=1e-6)


def test_callable_kernel():
    X = np.random.RandomState(0).randn(60, 2)

    def kernel(x, y, scale=1.0):
        return np.exp(-scale * np.sum((x - y) ** 2))

    nys = DoFNystroem(
        kernel=kernel, kernel_params={"scale": 0.5}, n_components=10, random_state=0
    ).fit(X)
    ref = DoFNystroem(gamma=0.5, n_components=10, random_state=0).fit(X)
    np.testing.assert_allclose(nys.transform(X), ref.transform(X), atol=1e-10)
    with pytest.raises(ValueError, match="gamma"):
        DoFNystroem(kernel=kernel, gamma=1.0).fit(X)


def test_duplicate_landmarks_and_rank_deficiency():
    X = np.repeat(np.random.RandomState(0).randn(10, 2), 5, axis=0)
    nys = DoFNystroem(gamma=0.5, n_components=30, random_state=0).fit(X)
    Phi = nys.transform(X)
    assert np.isfinite(Phi).all()
    K = rbf_kernel(X, gamma=0.5)
    np.testing.assert_allclose(Phi @ Phi.T, K, atol=1e-6)  # all 10 points hit
    piv = DoFNystroem(gamma=0.5, n_components=30, sampling="pivoted").fit(X)
    assert piv.n_components_ == 10  # greedy pivoting stops at the rank


def test_float32_and_sparse_input(data):
    X, _ = data
    nys = DoFNystroem(gamma=0.3, n_components=20, random_state=0)
    out32 = nys.fit(X.astype(np.float32)).transform(X.astype(np.float32))
    assert out32.dtype == np.float32
    out64 = clone(nys).fit(X).transform(X)
    np.testing.assert_allclose(out32, out64, atol=1e-3)
    out_sparse = clone(nys).fit(sparse.csr_matrix(X)).transform(sparse.csr_matrix(X))
    np.testing.assert_allclose(out_sparse, out64, atol=1e-10)


def test_n_components_larger_than_n_samples_warns(data):
    X, _ = data
    with pytest.warns(UserWarning, match="n_samples"):
        nys = DoFNystroem(n_components=1000).fit(X[:50])
    assert nys.n_components_ == 50


def test_reproducible_and_pickles(data):
    X, _ = data
    a = DoFNystroem(gamma=0.3, alpha=1.0, random_state=7).fit(X)
    b = DoFNystroem(gamma=0.3, alpha=1.0, random_state=7).fit(X)
    np.testing.assert_array_equal(a.component_indices_, b.component_indices_)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.transform(X), c.transform(X))


def test_feature_names_out(data):
    X, _ = data
    nys = DoFNystroem(n_components=5, random_state=0).fit(X)
    names = nys.get_feature_names_out()
    assert list(names) == [f"dofnystroem{i}" for i in range(5)]


def test_auto_uniform_landmarks_are_the_fixed_rank_ones():
    # With uniform columns the automatic rank takes a prefix of the same
    # permutation as a fixed rank, also past the columns the estimate read
    # (which it therefore need not extend).
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 3)
    auto = DoFNystroem(gamma=0.5, alpha=10.0, random_state=7).fit(X)
    assert auto.dof_columns_ < auto.n_components_ < X.shape[0]
    fixed = DoFNystroem(
        gamma=0.5, alpha=10.0, n_components=auto.n_components_, random_state=7
    ).fit(X)
    np.testing.assert_array_equal(auto.component_indices_, fixed.component_indices_)


def test_landmark_cholesky_only_for_well_conditioned_blocks():
    X = np.random.RandomState(0).randn(200, 8)
    K = rbf_kernel(X, gamma=0.5)
    R = landmark_cholesky(K)
    np.testing.assert_allclose(R.T @ R, K, atol=1e-12)
    assert np.array_equal(R, np.triu(R))
    # A duplicated landmark makes K(I, I) singular; a very smooth kernel
    # gives eigenvalues that the pseudo-inverse would drop (below PINV_RTOL).
    assert landmark_cholesky(rbf_kernel(np.r_[X, X[:1]], gamma=0.5)) is None
    smooth = rbf_kernel(X[:, :2], gamma=1e-2)
    eigvals = np.linalg.eigvalsh(smooth)
    assert eigvals.min() < PINV_RTOL * eigvals.max()
    assert landmark_cholesky(smooth) is None


@pytest.mark.parametrize("kind", ["cholesky", "matrix"])
def test_landmark_basis_applies_its_map(kind):
    rng = np.random.RandomState(1)
    K = rbf_kernel(rng.randn(60, 5), gamma=0.3)
    R = landmark_cholesky(K)
    if kind == "cholesky":
        basis, N = LandmarkBasis(cholesky=R), np.linalg.inv(R)
    else:
        N = rng.randn(60, 60)
        basis = LandmarkBasis(matrix=N)
    # Either way N N^T is the inverse of K(I, I) only for the Cholesky map;
    # the operations are those of the matrix N.
    G = rng.randn(60, 60)
    G = G @ G.T
    V = rng.randn(60, 3)
    np.testing.assert_allclose(basis.map(V), N @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(basis.map_t(V), N.T @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(basis.map_t(V[:, 0]), N.T @ V[:, 0], rtol=1e-10)
    NtGN = basis.congruence(G)
    np.testing.assert_array_equal(NtGN, NtGN.T)
    np.testing.assert_allclose(NtGN, N.T @ G @ N, rtol=1e-9, atol=1e-9)
    if kind == "cholesky":
        np.testing.assert_allclose(N @ N.T, np.linalg.inv(K), rtol=1e-8)


def test_landmark_basis_ridge_solver_skips_the_map():
    rng = np.random.RandomState(2)
    K = rbf_kernel(rng.randn(60, 5), gamma=0.3)
    R = landmark_cholesky(K)
    N = np.linalg.inv(R)
    G = rng.randn(200, 60) @ K  # a kernel-basis Gram matrix K^T K
    G = G.T @ G
    V = rng.randn(60, 2)
    solve = LandmarkBasis(cholesky=R, gram=K).ridge_solver(G, 0.5)
    expected = np.linalg.solve(N.T @ G @ N + 0.5 * np.eye(60), V)
    np.testing.assert_allclose(solve(V), expected, rtol=1e-6, atol=1e-8)
    # Only the Cholesky basis has the shortcut; an indefinite sum has none.
    assert LandmarkBasis(matrix=N).ridge_solver(G, 0.5) is None
    assert LandmarkBasis(cholesky=R, gram=K).ridge_solver(-G, 0.5) is None


@pytest.mark.parametrize("rule", ["greedy", "blocks"])
def test_rows_factor_gives_the_kernel_basis_sums(data, rule):
    # K(x, I) = g(x) G_I^T for the pivots of a partial Cholesky factor, so
    # the centred sums over the kernel columns follow from G^T G alone.
    X, y = data
    Y = np.c_[y, 3.0 + X[:, 0]]
    chol = partial_cholesky_of(KernelColumns(X, "rbf", {"gamma": 0.3}))
    if rule == "greedy":
        chol.add_greedy(60)
    else:
        chol.add(np.arange(0, 300, 10))
        chol.add(np.arange(5, 300, 10))
    landmarks = np.asarray(chol.pivots[:45])
    assert rows_factor(chol, landmarks) is chol
    gram, rhs, mean, y_mean = LandmarkFactor(chol, landmarks).normal_equations(Y)
    K = rbf_kernel(X, X[landmarks], gamma=0.3)
    K_c = K - K.mean(axis=0)
    scale = np.abs(K_c.T @ K_c).max()
    np.testing.assert_allclose(gram, K_c.T @ K_c, rtol=0, atol=1e-10 * scale)
    np.testing.assert_array_equal(gram, gram.T)
    expected = K_c.T @ (Y - Y.mean(axis=0))
    np.testing.assert_allclose(
        rhs, expected, rtol=0, atol=1e-10 * np.abs(expected).max()
    )
    np.testing.assert_allclose(mean, K.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(y_mean, Y.mean(axis=0), rtol=1e-12)
    # Any order of kept pivots is covered; a landmark that is no pivot, or
    # a pivot the factor dropped (a duplicated point), is not.
    assert rows_factor(chol, landmarks[::-1]) is chol
    reversed_gram = LandmarkFactor(chol, landmarks[::-1]).normal_equations(Y)[0]
    np.testing.assert_allclose(
        reversed_gram, gram[::-1, ::-1], rtol=0, atol=1e-10 * scale
    )
    outside = np.setdiff1d(np.arange(300), chol.pivots)[:1]
    assert rows_factor(chol, np.r_[landmarks, outside]) is None
    assert rows_factor(None, landmarks) is None
    twice = partial_cholesky_of(KernelColumns(np.r_[X, X[:1]], "rbf", {"gamma": 0.3}))
    twice.add(np.array([0, 300, 1]))
    assert twice.rank == 2
    assert rows_factor(twice, np.array([0, 300])) is None


def test_standalone_transformer_computes_normalization_at_fit(data):
    # Only the estimators that fit in the kernel basis defer the map: a
    # transform of a fitted DoFNystroem must not change its state.
    X, _ = data
    nys = DoFNystroem(alpha=1.0, gamma=0.5, n_components=50, random_state=0).fit(X)
    assert nys._normalization is not None
    state = dict(vars(nys))
    nys.transform(X)
    assert vars(nys).keys() == state.keys()
    assert all(vars(nys)[key] is value for key, value in state.items())
    with pytest.raises(AttributeError):
        DoFNystroem().normalization_


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_triangular_features_same_with_either_product(data, dtype):
    X = data[0].astype(dtype)
    landmarks = X[:40]
    T = np.triu(np.random.RandomState(0).randn(40, 40))
    features = _TriangularFeatures(landmarks, "rbf", {"gamma": 0.5}, T)
    expected = rbf_kernel(X, landmarks, gamma=0.5) @ T
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for triangular in (True, False):
        features.triangular_product = triangular
        Phi = features(X)
        assert Phi.dtype == dtype
        np.testing.assert_allclose(Phi, expected, rtol=rtol, atol=rtol)
    # One BLAS thread: nothing to compete with, the triangular product.
    with threadpool_limits(1, user_api="blas"):
        assert _TriangularFeatures(landmarks, "rbf", {}, T).triangular_product
