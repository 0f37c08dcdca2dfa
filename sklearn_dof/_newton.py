"""Newton solver for L2-penalised binary and multinomial logistic regression.

Pure functions on a dense feature matrix ``Phi`` (n x p), meant for Nystroem
features, where ``p`` is of the order of the degrees of freedom.  With
``C = 1 / alpha`` the objective is the one of
:class:`sklearn.linear_model.LogisticRegression`,

.. math::

    \\sum_i w_i \\ell_i(\\theta) + \\frac{\\alpha}{2} \\|W\\|_F^2,

where ``W`` holds the coefficients (not the intercepts, which are not
penalised) and ``ell_i`` is the binomial (sigmoid) or multinomial (softmax)
negative log-likelihood.  Like scikit-learn, the solver works on that
objective divided by ``sum_i w_i``, so that ``tol`` has the same meaning as
in ``LogisticRegression(solver="newton-cholesky")``.

Each iteration computes the Newton step by a Cholesky factorisation of the
Hessian (two classes, a few hundred features, a Hessian within
``max_hessian_bytes``) or by
preconditioned conjugate gradient on Hessian-vector products (Newton-CG,
never forming the Hessian), then backtracks until the Armijo condition
holds: the steps of :class:`_NewtonSolver`, named as in scikit-learn's
``NewtonSolver``.
"""

import math
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy import linalg
from scipy.special import expit, logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from . import _tiles
from ._blocks import FeatureBlocks
from ._cg import pcg_steps
from ._validation import user_stacklevel

# 256 MiB: a two-class Hessian of side p + 1 up to 5,792 is formed and
# factored; Newton-CG's Gram matrix and per-class blocks fit it likewise.
DEFAULT_MAX_HESSIAN_BYTES = 2**28
# Two classes: the features from which "auto" takes Newton-CG, between the
# measured crossover's sides (see auto_inner_solver).
CHOLESKY_MAX_FEATURES = 384

# Backtracking line search of scikit-learn's NewtonSolver: step halving and
# a weak Armijo constant; 21 trials reach t = 2**-20.
_LS_BETA = 0.5
_LS_SIGMA = 2.0**-11
_LS_TRIALS = 21


