"""Nystroem feature map whose rank follows the degrees of freedom."""

import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _array_api, _dask, _linalg, _parallel, _tiles
from ._blocks import FeatureBlocks, _one_blas_thread, kernel_product, mirror_lower
from ._dof import _landmark_dof, _uniform_landmark_dof
from ._kernels import (
    KernelColumns,
    get_kernel_params,
    kernel_block,
)
from ._landmarks import DEFAULT_MAX_COMPONENTS, select_landmarks
from ._progress import Progress
from ._samplers import SAMPLING_OPTIONS, resolve_sampling
from ._validation import (
    ALWAYS_PSD_KERNELS,
    KERNEL_CONSTRAINTS,
    check_landmark_gram,
    check_penalty_resolution,
)


def _landmark_factor(chol, landmarks):
    """``chol`` if every landmark (a row index) is a pivot behind one of its
    columns, else None.

    ``K(x, I) = g(x) G_I^T`` holds for those pivots; a dropped one (a
    duplicated point) leaves it exact only up to the drop threshold.
    """
    if chol is None or _dask.is_dask_array(chol.factor):
        return None
    if not np.isin(landmarks, np.asarray(chol.column_pivots)).all():
        return None
    return chol


def _numeric_response(y, n_samples):
    """``y`` as a float64 ``n_samples x n_targets`` array when it holds finite
    numeric targets of the rows, else None (class labels, Dask arrays)."""
    if y is None or _dask.is_dask_array(y):
        return None
    y = np.asarray(y)
    if y.dtype.kind not in "biuf" or y.ndim not in (1, 2) or y.shape[0] != n_samples:
        return None
    y = y.reshape(n_samples, -1).astype(np.float64)
    return y if np.isfinite(y).all() else None


class _LandmarkFactors(NamedTuple):
    """What a kernel-basis fit needs from ``DoFNystroem._fit``, for that
    one fit: the Cholesky factor ``R`` of the (shifted) landmark block,
    ``R^T R = K(I, I) + shift I``, the block ``K(I, I)``, the rows' partial
    Cholesky factor when its pivots
    include the landmarks (else None), and the training features
    ``K(:, I) R^{-1}`` when they are the leading columns of that factor."""

    cholesky: np.ndarray
    gram: np.ndarray
    rows: object
    features: np.ndarray | None = None
    sums: object = None
    shift: float = 0.0


class _EveryRow(NamedTuple):
    """Every training row is a landmark: ``K(I, I)`` (rows in landmark
    order), for an exact kernel ridge fit (``DoFNystroem._fit``'s
    ``exact_solve``)."""

    gram: np.ndarray


def _factor_prefix(chol, landmarks):
    """``(G[:, :p], R)`` when the landmarks are the pivots behind the first
    ``p`` columns of the rows' factor ``G``, else None.

    Then ``K(:, I) = G[:, :p] R`` with ``R = G[I, :p]^T`` upper triangular
    (a pivot's row has no residual left for the later columns), so the
    training features in the Cholesky basis ``K(x, I) R^{-1}`` are the
    factor's columns themselves: a fit on them needs neither a kernel block
    nor a factorisation of ``K(I, I)``.
    """
    if chol is None or _dask.is_dask_array(chol.factor) or landmarks.ndim != 1:
        return None
    p = landmarks.shape[0]
    if p == 0 or p > chol.rank:
        return None
    if not np.array_equal(np.asarray(chol.column_pivots[:p]), landmarks):
        return None
    G = chol.factor[:, :p]
    R = np.triu(np.asarray(G[landmarks], dtype=np.float64).T)
    return G, R


class _LandmarkFactor:
    """The kernel-basis sums of a fit from the partial Cholesky factor of
    the rows, when its pivots include the landmarks.

    A factor ``G`` (``n x r``, ``L = G G^T``) holds every column it pivoted
    on exactly, ``K(x, I) = g(x) G_I^T`` with ``G_I = G[I]``, so the sums
    that ``_ridge_solve.KernelBasisRidgeProblem`` otherwise accumulates over
    kernel blocks (``n p^2`` flops) follow from ``G^T G`` in ``O(p r^2)``:
    ``K_c^T K_c = G_I (G^T G - n m m^T) G_I^T`` and
    ``K_c^T y_c = G_I G^T y_c``, ``m`` the mean row of ``G``.  The
    non-uniform rules grow that factor anyway and their d.o.f. estimate
    computes ``G^T G``; the automatic rank has it from its last round.  The
    centring happens in the factor's basis, where the features are bounded
    by the kernel's diagonal, before the map ``G_I`` to the kernel basis:
    its cancellation is not amplified the way a centring of ``K^T K`` would
    be.  The factor's own rounding, though, grows with ``1 / sqrt`` of its
    smallest pivots: at tiny penalties the refinement may not converge from
    these sums, and ``KernelBasisRidgeProblem`` then sums over the kernel blocks.
    Unweighted rows only (``G^T S G`` would cost a pass of its own).
    """

    def __init__(self, chol, landmarks):
        self.chol = chol
        self.landmarks = landmarks

    def normal_equations(self, y):
        """``(K_c^T K_c, K_c^T y_c, mean row of K, mean of y)``, as
        ``_blocks.normal_equations`` of the kernel blocks with unit weights
        and an intercept."""
        G_I = self.chol.factor[self.landmarks].astype(np.float64, copy=False)
        centred, rhs, g_mean, y_mean = _factor_sums(self.chol, self.chol.rank, y)
        gram = G_I @ (centred @ G_I.T)
        mirror_lower(gram)  # exactly symmetric, as the block sums are
        return gram, G_I @ rhs, G_I @ g_mean, y_mean


