"""Walks along a grid of penalties, for scores that cost a fit each.

Exact kernel ridge past a few thousand rows pays a Cholesky factorisation
and its inverse (``2 n^3 / 3`` flops) for the leave-one-out score of one
penalty, so :class:`~sklearn_dof.DoFKernelRidgeCV` does not score its whole
grid there: it walks it, on the assumption that the scores are unimodal
along the grid, from the penalty most likely to be near their best.  A walk
is a sequence of :func:`climb` calls; what a step costs and what "better"
means (a margin over a low-rank fit, say) belong to the caller.
"""

import math

import numpy as np


def climb(score, path, best, better):
    """Score the penalties of ``path`` in turn while each beats the best.

    Parameters
    ----------
    score : callable
        ``score(alpha)``: a candidate that ``better`` compares (None where
        the penalty could not be scored).
    path : iterable of float
        The penalties, in the order walked.
    best : object
        The best candidate so far (None: none yet).
    better : callable
        ``better(candidate, best)``: whether ``candidate`` replaces ``best``.

    Returns
    -------
    best : object
        The best candidate after the climb.
    moved : bool
        Whether the first step improved on ``best`` (the climb went
        somewhere).
    """
    moved = False
    for alpha in path:
        candidate = score(float(alpha))
        if not better(candidate, best):
            break
        best, moved = candidate, True
    return best, moved


def walk_from(score, grid, start, better, ceiling=None, known=None):
    """The best candidate of a walk along ``grid`` from ``start``.

    ``start`` is scored first (unless ``known``), then its neighbours below
    while the score improves; if the first step down does not improve, its
    neighbours above while it does, up to ``ceiling`` (default: the grid's
    top).  On unimodal scores that finds the grid's best at the cost of the
    steps between ``start`` and it, plus two.

    Parameters
    ----------
    score, better : callable
        As :func:`climb`.
    grid : array-like of float
        The penalties (any order).
    start : float
        The penalty scored first; the grid's nearest on a log scale.
    ceiling : float, default=None
        The largest penalty the walk may score: one known to be at or
        above the best (None: no such bound).
    known : object, default=None
        ``start``'s candidate where it was scored already: the walk then
        starts from it without scoring ``start`` again.

    Returns
    -------
    best : object
        The best candidate scored (None if none could be scored).
    """
    grid = np.unique(np.asarray(grid, dtype=np.float64))
    if ceiling is not None:
        grid = grid[grid <= ceiling * (1 + 1e-12)]
    if not grid.size:
        return None
    i = nearest(grid, start)
    best = known
    if known is None:
        best, _ = climb(score, grid[i : i + 1], None, better)
    best, moved = climb(score, grid[:i][::-1], best, better)
    if not moved:
        best, _ = climb(score, grid[i + 1 :], best, better)
    return best


def nearest(grid, alpha):
    """Index of the penalty of ``grid`` nearest ``alpha`` on a log scale."""
    grid = np.asarray(grid, dtype=np.float64)
    return int(np.argmin(np.abs(np.log(grid) - math.log(alpha))))


def walk_start(grid, chosen=None, learned=None):
    """Where a walk along ``grid`` starts, and the ceiling it stays under.

    ``chosen``: a penalty chosen on a low-rank factor of the rows, which
    prefers a larger penalty than the exact fit (it lacks the directions of
    the rows it did not pivot on): the start and the ceiling, the walk
    going down from it.  Without it, ``learned`` (the penalty learned with
    the kernel, a Gaussian process's ratio of noise to signal), else the
    grid's middle on a log scale, and no ceiling.
    """
    grid = np.asarray(grid, dtype=np.float64)
    if chosen is not None:
        return float(chosen), float(chosen)
    if learned is not None:
        return float(learned), None
    return float(np.exp(np.log(grid).mean())), None
