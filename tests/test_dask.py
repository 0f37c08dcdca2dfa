"""Dask executor: the same fits on a distributed cluster, chunk by chunk.

Every test runs on one real ``distributed.LocalCluster`` (two worker
processes, one thread each) and compares with the numpy path on the same
data and seed.  Skipped when ``distributed`` (the ``distributed`` extra) is
not installed.
"""

import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import dask  # noqa: E402
from distributed.diagnostics.plugin import SchedulerPlugin  # noqa: E402

from sklearn_dof import (  # noqa: E402
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
    _dask,  # noqa: E402
)
from sklearn_dof._blocks import FeatureBlocks, normal_equations  # noqa: E402

ATOL = 1e-8


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # port and resource-tracker chatter
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(1200, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.randn(1200)
    # Columns in two chunks: the estimators rechunk them into one.
    return X, y, da.from_array(X, chunks=(300, 2))


def _assert_same_nystroem(a, b, X, Xd):
    assert b.n_components_ == a.n_components_
    np.testing.assert_array_equal(b.component_indices_, a.component_indices_)
    np.testing.assert_allclose(b.components_, a.components_, rtol=0, atol=0)
    assert isinstance(b.components_, np.ndarray)
    np.testing.assert_allclose(b.normalization_, a.normalization_, atol=ATOL)
    for name in ("dof_", "effective_dof_", "averaged_dof_"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-10)
    assert b.dof_columns_ == a.dof_columns_
    Z = b.transform(Xd)
    assert isinstance(Z, da.Array)
    assert Z.chunks[0] == Xd.chunks[0]
    np.testing.assert_allclose(Z.compute(), a.transform(X), atol=ATOL)


@pytest.mark.parametrize(
    "params",
    [
        {"n_components": 40},
        {"n_components": 8, "sampling": "pivoted"},
        {},
        {"sampling": "rpcholesky", "n_components": 24},
        {"sampling": "leverage", "n_components": 50},
        {"sampling": np.arange(0, 1200, 37)},
        pytest.param({"sampling": "pivoted"}, marks=pytest.mark.slow),
        pytest.param({"sampling": "rpcholesky"}, marks=pytest.mark.slow),
    ],
    ids=["uniform-int", "pivoted-int", "uniform-auto", "rpcholesky-int",
         "leverage-int", "given-rows", "pivoted-auto", "rpcholesky-auto"],
)  # fmt: skip
def test_nystroem_agrees_with_numpy(client, data, params):
    X, _, Xd = data
    make = lambda: DoFNystroem(alpha=30.0, gamma=0.5, random_state=0, **params)  # noqa: E731
    _assert_same_nystroem(make().fit(X), make().fit(Xd), X, Xd)


def test_float32_stays_float32(client, data):
    X, _, Xd = data
    X32, Xd32 = X.astype(np.float32), Xd.astype(np.float32)
    a = DoFNystroem(alpha=30.0, gamma=0.5, n_components=30, random_state=0)
    b = DoFNystroem(alpha=30.0, gamma=0.5, n_components=30, random_state=0)
    Z = b.fit(Xd32).transform(Xd32)
    assert Z.dtype == np.float32 and b.components_.dtype == np.float32
    np.testing.assert_allclose(Z.compute(), a.fit(X32).transform(X32), atol=1e-6)


def test_ridge_agrees_with_numpy(client, data):
    X, y, Xd = data
    sw = np.random.RandomState(1).uniform(0.5, 2.0, X.shape[0])
    # "auto" on a dask array is the degrees-of-freedom rule (the certified
    # rank needs the factor in memory): the same rule on both.
    make = lambda: DoFKernelRidge(  # noqa: E731
        alpha=3.0, gamma=0.5, n_components="dof", random_state=0
    )
    a = make().fit(X, y, sample_weight=sw)
    # y as a dask array too: it is a per-row vector, gathered on the client.
    b = make().fit(Xd, da.from_array(y, chunks=500), sample_weight=sw)
    assert b.n_components_ == a.n_components_
    np.testing.assert_allclose(b.coef_, a.coef_, atol=ATOL)
    np.testing.assert_allclose(b.intercept_, a.intercept_, atol=ATOL)
    pred = b.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == (X.shape[0],)
    np.testing.assert_allclose(pred.compute(), a.predict(X), atol=ATOL)
    # The fitted model is a plain estimator: no tie to the cluster.
    plain = pickle.loads(pickle.dumps(b))
    np.testing.assert_allclose(plain.predict(X), a.predict(X), atol=ATOL)


def test_cg_solver_agrees_with_numpy(client, data, monkeypatch):
    # Falkon's conjugate gradients: each step one block reduction of the
    # kernel products on the cluster.  To the rounding floor, the numpy fit.
    from sklearn_dof import _ridge_solve

    X, y, Xd = data
    monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 150)
    make = lambda: DoFKernelRidge(  # noqa: E731
        alpha=3.0, gamma=0.5, n_components=80, solver="cg", random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at the floor
        a = make().fit(X, y)
        b = make().fit(Xd, y)
    assert b.n_iter_ > 0
    np.testing.assert_allclose(b.dual_coef_, a.dual_coef_, atol=ATOL)
    np.testing.assert_allclose(b.intercept_, a.intercept_, atol=ATOL)


def test_precomputed_kernel(client, data):
    X, y, _ = data
    K = np.exp(-0.5 * ((X[:400, None] - X[None, :400]) ** 2).sum(-1))
    Kd = da.from_array(K, chunks=(100, 400))
    make = lambda: DoFKernelRidge(  # noqa: E731
        kernel="precomputed", n_components="dof", random_state=0
    )
    a, b = make().fit(K, y[:400]), make().fit(Kd, y[:400])
    np.testing.assert_array_equal(b.nystroem_.components_, a.nystroem_.components_)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=ATOL)
    np.testing.assert_allclose(b.predict(Kd).compute(), a.predict(K), atol=ATOL)


