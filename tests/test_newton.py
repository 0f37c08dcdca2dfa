"""The Newton solver's named steps (sklearn_dof._newton._NewtonSolver)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_dof import _newton
from sklearn_dof._blocks import FeatureBlocks
from sklearn_dof._newton import logistic_newton


def _data(n_classes=2, n_samples=300, n_features=6, seed=0):
    rng = np.random.RandomState(seed)
    Phi = rng.randn(n_samples, n_features)
    scores = Phi[:, :n_classes] + 0.7 * rng.randn(n_samples, n_classes)
    y = scores.argmax(axis=1) if n_classes > 2 else (scores[:, 0] > 0).astype(int)
    return Phi, y


def _solver(Phi, y, n_classes, inner_solver, tol=1e-10, **kwargs):
    problem = _newton._Problem(
        FeatureBlocks.from_array(Phi), y, n_classes, 0.1, np.ones(len(y)), True
    )
    preconditioner = _newton._preconditioner(problem, inner_solver, 2**28, None)
    solver = _newton._NewtonSolver(problem, tol, 50, preconditioner, **kwargs)
    return solver, _newton._start_point(problem, None)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("inner_solver", ["cholesky", "cg"])
def test_steps_in_order_give_logistic_newton(n_classes, inner_solver):
    # The steps called one by one, in scikit-learn's order, are the fit.
    Phi, y = _data(n_classes)
    expected = logistic_newton(Phi, y, 0.1, tol=1e-10, inner_solver=inner_solver)
    solver, theta = _solver(Phi, y, n_classes, inner_solver)
    solver.setup(theta)
    while not solver.converged:
        solver.update_gradient_hessian()
        assert solver.inner_solve()
        if solver.check_convergence():
            break
        assert solver.line_search()
        solver.n_iter += 1
        solver.check_convergence()
    solver.finalize()
    result = solver.result
    assert result.converged and result.n_iter == expected.n_iter
    assert result.inner_solver == inner_solver
    assert_array_equal(result.coef, expected.coef)
    assert_array_equal(result.intercept, expected.intercept)


def test_gradient_test_alone_takes_no_step_at_the_optimum(monkeypatch):
    # Without the decrement, a start that meets the gradient test forms no
    # Newton system.
    Phi, y = _data()
    fit = logistic_newton(Phi, y, 0.1, tol=1e-10)
    solver, _ = _solver(Phi, y, 2, "cholesky", tol=1e-8, check_decrement=False)

    def no_system(self):
        raise AssertionError("no Newton system")

    monkeypatch.setattr(_newton._NewtonSolver, "update_gradient_hessian", no_system)
    theta = np.column_stack([fit.coef, fit.intercept])
    theta_out, n_iter, converged = solver.solve(theta)
    assert converged and n_iter == 0
    assert_array_equal(theta_out, theta)


def test_decrement_test_and_ascent_direction():
    # |g^T d| / 2 <= tol: a direction of ascent meets it only where it is
    # that small, and the line search refuses it.
    Phi, y = _data()
    solver, theta = _solver(Phi, y, 2, "cholesky", tol=1e-6)
    solver.setup(theta)
    solver.gradient = np.full_like(solver.gradient, 1e-7)
    for slope, expected in [(-1e-6, True), (3e-6, False), (-3e-6, False)]:
        solver.slope = slope
        assert solver.check_convergence() is expected
    solver.slope = 3e-6
    assert not solver.line_search()
    assert solver.failure == "the Newton step is not a descent direction"


def test_failed_line_search_warns_why():
    # An ascent direction claimed to be one of descent: no trial passes.
    Phi, y = _data()
    solver, theta = _solver(Phi, y, 2, "cholesky")
    solver.setup(theta)
    solver.direction = solver.gradient.copy()
    solver.slope = -1.0
    assert not solver.line_search()
    assert_array_equal(solver.theta, theta)
    with pytest.warns(ConvergenceWarning, match="line search failed after 21"):
        solver.finalize()
    assert not solver.result.converged


def test_start_point():
    # The intercept-only fit: its intercepts' gradient vanishes; a warm
    # start's coefficients are completed by zeros.
    Phi, y = _data(3)
    solver, theta = _solver(Phi, y, 3, "cg")
    solver.setup(theta)
    assert_allclose(solver.gradient[:, -1], 0.0, atol=1e-12)
    assert_allclose(theta[:, -1].sum(), 0.0, atol=1e-12)
    prefix = logistic_newton(Phi[:, :2], y, 0.1)
    warm = _newton._start_point(solver.problem, prefix)
    assert_array_equal(warm[:, :2], prefix.coef)
    assert_array_equal(warm[:, 2:-1], 0.0)
    assert_array_equal(warm[:, -1], prefix.intercept)


def test_input_checks_beyond_validate_params():
    Phi, y = _data(n_samples=8)
    with pytest.raises(ValueError, match="Phi must be 2-dimensional"):
        logistic_newton(Phi[:, 0], y, 1.0)
    with pytest.raises(ValueError, match="one entry per row of Phi"):
        logistic_newton(Phi, y[:-1], 1.0)
    with pytest.raises(ValueError, match="sample_weight has shape"):
        logistic_newton(Phi, y, 1.0, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="finite and non-negative"):
        logistic_newton(Phi, y, 1.0, sample_weight=np.full(8, np.inf))
    with pytest.raises(ValueError, match="class indices"):
        logistic_newton(Phi, y - 1, 1.0)


def test_zero_weights_are_removed_rows():
    Phi, y = _data(n_samples=60)
    weights = np.ones(60)
    weights[::4] = 0.0
    keep = weights > 0
    weighted = logistic_newton(Phi, y, 0.1, sample_weight=weights, tol=1e-10)
    removed = logistic_newton(Phi[keep], y[keep], 0.1, tol=1e-10)
    assert_array_equal(weighted.coef, removed.coef)
    assert_array_equal(weighted.intercept, removed.intercept)
