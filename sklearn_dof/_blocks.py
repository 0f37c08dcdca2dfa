"""Sums over row blocks: the training features without the n x p matrix.

After the landmarks are chosen, every quantity a fit needs is a sum over
the training rows of something computed from one row's features,
``phi(x_i) = K(x_i, I) K(I, I)^{+1/2}``: the Gram matrix ``Phi^T S Phi`` and
``Phi^T S y`` of ridge regression, the gradient and Hessian of a Newton
step, the per-point leverage scores.  :class:`FeatureBlocks` evaluates the
features block of rows by block of rows and reduces each block at once, so
a fit holds ``O(p^2 + b p)`` memory for blocks of ``b`` rows, never the
``n x p`` feature matrix; a caller that makes several passes (Newton steps,
leave-one-out) may ask to keep it when it fits the memory budget, so that
later passes evaluate no kernel.

The block size follows scikit-learn's ``working_memory`` setting
(:func:`sklearn.set_config`, :func:`sklearn.config_context`), the budget of
scikit-learn's own chunked computations such as
:func:`sklearn.metrics.pairwise_distances_chunked`.

The per-block statistics are plain functions of a block of features and the
matching rows of the other arrays; :meth:`FeatureBlocks.reduce` adds them up
and :meth:`FeatureBlocks.map` stacks them.  Those two methods are the only
place where the rows are iterated, so running them on another executor
changes nothing else.
"""

import numpy as np
from sklearn import get_config
from sklearn.utils import gen_batches

from . import _blas, _parallel, _tiles
from ._kernels import kernel_block
from ._tiles import mirror_lower

# A block of rows holds the kernel block, its features and one temporary of
# the same size (the squared distances of the RBF kernel, say).
BUFFERS_PER_ROW = 3
# Blocks past about a thousand rows gain nothing more from the BLAS (the
# p x p sums are amortised), while every fresh block costs pages the
# operating system must zero, as much memory traffic as writing the block.
# Below 32 MiB per array (glibc's largest mmap threshold) a freed block is
# reused by the allocator instead: blocks take at most 31 MiB per buffer of
# a larger budget, or a thousand rows if that is more.
_BLOCK_CAP_MIB = 31 * BUFFERS_PER_ROW
_BLOCK_ROWS = 1024


