"""The doubling estimate of the degrees of freedom, without the n x n matrix.

Columns are added by a sampling rule (:mod:`~sklearn_dof._samplers`) in
rounds of doubling size, and each round bounds the leverage scores of every
point from the partial Cholesky factor (:mod:`~sklearn_dof._dof`) until the
statistic the rule reads its rank from has converged.  The factor grown on
the way is returned with the estimate: its pivots are the landmarks of an
automatic rank.
"""

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params
from sklearn.utils.validation import check_array

from . import _linalg, _parallel, _tiles
from ._certificate import (
    PENALTY_RANK,
    LossCertificate,
    factor_d_eff,
    inverse_factor_d_eff,
    logistic_certificate,
    loss_certificate,
    penalty_errors,
)
from ._dof import (
    averaged_dof,
    dof_from_factor,
    unclipped_d_eff,
    uniform_landmark_dof,
)
from ._kernels import KernelColumns, get_kernel_params
from ._progress import SILENT
from ._samplers import (
    SAMPLING_OPTIONS,
    SAMPLING_RULES,
    doubling_schedule,
    partial_cholesky_of,
)
from ._validation import KERNEL_CONSTRAINTS, check_kernel_is_psd


@validate_params(
    {
        **KERNEL_CONSTRAINTS,
        "X": ["array-like", "sparse matrix"],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "n_columns": [Interval(Integral, 1, None, closed="left"), None],
        "sampling": [SAMPLING_OPTIONS],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def estimate_degrees_of_freedom(
    X,
    alpha,
    *,
    kernel="rbf",
    gamma=None,
    coef0=None,
    degree=None,
    kernel_params=None,
    n_columns=None,
    sampling="uniform",
    tol=0.1,
    random_state=None,
    n_jobs=None,
):
    """Estimate leverage scores and degrees of freedom from sampled columns.

    Never forms the ``n x n`` kernel matrix: columns ``I`` are drawn uniformly
    and the Nystroem factor of ``K(:, I)`` gives, for every point, a lower
    bound, an upper bound and an estimate of its leverage score (see
    :func:`leverage_score_bounds`).  With ``n_columns=None`` the number of
    columns ``p`` starts at 32 and doubles, reusing the columns already
    evaluated, until the estimates of ``d_eff`` and ``d_max`` move by less
    than ``tol`` (relative) between two doublings, or the ``d_eff`` bracket
    itself is within ``tol``.  Each round costs ``O(n p^2)`` time and the
    factor ``O(n p)`` memory, so the whole estimate costs a constant times one
    round at the final ``p``, which is of the order of ``d_max``.

    ``d_ave`` is estimated from the eigenvalues of the sampled block,
    ``(n / p) eig K(I, I)``, the usual Nystroem estimate of the spectrum.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data, or the ``n x n`` Gram matrix with ``kernel="precomputed"``.
    alpha : float > 0
        Penalty on scikit-learn's scale, ``alpha = n * lambda``.
    kernel : str or callable, default="rbf"
        As in :class:`sklearn.kernel_approximation.Nystroem`.
    gamma, coef0, degree : float, default=None
        Parameters of the built-in kernels.
    kernel_params : dict, default=None
        Extra keyword arguments of the kernel.
    n_columns : int, default=None
        Fixed number of columns; None chooses it adaptively as above.
    sampling : {"uniform", "pivoted", "leverage", "rpcholesky"}, default="uniform"
        How the columns are chosen (see :class:`DoFNystroem`).  The bounds
        hold for any columns; on data with outliers uniform columns can miss
        ``d_max``, which the other rules, drawn to badly explained points,
        find.
    tol : float, default=0.1
        Relative tolerance of the adaptive stopping rule.
    random_state : int, RandomState instance or None, default=None
        Seed of the column sampling.
    n_jobs : int, default=None
        Worker threads of the passes over the rows (see
        :class:`DoFNystroem`).

    Returns
    -------
    dof : DegreesOfFreedom
        Estimates, with guaranteed per-point ``lower`` and ``upper`` bounds and
        the number of columns used, ``n_columns``.

    See Also
    --------
    degrees_of_freedom : Exact values from the full matrix.

    References
    ----------
    .. [1] F. Bach, "Sharp analysis of low-rank kernel matrix approximations",
       COLT 2013.
    .. [2] A. El Alaoui and M. W. Mahoney, "Fast randomized kernel ridge
       regression with statistical guarantees", NeurIPS 2015.

    Examples
    --------
    >>> from sklearn_dof import estimate_degrees_of_freedom
    >>> from sklearn_dof.datasets import make_periodic_spline
    >>> data = make_periodic_spline(1000, beta=2, random_state=0)
    >>> dof = estimate_degrees_of_freedom(data.K, alpha=1e-2,
    ...                                   kernel="precomputed", random_state=0)
    >>> dof.n_columns < 1000
    True
    """
    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32])
    params = get_kernel_params(kernel, gamma, coef0, degree, kernel_params)
    check_kernel_is_psd(kernel)
    access = KernelColumns(X, kernel, params, n_jobs)
    with _parallel.use_n_jobs(n_jobs):
        estimate = estimate_from_access(
            access, alpha, n_columns, tol, random_state, SAMPLING_RULES[sampling]
        )
    return estimate[0]


