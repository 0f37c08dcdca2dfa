"""Array-API inputs (torch, array-api-strict, CuPy...) under array_api_dispatch.

Follows scikit-learn's own pattern: every namespace, device and dtype of
:func:`~sklearn.utils._array_api.yield_namespace_device_dtype_combinations`
that is installed, against the NumPy results.
"""

import warnings

import numpy as np
import pytest
from sklearn import clone, config_context
from sklearn.utils._array_api import (
    _convert_to_numpy,
    device,
    get_namespace,
    yield_namespace_device_dtype_combinations,
)
from sklearn.utils._testing import _array_api_for_tests

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
)

from .conftest import array_placements, unusable_device_reason

COMBINATIONS = [
    c for c in yield_namespace_device_dtype_combinations() if c[0] != "numpy"
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(400, 4)
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.randn(400)
    return X, y


def _to(xp, array_device, a, dtype_name):
    return xp.asarray(a.astype(dtype_name), device=array_device)


def _numpy(a, xp):
    return _convert_to_numpy(a, xp=xp)


ESTIMATORS = {
    "ridge": DoFKernelRidge(alpha=1.0, gamma=0.3, n_components=60, random_state=0),
    "ridge-auto": DoFKernelRidge(alpha=1.0, gamma=0.3, random_state=0),
    "ridge-weights": DoFKernelRidge(
        alpha=0.1, kernel="laplacian", n_components=50, random_state=1
    ),
    "ridge-cv": DoFKernelRidgeCV(gamma=0.3, n_components=60, random_state=0),
    "ridge-no-intercept": DoFKernelRidge(
        alpha=1.0,
        kernel="poly",
        degree=2,
        n_components=40,
        fit_intercept=False,
        random_state=0,
    ),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("namespace, device_name, dtype_name", COMBINATIONS)
def test_ridge_fits_where_the_data_live(data, name, namespace, device_name, dtype_name):
    xp, array_device = _array_api_for_tests(namespace, device_name, dtype_name)
    X, y = data
    estimator = clone(ESTIMATORS[name])
    weights = np.random.RandomState(2).uniform(0.5, 2.0, len(y))
    fit_params = {"sample_weight": weights} if name == "ridge-weights" else {}
    # The reference sees the same values: an automatic rank is sized on the
    # host from the data as given.
    X, y = X.astype(dtype_name), y.astype(dtype_name)
    reference = estimator.fit(X, y, **fit_params)
    expected = reference.predict(X)

    X_xp, y_xp = (
        _to(xp, array_device, X, dtype_name),
        _to(xp, array_device, y, dtype_name),
    )
    with config_context(array_api_dispatch=True):
        fitted = clone(estimator).fit(
            X_xp,
            y_xp,
            **{k: xp.asarray(v, device=array_device) for k, v in fit_params.items()},
        )
        predicted = fitted.predict(X_xp)
    # Computed where the data live, and returned there.
    nystroem = fitted.nystroem_
    for array in (
        predicted,
        fitted.dual_coef_,
        nystroem.components_,
        nystroem.component_indices_,
    ):
        assert get_namespace(array)[0] is get_namespace(X_xp)[0]
        assert device(array) == device(X_xp)
    assert fitted.n_components_ == reference.n_components_
    np.testing.assert_array_equal(
        _numpy(fitted.nystroem_.component_indices_, xp),
        reference.nystroem_.component_indices_,
    )
    if name == "ridge-cv":
        assert fitted.alpha_ == reference.alpha_
    predicted = _numpy(predicted, xp)
    # float64: the NumPy path's solution up to rounding.  float32: float32
    # kernel blocks, float64 sums and solve.
    rtol = 1e-8 if dtype_name == "float64" else 2e-3
    np.testing.assert_allclose(
        predicted, expected, rtol=rtol, atol=rtol * np.abs(expected).max()
    )


@pytest.mark.parametrize("namespace, device_name, dtype_name", COMBINATIONS)
def test_nystroem_transform_where_the_data_live(
    data, namespace, device_name, dtype_name
):
    xp, array_device = _array_api_for_tests(namespace, device_name, dtype_name)
    X, y = data
    nystroem = DoFNystroem(alpha=1.0, gamma=0.3, n_components=50, random_state=0)
    expected = nystroem.fit(X).transform(X)
    X_xp = _to(xp, array_device, X, dtype_name)
    with config_context(array_api_dispatch=True):
        fitted = clone(nystroem).fit(X_xp)
        features = fitted.transform(X_xp)
        normalization = fitted.normalization_
        dof = fitted.dof_
    assert device(features) == device(normalization) == device(X_xp)

    assert features.dtype == X_xp.dtype  # float32 stays float32
    rtol = 1e-8 if dtype_name == "float64" else 2e-3
    # The symmetric inverse square root: the same basis as on NumPy.
    np.testing.assert_allclose(
        _numpy(features, xp), expected, rtol=rtol, atol=rtol * np.abs(expected).max()
    )
    np.testing.assert_allclose(dof, nystroem.dof_, rtol=1e-6 if rtol < 1e-3 else 1e-2)


@pytest.mark.parametrize("min_rows", [None, 40])
@pytest.mark.parametrize("namespace, device_name, dtype_name", COMBINATIONS[:1])
def test_automatic_rank_is_the_numpy_paths_past_the_budget(
    data, namespace, device_name, dtype_name, min_rows, monkeypatch
):
    # Past the certificate's memory budget both paths read the same uniform
    # subsample of rows: the same rank, the same landmarks, the same fit;
    # with smaller subsamples of those rows first (min_rows), the same ones.
    from sklearn_dof import _array_api, _landmarks, _memory

    xp, array_device = _array_api_for_tests(namespace, device_name, dtype_name)
    X, y = data
    max_components = 40
    # Room for 160 of the 400 rows.
    monkeypatch.setattr(_memory, "factor_budget", lambda: 8 * 40 * 160)
    if min_rows is not None:
        monkeypatch.setattr(_landmarks, "MIN_CERTIFICATE_ROWS", min_rows)
        ladder = _landmarks.certificate_ladder(len(y), max_components, 0)
        assert [len(rows) for rows in ladder] == [40, 80, 160]
    assert len(_array_api.host_rows(len(y), max_components, 0)) == 160
    ridge = DoFKernelRidge(
        alpha=2.0, gamma=0.3, max_components=max_components, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cap may bind
        expected = clone(ridge).fit(X, y)
        with config_context(array_api_dispatch=True):
            fitted = clone(ridge).fit(
                _to(xp, array_device, X, dtype_name),
                _to(xp, array_device, y, dtype_name),
            )
            predicted = fitted.predict(_to(xp, array_device, X, dtype_name))
    indices = _numpy(fitted.nystroem_.component_indices_, xp)
    np.testing.assert_array_equal(indices, expected.nystroem_.component_indices_)
    # The subsample, not all rows: landmarks among 160 rows.
    assert fitted.n_components_ == expected.n_components_ <= max_components
    assert fitted.nystroem_.loss_estimate_ == expected.nystroem_.loss_estimate_
    np.testing.assert_allclose(
        _numpy(predicted, xp), expected.predict(X), rtol=1e-8, atol=1e-8
    )


@pytest.mark.parametrize("namespace, device_name, dtype_name", COMBINATIONS)
def test_fitted_attributes_read_outside_the_dispatch_context(
    data, namespace, device_name, dtype_name
):
    # The maps computed on first read (coef_, normalization_, dof_) work on
    # the fitted arrays whatever the dispatch setting at the time.
    xp, array_device = _array_api_for_tests(namespace, device_name, dtype_name)
    X, y = data
    ridge = DoFKernelRidge(alpha=1.0, gamma=0.3, n_components=30, random_state=0)
    expected = clone(ridge).fit(X.astype(dtype_name), y)
    with config_context(array_api_dispatch=True):
        fitted = clone(ridge).fit(
            _to(xp, array_device, X, dtype_name), _to(xp, array_device, y, dtype_name)
        )
    coef = fitted.coef_
    assert device(coef) == device(fitted.dual_coef_)
    rtol = 1e-8 if dtype_name == "float64" else 2e-3
    # coef_ acts on transform's features: compare the predictions it gives.
    features = expected.nystroem_.transform(X.astype(dtype_name))
    np.testing.assert_allclose(
        features @ _numpy(coef, xp) + float(fitted.intercept_),
        expected.predict(X),
        rtol=rtol,
        atol=rtol * np.abs(y).max(),
    )
    assert fitted.dof_ == pytest.approx(
        expected.dof_, rel=1e-6 if rtol < 1e-3 else 1e-2
    )


CG_CASES = {
    "intercept": {},
    "weights": {"sample_weight": True},
    "no-intercept-two-targets": {"fit_intercept": False, "two_targets": True},
}


@pytest.mark.parametrize("case", list(CG_CASES))
@pytest.mark.parametrize("namespace, device_name, dtype_name", COMBINATIONS)
def test_cg_solution_is_the_direct_solution_where_the_data_live(
    data, monkeypatch, case, namespace, device_name, dtype_name
):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_dof import _ridge_solve

    xp, array_device = _array_api_for_tests(namespace, device_name, dtype_name)
    options = CG_CASES[case]
    X, y = data
    X = X.astype(dtype_name)
    if options.get("two_targets"):
        y = np.c_[y, np.cos(X[:, 2]) + 3.0]
    weights = np.random.RandomState(2).uniform(0.5, 2.0, len(X))
    fit_params = {"sample_weight": weights} if options.get("sample_weight") else {}
    params = dict(alpha=0.3, gamma=0.3, n_components=70, random_state=0)
    params["fit_intercept"] = options.get("fit_intercept", True)
    direct = DoFKernelRidge(solver="direct", **params).fit(X, y, **fit_params)
    # Run to the rounding floor: the same weights as the direct solve.
    monkeypatch.setattr(_ridge_solve, "PCG_TOL", 1e-24)
    monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 80)
    with config_context(array_api_dispatch=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the floor
        fitted = DoFKernelRidge(solver="cg", **params).fit(
            _to(xp, array_device, X, dtype_name),
            xp.asarray(y, device=array_device),
            **{k: xp.asarray(v, device=array_device) for k, v in fit_params.items()},
        )
        predicted = fitted.predict(_to(xp, array_device, X, dtype_name))
    assert fitted.n_iter_ > 0
    assert device(fitted.dual_coef_) == device(predicted)
    expected = direct.predict(X)
    # float32: float32 kernel blocks, float64 products and iteration.
    rtol = 1e-8 if dtype_name == "float64" else 2e-3
    np.testing.assert_allclose(
        _numpy(predicted, xp), expected, rtol=rtol, atol=rtol * np.abs(expected).max()
    )


def test_cg_under_dispatch_stops_on_its_tolerance_and_warns_short_of_it(
    data, monkeypatch
):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_dof import _ridge_solve

    xp, array_device = _array_api_for_tests("array_api_strict", "device1", "float64")
    X, y = data
    X_xp, y_xp = (xp.asarray(a, device=array_device) for a in (X, y))
    params = dict(alpha=0.3, gamma=0.3, n_components=70, random_state=0)
    numpy_cg = DoFKernelRidge(solver="cg", **params).fit(X, y)
    with config_context(array_api_dispatch=True):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            fitted = DoFKernelRidge(solver="cg", **params).fit(X_xp, y_xp)
        # The NumPy path's iteration, step for step.
        assert fitted.n_iter_ == numpy_cg.n_iter_
        assert 0 < fitted.n_iter_ < _ridge_solve.PCG_MAX_ITER
        monkeypatch.setattr(_ridge_solve, "PCG_MAX_ITER", 1)
        with pytest.warns(ConvergenceWarning, match="after 1 steps"):
            short = DoFKernelRidge(solver="cg", **params).fit(X_xp, y_xp)
        assert short.n_iter_ == 1
        # "auto" takes them from the threshold on, as on the NumPy path.
        assert DoFKernelRidge(**params).fit(X_xp, y_xp).n_iter_ is None
        monkeypatch.setattr(_ridge_solve, "CG_MIN_COMPONENTS", 70)
        with pytest.warns(ConvergenceWarning):
            assert DoFKernelRidge(**params).fit(X_xp, y_xp).n_iter_ == 1


def test_errors_name_what_to_change(data):
    X, y = data
    xp, array_device = _array_api_for_tests("array_api_strict", "device1", "float64")
    X_xp = xp.asarray(X, device=array_device)
    y_xp = xp.asarray(y, device=array_device)
    # Data on a device NumPy cannot read, without dispatch.
    with pytest.raises(TypeError, match="array_api_dispatch=True"):
        DoFKernelRidge(n_components=10).fit(X_xp, y_xp)
    fitted_on_numpy = DoFKernelRidge(alpha=1.0, n_components=10).fit(X, y)
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="same namespace"):
            fitted_on_numpy.predict(X_xp)
        with pytest.raises(TypeError, match="NumPy arrays only"):
            DoFKernelLogisticRegression(n_components=10).fit(X_xp, y_xp > 0)
        with pytest.raises(ValueError, match="sampling='pivoted'"):
            DoFKernelRidge(n_components=10, sampling="pivoted").fit(X_xp, y_xp)
        with pytest.raises(ValueError, match="kernel="):
            DoFKernelRidge(n_components=10, kernel=lambda a, b: 1.0).fit(X_xp, y_xp)
        with pytest.raises(ValueError, match="cv=None"):
            DoFKernelRidgeCV(n_components=10, cv=3).fit(X_xp, y_xp)
        fitted = DoFKernelRidge(alpha=1.0, n_components=10).fit(X_xp, y_xp)
    with pytest.raises(TypeError, match="fitted on array-API arrays"):
        fitted.predict(X)


# --------------------------------------------------------------------------
# Devices that cannot run are skipped, with the reason (tests/conftest.py)


def test_host_namespaces_are_always_usable():
    assert unusable_device_reason("numpy", None) is None
    assert unusable_device_reason("array_api_strict", "device1") is None


def test_a_torch_device_is_usable_when_an_allocation_there_succeeds():
    torch = pytest.importorskip("torch")
    assert unusable_device_reason("torch", "cpu") is None
    # Whatever the build says, the answer is what allocating there gives.
    try:
        torch.zeros(1, device="cuda")
        cuda_allocates = True
    except Exception:
        cuda_allocates = False
    assert (unusable_device_reason("torch", "cuda") is None) == cuda_allocates
    reason = unusable_device_reason("torch", "no-such-device")
    assert reason is not None and "'no-such-device'" in reason


def test_array_placements_read_the_estimator_checks():
    # The array-API checks scikit-learn yields for an estimator that
    # declares array-API support: every torch device among them is found.
    from sklearn.utils.estimator_checks import _yield_array_api_checks

    placements = set()
    for check in _yield_array_api_checks(DoFKernelRidge()):
        placements.update(array_placements({"check": check}))
    assert {("torch", "cpu"), ("torch", "cuda"), ("array_api_strict", "device1")} <= (
        placements
    )
    assert array_placements(
        {"namespace": "torch", "device_name": "cuda", "dtype_name": "float32"}
    ) == [("torch", "cuda")]
    assert array_placements({"name": "ridge"}) == []
