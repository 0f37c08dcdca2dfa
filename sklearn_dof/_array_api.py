"""Array-API inputs: fits and predictions in the input's namespace and device.

With scikit-learn's ``array_api_dispatch`` on (:func:`sklearn.config_context`),
a torch tensor, a CuPy array or any other array-API array is fitted where it
lives: the kernel blocks (:func:`sklearn.metrics.pairwise_kernels`, which
dispatches), the Gram and right-hand-side sums over blocks of rows, the
factorisation of the landmark block and the solve all run in its namespace,
on its device, and the fitted arrays (``components_``, ``dual_coef_``,
``normalization_``) stay there.  NumPy input keeps the BLAS-specific path of
the rest of the package, untouched.

The mathematics are those of the NumPy path in their simplest, most
portable form: features ``Phi = K(x, I) N`` with ``N = R^{-1}`` for the
Cholesky factor ``R^T R = K(I, I)`` (shifted by ``rtol ||K(I, I)||_1`` when
the block is numerically singular and the penalty allows, the pseudo-inverse
square root otherwise; :mod:`sklearn_dof._linalg`), and the normal
equations ``(Phi_c^T S Phi_c + alpha I) c = Phi_c^T S y_c`` summed in
float64 by blocks of rows, never the ``n x p`` features.  float32 input
keeps float32 kernel blocks: at small penalties the normal equations need
float64 (a float32 sum of ``Phi^T Phi`` at ``lambda = 1e-6`` loses all
accuracy; issue 20's measurements), so each block is raised to float64
before its product.

The automatic ranks (``"auto"``, ``"dof"``) are chosen on the host, by the
NumPy path, on the uniform subsample of rows that the certified rank reads
past its memory budget (:func:`host_rows`, :mod:`sklearn_dof._landmarks`), at
the same ``lambda = alpha / n``; the landmarks it picks among those rows
are then gathered on the device.  So ``"auto"`` gives the landmarks of the
NumPy path on the same data (below the budget, every row is read); the
paper's rule ``"dof"``, which the NumPy path applies to all rows, reads the
subsample here.
"""

import warnings
from typing import NamedTuple

import numpy as np
from scipy import sparse
from sklearn import config_context, get_config
from sklearn.externals.array_api_compat import array_namespace, is_array_api_obj
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import gen_batches
from sklearn.utils._array_api import (
    _convert_to_numpy,
    _is_numpy_namespace,
    check_same_namespace,
    get_namespace_and_device,
    move_to,
)

from . import _landmarks, _memory, _ridge_solve
from ._blocks import BUFFERS_PER_ROW
from ._cg import pcg_ridge
from ._landmark_block import FitRequest
from ._linalg import PINV_RTOL, SHIFT_FIRST_COMPONENTS, SHIFT_PENALTY_FRACTION
from ._loo import loo_residuals, ridge_spectrum, squared_sums
from ._pcg_operator import falkon_preconditioner, normal_product
from ._sampling import uniform_columns
from ._validation import user_stacklevel


def is_array_api_array(a):
    """Whether ``a`` is an array of a namespace other than NumPy (not a
    NumPy array, a sparse matrix, or a Dask array)."""
    return (
        is_array_api_obj(a)
        and not isinstance(a, np.ndarray)
        and not sparse.issparse(a)
        and type(a).__module__.split(".")[0] != "dask"
    )


def dispatch_namespace(*arrays):
    """``(xp, device)`` of non-NumPy arrays under ``array_api_dispatch``,
    else None (the NumPy path).

    Without dispatch, an array that NumPy cannot read where it lives (a GPU
    tensor) gets a :class:`TypeError` that names the setting, instead of
    one from deep inside the conversion.
    """
    arrays = [a for a in arrays if a is not None]
    if not get_config()["array_api_dispatch"]:
        for a in arrays:
            if is_array_api_array(a):
                where = getattr(a, "device", "cpu")
                if _device_name(where) not in ("cpu", "cpu_device"):
                    raise TypeError(
                        f"Input of type {type(a).__module__}.{type(a).__name__} "
                        f"lives on device {where!r}: fitting or predicting on "
                        "it needs sklearn.set_config(array_api_dispatch=True) "
                        "(and SCIPY_ARRAY_API=1 in the environment), or a "
                        "NumPy copy of the data."
                    )
        return None
    xp, compliant, device = get_namespace_and_device(*arrays)
    if not compliant or _is_numpy_namespace(xp):
        return None
    return xp, device


