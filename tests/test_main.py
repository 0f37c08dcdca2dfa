"""Tests of the command line, ``python -m sklearn_dof``."""

import ast
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sklearn_dof.__main__ as cli
from sklearn_dof.__main__ import CV_LAMBDAS, main

from .conftest import SHARED_DATA

COLUMNS = ["data", "sampling", "n", "alpha", "d_max", "d_eff", "p"]
COLUMNS += ["MSE nystroem", "MSE exact", "ratio", "t nystroem", "t exact"]


def _table(out):
    """The rows of the printed table, as dicts by column name."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("data "))
    # Columns are separated by at least two spaces; names hold single ones.
    assert re.split(r"\s{2,}", lines[start].strip()) == COLUMNS
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(COLUMNS), line
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    assert rows
    return rows


def _run(argv, capsys):
    """Run the command in-process; return its stdout and table rows."""
    assert main([str(arg) for arg in argv]) == 0
    out = capsys.readouterr().out
    return out, _table(out)


def _regression(n_samples, n_features=2, random_state=0):
    rng = np.random.RandomState(random_state)
    X = rng.uniform(-2, 2, size=(n_samples, n_features))
    # An offset the models must not be penalised for: y is centred for both.
    y = 3.0 + np.sin(2 * X[:, 0]) + 0.5 * X[:, -1] + 0.1 * rng.randn(n_samples)
    return X, y


@pytest.fixture(scope="module")
def default_output():
    """Stdout of ``python -m sklearn_dof`` without arguments, run once."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main([]) == 0
    return buffer.getvalue()


def test_default_problems(default_output):
    rows = _table(default_output)
    assert "test MSE against the noiseless target" in default_output
    assert [(row["data"], row["sampling"]) for row in rows] == [
        ("spline beta=1 delta=8", "uniform"),
        ("spline beta=1 delta=8", "pivoted"),
        ("spline beta=2 delta=8", "uniform"),
        ("spline beta=2 delta=8", "pivoted"),
    ]
    # The tuned penalties: alpha = n_train * lambda.
    assert [row["alpha"] for row in rows] == ["48", "48", "15", "15"]
    for row in rows:
        assert int(row["n"]) == 2000
        d_max, d_eff, p = float(row["d_max"]), float(row["d_eff"]), int(row["p"])
        assert 0 < d_eff <= d_max * 1.05
        # The rank follows d_max and stays far below n: the point of the method.
        assert d_max < p < 100
        # Nothing lost against exact kernel ridge at a few percent of the rank.
        assert 0.8 < float(row["ratio"]) < 1.1
        # Against the noiseless f: the noisy y would add the noise variance 1.
        assert float(row["MSE exact"]) < 0.05
        assert float(row["ratio"]) == pytest.approx(
            float(row["MSE nystroem"]) / float(row["MSE exact"]), rel=2e-3
        )
    # The smoother kernel (beta = 2) has fewer degrees of freedom.
    assert float(rows[2]["d_max"]) < float(rows[0]["d_max"])
    # One exact fit per problem, shared by its rows.
    assert rows[0]["MSE exact"] == rows[1]["MSE exact"] != rows[2]["MSE exact"]
    assert "p >= n / 2" not in default_output


def test_spline_alpha_and_sampling(capsys):
    argv = ["--n-train", 300, "--n-test", 100, "--alpha", 5, "--sampling", "pivoted"]
    _, rows = _run(argv, capsys)
    assert [row["sampling"] for row in rows] == ["pivoted", "pivoted"]
    assert [row["alpha"] for row in rows] == ["5", "5"]
    assert [row["n"] for row in rows] == ["300", "300"]


def test_npz_with_grid_search(tmp_path, capsys):
    X, y = _regression(160)
    path = tmp_path / "toy.npz"
    np.savez(path, X=X, y=y, is_test=np.zeros(len(y), dtype=bool))
    out, rows = _run(["--data", path, "--test-size", 0.25], capsys)
    assert "test MSE against the observed target" in out
    # lambda is one of the grid's, and alpha = n_train * lambda.
    lam = float(re.search(r"lambda = (\S+) chosen by 3-fold", out).group(1))
    assert np.isclose(CV_LAMBDAS, lam, rtol=2e-3).any()
    assert [row["sampling"] for row in rows] == ["uniform", "pivoted"]
    for row in rows:
        assert row["data"] == "toy.npz"
        assert int(row["n"]) == 120
        assert float(row["alpha"]) == pytest.approx(120 * lam, rel=2e-3)
        assert int(row["p"]) <= 120
        assert float(row["ratio"]) < 1.1
        # Far below var(y) (about 0.9): the offset 3 was not fitted by the kernel.
        assert float(row["MSE exact"]) < 0.1
    assert ("p >= n / 2" in out) == any(int(row["p"]) >= 60 for row in rows)


@pytest.mark.parametrize("header", [True, False])
def test_csv(tmp_path, capsys, header):
    rng = np.random.RandomState(0)
    u, v = rng.uniform(-2, 2, size=(2, 120))
    y = np.sin(2 * u) + 0.1 * rng.randn(120)
    # The target sits between the features, so --target must pick it out; and
    # v is noise, which no column predicts if read as the target.
    path = tmp_path / "toy.csv"
    np.savetxt(
        path,
        np.column_stack([u, y, v]),
        delimiter=",",
        header="u,target,v" if header else "",
        comments="",
    )
    argv = ["--data", path, "--target", "target" if header else 1]
    argv += ["--kernel", "laplacian", "--gamma", 0.5, "--alpha", 0.1]
    argv += ["--sampling", "uniform", "--no-exact"]
    out, rows = _run(argv, capsys)
    assert "kernel=laplacian, gamma=0.5" in out
    assert "GridSearchCV" not in out  # --alpha given: no search
    (row,) = rows
    assert (row["data"], row["n"], row["alpha"]) == ("toy.csv", "90", "0.1")
    assert row["MSE exact"] == row["ratio"] == row["t exact"] == "-"
    assert float(row["MSE nystroem"]) < 0.1


def test_target_offset_changes_nothing(tmp_path, capsys):
    # Neither model has an intercept: y must be centred for both, so that a
    # constant added to y leaves every error as it was.
    X, y = _regression(80)
    tables = []
    for offset in (0.0, 100.0):
        np.savez(tmp_path / "toy.npz", X=X, y=y + offset)
        argv = ["--data", tmp_path / "toy.npz", "--alpha", 3, "--sampling", "uniform"]
        tables.append(_run(argv, capsys)[1])
    for column in ("p", "MSE nystroem", "MSE exact"):
        assert tables[0][0][column] == tables[1][0][column]


def test_n_samples_caps_rows(tmp_path, capsys):
    X, y = _regression(200)
    np.savez(tmp_path / "toy.npz", X=X, y=y)
    argv = ["--data", tmp_path / "toy.npz", "--n-samples", 80, "--alpha", 1]
    out, rows = _run(argv + ["--sampling", "pivoted"], capsys)
    assert "using 80 of 200 rows" in out
    assert rows[0]["n"] == "60"


def test_cpu_small_subset(tmp_path, capsys):
    source = SHARED_DATA / "cpu_small.npz"
    if not source.exists():
        pytest.skip(f"{source} not available")
    with np.load(source) as data:
        np.savez(tmp_path / "cpu.npz", X=data["X"][:300], y=data["y"][:300])
    # alpha = 225 * 0.01: large enough for a rank below n.
    argv = ["--data", tmp_path / "cpu.npz", "--alpha", 2.25, "--random-state", 1]
    _, rows = _run(argv, capsys)
    for row in rows:
        assert int(row["n"]) == 225
        assert float(row["d_eff"]) < float(row["d_max"])
        # The certified rank on the user's data (here all rows: near n the
        # fit is exact), and the test error on the observed target within a
        # few percent of exact kernel ridge.
        assert 0 < int(row["p"]) <= 225
        assert float(row["ratio"]) < 1.1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--data", "{tmp}/missing.csv"], "--data {tmp}/missing.csv: no such file"),
        (["--data", "{tmp}/toy.txt"], "expected a .npz or .csv file"),
        (["--data", "{tmp}/no_y.npz"], "has no array X or y, only X"),
        (["--data", "{tmp}/toy.csv", "--target", "nope"], "--target 'nope' is not"),
        (["--data", "{tmp}/toy.csv", "--target", "7"], "--target '7' is not"),
        (["--data", "{tmp}/toy.npz", "--target", "y"], "--target applies to CSV"),
        (["--data", "{tmp}/toy.csv", "--n-train", "10"], "--n-train can be used only"),
        (["--data", "{tmp}/toy.npz", "--test-size", "0.9"], "2 training rows of 20"),
        (["--data", "{tmp}/toy.npz", "--n-samples", "6"], "at least 6 are needed"),
        (["--kernel", "laplacian", "--gamma", "1"], "--kernel, --gamma can be used"),
        (["--test-size", "1.5"], "argument --test-size: must lie in (0, 1)"),
        (["--alpha", "-1"], "argument --alpha: must lie in (0, inf)"),
        (["--sampling", "random"], "argument --sampling: invalid choice"),
    ],
)
def test_bad_input_names_the_option(tmp_path, capsys, argv, message):
    X, y = _regression(20)
    np.savetxt(tmp_path / "toy.csv", np.column_stack([X, y]), delimiter=",")
    np.savetxt(tmp_path / "toy.txt", np.column_stack([X, y]), delimiter=",")
    np.savez(tmp_path / "toy.npz", X=X, y=y)
    np.savez(tmp_path / "no_y.npz", X=X)
    with pytest.raises(SystemExit) as exc_info:
        main([arg.format(tmp=tmp_path) for arg in argv])
    assert exc_info.value.code == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_imports_only_the_public_api():
    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    modules = [
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    ours = [name for name in modules if name.split(".")[0] == "sklearn_dof"]
    assert sorted(set(ours)) == ["sklearn_dof", "sklearn_dof.datasets"]
    assert all(node.level == 0 for node in ast.walk(tree) if hasattr(node, "level"))


def test_help_subprocess():
    result = subprocess.run(
        [sys.executable, "-m", "sklearn_dof", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m sklearn_dof")
    for option in ("--alpha", "--sampling", "--random-state", "--no-exact"):
        assert option in result.stdout
    for option in ("--data", "--target", "--kernel", "--gamma", "--n-samples"):
        assert option in result.stdout
    for option in ("--test-size", "--n-train", "--n-test", "GridSearchCV"):
        assert option in result.stdout
