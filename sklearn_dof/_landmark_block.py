"""The landmark block ``K(I, I)``: how a fit factors it, decided once.

A Nystroem fit needs the map ``N`` of the features ``K(x, I) N`` with
``N N^T = K(I, I)^+``.  Which factorisation gives it depends on what the
landmark selection left behind and on what the caller fits next; there are
four routes, and :func:`plan_block` picks one before anything is computed:

=================== ==========================================================
route               when, and what it costs
=================== ==========================================================
``PREFIX``          The landmarks are the first pivots of the rows' partial
                    Cholesky factor ``G`` (a certified automatic rank, a
                    greedy rule): ``K(:, I) = G[:, :p] R`` with
                    ``R = G[I, :p]^T`` triangular.  Nothing to factor, and
                    ``G[:, :p]`` are the training features.
``DIRECT``          Every row is a landmark and the caller solves exact
                    kernel ridge with ``K + alpha I`` itself: nothing to
                    factor here either.
``CHOLESKY``        A caller fitting in the kernel basis
                    (:class:`~sklearn_dof._linalg.LandmarkBasis`):
                    ``R^T R = K(I, I) + s I``, ``p^3 / 3`` flops, the shift
                    ``s`` small beside the penalty.  An ill-conditioned
                    block refuses it, and the fit goes on by ``EIGH``.
``EIGH``            Otherwise ``N = K(I, I)^{+1/2}`` from the
                    eigendecomposition (about ``9 p^3`` flops): the map of
                    :meth:`DoFNystroem.transform`, defined for any
                    symmetric block.
=================== ==========================================================

:func:`factor_block` runs the plan and :func:`caller_factors` hands the
caller what its next step uses; the classes below are those hand-overs.
"""

from typing import NamedTuple

import numpy as np

from . import _dask, _linalg
from ._blocks import mirror_lower
from ._sampling import PrefixSums, factor_sums
from ._validation import NON_PSD_KERNELS, check_landmark_gram, is_always_psd

PREFIX = "prefix"
DIRECT = "direct"
CHOLESKY = "cholesky"
EIGH = "eigh"

_DESCRIPTIONS = {
    PREFIX: "the Cholesky factor read off the rows' factor",
    DIRECT: "every row, the exact kernel",
    CHOLESKY: "a Cholesky factor",
    EIGH: "the pseudo-inverse square root",
}


class FitRequest(NamedTuple):
    """What the caller of a Nystroem fit needs from it.

    Attributes
    ----------
    response : ndarray of shape (n_samples, n_targets) or None
        Targets (float64) of the ridge a certified automatic rank is for;
        with ``objective="logistic"`` the class indices (shape
        ``(n_samples,)``) of a binary logistic regression, or the indicator
        matrix of the classes (one column each) of a multinomial one.
    center : bool
        Whether that model fits an intercept.
    penalties : ndarray or None
        A grid whose best penalty by leave-one-out the rank is certified
        for; it becomes the transformer's ``alpha_``.
    objective : {"squared", "logistic"}
        The loss the certified rank is for.
    kernel_basis : bool
        The caller fits in the kernel basis and needs a Cholesky factor of
        ``K(I, I)``, not ``normalization_`` (which then waits for its first
        read).
    exact_solve : bool
        The caller fits exact kernel ridge from ``K`` when every row is a
        landmark (for kernels PSD by construction, in
        float64: see :meth:`resolved`).
    triangular : bool
        The caller takes the training features ``K(x, I) R^{-1}`` in the
        basis of a Cholesky factor ``R`` of ``K(I, I)`` (``p^3 / 3``
        flops), not in ``normalization_``'s (an eigendecomposition, about
        ``9 p^3``), which then waits for its first read.
    curvature : float
        A bound ``c`` on the second derivative of the caller's loss in its
        decision values (1 for the squared loss's ``(y - f)^2 / 2``): the
        degrees-of-freedom rule reads the degrees of freedom at
        ``alpha / c``, those of Newton's quadratic model when every
        curvature is at its bound (a ridge regression weighted by ``c``
        is ridge regression at ``alpha / c``).
    features_bytes : int
        Memory up to which the caller keeps the ``n x p`` training
        features (0: it streams them): a rank certified on a subsample of
        the rows then hands it the subsample's factor extended to every
        row (:func:`~sklearn_dof._sampling.extended_factor`).
    hand_over : bool
        The caller certifies ranks past the cap by other means (held-out
        rounds): the certified rounds on every row stop before a round at
        the cap that their certificate says will not certify
        (:class:`~sklearn_dof._estimate.RankRequest`).
    """

    response: np.ndarray | None = None
    center: bool = True
    penalties: np.ndarray | None = None
    objective: str = "squared"
    kernel_basis: bool = False
    exact_solve: bool = False
    triangular: bool = False
    curvature: float = 1.0
    features_bytes: int = 0
    hand_over: bool = False

    def resolved(self, kernel, dtype):
        """This request with ``exact_solve`` only where ``K + alpha I`` is
        known to be positive definite: other kernels keep the pseudo-inverse
        of the PSD part of ``K(I, I)`` that ``check_landmark_gram`` warns
        about."""
        exact = self.exact_solve and dtype != np.float32 and is_always_psd(kernel)
        return self._replace(exact_solve=bool(exact))


