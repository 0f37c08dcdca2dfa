"""scikit-learn's estimator checks over every public estimator."""

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_dof import DoFNystroem


class FirstRows:
    """A landmark selector: the first rows (the checks' data is shuffled)."""

    def select(self, X, n_components, random_state):
        return np.arange(min(n_components, X.shape[0]))


@parametrize_with_checks(
    [
        DoFNystroem(),
        DoFNystroem(sampling="pivoted"),
        DoFNystroem(sampling="leverage"),
        DoFNystroem(sampling="rpcholesky"),
        DoFNystroem(sampling=FirstRows(), n_components=5),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
