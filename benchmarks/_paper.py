"""Helpers of ``reproduce_paper.py``, the reproduction of Bach (COLT 2013).

Penalties follow scikit-learn's scale, ``alpha = n * lambda``: the paper's
decay pairs and predicted exponents, exact kernel ridge on the regular grid
by FFT, expected in-sample errors (exact and of every column prefix of a
Nystroem factor), nested factors, penalty searches, and the real sets of
Figure 3 with their bandwidth and penalty by exact leave-one-out.
"""

import contextlib
import math
import time
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
from _common import SpectralKRR, shrinkage, smallest_sufficient_rank
from scipy import linalg, optimize
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils import Bunch

from sklearn_dof import partial_cholesky, pivoted_cholesky, uniform_columns
from sklearn_dof.datasets import periodic_spline_kernel

TOL = 0.01  # "no loss": at most 1% worse than exact kernel ridge
NOISE = 1.0  # standard deviation of the noise of the synthetic problems
# Residual diagonals below this fraction of max(diag K) add no rank, as in
# sklearn_dof.pivoted_cholesky's default.
RTOL = 1e-12


# ---------------------------------------------------------------------------
# Decay pairs and the exponents of Table 1


@dataclass(frozen=True)
class Decay:
    """One ``(mu_i, nu_i)`` pair: kernel eigenvalues and target coefficients.

    ``beta`` gives ``mu_i = i^(-2 beta)``, ``rho`` gives ``mu_i = exp(-rho i)``;
    ``delta`` gives ``nu_i = i^(-2 delta)``, ``kappa`` gives
    ``nu_i = exp(-kappa i)`` (``nu_i`` are the squared coefficients of the
    target on ``2 cos(2 i pi x)``, as in :mod:`sklearn_dof.datasets`).
    """

    name: str
    beta: float | None = None
    rho: float | None = None
    delta: float | None = None
    kappa: float | None = None

    @property
    def kernel(self):
        """Keyword arguments of :func:`periodic_spline_kernel` for ``mu_i``."""
        return {"beta": self.beta} if self.beta is not None else {"rho": self.rho}

    @property
    def target(self):
        """Keyword arguments of :func:`periodic_spline_kernel` giving ``f``.

        ``f(x) = sum_i 2 nu_i^(1/2) cos(2 i pi x) = k'(x, 0)`` for the kernel
        ``k'`` whose eigenvalues are ``nu_i^(1/2)``: ``beta' = delta / 2`` or
        ``rho' = kappa / 2``.
        """
        if self.delta is not None:
            return {"beta": self.delta / 2}
        return {"rho": self.kappa / 2}

    @property
    def mu(self):
        return (
            f"i^-{2 * self.beta:g}"
            if self.beta is not None
            else f"exp(-{self.rho:g} i)"
        )

    @property
    def nu(self):
        return (
            f"i^-{2 * self.delta:g}"
            if self.delta is not None
            else f"exp(-{self.kappa:g} i)"
        )

    def params(self):
        return {k: v for k, v in asdict(self).items() if k != "name"}


# The six rows of Table 1: both decays polynomial (without and with the
# saturation of ridge regression), and every pair with an exponential decay.
DECAYS = (
    Decay("poly-poly", beta=1, delta=2),
    Decay("poly-poly saturated", beta=1, delta=4),
    Decay("poly-exp", beta=1, kappa=1.0),
    Decay("exp-poly", rho=0.5, delta=2),
    Decay("exp-exp kappa<2rho", rho=1.0, kappa=1.5),
    Decay("exp-exp kappa>2rho", rho=0.25, kappa=1.0),
)


def _frac(x):
    return Fraction(x).limit_denominator(1000)


