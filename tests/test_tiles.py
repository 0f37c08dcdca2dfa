"""Products and factorisations by tiles (sklearn_dof/_tiles.py)."""

import os
import subprocess
import sys
import textwrap
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy.linalg import lapack
from sklearn import clone
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV, _blas, _tiles

from .conftest import load_shared


def _spd(n, seed=0, shift=1e-3):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * sq) + shift * np.eye(n)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("tile", [7, 10, 40])
def test_tiled_cholesky_is_lapacks(lower, tile):
    A = _spd(37)
    expected, info = lapack.dpotrf(A, lower=lower, clean=1)
    assert info == 0
    factor, info = _tiles.potrf(A, lower=lower, tile=tile)
    assert info == 0
    np.testing.assert_allclose(factor, expected, rtol=1e-10, atol=1e-12)
    # clean=1: the other triangle is exactly zero.
    other = np.triu(factor, 1) if lower else np.tril(factor, -1)
    assert not other.any()


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("update_columns", [3, 4, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiled_cholesky_by_row_blocks_is_lapacks(
    monkeypatch, update_columns, dtype, in_place
):
    # Column blocks narrower than the tiles, ending short of a tile or not:
    # in place on the blocks (float64, scipy's pointers), else every panel
    # solve and trailing update through the workspace in several blocks,
    # the last one partial.
    if not in_place:
        monkeypatch.setattr(_blas.BlockSteps, "available", staticmethod(lambda: False))
    elif dtype == np.float64:
        assert _blas.BlockSteps.available()
    monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", update_columns)
    A = _spd(37, shift=0.1).astype(dtype)
    (potrf,) = lapack.get_lapack_funcs(("potrf",), (A,))
    expected, info = potrf(A, lower=1, clean=1)
    assert info == 0
    factor, info = _tiles.potrf(A, lower=True, tile=10)
    assert info == 0 and factor.dtype == dtype
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(factor, expected, rtol=tol, atol=tol)
    assert not np.triu(factor, 1).any()


@pytest.mark.parametrize("in_place", [True, False])
def test_tiled_cholesky_in_place_holds_no_copy(monkeypatch, in_place):
    # On the blocks where they lie: nothing beside A but the clearing of
    # its upper triangle by blocks; scipy's wrappers copy a diagonal tile
    # and use a workspace of UPDATE_COLUMNS rows.
    if not in_place:
        monkeypatch.setattr(_blas.BlockSteps, "available", staticmethod(lambda: False))
    A = np.asfortranarray(_spd(1200, shift=0.1))
    expected = np.linalg.cholesky(A)
    tracemalloc.start()
    try:
        factor, info = _tiles.potrf(A, lower=True, overwrite_a=True, tile=500)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info == 0 and np.shares_memory(factor, A)
    np.testing.assert_allclose(factor, expected, rtol=1e-10, atol=1e-12)
    assert (peak < 0.25 * A.nbytes) == in_place


def test_block_steps_refuse_what_they_cannot_address():
    with pytest.raises(ValueError, match="Fortran order"):
        _blas.BlockSteps(np.eye(3))  # C order (not also Fortran: 3 x 3)
    with pytest.raises(ValueError, match="Fortran order"):
        _blas.BlockSteps(np.asfortranarray(np.eye(3, dtype=np.float32)))
    with pytest.raises(ValueError, match="square"):
        _blas.BlockSteps(np.asfortranarray(np.ones((3, 4))))
    steps = _blas.BlockSteps(np.asfortranarray(np.eye(4)))
    with pytest.raises(IndexError, match="not a block"):
        steps.potrf(2, 5)  # would factor past L's memory
    with pytest.raises(IndexError, match="not a block"):
        steps.panel(0, 4)  # no rows below
    with pytest.raises(IndexError, match="not a block"):
        steps.update(0, 2, 3, 6)
    assert steps.potrf(0, 4) == 0


def test_tiled_cholesky_reads_one_triangle_and_can_overwrite():
    A = _spd(25)
    garbage = A + np.triu(np.full_like(A, 7.0), 1)  # upper triangle wrong
    L, info = _tiles.potrf(garbage, lower=True, tile=6)
    assert info == 0
    np.testing.assert_allclose(L @ L.T, A, rtol=1e-10, atol=1e-12)
    F = np.asfortranarray(A)
    L, info = _tiles.potrf(F, lower=True, overwrite_a=True, tile=6)
    assert info == 0 and np.shares_memory(L, F)


@pytest.mark.parametrize("tile", [5, 8, 100])
def test_tiled_cholesky_reports_lapacks_failing_minor(tile):
    A = _spd(30)
    A[17, 17] = -1.0  # leading minors of order <= 17 stay positive definite
    _, expected = lapack.dpotrf(A, lower=1, clean=1)
    _, info = _tiles.potrf(A, lower=True, tile=tile)
    assert info == expected == 18


def test_cholesky_and_cho_factor_refuse_what_is_not_positive_definite(monkeypatch):
    A = _spd(30)
    A[17, 17] = -1.0
    for order in (8, 100):  # tiled, and numpy's or scipy's own
        monkeypatch.setattr(_tiles, "TILE_ORDER", order)
        with pytest.raises(np.linalg.LinAlgError):
            _tiles.cholesky(A)
        with pytest.raises(np.linalg.LinAlgError):
            _tiles.cho_factor(A)
    monkeypatch.setattr(_tiles, "TILE_ORDER", 8)
    B = _spd(30)
    np.testing.assert_allclose(_tiles.cholesky(B), np.linalg.cholesky(B), rtol=1e-10)
    factor, lower = _tiles.cho_factor(B, lower=False)
    assert not lower
    np.testing.assert_allclose(factor.T @ factor, B, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tile", [4, 9, 50])
def test_tiled_gram_is_the_product(dtype, tile):
    M = np.random.RandomState(1).randn(13, 23).astype(dtype)
    G = _tiles.gram(M, tile=tile)
    assert G.dtype == np.float64
    np.testing.assert_allclose(G, M.T.astype(float) @ M, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(G, G.T)


def test_tiled_gram_adds_into_the_lower_triangle_with_a_scratch():
    M = np.random.RandomState(2).randn(11, 20)
    total = np.ones((20, 20), order="F")
    _tiles.add_lower_gram(total, M, scratch=np.empty((20, 6)), tile=6)
    expected = 1.0 + M.T @ M
    np.testing.assert_allclose(np.tril(total), np.tril(expected), rtol=1e-12)


@pytest.mark.parametrize("tile_order", [7, 100])
def test_outer_product_of_a_triangle(monkeypatch, tile_order):
    R = np.triu(np.random.RandomState(3).randn(31, 31)) + 5 * np.eye(31)
    monkeypatch.setattr(_tiles, "TILE_ORDER", tile_order)
    monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", 4)
    out = _tiles.upper_outer(R)
    np.testing.assert_allclose(out, R @ R.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out, out.T)
    # In another dtype (the preconditioner's float32), cast tile by tile.
    single = _tiles.upper_outer(R, np.float32)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, R @ R.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(single, single.T)


def test_tiled_inverse_from_the_factor_is_lapacks(monkeypatch):
    A = _spd(29)
    L, _ = lapack.dpotrf(A, lower=1, clean=1)
    expected, _ = lapack.dpotri(L, lower=1)
    monkeypatch.setattr(_tiles, "TILE_ORDER", 8)
    H, info = _tiles.potri(L)
    assert info == 0
    np.testing.assert_allclose(H, np.tril(expected), rtol=1e-9, atol=1e-12)
    assert not np.triu(H, 1).any()


@pytest.mark.parametrize("blas_threads", [1, 2])
@pytest.mark.parametrize(
    "estimator",
    [
        DoFKernelRidge(alpha=0.1, gamma=0.3, n_components=70, random_state=0),
        DoFKernelRidgeCV(gamma=0.3, n_components=70, random_state=0),
        DoFKernelRidge(
            alpha=0.1, gamma=0.3, n_components=70, solver="cg", random_state=0
        ),
    ],
)
def test_fits_by_tiles_equal_untiled_fits(monkeypatch, estimator, blas_threads):
    # Every p x p Gram sum and factorisation of the fit by tiles of 16: the
    # same model.  With 2 BLAS threads the Gram sum takes numpy's route.
    if getattr(estimator, "solver", None) == "cg":
        # Stopped early, conjugate gradients follow the rounding; to the
        # floor, both give the exact solution.
        from sklearn_dof import _ridge_solve

        monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
        monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 200)
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.randn(400)
    with (
        threadpool_limits(limits=blas_threads, user_api="blas"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the floor
        expected = clone(estimator).fit(X, y).predict(X)
        monkeypatch.setattr(_tiles, "TILE_ORDER", 16)
        monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", 16)
        predicted = clone(estimator).fit(X, y).predict(X)
    np.testing.assert_allclose(predicted, expected, rtol=1e-8, atol=1e-8)


def _run_in_child(code, blas_threads, timeout):
    """Run ``code`` in a fresh interpreter whose BLAS runs ``blas_threads``
    threads: a segmentation fault there fails this test instead of killing
    the test session."""
    env = {
        "OPENBLAS_NUM_THREADS": str(blas_threads),
        "OMP_NUM_THREADS": str(blas_threads),
    }
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"exit code {result.returncode} (-11 or 139: segmentation fault)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    )
    return result.stdout


@pytest.mark.slow
def test_no_crash_at_orders_where_openblas_crashes():
    # On 2 threads OpenBLAS's own Cholesky factorisation of this block, and
    # numpy's B.T @ B below, end in a segmentation fault (see _tiles).
    out = _run_in_child(
        """
        import numpy as np
        from sklearn.metrics.pairwise import rbf_kernel
        from sklearn_dof import _tiles

        n = 16384
        X = np.random.RandomState(0).rand(n, 3)
        A = rbf_kernel(X, gamma=1.0)
        A[np.diag_indices(n)] += 1e-3
        L = _tiles.cholesky(A)
        rows = np.random.RandomState(1).randint(0, n, 5)
        print(np.abs(L[rows] @ L.T - A[rows]).max())
        del L, A
        B = np.random.RandomState(2).rand(1024, n)
        G = _tiles.gram(B)
        print(np.abs(G[rows] - B[:, rows].T @ B).max())
        """,
        blas_threads=2,
        timeout=1800,
    )
    cholesky_error, gram_error = map(float, out.split())
    assert cholesky_error < 1e-8
    assert gram_error < 1e-8


@pytest.mark.slow
def test_kin40k_at_20000_components_on_two_threads():
    # The reproducer of issue 33: this fit died with a segmentation fault
    # in the landmark block's Cholesky factorisation.  The direct solve:
    # its p x p Gram sum and factorisations are the calls that crashed
    # ("auto" now takes the conjugate gradients at this rank).
    load_shared("kin40k")  # skips where the data set is absent
    from .conftest import SHARED_DATA

    out = _run_in_child(
        f"""
        import numpy as np
        from sklearn_dof import DoFKernelRidge

        data = np.load({str(SHARED_DATA / "kin40k.npz")!r})
        X, y = data["X"], data["y"].astype(float)
        rows = np.random.RandomState(0).permutation(len(y))
        train, test = rows[:32000], rows[32000:]
        mean, scale = X[train].mean(0), X[train].std(0)
        X = (X - mean) / scale
        y = (y - y[train].mean()) / y[train].std()
        model = DoFKernelRidge(
            alpha=0.32, gamma=0.125, n_components=20000, solver="direct"
        )
        model.fit(X[train], y[train])
        print(np.mean((model.predict(X[test]) - y[test]) ** 2))
        """,
        blas_threads=2,
        timeout=3000,
    )
    # Exact kernel ridge on these rows reaches about 0.04 (issue 33).
    assert float(out) < 0.06


@pytest.mark.parametrize("k", [5, 256, 700])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_times_upper_is_the_product_with_a_triangular_matrix(k, dtype):
    # By column panels that skip U's zero triangle: the general product,
    # into a fresh array or into the rows of a given one.
    rng = np.random.RandomState(0)
    A = rng.randn(300, k).astype(dtype)
    U = np.triu(rng.randn(k, k)).astype(dtype)
    expected = A.astype(np.float64) @ U.astype(np.float64)
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    product = _tiles.times_upper(A, U)
    assert product.dtype == dtype
    np.testing.assert_allclose(product, expected, rtol=rtol, atol=rtol * np.sqrt(k))
    out = np.full((400, k), np.nan, dtype=dtype)
    _tiles.times_upper(A, U, out=out[50:350])
    np.testing.assert_allclose(out[50:350], expected, rtol=rtol, atol=rtol * np.sqrt(k))
    assert np.isnan(out[:50]).all() and np.isnan(out[350:]).all()


@pytest.mark.parametrize("tile", [64, 100, 1000])
def test_inverse_traces_are_those_of_the_inverse(tile):
    # Tiles that divide the order, that do not, and one tile for all.
    rng = np.random.RandomState(0)
    M = rng.randn(300, 330)
    A = M @ M.T / 330 + 1e-3 * np.eye(300)
    H = np.linalg.inv(A)
    factor = np.asfortranarray(np.linalg.cholesky(A))
    diagonal, squares = _tiles.inverse_traces(factor, tile=tile)
    np.testing.assert_allclose(diagonal, np.diag(H), rtol=1e-9)
    assert squares == pytest.approx(np.sum(H**2), rel=1e-9)
