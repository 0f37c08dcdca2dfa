import pytest

from sklearn_dof import auto_rank, dof_rank, theoretical_rank


def test_dof_rank_scales_with_d_max_and_is_capped():
    assert dof_rank(10.0, "uniform") > dof_rank(10.0, "pivoted")
    assert dof_rank(20.0) > dof_rank(10.0)
    assert dof_rank(1000.0, n_samples=50) == 50
    assert dof_rank(0.0) == 1


def test_theoretical_rank_formula_and_cap():
    import math

    p = theoretical_rank(5.0, 10**6, alpha=10.0, delta=0.5, kernel_bound=1.0)
    expected = (32 * 5 / 0.5 + 2) * math.log(10**6 / (0.5 * 10.0 / 10**6))
    assert p == math.ceil(expected)
    with pytest.warns(UserWarning, match="exceeds n_samples"):
        assert theoretical_rank(50.0, 1000, alpha=1.0) == 1000


def test_rank_rules_validate_parameters():
    with pytest.raises(ValueError, match="sampling"):
        dof_rank(3.0, "random")
    with pytest.raises(ValueError, match="alpha"):
        theoretical_rank(3.0, 100, alpha=-1.0)


def test_auto_rank_is_a_deprecated_alias_of_dof_rank():
    with pytest.warns(FutureWarning, match="auto_rank is deprecated in 0.1.*dof_rank"):
        p = auto_rank(40.0, "rpcholesky", 100, d_eff=5.0)
    assert p == dof_rank(40.0, "rpcholesky", 100, d_eff=5.0)
