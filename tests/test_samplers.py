"""The samplers beyond the paper's: leverage, rpcholesky, user landmarks."""

import numpy as np
import pytest
from scipy import linalg
from sklearn.linear_model import Ridge

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFNystroem,
    degrees_of_freedom,
    dof_rank,
    randomly_pivoted_cholesky,
)
from sklearn_dof.datasets import make_clustered


def _rbf(X, Z, gamma):
    return np.exp(-gamma * ((X[:, None] - Z[None]) ** 2).sum(-1))


def make_nonuniform(n=900, seed=0):
    """A dense cluster, a sparse one and a few outliers: d_max >> d_eff."""
    data = make_clustered(n, random_state=seed)
    return data.X, data.y, data.f


def test_randomly_pivoted_cholesky_is_a_nystroem_factor():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    K = _rbf(X, X, 0.5)
    pivots, G = randomly_pivoted_cholesky(K, 60, random_state=0)
    assert pivots.size == np.unique(pivots).size == 60
    L = K[:, pivots] @ linalg.pinvh(K[np.ix_(pivots, pivots)]) @ K[pivots]
    np.testing.assert_allclose(G @ G.T, L, atol=1e-8)
    again, _ = randomly_pivoted_cholesky(K, 60, random_state=0)
    np.testing.assert_array_equal(again, pivots)


def test_randomly_pivoted_cholesky_draws_explained_points_last():
    # Every point duplicated: once one copy is a pivot, the other has no
    # residual and is never drawn; the sequential rule stops at the rank.
    rng = np.random.RandomState(1)
    X = rng.randn(40, 2)
    X = np.vstack([X, X])
    K = _rbf(X, X, 0.5)
    pivots, G = randomly_pivoted_cholesky(K, 80, block_size=1, random_state=0)
    assert np.unique(pivots % 40).size == pivots.size
    assert G.shape[1] <= 40


def test_rpcholesky_beats_uniform_on_outliers():
    X, _, _ = make_nonuniform(600)
    K = _rbf(X, X, 1.0)
    p = 60
    uni = np.random.RandomState(0).permutation(600)[:p]
    L_uni = K[:, uni] @ linalg.pinvh(K[np.ix_(uni, uni)]) @ K[uni]
    _, G = randomly_pivoted_cholesky(K, p, random_state=0)
    assert np.trace(K - G @ G.T) < 0.5 * np.trace(K - L_uni)


def test_column_weights_do_not_change_the_nystroem_approximation():
    # Why importance weights need no place in the feature map.
    rng = np.random.RandomState(2)
    X = rng.randn(100, 2)
    K = _rbf(X, X, 0.7)
    S = rng.choice(100, 20, replace=False)
    W = np.diag(rng.uniform(0.1, 10, 20))
    C = K[:, S]
    plain = C @ linalg.pinvh(K[np.ix_(S, S)]) @ C.T
    weighted = (C @ W) @ linalg.pinvh(W @ K[np.ix_(S, S)] @ W) @ (C @ W).T
    np.testing.assert_allclose(weighted, plain, atol=1e-8)


def test_dof_rank_of_d_eff_samplers():
    assert dof_rank(100.0, "leverage", d_eff=10.0) == 50
    assert dof_rank(100.0, "rpcholesky", d_eff=10.0, n_samples=20) == 20
    with pytest.raises(ValueError, match="d_eff"):
        dof_rank(100.0, "leverage")


@pytest.mark.parametrize("sampling", ["leverage", "rpcholesky"])
def test_d_eff_samplers_need_fewer_columns_on_nonuniform_data(sampling):
    X, y, f = make_nonuniform()
    alpha = 1.0
    K = _rbf(X, X, 1.0)
    exact = degrees_of_freedom(K, alpha)
    assert exact.d_max > 5 * exact.d_eff  # the data set does what it should
    z_exact = K @ np.linalg.solve(K + alpha * np.eye(len(y)), y)
    err_exact = np.mean((z_exact - f) ** 2)
    ratios, ranks = [], []
    for seed in range(4):
        model = DoFKernelRidge(
            alpha=alpha,
            gamma=1.0,
            n_components="dof",  # the samplers' rule from d_eff
            sampling=sampling,
            fit_intercept=False,
            random_state=seed,
        ).fit(X, y)
        ranks.append(model.n_components_)
        ratios.append(np.mean((model.predict(X) - f) ** 2) / err_exact)
    uniform = DoFNystroem(alpha=alpha, gamma=1.0, random_state=0).fit(X)
    assert np.mean(ratios) <= 1.01
    assert max(ranks) <= 0.5 * uniform.n_components_
    assert uniform.dof_ == pytest.approx(exact.d_max, rel=0.3)


@pytest.mark.parametrize("sampling", ["leverage", "rpcholesky"])
def test_d_eff_samplers_estimate_d_eff(sampling):
    X, _, _ = make_nonuniform()
    K = _rbf(X, X, 1.0)
    exact = degrees_of_freedom(K, 1.0)
    nys = DoFNystroem(alpha=1.0, gamma=1.0, sampling=sampling, random_state=0).fit(X)
    assert nys.effective_dof_ == pytest.approx(exact.d_eff, rel=0.15)
    assert nys.n_components_ == dof_rank(
        nys.dof_, sampling, len(X), d_eff=nys.effective_dof_
    )


