"""Ridge solves on Nystroem features: pure numerics, no estimator.

A :class:`RidgeProblem` holds the weighted, centred normal equations of the
training features (sums over :class:`~sklearn_dof._blocks.FeatureBlocks`)
and solves them at any penalty: :class:`FeatureRidgeProblem` on the
features proper, :class:`KernelBasisRidgeProblem` on the kernel blocks
``K(x, I)`` with the map ``N`` of the features ``K(x, I) N`` applied to
``p x p`` sums (refined by passes over the blocks).  :func:`ridge_problem`
picks one.  :func:`cv_errors` gives the exact leave-one-out (or GCV)
errors of a grid of penalties from one eigendecomposition
(:mod:`sklearn_dof._loo`).
"""

import math
import warnings
from functools import partial

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.exceptions import ConvergenceWarning

from . import _tiles
from ._blocks import normal_equations
from ._cg import pcg_ridge, pcg_steps
from ._loo import loo_residuals, ridge_inverse, ridge_spectrum
from ._pcg_operator import falkon_preconditioner, normal_product
from ._validation import user_stacklevel

# Refinement of a solve in the kernel basis (see KernelBasisRidgeProblem): stop when
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
# NystroemPCGRidgeProblem: stop once the training objective is within this
# fraction of its minimum, or after PCG_MAX_ITER steps (Falkon's
# preconditioner needs 10-20 on real data).  A tolerance a decade or more
# below 1e-2 gives the direct solve's test error to a few parts in 10^4, and
# each decade tighter costs about three steps more
# (doc/design/large_ranks.rst, "Measurements behind the code's choices").
PCG_TOL = 1e-4
PCG_MAX_ITER = 100
# The preconditioner's R R^T and Cholesky factor (two of the three p^3 / 3
# factorisations of the method) in float32: half the time, and a
# preconditioner only approximates the operator: in float32 it gave the same
# test error in about the same number of steps (doc/design/large_ranks.rst,
# "Measurements behind the code's choices").  The operator stays float64; a
# float32 P that rounding leaves indefinite is refactored in float64.
PCG_PRECONDITIONER_DTYPE = np.float32
#: ``solver="auto"`` takes the conjugate gradients from this many landmarks
#: on: above the crossover with the direct solve measured at one penalty,
#: since a smaller penalty needs more steps (doc/large_ranks.rst).
CG_MIN_COMPONENTS = 4096


