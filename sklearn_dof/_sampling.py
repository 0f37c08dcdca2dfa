"""Column selection for the Nystroem approximation.

Every column selection rule of this package is a *partial Cholesky
factorisation* of the kernel matrix with some rule for the pivots: choosing
landmarks ``I`` and forming ``L = K(:, I) K(I, I)^+ K(I, :)`` is the same as
running Cholesky on ``K`` with the pivots ``I`` and stopping after them.
The factor ``G`` (n x r, ``L = G G^T``) is built incrementally, so growing the
set of columns (when the rank is chosen adaptively) never recomputes what is
already known, and the residual diagonal ``diag(K - L)`` comes for free.

* uniform sampling: the pivots are a uniformly random order of the points;
* greedy pivoting (incomplete Cholesky with column pivoting, Bach 2013 and
  Fine & Scheinberg 2001): the next pivot is the point with the largest
  residual diagonal, i.e. the point the current approximation explains worst;
* randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2022): the next
  pivots are drawn with probabilities proportional to the residual diagonal,
  a block at a time (one BLAS-3 Schur update per block);
* ridge-leverage-score sampling (``sampling="leverage"`` of the estimators,
  built on the bounds of :mod:`sklearn_dof._dof`).
"""

import mmap
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from . import _linalg, _tiles
from ._blocks import for_row_blocks, kernel_product
from ._validation import check_square_matrix

# Residual diagonals below this fraction of max_i k_ii are rounding noise:
# a pivot there would divide by a number that carries no information.
DEFAULT_RTOL = 1e-12


def _matrix_columns(K):
    """The ``columns`` callable of :class:`PartialCholesky` for a given ``K``."""

    def columns(indices, rows=None):
        return (K if rows is None else K[rows])[:, indices]

    return columns


# Below this size a buffer's first touch costs little either way.
_SMALL_PAGES_FROM_BYTES = 2**22


def _address_space(n_rows, n_columns, dtype, order="F"):
    """An uninitialised array, column-major unless ``order="C"``, in memory
    mapped with small pages.

    numpy advises the kernel to back its large arrays by transparent huge
    pages.  A factor is written a few columns at a time, after its room is
    reserved, and where the hypervisor provides memory lazily a fresh huge
    page costs several times more per byte at first touch than small pages
    (doc/architecture.rst, measurements).  Private anonymous
    memory from ``mmap`` gets no such advice; elsewhere (no ``MAP_PRIVATE``),
    ``np.empty``.
    """
    dtype = np.dtype(dtype)
    nbytes = n_rows * n_columns * dtype.itemsize
    if nbytes < _SMALL_PAGES_FROM_BYTES or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty((n_rows, n_columns), dtype=dtype, order=order)
    buffer = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.ndarray((n_rows, n_columns), dtype=dtype, buffer=buffer, order=order)


# Bytes of the Schur columns of a batch of greedy candidates.
_GREEDY_BYTES = 2**26


def _largest(values, k):
    """Indices of the ``k`` largest ``values``, ties broken by the smallest
    index (the order of ``np.argmax``)."""
    threshold = values[np.argpartition(values, -k)[-k:]].min()
    above = np.flatnonzero(values > threshold)
    ties = np.flatnonzero(values == threshold)[: k - above.size]
    return np.concatenate([above, ties])