def _device_name(device):
    name = getattr(device, "type", None) or str(device)
    return name.lower().split(":")[0].split("(")[-1].strip("'\")")


def _unsupported(estimator):
    """Why the estimator's parameters cannot run on array-API input, or None."""
    kernel = estimator.kernel
    if callable(kernel) or kernel == "precomputed":
        return (
            f"kernel={kernel!r} needs NumPy input: under array_api_dispatch "
            f"{type(estimator).__name__} takes the kernel names of "
            "sklearn.metrics.pairwise_kernels."
        )
    sampling = getattr(estimator, "sampling", "uniform")
    if not (isinstance(sampling, str) and sampling == "uniform"):
        return (
            f"sampling={sampling!r} needs NumPy input: under array_api_dispatch "
            f"{type(estimator).__name__} draws uniform landmarks "
            "(sampling='uniform')."
        )
    return None


def supports(estimator):
    """Whether the estimator's parameters run on array-API input (its
    ``array_api_support`` tag): uniform landmarks and a named kernel."""
    return _unsupported(estimator) is None


def check_supported(estimator):
    """A clear ``ValueError`` for what the array-API path does not do."""
    reason = _unsupported(estimator)
    if reason is not None:
        raise ValueError(reason)


def kernel(X, Y, estimator):
    """``K(X, Y)`` in the namespace of ``X`` (float32 for float32 ``X``),
    also when called outside the dispatch context of the fit (a fitted
    map computed on first read)."""
    # Both arrays were validated (the landmarks are training rows): no
    # finiteness check per block, which on an accelerator is a
    # synchronisation per block.
    with config_context(array_api_dispatch=True, assume_finite=True):
        return pairwise_kernels(
            X,
            Y,
            metric=estimator.kernel,
            filter_params=True,
            **estimator._kernel_params(),
        )