class RidgeProblem:
    """Weighted, centred least-squares data on fixed features (base class).

    Follows :func:`sklearn.linear_model._base._preprocess_data`: with
    ``fit_intercept`` the features and targets are centred by their
    ``sample_weight``-weighted means (the intercept is not penalised), and
    the loss is ``sum_i s_i (y_i - f(x_i))^2``.  The features are
    :class:`FeatureBlocks`, reduced block by block (:func:`normal_equations`).

    Attributes
    ----------
    y : ndarray of shape (n, k)
        Targets (not centred).
    sw : ndarray of shape (n,)
        Sample weights (ones when none were given).
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
        self.refine_passes = 0

    def solve(self, alpha):
        """Ridge weights ``(Phi^T S Phi + alpha I)^-1 Phi^T S y``, (p, k),
        or None when the solve cannot reach its accuracy."""
        raise NotImplementedError

    def intercept(self, W):
        """Intercept of the weights ``W`` (p, k), of shape (k,)."""
        return self.y_offset - self.Phi_offset @ W


class FeatureRidgeProblem(RidgeProblem):
    """:class:`RidgeProblem` on the features proper: their Gram matrix
    ``gram = Phi_c^T S Phi_c`` (p, p), one pass."""

    def __init__(self, features, y, sample_weight, fit_intercept):
        super().__init__(features, y, sample_weight, fit_intercept)
        # Features that are the leading columns of the rows' partial
        # Cholesky factor (a certified automatic rank) come with their sums.
        if features.factor is not None and bool(np.all(self.sw == 1)):
            sums = features.factor.normal_equations(self.y, fit_intercept)
        else:
            sums = normal_equations(features, self.y, self.sw, fit_intercept)
        self.gram, self.rhs, self.Phi_offset, self.y_offset = sums

    def solve(self, alpha):
        self.refine_passes = 0
        return _ridge_solver(self.gram, alpha)(self.rhs)


class KernelBasisRidgeProblem(RidgeProblem):
    """:class:`RidgeProblem` on the kernel blocks ``K(x, I)``, whose
    features are ``Phi = K N`` for ``features.basis`` ``N``.

    ``N N^T = K(I, I)^+`` (the inverse Cholesky factor ``R^{-1}``, or
    ``K(I, I)^{+1/2}``; see ``_linalg.LandmarkBasis``).  The Gram matrix is
    accumulated in the kernel basis, ``G = K_c^T S K_c``, one symmetric
    rank-``n`` update (``n p^2`` flops), with ``Phi_c^T S Phi_c = N^T G N``:
    the ``n p^2`` flops of forming ``K N`` row by row are saved, and the
    ``p x p`` system is solved in ``O(p^3)`` (see :meth:`_preconditioner`).
    That is exact up to rounding, but the rounding of ``G`` is amplified by
    ``||N||^2 = 1 / lambda_min(K(I, I))``, which can exceed a small penalty;
    so :meth:`solve` refines the Cholesky solution by preconditioned
    conjugate gradients on the exact operator
    ``w -> N^T K_c^T S K_c N w + alpha w``, one pass over the kernel blocks
    (``O(n p)`` beyond the kernel) per step, and returns None when that does
    not converge (the caller then forms the features).  When the landmarks
    came with the partial Cholesky factor of the rows (``features.factor``,
    the non-uniform column rules and the automatic rank) and the rows are
    unweighted, ``G`` comes from that factor instead of a pass over the data
    (``_nystroem._LandmarkFactor``), and is summed over the kernel blocks
    after all if the refinement does not converge from it.

    Attributes
    ----------
    kernel_gram : ndarray of shape (p, p)
        ``G = K_c^T S K_c``.
    sums_from_factor : bool
        Whether ``G`` and the right-hand side come from the rows' factor.
    """

    def __init__(self, features, y, sample_weight, fit_intercept):
        super().__init__(features, y, sample_weight, fit_intercept)
        self.basis = features.basis
        factor = features.factor
        self.sums_from_factor = factor is not None and bool(np.all(self.sw == 1))
        if self.sums_from_factor:
            self._set_kernel_sums(*factor.normal_equations(self.y))
        else:
            self._set_kernel_sums(*normal_equations(features, self.y, self.sw, True))

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
        """Ridge weights ``(Phi^T S Phi + alpha I)^-1 Phi^T S y``, (p, k),
        or None when the refinement did not converge."""
        self.refine_passes = 0
        W = self._refined_solve(alpha)
        if W is None and self.sums_from_factor:
            # The factor carries rounding of its own, amplified by the small
            # pivots of an ill-conditioned K(I, I): at tiny penalties the sums
            # over the kernel blocks may still precondition well enough.
            # They replace the factor's for good.  (The retry gets the whole
            # budget of passes; refine_passes counts both.)
            self.sums_from_factor = False
            self._set_kernel_sums(
                *normal_equations(self.features, self.y, self.sw, True)
            )
            spent, self.refine_passes = self.refine_passes, 0
            W = self._refined_solve(alpha)
            self.refine_passes += spent
        return W

    def _refined_solve(self, alpha):
        solve = self._preconditioner(alpha)
        return self._refine(solve(self.rhs), alpha, solve)

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

    def _apply(self, V, alpha):
        """``(Phi_c^T S Phi_c + alpha I) V`` for ``Phi = K N``, by one pass
        over the kernel blocks ``K`` (never ``K N``):
        :func:`~sklearn_dof._pcg_operator.normal_product`."""
        self.refine_passes += 1
        # Products with a few columns cost about as much per row on a chunk
        # as on a block: the kernel is streamed through the cache.
        reduce = partial(self.features.reduce, stream=True)
        weights = None if bool(np.all(self.sw == 1)) else self.sw
        return normal_product(
            V, alpha, reduce, self.basis, self._kernel_offset, weights
        )

    def _refine(self, start, alpha, precondition):
        """Preconditioned conjugate gradients from ``start``, one column per
        target.

        ``precondition`` solves with the Gram matrix accumulated in the
        kernel basis, exact up to its rounding, so the iteration contracts
        fast; None if it does not reach ``REFINE_RTOL``.
        """
        C = self.rhs
        target = REFINE_RTOL**2 * np.einsum("ij,ij->j", C, precondition(C))
        rate = 0.0  # no contraction observed yet: try at least one step
        previous = None
        for W, _, rz in self._pcg_steps(start, alpha, precondition):
            if previous is not None:
                ratio = np.divide(
                    rz, previous, out=np.zeros_like(rz), where=previous > 0
                )
                rate = float(np.max(ratio[rz > target], initial=0.0))
            if np.all(rz <= target):
                return W
            # Passes still needed at the rate seen so far (rz falls by
            # ``rate`` per pass), for the slowest target.
            with np.errstate(divide="ignore", invalid="ignore"):
                needed = np.max(np.log(target / rz) / np.log(rate))
            # (Written so that a NaN, from a system that rounding left
            # indefinite, ends the iteration instead of feeding it.)
            passes = self.refine_passes + max(needed, 1)
            if not (rate < 1.0 and passes <= REFINE_MAX_PASSES):
                return None
            previous = rz
        return None  # pragma: no cover - the steps never end by themselves

    def _pcg_steps(self, W, alpha, precondition):
        """:func:`~sklearn_dof._cg.pcg_steps` on ``(Phi_c^T S Phi_c + alpha I)
        W = rhs`` from ``W``: each step one pass over the kernel blocks."""
        return pcg_steps(lambda V: self._apply(V, alpha), self.rhs, W, precondition)


class NystroemPCGRidgeProblem(KernelBasisRidgeProblem):
    """:class:`KernelBasisRidgeProblem` solved by conjugate gradients with
    the Nystroem preconditioner, without the ``n p^2`` Gram matrix.

    Falkon's algorithm (Rudi, Carratino and Rosasco, NeurIPS 2017): the
    ``p`` landmarks are a uniform sample of the rows, so the Gram matrix of
    the features, ``Phi^T S Phi`` with ``Phi = K(x, I) R^{-1}``, is about
    ``t / p`` times that of the landmarks' own features, ``K(I, I) R^{-1} =
    R^T`` (``t`` the total weight).  Its preconditioner
    ``P = (t / p) R R^T + alpha I`` costs ``O(p^3)`` from the landmark
    block alone (``R``, ``R R^T`` and the Cholesky factor of ``P``), and
    each step of the conjugate gradients is one pass over the kernel blocks
    (``O(n p)`` beyond the kernel, never the ``n p^2`` of the Gram matrix).
    Without intercept centring, ``P`` misses the mean direction of the
    features that the operator has; conjugate gradients spend about one step
    on it.

    The iteration stops on the fit's own accuracy: the excess of the
    training objective ``J(w) = ||y_c - Phi_c w||_S^2 + alpha ||w||^2`` over
    its minimum is ``r^T H^{-1} r`` for the residual ``r``, about the
    ``r^T P^{-1} r`` that the iteration computes; it stops once that is at
    most ``tol`` times ``J(w)`` for every target, so that the training
    predictions differ from the exact solution's by at most about
    ``sqrt(tol)`` of the residual's norm, or after ``max_iter`` steps.

    Parameters
    ----------
    features : FeatureBlocks
        Kernel blocks with a Cholesky basis (``features.basis.cholesky``).
    y, sample_weight, fit_intercept
        As for :class:`RidgeProblem`.
    tol : float, default=PCG_TOL
        Relative excess of the training objective at which to stop.
    max_iter : int, default=PCG_MAX_ITER
        Most steps.

    Attributes
    ----------
    n_iter : int
        Steps the last :meth:`solve` took.
    converged : bool
        Whether it stopped on ``tol``.
    """

    def __init__(
        self,
        features,
        y,
        sample_weight,
        fit_intercept,
        tol=None,
        max_iter=None,
    ):
        RidgeProblem.__init__(self, features, y, sample_weight, fit_intercept)
        self.basis = features.basis
        self.sums_from_factor = False
        self.tol = PCG_TOL if tol is None else tol
        self.max_iter = PCG_MAX_ITER if max_iter is None else max_iter
        self.n_iter, self.converged = 0, None
        self._precondition = None
        moments = normal_equations(features, self.y, self.sw, True, with_gram=False)
        self._set_kernel_sums(*moments)
        y_c = self.y - self.y_offset
        self._y_norms = np.einsum("i,ij,ij->j", self.sw, y_c, y_c)

    def solve(self, alpha, start=None, like=None):
        """Ridge weights (p, k) to ``tol``, or None without a preconditioner
        (the caller then solves directly).

        ``start``: the first iterate (p, k), else ``P^{-1} rhs``.  The
        preconditioner of ``like`` (a problem on the same basis) or of this
        problem's last solve serves, scaled by the ratio of total weights,
        with no ``O(p^3)``, where it was formed for an ``alpha / t`` within a
        factor :data:`PRECONDITIONER_REUSE` of this one (exactly ``P`` at the
        same ``alpha / t``).
        """
        self.refine_passes = 0
        precondition = self._preconditioner(alpha, like)
        if precondition is None:
            return None
        if start is not None:
            start = np.asarray(start, dtype=np.float64).reshape(self.rhs.shape)
        W, self.n_iter, self.converged = pcg_ridge(
            lambda V: self._apply(V, alpha),
            self.rhs,
            precondition,
            self._y_norms,
            self.tol,
            self.max_iter,
            start=start,
        )
        return W

    def _preconditioner(self, alpha, like=None):
        """``rhs -> P^{-1} rhs`` for ``P = (t / p) R R^T + alpha I``
        (:func:`~sklearn_dof._pcg_operator.falkon_preconditioner`), or None
        (no Cholesky basis, or no factor of ``P`` even in float64); that of
        ``like`` scaled where it serves (see :meth:`solve`)."""
        total = float(self.sw.sum())
        for source in (like, self):
            reused = _scaled_preconditioner(source, self.basis, alpha, total)
            if reused is not None:
                self._precondition = (reused, source._precondition[1], total)
                return reused
        R = self.basis.cholesky
        if R is None:
            return None
        precondition = falkon_preconditioner(
            # B = R^T: B^T B = R R^T by LAPACK's lauum (by tiles above
            # _tiles.TILE_ORDER), cast tile by tile, never as a p x p copy.
            lambda dtype: _tiles.upper_outer(R, dtype),
            _cholesky_solver,
            total,
            alpha,
            PCG_PRECONDITIONER_DTYPE,
        )
        self._precondition = (precondition, alpha / total, total)
        return precondition


def _scaled_preconditioner(like, basis, alpha, total):
    """The preconditioner of ``like`` (a solved
    :class:`NystroemPCGRidgeProblem`) for ``alpha`` and total weight
    ``total`` on ``basis``: ``P' = (t' / t) P``, exact when ``alpha' / t' =
    alpha / t`` and within a factor of :data:`PRECONDITIONER_REUSE` of
    ``P'`` while the ratios are that close; None where it does not serve."""
    cached = getattr(like, "_precondition", None)
    if cached is None or like.basis is not basis or total <= 0 or alpha <= 0:
        return None
    precondition, ratio, like_total = cached
    if precondition is None or ratio <= 0:
        return None
    if abs(math.log(alpha / total / ratio)) > math.log(PRECONDITIONER_REUSE):
        return None
    scale = like_total / total
    return lambda rhs: precondition(rhs) * scale


