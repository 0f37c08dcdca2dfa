"""Rank rules: how many columns a Nystroem approximation needs.

Bach (2013, Theorem 1): with ``p`` columns drawn uniformly,

.. math::

    p \\geq \\left(\\frac{32\\, d_{max}}{\\delta} + 2\\right)
    \\log \\frac{n R^2}{\\delta \\lambda}

gives an expected in-sample prediction error at most ``(1 + 4 delta)`` times
that of exact kernel ridge regression, where ``R^2 >= k(x, x)`` and
``lambda = alpha / n``.  The theorem's constants are worst-case: in practice
(the paper's Figure 2) ``p`` close to ``d_max`` suffices, which is what the
paper's rule ``n_components="dof"`` uses (:func:`dof_rank`), with
constants set by experiment (doc/design/paper_rule.rst).
``n_components="auto"`` certifies a loss of test error instead
(:mod:`~sklearn_dof._certificate`).
"""

import math
import warnings
from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, validate_params

from ._samplers import SAMPLING_OPTIONS, SAMPLING_RULES
from ._validation import user_stacklevel

# The constants p = ceil(c * d) are the rules' (rank_factor and
# rank_statistic of sklearn_dof._samplers): the smallest c that keeps the
# seed-averaged in-sample error within 1% of exact kernel ridge on the
# paper's periodic spline problems, with margin, and for the d_eff samplers
# on clustered and real data too.  The calibration is in
# doc/design/paper_rule.rst (summed up in doc/paper_rule.rst);
# benchmarks/bench_auto_rank.py checks the ranks against their oracle.


@validate_params(
    {
        "d_max": [Interval(Real, 0, None, closed="left")],
        "sampling": [SAMPLING_OPTIONS],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "d_eff": [Interval(Real, 0, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def dof_rank(d_max, sampling="uniform", n_samples=None, *, d_eff=None):
    """Number of columns chosen by the paper's rule, ``n_components="dof"``.

    ``p = max(1, ceil(c * d))``, capped at ``n_samples``, where

    * uniform columns: ``d = d_max``, ``c = 2.75``;
    * greedy pivoted columns: ``d = d_max``, ``c = 1.5``;
    * ridge-leverage sampling: ``d = d_eff``, ``c = 5`` (independent draws
      miss an isolated point now and then, which costs its whole share of
      the error: the rule needs more margin than rpcholesky's);
    * randomly pivoted Cholesky: ``d = d_eff``, ``c = 3``.

    On the paper's periodic-spline problems this keeps the in-sample error
    of ``Ridge(alpha)`` on the features within 1% of exact kernel ridge on
    average over draws, at about twice the smallest sufficient rank (median);
    a single random draw can do worse.  The calibration of the constants is
    in doc/design/paper_rule.rst.

    Parameters
    ----------
    d_max : float
        (Estimated) maximal marginal degrees of freedom.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, default="uniform"
        Column selection rule.
    n_samples : int, default=None
        Cap on the rank.
    d_eff : float, default=None
        (Estimated) degrees of freedom ``tr K (K + alpha I)^-1``; required by
        the samplers whose rank follows it.

    Returns
    -------
    p : int

    Examples
    --------
    >>> from sklearn_dof import dof_rank
    >>> dof_rank(10.0), dof_rank(10.0, "pivoted"), dof_rank(10.0, n_samples=20)
    (28, 15, 20)
    >>> dof_rank(40.0, "rpcholesky", d_eff=5.0)
    15
    """
    rule = SAMPLING_RULES[sampling]
    if rule.rank_statistic == "d_eff":
        if d_eff is None:
            raise ValueError(
                f"dof_rank(sampling={sampling!r}) reads d_eff: pass d_eff=..."
            )
        d = d_eff
    else:
        d = d_max
    p = max(1, math.ceil(rule.rank_factor * d))
    if n_samples is not None:
        p = min(p, n_samples)
    return int(p)


def auto_rank(d_max, sampling="uniform", n_samples=None, *, d_eff=None):
    """Number of columns chosen by the paper's rule (deprecated name).

    .. deprecated:: 0.1
        ``auto_rank`` is deprecated in 0.1 and will be removed in 0.3; use
        :func:`dof_rank` instead, which takes the same arguments and
        returns the same rank.

    Parameters
    ----------
    d_max : float
        (Estimated) maximal marginal degrees of freedom.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, default="uniform"
        Column selection rule.
    n_samples : int, default=None
        Cap on the rank.
    d_eff : float, default=None
        (Estimated) degrees of freedom ``tr K (K + alpha I)^-1``; required by
        the samplers whose rank follows it.

    Returns
    -------
    p : int
        ``dof_rank(d_max, sampling, n_samples, d_eff=d_eff)``.
    """
    warnings.warn(
        "auto_rank is deprecated in 0.1 and will be removed in 0.3; use "
        "dof_rank instead.",
        FutureWarning,
        stacklevel=2,
    )
    return dof_rank(d_max, sampling, n_samples, d_eff=d_eff)


@validate_params(
    {
        "d_max": [Interval(Real, 0, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, None, closed="neither")],
        "kernel_bound": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def theoretical_rank(d_max, n_samples, alpha, *, delta=0.25, kernel_bound=1.0):
    """Rank of Bach's Theorem 1 for uniformly sampled columns.

    ``p = (32 d_max / delta + 2) log(n R^2 / (delta lambda))`` with
    ``lambda = alpha / n`` and ``R^2 = kernel_bound``, capped at ``n`` with a
    warning (the theorem then asks for more columns than there are points).

    Parameters
    ----------
    d_max : float
        Maximal marginal degrees of freedom.
    n_samples : int
        Number of training points ``n``.
    alpha : float
        Penalty on scikit-learn's scale, ``alpha = n * lambda``.
    delta : float, default=0.25
        Allowed relative excess, the error is at most ``(1 + 4 delta)`` times
        the exact one in expectation.
    kernel_bound : float, default=1.0
        ``R^2``, an upper bound on ``k(x, x)`` (1 for the RBF kernel).

    Returns
    -------
    p : int

    Examples
    --------
    >>> from sklearn_dof import theoretical_rank
    >>> theoretical_rank(5.0, 100_000, alpha=100.0)
    12717
    """
    lam = alpha / n_samples
    p = (32 * d_max / delta + 2) * math.log(n_samples * kernel_bound / (delta * lam))
    p = math.ceil(max(p, 1))
    if p > n_samples:
        warnings.warn(
            f"The theorem's rank {p} exceeds n_samples={n_samples}; capped at "
            "n_samples (no approximation left).",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        p = n_samples
    return p
