r"""The loss certificate of a nested Nystroem approximation (squared loss;
the binomial and multinomial log-losses in :func:`logistic_certificate`).

How much prediction accuracy does rank ``q`` give up against exact kernel
ridge regression at the same penalty?  The certificate answers with the
exact leave-one-out error ``LOO(q)`` of the ridge fit on the first ``q``
landmarks of a nested sequence, an estimate of that fit's test error,
against its value at the largest rank ``r`` grown, the estimate of the
exact fit's:

.. math:: \mathrm{loss}(q) = \max_{q \le s \le r}
          \frac{\mathrm{LOO}_s(s) + 2\,\mathrm{se}_s}{\mathrm{LOO}_s(r)} - 1
          + \tau,

where ``LOO_s`` averages the squared leave-one-out residuals over the rows
that are not among the first ``s`` landmarks (see :class:`LossCertificate`),
``se_s`` is the standard error of the paired difference of the two means,
and ``tau``, the tail, extrapolates the decrease of ``LOO`` over the last
doublings of the rank as a geometric series of doublings, whose ratio reads
two doublings where one is quiet (:func:`_decrease_ratio`; zero once the
rank is that of ``K``). The maximum over the larger ranks makes the
certificate non-increasing along the nested ranks, so the smallest certified
rank is a threshold, not a lucky dip. ``LOO`` at every rank of a grid costs
one factorisation and one pass over the factor (:func:`loo_curve`).

Why this estimate (the measurements are in doc/design/automatic_rank.rst,
"Why this estimate"; ``benchmarks/bench_auto_rank.py`` checks the ranks
against their oracle):

* the ridge objective ``J(L) = alpha y^T (L + alpha I)^{-1} y`` decreases
  along nested ranks and ``J(L_q) - J(K) >= ||z_q - z_K||^2`` bounds how far
  the approximate fit is from the exact one; but a low-rank fit is also a
  more regularised one, and on real data the excess objective overstated
  the loss of test error many times over, which multiplies the rank;
* generalised cross-validation, ``LOO`` with every leverage replaced by
  their mean, inflates near full rank at small penalties, where the
  leverages are far from equal, and then certifies ranks whose test error
  is well above the exact fit's.
"""

import math

import numpy as np
from scipy.special import expit, logsumexp, softmax

from . import _tiles
from ._blocks import FeatureBlocks, for_row_blocks, normal_equations
from ._linalg import lower_triangular_inverse
from ._loo import loo_residuals, ridge_spectrum, squared_sums
from ._newton import DEFAULT_MAX_HESSIAN_BYTES, CurvatureFactor, logistic_newton
from ._sampling import PrefixSums

# Ratio of the decrease of GCV over the last doubling to the one before it
# beyond which the tail is not extrapolated (the decrease has not started to
# shrink), and the floor of the ratio (an abrupt drop in one doubling is no
# evidence that the next one will be as small).
_RATIO_MAX = 0.9
_RATIO_MIN = 0.25
# Bytes of a block of the factor's rows in the certificate's pass.
_BLOCK_BYTES = 8 * 2**20
# Columns of the factor on which the penalty of a grid is chosen: the choice
# settles long before the rank does (256 and 1,024 columns chose the same
# penalty on every regression set measured), and its eigendecomposition
# costs r^3 (doc/design/cross_validation.rst, "The penalty on low-rank
# fits").
PENALTY_RANK = 256
# Floor of the logistic curvature p (1 - p) (a probability of 1e-12).
_CURVATURE_FLOOR = 1e-12
# Floor of 1 - h_i: a leverage of one leaves no point out.
_LEVERAGE_FLOOR = 1e-8
# Floor of the error relative to the variance of the targets: on noise-free
# targets a relative loss is of a vanishing error.
_ERROR_FLOOR = 1e-6
# Rows of the first uniform subsample whose leave-one-out losses a
# two-class certificate reads (logistic_certificate), and the share of
# loss_tol that their standard errors may take at the certified rank before
# more rows are read (they fall as the square root of the rows).
LOO_ROWS = 8192
NOISE_SHARE = 0.25
# Newton's stopping tolerance for the certificate's logistic fits (half the
# squared Newton decrement per unit weight): the leave-one-out log-losses
# need the optimum to a fraction of loss_tol, not to the caller's 1e-8.
_CERTIFICATE_NEWTON_TOL = 1e-5


class LossCertificate:
    """Estimated relative excess test error of the prefix ranks of a factor.

    The excess of rank ``q`` over rank ``r`` is a mean of paired
    differences of squared leave-one-out residuals over the rows that are
    not among the first ``q`` landmarks: a landmark row is fitted with its
    own kernel column in the features, and near full rank those advantaged
    rows would hide the loss on the points that are no landmark, which is
    what a test point is.  The certificate adds ``margin`` standard errors
    of that mean, so that a difference the rows cannot resolve is not taken
    for no difference.

    Parameters
    ----------
    ranks : ndarray of int
        Increasing ranks, from 0 to ``r``.
    squares : ndarray of shape (n, len(ranks))
        Squared leave-one-out residuals of each row at each rank.
    position : ndarray of shape (n,)
        For each row, the rank at which it became a landmark (``r`` or more
        for the rows that are none).
    complete : bool
        Whether rank ``r`` is the rank of ``K`` (no tail).
    floor : float, default=0.0
        Floor of the error the losses are relative to.
    margin : float, default=2.0
        Standard errors added to each estimated excess.

    Attributes
    ----------
    losses : ndarray of shape (len(ranks),)
        Estimated relative excess test error at each rank of the grid.
    tail : float
        The extrapolated decrease beyond rank ``r`` (in ``losses``).
    exact : bool
        Whether this is :meth:`exact_method`'s certificate, estimated from
        no leave-one-out error.
    noise : ndarray of shape (len(ranks),)
        The ``margin`` standard errors in ``losses`` at each rank, relative
        to the error at rank ``r``: the part of the estimated loss that more
        rows would shrink (by the square root of their number).
    leverage_bounds : ndarray of shape (n,) or None
        The leverage scores of the uncentred factor at rank ``r``, when the
        certificate's pass computed them (:func:`loss_certificate`).
    dof : float or None
        The degrees of freedom of the factor's fit at rank ``r``,
        ``tr L (L + alpha I)^{-1}``, curvature-weighted for the logistic
        loss (:func:`logistic_certificate`), when the pass computed them.
    rows_read : int
        The rows whose leave-one-out losses the estimate averages.
    resolved : bool
        Whether the factor's ``L`` carries at most half a degree of freedom
        per column (``dof <= r / 2``; True without ``dof``): a certificate
        of an unresolved factor vouches for its rank ``r`` only, not for a
        plateau below it.
    """

    def __init__(self, ranks, squares, position, complete=False, floor=0.0, margin=2.0):
        self.exact = False
        self.leverage_bounds = None
        self.dof = None
        self.fit = None
        self.rows_read = squares.shape[0]
        self.ranks = ranks
        self.errors = squares.mean(axis=0)
        self.complete = complete
        tiny = max(floor, np.finfo(float).tiny)
        reference = max(float(self.errors[-1]), tiny)
        self.tail = 0.0 if complete else _tail(ranks, self.errors, reference)
        excess, self.noise = _paired_excess(ranks, squares, position, margin, tiny)
        # The running maximum from the right: non-increasing in the rank.
        self.losses = np.maximum.accumulate(excess[::-1])[::-1] + self.tail

    @classmethod
    def exact_method(cls, rank, n_samples):
        """The certificate of the exact kernel method, a factor of ``K``
        itself of ``rank`` columns: no loss at that rank, which is the only
        one it certifies (``exact`` is True)."""
        certificate = cls(
            np.array([rank]), np.zeros((n_samples, 1)), np.full(n_samples, rank), True
        )
        certificate.exact = True
        return certificate

    @property
    def resolved(self):
        r"""Whether ``d_eff(L) = tr L (L + alpha I)^{-1} <= r / 2``: most of
        the ``r`` directions of the factor's ``L`` carry at most half a
        degree of freedom each (documented in the class Attributes).

        Otherwise the ``r``-th eigenvalue of ``L`` is typically still above
        ``alpha``: the columns have not reached the part of the spectrum that
        the penalty cuts off, and a plateau of the leave-one-out error says
        nothing about the directions to come (on the regression sets of
        ``benchmarks/bench_auto_rank.py`` every uncertified round with
        ``d_eff(L) > r / 2`` went on to the exact fit, and the rounds that
        certified had ``d_eff(L)`` well below ``r / 2``:
        doc/design/automatic_rank.rst, "How the rounds stop").
        For the logistic loss ``dof`` is that of Newton's weighted ridge, the
        curvatures ``p (1 - p) <= 1/4`` scaling ``L``.
        """
        return self.dof is None or self.dof <= 0.5 * self.rank

    @property
    def rank(self):
        """The rank ``r`` of the factor the certificate was computed on."""
        return int(self.ranks[-1])

    def _index(self, q):
        """Index of the next rank of the grid at or above ``q``."""
        return min(int(np.searchsorted(self.ranks, q)), self.ranks.shape[0] - 1)

    def loss(self, q):
        """Estimated relative excess test error at rank ``q`` (the next rank
        of the grid at or above it)."""
        return float(self.losses[self._index(q)])

    def noise_at(self, q):
        """The standard errors' share of :meth:`loss` at rank ``q``."""
        return float(self.noise[self._index(q)])

    def certified_rank(self, tol):
        """The smallest rank of the grid whose estimated loss is at most
        ``tol``, or None when even rank ``r`` is not certified."""
        if not self.losses[-1] <= tol:
            return None
        return int(self.ranks[np.argmax(self.losses <= tol)])

    def requested_rank(self, tol, n_samples):
        """The rank the tail's geometric model asks for when rank ``r`` is
        not certified, at most ``n_samples``."""
        certified = self.certified_rank(tol)
        if certified is not None:
            return certified
        ratio = _decrease_ratio(self.ranks, self.errors)
        if ratio is None or ratio >= _RATIO_MAX or not math.isfinite(self.tail):
            return n_samples
        # Each doubling beyond r leaves the tail times ``ratio``.
        ratio = max(ratio, _RATIO_MIN)
        doublings = math.log(tol / self.tail) / math.log(ratio)
        return int(min(n_samples, math.ceil(self.rank * 2.0 ** max(doublings, 1))))


def _paired_excess(ranks, squares, position, margin, tiny):
    """The relative excess of each rank of the grid over rank ``r``, with
    ``margin`` standard errors, on the rows that are no landmark among its
    first ``q`` (see :class:`LossCertificate`), and those standard errors'
    share of it.

    A row that is no landmark of the first ``r`` counts at every rank: the
    sums over those rows are made once, by steps of rows; the landmarks,
    ``r`` rows at most, are added by running sums down decreasing position,
    read at each rank's count of them, rather than running sums over all
    ``n`` rows (three ``n x len(ranks)`` arrays).  The paired differences are centred
    on their means over every row first, so that the variance from sums of
    squares does not cancel.
    """
    excess = np.zeros(ranks.shape[0])
    noise = np.zeros(ranks.shape[0])
    last = squares[:, -1]
    shift = squares[:, :-1].mean(axis=0) - last.mean()
    landmark = position < ranks[-1]
    rest = np.flatnonzero(~landmark)
    head = np.flatnonzero(landmark)
    head = head[np.argsort(-position[head], kind="stable")]
    width = squares.shape[1] - 1
    first, second = np.zeros(width), np.zeros(width)
    step = max(1, _BLOCK_BYTES // (8 * max(width, 1)))
    for start in range(0, rest.shape[0], step):
        rows = rest[start : start + step]
        differences = squares[rows, :-1] - last[rows, None] - shift
        first += differences.sum(axis=0)
        second += np.einsum("ij,ij->j", differences, differences)
    base = float(last[rest].sum())
    differences = squares[head, :-1] - last[head, None] - shift
    head_first = np.cumsum(differences, axis=0)
    head_second = np.cumsum(np.square(differences, out=differences), axis=0)
    head_base = np.cumsum(last[head])
    # Landmarks at or past each rank of the grid (ranks[:-1]), counted too.
    taken = head.shape[0] - np.searchsorted(
        np.sort(position[head]), ranks[:-1], side="left"
    )
    for j, k in enumerate(taken):
        m = rest.shape[0] + k
        if m < 2:
            continue
        total, squared, reference = first[j], second[j], base
        if k:
            total += head_first[k - 1, j]
            squared += head_second[k - 1, j]
            reference += head_base[k - 1]
        mean = total / m
        spread = np.sqrt(max(squared / m - mean**2, 0.0) / (m - 1))
        scale = max(reference / m, tiny)
        excess[j] = (mean + shift[j] + margin * spread) / scale
        noise[j] = margin * spread / scale
    return excess, noise


def loo_curve(
    factor,
    response,
    alpha,
    center=True,
    n_ranks=64,
    weights=None,
    row_loss=None,
    scores=False,
    hessian=False,
):
    """Leave-one-out error of the ridge fit at prefix ranks of a factor.

    With ``G`` the (centred) factor, ``G^T G + alpha I = R R^T``,
    ``Z = G R^{-T}`` and ``u = R^{-1} G^T y``, the fit at rank ``q`` is
    ``z_q = Z[:, :q] u[:q]`` and its leverages are ``h_i(q) = ||Z[i, :q]||^2``
    (plus ``1 / n`` for the intercept): the leading block of a triangular
    factor (and of its inverse) is the factor (the inverse) of the leading
    block.  So one ``O(r^3)`` factorisation and one pass over ``G``,
    ``O(n r^2)``, give the exact leave-one-out error
    ``mean(((y_i - z_i) / (1 - h_i))^2)`` at every rank of the grid.

    Parameters
    ----------
    factor : PartialCholesky
        In-memory factor whose columns are in landmark order.
    response : ndarray of shape (n, n_targets)
        Targets.
    alpha : float
        Penalty.
    center : bool, default=True
        Whether the ridge fits an unpenalised intercept.
    n_ranks : int, default=64
        Number of ranks of the grid, evenly spaced up to ``r``.
    weights : ndarray of shape (n,), default=None
        Positive row weights (None: unweighted; see :class:`LeaveOneOutPass`).
    row_loss : callable, default=None
        ``row_loss(rows, residuals)`` maps the leave-one-out residuals of
        a block of rows, ``sqrt(w_i) (y_i - z_i^{-i})`` of shape
        ``(b, n_targets, n_grid)``, to losses of shape ``(b, n_grid)``
        (None: their squares summed over the targets).
    scores : bool, default=False
        Also return the leverage scores of the uncentred factor at rank
        ``r``, ``diag G (G^T G + alpha I)^{-1} G^T``, the lower bounds of
        the ridge leverage scores that :mod:`sklearn_dof._dof` reports
        (unweighted only; ``alpha`` raised to the Gram matrix's rounding
        level where it is below, as for the leave-one-out errors;
        :meth:`LeaveOneOutPass.losses`).  With ``weights``, the weighted
        scores of the centred factor instead,
        ``diag W^{1/2} G_c (G_c^T W G_c + alpha I)^{-1} G_c^T W^{1/2}``:
        their sum is the degrees of freedom of the weighted ridge.
    hessian : bool, default=False
        Also return the factor of the weighted ridge's Hessian that the pass
        computed, a :class:`~sklearn_dof._newton.CurvatureFactor` (None
        without columns): with ``weights`` the curvatures of a two-class
        logistic fit, the Hessian of that fit.

    Returns
    -------
    ranks : ndarray of int
        ``0`` and the grid, ending at ``r``.
    squares : ndarray of shape (n, len(ranks))
        Squared leave-one-out residuals (summed over the targets), or the
        ``row_loss`` of them, of every row at each rank.
    scores : ndarray of shape (n,)
        Only with ``scores``: the uncentred leverage scores at rank ``r``
        (with ``weights``: the weighted ones of the centred factor).
    hessian : CurvatureFactor or None
        Only with ``hessian``.
    """
    loo = LeaveOneOutPass(
        factor, response, alpha, center, n_ranks, weights, row_loss, scores
    )
    squares, row_scores = loo.losses()
    out = (loo.ranks, squares) + ((row_scores,) if scores else ())
    return out + ((loo.hessian(),) if hessian else ())


class LeaveOneOutPass:
    """The factorisation of :func:`loo_curve`, then its pass over any rows.

    The ``O(r^3)`` factorisation and the weighted Gram matrix read every
    row; the pass that follows (``O(r^2)`` per row) gives each row's
    leave-one-out losses on its own, so a mean over a uniform subsample of
    the rows, with its standard error, costs that subsample's share of the
    pass (:func:`logistic_certificate`).  Parameters as :func:`loo_curve`'s.

    With ``weights`` ``w`` the ridge is weighted (``sum_i w_i (y_i - z_i)^2``,
    the intercept centring with weighted means): the same on the rows
    ``sqrt(w_i) g_i`` and targets ``sqrt(w_i) y_i``, whose Gram matrix costs
    a pass of its own, and the intercept's leverage is ``w_i / sum(w)``.

    Attributes
    ----------
    ranks : ndarray of int
        ``0`` and the grid, ending at ``r``.
    dof : float
        ``tr (H - s I) H^{-1} = r - s ||R^{-1}||_F^2`` with the (weighted,
        centred) ``H = G^T W G + s I = R R^T``: the degrees of freedom of
        the (weighted) ridge, from the factorisation alone.  With
        ``weights`` it is the sum over every row of the scores that
        :meth:`losses` returns with ``scores`` (without, those are the
        uncentred factor's).
    """

    def __init__(
        self,
        factor,
        response,
        alpha,
        center=True,
        n_ranks=64,
        weights=None,
        row_loss=None,
        scores=False,
    ):
        G = factor.factor
        n, r = G.shape
        y = np.asarray(response, dtype=np.float64)
        self.row_loss = _squares if row_loss is None else row_loss
        self.weighted = weights is not None
        self.scores = scores
        if weights is None:
            root = np.ones(n)
            # A copy: it becomes R^{-1} below (the factor keeps its own).
            gram = np.array(factor.gram(), dtype=np.float64)
            total = float(n)
        else:
            root = np.sqrt(weights)
            # G^T diag(w) G, by the blocks' weighted sums (no intercept: the
            # centring follows, as for the factor's own Gram matrix).
            # (A factor of no column, on constant data, has no sums to make.)
            gram = np.zeros((0, 0))
            if r:
                blocks = FeatureBlocks.from_array(np.asarray(G, dtype=np.float64))
                gram = normal_equations(blocks, y, weights, False)[0]
            total = float(weights.sum())
        mean = np.zeros(r)
        if center:
            mean = (root**2 @ G) / total
            y = y - (root**2 @ y) / total
            # In place by blocks of rows: no r x r outer product beside it.
            for start in range(0, r, _PANEL_COLUMNS):
                stop = min(start + _PANEL_COLUMNS, r)
                gram[start:stop] -= total * np.outer(mean[start:stop], mean)
        # The scaled targets: their weighted mean is zero.
        y = root[:, None] * y
        self.G, self.y, self.root, self.mean, self.total = G, y, root, mean, total
        self.leverage = root**2 / total if center else np.zeros(n)
        self.ranks = np.unique(
            np.linspace(0, r, min(n_ranks, r) + 1).round().astype(int)
        )
        self.R_inv = None
        self.dof = 0.0
        if r == 0:
            return
        R_inv, shift = _shifted_inverse_factor(gram, alpha, overwrite_gram=True)
        del gram
        self.R_inv = R_inv
        self.dof = float(r - shift * np.einsum("ij,ij->", R_inv, R_inv))
        # (root G_c)^T y = (root G)^T y, y (scaled) having weighted mean zero.
        u = R_inv @ (G.T.astype(np.float64, copy=False) @ (root[:, None] * y))
        # Rank q's fit and leverages sum the first q columns of Z = G_c R^{-T}:
        # with T the indicator of the grid's prefixes (T[j, g] = 1 for j below
        # its g-th rank), the fits are G_c (R^{-T} diag(u) T) and the
        # leverages (Z * Z) T, products rather than running sums over the
        # columns of every block.
        self.T = (np.arange(r)[:, None] < self.ranks[None, 1:]).astype(np.float64)
        self.fit_map = np.concatenate(
            [R_inv.T @ (u[:, t, None] * self.T) for t in range(y.shape[1])], axis=1
        )
        # R^{-1} m, for the uncentred scores: g_i = (g_i - m) + m.
        self.v = R_inv @ mean
        self.v_sq = float(self.v @ self.v)

    def hessian(self):
        """The factor of the weighted ridge's Hessian, a
        :class:`~sklearn_dof._newton.CurvatureFactor` (None without
        columns)."""
        if self.R_inv is None:
            return None
        return CurvatureFactor(self.R_inv, self.mean, self.total, self.G.shape[0])

    def losses(self, rows=None):
        """The leave-one-out losses of ``rows`` (indices; None: every row)
        at each rank, of shape ``(len(rows), len(ranks))``, and their scores
        at rank ``r`` (None without ``scores``).

        With the intercept the uncentred scores follow from the centred
        ``Z`` of the same pass by the Sherman-Morrison formula
        (``G^T G = G_c^T G_c + n m m^T``): ``O(n r)`` more, instead of a
        pass of ``O(n r^2)`` of their own.
        """
        G, y, root, mean, leverage = self.G, self.y, self.root, self.mean, self.leverage
        n, r = G.shape
        index = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp)
        m = index.shape[0]
        squares = np.empty((m, self.ranks.shape[0]))
        # Rank 0: the intercept alone (nothing without it), its leverages.
        scale = np.maximum(1.0 - leverage[index], _LEVERAGE_FLOOR)
        intercept_only = (y[index] / scale[:, None])[:, :, None]
        squares[:, 0] = self.row_loss(index, intercept_only)[:, 0]
        row_scores = np.zeros(m) if self.scores else None
        if r == 0:
            return squares, row_scores
        R_inv, T, fit_map, v, v_sq = self.R_inv, self.T, self.fit_map, self.v, self.v_sq
        k, width = y.shape[1], T.shape[1]
        weighted, scores, row_loss = self.weighted, self.scores, self.row_loss
        every_row = rows is None

        def work(slices):
            for block in slices:
                # A slice of the factor is a view; a subsample's rows a copy.
                at = block if every_row else index[block]
                G_c = G[at].astype(np.float64) - mean
                if weighted:
                    G_c *= root[at, None]
                # R^{-T} is upper triangular: about half a full product's flops.
                Z = _tiles.times_upper(G_c, R_inv.T)
                if scores and not weighted:
                    Zv = Z @ v
                np.multiply(Z, Z, out=Z)
                leverages = leverage[at, None] + Z @ T
                if scores:
                    centred = leverages[:, -1] - leverage[at]
                    if weighted:
                        row_scores[block] = centred
                    else:
                        # ||R^{-1} g_i||^2, less the rank-one term of n m m^T.
                        cross = Zv + v_sq
                        row_scores[block] = (
                            centred + 2.0 * Zv + v_sq - n * cross**2 / (1.0 + n * v_sq)
                        )
                fitted = (G_c @ fit_map).reshape(-1, k, width)
                scale = np.maximum(1.0 - leverages, _LEVERAGE_FLOOR)
                residuals = (y[at, :, None] - fitted) / scale[:, None, :]
                squares[block, 1:] = row_loss(at, residuals)

        # Blocks of 8 MiB: their temporaries stay in cache and the allocator
        # reuses them from block to block (fresh pages cost more to first touch
        # than the products take).
        for_row_blocks(work, m, r, max_block_bytes=_BLOCK_BYTES)
        return squares, row_scores