def predicted_exponents(decay):
    """Asymptotic exponents of ``lambda*``, the error and ``d`` against ``n``.

    From the bias-variance decomposition of the expected in-sample error; the
    four regimes and their derivation are in ``benchmarks/README.rst``
    (Table 1).  With ``mu_i = exp(-rho i)`` and ``nu_i = i^-2delta`` it is
    ``log(1/lambda*)``, not ``lambda*``, that follows a power of ``n``.

    Returns
    -------
    exponents : dict
        ``lambda``, ``error``, ``d`` as :class:`fractions.Fraction` (0 for a
        logarithm), ``lambda_quantity`` (``"lambda"`` or ``"log(1/lambda)"``,
        the quantity whose exponent ``lambda`` is), ``regime`` and ``log``
        (which laws carry a ``log n`` factor).
    """
    b, d, r, k = decay.beta, decay.delta, decay.rho, decay.kappa
    out = {"lambda_quantity": "lambda", "log": ""}
    if b is not None and d is not None and 2 * d - 1 < 4 * b:
        out["regime"] = "(2delta-1)/(2beta) < 2"
        out["lambda"] = -_frac(b / d)
        out["error"] = -_frac((2 * d - 1) / (2 * d))
        out["d"] = _frac(1 / (2 * d))
    elif b is not None:
        out["regime"] = "saturated: bias ~ lambda^2"
        out["lambda"] = -_frac(2 * b / (4 * b + 1))
        out["error"] = -_frac(4 * b / (4 * b + 1))
        out["d"] = _frac(1 / (4 * b + 1))
    elif d is not None:
        out["regime"] = "cut-off m = log(1/lambda)/rho ~ n^(1/(2delta))"
        out["lambda_quantity"] = "log(1/lambda)"
        out["lambda"] = _frac(1 / (2 * d))
        out["error"] = -_frac((2 * d - 1) / (2 * d))
        out["d"] = _frac(1 / (2 * d))
    else:
        saturated = k > 2 * r
        out["regime"] = "kappa > 2 rho (saturated)" if saturated else "kappa < 2 rho"
        out["log"] = "error ~ log(n)/n, d ~ log(n)"
        out["lambda"] = Fraction(-1, 2) if saturated else -_frac(r / k)
        out["error"] = Fraction(-1)
        out["d"] = Fraction(0)
    return out


# ---------------------------------------------------------------------------
# Exact kernel ridge on the regular grid (circulant kernel matrix)


class CirculantKRR:
    """Exact kernel ridge regression on the grid ``x_i = i / n`` by FFT.

    On the grid the kernel matrix ``K_ij = k((i - j) / n)`` is circulant: the
    discrete Fourier basis diagonalises it and its eigenvalues are the DFT of
    its first row, computed with :func:`periodic_spline_kernel`.  The target's
    DFT gives its coordinates in that basis, so the expected error of every
    penalty costs ``O(n)`` after an ``O(n log n)`` set-up.
    """

    def __init__(self, n_samples, decay, noise=NOISE):
        x = np.arange(n_samples) / n_samples
        row = periodic_spline_kernel(x[:1], x, **decay.kernel)[0]
        self.eigvals = np.fft.fft(row).real
        # Rounding leaves eigenvalues of about -eps ||K||; the shrinkage must
        # stay in [0, 1).
        self.eigvals_clipped = np.clip(self.eigvals, 0, None)
        f = periodic_spline_kernel(x, np.zeros(1), **decay.target)[:, 0]
        self.target_energy = np.abs(np.fft.fft(f)) ** 2 / n_samples
        self.n_samples = n_samples
        self.noise = noise

    def _shrinkage(self, lam):
        return shrinkage(self.eigvals_clipped, self.n_samples * lam)

    def expected_error(self, lam):
        """``E ||z - f||^2 / n``: squared bias plus ``sigma^2 tr S^2 / n``."""
        shrink = self._shrinkage(lam)
        bias = ((1 - shrink) ** 2 * self.target_energy).sum()
        return float((bias + self.noise**2 * (shrink**2).sum()) / self.n_samples)

    def degrees_of_freedom(self, lam):
        """``(d_eff, d_ave)``; on the grid every leverage score is equal, so
        ``d_max = d_eff``."""
        shrink = self._shrinkage(lam)
        return float(shrink.sum()), float((shrink**2).sum())

    @classmethod
    def exact_arithmetic(cls, n_samples, decay, noise=NOISE, n_aliases=8):
        """The same problem with its spectrum summed term by term.

        The eigenvalue of Fourier mode ``k`` is ``n sum_j mu_|j|`` over the
        aliases ``j = k + m n != 0`` (and likewise the target's coordinates):
        sums of positive terms, accurate to rounding *relative to each
        eigenvalue*, whereas the FFT of the float64 kernel row is accurate
        only to ``eps * max eigenvalue``.  The difference between the two is
        the effect of machine precision.  ``n_aliases`` terms on each side
        suffice for fast polynomial decays (the Figure 2 breakdown study,
        ``beta = delta = 8``, needs 2).
        """
        self = cls.__new__(cls)
        k = np.arange(n_samples, dtype=np.float64)
        eig, coef = np.zeros(n_samples), np.zeros(n_samples)
        for m in range(-n_aliases, n_aliases + 1):
            j = np.abs(k + m * n_samples)
            j = j[j > 0] if m == 0 else j
            sl = slice(1, None) if m == 0 else slice(None)
            eig[sl] += _decay_values(j, decay.beta, decay.rho, 2.0)
            coef[sl] += _decay_values(j, decay.delta, decay.kappa, 1.0)
        self.eigvals = n_samples * eig
        self.eigvals_clipped = self.eigvals
        self.target_energy = n_samples * coef**2
        self.n_samples, self.noise = n_samples, noise
        return self

    def numerical_rank(self):
        """Eigenvalues above the rounding level ``n eps max|eig K|``."""
        floor = self.n_samples * np.finfo(float).eps * np.abs(self.eigvals).max()
        return int((self.eigvals > floor).sum())


