import numpy as np
import pytest

from sklearn_dof._linalg import lower_triangular_inverse, quadratic_forms


@pytest.mark.parametrize("r", [0, 1, 5, 128, 129, 300, 517])
def test_lower_triangular_inverse_is_the_inverse_and_lower(r):
    # Sizes on both sides of the block that is inverted whole, odd halves
    # included: every off-diagonal block of the recursion must be filled.
    rng = np.random.default_rng(r)
    A = rng.standard_normal((r, r + 3))
    L = np.linalg.cholesky(A @ A.T + np.eye(r)) if r else np.zeros((0, 0))
    inverse = lower_triangular_inverse(L)
    assert inverse.shape == (r, r)
    np.testing.assert_array_equal(np.triu(inverse, 1), 0.0)
    np.testing.assert_allclose(inverse @ L, np.eye(r), atol=1e-12)


def test_lower_triangular_inverse_in_place_needs_a_quarter_of_the_matrix():
    import tracemalloc

    rng = np.random.default_rng(0)
    r = 1000
    A = rng.standard_normal((r, r + 3))
    L = np.linalg.cholesky(A @ A.T + np.eye(r))
    expected = lower_triangular_inverse(L)
    tracemalloc.start()
    inverse = lower_triangular_inverse(L, overwrite=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert inverse is L
    np.testing.assert_allclose(inverse, expected, rtol=1e-12, atol=1e-14)
    # B A^-1 of the top level, a quarter of the 8 MB matrix, and little else.
    assert peak < 0.3 * 8 * r * r
    # A matrix it may not overwrite in place (float32) is left alone.
    L32 = np.linalg.cholesky(A @ A.T + np.eye(r)).astype(np.float32)
    kept = L32.copy()
    lower_triangular_inverse(L32, overwrite=True)
    np.testing.assert_array_equal(L32, kept)


def test_quadratic_forms_are_the_diagonal_of_g_a_inverse_g():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((400, 150))
    A = G.T @ G + 0.1 * np.eye(150)
    expected = np.einsum("ij,ji->i", G, np.linalg.solve(A, G.T))
    np.testing.assert_allclose(quadratic_forms(G, A), expected, rtol=1e-10)


def _well_conditioned_block(p=120):
    from sklearn.metrics.pairwise import rbf_kernel

    X = np.random.RandomState(0).randn(p, 4)
    return rbf_kernel(X, X, gamma=2.0)  # nearly the identity


def test_landmark_factor_keeps_the_exact_block_below_the_threshold():
    from sklearn_dof import _linalg

    gram = _well_conditioned_block()
    R, shift, consumed = _linalg.landmark_factor(gram, landmark_penalty=1.0)
    assert shift == 0.0 and not consumed
    np.testing.assert_allclose(R.T @ R, gram, atol=1e-12)


@pytest.mark.parametrize("penalty, shifted", [(1.0, True), (1e-14, False)])
def test_landmark_factor_shifts_first_at_large_ranks(monkeypatch, penalty, shifted):
    from sklearn_dof import _linalg

    gram = _well_conditioned_block()
    monkeypatch.setattr(_linalg, "SHIFT_FIRST_COMPONENTS", gram.shape[0])
    calls = []
    potrf = _linalg._tiles.potrf
    monkeypatch.setattr(
        _linalg._tiles, "potrf", lambda A, **kw: calls.append(1) or potrf(A, **kw)
    )
    R, shift, consumed = _linalg.landmark_factor(gram, landmark_penalty=penalty)
    assert not consumed
    # One factorisation: the shifted block where its shift is below 1% of
    # the penalty, else the block itself (which this one has).
    assert len(calls) == 1
    if shifted:
        assert 0 < shift <= 1e-2 * penalty
    else:
        assert shift == 0.0
    np.testing.assert_allclose(R.T @ R, gram + shift * np.eye(len(gram)), atol=1e-12)


def test_landmark_factor_overwrites_the_block_only_where_asked(monkeypatch):
    from sklearn_dof import _linalg

    gram = _well_conditioned_block()
    monkeypatch.setattr(_linalg, "SHIFT_FIRST_COMPONENTS", gram.shape[0])
    kept = gram.copy()
    R, shift, consumed = _linalg.landmark_factor(kept, 1.0)
    np.testing.assert_array_equal(kept, gram)
    assert not consumed and not np.shares_memory(R, kept)
    block = gram.copy()
    R_in_place, shift_in_place, consumed = _linalg.landmark_factor(
        block, 1.0, overwrite_gram=True
    )
    # The factor lives in the block's own memory: no p x p copy.
    assert consumed and np.shares_memory(R_in_place, block)
    assert shift_in_place == shift
    np.testing.assert_allclose(R_in_place, R, atol=1e-12)
    # A refused shift leaves the block alone, in place or not.
    block = gram.copy()
    R, shift, consumed = _linalg.landmark_factor(block, 1e-14, overwrite_gram=True)
    assert shift == 0.0 and not consumed
    np.testing.assert_array_equal(block, gram)


def test_a_failed_factorisation_in_place_ends_the_search(monkeypatch):
    from sklearn_dof import _linalg

    gram = _well_conditioned_block()
    gram[0, 0] = -1.0  # no shift of 1e-12 |K| makes it positive definite
    monkeypatch.setattr(_linalg, "SHIFT_FIRST_COMPONENTS", gram.shape[0])
    calls = []
    potrf = _linalg._tiles.potrf
    monkeypatch.setattr(
        _linalg._tiles, "potrf", lambda A, **kw: calls.append(1) or potrf(A, **kw)
    )
    R, shift, consumed = _linalg.landmark_factor(gram, 1.0, overwrite_gram=True)
    assert R is None and consumed and len(calls) == 1
    R, shift, consumed = _linalg.landmark_factor(
        _well_conditioned_block() - 2 * np.eye(len(gram)), 1.0
    )
    assert R is None and not consumed and len(calls) == 3