def _shifted_inverse_factor(gram, alpha, overwrite_gram=False):
    """``R^{-1}`` with ``gram + s I = R R^T``, and ``s``.

    ``s`` is ``alpha``, or the rounding level of ``gram`` where ``alpha`` is
    below it (which the estimators warn about): the certificate needs a
    factor.  numpy's LAPACK and products: scipy's BLAS is a second thread
    pool, which competes for the cores with numpy's right after its products
    (doc/architecture.rst); ``R^{-1}`` once, then products.

    The shift, the factor and its inverse are made in one ``r x r`` array,
    ``gram`` itself with ``overwrite_gram`` (float64): at the ranks of a
    large automatic rank each such array is 2 GiB (16,384 columns), and the
    ``gram + s I`` of an identity, its factor and its inverse held four.
    """
    r = gram.shape[0]
    shift = max(alpha, r * np.finfo(float).eps * float(np.abs(np.diag(gram)).max()))
    if not (overwrite_gram and gram.dtype == np.float64 and gram.flags.writeable):
        gram = np.array(gram, dtype=np.float64)
    gram.flat[:: r + 1] += shift
    factor = _tiles.cholesky(gram, overwrite_a=True)
    return lower_triangular_inverse(factor, overwrite=True), shift


def factor_d_eff(factor, alpha):
    """``d_eff(L) = tr L (L + alpha I)^{-1}`` of a factor, in ``O(r^3)``.

    The sum of the scores that :func:`loss_certificate` computes row by row
    (``O(n r^2)``), from the factor's Gram matrix alone:
    ``tr G^T G (G^T G + alpha I)^{-1} = r - alpha ||R^{-1}||_F^2`` with
    ``G^T G + alpha I = R R^T`` (``alpha`` at the same rounding floor), so
    that a round can tell whether its factor is resolved
    (:attr:`LossCertificate.resolved`) before it pays for a certificate.
    (A Cholesky factorisation and a triangular inverse, about ``5 r^3 / 6``
    flops, rather than the eigenvalues of the Gram matrix, several times
    that at the ranks of the last rounds.)

    Parameters
    ----------
    factor : PartialCholesky
        In-memory factor.
    alpha : float
        Penalty.

    Returns
    -------
    d_eff : float
    """
    if factor.rank == 0:
        return 0.0
    return inverse_factor_d_eff(factor, alpha)[2]


