"""Nystroem feature map whose rank follows the degrees of freedom."""

import warnings
from functools import partial
from numbers import Integral, Real

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

from . import _array_api, _dask, _linalg, _memory, _parallel, _tiles
from ._blocks import FeatureBlocks, kernel_product, one_blas_thread
from ._dof import landmark_row_dof, repeated_rows_dof, uniform_landmark_dof
from ._kernel_objects import is_kernel_object
from ._kernels import (
    CHUNK_ENTRIES,
    KernelColumns,
    get_kernel_params,
    kernel_block,
    kernel_columns,
)
from ._landmark_block import (
    DIRECT,
    EIGH,
    PLAIN_FIT,
    FitRequest,
    LandmarkFactor,
    caller_factors,
    factor_block,
    plan_block,
)
from ._landmarks import landmark_block, select_landmarks
from ._progress import Progress
from ._samplers import SAMPLING_OPTIONS, resolve_sampling
from ._validation import (
    KERNEL_CONSTRAINTS,
    check_penalty_resolution,
    user_stacklevel,
)


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


def _cap_warning(nystroem, rank, selection, detail, n_samples):
    """The warning of an automatic rank stopped at ``rank`` short of the
    rank ``selection.requested``, below ``selection.cap``: by
    ``max_components`` where it was given, else by the memory budget, by the
    rows, or by the kernel's numerical rank on the rows read (no column left
    to add); it names the memory a certified fit at the rank requested
    needs."""
    requested, cap = selection.requested, selection.cap
    needed = _memory.format_bytes(_memory.rank_bytes(requested))
    start = f"n_components={nystroem.n_components!r} stopped at "
    if rank >= n_samples:
        start += f"all {n_samples} rows"
        advice = "Raise the penalty."
    elif rank < cap:
        start += (
            f"{rank} components, all that the kernel's numerical rank on the "
            "rows read allows"
        )
        advice = "Raise the penalty."
    elif nystroem.max_components is None:
        budget = _memory.format_bytes(_memory.memory_budget())
        start += (
            f"{rank} components, the most that the memory budget of {budget} "
            "allows (max_components=None)"
        )
        advice = (
            "Raise the budget (sklearn_dof.set_config(memory_budget=...)) or "
            "max_components, or the penalty."
        )
    else:
        start += f"max_components={nystroem.max_components}"
        advice = "Raise max_components, or the penalty."
    return (
        f"{start}: {detail} asks for about {requested} components, which "
        f"need about {needed} of memory. {advice}"
    )


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
        self.triangular_product = one_blas_thread()
        self.columns = kernel_columns(landmarks, kernel, params)

    def stream_rows(self):
        """Rows per chunk that a pass may evaluate and consume while they
        stay in a core's cache (``FeatureBlocks.reduce(stream=True)``), or
        None where a chunk is no cheaper than a block: in a triangular basis
        every chunk would pay a ``p x p`` product of a few rows."""
        if self.triangular is not None:
            return None
        return max(1, CHUNK_ENTRIES // max(self.landmarks.shape[0], 1))

    def __call__(self, X):
        K = kernel_block(
            X, self.landmarks, self.kernel, self.params, self.n_jobs, self.columns
        )
        if self.triangular is None:  # the kernel basis: K(x, I) itself
            return K
        T = self.triangular.astype(K.dtype, copy=False)
        # scipy's trmm holds the GIL: numpy's product in a worker thread,
        # by panels (half the flops, _tiles.times_upper).
        if not self.triangular_product or _parallel.in_worker():
            return _tiles.times_upper(K, T)
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
    estimated degrees of freedom (:func:`dof_rank`).  Either way the rank
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
        :func:`dof_rank` of the estimated degrees of freedom; an int larger
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
        Cap of an automatic rank (``"auto"`` and ``"dof"``).  None: from
        the memory budget ``B`` (:func:`~sklearn_dof.set_config`; by
        default a quarter of the machine's memory), the largest rank ``r``
        whose certificate fits it, ``40 r^2 <= B`` bytes: a factor of two
        rows per column, the kernel columns of its last doubling and two
        ``r x r`` float64 matrices (``B = 6`` GiB gives 12,690).  The factor
        the certified rank grows holds at most ``2 B / 5``, or two rows per
        column of ``max_components`` where that is more: beyond
        ``max(B / (20 max_components), 2 max_components)``
        rows the certificate reads a uniform subsample of the rows at the
        same ``lambda = alpha / n``.  When the cap stops the rank short of
        ``loss_tol`` a warning says what rank the certificate asks for and
        the memory that rank needs.
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
        :class:`~sklearn_dof.DoFKernelRidge`, on first read), as for the
        uniform landmarks that the certified rank of
        :class:`~sklearn_dof.DoFKernelLogisticRegression` keeps.  Where an
        automatic rank of the squared loss makes every row a landmark
        (``exact_``; not with a precomputed kernel, whose matrix is not
        kept), exact, on first read (``n^3`` flops, in the memory of the
        kernel matrix); so where the landmarks are the distinct rows of an
        estimator's fit on repeated rows, for all the rows.
    effective_dof_ : float
        Estimated degrees of freedom ``d_eff = tr K (K + alpha I)^{-1}``.
    averaged_dof_ : float
        Estimated ``d_ave = tr K^2 (K + alpha I)^{-2}``.
    dof_columns_ : int
        Number of kernel columns the estimate used (``n_components_`` for an
        int rank).
    alpha_ : float
        The penalty the rank and the degrees of freedom are for: ``alpha``,
        or inside an estimator that searches a grid, the penalty of the grid
        its certified rank (or its search) chose.
    loss_estimate_ : float
        With a certified ``"auto"`` rank, its estimated loss of test error
        relative to exact kernel ridge at ``alpha_`` (NaN otherwise).
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
    dof_rank : The paper's rank rule.

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
        self._fit(X, FitRequest(response=_numeric_response(y, X.shape[0])))
        # A fitted transformer's transform changes no state: the map now.
        self._normalization_map()
        return self

    def _validate_fit_data(self, X):
        validate = _dask.validate_data if _dask.is_dask_array(X) else validate_data
        return validate(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])

    def _fit(self, X, request=PLAIN_FIT):
        """Fit on validated ``X`` for a caller's :class:`FitRequest`: what
        the caller's next step uses of the landmark block
        (:func:`~sklearn_dof._landmark_block.caller_factors`).

        The fit reads as its steps: the landmarks and their rank
        (:func:`~sklearn_dof._landmarks.select_landmarks`), the route of
        the landmark block decided once
        (:func:`~sklearn_dof._landmark_block.plan_block`) and run
        (:func:`~sklearn_dof._landmark_block.factor_block`), the fitted
        attributes, and the degrees of freedom of the landmarks.  The
        fitted transformer keeps no ``p x p`` (or ``n x r``) matrix it never
        transforms with: on the Cholesky routes ``normalization_`` waits for
        its first read.
        """
        columns = _dask.DaskKernelColumns if _dask.is_dask_array(X) else KernelColumns
        access = columns(X, self.kernel, self._kernel_params(), self.n_jobs)
        n_samples = X.shape[0]
        request = request.resolved(self.kernel, X.dtype)
        progress = Progress(self.verbose, type(self).__name__)
        selection = self._select(access, X, request, progress)
        self._record_rank(selection, n_samples)
        plan = plan_block(selection, self.kernel, request, n_samples)
        # (Read before the factorisation may overwrite K(I, I).)
        check_penalty_resolution(self.alpha_, np.diag(selection.gram), n_samples)
        block = factor_block(
            plan,
            selection,
            self.alpha_,
            n_samples,
            self.kernel,
            X.dtype,
            landmark_gram=partial(
                landmark_block, selection.landmarks, access, self.kernel
            ),
        )
        if block.consumed:
            selection = selection._replace(gram=None)
        description = "every row, the exact kernel" if plan.exact else None
        progress(
            f"{selection.landmarks.shape[0]} landmarks; landmark block: "
            f"{description or block.description}"
        )
        self._store_landmarks(access, selection, X.dtype)
        self.exact_ = plan.exact
        self._normalization = block.normalization
        self._dof = self._selection_dof(access, X, selection, block)
        if (
            isinstance(self.n_components, str)
            and self.n_components == "auto"
            and request.objective == "squared"
            and self._every_row_a_landmark()
        ):
            # The rounds' estimate, cut short where they jumped to every
            # row: exact on first read (_deferred_dof).
            self._dof = None
        return caller_factors(block, selection)

    def _select(self, access, X, request, progress):
        """The :class:`~sklearn_dof._landmarks.LandmarkSelection` of this
        transformer's sampling rule and rank."""
        n_samples = X.shape[0]
        n_components = self.n_components
        if isinstance(n_components, Integral) and n_components > n_samples:
            warnings.warn(
                f"n_components={n_components} > n_samples={n_samples}: "
                "n_components was set to n_samples, the exact kernel.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            n_components = n_samples
        return select_landmarks(
            access,
            X,
            resolve_sampling(self.sampling, n_samples, self.n_components),
            n_components,
            self.alpha,
            self.tol,
            self.random_state,
            self.kernel,
            request=request,
            loss_tol=self.loss_tol,
            max_components=self.max_components,
            progress=progress,
        )

    def _record_rank(self, selection, n_samples):
        """``alpha_`` (``alpha``, or a grid's certified penalty),
        ``loss_estimate_`` and ``requested_components_``; warns where the
        cap stopped the rank."""
        self.alpha_ = float(self.alpha if selection.alpha is None else selection.alpha)
        self.loss_estimate_ = np.nan if selection.loss is None else selection.loss
        self.requested_components_ = selection.requested
        if selection.requested is None:
            return
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
                f"the loss estimate (at {rank} components no loss within "
                f"loss_tol={self.loss_tol:g} is certified: the error still "
                "falls, or the columns do not yet resolve the kernel down to "
                "the penalty)"
            )
        warnings.warn(
            _cap_warning(self, rank, selection, detail, n_samples),
            UserWarning,
            stacklevel=user_stacklevel(),
        )

    def _store_landmarks(self, access, selection, dtype):
        """``components_``, ``component_indices_`` and ``n_components_``."""
        landmarks = selection.landmarks
        # With a precomputed kernel a landmark is only its index: storing its
        # row of the Gram matrix would make the fitted model grow with n.
        if selection.points:
            self.components_ = landmarks.astype(dtype, copy=False)
        elif self.kernel == "precomputed":
            self.components_ = landmarks.copy()
        else:
            self.components_ = access.rows(landmarks)
        self.component_indices_ = None if selection.points else landmarks
        # (A rule may exhaust the rank before n_components.)
        self.n_components_ = landmarks.shape[0]
        self._n_features_out = self.n_components_
        self._n_training_rows = access.n_samples
        self._row_counts = None

    def _selection_dof(self, access, X, selection, block):
        """``(d_max, d_eff, d_ave, columns)`` of the fit, or None where it
        waits for the first read of ``dof_``: uniform landmarks at a fixed
        rank on a Cholesky route (their ``O(p^3)`` estimate, as costly as the
        fit's own factorisations, see doc/architecture.rst), the uniform
        landmarks a log-loss's certified rank keeps, and exact fits solved
        directly."""
        if selection.points:
            return self._points_dof(access, X, selection.estimate)
        if isinstance(selection.estimate, str):  # LANDMARK_DOF: on first read
            return None
        if selection.estimate is not None:
            return selection.estimate
        if block.route == DIRECT or (block.route != EIGH and selection.factor is None):
            return None
        return self._fixed_rank_dof(
            block.eigvals,
            block.eigvecs,
            selection.factor,
            selection.landmarks,
            access.n_samples,
            selection.gram,
        )

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
            dof = uniform_landmark_dof(gram, self.alpha_, n_samples)
            if dof is not None:
                return (*dof, p)
            eigvals, eigvecs, _ = _linalg.landmark_eigh(gram)
        if chol is None:
            spectrum = (n_samples / p) * eigvals
            # Rows K(I, I)^{1/2} of the features against (n / p) K(I, I).
            scores = (eigvecs**2) @ (eigvals / (spectrum + self.alpha_))
        else:
            gram = chol.gram()
            spectrum = linalg.eigvalsh(gram)
            scores = chol.quadratic_forms(
                gram + self.alpha_ * np.eye(gram.shape[0]), rows=indices
            )
        d_max, d_eff, d_ave = landmark_row_dof(scores, spectrum, self.alpha_, n_samples)
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
        lower = forms(G, gram + self.alpha_ * np.eye(G.shape[1]))
        scores = np.clip(lower + 0.5 * residual / self.alpha_, lower, 1.0)
        shrink = _linalg.shrinkage(linalg.eigvalsh(gram), self.alpha_)
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
        to every row (see ``_ridge_solve.KernelBasisRidgeProblem``): ``R^{-1}``
        with the :class:`~sklearn_dof._landmark_block.LandmarkFactors`
        ``factors`` that ``_fit`` returned (and
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
            # cache would only copy it, whatever ``cache`` asks.  In float64
            # its blocks are views, which the statistics read without
            # overwriting (``owns_blocks`` is False); a copy of each block at
            # every pass, out of the column-major factor, made the Newton
            # fit's Hessian products several times slower
            # (doc/design/logistic.rst, "Measurements behind the code's
            # choices").
            if factors.features.dtype == np.float64:
                return FeatureBlocks.from_array(
                    factors.features,
                    working_memory,
                    cholesky=factors.cholesky,
                    factor=factors.sums,
                    start=factors.start,
                )
            return FeatureBlocks(
                factors.features,
                _FactorRows(),
                self.n_components_,
                np.float64,
                working_memory,
                cache=False,
                cholesky=factors.cholesky,
                factor=factors.sums,
                start=factors.start,
            )
        if kernel_basis and factors is None:
            T = None
            normalization = self.normalization_.T.astype(np.float64)
            extras["basis"] = _linalg.LandmarkBasis(matrix=normalization)
        elif kernel_basis:
            T = None
            extras["basis"] = _linalg.LandmarkBasis(
                cholesky=factors.cholesky,
                gram=factors.gram,
                shift=factors.shift,
                landmark_gram=self._landmark_gram,
            )
            if factors.rows is not None:
                extras["factor"] = LandmarkFactor(factors.rows, self.component_indices_)
            extras["start"] = factors.start
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

    def _stand_for_repeated_rows(self, counts):
        """The landmarks, every row of a fit on distinct rows, stand for
        rows repeated ``counts`` times: ``dof_`` and the others become
        those rows' (:func:`~sklearn_dof._dof.repeated_rows_dof`, exact, on
        first read)."""
        self._row_counts = np.asarray(counts)
        self._n_training_rows = int(self._row_counts.sum())
        self._dof = None

    def _dof_estimate(self):
        check_is_fitted(self, "n_components_")
        if self._dof is None:
            self._dof = self._deferred_dof()
        return self._dof

    def _deferred_dof(self):
        """``(d_max, d_eff, d_ave, columns)`` on first read.

        Deferred at fit for uniform landmarks at a fixed rank in the kernel
        basis, and those a log-loss's certified rank keeps
        (_landmarks.LANDMARK_DOF): from the landmark block, as the fit has
        it.  Also for an automatic rank of the squared loss that ends with
        every row a landmark, exactly (:func:`~sklearn_dof._dof.repeated_rows_dof`,
        ``n^3`` flops in the memory of ``K``): the rounds stop their doubling
        estimate where they jump to every row, short of its tolerance.  Rows
        repeated ``counts`` times (:meth:`_stand_for_repeated_rows`) count as
        many.
        """
        counts = getattr(self, "_row_counts", None)
        if counts is None and self._every_row_a_landmark():
            counts = np.ones(self.n_components_)
        if counts is not None:
            gram = np.asarray(self._landmark_gram(), dtype=np.float64)
            dof = repeated_rows_dof(gram, counts, self.alpha_)
            if dof is not None:
                return (*dof, self.n_components_)
        return self._fixed_rank_dof(
            None,
            None,
            None,
            np.arange(self.n_components_),
            self._n_training_rows,
            # (From array-API landmarks: the p x p block on the host.)
            _array_api.to_host(self._landmark_gram()),
        )

    def _every_row_a_landmark(self):
        """Whether the fit made every training row a landmark (exact kernel
        ridge), rows that ``components_`` holds (NumPy or sparse, not a
        precomputed kernel's)."""
        return (
            getattr(self, "exact_", False)
            and self.n_components_ == self._n_training_rows
            and self.kernel != "precomputed"
            and not _array_api.is_array_api_array(self.components_)
        )

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
        # (scikit-learn's kernel objects take dense arrays only.)
        tags.input_tags.sparse = not is_kernel_object(self.kernel)
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = _array_api.supports(self)
        return tags
