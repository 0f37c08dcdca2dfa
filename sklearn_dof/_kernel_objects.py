"""scikit-learn's Gaussian-process kernel objects, evaluated by blocks.

:mod:`sklearn.gaussian_process.kernels` kernels (``RBF``, ``Matern``,
``RationalQuadratic``, ``DotProduct``, ``ConstantKernel``, their sums and
products) are what :class:`~sklearn.kernel_ridge.KernelRidge`,
:class:`~sklearn.kernel_approximation.Nystroem` and
:func:`~sklearn.metrics.pairwise_kernels` accept besides kernel names.  This
module checks them once per fit and evaluates their blocks: the stationary
ones (RBF and Matern with nu 1.5, 2.5 or inf, with one length scale or one
per feature, times a constant) from one matrix product per block of rows,
as the fused RBF path does; every other kernel by its own vectorised
``__call__``.
"""

import math

import numpy as np
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    Exponentiation,
    Kernel,
    Matern,
    Product,
    RationalQuadratic,
    Sum,
    WhiteKernel,
)

# Matern smoothness whose closed form is smooth at r = 0 (nu = 0.5,
# exp(-r), is not: the rounding of r^2 by a matrix product would show in
# the kernel's value at nearby points, so it keeps scikit-learn's exact
# distances).
_FUSED_NU = (1.5, 2.5, np.inf)
# Components whose kernel is positive semi-definite for every value of
# their hyperparameters (sums and products of such kernels are too).
# Not ExpSineSquared: sin^2 of a Euclidean distance is positive
# semi-definite on one feature only (a K(X, X) of three features had an
# eigenvalue of -15).
_PSD_LEAVES = (
    RBF,
    Matern,
    RationalQuadratic,
    ConstantKernel,
    DotProduct,
)
# Entries per chunk of the elementwise part (as _kernels.CHUNK_ENTRIES).
_CHUNK_ENTRIES = 2**18


def is_kernel_object(kernel):
    """Whether ``kernel`` is a :class:`sklearn.gaussian_process.kernels.Kernel`."""
    return isinstance(kernel, Kernel)