def _factor_sums(chol, p, y, fit_intercept=True):
    """``(G_c^T G_c, G_c^T y_c, mean row of G, mean of y)`` for the first
    ``p`` columns ``G`` of the rows' partial Cholesky factor, from the Gram
    matrix ``G^T G`` its rounds computed, in ``O(n p)``: the centring
    happens in the factor's basis, whose entries the kernel's diagonal
    bounds.  Without intercept, the sums uncentred and zero means."""
    G = chol.factor[:, :p]
    gram = np.array(chol.gram()[:p, :p], dtype=np.float64)
    rhs = G.T.astype(np.float64, copy=False) @ y
    if not fit_intercept:
        return gram, rhs, np.zeros(p), np.zeros(y.shape[1])
    n = G.shape[0]
    g_mean = G.mean(axis=0, dtype=np.float64)
    y_mean = y.mean(axis=0)
    gram -= n * np.outer(g_mean, g_mean)
    rhs -= n * np.outer(g_mean, y_mean)
    return gram, rhs, g_mean, y_mean


class _PrefixSums:
    """The normal equations of the features that are the first ``p``
    columns ``G_p`` of the rows' partial Cholesky factor
    (:func:`_factor_sums`), in ``O(n p)`` instead of a pass of ``n p^2``.
    Unweighted rows only."""

    def __init__(self, chol, p):
        self.chol = chol
        self.p = p

    def normal_equations(self, y, fit_intercept):
        """As ``_blocks.normal_equations`` of the features with unit weights."""
        gram, rhs, g_mean, y_mean = _factor_sums(self.chol, self.p, y, fit_intercept)
        mirror_lower(gram)
        return gram, rhs, g_mean, y_mean


class _FactorRows:
    """Feature map of blocks that are rows of the partial Cholesky factor:
    a float64 copy each (statistics may overwrite the blocks they get)."""

    def __call__(self, G_block):
        return np.array(G_block, dtype=np.float64, order="C")


class _TriangularFeatures:
    """``x -> K(x, I) T``: the Nystroem features in a triangular basis.

    With ``normalization_.T = T Q`` (an RQ decomposition: ``T`` upper
    triangular, ``Q`` orthogonal), ``transform(x) = K(x, I) T Q``.  Fits work
    with ``K(x, I) T`` and rotate the ``p`` coefficients they find by ``Q^T``
    at the end: ridge and logistic objectives are invariant under that
    rotation.  Picklable, so that other executors can ship it to their
    workers.

    The triangular product (``trmm``) costs half the flops of the general
    one, but only scipy exposes it, and scipy's BLAS is a second OpenBLAS
    beside numpy's: called between numpy's kernel products and Gram
    updates, the two libraries' threads, each pool waiting busily for its
    next call, compete for the cores: on several threads the general
    product in numpy's BLAS is the faster one, on one thread the triangular
    one (doc/architecture.rst, measurements).  So ``trmm`` is used when the
    BLAS runs one thread (``OMP_NUM_THREADS=1``,
    :func:`threadpoolctl.threadpool_limits`, joblib workers).
    """

    def __init__(self, landmarks, kernel, params, triangular, n_jobs=None):
        self.landmarks = landmarks
        self.kernel = kernel
        self.params = params
        self.triangular = triangular
        self.n_jobs = n_jobs
        self.triangular_product = _one_blas_thread()

    def __call__(self, X):
        K = kernel_block(X, self.landmarks, self.kernel, self.params, self.n_jobs)
        if self.triangular is None:  # the kernel basis: K(x, I) itself
            return K
        T = self.triangular.astype(K.dtype, copy=False)
        # scipy's trmm holds the GIL: numpy's product in a worker thread.
        if not self.triangular_product or _parallel.in_worker():
            return K @ T
        trmm = linalg.get_blas_funcs("trmm", (T, K))
        # (K T)^T = T^T K^T, computed in place in K's Fortran-ordered transpose.
        return trmm(1.0, T, K.T, side=0, lower=0, trans_a=1, overwrite_b=1).T


class DoFNystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Nystroem feature map with a rank chosen from the degrees of freedom.

    Picks ``p`` landmark points ``I`` (see ``sampling``) and maps ``x`` to
    ``phi(x) = K(x, I) K(I, I)^{+1/2}``, so that on the training set
    ``Phi Phi^T = L = K(:, I) K(I, I)^+ K(I, :)``, the Nystroem approximation
    of the kernel matrix.  A :class:`~sklearn.linear_model.Ridge` with the same
    ``alpha`` on these features computes ``L (L + alpha I)^{-1} y``.

    Bach (2013) shows that this loses no prediction accuracy as soon as ``p``
    grows linearly with the *maximal marginal degrees of freedom*
    ``d_max = n max_i [K (K + alpha I)^{-1}]_ii`` (up to a logarithm).  With
    ``n_components="auto"`` and targets ``y`` (which a
    :class:`~sklearn.pipeline.Pipeline` passes on), the landmarks grow by
    doubling, nested, until the leave-one-out error of the ridge on them
    certifies that the smallest such rank loses at most ``loss_tol`` (1%)
    of the test error of exact kernel ridge at this ``alpha``
    (:ref:`automatic_rank`); the degrees of freedom are estimated on the way
    without forming the ``n x n`` matrix and reported.  Without targets, and
    with ``n_components="dof"``, the rank is the paper's rule from the
    estimated degrees of freedom (:func:`auto_rank`).  Either way the rank
    is at most ``max_components``.

    Parameters
    ----------
    kernel : str or callable, default="rbf"
        Any name of :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"`` (``fit`` takes the ``n x n`` Gram matrix and
        ``transform`` the ``m x n`` kernel values against the training
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
    alpha : float, default=1.0
        The ridge penalty the features will be used with, on scikit-learn's
        scale (``alpha = n * lambda``, ``C = 1 / alpha`` for logistic loss).
        The degrees of freedom, hence the automatic rank, depend on it.
    n_components : "auto", "dof" or int, default="auto"
        Number of landmarks ``p``.  ``"auto"``: the smallest rank whose
        estimated loss of test error against exact kernel ridge is at most
        ``loss_tol``, certified on the targets ``y`` given to ``fit`` (the
        paper's rule without them); ``"dof"``: the paper's rule,
        :func:`auto_rank` of the estimated degrees of freedom; an int larger
        than ``n_samples`` is clipped with a warning.  Pass
        ``theoretical_rank(...)`` for Bach's worst-case rank.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        How the landmarks are chosen; only the kernel diagonal and the
        chosen columns are evaluated.

        - ``"uniform"``: drawn uniformly without replacement (Bach 2013);
          ``"auto"`` rank from ``d_max``.
        - ``"pivoted"``: greedy incomplete Cholesky with column pivoting,
          each new landmark the point worst explained by the current ones;
          ``"auto"`` rank from ``d_max``.
        - ``"leverage"``: drawn in rounds with probabilities proportional to
          approximate ridge leverage scores from the landmarks so far
          (multi-level, as recursive RLS and BLESS); ``"auto"`` rank from
          ``d_eff``.
        - ``"rpcholesky"``: randomly pivoted (block) Cholesky, pivots drawn
          with probabilities proportional to the residual diagonal
          (:func:`randomly_pivoted_cholesky`); ``"auto"`` rank from ``d_eff``.
        - an array of distinct row indices: these landmarks, in this order
          (``"auto"`` takes them all; an int takes the first ones).
        - an object with ``select(X, n_components, random_state)`` returning
          row indices or points (2-D, e.g. k-means centres; not with a
          precomputed kernel); with ``"auto"`` the rank comes from the uniform
          estimate of ``d_max``.
    loss_tol : float, default=0.01
        Loss of test error, relative to exact kernel ridge at the same
        ``alpha``, that ``n_components="auto"`` allows (see
        ``loss_estimate_``).
    max_components : int, default=None
        Cap of an automatic rank (``"auto"`` and ``"dof"``); None: 4096
        (``p x p`` float64 matrices of 128 MiB).  The factor the certified
        rank grows holds at most 1 GiB: beyond ``2**27 / max_components``
        rows the certificate reads a uniform subsample of the rows at the
        same ``lambda = alpha / n``.  When the cap stops the rank short of
        ``loss_tol`` a warning says what rank the certificate asks for.
    tol : float, default=0.1
        Relative tolerance of the degrees-of-freedom estimate (of
        ``n_components="dof"``).
    random_state : int, RandomState instance or None, default=None
        Seed of the random samplers (and passed to a selector).
    n_jobs : int, default=None
        Worker threads of every pass over the rows (kernel blocks, sums,
        the d.o.f. estimate, predictions), each running the BLAS on one
        thread.  None: the OpenMP default (``OMP_NUM_THREADS`` or all the
        cores the process may use), or the BLAS's current thread count if
        smaller (a ``threadpoolctl`` limit, a joblib worker), and the
        calling thread alone on a thread other than the main one; -1: all
        cores.  See :ref:`the scaling page <threads>`.
    verbose : int, default=0
        Progress lines on standard output: one per round of an automatic
        rank (the columns grown, its loss estimate, the time since the fit
        began), then the rank and the landmark block's factorisation.
        Nothing with 0.

    Attributes
    ----------
    n_components_ : int
        Number of landmarks ``p``, the number of output features.
    components_ : ndarray or sparse matrix of shape (n_components_, n_features_in_)
        The landmark points (with ``"precomputed"``, their indices' rows are
        not stored; see ``component_indices_``).
    component_indices_ : ndarray of shape (n_components_,)
        Indices of the landmarks in the training set.
    normalization_ : ndarray of shape (n_components_, n_components_)
        ``K(I, I)^{+1/2}``; ``transform(X) = K(X, I) @ normalization_.T``.
        Computed at fit; inside :class:`~sklearn_dof.DoFKernelRidge`, which
        fits on a Cholesky factor of ``K(I, I)`` instead, on first use.
    dof_ : float
        Estimated maximal marginal degrees of freedom ``d_max``.  With
        ``"auto"``, from the doubling estimate over all rows; with an int
        ``n_components``, from the landmark rows alone (``O(p^3)``, no pass
        over the data, hence rougher; for uniform landmarks inside
        :class:`~sklearn_dof.DoFKernelRidge`, on first read).
    effective_dof_ : float
        Estimated degrees of freedom ``d_eff = tr K (K + alpha I)^{-1}``.
    averaged_dof_ : float
        Estimated ``d_ave = tr K^2 (K + alpha I)^{-2}``.
    dof_columns_ : int
        Number of kernel columns the estimate used (``n_components_`` for an
        int rank).
    loss_estimate_ : float
        With a certified ``"auto"`` rank, its estimated loss of test error
        relative to exact kernel ridge at ``alpha`` (NaN otherwise).
    requested_components_ : int or None
        The rank the automatic rule asked for when ``max_components``
        stopped it (None when it did not).
    exact_ : bool
        Whether every distinct training row is a landmark: the fit is then
        exact kernel ridge (the certified rank goes there when it needs more
        than half of the rows and ``max_components`` allows all of them).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when they are all strings.

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : Fixed-rank uniform Nystroem.
    estimate_degrees_of_freedom : The estimate behind ``n_components="dof"``.
    auto_rank : The paper's rank rule.

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.
    .. [2] C. Williams and M. Seeger, "Using the Nystroem method to speed up
       kernel machines", NIPS 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn_dof import DoFNystroem
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(500, 2))
    >>> y = np.sin(X).sum(1) + 0.1 * rng.randn(500)
    >>> model = make_pipeline(DoFNystroem(alpha=10.0, gamma=0.5, random_state=0),
    ...                       Ridge(alpha=10.0, fit_intercept=False)).fit(X, y)
    >>> nys = model[0]
    >>> bool(nys.effective_dof_ < nys.dof_ < nys.n_components_ < 500)
    True
    """

    _parameter_constraints: dict = {
        **KERNEL_CONSTRAINTS,
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "n_components": [
            StrOptions({"auto", "dof"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "max_components": [Interval(Integral, 1, None, closed="left"), None],
        "loss_tol": [Interval(Real, 0, None, closed="neither")],
        "sampling": [
            SAMPLING_OPTIONS,
            "array-like",
            HasMethods(["select"]),
        ],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        kernel="rbf",
        *,
        gamma=None,
        coef0=None,
        degree=None,
        kernel_params=None,
        alpha=1.0,
        n_components="auto",
        sampling="uniform",
        loss_tol=0.01,
        max_components=None,
        tol=0.1,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.n_components = n_components
        self.sampling = sampling
        self.loss_tol = loss_tol
        self.max_components = max_components
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _kernel_params(self):
        return get_kernel_params(
            self.kernel, self.gamma, self.coef0, self.degree, self.kernel_params
        )

    @_parallel.with_n_jobs
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Choose the landmarks and the rank.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; with ``kernel="precomputed"`` the ``n x n`` Gram
            matrix.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), \
                default=None
            Targets of the ridge the features will feed (a
            :class:`~sklearn.pipeline.Pipeline` passes them): with
            ``n_components="auto"`` the rank is certified on them.  Ignored
            otherwise, and when not numeric.

        Returns
        -------
        self : object
            Fitted transformer.
        """
        namespace = _array_api.dispatch_namespace(X)
        if namespace is not None:
            xp, device = namespace
            X = _array_api.validate(self, X, xp)
            response = _array_api.numeric_response(y, xp, device, X.shape[0])
            gram = _array_api.fit_nystroem(self, X, response, xp, device)
            self._normalization = xp.astype(_array_api.inverse_sqrt(gram, xp), X.dtype)
            return self
        X = self._validate_fit_data(X)
        self._fit(X, response=_numeric_response(y, X.shape[0]))
        # A fitted transformer's transform changes no state: the map now.
        self._normalization_map()
        return self

    def _validate_fit_data(self, X):
        validate = _dask.validate_data if _dask.is_dask_array(X) else validate_data
        return validate(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])

    def _fit(
        self,
        X,
        kernel_basis=False,
        response=None,
        center=True,
        penalties=None,
        objective="squared",
        exact_solve=False,
    ):
        """Fit on validated ``X``; the landmark factors of a kernel-basis fit.

        ``response`` (float64, ``n x n_targets``) and ``center``: the targets
        and intercept of the ridge the certified automatic rank is for;
        ``penalties``: a grid whose best penalty (by leave-one-out) the rank
        is certified for, which then becomes this transformer's ``alpha``
        (the internal transformer of :class:`~sklearn_dof.DoFKernelRidgeCV`);
        ``objective="logistic"``: ``response`` holds the class indices of a binary
        logistic regression, which the rank is certified for instead.
        When the landmarks lead the rows' partial Cholesky factor, the
        factors returned hold the training features (any ``kernel_basis``).

        ``kernel_basis``: for the estimators that fit in the kernel basis
        (:class:`~sklearn_dof._linalg.LandmarkBasis`), which need a Cholesky
        factor of ``K(I, I)``, not the eigendecomposition behind
        ``normalization_`` (about ``9 p^3`` flops): that then waits for the
        first read of ``normalization_``.  Returns the factors for that one
        fit (:class:`_LandmarkFactors`), or None when the block was
        eigendecomposed; the fitted transformer keeps no ``p x p`` (or
        ``n x r``) matrix it never transforms with.

        ``exact_solve`` (with ``kernel_basis``): the caller fits exact kernel
        ridge from ``K`` when every row is a landmark.  Then this returns
        :class:`_EveryRow`, the block ``K(I, I)``, and factors nothing (the
        certified rank stops before growing a factor of every row, see
        :func:`~sklearn_dof._landmarks.select_landmarks`).
        """
        columns = _dask.DaskKernelColumns if _dask.is_dask_array(X) else KernelColumns
        access = columns(X, self.kernel, self._kernel_params(), self.n_jobs)
        n_samples = X.shape[0]
        rule = resolve_sampling(self.sampling, n_samples, self.n_components)
        # (Other kernels keep the pseudo-inverse of the PSD part of K(I, I)
        # that check_landmark_gram warns about.)
        exact_solve = (
            exact_solve
            and X.dtype != np.float32
            and isinstance(self.kernel, str)
            and self.kernel in ALWAYS_PSD_KERNELS
        )
        n_components = self.n_components
        if isinstance(n_components, Integral) and n_components > n_samples:
            warnings.warn(
                f"n_components={n_components} > n_samples={n_samples}: "
                "n_components was set to n_samples, the exact kernel.",
                UserWarning,
                stacklevel=4,  # past fit and its _fit_context wrapper
            )
            n_components = n_samples
        progress = Progress(self.verbose, type(self).__name__)
        selection = select_landmarks(
            access,
            X,
            rule,
            n_components,
            self.alpha,
            self.tol,
            self.random_state,
            self.kernel,
            response=response,
            center=center,
            loss_tol=self.loss_tol,
            max_components=self.max_components,
            penalties=penalties,
            objective=objective,
            every_row_exact=exact_solve,
            progress=progress,
        )
        if selection.alpha is not None:
            self.alpha = selection.alpha
        self.loss_estimate_ = np.nan if selection.loss is None else selection.loss
        self.requested_components_ = selection.requested
        if selection.requested is not None:
            cap = min(n_samples, self.max_components or DEFAULT_MAX_COMPONENTS)
            rank = selection.landmarks.shape[0]
            if selection.loss is None:
                detail = "the degrees-of-freedom rule"
            elif np.isfinite(selection.loss):
                detail = (
                    f"the loss estimate (relative excess loss {selection.loss:.3g} "
                    f"at {rank} components, above loss_tol={self.loss_tol:g})"
                )
            else:
                detail = (
                    f"the loss estimate (at {rank} components the error still "
                    "falls as fast as over the previous doubling: no loss "
                    f"within loss_tol={self.loss_tol:g} is certified)"
                )
            warnings.warn(
                f"n_components='{self.n_components}' stopped at max_components="
                f"{cap}: {detail} asks for about {selection.requested} "
                "components. Raise max_components (memory grows with it), or "
                "the penalty.",
                UserWarning,
                stacklevel=4,
            )
        landmarks, gram, chol = selection.landmarks, selection.gram, selection.factor
        points = selection.points
        n_components = landmarks.shape[0]  # a rule may exhaust the rank
        cholesky = None
        shift = 0.0  # of the block the Cholesky factor is of
        prefix = None
        if self.kernel != "precomputed" and not points:
            prefix = _factor_prefix(chol, landmarks)
        # Exact kernel ridge: every distinct row is a landmark (a complete
        # factor), or every row is.
        every_row = bool(
            not points
            and landmarks.ndim == 1
            and n_components == n_samples
            and np.unique(landmarks).size == n_samples
        )
        self.exact_ = every_row or bool(
            prefix is not None and chol.complete and n_components == chol.rank
        )
        # direct: the caller solves with K(I, I) + alpha I itself; no factor
        # of the block, and normalization_ waits for its first read.
        direct = exact_solve and every_row and prefix is None
        if prefix is not None:
            # The landmarks lead the rows' factor G: K(:, I) = G_I-columns,
            # K(I, I) = R^T R with R = G[I, :p]^T, no factorisation to do.
            cholesky = prefix[1]
        elif kernel_basis and self.kernel != "precomputed" and not direct:
            cholesky, shift = _linalg.landmark_factor(
                gram, self.alpha * n_components / n_samples
            )
        if cholesky is None and not direct:
            eigvals, eigvecs, raw_eigvals = _linalg.landmark_eigh(gram)
            check_landmark_gram(gram, self.kernel, raw_eigvals)
            normalization = _linalg.inverse_sqrt_from_eigh(eigvals, eigvecs)
            normalization = normalization.astype(X.dtype, copy=False)
        else:
            eigvals = eigvecs = normalization = None
            # (A direct fit is of a kernel PSD by construction.)
            check_landmark_gram(gram, self.kernel, positive_definite=True)
        check_penalty_resolution(self.alpha, np.diag(gram), n_samples)
        if direct or self.exact_:
            block = "every row, the exact kernel"
        elif prefix is not None:
            block = "the Cholesky factor read off the rows' factor"
        elif cholesky is not None:
            block = "a Cholesky factor" + (f", shifted by {shift:.3g}" if shift else "")
        else:
            block = "the pseudo-inverse square root"
        progress(f"{n_components} landmarks; landmark block: {block}")
        # With a precomputed kernel a landmark is only its index: storing its
        # row of the Gram matrix would make the fitted model grow with n.
        if points:
            self.components_ = landmarks.astype(X.dtype, copy=False)
        elif self.kernel == "precomputed":
            self.components_ = landmarks.copy()
        else:
            self.components_ = access.rows(landmarks)
        self.component_indices_ = None if points else landmarks
        self._normalization = normalization
        self.n_components_ = n_components
        self._n_features_out = n_components
        estimate = selection.estimate
        if points:
            estimate = self._points_dof(access, X, estimate)
        elif estimate is None and not direct and (cholesky is None or chol is not None):
            estimate = self._fixed_rank_dof(
                eigvals, eigvecs, chol, landmarks, n_samples, gram
            )
        # Else uniform landmarks at a fixed rank in the kernel basis: like
        # normalization_, their O(p^3) estimate (as costly as the fit's own
        # factorisations, see doc/architecture.rst) waits for the first read
        # of dof_ and its siblings.
        self._dof = estimate
        self._n_training_rows = n_samples
        if direct:
            return _EveryRow(gram)
        if cholesky is None:
            return None
        if prefix is not None:
            return _LandmarkFactors(
                cholesky, gram, None, prefix[0], _PrefixSums(chol, n_components)
            )
        # The partial Cholesky factor of the rows when there is one (see
        # _LandmarkFactor; not with the pseudo-inverse basis, whose map
        # amplifies that factor's rounding beyond what the refinement
        # recovers from, measured on an ill-conditioned K(I, I)).
        rows_factor = None if points else _landmark_factor(chol, landmarks)
        return _LandmarkFactors(cholesky, gram, rows_factor, shift=shift)

    def _fixed_rank_dof(self, eigvals, eigvecs, chol, indices, n_samples, gram):
        """Degrees of freedom at a given rank from the landmark rows, O(p^3).

        Uniform landmarks are a uniform sample: ``(n / p) K(I, I)`` estimates
        the Gram matrix ``Phi^T Phi`` of the features (the usual Nystroem
        estimate of the spectrum), and the landmark rows' scores against it
        estimate the scores.  Other landmarks are no uniform sample, but
        their factor ``G`` (``chol``) gives ``Phi^T Phi`` up to a rotation
        (``G^T G``, which the kernel-basis fit reuses).
        Either way the rows scored are the landmarks, which greedy pivoting
        and the residual- and leverage-driven rules pick among the worst
        explained points, so no pass over all rows is spent on it.  Without
        the eigenvalues of ``K(I, I)`` (the kernel basis defers them),
        uniform landmarks take the same quantities from a Cholesky
        factorisation.
        """
        p = indices.shape[0]
        if chol is None and eigvals is None:
            dof = _uniform_landmark_dof(gram, self.alpha, n_samples)
            if dof is not None:
                return (*dof, p)
            eigvals, eigvecs, _ = _linalg.landmark_eigh(gram)
        if chol is None:
            spectrum = (n_samples / p) * eigvals
            # Rows K(I, I)^{1/2} of the features against (n / p) K(I, I).
            scores = (eigvecs**2) @ (eigvals / (spectrum + self.alpha))
        else:
            gram = chol.gram()
            spectrum = linalg.eigvalsh(gram)
            scores = chol.quadratic_forms(
                gram + self.alpha * np.eye(gram.shape[0]), rows=indices
            )
        d_max, d_eff, d_ave = _landmark_dof(scores, spectrum, self.alpha, n_samples)
        return d_max, d_eff, d_ave, p

    def _points_dof(self, access, X, estimate):
        """Degrees of freedom with landmark points that are not training rows.

        ``L = K(X, Z) K(Z, Z)^+ K(Z, X) <= K`` for any points ``Z`` (a
        projection in feature space), so the lower bounds and the estimate of
        :func:`leverage_score_bounds` hold; they cost the ``n x p`` features
        and ``O(n p^2)``.  With ``"auto"`` the rank came from the uniform
        estimate, which is kept.
        """
        if estimate is not None:
            return estimate
        G = self._kernel_to_landmarks(X).astype(np.float64) @ self.normalization_.T
        residual = np.clip(access.diagonal() - (G * G).sum(axis=1), 0, None)
        gram = _tiles.gram(G)
        if _dask.is_dask_array(G):
            forms = _dask.quadratic_forms
        else:
            forms = _linalg.quadratic_forms
        lower = forms(G, gram + self.alpha * np.eye(G.shape[1]))
        scores = np.clip(lower + 0.5 * residual / self.alpha, lower, 1.0)
        shrink = _linalg.shrinkage(linalg.eigvalsh(gram), self.alpha)
        d_max = X.shape[0] * float(lower.max(initial=0.0))
        return d_max, float(scores.sum()), float((shrink**2).sum()), G.shape[1]

    def _training_features(
        self,
        X,
        working_memory=None,
        cache=False,
        kernel_basis=False,
        factors=None,
        cholesky=None,
    ):
        """The features of ``X`` as :class:`FeatureBlocks`.

        By default the blocks are ``K(x, I) T`` of :class:`_TriangularFeatures`
        with ``normalization_.T = T Q`` and ``blocks.rotation = Q``.

        ``kernel_basis``: the blocks are the kernel blocks ``K(x, I)``
        themselves and ``blocks.basis`` the
        :class:`~sklearn_dof._linalg.LandmarkBasis` ``N`` of the features
        ``K(x, I) N``, for callers that apply it to ``p x p`` sums instead of
        to every row (see ``_ridge_solve.KernelBasisRidgeProblem``): ``R^{-1}`` with the
        :class:`_LandmarkFactors` ``factors`` that ``_fit`` returned (and
        ``blocks.factor`` the rows' partial Cholesky factor when it holds
        the landmarks), else ``normalization_.T``.

        ``cholesky``: a Cholesky factor ``R`` of the (shifted) landmark
        block; the triangular basis is then ``R^{-1}`` itself (no
        eigendecomposition, the coefficients are in the Cholesky basis:
        ``blocks.cholesky`` is ``R``).

        ``cache`` for callers that make several passes.
        """
        landmarks = self._landmarks()
        extras = {}
        dtype = X.dtype if X.dtype == np.float32 else np.float64
        if factors is not None and factors.features is not None:
            # The rows' factor holds the features K(x, I) R^{-1} already: a
            # cache would only copy it, whatever ``cache`` asks.
            return FeatureBlocks(
                factors.features,
                _FactorRows(),
                self.n_components_,
                np.float64,
                working_memory,
                cache=False,
                cholesky=factors.cholesky,
                factor=factors.sums,
            )
        if kernel_basis and factors is None:
            T = None
            normalization = self.normalization_.T.astype(np.float64)
            extras["basis"] = _linalg.LandmarkBasis(matrix=normalization)
        elif kernel_basis:
            T = None
            extras["basis"] = _linalg.LandmarkBasis(
                cholesky=factors.cholesky, gram=factors.gram, shift=factors.shift
            )
            if factors.rows is not None:
                extras["factor"] = _LandmarkFactor(
                    factors.rows, self.component_indices_
                )
        elif cholesky is not None:
            T, info = lapack.dtrtri(cholesky, lower=0)
            if info != 0:  # pragma: no cover - R has a positive diagonal
                raise linalg.LinAlgError(f"dtrtri failed with info={info}.")
            extras["cholesky"] = cholesky
        else:
            T, extras["rotation"] = linalg.rq(self.normalization_.T.astype(np.float64))
        feature_map = _TriangularFeatures(
            landmarks, self.kernel, self._kernel_params(), T, self.n_jobs
        )
        dask = _dask.is_dask_array(X)  # the same blocks, one task per row chunk
        return (_dask.DaskFeatureBlocks if dask else FeatureBlocks)(
            X, feature_map, self.n_components_, dtype, working_memory, cache, **extras
        )

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def transform(self, X):
        """Map X to the Nystroem features ``K(X, I) K(I, I)^{+1/2}``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data; with ``kernel="precomputed"`` the kernel values between
            these points and the training points, shape (n_samples, n_train).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
            Features, float32 for float32 input.
        """
        check_is_fitted(self)
        namespace = _array_api.dispatch_namespace(X)
        _array_api.check_same_kind(self, X, "components_", "transform")
        if namespace is not None:
            xp = namespace[0]
            X = _array_api.validate(self, X, xp, reset=False)
            W = xp.astype(self.normalization_.T, X.dtype)
            return _array_api.kernel_product(self, X, self.components_, W, xp)
        X = validate_data(
            self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False
        )
        dtype = X.dtype if X.dtype == np.float32 else np.float64
        return self._kernel_product(X, self.normalization_.T, dtype)

    @property
    def normalization_(self):
        # Documented in the class Attributes.  Computed at fit, except for
        # the estimators that fit in the kernel basis (_linalg.LandmarkBasis),
        # which never need it to predict: then on first use, once.
        check_is_fitted(self, "n_components_")
        return self._normalization_map()

    def _normalization_map(self):
        """``K(I, I)^{+1/2}``, computed on first use and kept."""
        if self._normalization is None:
            gram = self._landmark_gram()
            if _array_api.is_array_api_array(gram):
                xp = _array_api.namespace_of(gram)
                inverse = _array_api.inverse_sqrt(gram, xp)
                self._normalization = xp.astype(inverse, gram.dtype)
                return self._normalization
            self._normalization = _linalg.inverse_sqrt(gram).astype(
                gram.dtype, copy=False
            )
        return self._normalization

    # Documented in the class Attributes: (d_max, d_eff, d_ave, columns).
    dof_ = property(lambda self: self._dof_estimate()[0])
    effective_dof_ = property(lambda self: self._dof_estimate()[1])
    averaged_dof_ = property(lambda self: self._dof_estimate()[2])
    dof_columns_ = property(lambda self: self._dof_estimate()[3])

    def _dof_estimate(self):
        check_is_fitted(self, "n_components_")
        if self._dof is None:
            # Deferred at fit only for uniform landmarks at a fixed rank in
            # the kernel basis: from the landmark block, as the fit has it.
            self._dof = self._fixed_rank_dof(
                None,
                None,
                None,
                np.arange(self.n_components_),
                self._n_training_rows,
                # (From array-API landmarks: the p x p block on the host.)
                _array_api.to_host(self._landmark_gram()),
            )
        return self._dof

    def _landmark_gram(self):
        """``K(I, I)`` recomputed from the stored landmarks, as at fit."""
        if _array_api.is_array_api_array(self.components_):
            return _array_api.kernel(self.components_, self.components_, self)
        landmarks = KernelColumns(self.components_, self.kernel, self._kernel_params())
        return landmarks.landmark_gram(np.arange(self.n_components_))

    def _landmarks(self):
        """Landmark rows, or their indices for a precomputed kernel."""
        if self.kernel == "precomputed":
            return self.component_indices_
        return self.components_

    def _kernel_product(self, X, W, dtype=np.float64):
        """``K(X, I) W`` by blocks of rows (see :func:`_blocks.kernel_product`):
        predictions and features without the ``n x p`` kernel block."""
        if _dask.is_dask_array(X):
            return self._kernel_to_landmarks(X).astype(dtype, copy=False) @ W
        landmarks = self._landmarks()
        W = np.asarray(W, dtype=dtype)
        return kernel_product(
            X, landmarks, self.kernel, self._kernel_params(), W, dtype
        )

    def _kernel_to_landmarks(self, X):
        """``K(X, I)``, the only kernel evaluation a fitted model needs."""
        landmarks = self._landmarks()
        if _dask.is_dask_array(X):
            params = self._kernel_params()
            return _dask.kernel_block(X, landmarks, self.kernel, params)
        return kernel_block(
            X, landmarks, self.kernel, self._kernel_params(), self.n_jobs
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = _array_api.supports(self)
        return tags
