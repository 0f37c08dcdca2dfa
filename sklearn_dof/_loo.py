r"""Leave-one-out errors of ridge at many penalties from one eigendecomposition.

For features ``Phi`` (n x p), weights ``S = diag(s)`` and the normal
equations centred by the weighted means (the intercept is not penalised),
the eigendecomposition ``Phi_c^T S Phi_c = V diag(eig) V^T`` gives every
penalty's fit at once: with ``Z = Phi_c V`` the hat matrix at penalty ``a``
is

.. math:: H_a = Z \operatorname{diag}(1 / (eig + a)) Z^T S
          + \mathbf{1} s^T / \textstyle\sum_i s_i,

the last term only with an intercept.  A row's fit and its leverage
``(H_a)_{ii}`` cost ``O(p)`` each, so its exact leave-one-out residual
``(y_i - f_a(x_i)) / (1 - (H_a)_{ii})`` costs ``O(p)`` per penalty, as in
:class:`~sklearn.linear_model.RidgeCV`; GCV replaces each leverage by their
mean, ``tr(H_a) / n``.

:func:`ridge_spectrum` makes the eigendecomposition once; :func:`loo_residuals`
reads it for one block of rows.  Both take the namespace ``xp`` of their
arrays (NumPy by default), so that the NumPy path, the loss certificate and
the array-API back-end share one kernel.
"""

from typing import NamedTuple

import numpy as np


def ridge_inverse(eigvals, alphas, drop_rounding=True, xp=None):
    """``1 / (s + alpha)`` for the eigenvalues ``s`` of a Gram matrix.

    The eigenvalues are clipped at zero (rounding makes a PSD matrix's
    smallest ones slightly negative).  With ``drop_rounding`` the inverse is
    0 off the numerical range: eigenvalues below ``p * eps * max(s)`` are
    rounding noise, the right-hand side ``Phi^T S y`` has no true component
    along them, and dividing its rounding noise by a penalty below that
    level would blow it up.

    Parameters
    ----------
    eigvals : array of shape (p,)
        Eigenvalues, float64.
    alphas : array of shape (n_alphas,)
        Penalties, in the namespace and on the device of ``eigvals``.
    drop_rounding : bool, default=True
        Whether the directions below rounding get a zero inverse.
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    inverse : array of shape (p, n_alphas)
        ``1 / (max(s, 0) + alpha)``, a column per penalty.
    """
    xp = np if xp is None else xp
    clipped = xp.where(eigvals > 0, eigvals, 0.0)
    inverse = 1.0 / (clipped[:, None] + alphas[None, :])
    if not drop_rounding:
        return inverse
    eps = xp.finfo(xp.float64).eps
    cutoff = eigvals.shape[0] * eps * max(float(xp.max(eigvals)), 0.0)
    return xp.where(eigvals[:, None] > cutoff, inverse, 0.0)


class Spectrum(NamedTuple):
    """What every block's leave-one-out residuals read (:func:`ridge_spectrum`).

    Attributes
    ----------
    V : array of shape (p, p)
        Eigenvectors of the centred Gram matrix.
    shrinks : array of shape (p, n_alphas)
        ``1 / (eig + alpha)`` (:func:`ridge_inverse`).
    weights : array of shape (p, n_alphas * k)
        Columns (alpha, target) of ``diag(shrink) Z^T S y_c``: every
        penalty's fit in the eigenbasis.
    offset, y_offset : arrays of shape (p,) and (k,), or None
        Subtracted from the features and the targets (None: nothing).
    intercept_leverage : float
        The intercept's share of the hat matrix, ``1 / sum(s)`` (0 without).
    gcv_leverage : array of shape (n_alphas,) or None
        GCV's leverage ``tr(H_a) / n`` of every row; None: leave-one-out.
    """

    V: object
    shrinks: object
    weights: object
    offset: object
    y_offset: object
    intercept_leverage: float
    gcv_leverage: object


