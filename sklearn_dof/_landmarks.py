"""Landmark selection: one pure step from the data to the landmarks.

:func:`select_landmarks` applies a sampling rule at a fixed rank or at the
automatic rank of the doubling estimate and returns everything the
transformer stores and the estimators consume, as one
:class:`LandmarkSelection`: nothing is left on an object for later.
"""

from typing import NamedTuple

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels

from . import _dask
from ._estimate import _EXACT_FRACTION, _certified_estimate, _estimate_from_access
from ._progress import SILENT
from ._rank import auto_rank
from ._sampling import uniform_columns

# Memory of the factor that the certified rank grows (float64, rows x
# columns): beyond it the certificate reads a uniform subsample of the rows
# (see select_landmarks).
FACTOR_BUDGET_BYTES = 2**30
# Memory of the kernel matrix K (float64, n x n) up to which a certified rank
# may grow past DEFAULT_MAX_COMPONENTS and end, past half of the rows, in
# exact kernel ridge, when the estimator fits it and max_components is left
# to the budget (None): the factor's own budget, 11,585 rows.
EXACT_BUDGET_BYTES = FACTOR_BUDGET_BYTES

#: Default cap of an automatic rank: ``p x p`` float64 matrices of 128 MiB,
#: of which a fit holds a few at once.
DEFAULT_MAX_COMPONENTS = 4096


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
    loss : float or None
        The certificate's estimated relative excess loss at the rank chosen
        (certified automatic rank only).
    requested : int or None
        The rank the certificate asks for when ``max_components`` stopped it
        short of ``loss_tol``.
    alpha : float or None
        The penalty the rank was certified for, when a grid was given.
    """

    landmarks: np.ndarray
    gram: np.ndarray
    estimate: tuple | None
    factor: object | None
    loss: float | None = None
    requested: int | None = None
    alpha: float | None = None

    @property
    def points(self):
        """Whether the landmarks are points rather than row indices."""
        return self.landmarks.ndim == 2


def select_landmarks(
    access,
    X,
    rule,
    n_components,
    alpha,
    tol,
    random_state,
    kernel,
    *,
    response=None,
    center=True,
    loss_tol=0.01,
    max_components=None,
    penalties=None,
    objective="squared",
    every_row_exact=False,
    progress=SILENT,
):
    """Landmarks of ``rule`` at rank ``n_components`` (an int, ``"auto"`` or
    ``"dof"``).

    ``"auto"`` with a ``response`` grows the rule's nested landmarks by
    doubling until the :class:`~sklearn_dof._certificate.LossCertificate`
    of the factor certifies a rank whose estimated relative excess loss is
    at most ``loss_tol``, and takes the smallest such rank; ``"dof"`` (and
    ``"auto"`` without a response, on a Dask array, or for given rows) grows
    them until the degrees of freedom the rule reads (``rule.rank_statistic``)
    have converged and takes :func:`~sklearn_dof.auto_rank` of the estimate.
    Either way the landmarks are a prefix of the grown sequence, so nothing
    is recomputed, and the rank is at most ``max_components``.

    Parameters
    ----------
    access : KernelColumns
        The data and the kernel (or its Dask counterpart).
    X : array
        The validated data, passed to a selector.
    rule : SamplingRule
        From :func:`~sklearn_dof._samplers.resolve_sampling`.
    n_components : int, "auto" or "dof"
        An int already clipped to ``n_samples``.
    alpha, tol, random_state
        The penalty, the d.o.f. estimate's tolerance and the rule's seed.
    kernel : str or callable
        The kernel as the estimator was given it (``access.params`` are its
        keyword arguments), for the block of landmark points.
    response : ndarray of shape (n_samples, n_targets), default=None
        Targets of the ridge the landmarks serve (float64).
    center : bool, default=True
        Whether that ridge fits an intercept.
    loss_tol : float, default=0.01
        Relative excess loss the certified rank allows.
    max_components : int, default=None
        Cap of an automatic rank (None: :data:`DEFAULT_MAX_COMPONENTS`).
    penalties : ndarray, default=None
        A grid of penalties: the certified rank is for the one with the
        smallest leave-one-out error (cross-validation).
    objective : {"squared", "logistic"}, default="squared"
        The model the certified rank is for: ridge regression on
        ``response``, or binary logistic regression on the class indices
        ``response`` (shape (n_samples,)).
    every_row_exact : bool, default=False
        Whether the caller fits exact kernel ridge from ``K`` itself when
        every row is a landmark: then a certified rank whose next round
        would be every row stops there, and its landmarks are all the rows
        with no factor (which would cost several times that fit to grow).
        With ``max_components=None`` and ``K`` within
        :data:`EXACT_BUDGET_BYTES`, the rank is capped at ``n`` instead of
        :data:`DEFAULT_MAX_COMPONENTS`: past half of the rows, exact.
    progress : Progress, default=SILENT
        Where the rounds of an automatic rank report
        (:class:`~sklearn_dof._progress.Progress`).

    Returns
    -------
    selection : LandmarkSelection
    """
    n_samples = access.n_samples
    max_rank = min(n_samples, max_components or DEFAULT_MAX_COMPONENTS)
    if (
        every_row_exact
        and max_components is None
        and 8 * n_samples**2 <= EXACT_BUDGET_BYTES
    ):
        # Caps from memory: where the caller fits exact kernel ridge and K
        # fits its budget, the rounds may go past the default cap, and past
        # half of the rows they end in the exact fit.
        max_rank = n_samples
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    chol = None
    estimate = None
    loss = requested = certified_alpha = None
    if n_components == "auto":
        certified = (
            response is not None
            and rule.estimate_rule().rank_statistic is not None
            and not isinstance(access, _dask.DaskKernelColumns)
        )
        n_components = "certified" if certified else "dof"
    if n_components == "certified":
        selected = _certified_landmarks(
            access,
            X,
            rule,
            alpha,
            random_state,
            precomputed,
            response,
            center,
            loss_tol,
            max_rank,
            penalties,
            objective,
            every_row_exact,
            progress,
        )
        landmarks, chol, estimate, loss, requested, certified_alpha = selected
    elif n_components == "dof":
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
            max_rank=max_rank,
        )
        estimate = (dof.d_max, dof.d_eff, dof.d_ave, dof.n_columns)
        if estimate_rule.rank_statistic is None:  # given landmarks: all of them
            n_components = len(chol.pivots)
        else:
            n_components = auto_rank(
                dof.d_max, estimate_rule.name, n_samples, d_eff=dof.d_eff
            )
            if n_components > max_rank:
                requested, n_components = n_components, max_rank
            progress(
                f"degrees of freedom over {dof.n_columns} columns: "
                f"d_max {dof.d_max:.1f}, d_eff {dof.d_eff:.1f}; rank {n_components}"
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
    return LandmarkSelection(
        landmarks, gram, estimate, chol, loss, requested, certified_alpha
    )


def certificate_rows(n_samples, max_rank, random_state):
    """The rows a certified rank up to ``max_rank`` reads: None for all of
    them, else the sorted uniform subsample whose factor fits
    :data:`FACTOR_BUDGET_BYTES` (at least ``4 max_rank`` rows)."""
    max_rows = max(FACTOR_BUDGET_BYTES // (8 * max_rank), 4 * max_rank)
    if n_samples <= max_rows:
        return None
    return np.sort(uniform_columns(n_samples, max_rows, random_state))


def estimate_of(dof):
    """``(d_max, d_eff, d_ave, columns)`` of a :class:`DegreesOfFreedom`."""
    return (dof.d_max, dof.d_eff, dof.d_ave, dof.n_columns)


def _certified_landmarks(
    access,
    X,
    rule,
    alpha,
    random_state,
    precomputed,
    response,
    center,
    loss_tol,
    max_rank,
    penalties,
    objective="squared",
    every_row_exact=False,
    progress=SILENT,
):
    """The certified automatic rank of :func:`select_landmarks`.

    The factor grown holds ``rows x max_rank`` numbers at most; beyond
    :data:`FACTOR_BUDGET_BYTES` the certificate is computed on a uniform
    subsample of the rows at the same ``lambda = alpha / n`` (the rank a
    penalty needs follows ``lambda``, not ``n``), and the landmarks are
    subsample rows.  Returns ``(landmarks, factor or None, estimate, loss,
    requested rank or None, penalty certified or None)``.
    """
    n_samples = access.n_samples
    rows = certificate_rows(n_samples, max_rank, random_state)
    scale = 1.0
    if rows is not None:
        progress(f"the rank is certified on {len(rows)} of the {n_samples} rows")
        access = access.row_subset(rows)
        scale = len(rows) / n_samples
        response = response[rows]
    dof, chol, grow, certificate, alpha = _certified_estimate(
        access,
        alpha * scale,
        loss_tol,
        random_state,
        rule.estimate_rule(),
        response,
        center,
        max_rank,
        None if penalties is None else np.asarray(penalties) * scale,
        objective,
        every_row_exact and rows is None,
        progress,
    )
    certified_alpha = None if penalties is None else alpha / scale
    if certificate.exact and certificate.rank > chol.rank:
        # Stopped before the round to every row (every_row_exact): all the
        # rows, in the order the rule would have pivoted them where it is
        # fixed in advance (the landmarks of the complete factor), else its
        # pivots first.
        order = grow.order
        if order is None or len(order) < n_samples:
            pivots = np.asarray(chol.pivots, dtype=np.intp)
            rest = np.setdiff1d(np.arange(n_samples), pivots, assume_unique=True)
            order = np.concatenate([pivots, rest])
        landmarks = np.asarray(order[:n_samples], dtype=np.intp).copy()
        return landmarks, None, estimate_of(dof), 0.0, None, certified_alpha
    rank = certificate.certified_rank(loss_tol)
    if rank is not None and not certificate.resolved:
        # The cap's round on an unresolved factor: no rank below it is
        # vouched for (see _estimate._certified_estimate).
        rank = certificate.rank
    requested = None
    if rank is not None and certificate.complete and rank > _EXACT_FRACTION * n_samples:
        # Near n, exact: the rows that remain cost little more.
        rank = certificate.rank
    if rank is None:
        rank = certificate.rank
        requested = certificate.requested_rank(loss_tol, n_samples)
    loss = float(certificate.loss(rank))
    estimate = estimate_of(dof)
    columns = np.asarray(chol.column_pivots[:rank], dtype=np.intp)
    if hasattr(rule, "select"):
        landmarks = rule.select(X, max(rank, 1), random_state, precomputed)
        return landmarks, None, estimate, loss, requested, certified_alpha
    if (columns < 0).any():  # columns mixing pivots: their prefix of pivots
        columns = np.asarray(chol.pivots[:rank], dtype=np.intp)
    if rows is not None:
        return rows[columns], None, estimate, loss, requested, certified_alpha
    return columns, chol, estimate, loss, requested, certified_alpha