def test_ridge_cv_loo_agrees_with_numpy(client, data):
    X, y, Xd = data
    Y = np.column_stack([y, np.cos(X[:, 0])])  # two targets
    make = lambda: DoFKernelRidgeCV(  # noqa: E731
        alphas=(3.0, 30.0, 300.0),
        gamma=0.5,
        n_components="dof",  # "auto" on a dask array
        store_cv_results=True,
        random_state=0,
    )
    a, b = make().fit(X, Y), make().fit(Xd, Y)
    assert b.alpha_ == a.alpha_
    np.testing.assert_allclose(b.best_score_, a.best_score_, rtol=1e-10)
    np.testing.assert_allclose(b.cv_results_, a.cv_results_, atol=ATOL)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=ATOL)
    pred = b.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == Y.shape
    np.testing.assert_allclose(pred.compute(), a.predict(X), atol=ATOL)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_agrees_with_numpy(client, data, n_classes):
    X, y, Xd = data
    index = (y > 0).astype(int) if n_classes == 2 else np.digitize(y, [-0.5, 0.5])
    labels = np.array(["low", "mid", "high"])[index]  # string classes
    # Rows of zero weight leave the fit (a boolean mask of the dask array).
    sw = np.where(np.arange(X.shape[0]) % 9 == 0, 0.0, 1.0 + (index == 1))
    make = lambda: DoFKernelLogisticRegression(  # noqa: E731
        alpha=1e-2, gamma=0.5, n_components=40, random_state=0
    )
    a, b = make().fit(X, labels, sw), make().fit(Xd, labels, sw)
    assert b.n_iter_[0] == a.n_iter_[0]
    np.testing.assert_array_equal(b.classes_, a.classes_)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=ATOL)
    np.testing.assert_allclose(b.intercept_, a.intercept_, atol=ATOL)
    for method in ("decision_function", "predict_proba", "predict_log_proba"):
        out = getattr(b, method)(Xd)
        assert isinstance(out, da.Array)
        np.testing.assert_allclose(out.compute(), getattr(a, method)(X), atol=ATOL)
    pred = b.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), a.predict(X))