def row_batch_size(n_samples, n_columns, itemsize=8, working_memory=None):
    """Rows per block so that a block's buffers fit ``working_memory`` MiB.

    A large budget is not filled: a block's arrays stop at 31 MiB each or
    1024 rows, whichever is more rows.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_columns : int
        Width ``p`` of a block.
    itemsize : int, default=8
        Bytes per entry.
    working_memory : float, default=None
        Budget in MiB; None reads ``sklearn.get_config()["working_memory"]``.

    Returns
    -------
    batch_size : int
        At least 1 and at most ``n_samples``.
    """
    if working_memory is None:
        working_memory = get_config()["working_memory"]
    row_bytes = BUFFERS_PER_ROW * max(n_columns, 1) * itemsize
    budget_rows = int(working_memory * 2**20 // row_bytes)
    capped_rows = int(_BLOCK_CAP_MIB * 2**20 // row_bytes)
    rows = min(budget_rows, max(capped_rows, _BLOCK_ROWS))
    return max(1, min(rows, n_samples))


class _GramTerm:
    """``B^T B`` of a block ``B``, summed by :func:`add_terms` into a
    :class:`_GramSum`."""

    __slots__ = ("block",)

    def __init__(self, block):
        self.block = block

    def dense(self):
        """``B^T B`` in float64, exactly symmetric (numpy's syrk mirrors it)."""
        return _tiles.gram(self.block)


class _GramSum:
    """A running sum of :class:`_GramTerm`.

    numpy's ``B.T @ B`` is one syrk, half the flops of a general product,
    but into a fresh ``p x p`` array per block, which the sum then reads
    again; above 32 MiB (``p > 2048`` in float64) the allocator also hands
    each back to the operating system, which must zero fresh pages for the
    next.  So numpy's products go to one scratch array, reused.  On a single
    BLAS thread (every worker of a parallel pass, or a serial fit), float64
    blocks are added into the sum in place by scipy's syrk instead
    (:func:`_blas.syrk_lower_add`; lower triangle only, mirrored once at the
    end): no scratch array, so a worker holds one ``p x p`` array, not two,
    and no second pass over it.  On more BLAS threads that would put a
    second OpenBLAS thread pool beside numpy's, alternating with it in the
    loop, and the two fight for the cores (doc/architecture.rst,
    measurements).
    """

    __slots__ = ("total", "scratch", "lower_only", "in_place")

    def __init__(self):
        self.total = self.scratch = None
        self.lower_only = self.in_place = False

    def add(self, term):
        B = term.block
        p = B.shape[1]
        if self.total is None:
            in_place = B.dtype == np.float64 and _in_place_syrk()
            # Above the tile order numpy's syrk can crash (see _tiles): the
            # general route sums the lower triangle by tiles instead.
            self.lower_only = in_place or p > _tiles.TILE_ORDER
            if not self.lower_only:
                self.total = term.dense()
                return self
            self.total = np.zeros((p, p), order="F")
            self.in_place = in_place
        if self.lower_only and self.in_place:
            # One BLAS thread: OpenBLAS's single-threaded syrk, which did
            # not crash at any order measured.
            _blas.syrk_lower_add(self.total, B)
            return self
        if self.scratch is None or self.scratch.dtype != B.dtype:
            width = p if not self.lower_only else _tiles.UPDATE_COLUMNS
            self.scratch = np.empty((p, width), dtype=B.dtype)
        # float32 blocks: summed in float32 within the block (the speed the
        # user asked for), in float64 across blocks.
        if self.lower_only:
            _tiles.add_lower_gram(
                self.total, B, self.scratch, tile=_tiles.UPDATE_COLUMNS
            )
        else:
            self.total += np.matmul(B.T, B, out=self.scratch)
        return self


def materialize(term):
    """``term`` with any :class:`_GramTerm` as its array: what an executor
    ships instead of the block (see ``_dask``)."""
    if isinstance(term, tuple):
        return tuple(materialize(t) for t in term)
    return term.dense() if isinstance(term, _GramTerm) else term


def gram_total(total):
    """The array of a reduced Gram matrix, however it was summed."""
    if not isinstance(total, _GramSum):
        return total
    if total.lower_only:
        return mirror_lower(total.total)
    return total.total


def one_blas_thread():
    """Whether every BLAS loaded in the process runs a single thread, as in
    the workers of a parallel pass (False when none is recognised: the
    general route then)."""
    return _parallel.blas_threads() == 1


def _in_place_syrk():
    """Whether float64 Gram sums are updated in place by scipy's syrk: every
    BLAS loaded in the process runs a single thread, as in the workers of a
    parallel pass (False when none is recognised: the general route then),
    and, in a worker, the call releases the GIL (scipy's Python wrappers
    do not: the workers would run one at a time)."""
    return one_blas_thread() and (_blas.releases_gil() or not _parallel.in_worker())


def _merge(total, other):
    """``total + other`` for two partial results of :func:`add_terms` (the
    workers' sums of a parallel pass), in place in ``total``."""
    if other is None:
        return total
    if total is None:
        return other
    if isinstance(total, tuple):
        return tuple(_merge(a, b) for a, b in zip(total, other, strict=True))
    if isinstance(total, _GramSum):
        if total.lower_only == other.lower_only:
            total.total += other.total
            return total
        return gram_total(total) + gram_total(other)
    return add_terms(total, other)


def add_terms(total, term):
    """``total + term`` for arrays, numbers, :class:`_GramTerm`, or tuples.

    Arrays are added in place after a first copy (a statistic may return a
    view of its block): a ``p x p`` temporary per block would cost as much
    memory traffic as a tenth of the block's own product.
    """
    if isinstance(term, tuple):
        if total is None:
            total = (None,) * len(term)
        return tuple(add_terms(a, b) for a, b in zip(total, term, strict=True))
    if isinstance(term, _GramTerm):
        return (_GramSum() if total is None else total).add(term)
    if total is None:
        return term.copy() if isinstance(term, np.ndarray) else term
    if isinstance(total, np.ndarray) and np.can_cast(
        np.result_type(total, term), total.dtype
    ):
        total += term
        return total
    return total + term


def _threads_and_batch(
    n_samples, n_components, itemsize, working_memory, accumulator=True
):
    """Worker threads and rows per block of a pass over ``n_samples`` rows.

    Each worker holds a block's buffers and (``accumulator``) its ``p x p``
    float64 sum, and a second one for the product it adds unless float64
    sums are updated in place (see :class:`_GramSum`).  The
    workers are as many as :func:`_parallel.n_threads` allows and the budget
    holds with blocks of at least 256 rows; the blocks are as large as the
    rest of the budget allows (see :func:`row_batch_size`), in a number
    that is a multiple of the workers.  One thread: the blocks of
    :func:`row_batch_size`.
    """
    threads = _parallel.n_threads()
    if threads > 1:
        budget = working_memory * 2**20
        accumulator = (
            _accumulators(itemsize) * 8 * n_components**2 if accumulator else 0
        )
        row_bytes = BUFFERS_PER_ROW * max(n_components, 1) * itemsize
        smallest = accumulator + row_bytes * min(n_samples, 256)
        threads = max(1, min(threads, int(budget // smallest)))
    if threads == 1:
        return 1, row_batch_size(n_samples, n_components, itemsize, working_memory)
    share = (working_memory * 2**20 / threads - accumulator) / 2**20
    rows = row_batch_size(n_samples, n_components, itemsize, share)
    return threads, _parallel.balanced_batch_size(n_samples, rows, threads)


def _accumulators(itemsize):
    """``p x p`` float64 arrays a worker of a parallel Gram pass holds: its
    sum, and the product it adds unless syrk adds float64 blocks in place
    (see :class:`_GramSum`)."""
    return 1 if itemsize == 8 and _blas.releases_gil() else 2


def for_row_blocks(function, n_samples, n_columns, itemsize=8, max_block_bytes=None):
    """``function(slices)`` for each worker's group of row blocks, in parallel.

    For passes that write per-row results (columns of a factor, quadratic
    forms) into rows of their own: blocks of ``n_columns`` wide buffers
    within the memory budget, one group per worker; the results of
    ``function`` in the order of the groups.  ``max_block_bytes`` caps a
    block's buffer below the budget's share, for passes whose temporaries
    are best reused while they are still in cache.
    """
    threads, batch_size = _threads_and_batch(
        n_samples, n_columns, itemsize, get_config()["working_memory"], False
    )
    if max_block_bytes is not None:
        rows = max(1, int(max_block_bytes // (max(n_columns, 1) * itemsize)))
        if rows < batch_size:
            batch_size = _parallel.balanced_batch_size(n_samples, rows, threads)
    slices = list(gen_batches(n_samples, batch_size))
    return _parallel.run(function, _parallel.group_slices(slices, threads), threads)


# Rows up to which kernel_product evaluates one block on the calling thread.
_SMALL_PRODUCT_ROWS = 256


def kernel_product(X, landmarks, kernel, params, W, dtype=np.float64, upper=False):
    """``K(X, landmarks) W`` (``W`` of shape (p,) or (p, k)) by blocks of
    rows, one group per worker thread; ``upper``: ``W`` is upper
    triangular (``p x p``), multiplied by :func:`_tiles.times_upper`.

    What ``predict`` and ``transform`` compute: no ``n x p`` kernel block is
    ever held (each worker's blocks stay within the memory budget and are
    reused), and the first touch of the output is spread over the workers.
    """
    n_samples = X.shape[0]
    if n_samples <= _SMALL_PRODUCT_ROWS:
        # Single rows and small batches: no pass machinery (latency).
        K = kernel_block(X, landmarks, kernel, params, n_jobs=1)
        return K.astype(dtype, copy=False) @ W
    out = np.empty((n_samples, *W.shape[1:]), dtype=dtype)

    def work(slices):
        for rows in slices:
            K = kernel_block(X[rows], landmarks, kernel, params).astype(
                dtype, copy=False
            )
            if upper:
                _tiles.times_upper(K, W, out=out[rows])
            else:
                np.matmul(K, W, out=out[rows])

    width = landmarks.shape[0] if kernel != "precomputed" else len(landmarks)
    for_row_blocks(work, n_samples, width, np.dtype(dtype).itemsize)
    return out


def stream_rows(feature_map):
    """Rows per chunk at which ``feature_map`` may be streamed
    (its ``stream_rows()``), or None."""
    rows = getattr(feature_map, "stream_rows", None)
    return None if rows is None else rows()


def streamed(statistic, feature_map, chunk, X, *row_arrays):
    """``sum_c statistic(feature_map(X[c]), *(a[c] for a in row_arrays))``
    over chunks ``c`` of ``chunk`` rows: the features of each chunk are
    consumed while they are in cache (``FeatureBlocks.reduce(stream=True)``)."""
    total = None
    for rows in gen_batches(X.shape[0], chunk):
        term = statistic(feature_map(X[rows]), *(a[rows] for a in row_arrays))
        total = add_terms(total, term)
    return total


def streamed_map(function, feature_map, chunk, X, *row_arrays):
    """Row-wise ``function(feature_map(X[c]), ...)`` over chunks ``c`` of
    ``chunk`` rows, stacked (see :func:`streamed`)."""
    parts = [
        function(feature_map(X[rows]), *(a[rows] for a in row_arrays))
        for rows in gen_batches(X.shape[0], chunk)
    ]
    return stack_rows(parts)


def stack_rows(parts):
    """Row-wise results (arrays or tuples of them) stacked."""
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))
    return np.concatenate(parts)


class FeatureBlocks:
    """The training features ``Phi`` (n x p), as blocks of rows.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Training rows.
    feature_map : callable
        ``feature_map(X_block) -> Phi_block`` of shape (b, n_components).
    n_components : int
        Number of features ``p``.
    dtype : dtype, default=np.float64
        Dtype of the features.
    working_memory : float, default=None
        Budget in MiB of the blocks and of the cache; None reads
        ``sklearn.get_config()["working_memory"]``.
    cache : bool or int, default=False
        Keep the features after the first pass if they fit the budget (an
        int: that many bytes instead of ``working_memory``): for callers
        that make several passes (Newton steps, cross-validation).
    rotation : ndarray of shape (p, p), default=None
        Maps coefficients found on the blocks to the transformer's basis
        (None: they are in it already).
    basis : LandmarkBasis, default=None
        None for features proper; ``N`` for kernel blocks ``K(x, I)`` whose
        features are ``K(x, I) N``.
    cholesky : ndarray of shape (p, p), default=None
        ``R`` when the features are ``K(x, I) R^{-1}`` for a Cholesky factor
        of the (shifted) landmark block: coefficients ``W`` found on them
        are the landmark weights ``R^{-1} W``.
    factor : object, default=None
        Gives the kernel-basis sums from the rows' partial Cholesky factor
        (``_nystroem._LandmarkFactor``).
    start : object, default=None
        A model fitted on these features by the rule that chose their rank
        (a certified logistic rank's ``NewtonResult``), where a solver on
        them may start.

    Attributes
    ----------
    slices : list of slice
        The row blocks.
    cached : bool
        Whether the features are kept, so that each pass after the first
        costs no kernel evaluation.
    """

    # Blocks computed on the fly are temporaries a statistic may overwrite
    # (see owns_blocks); an executor whose blocks are shared says False.
    _writable_blocks = True

    def __init__(
        self,
        X,
        feature_map,
        n_components,
        dtype=np.float64,
        working_memory=None,
        cache=False,
        *,
        rotation=None,
        basis=None,
        cholesky=None,
        factor=None,
        start=None,
    ):
        self._set_basis(rotation, basis, cholesky, factor, start)
        self.X = X
        self.feature_map = feature_map
        self.n_components = n_components
        self.n_samples = X.shape[0]
        itemsize = np.dtype(dtype).itemsize
        if working_memory is None:
            working_memory = get_config()["working_memory"]
        self.n_threads, batch_size = _threads_and_batch(
            self.n_samples, n_components, itemsize, working_memory
        )
        self.slices = list(gen_batches(self.n_samples, batch_size))
        budget = working_memory * 2**20
        if cache is not True and cache is not False:
            budget = max(budget, cache)
        self.cached = bool(cache) and self.n_samples * n_components * itemsize <= budget
        self._cache = None

    def _set_basis(self, rotation, basis, cholesky, factor, start=None):
        self.rotation = rotation
        self.basis = basis
        self.cholesky = cholesky
        self.factor = factor
        self.start = start

    @property
    def owns_blocks(self):
        """Whether the blocks a statistic receives are its to overwrite."""
        return self._writable_blocks and not self.cached

    @classmethod
    def from_array(cls, Phi, working_memory=None, **basis):
        """Blocks of features that are already computed (no kernel at all):
        views of ``Phi``, which no statistic overwrites (``owns_blocks`` is
        False); ``basis``: ``rotation``, ``basis``, ``cholesky``, ``factor``
        and ``start``, as for the constructor."""
        Phi = np.asarray(Phi)
        blocks = cls(Phi, None, Phi.shape[1], Phi.dtype, working_memory, **basis)
        blocks._cache = [Phi[sl] for sl in blocks.slices]
        blocks.cached = True
        return blocks

    def _block(self, b):
        """Features of block ``b``, kept when the blocks are cached."""
        if self._cache is not None and self._cache[b] is not None:
            return self._cache[b]
        Phi_b = self.feature_map(self.X[self.slices[b]])
        if self.cached:
            # Each worker fills its own entries of a list set up before
            # the pass.
            self._cache[b] = Phi_b
        return Phi_b

    def _pass(self, work):
        """``work(blocks)`` for each worker's group of block numbers, in
        parallel; the results in the order of the groups."""
        if self.cached and self._cache is None:
            self._cache = [None] * len(self.slices)
        sizes = [sl.stop - sl.start for sl in self.slices]
        groups = _parallel.group_blocks(sizes, self.n_threads)
        return _parallel.run(work, groups, self.n_threads)

    def _stream_rows(self):
        """Rows per streamed chunk, or None where blocks are not streamed."""
        if self.cached:
            return None
        return stream_rows(self.feature_map)

    def reduce(self, statistic, *row_arrays, stream=False):
        """``sum_b statistic(Phi_b, *(a[b] for a in row_arrays))``.

        ``statistic`` returns an array, a number or a tuple of them.  Each
        worker sums its own blocks; the workers' sums are added in a fixed
        order (see :mod:`sklearn_dof._parallel`).

        ``stream``: for a statistic that costs about as much per row on a
        few rows as on a block (matrix-vector products, not a Gram matrix),
        features computed on the fly are evaluated and consumed in chunks
        of rows that stay in a core's cache (``feature_map.stream_rows``),
        never written to memory as a block: a pass over kernel blocks is
        bound by that memory traffic, not by its flops.  Blocks that are
        cached, or a feature map without ``stream_rows``, are not streamed.
        """
        chunk = self._stream_rows() if stream else None

        def work(blocks):
            total = None
            for b in blocks:
                sl = self.slices[b]
                arrays = [a[sl] for a in row_arrays]
                if chunk is None:
                    term = statistic(self._block(b), *arrays)
                else:
                    X_b = self.X[sl]
                    term = streamed(statistic, self.feature_map, chunk, X_b, *arrays)
                total = add_terms(total, term)
            return total

        total = None
        for part in self._pass(work):
            total = _merge(total, part)
        return total

    def map(self, function, *row_arrays, stream=False):
        """Row-wise results ``function(Phi_b, ...)`` stacked over the blocks
        (``stream``: as in :meth:`reduce`)."""
        chunk = self._stream_rows() if stream else None

        def work(blocks):
            parts = []
            for b in blocks:
                sl = self.slices[b]
                arrays = [a[sl] for a in row_arrays]
                if chunk is None:
                    parts.append(function(self._block(b), *arrays))
                else:
                    X_b = self.X[sl]
                    parts.append(
                        streamed_map(function, self.feature_map, chunk, X_b, *arrays)
                    )
            return parts

        return stack_rows([part for group in self._pass(work) for part in group])

    def first_block(self):
        """Features of the first block."""
        if self._cache is not None and self._cache[0] is not None:
            return self._cache[0]
        return self.feature_map(self.X[self.slices[0]])

    def pilot(self, n_rows=1024):
        """Features of the first ``n_rows`` rows: a pilot for shifts."""
        if self._cache is not None and self._cache[0] is not None:
            return self._cache[0][:n_rows]
        if self.feature_map is None:
            return self.first_block()[:n_rows]
        return self.feature_map(self.X[:n_rows])

    def toarray(self):
        """All the features as one (n, p) array."""
        return self.map(lambda Phi_b: Phi_b)


def _weighted_moments(
    Phi_b, y_b, sw_b, phi_shift, y_shift, overwrite, unit, with_gram=True
):
    """Moments of one block around fixed shifts.

    ``overwrite``: ``Phi_b`` is a temporary that may be shifted in place;
    ``unit``: every weight is one (no scaling pass); ``with_gram``: False
    for the first moments only (0.0 in the Gram matrix's place).

    Shifting by a pilot mean before summing keeps the centred Gram matrix
    accurate: the centring correction ``u u^T / S`` is then of the order of
    the rounding it corrects, not of the Gram matrix itself.
    """
    # The sqrt-weighted block times its own transpose: one syrk.
    dtype = Phi_b.dtype
    root_w = np.sqrt(sw_b).astype(dtype, copy=False)
    shift = phi_shift.astype(dtype, copy=False)
    if overwrite:
        scaled = np.subtract(Phi_b, shift, out=Phi_b)
    else:
        scaled = np.subtract(Phi_b, shift)
    y_scaled = y_b - y_shift
    if not unit:
        scaled *= root_w[:, None]
        y_scaled = y_scaled * root_w[:, None]
    return (
        _GramTerm(scaled) if with_gram else 0.0,
        (scaled.T @ y_scaled.astype(dtype, copy=False)).astype(np.float64),
        (root_w @ scaled).astype(np.float64, copy=False),
        root_w.astype(np.float64) @ y_scaled,
        float(sw_b.sum()),
    )


def normal_equations(features, y, sample_weight, fit_intercept, with_gram=True):
    """Weighted, centred normal equations of least squares on ``features``.

    Parameters
    ----------
    features : FeatureBlocks
        The features ``Phi``.
    y : ndarray of shape (n, k)
        Targets.
    sample_weight : ndarray of shape (n,)
        Non-negative weights ``s``.
    fit_intercept : bool
        Centre ``Phi`` and ``y`` by their weighted means (scikit-learn's
        ``_preprocess_data``: the intercept is not penalised).
    with_gram : bool, default=True
        False: the first moments only, ``O(n p)`` instead of ``n p^2``
        (for iterative solvers, which apply the Gram matrix by passes).

    Returns
    -------
    gram : ndarray of shape (p, p) or None
        ``Phi_c^T S Phi_c`` for the centred features ``Phi_c`` (None
        without ``with_gram``).
    rhs : ndarray of shape (p, k)
        ``Phi_c^T S y_c``.
    phi_offset : ndarray of shape (p,)
        Weighted mean of the features (zeros without intercept).
    y_offset : ndarray of shape (k,)
        Weighted mean of the targets (zeros without intercept).
    """
    p, k = features.n_components, y.shape[1]
    if fit_intercept:
        # Any shift near the mean keeps the centring accurate: the mean of a
        # pilot of rows is close enough and costs one small block.
        pilot = features.pilot().astype(np.float64, copy=False)
        first = slice(0, pilot.shape[0])
        w = sample_weight[first]
        w_sum = w.sum()
        phi_shift = (w @ pilot) / w_sum if w_sum > 0 else pilot.mean(axis=0)
        y_shift = (w @ y[first]) / w_sum if w_sum > 0 else y[first].mean(axis=0)
    else:
        phi_shift, y_shift = np.zeros(p), np.zeros(k)
    overwrite = features.owns_blocks
    unit = bool(np.all(sample_weight == 1))
    gram, rhs, u, v, s = features.reduce(
        lambda Phi_b, y_b, sw_b: _weighted_moments(
            Phi_b, y_b, sw_b, phi_shift, y_shift, overwrite, unit, with_gram
        ),
        y,
        sample_weight,
        stream=not with_gram,
    )
    # Exactly symmetric: sums of syrk products.
    gram = gram_total(gram) if with_gram else None
    if not fit_intercept:
        return gram, rhs, phi_shift, y_shift
    if with_gram:
        gram -= np.outer(u, u) / s
    rhs -= np.outer(u, v) / s
    return gram, rhs, phi_shift + u / s, y_shift + v / s
