"""Progress lines of a fit: scikit-learn's ``verbose``.

A fit that takes more than a few seconds says where it is when asked: one
line per round of the automatic rank (the columns grown, the loss estimate,
the time since the fit began), then the route and the solve.  Lines go to
standard output, as scikit-learn's estimators print theirs; with
``verbose=0`` (every default) nothing is printed.
"""

import time


class Progress:
    """Prints ``[name] message (elapsed s)`` when ``verbose >= level``.

    Parameters
    ----------
    verbose : int
        The estimator's ``verbose``.
    name : str
        The printing estimator's class name.
    """

    def __init__(self, verbose, name):
        self.verbose = int(verbose or 0)
        self.name = name
        self._start = time.perf_counter()

    def __call__(self, message, level=1):
        if self.verbose >= level:
            elapsed = time.perf_counter() - self._start
            print(f"[{self.name}] {message} ({elapsed:.2f} s)", flush=True)


#: A :class:`Progress` that never prints, the default of the numerical helpers.
SILENT = Progress(0, "")
