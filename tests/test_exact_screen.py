import math

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from sklearn_dof._exact_screen import (
    MIN_SLOPE_ROWS,
    SLOPE_Z,
    VALUE_Z,
    explains_targets,
    rules_out,
    sample_sizes,
)
from sklearn_dof._ridge_solve import exact_kernel_ridge, exact_loo_sample


def _problem(n=300, targets=1, weighted=False, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(2 * X[:, :1]) + X[:, 1:2] ** 2 + 0.3 * rng.standard_normal((n, 1))
    y = np.hstack([y, np.cos(X[:, 2:3]) * y])[:, :targets]
    weights = rng.uniform(0.2, 3.0, n) if weighted else None
    return rbf_kernel(X, gamma=0.7), y, weights


def _full_squares(K, y, weights, alpha, fit_intercept):
    """Every row's weighted squared leave-one-out error, summed over the
    targets, from the full inverse of the factor."""
    *_, residuals = exact_kernel_ridge(
        K.copy(), y, weights, alpha, fit_intercept, loo=True
    )
    w = np.ones(K.shape[0]) if weights is None else weights
    return w * np.sum(residuals**2, axis=1)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", [1, 2])
def test_sampled_errors_are_the_last_rows_of_the_full_leave_one_out(
    fit_intercept, weighted, targets
):
    K, y, weights = _problem(targets=targets, weighted=weighted)
    alpha = 0.05
    full = _full_squares(K, y, weights, alpha, fit_intercept)
    squares, slopes, finish = exact_loo_sample(
        K.copy(), y, weights, alpha, fit_intercept, rows=120, slope_rows=0
    )
    assert squares.shape == (120,) and slopes.shape == (0,)
    np.testing.assert_allclose(squares, full[-120:], rtol=1e-9)
    # The whole fit from the same factor is exact kernel ridge's.
    for got, want in zip(
        finish(),
        exact_kernel_ridge(K.copy(), y, weights, alpha, fit_intercept, loo=True),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", [1, 2])
def test_sampled_slopes_are_the_derivatives_in_log_alpha(
    fit_intercept, weighted, targets
):
    K, y, weights = _problem(targets=targets, weighted=weighted, seed=1)
    alpha, step = 0.05, 1e-4
    squares, slopes, _ = exact_loo_sample(
        K.copy(), y, weights, alpha, fit_intercept, rows=100, slope_rows=40
    )
    above = _full_squares(K, y, weights, alpha * math.exp(step), fit_intercept)
    below = _full_squares(K, y, weights, alpha * math.exp(-step), fit_intercept)
    central = (above - below)[-40:] / (2 * step)
    np.testing.assert_allclose(
        slopes, central, rtol=1e-5, atol=1e-9 * np.abs(central).max()
    )
    # Rows whose error moves both ways with the penalty: the slope is not a
    # sign that a wrong formula could match by chance.
    assert np.any(slopes > 0) and np.any(slopes < 0)


def test_no_factor_no_sample():
    K, y, _ = _problem()
    K[0, 0] = -1e3  # not positive semi-definite by far
    assert exact_loo_sample(K, y, None, 1e-3, True, 50, 10) is None


def test_sample_sizes():
    for n in (100, 2049, 11000, 50_000):
        rows, slope_rows = sample_sizes(n)
        assert slope_rows <= rows <= n
        assert rows >= min(n, 2 * MIN_SLOPE_ROWS) and rows >= n // 4
        assert slope_rows >= min(n, MIN_SLOPE_ROWS) and slope_rows >= n // 16
        if n >= 16 * MIN_SLOPE_ROWS:
            # The sample's memory (rows^2, then n * slope_rows entries) and
            # the slope's flops (n^2 each) stay small beside the factor's.
            assert rows <= n // 4 and slope_rows <= n // 16
        assert sample_sizes(n, lower=False) == (rows, 0)


def _rows(mean, spread, n=2000, seed=0):
    return mean + spread * np.random.RandomState(seed).standard_normal(n)


def test_rules_out_needs_a_clear_excess_and_a_rising_error_below():
    reference = np.abs(_rows(1.0, 0.5))
    worse = reference * 1.05 + 0.01 * _rows(0.0, 1.0, seed=1)
    falling = _rows(-0.2, 1.0, n=400, seed=2)  # error grows as alpha falls
    rising = -falling
    ruled_out, value_z, slope_z = rules_out(worse, reference, falling, 0.01)
    assert ruled_out and value_z > VALUE_Z and slope_z < -SLOPE_Z
    # The error falls below the penalty: the exact fits may still win there.
    assert not rules_out(worse, reference, rising, 0.01)[0]
    # No smaller penalty: the value alone decides.
    assert rules_out(worse, reference, np.empty(0), 0.01)[0]
    # Not better than the low-rank fit by loss_tol: ruled out, as the exact
    # fit would not be kept; better by more: not ruled out.
    assert rules_out(reference * 0.995, reference, falling, 0.01)[0]
    assert not rules_out(reference * 0.98, reference, falling, 0.01)[0]


def test_rules_out_needs_enough_rows_to_tell():
    reference = np.abs(_rows(1.0, 0.5, n=40))
    noisy = reference * 1.05 + _rows(0.0, 1.0, n=40, seed=3)
    ruled_out, value_z, _ = rules_out(noisy, reference, np.empty(0), 0.01)
    assert not ruled_out and value_z < VALUE_Z
    # Constant differences have no standard error: nothing is ruled out.
    ones = np.ones(40)
    assert not rules_out(2.0 * ones, ones, np.empty(0), 0.01)[0]
    assert not rules_out(2.0 * ones[:1], ones[:1], np.empty(0), 0.01)[0]


def test_rules_out_leaves_rows_of_zero_weight_out():
    # Zero-weight rows have zero error in both fits: left in, they would
    # shrink both standard scores toward zero.
    reference = np.abs(_rows(1.0, 0.5, n=400))
    worse = reference * 1.05 + 0.01 * _rows(0.0, 1.0, n=400, seed=1)
    falling = _rows(-0.2, 1.0, n=100, seed=2)
    scores = rules_out(worse, reference, falling, 0.01)
    # 200 zero-weight rows among the first 300; the slopes are the last 100.
    order = np.r_[0:150, 400:600, 150:400]
    weights = np.r_[np.ones(400), np.zeros(200)][order]
    squares = np.r_[worse, np.zeros(200)][order]
    references = np.r_[reference, np.zeros(200)][order]
    weighted = rules_out(squares, references, falling, 0.01, weights)
    np.testing.assert_allclose(weighted[1:], scores[1:])
    assert weighted[0] == scores[0]
    assert rules_out(squares, references, falling, 0.01)[1] < scores[1]


def test_explains_targets_against_the_mean_or_zero():
    rng = np.random.RandomState(0)
    y = 5.0 + rng.standard_normal((200, 2))
    spread = np.sum((y - y.mean(axis=0)) ** 2)
    per_row = np.full(200, spread / 200)
    # A fit no better than the mean explains nothing; one loss_tol better
    # explains the targets.
    assert not explains_targets(per_row, y, None, 0.01)
    assert explains_targets(0.98 * per_row, y, None, 0.01)
    # Without an intercept the baseline is zero, far above the spread here.
    assert explains_targets(per_row, y, None, 0.01, centred=False)
    # Weights move the mean and the spread.
    weights = np.where(np.arange(200) < 100, 10.0, 0.0)
    weighted = np.sum(weights[:, None] * (y - weights @ y / weights.sum()) ** 2)
    assert not explains_targets(np.full(200, weighted / 200), y, weights, 0.01)
    assert explains_targets(np.full(200, 0.98 * weighted / 200), y, weights, 0.01)
