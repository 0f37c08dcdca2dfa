"""The normal-equations operator and Falkon's preconditioner that the NumPy
and array-API conjugate gradients share (``_pcg_operator``), against the
explicit matrices of a small problem."""

import warnings
from functools import partial

import numpy as np
import pytest
from scipy import linalg
from sklearn import config_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

from sklearn_dof import DoFNystroem, _array_api, _ridge_solve
from sklearn_dof._blocks import FeatureBlocks
from sklearn_dof._cg import pcg_ridge
from sklearn_dof._linalg import LandmarkBasis
from sklearn_dof._pcg_operator import falkon_preconditioner, normal_product

GAMMA, ALPHA = 0.5, 0.3


class _KernelMap:
    """``K(x, I)`` by rows, streamed by chunks of a few rows: a pass of
    several blocks, each of several chunks."""

    def __init__(self, landmarks):
        self.landmarks = landmarks

    def __call__(self, X):
        return rbf_kernel(X, self.landmarks, gamma=GAMMA)

    def stream_rows(self):
        return 16


@pytest.fixture(scope="module")
def problem():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 3)
    Y = np.c_[np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 1]), X[:, 2]]
    Y = Y + 0.1 * rng.randn(*Y.shape) + 5.0
    landmarks = X[rng.choice(len(X), 40, replace=False)]
    R = linalg.cholesky(rbf_kernel(landmarks, gamma=GAMMA), lower=False)
    return X, Y, landmarks, R, rng.uniform(0.5, 2.0, len(X))


def _features(X, landmarks, R):
    features = FeatureBlocks(
        X,
        _KernelMap(landmarks),
        len(landmarks),
        working_memory=0.05,
        basis=LandmarkBasis(cholesky=R),
    )
    assert len(features.slices) > 1
    return features


def _explicit(X, Y, landmarks, R, sw, fit_intercept):
    """``H = Phi_c^T S Phi_c + alpha I``, ``Phi_c^T S y_c``, the kernel
    offset ``m`` and the direct solution, from the formed features."""
    K = rbf_kernel(X, landmarks, gamma=GAMMA)
    Phi = linalg.solve_triangular(R, K.T, trans="T").T  # K R^{-1}
    m = np.zeros(len(landmarks))
    Phi_c, Y_c = Phi, Y
    if fit_intercept:
        m = sw @ K / sw.sum()
        Phi_c, Y_c = Phi - sw @ Phi / sw.sum(), Y - sw @ Y / sw.sum()
    H = Phi_c.T @ (sw[:, None] * Phi_c) + ALPHA * np.eye(len(landmarks))
    rhs = Phi_c.T @ (sw[:, None] * Y_c)
    return H, rhs, m, np.linalg.solve(H, rhs)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_normal_product_is_the_explicit_product(problem, fit_intercept, weighted):
    X, Y, landmarks, R, sw = problem
    sw = sw if weighted else np.ones(len(X))
    H, _, m, _ = _explicit(X, Y, landmarks, R, sw, fit_intercept)
    features = _features(X, landmarks, R)
    V = np.random.RandomState(1).randn(len(landmarks), 3)
    HV = normal_product(
        V,
        ALPHA,
        partial(features.reduce, stream=True),
        features.basis,
        m,
        sw if weighted else None,
    )
    np.testing.assert_allclose(HV, H @ V, rtol=1e-10, atol=1e-10 * np.abs(H).max())
    # ...and the NumPy solver's operator is that product.
    problem_ = _ridge_solve.NystroemPCGRidgeProblem(features, Y, sw, fit_intercept)
    np.testing.assert_allclose(
        problem_._apply(V, ALPHA), H @ V, rtol=1e-10, atol=1e-10 * np.abs(H).max()
    )


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_normal_product_in_another_namespace(problem, fit_intercept, weighted):
    xp = pytest.importorskip("array_api_strict")
    X, Y, landmarks, R, sw = problem
    sw = sw if weighted else np.ones(len(X))
    H, _, m, _ = _explicit(X, Y, landmarks, R, sw, fit_intercept)
    K = xp.asarray(rbf_kernel(X, landmarks, gamma=GAMMA))
    basis = _array_api._LandmarkBasis(xp.asarray(linalg.inv(R)), xp.asarray(R.T))

    def reduce(statistic, *row_arrays):  # two blocks of rows
        terms = [
            statistic(K[rows, ...], *(a[rows, ...] for a in row_arrays))
            for rows in (slice(0, 170), slice(170, None))
        ]
        return tuple(a + b for a, b in zip(*terms, strict=True))

    V = np.random.RandomState(1).randn(len(landmarks), 2)
    weights = xp.asarray(sw) if weighted else None
    HV = normal_product(xp.asarray(V), ALPHA, reduce, basis, xp.asarray(m), weights, xp)
    np.testing.assert_allclose(
        np.asarray(HV), H @ V, rtol=1e-9, atol=1e-9 * np.abs(H).max()
    )


def _falkon_matrix(R, total):
    p = R.shape[0]
    return (total / p) * (R @ R.T) + ALPHA * np.eye(p)


