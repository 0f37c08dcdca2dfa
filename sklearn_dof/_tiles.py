"""Products and factorisations with a ``p x p`` output, by tiles.

OpenBLAS's threaded ``dsyrk`` (``level3_syrk_threaded.c``) crashes the
process with a segmentation fault for large outputs, and with it everything
built on it: LAPACK's ``dpotrf`` (its trailing updates are syrk), numpy's
``B.T @ B`` (numpy calls syrk when both operands are one array).  With
OpenBLAS 0.3.30 and 0.3.31 the smallest order measured to crash was
``16,384`` (``B.T @ B`` with ``B`` of shape ``(1024, n)``, and the
Cholesky factorisation), while order ``8,192`` ran for every inner
dimension and thread count tried; single-threaded calls, general products
(``dgemm``), ``dsyr2k`` and ``dtrsm`` did not crash at the orders measured
(up to ``20,000``).  This class of crash is known upstream (OpenBLAS
issues 2562 and 2821); the measurement, and how to rerun it when numpy,
scipy or OpenBLAS change, are in doc/design/scaling.rst ("Benchmarks
removed with issue 50").

So no call here hands OpenBLAS a syrk or a Cholesky factorisation of order
above :data:`TILE_ORDER`: larger ones run by square tiles of at most that
order, their off-diagonal tiles by general products.  The flops are those of
the untiled call (the tiles cover one triangle), and a tile of 8,192 keeps
the BLAS at its full rate on any number of cores.
"""

import contextlib

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack
from threadpoolctl import threadpool_limits

from . import _blas

#: The largest order of a syrk output or a Cholesky factorisation handed to
#: the BLAS in one call: half the smallest order measured to crash (see the
#: module's docstring), and safe at every thread count measured.
TILE_ORDER = 8192


#: The width of the column tiles of the tiled products and of the tiled
#: Cholesky factorisation's trailing updates: wide enough for the BLAS's full
#: rate, narrow enough that each product's temporary (p x this) stays small
#: beside the p x p matrix.
UPDATE_COLUMNS = 2048


#: The column panels of a product with a triangular matrix
#: (:func:`times_upper`): wide enough for the BLAS's rate (panels of 512
#: were no faster: doc/design/scaling.rst, "Measurements behind the code's
#: choices"), and narrow enough that the panels skip most of the zero
#: triangle.
TRIANGULAR_PANEL = 256


def _tile_edges(start, stop, tile):
    return [(a, min(a + tile, stop)) for a in range(start, stop, tile)]


def times_upper(A, U, out=None):
    """``A @ U`` for an upper triangular ``U`` (``k x k``), by panels of
    :data:`TRIANGULAR_PANEL` columns.

    Panel ``a:b`` of the product reads the first ``b`` columns of ``A``
    and rows of ``U`` only: about half the flops of the general product, in
    numpy's BLAS (scipy's ``trmm`` is a second thread pool; see
    ``_nystroem._TriangularFeatures``).  Faster than the general product,
    if by less than the factor two of the flops (doc/design/scaling.rst,
    "Measurements behind the code's choices").  The diagonal tiles are read
    whole: ``U``'s strict lower triangle must be zero.  ``out``: of shape
    ``(len(A), k)`` with contiguous rows (a C-ordered array or a block of
    its rows), whose column ranges take the panels' products.
    """
    k = U.shape[1]
    if out is None:
        out = np.empty((A.shape[0], k), dtype=np.result_type(A, U))
    if k <= TRIANGULAR_PANEL:
        return np.matmul(A, U, out=out)
    for a, b in _tile_edges(0, k, TRIANGULAR_PANEL):
        np.matmul(A[:, :b], U[:b, a:b], out=out[:, a:b])
    return out


def gram(M, tile=None):
    """``M^T M`` in float64 for ``M`` of shape ``(k, p)``, exactly symmetric.

    numpy's syrk (one triangle, mirrored) up to ``tile`` (default
    :data:`TILE_ORDER`); above it, the lower triangle by column tiles of at
    most ``UPDATE_COLUMNS`` (each product's temporary ``p x`` that), whose
    products are general ones, mirrored.  float32 ``M`` is multiplied in
    float32, as numpy would.
    """
    tile = TILE_ORDER if tile is None else tile
    p = M.shape[1]
    if p <= tile:
        return (M.T @ M).astype(np.float64, copy=False)
    out = np.zeros((p, p))
    add_lower_gram(out, M, tile=min(tile, UPDATE_COLUMNS))
    return mirror_lower(out)