# The largest factor between the penalty per unit weight a preconditioner
# was formed for and the one it serves: P then bounds the operator's
# spectrum within that factor (one step of a half-decade grid is 3.2), and
# the steps saved on its O(p^3) outweigh the few more it takes.
PRECONDITIONER_REUSE = 4.0


def _cholesky_solver(P):
    """``rhs -> P^{-1} rhs`` by LAPACK's Cholesky factor of ``P``, factored
    in place (by tiles above ``_tiles.TILE_ORDER``), or None where rounding
    left ``P`` indefinite.  Applied by triangular solves (LAPACK's
    ``potrs``): no inverse to form, ``p^3 / 3`` flops that the array-API
    back-end spends for an accelerator's faster products."""
    try:
        factor = _tiles.cho_factor(P, lower=True, overwrite_a=True)
    except linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(np.diag(factor[0]))):
        return None
    return lambda rhs: linalg.cho_solve(factor, rhs, check_finite=False)


def uses_cg(solver, n_components, sums_are_free=False):
    """Whether the estimators' ``solver`` takes the conjugate gradients at
    rank ``n_components``.

    ``"auto"`` does from :data:`CG_MIN_COMPONENTS` on, unless the Gram matrix
    comes without a pass over the data (``sums_are_free``: an automatic
    rank's partial Cholesky factor holds it), where the direct solve costs
    only its ``p^3 / 3``.
    """
    if solver == "auto":
        return n_components >= CG_MIN_COMPONENTS and not sums_are_free
    return solver == "cg"