def _row_blocks(n_samples, n_columns):
    """Row slices of blocks of ``n_columns`` wide float64 buffers that fill
    scikit-learn's ``working_memory``.

    Unlike the NumPy path's blocks (:func:`_blocks.row_batch_size`), these
    are not capped at a thousand rows or so: on an accelerator every block
    costs kernel launches, and there is no allocator threshold to stay
    under.
    """
    row_bytes = BUFFERS_PER_ROW * max(n_columns, 1) * 8
    rows = int(get_config()["working_memory"] * 2**20 // row_bytes)
    return gen_batches(n_samples, max(1, min(rows, n_samples)))


def namespace_of(a):
    """The namespace of an array-API array, whatever the dispatch setting
    (a fitted attribute read outside the ``config_context`` of its fit)."""
    return array_namespace(a)


def to_host(a):
    """A NumPy copy of an array (small arrays only: subsamples, ``p x p``
    blocks, scores), from whatever device it is on."""
    if not is_array_api_array(a):
        return a
    return _convert_to_numpy(a, xp=namespace_of(a))


def inverse_sqrt(gram, xp, rtol=PINV_RTOL):
    """Symmetric pseudo-inverse square root ``K(I, I)^{+1/2}``, eigenvalues
    below ``rtol`` of the largest dropped (:func:`_linalg.landmark_eigh`)."""
    return _inverse_sqrt_and_root(gram, xp, rtol, with_root=False)[0]


def _inverse_sqrt_and_root(gram, xp, rtol=PINV_RTOL, with_root=True):
    """``K^{+1/2}`` and ``K^{1/2}`` (None without ``with_root``) on the
    same span."""
    rtol = max(rtol, 10 * float(xp.finfo(gram.dtype).eps))
    W = xp.astype(gram, xp.float64)
    eigvals, eigvecs = xp.linalg.eigh(0.5 * (W + W.T))
    top = max(float(xp.max(eigvals)), float(np.finfo(float).tiny))
    keep = eigvals > rtol * top
    kept = xp.where(keep, eigvals, 1.0)
    inverse_root = xp.where(keep, 1.0 / xp.sqrt(kept), 0.0)
    inverse = (eigvecs * inverse_root) @ eigvecs.T
    if not with_root:
        return inverse, None
    root = xp.where(keep, xp.sqrt(kept), 0.0)
    return inverse, (eigvecs * root) @ eigvecs.T


class _LandmarkBasis(NamedTuple):
    """The map ``N`` of the features ``K(x, I) N``, and the landmarks' own
    features ``B = K(I, I) N``: the lower Cholesky factor ``L`` of
    ``K(I, I) = L L^T`` (``B^T B = R R^T``, Falkon's preconditioner, for
    ``R = L^T``), ``K(I, I)^{1/2}`` for the pseudo-inverse square root."""

    N: object
    B: object

    def map(self, V):
        """``N V`` (:func:`~sklearn_dof._pcg_operator.normal_product`'s
        basis): ``N`` is formed, for an accelerator's products."""
        return self.N @ V

    def map_t(self, V):
        """``N^T V``."""
        return self.N.T @ V


def landmark_basis(gram, landmark_penalty, xp, device, with_features=True):
    """:class:`_LandmarkBasis` with ``N^T K(I, I) N`` the identity on the
    span kept.

    ``R^{-1}`` for the Cholesky factor of ``K(I, I)``, of ``K(I, I) + s I``
    with ``s = rtol ||K(I, I)||_1`` when the block is numerically singular
    and the shift stays below 1% of ``landmark_penalty`` (see
    :func:`_linalg.shifted_landmark_cholesky`; tried first from
    ``SHIFT_FIRST_COMPONENTS`` landmarks on, as :func:`_linalg.landmark_factor`
    does), else the pseudo-inverse
    square root.  ``B`` is read off the factorisation, never formed as the
    product ``K(I, I) N``, whose rounding ``||N||`` amplifies; without
    ``with_features`` the pseudo-inverse route leaves it None (its
    ``2 p^3`` product is for the conjugate gradients only).
    """
    # The pseudo-inverse drops the directions below a float32 block's
    # precision (as _linalg.landmark_eigh); the factorisations are judged
    # at PINV_RTOL whatever the dtype, as _linalg.landmark_cholesky judges
    # them on the NumPy path.
    eigh_rtol = max(PINV_RTOL, 10 * float(xp.finfo(gram.dtype).eps))
    W = xp.astype(gram, xp.float64)
    W = 0.5 * (W + W.T)
    p = W.shape[0]
    eye = xp.eye(p, dtype=xp.float64, device=device)
    shift = PINV_RTOL * max(
        float(xp.max(xp.sum(xp.abs(W), axis=0))), float(np.finfo(float).tiny)
    )
    shifts = (0.0, shift)
    if p >= SHIFT_FIRST_COMPONENTS:
        shifts = (shift, 0.0)
    for s in shifts:
        if s > SHIFT_PENALTY_FRACTION * landmark_penalty:
            continue
        factor = _cholesky(W + s * eye, xp)
        if factor is None:
            continue
        diagonal = xp.linalg.diagonal(factor)
        # The squared ratio of the extreme pivots bounds the reciprocal
        # condition number from above: a factor below rtol is refused, as
        # LAPACK's estimate makes the NumPy path refuse it.
        ratio = float(xp.min(diagonal)) / float(xp.max(diagonal))
        if s > 0 or ratio * ratio >= PINV_RTOL:
            # K = L L^T: N = L^{-T}, upper triangular; K N = L (up to the
            # shift, which the preconditioner can ignore).
            return _LandmarkBasis(xp.linalg.inv(factor).T, factor)
    return _LandmarkBasis(*_inverse_sqrt_and_root(W, xp, eigh_rtol, with_features))


def _cholesky(A, xp):
    try:
        L = xp.linalg.cholesky(A)
    except Exception:  # each namespace raises its own LinAlgError
        return None
    if not bool(xp.all(xp.isfinite(L))):
        return None
    return L


class _Features(NamedTuple):
    """The training features ``K(x, I) N``, evaluated block by block of
    rows where the data live, never all at once."""

    nystroem: object
    X: object
    landmarks: object
    N: object
    xp: object
    device: object

    def kernel_blocks(self):
        """``(rows, K(x[rows], I))`` in float64, blocks within the budget."""
        width = max(self.landmarks.shape[0], self.N.shape[1])
        for rows in _row_blocks(self.X.shape[0], width):
            K = kernel(self.X[rows, ...], self.landmarks, self.nystroem)
            yield rows, self.xp.astype(K, self.xp.float64, copy=False)

    def blocks(self):
        """``(rows, Phi[rows])`` in float64, blocks within the budget."""
        for rows, K in self.kernel_blocks():
            yield rows, K @ self.N

    def reduce(self, statistic, *row_arrays):
        """``sum_b statistic(K_b, *(a[b] for a in row_arrays))`` over the
        kernel blocks ``K_b`` (the ``FeatureBlocks.reduce`` protocol; whole
        blocks, unstreamed: on an accelerator each costs kernel launches)."""
        total = None
        for rows, K in self.kernel_blocks():
            term = statistic(K, *(a[rows, ...] for a in row_arrays))
            if total is None:
                total = term
            else:
                total = tuple(a + b for a, b in zip(total, term, strict=True))
        return total


class _Sums(NamedTuple):
    """Centred, weighted normal equations (see :func:`ridge_sums`)."""

    gram: object
    rhs: object
    phi_mean: object
    y_mean: object


def ridge_sums(features, y, sample_weight, fit_intercept):
    """Centred, weighted normal equations of the features.

    Returns :class:`_Sums` (float64) with
    ``gram = Phi_c^T S Phi_c`` and ``rhs = Phi_c^T S y_c``; the rows are
    shifted by the mean of a pilot block before they are summed, so that
    the centring subtracts a correction of the order of its own rounding
    (as :func:`_blocks.normal_equations`).
    """
    xp, device = features.xp, features.device
    f64 = xp.float64
    r = features.N.shape[1]
    k = y.shape[1]
    y = xp.astype(y, f64)
    w = None if sample_weight is None else xp.astype(sample_weight, f64)
    gram = xp.zeros((r, r), dtype=f64, device=device)
    rhs = xp.zeros((r, k), dtype=f64, device=device)
    u = xp.zeros((r,), dtype=f64, device=device)
    v = xp.zeros((k,), dtype=f64, device=device)
    total = xp.zeros((), dtype=f64, device=device)
    phi_shift = y_shift = None
    for rows, Phi in features.blocks():
        y_b = y[rows, ...]
        if phi_shift is None:
            if fit_intercept:
                w0 = None if w is None else w[rows]
                phi_shift = _mean(Phi, w0, xp)
                y_shift = _mean(y_b, w0, xp)
            else:
                phi_shift = xp.zeros((r,), dtype=f64, device=device)
                y_shift = xp.zeros((k,), dtype=f64, device=device)
        # In place: the block is this loop's own temporary, and each pass
        # over it costs as much memory traffic as the kernel's evaluation.
        Phi -= phi_shift
        y_b = y_b - y_shift
        if w is None:
            u += xp.sum(Phi, axis=0)
            v += xp.sum(y_b, axis=0)
            total += Phi.shape[0]
        else:
            root = xp.sqrt(w[rows])
            Phi *= root[:, None]
            y_b = y_b * root[:, None]
            u += root @ Phi
            v += root @ y_b
            total += xp.sum(w[rows])
        gram += Phi.T @ Phi
        rhs += Phi.T @ y_b
    # (One synchronisation per fit, not one per block.)
    total = float(total)
    if not fit_intercept or total <= 0:
        return _Sums(gram, rhs, phi_shift, y_shift)
    gram = gram - (u[:, None] * u[None, :]) / total
    rhs = rhs - (u[:, None] * v[None, :]) / total
    return _Sums(gram, rhs, phi_shift + u / total, y_shift + v / total)


def _mean(A, w, xp):
    if w is None or float(xp.sum(w)) <= 0:
        return xp.mean(A, axis=0)
    return (w @ A) / xp.sum(w)


def solve(gram, rhs, alpha, xp, device):
    """``(gram + alpha I)^{-1} rhs``."""
    eye = xp.eye(gram.shape[0], dtype=gram.dtype, device=device)
    return xp.linalg.solve(gram + alpha * eye, rhs)


class _CGSolution(NamedTuple):
    """Ridge weights in the features' basis from :func:`cg_solve`."""

    weights: object
    phi_mean: object
    y_mean: object
    n_iter: int
    converged: bool


def cg_solve(features, basis, y, sample_weight, fit_intercept, alpha):
    """Falkon's method where the data live: ridge weights on the features
    ``Phi = K(x, I) N`` by conjugate gradients, without their Gram matrix.

    The NumPy path's :class:`~sklearn_dof._ridge_solve.NystroemPCGRidgeProblem`
    in the namespace of the data, with the same operator and preconditioner
    (:mod:`sklearn_dof._pcg_operator`): each step is one pass over the
    kernel blocks ``K`` (``K U`` then ``K^T S Z``, float64, never ``K N``),
    and the preconditioner ``P = (t / p) B^T B + alpha I`` comes from the
    landmarks' own features ``B = K(I, I) N`` (``basis.B``, see
    :class:`_LandmarkBasis`; ``B^T B = R R^T`` for the Cholesky factor
    ``R^T R = K(I, I)``, Falkon's preconditioner; ``t`` the total weight).
    The inverse of the Cholesky factor of ``P`` is formed once, in float32
    where ``P`` has one: an accelerator applies it as two products per step.
    Returns :class:`_CGSolution`, or None when ``P`` has no Cholesky factor
    even in float64.
    """
    xp, device = features.xp, features.device
    f64 = xp.float64
    n, k = y.shape
    y = xp.astype(y, f64)
    w = None if sample_weight is None else xp.astype(sample_weight, f64)
    total = float(n) if w is None else float(xp.sum(w))
    y_mean = (
        _mean(y, w, xp) if fit_intercept else xp.zeros((k,), dtype=f64, device=device)
    )
    y_c = y - y_mean
    Sy = y_c if w is None else y_c * w[:, None]

    def first_moments(K, Sy_b, *w_b):
        return K.T @ Sy_b, (w_b[0] @ K if w_b else xp.sum(K, axis=0))

    # One pass for K^T S y_c and the weighted mean kernel row m.  (With an
    # intercept, centring K by m leaves K^T S y_c unchanged: sum S y_c = 0.)
    row_arrays = (Sy,) if w is None else (Sy, w)
    KtSy, kernel_sum = features.reduce(first_moments, *row_arrays)
    m = kernel_sum / total if fit_intercept else xp.zeros_like(kernel_sum)
    precondition = falkon_preconditioner(
        lambda dtype: _landmark_gram(basis.B, dtype, xp),
        lambda P: _inverse_factor_solver(P, xp),
        total,
        alpha,
        _ridge_solve.PCG_PRECONDITIONER_DTYPE,
        xp,
    )
    if precondition is None:
        return None
    W, n_iter, converged = pcg_ridge(
        lambda V: normal_product(V, alpha, features.reduce, basis, m, w, xp),
        basis.map_t(KtSy),
        precondition,
        xp.sum(Sy * y_c, axis=0),
        _ridge_solve.PCG_TOL,
        _ridge_solve.PCG_MAX_ITER,
        xp,
    )
    return _CGSolution(W, m @ basis.N, y_mean, n_iter, converged)


def _landmark_gram(B, dtype, xp):
    """``B^T B`` in ``dtype``, by a general product: the array API has no
    ``syrk``."""
    B = xp.astype(B, dtype)
    return B.T @ B


def _inverse_factor_solver(P, xp):
    """``R -> P^{-1} R`` by the inverse ``L^{-1}`` of the Cholesky factor
    ``P = L L^T``, or None.

    Two products per step, not one with an explicit ``P^{-1}``: their
    composition is symmetric positive definite whatever the rounding, as
    conjugate gradients need.  ``P`` is symmetrised first: a product
    ``B^T B`` need not be symmetric to the last bit, and a namespace's
    factorisation may read either triangle.
    """
    L = _cholesky(0.5 * (P + P.T), xp)
    if L is None:
        return None
    L_inv = xp.linalg.inv(L)
    if not bool(xp.all(xp.isfinite(L_inv))):
        return None
    return lambda R: L_inv.T @ (L_inv @ R)


def kernel_product(estimator, X, landmarks, W, xp):
    """``K(X, I) W`` by blocks of rows (``W`` of shape (p, k)), in ``W``'s
    dtype: no ``n x p`` kernel block."""
    parts = [
        xp.astype(kernel(X[rows, ...], landmarks, estimator), W.dtype) @ W
        for rows in _row_blocks(X.shape[0], landmarks.shape[0])
    ]
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def host_rows(n_samples, max_components, random_state):
    """The rows an automatic rank is chosen on: those the NumPy path's
    certified rank reads (:func:`~sklearn_dof._landmarks.certificate_rows`)."""
    max_rank = min(n_samples, max_components or _memory.default_max_components())
    rows = _landmarks.certificate_rows(n_samples, max_rank, random_state)
    return np.arange(n_samples) if rows is None else rows


def host_rank(nystroem, X, response, penalties=None, center=True):
    """The automatic rank of ``nystroem`` (``"auto"`` or ``"dof"``), chosen
    by the NumPy path on the rows of :func:`host_rows` at the same ``lambda
    = alpha / n`` (and the same grid of ``lambda`` for ``penalties``).
    Returns the fitted host transformer, the rows it read, and their
    fraction of all rows."""
    n = X.shape[0]
    rows = host_rows(n, nystroem.max_components, nystroem.random_state)
    fraction = len(rows) / n
    xp, _, device = get_namespace_and_device(X)
    index = xp.asarray(rows, device=device)
    X_host = to_host(xp.take(X, index, axis=0))
    y_host = None
    if response is not None:
        y_host = to_host(xp.astype(xp.take(response, index, axis=0), xp.float64))
    host = nystroem.__class__(**nystroem.get_params())
    host.set_params(alpha=nystroem.alpha * fraction)
    with config_context(array_api_dispatch=False):
        grid = None if penalties is None else np.asarray(penalties) * fraction
        host._fit(
            host._validate_fit_data(X_host),
            FitRequest(response=y_host, center=center, penalties=grid),
        )
    return host, rows, fraction


def fit_nystroem(nystroem, X, response, xp, device, penalties=None, center=True):
    """Fit ``nystroem`` (a :class:`~sklearn_dof.DoFNystroem`) on validated
    array-API ``X``; returns ``K(I, I)`` in the namespace."""
    check_supported(nystroem)
    n = X.shape[0]
    rank = nystroem.n_components
    nystroem.loss_estimate_ = np.nan
    nystroem.requested_components_ = None
    nystroem.alpha_ = float(nystroem.alpha)
    if isinstance(rank, str):
        host, rows, fraction = host_rank(nystroem, X, response, penalties, center)
        nystroem.loss_estimate_ = host.loss_estimate_
        nystroem.requested_components_ = host.requested_components_
        # With a grid, the penalty the host's rank is certified for.
        nystroem.alpha_ = host.alpha_ / fraction
        indices = rows[np.asarray(host.component_indices_)]
    else:
        if rank > n:
            warnings.warn(
                f"n_components={rank} > n_samples={n}: n_components was set "
                "to n_samples, the exact kernel.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        indices = uniform_columns(n, min(int(rank), n), nystroem.random_state)
    rank = len(indices)
    landmarks = xp.take(X, xp.asarray(indices, device=device), axis=0)
    nystroem.components_ = landmarks
    # Every fitted array where the data live (scikit-learn's convention).
    nystroem.component_indices_ = xp.asarray(indices, device=device)
    nystroem.n_components_ = rank
    nystroem._n_features_out = rank
    nystroem.exact_ = False
    nystroem._n_training_rows = n
    nystroem._normalization = None
    nystroem._dof = None
    return kernel(landmarks, landmarks, nystroem)


def fit_ridge(
    estimator,
    nystroem,
    X,
    y,
    sample_weight,
    xp,
    device,
    alphas=None,
    solver="direct",
):
    """Fit a ridge estimator (:class:`~sklearn_dof.DoFKernelRidge`, or with
    ``alphas`` :class:`~sklearn_dof.DoFKernelRidgeCV`) on validated
    array-API data, with ``nystroem`` its unfitted transformer:
    ``nystroem_``, ``dual_coef_``, ``intercept_`` (and the penalty chosen)
    in the namespace of ``X``.  ``solver``: the estimator's (see
    :func:`~sklearn_dof._ridge_solve.uses_cg`); the conjugate gradients
    set ``n_iter_``."""
    n = X.shape[0]
    y2 = xp.reshape(y, (n, -1))
    estimator.nystroem_ = nystroem
    nystroem._validate_params()
    nystroem.n_features_in_ = X.shape[1]
    gram_II = fit_nystroem(
        nystroem, X, y2, xp, device, penalties=alphas, center=estimator.fit_intercept
    )
    p, alpha = nystroem.n_components_, nystroem.alpha_
    cg = alphas is None and _ridge_solve.uses_cg(solver, p)
    basis = landmark_basis(gram_II, alpha * p / n, xp, device, with_features=cg)
    N = basis.N
    features = _Features(nystroem, X, nystroem.components_, N, xp, device)
    solution = None
    if cg:
        solution = cg_solve(
            features,
            basis,
            y2,
            sample_weight,
            estimator.fit_intercept,
            alpha,
        )
    if solution is None:
        sums = ridge_sums(features, y2, sample_weight, estimator.fit_intercept)
        if alphas is not None:
            scores = loo_scores(
                features, sums, y2, sample_weight, estimator.fit_intercept, alphas
            )
            finite = np.where(np.isnan(scores), -np.inf, scores)
            best = int(np.argmax(finite))
            estimator.alpha_ = float(alphas[best])
            estimator.best_score_ = float(scores[best])
            alpha = estimator.alpha_
            nystroem.alpha_ = alpha
        C = solve(sums.gram, sums.rhs, alpha, xp, device)
        phi_mean, y_mean = sums.phi_mean, sums.y_mean
    else:
        C, phi_mean, y_mean = solution.weights, solution.phi_mean, solution.y_mean
        estimator.n_iter_ = solution.n_iter
        if not solution.converged:
            _ridge_solve.warn_not_converged(solution.n_iter)
    dual = N @ C  # landmark weights, (p, k)
    intercept = y_mean - phi_mean @ C
    estimator.n_components_ = p
    if y.ndim == 1:
        estimator.dual_coef_ = dual[:, 0]
        estimator.intercept_ = intercept[0] if estimator.fit_intercept else 0.0
    else:
        estimator.dual_coef_ = dual.T
        estimator.intercept_ = (
            intercept if estimator.fit_intercept else xp.zeros_like(intercept)
        )
    estimator._coef = None
    estimator._n_refine_passes = 0
    estimator._refined = False
    return estimator


def loo_scores(features, sums, y, sample_weight, fit_intercept, alphas):
    """Negative weighted mean squared leave-one-out error of each penalty,
    from one eigendecomposition and one more pass over the rows (the NumPy
    path's ``_ridge_solve.cv_errors``; :mod:`sklearn_dof._loo`)."""
    xp, device = features.xp, features.device
    f64 = xp.float64
    w = None if sample_weight is None else xp.astype(sample_weight, f64)
    n = features.X.shape[0]
    total_w = n if w is None else float(xp.sum(w))
    spectrum = ridge_spectrum(
        sums.gram,
        sums.rhs,
        xp.asarray(alphas, dtype=f64, device=device),
        offset=sums.phi_mean,
        y_offset=sums.y_mean,
        total_weight=total_w if fit_intercept else None,
        xp=xp,
    )
    totals = xp.zeros((spectrum.shrinks.shape[1],), dtype=f64, device=device)
    y = xp.astype(y, f64)
    for rows, Phi in features.blocks():
        w_b = None if w is None else w[rows]
        residuals = loo_residuals(Phi, y[rows, ...], spectrum, w_b, xp=xp)
        totals = totals + squared_sums(residuals, w_b, xp=xp)
    return -to_host(totals) / (n * y.shape[1])


def predict(estimator, X, xp):
    """``K(X, I) dual_coef_^T + intercept_`` in the namespace of ``X``."""
    nystroem = estimator.nystroem_
    W = estimator.dual_coef_
    W = W[:, None] if W.ndim == 1 else W.T
    out = kernel_product(nystroem, X, nystroem.components_, W, xp)
    out = out + estimator.intercept_
    return out[:, 0] if estimator.dual_coef_.ndim == 1 else out


def move_to_data(y, sample_weight, xp, device):
    """``y`` and ``sample_weight`` in the namespace and on the device of the
    data (lists and NumPy arrays included)."""
    moved = []
    for a in (y, sample_weight):
        if (
            a is not None
            and not is_array_api_array(a)
            and not isinstance(a, np.ndarray)
        ):
            a = np.asarray(a)
        moved.append(None if a is None else move_to(a, xp=xp, device=device))
    return tuple(moved)


def numeric_response(y, xp, device, n_samples):
    """Numeric targets as a float64 ``(n, k)`` array of the namespace, else
    None (no targets, class labels): what an automatic rank certifies on."""
    if y is None:
        return None
    try:
        y = xp.asarray(y, device=device)
    except (TypeError, ValueError):
        return None
    if (
        not xp.isdtype(y.dtype, ("real floating", "integral"))
        or y.shape[0] != n_samples
    ):
        return None
    return xp.astype(xp.reshape(y, (n_samples, -1)), xp.float64)


def validate(estimator, X, xp, y=None, reset=True, **kwargs):
    """``validate_data`` in the namespace: float64 or float32 arrays."""
    from sklearn.utils.validation import validate_data

    dtype = [xp.float64, xp.float32]
    if y is None:
        return validate_data(estimator, X, dtype=dtype, reset=reset, **kwargs)
    return validate_data(estimator, X, y, dtype=dtype, reset=reset, **kwargs)


def check_same_kind(estimator, X, attribute, method):
    """A model fitted on one kind of array transforms and predicts the same
    kind: scikit-learn's :func:`check_same_namespace` under dispatch, and
    without it a clear error for a model fitted on array-API arrays."""
    if get_config()["array_api_dispatch"]:
        check_same_namespace(
            X,
            estimator,
            attribute=attribute,
            method=f"{type(estimator).__name__}.{method}()",
        )
    elif is_array_api_array(getattr(estimator, attribute)):
        raise TypeError(
            f"This {type(estimator).__name__} was fitted on array-API arrays "
            f"under array_api_dispatch and is called on "
            f"{type(X).__module__}.{type(X).__name__} without it: predict "
            "under the same setting (sklearn.config_context(array_api_dispatch"
            "=True)) on the same kind of array."
        )
