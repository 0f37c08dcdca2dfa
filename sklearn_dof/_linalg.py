"""Dense linear algebra of the Nystroem method: small pure functions.

Everything here works on in-memory arrays of at most ``n x p`` (by blocks of
rows) or ``p x p``: the shrinkage ``t / (t + alpha)`` behind the degrees of
freedom, quadratic forms ``diag(G A^-1 G^T)``, and the factorisations of the
landmark block ``K(I, I)`` (Cholesky, shifted Cholesky, or the
pseudo-inverse square root) with the map :class:`LandmarkBasis` from sums
over kernel blocks to the features' basis.  The Dask back-end applies the
same functions chunk by chunk.
"""

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from . import _parallel, _tiles
from ._blocks import for_row_blocks
from ._tiles import mirror_lower


def shrinkage(eigvals, alpha):
    """t / (t + alpha), the operator-monotone map from K to K (K + alpha I)^-1."""
    eigvals = np.clip(eigvals, 0, None)
    return eigvals / (eigvals + alpha)


def quadratic_forms(G, A):
    """diag(G A^-1 G^T) for a symmetric positive definite A, in O(n r^2)."""
    # With A = C C^T, the forms are the squared row norms of G C^-T, a
    # triangular product.  A >= alpha I keeps the triangular inverse
    # accurate enough for scores.
    C_inv = lower_triangular_inverse(_tiles.cholesky(A))
    trmm = linalg.get_blas_funcs("trmm", (C_inv,))
    forms = np.empty(G.shape[0])

    # Row blocks that the allocator reuses: no n x r temporary, whose first
    # touch costs more than the product on machines that back memory lazily.
    def work(slices):
        # scipy's trmm holds the GIL: a worker of a parallel pass takes
        # numpy's general product (twice the flops, on every core) instead.
        triangular = not _parallel.in_worker()
        for rows in slices:
            if triangular:
                # G_b C^-T from the right, in place in a column-major float64
                # copy of G_b: the factor's own layout, so the copy moves
                # contiguous columns (a strided transpose would not).
                Z = np.array(G[rows], dtype=np.float64, order="F")
                Z = trmm(1.0, C_inv, Z, side=1, lower=1, trans_a=1, overwrite_b=1)
            else:
                Z = G[rows].astype(np.float64, copy=False) @ C_inv.T
            forms[rows] = np.einsum("ij,ij->i", Z, Z)

    for_row_blocks(work, *G.shape)
    return forms


# Order of the diagonal blocks that lower_triangular_inverse inverts whole.
_TRIANGULAR_BLOCK = 128


def lower_triangular_inverse(L, overwrite=False):
    """Inverse of a nonsingular lower triangular matrix, lower triangular.

    By halves, ``[[A, 0], [B, C]]^{-1} = [[A^-1, 0], [-C^-1 B A^-1, C^-1]]``:
    about ``r^3 / 2`` flops in numpy's general products, against ``2 r^3``
    for ``np.linalg.inv``, which knows no triangle (LU, then its inverse).
    numpy's products and LAPACK only, so the work stays in numpy's BLAS
    thread pool (scipy's ``trtri`` is a second one, see
    doc/architecture.rst).

    With ``overwrite`` (a float64 ``L`` whose strict upper triangle is zero,
    as a Cholesky factor's is) the inverse takes the memory of ``L``: each
    block below the diagonal is read before it is written, so the halves
    need one temporary of a quarter of ``L`` (``B A^{-1}``), not a second
    ``r x r`` array.
    """
    if overwrite and isinstance(L, np.ndarray) and L.dtype == np.float64:
        out = L
    else:
        L = np.asarray(L, dtype=np.float64)
        out = np.zeros_like(L)
    _invert_lower_into(L, out)
    return out


def _invert_lower_into(L, out):
    r = L.shape[0]
    if r <= _TRIANGULAR_BLOCK:
        if r:
            out[...] = np.tril(np.linalg.inv(L))
        return
    h = r // 2
    _invert_lower_into(L[:h, :h], out[:h, :h])
    _invert_lower_into(L[h:, h:], out[h:, h:])
    # -C^-1 (B A^-1), both products of general shape; B A^-1 is a new array,
    # so out may be L itself.
    lower_left = out[h:, :h]
    np.matmul(out[h:, h:], L[h:, :h] @ out[:h, :h], out=lower_left)
    np.negative(lower_left, out=lower_left)


