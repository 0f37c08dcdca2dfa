import numpy as np
import pytest

from sklearn_dof._penalty_walk import climb, nearest, walk_from, walk_start

GRID = np.logspace(-6, 0, 13)


def _scorer(curve):
    """A score per penalty of GRID from ``curve`` (higher is better), and
    the list of penalties it was asked for, in order."""
    asked = []

    def score(alpha):
        asked.append(alpha)
        value = curve[nearest(GRID, alpha)]
        return None if value is None else (value, alpha)

    return score, asked


def _better(candidate, best):
    if candidate is None:
        return False
    return best is None or candidate[0] > best[0]


def _unimodal(peak):
    return [-abs(i - peak) for i in range(GRID.size)]


@pytest.mark.parametrize("peak", range(GRID.size))
@pytest.mark.parametrize("start", [0, 4, 6, 12])
def test_walk_finds_the_peak_of_unimodal_scores(peak, start):
    score, asked = _scorer(_unimodal(peak))
    best = walk_from(score, GRID, GRID[start], _better)
    assert best[1] == GRID[peak]
    # The steps between the start and the peak, the start, and at most two
    # that fail (one down before going up, one past the peak).
    assert len(asked) <= abs(peak - start) + 3
    assert len(set(asked)) == len(asked)


def test_walk_stays_under_its_ceiling():
    score, asked = _scorer(_unimodal(12))
    best = walk_from(score, GRID, GRID[3], _better, ceiling=GRID[7])
    assert best[1] == GRID[7]
    assert max(asked) == GRID[7]


def test_walk_from_the_ceiling_only_goes_down():
    score, asked = _scorer(_unimodal(2))
    best = walk_from(score, GRID, GRID[6], _better, ceiling=GRID[6])
    assert best[1] == GRID[2]
    assert asked == list(GRID[6:0:-1])


def test_walk_start_snaps_to_the_grid_and_shuffled_grids_walk_alike():
    score, asked = _scorer(_unimodal(5))
    shuffled = np.random.RandomState(0).permutation(GRID)
    best = walk_from(score, shuffled, 1.3 * GRID[8], _better)
    assert best[1] == GRID[5]
    assert asked[0] == GRID[8]


def test_a_penalty_without_a_score_never_wins():
    curve = _unimodal(0)
    curve[:3] = [None, None, None]  # no Cholesky factor at the smallest
    score, asked = _scorer(curve)
    assert walk_from(score, GRID, GRID[6], _better)[1] == GRID[3]
    assert climb(score, [GRID[0]], None, _better) == (None, False)


def test_climb_reports_whether_its_first_step_improved():
    score, asked = _scorer(_unimodal(4))
    best, moved = climb(score, GRID[:8], None, _better)
    assert moved and best[1] == GRID[4]
    assert asked == list(GRID[:6])  # stops at the first step that fails
    best, moved = climb(score, GRID[5:], best, _better)
    assert not moved and best[1] == GRID[4]


def test_walk_start():
    # A low-rank penalty starts the walk and bounds it; without one, the
    # learned penalty, else the grid's middle, with no bound.
    assert walk_start(GRID, chosen=1e-2, learned=1e-4) == (1e-2, 1e-2)
    assert walk_start(GRID, chosen=1e-3) == (1e-3, 1e-3)
    assert walk_start(GRID, learned=1e-5) == (1e-5, None)
    start, ceiling = walk_start(GRID)
    assert start == pytest.approx(1e-3) and ceiling is None


def test_a_walk_from_a_known_start_does_not_score_it_again():
    grid = np.logspace(-4, 0, 9)
    scored = []

    def score(alpha):
        scored.append(alpha)
        return -((np.log10(alpha) + 1.0) ** 2), alpha

    def better(candidate, best):
        return best is None or candidate[0] > best[0]

    start = grid[8]
    known = score(start)
    scored.clear()
    best = walk_from(score, grid, start, better, known=known)
    assert best[1] == pytest.approx(0.1)
    assert start not in scored
    assert best == walk_from(score, grid, start, better)
