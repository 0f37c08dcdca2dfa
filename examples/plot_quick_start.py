"""
===========
Quick start
===========

Fit kernel ridge regression at the cost of its degrees of freedom, compare it
with exact :class:`~sklearn.kernel_ridge.KernelRidge`, and read what the model
learnt about the problem: its rank and its degrees of freedom.
"""

# %%
# Data
# ----
# A noisy one-dimensional function, 3000 training points.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_dof import DoFKernelRidge, DoFNystroem

rng = np.random.RandomState(0)
X = rng.uniform(-4, 4, size=(4000, 1))
f = np.sin(2 * X[:, 0]) + 0.5 * np.cos(5 * X[:, 0])
y = f + 0.3 * rng.randn(X.shape[0])
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=3000, random_state=0
)

# %%
# One estimator
# -------------
# :class:`~sklearn_dof.DoFKernelRidge` takes the parameters of
# :class:`~sklearn.kernel_ridge.KernelRidge` (``alpha`` on the same scale,
# the kernel and its parameters).  With the default ``n_components="auto"``
# it grows nested landmarks until the leave-one-out error certifies that
# the rank loses at most 1% of test error against exact kernel ridge at this
# ``alpha``.
alpha, gamma = 1.0, 2.0
model = DoFKernelRidge(alpha=alpha, gamma=gamma, random_state=0)
start = time.perf_counter()
model.fit(X_train, y_train)
fit_time = time.perf_counter() - start

exact = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
start = time.perf_counter()
exact.fit(X_train, y_train)
exact_time = time.perf_counter() - start

print(f"rank p = {model.n_components_} for n = {X_train.shape[0]}")
print(f"d_max = {model.dof_:.1f}, d_eff = {model.effective_dof_:.1f}")
for name, estimator, seconds in (
    ("DoFKernelRidge", model, fit_time),
    ("KernelRidge (exact)", exact, exact_time),
):
    mse = np.mean((estimator.predict(X_test) - y_test) ** 2)
    print(f"{name:>20}: test MSE {mse:.4f}, fit {seconds:.2f} s")

# %%
# ``dof_`` is the estimated *maximal marginal degrees of freedom*
# ``d_max = n max_i [K (K + alpha I)^-1]_ii`` and ``effective_dof_`` the
# usual degrees of freedom ``d_eff = tr K (K + alpha I)^-1``, the number of
# parameters the smoother effectively fits.  The rank is
# ``ceil(2.75 d_max)`` for uniformly sampled landmarks.
#
# Here ``d_max`` is about four times ``d_eff``: the points at the two ends of
# the interval have neighbours on one side only, so the fit leans on each of
# them more and their leverage scores are the largest (the exact scores,
# computed from the full matrix, peak at ``x = +-4``).  Uniform landmarks must
# be dense enough to cover such points, which is what ``d_max`` measures.
#
# ``KernelRidge`` has no intercept; ``DoFKernelRidge`` fits one by default
# (``fit_intercept=True``, as :class:`~sklearn.linear_model.Ridge`), which
# makes no difference here because the target is centred.
#
# The fit
# -------
grid = np.linspace(-4, 4, 500)[:, None]
fig, ax = plt.subplots(figsize=(8, 3.6))
ax.scatter(X_train[:, 0], y_train, s=2, color="0.75", label="training data")
ax.plot(grid[:, 0], exact.predict(grid), color="k", lw=3, label="KernelRidge")
ax.plot(grid[:, 0], model.predict(grid), color="C1", lw=1.5, label="DoFKernelRidge")
landmarks = model.nystroem_.components_[:, 0]
ax.plot(
    landmarks,
    np.full_like(landmarks, -2.2),
    "|",
    color="C0",
    ms=10,
    label=f"{model.n_components_} landmarks",
)
ax.set_xlabel("x")
ax.legend(loc="upper right", fontsize=8, ncol=2)
fig.tight_layout()
plt.show()

# %%
# The two curves coincide: the Nystroem approximation with ``p`` landmarks
# loses no accuracy at this ``alpha``.
#
# The same model as a pipeline
# ----------------------------
# :class:`~sklearn_dof.DoFNystroem` is the feature map alone, a drop-in for
# :class:`sklearn.kernel_approximation.Nystroem`.  Followed by ``Ridge`` with
# the same ``alpha`` it gives the same predictions as ``DoFKernelRidge``
# (same ``random_state``, hence the same landmarks).
pipeline = make_pipeline(
    DoFNystroem(alpha=alpha, gamma=gamma, random_state=0), Ridge(alpha=alpha)
).fit(X_train, y_train)
gap = np.max(np.abs(pipeline.predict(X_test) - model.predict(X_test)))
print(f"largest difference between the two: {gap:.1e}")

# %%
# The features can feed any linear model: a logistic regression, an SGD
# regressor, a linear SVM.  Keep ``alpha`` of ``DoFNystroem`` equal to the
# penalty the linear model will use (for ``C``-parametrised models,
# ``alpha = 1 / C``): it is the penalty at which the degrees of freedom, hence
# the rank, are computed.
