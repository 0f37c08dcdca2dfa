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


def test_quadratic_forms_are_the_diagonal_of_g_a_inverse_g():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((400, 150))
    A = G.T @ G + 0.1 * np.eye(150)
    expected = np.einsum("ij,ji->i", G, np.linalg.solve(A, G.T))
    np.testing.assert_allclose(quadratic_forms(G, A), expected, rtol=1e-10)
