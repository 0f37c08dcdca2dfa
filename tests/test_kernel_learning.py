"""The kernel's hyperparameters learned by leave-one-out (_kernel_learning)
and scikit-learn's kernel objects in the estimators (_kernel_objects)."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import pairwise_kernels

from sklearn_dof import DoFKernelRidge, DoFKernelRidgeCV, DoFNystroem
from sklearn_dof._kernel_learning import (
    LeaveOneOutCriterion,
    default_kernels,
    learned_penalties,
    search_kernel,
    split_rows,
)
from sklearn_dof._kernel_objects import is_psd_kernel_object, kernel_object_block

KERNELS = [
    RBF([1.0, 2.0, 0.5]),
    Matern(1.2, nu=1.5),
    Matern([1.0, 2.0, 0.7], nu=2.5),
    ConstantKernel(2.0) * RBF([1.0, 2.0, 3.0]) + DotProduct(1.0),
    RationalQuadratic(1.0, 2.0),
    Matern(1.0, nu=0.5) * ConstantKernel(1.5),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_gradient_matches_finite_differences(kernel):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2] + 0.1 * rng.normal(size=(80, 2))
    criterion = LeaveOneOutCriterion(X, y - y.mean(0), rng.uniform(0.5, 2, 80))
    _, grad = criterion(kernel, 0.3)
    z = np.append(kernel.theta, np.log(0.3))
    fd = []
    for j in range(z.size):
        step = np.zeros_like(z)
        step[j] = 1e-5
        values = [
            criterion(kernel.clone_with_theta(w[:-1]), np.exp(w[-1]), False)[0]
            for w in (z + step, z - step)
        ]
        fd.append((values[0] - values[1]) / 2e-5)
    np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-6 * np.abs(fd).max())


def test_criterion_is_the_leave_one_out_error():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    kernel = RBF([1.0, 2.0])
    value, _ = LeaveOneOutCriterion(X, y)(kernel, 0.3, False)
    residuals = []
    for i in range(60):
        keep = np.arange(60) != i
        fit = KernelRidge(alpha=0.3, kernel=kernel).fit(X[keep], y[keep])
        residuals.append(y[i] - fit.predict(X[i : i + 1])[0])
    assert value == pytest.approx(np.mean(np.square(residuals)), rel=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_learned_length_scale_recovers_the_generating_one(seed):
    # A sample of a Gaussian process with length scales 0.7 and 2.0 on a
    # square of side 6: the shorter one is recovered within 20%; the longer
    # one, a third of the side, is only known to be longer.
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(400, 2))
    K = RBF([0.7, 2.0])(X) + 1e-8 * np.eye(400)
    y = np.linalg.cholesky(K) @ rng.normal(size=400) + 0.03 * rng.normal(size=400)
    model = DoFKernelRidgeCV(kernel=RBF([1.0, 1.0]), random_state=0).fit(X, y)
    short, long = model.kernel_.length_scale
    assert short == pytest.approx(0.7, rel=0.2)
    assert long > 1.3


def test_kernel_is_left_and_kernel_is_set():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=200)
    kernel = Matern(np.ones(3), nu=1.5)
    model = DoFKernelRidgeCV(kernel=kernel, random_state=0).fit(X, y)
    assert model.kernel is kernel and np.all(kernel.length_scale == 1.0)
    assert isinstance(model.kernel_, Matern) and model.kernel_.length_scale.shape == (
        3,
    )
    # The relevant feature gets the shortest length scale.
    assert np.argmin(model.kernel_.length_scale) == 0
    default = DoFKernelRidgeCV(random_state=0).fit(X, y)
    assert default.kernel is None and isinstance(default.kernel_, (RBF, Matern))
    assert DoFKernelRidge(kernel=kernel).fit(X, y).kernel_ is kernel


def test_no_learning_with_a_named_kernel_or_fixed_bounds():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(100, 2))
    y = X[:, 0]
    assert DoFKernelRidgeCV(gamma=0.5).fit(X, y).kernel_ == "rbf"
    fixed = RBF(1.0, length_scale_bounds="fixed")
    assert DoFKernelRidgeCV(kernel=fixed).fit(X, y).kernel_ is fixed


@pytest.mark.parametrize("n_features", [2, 40])
def test_verbose_prints_one_line_per_step(capsys, n_features):
    # Per-feature length scales of 40 features fit on the step's line too.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, n_features))
    y = np.sin(X[:, 0])
    kernel = RBF(np.full(n_features, np.sqrt(n_features)))
    DoFKernelRidgeCV(kernel=kernel, verbose=1, kernel_max_iter=3).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    steps = [line for line in lines if "kernel step" in line]
    assert steps and all("leave-one-out" in line and "alpha=" in line for line in steps)
    assert all(line.startswith("[") for line in lines)


def test_budget_warns():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(150, 3))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2
    with pytest.warns(Warning, match="budget of 1 L-BFGS"):
        DoFKernelRidgeCV(kernel_max_iter=1).fit(X, y)


@pytest.mark.parametrize("n_components", [60, "auto"])
@pytest.mark.parametrize(
    "kernel",
    [
        Matern([1.0, 2.0, 0.7], nu=1.5),
        RBF([0.7, 1.0, 2.0]) * ConstantKernel(2.0),
        Matern(1.0, nu=0.5) + DotProduct(0.5),
    ],
    ids=repr,
)
def test_kernel_objects_equal_pairwise_kernels(kernel, n_components):
    rng = np.random.default_rng(7)
    X, X_test = rng.normal(size=(150, 3)), rng.normal(size=(20, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=150)
    fixed = clone(kernel).clone_with_theta(kernel.theta)
    for name in fixed.get_params():
        if name.endswith("_bounds"):
            fixed.set_params(**{name: "fixed"})
    K, K_test = (
        pairwise_kernels(X, metric=kernel),
        pairwise_kernels(X_test, X, metric=kernel),
    )
    for make in (
        lambda k: DoFKernelRidge(kernel=k, alpha=1.0, n_components=n_components),
        lambda k: DoFKernelRidgeCV(kernel=k, n_components=n_components),
    ):
        ours = make(fixed).set_params(random_state=0).fit(X, y)
        ref = make("precomputed").set_params(random_state=0).fit(K, y)
        np.testing.assert_allclose(
            ours.predict(X_test), ref.predict(K_test), atol=1e-10
        )
    nystroem = DoFNystroem(kernel=fixed, n_components=n_components, random_state=0)
    features = nystroem.fit(X).transform(X_test)
    landmarks = nystroem.components_
    ref = pairwise_kernels(X_test, landmarks, metric=kernel) @ nystroem.normalization_
    np.testing.assert_allclose(features, ref, atol=1e-12)


@pytest.mark.parametrize(
    "kernel, error, match",
    [
        (RBF([1.0, 2.0]), ValueError, "'kernel' parameter .* shape \\(2,\\)"),
        (
            WhiteKernel() + RBF(),
            ValueError,
            "'kernel' parameter contains a WhiteKernel",
        ),
        (object(), ValueError, "'kernel' parameter"),
    ],
)
def test_bad_kernels_name_the_parameter(kernel, error, match):
    X = np.random.default_rng(8).normal(size=(50, 3))
    for estimator in (DoFKernelRidge(kernel=kernel), DoFKernelRidgeCV(kernel=kernel)):
        with pytest.raises(error, match=match):
            estimator.fit(X, X[:, 0])


@pytest.mark.parametrize(
    "alpha, learn_rows, n_rows",
    [(1e-3, 1000, 9600), (0.05, 1000, 40000), (2.0, 900, 500)],
)
def test_learned_penalties_span_both_scalings(alpha, learn_rows, n_rows):
    grid = learned_penalties(alpha, learn_rows, n_rows)
    steps = np.diff(np.log10(grid))
    np.testing.assert_allclose(steps, 0.5)
    # alpha itself (a Gaussian process's scaling), two decades below it, and
    # the per-row scaling alpha n / m with half a decade above it.
    assert np.isclose(grid, alpha).any()
    assert grid[0] == pytest.approx(alpha / 100)
    assert grid[-1] >= np.sqrt(10) * alpha * max(n_rows / learn_rows, 1) * (1 - 1e-12)
    assert grid[-2] < np.sqrt(10) * alpha * max(n_rows / learn_rows, 1)


def test_the_grid_follows_the_learned_penalty():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(600, 2))
    y = np.sin(2 * X[:, 0]) + 0.01 * rng.normal(size=600)
    learned = DoFKernelRidgeCV(kernel_subsample=200, random_state=0).fit(X, y)
    # Nearly noiseless rows: the learned penalty lies below the default
    # grid's smallest, n * 1e-6, and alpha_ is chosen from alphas_.
    assert min(learned.alphas_) < 600 * 1e-6
    assert learned.alpha_ in learned.alphas_
    given = DoFKernelRidgeCV(kernel="rbf", random_state=0).fit(X, y)
    np.testing.assert_allclose(given.alphas_, 600 * np.logspace(-6, 0, 13))
    alphas = [0.1, 1.0]
    assert list(DoFKernelRidgeCV(alphas=alphas).fit(X, y).alphas_) == alphas


def test_a_penalty_at_its_floor_adds_the_default_grid():
    # 30 learning rows: the search's penalty stops at lambda = 1e-8, far
    # below what every row's leave-one-out prefers; the default grid joins.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(40, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.randn(40)
    model = DoFKernelRidgeCV(random_state=0).fit(X, y)
    assert set(40 * np.logspace(-6, 0, 13)) <= set(model.alphas_)
    assert min(model.alphas_) < model.alpha_ < max(model.alphas_)
    assert model.alpha_ > 40 * 1e-6


def test_a_spread_at_rounding_level_is_a_constant_feature():
    # A rare value standardized: constant on the rows the search sees, up
    # to rounding; dividing by that spread gave a length scale of 1e-16.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    X[:, 2] = -0.0095 + 1e-18 * rng.normal(size=200)
    _, scale = default_kernels(X)
    assert scale[2] == 1.0
    assert np.all(scale[:2] == X[:, :2].std(axis=0))


def test_the_criterion_does_not_depend_on_the_targets_scale():
    rng = np.random.default_rng(6)
    X = rng.uniform(-2, 2, size=(150, 2))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.normal(size=150)
    small, large = (
        search_kernel(None, X, scale * y, rows=100, rng=0) for scale in (1e-4, 1.0)
    )
    np.testing.assert_allclose(
        small.kernel.length_scale, large.kernel.length_scale, rtol=1e-6
    )
    assert small.alpha == pytest.approx(large.alpha, rel=1e-6)


@pytest.mark.parametrize("scale", [1.0 / 400, 7.0])
def test_weights_scaled_alike_give_the_same_kernel_and_grid(scale):
    # The search's ridge weighs its rows alike; the fit's penalties are
    # those of the weighted fit, which weights scaled alike leave as they
    # are (scaled with them), as the default grid n * lambda does.
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(400, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=400)
    plain = DoFKernelRidgeCV(random_state=0).fit(X, y)
    weights = np.full(400, scale)
    weighted = DoFKernelRidgeCV(random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(
        weighted.kernel_.length_scale, plain.kernel_.length_scale, rtol=1e-9
    )
    np.testing.assert_allclose(
        np.array(weighted.alphas_) / scale, plain.alphas_, rtol=1e-9
    )


def test_a_search_with_no_factor_warns_and_keeps_its_start():
    # Repeated rows at a penalty near zero: K + alpha I has no Cholesky
    # factor anywhere the search looks.
    rng = np.random.default_rng(0)
    X = np.tile(rng.normal(size=(100, 2)), (3, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    with pytest.warns(UserWarning, match="were not learned"):
        model = DoFKernelRidgeCV(alphas=[1e-30], random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.predict(X)))


@pytest.mark.parametrize("kernel", [RBF([1.0, 2.0]), Matern(1.5, nu=2.5)], ids=repr)
def test_stationary_kernels_far_from_the_origin_equal_scikit_learn(kernel):
    # The fused distances of a shifted cloud: exact, as scikit-learn's.
    rng = np.random.default_rng(1)
    # (At 1e4 scikit-learn's own distances still hold about 12 digits.)
    X, Y = rng.normal(size=(50, 2)) + 1e4, rng.normal(size=(30, 2)) + 1e4
    np.testing.assert_allclose(
        kernel_object_block(X, Y, kernel), kernel(X, Y), rtol=0, atol=1e-11
    )
    y = np.sin(X[:, 0])
    near, far = (
        DoFKernelRidgeCV(random_state=0).fit(X - shift, y).kernel_
        for shift in (1e4, 0.0)
    )
    np.testing.assert_allclose(far.length_scale, near.length_scale, rtol=1e-6)


def test_rows_are_held_out_only_where_the_default_rule_chooses():
    rng = np.random.default_rng(0)
    chooses = split_rows(200, 1000, rng)
    assert (chooses.learn.size, chooses.check.size) == (150, 50)
    learns = split_rows(200, 1000, np.random.default_rng(0), check=False)
    assert learns.learn.size == 200 and learns.check.size == 0


def test_exp_sine_squared_is_not_taken_for_positive_semi_definite():
    # sin^2 of a Euclidean distance: indefinite on more than one feature.
    X = np.random.default_rng(0).normal(size=(60, 3))
    assert np.linalg.eigvalsh(ExpSineSquared()(X)).min() < -1
    assert not is_psd_kernel_object(ExpSineSquared())


def test_criterion_by_tiles_equals_one_factorisation(monkeypatch):
    # A kernel_subsample above the tile order factors by tiles (a single
    # OpenBLAS factorisation of that order crashes the process).
    from sklearn_dof import _tiles

    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    criterion = LeaveOneOutCriterion(X, y)
    kernel = Matern([1.0, 2.0, 0.5], nu=1.5)
    whole = criterion(kernel, 0.1)
    monkeypatch.setattr(_tiles, "TILE_ORDER", 64)
    tiled = criterion(kernel, 0.1)
    assert tiled[0] == pytest.approx(whole[0], rel=1e-10)
    np.testing.assert_allclose(tiled[1], whole[1], rtol=1e-8)
