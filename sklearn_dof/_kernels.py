"""Kernel evaluation restricted to what the Nystroem method needs.

The methods of this package touch the n x n kernel matrix only through its
diagonal and through a few of its columns.  :class:`KernelColumns` wraps
the data and the kernel specification and serves exactly those two things,
so that no caller can accidentally form the full matrix.
"""

import numpy as np
from scipy import sparse
from sklearn.metrics.pairwise import (
    KERNEL_PARAMS,
    pairwise_kernels,
)
from sklearn.preprocessing import normalize

from . import _parallel
from ._kernel_objects import (
    check_kernel_object,
    is_kernel_object,
    kernel_object_block,
)
from ._tiles import mirror_lower
from ._validation import (
    check_kernel_params,
    check_kernel_values,
    checked_kernel,
)

# Kernels whose diagonal is identically one: k(x, x) = exp(-gamma * 0).
_UNIT_DIAGONAL = frozenset({"rbf", "laplacian"})


def has_unit_diagonal(kernel):
    """Whether ``k(x, x) = 1`` for every ``x`` (a kernel name; kernel
    objects give their diagonal by ``diag``)."""
    return isinstance(kernel, str) and kernel in _UNIT_DIAGONAL


def get_kernel_params(kernel, gamma=None, coef0=None, degree=None, kernel_params=None):
    """Keyword arguments for :func:`sklearn.metrics.pairwise_kernels`.

    Same contract as :class:`sklearn.kernel_approximation.Nystroem`: named
    parameters are passed only to the built-in kernels that take them, and
    are refused for a callable or precomputed kernel, where they would be
    silently ignored.
    """
    params = dict(kernel_params) if kernel_params is not None else {}
    named = {"gamma": gamma, "coef0": coef0, "degree": degree}
    check_kernel_params(kernel, params, named)
    if is_kernel_object(kernel) and params:
        raise ValueError(
            f"kernel_params {sorted(params)} cannot be used with the kernel "
            f"object {kernel!r}: set its hyperparameters on the object."
        )
    if callable(kernel) or kernel == "precomputed":
        given = [name for name, value in named.items() if value is not None]
        if given:
            raise ValueError(
                f"Parameters {given} cannot be used with a callable or "
                "precomputed kernel; pass them through 'kernel_params'."
            )
        return params
    for name in KERNEL_PARAMS[kernel]:
        if named.get(name) is not None:
            params[name] = named[name]
    return params


# Entries per chunk of the elementwise part of the RBF kernel (2 MiB in
# float64): a chunk stays in a core's L2 or L3 share through the clip and the
# exponential, and its three numpy calls are long enough that their Python
# overhead, serialised by the GIL, stays small beside them on many threads.
# Smaller chunks lengthened each pass over the kernel, and scaled no
# further than 4 to 8 threads (doc/design/scaling.rst, "The kernel's
# chunks").  Streamed passes (``FeatureBlocks.reduce``
# with ``stream=True``) consume the kernel in chunks of this size too.
CHUNK_ENTRIES = 2**18
# Rows per worker below which a kernel block is evaluated by one thread.
_MIN_PARALLEL_ROWS = 256
# Rows per block of a symmetric block's lower triangle (:func:`_lower_triangle`):
# a block also evaluates the corner above the diagonal it crosses, half its
# rows per row, a few percent of the triangle at the orders of an exact fit.
TRIANGLE_ROWS = 512


def rbf_columns(Y, gamma):
    """The fixed half of :func:`_rbf_block`'s GEMM for columns ``Y``:
    ``[2 gamma y, -gamma |y|^2, -gamma]^T``, shape (d + 2, len(Y)), or None
    if the squared norms overflow.  Kept by callers that evaluate many small
    blocks against the same columns (see ``_nystroem._TriangularFeatures``),
    where rebuilding it would cost as much as a block."""
    y_sq = np.einsum("ij,ij->i", Y, Y)
    if not np.isfinite(y_sq).all():
        return None
    ones_y = np.ones((Y.shape[0], 1))
    Y_aug = np.hstack([2.0 * gamma * Y, -gamma * y_sq[:, None], -gamma * ones_y])
    return np.ascontiguousarray(Y_aug.T)