def estimate_from_access(
    access,
    alpha,
    n_columns,
    tol,
    random_state,
    rule,
    certify_d_eff=True,
    bounds=True,
    statistic="d_max",
    max_rank=None,
):
    """Doubling loop of :func:`estimate_degrees_of_freedom`.

    ``rule`` (a :class:`~sklearn_dof._samplers.SamplingRule`) grows the
    columns.  Returns the estimate, the grown factor, whose pivots a
    Nystroem fit reuses as its landmarks (a prefix of them, or an
    extension), and its :class:`~sklearn_dof._samplers.Growth`.  The rounds
    compute only what the stopping rule reads (the lower bounds,
    ``O(n r^2)`` each); the upper bounds, twice that again, only at the end
    and only with ``bounds``.  ``statistic`` names the degrees of freedom
    the rank will be read from, whose convergence stops the doubling;
    ``max_rank`` caps the columns of the rounds.
    """
    n = access.n_samples
    chol = partial_cholesky_of(access)
    grow = rule.growth(chol, n, random_state, alpha)
    if rule.rank_statistic is None:  # given landmarks: all of them, once
        n_columns = len(grow.order)
    schedule = [min(n_columns, n)] if n_columns is not None else doubling_schedule(n)
    if max_rank is not None and rule.rank_statistic is not None:
        schedule = _capped(schedule, max_rank)
    # Address space for the rounds to come, reserved once: the factor is
    # column-major, so columns never written cost no memory, and no round
    # copies the factor into a larger one (which would touch fresh memory).
    itemsize = np.dtype(chol.diagonal.dtype).itemsize
    # (At most n / 16 columns: a rank beyond that is no low rank, and the
    # reservation must stay far from the n x n matrix.)
    room = min(n // 16, _RESERVE_BYTES // (n * itemsize))
    chol.reserve(min(n, max(schedule[0], room)))
    previous = None
    uniform = rule.uniform_sample
    for p in schedule:
        grow(p)
        if statistic == "d_eff" and n_columns is None and p != schedule[-1]:
            # A round the rule does not stop at only serves as the next one's
            # ``previous``, which needs d_eff alone: skip its O(n r^2) scores
            # when d_eff has an O(r^3) form.  (The last round always returns
            # its scores.)
            d_eff = unclipped_d_eff(chol, alpha)
            if d_eff is not None and not _converged(
                _DEff(d_eff), previous, chol, alpha, tol, certify_d_eff, statistic
            ):
                previous = _DEff(d_eff)
                continue
        # d_ave (an eigendecomposition of the factor's Gram matrix) is not
        # read by the stopping rule: it is computed once, at the end.
        dof = dof_from_factor(
            chol, alpha, n, uniform=uniform, bounds=False, spectrum=False
        )
        if n_columns is not None or _converged(
            dof, previous, chol, alpha, tol, certify_d_eff, statistic
        ):
            break
        previous = dof
    if bounds:
        dof = dof_from_factor(chol, alpha, n, uniform=uniform)
    else:
        dof.d_ave = averaged_dof(chol, alpha, n, uniform)
    return dof, chol, grow


# Address space reserved for the factor of the doubling estimate (see
# estimate_from_access); only the columns written take memory.
_RESERVE_BYTES = 2**30


def _capped(schedule, max_rank):
    """The rounds of ``schedule`` below ``max_rank``, then ``max_rank``."""
    capped = [p for p in schedule if p < max_rank]
    if not capped or capped[-1] < min(max_rank, schedule[-1]):
        capped.append(min(max_rank, schedule[-1]))
    return capped


class RankRequest(NamedTuple):
    """What the rounds of :func:`certified_estimate` certify a rank for.

    Attributes
    ----------
    alpha : float
        The penalty, on the scale of the rows read (``alpha = n lambda``).
    loss_tol : float
        The relative excess loss a certified rank allows.
    random_state : int, RandomState instance or None
        The seed of the rule (and of the log-loss's row order).
    rule : SamplingRule
        The rule whose columns the rounds grow.
    response : ndarray
        The targets of the squared loss, or the class indices (two classes)
        or their indicator matrix (more) of the log-loss.
    center : bool
        Whether the model fits an intercept.
    max_rank : int
        The cap of the rounds' pivots.
    penalties : ndarray or None, default=None
        A grid, for cross-validation: each round certifies the rank for the
        grid's penalty of smallest leave-one-out error
        (:func:`_chosen_penalty`).
    objective : {"squared", "logistic"}, default="squared"
        The loss, a key of :data:`OBJECTIVES`.
    every_row_exact : bool, default=False
        The caller fits exact kernel ridge from ``K`` itself when every row
        is a landmark (squared loss): a round that would reach every row is
        not grown.
    progress : Progress, default=SILENT
        Where each round reports one line
        (:class:`~sklearn_dof._progress.Progress`).
    first : int or None, default=None
        The pivots of the first round (None: :func:`_first_round`).
    hand_over : bool, default=False
        The caller certifies past ``max_rank`` by other means: the rounds
        stop before a round at the cap that their certificate already says
        will not certify (:func:`_hands_over`).
    """

    alpha: float
    loss_tol: float
    random_state: object
    rule: object
    response: np.ndarray
    center: bool
    max_rank: int
    penalties: np.ndarray | None = None
    objective: str = "squared"
    every_row_exact: bool = False
    progress: object = SILENT
    first: int | None = None
    hand_over: bool = False


class Objective:
    """The loss a certified rank is for (base class): what the certified
    rounds do differently for it.

    Attributes
    ----------
    name : str
        The ``objective`` that selects it, its key in :data:`OBJECTIVES`.
    cap_after_next : bool
        A round whose successor would reach the cap grows to the cap at
        once (see :func:`_next_rank`).
    exact_solve : bool
        The caller may fit the exact kernel method from ``K`` itself, so
        that a round that would reach every row need not be grown
        (:attr:`RankRequest.every_row_exact`).
    subsamples : bool
        The rounds first read uniform subsamples of the rows
        (:func:`~sklearn_dof._landmarks.certificate_ladder`) rather than
        every row the factor's budget allows.
    keeps_grown_rank : bool
        The model keeps every column grown, not only the rank certified.
    """

    name = None
    cap_after_next = False
    exact_solve = False
    subsamples = False
    keeps_grown_rank = False

    @property
    def span(self):
        """The rank grown over the rank certified before the rounds stop,
        ``2 ** _PLATEAU_DOUBLINGS[name]``."""
        return 2 ** _PLATEAU_DOUBLINGS[self.name]

    def row_order(self, n_samples, random_state):
        """The order in which the certificates read the rows' leave-one-out
        losses (None: the certificate reads them all)."""
        return None

    def unresolved(self, chol, alpha):
        """Whether the factor ``chol`` is known, without a certificate, not
        to be resolved down to ``alpha``
        (:attr:`~sklearn_dof._certificate.LossCertificate.resolved`)."""
        return False

    def certificate(self, chol, alpha, request, previous, row_order):
        """The :class:`~sklearn_dof._certificate.LossCertificate` of a round
        (``previous``: the round before's, or None)."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class SquaredLoss(Objective):
    """Ridge regression on the targets
    (:func:`~sklearn_dof._certificate.loss_certificate`)."""

    name = "squared"
    exact_solve = True
    subsamples = True

    def unresolved(self, chol, alpha):
        # The factor's Gram matrix tells in O(r^3): its d_eff at the penalty
        # above half of its columns (LossCertificate.resolved's test).
        return factor_d_eff(chol, alpha) > 0.5 * chol.rank

    def certificate(self, chol, alpha, request, previous, row_order):
        return loss_certificate(chol, request.response, alpha, request.center)


class LogLoss(Objective):
    """Logistic regression on the class indices (two classes) or their
    indicator matrix (more)
    (:func:`~sklearn_dof._certificate.logistic_certificate`).

    Its degrees of freedom are weighted by the curvatures of Newton's fit,
    which its certificate makes: every round makes one.  Its leave-one-out
    curve falls slowly for thousands of columns, so a rank certified on a
    subsample of the rows falls short of the one every row certifies: the
    rounds read every row the budget allows.  They grow two doublings past
    the rank they certify, or to the cap, and the last fit, at the rank
    grown, is paid: the model keeps every column, past the rank within
    ``loss_tol`` and on the plateau of the loss.
    """

    name = "logistic"
    cap_after_next = True
    keeps_grown_rank = True

    def row_order(self, n_samples, random_state):
        # Uniformly random: the reverse of a permutation drawn as the
        # uniform rule draws its landmarks', so that with an int seed its
        # first rows are the ones that rule pivots last (no landmark).
        return check_random_state(random_state).permutation(n_samples)[::-1]

    def certificate(self, chol, alpha, request, previous, row_order):
        # Warm from the last round's fit: fewer Newton steps, the same
        # certificate.
        return logistic_certificate(
            chol,
            request.response,
            alpha,
            request.center,
            start=None if previous is None else previous.fit,
            loss_tol=request.loss_tol,
            row_order=row_order,
            uniform=request.rule.uniform_sample,
        )


#: The losses a certified rank is for, by ``objective``.
OBJECTIVES = {objective.name: objective for objective in (SquaredLoss(), LogLoss())}


def certified_estimate(access, request):
    """Rounds of ``request.rule`` until the :class:`LossCertificate` of the
    factor certifies a rank (:func:`_round_certificate`), or
    ``request.max_rank`` pivots, for a :class:`RankRequest`; one line per
    round to ``request.progress``.

    The rank grows from 32 (or ``request.first``) as :func:`_next_rank`
    says.  A factor not resolved down to the penalty far from ``n`` (where
    :meth:`Objective.unresolved` tells without a certificate) makes no
    certificate.  A round that would pass half of ``n`` is the cap's; when
    its factor is complete (the exact kernel method), it gets
    :meth:`LossCertificate.exact_method`: the leave-one-out errors of ``n``
    columns (and their score bounds) would cost several times the exact
    fit; the estimate's bounds come from the round before.  With
    ``every_row_exact`` that round is not even grown: the certificate is
    ``exact_method(n, n)``, on the round before's factor.

    Each round costs the factor's growth, its Gram matrix ``G^T G`` and,
    when it makes a certificate, ``G^T y`` and its leave-one-out pass
    (``O(n r^2)``) and ``O(r^3)``; the score lower bounds behind ``d_max``
    are computed once, at the end.  Returns the estimate (at the penalty
    certified), the factor, its :class:`~sklearn_dof._samplers.Growth`, the
    last round's certificate and the penalty certified.
    """
    n, objective = access.n_samples, OBJECTIVES[request.objective]
    max_rank, progress = min(request.max_rank, n), request.progress
    chol = partial_cholesky_of(access)
    grow = request.rule.growth(chol, n, request.random_state, request.alpha)
    chol.reserve(max_rank)  # address space: only written columns count
    row_order = objective.row_order(n, request.random_state)
    p = _first_round(max_rank, n) if request.first is None else request.first
    p = min(p, max_rank)
    alpha, chosen_on = request.alpha, 0  # chosen on as many columns
    dof = certificate = None
    rounds = 0
    while True:
        before = (len(chol.pivots), chol.rank)
        grow(p)
        rounds += 1
        alpha, chosen_on = _chosen_penalty(chol, request, alpha, chosen_on)
        if dof is not None and chol.complete:
            # The round to every row: no loss to estimate.  Its certificate
            # and score bounds would cost several times the exact fit.
            certificate = LossCertificate.exact_method(chol.rank, n)
            progress(
                f"round {rounds}: {chol.rank} columns, every row: the exact kernel"
            )
            break
        last = p >= max_rank or len(chol.pivots) == before[0]
        far = not last and not chol.complete and 4 * p <= EXACT_FRACTION * n
        if far and objective.unresolved(chol, alpha):
            # A plateau of this factor is no evidence: the rank doubles, as
            # the doubling estimate's does below 2 d_eff columns (_converged),
            # but near n, where a certificate decides on the exact fit.
            certificate, certified, unresolved, plateau = None, None, True, False
        else:
            certificate, certified, plateau = _round_certificate(
                chol, alpha, request, certificate, row_order
            )
            unresolved = not certificate.resolved
        progress(_round_line(rounds, chol.rank, certificate, certified, alpha, n))
        if certificate is not None and (certificate.complete or plateau or last):
            break  # certified, exact, the cap, or no rank left to add
        grown = _Round(p, *before, len(chol.pivots), chol.rank, certified, unresolved)
        p = _next_rank(grown, n, max_rank, objective)
        if _hands_over(request, certificate, certified, p, max_rank, n):
            progress(
                f"the certificate asks for more than the cap of {max_rank} "
                "columns: handed over"
            )
            break
        if p >= n:
            # The scores' bounds from this factor, of at most n / 2 columns
            # (lower bounds still: L grows with its columns).
            dof = _certified_dof(chol, alpha, n, request.rule, certificate, access)
            if request.every_row_exact and objective.exact_solve:
                certificate = LossCertificate.exact_method(n, n)
                progress(
                    f"the next round would reach every row: exact kernel ridge "
                    f"on all {n} rows"
                )
                break
    dof = _final_dof(dof, chol, alpha, request.rule, certificate, access)
    return dof, chol, grow, certificate, alpha


def _hands_over(request, certificate, certified, p, max_rank, n):
    """Whether rounds of ``request.hand_over`` stop before the round of
    ``p`` pivots: it is the cap's, and the ``certificate`` of the round
    before certifies nothing and asks for more than the cap
    (:meth:`~sklearn_dof._certificate.LossCertificate.requested_rank`), so
    the cap's ``O(n r^2)`` round would most likely only confirm the
    hand-over.  A factor not yet resolved down to the penalty asks for at
    least as much: its loss estimate is no more than a lower bound.  A
    wrong call costs time, not accuracy: the held-out rounds certify in
    the cap's place."""
    return (
        request.hand_over
        and p >= max_rank
        and max_rank < n
        and certificate is not None
        and certified is None
        and certificate.requested_rank(request.loss_tol, n) > max_rank
    )


def _chosen_penalty(chol, request, alpha, chosen_on):
    """The penalty a round certifies its rank for, and the columns it was
    chosen on (``alpha`` on ``chosen_on`` so far).

    With ``request.penalties`` (a grid, for cross-validation), the grid's
    penalty of smallest leave-one-out error on the factor's first columns,
    at most :data:`~sklearn_dof._certificate.PENALTY_RANK`
    (:func:`~sklearn_dof._certificate.penalty_errors`): the rank follows
    the penalty the search selects, not the smallest of its grid.  Once the
    factor has that many columns their leave-one-out errors no longer
    change: the choice stands.
    """
    penalties = request.penalties
    if penalties is None or min(chol.rank, PENALTY_RANK) <= chosen_on:
        return alpha, chosen_on
    errors = penalty_errors(chol, request.response, penalties, request.center)
    return float(penalties[int(np.argmin(errors))]), min(chol.rank, PENALTY_RANK)


def _round_certificate(chol, alpha, request, previous, row_order):
    """The certificate of a round's factor ``chol``, the rank it certifies
    and whether the rounds stop there, on its plateau.

    The rounds stop once the certified rank is at most ``1 / span`` of the
    rank grown (:attr:`Objective.span`: a half, a quarter for the
    log-loss): a whole doubling then left the estimated test error within
    ``loss_tol``, which a plateau of the error between two rounds alone
    does not show, and the factor's ``L`` is resolved down to the penalty
    (:attr:`LossCertificate.resolved`): before, a plateau is no evidence
    either, and no rank is certified.
    """
    objective = OBJECTIVES[request.objective]
    certificate = objective.certificate(chol, alpha, request, previous, row_order)
    certified = certificate.certified_rank(request.loss_tol)
    plateau = certified is not None and objective.span * certified <= certificate.rank
    if plateau and not certificate.resolved:
        return certificate, None, False
    return certificate, certified, plateau


class _Round(NamedTuple):
    """What :func:`_next_rank` reads of the round just grown.

    Attributes
    ----------
    requested : int
        The pivots the round was asked for.
    pivots_before, columns_before : int
        The factor's pivots and columns before the round.
    pivots, columns : int
        Its pivots and columns after the round (a pivot whose residual
        vanished adds no column).
    certified : int or None
        The rank the round certified.
    unresolved : bool
        The round's factor is not resolved down to the penalty (or made no
        certificate to tell).
    """

    requested: int
    pivots_before: int
    columns_before: int
    pivots: int
    columns: int
    certified: int | None
    unresolved: bool


def _next_rank(grown, n_samples, max_rank, objective):
    """The pivots of the round after ``grown`` (a :class:`_Round`), at most
    ``max_rank``.

    A rank ``q`` certified short of its plateau: the least rank that can
    show it, ``span * q`` columns (:attr:`Objective.span`), not twice the
    rank grown, in pivots at the rate the round's pivots added columns
    (near the kernel's numerical rank most pivots add none, and a round a
    few pivots at a time would cost a certificate each); none certified,
    or no column added by the round: twice the pivots requested.

    A factor not resolved down to the penalty that certified nothing will
    double again before a doubling can be certified: where the round after
    next passes half of the ``n_samples`` rows, the cap at once, which costs
    less than those two rounds.  With :attr:`Objective.cap_after_next` (the
    log-loss), where the round after the next would reach the cap, the cap
    at once: nothing certified at ``r``, the tail's geometric model asks for
    at least ``2 r`` columns
    (:meth:`~sklearn_dof._certificate.LossCertificate.requested_rank`),
    which a round of ``2 r`` cannot certify, since a certified rank needs
    two doublings above it, and a rank certified short of its plateau is
    shown, or not, by the next round, which the cap then follows; the cap's
    certificate still reads every prefix rank.

    A round past half of the rows goes to the cap: there the fit with
    every row as a landmark, exact kernel ridge when ``max_rank = n``,
    costs about as much as the rounds it replaces.  Not for a loss without
    an exact fit (:attr:`Objective.exact_solve`) whose cap is the rows
    themselves: there a certified rank's plateau round comes first.
    """
    added = grown.columns - grown.columns_before
    if grown.certified is not None and added > 0:
        lacking = max(objective.span * grown.certified - grown.columns, 1)
        pivots = grown.pivots
        target = pivots + math.ceil(lacking * (pivots - grown.pivots_before) / added)
    else:
        target = 2 * grown.requested
    half = EXACT_FRACTION * n_samples
    if 2 * target > half and grown.unresolved and grown.certified is None:
        target = max_rank
    # A loss without an exact fit whose cap is the rows themselves: a rank
    # certified short of its plateau takes its plateau round, which every
    # row as a landmark would cost more than, rather than the cap.
    rows_cap = max_rank >= n_samples and not objective.exact_solve
    certified = grown.certified is not None
    if objective.cap_after_next and 2 * target >= max_rank:
        if not (rows_cap and certified):
            target = max_rank
    if target > half and not rows_cap:
        return max_rank
    return min(target, max_rank)


def _final_dof(dof, chol, alpha, rule, certificate, access):
    """The estimate the certified rounds return: that of ``dof`` (the
    round before an exact ``certificate``'s) or of the last factor
    (:func:`_certified_dof`), with its ``d_ave``."""
    if not certificate.exact:
        dof = _certified_dof(chol, alpha, access.n_samples, rule, certificate, access)
    if not isinstance(dof, _LandmarkDoF):
        # d_ave from the spectrum of the first landmarks' Gram matrix (numpy's
        # LAPACK, see loo_curve): the top of the spectrum, which d_ave sums,
        # without an O(r^3) eigendecomposition of a factor near n.
        head = min(chol.rank, _SPECTRUM_RANK)
        gram = np.asarray(chol.gram())[:head, :head]
        spectrum = np.linalg.eigvalsh(gram) if head else np.zeros(0)
        dof.d_ave = float((_linalg.shrinkage(spectrum, alpha) ** 2).sum())
    return dof


def _round_line(rounds, columns, certificate, certified, alpha, n):
    """The progress line of a certified round (of ``n`` rows), or of one
    that made no ``certificate`` (None)."""
    if certificate is None:
        return (
            f"round {rounds}: {columns} columns, not resolved down to "
            f"the penalty {alpha:.3g}: no certificate yet"
        )
    loss = float(certificate.loss(certificate.rank))
    line = (
        f"round {rounds}: {columns} columns at penalty {alpha:.3g}, "
        f"estimated loss {loss:.3g} at {certificate.rank}"
    )
    if certificate.rows_read < n:
        line = f"{line} (leave-one-out of {certificate.rows_read} rows)"
    if certified is not None:
        return f"{line}, certified rank {certified}"
    return f"{line}, no rank certified yet"


def _certified_dof(chol, alpha, n, rule, certificate, access):
    """The lower bounds of the scores of the factor that ``certificate`` was
    computed on, from its leave-one-out pass when that pass made them (a
    pass of their own after a round that made no certificate, None).

    The logistic certificate's pass weighs the rows by their curvatures, so
    its scores are no bounds of ``K``'s: there the degrees of freedom come
    from the factor's pivot rows (:class:`_PivotRowDoF`), ``O(r^3)``, as a
    fit at a given rank takes them from its landmarks, not from a pass of
    ``n r^2`` over the rows (doc/design/logistic.rst, "Measurements behind
    the code's choices").  Pivots that are a uniform sample of the rows
    give them as an int fit on those landmarks would
    (:func:`~sklearn_dof._dof.uniform_landmark_dof`, from
    ``K(I, I)``), without the factor's Gram matrix, which those rounds
    never form (:func:`~sklearn_dof._certificate.logistic_certificate`)."""
    if certificate is not None and certificate.fit is not None:
        if rule.uniform_sample and chol.rank:
            dof = _LandmarkDoF(chol, alpha, n, access)
            if (dof.landmarks >= 0).all():
                return dof
        return _PivotRowDoF(chol, alpha, n)
    return dof_from_factor(
        chol,
        alpha,
        n,
        uniform=rule.uniform_sample,
        bounds=False,
        spectrum=False,
        lower=None if certificate is None else certificate.leverage_bounds,
    )


def _first_round(max_rank, n_samples):
    """Columns of the first round of the certified rank: 32, or, when the
    cap binds below ``EXACT_FRACTION * n``, the cap halved down to
    ``[32, 64)``, so that the doubling ends on the cap and the round before
    it costs a quarter of it (640: 40, 80, ..., 320, 640 rather than 32,
    ..., 512, 640, a certificate and Gram matrix of 512 columns)."""
    if max_rank >= EXACT_FRACTION * n_samples:
        return min(32, max_rank)
    p = max_rank
    while p >= 64:
        p = -(-p // 2)
    return p


# Columns of the factor whose spectrum gives the reported d_ave of a
# certified rank (a lower estimate: L of fewer columns is smaller).
_SPECTRUM_RANK = 1024

# Past this fraction of n rows as landmarks the certified rounds go to the
# cap at once (see certified_estimate).
EXACT_FRACTION = 0.5

# Doublings of the rank above a certified rank over which the estimated loss
# must stay within loss_tol before the rounds stop.  The leave-one-out
# log-loss falls in steps (a landmark among rows that none covered yet can
# lower it by a percent), and one quiet doubling is no plateau: after one,
# logistic rounds certified ranks whose test log-loss was percents above
# that of many more columns (doc/design/automatic_rank.rst, "Measurements
# behind the code's choices").  Two doublings cost four times the last
# round, which is cheap where the rank stops low.
_PLATEAU_DOUBLINGS = {"squared": 1, "logistic": 2}


class _DEff:
    """A round of the doubling loop known by its ``d_eff`` alone."""

    def __init__(self, d_eff):
        self.d_eff = d_eff


# Pivot rows scored at a time by _PivotRowDoF.
_PIVOT_ROW_CHUNK = 1024


class _LandmarkDoF:
    """``d_max``, ``d_eff``, ``d_ave`` and the columns of the ``r`` uniform
    pivots of a factor, as an int fit on them reports them: from ``A = (n /
    r) K(I, I)`` (:func:`~sklearn_dof._dof.uniform_landmark_dof`, ``r^3``
    flops), or :class:`_PivotRowDoF`'s where ``A + alpha I`` has no
    Cholesky factor.  The pivots are those behind the factor's columns (a
    pivot whose residual vanished adds none), ``landmarks``.

    Computed on the first read of ``d_max``, ``d_eff`` or ``d_ave``: a
    caller whose model keeps exactly those landmarks leaves them to the
    fitted transformer, which computes the same on the first read of its
    ``dof_`` (``_landmarks.LANDMARK_DOF``), so that their ``r^3`` flops are
    paid once (doc/design/logistic.rst, "Measurements behind the code's
    choices").
    """

    def __init__(self, chol, alpha, n, access):
        self.n_columns = len(chol.pivots)
        self.landmarks = np.asarray(chol.column_pivots[: chol.rank], dtype=np.intp)
        self._inputs = (chol, alpha, n, access)
        self._values = None

    def _read(self):
        if self._values is None:
            chol, alpha, n, access = self._inputs
            self._values = uniform_landmark_dof(
                access.landmark_gram(self.landmarks), alpha, n
            )
            if self._values is None:
                rows = _PivotRowDoF(chol, alpha, n)
                self._values = (rows.d_max, rows.d_eff, np.nan)
            self._inputs = None
        return self._values

    d_max = property(lambda self: self._read()[0])
    d_eff = property(lambda self: self._read()[1])
    d_ave = property(lambda self: self._read()[2])


class _PivotRowDoF:
    """``d_max``, ``d_eff`` and the columns of a factor ``G`` of ``r``
    columns, in ``O(r^3)``: ``d_eff = tr G^T G (G^T G + alpha I)^{-1}``
    (:func:`~sklearn_dof._certificate.factor_d_eff`'s form) and ``d_max`` from
    the scores ``g_i^T (G^T G + alpha I)^{-1} g_i`` of the pivot rows alone,
    a uniform sample of the rows for uniform pivots, the worst explained
    rows for the others (at least ``d_eff``, as for a fit at a given rank,
    ``_dof.landmark_row_dof``).  ``d_ave`` is set by the caller."""

    def __init__(self, chol, alpha, n):
        self.n_columns = len(chol.pivots)
        self.d_ave = np.nan
        if chol.rank == 0:
            self.d_max = self.d_eff = 0.0
            return
        R_inv, _, self.d_eff = inverse_factor_d_eff(chol, alpha)
        pivots = np.asarray(chol.pivots, dtype=np.intp)
        top = 0.0
        # g^T (R R^T)^{-1} g = ||R^{-1} g||^2, by chunks of pivot rows: at
        # large ranks no r x r copies of them beside R^{-1}.
        for start in range(0, pivots.size, _PIVOT_ROW_CHUNK):
            rows = chol.factor[pivots[start : start + _PIVOT_ROW_CHUNK]]
            projected = _tiles.times_upper(rows.astype(np.float64, copy=False), R_inv.T)
            scores = np.einsum("ij,ij->i", projected, projected)
            top = max(top, float(scores.max(initial=0.0)))
        self.d_max = max(n * top, self.d_eff)


def _converged(dof, previous, chol, alpha, tol, certify_d_eff, statistic="d_max"):
    """Stopping rule of the doubling loop.

    ``d_max`` moved by at most ``tol`` (relative) when the number of columns
    doubled and, with ``certify_d_eff``, the guaranteed bracket
    ``[sum(lower), sum(lower) + tr(K - L) / alpha]`` of ``d_eff`` is narrow
    enough for its middle to be within ``tol``.  (Whether ``d_eff`` moved is
    no test: on slowly decaying spectra the middle of the bracket stays flat
    for several doublings while it is still 20% off.)
    """
    # Below 2 d_eff columns the factor cannot yet hold the directions that
    # carry the leverage, and a flat estimate only means both rounds missed.
    if previous is None or len(chol.pivots) < 2 * dof.d_eff:
        return False
    if statistic == "d_eff":
        # The samplers whose rank follows d_eff: d_eff must have settled.
        moved = abs(dof.d_eff - previous.d_eff) / max(previous.d_eff, 1e-12)
        return moved <= tol
    moved = abs(dof.d_max - previous.d_max) / max(previous.d_max, 1e-12)
    certified = chol.residual.sum() / alpha <= 2 * tol * dof.d_eff
    return moved <= tol and (certified or not certify_d_eff)
