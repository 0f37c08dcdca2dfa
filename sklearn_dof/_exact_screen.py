"""Whether exact kernel ridge at smaller penalties can beat a low-rank fit.

Where a low-rank fit's kernel matrix fits the exact budget,
:class:`~sklearn_dof.DoFKernelRidgeCV` checks exact kernel ridge at the
penalties below the low-rank fit's (a rank grown on a factor of the rows
prefers too large a penalty).  Each exact leave-one-out score costs a
Cholesky factorisation and the inverse of its factor, ``2 n^3 / 3`` flops,
and where the low-rank fit stands the check is most of the fit's cost.

The screen factors ``K + alpha I`` once, at the penalty just below the
low-rank fit's, and reads the leave-one-out errors of a uniform sample of
rows, and their slope in the penalty on fewer
(:func:`~sklearn_dof._ridge_solve.exact_loo_sample`), for about the cost of
the factorisation.  It rules the exact fits out where, paired row by row
with the low-rank fit's own leave-one-out errors, the sample shows the
exact error above ``1 - loss_tol`` times the low-rank one by
:data:`VALUE_Z` standard errors, and rising as the penalty falls (below
the first penalty, under the search's assumption that the scores are
unimodal along the grid) by :data:`SLOPE_Z`.  Anything else leaves the
decision to the exact fits (the screen's factor then finishes the exact
fit at its penalty, which needs no factor of its own), and so does a
low-rank fit that explains less than ``loss_tol`` of the targets' spread
(:func:`explains_targets`): its penalty sits on the plateau where every fit
predicts the mean, whose slope says nothing of the valley below it.
"""

import math

import numpy as np

#: Standard errors by which the sampled exact error must exceed the low-rank
#: fit's (less ``loss_tol``) for the screen to rule the exact fits out.
VALUE_Z = 3.0
#: Standard errors by which the sampled slope must show the exact error
#: rising as the penalty falls, where smaller penalties remain.
SLOPE_Z = 2.0
#: The fewest rows whose slope is read (all of them below), in
#: ``n^2`` flops each.
MIN_SLOPE_ROWS = 256


def sample_sizes(n_samples, lower=True):
    """``(rows, slope_rows)`` of :func:`~sklearn_dof._ridge_solve.exact_loo_sample`:
    a quarter of the rows (their block of the factor, inverted in a copy of
    ``rows^2`` entries) and a sixteenth for the slope (``n^3 / 16`` flops
    and ``n^2 / 16`` entries), each at least :data:`MIN_SLOPE_ROWS`; no
    slope where no smaller penalty remains (``lower`` false)."""
    rows = min(n_samples, max(n_samples // 4, 2 * MIN_SLOPE_ROWS))
    if not lower:
        return rows, 0
    return rows, min(rows, max(n_samples // 16, MIN_SLOPE_ROWS))


def explains_targets(reference_squares, y, sample_weight, loss_tol, centred=True):
    """Whether the low-rank fit's leave-one-out error (``reference_squares``,
    by row) is below ``1 - loss_tol`` times the weighted squared spread of
    the targets ``y`` (2-d) about their weighted mean (``centred``, a fit
    with an intercept), else about zero."""
    weights = np.ones(y.shape[0]) if sample_weight is None else sample_weight
    mean = weights @ y / np.sum(weights) if centred else 0.0
    spread = float(np.sum(weights[:, None] * (y - mean) ** 2))
    return float(np.sum(reference_squares)) < (1.0 - loss_tol) * spread


def _z_score(values):
    """The mean of ``values`` over its standard error (NaN where it has
    none)."""
    if values.shape[0] < 2:
        return math.nan
    spread = float(np.std(values, ddof=1))
    mean = float(np.mean(values))
    if not np.isfinite(spread) or spread == 0.0:
        return math.nan
    return mean / (spread / math.sqrt(values.shape[0]))


def rules_out(squares, reference_squares, slopes, loss_tol, sample_weight=None):
    """Whether the sampled exact fit rules out every exact fit at or below
    its penalty.

    Parameters
    ----------
    squares : ndarray of shape (m,)
        The exact fit's weighted squared leave-one-out errors on the sampled
        rows.
    reference_squares : ndarray of shape (m,)
        The low-rank fit's on the same rows.
    slopes : ndarray of shape (m_slope,)
        The derivatives of the last ``m_slope`` of ``squares`` in ``log
        alpha`` (empty where no smaller penalty remains).
    loss_tol : float
        The relative margin by which an exact fit must beat the low-rank
        one.
    sample_weight : ndarray of shape (m,), default=None
        The sampled rows' weights: rows of zero weight, whose errors are
        zero in both fits, are left out of the scores (they would only
        shrink them).

    Returns
    -------
    ruled_out : bool
    value_z, slope_z : float
        The standard scores of the excess error and of the slope (NaN where
        not read).
    """
    if sample_weight is not None:
        weighted = sample_weight > 0
        squares, reference_squares = squares[weighted], reference_squares[weighted]
        slopes = slopes[weighted[weighted.shape[0] - slopes.shape[0] :]]
    value_z = _z_score(squares - (1.0 - loss_tol) * reference_squares)
    slope_z = _z_score(slopes) if slopes.shape[0] else math.nan
    ruled_out = value_z > VALUE_Z and (slopes.shape[0] == 0 or slope_z < -SLOPE_Z)
    return bool(ruled_out), value_z, slope_z