def warn_not_converged(n_iter, tol=None):
    """The :class:`~sklearn.exceptions.ConvergenceWarning` of conjugate
    gradients stopped by their step limit."""
    tol = PCG_TOL if tol is None else tol
    warnings.warn(
        f"The conjugate gradients stopped after {n_iter} steps with the "
        f"training objective more than {tol:g} above its minimum (relative); "
        "solver='direct' solves exactly.",
        ConvergenceWarning,
        stacklevel=user_stacklevel(),
    )


def ridge_problem(features, y, sample_weight, fit_intercept):
    """The :class:`RidgeProblem` of the feature blocks: in the kernel basis
    when ``features.basis`` is set, else on the features proper."""
    if features.basis is None:
        return FeatureRidgeProblem(features, y, sample_weight, fit_intercept)
    return KernelBasisRidgeProblem(features, y, sample_weight, fit_intercept)


def _ridge_solver(gram, alpha, exact=True):
    """``rhs -> (gram + alpha I)^-1 rhs`` by Cholesky, eigh as a fallback.

    ``exact``: ``gram`` is accurate to its own rounding, and the fallback
    drops the directions below it (:func:`~sklearn_dof._loo.ridge_inverse`),
    with a warning.
    Otherwise the solver is a preconditioner for a Gram matrix that is
    refined afterwards (see :class:`KernelBasisRidgeProblem`): a Cholesky failure
    only means its rounding exceeds ``alpha``, and the fallback keeps every
    direction, silently.
    """
    A = np.array(gram, dtype=np.float64, order="F")
    A[np.diag_indices_from(A)] += alpha
    try:
        factor = _tiles.cho_factor(A, lower=True, overwrite_a=True)
        return lambda rhs: linalg.cho_solve(factor, rhs)
    except linalg.LinAlgError:
        if exact:
            warnings.warn(
                f"Cholesky factorisation of the {gram.shape[0]}x{gram.shape[0]} "
                f"ridge system failed at alpha={alpha:g}; solving it with a "
                "symmetric eigendecomposition instead.",
                linalg.LinAlgWarning,
                stacklevel=user_stacklevel(),
            )
    eigvals, V = linalg.eigh(0.5 * (gram + gram.T))
    inverse = ridge_inverse(eigvals, np.array([alpha]), drop_rounding=exact)
    return lambda rhs: V @ (inverse * (V.T @ rhs))