def ridge_spectrum(
    gram,
    rhs,
    alphas,
    *,
    offset=None,
    y_offset=None,
    total_weight=None,
    criterion="loo",
    n_samples=None,
    drop_rounding=False,
    xp=None,
):
    """One eigendecomposition of the centred Gram matrix, for every penalty.

    The penalties' inverses and fits in the eigenbasis are formed here,
    once, for all the blocks of rows that :func:`loo_residuals` reads.

    Parameters
    ----------
    gram : array of shape (p, p)
        ``Phi_c^T S Phi_c``, float64.
    rhs : array of shape (p, k)
        ``Phi_c^T S y_c``, float64.
    alphas : array of shape (n_alphas,)
        Penalties, in the namespace and on the device of ``gram``.
    offset, y_offset : arrays of shape (p,) and (k,), default=None
        The means the rows are centred by (None: they are not).
    total_weight : float, default=None
        ``sum(s)`` when an unpenalised intercept is fitted; None without.
    criterion : {"loo", "gcv"}, default="loo"
        Leave-one-out, or GCV's mean leverage.
    n_samples : int, default=None
        The rows GCV averages the trace over (``"gcv"`` only).
    drop_rounding : bool, default=False
        See :func:`ridge_inverse`.
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    spectrum : Spectrum
        What :func:`loo_residuals` reads for every block of rows.
    """
    xp = np if xp is None else xp
    # With NumPy arrays this is numpy's LAPACK: scipy's is a second BLAS
    # thread pool, slow to wake right after numpy's products
    # (doc/architecture.rst).
    eigvals, V = xp.linalg.eigh(0.5 * (gram + gram.T))
    shrinks = ridge_inverse(eigvals, alphas, drop_rounding, xp)
    ZT_y = V.T @ rhs  # = Z^T S y_c for Z = Phi_c V
    # Columns (alpha, target), so that one product gives every fit.
    weights = xp.reshape(shrinks[:, :, None] * ZT_y[:, None, :], (ZT_y.shape[0], -1))
    gcv_leverage = None
    if criterion == "gcv":
        clipped = xp.where(eigvals > 0, eigvals, 0.0)
        traces = clipped @ shrinks + float(total_weight is not None)
        gcv_leverage = traces / n_samples
    return Spectrum(
        V=V,
        shrinks=shrinks,
        weights=weights,
        offset=offset,
        y_offset=y_offset,
        intercept_leverage=0.0 if total_weight is None else 1.0 / total_weight,
        gcv_leverage=gcv_leverage,
    )


def loo_residuals(
    Phi_b, y_b, spectrum, sample_weight=None, leverage_floor=None, xp=None
):
    """Leave-one-out (or GCV) residuals of one block of rows at every penalty.

    ``O(p)`` per row and penalty beyond the block's products with ``V``;
    the rows need no other rows, so blocks may be read in any order.

    Parameters
    ----------
    Phi_b : array of shape (b, p)
        The block's features (not centred; any float dtype).
    y_b : array of shape (b, k)
        The block's targets (not centred), float64.
    spectrum : Spectrum
        From :func:`ridge_spectrum`.
    sample_weight : array of shape (b,), default=None
        The rows' weights ``s`` (None: ones); GCV's leverage ignores them.
    leverage_floor : float, default=None
        Floor of ``1 - h_i`` (None: none, and a row that its fit
        interpolates gets 0 / 0, a NaN).
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    residuals : array of shape (b, n_alphas, k)
        ``(y_i - f_a(x_i)) / (1 - h_i)`` of each row, penalty and target.
    """
    xp = np if xp is None else xp
    Z = xp.astype(Phi_b, xp.float64, copy=False)
    if spectrum.offset is not None:
        Z = Z - spectrum.offset
    Z = Z @ spectrum.V
    y_c = y_b if spectrum.y_offset is None else y_b - spectrum.y_offset
    n_alphas = spectrum.shrinks.shape[1]
    # Every penalty's fit in one product (one read of Z, not one per
    # penalty).
    fits = xp.reshape(Z @ spectrum.weights, (Z.shape[0], n_alphas, y_c.shape[1]))
    residuals = y_c[:, None, :] - fits
    if spectrum.gcv_leverage is not None:
        leverage = spectrum.gcv_leverage  # (n_alphas,), the same for every row
    else:
        if isinstance(Z, np.ndarray):
            np.multiply(Z, Z, out=Z)  # Z is this function's own temporary
        else:
            Z = Z * Z
        leverage = Z @ spectrum.shrinks + spectrum.intercept_leverage
        if sample_weight is not None:
            leverage = sample_weight[:, None] * leverage
    scale = 1.0 - leverage
    if leverage_floor is not None:
        scale = xp.where(scale < leverage_floor, leverage_floor, scale)
    # An interpolating penalty gives 0 / 0: a NaN score, never selected.
    with np.errstate(divide="ignore", invalid="ignore"):
        return residuals / scale[..., None]


def squared_sums(residuals, sample_weight=None, xp=None):
    """Weighted sums of the squared residuals at each penalty.

    Parameters
    ----------
    residuals : array of shape (b, n_alphas, k)
        From :func:`loo_residuals`.
    sample_weight : array of shape (b,), default=None
        The rows' weights ``s`` (None: ones).
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    sums : array of shape (n_alphas,)
        ``sum_i s_i sum_j e_ij^2`` over the rows ``i`` and targets ``j``.
    """
    xp = np if xp is None else xp
    squares = residuals * residuals
    if sample_weight is not None:
        squares = sample_weight[:, None, None] * squares
    return xp.sum(squares, axis=(0, 2))
