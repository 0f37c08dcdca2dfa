"""Kernel ridge regression on degrees-of-freedom Nystroem features.

Bach (2013) analyses the following algorithm: pick ``p`` columns of the
kernel matrix, of the order of the maximal marginal degrees of freedom,
and solve kernel ridge regression with the Nystroem approximation
``L = Phi Phi^T`` in place of ``K``.  With the features ``Phi`` (``n x p``)
of :class:`~sklearn_dof.DoFNystroem` this is a ridge regression in ``p``
dimensions, ``(Phi^T W Phi + alpha I) w = Phi^T W y``, in ``O(n p^2)`` time
and ``O(n p)`` memory instead of ``O(n^3)`` and ``O(n^2)``.

:class:`DoFKernelRidge` fits one penalty.  :class:`DoFKernelRidgeCV` picks
it from a grid by exact leave-one-out (or generalised) cross-validation on
fixed features: one ``p x p`` eigendecomposition, then ``O(n p)`` per
penalty.
"""

import warnings
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn import get_config
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.linear_model import Ridge
from sklearn.metrics import get_scorer, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import (
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
)

from . import _dask, _parallel
from ._base import NYSTROEM_CONSTRAINTS, DoFKernelMixin
from ._blocks import normal_equations
from ._nystroem import DoFNystroem

# The parameters of both estimators forwarded to DoFNystroem (tol: the
# tolerance of the d.o.f. estimate).
_NYSTROEM_CONSTRAINTS = {
    **NYSTROEM_CONSTRAINTS,
    "tol": DoFNystroem._parameter_constraints["tol"],
}


# Refinement of a solve in the kernel basis (see _LinearProblem): stop when
# the preconditioned residual is this small relative to the right-hand
# side, so that the coefficients agree with a ridge solve on the formed
# features to about 1e-8 (scikit-learn's iterative ridge solvers stop at
# 1e-4).  Where rounding floors the true residual above this, the recursive
# residual still falls below it, one pass later.
REFINE_RTOL = 1e-10
# Each refinement step is one pass over the kernel blocks.  The Cholesky
# factor of the kernel-basis Gram matrix usually cuts the residual thirty-
# fold or more per pass; when the rate observed so far would need more
# passes than this, rounding swamps the penalty and the caller falls back
# to forming the features (two passes' worth of BLAS-3 work).
REFINE_MAX_PASSES = 6


class _LinearProblem:
    """Weighted, centred least-squares data on fixed features.

    Follows :func:`sklearn.linear_model._base._preprocess_data`: with
    ``fit_intercept`` the features and targets are centred by their
    ``sample_weight``-weighted means (the intercept is not penalised), and
    the loss is ``sum_i s_i (y_i - f(x_i))^2``.  The features are
    :class:`FeatureBlocks`, reduced block by block (:func:`normal_equations`).

    When the blocks are the kernel blocks ``K(x, I)`` and ``features.basis``
    is a map ``N`` with ``N N^T = K(I, I)^+`` and ``Phi = K N`` (the inverse
    Cholesky factor ``R^{-1}``, or ``K(I, I)^{+1/2}``; see
    ``_linalg.LandmarkBasis``), the Gram matrix is accumulated in the
    kernel basis, ``G = K_c^T S K_c``, one symmetric rank-``n`` update
    (``n p^2`` flops), with ``Phi_c^T S Phi_c = N^T G N``: the ``n p^2``
    flops of forming ``K N`` row by row are saved, and the ``p x p`` system
    is solved in ``O(p^3)`` (see :meth:`_preconditioner`).  That is exact up
    to rounding, but the rounding of ``G`` is amplified by ``||N||^2 =
    1 / lambda_min(K(I, I))``, which can exceed a small penalty; so
    :meth:`solve` refines the Cholesky solution by preconditioned conjugate
    gradients on the exact operator ``w -> N^T K_c^T S K_c N w + alpha w``,
    one pass over the kernel blocks (``O(n p)`` beyond the kernel) per step.
    When the landmarks came with the partial Cholesky factor of the rows
    (``features.factor``, the non-uniform column rules and the automatic
    rank) and the rows are unweighted, ``G`` comes from that factor instead
    of a pass over the data (``_nystroem._LandmarkFactor``), and is summed
    over the kernel blocks after all if the refinement does not converge
    from it.

    Attributes
    ----------
    y : ndarray of shape (n, k)
        Targets (not centred).
    sw : ndarray of shape (n,)
        Sample weights (ones when none were given).
    gram : ndarray of shape (p, p) or None
        ``Phi_c^T S Phi_c`` of the centred features; None in the kernel
        basis, whose sum is ``kernel_gram``.
    kernel_gram : ndarray of shape (p, p)
        ``G = K_c^T S K_c``, only in the kernel basis.
    rhs : ndarray of shape (p, k)
        ``Phi_c^T S y_c``.
    Phi_offset, y_offset : ndarrays of shape (p,) and (k,)
        The weighted means (zeros without intercept).
    refine_passes : int
        Passes over the data the last :meth:`solve` spent refining.
    """

    def __init__(self, features, y, sample_weight, fit_intercept):
        n_samples = features.n_samples
        y = np.asarray(y, dtype=np.float64).reshape(n_samples, -1)
        if sample_weight is None:
            sw = np.ones(n_samples)
        else:
            sw = np.asarray(sample_weight, dtype=np.float64)
        self.features, self.y, self.sw = features, y, sw
        self.fit_intercept = fit_intercept
        self.basis = features.basis
        self.refine_passes = 0
        if self.basis is None:
            self.gram, self.rhs, self.Phi_offset, self.y_offset = normal_equations(
                features, y, sw, fit_intercept
            )
            return
        self.gram = None  # the sum is kernel_gram
        # The rows' partial Cholesky factor gives the kernel-basis sums in
        # O(p r^2), no pass over the data (_nystroem._LandmarkFactor).
        factor = features.factor
        self._factor_sums = factor is not None and bool(np.all(sw == 1))
        if self._factor_sums:
            self._set_kernel_sums(*factor.normal_equations(y))
        else:
            self._set_kernel_sums(*normal_equations(features, y, sw, True))

    def _set_kernel_sums(self, kernel_gram, rhs, mean, y_mean):
        """Kernel-basis sums, centred around the weighted mean even without
        intercept: the mean kernel row is the largest direction of ``G``, and
        its share of the rounding, amplified by ``N``, would swamp the rest.
        It is added back exactly, as a rank-one term in the features' basis
        (see :meth:`_preconditioner`)."""
        self.kernel_gram = kernel_gram
        rhs, offset = self.basis.map_t(rhs), self.basis.map_t(mean)
        self._rank_one = None
        if self.fit_intercept:
            self._kernel_offset, self.y_offset = mean, y_mean
        else:
            total = self.sw.sum()
            rhs += total * np.outer(offset, y_mean)
            self._rank_one = (total, offset)
            self._kernel_offset = np.zeros_like(mean)
            self.y_offset = np.zeros_like(y_mean)
            offset = np.zeros_like(offset)
        self.rhs, self.Phi_offset = rhs, offset

    def solve(self, alpha):
        """Ridge weights ``(Phi^T S Phi + alpha I)^-1 Phi^T S y``, (p, k).

        Returns None when the features are in the kernel basis and the
        refinement did not converge (see :class:`_LinearProblem`).
        """
        self.refine_passes = 0
        if self.basis is None:
            return _ridge_solver(self.gram, alpha)(self.rhs)
        solve = self._preconditioner(alpha)
        W = self._refine(solve(self.rhs), alpha, solve)
        if W is None and self._factor_sums:
            # The factor carries rounding of its own, amplified by the small
            # pivots of an ill-conditioned K(I, I): at tiny penalties the sums
            # over the kernel blocks may still precondition well enough.
            # (The retry gets the whole budget of passes; refine_passes
            # counts both.)
            self._factor_sums = False
            self._set_kernel_sums(
                *normal_equations(self.features, self.y, self.sw, True)
            )
            spent, self.refine_passes = self.refine_passes, 0
            solve = self._preconditioner(alpha)
            W = self._refine(solve(self.rhs), alpha, solve)
            self.refine_passes += spent
        return W

    def _preconditioner(self, alpha):
        """``rhs -> (Phi_c^T S Phi_c + alpha I)^-1 rhs``, exact up to the
        rounding of the kernel-basis sum ``G``.

        In the Cholesky basis, one factorisation of ``G + alpha K(I, I)``
        (:meth:`_linalg.LandmarkBasis.ridge_solver`); otherwise, or when rounding
        makes that matrix indefinite, ``G`` mapped to the features' basis.
        Without intercept the uncentred Gram matrix is the centred one plus
        ``t o o^T`` (``t`` the total weight, ``o`` the mean feature row),
        added by the Sherman-Morrison formula, never to ``G`` itself.
        """
        solve = self.basis.ridge_solver(self.kernel_gram, alpha)
        if solve is None:
            gram = self.basis.congruence(self.kernel_gram)
            if self._rank_one is not None:
                total, offset = self._rank_one
                gram += total * np.outer(offset, offset)
            return _ridge_solver(gram, alpha, exact=False)
        if self._rank_one is None:
            return solve
        total, offset = self._rank_one
        u = solve(offset)
        scale = total / (1.0 + total * float(offset @ u))

        def sherman_morrison(rhs):
            Z = solve(rhs)
            return Z - np.multiply.outer(u, scale * (offset @ Z))

        return sherman_morrison

    def intercept(self, W):
        """Intercept of the weights ``W`` (p, k), of shape (k,)."""
        return self.y_offset - self.Phi_offset @ W

    def _apply(self, V, alpha):
        """``(Phi_c^T S Phi_c + alpha I) V`` for ``Phi = K N``, by one pass
        over the kernel blocks ``K`` (never ``K N``)."""
        self.refine_passes += 1
        U = self.basis.map(V)
        m = self._kernel_offset
        shift = m @ U
        unit = bool(np.all(self.sw == 1))

        def statistic(K_b, sw_b):
            Z = K_b @ U - shift
            if not unit:
                Z *= sw_b[:, None]
            return K_b.T @ Z, Z.sum(axis=0)

        KtSZ, SZ = self.features.reduce(statistic, self.sw)
        return self.basis.map_t(KtSZ - np.outer(m, SZ)) + alpha * V

    def _refine(self, W, alpha, precondition):
        """Preconditioned conjugate gradients from ``W``, one column per target.

        ``precondition`` solves with the Gram matrix accumulated in the
        kernel basis, exact up to its rounding, so the iteration contracts
        fast; None if it does not reach ``REFINE_RTOL``.
        """
        C = self.rhs
        target = REFINE_RTOL**2 * np.einsum("ij,ij->j", C, precondition(C))
        R = C - self._apply(W, alpha)
        Z = precondition(R)
        rz = np.einsum("ij,ij->j", R, Z)
        P = Z
        rate = 0.0  # no contraction observed yet: try at least one step
        while not np.all(rz <= target):
            # Passes still needed at the rate seen so far (rz falls by
            # ``rate`` per pass), for the slowest target.
            with np.errstate(divide="ignore", invalid="ignore"):
                needed = np.max(np.log(target / rz) / np.log(rate))
            if rate >= 1.0 or self.refine_passes + max(needed, 1) > REFINE_MAX_PASSES:
                return None
            Q = self._apply(P, alpha)
            pq = np.einsum("ij,ij->j", P, Q)
            step = np.divide(rz, pq, out=np.zeros_like(rz), where=pq > 0)
            W = W + step * P
            R = R - step * Q
            Z = precondition(R)
            rz_next = np.einsum("ij,ij->j", R, Z)
            ratio = np.divide(rz_next, rz, out=np.zeros_like(rz), where=rz > 0)
            rate = float(np.max(ratio[rz_next > target], initial=0.0))
            P = Z + ratio * P
            rz = rz_next
        return W


