"""Landmark selection: one pure step from the data to the landmarks.

:func:`select_landmarks` applies a sampling rule at a fixed rank or at the
automatic rank of the doubling estimate and returns everything the
transformer stores and the estimators consume, as one
:class:`LandmarkSelection`: nothing is left on an object for later.
"""

import math
from typing import NamedTuple

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels

from . import _dask, _memory
from ._certificate import NOISE_SHARE
from ._estimate import (
    EXACT_FRACTION,
    OBJECTIVES,
    RankRequest,
    certified_estimate,
    estimate_from_access,
)
from ._landmark_block import PLAIN_FIT
from ._progress import SILENT
from ._rank import dof_rank
from ._sampling import extended_factor, uniform_columns

# Rows of the first subsample a certified rank reads, and the rows per
# column of a subsample's factor (see _certified_landmarks).
MIN_CERTIFICATE_ROWS = 8192
_ROWS_PER_COLUMN = 2

#: :attr:`LandmarkSelection.estimate` of a certified rank whose degrees of
#: freedom are those an int fit on its uniform landmarks reports: the
#: fitted transformer computes them from ``K(I, I)`` on the first read of
#: ``dof_`` (``O(p^3)``), as it does for an int fit.
LANDMARK_DOF = "landmarks"


class LandmarkSelection(NamedTuple):
    """The result of :func:`select_landmarks`.

    Attributes
    ----------
    landmarks : ndarray
        Row indices of the landmarks (1-D), or landmark points that are not
        training rows (2-D, from a selector).
    gram : ndarray of shape (p, p)
        The landmark block ``K(I, I)``.
    estimate : tuple, "landmarks" or None
        ``(d_max, d_eff, d_ave, n_columns)`` of the doubling estimate
        (automatic rank only), or :data:`LANDMARK_DOF`: those of an int fit
        on the landmarks, left to the first read of ``dof_``.
    factor : PartialCholesky or None
        The partial Cholesky factor of the rows grown on the way, when the
        rule needed one; its first pivots are the landmarks (rows only).
    loss : float or None
        The certificate's estimated relative excess loss at the rank chosen
        (certified automatic rank only).
    requested : int or None
        The rank the certificate asks for when ``max_components`` stopped it
        short of ``loss_tol``.
    alpha : float or None
        The penalty the rank was certified for, when a grid was given.
    start : NewtonResult or None
        The certificate's logistic fit on the landmarks' leading columns of
        the factor (:attr:`~sklearn_dof._certificate.LossCertificate.fit`,
        its coefficients cut to the rank chosen): the caller's Newton
        method starts there.
    cap : int or None
        The largest rank an automatic rank could take (:func:`_rank_cap`;
        None for an int rank).
    """

    landmarks: np.ndarray
    gram: np.ndarray
    estimate: tuple | None
    factor: object | None
    loss: float | None = None
    requested: int | None = None
    alpha: float | None = None
    start: object = None
    cap: int | None = None

    @property
    def points(self):
        """Whether the landmarks are points rather than row indices."""
        return self.landmarks.ndim == 2


def select_landmarks(
    access,
    X,
    rule,
    n_components,
    alpha,
    tol,
    random_state,
    kernel,
    *,
    request=PLAIN_FIT,
    loss_tol=0.01,
    max_components=None,
    progress=SILENT,
):
    """Landmarks of ``rule`` at rank ``n_components`` (an int, ``"auto"`` or
    ``"dof"``).

    ``"auto"`` with a ``request.response`` grows the rule's nested landmarks by
    doubling until the :class:`~sklearn_dof._certificate.LossCertificate`
    of the factor certifies a rank whose estimated relative excess loss is
    at most ``loss_tol``, and takes the smallest such rank; ``"dof"`` (and
    ``"auto"`` without a response, on a Dask array, or for given rows) grows
    them until the degrees of freedom the rule reads (``rule.rank_statistic``,
    at ``alpha / request.curvature``) have converged and takes
    :func:`~sklearn_dof.dof_rank` of the estimate.
    Either way the landmarks are a prefix of the grown sequence, so nothing
    is recomputed, and the rank is at most ``max_components``.

    Parameters
    ----------
    access : KernelColumns
        The data and the kernel (or its Dask counterpart).
    X : array
        The validated data, passed to a selector.
    rule : SamplingRule
        From :func:`~sklearn_dof._samplers.resolve_sampling`.
    n_components : int, "auto" or "dof"
        An int already clipped to ``n_samples``.
    alpha, tol, random_state
        The penalty, the d.o.f. estimate's tolerance and the rule's seed.
    kernel : str or callable
        The kernel as the estimator was given it (``access.params`` are its
        keyword arguments), for the block of landmark points.
    request : FitRequest, default=PLAIN_FIT
        What the caller fits on the landmarks: the model a certified rank
        is for (``response``, ``center``, ``objective``; with
        ``penalties`` the rank is for the grid's penalty of smallest
        leave-one-out error), and ``exact_solve``: the caller fits exact
        kernel ridge from ``K`` itself when every row is a landmark.  Then
        a certified rank whose next round would be every row stops there,
        and its landmarks are all the rows with no factor (which would cost
        several times that fit to grow), and the cap may be ``n``
        (:func:`_rank_cap`).
    loss_tol : float, default=0.01
        Relative excess loss the certified rank allows.
    max_components : int, default=None
        Cap of an automatic rank (None: from the memory budget,
        :func:`~sklearn_dof._memory.default_max_components`).
    progress : Progress, default=SILENT
        Where the rounds of an automatic rank report
        (:class:`~sklearn_dof._progress.Progress`).

    Returns
    -------
    selection : LandmarkSelection
    """
    source = _Source(access, X, rule, random_state, kernel)
    max_rank = _rank_cap(access, max_components, request)
    mode = _rank_mode(n_components, source, request)
    if mode == "certified":
        selection = _certified_landmarks(
            source, alpha, request, loss_tol, max_rank, progress
        )
    elif mode == "dof":
        selection = _dof_landmarks(
            source, alpha / request.curvature, tol, max_rank, progress
        )
    else:
        selection = _fixed_rank_landmarks(source, n_components, alpha)
        max_rank = None
    return _with_landmark_gram(selection._replace(cap=max_rank), source)


class _Source(NamedTuple):
    """The data, the sampling rule and its seed, which every route of
    :func:`select_landmarks` draws its landmarks from."""

    access: object
    X: object
    rule: object
    random_state: object
    kernel: object

    def select(self, n_components):
        """The landmark points of a selector rule (``rule.select``)."""
        precomputed = isinstance(self.kernel, str) and self.kernel == "precomputed"
        return self.rule.select(self.X, n_components, self.random_state, precomputed)


def _rank_cap(access, max_components, request):
    """The largest automatic rank: ``max_components`` or the default cap
    from the memory budget, at most ``n``; ``n`` itself where the caller
    fits exact kernel ridge, ``max_components`` is left to the budget and
    ``K`` fits it (past half of the rows the rounds end in the exact fit;
    not on a Dask cluster, where the rank follows the paper's rule)."""
    n_samples = access.n_samples
    if (
        request.exact_solve
        and max_components is None
        and not isinstance(access, _dask.DaskKernelColumns)
        and _memory.fits_exact(n_samples)
    ):
        return n_samples
    return min(n_samples, max_components or _memory.default_max_components())


def _rank_mode(n_components, source, request):
    """``"certified"``, ``"dof"`` or the int rank: ``"auto"`` is certified
    where there is a response to certify it on, a rule that reads the
    degrees of freedom, and NumPy data."""
    if n_components != "auto":
        return n_components
    certified = (
        request.response is not None
        and source.rule.estimate_rule().rank_statistic is not None
        and not isinstance(source.access, _dask.DaskKernelColumns)
    )
    return "certified" if certified else "dof"


def _fixed_rank_landmarks(source, n_components, alpha):
    """The rule's landmarks at an int rank (with its factor, if it grows
    one)."""
    if hasattr(source.rule, "select"):
        return _selected(source.select(n_components))
    landmarks, chol = source.rule.fixed_rank_landmarks(
        source.access, n_components, source.random_state, alpha
    )
    return _selected(landmarks, factor=chol)


def _selected(landmarks, **fields):
    """A :class:`LandmarkSelection` still without its block ``K(I, I)``."""
    fields.setdefault("estimate", None)
    fields.setdefault("factor", None)
    return LandmarkSelection(landmarks, None, **fields)


def _with_landmark_gram(selection, source):
    """``selection`` with its landmark block ``K(I, I)``."""
    landmarks = selection.landmarks
    access = source.access
    if landmarks.shape[0] == 0:
        # A kernel that vanishes on the data leaves the residual-driven
        # rules nothing to pivot on; one landmark gives the (zero) features
        # the estimators then fit as an intercept.
        landmarks = uniform_columns(access.n_samples, 1, source.random_state)
    gram = landmark_block(landmarks, access, source.kernel)
    return selection._replace(landmarks=landmarks, gram=gram)


def landmark_block(landmarks, access, kernel):
    """``K(I, I)`` of ``landmarks``: row indices into ``access``'s data, or
    points (a 2-d array)."""
    if landmarks.ndim == 2:
        gram = pairwise_kernels(
            landmarks, metric=kernel, filter_params=True, **access.params
        )
        return np.asarray(gram, dtype=access.dtype)
    return access.landmark_gram(landmarks)


def _dof_landmarks(source, alpha, tol, max_rank, progress):
    """The degrees-of-freedom rule of :func:`select_landmarks`: grow the
    rule's landmarks until the statistic it reads has converged, and take
    :func:`~sklearn_dof.dof_rank` of the estimate (all of them for given
    landmarks)."""
    access, rule = source.access, source.rule
    estimate_rule = rule.estimate_rule()
    dof, chol, grow = estimate_from_access(
        access,
        alpha,
        None,
        tol,
        source.random_state,
        estimate_rule,
        certify_d_eff=False,
        bounds=False,
        statistic=estimate_rule.rank_statistic,
        max_rank=max_rank,
    )
    requested = None
    if estimate_rule.rank_statistic is None:  # given landmarks: all of them
        n_components = len(chol.pivots)
    else:
        n_components = dof_rank(
            dof.d_max, estimate_rule.name, access.n_samples, d_eff=dof.d_eff
        )
        if n_components > max_rank:
            requested, n_components = n_components, max_rank
        progress(
            f"degrees of freedom over {dof.n_columns} columns: "
            f"d_max {dof.d_max:.1f}, d_eff {dof.d_eff:.1f}; rank {n_components}"
        )
    if hasattr(rule, "select"):
        landmarks = source.select(n_components)
    elif grow.order is not None:
        # A sequence fixed in advance: the landmarks are its first
        # n_components entries, with or without the estimate's factor.
        landmarks = grow.order[:n_components].copy()
    else:
        # Every rule's pivots are a prefix of one sequence.
        if len(chol.pivots) < n_components:
            grow(n_components)
        landmarks = np.asarray(chol.pivots[:n_components], dtype=np.intp)
    return _selected(
        landmarks, estimate=estimate_of(dof), factor=chol, requested=requested
    )


def certificate_rows(n_samples, max_rank, random_state):
    """The most rows a certified rank up to ``max_rank`` reads: None for
    all of them, else the sorted uniform subsample whose factor fits
    :func:`~sklearn_dof._memory.factor_budget`, and at least
    :data:`_ROWS_PER_COLUMN` rows per column of ``max_rank`` (as every
    smaller subsample has).  Where ``max_rank`` passes the default cap of
    the budget, those rows decide: the factor then holds ``16 max_rank^2``
    bytes, twice the ``p x p`` float64 landmark block of an int fit at
    ``max_rank``."""
    max_rows = max(
        _memory.factor_budget() // (8 * max_rank), _ROWS_PER_COLUMN * max_rank
    )
    if n_samples <= max_rows:
        return None
    return np.sort(uniform_columns(n_samples, max_rows, random_state))