def test_feature_blocks_reduce_and_map_like_in_memory(client, data):
    X, y, Xd = data
    nys = DoFNystroem(alpha=30.0, gamma=0.5, n_components=25, random_state=0)
    nys.fit(X)
    ref = nys._training_features(X, working_memory=0.01)  # many small blocks
    blocks = nys._training_features(Xd.rechunk({1: -1}))
    assert isinstance(blocks, _dask.DaskFeatureBlocks)
    assert isinstance(ref, FeatureBlocks) and len(ref.slices) > 4
    sw = np.linspace(0.5, 1.5, X.shape[0])
    for expected, got in zip(
        normal_equations(ref, y[:, None], sw, True),
        normal_equations(blocks, y[:, None], sw, True),
        strict=True,
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    square = lambda Phi_b, y_b: (Phi_b**2).sum(1) * y_b  # noqa: E731
    np.testing.assert_allclose(blocks.map(square, y), ref.map(square, y), atol=1e-10)
    Phi = ref.toarray()
    first = blocks.first_block()  # the first chunk's rows
    np.testing.assert_allclose(first, Phi[: first.shape[0]], atol=1e-12)
    assert isinstance(blocks.toarray(), da.Array)
    np.testing.assert_allclose(blocks.toarray().compute(), Phi, atol=1e-12)
    # Shipped inside a statistic's closure, the blocks weigh nothing.
    assert len(pickle.dumps(blocks)) < len(pickle.dumps(blocks.rotation)) + 2000


def test_kernel_products_stream_on_the_workers(client, data, monkeypatch):
    """Kernel blocks that are not persisted are streamed on the workers in
    chunks of rows: the sums of the threaded blocks, from smaller pieces."""
    from sklearn_dof import _nystroem

    X, y, Xd = data
    nys = DoFNystroem(alpha=30.0, gamma=0.5, n_components=25, random_state=0)
    nys.fit(X)
    monkeypatch.setattr(_nystroem, "CHUNK_ENTRIES", 25 * 30)
    monkeypatch.setattr(_dask, "PERSIST_FRACTION", 0.0)
    blocks = nys._training_features(Xd, kernel_basis=True)
    assert isinstance(blocks, _dask.DaskFeatureBlocks) and not blocks.cached
    K = nys._training_features(X, kernel_basis=True).toarray()
    U = np.random.RandomState(5).randn(25, 2)

    def statistic(K_b, y_b):
        Z = (K_b @ U) * y_b[:, None]
        # The last term: the sum of squared piece sizes tells pieces apart.
        return K_b.T @ Z, Z.sum(axis=0), float(K_b.shape[0]) ** 2

    streamed = blocks.reduce(statistic, y, stream=True)
    whole = blocks.reduce(statistic, y)
    Z = (K @ U) * y[:, None]
    for got in (streamed, whole):
        np.testing.assert_allclose(got[0], K.T @ Z, rtol=1e-12)
        np.testing.assert_allclose(got[1], Z.sum(axis=0), rtol=1e-12)
    assert streamed[2] == 1200 * 30 and whole[2] == 1200 * 300


def test_recomputed_features_give_the_same_fit(client, data, monkeypatch):
    """Beyond the persist budget the features are recomputed at each pass."""
    X, y, Xd = data
    make = lambda: DoFKernelRidgeCV(gamma=0.5, n_components=30, random_state=0)  # noqa: E731
    kept = make().fit(Xd, y)  # two passes: normal equations, CV errors
    assert kept.nystroem_._training_features(Xd).cached
    monkeypatch.setattr(_dask, "PERSIST_FRACTION", 0.0)
    assert not kept.nystroem_._training_features(Xd).cached
    recomputed = make().fit(Xd, y)
    np.testing.assert_allclose(recomputed.coef_, kept.coef_, atol=1e-12)


def test_threaded_scheduler_without_a_cluster(data):
    """The executor is Dask's, whichever scheduler: no Client needed."""
    X, y, Xd = data
    make = lambda: DoFKernelRidge(  # noqa: E731
        alpha=3.0, gamma=0.5, n_components="dof", random_state=0
    )
    with dask.config.set(scheduler="threads"):
        b = make().fit(Xd, y)
        pred = b.predict(Xd).compute()
    a = make().fit(X, y)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=ATOL)
    np.testing.assert_allclose(pred, a.predict(X), atol=ATOL)


class _LargestResult(SchedulerPlugin):
    """Largest task result (bytes) held by any worker since the last reset."""

    name = "largest-result"

    def __init__(self):
        self.largest = 0

    async def start(self, scheduler):
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory":
            ts = self.scheduler.tasks.get(key)
            if ts is not None and ts.nbytes is not None:
                self.largest = max(self.largest, ts.nbytes)


def _largest(dask_scheduler, reset=False):
    plugin = dask_scheduler.plugins["largest-result"]
    largest = plugin.largest
    if reset:
        plugin.largest = 0
    return largest


def _sent_to_client(dask_worker, since):
    """Sizes of this worker's transfers to the client (``who`` None)."""
    return [
        entry["total"]
        for entry in list(dask_worker.transfer_outgoing_log)
        if entry["stop"] >= since and entry["who"] is None
    ]


