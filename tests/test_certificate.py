"""The loss certificate of the automatic rank, its budget and its exact end."""

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import rbf_kernel

from sklearn_dof import (
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
    _certificate,
    _estimate,
    _landmarks,
    _memory,
    config_context,
    dof_rank,
)
from sklearn_dof._certificate import logistic_certificate, loo_curve, loss_certificate
from sklearn_dof._dof import _lower_bounds
from sklearn_dof._kernels import KernelColumns
from sklearn_dof._ridge import DEFAULT_LAMBDAS
from sklearn_dof._samplers import SAMPLING_RULES, partial_cholesky_of


def _target(X):
    return np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2]


@pytest.fixture(scope="module")
def problem():
    """800 training rows, 20,000 test rows of the same noisy function, and
    the test error of exact kernel ridge (with an intercept)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (800, 3))
    y = _target(X) + 0.3 * rng.randn(800)
    X_test = rng.uniform(-1, 1, (20_000, 3))
    y_test = _target(X_test) + 0.3 * rng.randn(20_000)
    alpha, gamma = 800 * 1e-4, 2.0
    K = rbf_kernel(X, gamma=gamma)
    dual = np.linalg.solve(K + alpha * np.eye(800), y - y.mean())
    exact = rbf_kernel(X_test, X, gamma=gamma) @ dual + y.mean()
    error = np.mean((exact - y_test) ** 2)
    return X, y, X_test, y_test, alpha, gamma, error


def _factor(X, gamma, order):
    chol = partial_cholesky_of(KernelColumns(X, "rbf", {"gamma": gamma}))
    chol.add(order)
    return chol


@pytest.mark.parametrize("center", [True, False])
def test_loo_curve_is_the_leave_one_out_of_every_prefix_rank(center):
    rng = np.random.RandomState(0)
    X = rng.randn(300, 3)
    Y = np.c_[np.sin(X[:, 0]) + 0.1 * rng.randn(300), X[:, 1]]
    chol = _factor(X, 0.5, np.arange(0, 300, 3))
    alpha = 0.7
    ranks, squares = loo_curve(chol, Y, alpha, center, n_ranks=7)
    assert ranks[0] == 0 and ranks[-1] == chol.rank and len(ranks) == 8
    G = chol.factor
    for j, q in enumerate(ranks):
        F, T = G[:, :q], Y
        if center:
            F, T = F - F.mean(axis=0), Y - Y.mean(axis=0)
        H = F @ np.linalg.solve(F.T @ F + alpha * np.eye(q), F.T)
        H += 1 / 300 if center else 0.0
        loo = (T - H @ T) / (1 - np.diag(H))[:, None]
        np.testing.assert_allclose(squares[:, j], (loo**2).sum(axis=1), rtol=1e-9)


@pytest.mark.parametrize("center", [True, False])
def test_loo_pass_gives_the_uncentred_scores_of_the_factor(center):
    # The lower bounds diag G (G^T G + alpha I)^-1 G^T that the degrees of
    # freedom report, made by the certificate's pass (centred Z, then the
    # rank-one correction), against a solve on the uncentred factor.
    rng = np.random.RandomState(5)
    X = rng.randn(400, 3) + 2.0
    y = np.sin(X[:, 0])[:, None]
    chol = _factor(X, 0.3, np.arange(0, 400, 4))
    alpha = 0.05
    _, _, scores = loo_curve(chol, y, alpha, center, scores=True)
    G = chol.factor
    expected = np.einsum(
        "ij,ji->i", G, np.linalg.solve(G.T @ G + alpha * np.eye(G.shape[1]), G.T)
    )
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(scores, _lower_bounds(chol, alpha), rtol=1e-8)
    certificate = loss_certificate(chol, y, alpha, center)
    np.testing.assert_allclose(certificate.leverage_bounds, expected, rtol=1e-8)


@pytest.mark.parametrize("center", [True, False])
def test_weighted_pass_gives_the_weighted_scores_of_the_centred_factor(center):
    # Newton's weighted ridge: diag W^1/2 G_c (G_c^T W G_c + alpha I)^-1
    # G_c^T W^1/2, G_c centred on the weighted means; their sum is the
    # logistic certificate's d.o.f.
    rng = np.random.RandomState(6)
    X = rng.randn(300, 3)
    y = np.sin(X[:, 0])[:, None]
    w = rng.uniform(0.01, 0.25, 300)
    chol = _factor(X, 0.3, np.arange(0, 300, 5))
    alpha = 0.05
    _, _, scores = loo_curve(chol, y, alpha, center, weights=w, scores=True)
    G = chol.factor
    if center:
        G = G - (w @ G) / w.sum()
    A = np.sqrt(w)[:, None] * G
    expected = np.einsum(
        "ij,ji->i", A, np.linalg.solve(A.T @ A + alpha * np.eye(G.shape[1]), A.T)
    )
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-12)
    labels = (y[:, 0] > 0).astype(int)
    certificate = logistic_certificate(chol, labels, alpha, center)
    assert 0 < certificate.dof < np.sum(_lower_bounds(chol, alpha))


def test_certificate_is_monotone_and_tracks_the_measured_loss(problem):
    X, y, X_test, y_test, alpha, gamma, error = problem
    chol = _factor(X, gamma, np.random.RandomState(1).permutation(800))
    certificate = loss_certificate(chol, y[:, None], alpha)
    assert certificate.complete and certificate.tail == 0.0
    losses = certificate.losses
    assert np.all(np.diff(losses) <= 0) and losses[-1] == 0.0
    tol = 0.01
    q = certificate.certified_rank(tol)
    assert np.all(losses[certificate.ranks < q] > tol)
    assert np.all(losses[certificate.ranks >= q] <= tol)
    # Against the excess test error measured on 20,000 fresh points: far
    # from the exact fit the estimate is within a factor 3 of it (a mean of
    # leave-one-out differences over a few hundred rows), and the ranks it
    # certifies lose at most twice the tolerance.
    for rank in (20, 40, 60, 120, 200):
        landmarks = np.asarray(chol.column_pivots[:rank])
        model = DoFKernelRidge(
            alpha=alpha, gamma=gamma, n_components=rank, sampling=landmarks
        ).fit(X, y)
        measured = np.mean((model.predict(X_test) - y_test) ** 2) / error - 1
        estimate = certificate.loss(rank)
        if measured > 0.1:
            assert measured / 3 <= estimate <= 3 * measured
        if estimate <= tol:
            assert measured <= 2 * tol


def test_certified_rank_keeps_test_error_and_says_so(problem):
    X, y, X_test, y_test, alpha, gamma, error = problem
    model = DoFKernelRidge(alpha=alpha, gamma=gamma, random_state=0).fit(X, y)
    nystroem = model.nystroem_
    assert 0 <= nystroem.loss_estimate_ <= nystroem.loss_tol == 0.01
    assert nystroem.requested_components_ is None
    measured = np.mean((model.predict(X_test) - y_test) ** 2) / error - 1
    assert measured <= 0.01
    assert model.n_components_ < 400
    # The paper's rule, by name, is the rank of the d.o.f. estimate.
    paper = DoFKernelRidge(
        alpha=alpha, gamma=gamma, n_components="dof", random_state=0
    ).fit(X, y)
    assert paper.n_components_ == dof_rank(paper.dof_, "uniform", 800)
    assert np.isnan(paper.nystroem_.loss_estimate_)


def test_transformer_certifies_on_the_targets_a_pipeline_passes(problem):
    X, y, *_, alpha, gamma, _ = problem
    with_y = DoFNystroem(alpha=alpha, gamma=gamma, random_state=0).fit(X, y)
    without = DoFNystroem(alpha=alpha, gamma=gamma, random_state=0).fit(X)
    assert 0 <= with_y.loss_estimate_ <= 0.01
    # Without targets (or with class labels as strings) the paper's rule.
    assert np.isnan(without.loss_estimate_)
    labels = np.where(y > 0, "a", "b")
    with_labels = DoFNystroem(alpha=alpha, gamma=gamma, random_state=0).fit(X, labels)
    assert with_labels.n_components_ == without.n_components_


def test_cap_binds_with_a_warning(problem):
    X, y, *_, gamma, _ = problem
    model = DoFKernelRidge(alpha=1e-6, gamma=gamma, max_components=40, random_state=0)
    with pytest.warns(UserWarning, match="stopped at max_components=40") as record:
        model.fit(X, y)
    assert "asks for about" in str(record[0].message)
    nystroem = model.nystroem_
    assert model.n_components_ == 40
    assert nystroem.loss_estimate_ > nystroem.loss_tol
    assert 40 < nystroem.requested_components_ <= 800


def test_near_n_the_fit_is_exact_kernel_ridge(monkeypatch):
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (300, 2))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.randn(300)
    # A narrow kernel and a small penalty: every row matters.
    kw = dict(alpha=300 * 1e-7, gamma=30.0)
    certified_ranks = []

    def recording(factor, *args, **kwargs):
        certified_ranks.append(factor.rank)
        return loss_certificate(factor, *args, **kwargs)

    monkeypatch.setattr(_estimate, "loss_certificate", recording)
    model = DoFKernelRidge(fit_intercept=False, random_state=0, **kw).fit(X, y)
    assert model.nystroem_.exact_ and model.n_components_ == 300
    # The round to every row computes no leave-one-out errors: the exact
    # method loses nothing, and its certificate would cost n^3.
    assert certified_ranks and max(certified_ranks) <= 150
    assert model.nystroem_.loss_estimate_ == 0.0
    # The scores' bounds of the round before: d_eff <= d_max <= n.
    assert 0 < model.effective_dof_ <= model.dof_ <= 300
    exact = KernelRidge(kernel="rbf", **kw).fit(X, y)
    X_new = rng.uniform(-1, 1, (50, 2))
    np.testing.assert_allclose(model.predict(X_new), exact.predict(X_new), atol=1e-7)
    # The transformer alone grows the factor of every row (its features),
    # still without its certificate.
    certified_ranks.clear()
    transformer = DoFNystroem(random_state=0, **kw).fit(X, y)
    assert transformer.exact_ and transformer.n_components_ == 300
    assert max(certified_ranks) <= 150 and transformer.loss_estimate_ == 0.0


def test_unresolved_spectrum_goes_exact_a_round_early(monkeypatch):
    rng = np.random.RandomState(0)
    n = 400
    X = rng.uniform(-1, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.randn(n)
    kw = dict(alpha=n * 1e-7, gamma=30.0)
    rounds = []

    def recording(factor, response, alpha, center=True):
        certificate = loss_certificate(factor, response, alpha, center)
        rounds.append((factor.rank, not certificate.resolved))
        return certificate

    skipped = []

    def d_eff(factor, alpha):
        value = _certificate.factor_d_eff(factor, alpha)
        skipped.append((factor.rank, value))
        return value

    monkeypatch.setattr(_estimate, "loss_certificate", recording)
    monkeypatch.setattr(_estimate, "factor_d_eff", d_eff)
    model = DoFKernelRidge(fit_intercept=False, random_state=0, **kw).fit(X, y)
    assert model.nystroem_.exact_ and model.n_components_ == n
    # 32: its L carries more than 16 d.o.f. and the round after next (128)
    # stays below n / 2 = 200, so no certificate, the rank doubles.  64: the
    # round after next would pass n / 2, and 64's L carries more than 32
    # d.o.f. with nothing certified, so the fit goes to every row without
    # the round of 128 columns.
    assert len(skipped) == 1 and skipped[0][0] == 32 and skipped[0][1] > 16
    assert [rank for rank, _ in rounds] == [64]
    assert rounds[-1][1]
    # The same 64 columns against a penalty far above their spectrum (the
    # kernel's diagonal is 1): less than half a d.o.f. per direction.
    chol = partial_cholesky_of(KernelColumns(X, "rbf", {"gamma": 30.0}, None))
    SAMPLING_RULES["uniform"].growth(chol, n, 0, 1.0)(64)
    for alpha, unresolved in ((n * 1e-7, True), (10.0 * n, False)):
        certificate = loss_certificate(chol, y[:, None], alpha, False)
        assert certificate.resolved is not unresolved
        assert certificate.dof == pytest.approx(certificate.leverage_bounds.sum())
        # The pass's d.o.f. are those of the factor's spectrum.
        spectrum = np.linalg.eigvalsh(chol.gram())
        assert certificate.dof == pytest.approx((spectrum / (spectrum + alpha)).sum())
        # And the factor's Gram matrix alone gives them, with or without the
        # intercept (the scores are those of the uncentred factor).
        for center in (False, True):
            dof = loss_certificate(chol, y[:, None], alpha, center).dof
            assert _certificate.factor_d_eff(chol, alpha) == pytest.approx(dof)
    # Without d.o.f. (the exact method's certificate): nothing unresolved.
    assert _certificate.LossCertificate.exact_method(n, n).resolved


def test_a_plateau_of_an_unresolved_factor_certifies_nothing(monkeypatch):
    # Noisy targets at a penalty far below the kernel's spectrum: the
    # leave-one-out error of the first ranks is flat (all noise), but L
    # carries about a d.o.f. per column, and the exact fit differs.
    rng = np.random.RandomState(0)
    n = 600
    X = rng.randn(n, 8)
    y = 0.3 * np.sin(X[:, 0]) + rng.randn(n)
    rounds = []

    def recording(factor, response, alpha, center=True):
        certificate = loss_certificate(factor, response, alpha, center)
        unresolved = not certificate.resolved
        rounds.append((factor.rank, certificate.certified_rank(0.01), unresolved))
        return certificate

    monkeypatch.setattr(_estimate, "loss_certificate", recording)
    kw = dict(gamma=1 / 8, fit_intercept=False, random_state=0)
    # Capped at 64 columns (the last round is always certified): the
    # leave-one-out error is flat from rank 0 (certified rank 0), on a
    # factor that is not resolved; the fit keeps every column grown, and
    # the warning asks for a doubling more, certifying no loss.
    with pytest.warns(UserWarning, match="asks for about 128 components"):
        capped = DoFKernelRidge(alpha=n * 1e-6, max_components=64, **kw).fit(X, y)
    assert rounds[-1] == (64, 0, True)
    assert capped.n_components_ == 64 and capped.nystroem_.loss_estimate_ == np.inf
    # Uncapped, the same rounds certify nothing, and the fit is exact.
    rounds.clear()
    model = DoFKernelRidge(alpha=n * 1e-6, **kw).fit(X, y)
    assert rounds and all(unresolved for _, _, unresolved in rounds)
    assert model.nystroem_.exact_ and model.n_components_ == n
    exact = KernelRidge(alpha=n * 1e-6, kernel="rbf", gamma=1 / 8).fit(X, y)
    np.testing.assert_allclose(model.predict(X[:20]), exact.predict(X[:20]), rtol=1e-6)
    # At a penalty the spectrum reaches, the same plateau stops the rounds.
    rounds.clear()
    model = DoFKernelRidge(alpha=n * 1e-2, **kw).fit(X, y)
    rank, certified, unresolved = rounds[-1]
    assert 2 * certified <= rank and not unresolved
    assert model.n_components_ == certified < n


def test_budget_bounds_the_factor_and_subsamples_beyond_it(monkeypatch):
    rng = np.random.RandomState(0)
    n, cap = 20_000, 64
    X = rng.randn(n, 4)
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(n)
    model = DoFKernelRidge(alpha=n * 1e-9, gamma=0.5, max_components=cap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cap binds
        tracemalloc.start()
        model.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert model.n_components_ == cap
    factor = 8 * n * cap
    # The factor, the certificate's blocks of rows, X, y and the landmarks.
    assert peak < 2 * factor + 8 * _certificate._BLOCK_BYTES
    # Past the factor's budget the certificate reads a subsample of rows.
    monkeypatch.setattr(_memory, "factor_budget", lambda: factor // 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tracemalloc.start()
        model.fit(X, y)
        _, subsampled = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert subsampled < 0.5 * peak
    assert model.n_components_ == cap
    assert np.isfinite(model.predict(X[:10])).all()


def test_certificate_rows_hold_two_rows_per_column_at_large_ranks():
    # Below the budget's default cap the factor's budget decides the rows;
    # above, two rows per column: a factor of twice the p x p block.
    with config_context(memory_budget=40 * 8192**2):
        budget = _memory.factor_budget()
        assert budget == 2**30 and _memory.default_max_components() == 8192
        rows = _landmarks.certificate_rows(10**6, 4096, 0)
        assert len(rows) == budget // (8 * 4096)
        for max_rank in (8192, 20_000, 50_000):
            rows = _landmarks.certificate_rows(10**6, max_rank, 0)
            assert len(rows) == 2 * max_rank
            assert 8 * len(rows) * max_rank <= max(budget, 2 * 8 * max_rank**2)
        assert _landmarks.certificate_rows(30_000, 20_000, 0) is None  # all rows


def test_the_certificates_factor_of_the_gram_matrix_takes_its_memory(monkeypatch):
    # Above the tile order, gram + s I, its factor and the factor's inverse
    # are one r x r array: the gram's own with overwrite_gram, else a copy.
    from sklearn_dof import _certificate, _tiles

    monkeypatch.setattr(_tiles, "TILE_ORDER", 256)
    monkeypatch.setattr(_tiles, "UPDATE_COLUMNS", 64)
    rng = np.random.default_rng(0)
    r = 1000
    G = rng.standard_normal((2 * r, r))
    gram = G.T @ G
    expected = np.linalg.inv(np.linalg.cholesky(gram + 1e-3 * np.eye(r)))
    block = gram.copy()
    tracemalloc.start()
    R_inv, shift = _certificate._shifted_inverse_factor(block, 1e-3, True)
    _, in_place = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert shift == 1e-3 and np.shares_memory(R_inv, block)
    np.testing.assert_allclose(R_inv, expected, rtol=1e-8, atol=1e-12)
    # The quarter of the inverse's halves and the tiles' panels only.
    assert in_place < 0.5 * 8 * r * r
    kept = gram.copy()
    tracemalloc.start()
    R_inv = _certificate._shifted_inverse_factor(kept, 1e-3)[0]
    _, copied = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    np.testing.assert_array_equal(kept, gram)
    np.testing.assert_allclose(R_inv, expected, rtol=1e-8, atol=1e-12)
    assert copied > 8 * r * r > in_place


def _smooth_rows(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4)
    f = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1] - X[:, 2])
    return X, f + 0.05 * rng.randn(n)


@pytest.mark.parametrize(
    "lam, expected", [(1e-2, [1000, 2000]), (1e-3, [1000, 2000, 4000])]
)
def test_rank_is_certified_on_the_fewest_rows_that_suffice(lam, expected, monkeypatch):
    # Squared loss: the rounds read a uniform subsample at the same lambda
    # first; a subsample too small for the rank (its cap, half of its rows)
    # or for the standard errors passes on to more rows, from the columns
    # reached, and a subsample that suffices is the last one read.
    monkeypatch.setattr(_landmarks, "MIN_CERTIFICATE_ROWS", 1000)
    n = 4000
    X, y = _smooth_rows(n)
    ladder = _landmarks.certificate_ladder(n, 4096, 0)
    assert [len(rows) for rows in ladder[:-1]] == [1000, 2000] and ladder[-1] is None
    assert set(ladder[0]) <= set(ladder[1])  # nested draws
    calls = []
    recording = _recording(_estimate.certified_estimate, calls)
    monkeypatch.setattr(_landmarks, "certified_estimate", recording)
    alpha, gamma = n * lam, 0.25
    model = DoFKernelRidge(alpha=alpha, gamma=gamma, random_state=0).fit(X, y)
    assert [rows for rows, _ in calls] == expected
    assert calls[0][1] is None and calls[1][1] == 500
    if expected[-1] < n:
        rows = ladder[len(expected) - 1]
        assert np.isin(model.nystroem_.component_indices_, rows).all()
    # The promise holds on every row: the test error of exact kernel ridge.
    X_test, y_test = _smooth_rows(20_000, seed=1)
    exact = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X, y - y.mean())
    reference = np.mean((exact.predict(X_test) + y.mean() - y_test) ** 2)
    error = np.mean((model.predict(X_test) - y_test) ** 2)
    assert error <= 1.01 * reference


def _recording(function, lines):
    """``certified_estimate``, noting the rows and first round of each
    call."""

    def record(access, request):
        lines.append((access.n_samples, request.first))
        return function(access, request)

    return record


def test_standard_errors_fall_with_the_rows_and_ask_for_them():
    rng = np.random.RandomState(0)
    n, r = 400, 40
    ranks = np.arange(0, r + 1, 4)
    squares = rng.gamma(2.0, 1.0, (n, 1)) * (
        1.0 + 0.02 * (ranks[-1] - ranks) / r * rng.rand(n, ranks.size)
    )
    position = np.full(n, r)
    small = _certificate.LossCertificate(ranks, squares, position, complete=True)
    # The same rows four times over: the standard errors halve.
    large = _certificate.LossCertificate(
        ranks, np.tile(squares, (4, 1)), np.full(4 * n, r), complete=True
    )
    np.testing.assert_allclose(large.noise[:-1], small.noise[:-1] / 2, rtol=2e-3)
    assert np.all(small.losses >= small.noise)
    tol = 0.05
    q = small.certified_rank(tol)
    noise = small.noise_at(q)
    allowed = _certificate.NOISE_SHARE * tol
    needed, reason = _landmarks._rows_needed(small, tol, n, capped=True)
    if noise <= allowed:
        assert needed is None and reason is None
    else:
        assert needed == pytest.approx(n * (noise / allowed) ** 2)
        assert reason.startswith("standard errors")
    # Within a share of a tolerance ten times looser, the rows suffice.
    assert _landmarks._rows_needed(small, 10 * tol, n, capped=True) == (None, None)


def test_cv_certifies_the_rank_for_the_penalty_it_selects(problem):
    X, y, X_test, y_test, alpha, gamma, error = problem
    model = DoFKernelRidgeCV(gamma=gamma, random_state=0).fit(X, y)
    # The default grid is on the paper's scale, alpha = n * lambda.
    assert model.alpha_ / 800 in DEFAULT_LAMBDAS
    # The rank is sized for the penalty chosen, not by the degrees of
    # freedom at the grid's smallest (1e-6 here, d_max near n).
    assert model.nystroem_.alpha_ == model.alpha_
    # (fit writes no parameter of the inner transformer.)
    assert model.nystroem_.alpha == min(model.alphas_)
    assert model.n_components_ < 400
    smallest = DoFKernelRidge(
        alpha=800 * DEFAULT_LAMBDAS[0], gamma=gamma, n_components="dof"
    ).fit(X, y)
    assert model.n_components_ < smallest.n_components_
    measured = np.mean((model.predict(X_test) - y_test) ** 2) / error - 1
    assert measured <= 0.01


@pytest.mark.parametrize("step_rows", [None, 7])
def test_losses_are_paired_means_over_the_rows_that_are_no_landmark(
    step_rows, monkeypatch
):
    # The definition, one rank at a time: the mean difference of squared
    # leave-one-out residuals against rank r over the rows not among the
    # first q landmarks, plus two standard errors, over their mean at r.
    rng = np.random.RandomState(3)
    n, r = 500, 120
    ranks = np.unique(np.linspace(0, r, 13).round().astype(int))
    if step_rows is not None:  # the rows that are no landmark, by steps
        monkeypatch.setattr(_certificate, "_BLOCK_BYTES", 8 * 12 * step_rows)
    squares = rng.gamma(0.5, 2.0, (n, 1)) * (
        1.0 + np.linspace(0.3, 0.0, ranks.size) * rng.rand(n, ranks.size)
    )
    position = np.full(n, r)
    position[rng.permutation(n)[:r]] = np.arange(r)
    # Rows past r: no landmark (a column mixing pivots names none).
    position[rng.permutation(np.flatnonzero(position == r))[:40]] = r + 1
    certificate = _certificate.LossCertificate(ranks, squares, position, complete=True)
    excess = np.zeros(ranks.size)
    for j, q in enumerate(ranks[:-1]):
        rows = position >= q
        d = squares[rows, j] - squares[rows, -1]
        spread = d.std() / np.sqrt(rows.sum() - 1)
        excess[j] = (d.mean() + 2 * spread) / squares[rows, -1].mean()
    expected = np.maximum.accumulate(excess[::-1])[::-1]
    np.testing.assert_allclose(certificate.losses, expected, rtol=1e-10, atol=1e-14)
    assert certificate.losses[0] > 0.05 and certificate.losses[-1] == 0.0


@pytest.mark.parametrize("center", [True, False])
def test_penalty_errors_are_ridge_leave_one_out(center):
    from sklearn.linear_model import RidgeCV

    rng = np.random.RandomState(1)
    X = rng.randn(400, 4)
    y = np.sin(X[:, 0]) + 0.2 * rng.randn(400)
    chol = _factor(X, 0.5, np.arange(0, 400, 5))
    penalties = np.logspace(-3, 2, 6)
    errors = _certificate.penalty_errors(
        chol, y[:, None], penalties, center, max_rank=50
    )
    G = chol.factor[:, :50]
    for penalty, error in zip(penalties, errors, strict=True):
        ridge = RidgeCV(alphas=[penalty], fit_intercept=center, store_cv_results=True)
        ridge.fit(G, y)
        np.testing.assert_allclose(error, ridge.cv_results_.mean(), rtol=1e-8)


def test_rounds_below_the_cap_end_on_it(monkeypatch):
    from sklearn_dof import _estimate

    assert [_estimate._first_round(c, 10**5) for c in (640, 4096, 100, 40)] == [
        40,
        32,
        50,
        40,
    ]
    # A cap at or above half of the rows: the rounds go to all rows at once.
    assert _estimate._first_round(600, 1000) == 32
    rounds = []
    original = _estimate.loss_certificate
    original_d_eff = _estimate.factor_d_eff

    def spy(chol, *args):
        rounds.append(chol.rank)
        return original(chol, *args)

    def spy_d_eff(chol, alpha):
        rounds.append(chol.rank)  # (a round that may make no certificate)
        return original_d_eff(chol, alpha)

    monkeypatch.setattr(_estimate, "loss_certificate", spy)
    monkeypatch.setattr(_estimate, "factor_d_eff", spy_d_eff)
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (1000, 3))
    y = _target(X) + 0.01 * rng.randn(1000)
    with pytest.warns(UserWarning, match="max_components=120"):
        model = DoFKernelRidgeCV(gamma=20.0, max_components=120, random_state=0)
        model.fit(X, y)
    assert sorted(set(rounds)) == [60, 120] and model.n_components_ == 120


def test_prefix_features_take_their_sums_from_the_factor():
    # Unit weights: the certified rank's features are the factor's leading
    # columns and their normal equations come from its Gram matrix; weights
    # of 2 at twice the penalty (the same problem) sum them by a pass.  The
    # cap fixes the same landmarks for both.
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (600, 3))
    y = _target(X) + 0.01 * rng.randn(600)
    params = dict(gamma=20.0, max_components=90, random_state=0)
    for fit_intercept in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            unit = DoFKernelRidge(alpha=1e-3, fit_intercept=fit_intercept, **params)
            unit.fit(X, y)
            doubled = DoFKernelRidge(alpha=2e-3, fit_intercept=fit_intercept, **params)
            doubled.fit(X, y, sample_weight=np.full(600, 2.0))
        np.testing.assert_array_equal(
            unit.nystroem_.component_indices_, doubled.nystroem_.component_indices_
        )
        np.testing.assert_allclose(unit.predict(X), doubled.predict(X), atol=1e-8)


def test_logistic_certificate_is_the_approximate_leave_one_out():
    # At the largest rank the certificate's mean log-loss is that of the
    # leave-one-out predictors of Newton's quadratic model at the logistic
    # fit (Rad and Maleki's approximate leave-one-out): close to the exact
    # leave-one-out refits.
    from scipy.special import expit
    from sklearn.linear_model import LogisticRegression

    rng = np.random.RandomState(0)
    X = rng.randn(200, 2)
    labels = X[:, 0] + 0.5 * np.sin(3 * X[:, 1]) + 0.7 * rng.randn(200) > 0
    labels = labels.astype(int)
    chol = _factor(X, 0.5, np.arange(0, 200, 8))
    alpha = 2.0
    certificate = _certificate.logistic_certificate(chol, labels, alpha)
    G = chol.factor
    losses = []
    for i in range(200):
        keep = np.arange(200) != i
        model = LogisticRegression(C=1 / alpha, tol=1e-10, max_iter=1000)
        model.fit(G[keep], labels[keep])
        p = expit(model.decision_function(G[i : i + 1])[0])
        losses.append(-np.log(p if labels[i] else 1 - p))
    np.testing.assert_allclose(certificate.errors[-1], np.mean(losses), rtol=0.01)
    # Rank 0 is the intercept alone, the log-loss of the base rate.
    assert certificate.errors[0] > certificate.errors[-1]


def test_multinomial_certificate_is_the_approximate_leave_one_out():
    # Three classes: the rows' curvature matrices replaced by their
    # curvature along each row's own gradient (one weight per row, shared
    # by the classes), the mean leave-one-out log-loss at the largest rank
    # stays within 1% of the exact refits' (measured 0.44% below, where the
    # training log-loss is 5.7% below), and the fit is the multinomial one.
    from scipy.special import log_softmax
    from sklearn.linear_model import LogisticRegression

    rng = np.random.RandomState(0)
    X = rng.randn(240, 2)
    score = np.c_[X[:, 0], X[:, 1], 0.5 * np.sin(3 * X[:, 0])]
    labels = (score + 0.7 * rng.randn(240, 3)).argmax(axis=1)
    chol = _factor(X, 0.5, np.arange(0, 240, 8))
    alpha = 2.0
    certificate = _certificate.logistic_certificate(chol, np.eye(3)[labels], alpha)
    G = chol.factor
    full = LogisticRegression(C=1 / alpha, tol=1e-10, max_iter=5000).fit(G, labels)
    np.testing.assert_allclose(certificate.fit.coef, full.coef_, atol=1e-3)
    assert certificate.fit.hessian is None  # no multinomial Hessian factored
    losses = []
    for i in range(240):
        keep = np.arange(240) != i
        model = LogisticRegression(C=1 / alpha, tol=1e-10, max_iter=5000)
        model.fit(G[keep], labels[keep])
        losses.append(-log_softmax(model.decision_function(G[i : i + 1])[0])[labels[i]])
    np.testing.assert_allclose(certificate.errors[-1], np.mean(losses), rtol=0.01)
    training = -log_softmax(full.decision_function(G), axis=1)[np.arange(240), labels]
    assert certificate.errors[-1] > 1.03 * training.mean()
    assert certificate.errors[0] > certificate.errors[-1]


def test_logistic_auto_rank_keeps_the_test_log_loss():
    from sklearn.datasets import make_moons
    from sklearn.metrics import log_loss

    from sklearn_dof import DoFKernelLogisticRegression

    X, y = make_moons(1500, noise=0.3, random_state=0)
    X_test, y_test = make_moons(20_000, noise=0.3, random_state=1)
    params = dict(alpha=1.0, gamma=2.0, random_state=0)
    auto = DoFKernelLogisticRegression(**params).fit(X, y)
    full = DoFKernelLogisticRegression(n_components=1500, **params).fit(X, y)
    dof = DoFKernelLogisticRegression(n_components="dof", **params).fit(X, y)
    assert auto.nystroem_.loss_estimate_ <= 0.01
    # The model keeps the columns grown, four times the rank certified:
    # still a fraction of the degrees-of-freedom rule's.
    assert auto.n_components_ < dof.n_components_ / 3
    excess = log_loss(y_test, auto.predict_proba(X_test)) / log_loss(
        y_test, full.predict_proba(X_test)
    )
    assert excess - 1 <= 0.01
    # More than two classes: certified on the multinomial log-loss.
    three, three_test = (
        np.where(Z[:, 1] > 0.5, 2, t) for Z, t in ((X, y), (X_test, y_test))
    )
    multi = DoFKernelLogisticRegression(**params).fit(X, three)
    multi_full = DoFKernelLogisticRegression(n_components=1500, **params)
    multi_full.fit(X, three)
    multi_dof = DoFKernelLogisticRegression(n_components="dof", **params)
    multi_dof.fit(X, three)
    assert multi.nystroem_.loss_estimate_ <= 0.01
    assert multi.n_components_ < multi_dof.n_components_ / 3
    excess = log_loss(three_test, multi.predict_proba(X_test)) / log_loss(
        three_test, multi_full.predict_proba(X_test)
    )
    assert excess - 1 <= 0.01


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_certified_model_equals_an_int_fit_on_its_landmarks(fit_intercept):
    # The certified rank's model is read off the rounds' factor (no second
    # pass over the kernel columns); it must be the model that a fit at
    # that rank, on the same landmarks given as rows, computes afresh.
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (1500, 3))
    y = _target(X) + 0.1 * rng.randn(1500)
    params = dict(alpha=1.0, gamma=2.0, fit_intercept=fit_intercept)
    auto = DoFKernelRidge(random_state=0, **params).fit(X, y)
    landmarks = auto.nystroem_.component_indices_
    assert np.isfinite(auto.nystroem_.loss_estimate_)
    assert 32 < auto.n_components_ < 750  # certified, neither tiny nor exact
    given = DoFKernelRidge(
        n_components=len(landmarks), sampling=landmarks, **params
    ).fit(X, y)
    np.testing.assert_array_equal(given.nystroem_.component_indices_, landmarks)
    X_new = rng.uniform(-1, 1, (300, 3))
    np.testing.assert_allclose(
        auto.predict(X_new), given.predict(X_new), rtol=1e-8, atol=1e-8
    )
    np.testing.assert_allclose(auto.intercept_, given.intercept_, atol=1e-8)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_certified_model_starts_from_the_certificate_fit(n_classes):
    # The certified rank's final Newton fit starts at the last round's
    # logistic fit (the same columns): the model of a cold fit on the same
    # landmarks, in fewer steps, binomial or multinomial.  (Three classes of
    # make_moons keep 176 columns of a two-dimensional kernel, a landmark
    # block of condition 2e13: the two fits' decision values differed by
    # 2e-4 at every Newton tolerance from 1e-8 to 1e-12, the rounding of
    # the features' two routes; five dimensions keep the condition at 2e8.)
    from sklearn.datasets import make_moons

    from sklearn_dof import DoFKernelLogisticRegression

    if n_classes == 2:
        X, y = make_moons(1500, noise=0.3, random_state=0)
        X_new = make_moons(300, noise=0.3, random_state=1)[0]
        params = dict(alpha=1.0, gamma=2.0)
    else:
        rng = np.random.RandomState(0)
        X, X_new = rng.randn(1500, 5), rng.randn(300, 5)
        score = np.c_[X[:, 0], np.sin(3 * X[:, 1]), X[:, 2] * X[:, 3]]
        y = (score + 0.5 * rng.randn(1500, 3)).argmax(axis=1)
        params = dict(alpha=1.0, gamma=0.1)
    auto = DoFKernelLogisticRegression(random_state=0, **params).fit(X, y)
    landmarks = auto.nystroem_.component_indices_
    assert np.isfinite(auto.nystroem_.loss_estimate_)
    assert len(landmarks) < 1500 // 2
    given = DoFKernelLogisticRegression(
        n_components=len(landmarks), sampling=landmarks, **params
    ).fit(X, y)
    np.testing.assert_allclose(
        auto.decision_function(X_new), given.decision_function(X_new), atol=1e-6
    )
    assert auto.n_iter_[0] < given.n_iter_[0]


def test_logistic_certificate_from_a_warm_start_is_the_same():
    # Each round's Newton fit starts at the round before's (its columns are
    # the factor's first ones): the same optimum, so the same certificate,
    # in fewer steps.
    rng = np.random.RandomState(0)
    X = rng.randn(600, 2)
    labels = (X[:, 0] + np.sin(3 * X[:, 1]) + 0.5 * rng.randn(600) > 0).astype(int)
    chol = _factor(X, 0.5, np.arange(0, 600, 4))
    half = _factor(X, 0.5, np.arange(0, 600, 4)[:75])
    alpha = 0.5
    start = _certificate.logistic_certificate(half, labels, alpha).fit
    cold = _certificate.logistic_certificate(chol, labels, alpha)
    warm = _certificate.logistic_certificate(chol, labels, alpha, start=start)
    # (The certificate's Newton fits stop within _CERTIFICATE_NEWTON_TOL =
    # 1e-5 of the objective: coefficients of order one agree to about 1e-3,
    # the relative excess losses to 1e-4, far below a loss_tol.)
    assert _certificate._CERTIFICATE_NEWTON_TOL == 1e-5
    np.testing.assert_allclose(warm.fit.coef, cold.fit.coef, atol=3e-3)
    np.testing.assert_allclose(warm.losses, cold.losses, rtol=1e-4, atol=1e-9)
    assert warm.fit.n_iter < cold.fit.n_iter


@pytest.mark.parametrize("chunk", [7, 1024])
def test_pivot_row_dof_reads_the_factor_and_its_pivot_rows(monkeypatch, chunk):
    # The degrees of freedom a logistic certified rank reports, in O(r^3):
    # d_eff is the factor's tr L (L + alpha I)^{-1}, the sum of every row's
    # score, and d_max the largest score of a pivot row, times n (its pivot
    # rows scored in one chunk or several).
    from sklearn_dof import _estimate
    from sklearn_dof._estimate import _PivotRowDoF

    monkeypatch.setattr(_estimate, "_PIVOT_ROW_CHUNK", chunk)

    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    chol = _factor(X, 0.5, rng.permutation(400)[:60])
    alpha = 0.3
    G = chol.factor.astype(np.float64)
    scores = np.einsum(
        "ij,ji->i", G, np.linalg.solve(G.T @ G + alpha * np.eye(60), G.T)
    )
    dof = _PivotRowDoF(chol, alpha, 400)
    assert dof.n_columns == 60
    np.testing.assert_allclose(dof.d_eff, scores.sum(), rtol=1e-10)
    pivots = np.asarray(chol.pivots)
    np.testing.assert_allclose(dof.d_max, 400 * scores[pivots].max(), rtol=1e-10)
    assert dof.d_max < 400 * scores.max() or scores.argmax() in pivots


def test_logistic_certified_rank_reports_the_pivot_rows_dof():
    # No pass of n r^2 over the rows for the reported dof_: the factor's
    # pivot rows give it (the rows' lower bounds are not computed).
    from sklearn.datasets import make_moons

    from sklearn_dof import DoFKernelLogisticRegression, _dof

    X, y = make_moons(1500, noise=0.3, random_state=0)
    calls = []
    original = _dof._lower_bounds

    def counted(chol, alpha):
        calls.append(chol.rank)
        return original(chol, alpha)

    _dof._lower_bounds = counted
    try:
        clf = DoFKernelLogisticRegression(alpha=1.0, gamma=2.0, random_state=0)
        clf.fit(X, y)
    finally:
        _dof._lower_bounds = original
    assert np.isfinite(clf.nystroem_.loss_estimate_)
    assert calls == []
    assert 0 < clf.effective_dof_ <= clf.dof_ <= 1500


@pytest.mark.parametrize("chunk_rows", [50, 10_000])
def test_extended_factor_is_the_factor_of_every_row_on_the_same_pivots(
    monkeypatch, chunk_rows
):
    # A subsample's factor extended to every row: the subsample's rows keep
    # theirs, the others get K(x, I) G_I^{-T}; the same factor (up to
    # rounding) as the partial Cholesky of all the rows on those pivots,
    # whether the other rows come in one chunk or several.
    from sklearn_dof import _sampling
    from sklearn_dof._sampling import extended_factor

    monkeypatch.setattr(_sampling, "_EXTENSION_CHUNK_BYTES", 8 * 60 * chunk_rows)

    rng = np.random.RandomState(0)
    X = rng.randn(500, 3)
    access = KernelColumns(X, "rbf", {"gamma": 0.5})
    rows = np.sort(rng.choice(500, 200, replace=False))
    sub = partial_cholesky_of(access.row_subset(rows))
    sub.add(rng.permutation(200)[:80])
    columns = np.asarray(sub.column_pivots[:60])
    full = extended_factor(sub, rows, columns, access)
    landmarks = rows[columns]
    every = partial_cholesky_of(access)
    every.add(landmarks)
    assert full.rank == 60 and full.column_pivots == landmarks.tolist()
    np.testing.assert_allclose(full.factor, every.factor, atol=1e-8)
    assert full.factor.flags.c_contiguous  # the fit reads blocks of rows
    np.testing.assert_array_equal(full.factor[rows], sub.factor[:, :60])
    np.testing.assert_allclose(full.residual, every.residual, atol=1e-8)
    G = full.factor
    np.testing.assert_allclose(full.gram(), G.T @ G, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("extend", [True, False])
def test_logistic_rank_certified_on_rows_reuses_their_factor(
    monkeypatch, capsys, extend
):
    # Certified on a subsample of the rows, the logistic fit takes its
    # features from the subsample's factor extended to every row (no
    # second pass over those rows' kernel columns), unless the features
    # would not fit the cache; either way the model of an int fit on the
    # same landmarks.
    from sklearn.datasets import make_classification

    from sklearn_dof import DoFKernelLogisticRegression, _logistic, _memory

    X, y = make_classification(
        3000, n_features=6, n_informative=4, flip_y=0.05, random_state=0
    )
    # Factors of at most 600 rows: the rounds read a subsample.
    monkeypatch.setattr(_memory, "factor_budget", lambda: 8 * 600 * 300)
    if not extend:
        monkeypatch.setattr(_logistic, "_feature_cache_bytes", lambda: 0)
    params = dict(alpha=1.0, gamma=0.2)
    auto = DoFKernelLogisticRegression(
        random_state=0, max_components=300, verbose=1, **params
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cap may bind
        auto.fit(X, y)
    out = capsys.readouterr().out
    assert "of the 3000 rows" in out
    assert ("read off the rows' factor" in out) == extend
    landmarks = auto.nystroem_.component_indices_
    given = DoFKernelLogisticRegression(
        n_components=len(landmarks), sampling=landmarks, tol=1e-12, **params
    ).fit(X, y)
    np.testing.assert_allclose(
        auto.decision_function(X[:300]), given.decision_function(X[:300]), atol=1e-6
    )


@pytest.mark.parametrize("objective", ["logistic", "squared"])
def test_uncertified_logistic_rounds_go_to_the_cap_a_round_early(
    monkeypatch, objective
):
    # Nothing certified at r and the round after 2 r would be the cap: the
    # logistic rounds go to the cap at once (the squared loss's rounds,
    # cheaper, still take the round at 2 r).

    from sklearn_dof import _certificate

    monkeypatch.setattr(_certificate, "_tail", lambda *args: np.inf)
    rounds = _rounds_grown(objective, max_rank=500, first=150)
    assert rounds == ([150, 500] if objective == "logistic" else [150, 300, 500])
    # The round after 2 r exactly the cap (rounds doubling to a power of
    # two): the cap at once too.
    rounds = _rounds_grown(objective, max_rank=512, first=128)
    assert rounds == ([128, 512] if objective == "logistic" else [128, 256, 512])


def _rounds_grown(objective, max_rank, first):
    """The columns of each round of certified rounds on a two-class problem
    (the loss ``objective`` on its labels)."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        3000, n_features=6, n_informative=4, flip_y=0.05, random_state=0
    )
    lines = []
    request = _estimate.RankRequest(
        1.0,
        0.01,
        0,
        SAMPLING_RULES["uniform"].estimate_rule(),
        y if objective == "logistic" else y[:, None].astype(float),
        True,
        max_rank,
        objective=objective,
        progress=lines.append,
        first=first,
    )
    _estimate.certified_estimate(KernelColumns(X, "rbf", {"gamma": 0.2}), request)
    return [int(line.split(": ")[1].split(" columns")[0]) for line in lines]