def _pivot_transform(S_BB, tol):
    """``(T, kept)``: ``T`` (k x r) such that ``S(:, B) T`` are the factor's
    new columns, ``T T^T`` inverting ``S_BB`` on the ``r`` directions above
    ``tol``, and ``kept`` the positions in ``B`` of the pivots behind those
    columns, in their order (None when the columns mix pivots).

    A block whose Cholesky factor has every pivot above ``tol`` keeps its
    order (``T = U^{-1}``, ``k^3 / 3`` flops).  Otherwise:

    Cholesky with diagonal pivoting (LAPACK ``pstrf``, ``k^3 / 3`` flops)
    keeps the pivots ``B'`` whose Schur complement stays above ``tol``, and
    ``T = P [U^{-1}; 0]``, so that the new columns are
    ``S(:, B') U^{-1}`` with ``S_B'B' = U^T U``.  It stops at the first
    pivot below ``tol``: on a block that is not positive semi-definite (a
    kernel that is not PSD) the part it leaves may still hold large entries,
    and then the eigendecomposition (``9 k^3`` flops) keeps the positive part
    instead.
    """
    k = S_BB.shape[0]
    # The block's own order first (Cholesky without pivoting): the columns
    # then follow the pivots as the rule gave them, whatever the rounding of
    # near-equal residuals, which would decide a pivoted order.
    # (numpy's LAPACK: scipy's is a second BLAS thread pool, which competes
    # with numpy's right after the products around it.)
    try:
        lower = _tiles.cholesky(S_BB)
    except np.linalg.LinAlgError:
        lower = None
    if lower is not None and np.diag(lower).min(initial=np.inf) ** 2 > tol:
        return _linalg.lower_triangular_inverse(lower).T, np.arange(k)
    # LAPACK's pivoted Cholesky updates by syrk, which has no tiled form
    # here: past the tile order it runs on one BLAS thread (see _tiles).
    with _tiles.one_blas_thread_above(k):
        U, piv, rank, info = lapack.dpstrf(S_BB, tol=tol, lower=0)
    if info < 0:  # pragma: no cover - only for invalid arguments
        raise linalg.LinAlgError(f"dpstrf failed with info={info}.")
    piv = piv[:k] - 1  # LAPACK's pivots count from one
    if rank and S_BB[piv[0], piv[0]] <= tol:
        # pstrf tests only the later pivots against tol; the first one,
        # the largest diagonal, only against zero.
        rank = 0
    if rank < k:
        rest = piv[rank:]
        coupling = U[:rank, rank:]
        schur = S_BB[np.ix_(rest, rest)] - _tiles.gram(coupling)
        if np.abs(schur).max(initial=0.0) > 2 * tol:
            eigvals, eigvecs = linalg.eigh(S_BB)
            keep = eigvals > tol
            return eigvecs[:, keep] / np.sqrt(eigvals[keep]), None
    transform = np.zeros((k, rank))
    if rank:
        # The kept pivots back in the block's order, refactored without
        # pivoting (they are well conditioned now), so that their columns
        # do not follow the rounding that ordered near-equal residuals.
        kept = np.sort(piv[:rank])
        U_kept, info = _tiles.potrf(S_BB[np.ix_(kept, kept)], lower=False)
        if info == 0:
            inverse, _ = lapack.dtrtri(U_kept, lower=0)
            transform[kept] = inverse
            return transform, kept
        # pstrf leaves the input's lower triangle below U: cleared first.
        inverse, _ = lapack.dtrtri(np.triu(U[:rank, :rank]), lower=0)
        transform[piv[:rank]] = inverse
    return transform, piv[:rank]


