"""One pool of threads for every loop over the training rows.

Every pass of a fit over the rows (kernel blocks, the Gram matrix and the
right-hand sides, the quadratic forms of the d.o.f. estimate, the columns
of a partial Cholesky factor, the Newton passes, transform and predict) is
a loop over blocks of rows whose blocks are independent.  The threading
model is the same for all of them:

* the rows are cut into one contiguous *group* of blocks per worker thread,
  with as many blocks in every group (block sizes follow the thread count,
  not only the memory budget);
* each worker walks its group with the BLAS on one thread, evaluating the
  kernel and reducing into accumulators of its own, so that no two threads
  share a cache line of output and the BLAS never runs threads inside
  threads (:mod:`threadpoolctl` limits every BLAS loaded in the process for
  the duration of the pass, and restores it after);
* the workers' partial results are added in the order of the groups, so a
  result depends on the thread count but never on the scheduling: a fit is
  reproducible for a given ``n_jobs``;
* the workers belong to one pool per process, started at the first
  parallel pass and grown when a pass asks for more threads; each worker
  has a queue of its own and the ``i``-th group of a pass goes to the
  ``i``-th worker: a fit starts ``O(threads)`` threads, never one per
  block, and every group has a thread of its own.

Numpy releases the GIL in the BLAS and in its ufuncs, which is where a pass
spends its time, so Python threads suffice.

The thread count is scikit-learn's ``n_jobs``: None means the BLAS/OpenMP
default (all cores unless ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
:func:`threadpoolctl.threadpool_limits` or a joblib worker say fewer), or the
calling thread alone when that is not the main thread (the caller's own
parallelism); -1 all cores.  An estimator sets it for the duration of its
methods (:func:`use_n_jobs`), so the numerical helpers it calls need no
argument.  scipy's BLAS wrappers hold the GIL: a worker uses numpy's
products, and scipy's ``dsyrk`` only through :mod:`sklearn_dof._blas`,
which releases it (:func:`in_worker` tells which path a function is on).
"""

import functools
import os
import queue
import threading
from contextlib import contextmanager
from contextvars import ContextVar

from joblib import effective_n_jobs
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

_N_JOBS = ContextVar("sklearn_dof_n_jobs", default=None)
_local = threading.local()
_lock = threading.Lock()
_pool = None  # the process's _Pool
_controller = None


def _blas_controller():
    """A cached :class:`threadpoolctl.ThreadpoolController` (building one
    scans the loaded libraries: too slow to do per pass)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def in_worker():
    """Whether the calling thread is a worker of a parallel pass, whose BLAS
    runs on one thread."""
    return getattr(_local, "worker", False)


def blas_threads():
    """The largest thread count of the BLAS libraries loaded (1 in a worker);
    None when no BLAS is recognised."""
    if in_worker():
        return 1
    counts = [
        lib.num_threads
        for lib in _blas_controller().lib_controllers
        if lib.user_api == "blas"
    ]
    return max(counts) if counts else None


@contextmanager
def use_n_jobs(n_jobs):
    """``n_jobs`` for the parallel passes run inside the ``with`` block."""
    token = _N_JOBS.set(n_jobs)
    try:
        yield
    finally:
        _N_JOBS.reset(token)


def with_n_jobs(method):
    """Run an estimator's method under its own ``n_jobs``."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with use_n_jobs(getattr(self, "n_jobs", None)):
            return method(self, *args, **kwargs)

    return wrapper


def n_threads(n_jobs="context"):
    """Worker threads of a parallel pass for ``n_jobs``.

    ``"context"`` reads the ``n_jobs`` set by :func:`use_n_jobs`.  None is
    the smaller of the OpenMP default (scikit-learn's own, which follows
    ``OMP_NUM_THREADS`` and the CPU quota) and the BLAS's current setting,
    so that a caller that limited either (a joblib worker, a
    ``threadpool_limits`` block) is obeyed; and 1 on a thread other than
    the main one.  Always 1 inside a worker: the passes do not nest.
    """
    if in_worker():
        return 1
    if n_jobs == "context":
        n_jobs = _N_JOBS.get()
    if n_jobs is None and threading.current_thread() is not threading.main_thread():
        # Called from a thread of the caller's own parallelism (joblib's
        # threading backend, Dask's threaded scheduler, a server's request
        # threads): the pass runs on that thread.  Limiting a pthreads
        # OpenBLAS from there would also make this thread, for its whole
        # life, the only one whose threadpoolctl limits take effect.
        return 1
    if n_jobs is None:
        threads = _openmp_effective_n_threads()
        blas = blas_threads()
        if blas is not None:
            threads = min(threads, blas)
    else:
        threads = effective_n_jobs(n_jobs)
    return max(1, int(threads))


class _Pool:
    """Worker threads, each with a queue of its own: task ``i`` of a pass
    goes to worker ``i``.

    (``concurrent.futures.ThreadPoolExecutor`` starts its threads lazily and
    counts idle ones by a semaphore that a thread finishing several quick
    tasks over-releases, so that a pass of ``k`` groups can run on fewer
    than ``k`` threads, in two rounds where one was due; doc/architecture.rst,
    measurements.)
    """

    def __init__(self):
        self.queues = []
        self.threads = []
        self.pid = os.getpid()

    def grow(self, workers):
        while len(self.threads) < workers:
            tasks = queue.SimpleQueue()
            thread = threading.Thread(
                target=_work,
                args=(tasks,),
                name=f"sklearn_dof-{len(self.threads)}",
                daemon=True,
            )
            thread.start()
            self.queues.append(tasks)
            self.threads.append(thread)

    def map(self, function, tasks):
        done = threading.Semaphore(0)
        results = [None] * len(tasks)
        for i, task in enumerate(tasks):
            self.queues[i].put((function, task, i, results, done))
        for _ in tasks:
            done.acquire()
        for failed, value in results:
            if failed:
                raise value
        return [value for _, value in results]


