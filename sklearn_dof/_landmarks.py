"""Landmark selection: one pure step from the data to the landmarks.

:func:`select_landmarks` applies a sampling rule at a fixed rank or at the
automatic rank of the doubling estimate and returns everything the
transformer stores and the estimators consume, as one
:class:`LandmarkSelection`: nothing is left on an object for later.
"""

from typing import NamedTuple

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels

from ._estimate import _estimate_from_access
from ._rank import auto_rank
from ._sampling import uniform_columns


class LandmarkSelection(NamedTuple):
    """The result of :func:`select_landmarks`.

    Attributes
    ----------
    landmarks : ndarray
        Row indices of the landmarks (1-D), or landmark points that are not
        training rows (2-D, from a selector).
    gram : ndarray of shape (p, p)
        The landmark block ``K(I, I)``.
    estimate : tuple or None
        ``(d_max, d_eff, d_ave, n_columns)`` of the doubling estimate
        (automatic rank only).
    factor : PartialCholesky or None
        The partial Cholesky factor of the rows grown on the way, when the
        rule needed one; its first pivots are the landmarks (rows only).
    """

    landmarks: np.ndarray
    gram: np.ndarray
    estimate: tuple | None
    factor: object | None

    @property
    def points(self):
        """Whether the landmarks are points rather than row indices."""
        return self.landmarks.ndim == 2


def select_landmarks(access, X, rule, n_components, alpha, tol, random_state, kernel):
    """Landmarks of ``rule`` at rank ``n_components`` (an int or ``"auto"``).

    With ``"auto"`` the doubling estimate grows the columns of the rule
    itself (uniform ones for a selector, whose picks need not be nested) and
    stops on the degrees of freedom the rank is read from
    (``rule.rank_statistic``); the rank is :func:`~sklearn_dof.auto_rank` of
    the estimate, and the landmarks are a prefix of the estimate's pivots,
    so nothing is recomputed.

    Parameters
    ----------
    access : KernelColumns
        The data and the kernel (or its Dask counterpart).
    X : array
        The validated data, passed to a selector.
    rule : SamplingRule
        From :func:`~sklearn_dof._samplers.resolve_sampling`.
    n_components : int or "auto"
        An int already clipped to ``n_samples``.
    alpha, tol, random_state
        The penalty, the estimate's tolerance and the rule's seed.
    kernel : str or callable
        The kernel as the estimator was given it (``access.params`` are its
        keyword arguments), for the block of landmark points.

    Returns
    -------
    selection : LandmarkSelection
    """
    n_samples = access.n_samples
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    chol = None
    estimate = None
    if n_components == "auto":
        estimate_rule = rule.estimate_rule()
        dof, chol, grow = _estimate_from_access(
            access,
            alpha,
            None,
            tol,
            random_state,
            estimate_rule,
            certify_d_eff=False,
            bounds=False,
            statistic=estimate_rule.rank_statistic,
        )
        estimate = (dof.d_max, dof.d_eff, dof.d_ave, dof.n_columns)
        if estimate_rule.rank_statistic is None:  # given landmarks: all of them
            n_components = len(chol.pivots)
        else:
            n_components = auto_rank(
                dof.d_max, estimate_rule.name, n_samples, d_eff=dof.d_eff
            )
        if hasattr(rule, "select"):
            landmarks = rule.select(X, n_components, random_state, precomputed)
        elif grow.order is not None:
            # A sequence fixed in advance: the landmarks are its first
            # n_components entries, with or without the estimate's factor.
            landmarks = grow.order[:n_components].copy()
        else:
            # Every rule's pivots are a prefix of one sequence.
            if len(chol.pivots) < n_components:
                grow(n_components)
            landmarks = np.asarray(chol.pivots[:n_components], dtype=np.intp)
    elif hasattr(rule, "select"):
        landmarks = rule.select(X, n_components, random_state, precomputed)
    else:
        landmarks, chol = rule.fixed_rank_landmarks(
            access, n_components, random_state, alpha
        )
    if landmarks.shape[0] == 0:
        # A kernel that vanishes on the data leaves the residual-driven
        # rules nothing to pivot on; one landmark gives the (zero) features
        # the estimators then fit as an intercept.
        landmarks = uniform_columns(n_samples, 1, random_state)
    if landmarks.ndim == 2:
        gram = pairwise_kernels(
            landmarks, metric=kernel, filter_params=True, **access.params
        )
        gram = np.asarray(gram, dtype=access.dtype)
    else:
        gram = access.landmark_gram(landmarks)
    return LandmarkSelection(landmarks, gram, estimate, chol)
