"""Kernel evaluation: the fused RBF path agrees with scikit-learn."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics.pairwise import pairwise_kernels, rbf_kernel

from sklearn_dof._kernels import KernelColumns, kernel_block


@pytest.fixture(scope="module")
def rows():
    rng = np.random.RandomState(0)
    # Enough rows for several chunks per thread, and a far-away cluster so
    # that some kernel values underflow to zero.
    X = np.vstack([rng.randn(3000, 5), 40 + rng.randn(50, 5)])
    Y = X[rng.choice(X.shape[0], 97, replace=False)]
    return X, Y


@pytest.mark.parametrize("gamma", [None, 1e-3, 0.2, 5.0])
def test_fused_rbf_matches_scikit_learn(rows, gamma):
    X, Y = rows
    block = kernel_block(X, Y, "rbf", {"gamma": gamma})
    np.testing.assert_allclose(block, rbf_kernel(X, Y, gamma=gamma), atol=1e-14)
    assert block.dtype == np.float64
    assert block.min() >= 0.0 and block.max() <= 1.0


def test_fused_rbf_is_the_same_on_any_number_of_threads(rows):
    X, Y = rows
    serial = kernel_block(X, Y, "rbf", {"gamma": 0.2}, n_jobs=1)
    np.testing.assert_array_equal(
        kernel_block(X, Y, "rbf", {"gamma": 0.2}, n_jobs=3), serial
    )


def test_other_inputs_take_scikit_learn_path(rows):
    X, Y = rows
    expected = rbf_kernel(X, Y, gamma=0.2)
    np.testing.assert_allclose(
        kernel_block(sparse.csr_matrix(X), Y, "rbf", {"gamma": 0.2}), expected
    )
    block32 = kernel_block(X.astype(np.float32), Y.astype(np.float32), "rbf", {})
    assert block32.dtype == np.float32
    np.testing.assert_allclose(block32, rbf_kernel(X, Y), atol=1e-5)
    np.testing.assert_allclose(
        kernel_block(X, Y, "laplacian", {"gamma": 0.2}),
        pairwise_kernels(X, Y, metric="laplacian", gamma=0.2),
    )


def test_overflowing_norms_fall_back_to_scikit_learn():
    # |x|^2 overflows: scikit-learn's clipped distances give a zero kernel
    # off the diagonal, where the expansion would give inf - inf.
    X = np.array([[1e160, 0.0], [0.0, 1e160], [1.0, 1.0]])
    with np.errstate(all="ignore"):  # scikit-learn's own overflow
        expected = rbf_kernel(X, X, gamma=1.0)
        np.testing.assert_array_equal(
            kernel_block(X, X, "rbf", {"gamma": 1.0}), expected
        )


def test_kernel_columns_use_the_same_kernel(rows):
    X, _ = rows
    access = KernelColumns(X, "rbf", {"gamma": 0.2})
    idx = np.array([3, 1000, 3020])
    np.testing.assert_allclose(
        access.columns(idx), rbf_kernel(X, X[idx], gamma=0.2), atol=1e-14
    )


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_landmark_gram_is_symmetric_with_the_kernel_diagonal(rows, kernel):
    # The RBF block takes the fused path on every thread, mirrored so that
    # it is exactly symmetric with k(x, x) = 1 exactly, as scikit-learn's
    # kernel of the landmarks alone; other kernels keep scikit-learn's.
    X, _ = rows
    idx = np.r_[np.arange(0, 3000, 7), np.arange(3000, 3050)]
    gram = KernelColumns(X, kernel, {"gamma": 0.2}).landmark_gram(idx)
    expected = pairwise_kernels(X[idx], metric=kernel, gamma=0.2)
    np.testing.assert_allclose(gram, expected, atol=1e-14)
    np.testing.assert_array_equal(gram, gram.T)
    np.testing.assert_array_equal(np.diag(gram), 1.0)
    with np.errstate(all="ignore"):  # overflowing norms: scikit-learn's
        huge = np.array([[1e160, 0.0], [0.0, 1e160], [1.0, 1.0]])
        np.testing.assert_array_equal(
            KernelColumns(huge, kernel, {"gamma": 1.0}).landmark_gram([0, 1, 2]),
            pairwise_kernels(huge, metric=kernel, gamma=1.0),
        )


@pytest.mark.parametrize("n_jobs", [1, 3])
def test_landmark_gram_by_lower_blocks_is_the_whole_kernel(monkeypatch, rows, n_jobs):
    # Blocks of the lower triangle (several, the last one short), dealt to
    # one or three workers, mirrored: the kernel of the landmarks, for the
    # fused RBF path and for a kernel object.
    from sklearn.gaussian_process.kernels import Matern

    from sklearn_dof import _kernels, _parallel

    monkeypatch.setattr(_kernels, "TRIANGLE_ROWS", 37)
    monkeypatch.setattr(_kernels, "_MIN_PARALLEL_ROWS", 16)
    X, _ = rows
    idx = np.arange(0, 3050, 11)
    matern = Matern(length_scale=[1.0, 2.0, 0.5, 3.0, 1.5], nu=1.5)
    with _parallel.use_n_jobs(n_jobs):
        gram = KernelColumns(X, "rbf", {"gamma": 0.2}).landmark_gram(idx)
        object_gram = KernelColumns(X, matern, {}).landmark_gram(idx)
    np.testing.assert_allclose(gram, rbf_kernel(X[idx], gamma=0.2), atol=1e-14)
    np.testing.assert_array_equal(gram, gram.T)
    np.testing.assert_allclose(object_gram, matern(X[idx]), atol=1e-13)
    np.testing.assert_array_equal(object_gram, object_gram.T)
