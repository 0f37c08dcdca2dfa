"""Kernel hyperparameters learned by the leave-one-out error of kernel ridge.

The criterion is the mean squared leave-one-out residual of exact kernel
ridge on a subsample of ``m`` rows, ``e = c / diag(G)`` with
``G = (K + alpha I)^{-1}`` and ``c = G y`` (Allen's PRESS), a function of
the kernel's hyperparameters ``theta`` (on the log scale, as
:attr:`sklearn.gaussian_process.kernels.Kernel.theta`) and of
``log(alpha)``.  Its gradient is one matrix ``W`` contracted with each
``dK / dtheta_j``: ``dC = <W, dK>`` with

    W = (2 / n) sym(G diag(b) G - sum_k (G a_k) c_k^T),
    a_k = w e_k / g,  b = sum_k w e_k c_k / g^2,  g = diag(G),

so that a step costs one Cholesky factorisation, its inverse and one
product of ``m x m`` matrices, whatever the number of hyperparameters.  For
``RBF`` and ``Matern`` (nu 1.5, 2.5, inf) kernels the contraction with the
derivative along each length scale is itself one ``m x m`` by ``m x d``
product (:func:`kernel_gradient`); other kernels contract the tensor their
``eval_gradient`` returns.  L-BFGS-B then minimises the criterion within
the hyperparameters' bounds, as
:class:`~sklearn.gaussian_process.GaussianProcessRegressor` minimises
minus the log marginal likelihood.
"""

import warnings
from typing import NamedTuple

import numpy as np
from scipy import optimize
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, Product, Sum

from . import _tiles
from ._kernel_objects import kernel_object_block, stationary_form

# Hyperparameters a progress line prints in full (more: the ends only).
_PROGRESS_ITEMS = 8
#: The runs stop once this many L-BFGS steps have together gained less
#: than this fraction of the criterion: a subsample's criterion differs
#: from the whole data's by more than that, and the last steps of a run
#: along flat directions (a length scale that is already large) can take
#: as long as the rest.
STALL_STEPS, STALL_RTOL = 5, 1e-3
#: The penalty the searches start from, clipped to their bounds: a noise
#: variance of a tenth of a unit kernel's.
ALPHA_START = 0.1


def _profile_slope(r, nu):
    """``-f_nu'(r) / r`` for the profile of :func:`matern_profile`: the
    factor of ``d K / d log(l_j) = f'(r) dr / dlog(l_j)`` in front of
    ``(x_j - y_j)^2 / l_j^2``."""
    if nu == np.inf:
        return np.exp(-0.5 * r * r)
    s = np.sqrt(2.0 * nu)
    e = np.exp(-s * r)
    if nu == 1.5:
        return 3.0 * e
    return (5.0 / 3.0) * (1.0 + s * r) * e


def _length_scale_gradient(kernel, X, W):
    """``<W, dK / dlog(l)>`` of an ``RBF`` or fused ``Matern`` ``kernel``
    (one entry per length scale, none where they are fixed)."""
    if kernel.hyperparameter_length_scale.fixed:
        return np.empty(0)
    _, length_scale, nu = stationary_form(kernel)
    # Centred, as kernel_object_block's distances (their rounding).
    Z = (X - X.mean(axis=0)) / length_scale
    sq = np.einsum("ij,ij->i", Z, Z)
    r2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T), 0.0)
    P = W * _profile_slope(np.sqrt(r2), nu)
    if np.ndim(kernel.length_scale) == 0:
        return np.array([np.sum(P * r2)])
    # sum_pq P_pq (z_pj - z_qj)^2 for symmetric P, every feature j at once.
    return 2.0 * (Z * Z).T @ P.sum(1) - 2.0 * np.einsum("pj,pj->j", Z, P @ Z)


def kernel_gradient(kernel, X, W):
    """``<W, dK(X, X) / dtheta_j>`` for every entry of ``kernel.theta``.

    ``W`` is symmetric.  Sums and products recurse (the derivative of a
    product along a factor's hyperparameter is that factor's derivative
    times the other factor); ``RBF`` and fused ``Matern`` kernels contract
    in closed form, every other kernel through its ``eval_gradient``.
    """
    if isinstance(kernel, Sum):
        return np.concatenate(
            [kernel_gradient(kernel.k1, X, W), kernel_gradient(kernel.k2, X, W)]
        )
    if isinstance(kernel, Product):
        K1 = kernel_object_block(X, X, kernel.k1)
        K2 = kernel_object_block(X, X, kernel.k2)
        return np.concatenate(
            [
                kernel_gradient(kernel.k1, X, W * K2),
                kernel_gradient(kernel.k2, X, W * K1),
            ]
        )
    if isinstance(kernel, ConstantKernel):
        if kernel.hyperparameter_constant_value.fixed:
            return np.empty(0)
        return np.array([kernel.constant_value * W.sum()])
    if isinstance(kernel, (RBF, Matern)) and stationary_form(kernel) is not None:
        return _length_scale_gradient(kernel, X, W)
    _, dK = kernel(X, eval_gradient=True)
    return np.einsum("pq,pqj->j", W, dK)


