"""Pipelines, model search and persistence: the daily use of the library."""

import io
import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge, RidgeCV, SGDClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV, DoFNystroem


def _regression(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.randn(n)


def _fitted_models(X, y):
    return [
        DoFKernelRidge(alpha=1.0, gamma=0.5, n_components=40, random_state=0),
        DoFKernelRidgeCV(alphas=(0.1, 1.0), gamma=0.5, n_components=40, random_state=0),
        make_pipeline(
            DoFNystroem(alpha=1.0, gamma=0.5, n_components=40, random_state=0),
            Ridge(alpha=1.0),
        ),
    ]


@pytest.mark.parametrize("index", range(3))
def test_pickle_and_joblib_round_trip(index, tmp_path):
    X, y = _regression(400)
    model = _fitted_models(X, y)[index].fit(X, y)
    expected = model.predict(X)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), expected)
    joblib.dump(model, tmp_path / "model.joblib")
    np.testing.assert_array_equal(
        joblib.load(tmp_path / "model.joblib").predict(X), expected
    )


@pytest.mark.parametrize("index", range(3))
def test_pickle_size_does_not_grow_with_n(index):
    # A fitted model holds the landmarks, the p x p map and coefficients only.
    sizes = []
    for n in (500, 5000):
        X, y = _regression(n)
        model = _fitted_models(X, y)[index].fit(X, y)
        sizes.append(len(pickle.dumps(model)))
    assert abs(sizes[1] - sizes[0]) < 0.02 * sizes[0]


def test_skops_round_trip_lists_only_own_types(tmp_path):
    sio = pytest.importorskip("skops.io")
    X, y = _regression(300)
    model = make_pipeline(
        DoFNystroem(gamma=0.5, n_components=30, random_state=0), Ridge()
    ).fit(X, y)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert all(t.startswith("sklearn_dof.") for t in untrusted), untrusted
    loaded = sio.load(path, trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize(
    "head",
    [
        Ridge(alpha=1.0),
        RidgeCV(alphas=(0.1, 1.0, 10.0)),
    ],
)
def test_nystroem_ahead_of_regressors(head):
    X, y = _regression(300)
    model = make_pipeline(DoFNystroem(alpha=1.0, gamma=0.5, random_state=0), head)
    assert model.fit(X, y).score(X, y) > 0.9


@pytest.mark.parametrize(
    "head",
    [
        LogisticRegression(solver="newton-cholesky", C=1.0),
        SGDClassifier(loss="log_loss", random_state=0),
    ],
)
def test_nystroem_ahead_of_classifiers(head):
    X, y = _regression(300)
    labels = (y > np.median(y)).astype(int)
    model = make_pipeline(DoFNystroem(alpha=1.0, gamma=0.5, random_state=0), head)
    assert model.fit(X, labels).score(X, labels) > 0.85


def test_grid_search_over_penalty_and_rank_in_processes():
    X, y = _regression(300)
    grid = GridSearchCV(
        DoFKernelRidge(gamma=0.5, random_state=0),
        {"alpha": [0.1, 1.0, 10.0], "n_components": [10, 50, "auto"]},
        cv=3,
        n_jobs=2,
        error_score="raise",
    ).fit(X, y)
    assert grid.best_params_["n_components"] != 10  # too few columns loses
    assert len(grid.cv_results_["params"]) == 9
    assert grid.best_estimator_.n_components_ >= 10


def test_grid_search_over_pipeline_parameters():
    X, y = _regression(300)
    pipe = make_pipeline(DoFNystroem(gamma=0.5, random_state=0), Ridge())
    grid = GridSearchCV(
        pipe,
        {
            "dofnystroem__alpha": [0.1, 1.0],
            "ridge__alpha": [0.1, 1.0],
            "dofnystroem__sampling": ["uniform", "pivoted"],
        },
        cv=3,
        error_score="raise",
    ).fit(X, y)
    assert grid.best_score_ > 0.9


def test_clone_set_params_and_pandas_output():
    pd = pytest.importorskip("pandas")
    X, _ = _regression(100)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    nys = DoFNystroem(n_components=5, random_state=0).set_params(gamma=0.5)
    copy = clone(nys)
    assert copy.get_params()["gamma"] == 0.5
    out = copy.set_output(transform="pandas").fit_transform(frame)
    assert list(out.columns) == [f"dofnystroem{i}" for i in range(5)]
    np.testing.assert_array_equal(copy.feature_names_in_, ["a", "b", "c"])


def test_fitted_model_serves_from_a_buffer():
    # What a model server does: bytes in, predictions out.
    X, y = _regression(200)
    model = DoFKernelRidge(gamma=0.5, random_state=0).fit(X, y)
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    served = joblib.load(buffer)
    np.testing.assert_array_equal(served.predict(X[:1]), model.predict(X[:1]))