def _decay_values(j, power, rate, scale):
    """``j^(-scale * power)`` or ``exp(-scale * rate * j / 2)``: ``mu_j`` with
    ``scale = 2`` and ``nu_j^(1/2)`` with ``scale = 1``."""
    if power is not None:
        return j ** (-scale * power)
    return np.exp(-scale * rate * j / 2)


# ---------------------------------------------------------------------------
# Expected errors and penalty search


def expected_error_function(krr, f, noise=NOISE):
    """``E ||z - f||^2 / n`` of exact kernel ridge over the noise, as a
    function of lambda (``O(n)`` a call; a float for a scalar lambda).

    ``krr`` is a :class:`_common.SpectralKRR` of the design's kernel matrix;
    with ``S = U diag(s / (s + alpha)) U^T`` the error is
    ``||(I - S) f||^2 / n + sigma^2 tr(S^2) / n``.
    """
    energy = (krr.eigvecs.T @ f) ** 2

    def error(lambdas):
        lam = np.atleast_1d(np.asarray(lambdas, dtype=np.float64))
        shrink = krr._shrinkage(krr.n_samples * lam)
        bias = ((1 - shrink) ** 2 * energy[:, None]).sum(axis=0)
        out = (bias + noise**2 * (shrink**2).sum(axis=0)) / krr.n_samples
        return float(out[0]) if np.ndim(lambdas) == 0 else out

    return error


def minimize_log(fun, log_grid):
    """Minimise ``fun(10**t)`` over a log grid, then refine by golden section.

    The grid finds the basin (the error of a very smooth kernel can have
    several local minima in ``lambda``); the bounded search refines inside
    the two neighbouring cells.

    Returns
    -------
    x : float
        The minimiser ``10**t``.
    value : float
    at_edge : bool
        True when the grid minimum is at one of its ends (the optimum may lie
        outside).
    """
    log_grid = np.asarray(log_grid, dtype=np.float64)
    values = np.array([fun(10.0**t) for t in log_grid])
    i = int(np.argmin(values))
    lo, hi = log_grid[max(i - 1, 0)], log_grid[min(i + 1, log_grid.size - 1)]
    res = optimize.minimize_scalar(
        lambda t: fun(10.0**t),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-4},
    )
    if res.fun <= values[i]:
        t, value = float(res.x), float(res.fun)
    else:
        t, value = float(log_grid[i]), float(values[i])
    return 10.0**t, value, bool(i in (0, log_grid.size - 1))


# lambda from 1e-20 to 10, 10 points a decade (below 1e-16 only the
# exact-arithmetic spectra of the machine-precision study are meaningful)
LOG_LAMBDA_GRID = np.arange(-20.0, 1.0 + 1e-9, 0.1)


