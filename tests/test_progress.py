"""``verbose``: one progress line per round of an automatic rank, then the
landmark block and the solve; nothing by default."""

import re

import numpy as np
import pytest

from sklearn_dof import (
    DoFKernelLogisticRegression,
    DoFKernelRidge,
    DoFKernelRidgeCV,
    DoFNystroem,
)
from sklearn_dof._progress import Progress

LINE = re.compile(r"^\[(\w+)\] (.+) \((\d+\.\d\d) s\)$")


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 3)
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.05 * rng.randn(1500)
    return X, y


ESTIMATORS = {
    "nystroem": lambda **kw: DoFNystroem(alpha=0.1, gamma=1.0, random_state=0, **kw),
    "ridge": lambda **kw: DoFKernelRidge(alpha=0.1, gamma=1.0, random_state=0, **kw),
    "ridge-cv": lambda **kw: DoFKernelRidgeCV(gamma=1.0, random_state=0, **kw),
    "logistic": lambda **kw: DoFKernelLogisticRegression(
        alpha=0.1, gamma=1.0, random_state=0, **kw
    ),
}


def _fit(name, data, **params):
    X, y = data
    estimator = ESTIMATORS[name](**params)
    return estimator.fit(X, y > 0 if name == "logistic" else y)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_nothing_is_printed_by_default(data, name, capsys):
    _fit(name, data)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_verbose_prints_a_line_per_round_then_the_fit(data, name, capsys):
    fitted = _fit(name, data, verbose=1)
    lines = capsys.readouterr().out.splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert lines and all(parsed), lines
    rounds = [m.group(2) for m in parsed if m.group(2).startswith("round ")]
    assert all(re.match(r"round \d+: \d+ columns", r) for r in rounds), rounds
    # The automatic rank doubles at least once on these data: one line per
    # round, the columns grown increasing, each with its loss estimate or
    # why there is none yet.
    assert len(rounds) >= 2
    columns = [int(re.search(r"(\d+) columns", r).group(1)) for r in rounds]
    assert columns == sorted(columns) and columns[0] < columns[-1]
    assert all(
        "estimated loss" in r or "no certificate" in r or "every row" in r
        for r in rounds
    )
    # Elapsed times since the fit began, never decreasing within a source.
    for source in {m.group(1) for m in parsed}:
        times = [float(m.group(3)) for m in parsed if m.group(1) == source]
        assert times == sorted(times)
    nystroem = fitted if name == "nystroem" else fitted.nystroem_
    landmarks = [m.group(2) for m in parsed if "landmark block" in m.group(2)]
    assert landmarks == [
        f"{nystroem.n_components_} landmarks; landmark block: "
        + landmarks[0].split("landmark block: ")[1]
    ]
    last = parsed[-1].group(2)
    if name in ("ridge", "ridge-cv"):
        assert f"ridge weights on {fitted.n_components_} landmarks" in last
    if name == "ridge-cv":
        assert last.startswith(f"penalty alpha_={fitted.alpha_:.4g}")
    if name == "logistic":
        assert last.endswith(f"{fitted.n_iter_[0]} Newton steps")


def test_conjugate_gradients_report_their_steps(data, capsys):
    X, y = data
    model = DoFKernelRidge(
        alpha=0.1, gamma=1.0, n_components=200, solver="cg", verbose=1
    ).fit(X, y)
    out = capsys.readouterr().out
    assert f"conjugate gradients, {model.n_iter_} steps" in out


def test_progress_prints_at_its_level_only(capsys):
    Progress(0, "A")("hidden")
    Progress(1, "B")("shown")
    Progress(1, "C")("detail", level=2)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and LINE.match(out[0]).group(1, 2) == ("B", "shown")
