"""The synthetic problems of Bach (COLT 2013), Section 4.

Points live on the circle [0, 1).  The kernel and the target are both
expanded on the cosine basis ``2 cos(2 i pi x)``:

.. math::

    k(x, y) = \\sum_{i \\geq 1} 2 \\mu_i \\cos 2 i \\pi (x - y), \\qquad
    f(x) = \\sum_{i \\geq 1} 2 \\nu_i^{1/2} \\cos 2 i \\pi x,

so that ``mu_i`` are the eigenvalues of the kernel's integral operator and
``nu_i`` the squared coefficients of the target.  Their decays (polynomial or
exponential) fix how the degrees of freedom and the optimal penalty scale with
``n`` (the paper's Table 1).
"""

import math
from fractions import Fraction
from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

# Number of cosine terms used where no closed form exists; the neglected tail
# is below 1e-16 relative for every decay this module accepts except the
# slowest polynomial ones, which are documented as truncated.
_N_TERMS = 4096


def _bernoulli_numbers(m):
    """B_0..B_m as exact fractions (B_1 = -1/2), by the standard recurrence."""
    numbers = [Fraction(1)]
    for j in range(1, m + 1):
        acc = sum(math.comb(j + 1, k) * numbers[k] for k in range(j))
        numbers.append(-acc / (j + 1))
    return numbers


def _bernoulli_polynomial(m, t):
    """Bernoulli polynomial B_m(t) = sum_k binom(m, k) B_k t^(m - k).

    The coefficients are formed exactly and rounded once, since the
    polynomial is evaluated where its terms cancel.
    """
    coefs = [float(math.comb(m, k) * b) for k, b in enumerate(_bernoulli_numbers(m))]
    t = np.asarray(t, dtype=np.float64)
    out = np.zeros_like(t)
    for c in coefs:  # Horner, highest power first
        out = out * t + c
    return out


def _cosine_series(t, m):
    """sum_{i>=1} 2 cos(2 pi i t) / i^m for an even integer m >= 2.

    Closed form through the Bernoulli polynomial (for 0 <= {t} < 1)::

        sum_i 2 cos(2 pi i t) / i^(2s) = (-1)^(s+1) (2 pi)^(2s) / (2s)! B_2s({t})

    For large m the polynomial's coefficients cancel down to about 1e-11
    absolute error, which would hide the eigenvalues below that level that
    the paper's beta = 8 experiment is about; the series itself then needs
    only a few terms to reach 1e-17, so it is summed directly instead.
    """
    n_terms = math.ceil((2e17 / (m - 1)) ** (1.0 / (m - 1)))
    if n_terms <= 256:
        return _truncated_series(t, np.arange(1, n_terms + 1.0) ** (-float(m)))
    s = m // 2
    frac = np.mod(t, 1.0)
    scale = (-1) ** (s + 1) * (2 * math.pi) ** m / math.factorial(m)
    return scale * _bernoulli_polynomial(m, frac)


def _truncated_series(t, coefs):
    """sum_{i>=1} 2 coefs[i-1] cos(2 pi i t) by Clenshaw's recurrence.

    With u = cos(2 pi t), cos(2 pi i t) = T_i(u) (Chebyshev), and the backward
    recurrence b_i = c_i + 2 u b_{i+1} - b_{i+2} sums the smallest terms first
    while holding two arrays instead of one per term.
    """
    u = np.cos(2 * math.pi * np.asarray(t, dtype=np.float64))
    b1 = np.zeros_like(u)
    b2 = np.zeros_like(u)
    for c in coefs[::-1]:
        b1, b2 = c + 2 * u * b1 - b2, b1
    # b1 now holds b_1 and b2 holds b_2: sum_{i>=1} c_i T_i(u) = u b_1 - b_2.
    return 2 * (u * b1 - b2)


