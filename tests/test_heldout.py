import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV, _memory, config_context
from sklearn_dof._heldout import (
    FIRST_RANK,
    HELDOUT_ROWS,
    HELDOUT_SHARE,
    MIN_HALVINGS,
    NestedRows,
    held_out_cap,
    held_out_rank,
    held_out_rounds,
    held_out_rows,
    held_out_split,
)

# A budget whose default cap is 100 columns and whose exact route stops
# at 223 rows: the held-out route on small problems.
SMALL_BUDGET = 8 * 5 * 100**2


def _problem(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.randn(n)
    return X, y


def _held_out_mse(X, y, alpha, rank, gamma, weight=None):
    """The held-out rows' mean of ``w_i e_i^2`` (the leave-one-out score's
    weighting) of the direct fit at ``rank`` on the training rows of the
    split of ``random_state=0``, at the ``lambda`` of ``alpha`` on every
    row."""
    weight = np.ones(X.shape[0]) if weight is None else weight
    split = held_out_split(weight, 0)
    fit = DoFKernelRidge(
        alpha=alpha * split.train_share,
        gamma=gamma,
        n_components=rank,
        sampling=NestedRows(split.order),
        solver="direct",
    ).fit(X, y, sample_weight=split.train_weight)
    errors = fit.predict(X[split.held]) - y[split.held]
    return np.mean(split.held_weight * errors**2)


@pytest.mark.parametrize("n", [100, 20_000, 50_000])
def test_the_split_holds_out_a_bounded_share_and_orders_the_others(n):
    weight = np.random.RandomState(0).uniform(0.5, 2.0, n)
    weight[::7] = 0.0
    split = held_out_split(weight, 0)
    n_positive = np.count_nonzero(weight)
    n_held = min(HELDOUT_ROWS, int(HELDOUT_SHARE * n_positive))
    assert held_out_rows(n_positive) == n_held
    assert split.held.shape == (n_held,)
    assert np.all(np.diff(split.held) > 0)
    # Rows of zero weight neither score nor train.
    assert np.all(weight[split.held] > 0)
    np.testing.assert_array_equal(split.held_weight, weight[split.held])
    assert np.all(split.train_weight[split.held] == 0)
    rest = np.setdiff1d(np.arange(n), split.held)
    np.testing.assert_array_equal(split.train_weight[rest], weight[rest])
    # Every training row of positive weight, once, none held out.
    np.testing.assert_array_equal(np.sort(split.order), rest[weight[rest] > 0])
    assert split.train_share == pytest.approx(split.train_weight.sum() / weight.sum())
    again = held_out_split(weight, 0)
    np.testing.assert_array_equal(again.order, split.order)


def test_a_split_needs_two_rows_of_positive_weight():
    assert held_out_rows(2) == 1 and held_out_rows(10**6) == HELDOUT_ROWS
    weight = np.zeros(50)
    weight[3] = 1.0
    with pytest.raises(ValueError, match="at least 2 samples of positive"):
        held_out_split(weight, 0)
    weight[9] = 2.0
    split = held_out_split(weight, 0)
    assert split.held.shape == (1,) and split.order.shape == (1,)


def test_the_route_is_taken_only_where_the_factor_certificate_is_capped():
    with config_context(memory_budget=SMALL_BUDGET):
        cap = _memory.default_max_components()
        assert cap == 100
        assert held_out_cap("auto", "auto", "uniform", 400, 3000) == 400
        assert held_out_cap("auto", "cg", "uniform", 400, 3000) == 400
        assert held_out_cap("auto", "auto", "uniform", 4000, 3000) == 3000
        for args in [
            ("auto", "direct", "uniform", 400),
            ("auto", "auto", "pivoted", 400),
            ("dof", "auto", "uniform", 400),
            (300, "auto", "uniform", 400),
            ("auto", "auto", "uniform", cap),
        ]:
            assert held_out_cap(*args, 3000) is None
        # Without max_components: the largest conjugate-gradient fit the
        # budget holds, above the factor certificate's cap.
        cg_cap = _memory.default_cg_components()
        assert cg_cap > cap
        assert held_out_cap("auto", "auto", "uniform", None, 3000) == cg_cap
        # Where K fits the exact route's share the exact route serves, but
        # not past a max_components below the rows.
        assert _memory.fits_exact(250) and not _memory.fits_exact(300)
        assert held_out_cap("auto", "auto", "uniform", 400, 200) is None
        assert held_out_cap("auto", "auto", "uniform", None, 250) is None
        assert held_out_cap("auto", "auto", "uniform", 200, 250) == 200
    # At the machine's budget small problems keep the factor route.
    assert held_out_cap("auto", "auto", "uniform", 400, 3000) is None


def _rounds(errors, cap=4096, tol=0.01, n_held=20_000, seed=0):
    """held_out_rounds on predictions whose squared error at rank r is
    errors(r), with noise shared by every rank, as on real rows."""
    rng = np.random.RandomState(seed)
    y = rng.randn(n_held, 1)
    direction = rng.randn(n_held, 1)
    direction /= np.sqrt(np.mean(direction**2))
    asked = []

    def fit(rank):
        asked.append(rank)
        return y + np.sqrt(errors(rank)) * direction

    result = held_out_rounds(fit, y, np.zeros(1), cap, tol, 10**6)
    return result, asked


def test_the_rounds_stop_at_the_first_certified_doubling():
    # The error halves up to rank 512, then stays.
    result, asked = _rounds(lambda r: 1.0 + 2.0 ** (-r / 64) if r < 512 else 1.0)
    assert asked == [256, 512, 1024]
    assert result.rank == 1024
    assert result.certified == 512
    assert result.requested is None
    assert result.certificate.loss(result.rank) <= 0.01


def test_a_falling_error_runs_to_the_cap_and_asks_for_more():
    result, asked = _rounds(lambda r: 1.0 + 64.0 / r)
    assert asked == [256, 512, 1024, 2048, 4096]
    assert result.certified is None
    assert result.rank == 4096
    assert result.requested > 4096


@pytest.mark.parametrize("cap", [1500, 8200, 10_000, 16_226, 18_918])
def test_the_doublings_end_on_the_cap(cap):
    # A cap that is no power of two times the first rank: no near copy of
    # the costliest round (8,192 then 8,200 columns), every step a doubling.
    _, asked = _rounds(lambda r: 1.0 + 2.0**16 / r, cap=cap)
    assert asked[0] <= FIRST_RANK and len(asked) > MIN_HALVINGS
    assert asked[-1] == cap
    steps = np.diff(np.log2(asked))
    assert np.all(steps > np.log2(1.99)) and np.all(steps <= 1.0)


def test_no_rank_is_certified_before_two_doublings():
    result, asked = _rounds(lambda r: 1.0)
    assert asked == [256, 512, 1024]
    assert result.certified is not None


def test_the_held_out_route_agrees_with_the_factor_route():
    X, y = _problem(3000)
    X_test, y_test = _problem(2000, seed=1)
    alpha = 1e-3 * X.shape[0]
    factor = DoFKernelRidge(alpha=alpha, gamma=2.0, random_state=0).fit(X, y)
    with config_context(memory_budget=SMALL_BUDGET):
        held = DoFKernelRidge(
            alpha=alpha, gamma=2.0, max_components=1600, random_state=0
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            held.fit(X, y)
    exact = KernelRidge(alpha=alpha, kernel="rbf", gamma=2.0).fit(
        X - X.mean(0), y - y.mean()
    )
    exact_mse = np.mean((exact.predict(X_test - X.mean(0)) + y.mean() - y_test) ** 2)
    for model in (factor, held):
        mse = np.mean((model.predict(X_test) - y_test) ** 2)
        assert mse <= 1.02 * exact_mse
    # The held-out rounds keep a certified doubling: their rank is within a
    # factor of four of the factor route's certified one.
    assert held.n_components_ > factor.n_components_ / 4
    assert held.n_components_ < 4 * factor.n_components_ + 200
    assert held.nystroem_.loss_estimate_ <= 0.01
    assert held.nystroem_.requested_components_ is None
    # Its landmarks are training rows of the nested order, none held out.
    split = held_out_split(np.ones(3000), 0)
    np.testing.assert_array_equal(
        held.nystroem_.component_indices_, split.order[: held.n_components_]
    )


def test_the_held_out_fit_on_every_row_is_that_rank_s_int_fit():
    X, y = _problem(3000)
    alpha = 1e-3 * X.shape[0]
    with config_context(memory_budget=SMALL_BUDGET):
        held = DoFKernelRidge(
            alpha=alpha, gamma=2.0, max_components=1600, random_state=0
        ).fit(X, y)
    landmarks = held.nystroem_.component_indices_
    direct = DoFKernelRidge(
        alpha=alpha,
        gamma=2.0,
        n_components=landmarks.shape[0],
        sampling=landmarks,
        solver="direct",
    ).fit(X, y)
    scale = np.sqrt(np.mean(direct.predict(X) ** 2))
    # The conjugate gradients stop at their tolerance (warm-started, with
    # the held-out round's preconditioner).
    assert np.max(np.abs(held.predict(X) - direct.predict(X))) < 1e-2 * scale


def test_the_warning_names_the_rank_the_held_out_certificate_asks_for():
    X, y = _problem(3000)
    with config_context(memory_budget=SMALL_BUDGET):
        model = DoFKernelRidge(
            alpha=1e-5 * X.shape[0], gamma=8.0, max_components=160, random_state=0
        )
        with pytest.warns(UserWarning, match="held-out") as record:
            model.fit(X, y)
    message = str(record[0].message)
    requested = model.nystroem_.requested_components_
    assert requested > 160
    assert f"asks for about {requested} components" in message
    assert "max_components=160" in message
    assert model.n_components_ == 160


def test_the_cv_estimator_chooses_its_penalty_on_the_held_out_rows():
    X, y = _problem(4000)
    X_test, y_test = _problem(2000, seed=1)
    factor = DoFKernelRidgeCV(kernel="rbf", gamma=2.0, random_state=0).fit(X, y)
    with config_context(memory_budget=SMALL_BUDGET):
        held = DoFKernelRidgeCV(
            kernel="rbf", gamma=2.0, max_components=2400, random_state=0
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            held.fit(X, y)
    assert held.alpha_ in held.alphas_
    assert held.nystroem_.alpha_ == held.alpha_
    assert held.nystroem_.loss_estimate_ <= 0.01
    # best_score_ is minus the held-out rows' mean squared error at alpha_.
    held_out = _held_out_mse(X, y, held.alpha_, held.n_components_, gamma=2.0)
    assert -held.best_score_ == pytest.approx(held_out, rel=1e-3)
    mse = [np.mean((m.predict(X_test) - y_test) ** 2) for m in (factor, held)]
    assert mse[1] <= 1.02 * mse[0]
    # The conjugate gradients' steps of the fit on every row; a refit on
    # another route has none.
    assert held.n_iter_ > 0
    assert held.fit(X[:300], y[:300]).n_iter_ is None


def test_an_int_rank_takes_a_held_out_round_where_its_leave_one_out_passes_the_budget():
    with config_context(memory_budget=SMALL_BUDGET):
        assert held_out_rank(300, "uniform", 3000) == 300
        # At most the training rows of the split: the fit keeps the rank.
        assert held_out_rank(2625, "uniform", 3000) == 2625
        assert held_out_rank(2626, "uniform", 3000) is None
        assert held_out_rank(10_000, "uniform", 3000) is None
        assert held_out_rank(300, "uniform", 3000, n_positive=340) is None
        assert held_out_rank(2, "uniform", 3000) is None  # its search fits
        assert held_out_rank("auto", "uniform", 3000) is None
        assert held_out_rank(300, "pivoted", 3000) is None
        assert held_out_rank(300, "uniform", 100) is None  # K fits: exact route
    assert held_out_rank(300, "uniform", 3000) is None  # the default budget

    X, y = _problem(3000)
    X_test, y_test = _problem(2000, seed=1)
    params = dict(kernel="rbf", gamma=2.0, n_components=300, random_state=0)
    loo = DoFKernelRidgeCV(**params).fit(X, y)
    with config_context(memory_budget=SMALL_BUDGET):
        held = DoFKernelRidgeCV(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            held.fit(X, y)
    # The round's landmarks: the first training rows of the split's order.
    split = held_out_split(np.ones(3000), 0)
    np.testing.assert_array_equal(
        np.sort(held.nystroem_.component_indices_), np.sort(split.order[:300])
    )
    assert not np.array_equal(
        np.sort(loo.nystroem_.component_indices_), np.sort(split.order[:300])
    )
    assert held.n_components_ == 300
    assert held.alpha_ in held.alphas_
    # The transformer at min(alphas), as on the leave-one-out route.
    assert held.nystroem_.alpha_ == loo.nystroem_.alpha_ == min(held.alphas_)
    held_out = _held_out_mse(X, y, held.alpha_, 300, gamma=2.0)
    # (the round solves by the conjugate gradients, this fit directly)
    assert -held.best_score_ == pytest.approx(held_out, rel=5e-3)
    mse = [np.mean((m.predict(X_test) - y_test) ** 2) for m in (loo, held)]
    assert mse[1] <= 1.05 * mse[0]


@pytest.mark.parametrize("estimator", [DoFKernelRidge, DoFKernelRidgeCV])
def test_held_out_rounds_take_over_where_the_default_cap_stops_the_factor(estimator):
    # The factor certificate stops at the budget's 100 columns, short of
    # the thousands this problem asks for; held-out rounds then go on to
    # the budget's conjugate-gradient cap and warn in the factor's place.
    X, y = _problem(3000)
    params = {"alpha": 1e-5 * 3000} if estimator is DoFKernelRidge else {}
    model = estimator(kernel="rbf", gamma=8.0, random_state=0, **params)
    with config_context(memory_budget=SMALL_BUDGET):
        cg_cap = _memory.default_cg_components()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            model.fit(X, y)
    messages = [str(w.message) for w in record if w.category is UserWarning]
    assert len(messages) == 1
    assert "held-out loss estimate" in messages[0]
    assert f"stopped at {cg_cap} components" in messages[0]
    assert "memory budget" in messages[0]
    assert model.n_components_ == cg_cap
    assert model.nystroem_.requested_components_ > cg_cap


@pytest.mark.parametrize("estimator", [DoFKernelRidge, DoFKernelRidgeCV])
def test_rows_of_zero_weight_neither_train_nor_score_the_rounds(estimator):
    X, y = _problem(3000)
    rng = np.random.RandomState(1)
    weight = np.where(rng.rand(3000) < 0.3, 0.0, 1.0)
    corrupted = y + np.where(weight == 0, 50 * rng.randn(3000), 0.0)
    params = {"alpha": 0.3} if estimator is DoFKernelRidge else {}
    params.update(kernel="rbf", gamma=8.0, random_state=0)
    fits = []
    with config_context(memory_budget=SMALL_BUDGET), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the CG cap may bind
        for target in (y, corrupted):
            fits.append(estimator(**params).fit(X, target, sample_weight=weight))
    clean, dirty = fits
    assert clean.n_components_ == dirty.n_components_ > SMALL_BUDGET // (8 * 5 * 100)
    assert clean.nystroem_.loss_estimate_ == dirty.nystroem_.loss_estimate_
    np.testing.assert_allclose(dirty.predict(X), clean.predict(X), rtol=1e-9)
    if estimator is DoFKernelRidgeCV:
        assert clean.alpha_ == dirty.alpha_
        assert clean.best_score_ == pytest.approx(dirty.best_score_, rel=1e-9)


def test_the_held_out_score_weighs_each_row_s_error_by_its_weight():
    # As the leave-one-out score does: minus the mean of w_i e_i^2.
    X, y = _problem(3000)
    weight = np.where(X[:, 0] > 0, 10.0, 0.1)
    params = dict(kernel="rbf", gamma=2.0, n_components=300, random_state=0)
    with config_context(memory_budget=SMALL_BUDGET):
        model = DoFKernelRidgeCV(**params).fit(X, y, sample_weight=weight)
    expected = _held_out_mse(X, y, model.alpha_, 300, 2.0, weight=weight)
    assert -model.best_score_ == pytest.approx(expected, rel=5e-3)
    unweighted = _held_out_mse(X, y, model.alpha_, 300, 2.0, weight=weight > 0)
    assert -model.best_score_ != pytest.approx(unweighted, rel=0.1)


@pytest.mark.parametrize("rank", [{"n_components": 300}, {"max_components": 2400}])
def test_the_refit_on_every_row_keeps_the_rows_features_a_round_fell_back_to(rank):
    # A smooth kernel at a tiny penalty: rounding swamps the kernel basis's
    # Gram matrix, the round solves on the rows' own features, and the fit
    # on every row must take them too (it read the basis, absent, before).
    X, y = _problem(3000)
    params = dict(kernel="rbf", gamma=0.01, random_state=0)
    with config_context(memory_budget=SMALL_BUDGET):
        model = DoFKernelRidgeCV(alphas=[1e-9], **params, **rank).fit(X, y)
    split = held_out_split(np.ones(3000), 0)
    reference = DoFKernelRidge(
        alpha=1e-9,
        gamma=0.01,
        kernel="rbf",
        n_components=model.n_components_,
        sampling=NestedRows(split.order),
        solver="direct",
    ).fit(X, y)
    X_test, _ = _problem(500, seed=1)
    np.testing.assert_allclose(
        model.predict(X_test), reference.predict(X_test), rtol=1e-9, atol=1e-9
    )


def test_rounds_that_reach_every_training_row_say_so():
    # max_components past the rows: the rounds stop at the split's training
    # rows, where only every row (exact kernel ridge) is left to ask for.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(2000, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1])
    model = DoFKernelRidge(
        alpha=1e-7, kernel="laplacian", gamma=0.5, max_components=5000, random_state=0
    )
    with config_context(memory_budget=SMALL_BUDGET):
        with pytest.warns(UserWarning, match="every training row") as record:
            model.fit(X, y)
    n_train = 2000 - held_out_rows(2000)
    assert model.n_components_ == n_train
    assert model.nystroem_.requested_components_ == 2000
    message = str(record[0].message)
    # K's memory, and the budget whose exact share holds it.
    assert "max_components" not in message and "31 MiB" in message
    assert "memory budget of 20 MiB or more holds it" in message


def test_the_held_out_route_holds_the_memory_given_to_it(monkeypatch):
    # Each round's p x p factors replace the round before's, not stand
    # beside them: the fit at the conjugate-gradient cap stays within the
    # budget it was given.  The routes of large ranks (by tiles, factored
    # in place), taken here from 760 columns on, as from 8,192 by default.
    from sklearn_dof import _linalg, _tiles

    monkeypatch.setattr(_tiles, "TILE_ORDER", 760)
    monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", 190)
    monkeypatch.setattr(_linalg, "SHIFT_FIRST_COMPONENTS", 760)
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(4000, 4))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    budget = 8 * 3 * 1500**2
    with config_context(memory_budget=budget), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the CG cap binds
        model = DoFKernelRidgeCV(kernel="rbf", gamma=2.0, random_state=0)
        tracemalloc.start()
        model.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert model.n_components_ == _memory.default_cg_components() == 1500
    assert peak <= budget


def test_the_factor_rounds_hand_over_before_a_cap_round_that_cannot_certify(
    capsys, monkeypatch
):
    # A factor cap of 300 columns; the round at 128 asks for every one of
    # the 600 rows the certificate reads: the cap's round is skipped, and
    # the held-out rounds give the model they give after it.
    from sklearn_dof import _estimate

    X, y = _problem(4000)
    params = {"kernel": "rbf", "gamma": 8.0, "alpha": 0.04, "random_state": 0}
    with config_context(memory_budget=8 * 5 * 300**2), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the CG cap binds
        assert _memory.default_max_components() == 300
        handed = DoFKernelRidge(verbose=1, **params).fit(X, y)
        out = capsys.readouterr().out
        monkeypatch.setattr(_estimate, "_hands_over", lambda *args: False)
        after_cap = DoFKernelRidge(verbose=1, **params).fit(X, y)
        out_after_cap = capsys.readouterr().out
    assert "asks for more than the cap of 300 columns: handed over" in out
    assert "round 4: 300 columns" not in out
    assert "round 4: 300 columns" in out_after_cap
    assert handed.n_components_ == after_cap.n_components_ > 300
    np.testing.assert_allclose(handed.dual_coef_, after_cap.dual_coef_, rtol=1e-10)
