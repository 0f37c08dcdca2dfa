"""The shared leave-one-out kernel (sklearn_dof._loo) and its three callers
against a brute-force hat matrix."""

import numpy as np
import pytest

from sklearn_dof import _array_api
from sklearn_dof._blocks import FeatureBlocks
from sklearn_dof._certificate import penalty_errors
from sklearn_dof._kernels import KernelColumns
from sklearn_dof._loo import loo_residuals, ridge_inverse, ridge_spectrum, squared_sums
from sklearn_dof._ridge_solve import FeatureRidgeProblem, cv_errors
from sklearn_dof._samplers import partial_cholesky_of

ALPHAS = np.logspace(-4, 2, 7)


def _problem(n=40, p=6, k=3, seed=0):
    rng = np.random.RandomState(seed)
    Phi = rng.randn(n, p) + 0.5  # not centred: the intercept has work to do
    Y = Phi @ rng.randn(p, k) + 0.3 * rng.randn(n, k) + 2.0
    sw = rng.uniform(0.2, 3.0, n)
    return Phi, Y, sw


def _brute_force(Phi, Y, sw, alphas, fit_intercept, criterion="loo", floor=None):
    """LOO (or GCV) residuals (n, n_alphas, k) from the explicit hat matrix of
    weighted ridge with an unpenalised intercept column."""
    n, p = Phi.shape
    A = np.c_[Phi, np.ones(n)] if fit_intercept else Phi
    penalty = np.r_[np.ones(p), np.zeros(A.shape[1] - p)]
    out = []
    for alpha in alphas:
        H = A @ np.linalg.solve(A.T @ (sw[:, None] * A) + alpha * np.diag(penalty), A.T)
        H *= sw[None, :]
        if criterion == "gcv":
            leverage = np.full(n, np.trace(H) / n)
        else:
            leverage = np.diag(H)
        scale = 1.0 - leverage
        if floor is not None:
            scale = np.maximum(scale, floor)
        out.append((Y - H @ Y) / scale[:, None])
    return np.stack(out, axis=1)


def _centred_sums(Phi, Y, sw, fit_intercept):
    if fit_intercept:
        offset, y_offset = sw @ Phi / sw.sum(), sw @ Y / sw.sum()
    else:
        offset, y_offset = np.zeros(Phi.shape[1]), np.zeros(Y.shape[1])
    Phi_c, Y_c = Phi - offset, Y - y_offset
    gram = Phi_c.T @ (sw[:, None] * Phi_c)
    rhs = Phi_c.T @ (sw[:, None] * Y_c)
    return gram, rhs, offset, y_offset


