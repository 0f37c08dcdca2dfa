"""The automatic rank certified on held-out rows, from fits at doubling ranks.

The certificate of :mod:`~sklearn_dof._certificate` reads leave-one-out
errors of every prefix of an ``n x r`` factor of the rows: ``O(n r^2)`` a
round and ``n r`` numbers held, which past the memory budget's default cap
binds before the conjugate gradients' fits (``O(p^2)`` memory) do.  Here
the rank is certified from fits alone: the rows are split once into a
uniform held-out set and the training rows; the fits, at ranks ``r_0, 2
r_0, 4 r_0, ...`` of one nested uniform order of training rows, train on
the others (the held-out rows weigh zero), and the held-out squared
residuals of every rank go to the same :class:`LossCertificate`, every
held-out row a non-landmark.  The rounds end at the first rank whose
certified loss is at most ``loss_tol``, or at the cap; the caller keeps
that last fit's landmarks and refits them on every row.
"""

import math
from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from . import _memory
from ._certificate import LossCertificate
from ._progress import SILENT

# Held-out rows: enough that two standard errors of the paired excess
# between ranks r / 2 and r are well under 1% near a plateau, at most
# HELDOUT_SHARE of the rows (doc/design/large_ranks.rst, "The held-out
# rounds").
HELDOUT_ROWS = 4096
# The held-out rows' largest share of the rows: their weight is lost to the
# rounds' fits, not to the final one.
HELDOUT_SHARE = 0.125
# The largest first rank of the rounds: below it, fits cost little next to
# the last one (each doubling costs up to eight times the one before).
FIRST_RANK = 512
# The fewest halvings from the cap to the first rank: the certificate reads
# the decrease over two doublings (MIN_DOUBLINGS) below the rank it
# certifies.
MIN_HALVINGS = 4
# Doublings seen before a rank may be certified: the tail's geometric
# model reads the decrease over the last two.
MIN_DOUBLINGS = 2


class HeldOutSplit(NamedTuple):
    """The rows of a held-out certificate.

    Attributes
    ----------
    held : ndarray of int
        The held-out rows, sorted: rows of positive weight.
    held_weight : ndarray of shape (n_held,)
        Their sample weights: each one's squared error counts that many
        times, as in the leave-one-out score.
    train_weight : ndarray of shape (n_samples,)
        The sample weights with the held-out rows' set to zero.
    order : ndarray of int
        The training rows in a uniform random order: the landmarks of rank
        ``r`` are its first ``r``.
    train_share : float
        The training rows' share of the total weight: a fit on them at
        ``alpha * train_share`` has the ``lambda = alpha / n`` of the fit
        on every row.
    """

    held: np.ndarray
    held_weight: np.ndarray
    train_weight: np.ndarray
    order: np.ndarray
    train_share: float


def held_out_cap(n_components, solver, sampling, max_components, n_samples):
    """The cap of held-out rounds where they may serve an automatic rank of
    squared loss, else None.

    They may where ``n_components="auto"`` with uniform landmarks, a solver
    that allows the conjugate gradients, no exact route to take instead
    (``K`` past the exact route's memory, or a ``max_components`` below the
    rows) and a cap above the default one, the largest rank whose factor
    certificate fits the budget: ``max_components``, else the largest
    conjugate-gradient fit the budget holds
    (:func:`~sklearn_dof._memory.default_cg_components`).  With a
    ``max_components`` the rounds replace the factor's; without one they
    take over where the factor's stop at their cap.
    """
    exact = _memory.fits_exact(n_samples) and (
        max_components is None or max_components >= n_samples
    )
    if not (
        isinstance(n_components, str)
        and n_components == "auto"
        and isinstance(sampling, str)
        and sampling == "uniform"
        and solver != "direct"
        and not exact
    ):
        return None
    cap = min(max_components or _memory.default_cg_components(), n_samples)
    return cap if cap > _memory.default_max_components() else None


def held_out_rows(n_positive):
    """The held-out rows of a split of ``n_positive`` rows of positive
    weight: ``min(HELDOUT_ROWS, HELDOUT_SHARE n_positive)``, at least one
    and at most ``n_positive - 1`` (a training row)."""
    return max(1, min(HELDOUT_ROWS, int(HELDOUT_SHARE * n_positive), n_positive - 1))