class LeaveOneOutCriterion:
    """The mean squared leave-one-out residual of kernel ridge on ``X``
    and its gradient (see the module's docstring).

    Parameters
    ----------
    X : ndarray of shape (m, n_features)
        The rows the hyperparameters are learned on.
    y : ndarray of shape (m,) or (m, n_targets)
        Their targets, centred by the caller where the model fits an
        intercept.
    weights : ndarray of shape (m,) or None
        Weights of the squared residuals.
    """

    def __init__(self, X, y, weights=None):
        self.X = X
        self.Y = y.reshape(y.shape[0], -1)
        w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, float)
        self.weights = w / w.sum() / self.Y.shape[1]

    def gram(self, kernel):
        """``K(X, X)``, exactly symmetric."""
        K = kernel_object_block(self.X, self.X, kernel)
        K = 0.5 * (K + K.T)
        np.fill_diagonal(K, kernel.diag(self.X))
        return K

    def inverse(self, K, alpha):
        """``(K + alpha I)^{-1}``, or None where it has no Cholesky factor."""
        A = K + alpha * np.eye(K.shape[0])
        # By tiles above their order (a large kernel_subsample): OpenBLAS's
        # threaded factorisation crashes the process past it.
        c, info = _tiles.potrf(A, lower=True, overwrite_a=True)
        if info != 0:
            return None
        G, info = _tiles.potri(c, overwrite_c=True)
        if info != 0:
            return None
        return np.tril(G) + np.tril(G, -1).T

    def residuals(self, G):
        """``(c, g, e)``: the dual coefficients, ``diag(G)`` and the
        leave-one-out residuals."""
        C = G @ self.Y
        g = np.diag(G).copy()
        return C, g, C / g[:, None]

    def __call__(self, kernel, alpha, gradient=True):
        """The criterion at ``(kernel, alpha)`` and, with ``gradient``, its
        gradient along ``(kernel.theta, log(alpha))``; ``(inf, None)``
        where ``K + alpha I`` is not positive definite."""
        K = self.gram(kernel)
        G = self.inverse(K, alpha)
        if G is None:
            return np.inf, None
        C, g, E = self.residuals(G)
        w = self.weights[:, None]
        value = float(np.sum(w * E * E))
        if not gradient:
            return value, None
        A = w * E / g[:, None]
        b = np.sum(w * E * C, axis=1) / (g * g)
        M = (G * b) @ G - (G @ A) @ C.T
        W = M + M.T  # 2 sym(M)
        grad = np.append(kernel_gradient(kernel, self.X, W), alpha * np.trace(W))
        return value, grad

    def predict(self, kernel, alpha, X):
        """Predictions of kernel ridge fitted on every row at ``X``, or
        None where ``K + alpha I`` is not positive definite."""
        G = self.inverse(self.gram(kernel), alpha)
        if G is None:
            return None
        return kernel_object_block(X, self.X, kernel) @ (G @ self.Y)


# The criterion L-BFGS sees where K + alpha I has no Cholesky factor: a
# finite wall (an infinite value stops its line search).
_NO_FACTOR = 1e300


class LearnedKernel(NamedTuple):
    """What :func:`learn_kernel` found."""

    kernel: object
    alpha: float
    criterion: float
    n_iter: int
    converged: bool


def _log_bounds(kernel, alpha_bounds):
    """L-BFGS-B bounds of ``(theta, log(alpha))``."""
    return np.vstack([kernel.bounds.reshape(-1, 2), np.log(alpha_bounds)])


def _minimize(criterion, kernel, start, bounds, max_iter, report):
    """One L-BFGS-B run from ``start``; the scipy result.  ``report(z,
    value)`` after each step."""
    n_theta = kernel.theta.shape[0]
    values = {}

    def fun(z):
        value, grad = criterion(kernel.clone_with_theta(z[:n_theta]), np.exp(z[-1]))
        if grad is None:  # not positive definite: a wall for the line search
            value, grad = _NO_FACTOR, np.zeros_like(z)
        values[z.tobytes()] = value
        return value, grad

    return optimize.minimize(
        fun,
        start,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        callback=lambda z: report(z, values.get(z.tobytes(), np.nan)),
        options={"maxiter": max_iter},
    )