def _binary_factor(n, step):
    """Two-class labels on ``n`` points and the factor of every ``step``-th."""
    rng = np.random.RandomState(0)
    X = rng.randn(n, 2)
    labels = (X[:, 0] + np.sin(3 * X[:, 1]) + 0.5 * rng.randn(n) > 0).astype(int)
    return labels, _factor(X, 0.5, np.arange(0, n, step))


@pytest.mark.parametrize("center", [True, False])
def test_logistic_certificate_fit_carries_its_hessian_factored(center):
    # The leave-one-out pass factors the weighted ridge's Hessian, which at
    # the logistic fit is that fit's Hessian (intercept eliminated): its
    # solve is n H^{-1} on the fit's columns and on every prefix of them.
    from scipy.special import expit

    labels, chol = _binary_factor(500, 10)
    rng = np.random.RandomState(1)
    alpha = 0.5
    certificate = _certificate.logistic_certificate(chol, labels, alpha, center)
    fit = certificate.fit
    hessian = fit.hessian
    G = chol.factor.astype(np.float64)
    r = G.shape[1]
    assert hessian.inverse.shape == (r, r) and hessian.n_samples == 500
    p = expit(G @ fit.coef[0] + fit.intercept[0])
    w = p * (1 - p)
    Ga = np.c_[G, np.ones(500)] if center else G
    H = Ga.T @ (w[:, None] * Ga)
    H[np.arange(r), np.arange(r)] += alpha
    for q in (r, r // 2, 1):
        index = np.r_[np.arange(q), [r] if center else []].astype(int)
        rhs = rng.randn(index.size)
        expected = 500 * np.linalg.solve(H[np.ix_(index, index)], rhs)
        np.testing.assert_allclose(hessian.solve(rhs, center), expected, rtol=1e-7)


def test_logistic_certificate_past_the_hessian_budget_keeps_no_hessian(monkeypatch):
    # Past the solver's Hessian budget (r > 5,792 at 256 MiB) the
    # certificate keeps no factor, and still certifies: the same losses as
    # within it.
    labels, chol = _binary_factor(500, 10)
    within = _certificate.logistic_certificate(chol, labels, 0.5)
    r = chol.factor.shape[1]
    monkeypatch.setattr(_certificate, "DEFAULT_MAX_HESSIAN_BYTES", 8 * r**2 - 1)
    past = _certificate.logistic_certificate(chol, labels, 0.5)
    assert within.fit.hessian is not None and past.fit.hessian is None
    np.testing.assert_allclose(past.losses, within.losses, rtol=1e-12)


def test_final_fit_from_the_certificate_takes_its_hessian(monkeypatch):
    # The fit that starts at the certificate's preconditions its Newton-CG
    # steps with the Hessian the certificate factored: no Gram matrix or
    # Hessian of its own (each a pass of n r^2), fewer Hessian products than
    # the same start without it, the same optimum as a cold fit.
    from sklearn_dof import _newton

    labels, chol = _binary_factor(800, 8)
    alpha = 0.1
    fit = _certificate.logistic_certificate(chol, labels, alpha).fit
    G = chol.factor.astype(np.float64)
    kwargs = dict(tol=1e-9, inner_solver="cg")
    cold = _newton.logistic_newton(G, labels, alpha, **kwargs)
    reference = _newton.logistic_newton(G[:, :40], labels, alpha, tol=1e-10)
    products = []
    hessp = _newton._Problem.hessp

    def counted(self, V, P):
        products.append(1)
        return hessp(self, V, P)

    monkeypatch.setattr(_newton._Problem, "hessp", counted)
    without = _newton.logistic_newton(
        G, labels, alpha, start=fit._replace(hessian=None), **kwargs
    )
    plain = len(products)

    def no_pass(self, *args):
        raise AssertionError("a pass of n r^2 the certificate's Hessian replaces")

    monkeypatch.setattr(_newton._Problem, "gram", no_pass)
    monkeypatch.setattr(_newton._Problem, "hessian", no_pass)
    products.clear()
    with_hessian = _newton.logistic_newton(G, labels, alpha, start=fit, **kwargs)
    assert len(products) < plain
    for result in (with_hessian, without):
        assert result.converged
        np.testing.assert_allclose(result.coef, cold.coef, atol=1e-6)
        np.testing.assert_allclose(result.intercept, cold.intercept, atol=1e-6)
    # A prefix of the columns (a certified rank below the rounds') too.
    prefix = fit._replace(coef=fit.coef[:, :40])
    cut = _newton.logistic_newton(G[:, :40], labels, alpha, start=prefix, **kwargs)
    np.testing.assert_allclose(cut.coef, reference.coef, rtol=1e-5, atol=1e-5)


def test_tail_reads_a_quiet_doubling_by_the_mean_ratio_of_two():
    # A geometric decrease keeps its ratio; a quiet last doubling after two
    # loud ones (the error falls in steps) takes the mean ratio of the last
    # two doublings, not its own, so its tail is not read as near zero.
    ranks = np.arange(0, 65)

    def errors(*at):
        return np.interp(ranks, [0, 8, 16, 32, 64], [2.0, *at])

    geometric = errors(1.8, 1.4, 1.2, 1.1)
    assert _certificate._decrease_ratio(ranks, geometric) == pytest.approx(0.5)
    quiet = errors(1.5, 1.4, 1.3, 1.29)
    ratio = _certificate._decrease_ratio(ranks, quiet)
    assert ratio == pytest.approx(np.sqrt(0.01 / 0.1))
    tail = _certificate._tail(ranks, quiet, 1.29)
    assert tail == pytest.approx(0.01 / 1.29 * ratio / (1 - ratio))
    # A decrease that stopped shrinking in the last doubling keeps its ratio.
    assert _certificate._tail(ranks, errors(1.5, 1.2, 1.1, 1.0), 1.0) == np.inf
    # Below eight columns, the last two doublings only.
    short = np.interp(np.arange(5), [0, 1, 2, 4], [3.0, 2.0, 1.5, 1.25])
    assert _certificate._decrease_ratio(np.arange(5), short) == pytest.approx(0.5)


@pytest.mark.parametrize("objective", ["logistic", "squared"])
def test_logistic_rounds_stop_on_a_plateau_of_two_doublings(monkeypatch, objective):
    # A rank certified at 0.4 r is a plateau of one doubling: the squared
    # loss's rounds stop there; the log-loss's (which falls in steps) grow
    # to four times it, and go to the cap once the round after would.

    from sklearn_dof import _certificate, _estimate

    monkeypatch.setattr(
        _certificate.LossCertificate,
        "certified_rank",
        lambda self, tol: int(0.4 * self.rank),
    )
    monkeypatch.setattr(
        _certificate.LossCertificate, "resolved", property(lambda self: True)
    )
    monkeypatch.setattr(_estimate, "factor_d_eff", lambda chol, alpha: 0.0)
    rounds = _rounds_grown(objective, max_rank=1000, first=64)
    expected = [64, 100, 160, 256, 408, 1000] if objective == "logistic" else [64]
    assert rounds == expected


@pytest.mark.parametrize("center", [True, False])
def test_leave_one_out_pass_of_some_rows_is_those_rows_of_the_whole(center):
    # The pass over a subsample of rows gives those rows' losses and scores
    # of the pass over every row, and the weighted ridge's degrees of
    # freedom from the factorisation alone are the sum of every row's
    # scores.
    labels, chol = _binary_factor(600, 12)
    rng = np.random.RandomState(2)
    weights = rng.uniform(0.05, 0.25, 600)
    loo = _certificate.LeaveOneOutPass(
        chol, labels[:, None].astype(float), 0.3, center, weights=weights, scores=True
    )
    squares, scores = loo.losses()
    rows = np.sort(rng.choice(600, 137, replace=False))
    some_squares, some_scores = loo.losses(rows)
    np.testing.assert_allclose(some_squares, squares[rows], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(some_scores, scores[rows], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(loo.dof, scores.sum(), rtol=1e-10)


def test_logistic_certificate_reads_the_rows_its_standard_errors_need(monkeypatch):
    # With an order of the rows, the certificate reads its first LOO_ROWS
    # and then more while the standard errors at the rank certified take
    # more than NOISE_SHARE of loss_tol; read to the end, it is the
    # certificate of every row.
    labels, chol = _binary_factor(3000, 30)
    order = np.random.RandomState(5).permutation(3000)
    alpha, tol = 1.0, 0.02
    whole = _certificate.logistic_certificate(chol, labels, alpha)
    assert whole.rows_read == 3000
    certified = whole.certified_rank(tol)
    assert certified is not None
    monkeypatch.setattr(_certificate, "LOO_ROWS", 300)
    loose = _certificate.logistic_certificate(
        chol, labels, alpha, loss_tol=10.0, row_order=order
    )
    assert loose.rows_read == 300
    # A tenth of the rows: standard errors about three times as large.
    quarter = whole.rank // 4
    assert loose.noise_at(quarter) > 2 * whole.noise_at(quarter)
    read = _certificate.logistic_certificate(
        chol, labels, alpha, loss_tol=tol, row_order=order
    )
    assert 300 < read.rows_read
    share = _certificate.NOISE_SHARE * tol
    rank = read.certified_rank(tol)
    assert read.rows_read == 3000 or read.noise_at(rank) <= share
    monkeypatch.setattr(_certificate, "NOISE_SHARE", 1e-9)
    every = _certificate.logistic_certificate(
        chol, labels, alpha, loss_tol=tol, row_order=order
    )
    assert every.rows_read == 3000
    np.testing.assert_allclose(every.losses, whole.losses, rtol=1e-12)
    np.testing.assert_allclose(every.errors, whole.errors, rtol=1e-12)


def test_uniform_two_class_rounds_report_the_dof_of_an_int_fit_on_their_pivots(
    monkeypatch,
):
    # Two-class rounds of uniform pivots form no Gram matrix of the factor
    # (Newton-CG preconditioned by the pivot rows), and the model keeps
    # every pivot grown: its degrees of freedom are those an int fit on the
    # same landmarks (the same uniform draw) reports, computed as that fit
    # does, from K(I, I) on the first read of dof_, not during the fit.
    from sklearn_dof import DoFKernelLogisticRegression, _estimate, _sampling

    rng = np.random.RandomState(0)
    X = rng.randn(1500, 5)  # no pivot of a numerically dependent block
    labels = (X[:, 0] + np.sin(3 * X[:, 1]) + 0.5 * rng.randn(1500) > 0).astype(int)
    calls = []
    gram = _sampling.PartialCholesky.gram

    def counted(self):
        calls.append(self.rank)
        return gram(self)

    monkeypatch.setattr(_sampling.PartialCholesky, "gram", counted)
    estimates = []
    landmark_dof = _estimate.uniform_landmark_dof
    monkeypatch.setattr(
        _estimate,
        "uniform_landmark_dof",
        lambda *args: estimates.append(args) or landmark_dof(*args),
    )
    params = dict(alpha=1.0, gamma=0.1, random_state=0)
    auto = DoFKernelLogisticRegression(**params).fit(X, labels)
    assert calls == [] and estimates == []
    assert auto.nystroem_.loss_estimate_ <= 0.01
    p = auto.n_components_
    fixed = DoFKernelLogisticRegression(n_components=p, **params).fit(X, labels)
    np.testing.assert_array_equal(
        auto.nystroem_.component_indices_, fixed.nystroem_.component_indices_
    )
    for name in ("dof_", "effective_dof_", "averaged_dof_"):
        reported = getattr(auto.nystroem_, name)
        np.testing.assert_allclose(reported, getattr(fixed.nystroem_, name), rtol=1e-8)
    assert auto.nystroem_.dof_columns_ == p


def test_rounds_near_the_kernels_numerical_rank_double_their_pivots(capsys):
    # On two-dimensional points a Gaussian kernel's numerical rank is a few
    # hundred: past it most pivots add no column.  A two-class round
    # certifying q short of its plateau (4 q columns) grows the pivots by
    # what the columns lack, at the rate its own pivots added columns, and
    # doubles them after a round that added no column, not one pivot a
    # round (590 rounds, each with its certificate, before; 8 now).
    from sklearn_dof import DoFKernelLogisticRegression

    labels, _ = _binary_factor(1500, 10)
    X = np.random.RandomState(0).randn(1500, 2)  # _binary_factor's points
    clf = DoFKernelLogisticRegression(alpha=1.0, gamma=0.5, random_state=0, verbose=1)
    clf.fit(X, labels)
    lines = capsys.readouterr().out.splitlines()
    rounds = [line for line in lines if " round " in line]
    assert len(rounds) <= 12
    assert clf.nystroem_.loss_estimate_ <= 0.01
