"""Nystroem feature map whose rank follows the degrees of freedom."""

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, sparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._blocks import FeatureBlocks
from ._dof import _estimate_from_access, _landmark_dof, _quadratic_forms
from ._kernels import KERNEL_CONSTRAINTS, KernelColumns, get_kernel_params
from ._rank import auto_rank
from ._sampling import PartialCholesky, uniform_columns
from ._validation import (
    check_kernel_values,
    check_landmark_gram,
    check_penalty_resolution,
    checked_kernel,
)

# Eigenvalues of K(I, I) below this fraction of the largest are treated as
# zero in the pseudo-inverse square root: they come from duplicated or
# nearly dependent landmarks and would only amplify rounding errors.
PINV_RTOL = 1e-12


def _landmark_eigh(W, rtol=PINV_RTOL):
    """Eigendecomposition of the landmark Gram ``K(I, I)``, small ones zeroed.

    A float32 block carries only about 1e-7 relative precision: eigenvalues
    below that are noise and the threshold follows the block's dtype.
    """
    rtol = max(rtol, 10 * np.finfo(W.dtype).eps)
    W = 0.5 * (W + W.T)
    eigvals, eigvecs = linalg.eigh(W.astype(np.float64))
    keep = eigvals > rtol * max(eigvals.max(initial=0.0), np.finfo(float).tiny)
    return np.where(keep, eigvals, 0.0), eigvecs


def _inverse_sqrt(W, rtol=PINV_RTOL):
    """Symmetric pseudo-inverse square root ``W^{+1/2}`` of a PSD matrix."""
    return _inverse_sqrt_from_eigh(*_landmark_eigh(W, rtol))


def _inverse_sqrt_from_eigh(eigvals, eigvecs):
    keep = eigvals > 0
    scaled = eigvecs[:, keep] / np.sqrt(eigvals[keep])
    return scaled @ eigvecs[:, keep].T


def _kernel_block(X, landmarks, kernel, params, n_jobs=None):
    """``K(X, I)``; with a precomputed kernel ``landmarks`` are column indices."""
    if kernel == "precomputed":
        block = X[:, landmarks]
        block = block.toarray() if sparse.issparse(block) else np.asarray(block)
    else:
        block = pairwise_kernels(
            X,
            landmarks,
            metric=checked_kernel(kernel),
            filter_params=True,
            n_jobs=n_jobs,
            **params,
        )
    dtype = X.dtype if X.dtype == np.float32 else np.float64
    return check_kernel_values(np.asarray(block, dtype=dtype), kernel)


class _TriangularFeatures:
    """``x -> K(x, I) T``: the Nystroem features in a triangular basis.

    With ``normalization_.T = T Q`` (an RQ decomposition: ``T`` upper
    triangular, ``Q`` orthogonal), ``transform(x) = K(x, I) T Q``.  Fits work
    with ``K(x, I) T``, a triangular product (half the flops of the general
    one), and rotate the ``p`` coefficients they find by ``Q^T`` at the end:
    ridge and logistic objectives are invariant under that rotation.
    Picklable, so that other executors can ship it to their workers.
    """

    def __init__(self, landmarks, kernel, params, factor, n_jobs=None):
        self.landmarks = landmarks
        self.kernel = kernel
        self.params = params
        self.factor = factor
        self.n_jobs = n_jobs

    def __call__(self, X):
        K = _kernel_block(X, self.landmarks, self.kernel, self.params, self.n_jobs)
        T = self.factor.astype(K.dtype, copy=False)
        trmm = linalg.get_blas_funcs("trmm", (T, K))
        # (K T)^T = T^T K^T, computed in place in K's Fortran-ordered transpose.
        return trmm(1.0, T, K.T, side=0, lower=0, trans_a=1, overwrite_b=1).T


class DoFNystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Nystroem feature map with a rank chosen from the degrees of freedom.

    Picks ``p`` landmark points ``I`` (uniformly at random or by greedy
    pivoted Cholesky) and maps ``x`` to
    ``phi(x) = K(x, I) K(I, I)^{+1/2}``, so that on the training set
    ``Phi Phi^T = L = K(:, I) K(I, I)^+ K(I, :)``, the Nystroem approximation
    of the kernel matrix.  A :class:`~sklearn.linear_model.Ridge` with the same
    ``alpha`` on these features computes ``L (L + alpha I)^{-1} y``.

    Bach (2013) shows that this loses no prediction accuracy as soon as ``p``
    grows linearly with the *maximal marginal degrees of freedom*
    ``d_max = n max_i [K (K + alpha I)^{-1}]_ii`` (up to a logarithm).  With
    ``n_components="auto"`` the transformer estimates ``d_max`` without
    forming the ``n x n`` matrix (:func:`estimate_degrees_of_freedom`, whose
    columns are then reused as landmarks) and sets ``p`` by
    :func:`auto_rank`.

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
    n_components : "auto" or int, default="auto"
        Number of landmarks ``p``.  ``"auto"``: from the estimated ``d_max``
        by :func:`auto_rank`; an int larger than ``n_samples`` is clipped
        with a warning.  Pass ``theoretical_rank(...)`` for Bach's worst-case
        rank.
    sampling : {"uniform", "pivoted"}, default="uniform"
        ``"uniform"``: landmarks drawn uniformly without replacement;
        ``"pivoted"``: greedy incomplete Cholesky with column pivoting (each
        new landmark is the point worst explained by the current ones; only
        the kernel diagonal and the chosen columns are evaluated).
    tol : float, default=0.1
        Relative tolerance of the degrees-of-freedom estimate.
    random_state : int, RandomState instance or None, default=None
        Seed of the uniform sampling.
    n_jobs : int, default=None
        Number of jobs for the kernel evaluations.

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
    dof_ : float
        Estimated maximal marginal degrees of freedom ``d_max``.
    effective_dof_ : float
        Estimated degrees of freedom ``d_eff = tr K (K + alpha I)^{-1}``.
    averaged_dof_ : float
        Estimated ``d_ave = tr K^2 (K + alpha I)^{-2}``.
    dof_columns_ : int
        Number of kernel columns the estimate used.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when they are all strings.

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : Fixed-rank uniform Nystroem.
    estimate_degrees_of_freedom : The estimate behind ``n_components="auto"``.
    auto_rank : The automatic rank rule.

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
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "sampling": [StrOptions({"uniform", "pivoted"})],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
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
        tol=0.1,
        random_state=None,
        n_jobs=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.n_components = n_components
        self.sampling = sampling
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _kernel_params(self):
        return get_kernel_params(
            self.kernel, self.gamma, self.coef0, self.degree, self.kernel_params
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Choose the landmarks and the rank.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; with ``kernel="precomputed"`` the ``n x n`` Gram
            matrix.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted transformer.
        """
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])
        self._fit(X)
        return self

    def _fit(self, X):
        access = KernelColumns(X, self.kernel, self._kernel_params(), self.n_jobs)
        n_samples = X.shape[0]

        if self.n_components == "auto":
            # The rank rule reads d_max only: certifying d_eff as well would
            # cost columns the features never use.
            dof, chol, grow = _estimate_from_access(
                access,
                self.alpha,
                None,
                self.tol,
                self.random_state,
                self.sampling,
                certify_d_eff=False,
                bounds=False,
            )
            n_components = auto_rank(dof.d_max, self.sampling, n_samples)
            # The landmarks are the first pivots of the factor the estimate
            # grew: uniform pivots are a prefix of one permutation and greedy
            # pivots a prefix of one greedy sequence, so nothing is recomputed.
            if len(chol.pivots) < n_components:
                grow(n_components)
            indices = np.asarray(chol.pivots[:n_components], dtype=np.intp)
            estimate = (dof.d_max, dof.d_eff, dof.d_ave, dof.n_columns)
        else:
            n_components = self.n_components
            if n_components > n_samples:
                warnings.warn(
                    f"n_components={n_components} > n_samples={n_samples}: "
                    "n_components was set to n_samples, the exact kernel.",
                    UserWarning,
                    stacklevel=4,  # past fit and its _fit_context wrapper
                )
                n_components = n_samples
            indices, factor = self._fixed_rank_landmarks(access, n_components)
            estimate = None
        n_components = indices.shape[0]  # greedy pivoting may exhaust the rank

        gram = access.landmark_gram(indices)
        check_landmark_gram(gram, self.kernel)
        check_penalty_resolution(self.alpha, np.diag(gram), n_samples)
        eigvals, eigvecs = _landmark_eigh(gram)
        # With a precomputed kernel a landmark is only its index: storing its
        # row of the Gram matrix would make the fitted model grow with n.
        self.components_ = (
            indices.copy() if self.kernel == "precomputed" else X[indices]
        )
        self.normalization_ = _inverse_sqrt_from_eigh(eigvals, eigvecs).astype(
            X.dtype, copy=False
        )
        if estimate is None:
            estimate = self._fixed_rank_dof(eigvals, eigvecs, factor, indices, X)
        self.component_indices_ = indices
        self.n_components_ = n_components
        self._n_features_out = n_components
        self.dof_, self.effective_dof_, self.averaged_dof_, self.dof_columns_ = estimate

    def _fixed_rank_landmarks(self, access, n_components):
        """Landmarks for an int rank: ``(indices, factor or None)``.

        Uniform landmarks cost nothing; greedy pivots need the residual
        diagonal, hence the ``n x p`` factor, which the d.o.f. estimate then
        reuses.
        """
        n_samples = access.n_samples
        if self.sampling == "uniform":
            return uniform_columns(n_samples, n_components, self.random_state), None
        chol = PartialCholesky(access.columns, access.diagonal())
        chol.add_greedy(n_components)
        return np.asarray(chol.pivots, dtype=np.intp), chol.factor

    def _fixed_rank_dof(self, eigvals, eigvecs, factor, indices, X):
        """Degrees of freedom at a given rank from the landmark rows, O(p^3).

        Uniform landmarks are a uniform sample: ``(n / p) K(I, I)`` estimates
        the Gram matrix ``Phi^T Phi`` of the features (the usual Nystroem
        estimate of the spectrum), and the landmark rows' scores against it
        estimate the scores.  Greedy pivots are no sample, but their factor
        ``G`` gives ``Phi^T Phi`` up to a rotation (``G^T G``).  Either way the
        rows scored are the landmarks, which greedy pivoting picks among the
        worst explained points, so no pass over all rows is spent on it.
        """
        n_samples, p = X.shape[0], indices.shape[0]
        if factor is None:
            spectrum = (n_samples / p) * eigvals
            # Rows K(I, I)^{1/2} of the features against (n / p) K(I, I).
            scores = (eigvecs**2) @ (eigvals / (spectrum + self.alpha))
        else:
            G = factor.astype(np.float64, copy=False)
            gram = G.T @ G
            spectrum = linalg.eigvalsh(gram)
            scores = _quadratic_forms(G[indices], gram + self.alpha * np.eye(p))
        d_max, d_eff, d_ave = _landmark_dof(scores, spectrum, self.alpha, n_samples)
        return d_max, d_eff, d_ave, p

    def _training_features(self, X, working_memory=None):
        """The features of ``X`` as :class:`FeatureBlocks` in the triangular
        basis of :class:`_TriangularFeatures`, with its rotation ``Q``."""
        T, Q = linalg.rq(self.normalization_.T.astype(np.float64))
        landmarks = self._landmarks()
        feature_map = _TriangularFeatures(
            landmarks, self.kernel, self._kernel_params(), T, self.n_jobs
        )
        dtype = X.dtype if X.dtype == np.float32 else np.float64
        blocks = FeatureBlocks(
            X, feature_map, self.n_components_, dtype, working_memory
        )
        blocks.rotation = Q
        return blocks

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
        X = validate_data(
            self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False
        )
        return self._kernel_to_landmarks(X) @ self.normalization_.T.astype(
            X.dtype, copy=False
        )

    def _landmarks(self):
        """Landmark rows, or their indices for a precomputed kernel."""
        if self.kernel == "precomputed":
            return self.component_indices_
        return self.components_

    def _kernel_to_landmarks(self, X):
        """``K(X, I)``, the only kernel evaluation a fitted model needs."""
        landmarks = self._landmarks()
        return _kernel_block(
            X, landmarks, self.kernel, self._kernel_params(), self.n_jobs
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class _NystroemFeaturesMixin:
    """The ``nystroem_`` step shared by the estimators built on DoFNystroem.

    An estimator using it has the kernel parameters and ``n_components``,
    ``sampling``, ``random_state`` and ``n_jobs`` of :class:`DoFNystroem`.
    """

    def _fit_nystroem(self, X, alpha, dof_tol=0.1):
        """Fit ``nystroem_`` at ``alpha``; the training features as blocks.

        Returns a :class:`FeatureBlocks` in the triangular basis; coefficients
        found on it are mapped to ``nystroem_.transform``'s basis by
        ``blocks.rotation.T``.
        """
        self.nystroem_ = DoFNystroem(
            kernel=self.kernel,
            gamma=self.gamma,
            coef0=self.coef0,
            degree=self.degree,
            kernel_params=self.kernel_params,
            alpha=alpha,
            n_components=self.n_components,
            sampling=self.sampling,
            tol=dof_tol,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
        )
        self.nystroem_.fit(X)
        self.n_components_ = self.nystroem_.n_components_
        self.dof_ = self.nystroem_.dof_
        self.effective_dof_ = self.nystroem_.effective_dof_
        return self.nystroem_._training_features(X)