def add_lower_gram(total, M, scratch=None, tile=None):
    """``total += M^T M`` on the lower triangle of ``total``, by tiles.

    Parameters
    ----------
    total : ndarray of shape (p, p)
        The running sum; only its lower triangle (diagonal included) is
        updated, the rest of each diagonal tile too.
    M : ndarray of shape (k, p)
        A block of rows.
    scratch : ndarray of shape (p, tile) or larger, default=None
        Reused for the tiles' products (dtype of ``M``).
    tile : int, default=TILE_ORDER
        The order of the tiles.

    Returns
    -------
    total : ndarray
    """
    tile = TILE_ORDER if tile is None else tile
    p = M.shape[1]
    for start, stop in _tile_edges(0, p, tile):
        # Rows start: of columns start:stop.  The two operands are distinct
        # views (different shapes), so numpy takes a general product, never
        # the syrk this module avoids.
        shape = (p - start, stop - start)
        out = None
        if scratch is not None:
            out = scratch[: shape[0], : shape[1]]
        product = np.matmul(M[:, start:].T, M[:, start:stop], out=out)
        total[start:, start:stop] += product
    return total


def upper_outer(R, dtype=None):
    """``R R^T`` for an upper triangular ``R``, full and symmetric, in
    ``p^3 / 3`` flops.

    LAPACK's ``lauum`` up to :data:`TILE_ORDER` (its syrk within the tile
    order); above it, the sum over narrow column tiles ``K`` of
    ``R[:, K] R[:, K]^T``, whose rows end with tile ``K``, each by
    :func:`add_lower_gram` (which treats the triangle ending each tile as
    dense: ``2 t^2 / p^2`` more flops for tiles of ``t`` columns).  In
    ``dtype`` (default ``R``'s): above the tile order ``R`` is cast tile by
    tile, never as a whole ``p x p`` copy.
    """
    p = R.shape[0]
    dtype = R.dtype if dtype is None else np.dtype(dtype)
    if p <= TILE_ORDER:
        R = R.astype(dtype, copy=False)
        (lauum,) = lapack.get_lapack_funcs(("lauum",), (R,))
        out, info = lauum(R, lower=0)
        if info != 0:  # pragma: no cover - only for invalid arguments
            raise ValueError(f"lauum failed with info={info}.")
        # Its upper triangle, mirrored: the lower triangle of its transpose.
        return mirror_lower(np.triu(out).T)
    out = np.zeros((p, p), dtype=dtype, order="F")
    for start, stop in _tile_edges(0, p, UPDATE_COLUMNS):
        columns = R[:stop, start:stop].T.astype(dtype, copy=False)
        add_lower_gram(out[:stop, :stop], columns, tile=UPDATE_COLUMNS)
    return mirror_lower(out)


def mirror_lower(A, block=256):
    """Fill the strict upper triangle of square ``A`` from its lower one, in
    place, by square blocks (no ``p x p`` temporary).

    Block by block: each transposed copy stays in cache, where a strip
    transposed at once does not (doc/design/large_ranks.rst, "Measurements
    behind the code's choices").
    """
    p = A.shape[0]
    for start in range(0, p, block):
        stop = min(start + block, p)
        diagonal = A[start:stop, start:stop]
        diagonal[...] = np.tril(diagonal) + np.tril(diagonal, -1).T
        for right in range(stop, p, block):
            end = min(right + block, p)
            A[start:stop, right:end] = A[right:end, start:stop].T
    return A