def _work(tasks):
    """A worker's life: run what its queue brings, BLAS limited by the pass."""
    _local.worker = True
    while True:
        function, task, i, results, done = tasks.get()
        try:
            results[i] = (False, function(task))
        except BaseException as error:  # re-raised by the caller of the pass
            results[i] = (True, error)
        finally:
            done.release()
            # An idle worker keeps nothing of the pass: its function's closure
            # and results hold the pass's arrays (the n x n kernel block of an
            # exact fit stayed alive beside the next one, tracemalloc).
            del function, task, results, done


def _executor(workers):
    """The process's pool, with at least ``workers`` threads."""
    global _pool
    with _lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Pool()  # (after a fork the parent's threads are gone)
        _pool.grow(workers)
        return _pool


def group_blocks(sizes, n_groups):
    """Contiguous runs of block numbers with as equal numbers of rows as the
    blocks (of ``sizes`` rows) allow, at most ``n_groups`` of them, none
    empty."""
    n_blocks = len(sizes)
    n_groups = max(1, min(n_groups, n_blocks))
    total = sum(sizes)
    groups, current, done = [], [], 0
    for b, size in enumerate(sizes):
        current.append(b)
        done += size
        # Close the group where its end comes nearest its share of the rows,
        # keeping a block for each group still to come.
        still_to_come = n_groups - len(groups) - 1
        left = n_blocks - b - 1
        target = total * (len(groups) + 1) / n_groups
        nearest = left == 0 or done + sizes[b + 1] - target > target - done
        if still_to_come > 0 and (
            left == still_to_come or (nearest and left >= still_to_come)
        ):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def group_slices(slices, n_groups):
    """The ``slices`` (row blocks) as :func:`group_blocks` groups them."""
    slices = list(slices)
    sizes = [sl.stop - sl.start for sl in slices]
    return [[slices[b] for b in group] for group in group_blocks(sizes, n_groups)]


def balanced_batch_size(n_samples, max_rows, threads, min_rows=64):
    """Rows per block: at most ``max_rows``, and a number of blocks that is a
    multiple of ``threads`` when there are enough rows, so that every
    worker gets the same number of equal blocks."""
    max_rows = max(1, min(max_rows, n_samples))
    if threads <= 1:
        return max_rows
    per_worker = -(-n_samples // threads)
    if per_worker < min_rows:
        # Too few rows to split: as few blocks as the cap allows.
        return max_rows
    blocks_each = -(-per_worker // max_rows)
    return max(1, -(-n_samples // (threads * blocks_each)))


def run(function, tasks, threads):
    """``[function(task) for task in tasks]``, on ``threads`` workers.

    One task per worker is the intended use (the groups of
    :func:`group_blocks`); more tasks are dealt out in turn.  The BLAS runs
    one thread per worker during the pass.  Serial, with no pool and no BLAS
    limit, for a single task or thread.
    """
    tasks = list(tasks)
    if threads <= 1 or len(tasks) <= 1 or in_worker():
        return [function(task) for task in tasks]
    workers = min(threads, len(tasks))
    pool = _executor(workers)
    with _blas_limit() as limited:
        if not limited:
            # Another thread of the process controls the BLAS's threads
            # (threadpoolctl): workers would run threaded BLAS calls side by
            # side, so the pass runs on this thread, with the BLAS's threads.
            return [function(task) for task in tasks]
        if len(tasks) == workers:
            return pool.map(function, tasks)
        dealt = [tasks[i::workers] for i in range(workers)]
        parts = pool.map(lambda batch: [function(task) for task in batch], dealt)
    results = [None] * len(tasks)
    for i, part in enumerate(parts):
        results[i::workers] = part
    return results


_limit_lock = threading.Lock()
_limit = [0, None]  # passes under way, and the limiter of the first


@contextmanager
def _blas_limit():
    """The BLAS on one thread while any pass runs: the first pass to start
    sets the limit, the last to end restores the setting found (passes run
    by concurrent threads of the caller would otherwise restore each other's
    limits out of order).  Yields whether the limit holds."""
    controller = _blas_controller()
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    if not blas:
        yield True
        return
    with _limit_lock:
        if _limit[0] == 0:
            _limit[1] = controller.limit(limits=1, user_api="blas")
        _limit[0] += 1
    try:
        # threadpoolctl lets one Python thread at a time set the limits of a
        # pthreads OpenBLAS, and silently ignores the others: whether the
        # limit holds is read back.
        yield all(lib.num_threads == 1 for lib in blas)
    finally:
        with _limit_lock:
            _limit[0] -= 1
            if _limit[0] == 0:
                _limit[1].restore_original_limits()
                _limit[1] = None


def threads_started():
    """Threads this module's pool holds now (for tests and benchmarks)."""
    return 0 if _pool is None else len(_pool.threads)
