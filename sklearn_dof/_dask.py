"""The Dask executor: fits and predictions on dask arrays chunked by rows.

Nothing here is a second implementation of the numerics.  The estimators
run the same code on a dask array as on a numpy array; what changes is
where the rows live, through three objects that the in-memory path also
uses, each swapped for its Dask counterpart when ``X`` is a dask array:

* :class:`DaskKernelColumns` (for :class:`~sklearn_dof._kernels.KernelColumns`)
  evaluates the kernel diagonal and kernel columns ``K(X, X_B)`` chunk by
  chunk on the workers; only the ``p`` landmark rows are gathered.
* :class:`DaskPartialCholesky` (for
  :class:`~sklearn_dof._sampling.PartialCholesky`) keeps the factor ``G``
  (``n x r``) as row chunks persisted on the workers; every sampling rule
  (uniform, greedy, randomly pivoted, leverage, given landmarks) runs
  unchanged on top of it, and the leverage bounds of the d.o.f. estimate
  are a reduction ``G^T G`` followed by per-chunk quadratic forms
  (:func:`quadratic_forms`).
* :class:`DaskFeatureBlocks` (for :class:`~sklearn_dof._blocks.FeatureBlocks`)
  overrides the two iteration primitives, ``reduce`` and ``map``, so that
  every statistic of the fits (the normal equations of ridge regression,
  the leave-one-out errors, the gradients and Hessians of the Newton
  steps) runs as one task per row chunk, and only ``p x p`` results travel
  back, summed by a tree.

Where things live: per-row matrices (``X``, kernel columns, ``G``, the
features ``Phi``) stay on the workers, ``O(chunk x (d + p))`` per task;
``p x p`` matrices and per-row *vectors* (targets, weights, the residual
diagonal and the leverage bounds of the samplers, the decision values of
a Newton step) are numpy arrays on the client, ``O(n)`` each, so that the
samplers and the Newton solver run the numpy code they run in memory, with
the same random draws.  Predictions (``transform``, ``predict``,
``predict_proba``, ...) map the fitted estimator's own numpy method over
the chunks (:func:`map_rows`) and return dask arrays.

Dask is imported lazily: :func:`is_dask_array` answers without importing
it, so the package works without Dask installed.
"""

import functools
import sys
import warnings

import numpy as np
from scipy import sparse
from sklearn import get_config
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_feature_names,
    _check_n_features,
    _check_y,
    check_consistent_length,
    check_is_fitted,
)

from . import _kernels, _linalg, _tiles
from ._blocks import (
    FeatureBlocks,
    add_terms,
    materialize,
    stack_rows,
    stream_rows,
    streamed,
    streamed_map,
)
from ._kernels import KernelColumns, has_unit_diagonal
from ._sampling import DEFAULT_RTOL, PartialCholesky
from ._validation import check_kernel_values

# Fraction of the cluster's total worker memory that persisted feature
# blocks (and kernel column blocks) may take; beyond it they are recomputed
# from X at every pass, as FeatureBlocks does beyond ``working_memory``.
PERSIST_FRACTION = 0.25

# Fan-in of the tree that sums the per-chunk statistics.
SPLIT_EVERY = 8

# The factor G is kept as a list of persisted column blocks (one per Schur
# update, one per greedy pivot); past this many they are merged into one.
_MAX_FACTOR_BLOCKS = 16


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array`` (without importing Dask)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


def _dask():
    try:
        import dask
        import dask.array
    except ImportError as exc:  # pragma: no cover - X was a dask array
        raise ImportError(
            "Dask arrays need dask: pip install 'sklearn-dof[distributed]'."
        ) from exc
    return dask