def _ridge_solver(gram, alpha, exact=True):
    """``rhs -> (gram + alpha I)^-1 rhs`` by Cholesky, eigh as a fallback.

    ``exact``: ``gram`` is accurate to its own rounding, and the fallback
    drops the directions below it (:func:`_ridge_inverse`), with a warning.
    Otherwise the solver is a preconditioner for a Gram matrix that is
    refined afterwards (see :class:`_LinearProblem`): a Cholesky failure
    only means its rounding exceeds ``alpha``, and the fallback keeps every
    direction, silently.
    """
    A = np.array(gram, dtype=np.float64, order="F")
    A[np.diag_indices_from(A)] += alpha
    try:
        factor = linalg.cho_factor(A, lower=True, overwrite_a=True)
        return lambda rhs: linalg.cho_solve(factor, rhs)
    except linalg.LinAlgError:
        if exact:
            warnings.warn(
                f"Cholesky factorisation of the {gram.shape[0]}x{gram.shape[0]} "
                f"ridge system failed at alpha={alpha:g}; solving it with a "
                "symmetric eigendecomposition instead.",
                linalg.LinAlgWarning,
                stacklevel=3,
            )
    eigvals, V = linalg.eigh(0.5 * (gram + gram.T))
    if exact:
        inverse = _ridge_inverse(eigvals, alpha)[:, None]
    else:
        inverse = 1.0 / (np.clip(eigvals, 0.0, None) + alpha)[:, None]
    return lambda rhs: V @ (inverse * (V.T @ rhs))


def _solve_normal_equations(gram, rhs, alpha):
    """Solve ``(gram + alpha I) W = rhs`` by Cholesky, eigh as a fallback."""
    return _ridge_solver(gram, alpha)(rhs)


def _ridge_inverse(eigvals, alphas):
    """``1 / (s + alpha)`` on the numerical range of a Gram matrix, 0 off it.

    Eigenvalues below ``p * eps * max(s)`` are rounding noise: the right-hand
    side ``Phi^T S y`` has no true component along them, and dividing its
    rounding noise by a penalty below that level would blow it up.
    """
    eigvals = np.asarray(eigvals, dtype=np.float64)
    cutoff = eigvals.shape[0] * np.finfo(np.float64).eps * max(eigvals.max(), 0.0)
    on_range = (eigvals > cutoff)[:, None] if np.ndim(alphas) else eigvals > cutoff
    clipped = np.clip(eigvals, 0, None)
    if np.ndim(alphas):
        clipped = clipped[:, None]
    return np.where(on_range, 1.0 / (clipped + alphas), 0.0)


def _shape_coef(W, y_ndim):
    """Ridge's convention for coefficients ``W`` (p, k): (p,) or (k, p)."""
    return W[:, 0].copy() if y_ndim == 1 else W.T.copy()


