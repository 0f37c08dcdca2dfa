"""Data whose ridge leverage scores are far from uniform."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, validate_params


@validate_params(
    {
        "n_samples": [Interval(Integral, 30, None, closed="left")],
        "outlier_fraction": [Interval(Real, 0, 0.5, closed="both")],
        "sparse_fraction": [Interval(Real, 0, 0.5, closed="both")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_clustered(
    n_samples=1000,
    *,
    outlier_fraction=1 / 30,
    sparse_fraction=0.25,
    noise=0.3,
    random_state=None,
):
    """A dense cluster, a sparse cluster and scattered outliers, in 2-D.

    With a Gaussian kernel of bandwidth about one, a point of the dense
    cluster (standard deviation 0.3) shares its leverage with hundreds of
    neighbours, while an outlier (uniform on ``[-15, 15]^2``) is alone: its
    ridge leverage score is ``k(x, x) / (k(x, x) + alpha)``, the largest
    possible, so ``d_max = n max_i l_i`` is many times ``d_eff``.  Uniform
    columns need of the order of ``d_max`` columns there (Bach 2013);
    leverage-score sampling and randomly pivoted Cholesky of the order of
    ``d_eff``.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of points (at least 30).
    outlier_fraction : float, default=1/30
        Fraction of outliers.
    sparse_fraction : float, default=0.25
        Fraction of points in the sparse cluster (standard deviation 1.5,
        centred at ``(4, 0)``); the rest are in the dense one at the origin.
    noise : float, default=0.3
        Standard deviation of the Gaussian noise on ``y``.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    data : Bunch
        ``X`` (n, 2), ``y`` (n,), ``f`` (n,) the noiseless target
        ``sin(x_1) + cos(x_2)``, and ``group`` (n,) with 0 for the dense
        cluster, 1 for the sparse one and 2 for outliers.

    Examples
    --------
    >>> from sklearn_dof.datasets import make_clustered
    >>> data = make_clustered(300, random_state=0)
    >>> data.X.shape, int((data.group == 2).sum())
    ((300, 2), 10)
    """
    rng = check_random_state(random_state)
    n_out = int(round(outlier_fraction * n_samples))
    n_sparse = int(round(sparse_fraction * n_samples))
    n_dense = n_samples - n_sparse - n_out
    X = np.vstack(
        [
            0.3 * rng.randn(n_dense, 2),
            np.array([4.0, 0.0]) + 1.5 * rng.randn(n_sparse, 2),
            rng.uniform(-15, 15, size=(n_out, 2)),
        ]
    )
    group = np.repeat([0, 1, 2], [n_dense, n_sparse, n_out])
    f = np.sin(X[:, 0]) + np.cos(X[:, 1])
    y = f + noise * rng.randn(n_samples)
    return Bunch(X=X, y=y, f=f, group=group)