@validate_params(
    {
        "x": ["array-like"],
        "y": ["array-like", None],
        "beta": [Interval(Real, 0.5, None, closed="neither"), None],
        "rho": [Interval(Real, 0, None, closed="neither"), None],
    },
    prefer_skip_nested_validation=True,
)
def periodic_spline_kernel(x, y=None, *, beta=None, rho=None):
    """Periodic kernel on [0, 1) with prescribed eigenvalue decay.

    ``k(x, y) = sum_{i>=1} 2 mu_i cos(2 i pi (x - y))`` with either
    ``mu_i = i^(-2 beta)`` (periodic spline of order ``beta``; computed in
    closed form with the Bernoulli polynomial ``B_{2 beta}`` when ``beta`` is
    an integer) or ``mu_i = exp(-rho i)`` (closed form as a geometric series).
    Exactly one of ``beta`` and ``rho`` must be given.

    Parameters
    ----------
    x : array-like of shape (n,) or (n, 1)
        Points on the circle [0, 1).
    y : array-like of shape (m,) or (m, 1), default=None
        Second set of points; ``x`` when None.
    beta : float > 1/2, default=None
        Polynomial decay ``mu_i = i^(-2 beta)``.
    rho : float > 0, default=None
        Exponential decay ``mu_i = exp(-rho i)``.

    Returns
    -------
    K : ndarray of shape (n, m)
        Kernel matrix, to be used with ``kernel="precomputed"``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof.datasets import periodic_spline_kernel
    >>> K = periodic_spline_kernel(np.array([0.0, 0.5]), beta=1)
    >>> np.round(K, 4)  # 2 sum 1/i^2 = pi^2/3 on the diagonal
    array([[ 3.2899, -1.6449],
           [-1.6449,  3.2899]])
    """
    if (beta is None) == (rho is None):
        raise ValueError("Exactly one of 'beta' and 'rho' must be given.")
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = x if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
    t = np.subtract.outer(x, y)
    if rho is not None:
        q = math.exp(-rho)
        c = np.cos(2 * math.pi * t)
        return 2 * (q * c - q * q) / (1 - 2 * q * c + q * q)
    if float(beta).is_integer():
        return _cosine_series(t, int(2 * beta))
    coefs = np.arange(1, _N_TERMS + 1, dtype=np.float64) ** (-2.0 * beta)
    return _truncated_series(t, coefs)


def _target(x, delta, kappa):
    """f(x) = sum_i 2 nu_i^(1/2) cos(2 i pi x)."""
    if delta is not None:
        # nu_i^(1/2) = i^(-delta)
        if float(delta).is_integer() and int(delta) % 2 == 0:
            return _cosine_series(x, int(delta))
        coefs = np.arange(1, _N_TERMS + 1, dtype=np.float64) ** (-float(delta))
        return _truncated_series(x, coefs)
    coefs = np.exp(-0.5 * kappa * np.arange(1, _N_TERMS + 1))
    return _truncated_series(x, coefs)


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "beta": [Interval(Real, 0.5, None, closed="neither"), None],
        "rho": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0.5, None, closed="neither"), None],
        "kappa": [Interval(Real, 0, None, closed="neither"), None],
        "design": [StrOptions({"grid", "uniform"})],
        "noise": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_periodic_spline(
    n_samples=400,
    *,
    beta=1,
    rho=None,
    delta=8,
    kappa=None,
    design="uniform",
    noise=1.0,
    random_state=None,
):
    """Generate one of the paper's periodic regression problems.

    Inputs ``x`` are a regular grid ``i / n`` or uniform draws on [0, 1);
    the response is ``y = f(x) + noise * eps`` with standard normal ``eps`` and

    .. math:: f(x) = \\sum_{i \\geq 1} 2 \\nu_i^{1/2} \\cos 2 i \\pi x,

    with ``nu_i = i^(-2 delta)`` or ``nu_i = exp(-kappa i)``.  The kernel
    matrix uses ``mu_i = i^(-2 beta)`` or ``mu_i = exp(-rho i)``.  In the
    paper's Figure 2, ``delta = 8`` and ``beta`` is 1, 4 or 8.  When the
    decay pair is given by ``beta`` and ``delta`` set ``rho``/``kappa`` to
    None (and the reverse).

    Parameters
    ----------
    n_samples : int, default=400
        Number of points ``n``.
    beta, rho : float, default=(1, None)
        Kernel eigenvalue decay, exactly one not None.
    delta, kappa : float, default=(8, None)
        Target coefficient decay, exactly one not None.
    design : {"uniform", "grid"}, default="uniform"
        Random points, or the grid ``i / n`` (then every point has the same
        leverage score and ``d_max = d_eff``).
    noise : float, default=1.0
        Standard deviation ``sigma`` of the Gaussian noise.
    random_state : int, RandomState instance or None, default=None
        Seed for the design and the noise.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``X`` (n, 1) inputs, ``y`` (n,) noisy responses, ``f`` (n,) noiseless
        target values, ``K`` (n, n) kernel matrix, and ``kernel_params``, the
        dict to pass with ``kernel=periodic_spline_kernel``.

    Examples
    --------
    >>> from sklearn_dof.datasets import make_periodic_spline
    >>> data = make_periodic_spline(100, beta=2, delta=4, random_state=0)
    >>> data.X.shape, data.y.shape, data.K.shape
    ((100, 1), (100,), (100, 100))
    """
    if (beta is None) == (rho is None):
        raise ValueError("Exactly one of 'beta' and 'rho' must be given.")
    if (delta is None) == (kappa is None):
        raise ValueError("Exactly one of 'delta' and 'kappa' must be given.")
    rng = check_random_state(random_state)
    if design == "grid":
        x = np.arange(n_samples) / n_samples
    else:
        x = rng.uniform(size=n_samples)
    f = _target(x, delta, kappa)
    y = f + noise * rng.standard_normal(n_samples)
    kernel_params = {"beta": beta} if beta is not None else {"rho": rho}
    K = periodic_spline_kernel(x, **kernel_params)
    return Bunch(X=x[:, None], y=y, f=f, K=K, kernel_params=kernel_params)
