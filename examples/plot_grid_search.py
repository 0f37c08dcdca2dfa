"""
==============================================
Choosing alpha: leave-one-out and GridSearchCV
==============================================

``alpha`` plays two parts in this library: it is the ridge penalty, and it
sets the loss that ``n_components="auto"`` certifies the rank for (and the
degrees of freedom of the paper's rule).  A smaller ``alpha`` fits more
closely and needs more landmarks.  This
example tunes it two ways:

1. :class:`~sklearn_dof.DoFKernelRidgeCV`: every ``alpha`` of a grid scored by
   exact leave-one-out on one set of features, in about the time of one fit;
2. :class:`~sklearn.model_selection.GridSearchCV` over
   :class:`~sklearn_dof.DoFKernelRidge`, here over ``alpha`` and the rank
   together, to see what the automatic rank buys.
"""

# %%
# Data
# ----
# A smooth function of two inputs, observed with noise.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold, train_test_split

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV

# sphinx_gallery_thumbnail_number = 2
rng = np.random.RandomState(0)
X = rng.uniform(-3, 3, size=(3000, 2))
y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 1] + 0.5 * rng.randn(3000)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=1500, random_state=0
)
gamma = 1.0

# %%
# Leave-one-out on fixed features
# -------------------------------
# ``DoFKernelRidgeCV`` picks the landmarks once, at the smallest ``alpha`` of
# the grid (the largest degrees of freedom, so the largest rank the grid
# needs), then scores every ``alpha`` by exact leave-one-out from one
# eigendecomposition of the ``p x p`` Gram matrix of the features, like
# :class:`~sklearn.linear_model.RidgeCV`.
alphas = np.logspace(-1, 2, 13)
start = time.perf_counter()
cv_model = DoFKernelRidgeCV(
    alphas=alphas, gamma=gamma, store_cv_results=True, random_state=0
).fit(X_train, y_train)
print(
    f"DoFKernelRidgeCV: alpha_ = {cv_model.alpha_:g}, p = {cv_model.n_components_}, "
    f"{time.perf_counter() - start:.2f} s"
)
print(f"test R^2 = {cv_model.score(X_test, y_test):.3f}")

# %%
# The leave-one-out curve (``cv_results_`` holds the squared leave-one-out
# residual of every training point at every ``alpha``).
loo_mse = cv_model.cv_results_.mean(axis=0)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogx(alphas, loo_mse, "-o")
ax.axvline(cv_model.alpha_, color="gray", ls=":")
ax.set_xlabel("alpha")
ax.set_ylabel("leave-one-out MSE")
fig.tight_layout()
plt.show()

# %%
# GridSearchCV over alpha and the rank
# ------------------------------------
# ``DoFKernelRidge`` uses one ``alpha`` for the penalty and the rank, so a
# grid over ``alpha`` stays coherent: each candidate ``alpha`` gets its own
# automatic rank.  Adding fixed ranks to the grid shows what that rank is
# worth.  ``n_components`` takes ``"auto"`` or an integer.
alphas = np.logspace(-1, 2, 7)
ranks = [25, 50, 100, 200, 400]
search = GridSearchCV(
    DoFKernelRidge(gamma=gamma, random_state=0),
    {"alpha": alphas, "n_components": ["auto", *ranks]},
    cv=KFold(3, shuffle=True, random_state=0),
    scoring="neg_mean_squared_error",
)
start = time.perf_counter()
search.fit(X_train, y_train)
print(
    f"GridSearchCV: {len(search.cv_results_['params'])} candidates x 3 folds, "
    f"{time.perf_counter() - start:.1f} s"
)
best = search.best_params_
print(f"best: alpha = {best['alpha']:g}, n_components = {best['n_components']}")
print(f"test R^2 = {r2_score(y_test, search.predict(X_test)):.3f}")

# %%
# Exact kernel ridge regression on the same folds, for reference.
exact_search = GridSearchCV(
    KernelRidge(kernel="rbf", gamma=gamma),
    {"alpha": alphas},
    cv=KFold(3, shuffle=True, random_state=0),
    scoring="neg_mean_squared_error",
).fit(X_train, y_train)

# %%
# Cross-validated MSE for each fixed rank (blue), for the automatic rank
# (black, with the rank written at each point) and for exact kernel ridge
# (red, dashed), against ``alpha``.
results = search.cv_results_
mse = -results["mean_test_score"]
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, p in enumerate(ranks):
    mask = results["param_n_components"] == p
    ax.semilogx(
        alphas,
        mse[mask],
        "-",
        color=plt.cm.Blues(0.3 + 0.7 * i / len(ranks)),
        label=f"p = {p}",
    )
mask = results["param_n_components"] == "auto"
ax.semilogx(alphas, mse[mask], "k-o", lw=2, label='p = "auto"')
for alpha, value in zip(alphas, mse[mask], strict=True):
    p_auto = (
        DoFKernelRidge(alpha=alpha, gamma=gamma, random_state=0)
        .fit(X_train, y_train)
        .n_components_
    )
    ax.annotate(
        str(p_auto),
        (alpha, value),
        textcoords="offset points",
        xytext=(0, 7),
        ha="center",
        fontsize=8,
    )
ax.semilogx(
    alphas,
    -exact_search.cv_results_["mean_test_score"],
    "r--",
    lw=1.5,
    label="exact KernelRidge",
)
ax.set_xlabel("alpha")
ax.set_ylabel("3-fold CV MSE")
ax.legend(fontsize=8, ncol=2)
fig.tight_layout()
plt.show()

# %%
# What the plot shows:
#
# * Around the best ``alpha`` the automatic rank is as accurate as exact
#   kernel ridge; a fixed ``p = 25`` is too small at every ``alpha``.
# * The automatic rank grows as ``alpha`` shrinks, as the degrees of freedom
#   do.  It is conservative: at ``alpha = 1``, ``p = 200`` does as well as the
#   automatic 576.  Here ``d_max`` is several times ``d_eff`` because the
#   points in the corners of the square have the largest leverage scores (see
#   the quick start), and the rule provides for them.
# * Far above the best ``alpha`` the automatic rank is small and the curve
#   leaves the exact one: the constants of :func:`~sklearn_dof.dof_rank`
#   were calibrated at the best penalty of each problem, and this
#   over-smoothed fit loses about 10% at ``alpha = 100``.  That does not
#   change which ``alpha`` the search selects.
#
# A pipeline ``make_pipeline(DoFNystroem(alpha=a), Ridge(alpha=a))`` gives the
# same model, but a grid over it has to move both ``alpha`` together
# (``{"dofnystroem__alpha": [a], "ridge__alpha": [a]}`` per value, a list of
# grids); ``DoFKernelRidge`` ties them.  Kernel parameters such as ``gamma``
# can join the grid the same way as with
# :class:`~sklearn.kernel_ridge.KernelRidge`.
