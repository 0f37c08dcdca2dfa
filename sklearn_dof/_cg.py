"""Preconditioned conjugate gradients, in any array namespace.

One iteration serves every solver that runs conjugate gradients on a ridge
system ``H W = C`` (``H`` symmetric positive definite, one column of ``W``
per target): the refinement of a kernel-basis solve and Falkon's method on
NumPy arrays (:mod:`sklearn_dof._ridge_solve`), Falkon's method where
array-API data live (:mod:`sklearn_dof._array_api`), and the truncated
Newton steps of the logistic solver (:mod:`sklearn_dof._newton`, one
vector, stopped where the Hessian's curvature is not positive).  The
callers bring the products with ``H`` and the preconditioner; this module
only iterates.
"""

import numpy as np


def _columnwise_dot(A, B, xp):
    if xp is np:
        if A.ndim == 1:  # BLAS's dot, as the Newton solver's own products
            return A @ B
        return np.einsum("ij,ij->j", A, B)  # without the temporary A * B
    return xp.sum(A * B, axis=0)


def _safe_ratio(numerator, denominator, xp):
    """``numerator / denominator`` where the denominator is positive, else
    0: a column that has converged exactly (or that rounding left with no
    positive curvature) stops moving instead of feeding NaNs."""
    positive = denominator > 0
    return xp.where(positive, numerator / xp.where(positive, denominator, 1.0), 0.0)


def pcg_steps(
    apply, rhs, start, precondition, xp=np, *, stop_on_nonpositive_curvature=False
):
    """Preconditioned conjugate gradients on ``H W = rhs`` from ``start``.

    Parameters
    ----------
    apply : callable
        ``V -> H V`` for ``V`` of the shape of ``rhs``.
    rhs : array of shape (p, k) or (p,)
        Right-hand side: ``k`` columns, or one vector.
    start : array of the shape of ``rhs``, or None
        First iterate; None for zero, with the residual ``rhs`` and no
        product with ``H``.
    precondition : callable
        ``R -> P^{-1} R``, ``P`` symmetric positive definite.
    xp : namespace, default=numpy
    stop_on_nonpositive_curvature : bool, default=False
        End the steps, before taking one, where a direction's curvature
        ``P^T H P`` is not positive in some column (an ``H`` that is not
        positive definite).  Otherwise such a column stops moving.

    Yields
    ------
    W, R, rz : arrays of shapes (p, k), (p, k) and (k,)
        The iterate, its residual ``rhs - H W`` and ``R^T P^{-1} R`` per
        column, before each step (one product with ``H`` per step); for a
        vector ``rhs``, vectors and a scalar.
    """
    if start is None:
        W, R = xp.zeros_like(rhs), rhs
    else:
        W, R = start, rhs - apply(start)
    Z = precondition(R)
    rz = _columnwise_dot(R, Z, xp)
    P = Z
    while True:
        yield W, R, rz
        Q = apply(P)
        curvature = _columnwise_dot(P, Q, xp)
        if stop_on_nonpositive_curvature and bool(xp.any(curvature <= 0)):
            return
        step = _safe_ratio(rz, curvature, xp)
        W = W + step * P
        R = R - step * Q
        Z = precondition(R)
        rz_next = _columnwise_dot(R, Z, xp)
        P = Z + _safe_ratio(rz_next, rz, xp) * P
        rz = rz_next


def pcg_ridge(apply, rhs, precondition, y_norms, tol, max_iter, xp=np, start=None):
    """Ridge weights by preconditioned conjugate gradients, stopped on the
    training objective.

    For ``H = Phi_c^T S Phi_c + alpha I`` and ``rhs = Phi_c^T S y_c``, the
    objective ``J(W) = ||y_c - Phi_c W||_S^2 + alpha ||W||^2`` is
    ``y_norms - W^T (rhs + R)`` per column, and its excess over the minimum
    is ``R^T H^{-1} R``, about the ``R^T P^{-1} R`` the iteration computes.
    The iteration starts from ``start``, else ``P^{-1} rhs``, and stops once
    that excess is
    at most ``tol`` times ``J(W)`` for every target: the training
    predictions are then within about ``sqrt(tol)`` of the residual's norm
    of the exact solution's.

    Parameters
    ----------
    apply, rhs, precondition, xp
        As for :func:`pcg_steps`.
    y_norms : array of shape (k,)
        ``||y_c||_S^2`` per target.
    tol : float
        Relative excess of the objective at which to stop.
    max_iter : int
        Most steps.
    start : array of shape (p, k), default=None
        The first iterate (a warm start); None for ``P^{-1} rhs``.

    Returns
    -------
    W : array of shape (p, k)
    n_iter : int
        Steps taken.
    converged : bool
        Whether the iteration stopped on ``tol``.
    """
    if start is None:
        start = precondition(rhs)
    steps = pcg_steps(apply, rhs, start, precondition, xp)
    for n_iter, (W, R, rz) in enumerate(steps):
        objective = y_norms - _columnwise_dot(W, rhs + R, xp)
        # (One synchronisation per step on an accelerator.)
        converged = bool(xp.all(rz <= tol * objective))
        if converged or n_iter >= max_iter:
            return W, n_iter, converged
    return None  # pragma: no cover - the steps never end by themselves
