"""The documentation builds without warnings and documents every public name.

Runs the fast build of doc/building.rst (examples not executed) on a copy of
doc/ in a temporary folder, so that the files the build generates there
(API stubs, gallery pages) leave the repository's doc/ as it was.  Skipped
without Sphinx (``pip install ".[doc]"``).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sklearn_dof
import sklearn_dof.datasets

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("_build", "generated", "auto_examples")


def test_fast_documentation_build(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("sphinx_gallery")
    pytest.importorskip("pydata_sphinx_theme")

    # A copy of doc/ beside links to everything else of the repository, which
    # the pages reach through ../ (examples/, CHANGELOG.rst, benchmark tables).
    source = tmp_path / "src"
    source.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("doc", ".git"):
            (source / entry.name).symlink_to(entry, entry.is_dir())
    shutil.copytree(
        ROOT / "doc", source / "doc", ignore=shutil.ignore_patterns(*GENERATED)
    )
    out = tmp_path / "html"

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SKLEARN_DOF_DOC_INTERSPHINX", None)  # no network access
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"]
        + ["-D", "plot_gallery=0", str(source / "doc"), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    public = [name for name in sklearn_dof.__all__ if not name.startswith("__")]
    pages = [f"sklearn_dof.{name}" for name in public] + [
        f"sklearn_dof.datasets.{name}" for name in sklearn_dof.datasets.__all__
    ]
    missing = [
        page for page in pages if not (out / "generated" / f"{page}.html").exists()
    ]
    assert not missing, f"no API page for {missing}"
    api = (out / "api.html").read_text(encoding="utf-8")
    unlisted = [page for page in pages if f"generated/{page}.html" not in api]
    assert not unlisted, f"not listed in the API reference: {unlisted}"

    for page in ("index", "user_guide", "sampling", "auto_examples/index"):
        assert (out / f"{page}.html").exists(), page