# Eigenvalues of K(I, I) below this fraction of the largest are treated as
# zero in the pseudo-inverse square root: they come from duplicated or
# nearly dependent landmarks and would only amplify rounding errors.
PINV_RTOL = 1e-12


def landmark_eigh(W, rtol=PINV_RTOL):
    """Eigendecomposition of the landmark Gram ``K(I, I)``, small ones zeroed.

    A float32 block carries only about 1e-7 relative precision: eigenvalues
    below that are noise and the threshold follows the block's dtype.
    Returns the kept eigenvalues, the eigenvectors, and the eigenvalues as
    computed (for :func:`check_landmark_gram`).
    """
    rtol = max(rtol, 10 * np.finfo(W.dtype).eps)
    W = 0.5 * (W + W.T)
    eigvals, eigvecs = linalg.eigh(W.astype(np.float64))
    keep = eigvals > rtol * max(eigvals.max(initial=0.0), np.finfo(float).tiny)
    return np.where(keep, eigvals, 0.0), eigvecs, eigvals


def inverse_sqrt(W, rtol=PINV_RTOL):
    """Symmetric pseudo-inverse square root ``W^{+1/2}`` of a PSD matrix."""
    return inverse_sqrt_from_eigh(*landmark_eigh(W, rtol)[:2])


def inverse_sqrt_from_eigh(eigvals, eigvecs):
    keep = eigvals > 0
    scaled = eigvecs[:, keep] / np.sqrt(eigvals[keep])
    return scaled @ eigvecs[:, keep].T


def landmark_cholesky(gram, rtol=PINV_RTOL):
    """Upper Cholesky factor ``R`` of ``K(I, I) = R^T R``, or None.

    ``K(x, I) R^{-1}`` and ``K(x, I) K(I, I)^{-1/2}`` are the same Nystroem
    features up to an orthogonal rotation, and ``R`` costs ``p^3 / 3``
    flops against about ``9 p^3`` for the eigendecomposition and the
    square root.  None when ``K(I, I)`` is not numerically positive
    definite: when the Cholesky factorisation fails, or when LAPACK's
    estimate of its reciprocal condition number falls below ``rtol``, the
    relative level below which the pseudo-inverse drops eigenvalues
    (:func:`landmark_eigh`).
    """
    # Its upper triangle: the block is symmetric up to rounding, and
    # check_landmark_gram warns when it is not.
    gram = np.asarray(gram, dtype=np.float64)
    R, info = _tiles.potrf(gram, lower=False)
    if info != 0:
        return None
    # LAPACK's 1-norm, read in place: the 1-norm of a C-ordered array is
    # the infinity norm of its Fortran-ordered transpose.
    if gram.flags.c_contiguous:
        norm = lapack.dlange("I", gram.T)
    else:
        norm = lapack.dlange("1", gram)
    rcond, info = lapack.dpocon(R, norm, uplo="U")
    if info != 0 or not rcond >= rtol:
        return None
    return R


# A shift of K(I, I) at most this fraction of the penalty on the landmark
# block's scale (see shifted_landmark_cholesky).
SHIFT_PENALTY_FRACTION = 1e-2