class PartialCholesky:
    """Incremental factor ``G`` with ``G G^T = K(:, I) K(I, I)^+ K(I, :)``.

    Parameters
    ----------
    columns : callable
        ``columns(indices, rows=None)`` returns the block ``K(rows, indices)``
        (all rows by default) as a new, writeable array.
    diagonal : ndarray of shape (n,)
        ``diag(K)``.
    rtol : float
        Relative threshold under which residual directions are dropped.

    Attributes
    ----------
    factor : ndarray of shape (n, rank)
        ``G``, the Nystroem features of the training points in the Cholesky
        basis.
    residual : ndarray of shape (n,)
        ``diag(K - G G^T)``, non-negative.
    pivots : list of int
        Every column index added so far, in order (including ones that added
        no rank, such as duplicated points).
    column_pivots : list of int
        The pivot behind each column of ``factor``, in the factor's order:
        ``factor[:, :q]`` is the factor of the landmarks
        ``column_pivots[:q]``, a nested sequence without the dependent
        pivots (-1 for a column of the eigendecomposition fallback of a
        block that is not positive semi-definite, which mixes pivots).
    """

    def __init__(self, columns, diagonal, rtol=DEFAULT_RTOL):
        self._columns = columns
        self.diagonal = np.asarray(diagonal)
        self.residual = np.clip(self.diagonal.astype(np.float64, copy=True), 0, None)
        self.rtol = rtol
        self._scale = max(float(self.residual.max(initial=0.0)), np.finfo(float).tiny)
        n = self.diagonal.shape[0]
        # Column-major: room reserved for columns not yet written costs no
        # memory, and appending never moves the columns already there.
        self._G = np.empty((n, 0), dtype=self.diagonal.dtype, order="F")
        self._rank = 0
        self._gram = None
        self.pivots = []
        self.column_pivots = []

    @classmethod
    def from_factor(
        cls, columns, diagonal, factor, pivots, gram=None, rtol=DEFAULT_RTOL
    ):
        """The factor whose columns are known already: ``factor`` (``n x
        r``) of the pivots ``pivots``, one behind each column, and its
        :meth:`gram` when known (see :func:`extended_factor`).  Row-major
        where it serves as features, read by blocks of rows; growing it
        copies it into column-major order (:meth:`reserve`)."""
        chol = cls(columns, diagonal, rtol)
        chol._gram = gram
        chol._G = factor
        chol._rank = factor.shape[1]
        chol.pivots = [int(i) for i in pivots]
        chol.column_pivots = list(chol.pivots)
        squares = np.einsum("ij,ij->i", factor, factor, dtype=np.float64)
        np.clip(chol.residual - squares, 0, None, out=chol.residual)
        return chol

    @property
    def factor(self):
        return self._G[:, : self._rank]

    @property
    def rank(self):
        return self._rank

    @property
    def complete(self):
        """Whether the factor is that of ``K`` itself: every row pivoted, or
        no residual left above the drop threshold."""
        if len(self.pivots) == self.residual.shape[0]:
            return True
        return float(self.residual.max(initial=0.0)) <= self.rtol * self._scale

    @property
    def gram_rank(self):
        """The columns whose Gram matrix :meth:`gram` has computed."""
        return 0 if self._gram is None else self._gram.shape[0]

    def gram(self):
        """``G^T G`` in float64, computed once per rank (the stopping rule
        and the final estimate of a round both need it).

        The factor only gains columns: a round that grew it from ``r0`` to
        ``r`` columns adds the blocks of its new columns, ``n (r^2 - r0^2)``
        flops rather than ``n r^2`` (a quarter less over doubling rounds).
        """
        r = self._rank
        known = 0 if self._gram is None else self._gram.shape[0]
        if self._gram is not None and known == r:
            return self._gram
        G = self.factor
        new = G[:, known:r].astype(np.float64, copy=False)
        gram = np.empty((r, r))
        if known:
            gram[:known, :known] = self._gram
            cross = G[:, :known].astype(np.float64, copy=False).T @ new
            gram[:known, known:] = cross
            gram[known:, :known] = cross.T
        gram[known:, known:] = _tiles.gram(new)
        self._gram = gram
        return gram

    def quadratic_forms(self, A, rows=None):
        """``diag(G A^-1 G^T)`` over the factor's rows (``rows``: some of them)."""
        G = self.factor if rows is None else self.factor[rows]
        return _linalg.quadratic_forms(G, A)

    def reserve(self, rank):
        """Make room for a factor of ``rank`` columns (one copy at most).

        The room is address space: the operating system provides the
        memory of a column when it is first written.
        """
        if rank > self._G.shape[1]:
            grown = _address_space(self._G.shape[0], rank, self._G.dtype)
            grown[:, : self._rank] = self._G[:, : self._rank]
            self._G = grown

    # The storage interface, which the Dask factor implements too: the
    # residual columns S = K(:, B) - G G_B^T of a block of pivots (here the
    # indices B alone: the columns are computed by blocks of rows when they
    # are appended), their B x B part, and the append of S T to G.

    def _schur_columns(self, indices):
        """A handle on the residual columns ``K(:, B) - G G_B^T``."""
        return indices

    def _schur_block(self, columns, indices):
        """``S_BB``, the Schur complement of the current factor on ``B``."""
        S_BB = self._columns(indices, rows=indices)
        if self._rank:
            G_B = self.factor[indices]
            S_BB = S_BB - G_B @ G_B.T
        return S_BB

    def _make_room(self, k):
        """Room for ``k`` more columns, at least doubling a full factor."""
        if self._rank + k > self._G.shape[1]:
            self.reserve(max(2 * self._G.shape[1], self._rank + k, 8))

    def _for_schur_blocks(self, indices, consume):
        """``consume(rows, K(rows, B) - G_rows G_B^T)`` by blocks of rows, a
        group of blocks per worker thread (``consume`` writes rows of its
        own).

        No ``n x |B|`` temporary, whose first touch costs more than the
        products on machines that back fresh memory lazily.
        """
        G = self.factor
        G_B = G[indices].T
        rank = self._rank

        def work(slices):
            for rows in slices:
                S = self._columns(indices, rows=rows)
                if rank:
                    S -= G[rows] @ G_B
                consume(rows, S)

        n = self._G.shape[0]
        for_row_blocks(work, n, max(G.shape[1], indices.size))

    def _append(self, columns, transform, kept=None):
        """Append the columns ``(K(:, B) - G G_B^T) transform`` to ``G``;
        ``kept``: the rows of ``transform`` that are not zero, in the order
        in which they are an upper triangular block
        (:func:`_pivot_transform`)."""
        indices = columns
        k = transform.shape[1]
        self._make_room(k)
        transform = transform.astype(self._G.dtype, copy=False)
        new = self._G[:, self._rank : self._rank + k]
        triangular = kept is not None and k > _tiles.TRIANGULAR_PANEL
        if triangular:
            # (pstrf's pivots may keep every row, in another order.)
            whole = np.array_equal(kept, np.arange(len(indices)))
            upper = transform if whole else transform[kept]

        def consume(rows, S):
            if triangular:
                # Half the flops of the general product, where a round can
                # add thousands of columns at once (doc/design/logistic.rst,
                # "Measurements behind the code's choices").
                block = _tiles.times_upper(S if whole else S[:, kept], upper)
            else:
                # (transform^T S^T)^T: column-major like the factor, so
                # storing it copies contiguous columns, not a transpose.
                block = (transform.T @ S.T).T
            new[rows] = block
            self.residual[rows] -= np.einsum("ij,ij->i", block, block, dtype=np.float64)

        self._for_schur_blocks(indices, consume)
        self._rank += k
        np.clip(self.residual, 0, None, out=self.residual)

    def add(self, indices):
        """Add a block of pivots at once (BLAS-3 Schur complement update).

        The residual block ``S = K(:, B) - G G_B^T`` is the Schur complement
        of the current landmarks; its ``B x B`` part is factored so that
        duplicated or numerically dependent points add no spurious rank
        (see :func:`_pivot_transform`).
        """
        indices = np.asarray(indices, dtype=np.intp)
        if indices.size == 0:
            return
        self.pivots.extend(indices.tolist())
        columns = self._schur_columns(indices)
        S_BB = self._schur_block(columns, indices)
        S_BB = 0.5 * (S_BB + S_BB.T)
        tol = self.rtol * self._scale * max(1, indices.size)
        transform, kept = _pivot_transform(S_BB.astype(np.float64), tol)
        if transform.shape[1]:
            self._append(columns, transform, kept)
            self.column_pivots.extend(
                indices[kept].tolist() if kept is not None else [-1] * len(transform.T)
            )

    def add_random(self, n_pivots, random_state=None, block_size=None):
        """Randomly pivoted (block) Cholesky: pivots drawn from the residual.

        Each block of pivots is drawn independently with probabilities
        ``(K - L)_ii / tr(K - L)`` (duplicates within a block merged) and
        added by one Schur complement update, so the work is matrix-matrix
        products.  Points already explained have no residual and are not
        drawn again; a point far from the others keeps its residual until it
        is drawn, which is how the rule finds outliers that uniform sampling
        misses, without greedy pivoting's one-column-at-a-time sweep.  The
        default block is a quarter of the current rank (sequential draws
        while the rank is small, where each pivot matters most), which keeps
        the number of Schur updates logarithmic in ``p``.

        Returns the number of pivots added.
        """
        rng = check_random_state(random_state)
        n = self.residual.shape[0]
        target = min(len(self.pivots) + n_pivots, n)
        start = len(self.pivots)
        while len(self.pivots) < target:
            weights = self.residual.copy()
            weights[self.pivots] = 0.0
            total = weights.sum()
            if total <= self.rtol * self._scale or not np.isfinite(total):
                break  # numerically no rank left
            k = block_size or max(1, len(self.pivots) // 4)
            k = min(k, target - len(self.pivots))
            draws = rng.choice(n, size=k, replace=True, p=weights / total)
            _, first = np.unique(draws, return_index=True)
            self.add(draws[np.sort(first)])
        return len(self.pivots) - start

    def add_greedy(self, n_pivots):
        """Add up to ``n_pivots`` pivots, each the largest residual diagonal.

        Stops early when the largest residual is rounding noise: the kernel
        matrix then has (numerically) no more rank to give.  Returns the
        number of pivots added.

        Each pivot depends on the residual its predecessors leave, so the
        rule is sequential; but a pivot only reads its own residual column,
        and the next pivots are nearly always among the points with the
        largest residuals now.  So the Schur columns of a batch of such
        candidates are computed at once (one matrix-matrix product against
        the factor, instead of one matrix-vector product per pivot), and
        pivots are taken from them while the largest residual, ties broken
        by the smallest index as ``np.argmax`` does, is a candidate: the
        same pivots as one at a time.  A batch is twice as wide as the
        previous one's yield (between 8 and ``_GREEDY_WIDTH``).  (Matrix
        products instead of matrix-vector ones: doc/architecture.rst,
        measurements.)
        """
        tol = self.rtol * self._scale
        n = self.residual.shape[0]
        width_max = max(1, min(self._GREEDY_WIDTH, _GREEDY_BYTES // (n * 8)))
        width = min(8, width_max)
        # The candidates' columns, reused by every batch (first touched once).
        scratch = _address_space(n, width_max, self._G.dtype)
        added = 0
        while added < n_pivots and self.residual.max(initial=0.0) > tol:
            candidates = _largest(self.residual, min(width, n_pivots - added, n))
            taken = self._greedy_batch(candidates, n_pivots - added, tol, scratch)
            added += taken
            width = int(np.clip(2 * taken, 8, width_max))
        return added

    # Widest batch of greedy candidates (see add_greedy); _GREEDY_BYTES
    # bounds its n x width Schur columns.
    _GREEDY_WIDTH = 64

    def _greedy_batch(self, candidates, n_pivots, tol, scratch):
        """Greedy pivots among ``candidates``, whose Schur columns go to
        ``scratch``; returns how many were taken."""
        self._make_room(min(candidates.size, n_pivots))
        S = scratch[:, : candidates.size]

        def consume(rows, block):
            S[rows] = block

        self._for_schur_blocks(candidates, consume)
        column_of = {int(i): j for j, i in enumerate(candidates)}
        start = self._rank
        taken = 0
        while taken < n_pivots:
            i = int(np.argmax(self.residual))
            r = self.residual[i]
            if r <= tol or i not in column_of:
                break
            # The candidate's Schur column, less the pivots of this batch.
            new = self._G[:, self._rank]
            batch = self._G[:, start : self._rank]
            np.matmul(batch, -batch[i], out=new)
            new += S[:, column_of.pop(i)]
            new /= np.sqrt(r)
            self._rank += 1
            self.pivots.append(i)
            self.column_pivots.append(i)
            self.residual -= np.square(new, dtype=np.float64)
            self.residual[i] = 0.0
            np.clip(self.residual, 0, None, out=self.residual)
            taken += 1
        return taken


# The rows of the factor that extended_factor computes at a time.
_EXTENSION_CHUNK_BYTES = 2**27


def extended_factor(chol, rows, columns, access):
    """The first ``p = len(columns)`` columns of the factor ``chol`` of the
    rows ``rows`` of ``access`` (a ``KernelColumns``), extended to every row.

    ``columns`` are the positions in ``rows`` of the pivots behind those
    columns (``chol.column_pivots[:p]``, none mixing pivots), whose rows of
    the factor, ``G_I``, are lower triangular: ``G G_I^T = K(:, I)`` on the
    pivots' columns, so a row ``x`` the factor never saw has the row
    ``K(x, I) G_I^{-T}``, one kernel block and a product per row, where the
    rows of the subsample keep theirs (a ``PartialCholesky`` of every row,
    :meth:`PartialCholesky.from_factor`).  Its Gram matrix is the
    subsample's, which the rounds computed, plus that of the new rows.
    """
    p = len(columns)
    n = access.n_samples
    G_I = np.asarray(chol.factor[columns, :p], dtype=np.float64)
    # G_I^{-T}, upper triangular: K(x, I) G_I^{-T} row by row.
    T = _linalg.lower_triangular_inverse(np.tril(G_I)).T
    landmarks = np.asarray(rows)[np.asarray(columns, dtype=np.intp)]
    unseen = np.ones(n, dtype=bool)
    unseen[rows] = False
    rest = np.flatnonzero(unseen)
    # Row-major: the fit reads its features by blocks of rows.  Small pages
    # (_address_space): the first touch of fresh huge pages makes a copy
    # into np.empty's memory slower than into small pages
    # (doc/design/scaling.rst, "Measurements behind the code's choices").
    G = _address_space(n, p, chol.factor.dtype, order="C")
    G[rows] = chol.factor[:, :p]
    # The Gram matrix only where the rounds formed the subsample's (the
    # squared loss's rounds read it): its new rows' part then costs less
    # than the whole one later.  Else it waits for a caller (two-class
    # rounds of uniform pivots form none, and their final fit takes the
    # certificate's Hessian).
    known = chol.gram_rank >= p
    gram = np.array(chol.gram()[:p, :p], dtype=np.float64) if known else None
    points = access.rows(landmarks)
    # By chunks of the factor's budget share: no n x p temporary beside
    # the subsample's factor and the one being filled.
    chunk = max(1, _EXTENSION_CHUNK_BYTES // (8 * max(p, 1)))
    for start in range(0, rest.size, chunk):
        unseen_rows = rest[start : start + chunk]
        block = kernel_product(
            access.X[unseen_rows],
            points,
            access.kernel,
            access.params,
            T,
            dtype=G.dtype,
            upper=True,
        )
        if known:
            gram += _tiles.gram(block)
        G[unseen_rows] = block
    return PartialCholesky.from_factor(
        access.columns, access.diagonal(), G, landmarks, gram=gram
    )


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def uniform_columns(n_samples, n_components, random_state=None):
    """Indices of ``n_components`` points drawn uniformly without replacement.

    The indices are the prefix of one random permutation, so the sets drawn
    for increasing ``n_components`` with the same seed are nested: a rank
    chosen adaptively extends the columns it already has.

    Parameters
    ----------
    n_samples : int
        Number of points ``n``.
    n_components : int
        Number of columns ``p`` (clipped to ``n``).
    random_state : int, RandomState instance or None, default=None
        Seed of the permutation.

    Returns
    -------
    indices : ndarray of shape (min(p, n),)

    Examples
    --------
    >>> from sklearn_dof import uniform_columns
    >>> a = uniform_columns(100, 5, random_state=0)
    >>> b = uniform_columns(100, 10, random_state=0)
    >>> bool((b[:5] == a).all())
    True
    """
    rng = check_random_state(random_state)
    return rng.permutation(n_samples)[: min(n_components, n_samples)]


@validate_params(
    {
        "K": ["array-like"],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "block_size": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def randomly_pivoted_cholesky(K, n_components, *, block_size=None, random_state=None):
    """Randomly pivoted (block) Cholesky decomposition.

    Pivots are drawn with probabilities proportional to the residual
    diagonal ``(K - L)_ii`` of the current approximation, a block at a time
    (Chen, Epperly, Tropp & Webber, 2022).  In expectation it matches greedy
    pivoting on smooth kernels and beats it where greedy pivots chase
    outliers, at the cost of uniform sampling: ``O(p^2 n)`` time, only the
    diagonal and the chosen columns of ``K`` evaluated.

    Parameters
    ----------
    K : array-like of shape (n, n)
        A PSD kernel matrix.  (The estimators run the same factorisation on
        kernel columns evaluated on demand, without the matrix.)
    n_components : int
        Number of pivots ``p`` (fewer if ``K`` is numerically exhausted).
    block_size : int, default=None
        Pivots drawn per Schur update; None grows it with the rank (a quarter
        of it).  ``block_size=1`` is the sequential algorithm.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws.

    Returns
    -------
    pivots : ndarray of shape (r,)
        Chosen column indices, distinct, ``r <= p``.
    G : ndarray of shape (n, rank)
        Factor with ``G G^T = K[:, P] K[P, P]^+ K[P, :]`` for ``P = pivots``.

    References
    ----------
    .. [1] Y. Chen, E. N. Epperly, J. A. Tropp and R. J. Webber, "Randomly
       pivoted Cholesky: practical approximation of a kernel matrix with few
       entry evaluations", Comm. Pure Appl. Math., 2024 (arXiv:2207.06503).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import randomly_pivoted_cholesky
    >>> X = np.random.RandomState(0).randn(50, 2)
    >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    >>> pivots, G = randomly_pivoted_cholesky(K, 30, random_state=0)
    >>> bool(np.trace(K - G @ G.T) < 1e-2 * np.trace(K))
    True
    """
    K = check_square_matrix(K, "K", check_diagonal=True)
    chol = PartialCholesky(_matrix_columns(K), np.diag(K).copy())
    chol.add_random(min(n_components, K.shape[0]), random_state, block_size)
    return np.asarray(chol.pivots, dtype=np.intp), chol.factor.copy()


@validate_params(
    {
        "K": ["array-like"],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "rtol": [Interval(Real, 0, 1, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def pivoted_cholesky(K, n_components, *, rtol=DEFAULT_RTOL):
    """Greedy incomplete Cholesky decomposition with column pivoting.

    At step ``t`` the pivot is the point with the largest residual diagonal
    ``(K - L_t)_ii``; its residual column updates the factor.  Only the
    diagonal and the ``p`` chosen columns of ``K`` are evaluated, in
    ``O(p^2 n)`` time.

    Parameters
    ----------
    K : array-like of shape (n, n)
        A PSD kernel matrix.  (The estimators run the same factorisation on
        kernel columns evaluated on demand, without the matrix.)
    n_components : int
        Maximal number of pivots ``p``.
    rtol : float, default=1e-12
        Stop when the largest residual diagonal falls below ``rtol * max(diag K)``.

    Returns
    -------
    pivots : ndarray of shape (r,)
        Chosen column indices, ``r <= p``.
    G : ndarray of shape (n, r)
        Factor with ``G G^T = K[:, P] K[P, P]^+ K[P, :]`` for ``P = pivots``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import pivoted_cholesky
    >>> X = np.random.RandomState(0).randn(50, 2)
    >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    >>> pivots, G = pivoted_cholesky(K, 30)
    >>> bool(np.trace(K - G @ G.T) < 1e-2 * np.trace(K))
    True
    """
    K = check_square_matrix(K, "K", check_diagonal=True)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square matrix; got shape {K.shape}.")
    chol = PartialCholesky(_matrix_columns(K), np.diag(K).copy(), rtol=rtol)
    chol.add_greedy(min(n_components, K.shape[0]))
    return np.asarray(chol.pivots, dtype=np.intp), chol.factor.copy()


@validate_params(
    {
        "K": ["array-like"],
        "pivots": ["array-like"],
        "rtol": [Interval(Real, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def partial_cholesky(K, pivots, *, rtol=DEFAULT_RTOL):
    """Incomplete Cholesky decomposition with the pivots given in order.

    Choosing landmarks ``P`` and forming the Nystroem approximation
    ``K[:, P] K[P, P]^+ K[P, :]`` is Cholesky on ``K`` with the pivots ``P``,
    stopped after them; this computes it for every prefix of ``pivots`` at
    once, one pivot at a time.  A pivot whose residual diagonal is below
    ``rtol * max(diag K)`` (a duplicated point, or a direction the previous
    pivots already explain to rounding) adds no column.  With
    ``pivots = uniform_columns(n, p, random_state=seed)`` these are the
    landmarks of ``DoFNystroem(sampling="uniform", random_state=seed)``.

    Parameters
    ----------
    K : array-like of shape (n, n)
        A PSD kernel matrix.
    pivots : array-like of int of shape (p,)
        Distinct column indices, in the order they are added.
    rtol : float, default=1e-12
        Relative threshold of the residual diagonal under which a pivot adds
        no rank.

    Returns
    -------
    G : ndarray of shape (n, r)
        Factor with ``G[:, :k] G[:, :k]^T = K[:, P_j] K[P_j, P_j]^+ K[P_j, :]``
        for the prefix ``P_j = pivots[:j]`` and ``k = rank[j]``.
    rank : ndarray of shape (p + 1,)
        ``rank[j]``, the number of columns the first ``j`` pivots span.

    See Also
    --------
    pivoted_cholesky : The pivots chosen greedily.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dof import partial_cholesky
    >>> X = np.random.RandomState(0).randn(50, 2)
    >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    >>> G, rank = partial_cholesky(K, [3, 7, 11])
    >>> G.shape, rank.tolist()
    ((50, 3), [0, 1, 2, 3])
    >>> bool(np.allclose(G @ G.T[:, [3, 7, 11]], K[:, [3, 7, 11]]))
    True
    """
    K = check_square_matrix(K, "K", check_diagonal=True)
    pivots = np.asarray(pivots)
    n = K.shape[0]
    if pivots.ndim != 1 or (pivots.size and pivots.dtype.kind not in "iu"):
        raise ValueError(
            f"pivots must be a 1d array of integer indices; got shape "
            f"{pivots.shape} and dtype {pivots.dtype}."
        )
    pivots = pivots.astype(np.intp)
    if pivots.size and (pivots.min() < 0 or pivots.max() >= n):
        raise ValueError(f"pivots must be indices in [0, {n}).")
    if np.unique(pivots).size != pivots.size:
        raise ValueError("pivots holds duplicated indices.")
    chol = PartialCholesky(_matrix_columns(K), np.diag(K).copy(), rtol=rtol)
    chol.reserve(pivots.size)
    rank = np.zeros(pivots.size + 1, dtype=np.intp)
    for j in range(pivots.size):
        chol.add(pivots[j : j + 1])
        rank[j + 1] = chol.rank
    return chol.factor.copy(), rank


def factor_sums(chol, p, y, fit_intercept=True):
    """``(G_c^T G_c, G_c^T y_c, mean row of G, mean of y)`` for the first
    ``p`` columns ``G`` of the rows' partial Cholesky factor, from the Gram
    matrix ``G^T G`` its rounds computed, in ``O(n p)``: the centring
    happens in the factor's basis, whose entries the kernel's diagonal
    bounds.  Without intercept, the sums uncentred and zero means."""
    G = chol.factor[:, :p]
    gram = np.array(chol.gram()[:p, :p], dtype=np.float64)
    rhs = G.T.astype(np.float64, copy=False) @ y
    if not fit_intercept:
        return gram, rhs, np.zeros(p), np.zeros(y.shape[1])
    n = G.shape[0]
    g_mean = G.mean(axis=0, dtype=np.float64)
    y_mean = y.mean(axis=0)
    gram -= n * np.outer(g_mean, g_mean)
    rhs -= n * np.outer(g_mean, y_mean)
    return gram, rhs, g_mean, y_mean


class PrefixSums:
    """The normal equations of the features that are the first ``p``
    columns ``G_p`` of the rows' partial Cholesky factor
    (:func:`factor_sums`), in ``O(n p)`` instead of a pass of ``n p^2``.
    Unweighted rows only."""

    def __init__(self, chol, p):
        self.chol = chol
        self.p = p

    def second_moments(self, out):
        """``G_p^T G_p / n`` written into ``out`` (``p x p``, float64), and
        the mean row of ``G_p``: the uncentred sums, with no ``p x p``
        temporary beside the factor's Gram matrix and ``out``."""
        n = self.chol.factor.shape[0]
        np.divide(self.chol.gram()[: self.p, : self.p], n, out=out)
        return self.chol.factor[:, : self.p].mean(axis=0, dtype=np.float64)

    def normal_equations(self, y, fit_intercept):
        """As ``_blocks.normal_equations`` of the features with unit weights."""
        gram, rhs, g_mean, y_mean = factor_sums(self.chol, self.p, y, fit_intercept)
        _tiles.mirror_lower(gram)
        return gram, rhs, g_mean, y_mean
