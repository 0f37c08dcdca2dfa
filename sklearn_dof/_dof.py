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

from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from . import _linalg, _parallel
from ._kernels import KERNEL_CONSTRAINTS, KernelColumns, get_kernel_params
from ._validation import (
    check_factor,
    check_kernel_is_psd,
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


def _averaged_dof(chol, alpha, n, uniform):
    """Estimated ``d_ave`` from the spectrum of the factor."""
    if chol.rank == 0:
        spectrum = np.zeros(0)
    elif uniform:
        # Uniform columns: (n / p) eig K(I, I) estimates the top of eig K.
        G_I = chol.factor[np.asarray(chol.pivots, dtype=np.intp)].astype(np.float64)
        spectrum = (n / len(chol.pivots)) * linalg.eigvalsh(G_I.T @ G_I)
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


def _landmark_dof(landmark_scores, spectrum, alpha, n_samples):
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


def _uniform_landmark_dof(gram, alpha, n_samples):
    """:func:`_landmark_dof` of ``p`` uniform landmarks from ``K(I, I)`` by
    Cholesky, without its eigendecomposition.

    ``A = (n / p) K(I, I)`` estimates the Gram matrix of the features (see
    ``DoFNystroem._fixed_rank_dof``).  With ``H = (A + alpha I)^{-1}`` the
    shrinkage ``A (A + alpha I)^{-1}`` is ``I - alpha H``, so
    ``d_eff = p - alpha tr H``, ``d_ave = ||I - alpha H||_F^2``, and the
    landmark rows' scores ``[K(I, I) (A + alpha I)^{-1}]_ii`` are
    ``(p / n) (1 - alpha H_ii)``: one factorisation and one triangular
    inverse, ``p^3`` flops.
    """
    p = gram.shape[0]
    # One p x p array, in the Fortran order LAPACK factors in place.
    A = np.empty((p, p), order="F")
    np.add(gram, gram.T, out=A)
    A *= 0.5 * n_samples / p
    A[np.diag_indices(p)] += alpha
    factor, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        return None
    # The lower triangle of H; the upper one is zero (clean=1).
    H, info = lapack.dpotri(factor, lower=1, overwrite_c=1)
    diag = np.diag(H).copy()
    scores = (p / n_samples) * np.clip(1.0 - alpha * diag, 0.0, 1.0)
    d_eff = p - alpha * float(diag.sum())
    squares = 2.0 * np.einsum("ij,ij->", H, H) - float(diag @ diag)  # ||H||_F^2
    d_ave = p - 2 * alpha * float(diag.sum()) + alpha**2 * float(squares)
    d_max = max(n_samples * float(scores.max(initial=0.0)), d_eff)
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
    lower = _linalg.quadratic_forms(G, G.T @ G + alpha * eye)

    G_I = G[np.asarray(pivots, dtype=np.intp)]
    M = G_I.T @ G_I
    ridge = residual / alpha + _linalg.quadratic_forms(G, M + alpha * eye)

    eps = residual.sum()
    eigvals, V = linalg.eigh(G.T @ G)
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


@validate_params(
    {
        **KERNEL_CONSTRAINTS,
        "X": ["array-like", "sparse matrix"],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "n_columns": [Interval(Integral, 1, None, closed="left"), None],
        "sampling": [StrOptions({"uniform", "pivoted", "leverage", "rpcholesky"})],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def estimate_degrees_of_freedom(
    X,
    alpha,
    *,
    kernel="rbf",
    gamma=None,
    coef0=None,
    degree=None,
    kernel_params=None,
    n_columns=None,
    sampling="uniform",
    tol=0.1,
    random_state=None,
    n_jobs=None,
):
    """Estimate leverage scores and degrees of freedom from sampled columns.

    Never forms the ``n x n`` kernel matrix: columns ``I`` are drawn uniformly
    and the Nystroem factor of ``K(:, I)`` gives, for every point, a lower
    bound, an upper bound and an estimate of its leverage score (see
    :func:`leverage_score_bounds`).  With ``n_columns=None`` the number of
    columns ``p`` starts at 32 and doubles, reusing the columns already
    evaluated, until the estimates of ``d_eff`` and ``d_max`` move by less
    than ``tol`` (relative) between two doublings, or the ``d_eff`` bracket
    itself is within ``tol``.  Each round costs ``O(n p^2)`` time and the
    factor ``O(n p)`` memory, so the whole estimate costs a constant times one
    round at the final ``p``, which is of the order of ``d_max``.

    ``d_ave`` is estimated from the eigenvalues of the sampled block,
    ``(n / p) eig K(I, I)``, the usual Nystroem estimate of the spectrum.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data, or the ``n x n`` Gram matrix with ``kernel="precomputed"``.
    alpha : float > 0
        Penalty on scikit-learn's scale, ``alpha = n * lambda``.
    kernel : str or callable, default="rbf"
        As in :class:`sklearn.kernel_approximation.Nystroem`.
    gamma, coef0, degree : float, default=None
        Parameters of the built-in kernels.
    kernel_params : dict, default=None
        Extra keyword arguments of the kernel.
    n_columns : int, default=None
        Fixed number of columns; None chooses it adaptively as above.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, default="uniform"
        How the columns are chosen (see :class:`DoFNystroem`).  The bounds
        hold for any columns, but a point far from the others is seen by
        uniform columns only once it is drawn, so on data with outliers
        uniform columns can miss ``d_max`` (the maximum) while greedy pivots,
        which go to the worst explained point first, find it, and the
        residual- or leverage-driven samplers find it with high probability.
    tol : float, default=0.1
        Relative tolerance of the adaptive stopping rule.
    random_state : int, RandomState instance or None, default=None
        Seed of the column sampling.
    n_jobs : int, default=None
        Worker threads of the passes over the rows (see
        :class:`DoFNystroem`).

    Returns
    -------
    dof : DegreesOfFreedom
        Estimates, with guaranteed per-point ``lower`` and ``upper`` bounds and
        the number of columns used, ``n_columns``.

    See Also
    --------
    degrees_of_freedom : Exact values from the full matrix.

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.
    .. [2] A. El Alaoui and M. W. Mahoney, "Fast randomized kernel ridge
       regression with statistical guarantees", NeurIPS 2015.

    Examples
    --------
    >>> from sklearn_dof import estimate_degrees_of_freedom
    >>> from sklearn_dof.datasets import make_periodic_spline
    >>> data = make_periodic_spline(1000, beta=2, random_state=0)
    >>> dof = estimate_degrees_of_freedom(data.K, alpha=1e-2,
    ...                                   kernel="precomputed", random_state=0)
    >>> dof.n_columns < 1000
    True
    """
    from sklearn.utils.validation import check_array

    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32])
    params = get_kernel_params(kernel, gamma, coef0, degree, kernel_params)
    check_kernel_is_psd(kernel)
    access = KernelColumns(X, kernel, params, n_jobs)
    with _parallel.use_n_jobs(n_jobs):
        estimate = _estimate_from_access(
            access, alpha, n_columns, tol, random_state, sampling
        )
    return estimate[0]


def _estimate_from_access(
    access,
    alpha,
    n_columns,
    tol,
    random_state,
    sampling="uniform",
    certify_d_eff=True,
    bounds=True,
    rule="d_max",
):
    """Doubling loop of :func:`estimate_degrees_of_freedom`.

    Returns the estimate and the grown factor, whose pivots a Nystroem fit
    reuses as its landmarks (a prefix of them, or an extension).  The rounds
    compute only what the stopping rule reads (the lower bounds, ``O(n r^2)``
    each); the upper bounds, twice that again, only at the end and only
    with ``bounds``.  ``rule`` names the degrees of freedom the rank will be
    read from, whose convergence stops the doubling.
    """
    n = access.n_samples
    chol = access.partial_cholesky()
    grow = _column_rule(chol, sampling, n, random_state, alpha)
    if not isinstance(sampling, str):  # given landmarks: all of them, once
        n_columns = len(sampling)
    schedule = [min(n_columns, n)] if n_columns is not None else doubling_schedule(n)
    # Address space for the rounds to come, reserved once: the factor is
    # column-major, so columns never written cost no memory, and no round
    # copies the factor into a larger one (which would touch fresh memory).
    itemsize = np.dtype(chol.diagonal.dtype).itemsize
    # (At most n / 16 columns: a rank beyond that is no low rank, and the
    # reservation must stay far from the n x n matrix.)
    room = min(n // 16, _RESERVE_BYTES // (n * itemsize))
    chol.reserve(min(n, max(schedule[0], room)))
    previous = None
    uniform = isinstance(sampling, str) and sampling == "uniform"
    for p in schedule:
        grow(p)
        if rule == "d_eff" and n_columns is None and p != schedule[-1]:
            # A round the rule does not stop at only serves as the next one's
            # ``previous``, which needs d_eff alone: skip its O(n r^2) scores
            # when d_eff has an O(r^3) form.  (The last round always returns
            # its scores.)
            d_eff = _unclipped_d_eff(chol, alpha)
            if d_eff is not None and not _converged(
                _DEff(d_eff), previous, chol, alpha, tol, certify_d_eff, rule
            ):
                previous = _DEff(d_eff)
                continue
        # d_ave (an eigendecomposition of the factor's Gram matrix) is not
        # read by the stopping rule: it is computed once, at the end.
        dof = _dof_from_factor(
            chol, alpha, n, uniform=uniform, bounds=False, spectrum=False
        )
        if n_columns is not None or _converged(
            dof, previous, chol, alpha, tol, certify_d_eff, rule
        ):
            break
        previous = dof
    if bounds:
        dof = _dof_from_factor(chol, alpha, n, uniform=uniform)
    else:
        dof.d_ave = _averaged_dof(chol, alpha, n, uniform)
    return dof, chol, grow


# Address space reserved for the factor of the doubling estimate (see
# _estimate_from_access); only the columns written take memory.
_RESERVE_BYTES = 2**30


class _DEff:
    """A round of the doubling loop known by its ``d_eff`` alone."""

    def __init__(self, d_eff):
        self.d_eff = d_eff


def _unclipped_d_eff(chol, alpha):
    """``sum_i`` of the score estimates of :func:`_dof_from_factor` in
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


def doubling_schedule(n, start=32):
    """Numbers of columns of the doubling rounds: 32, 64, ... up to ``n``."""
    schedule = [min(start, n)]
    while schedule[-1] < n:
        schedule.append(min(2 * schedule[-1], n))
    return schedule


def _column_rule(chol, sampling, n, random_state, alpha=None):
    """``grow(p)`` extends the factor to ``p`` pivots by the sampling rule.

    ``sampling`` is a rule's name or an array of landmark indices, which
    are then added in their order.  ``grow.order`` is the whole sequence of
    pivots when it is fixed in advance (uniform or given landmarks: a
    prefix of it needs no factor), None when each pivot depends on the
    residual of the previous ones.
    """
    order = None
    if not isinstance(sampling, str):
        order = np.asarray(sampling, dtype=np.intp)

        def grow(p):
            chol.add(order[len(chol.pivots) : p])

    elif sampling == "pivoted":

        def grow(p):
            chol.add_greedy(p - len(chol.pivots))

    elif sampling == "rpcholesky":
        rng = check_random_state(random_state)

        def grow(p):
            chol.add_random(p - len(chol.pivots), rng)

    elif sampling == "leverage":
        rng = check_random_state(random_state)

        def grow(p):
            _add_leverage_samples(chol, p, alpha, rng)

    else:
        order = check_random_state(random_state).permutation(n)

        def grow(p):
            chol.add(order[len(chol.pivots) : p])

    def reserving_grow(p):
        # One allocation of the factor per call, not one per doubling of
        # its capacity: fresh memory is slow to touch on some machines.
        chol.reserve(min(p, n))
        grow(p)

    reserving_grow.order = order
    return reserving_grow


def _add_leverage_samples(chol, p, alpha, rng):
    """Grow ``chol`` to ``p`` pivots by approximate ridge-leverage sampling.

    Multi-level, in the spirit of recursive RLS (Musco & Musco 2017) and
    BLESS (Rudi et al. 2018): the first 32 pivots are uniform; then each
    round adds a quarter more pivots (at least 32), drawn without
    replacement with probabilities proportional to approximate ridge
    leverage scores computed from the factor so far
    (:func:`_sampling_scores`), so that regions the factor already explains
    are sampled less, round after round.  Each round costs ``O(n r^2)``, a
    constant times one round at the final rank in all.

    The Nystroem approximation ``K_{:S} (K_{SS})^+ K_{S:}`` does not change
    when the sampled columns are rescaled, so the importance weights
    ``1 / sqrt(p q_i)`` of the sampling theory need no place in the feature
    map; the d.o.f. estimate uses the factor's own spectrum (a lower bound
    of ``K``'s), not a rescaled sample.
    """
    n = chol.residual.shape[0]
    p = min(p, n)
    while len(chol.pivots) < p:
        have = len(chol.pivots)
        k = min(p - have, max(32, have // 4))
        if chol.rank == 0:
            candidates = np.setdiff1d(np.arange(n), chol.pivots)
            block = rng.choice(candidates, size=min(k, candidates.size), replace=False)
        else:
            weights = _sampling_scores(chol, alpha)
            weights[chol.pivots] = 0.0
            positive = np.flatnonzero(weights > 0)
            if positive.size == 0:
                break  # every point explained: no more rank
            k = min(k, positive.size)
            block = rng.choice(
                positive,
                size=k,
                replace=False,
                p=weights[positive] / weights[positive].sum(),
            )
        chol.add(block)


def _sampling_scores(chol, alpha):
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


def _converged(dof, previous, chol, alpha, tol, certify_d_eff, rule="d_max"):
    """Stopping rule of the doubling loop.

    ``d_max`` moved by at most ``tol`` (relative) when the number of columns
    doubled and, with ``certify_d_eff``, the guaranteed bracket
    ``[sum(lower), sum(lower) + tr(K - L) / alpha]`` of ``d_eff`` is narrow
    enough for its middle to be within ``tol``.  (Whether ``d_eff`` moved is
    no test: on slowly decaying spectra the middle of the bracket stays flat
    for several doublings while it is still 20% off.)
    """
    # Below 2 d_eff columns the factor cannot yet hold the directions that
    # carry the leverage, and a flat estimate only means both rounds missed.
    if previous is None or len(chol.pivots) < 2 * dof.d_eff:
        return False
    if rule == "d_eff":
        # The samplers whose rank follows d_eff: d_eff must have settled.
        moved = abs(dof.d_eff - previous.d_eff) / max(previous.d_eff, 1e-12)
        return moved <= tol
    moved = abs(dof.d_max - previous.d_max) / max(previous.d_max, 1e-12)
    certified = chol.residual.sum() / alpha <= 2 * tol * dof.d_eff
    return moved <= tol and (certified or not certify_d_eff)


def _dof_from_factor(chol, alpha, n, uniform=True, bounds=True, spectrum=True):
    if bounds:
        lower, estimate, upper = leverage_score_bounds(
            chol.factor, chol.pivots, chol.residual, alpha
        )
    else:
        lower, estimate, upper = _lower_bounds(chol, alpha), None, None
        estimate = np.clip(lower + 0.5 * chol.residual / alpha, lower, 1.0)
    d_ave = _averaged_dof(chol, alpha, n, uniform) if spectrum else np.nan
    return DegreesOfFreedom(
        estimate, d_ave, alpha, lower=lower, upper=upper, n_columns=len(chol.pivots)
    )