def _step_reporter(progress):
    """The L-BFGS callback of one run: a line per step to ``progress``, and
    the end of the run once :data:`STALL_STEPS` steps have gained less
    than :data:`STALL_RTOL` of the criterion."""
    steps = []

    def report(z, value):
        steps.append(value)
        if progress is not None:
            # One line per step, however many features: the middle of a
            # long array elided, as numpy prints large arrays.
            theta = np.array2string(
                np.exp(z[:-1]),
                precision=3,
                max_line_width=np.inf,
                threshold=_PROGRESS_ITEMS,
                edgeitems=3,
            )
            progress(
                f"kernel step {len(steps)}: leave-one-out {value:.5g}, "
                f"hyperparameters {theta}, alpha={np.exp(z[-1]):.4g}"
            )
        if len(steps) > STALL_STEPS:
            before = steps[-1 - STALL_STEPS]
            if before - value <= STALL_RTOL * abs(before):
                raise StopIteration

    return report


def learn_kernel(
    criterion,
    kernel,
    alpha,
    alpha_bounds,
    *,
    max_iter=50,
    n_restarts=0,
    rng=None,
    progress=None,
):
    """Minimise ``criterion`` over the free hyperparameters of ``kernel``
    and ``log(alpha)`` (``alpha`` within ``alpha_bounds``), from
    ``(kernel.theta, alpha)`` and ``n_restarts`` points drawn
    log-uniformly within the bounds, as
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor` does.

    ``progress``: a callable taking one line per L-BFGS step.  A
    :class:`~sklearn.exceptions.ConvergenceWarning` where the best run
    stops on ``max_iter``.
    """
    bounds = _log_bounds(kernel, alpha_bounds)
    start = np.clip(np.append(kernel.theta, np.log(alpha)), bounds[:, 0], bounds[:, 1])
    starts = [start]
    rng = np.random.default_rng(rng)
    for _ in range(n_restarts):
        starts.append(rng.uniform(bounds[:, 0], bounds[:, 1]))
    best = None
    for z0 in starts:
        report = _step_reporter(progress)
        result = _minimize(criterion, kernel, z0, bounds, max_iter, report)
        if best is None or result.fun < best.fun:
            best = result
    if not best.fun < _NO_FACTOR:
        warnings.warn(
            "The kernel's hyperparameters were not learned: K + alpha I had no "
            "Cholesky factor on the search's rows at any point tried (repeated "
            "rows at a penalty near zero, or a kernel that is not positive "
            "semi-definite); the search's starting point is kept. Raise the "
            "smallest penalty (alphas) or check the kernel.",
            UserWarning,
            stacklevel=3,
        )
    elif best.nit >= max_iter:
        warnings.warn(
            f"The kernel's hyperparameters stopped on the budget of {max_iter} "
            f"L-BFGS steps (leave-one-out criterion {best.fun:.4g}); raise "
            "kernel_max_iter or fix their bounds.",
            ConvergenceWarning,
            stacklevel=3,
        )
    n_theta = kernel.theta.shape[0]
    return LearnedKernel(
        kernel.clone_with_theta(best.x[:n_theta]),
        float(np.exp(best.x[-1])),
        float(best.fun),
        int(best.nit),
        bool(best.success),
    )


class KernelSplit(NamedTuple):
    """Rows of a kernel search: ``learn`` (the criterion's), ``check``
    (held out, to choose between searches; may be empty)."""

    learn: np.ndarray
    check: np.ndarray