class _Boxed:
    """A value Dask must neither call nor traverse (a function, an array)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _unbox(value):
    return value.value if isinstance(value, _Boxed) else value


def _shared(value):
    """``value`` as one key of the task graph, whatever the number of tasks.

    A statistic is a closure over the fit's ``p x p`` state (and sometimes
    per-row vectors), a feature map holds the landmark rows: as one key
    they are shipped once to each worker, not embedded in every task.
    """
    return _dask().delayed(_Boxed(value), traverse=False, pure=False)


def _call(box, *args):
    # A statistic's terms are summed where its block lives: only p x p
    # results travel, never the block a Gram term still refers to.
    return materialize(_unbox(box)(*args))


def _call_streamed(box, feature_map, chunk, X_block, *row_blocks):
    return materialize(
        streamed(_unbox(box), _unbox(feature_map), chunk, X_block, *row_blocks)
    )


def _call_streamed_map(box, feature_map, chunk, X_block, *row_blocks):
    return streamed_map(_unbox(box), _unbox(feature_map), chunk, X_block, *row_blocks)


def _sum_terms(*terms):
    return functools.reduce(add_terms, terms)


def _tree_sum(terms, split_every=SPLIT_EVERY):
    """Sum of delayed terms by a tree of fan-in ``split_every``."""
    delayed = _dask().delayed
    while len(terms) > 1:
        terms = [
            delayed(_sum_terms, pure=False)(*terms[i : i + split_every])
            for i in range(0, len(terms), split_every)
        ]
    return terms[0]


def _compute(*collections):
    """``dask.compute``; per-row vectors ride in the graph by design.

    The row arrays of a pass (targets, weights, a Newton step's vectors:
    ``O(n)`` numbers) are sliced into the chunks' tasks, which makes the
    graph of a large ``n`` "large" to distributed's taste (its warning names
    ``X``-sized data, which never travels).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Sending large graph", category=UserWarning
        )
        return _dask().compute(*collections)