#: The request of a transformer fitted on its own.
PLAIN_FIT = FitRequest()


class BlockPlan(NamedTuple):
    """The route of a fit's landmark block, from :func:`plan_block`.

    Attributes
    ----------
    route : {PREFIX, DIRECT, CHOLESKY, EIGH}
        The factorisation planned (``CHOLESKY`` may end in ``EIGH``).
    exact : bool
        The features span the exact kernel: every distinct row is a
        landmark (a complete factor of the rows), or every row is.
    points : bool
        The landmarks are points given by a selector, not row indices.
    """

    route: str
    exact: bool
    points: bool


class LandmarkBlock(NamedTuple):
    """The landmark block factored, from :func:`factor_block`.

    ``route`` is the one taken; ``cholesky`` and ``shift``: ``R^T R =
    K(I, I) + shift I`` (``PREFIX``, ``CHOLESKY``); ``eigvals``, ``eigvecs``
    and ``normalization`` (``K(I, I)^{+1/2}`` in the data's dtype): the
    ``EIGH`` route's; ``features``: the rows' factor's leading columns
    (``PREFIX``); ``consumed``: the factorisation overwrote the selection's
    ``K(I, I)``, which callers then recompute where they need it.
    """

    route: str
    cholesky: np.ndarray | None = None
    shift: float = 0.0
    eigvals: np.ndarray | None = None
    eigvecs: np.ndarray | None = None
    normalization: np.ndarray | None = None
    features: np.ndarray | None = None
    consumed: bool = False

    @property
    def description(self):
        """The route in words, for the progress line."""
        text = _DESCRIPTIONS[self.route]
        return text + (f", shifted by {self.shift:.3g}" if self.shift else "")


def _leads_factor(chol, landmarks):
    """Whether the landmarks (row indices) are the pivots behind the first
    ``p`` columns of the rows' factor."""
    if chol is None or _dask.is_dask_array(chol.factor) or landmarks.ndim != 1:
        return False
    p = landmarks.shape[0]
    return bool(
        0 < p <= chol.rank
        and np.array_equal(np.asarray(chol.column_pivots[:p]), landmarks)
    )