def cv_errors(problem, alphas, criterion="loo"):
    """Leave-one-out (``"loo"``) or GCV (``"gcv"``) errors of every penalty.

    One eigendecomposition of the centred Gram matrix of a
    :class:`FeatureRidgeProblem`, then one pass over the feature blocks:
    ``O(n p)`` per penalty (:mod:`~sklearn_dof._loo`).  Returns an array of
    shape ``(n_samples, n_targets, n_alphas)``.
    """
    sw = problem.sw
    spectrum = ridge_spectrum(
        problem.gram,
        problem.rhs,
        alphas,
        offset=problem.Phi_offset,
        y_offset=problem.y_offset,
        total_weight=sw.sum() if problem.fit_intercept else None,
        criterion=criterion,
        n_samples=problem.y.shape[0],
        # Rounding's directions get no inverse, as in the exact solve's
        # eigh fallback (_ridge_solver).
        drop_rounding=True,
    )

    def block_errors(Phi_b, y_b, sw_b):
        return loo_residuals(Phi_b, y_b, spectrum, sw_b).transpose(0, 2, 1)

    return problem.features.map(block_errors, problem.y, sw)


def exact_kernel_ridge(
    gram, y, sample_weight, alpha, fit_intercept, loo=False, complement=False
):
    """Exact kernel ridge from ``K`` itself: every row a landmark.

    The dual weights ``c`` and intercept ``b`` minimising
    ``sum_i s_i (y_i - b - (K c)_i)^2 + alpha c^T K c``: with
    ``r = sqrt(s)`` and ``M = diag(r) K diag(r) + alpha I``,
    ``c = diag(r) M^{-1} diag(r) (y - b)``, and the intercept makes
    ``sum_i c_i = 0``, ``b = r^T M^{-1} (r y) / r^T M^{-1} r``.  This is the
    Nystroem ridge whose landmarks are all the rows (``L = K``), at
    :class:`sklearn.kernel_ridge.KernelRidge`'s cost: one Cholesky
    factorisation, ``n^3 / 3`` flops, against ``n^3`` more for the normal
    equations of ``n`` features.  ``M`` is positive definite for any
    penalty ``alpha > 0`` and PSD kernel, duplicated rows included.

    Parameters
    ----------
    gram : ndarray of shape (n, n)
        ``K``, float64; overwritten.
    y : ndarray of shape (n, n_targets)
        Targets.
    sample_weight : ndarray of shape (n,) or None
        Non-negative weights ``s``.
    alpha : float
        Penalty.
    fit_intercept : bool
        Whether ``b`` is fitted (else zero).
    loo : bool, default=False
        Also return the exact leave-one-out residuals.  The residuals of the
        fit, in the weighted coordinates ``r (y - f)``, are ``alpha Q r y``
        for ``Q = M^{-1} - u u^T / (r^T u)``, ``u = M^{-1} r`` (``Q =
        M^{-1}`` without intercept), and the hat matrix is ``I - alpha Q``:
        a row's leave-one-out residual is ``(Q r y)_i / (r_i Q_ii)``, with
        ``(M^{-1})_ii`` the squared norm of column ``i`` of ``L^{-1}``
        (``M = L L^T``): ``n^3 / 3`` flops more than the fit.
    complement : bool, default=False
        With ``loo``, also return ``1 - H_ii = alpha Q_ii``, each row's
        complement of its leverage (``_duplicates.row_loo_residuals`` reads
        it).

    Returns
    -------
    dual : ndarray of shape (n, n_targets)
    intercept : ndarray of shape (n_targets,)
    loo_residuals : ndarray of shape (n, n_targets)
        With ``loo`` only.
    complement : ndarray of shape (n,)
        With ``loo`` and ``complement`` only.

    The whole is None when ``M`` has no Cholesky factor (``K`` not PSD, or
    its rounding above ``alpha``).
    """
    solved = _exact_factor_solve(gram, y, sample_weight, alpha, fit_intercept)
    if solved is None:
        return None
    if not loo:
        return solved[5], solved[6]
    return _exact_loo(solved, alpha, complement)