def _rbf_block(X, Y, gamma, out=None, columns=None):
    """``exp(-gamma ||x - y||^2)`` for dense float64 ``X`` and ``Y``.

    The exponent comes out of one GEMM on augmented rows,
    ``[x, 1, |x|^2] . [2 gamma y, -gamma |y|^2, -gamma]``, the expansion
    scikit-learn's ``euclidean_distances`` uses (same rounding level), without its
    separate passes over the block; the clip and the exponential then run on
    cache-sized chunks of rows: each chunk's product, clip and exponential
    run while it is in the core's cache, so the block is written to memory
    once (a product of the whole block first, then the elementwise passes,
    moved it through memory three times, and the kernel is bound by memory
    traffic, not by flops).
    """
    x_sq = np.einsum("ij,ij->i", X, X)
    Y_aug_t = rbf_columns(Y, gamma) if columns is None else columns
    if Y_aug_t is None or not np.isfinite(x_sq).all():
        return None  # squared norms overflow: leave it to scikit-learn
    X_aug = np.hstack([X, np.ones((X.shape[0], 1)), x_sq[:, None]])
    block = np.empty((X.shape[0], Y.shape[0])) if out is None else out
    rows = max(1, CHUNK_ENTRIES // max(Y.shape[0], 1))
    for lo in range(0, block.shape[0], rows):
        chunk = block[lo : lo + rows]
        np.matmul(X_aug[lo : lo + rows], Y_aug_t, out=chunk)
        # Rounding can leave a tiny positive exponent for nearby points.
        np.minimum(chunk, 0.0, out=chunk)
        np.exp(chunk, out=chunk)
    return block


def _fused_rbf(X, Y, kernel):
    """Whether ``K(X, Y)`` takes :func:`_rbf_block`."""
    return (
        kernel == "rbf"
        and not sparse.issparse(X)
        and not sparse.issparse(Y)
        and X.dtype == np.float64
        and Y.dtype == np.float64
    )


def _rbf_gamma(params, n_features):
    gamma = params.get("gamma")
    return 1.0 / n_features if gamma is None else float(gamma)


def kernel_columns(Y, kernel, params):
    """What :func:`kernel_block` may reuse of fixed columns ``Y`` across
    calls (``columns=``): :func:`rbf_columns` for the fused RBF path, else
    None."""
    if not _fused_rbf(Y, Y, kernel):
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        return rbf_columns(Y, _rbf_gamma(params, Y.shape[1]))


def _serial_kernel_block(X, Y, kernel, params, out=None, columns=None):
    """:func:`kernel_block` on the calling thread, into ``out`` if given."""
    if is_kernel_object(kernel) and not (sparse.issparse(X) or sparse.issparse(Y)):
        return kernel_object_block(X, Y, kernel, out)
    if _fused_rbf(X, Y, kernel):
        gamma = _rbf_gamma(params, X.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            block = _rbf_block(X, Y, gamma, out, columns)
        if block is not None:
            return block
    block = pairwise_kernels(
        X, Y, metric=checked_kernel(kernel), filter_params=True, **params
    )
    if out is None:
        return block
    out[...] = block
    return out


def _symmetric_block(Y, kernel, params):
    """``K(Y, Y)`` by :func:`_lower_triangle` (every thread of the pool)
    for the fused RBF path and kernel objects, or None where neither
    applies.  Exactly symmetric (the lower triangle mirrored) with its
    diagonal exact, as :func:`~sklearn.metrics.pairwise.rbf_kernel` or the
    kernel object's own ``K(Y)`` of ``Y`` alone has it; unchecked (the
    caller checks its values)."""
    if is_kernel_object(kernel) and not sparse.issparse(Y):
        block = mirror_lower(_lower_triangle(Y, kernel, params))
        np.fill_diagonal(block, kernel.diag(Y))
        return block
    if not _fused_rbf(Y, Y, kernel):
        return None
    block = mirror_lower(_lower_triangle(Y, kernel, params))
    np.fill_diagonal(block, 1.0)
    return block


def _block_threads(n_rows, n_jobs="context"):
    """Workers of a kernel block of ``n_rows`` rows: one per
    :data:`_MIN_PARALLEL_ROWS` rows, at most the pool's for ``n_jobs``."""
    threads = n_rows // _MIN_PARALLEL_ROWS
    if threads > 1:
        threads = min(threads, _parallel.n_threads(n_jobs))
    return threads


def _lower_triangle(Y, kernel, params):
    """``K(Y, Y)`` with its lower triangle evaluated (the strict upper one
    holds what it holds): by blocks of :data:`TRIANGLE_ROWS` rows, each
    reading the columns up to its last row, so about half the kernel
    evaluations of the whole block.  The blocks go to the pool's workers
    in contiguous runs of equal area (:func:`~sklearn_dof._parallel.group_blocks`),
    each written in place with the BLAS on one thread."""
    n = Y.shape[0]
    out = np.empty((n, n), dtype=Y.dtype if Y.dtype == np.float32 else np.float64)
    columns = kernel_columns(Y, kernel, params)
    # One centre for every block's distances (kernel_object_block).
    centre = Y.mean(axis=0) if is_kernel_object(kernel) and n else None
    blocks = [slice(a, min(a + TRIANGLE_ROWS, n)) for a in range(0, n, TRIANGLE_ROWS)]
    threads = _block_threads(n)
    areas = [rows.stop * (rows.stop - rows.start) for rows in blocks]
    runs = [
        [blocks[b] for b in run]
        for run in _parallel.group_blocks(areas, max(threads, 1))
    ]

    def work(run):
        for rows in run:
            block = out[rows, : rows.stop]
            if centre is not None:
                kernel_object_block(Y[rows], Y[: rows.stop], kernel, block, centre)
                continue
            part = None if columns is None else columns[:, : rows.stop]
            _serial_kernel_block(Y[rows], Y[: rows.stop], kernel, params, block, part)

    _parallel.run(work, runs, threads)
    return out


def kernel_block(X, Y, kernel, params, n_jobs="context", columns=None):
    """``K(X, Y)`` as a dense array: float32 for float32 ``X``, else float64.

    With ``kernel="precomputed"``, ``X`` holds kernel values and ``Y`` the
    indices of the columns wanted.  The RBF kernel on dense float64 rows
    takes a fused path (:func:`_rbf_block`), every other kernel
    :func:`sklearn.metrics.pairwise_kernels`.  Large blocks are split into
    one group of rows per worker of the pool of :mod:`sklearn_dof._parallel`
    (``n_jobs`` threads, by default the ``n_jobs`` of the estimator at work),
    each written in place into the result with the BLAS on one thread;
    inside a parallel pass the block is evaluated by its own worker.
    ``columns``: :func:`kernel_columns` of ``Y``, for callers that evaluate
    many blocks against the same ``Y``.
    """
    dtype = X.dtype if X.dtype == np.float32 else np.float64
    if kernel == "precomputed":
        block = X[:, np.asarray(Y, dtype=np.intp)]
        block = block.toarray() if sparse.issparse(block) else block
        return check_kernel_values(np.asarray(block, dtype=dtype), kernel)
    n = X.shape[0]
    threads = _block_threads(n, n_jobs)
    if threads <= 1:
        block = _serial_kernel_block(X, Y, kernel, params, columns=columns)
        return check_kernel_values(np.asarray(block, dtype=dtype), kernel)
    out = np.empty((n, Y.shape[0]), dtype=dtype)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    groups = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def work(rows):
        _serial_kernel_block(X[rows], Y, kernel, params, out[rows], columns)

    _parallel.run(work, groups, threads)
    return check_kernel_values(out, kernel)


class KernelColumns:
    """Access to the diagonal and to columns of a kernel matrix K(X, X).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Training data; with ``kernel="precomputed"``, the square Gram matrix.
    kernel : str or callable
        Any name of :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`,
        ``"precomputed"``, or a callable ``k(x, y, **params) -> float``.
    params : dict
        Keyword arguments of the kernel.
    n_jobs : int, default=None
        Parallel kernel evaluation (see :func:`kernel_block`).
    """

    def __init__(self, X, kernel, params, n_jobs=None):
        self.X = X
        self.kernel = checked_kernel(kernel)
        self.params = params
        self.n_jobs = n_jobs
        if is_kernel_object(kernel):
            if sparse.issparse(X):
                raise TypeError(
                    f"The kernel object {kernel!r} needs dense X (scikit-learn's "
                    "Gaussian-process kernels do not take sparse matrices); got "
                    "a sparse matrix. Pass X.toarray() or a kernel name."
                )
            check_kernel_object(kernel, X.shape[1])
        if kernel == "precomputed" and X.shape[0] != X.shape[1]:
            raise ValueError(
                "A precomputed kernel matrix passed to fit must be square; "
                f"got X of shape {X.shape}."
            )

    @property
    def n_samples(self):
        return self.X.shape[0]

    def row_subset(self, rows):
        """The kernel matrix of the training rows ``rows`` alone."""
        X = self.X[rows]
        if self.kernel == "precomputed":
            X = X[:, rows]
        return type(self)(X, self.kernel, self.params, self.n_jobs)

    @property
    def dtype(self):
        return self.X.dtype if self.X.dtype == np.float32 else np.float64

    def diagonal(self):
        """k(x_i, x_i) for every training point, in O(n d)."""
        X = self.X
        if is_kernel_object(self.kernel):
            diag = self.kernel.diag(X)
        elif self.kernel == "precomputed":
            diag = X.diagonal()
        elif has_unit_diagonal(self.kernel):
            diag = np.ones(X.shape[0])
        elif self.kernel == "cosine":
            # 1, except for rows that normalize() leaves alone (zero rows and
            # norms below 10 eps): exactly what pairwise_kernels computes.
            Xn = normalize(X)
            diag = Xn.multiply(Xn).sum(1).A1 if sparse.issparse(X) else (Xn**2).sum(1)
        elif self.kernel in ("linear", "polynomial", "poly", "sigmoid"):
            sq = X.multiply(X).sum(axis=1).A1 if sparse.issparse(X) else (X * X).sum(1)
            if self.kernel == "linear":
                diag = sq
            else:
                gamma = self.params.get("gamma")
                gamma = 1.0 / X.shape[1] if gamma is None else gamma
                coef0 = self.params.get("coef0", 1)
                inner = gamma * sq + coef0
                if self.kernel == "sigmoid":
                    diag = np.tanh(inner)
                else:
                    diag = inner ** self.params.get("degree", 3)
        else:
            # chi2, additive_chi2 and callables: one row at a time, O(n) calls.
            diag = np.array(
                [
                    pairwise_kernels(
                        X[i : i + 1],
                        metric=self.kernel,
                        filter_params=True,
                        **self.params,
                    )[0, 0]
                    for i in range(X.shape[0])
                ]
            )
        diag = np.asarray(diag, dtype=self.dtype).ravel()
        return check_kernel_values(diag, self.kernel)

    def columns(self, indices, rows=None):
        """The block K(X[rows], X[indices]), all rows by default."""
        indices = np.asarray(indices, dtype=np.intp)
        landmarks = indices if self.kernel == "precomputed" else self.X[indices]
        X = self.X if rows is None else self.X[rows]
        n_jobs = "context" if self.n_jobs is None else self.n_jobs
        return kernel_block(X, landmarks, self.kernel, self.params, n_jobs)

    def rows(self, indices):
        """The training rows ``X[indices]`` (landmark points)."""
        return self.X[indices]

    def landmark_gram(self, indices):
        """The p x p block K(X[indices], X[indices])."""
        indices = np.asarray(indices, dtype=np.intp)
        if self.kernel == "precomputed":
            block = self.X[indices][:, indices]
            block = block.toarray() if sparse.issparse(block) else block
        else:
            landmarks = self.X[indices]
            block = _symmetric_block(landmarks, self.kernel, self.params)
            if block is None:
                block = pairwise_kernels(
                    landmarks, metric=self.kernel, filter_params=True, **self.params
                )
        return check_kernel_values(np.asarray(block, dtype=self.dtype), self.kernel)
