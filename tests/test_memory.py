import math
import os
import subprocess
import sys
import tracemalloc
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from sklearn_dof import (
    DoFKernelRidge,
    DoFNystroem,
    _certificate,
    _memory,
    config_context,
    get_config,
    set_config,
)


def _rough_problem(n=6000):
    """Targets whose certified rank passes small budgets' caps."""
    rng = np.random.RandomState(0)
    X = rng.randn(n, 3)
    y = np.sin(3 * X[:, 0]) * np.cos(3 * X[:, 1]) + 0.01 * rng.randn(n)
    return X, y


def test_the_budget_is_a_share_of_the_memory_or_the_configured_bytes():
    assert get_config()["memory_budget"] == "auto"
    machine = _memory.available_memory()
    assert machine > 0
    assert _memory.memory_budget() == int(_memory.MEMORY_SHARE * machine)
    with config_context(memory_budget=3 * 2**20):
        assert _memory.memory_budget() == 3 * 2**20
        assert _memory.factor_budget() == 2 * 3 * 2**20 // 5
    assert get_config()["memory_budget"] == "auto"
    set_config(memory_budget=2**30)
    try:
        assert _memory.memory_budget() == 2**30
    finally:
        set_config(memory_budget="auto")


@pytest.mark.parametrize(
    "value", [0, -1, 0.5, float("inf"), float("nan"), "8GB", True, None]
)
def test_a_bad_budget_is_a_value_error_naming_it(value):
    if value is None:  # None leaves the setting as it is
        set_config(memory_budget=None)
        assert get_config()["memory_budget"] == "auto"
        return
    with pytest.raises(ValueError, match="memory_budget"):
        set_config(memory_budget=value)


def test_the_environment_sets_the_process_default():
    code = "from sklearn_dof import get_config; print(get_config()['memory_budget'])"
    env = {**os.environ, "SKLEARN_DOF_MEMORY_BUDGET": "1e9"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "1000000000"
    env["SKLEARN_DOF_MEMORY_BUDGET"] = "lots"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0 and "SKLEARN_DOF_MEMORY_BUDGET" in out.stderr


def test_caps_follow_the_budget():
    for budget in (2**20, 2**30, 6 * 2**30):
        with config_context(memory_budget=budget):
            cap = _memory.default_max_components()
            assert _memory.rank_bytes(cap) <= budget < _memory.rank_bytes(cap + 1)
            # 8 n^2 <= 1.5 budget: the exact route's K alone is its fit.
            rows = math.isqrt(int(_memory.EXACT_BUDGET_RATIO * budget) // 8)
            assert _memory.fits_exact(rows) and not _memory.fits_exact(rows + 1)


def test_an_automatic_rank_holds_the_memory_given_to_it():
    # The rank grows to the cap of each budget, and the fit's peak follows
    # the budget: within it, but for the certificate's blocks of rows.
    X, y = _rough_problem()
    peaks = []
    for budget in (2**25, 2**27):
        with config_context(memory_budget=budget), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the cap may bind
            tracemalloc.start()
            model = DoFNystroem(alpha=1e-6, gamma=4.0, random_state=0).fit(X, y)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert model.n_components_ == _memory.default_max_components()
        assert peak <= budget + 2 * _certificate._BLOCK_BYTES
        peaks.append(peak)
    assert peaks[1] > 2 * peaks[0]


def test_the_exact_route_holds_its_kernel_matrix_within_its_share():
    # K of 3,000 rows passes the budget but not EXACT_BUDGET_RATIO times it:
    # the fit is exact kernel ridge, and its peak is K's (factored in place),
    # within that share; a budget a third smaller keeps it low-rank.
    X, y = _rough_problem(n=3000)
    k_bytes = 8 * len(X) ** 2
    budget = math.ceil(k_bytes / _memory.EXACT_BUDGET_RATIO) + 2**20
    assert k_bytes > budget
    with config_context(memory_budget=budget):
        tracemalloc.start()
        model = DoFKernelRidge(alpha=1e-6, gamma=4.0, random_state=0).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        share = _memory.exact_budget()
    assert model.nystroem_.exact_
    assert k_bytes < peak <= 1.05 * share
    with config_context(memory_budget=2 * budget // 3), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cap may bind
        model = DoFKernelRidge(alpha=1e-6, gamma=4.0, random_state=0).fit(X, y)
    assert not model.nystroem_.exact_


def test_the_warning_names_the_rank_and_the_memory_it_needs():
    X, y = _rough_problem(3000)
    with config_context(memory_budget=2**22):
        cap = _memory.default_max_components()
        # solver="direct": the factor route's own warning (the default
        # solver hands over to held-out rounds at the cap, test_heldout.py).
        model = DoFKernelRidge(alpha=1e-6, gamma=4.0, solver="direct", random_state=0)
        with pytest.warns(UserWarning, match="the memory budget of 4 MiB") as record:
            model.fit(X, y)
    requested = model.nystroem_.requested_components_
    assert model.n_components_ == cap < requested
    message = str(record[0].message)
    needed = _memory.format_bytes(_memory.rank_bytes(requested))
    assert f"asks for about {requested} components" in message
    assert f"need about {needed}" in message and "set_config" in message
    # An explicit cap is named as such.
    with pytest.warns(UserWarning, match="stopped at max_components=64"):
        DoFKernelRidge(alpha=1e-6, gamma=4.0, max_components=64).fit(X, y)


def test_the_warning_says_what_stopped_the_rank():
    from sklearn_dof._nystroem import _cap_warning

    def stopped(requested, cap):
        return SimpleNamespace(requested=requested, cap=cap)

    with config_context(memory_budget=40 * 1000**2):  # a default cap of 1,000
        auto = DoFNystroem()
        # Short of the cap: no column left to add, not memory.
        text = _cap_warning(auto, 300, stopped(600, 1000), "the estimate", 5000)
        assert "numerical rank" in text and "memory budget" not in text
        text = _cap_warning(auto, 1000, stopped(2000, 1000), "the estimate", 5000)
        assert "the memory budget of 38 MiB allows" in text
        assert f"need about {_memory.format_bytes(_memory.rank_bytes(2000))}" in text
        capped = DoFNystroem(max_components=500)
        text = _cap_warning(capped, 500, stopped(900, 500), "it", 5000)
        assert "stopped at max_components=500" in text
        assert "all 800 rows" in _cap_warning(auto, 800, stopped(900, 800), "it", 800)
        # The cap the rounds had, not one derived again: where the exact
        # route lifted it to the rows, a rank short of them is the kernel's.
        text = _cap_warning(auto, 1000, stopped(2000, 5000), "the estimate", 5000)
        assert "numerical rank" in text


def test_format_bytes_reads_small_and_large_sizes():
    # A rank of 40 needs 64,000 bytes: named in KiB, not "0 MiB".
    assert _memory.format_bytes(_memory.rank_bytes(40)) == "62 KiB"
    assert _memory.format_bytes(10) == "1 KiB"
    assert _memory.format_bytes(5 * 2**20) == "5 MiB"
    assert _memory.format_bytes(int(23.5 * 2**30)) == "23.5 GiB"