def held_out_rank(n_components, sampling, n_samples, n_positive=None):
    """The int rank a penalty search takes on held-out rows, else None.

    Where ``n_components`` is an int of uniform landmarks whose efficient
    leave-one-out (:func:`~sklearn_dof._memory.loo_bytes`) and exact route
    both pass the memory budget: one held-out round at that rank chooses the
    penalty in ``O(p^2)`` memory, as the automatic rank's rounds do.  Not
    past the training rows of the split (of ``n_positive`` rows of
    positive weight, default ``n_samples``): the round's landmarks are
    those of the fit on every row, ``n_components`` of them.
    """
    if not (
        isinstance(n_components, Integral)
        and not isinstance(n_components, bool)
        and isinstance(sampling, str)
        and sampling == "uniform"
        and not _memory.fits_exact(n_samples)
    ):
        return None
    rank = min(int(n_components), n_samples)
    n_positive = n_samples if n_positive is None else n_positive
    if n_positive < 2 or rank > n_positive - held_out_rows(n_positive):
        return None
    fits = _memory.loo_bytes(n_samples, rank) <= _memory.memory_budget()
    return None if fits else rank


def held_out_split(sample_weight, random_state):
    """A :class:`HeldOutSplit` of the rows: :func:`held_out_rows` uniform
    held-out rows among those of positive weight (a row of zero weight
    neither scores nor trains)."""
    weight = np.asarray(sample_weight, dtype=np.float64)
    positive = np.flatnonzero(weight > 0)
    if positive.shape[0] < 2:
        raise ValueError(
            "Held-out rounds need at least 2 samples of positive sample_weight; "
            f"got {positive.shape[0]}."
        )
    rng = check_random_state(random_state)
    n_held = held_out_rows(positive.shape[0])
    # All weights positive: positive is arange(n), the permutation that of
    # rng.permutation(n).
    permutation = rng.permutation(positive)
    held = np.sort(permutation[:n_held])
    train_weight = weight.copy()
    train_weight[held] = 0.0
    total = float(weight.sum())
    share = float(train_weight.sum()) / total if total > 0 else 0.0
    # The landmarks: training rows of positive weight, in the permutation's
    # (uniform) order.
    order = permutation[n_held:]
    return HeldOutSplit(held, weight[held], train_weight, order, share)


class NestedRows:
    """The landmark selector of the rounds: the first ``n_components`` rows
    of ``order``, with no factor of the rows (as an int rank of uniform
    landmarks; given rows would grow one).

    Parameters
    ----------
    order : ndarray of int
        Row indices, in the order the ranks take them.
    """

    def __init__(self, order):
        self.order = order

    def select(self, X, n_components, random_state=None):
        """The first ``n_components`` rows of ``order``."""
        return self.order[:n_components]

    def __repr__(self):
        return f"NestedRows(<{self.order.size} rows>)"


class HeldOutRounds(NamedTuple):
    """The outcome of :func:`held_out_rounds`.

    Attributes
    ----------
    rank : int
        The rank of the last fit, the one kept.
    certificate : LossCertificate
        The certificate over the ranks fitted (rank 0 the baseline).
    certified : int or None
        The smallest certified rank, None when the cap stopped the rounds.
    requested : int or None
        The rank the certificate asks for when the cap stopped it.
    """

    rank: int
    certificate: LossCertificate
    certified: int | None
    requested: int | None