def inverse_factor_d_eff(factor, alpha):
    """``(R^{-1}, s, d_eff(L))`` of a factor of at least one column: the
    inverse :func:`_shifted_inverse_factor` of its Gram matrix and
    :func:`factor_d_eff` from it, for callers that read ``R^{-1}`` too."""
    gram = np.asarray(factor.gram(), dtype=np.float64)
    R_inv, shift = _shifted_inverse_factor(gram, alpha)
    d_eff = float(factor.rank - shift * np.einsum("ij,ij->", R_inv, R_inv))
    return R_inv, shift, d_eff


def _squares(rows, residuals):
    """Squared residuals summed over the targets, per row and rank."""
    return (residuals**2).sum(axis=1)


# Rows of the Gram matrix centred at a time (an outer product of that many
# rows beside it, not r x r).
_PANEL_COLUMNS = 256


def loss_certificate(factor, response, alpha, center=True):
    """The :class:`LossCertificate` of a partial Cholesky factor, from
    :func:`loo_curve` on its columns.

    Parameters
    ----------
    factor : PartialCholesky
        In-memory factor whose columns are in landmark order.
    response : ndarray of shape (n, n_targets)
        Targets.
    alpha : float
        Penalty.
    center : bool, default=True
        Whether the ridge fits an unpenalised intercept.

    Returns
    -------
    certificate : LossCertificate
    """
    ranks, squares, scores = loo_curve(factor, response, alpha, center, scores=True)
    floor = _ERROR_FLOOR * float(np.var(response, axis=0).sum())
    certificate = _certificate_of(factor, ranks, squares, floor)
    certificate.leverage_bounds = scores
    certificate.dof = float(scores.sum())
    return certificate


def _certificate_of(factor, ranks, losses, floor, rows=None):
    """The :class:`LossCertificate` of per-row leave-one-out losses on the
    factor's prefix ranks (of ``rows``, None: every row)."""
    position = np.full(factor.factor.shape[0], factor.rank)
    columns = np.asarray(factor.column_pivots, dtype=np.intp)
    known = columns >= 0  # columns mixing pivots name no row
    position[columns[known]] = np.flatnonzero(known)
    if rows is not None:
        position = position[rows]
    return LossCertificate(
        ranks, losses, position, complete=factor.complete, floor=floor
    )


