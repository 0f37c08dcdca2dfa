"""The shared base of the estimators built on :class:`DoFNystroem`.

Each estimator fits a ``nystroem_`` transformer and a linear model on its
features; this module holds what they share: the transformer's parameters
and their constraints, the validation of the data (numpy or Dask), the
fitted ``nystroem_`` step, the decision values as a kernel expansion over
the landmarks, and the input tags.
"""

import numpy as np
from scipy import linalg
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _array_api, _dask
from ._kernel_objects import is_kernel_object
from ._landmark_block import PLAIN_FIT, EveryRow
from ._nystroem import DoFNystroem
from ._validation import KERNEL_CONSTRAINTS

# The parameters every estimator forwards to DoFNystroem, and fit_intercept.
NYSTROEM_CONSTRAINTS = {
    **KERNEL_CONSTRAINTS,
    "n_components": DoFNystroem._parameter_constraints["n_components"],
    "sampling": DoFNystroem._parameter_constraints["sampling"],
    "max_components": DoFNystroem._parameter_constraints["max_components"],
    "random_state": ["random_state"],
    "fit_intercept": ["boolean"],
    "verbose": ["verbose"],
}


class DoFKernelMixin:
    """Mixin of the estimators built on :class:`DoFNystroem`.

    An estimator using it has the kernel parameters and ``n_components``,
    ``sampling``, ``random_state``, ``fit_intercept``, ``n_jobs`` and
    ``verbose``, and
    after ``fit`` the attributes ``nystroem_``, ``dual_coef_``, ``coef_``
    and ``intercept_``.
    """

    def _validate_fit_data(self, X, y, **kwargs):
        """``validate_data`` of ``(X, y)``, its Dask counterpart for dask arrays."""
        validate = _dask.validate_data if _dask.is_dask_array(X) else validate_data
        return validate(
            self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32], **kwargs
        )

    def _validate_predict_data(self, X):
        check_is_fitted(self)
        return validate_data(
            self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False
        )

    @property
    def coef_(self):
        # Documented in each estimator's Attributes.  Stored where the fit
        # worked in transform's basis; from dual_coef_ where it worked in
        # the landmarks' Cholesky basis or the kernel basis (which never
        # need normalization_): transform(X) = K(X, I) N_s with the
        # symmetric N_s = K(I, I)^{+1/2}, so coef_ = dual_coef_ K(I, I) N_s
        # gives the same predictions, coef_ @ N_s = dual_coef_ on the span
        # of K(I, I).
        check_is_fitted(self, "dual_coef_")
        if self._coef is not None:
            return self._coef
        nystroem = self.nystroem_
        gram = nystroem._landmark_gram()
        if _array_api.is_array_api_array(gram):
            xp = _array_api.namespace_of(gram)
            f64 = xp.float64
            return (self.dual_coef_ @ xp.astype(gram, f64)) @ xp.astype(
                nystroem.normalization_, f64
            )
        gram = gram.astype(np.float64, copy=False)
        return (self.dual_coef_ @ gram) @ nystroem.normalization_.astype(np.float64)

    def _landmark_weights(self, W, features):
        """``R^{-1} W`` for a solution ``W`` (p rows) found on features
        ``K(x, I) R^{-1}`` (a Cholesky factor ``R`` of the landmark block, on
        the blocks or their kernel basis), with ``coef_`` left to wait for
        ``normalization_``, which this route never needs; None for features
        in ``normalization_``'s triangular basis."""
        cholesky = features.cholesky
        if cholesky is None and features.basis is not None:
            cholesky = features.basis.cholesky
        if cholesky is None:
            return None
        self._coef = None
        return linalg.solve_triangular(cholesky, W, lower=False, check_finite=False)

    def _kernel_expansion(self, X):
        """``K(X, I) dual_coef_^T + intercept_``: ``O(p)`` per row, by blocks
        of rows, without the ``n x p`` kernel block."""
        check_is_fitted(self)
        namespace = _array_api.dispatch_namespace(X)
        _array_api.check_same_kind(self, X, "dual_coef_", "predict")
        if namespace is not None:
            X = _array_api.validate(self, X, namespace[0], reset=False)
            return _array_api.predict(self, X, namespace[0])
        X = self._validate_predict_data(X)
        return self.nystroem_._kernel_product(X, self.dual_coef_.T) + self.intercept_

    def _rank_cap(self, X):
        """``max_components`` of ``nystroem_`` for the data ``X``."""
        return self.max_components

    def _new_nystroem(
        self,
        alpha,
        dof_tol=0.1,
        loss_tol=0.01,
        max_components=None,
        n_components=None,
        sampling=None,
    ):
        """The unfitted ``nystroem_`` of this estimator at ``alpha`` (with
        ``max_components``, ``n_components`` and ``sampling``, else the
        estimator's), on the fitted kernel ``kernel_``."""
        return DoFNystroem(
            kernel=self.kernel_,
            gamma=self.gamma,
            coef0=self.coef0,
            degree=self.degree,
            kernel_params=self.kernel_params,
            alpha=alpha,
            n_components=n_components or self.n_components,
            sampling=self.sampling if sampling is None else sampling,
            loss_tol=loss_tol,
            max_components=max_components or self.max_components,
            tol=dof_tol,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )

    def _new_fitted_nystroem(
        self,
        X,
        alpha,
        request=PLAIN_FIT,
        *,
        dof_tol=0.1,
        loss_tol=0.01,
        n_components=None,
        sampling=None,
    ):
        """A new transformer fitted as :meth:`_fit_nystroem` fits
        ``nystroem_``, and what its fit returns (the row factors, or
        :class:`~sklearn_dof._landmark_block.EveryRow`); sets nothing."""
        nystroem = self._new_nystroem(
            alpha, dof_tol, loss_tol, self._rank_cap(X), n_components, sampling
        )
        nystroem._validate_params()
        request = request._replace(center=self.fit_intercept)
        return nystroem, nystroem._fit(nystroem._validate_fit_data(X), request)

    def _fit_nystroem(
        self,
        X,
        alpha,
        request=PLAIN_FIT,
        *,
        dof_tol=0.1,
        cache=False,
        loss_tol=0.01,
        n_components=None,
        sampling=None,
    ):
        """Fit ``nystroem_`` at ``alpha`` for ``request`` (a
        :class:`~sklearn_dof._landmark_block.FitRequest`, centred when this
        estimator fits an intercept); the training features as blocks.

        Returns a :class:`FeatureBlocks` in the triangular basis, whose
        coefficients ``blocks.rotation.T`` maps to ``nystroem_.transform``'s
        basis, or with ``request.kernel_basis`` the kernel blocks (see
        ``DoFNystroem._training_features``), for which ``nystroem_`` computes
        a Cholesky factor of ``K(I, I)`` instead of the eigendecomposition
        behind ``normalization_`` (about ``9 p^3`` flops).  Either way, when
        the landmarks lead the partial Cholesky factor of the rows (a
        certified automatic rank), the blocks are that factor's columns.
        With ``request.exact_solve``, when every row is a landmark, returns
        ``K(I, I)`` as :class:`~sklearn_dof._landmark_block.EveryRow`
        instead of blocks, for a fit of exact kernel ridge.

        ``dof_tol``, ``loss_tol``: the transformer's ``tol`` and
        ``loss_tol``; ``n_components``, ``sampling``: in place of the
        estimator's.
        """
        self.nystroem_, factors = self._new_fitted_nystroem(
            X,
            alpha,
            request,
            dof_tol=dof_tol,
            loss_tol=loss_tol,
            n_components=n_components,
            sampling=sampling,
        )
        self.n_components_ = self.nystroem_.n_components_
        if isinstance(factors, EveryRow):
            return factors
        if (
            request.triangular
            and not request.kernel_basis
            and factors is not None
            and factors.features is None
        ):
            # The block's Cholesky factor: features K(x, I) R^{-1}.
            return self.nystroem_._training_features(
                X, cache=cache, cholesky=factors.cholesky
            )
        # The factor's columns as features in the triangular basis for the
        # callers in the kernel basis (whose coefficients map by R^{-1}) and
        # the ridge certificate's; the others keep normalization_'s basis.
        if not request.kernel_basis and (
            factors is None
            or factors.features is None
            or request.response is None
            or request.objective != "squared"
        ):
            factors = None
        return self.nystroem_._training_features(
            X, cache=cache, kernel_basis=request.kernel_basis, factors=factors
        )

    # Documented in each estimator's Attributes: the transformer's, read
    # through (a fixed-rank uniform estimate is computed on first read).
    dof_ = property(lambda self: self._fitted_nystroem().dof_)
    effective_dof_ = property(lambda self: self._fitted_nystroem().effective_dof_)

    def _fitted_nystroem(self):
        check_is_fitted(self, "nystroem_")
        return self.nystroem_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # (scikit-learn's kernel objects take dense arrays only.)
        tags.input_tags.sparse = not is_kernel_object(self.kernel)
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags
