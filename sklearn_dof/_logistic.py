"""Kernel logistic regression on Nystroem features of degrees-of-freedom rank."""

from numbers import Integral, Real

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
)

from . import _array_api, _dask, _memory, _parallel
from ._base import NYSTROEM_CONSTRAINTS, DoFKernelMixin
from ._landmark_block import FitRequest
from ._newton import DEFAULT_MAX_HESSIAN_BYTES, auto_inner_solver, logistic_newton
from ._progress import Progress
from ._samplers import gives_rows


def _feature_cache_bytes():
    """Memory up to which Newton's features ``K(x, I) R^{-1}`` are kept
    after their first pass: the memory budget.  Each Newton step makes
    three passes (the Hessian, the step's decision values, the gradient),
    and features computed on the fly cost the triangular solve, ``n p^2``
    flops, at every pass, as much as the Hessian itself."""
    return _memory.memory_budget()


# Bounds on the curvature of the loss in the decision values, which the
# degrees-of-freedom rule reads its degrees of freedom at alpha / bound
# (FitRequest.curvature): p (1 - p) <= 1/4 for the binomial loss, and for
# the multinomial loss diag(p) - p p^T <= (I - 1 1^T / K) / 2 (Boehning,
# 1992), whose largest eigenvalue, 1/2, is reached where two classes share
# all the probability.  Keyed by the class count, 3 for three or more.
_CURVATURE_BOUND = {2: 0.25, 3: 0.5}