@pytest.mark.parametrize("criterion", ["loo", "gcv"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_kernel_is_the_hat_matrix(weighted, fit_intercept, criterion):
    Phi, Y, sw = _problem()
    if not weighted:
        sw = np.ones_like(sw)
    gram, rhs, offset, y_offset = _centred_sums(Phi, Y, sw, fit_intercept)
    spectrum = ridge_spectrum(
        gram,
        rhs,
        ALPHAS,
        offset=offset,
        y_offset=y_offset,
        total_weight=sw.sum() if fit_intercept else None,
        criterion=criterion,
        n_samples=Phi.shape[0],
    )
    # Two blocks of rows, as the callers pass them.
    residuals = np.concatenate(
        [
            loo_residuals(Phi[rows], Y[rows], spectrum, sw[rows] if weighted else None)
            for rows in (slice(0, 17), slice(17, None))
        ]
    )
    expected = _brute_force(Phi, Y, sw, ALPHAS, fit_intercept, criterion)
    np.testing.assert_allclose(residuals, expected, rtol=1e-10)
    sums = squared_sums(residuals, sw)
    np.testing.assert_allclose(
        sums, (sw[:, None, None] * expected**2).sum(axis=(0, 2)), rtol=1e-10
    )


def test_loo_residuals_are_refits_without_the_row():
    # The hat-matrix formula itself: weighted rows, an intercept, one
    # penalty, every row left out for real.
    Phi, Y, sw = _problem(n=25, p=4, k=2, seed=3)
    alpha = 0.3
    gram, rhs, offset, y_offset = _centred_sums(Phi, Y, sw, True)
    spectrum = ridge_spectrum(
        gram,
        rhs,
        np.array([alpha]),
        offset=offset,
        y_offset=y_offset,
        total_weight=sw.sum(),
    )
    residuals = loo_residuals(Phi, Y, spectrum, sw)[:, 0]
    for i in range(Phi.shape[0]):
        keep = np.arange(Phi.shape[0]) != i
        g, r, o, yo = _centred_sums(Phi[keep], Y[keep], sw[keep], True)
        W = np.linalg.solve(g + alpha * np.eye(Phi.shape[1]), r)
        np.testing.assert_allclose(
            residuals[i], Y[i] - (yo + (Phi[i] - o) @ W), rtol=1e-9
        )


def test_leverage_floor():
    # Row 0 alone has the first feature: at penalty a its leverage is
    # 1 / (1 + a), and its leave-one-out residual (1 - h) y_0 / (1 - h) is
    # y_0 itself; floored, 1 - h = a / (1 + a) becomes the floor.
    rng = np.random.RandomState(4)
    Phi = np.zeros((10, 2))
    Phi[0, 0] = 1.0
    Phi[1:, 1] = rng.randn(9)
    Y = rng.randn(10, 2)
    alphas = np.array([1e-10, 1.0])
    spectrum = ridge_spectrum(Phi.T @ Phi, Phi.T @ Y, alphas)
    plain = loo_residuals(Phi, Y, spectrum)
    floored = loo_residuals(Phi, Y, spectrum, leverage_floor=1e-8)
    expected = _brute_force(Phi, Y, np.ones(10), alphas, False)
    np.testing.assert_allclose(plain, expected, rtol=1e-5)
    np.testing.assert_allclose(plain[0, 0], Y[0], rtol=1e-5)
    np.testing.assert_allclose(floored[0, 0], Y[0] * 1e-10 / 1e-8, rtol=1e-5)
    # Rows and penalties whose 1 - h is above the floor are untouched.
    np.testing.assert_array_equal(floored[1:], plain[1:])
    np.testing.assert_array_equal(floored[:, 1], plain[:, 1])


def test_ridge_inverse_drops_rounding():
    # With the numerical range only (cv_errors, the fallback solve), the
    # directions below rounding get no inverse.
    inverse = ridge_inverse(np.array([1.0, 1e-20, -1e-18]), ALPHAS)
    assert inverse.shape == (3, ALPHAS.size)
    np.testing.assert_array_equal(inverse[1:], 0.0)
    np.testing.assert_allclose(inverse[0], 1.0 / (1.0 + ALPHAS))
    kept = ridge_inverse(np.array([1.0, 1e-20, -1e-18]), ALPHAS, drop_rounding=False)
    np.testing.assert_allclose(kept[1:], np.tile(1.0 / ALPHAS, (2, 1)), rtol=1e-12)


@pytest.mark.parametrize("criterion", ["loo", "gcv"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_cv_errors(weighted, fit_intercept, criterion):
    Phi, Y, sw = _problem(n=300, p=8)
    # (A copy: the blocks are temporaries that the sums may overwrite.)
    features = FeatureBlocks(Phi, np.copy, Phi.shape[1], working_memory=0.005)
    assert len(features.slices) > 1
    problem = FeatureRidgeProblem(features, Y, sw if weighted else None, fit_intercept)
    errors = cv_errors(problem, ALPHAS, criterion)
    sw_ = sw if weighted else np.ones_like(sw)
    expected = _brute_force(Phi, Y, sw_, ALPHAS, fit_intercept, criterion)
    np.testing.assert_allclose(errors, expected.transpose(0, 2, 1), rtol=1e-10)


@pytest.mark.parametrize("center", [True, False])
def test_penalty_errors(center):
    rng = np.random.RandomState(2)
    X = rng.randn(300, 3)
    Y = np.c_[np.sin(X[:, 0]) + 0.1 * rng.randn(300), X[:, 1]]
    chol = partial_cholesky_of(KernelColumns(X, "rbf", {"gamma": 0.5}))
    chol.add(np.arange(0, 300, 4))
    errors = penalty_errors(chol, Y, ALPHAS, center, max_rank=40, block=64)
    G = chol.factor[:, :40].astype(np.float64)
    expected = _brute_force(G, Y, np.ones(300), ALPHAS, center)
    np.testing.assert_allclose(errors, (expected**2).sum(axis=(0, 2)) / 300, rtol=1e-10)
    y_c = Y - Y.mean(axis=0) if center else Y
    rank_zero = penalty_errors(chol, Y, ALPHAS, center, max_rank=0)
    np.testing.assert_allclose(rank_zero, (y_c**2).sum(axis=1).mean())


class _Features:
    """The rows as ``_array_api._Features`` gives them, by blocks."""

    def __init__(self, Phi, xp, block=70):
        self.X, self.xp, self.device, self.block = Phi, xp, None, block
        self.N = xp.eye(Phi.shape[1], dtype=xp.float64)

    def blocks(self):
        for start in range(0, self.X.shape[0], self.block):
            rows = slice(start, min(start + self.block, self.X.shape[0]))
            yield rows, self.X[rows, ...] + 0.0  # a temporary, as K @ N


@pytest.mark.parametrize("namespace", ["numpy", "array_api_strict"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_array_api_loo_scores(namespace, weighted, fit_intercept):
    xp = pytest.importorskip(namespace)
    Phi, Y, sw = _problem(n=300, p=8)
    features = _Features(xp.asarray(Phi), xp)
    y_xp, sw_xp = xp.asarray(Y), xp.asarray(sw) if weighted else None
    sums = _array_api.ridge_sums(features, y_xp, sw_xp, fit_intercept)
    scores = _array_api.loo_scores(features, sums, y_xp, sw_xp, fit_intercept, ALPHAS)
    sw_ = sw if weighted else np.ones_like(sw)
    expected = _brute_force(Phi, Y, sw_, ALPHAS, fit_intercept)
    np.testing.assert_allclose(
        scores,
        -(sw_[:, None, None] * expected**2).sum(axis=(0, 2)) / Y.size,
        rtol=1e-10,
    )
