"""Degrees of freedom of kernel ridge regression, exact and estimated.

With ``alpha = n * lambda`` (scikit-learn's scale of the paper's penalty),
the ridge leverage scores and the three degrees of freedom of Bach (2013) are

.. math::

    l_i = [K (K + \\alpha I)^{-1}]_{ii}, \\quad
    d_{max} = n \\max_i l_i, \\quad
    d_{eff} = \\sum_i l_i = \\operatorname{tr} K (K + \\alpha I)^{-1}, \\quad
    d_{ave} = \\operatorname{tr} K^2 (K + \\alpha I)^{-2},

and ``d_ave <= d_eff <= d_max``.  ``d_ave`` drives the variance of kernel
ridge regression, ``d_max`` the number of uniformly sampled columns that a
Nystroem approximation needs to keep its prediction error.
"""

from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.utils._param_validation import Interval, validate_params

from . import _linalg, _tiles
from ._validation import (
    check_factor,
    check_penalty_resolution,
    check_spectrum,
    check_square_matrix,
)


class DegreesOfFreedom:
    """Leverage scores and degrees of freedom at one penalty.

    Returned by :func:`degrees_of_freedom` (exact) and
    :func:`estimate_degrees_of_freedom` (from sampled columns).

    Attributes
    ----------
    leverage_scores : ndarray of shape (n_samples,)
        ``l_i = [K (K + alpha I)^-1]_ii`` (exact, or the estimate).
    d_max : float
        Maximal marginal degrees of freedom ``n max_i l_i`` (for an estimate,
        ``n max_i lower_i``).
    d_eff : float
        Degrees of freedom ``sum_i l_i``.
    d_ave : float
        Averaged degrees of freedom ``tr K^2 (K + alpha I)^-2``.
    alpha : float
        Penalty on scikit-learn's scale, ``alpha = n * lambda``.
    lower, upper : ndarray of shape (n_samples,) or None
        Guaranteed bounds ``lower <= l <= upper`` (estimates only).
    n_columns : int or None
        Number of kernel columns the estimate used (estimates only).
    """

    def __init__(
        self, leverage_scores, d_ave, alpha, *, lower=None, upper=None, n_columns=None
    ):
        self.leverage_scores = leverage_scores
        n = leverage_scores.shape[0]
        # An estimate takes d_max from the lower bounds: a maximum picks the
        # point where the residual correction is largest, and the largest
        # Nystroem leverage score converges much faster (it is exact as soon
        # as the factor holds the point's neighbourhood).
        top = leverage_scores if lower is None else lower
        self.d_max = float(n * top.max(initial=0.0))
        self.d_eff = float(leverage_scores.sum())
        if lower is not None:
            # n max_i l_i >= sum_i l_i for the true scores; with very few
            # columns the lower bounds' maximum can fall below the estimated
            # sum, and the estimate keeps the order the definitions have.
            self.d_max = max(self.d_max, self.d_eff)
        self.d_ave = float(d_ave)
        self.alpha = float(alpha)
        self.lower = lower
        self.upper = upper
        self.n_columns = n_columns

    @property
    def n_samples(self):
        return self.leverage_scores.shape[0]

    def __repr__(self):
        extra = "" if self.n_columns is None else f", n_columns={self.n_columns}"
        return (
            f"DegreesOfFreedom(n_samples={self.n_samples}, alpha={self.alpha:.4g}, "
            f"d_max={self.d_max:.4g}, d_eff={self.d_eff:.4g}, "
            f"d_ave={self.d_ave:.4g}{extra})"
        )


@validate_params(
    {"K": ["array-like"], "alpha": [Interval(Real, 0, None, closed="neither")]},
    prefer_skip_nested_validation=True,
)
def degrees_of_freedom(K, alpha):
    """Exact leverage scores and degrees of freedom of a kernel matrix.

    One symmetric eigendecomposition ``K = U diag(s) U^T``, ``O(n^3)``: then
    ``l_i = sum_j U_ij^2 s_j / (s_j + alpha)`` and
    ``d_ave = sum_j s_j^2 / (s_j + alpha)^2``.  Meant for testing and small
    ``n``; see :func:`estimate_degrees_of_freedom` otherwise.

    Parameters
    ----------
    K : array-like of shape (n, n)
        Symmetric positive semi-definite kernel matrix.
    alpha : float > 0
        Ridge penalty on scikit-learn's scale, ``alpha = n * lambda`` where
        ``lambda`` is the paper's penalty.

    Returns
    -------
    dof : DegreesOfFreedom
        With ``leverage_scores``, ``d_max``, ``d_eff`` and ``d_ave``.

    See Also
    --------
    estimate_degrees_of_freedom : The same quantities from a few columns.

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import degrees_of_freedom
    >>> dof = degrees_of_freedom(np.diag([3.0, 1.0, 0.0]), alpha=1.0)
    >>> dof.leverage_scores
    array([0.75, 0.5 , 0.  ])
    >>> dof.d_eff, dof.d_max, dof.d_ave
    (1.25, 2.25, 0.8125)
    """
    K = check_square_matrix(K, "K")
    check_penalty_resolution(alpha, np.diag(K))
    eigvals, eigvecs = linalg.eigh(0.5 * (K + K.T))
    check_spectrum(eigvals, "K")
    shrink = _linalg.shrinkage(eigvals, alpha)
    leverage = (eigvecs**2) @ shrink
    return DegreesOfFreedom(leverage, (shrink**2).sum(), alpha)


