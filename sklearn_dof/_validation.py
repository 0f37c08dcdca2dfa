"""Input checks and warnings shared by the estimators and the functions.

Each helper is called with one line from where the data is at hand, so
that every entry point either computes what it says or names the problem:
non-finite kernel values, callables returning something other than a
number, kernel parameters a kernel does not take, kernels that are not
positive semi-definite, and penalties below the resolution of floating
point arithmetic.
"""

import os
import sys
import warnings
from numbers import Integral, Real

import joblib
import numpy as np
import sklearn
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import Kernel as _GPKernel
from sklearn.metrics.pairwise import KERNEL_PARAMS, PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils._param_validation import (
    Interval,
    InvalidParameterError,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import check_array

from . import _tiles
from ._kernel_objects import is_kernel_object, is_psd_kernel_object

# Frames of this package, of scikit-learn (its fit wrappers, Pipeline,
# GridSearchCV) and of joblib (Pipeline's memory), which a warning's
# location skips.
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sys.modules[__package__], sklearn, joblib)
)


def user_stacklevel():
    """The ``stacklevel`` that makes the warning issued by this function's
    caller point at the first frame outside this package and scikit-learn:
    the user's line, however deep the warning is raised (a fixed level
    points inside the package for some entry points).  A warning with no
    such frame (a worker thread's) points at itself."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame = frame.f_back
        level += 1
    return level if frame is not None else 1


# Kernels that are not positive semi-definite in general: sigmoid (tanh) for
# most parameters, additive chi2 always (zero diagonal, negative elsewhere).
NON_PSD_KERNELS = frozenset({"sigmoid", "additive_chi2"})
# Kernels PSD on any data and parameters (poly and chi2 are not, for a
# negative coef0 or negative features): their K(I, I) needs no check beyond
# the Cholesky factorisation of K + alpha I that an exact fit makes.
ALWAYS_PSD_KERNELS = frozenset({"rbf", "laplacian", "linear", "cosine"})


def is_always_psd(kernel):
    """Whether ``kernel`` is positive semi-definite on any data and
    parameters: a name of :data:`ALWAYS_PSD_KERNELS` or a kernel object
    built from PSD components (``RBF``, ``Matern``, ``DotProduct``...)."""
    if isinstance(kernel, str):
        return kernel in ALWAYS_PSD_KERNELS
    return is_kernel_object(kernel) and is_psd_kernel_object(kernel)


# The parameter constraints of a kernel specification, as in
# sklearn.kernel_approximation.Nystroem, and of n_jobs.
KERNEL_CONSTRAINTS = {
    "kernel": [
        StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS) | {"precomputed"}),
        callable,
    ],
    "gamma": [Interval(Real, 0, None, closed="left"), None],
    "coef0": [Interval(Real, None, None, closed="neither"), None],
    "degree": [Interval(Real, 1, None, closed="left"), None],
    "kernel_params": [dict, None],
    "n_jobs": [Integral, None],
}

# Named kernel parameters also accepted inside ``kernel_params``.
_NAMED_KERNEL_PARAMS = ("gamma", "coef0", "degree")


class NonPSDKernelWarning(UserWarning):
    """The kernel is not positive semi-definite; its negative part is dropped.

    The Nystroem features use the pseudo-inverse square root of the positive
    semi-definite part of the landmark block ``K(I, I)``, so the estimators
    then fit the PSD part of the kernel, not the kernel itself.
    """


class PenaltyResolutionWarning(ConvergenceWarning):
    """The penalty ``alpha`` is below what the floating point type resolves.

    The kernel matrix is only known up to rounding errors of the order of
    ``n_samples * eps * max_i k(x_i, x_i)`` in spectral norm; a smaller
    ``alpha`` regularises nothing but rounding noise.
    """


def _kernel_name(kernel):
    if isinstance(kernel, str):
        return repr(kernel)
    return repr(getattr(kernel, "__name__", type(kernel).__name__))


def check_kernel_params(kernel, kernel_params, named=None):
    """Refuse ``kernel_params`` that the kernel would silently ignore.

    ``named`` holds the values of the ``gamma``, ``coef0`` and ``degree``
    parameters of the estimator (None when not given).  For a built-in
    kernel, every key of ``kernel_params`` must be a parameter of that
    kernel, must not also be given as a named parameter, and is checked
    against the named parameter's constraints.  A precomputed kernel takes
    no parameters.  A callable receives ``kernel_params`` as they are.
    """
    if not kernel_params or callable(kernel):
        return
    if kernel == "precomputed":
        raise ValueError(
            "kernel_params cannot be used with kernel='precomputed'; got "
            f"{sorted(kernel_params)}."
        )
    accepted = set(KERNEL_PARAMS.get(kernel, ()))
    unknown = sorted(set(kernel_params) - accepted)
    if unknown:
        takes = sorted(accepted) if accepted else "no parameters"
        raise ValueError(
            f"kernel_params has {unknown}, which the {kernel!r} kernel does not "
            f"take (it takes {takes}); they would be silently ignored."
        )
    named = named or {}
    twice = sorted(k for k in kernel_params if named.get(k) is not None)
    if twice:
        raise ValueError(
            f"{twice} given both as a parameter and in kernel_params; give "
            "each kernel parameter once."
        )
    validate_parameter_constraints(
        {k: KERNEL_CONSTRAINTS[k] for k in _NAMED_KERNEL_PARAMS if k in kernel_params},
        {k: kernel_params[k] for k in _NAMED_KERNEL_PARAMS if k in kernel_params},
        caller_name=f"the {kernel!r} kernel (in kernel_params)",
    )


class _CheckedCallableKernel:
    """A callable kernel ``k(x, y, **params)`` whose values are checked.

    Each value must be a real scalar; the error names the callable and what
    it returned instead of numpy's "setting an array element with a
    sequence".  (A module-level class: joblib workers can pickle it.)
    """

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, x, y, **params):
        value = self.kernel(x, y, **params)
        if np.ndim(value) != 0:
            raise ValueError(
                f"The callable kernel {_kernel_name(self.kernel)} must return a "
                "scalar k(x, y) for each pair of samples; it returned an array "
                f"of shape {np.shape(value)}."
            )
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"The callable kernel {_kernel_name(self.kernel)} must return a "
                f"real number for each pair of samples; it returned {value!r}."
            ) from None


def checked_kernel(kernel):
    """``kernel`` itself, or for a plain callable a value-checking wrapper.

    Strings and scikit-learn's Gaussian-process kernel objects (which
    :func:`sklearn.metrics.pairwise_kernels` calls on whole arrays) are
    returned unchanged.
    """
    if not callable(kernel) or isinstance(kernel, (_GPKernel, _CheckedCallableKernel)):
        return kernel
    return _CheckedCallableKernel(kernel)


def check_kernel_values(block, kernel):
    """Raise if kernel values computed from finite data are not finite."""
    block = np.asarray(block)
    # A sum is finite only if every term is (or it overflowed, which the
    # elementwise check then sorts out): one reduction, no boolean block.
    with np.errstate(over="ignore", invalid="ignore"):
        total = block.sum(dtype=np.float64)
    if not np.isfinite(total) and not np.isfinite(block).all():
        kernel = getattr(kernel, "kernel", kernel)  # unwrap _CheckedCallableKernel
        raise ValueError(
            f"The kernel {_kernel_name(kernel)} returned non-finite values (NaN "
            "or inf) on finite input: a callable kernel returned NaN or inf, or "
            "a kernel overflowed (e.g. 'poly' on large features or with a large "
            "degree or gamma). Rescale X or change the kernel parameters."
        )
    return block


def check_kernel_is_psd(kernel):
    """Warn for a kernel of :data:`NON_PSD_KERNELS`, known not to be PSD.

    For functions that never form ``K(I, I)`` as a whole (the degrees of
    freedom estimate); the estimators check the landmark block instead.
    """
    if isinstance(kernel, str) and kernel in NON_PSD_KERNELS:
        warnings.warn(
            f"Kernel methods need a positive semi-definite kernel, but the "
            f"kernel {kernel!r} is not positive semi-definite in general. The "
            "negative part is dropped: the partial Cholesky factor keeps only "
            "directions of positive residual, so the result is that of a PSD "
            "approximation of the kernel, not of the kernel itself.",
            NonPSDKernelWarning,
            stacklevel=user_stacklevel(),
        )


def _max_asymmetry(A, block=256):
    """``max |A - A^T|`` by square tiles, each pair of tiles once: the
    landmark block is ``p x p``, and a temporary of its size would be the
    largest array of many fits.  (Tiles, not row blocks against column
    blocks: a column block read across every row strides through memory,
    and half the pairs are the same.)"""
    worst = 0.0
    n = A.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            gap = np.abs(
                A[i : i + block, j : j + block] - A[j : j + block, i : i + block].T
            )
            worst = max(worst, float(gap.max(initial=0.0)))
    return worst


def check_landmark_gram(gram, kernel, eigvals=None, positive_definite=False):
    """Warn when the landmark block ``K(I, I)`` is not symmetric PSD.

    Always warns for a kernel of :data:`NON_PSD_KERNELS`; otherwise when the
    block is clearly asymmetric or has an eigenvalue below
    ``-sqrt(eps) * max |eigenvalue|``.  ``eigvals``: those of the symmetric
    part, when the caller has them; ``positive_definite``: the caller has
    factored the symmetric part by Cholesky; else a Cholesky factorisation
    of the slightly shifted block rules a negative eigenvalue out in
    ``p^3 / 3`` flops, and the eigenvalues are computed only when it fails.
    """
    gram = np.asarray(gram)
    if gram.size == 0:
        return
    tol = np.sqrt(np.finfo(gram.dtype).eps)
    scale = max(float(gram.max()), -float(gram.min()))
    name = _kernel_name(getattr(kernel, "kernel", kernel))
    asymmetry = _max_asymmetry(gram)
    if asymmetry > tol * scale:
        warnings.warn(
            f"The kernel {name} is not symmetric on the landmarks: "
            f"|K(I, I) - K(I, I)^T| reaches {asymmetry:.3g}. Only the "
            "symmetric part (K + K^T) / 2 of K(I, I) enters the feature map.",
            NonPSDKernelWarning,
            stacklevel=user_stacklevel(),
        )
    known = isinstance(kernel, str) and kernel in NON_PSD_KERNELS
    if eigvals is None and not known and positive_definite:
        return
    sym = 0.5 * (gram + gram.T).astype(np.float64)
    if eigvals is None and not known:
        shift = tol * max(float(np.abs(np.diag(sym)).max()), np.finfo(float).tiny)
        _, info = _tiles.potrf(sym + shift * np.eye(sym.shape[0]), lower=True)
        if info == 0:
            return
    if eigvals is None:
        eigvals = linalg.eigvalsh(sym, check_finite=False)
    if known or eigvals.min() < -tol * float(np.abs(eigvals).max()):
        what = "is not positive semi-definite" + (" in general" if known else "")
        warnings.warn(
            f"Kernel methods need a positive semi-definite kernel, but the "
            f"kernel {name} {what}: K(I, I) on the {gram.shape[0]} landmarks "
            f"has eigenvalues from {eigvals.min():.3g} to {eigvals.max():.3g}. "
            "The negative part is dropped: the features use the pseudo-inverse "
            "square root of the PSD part of K(I, I), so the model approximates "
            "that PSD part, not the kernel itself.",
            NonPSDKernelWarning,
            stacklevel=user_stacklevel(),
        )


def check_penalty_resolution(alpha, diagonal, n_samples=None):
    """Warn when ``alpha`` is below the rounding level of the kernel matrix.

    ``diagonal`` is ``diag(K)`` (its dtype sets the machine epsilon).  The
    kernel matrix is known up to rounding errors of spectral norm about
    ``n * eps * max_i |k_ii|``; a penalty below that is not resolved, and
    the fit then depends on rounding noise.
    """
    diagonal = np.asarray(diagonal)
    if diagonal.size == 0:
        return
    n = diagonal.shape[0] if n_samples is None else n_samples
    dtype = diagonal.dtype if diagonal.dtype == np.float32 else np.float64
    floor = n * np.finfo(dtype).eps * float(np.abs(diagonal).max())
    if alpha < floor:
        warnings.warn(
            f"The penalty alpha={alpha:.3g} is below n_samples * eps * "
            f"max k(x, x) = {floor:.3g}, the rounding level of the {n} x {n} "
            f"kernel matrix in {np.dtype(dtype).name}: alpha is not resolved, "
            "and the directions it should regularise are rounding noise. The "
            "result is that of a pseudo-inverse at that level at best; use "
            f"alpha >= {floor:.3g}"
            + (" or float64 data." if dtype == np.float32 else "."),
            PenaltyResolutionWarning,
            stacklevel=user_stacklevel(),
        )


def check_square_matrix(K, name="K", check_diagonal=False):
    """A finite, real, square, non-empty float64 matrix (dense).

    With ``check_diagonal``, warn (:class:`NonPSDKernelWarning`) if the
    diagonal has clearly negative entries, which no PSD matrix has.
    """
    K = check_array(K, dtype=np.float64, input_name=name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {K.shape}.")
    if check_diagonal:
        diag = np.diag(K)
        if diag.min() < -np.sqrt(np.finfo(float).eps) * np.abs(diag).max():
            warnings.warn(
                f"{name} is not positive semi-definite: its diagonal has "
                f"negative entries (down to {diag.min():.3g}).",
                NonPSDKernelWarning,
                stacklevel=user_stacklevel(),
            )
    return K


def check_spectrum(eigvals, name="K"):
    """Warn if eigenvalues computed from a kernel matrix are clearly negative."""
    eigvals = np.asarray(eigvals)
    if eigvals.size and eigvals.min() < -np.sqrt(np.finfo(float).eps) * float(
        np.abs(eigvals).max()
    ):
        warnings.warn(
            f"{name} is not positive semi-definite: it has eigenvalues down to "
            f"{eigvals.min():.3g} (largest {eigvals.max():.3g}). Negative "
            "eigenvalues are treated as zero, i.e. the result is that of the "
            f"PSD part of {name}.",
            NonPSDKernelWarning,
            stacklevel=user_stacklevel(),
        )


def check_factor(G, pivots, residual, alpha):
    """Validate the inputs of :func:`leverage_score_bounds`."""
    if not (np.isscalar(alpha) and np.isreal(alpha) and alpha > 0):
        raise InvalidParameterError(
            f"alpha must be a float > 0 (the ridge penalty); got {alpha!r}."
        )
    if not np.isfinite(alpha):
        raise InvalidParameterError(f"alpha must be finite; got {alpha!r}.")
    G = check_array(
        G, dtype=[np.float64, np.float32], ensure_min_features=0, input_name="G"
    )
    residual = check_array(
        residual, dtype=np.float64, ensure_2d=False, input_name="residual"
    )
    pivots = np.asarray(pivots)
    n = G.shape[0]
    if residual.shape != (n,):
        raise ValueError(
            f"residual must have shape ({n},), one entry per row of G; got "
            f"{residual.shape}."
        )
    scale = max(float(residual.max()), float((G * G).sum(axis=1).max(initial=0.0)))
    if residual.min() < -np.sqrt(np.finfo(float).eps) * scale:
        raise ValueError(
            "residual is diag(K - L) and must be non-negative; got "
            f"{residual.min():.3g}."
        )
    if pivots.ndim != 1 or (
        pivots.size
        and (
            not np.issubdtype(pivots.dtype, np.integer)
            or pivots.min() < -n
            or pivots.max() >= n
        )
    ):
        raise ValueError(
            f"pivots must be a 1d array of row indices of G (n={n}); got {pivots!r}."
        )
    return G, pivots, residual