def plan_block(selection, kernel, request, n_samples):
    """The :class:`BlockPlan` of a fit, from its
    :class:`~sklearn_dof._landmarks.LandmarkSelection`, the kernel and the
    caller's (resolved) :class:`FitRequest`."""
    landmarks, chol, points = selection.landmarks, selection.factor, selection.points
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    leads = not precomputed and not points and _leads_factor(chol, landmarks)
    p = landmarks.shape[0]
    every_row = bool(
        not points and p == n_samples and np.unique(landmarks).size == n_samples
    )
    exact = every_row or bool(leads and chol.complete and p == chol.rank)
    if leads:
        route = PREFIX
    elif request.exact_solve and every_row:
        route = DIRECT
    elif (request.kernel_basis or request.triangular) and not precomputed:
        route = CHOLESKY
    else:
        route = EIGH
    return BlockPlan(route, exact, points)


def factor_block(plan, selection, alpha, n_samples, kernel, dtype, landmark_gram=None):
    """Run ``plan`` on the landmark block: a :class:`LandmarkBlock`.

    Warns when the block is not PSD (``check_landmark_gram``): from the
    eigenvalues on the ``EIGH`` route, from the factorisation otherwise.
    Given ``landmark_gram``, a callable that recomputes ``K(I, I)``, a
    large block may be factored in its own memory
    (:func:`~sklearn_dof._linalg.landmark_factor`); should that fail, the
    pseudo-inverse reads the block recomputed.
    """
    gram = selection.gram
    p = gram.shape[0]
    block = None
    # A kernel known not to be PSD is checked from the block after its
    # factorisation (check_landmark_gram): kept whole.
    in_place = landmark_gram is not None and not (
        isinstance(kernel, str) and kernel in NON_PSD_KERNELS
    )
    consumed = False
    if plan.route == PREFIX:
        # A pivot's row has no residual left for the later columns, so
        # G[I, :p] is lower triangular.
        G = selection.factor.factor[:, :p]
        R = np.triu(np.asarray(G[selection.landmarks], dtype=np.float64).T)
        block = LandmarkBlock(PREFIX, cholesky=R, features=G)
    elif plan.route == DIRECT:
        block = LandmarkBlock(DIRECT)
    elif plan.route == CHOLESKY:
        # The shift the penalty tolerates: alpha / n per row of lambda, on
        # the p rows of the block.
        if in_place:
            # (Its symmetry, read while it is there.)
            check_landmark_gram(gram, kernel, positive_definite=True)
        R, shift, consumed = _linalg.landmark_factor(
            gram, alpha * p / n_samples, overwrite_gram=in_place
        )
        if R is not None:
            block = LandmarkBlock(CHOLESKY, cholesky=R, shift=shift, consumed=consumed)
            if consumed:
                return block
    if block is not None:
        # (DIRECT: a kernel PSD by construction.)
        check_landmark_gram(gram, kernel, positive_definite=True)
        return block
    if consumed:
        gram = landmark_gram()
    eigvals, eigvecs, raw_eigvals = _linalg.landmark_eigh(gram)
    check_landmark_gram(gram, kernel, raw_eigvals)
    normalization = _linalg.inverse_sqrt_from_eigh(eigvals, eigvecs)
    return LandmarkBlock(
        EIGH,
        eigvals=eigvals,
        eigvecs=eigvecs,
        normalization=normalization.astype(dtype, copy=False),
        consumed=consumed,
    )


def caller_factors(block, selection):
    """What the caller's next step uses: :class:`EveryRow` (``DIRECT``),
    :class:`LandmarkFactors` (a Cholesky factor), or None (``EIGH``: the
    caller reads ``normalization_``)."""
    if block.route == DIRECT:
        return EveryRow(selection.gram)
    if block.route == EIGH:
        return None
    if block.route == PREFIX:
        p = block.cholesky.shape[0]
        return LandmarkFactors(
            block.cholesky,
            selection.gram,
            None,
            block.features,
            PrefixSums(selection.factor, p),
            start=selection.start,
        )
    # The partial Cholesky factor of the rows when there is one (see
    # LandmarkFactor; not with the pseudo-inverse basis, whose map amplifies
    # that factor's rounding beyond what the refinement recovers from,
    # measured on an ill-conditioned K(I, I)).
    rows = None
    if not selection.points:
        rows = rows_factor(selection.factor, selection.landmarks)
    return LandmarkFactors(
        block.cholesky,
        selection.gram,
        rows,
        shift=block.shift,
        start=selection.start,
    )