class _DoFRidgeMixin(DoFKernelMixin):
    """Shared fitting and prediction code of the two estimators."""

    def _validate_ridge_data(self, X, y, sample_weight):
        X, y = self._validate_fit_data(X, y, multi_output=True, y_numeric=True)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True
            )
        return X, y, sample_weight

    def _set_coef(self, W, problem, y, features):
        """``dual_coef_``, ``intercept_`` (and ``coef_``) from the solution
        ``W`` in the basis of the feature blocks."""
        intercept = problem.intercept(W)
        if not self.fit_intercept:
            self.intercept_ = 0.0
        else:
            self.intercept_ = intercept[0] if y.ndim == 1 else intercept
        cholesky = features.cholesky
        if cholesky is None and features.basis is not None:
            cholesky = features.basis.cholesky
        if cholesky is not None:
            # Features K(x, I) R^{-1}: the landmark weights are R^{-1} W, and
            # coef_ waits for normalization_, which this route never needs.
            dual = linalg.solve_triangular(cholesky, W, lower=False)
            self.dual_coef_ = _shape_coef(dual, y.ndim)
            self._coef = None
            return
        # The triangular basis: rotation.T maps W to nystroem_.transform's
        # (None for the basis normalization_.T itself).
        if features.rotation is not None:
            W = features.rotation.T @ W
        self._coef = _shape_coef(W, y.ndim)
        # transform(X) @ coef_.T = K(X, I) @ (coef_ @ normalization_).T: the
        # landmark weights make a prediction cost O(p) per row, not O(p^2).
        self.dual_coef_ = self._coef @ self.nystroem_.normalization_.astype(np.float64)

    @property
    def coef_(self):
        # Documented in the class Attributes.  From dual_coef_ when the fit
        # worked in the kernel basis: transform(X) = K(X, I) N_s with the
        # symmetric N_s = K(I, I)^{+1/2}, so coef_ = dual_coef_ K(I, I) N_s
        # gives the same predictions, coef_ @ N_s = dual_coef_ on the span
        # of K(I, I).
        check_is_fitted(self, "dual_coef_")
        if self._coef is not None:
            return self._coef
        nystroem = self.nystroem_
        gram = nystroem._landmark_gram().astype(np.float64, copy=False)
        return (self.dual_coef_ @ gram) @ nystroem.normalization_.astype(np.float64)

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def predict(self, X):
        """Predict with the fitted low-rank kernel ridge model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples; with ``kernel="precomputed"`` the kernel values between
            them and the training points, shape (n_samples, n_train).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``nystroem_.transform(X) @ coef_.T + intercept_``, computed as
            ``K(X, landmarks) @ dual_coef_.T + intercept_``.
        """
        return self._kernel_expansion(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class DoFKernelRidge(_DoFRidgeMixin, RegressorMixin, BaseEstimator):
    """Kernel ridge regression on Nystroem features of degrees-of-freedom rank.

    The algorithm of Bach (2013) end to end: an internal
    :class:`~sklearn_dof.DoFNystroem` picks ``p`` landmarks (with
    ``n_components="auto"``, ``p`` proportional to the estimated maximal
    marginal degrees of freedom at ``alpha``) and maps the data to features
    ``Phi`` with ``Phi Phi^T = L``, the Nystroem approximation of the kernel
    matrix; the ridge problem is then solved in ``p`` dimensions,

    .. math:: (\\Phi^T S \\Phi + \\alpha I) w = \\Phi^T S y,

    (``S`` the diagonal of sample weights, ``Phi`` and ``y`` centred when
    ``fit_intercept``).  ``Phi`` is never formed: any ``N`` with
    ``N N^T = K(I, I)^+`` gives the same ``L`` and the same predictions,
    ``Phi^T S Phi = N^T (K_{:I}^T S K_{:I}) N``, and the kernel-basis sum is
    one symmetric rank-``n`` update over blocks of rows (``n p^2`` flops, the
    cost of the Gram matrix alone).  ``N = R^{-1}`` for the Cholesky factor
    ``K(I, I) = R^T R`` (``p^3 / 3`` flops) when ``K(I, I)`` is numerically
    positive definite, else the pseudo-inverse square root of
    :class:`~sklearn_dof.DoFNystroem` (an eigendecomposition, about
    ``9 p^3``).  The rounding of the sum, amplified by ``N``, is removed by
    refining the Cholesky solution with a few preconditioned
    conjugate-gradient passes over the kernel blocks (``O(n p)`` each); at a
    penalty below that rounding the fit forms the features instead.  The fit
    costs ``O(n p^2)`` time and ``O(p^2 + b p)`` memory for blocks of ``b``
    rows, a prediction ``O(p)`` kernel evaluations.
    Without intercept and weights the training predictions are
    ``L (L + alpha I)^{-1} y``, kernel ridge regression with ``L`` for ``K``.

    The result equals ``make_pipeline(DoFNystroem(alpha=alpha, ...),
    Ridge(alpha=alpha, fit_intercept=...))`` with the same parameters; this
    class ties the two penalties together, so that a search over ``alpha``
    also moves the rank, and exposes the fitted rank and degrees of freedom.

    Parameters
    ----------
    alpha : float, default=1.0
        Ridge penalty on scikit-learn's scale (``alpha = n * lambda``, the
        paper's penalty times ``n``).  Used both for the ridge problem and
        for the degrees of freedom that set the automatic rank.
    kernel : str or callable, default="rbf"
        Any name of :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"`` (``fit`` takes the ``n x n`` Gram matrix and
        ``predict`` the ``m x n`` kernel values against the training
        points), or a callable ``k(x, y, **kernel_params) -> float``.
    gamma : float, default=None
        Parameter of the RBF, laplacian, polynomial, exponential chi2 and
        sigmoid kernels.
    coef0 : float, default=None
        Zero coefficient of the polynomial and sigmoid kernels.
    degree : float, default=None
        Degree of the polynomial kernel.
    kernel_params : dict, default=None
        Extra keyword arguments of the kernel.
    n_components : "auto" or int, default="auto"
        Number of landmarks ``p``, see :class:`~sklearn_dof.DoFNystroem`.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        Landmark selection of :class:`DoFNystroem` (see there).
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (features and targets are centred by
        their weighted means, as in :class:`~sklearn.linear_model.Ridge`).
    tol : float, default=0.1
        Relative tolerance of the degrees-of-freedom estimate.
    random_state : int, RandomState instance or None, default=None
        Seed of the random landmark samplers.
    n_jobs : int, default=None
        Worker threads of every pass over the rows (kernel blocks, sums,
        the d.o.f. estimate, predictions), each running the BLAS on one
        thread.  None: the OpenMP default (``OMP_NUM_THREADS`` or all the
        cores the process may use), or the BLAS's current thread count if
        smaller (a ``threadpoolctl`` limit, a joblib worker), and the
        calling thread alone on a thread other than the main one; -1: all
        cores.  See :ref:`the scaling page <threads>`.

    Attributes
    ----------
    nystroem_ : DoFNystroem
        The fitted feature map.  After a fit on the Cholesky factor (see
        above) its ``normalization_`` is computed on first use: prediction
        never needs it, and the fitted model holds no ``p x p`` matrix.
    coef_ : ndarray of shape (n_components_,) or (n_targets, n_components_)
        Weights of the features ``nystroem_.transform(X)``; after a fit on
        the Cholesky factor, computed from ``dual_coef_`` on each access.
    dual_coef_ : ndarray of shape (n_components_,) or \
            (n_targets, n_components_)
        Weights of the landmarks, ``coef_ @ nystroem_.normalization_``:
        ``predict(X) = K(X, landmarks) @ dual_coef_.T + intercept_``.
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term; 0.0 when ``fit_intercept=False``.
    n_components_ : int
        Number of landmarks ``p``.
    dof_ : float
        Estimated maximal marginal degrees of freedom ``d_max`` at ``alpha``
        (``nystroem_.dof_``; for uniform landmarks at an int
        ``n_components`` computed on first read, since neither fit nor
        predict needs it).
    effective_dof_ : float
        Estimated degrees of freedom ``d_eff = tr K (K + alpha I)^-1``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when they are all strings.

    See Also
    --------
    DoFKernelRidgeCV : The same model with ``alpha`` chosen by efficient
        leave-one-out cross-validation.
    DoFNystroem : The feature map.
    sklearn.kernel_ridge.KernelRidge : Exact kernel ridge regression,
        ``O(n^3)``.

    Notes
    -----
    ``sample_weight`` weighs the squared errors (and the weighted means used
    for the intercept) exactly as in :class:`~sklearn.linear_model.Ridge`,
    but the landmarks and the rank are chosen by
    :class:`~sklearn_dof.DoFNystroem`, which ignores the weights: every
    training row, whatever its weight, may be drawn as a landmark and counts
    in the degrees of freedom.  Hence fitting with integer weights is not
    the same as fitting on repeated rows, nor a zero weight the same as
    removing the row.

    Memory: the fit never holds the ``n x p`` feature matrix.  The Gram
    matrix ``Phi^T S Phi`` is accumulated over blocks of rows (kernel block,
    triangular feature map, symmetric rank-k update), whose size follows
    scikit-learn's ``working_memory`` (:func:`sklearn.config_context`); the
    fit holds ``O(p^2 + b p)`` floats for blocks of ``b`` rows, plus the
    ``n x p`` factor of the d.o.f. estimate with ``n_components="auto"`` or
    a non-uniform sampler.

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import DoFKernelRidge
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(500, 2))
    >>> y = np.sin(X).sum(1) + 0.1 * rng.randn(500)
    >>> model = DoFKernelRidge(alpha=1.0, gamma=0.5, random_state=0).fit(X, y)
    >>> bool(model.n_components_ < 500)
    True
    >>> bool(model.score(X, y) > 0.95)
    True
    """

    _parameter_constraints: dict = {
        **_NYSTROEM_CONSTRAINTS,
        "alpha": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        alpha=1.0,
        *,
        kernel="rbf",
        gamma=None,
        coef0=None,
        degree=None,
        kernel_params=None,
        n_components="auto",
        sampling="uniform",
        fit_intercept=True,
        tol=0.1,
        random_state=None,
        n_jobs=None,
    ):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.sampling = sampling
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs

    @_parallel.with_n_jobs
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose the landmarks, then solve the ridge problem on the features.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; with ``kernel="precomputed"`` the ``n x n`` Gram
            matrix.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Non-negative weights of the squared errors.  They do not affect
            the choice of the landmarks (see Notes).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X, y, sample_weight = self._validate_ridge_data(X, y, sample_weight)
        # float32 features are summed in float32 (the speed asked for): too
        # coarse for the kernel basis, whose rounding T amplifies.
        kernel_basis = X.dtype != np.float32
        features = self._fit_nystroem(
            X, self.alpha, self.tol, kernel_basis=kernel_basis
        )
        problem = _LinearProblem(features, y, sample_weight, self.fit_intercept)
        W = problem.solve(self.alpha)
        self._n_refine_passes = problem.refine_passes
        self._refined = W is not None
        if W is None:
            # Rounding of the kernel-basis Gram matrix swamps this penalty:
            # pay for forming the features row by row, K(x, I) R^{-1} when
            # K(I, I) (shifted if need be) has a Cholesky factor R.
            basis = features.basis
            cholesky = basis.cholesky if basis is not None else None
            features = self.nystroem_._training_features(X, cholesky=cholesky)
            problem = _LinearProblem(features, y, sample_weight, self.fit_intercept)
            W = problem.solve(self.alpha)
        self._set_coef(W, problem, y, features)
        return self


class _PredictionsAsInput(RegressorMixin, BaseEstimator):
    """Regressor whose predictions are its input, to score given predictions."""

    def predict(self, X):
        return X

    def decision_function(self, X):
        return X


class DoFKernelRidgeCV(_DoFRidgeMixin, RegressorMixin, BaseEstimator):
    """Degrees-of-freedom Nystroem kernel ridge with efficient penalty selection.

    The landmarks and the rank are chosen once, by
    :class:`~sklearn_dof.DoFNystroem` at the smallest penalty of the grid
    (the largest degrees of freedom, hence the largest rank the grid needs).
    On these fixed features ``Phi`` (``n x p``) every penalty of the grid is
    scored by exact leave-one-out cross-validation (or by generalised
    cross-validation) from one eigendecomposition
    ``Phi^T S Phi = V diag(s) V^T`` of the centred, weighted ``p x p`` Gram
    matrix: with ``Z = Phi V``, the leverages

    .. math:: h_i = w_i \\sum_j \\frac{Z_{ij}^2}{s_j + \\alpha}
              + \\frac{w_i}{\\sum_l w_l}

    (the last term for the unpenalised intercept) and the fitted residuals
    ``r_i`` cost ``O(n p)`` per penalty, and the leave-one-out residual is
    ``r_i / (1 - h_i)``.  The model is then refitted at the best penalty on
    the same features.  The whole search costs about one fit.

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(0.1, 1.0, 10.0)
        Penalties to try, on scikit-learn's scale (``alpha = n * lambda``).
        The rank is chosen at ``min(alphas)``.
    kernel : str or callable, default="rbf"
        Any name of :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"``, or a callable ``k(x, y, **kernel_params) -> float``.
    gamma : float, default=None
        Parameter of the RBF, laplacian, polynomial, exponential chi2 and
        sigmoid kernels.
    coef0 : float, default=None
        Zero coefficient of the polynomial and sigmoid kernels.
    degree : float, default=None
        Degree of the polynomial kernel.
    kernel_params : dict, default=None
        Extra keyword arguments of the kernel.
    n_components : "auto" or int, default="auto"
        Number of landmarks ``p``; ``"auto"`` uses the degrees of freedom at
        ``min(alphas)``.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        Landmark selection of :class:`DoFNystroem` (see there).
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.  Leave-one-out refits it without the
        left-out point, exactly.
    criterion : {"loo", "gcv"}, default="loo"
        ``"loo"``: exact leave-one-out residuals ``r_i / (1 - h_i)``.
        ``"gcv"``: generalised cross-validation, each leverage replaced by
        their mean ``tr(H) / n_samples`` (with ``scoring=None`` the score is
        minus the GCV criterion ``mean(w_i r_i^2) / (1 - tr(H) / n)^2``).
        Only used when ``cv=None``.
    scoring : str or callable, default=None
        Score of the cross-validated predictions, higher is better.  None:
        with ``cv=None``, minus the mean of ``w_i`` times the squared
        leave-one-out (or GCV) residuals, as in
        :class:`~sklearn.linear_model.RidgeCV`; with a ``cv``, the
        estimator's R^2.  A scorer given here does not see the sample
        weights.
    cv : int, cross-validation generator or iterable, default=None
        None: the efficient leave-one-out (or GCV) above.  Otherwise a
        :class:`~sklearn.model_selection.GridSearchCV` of
        :class:`~sklearn.linear_model.Ridge` over ``alphas`` on the same
        fixed features, with these splits.
    store_cv_results : bool, default=False
        Keep the per-sample results in ``cv_results_`` (``cv=None`` only).
    tol : float, default=0.1
        Relative tolerance of the degrees-of-freedom estimate.
    random_state : int, RandomState instance or None, default=None
        Seed of the random landmark samplers.
    n_jobs : int, default=None
        Worker threads of every pass over the rows (kernel blocks, sums,
        the d.o.f. estimate, predictions), each running the BLAS on one
        thread.  None: the OpenMP default (``OMP_NUM_THREADS`` or all the
        cores the process may use), or the BLAS's current thread count if
        smaller (a ``threadpoolctl`` limit, a joblib worker), and the
        calling thread alone on a thread other than the main one; -1: all
        cores.  See :ref:`the scaling page <threads>`.

    Attributes
    ----------
    alpha_ : float
        The selected penalty.
    best_score_ : float
        Score at ``alpha_`` (with ``scoring=None`` and ``cv=None``, minus the
        mean squared leave-one-out error).
    cv_results_ : ndarray of shape (n_samples, n_alphas) or \
            (n_samples, n_targets, n_alphas)
        With ``store_cv_results=True``: per sample and penalty, ``w_i`` times
        the squared leave-one-out (or GCV) residual when ``scoring=None``,
        else the leave-one-out prediction.
    nystroem_ : DoFNystroem
        The feature map, fitted at ``min(alphas)``.
    coef_ : ndarray of shape (n_components_,) or (n_targets, n_components_)
        Weights of the features at ``alpha_``.
    dual_coef_ : ndarray of shape (n_components_,) or \
            (n_targets, n_components_)
        Weights of the landmarks (see :class:`DoFKernelRidge`).
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term; 0.0 when ``fit_intercept=False``.
    n_components_ : int
        Number of landmarks ``p``.
    dof_ : float
        Estimated maximal marginal degrees of freedom at ``min(alphas)``.
    effective_dof_ : float
        Estimated degrees of freedom at ``min(alphas)``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when they are all strings.

    See Also
    --------
    DoFKernelRidge : The model at one penalty.
    sklearn.linear_model.RidgeCV : The same leave-one-out computation on
        given features.

    Notes
    -----
    The leave-one-out is exact for the ridge regression on the fixed
    features: it does not reselect the landmarks without the left-out point
    (the selection never looks at ``y``).  It equals
    ``GridSearchCV(Ridge(), {"alpha": alphas}, cv=LeaveOneOut(),
    scoring="neg_mean_squared_error")`` on ``nystroem_.transform(X)`` at the
    cost of about one fit instead of ``n_samples * n_alphas``.

    ``sample_weight`` weighs the squared errors, as in
    :class:`~sklearn.linear_model.RidgeCV`; the landmarks ignore it (see
    :class:`DoFKernelRidge`).

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.
    .. [2] R. Rifkin and R. Lippert, "Notes on regularized least squares",
       MIT-CSAIL-TR-2007-025, 2007.
    .. [3] G. Golub, M. Heath and G. Wahba, "Generalized cross-validation as
       a method for choosing a good ridge parameter", Technometrics, 1979.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import DoFKernelRidgeCV
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(500, 2))
    >>> y = np.sin(X).sum(1) + rng.randn(500)
    >>> model = DoFKernelRidgeCV(alphas=(0.1, 1.0, 10.0, 100.0), gamma=0.2,
    ...                          random_state=0).fit(X, y)
    >>> model.alpha_
    1.0
    >>> bool(model.n_components_ < 500)
    True
    """

    _parameter_constraints: dict = {
        **_NYSTROEM_CONSTRAINTS,
        "alphas": ["array-like", Interval(Real, 0, None, closed="neither")],
        "criterion": [StrOptions({"loo", "gcv"})],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "cv": ["cv_object"],
        "store_cv_results": ["boolean"],
    }

    def __init__(
        self,
        alphas=(0.1, 1.0, 10.0),
        *,
        kernel="rbf",
        gamma=None,
        coef0=None,
        degree=None,
        kernel_params=None,
        n_components="auto",
        sampling="uniform",
        fit_intercept=True,
        criterion="loo",
        scoring=None,
        cv=None,
        store_cv_results=False,
        tol=0.1,
        random_state=None,
        n_jobs=None,
    ):
        self.alphas = alphas
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.sampling = sampling
        self.fit_intercept = fit_intercept
        self.criterion = criterion
        self.scoring = scoring
        self.cv = cv
        self.store_cv_results = store_cv_results
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_alphas(self):
        alphas = np.asarray(self.alphas)
        if alphas.ndim == 0:
            alphas = alphas.reshape(1)
        bad = (
            alphas.ndim != 1
            or alphas.size == 0
            or not np.issubdtype(alphas.dtype, np.number)
            or np.iscomplexobj(alphas)
        )
        if not bad:
            alphas = alphas.astype(np.float64)
            bad = not (np.isfinite(alphas).all() and (alphas > 0).all())
        if bad:
            raise InvalidParameterError(
                "The 'alphas' parameter of DoFKernelRidgeCV must be a float > 0 "
                "or a non-empty 1d array-like of finite floats > 0. "
                f"Got {self.alphas!r} instead."
            )
        return alphas

    @_parallel.with_n_jobs
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose the landmarks, select the penalty, and fit at it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; with ``kernel="precomputed"`` the ``n x n`` Gram
            matrix.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Non-negative weights of the squared errors (in the fit and, with
            ``scoring=None`` and ``cv=None``, in the cross-validation score).
            They do not affect the choice of the landmarks.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        alphas = self._check_alphas()
        if self.cv is not None and self.store_cv_results:
            raise ValueError(
                "store_cv_results=True requires cv=None (efficient leave-one-out)."
            )
        X, y, sample_weight = self._validate_ridge_data(X, y, sample_weight)
        if X.shape[0] < 2:
            raise ValueError(
                "Cross-validation needs at least 2 samples; got n_samples=1."
            )
        # Two passes (Gram matrix, then leave-one-out errors): keep the
        # features if they fit the memory budget.
        features = self._fit_nystroem(X, float(alphas.min()), self.tol, cache=True)
        problem = _LinearProblem(features, y, sample_weight, self.fit_intercept)

        if self.cv is None:
            scores = self._efficient_cv(problem, alphas, y)
            # The first of tied maxima; a NaN score (0 / 0 leave-one-out at an
            # interpolating alpha) must never win.
            best = int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))
            self.alpha_ = float(alphas[best])
            self.best_score_ = float(scores[best])
        else:
            ridge = Ridge(fit_intercept=self.fit_intercept)
            if sample_weight is not None and get_config()["enable_metadata_routing"]:
                ridge.set_fit_request(sample_weight=True)
            search = GridSearchCV(
                ridge,
                {"alpha": alphas.tolist()},
                cv=self.cv,
                scoring=self.scoring,
                refit=False,
            )
            fit_params = (
                {} if sample_weight is None else {"sample_weight": sample_weight}
            )
            # Other splitters need the features as one matrix (n x p memory).
            Phi = self.nystroem_.transform(X).astype(np.float64, copy=False)
            search.fit(Phi, y, **fit_params)
            self.alpha_ = float(search.best_params_["alpha"])
            self.best_score_ = float(search.best_score_)

        self._set_coef(problem.solve(self.alpha_), problem, y, features)
        return self

    def _efficient_cv(self, problem, alphas, y):
        """Score every penalty from one eigendecomposition; O(n p) each.

        The per-sample leave-one-out (or GCV) errors of all penalties come
        from one more pass over the feature blocks.
        """
        n_samples, n_targets = problem.y.shape
        eigvals, V = linalg.eigh(0.5 * (problem.gram + problem.gram.T))
        ZT_y = V.T @ problem.rhs  # = Z^T S y_c for Z = Phi_c V
        sw = problem.sw
        shrinks = _ridge_inverse(eigvals, alphas[None, :])  # (p, n_alphas)
        eigvals = np.clip(eigvals, 0, None)
        if self.criterion == "gcv":
            traces = eigvals @ shrinks + float(self.fit_intercept)
        else:
            traces = None
        intercept_scale = 1.0 / sw.sum() if self.fit_intercept else 0.0
        errors = problem.features.map(
            lambda Phi_b, y_b, sw_b: _cv_errors(
                Phi_b,
                y_b,
                sw_b,
                problem.Phi_offset,
                problem.y_offset,
                V,
                ZT_y,
                shrinks,
                traces,
                n_samples,
                intercept_scale,
            ),
            problem.y,
            sw,
        )  # (n, k, n_alphas)
        scorer = None if self.scoring is None else get_scorer(self.scoring)
        scores = np.empty(alphas.shape[0])
        if self.store_cv_results:
            results = np.empty((n_samples, n_targets, alphas.shape[0]))
        for i in range(alphas.shape[0]):
            if scorer is None:
                weighted_squares = sw[:, None] * errors[:, :, i] ** 2
                scores[i] = -weighted_squares.mean()
                if self.store_cv_results:
                    results[:, :, i] = weighted_squares
            else:
                predictions = (y.reshape(n_samples, -1) - errors[:, :, i]).reshape(
                    y.shape
                )
                scores[i] = scorer(_PredictionsAsInput(), predictions, y)
                if self.store_cv_results:
                    results[:, :, i] = predictions.reshape(n_samples, -1)
        if self.store_cv_results:
            self.cv_results_ = results[:, 0] if y.ndim == 1 else results
        return scores