def split_rows(n_samples, rows, rng, weights=None, check=True):
    """At most ``rows`` rows to learn on, drawn uniformly among those of
    positive weight, and (with ``check``) up to half as many held out to
    check on: a quarter of the rows where there are too few for both."""
    candidates = np.arange(n_samples)
    if weights is not None:
        candidates = candidates[np.asarray(weights) > 0]
    order = rng.permutation(candidates)
    if not check:
        return KernelSplit(order[:rows], order[:0])
    n_learn = min(rows, (3 * order.shape[0] + 3) // 4)
    n_check = min(rows // 2, order.shape[0] - n_learn)
    return KernelSplit(order[:n_learn], order[n_learn : n_learn + n_check])


def default_kernels(X, bounds=(1e-2, 1e3)):
    """The shared-length-scale kernels the default rule starts from, on
    the features divided by their standard deviations (and those scales):
    ``RBF`` and ``Matern(nu=1.5)``, started where ``gamma = 1 / n_features``
    is, with ``bounds`` relative to that start."""
    scale = X.std(axis=0)
    # A spread at the rounding level of the values is a constant feature
    # (a standardized constant column is rounding noise): dividing by it
    # would give a length scale of that size, which no other row crosses.
    rounding = np.sqrt(np.finfo(np.float64).eps) * np.abs(X).max(axis=0)
    scale[~(scale > rounding)] = 1.0
    start = np.sqrt(X.shape[1] / 2.0)
    bounds = (bounds[0] * start, bounds[1] * start)
    return [RBF(start, bounds), Matern(start, bounds, nu=1.5)], scale


def per_feature(kernel, n_features):
    """``kernel`` (``RBF`` or ``Matern``) with its length scale repeated
    per feature."""
    scales = np.full(n_features, float(kernel.length_scale))
    return clone(kernel).set_params(length_scale=scales)


def rescaled(kernel, scale):
    """The ``RBF`` or ``Matern`` ``kernel`` of features divided by
    ``scale`` as a kernel of the features themselves (one length scale
    per feature)."""
    length_scale = np.broadcast_to(kernel.length_scale, scale.shape) * scale
    bounds = np.asarray(kernel.length_scale_bounds, dtype=float)
    if bounds.ndim == 1:
        bounds = np.outer(scale, bounds)
    return clone(kernel).set_params(
        length_scale=length_scale, length_scale_bounds=bounds
    )


def free_length_scale(kernel):
    """Whether ``kernel`` is a kernel object with a free ``length_scale``
    of its own (``RBF``, ``Matern``, ``RationalQuadratic``...), which
    :func:`scaled_length_scales` may scale."""
    hyperparameter = getattr(kernel, "hyperparameter_length_scale", None)
    return hyperparameter is not None and not hyperparameter.fixed


def within_bounds(kernel, factor):
    """Whether ``kernel``'s length scales times ``factor`` lie within its
    ``length_scale_bounds`` (one pair, or one per length scale)."""
    scales = np.atleast_1d(np.asarray(kernel.length_scale, dtype=float)) * factor
    bounds = np.asarray(kernel.length_scale_bounds, dtype=float).reshape(-1, 2)
    return bool(np.all(scales >= bounds[:, 0]) and np.all(scales <= bounds[:, 1]))


def scaled_length_scales(kernel, factor):
    """``kernel`` with every length scale (one, or one per feature)
    multiplied by ``factor``; the other hyperparameters and the bounds
    kept."""
    return clone(kernel).set_params(
        length_scale=np.asarray(kernel.length_scale, dtype=float) * factor
    )


class KernelSearch(NamedTuple):
    """The result of :func:`search_kernel`: the learned kernel of the
    features as given, the penalty learned with it on the ``learn`` rows,
    which search won (``"given"``, ``"shared"`` or ``"per-feature"``), and
    whether that penalty stopped at the lower end of its range."""

    kernel: object
    alpha: float
    choice: str
    at_floor: bool = False


#: The per-row penalties ``lambda`` within which the default search learns
#: ``alpha = m lambda`` on its ``m`` rows: nearly noiseless targets want a
#: noise variance of a thousandth of the kernel's, ``lambda`` near ``1e-7``
#: on 1,000 rows, below the default grid's ``1e-6`` (doc/design/kernel.rst).
SEARCH_LAMBDAS = (1e-8, 1.0)


def learned_penalties(alpha, learn_rows, n_rows):
    """The grid of ``DoFKernelRidgeCV(alphas=None)`` at a kernel learned
    with ``alpha`` on ``learn_rows`` rows, for a fit on ``n_rows``: half
    decades from a hundredth of ``alpha`` to ``sqrt(10)`` times
    ``alpha n_rows / learn_rows``.

    The learned ``alpha`` is a ratio of noise to the kernel's unit
    variance, which a Gaussian process keeps as rows are added; keeping the
    per-row penalty instead, as the paper's rates do, multiplies it by
    ``n_rows / learn_rows``.  The grid spans both, with a margin, and the
    leave-one-out error on every row chooses.  Below, two decades: with
    every row the error can prefer less penalty than the subsample's
    optimum (doc/design/kernel.rst, "The grid's lower edge").
    """
    low = np.log10(alpha) - 2.0
    high = np.log10(alpha * max(n_rows / learn_rows, 1.0)) + 0.5
    return 10.0 ** (low + 0.5 * np.arange(int(np.ceil(2 * (high - low) - 1e-9)) + 1))


def _held_out_error(criterion, learned, X_check, y_check, weights):
    """Weighted mean squared error on the held-out rows of the kernel ridge
    fitted on the criterion's rows at the learned kernel and penalty."""
    residual = criterion.predict(learned.kernel, learned.alpha, X_check)
    if residual is None:  # no fit at all: never the one kept
        return np.inf
    residual = residual.reshape(y_check.shape[0], -1) - y_check.reshape(
        y_check.shape[0], -1
    )
    return float(np.average(np.mean(residual**2, axis=1), weights=weights))


def search_kernel(
    kernel,
    X,
    y,
    *,
    weights=None,
    intercept=True,
    rows=1000,
    lambdas=(1e-6, 1.0),
    max_iter=100,
    n_restarts=0,
    rng=None,
    progress=None,
):
    """The kernel of a fit, learned on a row subsample, with a penalty
    ``lambda`` per row within ``lambdas`` (``alpha = m lambda`` on the
    ``m`` learning rows, as on every row).  The penalty returned is that of
    the fit weighted by ``weights``: the search's times their mean.

    A kernel object: its free hyperparameters and ``alpha`` by
    :func:`learn_kernel` on ``rows`` rows.  None: :func:`_default_search`.
    """
    rng = np.random.default_rng(rng)
    # Rows held out to check on only where the default rule chooses
    # between a shared and a per-feature length scale.
    choosing = kernel is None and X.shape[1] > 1
    split = split_rows(X.shape[0], rows, rng, weights, check=choosing)
    w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, float)
    mean = np.average(y[split.learn], axis=0, weights=w[split.learn])
    y = y - mean if intercept else y
    # The criterion in units of the targets' spread: predictions are linear
    # in y, so the minimiser is the same, but L-BFGS's tolerances are
    # absolute and stop at once on targets of scale 1e-4.
    squares = np.square(y[split.learn]).reshape(split.learn.size, -1).mean(axis=1)
    spread = np.sqrt(np.average(squares, weights=w[split.learn]))
    y = y / spread if spread > 0 else y
    options = dict(max_iter=max_iter, n_restarts=n_restarts, rng=rng, progress=progress)
    bounds = np.asarray(lambdas, dtype=float) * split.learn.shape[0]
    alpha = float(np.clip(ALPHA_START, *bounds))
    if kernel is not None:
        criterion = LeaveOneOutCriterion(X[split.learn], y[split.learn], w[split.learn])
        learned = learn_kernel(criterion, kernel, alpha, bounds, **options)
        found = KernelSearch(learned.kernel, learned.alpha, "given")
    else:
        found = _default_search(X, y, w, split, alpha, bounds, options)
    at_floor = bool(found.alpha <= bounds[0] * (1 + 1e-9))
    # The search's ridge weighs its rows alike (the weights weigh the
    # criterion's residuals): the weighted fit's penalty is its penalty
    # times the mean weight of the rows (of positive weight), so that
    # weights scaled alike give the same model.
    weighted = found.alpha * float(np.mean(w[w > 0]))
    return found._replace(alpha=weighted, at_floor=at_floor)


def _default_search(X, y, w, split, alpha, bounds, options):
    """The default rule, on the features divided by their standard
    deviations: one shared length scale of ``RBF`` and of ``Matern(nu=1.5)``,
    the family with the smaller leave-one-out error kept, then one length
    scale per feature started from it; the per-feature kernel is kept
    unless the kernel ridge it gives on the learning rows predicts the
    held-out rows (:func:`split_rows`) worse than the shared one's, where
    the leave-one-out criterion would reward more length scales than the
    rows determine."""
    starts, scale = default_kernels(X[split.learn])
    criterion = LeaveOneOutCriterion(
        X[split.learn] / scale, y[split.learn], w[split.learn]
    )
    # The family at one length scale, where both have as many
    # hyperparameters.
    shared = min(
        (learn_kernel(criterion, k, alpha, bounds, **options) for k in starts),
        key=lambda found: found.criterion,
    )
    found, name = shared, "shared"
    if X.shape[1] > 1:
        start = per_feature(shared.kernel, X.shape[1])
        found = learn_kernel(criterion, start, shared.alpha, bounds, **options)
        name = "per-feature"
    if name == "per-feature" and split.check.size:
        rows = split.check
        errors = [
            _held_out_error(criterion, learned, X[rows] / scale, y[rows], w[rows])
            for learned in (shared, found)
        ]
        if options["progress"] is not None:
            options["progress"](
                f"kernel: held-out MSE {errors[0]:.5g} with one length "
                f"scale, {errors[1]:.5g} with one per feature"
            )
        if errors[1] > errors[0]:
            found, name = shared, "shared"
    return KernelSearch(rescaled(found.kernel, scale), found.alpha, name)