def shifted_landmark_cholesky(
    gram, landmark_penalty, rtol=PINV_RTOL, overwrite_gram=False
):
    """``(R, s)`` with ``R^T R = K(I, I) + s I``, or None.

    For the blocks :func:`landmark_cholesky` refuses (duplicated or
    numerically dependent landmarks), at the same ``p^3 / 3`` flops instead
    of the ``9 p^3`` of the pseudo-inverse square root.  The shift
    ``s = rtol ||K(I, I)||_1`` (at least ``rtol`` times the largest
    eigenvalue) bounds the condition number by about ``1 / rtol``, the level
    at which the pseudo-inverse drops eigenvalues.  The features
    ``K(x, I) R^{-1}`` give ``L_s = K(:, I) (K(I, I) + s I)^{-1} K(I, :)``:
    each direction of ``K(I, I)`` with eigenvalue ``mu`` enters scaled by
    ``mu / (mu + s)``, so the ones the pseudo-inverse keeps (``mu >= s``)
    lose at most half, those far above it nothing, and the ones it drops
    (duplicated landmarks) nearly vanish.  In the ridge objective
    the shift is an extra penalty ``alpha s ||beta||^2`` on the dual weights
    (Falkon shifts its landmark block the same way).  ``p`` uniform
    landmarks see the spectrum of ``K`` scaled by ``p / n``, and with it the
    penalty: ``landmark_penalty = alpha p / n``.  The shift is taken only when
    it is below 1% of that, where ridge regression damps the directions it
    perturbs anyway; else, and for a block that the shift does not make
    positive definite (a kernel that is not PSD), None: the pseudo-inverse.

    ``overwrite_gram``: factor in the memory of ``gram`` (see
    :func:`landmark_factor`) where it is a writeable C-ordered float64
    array and the shift is taken.
    """
    gram = np.asarray(gram, dtype=np.float64)
    shift = _landmark_shift(gram, landmark_penalty, rtol)
    if shift is None:
        return None
    in_place = overwrite_gram and _writeable(gram)
    return _shifted_cholesky(gram, shift, in_place)


def _landmark_shift(gram, landmark_penalty, rtol):
    """The shift of :func:`shifted_landmark_cholesky`, None where the
    penalty refuses it."""
    # ||K||_1 as the infinity norm of K^T, a Fortran-ordered view: f2py
    # would copy C-ordered K into Fortran order first (3.2 GB at p = 20,000).
    shift = rtol * max(float(lapack.dlange("I", gram.T)), np.finfo(float).tiny)
    return None if shift > SHIFT_PENALTY_FRACTION * landmark_penalty else shift


def _writeable(gram):
    return gram.dtype == np.float64 and gram.flags.c_contiguous and gram.flags.writeable


def _shifted_cholesky(gram, shift, in_place):
    shifted = gram if in_place else gram.copy()
    shifted[np.diag_indices_from(shifted)] += shift
    # Factored in place (above the tile order, where a p x p array counts):
    # the shifted block is gram + s I, never kept.
    R, info = _tiles.potrf(shifted, lower=False, overwrite_a=True)
    if info != 0:
        return None
    return R, shift


#: From this many landmarks on, :func:`landmark_factor` factors the shifted
#: block first.  A large uniform landmark block is usually numerically
#: singular, and the unshifted factorisation that its condition estimate
#: then refuses costs as much as the shifted one, ``p^3 / 3`` flops each, so
#: that trying it first about doubles the factorisation's time
#: (doc/design/large_ranks.rst, "Measurements behind the code's choices").
#: Falkon always shifts.
SHIFT_FIRST_COMPONENTS = 8192


def landmark_factor(gram, landmark_penalty, rtol=PINV_RTOL, overwrite_gram=False):
    """``(R, s, consumed)``: the upper Cholesky factor ``R`` of ``K(I, I)``
    (:func:`landmark_cholesky`, ``s = 0``) or, where that is refused, of the
    shifted block ``K(I, I) + s I`` (:func:`shifted_landmark_cholesky`);
    ``R`` None when neither has one (the pseudo-inverse's case).

    From :data:`SHIFT_FIRST_COMPONENTS` landmarks on, the shifted block is
    tried first, when its shift is small enough for the penalty; with
    ``overwrite_gram`` (and ``gram`` a writeable C-ordered float64 array)
    it is then factored in the memory of ``gram``, which saves a ``p x p``
    copy (3.2 GB at ``p = 20,000``, the peak of a fit at that rank), and
    ``consumed`` is True: ``gram`` is ``R`` itself or, when even the shifted
    block has no factor, garbage.  That failure ends the search, since
    ``K + s I`` not positive definite for ``s > 0`` rules out ``K``.
    """
    gram = np.asarray(gram, dtype=np.float64)
    shift_first = gram.shape[0] >= SHIFT_FIRST_COMPONENTS
    if shift_first:
        shift = _landmark_shift(gram, landmark_penalty, rtol)
        if shift is not None:
            in_place = overwrite_gram and _writeable(gram)
            factor = _shifted_cholesky(gram, shift, in_place)
            if factor is not None or in_place:
                return (*(factor or (None, 0.0)), in_place)
    R = landmark_cholesky(gram, rtol)
    if R is not None:
        return R, 0.0, False
    if not shift_first:
        factor = shifted_landmark_cholesky(gram, landmark_penalty, rtol)
        if factor is not None:
            return (*factor, False)
    return None, 0.0, False