def held_out_rounds(
    fit,
    y_held,
    baseline,
    cap,
    loss_tol,
    n_candidates,
    first_rank=FIRST_RANK,
    progress=SILENT,
    weights=None,
):
    """Fit at doubling ranks until one is certified on the held-out rows.

    Parameters
    ----------
    fit : callable
        ``rank -> predictions`` of the held-out rows, shape ``(n_held, k)``,
        of the fit at that rank on the training rows.
    y_held : ndarray of shape (n_held, k)
        The held-out targets.
    baseline : ndarray of shape (k,)
        The prediction of rank 0 (the training rows' weighted mean with an
        intercept, else zero).
    cap : int
        The largest rank.
    loss_tol : float
        The relative excess loss allowed.
    n_candidates : int
        The training rows that may be landmarks: the most a warning may ask
        for.
    first_rank : int, default=FIRST_RANK
        The largest first rank (see :func:`first_round`).
    progress : Progress, default=SILENT
        Prints a line per round (``verbose``).
    weights : ndarray of shape (n_held,), default=None
        The held-out rows' sample weights (None: ones), which scale their
        squared errors.

    Returns
    -------
    HeldOutRounds
    """
    n_held = y_held.shape[0]
    weights = np.ones(n_held) if weights is None else np.asarray(weights)

    def squared(predictions):
        return weights * ((predictions - y_held) ** 2).sum(axis=1)

    ranks, squares = [0], [squared(baseline)]
    rank = first_round(cap, first_rank)
    while True:
        squares.append(squared(fit(rank)))
        ranks.append(rank)
        certificate = LossCertificate(
            np.asarray(ranks), np.column_stack(squares), np.full(n_held, np.inf)
        )
        certified = certificate.certified_rank(loss_tol)
        progress(
            f"held-out round: {rank} components, held-out MSE "
            f"{squares[-1].mean() / y_held.shape[1]:.4g}, estimated loss at "
            f"{rank // 2}: {certificate.loss(rank // 2):.3g}"
        )
        if len(ranks) < MIN_DOUBLINGS + 2 and rank < cap:
            certified = None
        if certified is not None:
            return HeldOutRounds(rank, certificate, certified, None)
        if rank >= cap:
            requested = certificate.requested_rank(loss_tol, n_candidates)
            return HeldOutRounds(rank, certificate, None, int(requested))
        rank = min(2 * rank, cap)


def first_round(cap, first_rank=FIRST_RANK):
    """The first rank of the rounds: ``cap`` halved, rounding up, at least
    :data:`MIN_HALVINGS` times and down to ``first_rank``, so that the
    doublings end on the cap, each about twice the one before (a first rank
    that does not divide the cap would make the last round a near copy of
    the one before it, the costliest fit done twice: 1,488 then 1,500)."""
    rank, halvings = max(1, cap), 0
    while rank > 1 and (halvings < MIN_HALVINGS or rank > first_rank):
        rank, halvings = -(-rank // 2), halvings + 1
    return rank


def held_out_warning(rank, loss, requested, loss_tol, max_components, rows=None):
    """The warning of held-out rounds that their cap stopped at ``rank``,
    short of ``loss_tol``: ``max_components``, or (None) the memory
    budget's largest conjugate-gradient fit; the rank the certificate asks
    for and the memory of a fit at it.  Given ``rows`` (all of them), the
    rounds stopped at every training row of the split instead: no rank is
    left to certify but every row, exact kernel ridge and its ``K``."""
    if rows is not None:
        needed = 8 * rows**2
        budget = math.ceil(needed / _memory.EXACT_BUDGET_RATIO)
        return (
            f"n_components='auto' stopped at {rank} components, every training "
            f"row of its held-out split: the held-out loss estimate (relative "
            f"excess loss {loss:.3g}, above loss_tol={loss_tol:g}) asks for "
            f"every one of the {rows} rows, exact kernel ridge, whose kernel "
            f"matrix needs about {_memory.format_bytes(needed)} of memory: a "
            f"memory budget of {_memory.format_bytes(budget)} or more holds it. "
            "Raise the budget (sklearn_dof.set_config(memory_budget=...)), or "
            "the penalty."
        )
    needed = _memory.format_bytes(_memory.cg_rank_bytes(requested))
    if max_components is None:
        budget = _memory.format_bytes(_memory.memory_budget())
        stop = (
            f"{rank} components, the largest conjugate-gradient fit that the "
            f"memory budget of {budget} allows (max_components=None)"
        )
        advice = (
            "Raise the budget (sklearn_dof.set_config(memory_budget=...)) or "
            "max_components, or the penalty."
        )
    else:
        stop = f"max_components={max_components}"
        advice = "Raise max_components, or the penalty."
    return (
        f"n_components='auto' stopped at {stop}: the held-out loss estimate "
        f"(relative excess loss {loss:.3g} at {rank} components, above "
        f"loss_tol={loss_tol:g}) asks for about {requested} components, which "
        f"need about {needed} of memory. {advice}"
    )