def _pivot_rows(factor):
    """The factor's rows at its pivots, ``G_I`` (``r x r``, lower
    triangular: ``G_I G_I^T = K(I, I)``), or None where a column mixes
    pivots."""
    columns = np.asarray(factor.column_pivots[: factor.rank], dtype=np.intp)
    if (columns < 0).any():
        return None
    return np.asarray(factor.factor[columns], dtype=np.float64)


def logistic_certificate(
    factor,
    labels,
    alpha,
    center=True,
    start=None,
    loss_tol=None,
    row_order=None,
    uniform=False,
):
    r"""The :class:`LossCertificate` of the log-loss of logistic regression
    on a partial Cholesky factor's columns: binomial, or multinomial for
    ``labels`` that indicate more than two classes.

    Logistic regression at rank ``r`` (the factor's columns, penalty
    ``alpha``, by Newton's method: :func:`_logistic_fit`) gives the linear
    predictor ``eta``, the curvatures ``w_i = p_i (1 - p_i)`` and the
    working response ``z = eta + (y - p) / w`` (:func:`_working_response`,
    which states the multinomial curvatures).  Newton's quadratic model there
    is the ridge regression of ``z`` weighted by ``w``, whose solution at
    rank ``r`` is the logistic one and whose prefix fits are one Newton step
    towards the logistic fits of the smaller ranks.  :func:`loo_curve` gives
    its exact leave-one-out predictors ``eta^{-i}`` at every rank of the
    grid, the approximate leave-one-out of generalised linear models (Rad
    and Maleki, 2020), and the certificate compares their log-losses
    ``log(1 + exp(-s_i eta^{-i}))`` (``s_i = +-1``) as the ridge one compares
    squared residuals (:func:`_read_rows`): the loss is curvature-weighted
    where the logistic loss is, so points classified with confidence count
    for little.

    Parameters
    ----------
    factor : PartialCholesky
        In-memory factor whose columns are in landmark order.
    labels : ndarray of shape (n,) or (n, m)
        Class indices, 0 or 1; or, for ``m > 2`` classes, the indicator
        matrix of the classes (one column per class, a one per row).
    alpha : float
        Penalty (``C = 1 / alpha``).
    center : bool, default=True
        Whether the model fits an unpenalised intercept.
    start : NewtonResult, default=None
        The fit on the factor's first columns (the previous round's
        :attr:`LossCertificate.fit`), where Newton's method starts.
    loss_tol : float, default=None
        The tolerance the caller certifies: with ``row_order``, the
        leave-one-out losses are read on as many rows as their standard
        errors need at the rank certified (at most
        :data:`NOISE_SHARE` of ``loss_tol``), not on all of them.
    row_order : ndarray of shape (n,), default=None
        A uniformly random order of the rows, whose prefixes are the
        subsamples read: first :data:`LOO_ROWS`, then as many as the
        standard errors ask for (they fall as the square root of the rows).
        None: every row.
    uniform : bool, default=False
        Whether the factor's pivots are a uniform sample of the rows: a
        two-class Newton-CG then preconditions with their rows of the
        factor (:func:`_logistic_fit`).

    Returns
    -------
    certificate : LossCertificate
        With the logistic fit as :attr:`LossCertificate.fit`, and, for two
        classes, its Hessian, factored, as the fit's
        :attr:`~sklearn_dof._newton.NewtonResult.hessian` where it fits the
        solver's default budget (:func:`_with_fit`).
    """
    labels = np.asarray(labels)
    multinomial = labels.ndim == 2
    n_classes = labels.shape[1] if multinomial else 2
    index = labels.argmax(axis=1) if multinomial else labels
    landmarks = uniform and not multinomial
    fit = _logistic_fit(factor, index, n_classes, alpha, center, start, landmarks)
    z, curvature, log_losses = _working_response(factor.factor, labels, index, fit)
    loo = LeaveOneOutPass(
        factor, z, alpha, center, weights=curvature, row_loss=log_losses
    )
    floor = _ERROR_FLOOR * math.log(n_classes)
    certificate = _read_rows(factor, loo, floor, loss_tol, row_order)
    return _with_fit(certificate, loo, fit, multinomial)