class DoFKernelLogisticRegression(DoFKernelMixin, ClassifierMixin, BaseEstimator):
    """Kernel logistic regression on Nystroem features of automatic rank.

    Fits a :class:`DoFNystroem` feature map ``phi`` (stored as
    ``nystroem_``; its rank follows the degrees of freedom at ``alpha``),
    then L2-penalised logistic regression on ``phi(X)`` by a damped Newton
    method: it minimises

    .. math::

        \\sum_i w_i \\ell_i + \\frac{\\alpha}{2} \\|W\\|_F^2,

    the objective of ``LogisticRegression(C=1 / alpha)`` on the features,
    with the binomial loss for two classes and the multinomial (softmax)
    loss for more; intercepts are not penalised.  Since ``phi(x)^T phi(x')``
    approximates ``k(x, x')``, this approximates kernel logistic regression
    with the RKHS penalty ``(alpha / 2) ||f||^2``.

    The solver is Newton's method, which needs a handful of steps whatever
    ``alpha``, where first-order methods slow down as ``alpha`` shrinks.
    For two classes each step forms and Cholesky-factors the ``(p + 1)^2``
    Hessian in ``O(n p^2 + p^3)``.  For ``m`` classes, or a Hessian over
    ``max_hessian_bytes``, each step is solved by conjugate gradients on
    products with the Hessian, ``O(n p m)`` each, preconditioned by the
    features' Gram matrix and, where the curvature is uneven, by the
    Hessian's per-class blocks (Newton-CG), where forming the multinomial
    Hessian would cost ``O(n (m p)^2)`` per step.

    Parameters
    ----------
    alpha : float, default=1.0
        Penalty, ``C = 1 / alpha`` of
        :class:`~sklearn.linear_model.LogisticRegression`.  A rank from the
        degrees of freedom (``n_components="dof"``, and ``"auto"`` on Dask
        arrays) reads them at ``alpha / c``, where ``c`` bounds
        the curvature of the loss: ``1/4`` for two classes (``p (1 -
        p)``), ``1/2`` for more (the largest eigenvalue of the multinomial
        Hessian ``diag(p) - p p^T`` of a row, Böhning's bound [3]_).  That is the
        ridge regression of Newton's quadratic model when every curvature
        is at its bound; ``nystroem_.alpha`` stays ``alpha``.
    kernel : str or callable, default="rbf"
        Kernel of :class:`DoFNystroem`: a name of
        :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"`` or a callable.
    gamma : float, default=None
        Parameter of the RBF, laplacian, polynomial, exponential chi2 and
        sigmoid kernels.
    coef0 : float, default=None
        Zero coefficient of the polynomial and sigmoid kernels.
    degree : float, default=None
        Degree of the polynomial kernel.
    kernel_params : dict, default=None
        Extra keyword arguments of the kernel.
    n_components : "auto", "dof" or int, default="auto"
        Rank of the Nystroem features, see :class:`DoFNystroem`.  With
        ``"auto"`` the landmarks grow by doubling until a rank at most a
        quarter of those grown (any rank, at ``max_components``) has its
        test log-loss estimated to be within ``loss_tol`` (relative) of the
        model on every row as a landmark (see :ref:`automatic_rank`), and
        the model keeps every landmark grown: its fit at that rank is the
        last round's, and the certified rank would be within ``loss_tol``
        but short of the accuracy that scikit-learn's pipelines reach in
        less time than the rounds take (:ref:`logistic_rank`).  The
        leave-one-out log-losses come from Newton's quadratic model of the
        logistic fit, a ridge regression weighted by the curvatures ``p_i
        (1 - p_i)``, for more classes by each row's curvature along its own
        gradient (:func:`~sklearn_dof._certificate.logistic_certificate`).
        On Dask arrays ``"auto"`` is the paper's rule from the degrees of
        freedom, as ``"dof"``.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        Landmark selection of :class:`DoFNystroem` (see there).
    loss_tol : float, default=0.01
        Relative loss of test log-loss that ``n_components="auto"`` allows
        at the rank it certifies (the model keeps the landmarks grown past
        it).
    max_components : int, default=None
        Cap of an automatic rank (None: from the memory budget), see
        :class:`DoFNystroem`.
    fit_intercept : bool, default=True
        Whether to fit unpenalised intercepts.
    tol : float, default=1e-8
        Stopping rule of the Newton solver: maximal absolute gradient and
        half the squared Newton decrement at most ``tol``, for the objective
        divided by ``sum_i w_i`` (as in scikit-learn's ``newton-cholesky``).
    max_iter : int, default=100
        Maximal number of Newton steps.
    max_hessian_bytes : int, default=2**28
        Memory budget (256 MiB) of the two-class Hessian, beyond which the
        steps come from Newton-CG, and of Newton-CG's preconditioner: the
        Cholesky factor of the features' Gram matrix, then, if a step needs
        many products (a small ``alpha``), the per-class diagonal blocks of
        the Hessian, when those fit in the budget; otherwise the Hessian's
        diagonal (which can need many products for a very small
        ``alpha``).
    solver : {"auto", "newton-cholesky", "newton-cg"}, default="auto"
        How each Newton step is solved.  ``"newton-cholesky"`` forms and
        factors the ``(m (p + 1))^2`` Hessian (whatever
        ``max_hessian_bytes``); ``"newton-cg"`` runs preconditioned
        conjugate gradients on Hessian-vector products.  ``"auto"``:
        Cholesky for two classes and fewer than 384 landmarks (whose
        Hessian fits ``max_hessian_bytes``), Newton-CG otherwise, which for
        more classes took from a fifth to a thirty-second of the Cholesky
        steps' time, and for two classes 0.39 times at 3,854 landmarks
        (measured in :ref:`logistic <logistic>`).
    random_state : int, RandomState instance or None, default=None
        Seed of the landmark sampling.
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
        began), then the landmark block and the solve.  Nothing with 0.

    Attributes
    ----------
    kernel_ : str, callable or kernel object
        The kernel of the fit: ``kernel`` itself.
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    nystroem_ : DoFNystroem
        The fitted feature map (on the samples of positive weight).
    coef_ : ndarray of shape (1, n_components_) or (n_classes, n_components_)
        Coefficients of the Nystroem features in the decision function; one
        row, the log-odds of ``classes_[1]``, for a binary problem.
    dual_coef_ : ndarray of shape (1, n_components_) or (n_classes, n_components_)
        Weights of the landmarks, ``coef_ @ nystroem_.normalization_``: the
        decision function is ``K(X, landmarks) @ dual_coef_.T + intercept_``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercepts, zero without ``fit_intercept``.
    n_iter_ : ndarray of shape (1,)
        Number of Newton steps (on a certified rank, from the certificate's
        own logistic fit on those landmarks, where Newton starts).
    solver_ : {"newton-cholesky", "newton-cg"}
        Inner solver used (see ``solver``).
    n_components_ : int
        Number of Nystroem features.
    dof_ : float
        Estimated maximal marginal degrees of freedom of ``nystroem_``, at
        ``alpha / c`` where the rank follows them (see ``alpha``).
    effective_dof_ : float
        Estimated degrees of freedom of ``nystroem_``, at the same penalty.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when they are all strings.

    See Also
    --------
    DoFNystroem : The feature map.
    sklearn.linear_model.LogisticRegression : The same objective on given
        features.
    sklearn.svm.SVC : Exact kernel classifier (hinge loss).

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.
    .. [2] J. Zhu and T. Hastie, "Kernel logistic regression and the import
       vector machine", Journal of Computational and Graphical Statistics,
       14(1), 2005.
    .. [3] D. Böhning, "Multinomial logistic regression algorithm", Annals
       of the Institute of Statistical Mathematics, 44(1), 1992.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sklearn_dof import DoFKernelLogisticRegression
    >>> X, y = make_moons(1000, noise=0.2, random_state=0)
    >>> clf = DoFKernelLogisticRegression(
    ...     alpha=1.0, gamma=1.0, sampling="pivoted", random_state=0
    ... ).fit(X, y)
    >>> print(f"accuracy {clf.score(X, y):.3f} with {clf.n_components_} features")
    accuracy 0.968 with 120 features
    >>> clf.n_iter_
    array([1], dtype=int32)
    >>> clf.predict_proba(X[:2]).round(2)
    array([[0.05, 0.95],
           [0.04, 0.96]])
    """

    _parameter_constraints: dict = {
        **NYSTROEM_CONSTRAINTS,
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "loss_tol": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "max_hessian_bytes": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "newton-cholesky", "newton-cg"})],
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
        loss_tol=0.01,
        max_components=None,
        fit_intercept=True,
        tol=1e-8,
        max_iter=100,
        max_hessian_bytes=DEFAULT_MAX_HESSIAN_BYTES,
        solver="auto",
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.sampling = sampling
        self.loss_tol = loss_tol
        self.max_components = max_components
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.max_hessian_bytes = max_hessian_bytes
        self.solver = solver
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_parallel.with_n_jobs
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the Nystroem feature map and the logistic regression on it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; with ``kernel="precomputed"`` the ``n x n`` Gram
            matrix.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the loss terms.  Samples of zero weight
            are left out of the fit, also of the choice of landmarks (except
            with ``kernel="precomputed"``).

        Returns
        -------
        self : object
            Fitted classifier.
        """
        progress = Progress(self.verbose, type(self).__name__)
        self.kernel_ = self.kernel
        if _array_api.dispatch_namespace(X) is not None:
            raise TypeError(
                f"{type(self).__name__} fits NumPy arrays only: its Newton "
                "solvers run on the host's BLAS. Under array_api_dispatch, pass "
                "NumPy arrays, or use DoFNystroem (which runs in the array's "
                "namespace) ahead of a classifier that supports the array API."
            )
        X, y_index, sample_weight = self._weighted_rows(X, y, sample_weight)
        # The automatic rank is certified on the labels: class indices for
        # two classes, their indicator matrix for more.  The landmark block
        # by its Cholesky factor R (kernel_basis), not the eigendecomposition
        # and RQ decomposition of normalization_ (about 9 p^3 and 4 p^3
        # flops against R's p^3 / 3; doc/design/logistic.rst, "Measurements
        # behind the code's choices").
        n_classes = self.classes_.shape[0]
        request = FitRequest(
            response=y_index if n_classes == 2 else np.eye(n_classes)[y_index],
            objective="logistic",
            kernel_basis=True,
            curvature=_CURVATURE_BOUND[min(n_classes, 3)],
            features_bytes=_feature_cache_bytes(),
        )
        features = self._triangular_features(
            X, self._fit_nystroem(X, self.alpha, request, loss_tol=self.loss_tol)
        )
        result = logistic_newton(
            features,
            y_index,
            self.alpha,
            n_classes=n_classes,
            sample_weight=sample_weight,
            fit_intercept=self.fit_intercept,
            tol=self.tol,
            max_iter=self.max_iter,
            max_hessian_bytes=self.max_hessian_bytes,
            inner_solver=self.solver.removeprefix("newton-"),
            start=features.start,
        )
        self._store_newton(result, features, progress)
        return self

    def _weighted_rows(self, X, y, sample_weight):
        """Validated ``X``, the class index of each row and the weights,
        of the rows of positive weight; sets ``classes_``."""
        X, y = self._validate_fit_data(X, y)
        check_classification_targets(y)
        self.classes_, y_index = np.unique(y, return_inverse=True)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        keep = sample_weight > 0
        if not keep.any():
            raise ValueError(
                "Sample weights must contain at least one non-zero number."
            )
        weighted_classes = np.unique(y_index[keep])
        if weighted_classes.shape[0] < 2:
            raise ValueError(
                "This classifier needs samples of at least 2 classes with positive "
                f"weight, but the data contains only one class: "
                f"{self.classes_[weighted_classes[0]]!r}."
            )
        # Samples of zero weight take no part in the objective, so they are
        # no landmark candidates either.  (A precomputed kernel keeps them:
        # its columns at predict time are indexed by all training points.)
        # Nor do landmarks given as row indices, which index all the rows.
        if (
            not keep.all()
            and self.kernel != "precomputed"
            and not gives_rows(self.sampling)
        ):
            return X[keep], y_index[keep], sample_weight[keep]
        return X, y_index, sample_weight

    def _triangular_features(self, X, features):
        """Newton's features: ``K(x, I) R^{-1}`` (the rows' factor itself on
        a certified rank) where ``nystroem_`` has a Cholesky factor ``R`` of
        the landmark block, else the triangular basis of ``normalization_``;
        kept after the first pass if they fit the memory budget (Newton
        makes a few passes per step)."""
        if features.cholesky is not None:
            return features
        basis = features.basis
        cholesky = None if basis is None else basis.cholesky
        p = features.n_components
        inner = self.solver.removeprefix("newton-")
        if inner == "auto":
            inner = auto_inner_solver(
                p, self.classes_.shape[0], self.fit_intercept, self.max_hessian_bytes
            )
        if (
            cholesky is not None
            and inner == "cg"
            and 8 * p * features.n_samples > _feature_cache_bytes()
        ):
            # Features that would be recomputed at every pass, n p^2 flops
            # each: Newton-CG on the kernel blocks instead (streamed passes
            # of n p, R^{-1} applied to the coefficients; see _newton._Problem).
            return features
        triangular = self.nystroem_._training_features(
            X, cache=_feature_cache_bytes(), cholesky=cholesky
        )
        if cholesky is not None:
            # The same basis R^{-1}: the certificate's fit still applies.
            triangular.start = features.start
        return triangular

    def _store_newton(self, result, features, progress):
        """The fitted coefficients of Newton's ``result`` on ``features``."""
        dual = self._landmark_weights(result.coef.T, features)
        if dual is not None:
            self.dual_coef_ = dual.T
        else:
            # Back from the triangular basis of the blocks to transform's.
            self._coef = result.coef @ features.rotation
            # Landmark weights: a decision value costs O(p) per row.
            self.dual_coef_ = self._coef @ self.nystroem_.normalization_.astype(
                np.float64
            )
        self.intercept_ = result.intercept
        self.n_iter_ = np.array([result.n_iter], dtype=np.int32)
        self.solver_ = {"cholesky": "newton-cholesky", "cg": "newton-cg"}[
            result.inner_solver
        ]
        progress(
            f"{self.solver_} on {self.nystroem_.n_components_} landmarks, "
            f"{result.n_iter} Newton steps"
        )

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def decision_function(self, X):
        """Decision values ``phi(X) coef_^T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data; with ``kernel="precomputed"`` the kernel values between
            these points and the training points.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Log-odds of ``classes_[1]`` for a binary problem; otherwise the
            multinomial logits, one column per class.
        """
        scores = self._kernel_expansion(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The most probable class of each sample.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            index = (scores > 0).astype(np.intp)
        else:
            index = scores.argmax(axis=1)
        return self.classes_[index]

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def predict_proba(self, X):
        """Class probabilities (sigmoid or softmax of the decision values).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities, columns in the order of ``classes_``.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            positive = expit(scores)
            return np.column_stack([1.0 - positive, positive])
        return softmax(scores, axis=1)

    @_dask.chunkwise
    @_parallel.with_n_jobs
    def predict_log_proba(self, X):
        """Logarithm of the class probabilities, computed stably.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log-probabilities, columns in the order of ``classes_``.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return log_softmax(scores, axis=1)