def _assert_inverse(Z, P, rtol):
    """``Z = P^{-1}`` to ``rtol`` of its largest entry (float32 rounding)."""
    inverse = np.linalg.inv(P)
    np.testing.assert_allclose(Z, inverse, rtol=rtol, atol=rtol * np.abs(inverse).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_preconditioner_is_falkons(problem, monkeypatch, dtype):
    # P = (t / p) B^T B + alpha I for B = K(I, I) R^{-1} = R^T, in dtype.
    X, Y, landmarks, R, sw = problem
    P = _falkon_matrix(R, sw.sum())
    monkeypatch.setattr(_ridge_solve, "PCG_PRECONDITIONER_DTYPE", dtype)
    features = _features(X, landmarks, R)
    ridge = _ridge_solve.NystroemPCGRidgeProblem(features, Y, sw, True)
    precondition = ridge._preconditioner(ALPHA)
    Z = precondition(np.eye(len(landmarks)))
    assert Z.dtype == np.float64
    _assert_inverse(Z, P, 1e-4 if dtype == np.float32 else 1e-10)


def test_preconditioner_in_another_namespace(problem):
    # The array-API back-end's: B^T B by a product, the inverse factor.
    xp = pytest.importorskip("array_api_strict")
    X, Y, landmarks, R, sw = problem
    P = _falkon_matrix(R, sw.sum())
    B = xp.asarray(R.T)
    for dtype, rtol in ((np.float32, 1e-4), (np.float64, 1e-10)):
        precondition = falkon_preconditioner(
            lambda d: _array_api._landmark_gram(B, d, xp),  # noqa: B023
            lambda A: _array_api._inverse_factor_solver(A, xp),
            float(sw.sum()),
            ALPHA,
            dtype,
            xp,
        )
        Z = precondition(xp.asarray(np.eye(len(landmarks))))
        assert Z.dtype == xp.float64
        _assert_inverse(np.asarray(Z), P, rtol)


def test_preconditioner_falls_back_to_float64_then_to_none():
    tried = []

    def refuse(refused):
        def factor(P):
            tried.append(P.dtype)
            if len(tried) <= refused:
                return None
            return lambda R: np.linalg.solve(P, R)

        return factor

    B = np.random.RandomState(0).randn(6, 4)
    P = (10.0 / 4) * B.T @ B + ALPHA * np.eye(4)

    def gram(dtype):
        return (B.T @ B).astype(dtype)

    precondition = falkon_preconditioner(gram, refuse(1), 10.0, ALPHA)
    assert tried == [np.float32, np.float64]
    np.testing.assert_allclose(precondition(P), np.eye(4), atol=1e-12)
    tried.clear()
    assert falkon_preconditioner(gram, refuse(2), 10.0, ALPHA) is None
    assert tried == [np.float32, np.float64]


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_both_paths_solve_the_explicit_system(
    problem, monkeypatch, fit_intercept, weighted
):
    # Run to the rounding floor: the direct solve's weights, on either path.
    X, Y, landmarks, R, sw = problem
    sw_ = sw if weighted else np.ones(len(X))
    H, rhs, m, W = _explicit(X, Y, landmarks, R, sw_, fit_intercept)
    monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 60)
    ridge = _ridge_solve.NystroemPCGRidgeProblem(
        _features(X, landmarks, R),
        Y,
        sw if weighted else None,
        fit_intercept,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the floor
        np.testing.assert_allclose(
            ridge.solve(ALPHA), W, rtol=1e-8, atol=1e-8 * np.abs(W).max()
        )
    xp = pytest.importorskip("array_api_strict")
    nystroem = DoFNystroem(kernel="rbf", gamma=GAMMA)
    basis = _array_api._LandmarkBasis(xp.asarray(linalg.inv(R)), xp.asarray(R.T))
    features = _array_api._Features(
        nystroem, xp.asarray(X), xp.asarray(landmarks), basis.N, xp, None
    )
    with config_context(array_api_dispatch=True):
        solution = _array_api.cg_solve(
            features,
            basis,
            xp.asarray(Y),
            xp.asarray(sw) if weighted else None,
            fit_intercept,
            ALPHA,
        )
    np.testing.assert_allclose(
        np.asarray(solution.weights), W, rtol=1e-8, atol=1e-8 * np.abs(W).max()
    )
    assert solution.n_iter > 0


def test_pcg_ridge_on_the_shared_pieces_is_the_direct_solve(problem):
    # The pieces alone, as a third caller would put them together.
    X, Y, landmarks, R, sw = problem
    H, rhs, m, W = _explicit(X, Y, landmarks, R, sw, True)
    features = _features(X, landmarks, R)
    precondition = falkon_preconditioner(
        lambda dtype: (R @ R.T).astype(dtype),
        lambda P: partial(np.linalg.solve, P),
        float(sw.sum()),
        ALPHA,
    )
    y_c = Y - sw @ Y / sw.sum()
    solution, n_iter, _ = pcg_ridge(
        lambda V: normal_product(
            V, ALPHA, partial(features.reduce, stream=True), features.basis, m, sw
        ),
        rhs,
        precondition,
        np.einsum("i,ij,ij->j", sw, y_c, y_c),
        1e-24,
        60,
    )
    assert n_iter > 0
    np.testing.assert_allclose(solution, W, rtol=1e-8, atol=1e-8 * np.abs(W).max())