def _logistic_fit(factor, index, n_classes, alpha, center, start, landmarks):
    """The logistic fit of :func:`logistic_certificate` at rank ``r``, by
    Newton-CG from ``start``: the factor's columns are nested, and the fit
    of half the columns is close to the optimum, so that a warm start
    takes fewer Newton steps a round than a cold one
    (doc/design/logistic.rst, "Measurements behind the code's choices").
    Its preconditioner is made of the pivots' rows of the factor where
    ``landmarks`` (a uniform sample, two classes), as an int fit does with
    its landmarks, else of the factor's Gram matrix.

    The Newton fit stops at the gradient test: the leave-one-out pass
    forms the exact Hessian at the fit (two classes), and its fit at rank
    ``r`` is one exact Newton step from there, so the decrement needs no
    Hessian of its own.
    """
    G = factor.factor
    features = FeatureBlocks.from_array(np.asarray(G, dtype=np.float64))
    landmark_rows = _pivot_rows(factor) if landmarks else None
    if landmark_rows is not None:
        # Newton-CG's preconditioner from the landmarks' own rows of the
        # factor, as an int fit's (_newton._Problem._nystroem_gram): a
        # uniform sample of the rows, G_I^T G_I / r ~ G^T G / n in r^3 / 3
        # flops, where the factor's Gram matrix costs n r^2 a round (its
        # increments; doc/design/logistic.rst, "Measurements behind the
        # code's choices").  The rounds' fits start warm, and a Hessian
        # product costs n r.  (More classes: a product costs m n r, and the
        # exact Gram matrix pays, as in an int fit.)
        features.cholesky = landmark_rows.T
    else:
        # Newton-CG's Gram matrix from the factor's, which the rounds extend
        # by their new columns only (and the score bounds read at the end).
        features.factor = PrefixSums(factor, G.shape[1])
    return logistic_newton(
        features,
        index,
        alpha,
        n_classes=n_classes,
        fit_intercept=center,
        start=start,
        # Newton-CG: the rounds need the optimum to the accuracy of an
        # estimate, and the Cholesky steps form an n r^2 Hessian each where
        # CG's Gram preconditioner costs one such pass a round
        # (doc/design/logistic.rst, "Measurements behind the code's
        # choices").  Its r x r preconditioner at any rank: the leave-one-out
        # pass below holds r x r matrices too.
        inner_solver="cg",
        max_hessian_bytes=8 * (G.shape[1] + 1) ** 2,
        tol=_CERTIFICATE_NEWTON_TOL,
        # The leave-one-out pass below forms the exact Hessian at the fit,
        # and its fit at rank r is the Newton step from there: no Hessian of
        # its own, an n r^2 pass, to check the decrement
        # (doc/design/logistic.rst, "Measurements behind the code's
        # choices").
        check_decrement=False,
    )


def _working_response(G, labels, index, fit):
    r"""Newton's weighted ridge at the logistic ``fit`` on the factor ``G``:
    the working response ``z`` (one column per logit), the curvatures ``w``
    and the ``row_loss`` of :func:`loo_curve` that maps the leave-one-out
    residuals ``sqrt(w_i) (z_i - eta_i^{-i})`` to the log-losses of the
    predictors ``eta^{-i}``.

    With ``m > 2`` classes the row's curvature is the ``m x m`` matrix
    ``W_i = diag(p_i) - p_i p_i^T`` and Newton's model couples the classes'
    coefficients, a Hessian of ``(m r)^2`` (``n (m r)^2`` flops to form,
    ``(m r)^3 / 3`` to factor: ``m^2`` and ``m^3`` times the two-class
    pass's ``n r^2`` and ``r^3 / 3``; doc/design/logistic.rst,
    "Measurements behind the code's choices").  The certificate replaces
    ``W_i`` by its curvature along the row's own gradient
    ``d_i = y_i - p_i`` (the indicator of its class less its
    probabilities), the Rayleigh quotient ``w_i = d_i^T W_i
    d_i / d_i^T d_i``: every class then shares the row weights ``w`` and one
    factorisation serves the ``m`` targets ``z_i = eta_i + d_i / w_i``.  Any
    positive weights keep the fit at rank ``r`` the multinomial one (the
    ridge's normal equations are then the multinomial gradient), and along
    ``d_i``, the direction in which leaving row ``i`` out moves its
    predictor first, the leave-one-out step ``d_i h_i / (w_i (1 - h_i))``
    has the exact curvature; it is that of the binomial certificate for
    ``m = 2`` (``w_i = 2 p_i (1 - p_i)`` in the two logits).  The losses
    are the multinomial log-losses of ``eta^{-i}``.
    """
    multinomial = labels.ndim == 2
    eta = G.astype(np.float64, copy=False) @ fit.coef.T + fit.intercept
    if multinomial:
        p = softmax(eta, axis=1)
        gradient = labels - p
        # d^T W d = sum_k p_k d_k^2 - (p^T d)^2 with W = diag(p) - p p^T.
        along = (p * gradient**2).sum(axis=1) - np.einsum("ij,ij->i", p, gradient) ** 2
        length = np.einsum("ij,ij->i", gradient, gradient)
        curvature = np.maximum(
            along / np.maximum(length, np.finfo(float).tiny), _CURVATURE_FLOOR
        )
        z = eta + gradient / curvature[:, None]
    else:
        eta = eta[:, 0]
        p = expit(eta)
        curvature = np.maximum(p * (1.0 - p), _CURVATURE_FLOOR)
        z = (eta + (labels - p) / curvature)[:, None]
        sign = 2.0 * labels - 1.0
    root = np.sqrt(curvature)

    def log_losses(rows, residuals):
        # residuals: sqrt(w_i) (z_i - eta_i^{-i}), one target per logit.
        eta_out = z[rows, :, None] - residuals / root[rows, None, None]
        if multinomial:
            own = np.take_along_axis(eta_out, index[rows, None, None], axis=1)
            return logsumexp(eta_out, axis=1) - own[:, 0]
        return np.logaddexp(0.0, -sign[rows, None] * eta_out[:, 0])

    return z, curvature, log_losses


def _read_rows(factor, loo, floor, loss_tol, row_order):
    """The :class:`LossCertificate` of the leave-one-out pass ``loo``'s
    losses: of every row, or, with ``row_order`` and ``loss_tol``, of its
    prefixes, from :data:`LOO_ROWS` rows on, until the standard errors at
    the certified rank are within :data:`NOISE_SHARE` of ``loss_tol``."""
    n = factor.factor.shape[0]
    read = n if row_order is None or loss_tol is None else min(n, LOO_ROWS)
    rows = None if read == n else np.sort(row_order[:read])
    losses = loo.losses(rows)[0]
    certificate = _certificate_of(factor, loo.ranks, losses, floor, rows)
    while rows is not None:
        # The rows decide a certified rank only through its standard errors
        # (none certified: the loss at rank r is the tail, from the means):
        # as many more rows as bring them within their share of loss_tol.
        certified = certificate.certified_rank(loss_tol)
        allowed = NOISE_SHARE * loss_tol
        if certified is None or certificate.noise_at(certified) <= allowed:
            break
        needed = read * (certificate.noise_at(certified) / allowed) ** 2
        more = min(n, max(2 * read, math.ceil(needed)))
        extra = np.sort(row_order[read:more])
        losses = np.concatenate([losses, loo.losses(extra)[0]])
        rows = np.concatenate([rows, extra])
        read = more
        if read == n:
            losses, rows = losses[np.argsort(rows)], None
        certificate = _certificate_of(factor, loo.ranks, losses, floor, rows)
    return certificate


