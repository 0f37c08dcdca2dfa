import os

# scikit-learn's array-API dispatch needs scipy's own array-API support,
# which scipy reads from the environment when it is first imported: before
# any test module imports it.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

from pathlib import Path

import numpy as np
import pytest

# ../shared/data beside the repository root holds the real data sets.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_shared(name, n_samples=None, random_state=0):
    """Rows of a real data set from ../shared/data, standardised; skip if absent."""
    path = SHARED_DATA / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    data = np.load(path)
    X, y = data["X"], data["y"].astype(np.float64)
    if n_samples is not None and n_samples < X.shape[0]:
        rows = np.random.RandomState(random_state).choice(X.shape[0], n_samples, False)
        X, y = X[rows], y[rows]
    scale = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    return X, (y - y.mean()) / y.std()


@pytest.fixture(autouse=True, scope="session")
def _single_threaded_blas():
    """Run BLAS on one thread in tests.

    The test matrices are small: OpenBLAS threads only add synchronisation,
    which on a loaded 2-core machine made many small LAPACK calls tens of
    times slower, and they oversubscribe the cores when a test also runs
    ``n_jobs=2`` worker processes.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