def _exact_loo(solved, alpha, complement=False):
    """:func:`exact_kernel_ridge`'s ``(dual, intercept, residuals[,
    complement])`` from :func:`_exact_factor_solve`'s ``solved``, its factor
    inverted in place."""
    factor, solution, v, ones, root, dual, intercept = solved
    # Q r y is ``solution`` (M^{-1} r (y - b) with b eliminated); Q_ii from
    # the inverse factor, computed in place of the factor (no longer needed).
    L_inv, info = lapack.dtrtri(factor[0], lower=1, overwrite_c=1)
    if info != 0:  # pragma: no cover - the factor has a positive diagonal
        return None
    Q_diagonal = _centred_diagonal(L_inv, v, ones)
    residuals = solution / Q_diagonal[:, None]
    if root is not None:
        # Rows of zero weight take no part; their residual is undefined.
        with np.errstate(divide="ignore", invalid="ignore"):
            residuals = residuals / root[:, None]
    if complement:
        return dual, intercept, residuals, alpha * Q_diagonal
    return dual, intercept, residuals


def _exact_factor_solve(gram, y, sample_weight, alpha, fit_intercept):
    """The Cholesky factor of ``M`` (:func:`exact_kernel_ridge`, in the
    memory of ``gram``) and the solves on it: ``(factor, solution, v, ones,
    root, dual, intercept)``, ``solution = Q r y`` and ``v = M^{-1} r`` (None
    without intercept), or None when ``M`` has no Cholesky factor."""
    n, k = y.shape
    # K is symmetric: its transpose is the Fortran-ordered array LAPACK
    # factors in place, without a copy.
    M = gram.T if gram.flags.c_contiguous else np.asfortranarray(gram)
    root = None
    if sample_weight is not None:
        root = np.sqrt(sample_weight)
        M *= root[:, None]
        M *= root[None, :]
    M[np.diag_indices(n)] += alpha
    try:
        factor = _tiles.cho_factor(M, lower=True, overwrite_a=True)
    except linalg.LinAlgError:
        return None
    ones = np.ones(n) if root is None else root
    rhs = y if root is None else root[:, None] * y
    if fit_intercept:
        rhs = np.column_stack([rhs, ones])
    solution = linalg.cho_solve(factor, rhs, check_finite=False)
    intercept = np.zeros(k)
    v = None
    if fit_intercept:
        u, v = solution[:, :k], solution[:, k]
        intercept = (ones @ u) / (ones @ v)
        solution = u - np.outer(v, intercept)
    dual = solution if root is None else root[:, None] * solution
    return factor, solution, v, ones, root, dual, intercept


