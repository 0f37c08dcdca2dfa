"""
================================================
Uniform, pivoted and the other landmark samplers
================================================

:class:`~sklearn_dof.DoFNystroem` (and every estimator built on it) chooses
its landmarks by one of these rules:

* ``sampling="uniform"``: points drawn uniformly without replacement, the
  rule of Bach's analysis and of :class:`sklearn.kernel_approximation.Nystroem`;
* ``sampling="pivoted"``: greedy incomplete Cholesky with column pivoting,
  each new landmark being the point the current ones explain worst;
* ``sampling="rpcholesky"``: randomly pivoted Cholesky, landmarks drawn with
  probabilities proportional to how badly the current ones explain them;
* ``sampling="leverage"``: landmarks drawn with probabilities proportional to
  approximate ridge leverage scores, refined round after round.

On evenly spread data they behave alike.  On data of uneven density, a few
points far from the others carry the largest leverage scores, and uniform
draws reach them late.  This example builds such data.
"""

# %%
# A dense cloud and a few small clusters
# --------------------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_ridge import KernelRidge

from sklearn_dof import DoFKernelRidge, DoFNystroem

# sphinx_gallery_thumbnail_number = 2


def make_data(n_cloud, n_per_cluster, rng):
    angles = np.linspace(0, 2 * np.pi, 6, endpoint=False)
    centres = 4.5 * np.c_[np.cos(angles), np.sin(angles)]
    X = np.vstack(
        [rng.uniform(-2.5, 2.5, size=(n_cloud, 2))]
        + [c + 0.3 * rng.randn(n_per_cluster, 2) for c in centres]
    )
    f = np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * X[:, 0] * X[:, 1]
    return X, f + 0.2 * rng.randn(X.shape[0]), f


rng = np.random.RandomState(0)
X, y, _ = make_data(2400, 20, rng)
X_test, _, f_test = make_data(2400, 20, rng)
alpha, gamma = 20.0, 1.0
print(f"{X.shape[0]} training points, {6 * 20} of them in the small clusters")

# %%
# Where the landmarks go
# ----------------------
# Forty landmarks of each rule.  Uniform draws follow the density: most land
# in the cloud, some clusters get none.  Greedy pivots spread out evenly: the
# first ones go to the clusters, which no other point explains.
# ``rpcholesky`` sits in between: it favours the clusters without a
# deterministic sweep.  ``leverage`` starts from 32 uniform landmarks and
# adapts in the rounds after them, so at 40 it still looks uniform; its
# advantage shows at larger ranks below.
samplings = ("uniform", "pivoted", "rpcholesky", "leverage")
fig, axes = plt.subplots(2, 2, figsize=(9, 9), sharex=True, sharey=True)
for ax, sampling in zip(axes.ravel(), samplings, strict=True):
    nys = DoFNystroem(
        alpha=alpha, gamma=gamma, n_components=40, sampling=sampling, random_state=0
    ).fit(X)
    ax.scatter(X[:, 0], X[:, 1], s=2, color="0.7")
    ax.scatter(*nys.components_.T, s=25, color="C3", edgecolor="k", lw=0.5)
    ax.set_title(f'sampling="{sampling}", 40 landmarks')
    ax.set_aspect("equal")
fig.tight_layout()
plt.show()

# %%
# Error against the rank
# ----------------------
# Test error (against the noiseless target) of
# :class:`~sklearn_dof.DoFKernelRidge` with a fixed rank, divided by that of
# exact kernel ridge regression with the same ``alpha``.  The random rules
# are drawn five times: the line is the median, the band the range.
exact = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X, y)
exact_error = np.mean((exact.predict(X_test) - f_test) ** 2)


def error_ratio(n_components, sampling, seed=0):
    model = DoFKernelRidge(
        alpha=alpha,
        gamma=gamma,
        n_components=n_components,
        sampling=sampling,
        fit_intercept=False,
        random_state=seed,
    ).fit(X, y)
    return np.mean((model.predict(X_test) - f_test) ** 2) / exact_error


ranks = np.array([20, 30, 40, 60, 80, 120, 160, 240, 320, 480])
ratios = {
    sampling: np.array(
        [[error_ratio(p, sampling, seed) for seed in seeds] for p in ranks]
    )
    for sampling, seeds in (
        ("uniform", range(5)),
        ("pivoted", [0]),  # deterministic
        ("rpcholesky", range(5)),
        ("leverage", range(5)),
    )
}

fig, ax = plt.subplots(figsize=(6.5, 4))
for (sampling, ratio), color, marker in zip(
    ratios.items(), ["C0", "C3", "C2", "C1"], "osD^", strict=True
):
    if ratio.shape[1] > 1:
        ax.fill_between(ranks, ratio.min(1), ratio.max(1), color=color, alpha=0.15)
    ax.plot(ranks, np.median(ratio, 1), "-" + marker, color=color, label=sampling)
ax.axhline(1, color="k", lw=0.8)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xticks(ranks, [str(p) for p in ranks])
ax.set_xticks([], minor=True)
ax.set_yticks([1, 1.5, 2, 3, 4], ["1", "1.5", "2", "3", "4"])
ax.set_yticks([], minor=True)
ax.set_xlabel("rank p")
ax.set_ylabel("test error / exact kernel ridge")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# Automatic rank and cost
# -----------------------
# With ``n_components="dof"`` (the paper's rule; ``"auto"`` certifies a
# loss of test error instead) each rule estimates the degrees of freedom
# from its own columns and sets the rank by :func:`~sklearn_dof.dof_rank`:
# ``ceil(2.75 d_max)`` uniform and ``ceil(1.5 d_max)`` pivoted columns; the
# adaptive random rules go where the leverage is and need a rank of the
# order of ``d_eff`` instead, ``ceil(3 d_eff)`` for ``rpcholesky`` and
# ``ceil(4 d_eff)`` for ``leverage``.  The estimate depends on the rule:
# uniform columns that have not yet reached the clusters underestimate
# ``d_max``, so different draws give different ranks.  Greedy pivots
# evaluate one column at a time, the other rules add columns in blocks.
for sampling in samplings:
    for seed in range(1 if sampling == "pivoted" else 2):
        start = time.perf_counter()
        model = DoFKernelRidge(
            alpha=alpha,
            gamma=gamma,
            n_components="dof",
            sampling=sampling,
            fit_intercept=False,
            random_state=seed,
        ).fit(X, y)
        seconds = time.perf_counter() - start
        ratio = np.mean((model.predict(X_test) - f_test) ** 2) / exact_error
        print(
            f"{sampling:>10} seed {seed}: d_max {model.dof_:5.1f}, "
            f"d_eff {model.effective_dof_:5.1f} -> p = {model.n_components_:3d}, "
            f"error ratio {ratio:.3f}, fit {seconds:.2f} s"
        )

# %%
# Which to choose
# ---------------
# Uniform sampling is what Bach's guarantee is about (in expectation over the
# draws) and costs least per column.  Greedy pivoting needs fewer columns,
# has no draw-to-draw variance and finds the isolated points that drive
# ``d_max``; on data with a few extreme outliers it spends columns on them.
# The adaptive random rules need a rank of the order of ``d_eff`` rather than
# ``d_max``, which matters most when the two are far apart.  See
# :ref:`sampling` in the user guide.
