"""The memory an automatic rank may hold, and the caps that follow from it.

A certified rank ``r`` grows a partial Cholesky factor of the rows it reads
(``rows x r`` float64), evaluates the kernel columns of each doubling as one
block (``rows x r / 2`` at the last), and, beside them, holds two ``r x r``
arrays (the factor's Gram matrix, and its shifted Cholesky factor and
inverse, which share one array).  One budget bounds these
(:func:`memory_budget`); the exact route holds the ``n x n`` kernel matrix,
factored in place, within :func:`exact_budget`.
A certificate at rank ``r`` reads at least two rows per column, so it needs
:func:`rank_bytes` ``= 40 r^2`` bytes (``16 r^2`` the factor, ``8 r^2`` the
last columns, ``16 r^2`` the ``r x r`` arrays): the factor takes two fifths
of the budget, and the default cap of an automatic rank is the largest
``r`` that fits (:func:`default_max_components`).  The fit at the rank
chosen then holds what an int fit at that rank holds (its ``p x p``
matrices and, within scikit-learn's ``working_memory``, its features),
which the budget does not count.
"""

import functools
import math
import os

from ._config import get_config

#: The share of the memory the process may use that the automatic budget
#: takes: the rest is the data, the caller's arrays and the predictions;
#: the fits of a grid search running side by side each take their own.
MEMORY_SHARE = 0.25
#: How many times the budget the exact route's ``n x n`` kernel matrix may
#: take.  The budget counts what an automatic rank holds while it is chosen,
#: not the fit at the rank chosen, which holds its own arrays beside it; the
#: exact route's fit is ``K`` itself, factored in place, with nothing of its
#: size beside it, so its ``K`` may take half as much again.
EXACT_BUDGET_RATIO = 1.5
#: The memory assumed where the machine's cannot be read.
FALLBACK_MEMORY_BYTES = 8 * 2**30
# cgroup files holding the memory limit of a container (v2, then v1); a
# limit above the physical memory means none.
_CGROUP_LIMITS = (
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
)


@functools.lru_cache(maxsize=1)
def available_memory():
    """Bytes of memory the process may use: the machine's physical memory
    or, where smaller, the limit of its cgroup (a container's)."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows)
        physical = None
    if physical is None or physical <= 0:
        physical = FALLBACK_MEMORY_BYTES
    for path in _CGROUP_LIMITS:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return min(physical, int(text))
    return physical


def memory_budget():
    """Bytes an automatic rank's fit may hold: the ``memory_budget`` of
    :func:`sklearn_dof.set_config`, by default :data:`MEMORY_SHARE` of
    :func:`available_memory`."""
    budget = get_config()["memory_budget"]
    if budget == "auto":
        return int(MEMORY_SHARE * available_memory())
    return budget


# The float64 numbers a certificate at rank r holds, in units of r^2 (see
# the module's docstring), and the factor's share of them.
_RANK_WORDS = 5
_FACTOR_WORDS = 2


def factor_budget():
    """Bytes of the partial Cholesky factor a certified rank grows: its
    share of :func:`rank_bytes`, two fifths of the budget."""
    return memory_budget() * _FACTOR_WORDS // _RANK_WORDS


def rank_bytes(rank):
    """Bytes a certified rank ``rank`` needs: a factor of two rows per
    column, the kernel columns of its last doubling and two
    ``rank x rank`` arrays, all float64."""
    return 8 * _RANK_WORDS * rank**2


# The float64 p x p arrays a conjugate-gradient fit at rank p holds at
# most: K(I, I) while it is factored into R, R, and the preconditioner's
# factor (float32 first).
_CG_WORDS = 3


def cg_rank_bytes(rank):
    """Bytes of a conjugate-gradient fit at rank ``rank``: its ``p x p``
    arrays (the rows' kernel blocks are streamed)."""
    return 8 * _CG_WORDS * rank**2


# The float64 numbers the efficient leave-one-out over a penalty grid holds
# at rank p on n rows: the features and their projection on the Gram
# matrix's eigenvectors (n p each), the Gram matrix, its eigenvectors and
# the eigensolver's workspace (p^2 each).
_LOO_ROW_WORDS = 2
_LOO_RANK_WORDS = 3


def loo_bytes(n_samples, rank):
    """Bytes of the efficient leave-one-out of a ridge on ``rank``
    features of ``n_samples`` rows, over a penalty grid."""
    return 8 * (_LOO_ROW_WORDS * n_samples * rank + _LOO_RANK_WORDS * rank**2)


def default_cg_components():
    """The largest rank whose conjugate-gradient fit
    (:func:`cg_rank_bytes`) fits the budget (at least 1)."""
    return max(1, math.isqrt(memory_budget() // (8 * _CG_WORDS)))


def default_max_components():
    """The default cap of an automatic rank: the largest rank whose
    :func:`rank_bytes` fit the budget (at least 1)."""
    return max(1, math.isqrt(memory_budget() // (8 * _RANK_WORDS)))


def exact_budget():
    """Bytes the exact route's kernel matrix may take:
    :data:`EXACT_BUDGET_RATIO` times :func:`memory_budget`."""
    return int(EXACT_BUDGET_RATIO * memory_budget())


def fits_exact(n_samples, extra_words=0):
    """Whether the ``n x n`` float64 kernel matrix of the exact route, and
    ``extra_words`` float64 numbers beside it, fit :func:`exact_budget`: the
    exact fit factors it in place, and the rounds before it, of at most
    half of the rows as columns, hold less."""
    return 8 * (n_samples**2 + extra_words) <= exact_budget()


def format_bytes(n_bytes):
    """``n_bytes`` as a short human reading (KiB below 1 MiB, MiB below
    1 GiB, else GiB), never rounded down to zero."""
    if n_bytes < 2**20:
        return f"{max(n_bytes / 2**10, 1):.0f} KiB"
    if n_bytes < 2**30:
        return f"{n_bytes / 2**20:.0f} MiB"
    return f"{n_bytes / 2**30:.1f} GiB"