def _leaves(kernel):
    """The kernels that ``kernel`` is built from, itself if atomic."""
    if isinstance(kernel, (Sum, Product)):
        return _leaves(kernel.k1) + _leaves(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _leaves(kernel.kernel)
    return [kernel]


def check_kernel_object(kernel, n_features, name="kernel"):
    """Raise a ``ValueError`` naming ``name`` where ``kernel`` cannot serve.

    A ``WhiteKernel`` is refused: its noise is on the diagonal of
    ``K(X, X)`` only, which a kernel ridge's penalty ``alpha`` already is,
    and a Nystroem approximation would put it on the landmarks alone.  A
    per-feature ``length_scale`` must have one entry per feature.
    """
    for leaf in _leaves(kernel):
        if isinstance(leaf, WhiteKernel):
            raise ValueError(
                f"The '{name}' parameter contains a WhiteKernel ({kernel!r}). A "
                "kernel ridge's noise level is its penalty alpha: remove the "
                "WhiteKernel and set alpha (or let the CV estimator choose it)."
            )
        scale = getattr(leaf, "length_scale", None)
        if scale is not None and np.ndim(scale) > 0:
            scale = np.asarray(scale)
            if scale.ndim != 1 or scale.shape[0] != n_features:
                raise ValueError(
                    f"The '{name}' parameter {kernel!r} has a length_scale of "
                    f"shape {scale.shape}; with X of {n_features} features it "
                    f"must be a scalar or have shape ({n_features},)."
                )


def is_psd_kernel_object(kernel):
    """Whether ``kernel`` is positive semi-definite for any data: a sum or
    product of PSD components, or one raised to an integer power."""
    if isinstance(kernel, (Sum, Product)):
        return is_psd_kernel_object(kernel.k1) and is_psd_kernel_object(kernel.k2)
    if isinstance(kernel, Exponentiation):
        exponent = float(kernel.exponent)
        return (
            exponent.is_integer()
            and exponent >= 0
            and (is_psd_kernel_object(kernel.kernel))
        )
    return isinstance(kernel, _PSD_LEAVES)


def stationary_form(kernel):
    """``(amplitude, length_scale, nu)`` of a kernel that the fused path
    evaluates, ``amplitude * f_nu(||(x - y) / length_scale||)``, else None.

    ``RBF`` is ``nu = inf``; a ``ConstantKernel`` factor on either side is
    the amplitude.
    """
    amplitude = 1.0
    if isinstance(kernel, Product):
        if isinstance(kernel.k1, ConstantKernel):
            amplitude, kernel = float(kernel.k1.constant_value), kernel.k2
        elif isinstance(kernel.k2, ConstantKernel):
            amplitude, kernel = float(kernel.k2.constant_value), kernel.k1
        else:
            return None
    if isinstance(kernel, Matern) and kernel.nu in _FUSED_NU:
        nu = float(kernel.nu)
    elif isinstance(kernel, RBF) and not isinstance(kernel, Matern):
        nu = np.inf
    else:
        return None
    return amplitude, np.asarray(kernel.length_scale, dtype=np.float64), nu


def matern_profile(r, nu, out):
    """``f_nu(r)`` in place of ``out`` (which may be ``r``), ``r >= 0``:
    the Matern correlation at scaled distance ``r`` (``nu = inf``: the
    Gaussian ``exp(-r^2 / 2)``)."""
    if nu == np.inf:
        np.multiply(r, r, out=out)
        out *= -0.5
        return np.exp(out, out=out)
    s = math.sqrt(2.0 * nu)  # sqrt(3) or sqrt(5)
    t = np.multiply(r, s, out=out)
    e = np.exp(-t)
    if nu == 1.5:
        t += 1.0
    else:
        t *= t / 3.0 + 1.0
        t += 1.0
    t *= e
    return t


def _squared_distance_columns(Y):
    """``[-2 y, |y|^2, 1]^T`` for :func:`_stationary_block`'s product."""
    y_sq = np.einsum("ij,ij->i", Y, Y)
    return np.ascontiguousarray(
        np.hstack([-2.0 * Y, y_sq[:, None], np.ones((Y.shape[0], 1))]).T
    )


def _stationary_block(X, Y, form, out=None, centre=None):
    """``amplitude * f_nu(||(x - y) / l||)`` by chunks of rows: each chunk's
    squared distances come out of one product on augmented rows
    ``[x, 1, |x|^2] . [-2 y, |y|^2, 1]`` (rows shifted by the mean of
    ``Y``), the expansion scikit-learn's ``euclidean_distances`` uses, then
    the profile runs while the chunk is in cache."""
    amplitude, length_scale, nu = form
    # About a common centre: the expansion cancels |x|^2 + |y|^2 against
    # 2 x.y, which loses the distance to rounding where the features sit
    # far from the origin (scikit-learn's kernel objects use exact
    # distances); a shift leaves the distances as they are.  A caller
    # evaluating the blocks of one kernel matrix passes one ``centre``, so
    # that its values do not depend on the blocks.
    if centre is None:
        centre = Y.mean(axis=0) if Y.shape[0] else 0.0
    Xs, Ys = (X - centre) / length_scale, (Y - centre) / length_scale
    columns = _squared_distance_columns(Ys)
    x_sq = np.einsum("ij,ij->i", Xs, Xs)
    X_aug = np.hstack([Xs, np.ones((Xs.shape[0], 1)), x_sq[:, None]])
    if not (np.isfinite(columns).all() and np.isfinite(X_aug).all()):
        return None  # overflow: leave it to scikit-learn's distances
    block = np.empty((X.shape[0], Y.shape[0])) if out is None else out
    rows = max(1, _CHUNK_ENTRIES // max(Y.shape[0], 1))
    for lo in range(0, block.shape[0], rows):
        chunk = block[lo : lo + rows]
        np.matmul(X_aug[lo : lo + rows], columns, out=chunk)
        np.maximum(chunk, 0.0, out=chunk)  # rounding below 0 for nearby points
        if nu != np.inf:
            np.sqrt(chunk, out=chunk)
            matern_profile(chunk, nu, chunk)
        else:
            chunk *= -0.5
            np.exp(chunk, out=chunk)
        if amplitude != 1.0:
            chunk *= amplitude
    return block


def kernel_object_block(X, Y, kernel, out=None, centre=None):
    """``K(X, Y)`` of a kernel object for dense ``X`` and ``Y``, into
    ``out`` if given: the fused path for :func:`stationary_form` kernels
    (their distances about ``centre``, by default the mean of ``Y``), sums
    evaluated term by term, else the kernel's own ``__call__``."""
    form = stationary_form(kernel)
    block = None
    if form is not None and X.dtype == np.float64 and Y.dtype == np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            block = _stationary_block(X, Y, form, out, centre)
    elif isinstance(kernel, Sum):
        block = kernel_object_block(X, Y, kernel.k1, out, centre)
        block += kernel_object_block(X, Y, kernel.k2, centre=centre)
    if block is not None:
        return block
    block = kernel(X, Y)
    if out is None:
        return block
    out[...] = block
    return out