class NewtonResult(NamedTuple):
    """Result of :func:`logistic_newton`.

    Attributes
    ----------
    coef : ndarray of shape (1, n_features) or (n_classes, n_features)
        Coefficients; one row for a binary problem (the log-odds of class 1).
    intercept : ndarray of shape (1,) or (n_classes,)
        Intercepts, zero without ``fit_intercept``; multinomial intercepts
        sum to zero (the symmetric parametrisation).
    n_iter : int
        Number of Newton steps taken.
    converged : bool
        Whether the stopping rule was met within ``max_iter`` steps.
    inner_solver : {"cholesky", "cg"}
        How the Newton steps were computed.
    hessian : CurvatureFactor or None
        The two-class Hessian at the fit, where the caller factored it (the
        certificate's leave-one-out pass does); a warm start's Newton-CG
        steps take it as their preconditioner.
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    converged: bool
    inner_solver: str
    hessian: "CurvatureFactor | None" = None


class CurvatureFactor(NamedTuple):
    r"""The two-class Hessian of the unscaled objective at a fit, factored.

    With the curvatures ``w_i = p_i (1 - p_i)``, their sum ``c``, the
    curvature-weighted mean row ``m`` of the features ``G`` and ``G_c = G -
    1 m^T``, the Hessian in (coefficients, intercept) is ``[[A, c m], [c
    m^T, c]]`` with ``A = G^T W G + alpha I``; eliminating the intercept
    leaves its Schur complement ``S = G_c^T W G_c + alpha I = R R^T``.  Its
    leading ``q x q`` block is that of the features' first ``q`` columns,
    and ``R^{-1}``'s leading block is the inverse factor of it: one factor
    serves every prefix rank.

    Attributes
    ----------
    inverse : ndarray of shape (r, r)
        ``R^{-1}``, lower triangular.
    mean : ndarray of shape (r,)
        ``m``.
    total : float
        ``c``.
    n_samples : int
        The rows it sums over: the Hessian per row is the scale of the
        objective divided by the total weight.
    """

    inverse: np.ndarray
    mean: np.ndarray
    total: float
    n_samples: int

    def solve(self, rhs, fit_intercept):
        """``n_samples H^{-1} rhs`` on the first ``q`` coefficients (``rhs``
        of shape ``(q + fit_intercept,)``): two triangular products."""
        q = rhs.shape[0] - int(fit_intercept)
        L = self.inverse[:q, :q]
        m = self.mean[:q]
        t = rhs[:q] - m * rhs[q] if fit_intercept else rhs[:q]
        out = np.empty_like(rhs)
        out[:q] = L.T @ (L @ t)
        if fit_intercept:
            out[q] = rhs[q] / self.total - m @ out[:q]
        return self.n_samples * out


def hessian_nbytes(n_features, n_classes, fit_intercept=True):
    """Bytes of the float64 Hessian the Cholesky inner solver would form.

    ``(m (p + fit_intercept))^2 * 8`` with ``m = 1`` for two classes and
    ``m = n_classes`` otherwise.
    """
    m = 1 if n_classes <= 2 else n_classes
    return 8 * (m * (n_features + int(fit_intercept))) ** 2


class _Problem:
    """Objective, gradient and curvature of the scaled logistic objective.

    Parameters are ``theta`` of shape (m, q): one row per modelled class
    (``m = 1`` for a binary problem), the coefficients in the first ``p``
    columns and the intercept in the last one when ``q = p + 1``.
    """

    def __init__(self, features, y, n_classes, alpha, sample_weight, fit_intercept):
        # Every product with the features is a map or a sum over row blocks
        # (FeatureBlocks), so the n x p matrix need not exist.
        self.features = features
        self.n_samples, self.p = features.n_samples, features.n_components
        self.fit_intercept = fit_intercept
        self.q = self.p + int(fit_intercept)
        self.binary = n_classes == 2
        self.n_classes = n_classes
        self.m = 1 if self.binary else n_classes
        w_sum = float(sample_weight.sum())
        self.s = sample_weight / w_sum
        self.lam = alpha / w_sum
        if self.binary:
            self.Y = (y == 1).astype(np.float64)[:, None]
        else:
            self.Y = np.zeros((self.n_samples, n_classes))
            self.Y[np.arange(self.n_samples), y] = 1.0
        # Multinomial intercepts are defined up to a common shift, so the
        # Cholesky inner solver keeps the last class's intercept fixed (like
        # scikit-learn); the CG inner solver instead works in the subspace
        # where every column of theta sums to zero over the classes, which
        # also removes the direction of curvature only alpha of the
        # coefficients (the one CG would resolve slowest), see :meth:`project`.
        self.free = np.ones((self.m, self.q), dtype=bool)
        if fit_intercept and not self.binary:
            self.free[-1, -1] = False
        self._gram = None
        # Kernel blocks K(x, I) whose features K(x, I) N are never formed
        # (``features.basis``, N = R^{-1} for the estimators): every product
        # with the features is a streamed pass over the kernel blocks, with N
        # applied to its p x m side, 2 p^2 m flops a product against the
        # n p^2 of forming the features at every pass when they do not fit
        # in memory.
        self.basis = features.basis

    def _kernel_side(self, coef):
        """``N W^T`` (p, m) for coefficients ``coef`` (m, p) of the
        features: the weights of the kernel blocks."""
        if self.basis is None:
            return coef.T.copy()
        return self.basis.map(coef.T)

    def _feature_side(self, SK):
        """``S^T K N`` (m, p) from a sum ``S^T K`` (m, p) over kernel
        blocks."""
        if self.basis is None:
            return SK
        return self.basis.map_t(SK.T).T

    def _features_of(self, Phi_b):
        """The features of a block: ``K_b N`` of kernel blocks (``n_b
        p^2`` flops: only for what has no streamed form)."""
        if self.basis is None:
            return Phi_b
        return self._feature_side(np.asarray(Phi_b, dtype=np.float64))

    def project(self, V):
        """Orthogonal projection on ``{V : sum_k V[k] = 0}`` (multinomial).

        The optimum lies there (the intercepts after centring), the gradient
        at a point there lies there and so does the Hessian times any vector
        there: CG started at zero stays in the subspace.
        """
        if self.binary:
            return V
        return V - V.mean(axis=0)

    def raw(self, theta):
        """Decision values ``Phi W^T + b``, shape (n, m)."""
        coef_t = self._kernel_side(theta[:, : self.p])
        R = self.features.map(
            lambda Phi_b: Phi_b @ coef_t.astype(Phi_b.dtype), stream=True
        )
        R = R.astype(np.float64, copy=False)
        if self.fit_intercept:
            R += theta[:, self.p]
        return R

    def loss(self, theta, R):
        """Objective value at ``theta`` with decision values ``R``."""
        if self.binary:
            r = R[:, 0]
            pointwise = np.logaddexp(0.0, r) - self.Y[:, 0] * r
        else:
            pointwise = logsumexp(R, axis=1) - (self.Y * R).sum(axis=1)
        coef = theta[:, : self.p]
        return float(self.s @ pointwise) + 0.5 * self.lam * float(np.vdot(coef, coef))

    def probabilities(self, R):
        """Class probabilities from decision values ``R``, shape (n, m)."""
        if self.binary:
            return expit(R)
        return np.exp(R - logsumexp(R, axis=1, keepdims=True))

    def gradient(self, theta, P):
        """Gradient from the probabilities ``P`` at ``theta``."""
        G = self.s[:, None] * (P - self.Y)
        grad = np.empty_like(theta)
        grad[:, : self.p] = self._rmatmul(G) + self.lam * theta[:, : self.p]
        if self.fit_intercept:
            grad[:, self.p] = G.sum(axis=0)
        return grad

    def hessian(self, P):
        """Hessian on the flattened ``theta`` (class-major), (m q)^2.

        Only the lower triangle is filled, which is all that a lower
        Cholesky factorisation reads.
        """
        m, q, p = self.m, self.q, self.p
        H = np.zeros((m * q, m * q))
        if self.binary:
            h = self.s * P[:, 0] * (1.0 - P[:, 0])
            H[:] = self._weighted_grams(h[:, None])[0]
        else:
            # d^2 / d theta_k d theta_l = Xa^T diag(s (delta_kl P_k - P_k P_l)) Xa
            # for the features with a column of ones, Xa; all blocks in one pass.
            SP = self.s[:, None] * P
            pairs = [(k, l) for k in range(m) for l in range(k + 1)]
            D = np.empty((self.n_samples, len(pairs)))
            for j, (k, l) in enumerate(pairs):
                D[:, j] = -SP[:, k] * P[:, l]
                if k == l:
                    D[:, j] += SP[:, k]
            for (k, l), block in zip(pairs, self._weighted_grams(D), strict=True):
                H[k * q : (k + 1) * q, l * q : (l + 1) * q] = block
        penalty = np.zeros((m, q))
        penalty[:, :p] = self.lam
        H[np.diag_indices_from(H)] += penalty.ravel()
        return H

    def _rmatmul(self, G):
        """``G^T Phi`` for a per-row array ``G`` of shape (n, m): (m, p)."""
        GK = self.features.reduce(
            lambda Phi_b, G_b: (G_b.T @ Phi_b).astype(np.float64, copy=False),
            G,
            stream=True,
        )
        return self._feature_side(GK)

    def _weighted_grams(self, D):
        """``Xa^T diag(D[:, j]) Xa`` for each column of ``D``, in one pass.

        ``Xa`` is ``Phi`` with a column of ones when there is an intercept.
        Non-negative weights go through one syrk of the square-root-weighted
        block, half the flops of a general product.
        """
        p, q = self.p, self.q
        nonneg = bool(np.all(D >= 0))

        def statistic(Phi_b, D_b):
            Phi_b = self._features_of(Phi_b).astype(np.float64, copy=False)
            out = np.empty((D_b.shape[1], q, q))
            for j in range(D_b.shape[1]):
                d = D_b[:, j]
                if nonneg:
                    scaled = Phi_b * np.sqrt(d)[:, None]
                    out[j, :p, :p] = _tiles.gram(scaled)
                else:
                    out[j, :p, :p] = Phi_b.T @ (d[:, None] * Phi_b)
                if self.fit_intercept:
                    out[j, p, :p] = out[j, :p, p] = d @ Phi_b
                    out[j, p, p] = d.sum()
            return out

        return list(self.features.reduce(statistic, D))

    def class_curvature(self, P):
        """``s_i P_ik (1 - P_ik)``, the curvature of each class alone, (n, m)."""
        return self.s[:, None] * P * (1.0 - P)

    def hessian_diagonal(self, P):
        """Diagonal of the Hessian, shape (m, q), in O(n p m)."""
        p = self.p
        curv = self.class_curvature(P)
        diag = np.empty((self.m, self.q))
        diag[:, :p] = (
            self.features.reduce(
                lambda Phi_b, c_b: (
                    c_b.T @ np.square(self._features_of(Phi_b), dtype=np.float64)
                ),
                curv,
            )
            + self.lam
        )
        if self.fit_intercept:
            diag[:, p] = curv.sum(axis=0)
        return diag

    def class_blocks(self, P):
        """Cholesky factors of the diagonal blocks of the Hessian, one per class.

        The block of class ``k`` is the Hessian of the objective in
        ``theta[k]`` alone; block-Jacobi preconditioning with them captures
        the ill-conditioning in feature space (small ``alpha``), which the
        diagonal does not.  ``None`` if a block cannot be factored.
        """
        curv = self.class_curvature(P)
        factors = []
        for block in self._weighted_grams(curv):
            block[np.diag_indices(self.p)] += self.lam
            factor = _cho_factor(block)
            if factor is None:
                return None
            factors.append(factor)
        return factors

    def hessp(self, V, P):
        """Hessian times ``V`` (shape (m, q)) in O(n p m), without the Hessian.

        One pass over the features: each block's decision values and its
        share of ``S^T Phi`` are computed while the block is at hand, so
        features computed on the fly from the kernel are computed once per
        product, not twice.
        """
        p = self.p
        coef_t = self._kernel_side(V[:, :p])
        intercept = V[:, p] if self.fit_intercept else 0.0
        binary = self.binary

        def statistic(Phi_b, P_b, s_b):
            U = (Phi_b @ coef_t.astype(Phi_b.dtype)).astype(np.float64, copy=False)
            U += intercept
            if binary:
                S = s_b[:, None] * P_b * (1.0 - P_b) * U
            else:
                S = (s_b[:, None] * P_b) * (U - (P_b * U).sum(axis=1, keepdims=True))
            return (S.T @ Phi_b).astype(np.float64, copy=False), S.sum(axis=0)

        SK, S_sum = self.features.reduce(statistic, P, self.s, stream=True)
        out = np.empty_like(V)
        out[:, :p] = self._feature_side(SK) + self.lam * V[:, :p]
        if self.fit_intercept:
            out[:, p] = S_sum
        return out

    def gram(self):
        """``Xa^T diag(s) Xa``, computed once (lower triangle).

        ``Xa`` is ``Phi`` with a column of ones when there is an intercept.
        Where the features are the first columns of a partial Cholesky
        factor whose Gram matrix its rounds keep (``features.factor``, a
        ``PrefixSums``) and the weights are equal, from that, in ``O(n p)``
        instead of a pass of ``n p^2``.  Two classes on features in the
        triangular basis ``K(x, I) R^{-1}`` (``features.cholesky``) take the
        landmarks' approximation instead (:meth:`_nystroem_gram`): the pass
        costs as much as ``p / 4`` Hessian products, more than the exact
        Gram matrix saves in products for two classes (the same Newton
        steps and optimum); with ``m`` classes a product costs ``m`` times
        more, and the exact Gram matrix pays for its pass.
        """
        if self._gram is not None:
            return self._gram
        if self.basis is not None and self.basis.cholesky is not None:
            self._gram = self._nystroem_gram(self.basis.cholesky)
            return self._gram
        sums = self.features.factor
        cholesky = self.features.cholesky
        if self.binary and sums is None and cholesky is not None:
            self._gram = self._nystroem_gram(cholesky)
            return self._gram
        # (Kernel blocks, with a basis, carry the kernel-basis sums instead.)
        if sums is None or self.features.basis is not None or np.ptp(self.s) != 0:
            self._gram = self._weighted_grams(self.s[:, None])[0]
            return self._gram
        p = self.p
        gram = np.empty((self.q, self.q))
        mean = sums.second_moments(out=gram[:p, :p])
        if self.fit_intercept:
            gram[p, :p] = gram[:p, p] = mean
            gram[p, p] = 1.0
        self._gram = gram
        return gram

    def _nystroem_gram(self, cholesky):
        """``Xa^T diag(s) Xa`` as the landmarks see it, without a pass: for
        uniform landmarks ``Phi^T diag(s) Phi`` (the weights sum to one) is
        about the mean over the landmarks of their own features' outer
        products, ``K(I, I) R^{-1} = R^T`` (up to the shift): ``R R^T / p``,
        the preconditioner of Falkon (and of the ridge's conjugate
        gradients, ``_ridge_solve.NystroemPCGRidgeProblem``) in ``p^3 / 3``
        flops.  The intercept is left uncoupled (its curvature, the total
        weight one, on the diagonal): an approximate ``G`` with the exact
        mean row beside it need not be positive definite.
        """
        p, q = self.p, self.q
        gram = np.zeros((q, q))
        gram[:p, :p] = _tiles.upper_outer(cholesky)
        gram[:p, :p] /= p
        if self.fit_intercept:
            gram[p, p] = 1.0
        return gram


def _cho_factor(H):
    """Cholesky factor of the lower triangle of ``H`` (overwritten).

    If ``H`` is not numerically positive definite, retries with a growing
    multiple of the identity added; ``None`` when even a large shift fails.
    """
    diagonal = np.diag(H).copy()
    scale = max(float(np.abs(diagonal).max(initial=0.0)), np.finfo(float).tiny)
    shift = 0.0
    for _ in range(12):
        H[np.diag_indices_from(H)] = diagonal + shift
        try:
            factor = _tiles.cho_factor(H, lower=True)
        except linalg.LinAlgError:
            factor = None
        if factor is not None and np.all(np.isfinite(factor[0].diagonal())):
            return factor
        shift = 1e-12 * scale if shift == 0.0 else 10.0 * shift
    return None


def _cholesky_step(H, g):
    """Solve ``H d = -g`` by Cholesky; ``None`` if ``H`` cannot be factored."""
    factor = _cho_factor(H)
    if factor is None:
        return None
    d = linalg.cho_solve(factor, -g, check_finite=False)
    return d if np.all(np.isfinite(d)) else None


def _cg_step(hessp, g, precond, rtol, max_iter, d=None):
    """Preconditioned CG for ``H d = -g``, stopped at ``||r|| <= rtol ||g||``.

    ``precond(r)`` applies the (symmetric positive semi-definite)
    preconditioner; ``d`` is a starting point (zero by default).  Started at
    zero, every iterate is a descent direction; the iteration
    (:func:`~sklearn_dof._cg.pcg_steps`, on the flat vector) also stops on
    (numerically) non-positive curvature.  Returns the step and whether it
    met the tolerance (or met non-positive curvature) within ``max_iter``
    products.
    """
    target = rtol * float(np.linalg.norm(g))
    steps = pcg_steps(hessp, -g, d, precond, stop_on_nonpositive_curvature=True)
    for n_iter, iterate in enumerate(steps):
        d, r, _ = iterate
        done = float(np.linalg.norm(r)) <= target
        if done or n_iter >= max_iter:
            break
    else:
        # The steps ended before a direction of non-positive curvature,
        # ``d`` the last iterate: the step stands as it is.
        done = True
    if not d.any():
        d = -precond(g)
    return d, done


# The Gram preconditioner keeps its Cholesky factor from step to step while
# the mean curvature it scales stays within this (log) ratio of the one it
# was factored at.
_REFACTOR_LOG_RATIO = math.log(1.25)


class _Preconditioner:
    """The preconditioner of the Newton-CG steps of one fit.

    It starts with the Gram matrix ``G = Xa^T diag(s) Xa`` (one pass, once
    per fit; two classes on features in a triangular basis take the
    landmarks' ``R R^T / p`` instead, :meth:`_Problem.gram`): block ``k``
    of the Hessian, ``Xa^T diag(s c_k) Xa + lam`` (the whole Hessian for
    two classes), is replaced by ``(cbar / cbar_k) (cbar G + lam)``, with
    ``cbar_k`` the class's mean curvature and ``cbar`` their mean: one
    Cholesky factorisation, ``q^3 / 3`` flops, for every class, redone at
    a step only where ``cbar`` moved by more than a quarter
    (:data:`_REFACTOR_LOG_RATIO`).  An eigendecomposition of ``G``, which
    would give each class its exact ``cbar_k G + lam``, is not used: it
    costs many factorisations and saves no products.  The Gram matrix
    holds the feature space's conditioning; it misses how the curvature
    concentrates on the rows still in doubt, which matters at small
    ``alpha``.  So once a step's CG has used as many products with the
    Hessian as forming the exact per-class blocks costs, it switches to
    block-Jacobi with those blocks for the rest of the fit: rent until the
    rent paid equals the price, then buy, and the fit costs at most about
    twice what the better of the two would have.  The price: ``m n q^2``
    flops of the blocks, at the BLAS's compute rate, against two passes
    over the ``n x q`` features per product, at the memory's bandwidth;
    their measured ratio (doc/logistic.rst) puts the switch at
    ``max(10, m q / 80)`` products.  With more cores the compute rate grows
    faster than the bandwidth, the blocks get cheaper, and the switch comes
    late, not early.

    A warm start that carries its Hessian, factored (two classes,
    :attr:`NewtonResult.hessian`, which the certificate's leave-one-out
    pass leaves), preconditions every step with it instead, whatever the
    budget (its memory is spent): exact at the first step, and the start is
    within the certificate's tolerance of the optimum, so that a step of a
    few products is left, and no Gram matrix or exact Hessian is formed.

    Without room in ``max_hessian_bytes`` for the Gram matrix (``8 q^2``
    bytes) the Hessian's diagonal; without room for the blocks (``8 m
    q^2``), no switch.  On kernel blocks whose features are never formed
    (``_Problem.basis``), the Gram matrix the landmarks give
    (:meth:`_Problem._nystroem_gram`), whatever the budget, and no switch:
    the diagonal and the blocks would each cost a pass of ``n p^2``.
    """

    def __init__(self, problem, max_hessian_bytes, hessian=None):
        self.problem = problem
        q, m = problem.q, problem.m
        if (
            hessian is not None
            and problem.binary
            and problem.p <= hessian.inverse.shape[0]
        ):
            # The Hessian at the warm start, factored by its caller: exact at
            # the first step, close at the next ones (a start within the
            # certificate's tolerance of the optimum); no Gram matrix to
            # form, and no Hessian of n q^2 to check the last decrement.
            self.hessian = hessian
            self.mode = "hint"
            self.can_block = False
            return
        # Kernel blocks in a Cholesky basis (features never formed): the
        # landmarks' Gram matrix, of R's size, whatever the budget; the
        # blocks and the diagonal would cost passes of n p^2.
        kernel_blocks = problem.basis is not None and problem.basis.cholesky is not None
        self.can_block = 8 * m * q**2 <= max_hessian_bytes and not kernel_blocks
        gram_fits = 8 * q**2 <= max_hessian_bytes or kernel_blocks
        self.mode = "gram" if gram_fits else "diagonal"
        self.switch_after = max(10, m * q // 80)
        # (mean curvature, Cholesky factor) of the Gram preconditioner.
        self._gram_factor = None

    def step(self, g, P):
        """Newton step at probabilities ``P`` by preconditioned CG.

        The truncated-Newton forcing ``||H d + g|| <= min(0.5, sqrt(||g||))
        ||g||`` converges superlinearly and asks fewer products per step
        than the quadratic forcing ``min(0.5, ||g||)`` (Nocedal and Wright,
        Section 7.1).

        Parameters
        ----------
        g : ndarray of shape (m * q,)
            The projected gradient, flattened class-major.
        P : ndarray of shape (n_samples, m)
            Probabilities at the iterate.

        Returns
        -------
        d : ndarray of shape (m * q,)
            The step.
        """
        problem = self.problem
        shape = (problem.m, problem.q)

        def hessp(v):
            return problem.project(problem.hessp(v.reshape(shape), P)).ravel()

        rtol = min(0.5, math.sqrt(float(np.linalg.norm(g))))
        max_iter = max(10, g.size)
        d = None
        if self.mode == "gram" and self.can_block:
            d, done = _cg_step(
                hessp, g, self._apply(P), rtol, min(max_iter, self.switch_after)
            )
            if done:
                return d
            self.mode = "blocks"
        d, _ = _cg_step(hessp, g, self._apply(P), rtol, max_iter, d=d)
        return d

    def _apply(self, P):
        """The preconditioner of the current mode at probabilities ``P``, as
        a function of a flattened residual."""
        problem = self.problem
        shape = (problem.m, problem.q)
        if self.mode == "blocks":
            blocks = problem.class_blocks(P)
            if blocks is None:
                self.mode = "diagonal"
        if self.mode == "hint":
            hessian, fit_intercept = self.hessian, problem.fit_intercept

            def solve(R):
                return hessian.solve(R[0], fit_intercept)[None]

        elif self.mode == "diagonal":
            diagonal = problem.hessian_diagonal(P)

            def solve(R):
                return R / diagonal

        elif self.mode == "blocks":

            def solve(R):
                return np.stack(
                    [
                        linalg.cho_solve(f, R[k], check_finite=False)
                        for k, f in enumerate(blocks)
                    ]
                )

        else:
            # One Cholesky factor per step for every class: the classes'
            # mean curvatures differ by small factors, applied as scales.
            curvature = np.maximum(
                problem.class_curvature(P).sum(axis=0), np.finfo(float).tiny
            )
            common = float(curvature.mean())
            factored = self._gram_factor
            if factored is not None and abs(math.log(common / factored[0])) <= (
                _REFACTOR_LOG_RATIO
            ):
                # The last step's factor: its scale off by at most that
                # ratio, the preconditioned spectrum within it, far inside
                # the curvatures' own spread, for a q^3 / 3 saved.
                common, factor = factored
            else:
                M = common * problem.gram()
                M[np.diag_indices(problem.p)] += problem.lam
                factor = _cho_factor(M)
                if factor is None:
                    self.mode = "diagonal"
                    return self._apply(P)
                self._gram_factor = (common, factor)
            ratios = (common / curvature)[:, None]

            def solve(R):
                return linalg.cho_solve(factor, R.T, check_finite=False).T * ratios

        return lambda r: problem.project(solve(r.reshape(shape))).ravel()


def _check_inputs(Phi, y, n_classes, sample_weight):
    """Check what ``@validate_params`` cannot: shapes and values.

    The decorator checks each argument's type and range; this checks that
    the arguments agree with each other and that ``y`` and
    ``sample_weight`` hold valid values.

    Parameters
    ----------
    Phi, y, n_classes, sample_weight
        As for :func:`logistic_newton`.

    Returns
    -------
    Phi : FeatureBlocks
        The features; rows of zero weight removed from an array (blocks
        just carry them: they take no part in the objective).
    y : ndarray of shape (n_samples,), dtype intp
    n_classes : int
    sample_weight : ndarray of shape (n_samples,)
    """
    if isinstance(Phi, FeatureBlocks):
        n_rows = Phi.n_samples
    else:
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        if Phi.ndim != 2:
            raise ValueError(f"Phi must be 2-dimensional; got shape {Phi.shape}.")
        n_rows = Phi.shape[0]
    y = np.asarray(y)
    if y.shape != (n_rows,) or n_rows == 0:
        raise ValueError(
            f"y must be 1-dimensional with one entry per row of Phi, shape "
            f"({n_rows},); got shape {y.shape}."
        )
    y = y.astype(np.intp)
    if n_classes is None:
        n_classes = max(2, int(y.max()) + 1)
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"y must hold class indices in [0, {n_classes}).")
    if sample_weight is None:
        sample_weight = np.ones(n_rows)
    else:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != y.shape:
            raise ValueError(
                f"sample_weight has shape {sample_weight.shape}, expected {y.shape}."
            )
        if np.any(sample_weight < 0) or not np.all(np.isfinite(sample_weight)):
            raise ValueError("sample_weight must be finite and non-negative.")
        if not sample_weight.any():
            raise ValueError(
                "Sample weights must contain at least one non-zero number."
            )
        keep = sample_weight > 0
        if not keep.all() and not isinstance(Phi, FeatureBlocks):
            Phi, y, sample_weight = Phi[keep], y[keep], sample_weight[keep]
    if not isinstance(Phi, FeatureBlocks):
        Phi = FeatureBlocks.from_array(Phi)
    return Phi, y, n_classes, sample_weight


def _start_point(problem, start):
    """The first iterate of :func:`logistic_newton`.

    Parameters
    ----------
    problem : _Problem
        The objective.
    start : NewtonResult or None
        A fit on the first ``k <= p`` features, whose coefficients the
        others' zeros complete.  None: the intercept-only fit, where the
        intercepts' gradient vanishes (at coefficients zero).

    Returns
    -------
    theta : ndarray of shape (m, q)
    """
    theta = np.zeros((problem.m, problem.q))
    if start is not None:
        k = start.coef.shape[1]
        if start.coef.shape[0] != problem.m or k > problem.p:
            raise ValueError(
                f"start has coefficients of shape {start.coef.shape}; expected "
                f"({problem.m}, k) with k <= {problem.p}."
            )
        theta[:, :k] = start.coef
        if problem.fit_intercept:
            theta[:, -1] = start.intercept
    elif problem.fit_intercept:
        freq = problem.s @ problem.Y
        freq = np.clip(freq, 1e-12, 1.0 - 1e-12)
        if problem.binary:
            theta[0, -1] = math.log(freq[0] / (1.0 - freq[0]))
        else:
            theta[:, -1] = np.log(freq) - np.log(freq).mean()
    return theta


def _preconditioner(problem, inner_solver, max_hessian_bytes, start):
    """The inner solver of :func:`logistic_newton`, as its preconditioner.

    Parameters
    ----------
    problem : _Problem
        The objective.
    inner_solver : {"auto", "cholesky", "cg"}
        ``"auto"``: :func:`auto_inner_solver`.
    max_hessian_bytes : float
        Memory budget of the Hessian and of the preconditioner.
    start : NewtonResult or None
        A warm start; the Hessian it carries, if any, preconditions the
        Newton-CG steps.

    Returns
    -------
    preconditioner : _Preconditioner or None
        None for Cholesky steps.
    """
    if inner_solver == "auto":
        inner_solver = auto_inner_solver(
            problem.p, problem.n_classes, problem.fit_intercept, max_hessian_bytes
        )
    if inner_solver == "cholesky":
        return None
    hessian = None if start is None else start.hessian
    return _Preconditioner(problem, max_hessian_bytes, hessian)


@validate_params(
    {
        "Phi": ["array-like", FeatureBlocks],
        "y": ["array-like"],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "n_classes": [Interval(Integral, 2, None, closed="left"), None],
        "sample_weight": ["array-like", None],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "max_hessian_bytes": [Interval(Real, 0, None, closed="left")],
        "inner_solver": [StrOptions({"auto", "cholesky", "cg"})],
        "start": [NewtonResult, None],
        "check_decrement": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def logistic_newton(
    Phi,
    y,
    alpha,
    *,
    n_classes=None,
    sample_weight=None,
    fit_intercept=True,
    tol=1e-8,
    max_iter=100,
    max_hessian_bytes=DEFAULT_MAX_HESSIAN_BYTES,
    inner_solver="auto",
    start=None,
    check_decrement=True,
):
    """L2-penalised logistic regression by a damped Newton method.

    Minimises the objective of ``LogisticRegression(C=1 / alpha)`` by the
    steps of :class:`_NewtonSolver`, until ``max |gradient| <= tol`` and
    ``|g^T d| / 2 <= tol`` for the objective divided by ``sum_i w_i``.

    Parameters
    ----------
    Phi : array-like of shape (n_samples, n_features) or FeatureBlocks
        Features, or the same as row blocks computed on demand.
    y : array-like of shape (n_samples,)
        Class indices in ``0, ..., n_classes - 1`` (two classes: 1 positive).
    alpha : float > 0
        Penalty, ``alpha = 1 / C``.
    n_classes : int >= 2, default=None
        Number of classes; None means ``max(y) + 1`` (at least 2).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights, not all zero.
    fit_intercept : bool, default=True
        Whether to fit (unpenalised) intercepts.
    tol : float > 0, default=1e-8
        Tolerance of the stopping rule.
    max_iter : int, default=100
        Maximal number of Newton steps.
    max_hessian_bytes : float, default=2**28
        Memory budget of the two-class Hessian and of :class:`_Preconditioner`
        (a forced ``"cholesky"`` forms the Hessian whatever the budget).
    inner_solver : {"auto", "cholesky", "cg"}, default="auto"
        How steps are solved; ``"auto"``: :func:`auto_inner_solver`.
    start : NewtonResult, default=None
        Warm start: a fit on the first ``k <= n_features`` features
        (:func:`_start_point`); None: the intercept-only fit.
    check_decrement : bool, default=True
        Whether the stopping rule also asks for the Newton decrement; False
        for a caller that takes an exact Newton step of its own from the fit.

    Returns
    -------
    result : NewtonResult
        The coefficients, intercepts, steps taken and inner solver.

    Warns
    -----
    ConvergenceWarning
        If the stopping rule is not met within ``max_iter`` steps.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof._newton import logistic_newton
    >>> rng = np.random.RandomState(0)
    >>> Phi = rng.randn(200, 5)
    >>> y = (Phi[:, 0] + 0.5 * rng.randn(200) > 0).astype(int)
    >>> logistic_newton(Phi, y, alpha=1.0).converged
    True
    """
    Phi, y, n_classes, sample_weight = _check_inputs(Phi, y, n_classes, sample_weight)
    problem = _Problem(Phi, y, n_classes, alpha, sample_weight, fit_intercept)
    theta = _start_point(problem, start)
    preconditioner = _preconditioner(problem, inner_solver, max_hessian_bytes, start)
    solver = _NewtonSolver(problem, tol, max_iter, preconditioner, check_decrement)
    solver.solve(theta)
    return solver.result


def auto_inner_solver(n_features, n_classes, fit_intercept, max_hessian_bytes):
    """The inner solver that ``inner_solver="auto"`` takes.

    With ``m`` classes and ``q = p + 1`` parameters per class, forming the
    multinomial Hessian costs ``n q^2 m (m + 1) / 2`` flops per Newton step
    and factoring it ``(m q)^3 / 3``, against ``4 n q m`` per product with
    the Hessian in Newton-CG, whose steps reach the same coefficients: from
    three classes on, Newton-CG.  For two classes the ``n q^2`` Hessian of
    every Cholesky step outgrows, as ``q`` grows, the few products of ``n
    q`` that Newton-CG's Gram preconditioner leaves;
    :data:`CHOLESKY_MAX_FEATURES` is where they cross
    (``benchmarks/bench_logistic_solvers.py``, doc/logistic.rst).  Nearly
    unpenalised, both stop within a few ``tol`` of the optimum of the
    objective divided by ``n``
    (``tests/test_logistic.py::test_small_alpha_few_newton_steps``).

    Parameters
    ----------
    n_features : int
        Number of features ``p``.
    n_classes : int
        Number of classes.
    fit_intercept : bool
        Whether intercepts are fitted.
    max_hessian_bytes : float
        Memory budget of the Hessian.

    Returns
    -------
    inner_solver : {"cholesky", "cg"}
        ``"cholesky"`` for two classes, fewer than
        :data:`CHOLESKY_MAX_FEATURES` features and a Hessian that fits
        ``max_hessian_bytes``; else ``"cg"``.
    """
    if n_classes > 2 or n_features >= CHOLESKY_MAX_FEATURES:
        return "cg"
    nbytes = hessian_nbytes(n_features, n_classes, fit_intercept)
    return "cholesky" if nbytes <= max_hessian_bytes else "cg"


class _NewtonSolver:
    """Damped Newton iteration on a :class:`_Problem`, in named steps.

    The steps of scikit-learn's ``NewtonSolver``
    (``sklearn/linear_model/_glm/_newton_solver.py``), in its order::

        setup(theta)
        while n_iter < max_iter:
            update_gradient_hessian()  # the Newton system at the iterate
            inner_solve()              # its step d and the slope g^T d
            line_search()              # Armijo backtracking along d
            check_convergence()        # gradient and Newton decrement
        finalize()                     # the result; warn if not converged

    ``solve`` runs them, and checks convergence twice more than
    scikit-learn: without ``check_decrement`` before each step (a start
    that meets the gradient test takes no step, nor forms a Hessian), and
    between the inner solve and the line search (a start already optimal
    is not moved).  A failed step (no factorisation, no descent direction,
    no acceptable step length) ends the iteration, unconverged.

    Parameters
    ----------
    problem : _Problem
        Objective, gradient and curvature.
    tol : float
        Tolerance of the stopping rule.
    max_iter : int
        Maximal number of Newton steps.
    preconditioner : _Preconditioner or None
        Newton-CG's preconditioner; None: Cholesky steps.
    check_decrement : bool, default=True
        Whether the stopping rule also asks for the Newton decrement.

    Attributes
    ----------
    theta : ndarray of shape (m, q)
        The iterate.
    n_iter : int
        Newton steps taken.
    converged : bool
        Whether the stopping rule was met.
    failure : str or None
        Why a step failed, if one did.
    result : NewtonResult
        The fit, set by :meth:`finalize`.

    References
    ----------
    .. [1] J. Nocedal and S. J. Wright, "Numerical Optimization", 2nd ed.,
       Springer 2006 (Chapters 3 and 7: line search and Newton-CG).
    .. [2] S. Boyd and L. Vandenberghe, "Convex Optimization", Cambridge
       University Press 2004 (Section 9.5: the Newton decrement).
    """

    def __init__(self, problem, tol, max_iter, preconditioner, check_decrement=True):
        self.problem = problem
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.check_decrement = check_decrement

    def setup(self, theta):
        """Decision values, objective, probabilities and gradient at ``theta``.

        Cholesky steps keep the parameters that ``problem.free`` fixes (the
        last multinomial intercept); Newton-CG steps move all of them, in
        the subspace of :meth:`_Problem.project`.
        """
        problem = self.problem
        if self.preconditioner is None:
            self.free = problem.free
        else:
            self.free = np.ones_like(problem.free)
        self.theta = theta
        self.raw = problem.raw(theta)
        self.loss_value = problem.loss(theta, self.raw)
        self.proba = problem.probabilities(self.raw)
        self.gradient = problem.gradient(theta, self.proba)
        self.slope = None
        self.n_iter = 0
        self.converged = False
        self.failure = None

    def update_gradient_hessian(self):
        """The Newton system at the iterate: right-hand side and matrix.

        The gradient is the line search's (or the setup's).  Cholesky steps
        take the free parameters' gradient and Hessian; Newton-CG steps the
        projected gradient and no matrix (products at ``proba``).  Once the
        gradient test is met, Newton-CG's forcing ``sqrt(||g||)`` would ask
        for the most products of the fit, for a step whose use is mostly the
        decrement that the stopping rule reads: two classes whose Hessian
        fits the budget form and factor it instead (one pass; the decrement
        exact).  A start that carries its Hessian needs neither
        (:class:`_Preconditioner` then has no ``can_block``).
        """
        problem, free, preconditioner = self.problem, self.free, self.preconditioner
        exact = preconditioner is None or (
            problem.binary
            and preconditioner.can_block
            and np.abs(self.gradient).max() <= self.tol
        )
        if exact:
            self.g = self.gradient[free]
            H = problem.hessian(self.proba)
            if not free.all():
                index = np.flatnonzero(free.ravel())
                H = H[np.ix_(index, index)]
            self.hessian = H
        else:
            self.g = problem.project(self.gradient).ravel()
            self.hessian = None

    def inner_solve(self):
        """The Newton step: solve ``H d = -g`` for the direction and slope.

        Returns
        -------
        solved : bool
            False, with :attr:`failure` set, if the Hessian could not be
            factored.
        """
        if self.hessian is not None:
            step = _cholesky_step(self.hessian, self.g)
            self.hessian = None  # the factor is not needed past the step
        else:
            step = self.preconditioner.step(self.g, self.proba)
        if step is None:
            self.failure = "the Hessian could not be factored"
            return False
        self.direction = np.zeros_like(self.theta)
        self.direction[self.free] = step
        self.slope = float(self.g @ step)
        return True

    def line_search(self):
        """Backtracking (Armijo) line search along the Newton direction.

        Halves the step from 1 until the objective decreases by at least
        ``_LS_SIGMA`` times the slope; where the change is at the rounding
        level of the objective, accepts a step that decreases the gradient's
        l1 norm, as scikit-learn does.

        Returns
        -------
        accepted : bool
            False, with :attr:`failure` set, if the direction is not one of
            descent (rounding has taken over) or no trial was accepted.
        """
        if self.slope > 0:
            self.failure = "the Newton step is not a descent direction"
            return False
        problem, theta, direction = self.problem, self.theta, self.direction
        dR = problem.raw(direction)
        eps = 16 * np.finfo(np.float64).eps
        t = 1.0
        for _ in range(_LS_TRIALS):
            theta_new = theta + t * direction
            R_new = self.raw + t * dR
            with np.errstate(over="ignore", invalid="ignore"):
                loss_new = problem.loss(theta_new, R_new)
            improvement = loss_new - self.loss_value
            armijo = improvement <= t * _LS_SIGMA * self.slope
            if armijo or abs(improvement) <= eps * abs(self.loss_value):
                P_new = problem.probabilities(R_new)
                grad_new = problem.gradient(theta_new, P_new)
                if armijo or np.abs(grad_new).sum() < np.abs(self.gradient).sum():
                    self.theta, self.raw, self.loss_value = theta_new, R_new, loss_new
                    self.proba, self.gradient = P_new, grad_new
                    return True
            t *= _LS_BETA
        self.failure = f"the line search failed after {_LS_TRIALS} trials"
        return False

    def check_convergence(self):
        """Whether the stopping rule holds at the iterate; sets :attr:`converged`.

        ``max |gradient| <= tol`` and, with ``check_decrement``, half the
        squared Newton decrement of the last direction, ``|g^T d| / 2 <=
        tol`` (its absolute value: a direction that rounding turned into
        one of ascent meets the rule only where it is that small).
        """
        self.converged = bool(
            np.abs(self.gradient).max() <= self.tol
            and (not self.check_decrement or abs(0.5 * self.slope) <= self.tol)
        )
        return self.converged

    def finalize(self):
        """The fit as a :class:`NewtonResult`; warn if not converged.

        Multinomial intercepts are centred (the symmetric parametrisation):
        Cholesky steps kept the last one fixed instead.
        """
        problem, theta = self.problem, self.theta
        coef = theta[:, : problem.p].copy()
        if problem.fit_intercept:
            intercept = theta[:, problem.p].copy()
            if not problem.binary:
                intercept -= intercept.mean()
        else:
            intercept = np.zeros(problem.m)
        inner_solver = "cholesky" if self.preconditioner is None else "cg"
        self.result = NewtonResult(
            coef, intercept, self.n_iter, self.converged, inner_solver
        )
        if self.converged:
            return
        reason = self.failure or (
            f"the maximal number of iterations {self.max_iter} was reached"
        )
        warnings.warn(
            f"Newton solver did not converge after {self.n_iter} iterations: {reason} "
            f"(max |gradient| = {np.abs(self.gradient).max():.3g}, "
            f"tol = {self.tol:.3g}). Increase max_iter or alpha, or loosen tol.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )

    def solve(self, theta):
        """Newton steps from ``theta`` until the stopping rule or a failure.

        Parameters
        ----------
        theta : ndarray of shape (m, q)
            The starting point.

        Returns
        -------
        theta : ndarray of shape (m, q)
            The last iterate.
        n_iter : int
            Newton steps taken.
        converged : bool
            Whether the stopping rule was met.
        """
        self.setup(theta)
        while self.n_iter < self.max_iter:
            if not self.check_decrement and self.check_convergence():
                break
            self.update_gradient_hessian()
            if not self.inner_solve() or self.check_convergence():
                break
            if not self.line_search():
                break
            self.n_iter += 1
            if self.check_convergence():
                break
        self.finalize()
        return self.theta, self.n_iter, self.converged


def _newton_loop(problem, theta, tol, max_iter, preconditioner, check_decrement=True):
    """Newton steps from ``theta``: :meth:`_NewtonSolver.solve`.

    Parameters
    ----------
    problem : _Problem
        The objective.
    theta : ndarray of shape (m, q)
        The starting point.
    tol, max_iter, check_decrement
        As for :func:`logistic_newton`.
    preconditioner : _Preconditioner or None
        Newton-CG's preconditioner; None: Cholesky steps.

    Returns
    -------
    theta : ndarray of shape (m, q)
    n_iter : int
    converged : bool
    """
    solver = _NewtonSolver(problem, tol, max_iter, preconditioner, check_decrement)
    return solver.solve(theta)