def _centred_diagonal(L_inv, v, ones, rows=None):
    """``Q_ii`` from the inverse ``L_inv`` of a Cholesky factor of ``M``
    (lower; the other triangle is cleared here): the squared norms of its
    columns, less the intercept's ``v_i^2 / r^T v`` (``rows``: the indices
    of ``v`` the columns stand for, default all)."""
    _tiles.clear_upper(L_inv)  # LAPACK leaves the other triangle as it was
    diagonal = np.einsum("ij,ij->j", L_inv, L_inv)
    if v is not None:
        v_rows = v if rows is None else v[rows]
        diagonal -= v_rows * v_rows / (ones @ v)
    return diagonal


def exact_loo_sample(gram, y, sample_weight, alpha, fit_intercept, rows, slope_rows):
    """Exact kernel ridge's leave-one-out errors on its last rows only, and
    their slope in the penalty on fewer.

    The fit is :func:`exact_kernel_ridge`'s (one Cholesky factorisation of
    ``M``, ``n^3 / 3`` flops), but the leave-one-out errors are read for the
    last ``rows`` rows alone: for a lower factor ``L`` of ``M``, the inverse
    of ``M`` restricted to its trailing rows is ``L_22^{-T} L_22^{-1}``,
    with ``L_22`` the factor's trailing block, so their ``Q_ii`` cost
    ``rows^3 / 3`` flops where every row's cost ``n^3 / 3``.  With rows in
    a uniform order they are a uniform sample of the rows.

    The slope: ``Q`` (``M^{-1}``, centred with an intercept) moves with the
    penalty as ``dQ / dalpha = -Q^2``, so the fit's residuals ``s = Q r y``
    as ``-Q s`` and ``Q_ii`` as ``-||Q e_i||^2``; the columns ``Q e_i`` of
    the last ``slope_rows`` rows cost ``n^2`` flops each.

    Parameters
    ----------
    gram, y, sample_weight, alpha, fit_intercept :
        As :func:`exact_kernel_ridge` (``gram`` overwritten).
    rows : int
        How many of the last rows are scored, at most ``n``.
    slope_rows : int
        How many of the last rows get a slope, at most ``rows``.

    Returns
    -------
    squares : ndarray of shape (rows,)
        Each row's weighted squared leave-one-out error, summed over the
        targets (its term of ``n_targets * n`` times the mean squared
        error).
    slopes : ndarray of shape (slope_rows,)
        The derivatives of the last ``slope_rows`` of ``squares`` in ``log
        alpha``.
    finish : callable
        ``finish()``: :func:`exact_kernel_ridge`'s ``(dual, intercept,
        residuals)`` with ``loo``, from the same factor (inverted in place,
        ``n^3 / 3`` flops; once).  It holds the factor: drop it where the
        full fit is not wanted.

    The whole is None when ``M`` has no Cholesky factor.
    """
    solved = _exact_factor_solve(gram, y, sample_weight, alpha, fit_intercept)
    if solved is None:
        return None
    factor, solution, v, ones, _, _, _ = solved
    n = solution.shape[0]
    trailing = np.arange(n - rows, n)
    block_inverse, info = lapack.dtrtri(factor[0][n - rows :, n - rows :], lower=1)
    if info != 0:  # pragma: no cover - the factor has a positive diagonal
        return None
    Q_diagonal = _centred_diagonal(block_inverse, v, ones, trailing)
    # The weighted residual r_i e_i is s_i / Q_ii.
    scaled = solution[trailing] / Q_diagonal[:, None]
    squares = np.sum(scaled**2, axis=1)
    finish = partial(_exact_loo, solved, alpha)
    if slope_rows == 0:
        return squares, np.empty(0), finish
    # M^{-1} e_i: L^{-1} e_i lives on the trailing block, then L^{-T} on
    # every row, in place (the sample's memory stays below rows^2 and
    # n * slope_rows, after the factor's).
    columns = np.zeros((n, slope_rows), order="F")
    columns[n - rows :] = block_inverse[:, rows - slope_rows :]
    del block_inverse
    columns = linalg.solve_triangular(
        factor[0],
        columns,
        lower=True,
        trans="T",
        overwrite_b=True,
        check_finite=False,
    )
    # ||Q e_i||^2, with Q e_i = M^{-1} e_i - c_i v, c_i = v_i / r^T v.
    q_squared = np.einsum("ij,ij->j", columns, columns)
    moved = linalg.cho_solve(factor, solution, check_finite=False)  # M^{-1} s
    if v is not None:
        c = v[n - slope_rows :] / (ones @ v)
        q_squared += c * (c * (v @ v) - 2.0 * (v @ columns))
        moved -= np.outer(v, (v @ solution) / (ones @ v))
    last = slice(rows - slope_rows, rows)
    q, s = Q_diagonal[last, None], solution[n - slope_rows :]
    d_scaled = (s * q_squared[:, None] - moved[n - slope_rows :] * q) / q**2
    slopes = alpha * np.sum(2.0 * scaled[last] * d_scaled, axis=1)
    return squares, slopes, finish