class LandmarkBasis:
    """The map ``N`` of the features ``Phi = K(x, I) N`` in the kernel basis.

    Either ``N = R^{-1}`` for the Cholesky factor ``R`` of ``K(I, I)``
    (applied by triangular solves, never formed) or a given matrix, the
    fitted ``normalization_.T``.  ``_ridge_solve.KernelBasisRidgeProblem``
    sums over kernel blocks and maps the ``p x p`` sums with it.
    """

    def __init__(
        self, cholesky=None, gram=None, matrix=None, shift=0.0, landmark_gram=None
    ):
        self.cholesky = cholesky
        # K(I, I) and the shift s of the block R factors: R^T R = K + s I.
        self._gram, self.shift = gram, shift
        # Recomputes K(I, I) where the factorisation overwrote it, or after
        # release_gram (only the direct solve reads it).
        self._landmark_gram = landmark_gram
        self.matrix = matrix

    @property
    def gram(self):
        """``K(I, I)`` (float64), recomputed on first use if let go."""
        if self._gram is None and self._landmark_gram is not None:
            self._gram = np.asarray(self._landmark_gram(), dtype=np.float64)
        return self._gram

    def release_gram(self):
        """Let ``K(I, I)`` go (the conjugate gradients read ``R`` alone)."""
        if self._landmark_gram is not None:
            self._gram = None

    def ridge_solver(self, G, alpha):
        """``rhs -> (N^T G N + alpha I)^-1 rhs`` without forming ``N^T G N``.

        With ``N = R^{-1}`` (``R^T R = K(I, I) + s I``), ``N^T G N + alpha I =
        R^{-T} (G + alpha (K(I, I) + s I)) R^{-1}``, whose inverse is
        ``R (G + alpha (K(I, I) + s I))^{-1} R^T``: one
        Cholesky factorisation in the kernel basis (``p^3 / 3`` flops, against
        ``p^3`` for the map of ``G``) and two triangular products per
        solve.  None for a matrix basis, or when rounding makes
        ``G + alpha (K(I, I) + s I)`` indefinite.
        """
        if self.cholesky is None:
            return None
        A = np.multiply(self.gram, alpha)
        A[np.diag_indices_from(A)] += alpha * self.shift
        A += G
        try:
            # A symmetric C-ordered array is its own Fortran-ordered
            # transpose: LAPACK factors it in place, no p x p copy.
            factor = _tiles.cho_factor(A.T, lower=True, overwrite_a=True)
        except linalg.LinAlgError:
            return None
        R = self.cholesky

        def solve(rhs):
            return R @ linalg.cho_solve(factor, R.T @ rhs, check_finite=False)

        return solve

    def map(self, V):
        """``N V``: from feature weights to landmark (dual) weights."""
        if self.matrix is not None:
            return self.matrix @ V
        # (R is the estimator's own finite factor: no check of p^2 entries
        # at every step of the conjugate gradients.)
        return linalg.solve_triangular(
            self.cholesky, V, lower=False, check_finite=False
        )

    def map_t(self, V):
        """``N^T V``: from sums over kernel blocks to the features' basis."""
        if self.matrix is not None:
            return self.matrix.T @ V
        return linalg.solve_triangular(
            self.cholesky, V, trans="T", lower=False, check_finite=False
        )

    def congruence(self, G):
        """``N^T G N`` of a symmetric ``G``."""
        if self.matrix is not None:
            NtGN = self.matrix.T @ (G @ self.matrix)
            return 0.5 * (NtGN + NtGN.T)
        # LAPACK's two-sided reduction R^{-T} G R^{-1}: half the flops of
        # two triangular solves, since it uses the symmetry of G.
        C, info = lapack.dsygst(G, self.cholesky, itype=1, lower=0)
        if info != 0:  # pragma: no cover - only for invalid arguments
            raise linalg.LinAlgError(f"dsygst failed with info={info}.")
        # Its upper triangle, mirrored: the lower one of its transpose.
        mirror_lower(C.T)
        return C