def _with_fit(certificate, loo, fit, multinomial):
    """``certificate`` with the pass's degrees of freedom and the logistic
    ``fit``, whose Hessian is the pass's factor for two classes where it
    fits the solver's default budget (the leave-one-out pass factors it
    anyway; a fit from this one preconditions its Newton steps with it)."""
    # The d.o.f. of the weighted ridge: the curvatures are what the logistic
    # loss resolves its directions by (at most 1/4 of the kernel's scale).
    certificate.dof = loo.dof
    # The fit's Hessian, factored for the leave-one-out pass: the
    # preconditioner of the caller's fit from this one, where it fits the
    # budget of the solver's own: a Newton step of a few CG products, n r
    # each, instead of forming an n r^2 Hessian (doc/design/logistic.rst,
    # "Measurements behind the code's choices").  With more classes
    # the pass's shared weights make no multinomial Hessian.
    columns = loo.G.shape[1]
    keep_hessian = not multinomial and 8 * columns**2 <= DEFAULT_MAX_HESSIAN_BYTES
    certificate.fit = fit._replace(hessian=loo.hessian() if keep_hessian else None)
    return certificate


def _at(ranks, errors, q):
    """The error at the grid's rank nearest ``q``."""
    return float(errors[int(np.argmin(np.abs(ranks - q)))])


def _decrease_ratio(ranks, errors):
    """Decrease of the error over the last doubling of the rank over the one
    before, or, where it is larger, the mean ratio over the last two
    doublings (None below four columns or when only the last one
    decreased).

    The error falls in steps, not as a geometric series: a column that
    lands among rows no landmark has covered yet can lower it by a percent
    on its own, and a doubling may see none.  A single quiet doubling after
    a loud one then reads as a fast shrinking decrease, and so as a tail
    near zero: the rank certified is then too low
    (doc/design/automatic_rank.rst, "Measurements behind the code's
    choices").  The mean ratio of the last two doublings,
    ``sqrt(d_3 / d_1)`` for the decreases ``d_1, d_2, d_3`` of the last
    three, is the least-squares slope of the log decreases over the three,
    what the geometric model's ratio is with one doubling's noise; the
    larger of the two is kept, so that a decrease that stopped shrinking
    over the last doubling still counts as such.  On a geometric series
    both are the same."""
    r = int(ranks[-1])
    if r < 4:
        return None
    quarter, half, full = (_at(ranks, errors, q) for q in (r // 4, r // 2, r))
    last, before = half - full, quarter - half
    if last <= 0.0:
        return 0.0
    if before <= 0.0:
        return None
    ratio = last / before
    if r >= 8:
        earlier = _at(ranks, errors, r // 8) - quarter
        if earlier > 0.0:
            ratio = max(ratio, math.sqrt(last / earlier))
    return ratio


def _tail(ranks, errors, reference):
    """Estimated decrease of the error beyond rank ``r``, relative to
    ``reference``: the last doubling's continued as a geometric series of
    doublings (inf while it does not shrink)."""
    ratio = _decrease_ratio(ranks, errors)
    if ratio is None or ratio >= _RATIO_MAX:
        return math.inf
    r = int(ranks[-1])
    last = max(_at(ranks, errors, r // 2) - float(errors[-1]), 0.0)
    ratio = max(ratio, _RATIO_MIN)
    return last / reference * ratio / (1.0 - ratio)


def penalty_errors(
    factor, response, penalties, center=True, max_rank=PENALTY_RANK, block=4096
):
    """Leave-one-out error of the ridge fit on the factor's first columns
    (at most ``max_rank``) at each penalty: one eigendecomposition of their
    Gram matrix (``O(r^3)``) and one pass over them by blocks of rows
    (``O(n r^2)``), then ``O(n r)`` per penalty, as in
    :class:`~sklearn.linear_model.RidgeCV` (:mod:`~sklearn_dof._loo`).

    Returns an array of shape (len(penalties),).
    """
    r = min(factor.rank, max_rank)
    G = factor.factor[:, :r]
    n = G.shape[0]
    y = np.asarray(response, dtype=np.float64)
    if center:
        y = y - y.mean(axis=0)
    penalties = np.asarray(penalties, dtype=np.float64)
    if r == 0:
        return np.full(penalties.shape[0], float((y * y).sum(axis=1).mean()))
    mean = None
    gram = np.asarray(factor.gram(), dtype=np.float64)[:r, :r]
    if center:
        mean = G.mean(axis=0, dtype=np.float64)
        gram = gram - n * np.outer(mean, mean)
    # G^T y_c = G_c^T y_c: the centred targets sum to zero.
    rhs = G.T.astype(np.float64, copy=False) @ y
    spectrum = ridge_spectrum(
        gram, rhs, penalties, offset=mean, total_weight=n if center else None
    )
    squares = np.zeros(penalties.shape[0])
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        residuals = loo_residuals(
            G[rows], y[rows], spectrum, leverage_floor=_LEVERAGE_FLOOR
        )
        squares += squared_sums(residuals)
    return squares / n