def averaged_dof(chol, alpha, n, uniform):
    """Estimated ``d_ave`` from the spectrum of the factor."""
    if chol.rank == 0:
        spectrum = np.zeros(0)
    elif uniform:
        # Uniform columns: (n / p) eig K(I, I) estimates the top of eig K.
        G_I = chol.factor[np.asarray(chol.pivots, dtype=np.intp)].astype(np.float64)
        spectrum = (n / len(chol.pivots)) * linalg.eigvalsh(_tiles.gram(G_I))
    else:
        # Chosen columns: eig L <= eig K, a lower bound on d_ave.
        spectrum = linalg.eigvalsh(np.asarray(chol.gram()))
    return float((_linalg.shrinkage(spectrum, alpha) ** 2).sum())


def _lower_bounds(chol, alpha):
    """``diag L (L + alpha I)^-1`` alone, the lower bounds of the scores."""
    G = chol.factor
    if G.shape[1] == 0:
        return np.zeros(G.shape[0])
    return chol.quadratic_forms(chol.gram() + alpha * np.eye(G.shape[1]))


def landmark_row_dof(landmark_scores, spectrum, alpha, n_samples):
    """``(d_max, d_eff, d_ave)`` from the landmark rows alone, in ``O(p^3)``.

    ``landmark_scores`` are leverage scores of the landmark rows and
    ``spectrum`` estimated eigenvalues of ``K`` (see ``DoFNystroem.fit``): a
    fixed rank does not need the pass over all rows that the bounds cost.
    """
    shrink = _linalg.shrinkage(spectrum, alpha)
    d_eff = float(shrink.sum())
    # n max_i l_i >= sum_i l_i holds for the true scores; the landmark rows
    # may miss the maximum, never the mean.
    d_max = max(n_samples * float(np.max(landmark_scores, initial=0.0)), d_eff)
    return d_max, d_eff, float((shrink**2).sum())


def _shrinkage_traces(A, alpha, overwrite_a=False):
    """``(tr S, ||S||_F^2, diag H)`` of the shrinkage ``S = A (A + alpha I)^-1``
    of a symmetric positive semi-definite ``A``, by Cholesky, without its
    eigendecomposition; None when ``A + alpha I`` has no Cholesky factor.

    With ``H = (A + alpha I)^{-1}``, ``S = I - alpha H``: ``tr S = p - alpha
    tr H`` and ``||S||_F^2 = p - 2 alpha tr H + alpha^2 ||H||_F^2``, one
    factorisation and one triangular inverse, ``p^3`` flops.  With
    ``overwrite_a``, a Fortran-ordered ``A`` is factored in place (its lower
    triangle read), with no second ``p x p`` array.
    """
    p = A.shape[0]
    if overwrite_a and A.flags.f_contiguous:
        B = A
    else:
        # One p x p array, in the Fortran order LAPACK factors in place.
        B = np.empty((p, p), order="F")
        np.add(A, A.T, out=B)
        B *= 0.5
    B[np.diag_indices(p)] += alpha
    factor, info = _tiles.potrf(B, lower=True, overwrite_a=True)
    if info != 0:
        return None
    traces = _tiles.inverse_traces(factor)
    if traces is None:  # pragma: no cover - the factor has a positive diagonal
        return None
    diag, squares = traces  # squares: ||H||_F^2
    trace = p - alpha * float(diag.sum())
    frobenius = p - 2 * alpha * float(diag.sum()) + alpha**2 * squares
    # Both cancel where alpha swamps A: within [0, p] and [0, tr S] as the
    # eigenvalues' forms are.
    trace = min(max(trace, 0.0), p)
    return trace, min(max(frobenius, 0.0), trace), diag


def uniform_landmark_dof(gram, alpha, n_samples):
    """:func:`landmark_row_dof` of ``p`` uniform landmarks from ``K(I, I)`` by
    Cholesky, without its eigendecomposition.

    ``A = (n / p) K(I, I)`` estimates the Gram matrix of the features (see
    ``DoFNystroem._fixed_rank_dof``); the landmark rows' scores
    ``[K(I, I) (A + alpha I)^{-1}]_ii`` are ``(p / n) (1 - alpha H_ii)``
    with ``H = (A + alpha I)^{-1}`` (:func:`_shrinkage_traces`).
    """
    p = gram.shape[0]
    traces = _shrinkage_traces((n_samples / p) * np.asarray(gram), alpha)
    if traces is None:
        return None
    d_eff, d_ave, diag = traces
    scores = (p / n_samples) * np.clip(1.0 - alpha * diag, 0.0, 1.0)
    d_max = max(n_samples * float(scores.max(initial=0.0)), d_eff)
    return d_max, d_eff, d_ave


def repeated_rows_dof(gram, counts, alpha):
    """``(d_max, d_eff, d_ave)`` of rows that repeat, exactly, from the
    kernel matrix of the distinct ones.

    Row ``g`` of ``gram`` stands for ``c_g = counts[g]`` equal rows: the
    rows' kernel matrix is ``P K P^T`` (``P`` the ``n x m`` indicator), whose
    nonzero spectrum is that of ``A = C^{1/2} K C^{1/2}``, ``C = diag(c)``.
    So ``d_eff`` and ``d_ave`` are ``A``'s traces, and each of the ``c_g``
    rows of group ``g`` has the ridge leverage score
    ``[A (A + alpha I)^{-1}]_gg / c_g`` (:func:`_shrinkage_traces`, ``m^3``
    flops; ``gram``, float64, is overwritten).  None when ``A + alpha I``
    has no Cholesky factor.
    """
    counts = np.asarray(counts, dtype=np.float64)
    root = np.sqrt(counts)
    # K is symmetric: its transpose is the Fortran-ordered array factored in
    # place, scaled in place (one m x m array, the one given: overwritten).
    A = gram.T if gram.flags.c_contiguous else np.asfortranarray(gram)
    A *= root[:, None]
    A *= root[None, :]
    traces = _shrinkage_traces(A, alpha, overwrite_a=True)
    if traces is None:
        return None
    d_eff, d_ave, diag = traces
    scores = np.clip(1.0 - alpha * diag, 0.0, 1.0) / counts
    d_max = max(float(counts.sum()) * float(scores.max(initial=0.0)), d_eff)
    return d_max, d_eff, d_ave


def leverage_score_bounds(G, pivots, residual, alpha):
    """Bounds and estimate of the ridge leverage scores from a Nystroem factor.

    Let ``L = G G^T`` be the Nystroem approximation on the columns ``pivots``
    and ``E = K - L >= 0`` its residual, whose diagonal is ``residual``.

    * Lower bound: ``L <= K`` in the Loewner order and ``t -> t / (t + alpha)``
      is operator monotone, so ``diag(L (L + alpha I)^-1) <= l``, and
      ``[L (L + alpha I)^-1]_ii = g_i^T (G^T G + alpha I)^-1 g_i``.
    * Upper bound 1 (ridge residual on the sampled columns): writing
      ``K = Phi Phi^T``, ``l_i = phi_i^T (Phi^T Phi + alpha I)^-1 phi_i`` and
      ``Phi_I^T Phi_I <= Phi^T Phi``, so
      ``l_i <= (k_ii - k_iI (K_II + alpha I)^-1 k_Ii) / alpha``.
    * Upper bound 2 (perturbation): ``K <= L + eps I`` with
      ``eps = tr(E) >= ||E||``, so ``l_i <= [f(L + eps I)]_ii``, exact on the
      span of ``G`` and ``f(eps)`` on its complement.  Tight once the
      residual trace is small against ``alpha``.
    * Estimate: ``lower_i + (K - L)_ii / (2 alpha)``, clipped to the bounds.
      Since ``tr f`` is concave with slope at most ``1 / alpha``,
      ``d_eff <= tr f(L) + tr(E) / alpha``: summed, the estimate is the middle
      of a guaranteed bracket of width ``tr(E) / alpha``.  (The estimate of
      Alaoui & Mahoney (2015), the ridge residual with ``alpha`` scaled by
      ``p / n``, was tried and converges much more slowly on the paper's
      problems.)

    All of it costs ``O(n r^2)`` for a factor of rank ``r``.

    Parameters
    ----------
    G : ndarray of shape (n, r)
        Factor of ``L``.
    pivots : array-like of int
        The landmark rows; ``K(:, pivots) = G G[pivots]^T``.
    residual : ndarray of shape (n,)
        ``diag(K - L)``.
    alpha : float
        Penalty.

    Returns
    -------
    lower, estimate, upper : ndarrays of shape (n,)
    """
    G, pivots, residual = check_factor(G, pivots, residual, alpha)
    n, r = G.shape
    G = G.astype(np.float64, copy=False)
    residual = np.asarray(residual, dtype=np.float64)
    if r == 0:
        lower = np.zeros(n)
        upper = np.minimum(residual / alpha, 1.0)
        return lower, upper.copy(), upper
    eye = np.eye(r)
    lower = _linalg.quadratic_forms(G, _tiles.gram(G) + alpha * eye)

    G_I = G[np.asarray(pivots, dtype=np.intp)]
    M = _tiles.gram(G_I)
    ridge = residual / alpha + _linalg.quadratic_forms(G, M + alpha * eye)

    eps = residual.sum()
    eigvals, V = linalg.eigh(_tiles.gram(G))
    positive = eigvals > eigvals.max() * np.finfo(float).eps * r
    U = (G @ V[:, positive]) / np.sqrt(eigvals[positive])
    f_eps = _linalg.shrinkage(np.array([eps]), alpha)[0]
    perturbation = f_eps + (U * U) @ (
        _linalg.shrinkage(eigvals[positive] + eps, alpha) - f_eps
    )

    upper = np.minimum(np.minimum(ridge, perturbation), 1.0)
    upper = np.maximum(upper, lower)
    # tr f(L + E) <= tr f(L) + tr(E) / alpha (tr f is concave with slope at
    # most 1 / alpha), so d_eff lies in [sum(lower), sum(lower) + tr(E) / alpha]:
    # the estimate takes the middle of that bracket point by point.
    estimate = lower + 0.5 * residual / alpha
    return lower, np.clip(estimate, lower, upper), upper


