import pytest

from sklearn_dof import auto_rank, theoretical_rank


def test_auto_rank_scales_with_d_max_and_is_capped():
    assert auto_rank(10.0, "uniform") > auto_rank(10.0, "pivoted")
    assert auto_rank(20.0) > auto_rank(10.0)
    assert auto_rank(1000.0, n_samples=50) == 50
    assert auto_rank(0.0) == 1


def test_theoretical_rank_formula_and_cap():
    import math

    p = theoretical_rank(5.0, 10**6, alpha=10.0, delta=0.5, kernel_bound=1.0)
    expected = (32 * 5 / 0.5 + 2) * math.log(10**6 / (0.5 * 10.0 / 10**6))
    assert p == math.ceil(expected)
    with pytest.warns(UserWarning, match="exceeds n_samples"):
        assert theoretical_rank(50.0, 1000, alpha=1.0) == 1000


def test_rank_rules_validate_parameters():
    with pytest.raises(ValueError, match="sampling"):
        auto_rank(3.0, "random")
    with pytest.raises(ValueError, match="alpha"):
        theoretical_rank(3.0, 100, alpha=-1.0)
