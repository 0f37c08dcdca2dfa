"""
==============================
Persisting and serving a model
==============================

A fitted sklearn-dof model holds its landmarks and coefficients (and, unless
it fitted on a Cholesky factor of the landmark block, a ``p x p`` matrix),
nothing that grows with the number of training points.  This
example saves one with :mod:`joblib` (or :mod:`pickle`), loads it back,
measures what a server pays per request, and shows the safer ``skops``
format.
"""

# %%
# The size of a fitted model
# --------------------------
# Same problem at three training sizes, with the penalty on the paper's
# scale held fixed (``alpha = n * lambda``), so that the degrees of freedom,
# hence the rank, stay about the same.  Exact
# :class:`~sklearn.kernel_ridge.KernelRidge` stores its training data and one
# dual coefficient per point.
import pickle
import tempfile
import time
from pathlib import Path

import joblib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_ridge import KernelRidge

from sklearn_dof import DoFKernelRidge


def make_data(n, rng):
    X = rng.uniform(-3, 3, size=(n, 4))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 2] + 0.3 * rng.randn(n)
    return X, y


rng = np.random.RandomState(0)
lam, gamma = 1e-2, 0.2
sizes = {"DoFKernelRidge": [], "KernelRidge": []}
ns = [1000, 4000, 16000, 64000]
for n in ns:
    X, y = make_data(n, rng)
    model = DoFKernelRidge(alpha=n * lam, gamma=gamma, random_state=0).fit(X, y)
    sizes["DoFKernelRidge"].append(len(pickle.dumps(model)) / 1e3)
    print(
        f"n = {n:5d}: rank {model.n_components_}, "
        f"pickle {sizes['DoFKernelRidge'][-1]:7.0f} kB"
    )
    if n <= 4000:  # exact kernel ridge: O(n^2) memory, O(n^3) time
        exact = KernelRidge(alpha=n * lam, kernel="rbf", gamma=gamma).fit(X, y)
        sizes["KernelRidge"].append(len(pickle.dumps(exact)) / 1e3)

fig, ax = plt.subplots(figsize=(6, 3.6))
ax.loglog(ns, sizes["DoFKernelRidge"], "-o", label="DoFKernelRidge")
n_exact = ns[: len(sizes["KernelRidge"])]
ax.loglog(n_exact, sizes["KernelRidge"], "-s", color="C1", label="KernelRidge (exact)")
per_point = sizes["KernelRidge"][-1] / n_exact[-1]
ax.loglog(
    [n_exact[-1], ns[-1]],
    [sizes["KernelRidge"][-1], per_point * ns[-1]],
    ":",
    color="C1",
    label="KernelRidge, extrapolated",
)
ax.set_xlabel("number of training points n")
ax.set_ylabel("pickle size (kB)")
for axis in (ax.xaxis, ax.yaxis):
    axis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
ax.legend()
fig.tight_layout()
plt.show()

# %%
# The exact model grows linearly with ``n``.  The low-rank one depends on its
# rank ``p`` only: ``p`` landmarks of ``d`` features and ``p`` landmark
# weights, about ``8 p (d + 1)`` bytes in float64.  ``DoFKernelRidge`` fits on
# a Cholesky factor of the landmark block when it is numerically positive
# definite and does not keep the ``p x p`` map ``nystroem_.normalization_``,
# which prediction does not need; when the block is too ill-conditioned for
# Cholesky (or for ``DoFKernelRidgeCV`` and the logistic estimator) the map is
# stored, ``8 p (p + d)`` bytes, and a rank of several thousands gives
# pickles of hundreds of megabytes.
#
# Save, load, predict
# -------------------
# ``joblib.dump`` and ``pickle`` work as for any scikit-learn estimator.
# **Both execute code when loading: load files only from sources you trust.**
X, y = make_data(4000, rng)
model = DoFKernelRidge(alpha=4000 * lam, gamma=gamma, random_state=0).fit(X, y)
X_new, _ = make_data(10_000, rng)

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "model.joblib"
    joblib.dump(model, path)
    print(f"{path.name}: {path.stat().st_size / 1e3:.0f} kB")
    served = joblib.load(path)

print("same predictions:", np.array_equal(served.predict(X_new), model.predict(X_new)))

# %%
# What a request costs
# --------------------
# A prediction evaluates the kernel between the new rows and the ``p``
# landmarks, then multiplies by the ``p x p`` map and the coefficients:
# ``O(p d + p^2)`` per row, whatever ``n`` was.
row = X_new[:1]
times = []
for _ in range(200):
    start = time.perf_counter()
    served.predict(row)
    times.append(time.perf_counter() - start)
start = time.perf_counter()
served.predict(X_new)
batch = time.perf_counter() - start
print(
    f"p = {served.n_components_}: one row {np.median(times) * 1e3:.2f} ms (median), "
    f"{X_new.shape[0]} rows in {batch * 1e3:.0f} ms"
)

# %%
# One row is dominated by the fixed overhead of input validation; batches
# amortise it.  A server that handles one request per thread should limit the
# BLAS threads of each worker (for instance with
# ``threadpoolctl.threadpool_limits(1)`` around ``predict``), as for any
# scikit-learn model.
#
# A safer format: skops
# ---------------------
# ``skops.io`` (``pip install "sklearn-dof[serving]"``) stores the model
# without pickle and refuses to load types it does not trust.  List the
# untrusted types of a file, check that they are the ``sklearn_dof`` classes
# you expect, then pass them as ``trusted``.
try:
    import skops.io as sio
except ImportError:
    sio = None
    print("skops is not installed: pip install skops")

if sio is not None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.skops"
        sio.dump(model, path)
        untrusted = sio.get_untrusted_types(file=path)
        print("untrusted types:", untrusted)
        assert all(name.startswith("sklearn_dof.") for name in untrusted)
        served = sio.load(path, trusted=untrusted)
    print(
        "same predictions:", np.array_equal(served.predict(X_new), model.predict(X_new))
    )
