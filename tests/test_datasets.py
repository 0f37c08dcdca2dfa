import math

import numpy as np
import pytest

from sklearn_dof import degrees_of_freedom
from sklearn_dof.datasets import make_periodic_spline, periodic_spline_kernel


def _series(t, coefs):
    i = np.arange(1, len(coefs) + 1)
    return 2 * np.cos(2 * math.pi * np.multiply.outer(t, i)) @ coefs


@pytest.mark.parametrize("beta", [1, 2, 3, 4, 8, 1.5])
def test_kernel_matches_its_cosine_series(beta):
    x = np.random.RandomState(0).uniform(size=30)
    K = periodic_spline_kernel(x, beta=beta)
    terms = 20_000 if beta <= 1.5 else 5000
    ref = _series(
        np.subtract.outer(x, x).ravel(), np.arange(1.0, terms + 1) ** -(2 * beta)
    )
    # The reference is itself truncated: its tail bounds the tolerance.
    tail = 2 * terms ** (1 - 2 * beta) / (2 * beta - 1)
    np.testing.assert_allclose(K.ravel(), ref, atol=tail + 1e-13)


def test_exponential_kernel_closed_form():
    x = np.linspace(0, 1, 17)
    K = periodic_spline_kernel(x, rho=0.7)
    ref = _series(np.subtract.outer(x, x).ravel(), np.exp(-0.7 * np.arange(1, 200)))
    np.testing.assert_allclose(K.ravel(), ref, atol=1e-13)


def test_grid_spectrum_is_twice_mu():
    # On the grid i/n the kernel matrix is circulant: frequency i gives the
    # eigenvalue n mu_i twice, plus aliases n mu_{jn +- i} below 1e-6 here.
    n = 64
    K = make_periodic_spline(n, beta=2, design="grid", random_state=0).K
    eig = np.sort(np.linalg.eigvalsh(K))[::-1]
    np.testing.assert_allclose(eig[0:2], n * 1.0**-4, rtol=1e-6)
    np.testing.assert_allclose(eig[2:4], n * 2.0**-4, rtol=1e-5)
    lev = degrees_of_freedom(K, 1.0).leverage_scores
    np.testing.assert_allclose(lev, lev.mean(), rtol=1e-8)  # d_max == d_eff


def test_problem_target_and_noise():
    data = make_periodic_spline(500, beta=1, delta=8, noise=0.5, random_state=0)
    ref = _series(data.X.ravel(), np.arange(1.0, 50) ** -8)
    np.testing.assert_allclose(data.f, ref, atol=1e-12)
    assert np.std(data.y - data.f) == pytest.approx(0.5, rel=0.1)
    assert data.K.shape == (500, 500)


def test_problem_requires_one_decay():
    with pytest.raises(ValueError, match="beta"):
        make_periodic_spline(10, beta=1, rho=1.0)
    with pytest.raises(ValueError, match="delta"):
        make_periodic_spline(10, delta=None, kappa=None)