def _transfers_to_client(client, since):
    """Sizes of the results gathered from the workers since ``since``.

    Worker-to-worker transfers (a task stolen by the idle worker takes its
    chunk along) are not counted: they move chunks, never gather X.
    """
    sizes = client.run(_sent_to_client, since=since).values()
    return [size for sizes_of_worker in sizes for size in sizes_of_worker]


def test_fit_never_gathers_X(client):
    """No task holds X, and far less than X ever leaves the workers.

    X lives only on the workers (generated and persisted there).  A fit that
    concatenated X in a task, or pulled it to the client, would fail both
    checks: the positive control below does exactly that.
    """
    client.register_plugin(_LargestResult())
    rs = da.random.RandomState(0)
    X = rs.uniform(-1, 1, size=(16000, 64), chunks=(2000, 64)).persist()
    y = (da.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]).compute()
    labels = (y > 0).astype(int)
    distributed.wait(X)
    client.run_on_scheduler(_largest, reset=True)
    start = time.time()
    ridge = DoFKernelRidge(alpha=300.0, gamma=0.05, random_state=0).fit(X, y)
    DoFKernelLogisticRegression(alpha=1.0, gamma=0.05, n_components=30).fit(X, labels)
    ridge.predict(X).sum().compute()
    gathered = _transfers_to_client(client, start)
    largest = client.run_on_scheduler(_largest, reset=True)
    assert 20 <= ridge.n_components_ < 500
    # No task ever held X (chunks of X, G and the features are ~ X / 8) ...
    assert largest < X.nbytes / 2, (largest, X.nbytes)
    # ... and the client received per-row vectors (X / 64 each), p x p
    # results and one chunk of features (the centring pilot of the normal
    # equations), never X, not even piecewise.
    assert max(gathered) < X.nbytes / 2, (max(gathered), X.nbytes)
    assert sum(gathered) < X.nbytes, (sum(gathered), X.nbytes)

    # Positive controls: X in one task, or on the client, trips the checks.
    whole = X.rechunk({0: -1}).persist()
    distributed.wait(whole)
    assert client.run_on_scheduler(_largest, reset=True) >= X.nbytes
    del whole
    start = time.time()
    X.compute()
    assert sum(_transfers_to_client(client, start)) >= X.nbytes


def test_validation(client, data):
    X, y, Xd = data
    nys = DoFNystroem(alpha=30.0, gamma=0.5, n_components=10, random_state=0)
    nys.fit(Xd)
    assert nys.n_features_in_ == 3 and not hasattr(nys, "feature_names_in_")
    with pytest.raises(ValueError, match="X has 2 features"):
        nys.transform(Xd[:, :2])  # metadata: at once, not at compute time
    with pytest.raises(ValueError, match="Expected 2D"):
        DoFNystroem().fit(Xd[:, 0])
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        DoFNystroem().fit(Xd[Xd[:, 0] > 0])
    with pytest.raises(NotImplementedError, match="cv=3"):
        DoFKernelRidgeCV(cv=3).fit(Xd, y)
    bad = X.copy()
    bad[1000, 1] = np.nan  # in the last chunk: found when it is computed
    with pytest.raises(ValueError, match="NaN"):
        DoFKernelRidge(gamma=0.5, n_components=10, random_state=0).fit(
            da.from_array(bad, chunks=(300, 3)), y
        )
    Xi = da.from_array(np.round(X * 10).astype(np.int64), chunks=(300, 3))
    assert DoFNystroem(n_components=5).fit(Xi).transform(Xi).dtype == np.float64


def test_grid_search_with_joblib_dask_backend(client, data):
    from joblib import parallel_config
    from sklearn.model_selection import GridSearchCV, KFold

    X, y, _ = data
    grid = {"alpha": [0.3, 3.0], "n_components": [20, 40]}
    make = lambda: GridSearchCV(  # noqa: E731
        DoFKernelRidge(gamma=0.5, random_state=0),
        grid,
        cv=KFold(3, shuffle=True, random_state=0),
    )
    reference = make().fit(X, y)
    with parallel_config(backend="dask"):
        search = make().fit(X, y)
    assert search.best_params_ == reference.best_params_
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"],
        reference.cv_results_["mean_test_score"],
        rtol=1e-12,
    )


def test_package_does_not_import_dask():
    code = (
        "import sys, numpy as np\n"
        "from sklearn_dof import DoFKernelRidge\n"
        "X = np.random.RandomState(0).randn(50, 2)\n"
        "DoFKernelRidge(n_components=5).fit(X, X[:, 0]).predict(X)\n"
        "assert 'dask' not in sys.modules, 'dask was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
