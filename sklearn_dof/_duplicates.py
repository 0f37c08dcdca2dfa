r"""Exact kernel ridge on the distinct rows of data with repeated rows.

Rows with equal features have equal kernel columns, so for the squared loss
a group ``g`` of such rows weighs in the objective as one row of weight
``W_g = sum_{j in g} w_j`` and target ``ybar_g``, their weighted mean:
``sum_{j in g} w_j (y_j - f)^2 = W_g (ybar_g - f)^2 + const``.  Kernel ridge
on the ``m`` distinct rows with those weights is therefore kernel ridge on
all ``n`` rows, at ``O(m^3)`` instead of ``O(n^3)``.

Its leave-one-out error is not the grouped problem's: leaving one row out
keeps the rest of its group.  The fit is linear in the targets, and the
fitted value of group ``g`` moves with ``y_j`` by ``h_g w_j / W_g``, ``h_g``
the grouped problem's leverage, so row ``j``'s exact leave-one-out residual
is

.. math:: e_j = \frac{y_j - f_g}{1 - h_g w_j / W_g},

with ``y_j - f_g = (y_j - ybar_g) + (ybar_g - f_g)``: the rows' own
leave-one-out error, read from the grouped fit.
"""

from typing import NamedTuple

import numpy as np


class RowGroups(NamedTuple):
    """Training rows grouped by equal features.

    Attributes
    ----------
    first : ndarray of shape (n_groups,)
        The first row of each group, in the order of the rows.
    inverse : ndarray of shape (n_samples,)
        Each row's group.
    weight : ndarray of shape (n_groups,)
        Each group's total sample weight ``W_g``.
    mean : ndarray of shape (n_groups, n_targets)
        Each group's weighted mean target ``ybar_g``.
    row_weight : ndarray of shape (n_samples,)
        The rows' sample weights ``w_j``.
    y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The rows' targets, as given.
    """

    first: np.ndarray
    inverse: np.ndarray
    weight: np.ndarray
    mean: np.ndarray
    row_weight: np.ndarray
    y: np.ndarray


def group_rows(X, y, sample_weight=None):
    """The :class:`RowGroups` of ``X``'s equal rows, or None where every
    row is distinct.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Dense features.
    y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Targets.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights (None: ones).

    Returns
    -------
    RowGroups or None
    """
    n_samples = X.shape[0]
    _, first, inverse = np.unique(
        np.ascontiguousarray(X), axis=0, return_index=True, return_inverse=True
    )
    if first.shape[0] == n_samples:
        return None
    # Groups in the order of their first rows: the rows' order, not the
    # sort's, decides which one stands for a group.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    first, inverse = first[order], rank[inverse.reshape(-1)]
    row_weight = (
        np.ones(n_samples)
        if sample_weight is None
        else np.asarray(sample_weight, dtype=np.float64)
    )
    weight = np.bincount(inverse, weights=row_weight, minlength=first.shape[0])
    Y = np.asarray(y, dtype=np.float64).reshape(n_samples, -1)
    sums = np.zeros((first.shape[0], Y.shape[1]))
    np.add.at(sums, inverse, row_weight[:, None] * Y)
    # A group of zero weight takes no part in the fit: its mean is 0.
    mean = sums / np.where(weight > 0, weight, 1.0)[:, None]
    return RowGroups(first, inverse, weight, mean, row_weight, y)


def grouped_targets(groups, y):
    """The groups' mean targets, shaped as ``y`` is (1-D for one target)."""
    return groups.mean[:, 0] if np.ndim(y) == 1 else groups.mean


def row_loo_residuals(groups, residuals, complement, landmarks):
    """The rows' exact leave-one-out residuals from a grouped fit's.

    Parameters
    ----------
    groups : RowGroups
        The groups the fit was made on.
    residuals : ndarray of shape (n_groups, n_targets)
        The grouped fit's leave-one-out residuals
        ``(ybar_g - f_g) / (1 - h_g)``, in the order of ``landmarks``.
    complement : ndarray of shape (n_groups,)
        ``1 - h_g``, in the same order.
    landmarks : ndarray of shape (n_groups,)
        The group of each entry of ``residuals``.

    Returns
    -------
    ndarray of shape (n_samples, n_targets)
        ``e_j = (y_j - f_g) / (1 - h_g w_j / W_g)`` for row ``j`` of group
        ``g``.
    """
    n_groups = groups.first.shape[0]
    fit_residual = np.empty((n_groups, residuals.shape[1]))
    fit_residual[landmarks] = residuals * complement[:, None]
    slack = np.empty(n_groups)
    slack[landmarks] = complement
    g = groups.inverse
    Y = np.asarray(groups.y, dtype=np.float64).reshape(g.shape[0], -1)
    numerator = Y - groups.mean[g] + fit_residual[g]
    # 1 - h_g w_j / W_g, written so that a group of one row gets 1 - h_g
    # as given, not 1 - (1 - (1 - h_g)) rounded.
    rest = (groups.weight[g] - groups.row_weight) / groups.weight[g]
    denominator = slack[g] + (1.0 - slack[g]) * rest
    return numerator / denominator[:, None]
