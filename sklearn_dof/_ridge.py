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

import contextlib
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn import get_config
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.linear_model import Ridge
from sklearn.metrics import get_scorer, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import (
    _check_sample_weight,
)

from . import _array_api, _dask, _memory, _parallel
from ._base import NYSTROEM_CONSTRAINTS, DoFKernelMixin
from ._duplicates import group_rows, grouped_targets, row_loo_residuals
from ._exact_screen import explains_targets, rules_out, sample_sizes
from ._heldout import (
    NestedRows,
    held_out_cap,
    held_out_rank,
    held_out_rounds,
    held_out_split,
    held_out_warning,
)
from ._kernel_learning import (
    SEARCH_LAMBDAS,
    free_length_scale,
    learned_penalties,
    scaled_length_scales,
    search_kernel,
    within_bounds,
)
from ._kernel_objects import check_kernel_object, is_kernel_object
from ._landmark_block import EveryRow, FitRequest
from ._landmarks import LandmarkSelection
from ._nystroem import DoFNystroem
from ._penalty_walk import climb, walk_from, walk_start
from ._progress import Progress
from ._ridge_solve import (
    NystroemPCGRidgeProblem,
    cv_errors,
    exact_kernel_ridge,
    exact_loo_sample,
    ridge_problem,
    uses_cg,
    warn_not_converged,
)
from ._validation import is_always_psd, user_stacklevel

# The parameters of both estimators forwarded to DoFNystroem (loss_tol: the
# certified rank's, tol: the d.o.f. estimate's tolerance).
_NYSTROEM_CONSTRAINTS = {
    **NYSTROEM_CONSTRAINTS,
    "loss_tol": DoFNystroem._parameter_constraints["loss_tol"],
    "tol": DoFNystroem._parameter_constraints["tol"],
}


#: The penalties ``lambda`` of ``DoFKernelRidgeCV(alphas=None)`` at a kernel
#: it is given, which tries ``alpha = n_samples * lambda``: the paper's
#: scale, on which the best penalty of standardised real data sets lies
#: between 1e-6 and 1e-1 (doc/automatic_rank.rst).  Half decades: a finer
#: grid raised a capped fit's test score more often than it lowered it
#: (doc/design/cross_validation.rst, "The penalty on low-rank fits").
DEFAULT_LAMBDAS = np.logspace(-6, 0, 13)

#: The cap of ``DoFKernelRidgeCV``'s automatic rank where ``max_components``
#: is None and a splitter ``cv`` scores the grid: its ``GridSearchCV`` of
#: ``Ridge`` holds the ``n x p`` features in memory and fits them once per
#: fold and penalty (see ``max_components``).
SPLITTER_MAX_COMPONENTS = 640

#: Up to this many rows the exact fit of ``DoFKernelRidgeCV`` scores every
#: penalty of the grid by exact leave-one-out (about ``n^3 / 3`` flops per
#: penalty, cheap at this size: doc/design/cross_validation.rst,
#: "Measurements behind the code's choices"); beyond it, a walk along the
#: grid from the penalty the rounds chose (``DoFKernelRidgeCV._exact_search``).
EXACT_GRID_ROWS = 2048

#: The factor between the length scales that exact kernel ridge on every
#: row compares after a kernel learned on a subsample, and the most steps
#: it takes either way (``DoFKernelRidgeCV._walk_length_scales``;
#: doc/design/kernel.rst, "Length scales on every row").
LENGTH_SCALE_STEP = 2.0**0.25
LENGTH_SCALE_STEPS = 4


def _positive_rows(X, sample_weight):
    """The rows of positive weight (every row without weights)."""
    if sample_weight is None:
        return X.shape[0]
    return int(np.count_nonzero(np.asarray(sample_weight) > 0))


