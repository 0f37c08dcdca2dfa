import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from sklearn_dof._duplicates import group_rows, grouped_targets, row_loo_residuals
from sklearn_dof._ridge_solve import exact_kernel_ridge


def _repeated(n_distinct, n_rows, n_targets=1, seed=0):
    rng = np.random.RandomState(seed)
    distinct = rng.uniform(-2, 2, size=(n_distinct, 2))
    rows = rng.randint(0, n_distinct, n_rows)
    X = distinct[rows]
    y = np.sin(3 * X[:, :1]) + 0.2 * rng.randn(n_rows, n_targets)
    weight = rng.uniform(0.3, 3.0, n_rows)
    return X, y, weight


def test_distinct_rows_make_no_groups():
    X = np.random.RandomState(0).randn(30, 3)
    assert group_rows(X, np.zeros(30)) is None


@pytest.mark.parametrize("weighted", [False, True])
def test_groups_hold_their_rows_weights_and_weighted_means(weighted):
    X, y, weight = _repeated(8, 40, n_targets=2)
    weight = weight if weighted else None
    groups = group_rows(X, y, weight)
    w = np.ones(40) if weight is None else weight
    # Each group's first row, in the rows' order, stands for it.
    assert np.all(np.diff(groups.first) > 0)
    np.testing.assert_array_equal(groups.inverse[groups.first], np.arange(8))
    np.testing.assert_array_equal(X[groups.first][groups.inverse], X)
    for g in range(8):
        members = groups.inverse == g
        assert groups.weight[g] == pytest.approx(w[members].sum())
        np.testing.assert_allclose(
            groups.mean[g], np.average(y[members], axis=0, weights=w[members])
        )
    assert grouped_targets(groups, y[:, 0]).shape == (8,)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_row_residuals_are_the_rows_leave_one_out_residuals(fit_intercept, weighted):
    # Against the definition: the fit on the other rows (the row's weight
    # set to zero), evaluated at the row; the grouped fit's residuals come
    # in a landmark order other than the groups'.
    X, y, weight = _repeated(12, 45, n_targets=2, seed=1)
    # Three rows of their own: groups of one row.
    X[-3:] += 5.0
    weight = weight if weighted else None
    groups = group_rows(X, y, weight)
    n_groups = groups.first.shape[0]
    assert np.any(np.bincount(groups.inverse) == 1)
    landmarks = np.random.RandomState(2).permutation(n_groups)
    distinct = X[groups.first][landmarks]
    K = rbf_kernel(distinct, gamma=2.0)
    alpha = 0.05
    *_, residuals, complement = exact_kernel_ridge(
        K,
        groups.mean[landmarks],
        groups.weight[landmarks],
        alpha,
        fit_intercept,
        loo=True,
        complement=True,
    )
    rows = row_loo_residuals(groups, residuals, complement, landmarks)
    w = np.ones(45) if weight is None else weight
    K_rows = rbf_kernel(X, gamma=2.0)
    expected = np.empty_like(rows)
    for j in range(45):
        others = w.copy()
        others[j] = 0.0
        dual, intercept = exact_kernel_ridge(
            K_rows.copy(), y, others, alpha, fit_intercept
        )
        expected[j] = y[j] - (K_rows[j] @ dual + intercept)
    np.testing.assert_allclose(rows, expected, rtol=1e-8, atol=1e-10)