def potrf(A, lower=False, overwrite_a=False, tile=None):
    """LAPACK's ``dpotrf`` (with ``clean=1``), by tiles above
    :data:`TILE_ORDER`.

    Returns ``(factor, info)`` as :func:`scipy.linalg.lapack.dpotrf` does:
    the lower (or upper) Cholesky factor with the other triangle zeroed, and
    ``info > 0`` the order of the first leading minor that is not positive
    definite.  Only the triangle named by ``lower`` is read.

    Above the tile order, the right-looking block algorithm on the fewest
    diagonal tiles of at most that order, of equal orders (a short last
    tile ran at a lower rate): for each, its Cholesky factor ``L_kk``
    (LAPACK), the panel below it ``A_ik L_kk^{-T}`` (a triangular solve),
    and the update of the trailing matrix ``A_ij -= L_ik L_jk^T`` by
    column blocks of :data:`UPDATE_COLUMNS` (general products, which are
    safe at every size measured).  In float64, through scipy's pointers,
    every step works on the blocks where they lie, a syrk of order at most
    :data:`UPDATE_COLUMNS` on each diagonal block
    (:class:`~sklearn_dof._blas.BlockSteps`): nothing beside ``A``.
    Otherwise scipy's wrappers take copies: the solves and products then
    run on blocks of rows through one workspace, and the memory beside
    ``A`` is a diagonal tile's copy and that workspace.
    """
    tile = TILE_ORDER if tile is None else tile
    n = A.shape[0]
    (lapack_potrf,) = lapack.get_lapack_funcs(("potrf",), (A,))
    if n <= tile:
        if overwrite_a and A.flags.c_contiguous and not A.flags.f_contiguous:
            # f2py would copy a C-ordered array into Fortran order: factor
            # its transpose, the other triangle, in place.
            factor, info = lapack_potrf(A.T, lower=not lower, clean=1, overwrite_a=1)
            return factor.T, info
        return lapack_potrf(A, lower=lower, clean=1, overwrite_a=overwrite_a)
    # The lower triangle in Fortran order; the upper triangle of A is the
    # lower one of its transpose.
    source = A if lower else A.T
    dtype = lapack_potrf.dtype
    if overwrite_a and source.flags.f_contiguous and source.dtype == dtype:
        L = source
    else:
        L = np.array(source, dtype=dtype, order="F")
    tile = -(-n // -(-n // tile))  # the fewest tiles, of equal orders
    if dtype == np.float64 and _blas.BlockSteps.available():
        return _finish(L, lower), _factor_in_place(L, tile)
    work = np.empty((UPDATE_COLUMNS, max(tile, UPDATE_COLUMNS)), dtype=dtype, order="F")
    for start, stop in _tile_edges(0, n, tile):
        diagonal, info = lapack_potrf(
            L[start:stop, start:stop], lower=1, clean=1, overwrite_a=0
        )
        if info > 0:
            return _finish(L, lower), start + info
        if info < 0:  # pragma: no cover - only for invalid arguments
            raise ValueError(f"dpotrf failed with info={info}.")
        L[start:stop, start:stop] = diagonal
        if stop < n:
            _panel_solve(L, diagonal, start, stop, work)
            _trailing_update(L, start, stop, work)
    return _finish(L, lower), 0


def _factor_in_place(L, tile):
    """:func:`potrf`'s steps on the blocks of ``L`` where they lie
    (:class:`~sklearn_dof._blas.BlockSteps`): its ``info``."""
    steps = _blas.BlockSteps(L)
    n = L.shape[0]
    for start, stop in _tile_edges(0, n, tile):
        info = steps.potrf(start, stop)
        if info > 0:
            return start + info
        if info < 0:  # pragma: no cover - only for invalid arguments
            raise ValueError(f"dpotrf failed with info={info}.")
        if stop < n:
            steps.panel(start, stop)
            for left, right in _tile_edges(stop, n, UPDATE_COLUMNS):
                steps.update(start, stop, left, right)
    return 0


def _panel_solve(L, diagonal, start, stop, work):
    """The panel ``L[stop:, start:stop] L_kk^{-T}`` of :func:`potrf`, in
    place, by blocks of rows copied through ``work``."""
    (trsm,) = blas.get_blas_funcs(("trsm",), (L,))
    for top, bottom in _tile_edges(stop, L.shape[0], UPDATE_COLUMNS):
        block = work[: bottom - top, : stop - start]
        block[...] = L[top:bottom, start:stop]
        L[top:bottom, start:stop] = trsm(
            1.0, diagonal, block, side=1, lower=1, trans_a=1, overwrite_b=1
        )


def _trailing_update(L, start, stop, work):
    """``L_ij -= L_ik L_jk^T`` on the lower triangle of the trailing matrix
    of :func:`potrf` (``k`` the tile ``start:stop``), by square blocks of
    :data:`UPDATE_COLUMNS`, each product into ``work``."""
    n = L.shape[0]
    panel = L[:, start:stop]
    for left, right in _tile_edges(stop, n, UPDATE_COLUMNS):
        columns = panel[left:right].T
        for top, bottom in _tile_edges(left, n, UPDATE_COLUMNS):
            product = work[: bottom - top, : right - left]
            np.matmul(panel[top:bottom], columns, out=product)
            L[top:bottom, left:right] -= product


def clear_upper(L):
    """Zero the strict upper triangle of square ``L`` in place, by blocks
    (no ``n x n`` temporary); returns ``L``."""
    n = L.shape[0]
    for start, stop in _tile_edges(0, n, 512):
        L[start:stop, stop:] = 0.0
        L[start:stop, start:stop] = np.tril(L[start:stop, start:stop])
    return L


def _finish(L, lower):
    # clean=1: the strict upper triangle of the lower factor is zero.
    clear_upper(L)
    return L if lower else L.T


def cholesky(A, overwrite_a=False):
    """:func:`numpy.linalg.cholesky` (the lower factor, numpy's LAPACK and
    thread pool), by tiles above :data:`TILE_ORDER`;
    :class:`numpy.linalg.LinAlgError` when ``A`` is not positive definite.

    With ``overwrite_a``, above the tile order the factor takes the memory
    of a symmetric float64 ``A`` (its transpose, in the other order, is the
    same matrix): no second ``p x p`` array.  Below it numpy allocates the
    factor, as it always does."""
    if A.shape[0] <= TILE_ORDER:
        return np.linalg.cholesky(A)
    if overwrite_a and A.flags.c_contiguous and not A.flags.f_contiguous:
        A = A.T  # Fortran order: potrf factors it in place
    factor, info = potrf(A, lower=True, overwrite_a=overwrite_a)
    if info != 0:
        raise np.linalg.LinAlgError(
            f"{info}-th leading minor of the array is not positive definite"
        )
    return factor


def cho_factor(A, lower=True, overwrite_a=False):
    """:func:`scipy.linalg.cho_factor` (without the finiteness check), by
    tiles above :data:`TILE_ORDER`: ``(factor, lower)`` for
    :func:`scipy.linalg.cho_solve`."""
    if A.shape[0] <= TILE_ORDER:
        return linalg.cho_factor(
            A, lower=lower, overwrite_a=overwrite_a, check_finite=False
        )
    factor, info = potrf(A, lower=lower, overwrite_a=overwrite_a)
    if info != 0:
        raise linalg.LinAlgError(
            f"{info}-th leading minor of the array is not positive definite"
        )
    return factor, lower


def potri(factor, overwrite_c=False):
    """LAPACK's ``dpotri`` for a lower Cholesky factor, by tiles above
    :data:`TILE_ORDER` (``dpotri``'s ``dlauum`` is a syrk).

    Returns ``(H, info)``: the lower triangle of ``A^{-1}`` for
    ``A = L L^T``, its strict upper triangle zero.  Above the tile order,
    ``A^{-1} = L^{-T} L^{-1}``, the tiled Gram matrix of the rows of
    ``L^{-1}`` (LAPACK's triangular inverse).
    """
    n = factor.shape[0]
    if n <= TILE_ORDER:
        return lapack.dpotri(factor, lower=1, overwrite_c=overwrite_c)
    L_inv, info = lapack.dtrtri(factor, lower=1)
    if info != 0:
        return L_inv, info
    return _finish(gram(L_inv), lower=True), 0


def inverse_traces(factor, tile=None):
    """``(diag H, ||H||_F^2)`` of ``H = (L L^T)^{-1}`` from a lower
    Cholesky factor ``L`` (Fortran order), overwritten by ``L^{-1}``; None
    where ``L`` is singular.

    ``H = L^{-T} L^{-1}``: its diagonal holds the squared norms of the
    columns of ``L^{-1}``, and its tiles, ``p x`` ``tile`` (default
    :data:`UPDATE_COLUMNS`) at a time, are summed as they come, with no
    second ``p x p`` array (``dpotri`` would form ``H``).
    """
    tile = UPDATE_COLUMNS if tile is None else tile
    L_inv, info = lapack.dtrtri(factor, lower=1, overwrite_c=1)
    if info != 0:
        return None
    clear_upper(L_inv)  # LAPACK leaves the other triangle as it was
    diagonal = np.einsum("ij,ij->j", L_inv, L_inv)
    squares = 0.0
    for start, stop in _tile_edges(0, L_inv.shape[0], tile):
        # H[start:, start:stop]: the rows of L^{-1} above ``start`` are zero
        # in these columns.  The diagonal tile counts once, the tiles below
        # it twice (for those above).
        below = L_inv[start:, start:]
        block = below.T @ below[:, : stop - start]
        width = stop - start
        squares += float(np.einsum("ij,ij->", block[:width], block[:width]))
        squares += 2.0 * float(np.einsum("ij,ij->", block[width:], block[width:]))
    return diagonal, squares


@contextlib.contextmanager
def one_blas_thread_above(order):
    """Run the block on one BLAS thread if ``order`` exceeds the tile order.

    For the LAPACK routines with syrk updates and no tiled form here
    (pivoted Cholesky, ``dpstrf``): OpenBLAS's single-threaded syrk ran at
    every order measured.
    """
    if order <= TILE_ORDER:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
