import os

# scikit-learn's array-API dispatch needs scipy's own array-API support,
# which scipy reads from the environment when it is first imported: before
# any test module imports it.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import functools
import importlib
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


@functools.cache
def unusable_device_reason(namespace, device_name):
    """Why arrays of ``namespace`` cannot live on ``device_name`` here, or None.

    Decided by allocating one element there, not by how the library was
    built: pip's default torch wheel is a CUDA build, whose
    ``torch.backends.cuda.is_built()`` is True on a machine without a GPU
    driver, and its first CUDA allocation raises.  scikit-learn 1.9.1's
    ``_array_api_for_tests`` asks only ``is_built()``, so the array-API
    combinations that ``yield_namespace_device_dtype_combinations`` and
    ``parametrize_with_checks`` yield would fail there instead of skipping.
    A namespace that is not installed is left to scikit-learn's helper,
    which skips with its own reason; array-api-strict's devices are
    simulated and always usable.
    """
    if namespace in (None, "numpy", "array_api_strict"):
        return None
    try:
        module = importlib.import_module(namespace)
    except ImportError:
        return None
    device = {} if device_name is None else {"device": device_name}
    try:
        module.asarray([0.0], **device)
    except Exception as exc:  # each library raises its own error type
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (
            f"{namespace} cannot allocate on device {device_name!r} on this "
            f"machine ({type(exc).__name__}: {message})"
        )
    return None


def array_placements(params):
    """The (namespace, device name) pairs a test's parameters put arrays on.

    Reads the project's parametrisations (``namespace`` and ``device_name``,
    as in tests/test_array_api.py) and scikit-learn's array-API estimator
    checks, which ``parametrize_with_checks`` passes as partials with
    ``array_namespace``/``device_name`` or ``X_ns_and_device`` and
    ``other_ns_and_device`` keywords.
    """
    placements = []
    if "namespace" in params:
        placements.append((params["namespace"], params.get("device_name")))
    for value in params.values():
        keywords = getattr(value, "keywords", None)
        if not isinstance(value, functools.partial) or not keywords:
            continue
        if "array_namespace" in keywords:
            placements.append(
                (keywords["array_namespace"], keywords.get("device_name"))
            )
        for key in ("X_ns_and_device", "other_ns_and_device"):
            if key in keywords:
                placements.append(tuple(keywords[key]))
    return placements


def pytest_runtest_setup(item):
    """Skip, with the reason, a test whose arrays need a device that is absent."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return
    for namespace, device_name in array_placements(callspec.params):
        reason = unusable_device_reason(namespace, device_name)
        if reason is not None:
            pytest.skip(reason)