def _weighted_n_samples(X, sample_weight, xp=None):
    """The ``n`` of the paper's scale ``alpha = n * lambda`` for a weighted fit.

    With weights the data term is ``sum_i w_i loss_i``, which is ``n`` times
    the paper's ``(1/n) sum loss`` on the data set that repeats row ``i``
    ``w_i`` times: ``n`` is the total weight, so that weights and
    repetitions get the same penalties.
    """
    if sample_weight is None:
        return X.shape[0]
    total = sample_weight.sum() if xp is None else xp.sum(sample_weight)
    return float(total)


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

    def _validate_array_api(self, X, y, sample_weight, xp, device):
        # Targets and weights follow the data's namespace and device
        # (scikit-learn's convention for mixed inputs).
        y, sample_weight = _array_api.move_to_data(y, sample_weight, xp, device)
        X, y = _array_api.validate(self, X, xp, y, multi_output=True, y_numeric=True)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(
                sample_weight, X, dtype=xp.float64, ensure_non_negative=True
            )
        return X, y, sample_weight

    def _set_intercept(self, intercept, y):
        """``intercept_`` in Ridge's convention from one per target."""
        if not self.fit_intercept:
            self.intercept_ = 0.0
        else:
            self.intercept_ = intercept[0] if y.ndim == 1 else intercept

    def _solve_summary(self):
        """The progress line of the solve (see ``verbose``)."""
        n_iter = getattr(self, "n_iter_", None)
        if n_iter is not None:
            how = f"conjugate gradients, {n_iter} steps"
        elif self.nystroem_.exact_:
            how = "exact kernel ridge"
        else:
            how = "a Cholesky factorisation"
        return f"ridge weights on {self.n_components_} landmarks by {how}"

    def _exact_solution(
        self, nystroem, gram, y, sample_weight, alpha, loo=False, complement=False
    ):
        """Exact kernel ridge when every row is a landmark of ``nystroem``
        (:func:`~sklearn_dof._ridge_solve.exact_kernel_ridge`), in the
        landmarks' order: ``(dual, intercept, residuals)`` (the
        leave-one-out residuals with ``loo``, else None; with
        ``complement`` a fourth entry, each row's ``1 - H_ii``), or None
        when ``K + alpha I`` has no Cholesky factor.  Sets nothing."""
        targets, weights = _landmark_targets(nystroem, y, sample_weight)
        solved = exact_kernel_ridge(
            gram,
            targets,
            weights,
            alpha,
            self.fit_intercept,
            loo=loo,
            complement=loo and complement,
        )
        if solved is None:
            return None
        if loo and complement:
            return solved
        return solved[0], solved[1], solved[2] if loo else None

    def _set_exact(self, dual, intercept, y):
        """The fitted weights of an exact solution (:meth:`_exact_solution`)."""
        self.dual_coef_ = _shape_coef(dual, y.ndim)
        self._set_intercept(intercept, y)
        self._coef = None
        self._n_refine_passes = 0
        self._refined = True

    def _every_row_fit(self, X, alpha):
        """A new transformer with every row of ``X`` a landmark, in a
        uniform order, and ``[K]`` for an exact fit (consumed by it), or
        None where ``K`` does not fit the memory budget.  Uniform: the other
        rules would pivot through all rows (a pivoted Cholesky factor stops
        at the numerical rank, short of the exact fit) for landmarks whose
        order does not matter."""
        nystroem, solved = self._new_fitted_nystroem(
            X,
            alpha,
            FitRequest(exact_solve=True),
            dof_tol=self.tol,
            n_components=X.shape[0],
            sampling="uniform",
        )
        if not isinstance(solved, EveryRow):
            return None
        return nystroem, [solved.gram]

    def _distinct_groups(self, X, y, sample_weight, kernel):
        """The :class:`~sklearn_dof._duplicates.RowGroups` of ``X`` where
        exact kernel ridge on its distinct rows may replace an automatic
        rank stopped at its default cap: float64 NumPy features (not a
        precomputed kernel), a ``kernel`` PSD by construction, repeated
        rows, and a ``K`` of the distinct rows that fits the memory budget;
        else None."""
        if not (
            isinstance(self.n_components, str)
            and self.n_components == "auto"
            and self.max_components is None
            and isinstance(X, np.ndarray)
            and X.dtype == np.float64
            and not (isinstance(self.kernel, str) and self.kernel == "precomputed")
            and is_always_psd(kernel)
        ):
            return None
        groups = group_rows(X, y, sample_weight)
        if groups is None or not _memory.fits_exact(groups.first.shape[0]):
            return None
        return groups

    def _set_coef(self, W, problem, y, features):
        """``dual_coef_``, ``intercept_`` (and ``coef_``) from the solution
        ``W`` in the basis of the feature blocks."""
        self._set_intercept(problem.intercept(W), y)
        dual = self._landmark_weights(W, features)
        if dual is not None:
            self.dual_coef_ = _shape_coef(dual, y.ndim)
            return
        # The triangular basis: rotation.T maps W to nystroem_.transform's
        # (None for the basis normalization_.T itself).
        if features.rotation is not None:
            W = features.rotation.T @ W
        self._coef = _shape_coef(W, y.ndim)
        # transform(X) @ coef_.T = K(X, I) @ (coef_ @ normalization_).T: the
        # landmark weights make a prediction cost O(p) per row, not O(p^2).
        self.dual_coef_ = self._coef @ self.nystroem_.normalization_.astype(np.float64)

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
        tags.array_api_support = _array_api.supports(self)
        return tags

    def _held_out_cap(self, X, solver):
        """The cap of held-out rounds for ``X`` (float64 NumPy data, see
        :func:`~sklearn_dof._heldout.held_out_cap`), else None."""
        if X.dtype != np.float64 or _dask.is_dask_array(X):
            return None
        return held_out_cap(
            self.n_components, solver, self.sampling, self.max_components, X.shape[0]
        )

    def _fit_held_out(self, X, y, sample_weight, alphas, start, cap, rank=None):
        """The automatic rank certified on held-out rows
        (:mod:`~sklearn_dof._heldout`): fits at doubling ranks of uniform
        landmarks, the held-out rows weighing zero, each round at the
        penalty of ``alphas`` whose held-out error is least (a walk from
        ``start``, then from the round before's), at the same ``lambda``;
        then the last round's landmarks and penalty on every row, warm from
        its solution with its preconditioner.  Given a ``rank``, one round
        at it instead of the doublings (an int rank's penalty search).

        Returns ``(alpha, held-out mean of w_i e_i^2)`` of that round.
        """
        n_samples = X.shape[0]
        weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        split = held_out_split(weight, self.random_state)
        Y = y.reshape(n_samples, -1)
        state = {"alpha": float(start)}
        baseline = (
            np.average(Y, axis=0, weights=split.train_weight)
            if self.fit_intercept
            else np.zeros(Y.shape[1])
        )
        progress = Progress(self.verbose, type(self).__name__)
        rounds = None
        if rank is not None:
            # An int rank's transformer at min(alphas), as on the other
            # routes (its dof_); held_out_rank kept the rank within the
            # training rows.
            state["transformer_alpha"] = float(np.min(alphas))
            self._held_out_round(X, y, split, rank, alphas, state)
        else:
            rounds = held_out_rounds(
                lambda r: self._held_out_round(X, y, split, r, alphas, state),
                Y[split.held],
                baseline,
                min(cap, split.order.shape[0]),
                self.loss_tol,
                split.order.shape[0],
                progress=progress,
                weights=split.held_weight,
            )
        W, problem, features = self._refit_held_out(X, y, weight, state)
        self._set_coef(W, problem, y, features)
        if rounds is not None:
            every_row = rounds.rank == split.order.shape[0]
            self._record_held_out(rounds, n_samples, state["alpha"], every_row)
        return state["alpha"], state["mse"]

    def _refit_held_out(self, X, y, weight, state):
        """``(W, problem, features)`` of the last round's landmarks and
        penalty on every row: by the conjugate gradients, warm from the
        round's solution, where the round kept the kernel basis; else
        directly on the features it fell back to (the rows' own, where
        rounding swamped the basis's Gram matrix at that penalty)."""
        features = state["features"]
        if features.basis is None:
            return self._solve_direct(X, features, y, weight, state["alpha"])
        problem = NystroemPCGRidgeProblem(features, y, weight, self.fit_intercept)
        warm = isinstance(state["problem"], NystroemPCGRidgeProblem)
        return self._solve_weighted(
            problem,
            X,
            features,
            y,
            weight,
            state["alpha"],
            start=state["W"] if warm else None,
            like=state["problem"] if warm else None,
        )

    def _held_out_round(self, X, y, split, rank, alphas, state):
        """One round of :meth:`_fit_held_out`: the fit at ``rank`` on the
        training rows at the best penalty of a walk along ``alphas`` from
        ``state["alpha"]`` (each penalty warm from the one before, on one
        preconditioner while it serves); its held-out predictions."""
        # The round before's fit is not read again: its p x p factors would
        # stand beside this round's while they are formed.
        for key in ("W", "problem", "features"):
            state.pop(key, None)
        features = self._fit_nystroem(
            X,
            state.get("transformer_alpha", state["alpha"]),
            FitRequest(kernel_basis=True),
            n_components=rank,
            sampling=NestedRows(split.order),
        )
        problem = NystroemPCGRidgeProblem(
            features, y, split.train_weight, self.fit_intercept
        )
        Y_held = y.reshape(X.shape[0], -1)[split.held]
        last = {"W": None}

        def score(alpha):
            W, used, used_features = self._solve_weighted(
                problem,
                X,
                features,
                y,
                split.train_weight,
                alpha * split.train_share,
                start=last["W"],
            )
            last["W"] = W if used is problem else None
            self._set_coef(W, used, y, used_features)
            predictions = self._kernel_expansion(X[split.held])
            predictions = predictions.reshape(Y_held.shape)
            # Weighted as the leave-one-out score: mean of w_i e_i^2.
            squares = np.mean((predictions - Y_held) ** 2, axis=1)
            mse = float(np.mean(split.held_weight * squares))
            return mse, alpha, W, used, used_features, predictions

        best = walk_from(score, alphas, state["alpha"], _smaller_error)
        mse, alpha, W, used, used_features, predictions = best
        state.update(alpha=alpha, W=W, problem=used, features=used_features, mse=mse)
        return predictions

    def _solve_weighted(
        self, problem, X, features, y, weight, alpha, start=None, like=None
    ):
        """``(W, problem, features)`` of a
        :class:`NystroemPCGRidgeProblem` by the conjugate gradients (warm
        from ``start``, ``like``'s preconditioner where it serves), else of
        the direct solve."""
        W = problem.solve(alpha, start=start, like=like)
        if W is None:
            return self._solve_direct(X, features, y, weight, alpha)
        self.n_iter_ = problem.n_iter
        self._n_refine_passes = problem.refine_passes
        self._refined = True
        if not problem.converged:
            warn_not_converged(problem.n_iter, problem.tol)
        return W, problem, features

    def _record_held_out(self, rounds, n_samples, alpha, every_row=False):
        """``nystroem_``'s certificate record of a held-out route (its
        ``alpha_``, ``loss_estimate_``); the warning where
        ``max_components``, the budget or (``every_row``) the split's
        training rows stopped it."""
        rank = rounds.rank
        loss = rounds.certificate.loss(rank)
        selection = LandmarkSelection(
            self.nystroem_.component_indices_, None, None, None, loss=loss, alpha=alpha
        )
        self.nystroem_._record_rank(selection, n_samples)
        if rounds.requested is None:
            return
        rows = n_samples if every_row else None
        self.nystroem_.requested_components_ = rows or rounds.requested
        warnings.warn(
            held_out_warning(
                rank, loss, rounds.requested, self.loss_tol, self.max_components, rows
            ),
            UserWarning,
            stacklevel=user_stacklevel(),
        )

    def _solve_direct(self, X, features, y, sample_weight, alpha):
        """``(W, problem, features)`` of the direct solve of the normal
        equations on the kernel basis, else on the rows' features."""
        problem = ridge_problem(features, y, sample_weight, self.fit_intercept)
        W = problem.solve(alpha)
        self._n_refine_passes = problem.refine_passes
        self._refined = W is not None
        if W is None:
            # Rounding of the kernel-basis Gram matrix swamps this penalty:
            # pay for forming the features row by row, K(x, I) R^{-1} when
            # K(I, I) (shifted if need be) has a Cholesky factor R.
            basis = features.basis
            cholesky = basis.cholesky if basis is not None else None
            features = self.nystroem_._training_features(X, cholesky=cholesky)
            problem = ridge_problem(features, y, sample_weight, self.fit_intercept)
            W = problem.solve(alpha)
        return W, problem, features


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
    n_components : "auto", "dof" or int, default="auto"
        Number of landmarks ``p``, see :class:`~sklearn_dof.DoFNystroem`:
        ``"auto"`` certifies the rank on ``y`` (the loss of test error
        against exact kernel ridge at ``alpha`` at most ``loss_tol``);
        ``"dof"`` is the paper's rule from the degrees of freedom.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        Landmark selection of :class:`DoFNystroem` (see there).
    loss_tol : float, default=0.01
        Loss of test error that ``n_components="auto"`` allows.
    max_components : int, default=None
        Cap of an automatic rank (None: from the memory budget), see
        :class:`~sklearn_dof.DoFNystroem`.  Above that default cap, where
        ``K`` does not fit the budget either (``"auto"``, uniform
        landmarks, a solver other than ``"direct"``), the rank is
        certified on held-out rows instead of from the rows' factor, whose
        memory grows as ``n`` times the rank: conjugate-gradient fits at
        doubling ranks of one nested uniform order train with
        ``min(4096, n / 8)`` uniform rows left out, at the same
        ``lambda = alpha / n``, until those rows' errors certify a rank or
        ``max_components`` stops them; the last fit's landmarks are then
        refitted on every row, starting from its solution (see
        :ref:`large_ranks`).  With ``max_components=None`` the held-out
        rounds take over where the default cap stops the factor's, up to
        the largest conjugate-gradient fit the budget holds (``24 p^2``
        bytes); but where the rows repeat and ``K`` of the distinct ones
        fits the budget (float64 NumPy data, a kernel PSD by
        construction), exact kernel ridge on the distinct rows does,
        each group of equal rows one row of their total weight and
        weighted mean target: the fit on every row at ``O(m^3)`` for ``m``
        distinct rows.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (features and targets are centred by
        their weighted means, as in :class:`~sklearn.linear_model.Ridge`).
    tol : float, default=0.1
        Relative tolerance of the degrees-of-freedom estimate (of
        ``n_components="dof"``).
    solver : {"auto", "direct", "cg"}, default="auto"
        How the ridge system in ``p`` dimensions is solved.  ``"direct"``:
        the Gram matrix of the kernel blocks (``n p^2`` flops) and a
        Cholesky factorisation (above).  ``"cg"``: Falkon's method,
        conjugate gradients preconditioned by the landmark block alone
        (``O(p^3)``), one pass over the kernel blocks per step (``O(n p)``
        beyond the kernel), until the training objective is within
        ``1e-4`` of its minimum; it needs a Cholesky factor of the landmark
        block (else the fit is direct) and, on NumPy arrays, float64 data.
        It runs where array-API data live too (:ref:`gpus`).  ``"auto"``:
        ``"cg"`` from ``p >= 4096`` landmarks given as an int (where it was
        measured faster, see :ref:`large_ranks`), else ``"direct"``.
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
    verbose : int, default=0
        Progress lines on standard output: one per round of an automatic
        rank (the columns grown, its loss estimate, the time since the fit
        began), then the landmark block and the solve.  Nothing with 0.

    Attributes
    ----------
    kernel_ : str, callable or kernel object
        The kernel of the fit: ``kernel`` itself.
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
    n_iter_ : int or None
        Steps of the conjugate gradients (``solver="cg"``); None for a
        direct solve.
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

    Every row a landmark (``n_components=n``, or an automatic rank that goes
    past half of the rows), float64 data and a kernel PSD on any data (rbf,
    laplacian, linear, cosine): the fit is exact kernel ridge, solved as
    :class:`~sklearn.kernel_ridge.KernelRidge` solves it, by one Cholesky
    factorisation of ``K + alpha I`` (``n x n``), not through features.

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
        "solver": [StrOptions({"auto", "direct", "cg"})],
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
        tol=0.1,
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
        self.solver = solver
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

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
        progress = Progress(self.verbose, type(self).__name__)
        self.kernel_ = self.kernel
        self._fit_ridge(X, y, sample_weight)
        progress(self._solve_summary())
        return self

    def _fit_ridge(self, X, y, sample_weight):
        namespace = _array_api.dispatch_namespace(X)
        self.n_iter_ = None
        if namespace is not None:
            X, y, sample_weight = self._validate_array_api(
                X, y, sample_weight, *namespace
            )
            nystroem = self._new_nystroem(self.alpha, self.tol, self.loss_tol)
            return _array_api.fit_ridge(
                self, nystroem, X, y, sample_weight, *namespace, solver=self.solver
            )
        X, y, sample_weight = self._validate_ridge_data(X, y, sample_weight)
        # float32 features are summed in float32 (the speed asked for): too
        # coarse for the kernel basis, whose rounding T amplifies.
        kernel_basis = X.dtype != np.float32
        held_cap = self._held_out_cap(X, self.solver) if kernel_basis else None
        if held_cap is not None and self.max_components is not None:
            self._fit_held_out(X, y, sample_weight, [self.alpha], self.alpha, held_cap)
            return self
        request = FitRequest(
            response=y.reshape(y.shape[0], -1).astype(np.float64, copy=False),
            kernel_basis=kernel_basis,
            exact_solve=True,
            hand_over=held_cap is not None,
        )
        with _deferred_cap_warning(held_cap):
            features = self._fit_nystroem(
                X, self.alpha, request, dof_tol=self.tol, loss_tol=self.loss_tol
            )
        if held_cap is not None and self.nystroem_.requested_components_ is not None:
            del features
            if not self._fit_distinct_rows(X, y, sample_weight):
                self._fit_held_out(
                    X, y, sample_weight, [self.alpha], self.alpha, held_cap
                )
            return self
        if isinstance(features, EveryRow):
            solved = self._exact_solution(
                self.nystroem_, features.gram, y, sample_weight, self.alpha
            )
            if solved is not None:
                self._set_exact(*solved[:2], y)
                return self
            # K + alpha I has no Cholesky factor: the features of K(I, I)^+.
            features = self.nystroem_._training_features(X, kernel_basis=True)
        solved = self._solve_by_cg(X, features, y, sample_weight)
        if solved is None:
            solved = self._solve_direct(X, features, y, sample_weight, self.alpha)
        W, problem, features = solved
        self._set_coef(W, problem, y, features)
        return self

    def _fit_distinct_rows(self, X, y, sample_weight):
        """Exact kernel ridge on the distinct rows of ``X``
        (:mod:`~sklearn_dof._duplicates`), where the automatic rank stopped
        at its cap uncertified and ``K`` of the distinct rows fits the
        memory budget: kernel ridge on every row, each group of equal rows
        one row of their total weight and weighted mean target.  Returns
        whether it fitted; ``nystroem_``'s landmarks are then each group's
        first row."""
        groups = self._distinct_groups(X, y, sample_weight, self.kernel)
        if groups is None:
            return False
        fitted = self._every_row_fit(X[groups.first], self.alpha)
        if fitted is None:
            return False
        nystroem, (gram,) = fitted
        targets = grouped_targets(groups, y)
        solved = self._exact_solution(
            nystroem, gram, targets, groups.weight, self.alpha
        )
        if solved is None:
            return False
        _stand_for_rows(nystroem, groups)
        self.nystroem_, self.n_components_ = nystroem, nystroem.n_components_
        self._set_exact(*solved[:2], y)
        return True

    def _solve_by_cg(self, X, features, y, sample_weight):
        """``(W, problem, features)`` from :class:`NystroemPCGRidgeProblem` where
        ``solver`` asks for it and the landmark block has a Cholesky factor
        (:meth:`_solve_weighted`); None for the direct route."""
        basis = features.basis
        p = features.n_components
        # An automatic rank comes with the rows' partial Cholesky factor,
        # whose Gram matrix the direct solve reads without a pass over the
        # data: "auto" takes the conjugate gradients only without it.
        wanted = uses_cg(self.solver, p, features.factor is not None)
        if not wanted or basis is None or basis.cholesky is None:
            return None
        # The iteration reads R alone: K(I, I), the direct solve's (3.2 GB
        # at p = 20,000), is let go, and recomputed should the direct solve
        # take over.
        basis.release_gram()
        problem = NystroemPCGRidgeProblem(
            features, y, sample_weight, self.fit_intercept
        )
        return self._solve_weighted(problem, X, features, y, sample_weight, self.alpha)


