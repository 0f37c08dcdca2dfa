"""The certified rounds' parts: the next-rank policy, the losses they are
for and the request that carries them (``_estimate``)."""

import pytest

from sklearn_dof import _estimate
from sklearn_dof._estimate import OBJECTIVES, RankRequest, _next_rank, _Round

SQUARED, LOG_LOSS = OBJECTIVES["squared"], OBJECTIVES["logistic"]


def _doubled(requested, certified=None, unresolved=False):
    """A round that grew from ``requested / 2`` to ``requested`` pivots,
    each adding a column."""
    half = requested // 2
    return _Round(requested, half, half, requested, requested, certified, unresolved)


def test_nothing_certified_doubles_the_pivots_requested():
    for objective in (SQUARED, LOG_LOSS):
        assert _next_rank(_doubled(64), 10**5, 4096, objective) == 128
    # No column added by the round's pivots: twice the pivots, certified or not.
    stalled = _Round(64, 32, 40, 64, 40, certified=20, unresolved=False)
    assert _next_rank(stalled, 10**5, 4096, SQUARED) == 128


def test_a_rank_certified_short_of_its_plateau_asks_for_that_plateau():
    # Squared loss: the plateau is a doubling, 2 q columns, not 2 p.
    grown = _doubled(1024, certified=600)
    assert _next_rank(grown, 10**5, 8192, SQUARED) == 1200
    # The log-loss's plateau is two doublings: 4 q.
    assert _next_rank(grown, 10**5, 8192, LOG_LOSS) == 2400
    # A plateau already reached still asks for one column more.
    assert _next_rank(_doubled(1024, certified=400), 10**5, 8192, SQUARED) == 1025


def test_the_lacking_columns_are_asked_in_pivots_at_the_round_s_rate():
    # 512 pivots added 212 columns: 1 column lacking takes 3 pivots.
    grown = _Round(1024, 512, 400, 1024, 612, certified=300, unresolved=False)
    assert _next_rank(grown, 10**5, 8192, SQUARED) == 1027
    # 100 columns lacking at 2 pivots a column.
    grown = _Round(1024, 512, 300, 1024, 556, certified=328, unresolved=False)
    assert _next_rank(grown, 10**5, 8192, SQUARED) == 1024 + 200


def test_past_half_of_the_rows_the_cap():
    assert _next_rank(_doubled(128), 1000, 1000, SQUARED) == 256
    assert _next_rank(_doubled(300), 1000, 1000, SQUARED) == 1000
    assert _next_rank(_doubled(300), 1000, 800, SQUARED) == 800
    # An unresolved factor that certified nothing doubles again before a
    # doubling can be certified: where the round after next would pass half
    # of the rows, the cap at once.
    assert _next_rank(_doubled(128, unresolved=True), 1000, 1000, SQUARED) == 1000
    # One that certified a rank asks for that rank's plateau.
    certified = _doubled(256, certified=150, unresolved=True)
    assert _next_rank(certified, 1000, 1000, SQUARED) == 300


def test_the_log_loss_goes_to_the_cap_where_the_round_after_next_reaches_it():
    for max_rank in (512, 500):
        assert _next_rank(_doubled(128), 10**5, max_rank, SQUARED) == 256
        assert _next_rank(_doubled(128), 10**5, max_rank, LOG_LOSS) == max_rank
    assert _next_rank(_doubled(128), 10**5, 513, LOG_LOSS) == 256


def test_a_log_loss_capped_by_the_rows_takes_its_plateau_round():
    # Every row as a landmark has no exact shortcut for the log-loss: a
    # rank certified short of its plateau asks for that plateau first.
    grown = _doubled(2048, certified=1152)
    assert _next_rank(grown, 8793, 8793, LOG_LOSS) == 4608
    # Capped by memory below the rows: the cap at once, as before.
    assert _next_rank(grown, 10**5, 8793, LOG_LOSS) == 8793
    # Nothing certified: the cap where the round after next reaches it.
    assert _next_rank(_doubled(4096), 8793, 8793, LOG_LOSS) == 8793
    # Squared loss: past half of the rows, the exact fit's cap.
    assert _next_rank(_doubled(2048, certified=2400), 8793, 8793, SQUARED) == 8793


def test_the_next_rank_is_at_most_the_cap_and_pure():
    grown = _doubled(2048)
    assert _next_rank(grown, 10**5, 3000, SQUARED) == 3000
    assert _next_rank(grown, 10**5, 3000, SQUARED) == 3000
    assert grown == _doubled(2048)


def test_objectives_registry():
    assert sorted(OBJECTIVES) == ["logistic", "squared"]
    for name, objective in OBJECTIVES.items():
        assert objective.name == name
        assert objective.span == 2 ** _estimate._PLATEAU_DOUBLINGS[name]
    assert (SQUARED.span, LOG_LOSS.span) == (2, 4)
    assert SQUARED.subsamples and SQUARED.exact_solve
    assert not SQUARED.keeps_grown_rank and not SQUARED.cap_after_next
    assert LOG_LOSS.keeps_grown_rank and LOG_LOSS.cap_after_next
    assert not LOG_LOSS.subsamples and not LOG_LOSS.exact_solve
    # The squared loss reads every row; the log-loss a fixed random order.
    assert SQUARED.row_order(10, 0) is None
    order = LOG_LOSS.row_order(10, 0)
    assert sorted(order) == list(range(10))
    assert list(order) == list(LOG_LOSS.row_order(10, 0))
    assert not LOG_LOSS.unresolved(None, 1.0)  # only its certificate tells


def test_rank_request_defaults():
    request = RankRequest(1.0, 0.01, 0, None, None, True, 100)
    assert request.objective == "squared" and request.penalties is None
    assert request.first is None and not request.every_row_exact
    with pytest.raises(TypeError):
        RankRequest(1.0, 0.01)
