"""Row-block reductions: same answers as one block, bounded memory."""

import tracemalloc

import numpy as np
import pytest
from sklearn import config_context
from threadpoolctl import threadpool_limits

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    _blas,
    _parallel,
    _tiles,
)
from sklearn_dof._blocks import FeatureBlocks, normal_equations, row_batch_size


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(600, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.randn(600)
    return X, y


def test_row_batch_size_follows_working_memory():
    assert row_batch_size(10**6, 1000, 8, working_memory=1) == 2**20 // (3 * 8000)
    assert row_batch_size(10, 1000, 8, working_memory=1024) == 10
    assert row_batch_size(10**6, 10**6, 8, working_memory=1) == 1


@pytest.mark.parametrize("tile_order", [None, 3])
@pytest.mark.parametrize("threads", [None, 2, 1])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_normal_equations_match_dense(fit_intercept, threads, tile_order, monkeypatch):
    # One BLAS thread: the Gram sum is updated in place by scipy's syrk.
    # More: by numpy's products, by tiles past the tile order (_tiles).
    if tile_order is not None:
        monkeypatch.setattr(_tiles, "TILE_ORDER", tile_order)
        monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", tile_order)
    with threadpool_limits(threads, user_api="blas"):
        _check_normal_equations(fit_intercept)


def _check_normal_equations(fit_intercept):
    rng = np.random.RandomState(1)
    # A large common offset: centring after summing would cancel digits.
    Phi = rng.randn(500, 7) + 1e4
    y = rng.randn(500, 2)
    sw = rng.uniform(0.5, 2, 500)
    blocks = FeatureBlocks.from_array(Phi, working_memory=0.01)
    assert len(blocks.slices) > 5
    gram, rhs, phi_off, y_off = normal_equations(blocks, y, sw, fit_intercept)
    if fit_intercept:
        mean = np.average(Phi, axis=0, weights=sw)
        Phi_c, y_c = Phi - mean, y - np.average(y, axis=0, weights=sw)
        np.testing.assert_allclose(phi_off, mean, rtol=1e-14)
    else:
        Phi_c, y_c = Phi, y
    np.testing.assert_allclose(gram, Phi_c.T @ (sw[:, None] * Phi_c), rtol=1e-9)
    np.testing.assert_allclose(rhs, Phi_c.T @ (sw[:, None] * y_c), rtol=1e-9)
    # Summed as lower triangles (syrk), completed exactly.
    np.testing.assert_array_equal(gram, gram.T)


@pytest.mark.parametrize("in_place", [True, False])
def test_workers_add_their_blocks_into_one_sum_each(in_place, monkeypatch):
    # Where scipy's syrk can be called without the GIL, each worker adds its
    # blocks into its own sum in place; elsewhere it takes numpy's product
    # into a scratch array.  Same normal equations either way.
    if in_place and not _blas.releases_gil():
        pytest.skip("scipy's dsyrk is not reachable through its Cython API")
    if not in_place:
        monkeypatch.setattr(_blas, "_dsyrk", False)
    in_worker = []
    syrk = _blas.syrk_lower_add

    def spy(C, B):
        in_worker.append(_parallel.in_worker())
        return syrk(C, B)

    monkeypatch.setattr(_blas, "syrk_lower_add", spy)
    rng = np.random.RandomState(3)
    Phi = rng.randn(4000, 7) + 10.0
    y = rng.randn(4000, 1)
    with _parallel.use_n_jobs(2):
        blocks = FeatureBlocks.from_array(Phi, working_memory=0.2)
        gram, _, _, _ = normal_equations(blocks, y, np.ones(4000), False)
    assert blocks.n_threads == 2 and len(blocks.slices) >= 4
    assert (in_worker and all(in_worker)) if in_place else not in_worker
    np.testing.assert_allclose(gram, Phi.T @ Phi, rtol=1e-12)
    np.testing.assert_array_equal(gram, gram.T)


@pytest.mark.parametrize("tile_order", [None, 4])
def test_float32_blocks_sum_in_float64(tile_order, monkeypatch):
    if tile_order is not None:
        monkeypatch.setattr(_tiles, "TILE_ORDER", tile_order)
        monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", tile_order)
    rng = np.random.RandomState(2)
    Phi = (rng.randn(700, 9) + 3.0).astype(np.float32)
    y = rng.randn(700, 1)
    blocks = FeatureBlocks.from_array(Phi, working_memory=0.01)
    assert len(blocks.slices) > 5
    gram, _, _, _ = normal_equations(blocks, y, np.ones(700), False)
    assert gram.dtype == np.float64
    exact = Phi.astype(np.float64).T @ Phi.astype(np.float64)
    np.testing.assert_allclose(gram, exact, rtol=1e-5)
    np.testing.assert_array_equal(gram, gram.T)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DoFKernelRidge(alpha=1.0, gamma=0.5, n_components=80, random_state=0),
        lambda: DoFKernelRidge(alpha=0.1, gamma=0.5, sampling="pivoted"),
        lambda: DoFKernelRidgeCV(alphas=(0.01, 0.1, 1.0), gamma=0.5, random_state=0),
    ],
)
def test_small_working_memory_gives_the_same_regressor(data, make):
    X, y = data
    reference = make().fit(X, y)
    with config_context(working_memory=0.05):  # blocks of ~20 rows, no cache
        blocked = make().fit(X, y)
    np.testing.assert_allclose(blocked.coef_, reference.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(blocked.predict(X), reference.predict(X), atol=1e-9)


def test_small_working_memory_gives_the_same_classifier(data):
    X, y = data
    labels = np.digitize(y, [-0.5, 0.5])  # three classes
    make = lambda: DoFKernelLogisticRegression(  # noqa: E731
        alpha=1e-2, gamma=0.5, n_components=60, random_state=0
    )
    reference = make().fit(X, labels)
    with config_context(working_memory=0.05):
        blocked = make().fit(X, labels)
    np.testing.assert_allclose(blocked.coef_, reference.coef_, rtol=1e-6, atol=1e-8)


def test_fit_does_not_hold_the_feature_matrix():
    rng = np.random.RandomState(0)
    n, p = 40000, 400
    X = rng.randn(n, 4)
    y = rng.randn(n)
    model = DoFKernelRidge(alpha=1.0, gamma=0.1, n_components=p, random_state=0)
    with config_context(working_memory=8):
        tracemalloc.start()
        model.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    # n x p float64 would be 128 MB; the blocks take 8 MiB plus p x p terms.
    assert peak < 0.25 * n * p * 8


def test_float32_input_stays_float32_until_the_solve(data):
    X, y = data
    model64 = DoFKernelRidge(alpha=1.0, gamma=0.5, n_components=80, random_state=0)
    model32 = DoFKernelRidge(alpha=1.0, gamma=0.5, n_components=80, random_state=0)
    model64.fit(X, y)
    model32.fit(X.astype(np.float32), y)
    features = model32.nystroem_._training_features(X.astype(np.float32))
    assert features.first_block().dtype == np.float32
    assert model32.nystroem_.transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(
        model32.predict(X.astype(np.float32)), model64.predict(X), atol=1e-3
    )


def test_reduce_sums_in_place_without_touching_the_blocks():
    # The first term is copied before the in-place sums: a statistic that
    # returns a view of a kept block must leave the block as it was.
    rng = np.random.RandomState(2)
    Phi = rng.randn(50, 4)
    blocks = FeatureBlocks.from_array(Phi, working_memory=1e-3)
    assert len(blocks.slices) > 2
    first_rows = blocks.reduce(lambda Phi_b: Phi_b[0])
    np.testing.assert_allclose(
        first_rows, Phi[[sl.start for sl in blocks.slices]].sum(0)
    )
    np.testing.assert_array_equal(blocks.toarray(), Phi)
    total, count = blocks.reduce(lambda Phi_b: (Phi_b.sum(0), Phi_b.shape[0]))
    np.testing.assert_allclose(total, Phi.sum(0))
    assert count == 50


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_streamed_pass_equals_the_pass_over_blocks(kernel, monkeypatch):
    # Kernel blocks computed on the fly are consumed in cache-sized chunks
    # of rows: the statistic sees chunks, never a whole block, and the sums
    # are those of the blocks.  The RBF chunks reuse the landmarks' half of
    # the fused product.
    from sklearn_dof import _kernels, _nystroem
    from sklearn_dof._nystroem import _TriangularFeatures

    monkeypatch.setattr(_nystroem, "CHUNK_ENTRIES", 40 * 30)
    rng = np.random.RandomState(4)
    X, landmarks = rng.randn(3000, 5), rng.randn(40, 5)
    U = rng.randn(40, 2)
    params = {"gamma": 0.3}
    feature_map = _TriangularFeatures(landmarks, kernel, params, None)
    assert (feature_map.columns is not None) == (kernel == "rbf")
    K = _kernels.kernel_block(X, landmarks, kernel, params)
    seen = []

    def statistic(K_b, w_b):
        seen.append(K_b.shape[0])
        Z = (K_b @ U) * w_b[:, None]
        return K_b.T @ Z, Z.sum(axis=0)

    w = rng.uniform(0.5, 2.0, 3000)
    with _parallel.use_n_jobs(2):
        blocks = FeatureBlocks(X, feature_map, 40, working_memory=0.5)
        assert len(blocks.slices) > 1
        streamed = blocks.reduce(statistic, w, stream=True)
        assert max(seen) == 30 and sum(seen) == 3000
        seen.clear()
        whole = blocks.reduce(statistic, w)
        assert max(seen) > 30
    Z = (K @ U) * w[:, None]
    for got, expected in zip(streamed, (K.T @ Z, Z.sum(axis=0)), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    for got, expected in zip(whole, streamed, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    # Cached blocks are read, not streamed.
    seen.clear()
    cached = FeatureBlocks(X, feature_map, 40, working_memory=2, cache=True)
    assert cached.cached
    cached.reduce(statistic, w, stream=True)
    assert max(seen) > 30