def _landmark_targets(nystroem, y, sample_weight):
    """The targets (2-d, float64) and weights of the landmarks of
    ``nystroem`` (every row), in their order."""
    landmarks = nystroem.component_indices_
    weights = None if sample_weight is None else sample_weight[landmarks]
    return y.reshape(y.shape[0], -1)[landmarks].astype(np.float64), weights


def _take_gram(nystroem, grams):
    """``K`` on the landmarks of ``nystroem`` for an exact fit that
    consumes it: the one ``grams`` holds, else recomputed (``n^2 d``)."""
    if grams:
        return grams.pop()
    return nystroem._kernel_to_landmarks(nystroem.components_)


@contextlib.contextmanager
def _deferred_cap_warning(held_cap):
    """Silences the cap's warning of the factor rounds where held-out
    rounds take over from their cap (``held_cap`` not None); those warn in
    turn if theirs stops them."""
    if held_cap is None:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="n_components='auto' stopped at", category=UserWarning
        )
        yield


def _stand_for_rows(nystroem, groups):
    """A transformer fitted on the distinct rows of ``groups``, every one a
    landmark, made to stand for all the rows: its landmarks as rows of
    ``X`` (each group's first), its degrees of freedom those of the rows
    with their repeats."""
    distinct = nystroem.component_indices_
    nystroem._stand_for_repeated_rows(np.bincount(groups.inverse)[distinct])
    nystroem.component_indices_ = groups.first[distinct]