def rows_factor(chol, landmarks):
    """``chol`` if every landmark (a row index) is a pivot behind one of its
    columns, else None.

    ``K(x, I) = g(x) G_I^T`` holds for those pivots; a dropped one (a
    duplicated point) leaves it exact only up to the drop threshold.
    """
    if chol is None or _dask.is_dask_array(chol.factor):
        return None
    if not np.isin(landmarks, np.asarray(chol.column_pivots)).all():
        return None
    return chol


class LandmarkFactors(NamedTuple):
    """What a kernel-basis fit needs from ``DoFNystroem._fit``, for that
    one fit: the Cholesky factor ``R`` of the (shifted) landmark block,
    ``R^T R = K(I, I) + shift I``, the block ``K(I, I)``, the rows' partial
    Cholesky factor when its pivots include the landmarks (else None), and
    the training features ``K(:, I) R^{-1}`` when they are the leading
    columns of that factor, with their sums (:class:`PrefixSums`), and the
    certificate's model fit on them (``LandmarkSelection.start``)."""

    cholesky: np.ndarray
    gram: np.ndarray
    rows: object
    features: np.ndarray | None = None
    sums: object = None
    shift: float = 0.0
    start: object = None


class EveryRow(NamedTuple):
    """Every training row is a landmark: ``K(I, I)`` (rows in landmark
    order), for an exact kernel ridge fit (:attr:`FitRequest.exact_solve`)."""

    gram: np.ndarray


class LandmarkFactor:
    """The kernel-basis sums of a fit from the partial Cholesky factor of
    the rows, when its pivots include the landmarks.

    A factor ``G`` (``n x r``, ``L = G G^T``) holds every column it pivoted
    on exactly, ``K(x, I) = g(x) G_I^T`` with ``G_I = G[I]``, so the sums
    that ``_ridge_solve.KernelBasisRidgeProblem`` otherwise accumulates over
    kernel blocks (``n p^2`` flops) follow from ``G^T G`` in ``O(p r^2)``:
    ``K_c^T K_c = G_I (G^T G - n m m^T) G_I^T`` and
    ``K_c^T y_c = G_I G^T y_c``, ``m`` the mean row of ``G``.  The
    non-uniform rules grow that factor anyway and their d.o.f. estimate
    computes ``G^T G``; the automatic rank has it from its last round.  The
    centring happens in the factor's basis, where the features are bounded
    by the kernel's diagonal, before the map ``G_I`` to the kernel basis:
    its cancellation is not amplified the way a centring of ``K^T K`` would
    be.  The factor's own rounding, though, grows with ``1 / sqrt`` of its
    smallest pivots: at tiny penalties the refinement may not converge from
    these sums, and ``KernelBasisRidgeProblem`` then sums over the kernel
    blocks.  Unweighted rows only (``G^T S G`` would cost a pass of its own).
    """

    def __init__(self, chol, landmarks):
        self.chol = chol
        self.landmarks = landmarks

    def normal_equations(self, y):
        """``(K_c^T K_c, K_c^T y_c, mean row of K, mean of y)``, as
        ``_blocks.normal_equations`` of the kernel blocks with unit weights
        and an intercept."""
        G_I = self.chol.factor[self.landmarks].astype(np.float64, copy=False)
        centred, rhs, g_mean, y_mean = factor_sums(self.chol, self.chol.rank, y)
        gram = G_I @ (centred @ G_I.T)
        mirror_lower(gram)  # exactly symmetric, as the block sums are
        return gram, G_I @ rhs, G_I @ g_mean, y_mean