def unclipped_d_eff(chol, alpha):
    """``sum_i`` of the score estimates of :func:`dof_from_factor` in
    ``O(r^3)``, or None when it needs them row by row.

    The estimate of row ``i`` is ``min(lower_i + res_i / (2 alpha), 1)``
    with ``lower_i = g_i^T (G^T G + alpha I)^{-1} g_i <= |g_i|^2 / alpha``
    and ``|g_i|^2 = k_ii - res_i``.  When ``k_ii - res_i / 2 <= alpha`` for
    every row, no estimate reaches 1, and the sum is ``tr G^T G (G^T G +
    alpha I)^{-1} + tr(K - L) / (2 alpha)``: the eigenvalues of the factor's
    Gram matrix instead of a quadratic form per row.  (Always so when
    ``alpha`` exceeds the kernel's diagonal, ``lambda >= max k_ii / n`` in
    the paper's scale.)
    """
    if chol.rank == 0:
        return None
    diagonal = np.asarray(chol.diagonal, dtype=np.float64)
    if float(np.max(diagonal - 0.5 * np.asarray(chol.residual))) > alpha:
        return None
    # numpy's LAPACK, in the thread pool of the products around it (see
    # _blocks._GramSum).
    spectrum = np.linalg.eigvalsh(np.asarray(chol.gram()))  # dask: computed
    return float(_linalg.shrinkage(spectrum, alpha).sum()) + float(
        chol.residual.sum()
    ) / (2.0 * alpha)


def sampling_scores(chol, alpha):
    """``min(1, [L (L + alpha I)^-1]_ii + (K - L)_ii / alpha)``.

    The leverage score of the current approximation plus the most the
    residual can add to it: exact for the points the factor explains,
    close to the cap 1 for the ones it does not yet explain.  (Sampling
    from the ridge upper bound of :func:`leverage_score_bounds` instead,
    which is loose in dense regions the factor has not reached, needed
    about 1.5 times more columns on clustered data with outliers.)
    """
    lower = _lower_bounds(chol, alpha)
    return np.minimum(lower + chol.residual / alpha, 1.0)


def dof_from_factor(
    chol, alpha, n, uniform=True, bounds=True, spectrum=True, lower=None
):
    """The :class:`DegreesOfFreedom` of a factor; ``lower``, when given, are
    its scores' lower bounds already computed (see ``loo_curve``)."""
    if bounds:
        lower, estimate, upper = leverage_score_bounds(
            chol.factor, chol.pivots, chol.residual, alpha
        )
    else:
        if lower is None:
            lower = _lower_bounds(chol, alpha)
        upper = None
        estimate = np.clip(lower + 0.5 * chol.residual / alpha, lower, 1.0)
    d_ave = averaged_dof(chol, alpha, n, uniform) if spectrum else np.nan
    return DegreesOfFreedom(
        estimate, d_ave, alpha, lower=lower, upper=upper, n_columns=len(chol.pivots)
    )