def certificate_ladder(n_samples, max_rank, random_state):
    """The rows each attempt of a certified rank reads, fewest first: sorted
    uniform subsamples of :data:`MIN_CERTIFICATE_ROWS` rows times powers of
    2, each at most half of :func:`certificate_rows` (drawn from those
    rows), then those rows themselves (None: all of them)."""
    top = certificate_rows(n_samples, max_rank, random_state)
    count = n_samples if top is None else top.shape[0]
    ladder = []
    rows = MIN_CERTIFICATE_ROWS
    while 2 * rows <= count:
        pick = np.sort(uniform_columns(count, rows, random_state))
        ladder.append(pick if top is None else top[pick])
        rows *= 2
    ladder.append(top)
    return ladder


def estimate_of(dof):
    """``(d_max, d_eff, d_ave, columns)`` of a :class:`DegreesOfFreedom`."""
    return (dof.d_max, dof.d_eff, dof.d_ave, dof.n_columns)


def _settled(certificate, loss_tol):
    """Whether the rounds behind ``certificate`` stopped on their own
    evidence (a whole doubling within ``loss_tol`` on a resolved factor, or
    the exact method), not on their cap."""
    certified = certificate.certified_rank(loss_tol)
    plateau = certified is not None and 2 * certified <= certificate.rank
    return certificate.complete or (plateau and certificate.resolved)


def _rows_needed(certificate, loss_tol, rows, capped):
    """The rows the next attempt of a certified rank needs and why, or
    ``(None, None)`` where the ``rows`` that ``certificate`` read suffice.

    They do not where the rounds stopped on their ``capped`` subsample's
    cap rather than on a whole doubling within ``loss_tol`` (the rows bound
    the rank), nor where the certified rank owes more than
    :data:`NOISE_SHARE` of ``loss_tol`` to the standard errors of the
    leave-one-out means: the rows, not the kernel, would then decide the
    rank.  Standard errors fall as the square root of the rows, so that
    share asks for ``rows (noise / (share tol))^2`` rows.
    """
    if not _settled(certificate, loss_tol):
        if not capped:
            return None, None
        columns = certificate.rank
        return 2 * rows, f"no whole doubling certified within {columns} columns"
    if certificate.exact or certificate.complete:
        return None, None
    certified = certificate.certified_rank(loss_tol)
    noise = certificate.noise_at(certified)
    allowed = NOISE_SHARE * loss_tol
    if noise <= allowed:
        return None, None
    reason = f"standard errors of {noise:.2g} at rank {certified}, above {allowed:.2g}"
    return rows * (noise / allowed) ** 2, reason


def _certified_landmarks(source, alpha, request, loss_tol, max_rank, progress):
    """The certified automatic rank of :func:`select_landmarks`.

    The rank a penalty needs follows ``lambda = alpha / n``, not ``n``, and
    the certificate needs rows enough for its standard errors, not all of
    them: the rounds first read a uniform subsample of
    :data:`MIN_CERTIFICATE_ROWS` rows at the same ``lambda``, with at most
    half of them as columns (:func:`certificate_ladder`).  Where
    those rounds stop on their cap, not on a whole doubling within
    ``loss_tol``, they start again on twice the rows, from the columns
    reached; where the standard errors take more than
    :data:`NOISE_SHARE` of ``loss_tol`` at the certified rank, on as many
    rows as bring them within it (:func:`_rows_needed`).  The last rows
    are all of them, or, where the factor of ``rows x max_rank`` numbers
    would pass :func:`~sklearn_dof._memory.factor_budget`, the subsample
    that fits it.  On a subsample the landmarks are subsample rows.
    """
    rounds = _ladder_rounds(source, alpha, request, loss_tol, max_rank, progress)
    n_samples = source.access.n_samples
    if rounds.certificate.exact and rounds.certificate.rank > rounds.chol.rank:
        return _every_row(rounds, n_samples)
    objective = OBJECTIVES[request.objective]
    rank, requested = _chosen_rank(
        rounds.certificate, loss_tol, n_samples, max_rank, objective
    )
    return _certified_selection(source, request, rounds, rank, requested)


