"""Tests of the command line, ``python -m sklearn_dof``."""

import re
import subprocess
import sys

import numpy as np
import pytest

from sklearn_dof.__main__ import COLUMNS, format_table, main

from .conftest import SHARED_DATA


def _run(argv, capsys):
    """Run the command in-process; return its stdout and table rows by column."""
    assert main([str(arg) for arg in argv]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("data "))
    # Columns are separated by at least two spaces; names hold single ones.
    header = re.split(r"\s{2,}", lines[start].strip())
    assert header == list(COLUMNS)
    assert set(lines[start + 1]) == {"-", " "}
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(header), line
        rows.append(dict(zip(header, cells, strict=True)))
    return out, rows


def _write_regression(n_samples, n_features=2, random_state=0):
    rng = np.random.RandomState(random_state)
    X = rng.uniform(-2, 2, size=(n_samples, n_features))
    # An offset the models must not be penalised for: y is centred for both.
    y = 3.0 + np.sin(2 * X[:, 0]) + 0.5 * X[:, -1] + 0.1 * rng.randn(n_samples)
    return X, y


def test_default_data(capsys):
    out, rows = _run(["--n-train", 400, "--n-test", 200], capsys)
    assert "test MSE against the noiseless target" in out
    assert [(row["data"], row["sampling"]) for row in rows] == [
        ("spline beta=1 delta=8", "uniform"),
        ("spline beta=1 delta=8", "pivoted"),
        ("spline beta=2 delta=8", "uniform"),
        ("spline beta=2 delta=8", "pivoted"),
    ]
    for row in rows:
        assert int(row["n"]) == 400
        d_max, d_eff, p = float(row["d_max"]), float(row["d_eff"]), int(row["p"])
        assert 0 < d_eff <= d_max * 1.05
        assert d_max < p < 400
        assert float(row["ratio"]) < 1.1
        assert float(row["ratio"]) == pytest.approx(
            float(row["MSE nystroem"]) / float(row["MSE exact"]), rel=2e-3
        )
    # The exact fit is shared by the rows of one problem.
    assert rows[0]["MSE exact"] == rows[1]["MSE exact"]


def test_default_data_alpha_and_sampling(capsys):
    _, rows = _run(
        ["--n-train", 200, "--n-test", 100, "--alpha", 5, "--sampling", "pivoted"],
        capsys,
    )
    assert [row["sampling"] for row in rows] == ["pivoted", "pivoted"]
    assert all(row["alpha"] == "5" for row in rows)


def test_npz(tmp_path, capsys):
    X, y = _write_regression(160)
    path = tmp_path / "toy.npz"
    np.savez(path, X=X, y=y, is_test=np.zeros(len(y), dtype=bool))
    out, rows = _run(["--data", path, "--test-size", 0.25], capsys)
    assert "test MSE against the observed target" in out
    assert "chosen by 3-fold cross-validation" in out
    assert [row["sampling"] for row in rows] == ["uniform", "pivoted"]
    for row in rows:
        assert row["data"] == "toy.npz"
        assert int(row["n"]) == 120
        assert int(row["p"]) <= 120
        assert float(row["ratio"]) < 1.1
        # Far below var(y) (about 0.9): the offset 3 was not fitted by the kernel.
        assert float(row["MSE exact"]) < 0.1
    large_rank = any(int(row["p"]) >= 60 for row in rows)
    assert ("Some rows have p >= n / 2" in out) == large_rank


@pytest.mark.parametrize("header", [True, False])
def test_csv(tmp_path, capsys, header):
    X, y = _write_regression(120)
    # The target sits between the features, so --target must pick it out.
    data = np.column_stack([X[:, 0], y, X[:, 1]])
    path = tmp_path / "toy.csv"
    np.savetxt(
        path, data, delimiter=",", header="u,target,v" if header else "", comments=""
    )
    target = "target" if header else "1"
    argv = ["--data", path, "--target", target, "--kernel", "laplacian"]
    argv += ["--gamma", 0.5, "--alpha", 0.1, "--sampling", "uniform", "--no-exact"]
    out, rows = _run(argv, capsys)
    assert "kernel=laplacian, gamma=0.5" in out
    (row,) = rows
    assert row["data"] == "toy.csv"
    assert row["alpha"] == "0.1"
    assert row["MSE exact"] == row["ratio"] == row["t exact"] == "-"
    assert float(row["MSE nystroem"]) < 0.5


def test_n_samples_caps_rows(tmp_path, capsys):
    X, y = _write_regression(200)
    path = tmp_path / "toy.npz"
    np.savez(path, X=X, y=y)
    out, rows = _run(
        ["--data", path, "--n-samples", 80, "--alpha", 1, "--sampling", "pivoted"],
        capsys,
    )
    assert "using 80 of 200 rows" in out
    assert int(rows[0]["n"]) == 60


def test_cpu_small_subset(tmp_path, capsys):
    source = SHARED_DATA / "cpu_small.npz"
    if not source.exists():
        pytest.skip(f"{source} not available")
    with np.load(source) as data:
        X, y = data["X"][:300], data["y"][:300]
    path = tmp_path / "cpu_small_300.npz"
    np.savez(path, X=X, y=y)
    # alpha = 225 * 0.01: large enough for a rank below n (the cross-validated
    # lambda of these rows, 1e-4, needs every column).
    _, rows = _run(["--data", path, "--alpha", 2.25, "--random-state", 1], capsys)
    assert [row["sampling"] for row in rows] == ["uniform", "pivoted"]
    for row in rows:
        assert int(row["n"]) == 225
        assert float(row["d_eff"]) < float(row["d_max"]) < int(row["p"]) <= 225
        assert float(row["ratio"]) < 1.1
    assert int(rows[1]["p"]) < 225


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--data", "{tmp}/missing.csv"], "no such file"),
        (["--data", "{tmp}/toy.csv", "--target", "nope"], "is not a column"),
        (["--data", "{tmp}/toy.csv", "--target", "7"], "out of range"),
        (["--data", "{tmp}/toy.npz", "--target", "y"], "applies to CSV files"),
        (["--data", "{tmp}/no_y.npz"], "has no array y"),
        (["--data", "{tmp}/toy.txt"], "expected a .npz or .csv file"),
        (["--data", "{tmp}/toy.csv", "--n-train", "10"], "only without --data"),
        (["--kernel", "laplacian"], "only with --data"),
        (["--test-size", "1.5"], "strictly between 0 and 1"),
    ],
)
def test_errors(tmp_path, capsys, argv, message):
    X, y = _write_regression(20)
    np.savetxt(tmp_path / "toy.csv", np.column_stack([X, y]), delimiter=",")
    np.savetxt(tmp_path / "toy.txt", np.column_stack([X, y]), delimiter=",")
    np.savez(tmp_path / "toy.npz", X=X, y=y)
    np.savez(tmp_path / "no_y.npz", X=X)
    with pytest.raises(SystemExit) as exc_info:
        main([arg.format(tmp=tmp_path) for arg in argv])
    assert exc_info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_format_table():
    row = dict.fromkeys(COLUMNS, None)
    row.update({"data": "a", "sampling": "uniform", "n": 10, "ratio": 1.0})
    lines = format_table([row]).splitlines()
    assert len(lines) == 3
    assert lines[2].startswith("a     uniform")
    assert lines[2].split()[2:4] == ["10", "-"]
    assert "1.000" in lines[2]


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
    for option in ("--data", "--target", "--sampling", "--no-exact", "--n-train"):
        assert option in result.stdout