def _client():
    """The default distributed Client, or None (threaded scheduler)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def persist_budget(working_memory=None):
    """Bytes that persisted blocks may take on the executor.

    With a distributed Client, :data:`PERSIST_FRACTION` of the workers'
    total memory limit; otherwise (threaded scheduler, the blocks live in
    this process) scikit-learn's ``working_memory``, like
    :class:`~sklearn_dof._blocks.FeatureBlocks`.
    """
    if working_memory is None:
        working_memory = get_config()["working_memory"]
    local = working_memory * 2**20
    client = _client()
    if client is None:
        return local
    try:
        info = client.scheduler_info(n_workers=-1)  # all workers, not the first 5
    except TypeError:  # distributed < 2025.4
        info = client.scheduler_info()
    workers = info["workers"].values()
    limits = [w.get("memory_limit") or 0 for w in workers]
    if not limits or min(limits) == 0:  # no limit set: one budget per worker
        return local * max(len(limits), 1)
    return PERSIST_FRACTION * sum(limits)


def _row_slices(chunks):
    offsets = np.concatenate([[0], np.cumsum(chunks)]).astype(int)
    return [slice(a, b) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


# ----------------------------------------------------------------------------
# Validation: metadata now, values chunk by chunk when they are computed.


def _check_block(block, estimator_name):
    _assert_all_finite(block, input_name="X", estimator_name=estimator_name)
    return block


def check_dask_array(X, dtype=(np.float64, np.float32), estimator=None):
    """A dask array ready for the row-chunked code, checked lazily.

    Shape, dtype and chunking are checked on the metadata; the values
    (NaN, inf) chunk by chunk, when a pass computes them, so that checking
    costs no pass of its own.  Columns are rechunked into one chunk: a
    kernel block needs whole rows.
    """
    da = _dask().array
    name = type(estimator).__name__ if estimator is not None else None
    if sparse.issparse(X._meta):
        raise TypeError(
            "Dask arrays of sparse chunks are not supported; pass dense chunks "
            "(or a scipy.sparse matrix, which the in-memory path takes)."
        )
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {X.ndim}D dask array instead; reshape your "
            "data (chunked by rows)."
        )
    if any(np.isnan(s) for s in X.shape):
        raise ValueError(
            "The dask array has unknown chunk sizes (e.g. after boolean "
            "indexing); call X.compute_chunk_sizes() first."
        )
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"dtype='numeric' is not compatible with X.dtype={X.dtype}.")
    dtypes = [np.dtype(d) for d in np.atleast_1d(dtype)]
    if X.dtype not in dtypes:
        X = X.astype(dtypes[0])
    if X.shape[0] < 1:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of "
            f"1 is required{f' by {name}' if name else ''}."
        )
    if X.shape[1] < 1:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of "
            f"1 is required{f' by {name}' if name else ''}."
        )
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    return da.map_blocks(_check_block, X, name, dtype=X.dtype, meta=X._meta)


def validate_data(
    estimator,
    X,
    y="no_validation",
    *,
    reset=True,
    dtype=(np.float64, np.float32),
    multi_output=False,
    y_numeric=False,
    **ignored,
):
    """:func:`sklearn.utils.validation.validate_data` for a dask ``X``.

    Same arguments (``accept_sparse`` and the other ``check_array`` options
    are ignored); sets ``n_features_in_`` from the metadata.  ``y`` may be a
    numpy or a dask array; it is returned as numpy, a per-row vector the
    solvers hold on the client.
    """
    X = check_dask_array(X, dtype, estimator)
    _check_n_features(estimator, X, reset=reset)
    _check_feature_names(estimator, X, reset=reset)
    if isinstance(y, str) and y == "no_validation":
        return X
    if y is None:
        raise ValueError(
            f"This {type(estimator).__name__} estimator requires y to be passed, "
            "but the target y is None."
        )
    if is_dask_array(y):
        y = y.compute()
    y = _check_y(y, multi_output=multi_output, y_numeric=y_numeric, estimator=estimator)
    check_consistent_length(X, y)
    return X, y


# ----------------------------------------------------------------------------
# Prediction: the fitted estimator's numpy method, chunk by chunk.


def _call_method(X_block, box):
    estimator, method = _unbox(box)
    return getattr(estimator, method)(X_block)


def chunkwise(method):
    """Decorator of a row-wise method: on a dask array, run it per row chunk.

    ``X`` of any other type goes to the method itself; a dask array goes
    through :func:`map_rows`, which calls the same method on each chunk.
    """

    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        if is_dask_array(X):
            return map_rows(self, method.__name__, X)
        return method(self, X, *args, **kwargs)

    return wrapper


def map_rows(estimator, method, X):
    """``getattr(estimator, method)`` applied to each row chunk of ``X``.

    Returns a dask array chunked like ``X``'s rows: ``transform``,
    ``predict``, ``decision_function``, ``predict_proba`` ... of the fitted
    estimator, which validates each chunk as it does a numpy array.  The
    estimator is one key of the graph, shipped once to each worker.
    """
    check_is_fitted(estimator)
    X = check_dask_array(X, dtype=(X.dtype,) if X.dtype.kind in "biuf" else "f8")
    _check_n_features(estimator, X, reset=False)
    bound = getattr(estimator, method)
    try:
        probe = np.asarray(bound(np.zeros((1, X.shape[1]), dtype=X.dtype)))
    except Exception:  # a kernel undefined at zero: probe on a real row
        probe = np.asarray(bound(X[:1].compute()))
    box = _shared((estimator, method))
    if probe.ndim == 1:
        layout = {"drop_axis": 1, "chunks": (X.chunks[0],)}
    else:
        layout = {"chunks": (X.chunks[0],) + tuple((s,) for s in probe.shape[1:])}
    return X.map_blocks(_call_method, box, dtype=probe.dtype, meta=probe[:0], **layout)


# ----------------------------------------------------------------------------
# Landmark selection and the degrees of freedom.


class DaskKernelColumns(KernelColumns):
    """:class:`KernelColumns` of a dask array: chunks evaluated on the workers.

    The diagonal is computed chunk by chunk and returned as a numpy vector
    (no pass at all for kernels of unit diagonal); ``columns`` returns the
    ``n x b`` block ``K(X, X_B)`` as a dask array chunked like ``X``'s rows,
    persisted when it fits :func:`persist_budget`, so that a Schur update,
    which reads it twice, evaluates it once.  Landmark rows are gathered
    once (:meth:`rows`) and kept.
    """

    def __init__(self, X, kernel, params, n_jobs=None):
        super().__init__(X, kernel, params, n_jobs)
        self._kernel_spec = kernel
        self._rows = {}
        self._budget = persist_budget()

    @property
    def chunks(self):
        return self.X.chunks[0]

    def rows(self, indices):
        """``X[indices]`` as numpy, gathered once per index."""
        indices = np.asarray(indices, dtype=np.intp)
        missing = np.setdiff1d(indices, np.fromiter(self._rows, np.intp))
        if missing.size:
            fetched = self.X[missing].compute()
            self._rows.update(zip(missing.tolist(), fetched, strict=True))
        if indices.size == 0:
            return np.empty((0, self.X.shape[1]), dtype=self.X.dtype)
        return np.stack([self._rows[i] for i in indices.tolist()])

    def diagonal(self):
        if self.kernel == "precomputed":
            diag = _dask().array.diagonal(self.X).compute()
            diag = np.asarray(diag, dtype=self.dtype)
            return check_kernel_values(diag, "precomputed")
        if has_unit_diagonal(self.kernel):  # ones: no pass over X
            return super().diagonal()
        return self.X.map_blocks(
            _block_diagonal,
            self._kernel_spec,
            self.params,
            drop_axis=1,
            dtype=self.dtype,
            meta=np.empty(0, self.dtype),
        ).compute()

    def columns(self, indices):
        indices = np.asarray(indices, dtype=np.intp)
        if self.kernel == "precomputed":
            landmarks = indices
        else:  # gathered within the same graph: no round trip of their own
            landmarks = self.X[indices]
        block = kernel_block(self.X, landmarks, self.kernel, self.params)
        # A Schur update reads a block twice; a greedy pivot's column once.
        if indices.size > 1 and block.nbytes <= self._budget:
            block = block.persist()
        return block

    def landmark_gram(self, indices):
        indices = np.asarray(indices, dtype=np.intp)
        rows = self.rows(indices)
        if self.kernel == "precomputed":  # the rows' landmark columns
            rows = rows[:, indices]
        return KernelColumns(rows, self._kernel_spec, self.params).landmark_gram(
            np.arange(indices.size)
        )


def _block_diagonal(X_block, kernel, params):
    return KernelColumns(X_block, kernel, params).diagonal()


def kernel_block(X, landmarks, kernel, params):
    """``K(X, landmarks)`` of a dask ``X``, chunked like its rows.

    Each chunk is the in-memory :func:`_kernels.kernel_block`; with a precomputed
    kernel ``landmarks`` are column indices.
    """
    dtype = X.dtype if X.dtype == np.float32 else np.dtype(np.float64)
    width = len(landmarks)
    if is_dask_array(landmarks):  # rows of X still on the workers
        landmarks = landmarks.rechunk(-1).to_delayed().ravel()[0]
    function = functools.partial(_kernels.kernel_block, kernel=kernel, params=params)
    return map_chunks(X, function, width, dtype, landmarks)


def map_chunks(X, function, width, dtype, *args, keep_function=False):
    """``function(X_b, *args)`` (``b x width``) for every row chunk, lazily.

    ``function`` (a feature map, holding the ``p`` landmark rows) is one key
    of the graph, not a copy per task; ``args`` are numpy arrays or delayed
    objects, also shipped once.  With ``keep_function`` the function is
    persisted on the executor, so that later passes over the result do not
    ship it again.
    """
    dtype = np.dtype(dtype)
    if X.numblocks[1] != 1:  # whole rows per chunk
        X = X.rechunk({1: -1})
    args = [a if hasattr(a, "dask") else _shared(a) for a in args]
    box = _shared(function)
    if keep_function:
        box = box.persist()
    return X.map_blocks(
        _call_unboxed,
        box,
        *args,
        chunks=(X.chunks[0], (width,)) if width is not None else (X.chunks[0],),
        drop_axis=[] if width is not None else 1,
        dtype=dtype,
        meta=np.empty((0, 0) if width is not None else (0,), dtype),
    )


def _call_unboxed(X_block, box, *args):
    return _unbox(box)(X_block, *(_unbox(a) for a in args))


class DaskPartialCholesky(PartialCholesky):
    """:class:`PartialCholesky` whose factor ``G`` lives on the workers.

    ``G`` (``n x r``) is a list of column blocks, row-chunked like ``X`` and
    persisted; the residual diagonal is a numpy vector, updated from the
    squared norms of each new block's rows (an ``n``-vector per update).
    The Schur complement update of :meth:`add` takes the residual columns
    ``K(:, B) - G G_B^T`` as one dask array (the in-memory class computes
    them by blocks of rows); everything else is the in-memory class, the
    greedy, randomly pivoted and leverage rules included, which read the
    residual.  A greedy pivot costs one kernel column, i.e. one pass over
    ``X``: ``p`` pivots are ``p`` passes.
    """

    def __init__(self, columns, diagonal, chunks, rtol=DEFAULT_RTOL):
        super().__init__(columns, diagonal, rtol)
        self._chunks = tuple(chunks)
        self._blocks = []

    @property
    def factor(self):
        da = _dask().array
        if not self._blocks:
            n = self.diagonal.shape[0]
            return da.zeros(
                (n, 0), chunks=(self._chunks, (0,)), dtype=self.diagonal.dtype
            )
        if len(self._blocks) == 1:
            return self._blocks[0]
        return da.concatenate(self._blocks, axis=1).rechunk({1: -1})

    def quadratic_forms(self, A, rows=None):
        G = self.factor if rows is None else self.factor[rows]
        return quadratic_forms(G, A)

    def reserve(self, rank):
        pass  # the factor's blocks live on the workers, appended as they come

    # Greedy pivots one at a time: a batch of candidates' Schur columns
    # would be an n x width array in the client's memory.
    _GREEDY_WIDTH = 1

    def _greedy_batch(self, candidates, n_pivots, tol, scratch):
        i = int(candidates[0])  # the largest residual, above tol
        S = self._schur_columns(candidates[:1])  # the pivot's residual column
        self._append(S, np.full((1, 1), 1 / np.sqrt(self.residual[i])))
        self.pivots.append(i)
        self.column_pivots.append(i)
        self.residual[i] = 0.0
        return 1

    def gram(self):
        # Lazy: summed in the graph of its consumer (quadratic_forms).
        G = self.factor.astype(np.float64)
        return _tiles.gram(G)

    def _schur_columns(self, indices):
        # The whole residual block as one lazy dask array, on the persisted
        # kernel columns: the cluster evaluates them once, and only the
        # B x B part comes back (_schur_block).
        S = self._columns(indices)
        if self._rank:
            G = self.factor
            S = S - G @ G[indices].T
        return S

    def _schur_block(self, S, indices):
        return np.asarray(S[indices].compute())

    def _append(self, S, transform, kept=None):
        # (A general product per chunk: ``kept``'s triangle is not used.)
        da = _dask().array
        new_columns = S @ transform.astype(S.dtype, copy=False)
        new = da.asarray(new_columns).rechunk({0: self._chunks, 1: -1})
        new = new.astype(self.diagonal.dtype, copy=False).persist()
        self._blocks.append(new)
        self._rank += new.shape[1]
        if len(self._blocks) > _MAX_FACTOR_BLOCKS:
            self._blocks = [self.factor.persist()]
        self.residual -= (new.astype(np.float64) ** 2).sum(axis=1).compute()
        np.clip(self.residual, 0, None, out=self.residual)


def _block_quadratic_forms(G_block, A):
    return _linalg.quadratic_forms(G_block, np.asarray(A, dtype=np.float64))


def quadratic_forms(G, A):
    """``diag(G A^-1 G^T)`` for a dask ``G``: the in-memory function per chunk.

    ``A`` (``r x r``, typically the reduction ``G^T G + alpha I``) is
    computed once; the result, one number per row, is a numpy vector.
    """
    if G.numblocks[1] != 1:
        G = G.rechunk({1: -1})
    if is_dask_array(A):  # the reduction G^T G, in the same graph
        A = A.rechunk(-1).to_delayed().ravel()[0]
    return map_chunks(G, _block_quadratic_forms, None, np.float64, A).compute()


# ----------------------------------------------------------------------------
# Row-block reductions.


class DaskFeatureBlocks(FeatureBlocks):
    """:class:`FeatureBlocks` over a dask array: one task per row chunk.

    The blocks are ``X``'s row chunks.  :meth:`reduce` runs the statistic
    on each chunk's features where the chunk lives and sums the results by
    a tree, so only results of the statistic's size (``p x p``) travel;
    :meth:`map` runs the function per chunk and gathers its per-row results
    (decision values, leave-one-out errors: a few numbers per row) as one
    numpy array, since every caller consumes them at once with numpy.  The
    features themselves never leave the workers (:meth:`toarray` is a dask
    array); they are persisted there when they fit :func:`persist_budget`,
    and recomputed from ``X`` at every pass otherwise.

    Pickled (inside a statistic's closure), an instance is an empty shell:
    the statistics never read the blocks they are passed through.
    """

    # Persisted chunks are shared by every pass: never overwritten.
    _writable_blocks = False

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
        # Persisting follows the memory budget whatever ``cache`` says: the
        # recomputation would ship X again.
        self._set_basis(rotation, basis, cholesky, factor, start)
        self.X = X
        self.feature_map = feature_map
        self.n_components = n_components
        self.n_samples = X.shape[0]
        self.dtype = np.dtype(dtype)
        self.slices = _row_slices(X.chunks[0])
        nbytes = self.n_samples * n_components * self.dtype.itemsize
        self.cached = nbytes <= persist_budget(working_memory)
        self._cache = None
        self._phi = map_chunks(
            X, feature_map, n_components, self.dtype, keep_function=True
        )

    def __getstate__(self):
        state = dict(self.__dict__)
        for heavy in ("X", "_phi", "_cache", "feature_map"):
            state[heavy] = None
        return state

    def _phi_blocks(self):
        if self.cached and self._cache is None:
            self._phi = self._phi.persist()
            self._cache = True
        return list(self._phi.to_delayed().ravel())

    def _row_blocks(self, array):
        if is_dask_array(array):
            chunks = (self.X.chunks[0],) + tuple((s,) for s in array.shape[1:])
            return list(array.rechunk(chunks).to_delayed().ravel())
        return [array[sl] for sl in self.slices]

    def _tasks(self, function, row_arrays):
        delayed = _dask().delayed
        box = _shared(function)
        rows = [self._row_blocks(a) for a in row_arrays]
        return [
            delayed(_call, pure=False)(box, Phi_b, *(r[b] for r in rows))
            for b, Phi_b in enumerate(self._phi_blocks())
        ]

    def reduce(self, statistic, *row_arrays, stream=False):
        """``sum_b statistic(Phi_b, ...)``: per chunk on the workers, tree-summed.

        ``stream``: features that are not persisted are computed from each
        chunk of ``X`` by cache-sized pieces and consumed at once
        (:func:`~sklearn_dof._blocks.streamed`), as in the threaded blocks.
        """
        return _compute(_tree_sum(self._pass_tasks(statistic, row_arrays, stream)))[0]

    def _pass_tasks(self, function, row_arrays, stream, rowwise=False):
        """One task per chunk: ``function`` on the chunk's features, or on
        its pieces (``stream`` where the features are not persisted)."""
        chunk = None if self.cached else stream_rows(self.feature_map)
        if not (stream and chunk is not None):
            return self._tasks(function, row_arrays)
        delayed = _dask().delayed
        X = self.X if self.X.numblocks[1] == 1 else self.X.rechunk({1: -1})
        box, feature_map = _shared(function), _shared(self.feature_map)
        rows = [self._row_blocks(a) for a in row_arrays]
        call = _call_streamed_map if rowwise else _call_streamed
        return [
            delayed(call, pure=False)(
                box, feature_map, chunk, X_b, *(r[b] for r in rows)
            )
            for b, X_b in enumerate(X.to_delayed().ravel())
        ]

    def map(self, function, *row_arrays, stream=False):
        """Row-wise results ``function(Phi_b, ...)``, gathered as numpy
        (``stream``: as in :meth:`reduce`)."""
        return stack_rows(
            _compute(*self._pass_tasks(function, row_arrays, stream, True))
        )

    def first_block(self):
        return _dask().compute(self._phi_blocks()[0])[0]

    def pilot(self, n_rows=1024):
        return self.first_block()[:n_rows]

    def toarray(self):
        """The ``n x p`` features as a (lazy) dask array."""
        self._phi_blocks()
        return self._phi