@pytest.mark.parametrize("sampling", ["leverage", "rpcholesky"])
def test_fixed_rank_d_eff_samplers_are_reproducible(sampling):
    X, _, _ = make_nonuniform(300)
    a = DoFNystroem(gamma=1.0, n_components=50, sampling=sampling, random_state=3)
    b = DoFNystroem(gamma=1.0, n_components=50, sampling=sampling, random_state=3)
    np.testing.assert_array_equal(
        a.fit(X).component_indices_, b.fit(X).component_indices_
    )
    assert a.n_components_ == 50
    assert np.unique(a.component_indices_).size == 50


def test_landmarks_given_as_row_indices():
    X, y, _ = make_nonuniform(300)
    rows = np.array([5, 17, 42, 99, 123, 200, 250, 299])
    nys = DoFNystroem(gamma=1.0, sampling=rows).fit(X)  # "auto": all of them
    np.testing.assert_array_equal(nys.component_indices_, rows)
    np.testing.assert_array_equal(nys.components_, X[rows])
    assert nys.dof_columns_ == rows.size and nys.dof_ > 0
    prefix = DoFNystroem(gamma=1.0, sampling=rows, n_components=3).fit(X)
    np.testing.assert_array_equal(prefix.component_indices_, rows[:3])
    Phi = nys.transform(X)
    K = _rbf(X, X[rows], 1.0)
    np.testing.assert_allclose(Phi @ Phi.T, K @ linalg.pinvh(K[rows]) @ K.T, atol=1e-8)


@pytest.mark.parametrize(
    "rows, match",
    [
        ([1, 2, 2], "duplicated"),
        ([0, 300], "out of range"),
        ([-1, 3], "out of range"),
        ([0.5, 1.5], "integer row indices"),
        ([[0, 1]], "integer row indices"),
    ],
)
def test_bad_landmark_indices(rows, match):
    X, _, _ = make_nonuniform(300)
    with pytest.raises(ValueError, match=match):
        DoFNystroem(sampling=np.array(rows)).fit(X)


def test_more_components_than_given_landmarks():
    X, _, _ = make_nonuniform(300)
    with pytest.raises(ValueError, match="only 2 landmarks"):
        DoFNystroem(sampling=[0, 1], n_components=5).fit(X)


class KMeansCentres:
    def select(self, X, n_components, random_state):
        from sklearn.cluster import KMeans

        km = KMeans(n_components, n_init=1, random_state=random_state).fit(X)
        return km.cluster_centers_


class EveryOther:
    def select(self, X, n_components, random_state):
        return np.arange(0, X.shape[0], 2)[:n_components]


def test_selector_returning_points():
    X, y, f = make_nonuniform(400)
    nys = DoFNystroem(gamma=1.0, sampling=KMeansCentres(), n_components=40)
    Phi = nys.fit_transform(X)
    assert nys.component_indices_ is None
    Z = nys.components_
    assert Z.shape == (40, 2)
    K = _rbf(X, Z, 1.0)
    np.testing.assert_allclose(
        Phi @ Phi.T, K @ linalg.pinvh(_rbf(Z, Z, 1.0)) @ K.T, atol=1e-8
    )
    assert 0 < nys.effective_dof_ <= nys.dof_
    # and inside an estimator
    model = DoFKernelRidge(
        alpha=1.0, gamma=1.0, sampling=KMeansCentres(), n_components=40
    ).fit(X, y)
    Phi = model.nystroem_.transform(X)
    z = Ridge(alpha=1.0).fit(Phi, y).predict(Phi)
    np.testing.assert_allclose(model.predict(X), z, atol=1e-8)


def test_selector_returning_rows_with_dof_rank():
    X, _, _ = make_nonuniform(400)
    nys = DoFNystroem(gamma=1.0, sampling=EveryOther(), random_state=0).fit(X)
    expected = dof_rank(nys.dof_, "uniform", 400)
    np.testing.assert_array_equal(
        nys.component_indices_, np.arange(0, 400, 2)[:expected]
    )


@pytest.mark.parametrize(
    "output, match",
    [
        (np.array([1, 1, 2]), "distinct row indices"),
        (np.array([[0.0, 1.0, 2.0]]), "2 features"),
        (np.array([[np.nan, 1.0]]), "non-finite"),
        (np.array(["a", "b"]), "row indices"),
    ],
)
def test_bad_selector_output(output, match):
    class Bad:
        def select(self, X, n_components, random_state):
            return output

    X, _, _ = make_nonuniform(300)
    with pytest.raises(ValueError, match=match):
        DoFNystroem(sampling=Bad(), n_components=3).fit(X)


def test_precomputed_kernel_refuses_points():
    X, _, _ = make_nonuniform(100)
    K = _rbf(X, X, 1.0)
    with pytest.raises(ValueError, match="precomputed"):
        DoFNystroem(kernel="precomputed", sampling=KMeansCentres(), n_components=5).fit(
            K
        )


def test_logistic_keeps_rows_indexed_by_given_landmarks():
    X, y, _ = make_nonuniform(300)
    labels = (y > 0).astype(int)
    sw = np.ones(300)
    sw[:10] = 0.0  # rows a filter would drop, shifting the indices
    rows = np.arange(20, 80)
    clf = DoFKernelLogisticRegression(alpha=1e-2, gamma=1.0, sampling=rows)
    clf.fit(X, labels, sample_weight=sw)
    np.testing.assert_array_equal(clf.nystroem_.components_, X[rows])