def fit_slope(x, y):
    """Least-squares slope and intercept of ``log y`` against ``log x``.

    Non-positive or non-finite points are dropped; fewer than two points give
    NaN.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
    return float(slope), float(intercept)


# ---------------------------------------------------------------------------
# Nested Nystroem factors and their prefixes


def ordered_factor(K, order, rtol=RTOL):
    """Nystroem factor of the columns of ``K`` taken in the given order.

    ``G[:, :r_p] G[:, :r_p]^T = K(:, I_p) K(I_p, I_p)^+ K(I_p, :)`` for every
    prefix ``I_p = order[:p]``, where ``r_p`` is the rank the first ``p``
    columns span: a column whose residual diagonal is below
    ``rtol * max(diag K)`` (a duplicate, or a direction already explained to
    rounding) adds none.  This is incomplete Cholesky with the pivots
    imposed, :func:`sklearn_dof.partial_cholesky`.

    With ``order = sklearn_dof.uniform_columns(n, p, seed)`` these are the
    landmarks ``DoFNystroem(sampling="uniform", random_state=seed)`` uses.

    Returns
    -------
    factor : Bunch
        ``G`` (n, r), ``pivots`` (the r columns that added rank, in order:
        ``G[pivots]`` is lower triangular) and ``rank`` (p_max + 1,), the
        rank after ``p`` columns.
    """
    order = np.asarray(order, dtype=np.intp)
    G, rank = partial_cholesky(np.asarray(K, dtype=np.float64), order, rtol=rtol)
    return Bunch(G=G, pivots=order[np.diff(rank) > 0], rank=rank)


def uniform_factor(K, n_columns, random_state):
    """:func:`ordered_factor` on ``uniform_columns(n, n_columns, random_state)``."""
    order = uniform_columns(K.shape[0], n_columns, random_state=random_state)
    return ordered_factor(K, order)


def pivoted_factor(K, n_columns):
    """:func:`sklearn_dof.pivoted_cholesky` as a factor like :func:`ordered_factor`.

    Greedy pivoting stops once the residual is rounding noise: past that
    every further column adds no rank.
    """
    pivots, G = pivoted_cholesky(K, n_columns)
    p_max = min(n_columns, K.shape[0])
    rank = np.minimum(np.arange(p_max + 1), pivots.size)
    return Bunch(G=G, pivots=pivots, rank=rank)


def factor_rows(factor, K_new_pivots):
    """Rows of the factor at new points, from their kernel values on the pivots.

    The new points are extra rows of the same incomplete Cholesky
    (never pivots), so ``G_new = K(new, P) G[P]^-T`` with ``G[P]`` lower
    triangular, and ``G_new[:, :k]`` belongs to the prefix of ``k`` columns.

    Parameters
    ----------
    factor : Bunch
        From :func:`ordered_factor` or :func:`pivoted_factor`.
    K_new_pivots : ndarray of shape (m, r)
        ``K(new, factor.pivots)``.
    """
    lower = factor.G[factor.pivots]
    return linalg.solve_triangular(lower, K_new_pivots.T, lower=True).T


class PrefixRidge:
    """Ridge on every column prefix ``G[:, :k]`` of a factor, from one QR.

    As in :func:`_common.prefix_path`: with ``[G; sqrt(alpha) I] = Q R``, the
    top block ``Q_1`` satisfies ``Q_1[:, :k] Q_1[:, :k]^T = S_k``, the smoother
    ``L_k (L_k + alpha I)^-1`` of the prefix, so the fitted values of all
    prefixes are cumulative sums.  This class adds the expected error over
    the noise, ``||(I - S_k) f||^2 / n + sigma^2 tr(S_k^2) / n`` (with
    ``tr(S_k^2) = sum_{i, j < k} (Q_1^T Q_1)_ij^2``), and predictions at new
    points: the ridge weights of prefix ``k`` are ``R_kk^-1 (Q^T [y; 0])[:k]``
    and ``R`` is triangular, so ``G_new R^-1`` gives them all at once.
    """

    def __init__(self, G, alpha):
        n, r = G.shape
        augmented = np.vstack([G, math.sqrt(alpha) * np.eye(r)])
        Q, self.R = linalg.qr(augmented, mode="economic")
        self.Q1 = Q[:n]
        self.n_samples, self.rank = n, r

    def _cumulative(self, v):
        """Fitted values ``S_k v`` of every prefix, shape (n, r + 1)."""
        fitted = np.cumsum(self.Q1 * (self.Q1.T @ v), axis=1)
        return np.hstack([np.zeros((self.n_samples, 1)), fitted])

    def expected_errors(self, f, noise=NOISE):
        """Expected in-sample error of every prefix ``k = 0..r``."""
        bias = ((self._cumulative(f) - f[:, None]) ** 2).mean(axis=0)
        gram = (self.Q1.T @ self.Q1) ** 2
        added = 2 * np.triu(gram, 1).sum(axis=0) + np.diag(gram)
        trace = np.concatenate([[0.0], np.cumsum(added)])
        return bias + noise**2 * trace / self.n_samples

    def predictions(self, y, G_new):
        """Predictions at new points of every prefix, shape (m, r + 1)."""
        weights = linalg.solve_triangular(self.R, G_new.T, trans="T").T
        pred = np.cumsum(weights * (self.Q1.T @ y), axis=1)
        return np.hstack([np.zeros((G_new.shape[0], 1)), pred])


def by_columns(values_by_rank, rank):
    """Values indexed by rank ``r`` re-indexed by the number of columns ``p``."""
    return np.asarray(values_by_rank)[np.asarray(rank)]


def sufficient_rank(ratio_curve, tol=TOL):
    """Smallest ``p >= 1`` from which ``ratio_curve[p] <= 1 + tol`` for good.

    ``ratio_curve`` is indexed by the number of columns (entry 0 is no
    column).  :func:`_common.smallest_sufficient_rank` on ``p = 1..p_max``:
    None when even the last ``p`` is not sufficient.
    """
    ratio_curve = np.asarray(ratio_curve)
    return smallest_sufficient_rank(
        np.arange(1, ratio_curve.size), ratio_curve[1:], tol
    )


# ---------------------------------------------------------------------------
# Real data (Figure 3)

# Figure 3 of the paper uses pumadyn-32fh, -32nh and -32nm; only -32nm could be
# obtained, so the two Delve bank-32 variants of the same family stand in.
REAL_DATASETS = {
    "pumadyn32nm": "pumadyn-32nm (Delve; as in the paper)",
    "bank32nh": "bank-32nh (Delve; stand-in, not in the paper)",
    "bank32nm": "bank-32nm (Delve; stand-in, not in the paper)",
}


def standardize(X_train, X_test, y_train, y_test):
    """Inputs to zero mean and unit variance, targets to zero mean and unit
    variance, with the training statistics."""
    mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    y_mean, y_scale = y_train.mean(), y_train.std()
    return (
        (X_train - mean) / scale,
        (X_test - mean) / scale,
        (y_train - y_mean) / y_scale,
        (y_test - y_mean) / y_scale,
    )


def loo_errors(krr, y, lambdas):
    """Exact leave-one-out mean squared error of kernel ridge, per lambda.

    ``e_i = (y_i - z_i) / (1 - H_ii)`` with ``H = K (K + alpha I)^-1``, whose
    diagonal is the leverage scores: one eigendecomposition scores them all.
    """
    out = []
    coords = krr.eigvecs.T @ y
    squared = krr.eigvecs**2
    for lam in np.atleast_1d(lambdas):
        shrink = krr._shrinkage(krr.n_samples * lam)[:, 0]
        fitted = krr.eigvecs @ (shrink * coords)
        leverage = squared @ shrink
        out.append(np.mean(((y - fitted) / (1 - leverage)) ** 2))
    return np.array(out)


def loo_select(X, y, gammas, lambdas):
    """RBF bandwidth and penalty minimising the exact leave-one-out error.

    Returns
    -------
    selection : Bunch
        ``gamma``, ``lambda_``, ``loo`` (the grid of errors, gammas x
        lambdas), ``K`` and ``krr`` (:class:`_common.SpectralKRR`) at the
        chosen gamma, and whether the choice is at an edge of either grid.
    """
    best, grid = None, []
    for gamma in gammas:
        K = rbf_kernel(X, gamma=gamma)
        krr = SpectralKRR(K)
        errors = loo_errors(krr, y, lambdas)
        grid.append(errors)
        i = int(np.argmin(errors))
        if best is None or errors[i] < best[0]:
            best = (errors[i], gamma, lambdas[i], K, krr)
    grid = np.array(grid)
    gi, li = np.unravel_index(np.argmin(grid), grid.shape)
    return Bunch(
        gamma=float(best[1]),
        lambda_=float(best[2]),
        loo=grid,
        K=best[3],
        krr=best[4],
        gamma_at_edge=bool(gi in (0, len(gammas) - 1)),
        lambda_at_edge=bool(li in (0, len(lambdas) - 1)),
    )


# ---------------------------------------------------------------------------
# Book-keeping


class Timer:
    """Wall-clock seconds of named parts, printed as they finish."""

    def __init__(self):
        self.seconds = {}

    @contextlib.contextmanager
    def __call__(self, name):
        start = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - start
        print(f"[{name}: {self.seconds[name]:.1f}s]", flush=True)