def _cv_errors(
    Phi_b, y_b, sw_b, offset, y_offset, V, ZT_y, shrinks, traces, n, intercept_scale
):
    """Leave-one-out (``traces=None``) or GCV errors of one block of rows.

    In the eigenbasis ``V`` of the centred Gram matrix the hat matrix at
    penalty ``a`` is ``Z diag(1 / (eig + a)) Z^T S`` (plus the intercept's
    ``1 / sum(s)``), so a row's residual and leverage cost ``O(p)`` each.
    Returns an array of shape (b, k, n_alphas).
    """
    Z = np.subtract(Phi_b, offset, dtype=np.float64) @ V
    Z2 = Z * Z
    y_c = y_b - y_offset
    n_alphas = shrinks.shape[1]
    out = np.empty((Z.shape[0], y_c.shape[1], n_alphas))
    for i in range(n_alphas):
        shrink = shrinks[:, i]
        residuals = y_c - Z @ (shrink[:, None] * ZT_y)
        if traces is None:
            leverage = sw_b * (Z2 @ shrink) + sw_b * intercept_scale
        else:
            leverage = np.full(Z.shape[0], traces[i] / n)
        # An interpolating penalty gives 0 / 0: a NaN score, never selected.
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, :, i] = residuals / (1.0 - leverage)[:, None]
    return out
