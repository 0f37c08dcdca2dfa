import threading
import weakref

import numpy as np
import pytest
from sklearn import config_context
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
    _blas,
    _blocks,
    _parallel,
)
from sklearn_dof._kernels import kernel_block

SAMPLINGS = ["uniform", "pivoted", "rpcholesky", "leverage"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(3000, 5)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.randn(3000)
    return X, y


@pytest.fixture(autouse=True)
def passes(monkeypatch):
    """The (tasks, threads) of every parallel pass run by a test."""
    seen = []
    original = _parallel.run

    def spy(function, tasks, threads):
        tasks = list(tasks)
        seen.append((len(tasks), threads))
        return original(function, tasks, threads)

    monkeypatch.setattr(_parallel, "run", spy)
    return seen


def _fit(estimator, X, y, n_jobs):
    # A small budget: several row blocks per worker.
    with config_context(working_memory=8):
        return estimator.set_params(n_jobs=n_jobs).fit(X, y)


def _split(passes):
    """Whether some pass of the Gram sums ran on several workers."""
    return any(tasks > 1 and threads > 1 for tasks, threads in passes)


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("n_components", [150, "auto"])
def test_parallel_fit_equals_one_thread(data, sampling, n_components, passes):
    X, y = data
    params = dict(alpha=3.0, gamma=0.2, sampling=sampling, random_state=0)
    params["n_components"] = n_components
    serial = _fit(DoFKernelRidge(**params), X, y, n_jobs=1)
    assert not _split(passes)
    parallel = _fit(DoFKernelRidge(**params), X, y, n_jobs=3)
    assert _split(passes)
    # The same landmarks and rank; sums added in another order only.
    np.testing.assert_array_equal(
        parallel.nystroem_.component_indices_, serial.nystroem_.component_indices_
    )
    np.testing.assert_allclose(parallel.dof_, serial.dof_, rtol=1e-10)
    with config_context(working_memory=8):
        np.testing.assert_allclose(
            parallel.predict(X), serial.predict(X), rtol=1e-9, atol=1e-9
        )


@pytest.mark.parametrize(
    "estimator",
    [
        DoFKernelRidgeCV(alphas=(0.3, 3.0, 30.0), gamma=0.2, n_components=150),
        DoFKernelLogisticRegression(alpha=3.0, gamma=0.2, n_components=150),
    ],
    ids=["ridge_cv", "logistic"],
)
def test_parallel_estimators_equal_one_thread(data, estimator, passes):
    X, y = data
    if isinstance(estimator, DoFKernelLogisticRegression):
        y = (y > 0).astype(int)
    serial = _fit(estimator.set_params(random_state=0), X, y, n_jobs=1)
    output = "predict" if isinstance(estimator, DoFKernelRidgeCV) else "predict_proba"
    serial_out = getattr(serial, output)(X)
    parallel = _fit(estimator.set_params(random_state=0), X, y, n_jobs=3)
    assert _split(passes)
    np.testing.assert_allclose(
        getattr(parallel, output)(X), serial_out, rtol=1e-8, atol=1e-8
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p", [40, 300])
def test_workers_gram_sums_equal_one_thread(data, dtype, p):
    # The workers' sums, added in a fixed order, against the one-thread sums
    # (scipy's in-place syrk on one thread, numpy's products in the workers).
    X, y = data
    rng = np.random.RandomState(0)
    Phi = rng.randn(X.shape[0], p).astype(dtype)
    y2 = y[:, None]
    sums = []
    for n_jobs in (1, 3):
        with _parallel.use_n_jobs(n_jobs), config_context(working_memory=64):
            features = _blocks.FeatureBlocks.from_array(Phi)
            assert features.n_threads == n_jobs
            sums.append(_blocks.normal_equations(features, y2, np.ones(len(y)), True))
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for serial, parallel in zip(*sums, strict=True):
        np.testing.assert_allclose(parallel, serial, rtol=rtol, atol=rtol * len(y))
    gram = sums[1][0]
    np.testing.assert_array_equal(gram, gram.T)


def test_parallel_transform_equals_one_thread(data):
    X, _ = data
    nystroem = DoFNystroem(alpha=3.0, gamma=0.2, n_components=100, random_state=0)
    serial = nystroem.set_params(n_jobs=1).fit(X).transform(X)
    parallel = nystroem.set_params(n_jobs=3).fit(X).transform(X)
    np.testing.assert_allclose(parallel, serial, rtol=1e-12, atol=1e-12)


def test_parallel_fit_is_reproducible(data):
    X, y = data
    params = dict(alpha=3.0, gamma=0.2, n_components="auto", random_state=0)
    first = _fit(DoFKernelRidge(**params), X, y, n_jobs=3)
    second = _fit(DoFKernelRidge(**params), X, y, n_jobs=3)
    # The workers' sums are added in the order of their groups: bit for bit.
    np.testing.assert_array_equal(first.dual_coef_, second.dual_coef_)


def test_threads_started_per_fit_do_not_grow_with_blocks(data, monkeypatch):
    X, y = data
    started = []
    original = threading.Thread.start

    def counting_start(self):
        started.append(self.name)
        return original(self)

    # A fresh pool, so that its threads are counted.
    monkeypatch.setattr(_parallel, "_pool", None)
    monkeypatch.setattr(threading.Thread, "start", counting_start)
    params = dict(alpha=3.0, gamma=0.2, n_components=150, random_state=0)
    with config_context(working_memory=8), _parallel.use_n_jobs(3):
        features = _blocks.FeatureBlocks(X, lambda X_b: X_b, 150)
        assert features.n_threads == 3 and len(features.slices) >= 6
    _fit(DoFKernelRidge(**params), X, y, n_jobs=3)
    _fit(DoFKernelRidge(**params, sampling="rpcholesky"), X, y, n_jobs=3)
    # Over dozens of blocks and passes, one pool of three threads.
    assert 1 <= len(started) <= 3
    assert _parallel.threads_started() <= 3


def test_workers_run_the_blas_on_one_thread(data):
    X, _ = data
    seen = []

    def statistic(Phi_b):
        seen.append(
            [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        )
        return Phi_b.sum(axis=0)

    with threadpool_limits(limits=2, user_api="blas"):
        with _parallel.use_n_jobs(2), config_context(working_memory=1):
            features = _blocks.FeatureBlocks(X, lambda X_b: X_b * 2.0, X.shape[1])
            total = features.reduce(statistic)
        after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    np.testing.assert_allclose(total, 2.0 * X.sum(axis=0))
    assert features.n_threads == 2
    assert seen and all(counts and set(counts) == {1} for counts in seen)
    # The limit holds for the pass only.
    assert set(after) == {2}


def test_n_jobs_none_follows_the_blas_and_openmp_settings():
    with threadpool_limits(limits=1, user_api="blas"):
        assert _parallel.n_threads(None) == 1
    with threadpool_limits(limits=2, user_api="blas"):
        assert _parallel.n_threads(None) <= 2
    assert _parallel.n_threads(3) == 3
    with _parallel.use_n_jobs(2):
        assert _parallel.n_threads() == 2
    # From another thread (the caller's own parallelism), None means that
    # thread alone; an explicit n_jobs still gets its workers.
    seen = []
    with threadpool_limits(limits=2, user_api="blas"):
        other = threading.Thread(
            target=lambda: seen.extend(
                [_parallel.n_threads(None), _parallel.n_threads(2)]
            )
        )
        other.start()
        other.join()
    assert seen == [1, 2]


def test_kernel_block_in_parallel_equals_one_thread(data):
    X, _ = data
    Y = X[:70]
    one = kernel_block(X, Y, "rbf", {"gamma": 0.2}, n_jobs=1)
    three = kernel_block(X, Y, "rbf", {"gamma": 0.2}, n_jobs=3)
    np.testing.assert_array_equal(three, one)
    poly = kernel_block(X, Y, "poly", {"degree": 2}, n_jobs=3)
    np.testing.assert_allclose(
        poly, (X @ Y.T / X.shape[1] + 1) ** 2, rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize(
    "sizes, n_groups",
    [([10] * 6, 2), ([10] * 5, 2), ([10] * 3, 4), ([100, 100, 1], 2), ([5] * 7, 3)],
)
def test_group_blocks_are_contiguous_and_balanced(sizes, n_groups):
    groups = _parallel.group_blocks(sizes, n_groups)
    assert [b for g in groups for b in g] == list(range(len(sizes)))
    assert len(groups) == min(n_groups, len(sizes)) and all(groups)
    rows = [sum(sizes[b] for b in g) for g in groups]
    # No group exceeds its share by more than one block.
    assert max(rows) <= sum(sizes) / len(groups) + max(sizes)


@pytest.mark.parametrize("n, threads", [(10_000, 2), (10_000, 16), (1_000_000, 64)])
def test_blocks_are_a_multiple_of_the_threads(n, threads):
    rows = _parallel.balanced_batch_size(n, 2031, threads)
    n_blocks = -(-n // rows)
    assert rows <= 2031
    assert n_blocks % threads == 0 or n_blocks < threads


def test_workers_and_their_accumulators_fit_the_budget():
    p, itemsize, budget = 2000, 8, 256
    with _parallel.use_n_jobs(64):
        threads, rows = _blocks._threads_and_batch(10**6, p, itemsize, budget)
    # Each worker holds its p x p float64 sum (and a scratch product unless
    # syrk adds in place) and its block's buffers.
    sums = 1 if _blas.releases_gil() else 2
    per_worker = sums * 8 * p**2 + _blocks.BUFFERS_PER_ROW * p * itemsize * rows
    assert 1 < threads < 64
    assert threads * per_worker <= budget * 2**20


def test_run_gives_every_task_its_result_in_order():
    tasks = list(range(11))
    # More tasks than threads are dealt out; an error in a worker reaches
    # the caller.
    assert _parallel.run(lambda t: t * t, tasks, 4) == [t * t for t in tasks]
    assert _parallel.run(lambda t: t + 1, tasks[:3], 3) == [1, 2, 3]

    def fail(task):
        if task == 2:
            raise ValueError("task 2")
        return task

    with pytest.raises(ValueError, match="task 2"):
        _parallel.run(fail, tasks[:4], 4)
    # The pool survives the error.
    assert _parallel.run(lambda t: -t, tasks[:4], 4) == [0, -1, -2, -3]


def test_concurrent_passes_restore_the_blas_setting():
    # Passes started by several threads of the caller.  threadpoolctl lets
    # one Python thread at a time limit a pthreads OpenBLAS (the one that
    # limited it first, here the main thread of the test session); a pass
    # whose limit does not hold runs on its caller's thread instead of
    # running threaded BLAS calls side by side in the workers.  Either way
    # the setting is back once all are done.
    barrier = threading.Barrier(3)

    def blas_counts():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    def task(i):
        return _parallel.in_worker(), blas_counts()

    def caller(out):
        barrier.wait()
        out.extend(_parallel.run(task, range(4), 4))

    with threadpool_limits(limits=2, user_api="blas"):
        seen = []
        callers = [threading.Thread(target=caller, args=(seen,)) for _ in range(3)]
        for thread in callers:
            thread.start()
        for thread in callers:
            thread.join()
        after = blas_counts()
    assert len(seen) == 12
    # In a worker the BLAS runs one thread; never threaded BLAS in workers.
    assert all(counts == {1} for in_worker, counts in seen if in_worker)
    assert after == {2}


def test_idle_workers_keep_nothing_of_a_pass():
    # A pass's function closes over its arrays (kernel_block's output, say):
    # once the caller lets go of them, the idle workers must not keep them.
    def summing(array):
        return lambda task: float(array.sum()) + task

    array = np.ones(1000)
    alive = weakref.ref(array)
    assert _parallel.run(summing(array), [0, 1], 2) == [1000.0, 1001.0]
    del array
    assert alive() is None
