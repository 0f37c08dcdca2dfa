"""Global configuration of sklearn-dof, as :func:`sklearn.set_config` is
scikit-learn's: a process default, changed for the calling thread by
:func:`set_config` and, for a block, by :func:`config_context`."""

import os
import threading
from contextlib import contextmanager
from numbers import Real

#: Environment variable read at import for the process's default
#: ``memory_budget`` (bytes): child processes (joblib's workers, a Dask
#: cluster's) inherit it where they do not inherit a thread's
#: configuration.
MEMORY_BUDGET_VARIABLE = "SKLEARN_DOF_MEMORY_BUDGET"


def _check_memory_budget(value, source="memory_budget"):
    if isinstance(value, str) and value == "auto":
        return value
    # At least one byte and finite: int() would floor 0.5 to a budget of
    # nothing and fail on infinity.
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not 1 <= value < float("inf")
    ):
        raise ValueError(
            f"{source} must be 'auto' or a positive, finite number of bytes (at "
            f"least 1); got {value!r}."
        )
    return int(value)


def _default_memory_budget():
    raw = os.environ.get(MEMORY_BUDGET_VARIABLE, "").strip()
    if not raw or raw == "auto":
        return "auto"
    try:
        value = float(raw)
    except ValueError:
        value = raw
    return _check_memory_budget(value, source=MEMORY_BUDGET_VARIABLE)


_global_config = {"memory_budget": _default_memory_budget()}
_threadlocal = threading.local()


def _thread_config():
    if not hasattr(_threadlocal, "config"):
        _threadlocal.config = _global_config.copy()
    return _threadlocal.config


def get_config():
    """The configuration of the calling thread.

    Returns
    -------
    config : dict
        Keys are the parameters of :func:`set_config`.

    See Also
    --------
    set_config : Set the configuration.
    config_context : Set it for a block.

    Examples
    --------
    >>> from sklearn_dof import get_config
    >>> sorted(get_config())
    ['memory_budget']
    """
    return _thread_config().copy()


def set_config(memory_budget=None):
    """Set the configuration of the calling thread.

    Parameters
    ----------
    memory_budget : "auto" or int, default=None
        The bytes an automatic rank may hold while it is chosen: the
        partial Cholesky factor the certificate grows and the ``r x r``
        matrices beside it (the fit at the rank chosen holds, beyond it,
        what an int fit at that rank holds); the exact route's kernel
        matrix, all that fit holds, may take one and a half times it.  The
        default caps of
        ``n_components="auto"`` and ``"dof"`` (``max_components=None``)
        follow from it (:ref:`memory`).  ``"auto"``: a quarter of the memory
        the process may use (the machine's physical memory or, where
        smaller, its cgroup limit).  The process default is read from the
        environment variable ``SKLEARN_DOF_MEMORY_BUDGET`` (bytes) at
        import.  None leaves the setting unchanged.

    See Also
    --------
    get_config : The current configuration.
    config_context : Set it for a block.

    Examples
    --------
    >>> from sklearn_dof import get_config, set_config
    >>> set_config(memory_budget=2**31)
    >>> get_config()["memory_budget"]
    2147483648
    >>> set_config(memory_budget="auto")
    """
    if memory_budget is not None:
        _thread_config()["memory_budget"] = _check_memory_budget(memory_budget)


@contextmanager
def config_context(*, memory_budget=None):
    """Set the configuration of the calling thread for a block.

    Parameters
    ----------
    memory_budget : "auto" or int, default=None
        See :func:`set_config`.

    Yields
    ------
    None

    See Also
    --------
    set_config : Set the configuration.

    Examples
    --------
    >>> from sklearn_dof import config_context, get_config
    >>> with config_context(memory_budget=2**30):
    ...     get_config()["memory_budget"]
    1073741824
    """
    old = get_config()
    set_config(memory_budget=memory_budget)
    try:
        yield
    finally:
        set_config(**old)