class _CertifiedRounds(NamedTuple):
    """The certified rounds that chose the rank (:func:`_ladder_rounds`).

    ``dof``, ``chol``, ``grow`` and ``certificate`` as
    :func:`~sklearn_dof._estimate.certified_estimate` returns them; ``rows``
    the rows they read (None: all of them) and ``alpha`` the penalty
    certified, on every row's scale (None without a grid).
    """

    dof: object
    chol: object
    grow: object
    certificate: object
    rows: np.ndarray | None
    alpha: float | None


def _ladder_rounds(source, alpha, request, loss_tol, max_rank, progress):
    """The rounds of :func:`_certified_landmarks` on the rows of
    :func:`certificate_ladder`, or, for a loss without subsamples
    (:attr:`~sklearn_dof._estimate.Objective.subsamples`), on every row the
    budget allows (:func:`certificate_rows`), as a :class:`_CertifiedRounds`."""
    access, random_state = source.access, source.random_state
    n_samples = access.n_samples
    if OBJECTIVES[request.objective].subsamples:
        ladder = certificate_ladder(n_samples, max_rank, random_state)
    else:
        ladder = [certificate_rows(n_samples, max_rank, random_state)]
    penalties = request.penalties
    asked = RankRequest(
        alpha,
        loss_tol,
        random_state,
        source.rule.estimate_rule(),
        request.response,
        request.center,
        max_rank,
        objective=request.objective,
        progress=progress,
    )
    first, attempt = None, 0
    while True:
        rows = ladder[attempt]
        last = attempt == len(ladder) - 1
        cap = max_rank if last else min(max_rank, rows.shape[0] // _ROWS_PER_COLUMN)
        subset, scale, response = access, 1.0, request.response
        if rows is None and attempt:
            progress(f"the rank is certified on all {n_samples} rows")
        if rows is not None:
            progress(f"the rank is certified on {len(rows)} of the {n_samples} rows")
            subset = access.row_subset(rows)
            scale = len(rows) / n_samples
            response = response[rows]
        dof, chol, grow, certificate, chosen = certified_estimate(
            subset,
            asked._replace(
                alpha=alpha * scale,
                response=response,
                max_rank=cap,
                penalties=None if penalties is None else np.asarray(penalties) * scale,
                every_row_exact=request.exact_solve and rows is None,
                first=first,
                hand_over=request.hand_over and last,
            ),
        )
        needed, reason = _rows_needed(
            certificate, loss_tol, subset.n_samples, cap < max_rank
        )
        if last or needed is None:
            break
        progress(f"{reason}: more rows")
        # The rounds on more rows start from the columns reached.
        first = certificate.rank
        attempt += 1
        while attempt < len(ladder) - 1 and ladder[attempt].shape[0] < needed:
            attempt += 1
    certified_alpha = None if penalties is None else chosen / scale
    return _CertifiedRounds(dof, chol, grow, certificate, rows, certified_alpha)


def _every_row(rounds, n_samples):
    """The selection of rounds stopped before the round to every row
    (``exact_solve``): all the rows, in the order the rule would have
    pivoted them where it is fixed in advance (the landmarks of the complete
    factor), else its pivots first."""
    order = rounds.grow.order
    if order is None or len(order) < n_samples:
        pivots = np.asarray(rounds.chol.pivots, dtype=np.intp)
        rest = np.setdiff1d(np.arange(n_samples), pivots, assume_unique=True)
        order = np.concatenate([pivots, rest])
    landmarks = np.asarray(order[:n_samples], dtype=np.intp).copy()
    return _selected(
        landmarks, estimate=estimate_of(rounds.dof), loss=0.0, alpha=rounds.alpha
    )


def _chosen_rank(certificate, loss_tol, n_samples, max_rank, objective):
    """The rank the last round's ``certificate`` gives the landmarks, and
    the rank it asks for where it certified none (else None)."""
    rank = certificate.certified_rank(loss_tol)
    if rank is not None and not certificate.resolved:
        # The cap's round on an unresolved factor: no rank below it is
        # vouched for (see _estimate._round_certificate), and where the cap
        # stopped the rounds short of the kernel's rank, more columns would
        # still change the fit: at least a doubling more is asked for.
        if certificate.complete or certificate.rank < max_rank:
            return certificate.rank, None
        return certificate.rank, min(n_samples, 2 * certificate.rank)
    if rank is not None and certificate.complete and rank > EXACT_FRACTION * n_samples:
        # Near n, exact: the rows that remain cost little more.
        rank = certificate.rank
    if rank is not None and objective.keeps_grown_rank:
        # Its rounds' last fit, at the rank grown, is paid for, and their
        # plateau lies past the rank certified: the model keeps every column.
        rank = certificate.rank
    if rank is None:
        return certificate.rank, certificate.requested_rank(loss_tol, n_samples)
    return rank, None


def _certified_selection(source, request, rounds, rank, requested):
    """The :class:`LandmarkSelection` of the certified ``rank`` of
    ``rounds`` (a :class:`_CertifiedRounds`)."""
    chol, certificate, rows = rounds.chol, rounds.certificate, rounds.rows
    columns = np.asarray(chol.column_pivots[:rank], dtype=np.intp)
    selector = hasattr(source.rule, "select")
    # The estimate of an int fit on exactly the landmarks (the uniform
    # pivots of a log-loss's rounds, which keep them all): the fitted
    # transformer computes it on the first read of dof_, not the fit.
    landmark_dof = getattr(rounds.dof, "landmarks", None)
    deferred = not selector and np.array_equal(columns, landmark_dof)
    # A factor not resolved down to the penalty, short of the rank asked
    # for, certifies no loss.
    unresolved = requested is not None and not certificate.resolved
    fields = {
        "estimate": LANDMARK_DOF if deferred else estimate_of(rounds.dof),
        "loss": math.inf if unresolved else float(certificate.loss(rank)),
        "requested": requested,
        "alpha": rounds.alpha,
    }
    if selector:
        return _selected(source.select(max(rank, 1)), **fields)
    if (columns < 0).any():  # columns mixing pivots: their prefix of pivots
        columns = np.asarray(chol.pivots[:rank], dtype=np.intp)
    elif certificate.fit is not None:
        # The landmarks are the factor's first columns, in order: the
        # certificate's fit, cut to them, starts the caller's.
        fit = certificate.fit
        fields["start"] = fit._replace(coef=fit.coef[:, :rank].copy())
    if rows is not None:
        n_samples = source.access.n_samples
        if _extends(request, source, n_samples, columns):
            # The caller keeps its n x p features: the subsample's rows of
            # them are the factor's, the other rows one kernel block each.
            chol = extended_factor(chol, rows, columns, source.access)
            return _selected(rows[columns], factor=chol, **fields)
        return _selected(rows[columns], **fields)
    return _selected(columns, factor=chol, **fields)


def _extends(request, source, n_samples, columns):
    """Whether a rank certified on a subsample hands the caller its factor
    extended to every row (:func:`~sklearn_dof._sampling.extended_factor`):
    where the caller keeps the ``n x p`` features
    (``request.features_bytes``), on landmarks that are rows of the
    factor's pivots, of a kernel evaluated from the rows (not
    precomputed)."""
    kernel = source.kernel
    return bool(
        not (isinstance(kernel, str) and kernel == "precomputed")
        and len(columns)
        and (np.asarray(columns) >= 0).all()
        and 8 * n_samples * len(columns) <= request.features_bytes
    )
