import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from sklearn_dof import (
    DoFNystroem,
    _sampling,
    partial_cholesky,
    pivoted_cholesky,
    uniform_columns,
)
from sklearn_dof._sampling import PartialCholesky, _address_space, _matrix_columns


def _nystroem(K, idx):
    return K[:, idx] @ np.linalg.pinv(K[np.ix_(idx, idx)]) @ K[idx]


@pytest.fixture
def K():
    X = np.random.RandomState(0).randn(120, 3)
    return rbf_kernel(X, gamma=0.2)


def test_uniform_columns_nested_distinct_and_clipped():
    a = uniform_columns(50, 10, random_state=1)
    b = uniform_columns(50, 20, random_state=1)
    np.testing.assert_array_equal(a, b[:10])
    assert len(set(b.tolist())) == 20
    assert uniform_columns(5, 10, random_state=0).shape == (5,)


def test_block_factor_is_nystroem_approximation(K):
    idx = uniform_columns(120, 30, random_state=0)
    chol = PartialCholesky(_matrix_columns(K), np.diag(K).copy())
    chol.add(idx[:10])
    chol.add(idx[10:])  # growing in two blocks equals one Nystroem of all 30
    L = chol.factor @ chol.factor.T
    np.testing.assert_allclose(L, _nystroem(K, idx), atol=1e-8)
    np.testing.assert_allclose(chol.residual, np.diag(K - L), atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gram_grown_by_rounds_is_the_gram_of_the_factor(K, dtype):
    # Each round adds only its new columns' blocks to G^T G: after rounds of
    # 0, 7, 25 and 40 columns it must still be the Gram matrix of the whole
    # factor, as computed afresh.
    idx = uniform_columns(120, 40, random_state=2)
    chol = PartialCholesky(_matrix_columns(K.astype(dtype)), np.diag(K).astype(dtype))
    assert chol.gram().shape == (0, 0)
    for stop in (7, 25, 40):
        chol.add(idx[len(chol.pivots) : stop])
        G = chol.factor.astype(np.float64)
        np.testing.assert_allclose(chol.gram(), G.T @ G, rtol=1e-12, atol=1e-12)
        assert chol.gram() is chol.gram()  # computed once per rank


def test_duplicated_landmarks_add_no_rank(K):
    K2 = np.block([[K, K], [K, K]])  # every point twice
    chol = PartialCholesky(_matrix_columns(K2), np.diag(K2).copy())
    chol.add([0, 120, 1, 121])
    assert chol.rank == 2
    assert len(chol.pivots) == 4


def test_pivoted_cholesky_is_greedy_and_exact(K):
    pivots, G = pivoted_cholesky(K, 25)
    np.testing.assert_allclose(G @ G.T, _nystroem(K, pivots), atol=1e-8)
    # Greedy: each pivot had the largest residual diagonal at its step.
    for t in range(1, 25):
        residual = np.diag(K - G[:, :t] @ G[:, :t].T)
        assert residual[pivots[t]] == pytest.approx(residual.max(), rel=1e-8)


def test_pivoted_cholesky_beats_uniform_in_trace(K):
    pivots, G = pivoted_cholesky(K, 20)
    uniform = _nystroem(K, uniform_columns(120, 20, random_state=0))
    assert np.trace(K - G @ G.T) < np.trace(K - uniform)


def test_pivoted_cholesky_stops_at_numerical_rank():
    X = np.random.RandomState(0).randn(50, 3)
    K = X @ X.T  # rank 3
    pivots, G = pivoted_cholesky(K, 10)
    assert pivots.shape == (3,)
    np.testing.assert_allclose(G @ G.T, K, atol=1e-10)


def test_pivoted_cholesky_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        pivoted_cholesky(np.ones((3, 4)), 2)


def test_factor_in_small_pages_is_the_same(monkeypatch):
    X = np.random.RandomState(3).randn(700, 3)
    expected = pivoted_cholesky(rbf_kernel(X), 40)
    # Every reserve mapped from the OS (no huge-page advice), not np.empty.
    monkeypatch.setattr(_sampling, "_SMALL_PAGES_FROM_BYTES", 0)
    G = _address_space(700, 40, np.float64)
    assert G.flags.f_contiguous and G.flags.writeable and G.shape == (700, 40)
    assert not isinstance(G.base, np.ndarray)  # the mapping itself
    # Row-major where asked (the extended factor's rows, read by blocks).
    rows = _address_space(700, 40, np.float64, order="C")
    assert rows.flags.c_contiguous and rows.flags.writeable
    assert not isinstance(rows.base, np.ndarray)
    result = pivoted_cholesky(rbf_kernel(X), 40)
    for a, b in zip(result, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_largest_breaks_ties_as_argmax():
    values = np.array([0.5, 1.0, 0.2, 1.0, 1.0, 0.7])
    np.testing.assert_array_equal(_sampling._largest(values, 2), [1, 3])
    np.testing.assert_array_equal(_sampling._largest(values, 4), [1, 3, 4, 5])
    assert _sampling._largest(values, 1)[0] == np.argmax(values)


@pytest.mark.parametrize("data", ["clusters", "far apart", "rank 3"])
def test_greedy_batches_take_the_pivots_one_at_a_time_would(data, monkeypatch):
    rng = np.random.RandomState(0)
    if data == "clusters":
        X = np.r_[rng.randn(400, 3), 6 + 0.3 * rng.randn(100, 3), 20 * rng.randn(5, 3)]
        K = rbf_kernel(X, gamma=0.5)
    elif data == "far apart":
        # Residuals stay exactly 1 for most points: ties everywhere.
        K = rbf_kernel(100 * rng.randn(300, 2), gamma=1.0)
    else:
        X = rng.randn(200, 3)
        K = X @ X.T + 1e-3 * X[:, :1] @ X[:, :1].T
    calls = []
    original = PartialCholesky._greedy_batch

    def spy(self, candidates, *args):
        calls.append(candidates.size)
        return original(self, candidates, *args)

    monkeypatch.setattr(PartialCholesky, "_greedy_batch", spy)
    pivots, G = pivoted_cholesky(K, 120)
    batches = len(calls)
    monkeypatch.setattr(PartialCholesky, "_GREEDY_WIDTH", 1)
    expected_pivots, expected_G = pivoted_cholesky(K, 120)
    np.testing.assert_array_equal(pivots, expected_pivots)
    np.testing.assert_allclose(G, expected_G, rtol=0, atol=1e-10)
    assert len(calls) - batches == len(expected_pivots)  # one at a time
    if data != "rank 3":
        assert batches < len(pivots) / 4  # the columns come in batches


def test_pivot_transform_inverts_the_block_at_cholesky_cost(K):
    from sklearn_dof._sampling import _pivot_transform

    # Positive semi-definite with a duplicated point: pivoted Cholesky keeps
    # one copy and T T^T is a generalised inverse of the block.
    idx = np.r_[np.arange(20), 3]
    S = K[np.ix_(idx, idx)]
    T, _ = _pivot_transform(S, 1e-12)
    assert T.shape == (21, 20)
    np.testing.assert_allclose(S @ T @ T.T @ S, S, atol=1e-8)
    # Indefinite (a kernel that is not PSD): its positive part, as the
    # eigendecomposition keeps it, where pivoting would stop at once.
    S = np.array([[0.0, 1.0], [1.0, 0.0]])
    T, _ = _pivot_transform(S, 1e-12)
    assert T.shape == (2, 1)
    np.testing.assert_allclose(T @ T.T, [[0.5, 0.5], [0.5, 0.5]], atol=1e-12)


def test_partial_cholesky_factors_every_prefix_of_the_given_pivots():
    rng = np.random.RandomState(0)
    X = rng.randn(120, 3)
    X[100:] = X[:20]  # duplicated points add no rank
    K = rbf_kernel(X, gamma=0.5)
    order = np.r_[np.arange(0, 60, 2), 101, 100, 5]
    G, rank = partial_cholesky(K, order)
    assert rank.shape == (order.size + 1,) and rank[0] == 0
    assert G.shape == (120, rank[-1])
    # 101 duplicates 1 (not yet a pivot), 100 duplicates 0 (one already).
    assert rank[31] == rank[30] + 1 and rank[32] == rank[31]
    for j in (1, 10, 31, order.size):
        P = order[:j]
        L = K[:, P] @ np.linalg.pinv(K[np.ix_(P, P)], rcond=1e-10) @ K[P]
        k = rank[j]
        np.testing.assert_allclose(G[:, :k] @ G[:, :k].T, L, atol=1e-8)
    # The uniform landmarks of DoFNystroem are such a prefix.
    nys = DoFNystroem(gamma=0.5, n_components=25, random_state=3).fit(X)
    order = uniform_columns(120, 25, random_state=3)
    G, rank = partial_cholesky(K, order)
    Phi = nys.transform(X)
    np.testing.assert_allclose(G @ G.T, Phi @ Phi.T, atol=1e-8)


@pytest.mark.parametrize(
    "pivots, message",
    [
        ([[0, 1]], "1d array"),
        ([0.5], "1d array"),
        ([0, 10], r"\[0, 10\)"),
        ([1, 1], "duplicated"),
    ],
)
def test_partial_cholesky_rejects_bad_pivots(pivots, message):
    with pytest.raises(ValueError, match=message):
        partial_cholesky(np.eye(10), pivots)


def test_a_pivot_below_the_threshold_adds_no_rank_even_first_in_its_block():
    # LAPACK's pstrf compares only the later pivots with its tolerance: a
    # block whose largest residual is rounding noise must still add nothing.
    X = np.array([[0.0], [1e-7], [1.0]])
    K = np.exp(-((X - X.T) ** 2))
    G, rank = partial_cholesky(K, [0, 1, 2])
    assert rank.tolist() == [0, 1, 1, 2]
    # Residual of point 1 is about 1e-14, below 1e-12 * max(diag K).
    assert np.all(np.diag(K - G @ G.T) >= -1e-15)
    transform, _ = _sampling._pivot_transform(np.array([[1e-14]]), tol=1e-12)
    assert transform.shape == (1, 0)


@pytest.mark.parametrize("order", ["block", "permuted", "dropped"])
def test_append_by_the_triangular_transform_is_the_general_product(order):
    # A block of pivots past the panel width is appended by the panelled
    # product with the transform's upper triangular rows (in kept's order:
    # the block's own, a pivoted one, or with dropped pivots), the same
    # columns as the general product with the whole transform.
    from sklearn_dof import _tiles
    from sklearn_dof._sampling import _pivot_transform

    rng = np.random.RandomState(0)
    X = rng.randn(900, 3)
    K = rbf_kernel(X, gamma=0.3) + 1e-3 * np.eye(900)
    k = _tiles.TRIANGULAR_PANEL + 120
    indices = rng.permutation(900)[:k]
    S_BB = K[np.ix_(indices, indices)]
    transform, kept = _pivot_transform(S_BB, 1e-12)
    assert np.array_equal(kept, np.arange(k))
    if order != "block":
        # Upper triangular in the order of kept, which is not the block's.
        kept = rng.permutation(k)[: k if order == "permuted" else k - 40]
        U = np.linalg.cholesky(S_BB[np.ix_(kept, kept)]).T
        transform = np.zeros((k, len(kept)))
        transform[kept] = np.linalg.inv(U)
        transform[kept] = np.triu(transform[kept])
    factors = []
    for given in (kept, None):
        chol = PartialCholesky(_matrix_columns(K), np.diag(K).copy())
        chol._append(indices, transform, given)
        factors.append(chol.factor.copy())
    np.testing.assert_allclose(factors[0], factors[1], rtol=1e-9, atol=1e-12)
    assert factors[0].shape == (900, len(kept))