def _smaller_error(candidate, best):
    """Whether a held-out round's ``(error, ...)`` beats ``best``."""
    return candidate is not None and (best is None or candidate[0] < best[0])


class _PredictionsAsInput(RegressorMixin, BaseEstimator):
    """Regressor whose predictions are its input, to score given predictions."""

    def predict(self, X):
        return X

    def decision_function(self, X):
        return X


class DoFKernelRidgeCV(_DoFRidgeMixin, RegressorMixin, BaseEstimator):
    """Degrees-of-freedom Nystroem kernel ridge with efficient penalty selection.

    The landmarks and the rank are chosen once, by
    :class:`~sklearn_dof.DoFNystroem`: with ``n_components="auto"`` the rank
    is certified for the penalty of the grid with the smallest leave-one-out
    error, up to ``max_components``; with ``"dof"`` it follows the degrees of
    freedom at the smallest penalty of the grid.  On these fixed features
    ``Phi`` (``n x p``) every penalty of the grid is scored by exact
    leave-one-out cross-validation (or by generalised cross-validation)
    from one eigendecomposition
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
    alphas : array-like of shape (n_alphas,), default=None
        Penalties to try, on scikit-learn's scale (``alpha = n * lambda``).
        None, where the kernel is learned: half decades from a hundredth of
        the penalty ``alpha`` learned with it on ``m`` rows to ``sqrt(10)``
        times ``alpha n / m`` (a Gaussian process keeps ``alpha``, a ratio
        of noise to the kernel's variance, as rows are added; the paper's
        rates keep ``lambda``), joined by the default grid below where the
        learned penalty stopped at the end of its range.  None at a given
        kernel: ``n_samples *
        lambda`` for ``lambda`` in ``1e-6, 10^-5.5, ..., 1``
        (:data:`DEFAULT_LAMBDAS`, half decades), the paper's scale, which
        means the same whatever the number of rows.  With
        ``sample_weight``, ``n_samples`` is the sum of the weights, so that
        integer weights try the penalties of the repeated rows.  With
        ``n_components="auto"`` the rank is certified for the penalty with
        the smallest leave-one-out error at the rank grown so far, round
        after round; otherwise it is chosen at ``min(alphas)``.
    kernel : str, callable, kernel object or None, default=None
        None: the kernel is learned (see Notes): an ``RBF`` or a
        ``Matern(nu=1.5)`` kernel, whichever the leave-one-out error
        prefers, with one length scale per feature (or one shared, where
        the per-feature one predicts held-out rows worse), on dense NumPy
        input; ``"rbf"`` at ``gamma`` on other input or when a named
        kernel parameter (``gamma``...) is given.  A kernel object of
        :mod:`sklearn.gaussian_process.kernels` (``RBF``, ``Matern``,
        ``RationalQuadratic``, ``DotProduct``, ``ConstantKernel``, their
        sums and products; not ``WhiteKernel``: the noise is ``alpha``):
        its hyperparameters whose bounds are not ``"fixed"`` are learned,
        as :class:`~sklearn.gaussian_process.GaussianProcessRegressor`
        does, and ``kernel_`` holds the result.  Else any name of
        :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"``, or a callable ``k(x, y, **kernel_params) ->
        float``, used as given.
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
        Number of landmarks ``p``; ``"auto"`` certifies it for the penalty
        of the grid with the smallest leave-one-out error (see ``alphas``),
        ``"dof"`` uses the degrees of freedom at ``min(alphas)``.  An int
        of uniform landmarks whose leave-one-out search (``16 n p + 24
        p^2`` bytes) and ``K`` both pass the memory budget chooses its
        penalty on one held-out round at that rank, as ``max_components``
        describes, in ``O(p^2)`` memory.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, array-like \
            or object with a ``select`` method, default="uniform"
        Landmark selection of :class:`DoFNystroem` (see there).
    loss_tol : float, default=0.01
        Loss of test error that ``n_components="auto"`` allows.
    max_components : int or None, default=None
        Cap of an automatic rank, see :class:`~sklearn_dof.DoFNystroem`.
        None: from memory.  With ``cv=None``, ``criterion="loo"``,
        ``store_cv_results=False`` and float64 NumPy data whose kernel
        matrix (``8 n^2`` bytes) fits one and a half times the memory
        budget (see :func:`~sklearn_dof.set_config`: it is all the exact
        fit holds), the rank is uncapped, and past
        half of the rows the fit is exact kernel ridge, at the penalty its
        exact leave-one-out residuals prefer (every penalty of the grid up
        to 2,048 rows, else a walk down the grid from the rounds' penalty;
        ``best_score_`` is that score).  A rank certified below half of the
        rows is kept unless exact kernel ridge at a smaller penalty of the
        grid beats its leave-one-out error by ``loss_tol``: the rounds
        choose the penalty on low-rank fits, which lack the directions small
        penalties need (the exact fit's ``nystroem_`` has every row, in a
        uniform order); one factorisation, read on a sample of the rows, may
        first rule every such exact fit out.  Otherwise the transformer's
        default cap from the memory budget, where it binds with a warning
        that gives the rank asked for and the memory it needs
        (doc/automatic_rank.rst); with a splitter ``cv``, 640 (its
        ``GridSearchCV`` holds the ``n x p`` features and fits them once
        per fold and penalty).  An int caps every rank, the exact fit
        included.  Where ``K`` does not fit the budget, with uniform
        landmarks and ``cv``, ``scoring`` and ``store_cv_results`` left as
        they are, held-out rounds certify the rank and choose the penalty
        (a walk along the grid on the held-out error; ``best_score_`` is
        minus that error, each row's squared error times its weight): at
        once when ``max_components`` is above the default cap, else where
        the default cap stops the factor's rounds,
        up to the largest conjugate-gradient fit the budget holds (see
        :class:`DoFKernelRidge` and :ref:`large_ranks`).  There, where the
        rows repeat, weigh more than zero each and ``K`` of the distinct
        ones fits the budget, exact kernel ridge on the distinct rows takes
        over instead: the fit of every row, its penalty (and the learned
        length scales' check) chosen by each row's own exact leave-one-out
        error, as on the exact route.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.  Leave-one-out refits it without the
        left-out point, exactly.
    criterion : {"loo", "gcv"}, default="loo"
        ``"loo"``: exact leave-one-out residuals ``r_i / (1 - h_i)``.
        ``"gcv"``: generalised cross-validation, each leverage replaced by
        their mean ``tr(H) / n_samples`` (with ``scoring=None`` the score is
        minus the GCV criterion ``mean(w_i r_i^2) / (1 - tr(H) / n)^2``).
        Only used when ``cv=None``, and not where held-out rounds choose the
        penalty (see ``max_components``): their held-out error replaces
        both.
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
        Relative tolerance of the degrees-of-freedom estimate (of
        ``n_components="dof"``).
    kernel_subsample : int, default=1000
        Rows on which the kernel's hyperparameters are learned (their
        exact kernel ridge's leave-one-out error is ``O(m^3)`` per step),
        and up to half as many held-out rows that choose between one and
        several length scales.  The penalty learned with them stays within
        ``lambda = alpha / m`` of ``1e-8`` to ``1`` with ``alphas=None``,
        else within the ``lambda = alpha / n_samples`` of ``alphas``.
    kernel_max_iter : int, default=100
        L-BFGS steps of each search of the hyperparameters; a
        :class:`~sklearn.exceptions.ConvergenceWarning` where a search
        stops on it.
    n_restarts_optimizer : int, default=0
        Further searches of the hyperparameters, each from a point drawn
        log-uniformly within their bounds; the best is kept.
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
    verbose : int, default=0
        Progress lines on standard output: one per round of an automatic
        rank (the columns grown, its loss estimate, the time since the fit
        began), then the landmark block and the solve.  Nothing with 0.

    Attributes
    ----------
    kernel_ : str, callable or kernel object
        The kernel of the fit: the learned kernel object (its length scales
        as checked on every row, see Notes), or ``kernel`` itself where
        nothing is learned (``"rbf"`` for None).
    alpha_ : float
        The selected penalty.
    alphas_ : tuple of float
        The penalties searched: ``alphas``, or with ``alphas=None`` those
        its docstring describes.
    best_score_ : float
        Score at ``alpha_`` (with ``scoring=None`` and ``cv=None``, minus the
        mean squared leave-one-out error).
    n_iter_ : int or None
        Steps of the conjugate gradients of the fit on every row where
        held-out rounds chose the rank or the penalty (see
        ``max_components``); None otherwise.
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
        Estimated maximal marginal degrees of freedom at ``min(alphas)``,
        or at ``alpha_`` where the fit ends in exact kernel ridge by its
        exact leave-one-out (``nystroem_.alpha_`` says which).
    effective_dof_ : float
        Estimated degrees of freedom, at the same penalty.
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
    The kernel is learned before the landmarks are chosen: on
    ``kernel_subsample`` rows drawn at random, L-BFGS minimises the mean
    squared leave-one-out residual of exact kernel ridge over the log of
    the free hyperparameters and of a penalty, with analytic gradients (a
    step costs one ``O(m^3)`` factorisation whatever the number of length
    scales).  With ``kernel=None`` the features are first divided by their
    standard deviations; one shared length scale is learned for ``RBF``
    and ``Matern(nu=1.5)``, the family with the smaller leave-one-out error
    is kept, then one length scale per feature is learned from it.  The
    rank and the penalty ``alpha_`` are then chosen on every row at the
    learned kernel ``kernel_``, as below, among penalties around the one
    learned with it (``alphas_``).  Where that ends in exact kernel ridge on
    more rows than the kernel was learned on, and the kernel has a
    ``length_scale`` of its own (``RBF``, ``Matern``...), its length scales
    are checked on every row: all scaled alike by ``2**0.25`` at a time,
    shorter while the exact leave-one-out error improves by ``loss_tol``,
    else longer (at most four steps, within ``length_scale_bounds``), then
    the penalty walked again; ``kernel_`` holds the scales kept.  More rows
    resolve shorter length scales than the subsample does.

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
        "kernel": [*_NYSTROEM_CONSTRAINTS["kernel"], None],
        "alphas": ["array-like", Interval(Real, 0, None, closed="neither"), None],
        "criterion": [StrOptions({"loo", "gcv"})],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "cv": ["cv_object"],
        "store_cv_results": ["boolean"],
        "kernel_subsample": [Interval(Integral, 2, None, closed="left")],
        "kernel_max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        alphas=None,
        *,
        kernel=None,
        gamma=None,
        coef0=None,
        degree=None,
        kernel_params=None,
        n_components="auto",
        sampling="uniform",
        loss_tol=0.01,
        max_components=None,
        fit_intercept=True,
        criterion="loo",
        scoring=None,
        cv=None,
        store_cv_results=False,
        tol=0.1,
        kernel_subsample=1000,
        kernel_max_iter=100,
        n_restarts_optimizer=0,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.alphas = alphas
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
        self.criterion = criterion
        self.scoring = scoring
        self.cv = cv
        self.store_cv_results = store_cv_results
        self.tol = tol
        self.kernel_subsample = kernel_subsample
        self.kernel_max_iter = kernel_max_iter
        self.n_restarts_optimizer = n_restarts_optimizer
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _check_alphas(self, n_samples):
        """The penalties to try; ``n_samples`` is the weighted row count
        (:func:`_weighted_n_samples`) that ``alphas=None`` scales."""
        if self.alphas is None:
            return n_samples * DEFAULT_LAMBDAS
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
        progress = Progress(self.verbose, type(self).__name__)
        self._fit_ridge(X, y, sample_weight)
        progress(f"penalty alpha_={self.alpha_:.4g}; {self._solve_summary()}")
        return self

    def _fit_ridge(self, X, y, sample_weight):
        self._check_search_options(X)
        self.n_iter_ = None
        namespace = _array_api.dispatch_namespace(X)
        if namespace is not None:
            return self._fit_in_namespace(X, y, sample_weight, namespace)
        X, y, sample_weight = self._validate_ridge_data(X, y, sample_weight)
        alphas = self._check_alphas(_weighted_n_samples(X, sample_weight))
        if X.shape[0] < 2:
            raise ValueError(
                "Cross-validation needs at least 2 samples; got n_samples=1."
            )
        self.kernel_, alphas, learned = self._learned_kernel(
            X, y, sample_weight, alphas
        )
        # Floats on the host, as alpha_ is, whatever the arrays' namespace.
        self.alphas_ = tuple(map(float, alphas))
        held_cap = self._held_out_cap(X, "auto") if self._held_out_search() else None
        if held_cap is not None and self.max_components is not None:
            return self._search_held_out(X, y, sample_weight, alphas, learned, held_cap)
        held_rank = (
            self._held_out_rank(X, sample_weight) if self._held_out_search() else None
        )
        if held_rank is not None:
            return self._search_held_out(
                X, y, sample_weight, alphas, learned, None, rank=held_rank
            )
        return self._fit_by_rounds(X, y, sample_weight, alphas, learned, held_cap)

    def _fit_by_rounds(self, X, y, sample_weight, alphas, learned, held_cap):
        """The rank by the transformer's rounds, then the penalty: exact
        kernel ridge where the rounds reach every row (or the probe after
        them wins), else the efficient leave-one-out (or the splitter) on
        the features; ``held_cap`` hands a rank past the factor's budget
        over to held-out rounds."""
        # Two passes (Gram matrix, then leave-one-out errors): keep the
        # features if they fit the memory budget.  The automatic rank is
        # certified for the penalty the leave-one-out error prefers, round
        # after round, not for the smallest of the grid.
        # Exact kernel ridge where the rounds ask for most rows and K fits
        # its budget, at the penalty its own exact leave-one-out prefers
        # (_exact_search).
        exact_route = (
            self.cv is None and not self.store_cv_results and self.criterion == "loo"
        )
        request = FitRequest(
            response=y.reshape(y.shape[0], -1).astype(np.float64, copy=False),
            penalties=alphas,
            exact_solve=exact_route,
            # A Cholesky factor of the landmark block where the features are
            # not the rows' factor (about p^3 / 3 flops against the
            # eigendecomposition's 9 p^3; doc/design/cross_validation.rst,
            # "Measurements behind the code's choices"); float32 sums keep
            # normalization_'s basis, as DoFKernelRidge's do.
            triangular=X.dtype != np.float32 and not _dask.is_dask_array(X),
            hand_over=held_cap is not None,
        )
        with _deferred_cap_warning(held_cap):
            features = self._fit_nystroem(
                X,
                float(alphas.min()),
                request,
                dof_tol=self.tol,
                cache=True,
                loss_tol=self.loss_tol,
            )
        if held_cap is not None and self.nystroem_.requested_components_ is not None:
            del features
            if self._fit_distinct_rows(X, y, sample_weight, alphas, learned):
                return self
            return self._search_held_out(X, y, sample_weight, alphas, learned, held_cap)
        if isinstance(features, EveryRow):
            grams = [features.gram]
            del features  # the search consumes K
            # The rounds' penalty, chosen on a low-rank factor, bounds the
            # exact fit's from above; an int rank chose none.
            chosen = self.nystroem_.alpha_ if self.n_components == "auto" else None
            start = walk_start(alphas, chosen, learned)
            best = self._exact_search(
                self.nystroem_, grams, y, sample_weight, alphas, start=start
            )
            if best is not None:
                self._adopt_exact(
                    X, y, sample_weight, alphas, self.nystroem_, best, learned
                )
                return self
            # K + alpha I has no Cholesky factor: the features of K(I, I)^+.
            features = self.nystroem_._training_features(X, cache=True)
        problem = ridge_problem(features, y, sample_weight, self.fit_intercept)
        if self.cv is not None:
            self._search_by_splitter(X, y, sample_weight, alphas)
        else:
            row_squares = self._search_by_loo(problem, alphas, y)
            # The rank was certified at the penalty low-rank fits prefer;
            # exact kernel ridge may prefer a smaller one.
            if (
                exact_route
                and self._uncapped(X)
                and self._exact_probe(X, y, sample_weight, alphas, learned, row_squares)
            ):
                return self
        self._set_coef(problem.solve(self.alpha_), problem, y, features)
        return self

    def _held_out_rank(self, X, sample_weight):
        """The int rank whose penalty a held-out round chooses, where the
        efficient leave-one-out would pass the memory budget
        (:func:`~sklearn_dof._heldout.held_out_rank`), else None."""
        if (
            X.dtype != np.float64
            or _dask.is_dask_array(X)
            or (isinstance(self.kernel, str) and self.kernel == "precomputed")
        ):
            return None
        return held_out_rank(
            self.n_components,
            self.sampling,
            X.shape[0],
            _positive_rows(X, sample_weight),
        )

    def _held_out_search(self):
        """Whether held-out rounds may choose the penalty: with the
        efficient leave-one-out's defaults (``cv``, ``scoring`` and
        ``store_cv_results`` left as they are)."""
        return self.cv is None and self.scoring is None and not self.store_cv_results

    def _search_held_out(self, X, y, sample_weight, alphas, learned, cap, rank=None):
        """The rank and the penalty of held-out rounds
        (:meth:`_fit_held_out`; one round at an int ``rank``), the walk
        along the grid starting at the learned penalty (else the grid's
        middle)."""
        start, _ = walk_start(alphas, None, learned)
        self.alpha_, mse = self._fit_held_out(
            X, y, sample_weight, alphas, start, cap, rank=rank
        )
        self.best_score_ = -mse
        return self

    def _row_groups(self, X, y, sample_weight):
        """The :class:`~sklearn_dof._duplicates.RowGroups` of ``X`` where
        exact kernel ridge on its distinct rows may replace the automatic
        rank past its cap (:meth:`_DoFRidgeMixin._distinct_groups`), with
        the exact route's options and positive weights (each row's
        leave-one-out residual scores it); else None."""
        if not (
            self.cv is None
            and not self.store_cv_results
            and self.criterion == "loo"
            and (sample_weight is None or np.all(sample_weight > 0))
        ):
            return None
        return self._distinct_groups(X, y, sample_weight, self.kernel_)

    def _fit_distinct_rows(self, X, y, sample_weight, alphas, learned):
        """Exact kernel ridge on the distinct rows of ``X``
        (:mod:`~sklearn_dof._duplicates`), where the automatic rank stopped
        at its cap uncertified and ``K`` of the distinct rows fits the
        memory budget (:meth:`_row_groups`): the penalty and length scales
        as on every row (:meth:`_exact_search`, :meth:`_adopt_exact`),
        scored by the rows' own leave-one-out error.  Returns whether it
        fitted; ``nystroem_``'s landmarks are then each group's first row."""
        groups = self._row_groups(X, y, sample_weight)
        if groups is None:
            return False
        distinct = X[groups.first]
        targets = grouped_targets(groups, y)
        chosen = self.nystroem_.alpha_
        progress = Progress(self.verbose, type(self).__name__)
        progress(
            f"{X.shape[0]} rows, {distinct.shape[0]} distinct: exact kernel "
            "ridge on the distinct rows"
        )
        fitted = self._every_row_fit(distinct, chosen)
        if fitted is None:
            return False
        nystroem, grams = fitted  # the search consumes K from grams
        start = walk_start(alphas, chosen, learned)
        best = self._exact_search(
            nystroem, grams, targets, groups.weight, alphas, start=start, groups=groups
        )
        if best is None:
            return False
        self._adopt_exact(
            distinct, targets, groups.weight, alphas, nystroem, best, learned, groups
        )
        _stand_for_rows(self.nystroem_, groups)
        return True

    def _check_search_options(self, X):
        """Options that cannot go together fail before the data are read."""
        if self.alphas is not None:
            self._check_alphas(1)
        if self.cv is not None and self.store_cv_results:
            raise ValueError(
                "store_cv_results=True requires cv=None (efficient leave-one-out)."
            )
        if self.cv is not None and _dask.is_dask_array(X):
            raise NotImplementedError(
                f"{type(self).__name__}(cv={self.cv!r}) on a dask array: the "
                "splitters need the feature matrix in memory. Use cv=None, the "
                "efficient leave-one-out (or GCV), which runs as block reductions."
            )

    def _fit_in_namespace(self, X, y, sample_weight, namespace):
        """The fit of an array-API array, in its namespace and on its device."""
        if self.cv is not None or self.scoring is not None:
            raise ValueError(
                "Under array_api_dispatch, DoFKernelRidgeCV scores the "
                "penalties by its efficient leave-one-out only: cv=None "
                f"and scoring=None (got cv={self.cv!r}, scoring={self.scoring!r})."
            )
        if self.store_cv_results or self.criterion != "loo":
            raise ValueError(
                "Under array_api_dispatch, DoFKernelRidgeCV supports "
                "criterion='loo' and store_cv_results=False."
            )
        X, y, sample_weight = self._validate_array_api(X, y, sample_weight, *namespace)
        self.kernel_ = self._unlearned_kernel()
        alphas = self._check_alphas(_weighted_n_samples(X, sample_weight, namespace[0]))
        self.alphas_ = tuple(map(float, alphas))
        # (No exact route on the device: the cap of a fit beyond the budget.)
        nystroem = self._new_nystroem(
            float(alphas.min()),
            self.tol,
            self.loss_tol,
            self.max_components or _memory.default_max_components(),
        )
        return _array_api.fit_ridge(
            self, nystroem, X, y, sample_weight, *namespace, alphas=alphas
        )

    def _unlearned_kernel(self):
        """The kernel where nothing is learned: ``kernel``, ``"rbf"`` for
        None."""
        return "rbf" if self.kernel is None else self.kernel

    def _learned_kernel(self, X, y, sample_weight, alphas):
        """``kernel_`` and the grid to search: the kernel with its free
        hyperparameters learned by the leave-one-out error of kernel ridge
        on ``kernel_subsample`` rows
        (:func:`~sklearn_dof._kernel_learning.search_kernel`), where
        ``kernel`` is None (and no named kernel parameter is given) or a
        kernel object with free hyperparameters, on dense NumPy ``X``;
        else :meth:`_unlearned_kernel` and ``alphas``.  With ``alphas=None``
        the search's penalty spans :data:`SEARCH_LAMBDAS` and the grid
        follows the penalty learned (:func:`learned_penalties`); given
        ``alphas``, the search keeps within their range per row and the
        grid is theirs.  Third, the penalty learned with the kernel (None
        where none was)."""
        kernel = self.kernel
        named = (self.gamma, self.coef0, self.degree, self.kernel_params)
        learnable = (kernel is None and all(value is None for value in named)) or (
            is_kernel_object(kernel) and kernel.n_dims > 0
        )
        if not learnable or sparse.issparse(X) or _dask.is_dask_array(X):
            return self._unlearned_kernel(), alphas, None
        if kernel is not None:
            check_kernel_object(kernel, X.shape[1])
        progress = Progress(self.verbose, type(self).__name__)
        n_rows = _weighted_n_samples(X, sample_weight)
        lambdas = (
            SEARCH_LAMBDAS
            if self.alphas is None
            else (alphas.min() / n_rows, alphas.max() / n_rows)
        )
        search = search_kernel(
            kernel,
            X.astype(np.float64, copy=False),
            y,
            weights=sample_weight,
            intercept=self.fit_intercept,
            rows=self.kernel_subsample,
            lambdas=lambdas,
            max_iter=self.kernel_max_iter,
            n_restarts=self.n_restarts_optimizer,
            rng=check_random_state(self.random_state).randint(2**31),
            progress=progress,
        )
        progress(
            f"kernel_={search.kernel!r} ({search.choice}), alpha={search.alpha:.4g}"
        )
        if self.alphas is None:
            # kernel_subsample, not the rows drawn; the rows of positive
            # weight, whose mean weight scales the learned penalty, not
            # their total: weights scaled alike give the same grid.
            alphas = learned_penalties(
                search.alpha, self.kernel_subsample, _positive_rows(X, sample_weight)
            )
            if search.at_floor:
                # A penalty stopped at the end of its range was not
                # identified by the subsample (few rows): the default grid
                # joins, so that every row's leave-one-out can leave it.
                alphas = np.union1d(alphas, n_rows * DEFAULT_LAMBDAS)
        return search.kernel, alphas, search.alpha

    def _search_by_loo(self, problem, alphas, y):
        """``alpha_`` and ``best_score_`` by the efficient leave-one-out (or
        GCV) of ``problem`` over the grid.  Returns each row's weighted
        squared error at ``alpha_``, summed over the targets (None with a
        scorer), for :meth:`_exact_probe`."""
        scores, errors = self._efficient_cv(problem, alphas, y)
        # The first of tied maxima; a NaN score (0 / 0 leave-one-out at an
        # interpolating alpha) must never win.
        best = int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))
        self.alpha_ = float(alphas[best])
        self.best_score_ = float(scores[best])
        if self.scoring is not None:
            return None
        return problem.sw * np.sum(errors[:, :, best] ** 2, axis=1)

    def _search_by_splitter(self, X, y, sample_weight, alphas):
        """``alpha_`` and ``best_score_`` by scikit-learn's ``GridSearchCV``
        of ``Ridge`` on the features, with the splitter ``cv``."""
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
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        # Other splitters need the features as one matrix (n x p memory).
        Phi = self.nystroem_.transform(X).astype(np.float64, copy=False)
        search.fit(Phi, y, **fit_params)
        self.alpha_ = float(search.best_params_["alpha"])
        self.best_score_ = float(search.best_score_)

    def _rank_cap(self, X):
        """The cap of the rounds: the given one,
        :data:`SPLITTER_MAX_COMPONENTS` with a splitter ``cv``, else None:
        from memory, the transformer's default cap or, where the exact
        route applies and ``K`` fits the budget, every row
        (:meth:`_uncapped`)."""
        if self.max_components is not None:
            return self.max_components
        if self.cv is not None:
            return SPLITTER_MAX_COMPONENTS
        return None

    def _uncapped(self, X):
        """Whether the rounds may grow past the default cap to every row
        and end in exact kernel ridge: the exact route on float64 NumPy
        data whose ``K`` fits the memory budget, ``max_components=None``."""
        return (
            self.max_components is None
            and self.cv is None
            and not self.store_cv_results
            and self.criterion == "loo"
            and X.dtype != np.float32
            and not _dask.is_dask_array(X)  # (the paper's rule there)
            and _memory.fits_exact(X.shape[0])
        )

    def _exact_scorable(self, sample_weight):
        """Whether exact leave-one-out can score the fit: not with a scorer
        and rows of zero weight (a scorer reads every row's prediction, and
        the leave-one-out residual of a row of zero weight is 0 / 0 in the
        weighted coordinates)."""
        return not (
            self.scoring is not None
            and sample_weight is not None
            and not np.all(sample_weight > 0)
        )

    def _exact_search(
        self,
        nystroem,
        grams,
        y,
        sample_weight,
        alphas,
        reference=None,
        start=None,
        known=None,
        groups=None,
        reference_rows=None,
    ):
        """Exact kernel ridge on the landmarks of ``nystroem`` (every row) at
        the penalty its exact leave-one-out prefers: ``(score, alpha, dual,
        intercept)`` (for :meth:`_set_exact_search`), or None when no exact
        fit wins or none has a Cholesky factor.  Sets nothing.

        Up to :data:`EXACT_GRID_ROWS` rows every penalty of the grid is
        scored.  Beyond, each costs a factorisation (``2 n^3 / 3`` flops
        with its leave-one-out), and the search walks the grid, on the
        assumption that the scores are unimodal along it
        (:func:`~sklearn_dof._penalty_walk.walk_from`): from ``start``, a
        pair ``(penalty, ceiling)`` of :func:`~sklearn_dof._penalty_walk.walk_start`,
        down while the score improves, else up to the ceiling.

        With a ``reference``, ``(score, alpha)`` of a low-rank fit, which an
        exact fit must beat by ``loss_tol`` (relative mean squared error,
        with ``scoring=None``), only penalties below its ``alpha`` are
        scored: a rank grown on a factor of the rows prefers too large a
        penalty, since its fits at small penalties lack the rows' last
        directions (doc/design/cross_validation.rst).  The smallest is
        scored first (where the exact curve most often has its minimum) and
        the walk goes up while the score improves; if the smallest does not
        beat the reference, the reference's neighbour is scored, and the
        walk goes down from it.  With ``reference_rows`` too (the low-rank
        fit's weighted squared leave-one-out errors by row of ``X``), a
        screen at the penalty just below the reference's may rule every
        exact fit out first, for one factorisation
        (:mod:`~sklearn_dof._exact_screen`); where it does not, the exact fit
        at that penalty is finished from the screen's factor.

        ``grams`` is a list holding ``K`` in the landmarks' order, taken out
        and consumed by the first factorisation (no copy of it is kept
        between factorisations); the others recompute it (``n^2 d``
        flops).  ``known``: the start's fit where it was scored already
        (a walk from it, beyond :data:`EXACT_GRID_ROWS` rows).  ``groups``:
        the :class:`~sklearn_dof._duplicates.RowGroups` whose distinct rows
        ``nystroem``'s landmarks are (``y`` and ``sample_weight`` theirs),
        scored by the rows' own leave-one-out error.
        """
        if not self._exact_scorable(sample_weight):
            return None
        progress = Progress(self.verbose, type(self).__name__)
        n = nystroem.component_indices_.shape[0]

        screened = {}  # the screen's penalty, scored from its factor

        def fit(alpha, block=None):
            if alpha in screened:
                return screened[alpha]
            return self._exact_fit_scored(
                nystroem, grams, y, sample_weight, alpha, progress, block, groups
            )

        better = self._exact_better
        if n <= EXACT_GRID_ROWS:
            gram = grams.pop()
            best = None if reference is None else (*reference, None, None)
            for i, alpha in enumerate(alphas):
                candidate = fit(alpha, gram.copy() if i < len(alphas) - 1 else gram)
                if better(candidate, best):
                    best = candidate
        elif reference is None:
            penalty, ceiling = walk_start(alphas) if start is None else start
            best = walk_from(fit, alphas, penalty, better, ceiling=ceiling, known=known)
        else:
            # After a low-rank fit there is no exact score to anchor a walk:
            # the smallest penalty first, walking up, else the neighbour
            # below the low-rank fit's penalty, walking down.
            below = np.sort(alphas[alphas < reference[1]])
            if reference_rows is not None:
                ruled_out, known_fit = self._screen(
                    nystroem, grams, y, sample_weight, below, reference_rows, progress
                )
                if ruled_out:
                    return None
                if known_fit is not None:
                    screened[known_fit[1]] = known_fit
            best, moved = climb(fit, below, (*reference, None, None), better)
            if not moved:
                best, _ = climb(fit, below[-1:0:-1], best, better)
        if best is None or best[2] is None:
            return None
        return best

    def _exact_fit_scored(
        self,
        nystroem,
        grams,
        y,
        sample_weight,
        alpha,
        progress,
        block=None,
        groups=None,
    ):
        """One exact fit of :meth:`_exact_search`: ``(score, alpha, dual,
        intercept)``, or None without a Cholesky factor.  ``block`` is ``K``
        (consumed); else the one ``grams`` holds, else ``K`` recomputed.
        With ``groups``, scored on the rows (:mod:`~sklearn_dof._duplicates`)."""
        if block is None:
            block = _take_gram(nystroem, grams)
        solved = self._exact_solution(
            nystroem,
            block,
            y,
            sample_weight,
            float(alpha),
            loo=True,
            complement=groups is not None,
        )
        return self._exact_scored(
            nystroem, solved, y, sample_weight, alpha, progress, groups
        )

    def _exact_scored(
        self, nystroem, solved, y, sample_weight, alpha, progress, groups=None
    ):
        """:meth:`_exact_fit_scored`'s candidate from an exact solution
        (:meth:`_exact_solution` with ``loo``; None: none)."""
        if solved is None:
            return None
        dual, intercept, residuals = solved[:3]
        order = nystroem.component_indices_
        if groups is None:
            score = self._exact_score(order, residuals, y, sample_weight)
        else:
            rows = row_loo_residuals(groups, residuals, solved[3], order)
            score = self._exact_score(
                np.arange(rows.shape[0]), rows, groups.y, groups.row_weight
            )
        progress(
            f"exact kernel ridge at penalty {alpha:.4g}: "
            f"leave-one-out score {score:.6g}"
        )
        # A NaN score never wins.
        score = -np.inf if np.isnan(score) else score
        return (score, float(alpha), dual, intercept)

    def _screen(
        self, nystroem, grams, y, sample_weight, below, reference_rows, progress
    ):
        """``(ruled_out, known_fit)``: whether a sample of exact kernel
        ridge's leave-one-out errors at
        the largest penalty of ``below``
        (:func:`~sklearn_dof._ridge_solve.exact_loo_sample`, on the last of
        the landmarks, in a uniform order) rules out the exact fits at every
        penalty of ``below`` against the low-rank fit's ``reference_rows``
        (:func:`~sklearn_dof._exact_screen.rules_out`), where the low-rank fit
        explains the targets
        (:func:`~sklearn_dof._exact_screen.explains_targets`) and the
        sample's ``rows^2 + n slope_rows`` numbers fit the budget beside
        ``K``; where it screens and does not rule out, the exact fit at
        that penalty (:meth:`_exact_fit_scored`'s candidate), finished from
        the screen's factor, else None.  Consumes ``K`` where it screens."""
        order = nystroem.component_indices_
        n = order.shape[0]
        rows, slope_rows = sample_sizes(n, lower=below.shape[0] > 1)
        targets, weights = _landmark_targets(nystroem, y, sample_weight)
        if not _memory.fits_exact(n, rows**2 + n * slope_rows) or not (
            explains_targets(
                reference_rows, targets, weights, self.loss_tol, self.fit_intercept
            )
        ):
            return False, None
        alpha = float(below[-1])
        sampled = exact_loo_sample(
            _take_gram(nystroem, grams),
            targets,
            weights,
            alpha,
            self.fit_intercept,
            rows,
            slope_rows,
        )
        if sampled is None:
            return False, None
        squares, slopes, finish = sampled
        paired = reference_rows[order[n - rows :]]
        ruled_out, value_z, slope_z = rules_out(
            squares,
            paired,
            slopes,
            self.loss_tol,
            None if weights is None else weights[n - rows :],
        )
        progress(
            f"exact kernel ridge at penalty {alpha:.4g}, sampled on {rows} rows: "
            f"leave-one-out {np.sum(squares) / np.sum(paired):.4g} times the "
            f"low-rank fit's (z = {value_z:.3g}), slope z = {slope_z:.3g}: "
            + ("every exact fit below ruled out" if ruled_out else "not ruled out")
        )
        if ruled_out:
            return True, None
        # The climb scores this penalty too, mostly: finishing it here costs
        # the factor's inverse where a fit of its own would factor K again.
        return False, self._exact_scored(
            nystroem, finish(), y, sample_weight, alpha, progress
        )

    def _exact_better(self, candidate, incumbent):
        """Whether an exact fit (:meth:`_exact_fit_scored`) beats the
        incumbent: a low-rank fit's ``(score, alpha, None, None)`` by
        ``loss_tol`` (with ``scoring=None``), an exact fit by any margin."""
        if candidate is None:
            return False
        if incumbent is None:
            return True
        if incumbent[2] is None:
            return self._beats_by_margin(candidate[0], incumbent[0])
        return candidate[0] > incumbent[0]  # the first of tied maxima

    def _beats_by_margin(self, score, kept):
        """Whether a score beats the one ``kept`` by ``loss_tol`` of its
        mean squared error (minus which the score is, with
        ``scoring=None``), not a rounding's worth; with a scorer, by any
        margin."""
        if self.scoring is None:
            return score > kept * (1.0 - self.loss_tol)
        return score > kept

    def _adopt_exact(
        self, X, y, sample_weight, alphas, nystroem, best, learned, groups=None
    ):
        """The fit of the exact search ``best`` on ``nystroem``
        (:meth:`_exact_search`), after :meth:`_walk_length_scales` where the
        length scales of ``kernel_`` were learned (``learned``, the penalty
        learned with them, not None) on fewer rows than the fit's.
        ``groups``: as :meth:`_exact_search`'s, ``X`` the distinct rows."""
        rows = (
            _positive_rows(X, sample_weight)
            if groups is None
            else np.count_nonzero(groups.row_weight > 0)
        )
        if (
            learned is not None
            and free_length_scale(self.kernel_)
            and rows > self.kernel_subsample
        ):
            nystroem, best = self._walk_length_scales(
                X, y, sample_weight, alphas, nystroem, best, groups
            )
        self._set_exact_search(nystroem, best, y)

    def _walk_length_scales(
        self, X, y, sample_weight, alphas, nystroem, best, groups=None
    ):
        """The learned length scales checked on every row: all scaled alike
        by :data:`LENGTH_SCALE_STEP` at a time, down while the exact
        leave-one-out error at the penalty chosen improves by ``loss_tol``,
        else up (at most :data:`LENGTH_SCALE_STEPS` steps, within the
        kernel's ``length_scale_bounds``), then the penalty walked again at
        the scales kept; up to :data:`EXACT_GRID_ROWS` rows each step
        scores the whole grid instead.  Length scales learned on a
        subsample are those its rows resolve; more rows resolve shorter
        ones (doc/design/kernel.rst, "Length scales on every row").
        Returns ``(nystroem, best)`` and sets ``kernel_`` to the scales
        kept.  ``groups``: as :meth:`_exact_search`'s."""
        learned = self.kernel_
        n_samples = X.shape[0]
        every_penalty = n_samples <= EXACT_GRID_ROWS
        progress = Progress(self.verbose, type(self).__name__)

        def fit(factor):
            if not within_bounds(learned, factor):
                return None  # the climb stops there
            self.kernel_ = scaled_length_scales(learned, factor)
            progress(f"length scales times {factor:.4g}")
            every_row = self._every_row_fit(X, best[1])
            if every_row is None:
                return None
            fitted, grams = every_row  # the search consumes K from grams
            grid = alphas if every_penalty else np.array([best[1]])
            found = self._exact_search(
                fitted, grams, y, sample_weight, grid, groups=groups
            )
            return None if found is None else (found, fitted, factor)

        def better(candidate, incumbent):
            # As the exact probe's fits against a low-rank one: a step must
            # buy loss_tol of the leave-one-out error.
            return candidate is not None and self._beats_by_margin(
                candidate[0][0], incumbent[0][0]
            )

        down = LENGTH_SCALE_STEP ** -np.arange(1.0, LENGTH_SCALE_STEPS + 1)
        kept, moved = climb(fit, down, (best, nystroem, 1.0), better)
        if not moved:
            kept, moved = climb(fit, 1.0 / down, kept, better)
        best, nystroem, factor = kept
        self.kernel_ = scaled_length_scales(learned, factor)
        if moved and not every_penalty:
            best = self._exact_search(
                nystroem,
                [],
                y,
                sample_weight,
                alphas,
                start=(best[1], None),
                known=best,
                groups=groups,
            )
        return nystroem, best

    def _set_exact_search(self, nystroem, best, y):
        """The fit of the penalty an exact search on ``nystroem`` chose
        (:meth:`_exact_search`), which becomes ``nystroem_``."""
        self.nystroem_, self.n_components_ = nystroem, nystroem.n_components_
        self.best_score_, self.alpha_, dual, intercept = best
        self._set_exact(dual, intercept, y)
        self.nystroem_.alpha_ = self.alpha_

    def _exact_probe(self, X, y, sample_weight, alphas, learned=None, row_squares=None):
        """After a low-rank fit whose kernel matrix fits the exact budget:
        exact kernel ridge at smaller penalties of the grid, kept if its
        exact leave-one-out beats the low-rank fit's by ``loss_tol``
        (:meth:`_exact_search`); else the low-rank fit stays as it was.
        ``row_squares``: the low-rank fit's weighted squared leave-one-out
        errors by row, which the search's screen pairs with a sample of
        the exact ones (None: no screen).
        Only for the kernels that are positive semi-definite by construction,
        whose ``K + alpha I`` the exact fit factors (the others would take
        the pseudo-inverse route of ``n`` landmarks, ``O(n^3)`` for nothing).
        """
        if (
            self.n_components != "auto"
            or not is_always_psd(self.kernel_)
            or self.nystroem_.exact_
            or not np.any(alphas < self.alpha_)
            or not self._exact_scorable(sample_weight)
        ):
            return False
        # The low-rank fit stays in place unless the exact one wins.
        fitted = self._every_row_fit(X, self.alpha_)
        if fitted is None:
            return False
        every_row, grams = fitted  # the search consumes K from grams
        reference = (self.best_score_, self.alpha_)
        best = self._exact_search(
            every_row,
            grams,
            y,
            sample_weight,
            alphas,
            reference,
            reference_rows=row_squares,
        )
        if best is None:
            return False
        self._adopt_exact(X, y, sample_weight, alphas, every_row, best, learned)
        return True

    def _exact_score(self, order, residuals, y, sample_weight):
        """``best_score_`` of the exact fit from its leave-one-out residuals
        (in the landmarks' ``order``, every row): as :meth:`_efficient_cv`."""
        y_rows = y.reshape(y.shape[0], -1)[order]
        if self.scoring is None:
            sw = np.ones(len(order)) if sample_weight is None else sample_weight[order]
            # Rows of zero weight count zero (their residual is 0 / 0).
            squares = np.where(sw[:, None] > 0, sw[:, None] * residuals**2, 0.0)
            return float(-np.mean(squares))
        predictions = (y_rows - residuals).reshape((-1,) + y.shape[1:])
        scorer = get_scorer(self.scoring)
        return float(scorer(_PredictionsAsInput(), predictions, y[order]))

    def _efficient_cv(self, problem, alphas, y):
        """Score every penalty from one eigendecomposition; O(n p) each:
        ``(scores, errors)``, the errors of shape ``(n, n_targets,
        n_alphas)``.

        The per-sample leave-one-out (or GCV) errors of all penalties come
        from one more pass over the feature blocks.
        """
        n_samples, n_targets = problem.y.shape
        sw = problem.sw
        errors = cv_errors(problem, alphas, self.criterion)  # (n, k, n_alphas)
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
        return scores, errors
