"""scikit-learn's estimator checks over every public estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_dof import DoFNystroem


@parametrize_with_checks([DoFNystroem(), DoFNystroem(sampling="pivoted")])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
