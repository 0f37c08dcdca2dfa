"""Sphinx configuration of the sklearn-dof documentation.

Build from the repository root (see doc/building.rst)::

    # fast: API and user guide, gallery not executed (what CI runs)
    sphinx-build -W --keep-going -b html -D plot_gallery=0 doc doc/_build/html
    # full: the example gallery executed as well
    OMP_NUM_THREADS=1 sphinx-build -W --keep-going -b html doc doc/_build/html
"""

import os
import re
import sys
from pathlib import Path

import sklearn_dof

DOC_DIR = Path(__file__).resolve().parent
REPO_ROOT = DOC_DIR.parent
sys.path.insert(0, str(DOC_DIR / "sphinxext"))

# The logistic regression example reads real data from ../shared/data beside
# the repository root when it is there (SKLEARN_DOF_DATA overrides the place)
# and falls back to a synthetic problem otherwise.
os.environ.setdefault("SKLEARN_DOF_DATA", str(REPO_ROOT.parent / "shared" / "data"))

# -- Project -----------------------------------------------------------------

project = "sklearn-dof"
author = "sklearn-dof developers"
copyright = "sklearn-dof developers, BSD-3-Clause"
release = sklearn_dof.__version__
version = ".".join(release.split(".")[:2])

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

# Links to the scikit-learn, NumPy and SciPy docs need their inventories from
# the network; a build without network would warn (and fail under -W), so
# they are opt-in: SKLEARN_DOF_DOC_INTERSPHINX=1 sphinx-build ...
if os.environ.get("SKLEARN_DOF_DOC_INTERSPHINX", "0") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
        "joblib": ("https://joblib.readthedocs.io/en/latest", None),
        "skops": ("https://skops.readthedocs.io/en/stable", None),
    }

templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    "generated/backreferences",
    "generated/api_*.rst",
]
root_doc = "index"
default_role = "literal"

# -- autodoc / autosummary / numpydoc -----------------------------------------

# The API reference lists every public name: the sections below are written
# at each build from sklearn_dof.__all__ and sklearn_dof.datasets.__all__, so a
# new public name gets its page without editing api.rst.
autosummary_generate = ["api.rst", "generated/api_listing.rst"]
# Members inherited from scikit-learn's base classes (get_params, score,
# fit_transform, set_output, metadata routing, ...) are documented by
# scikit-learn, and their docstrings point into its own documentation; the
# pages here list the methods defined in this package, including those of its
# private mixins (predict of the ridge estimators, for instance).
autodoc_default_options = {
    "members": True,
    "inherited-members": ", ".join(
        [
            "BaseEstimator",
            "ClassifierMixin",
            "ClassNamePrefixFeaturesOutMixin",
            "MultiOutputMixin",
            "RegressorMixin",
            "TransformerMixin",
            "_MetadataRequester",
            "_SetOutputMixin",
            "Warning",
            "Exception",
            "BaseException",
        ]
    ),
}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False


def _api_sections():
    """(title, description, module, names) of the API reference, in order."""
    import inspect

    from sklearn.base import BaseEstimator

    import sklearn_dof.datasets

    by_module = {
        "sklearn_dof._dof": 1,
        "sklearn_dof._estimate": 1,
        "sklearn_dof._rank": 2,
        "sklearn_dof._sampling": 3,
        "sklearn_dof._samplers": 3,
    }
    sections = [
        (
            "Estimators and transformers",
            "scikit-learn estimators: the feature map and the models built on it.",
            "sklearn_dof",
            [],
        ),
        (
            "Degrees of freedom",
            "Ridge leverage scores and the three degrees of freedom, exact or "
            "estimated from a few kernel columns.",
            "sklearn_dof",
            [],
        ),
        (
            "Rank rules",
            "How many columns a Nystroem approximation needs.",
            "sklearn_dof",
            [],
        ),
        (
            "Column selection",
            "The landmark (column) selection rules as plain functions.",
            "sklearn_dof",
            [],
        ),
        (
            "Warnings",
            "Warning categories raised by the estimators, to filter or to "
            "turn into errors with :mod:`warnings`.",
            "sklearn_dof",
            [],
        ),
        ("Other", "", "sklearn_dof", []),
    ]
    for name in sorted(sklearn_dof.__all__):
        if name.startswith("__"):  # __version__
            continue
        obj = getattr(sklearn_dof, name)
        if name == "SAMPLING_RULES":  # an instance: no __module__ of its own
            index = 3
        elif inspect.isclass(obj) and issubclass(obj, BaseEstimator):
            index = 0
        elif inspect.isclass(obj) and issubclass(obj, Warning):
            index = 4
        else:
            module = getattr(obj, "__module__", "") or ""
            index = by_module.get(module, 3 if "sampl" in module else 5)
        sections[index][3].append(name)
    sections.append(
        (
            "Data sets",
            "The synthetic problems of Bach (COLT 2013), Section 4: periodic "
            "kernels and targets with known eigenvalue decays.",
            "sklearn_dof.datasets",
            sorted(sklearn_dof.datasets.__all__),
        )
    )
    return [section for section in sections if section[3]]


def _write_api_listing():
    """Write the autosummary tables of doc/api.rst to doc/generated/.

    ``api_body.rst`` is included by api.rst; ``api_listing.rst`` holds the
    same tables with toctree paths relative to doc/generated/, for the stub
    generator of autosummary (which resolves them against the file's folder).
    """
    out = DOC_DIR / "generated"
    out.mkdir(exist_ok=True)
    for filename, toctree in (("api_body.rst", "generated"), ("api_listing.rst", ".")):
        lines = []
        for title, description, module, names in _api_sections():
            lines += [title, "-" * len(title), ""]
            if description:
                lines += [description, ""]
            lines += [f".. currentmodule:: {module}", "", ".. autosummary::"]
            lines += [f"   :toctree: {toctree}", "   :nosignatures:", ""]
            lines += [f"   {name}" for name in names] + [""]
        text = "\n".join(lines)
        path = out / filename
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


_write_api_listing()


def _write_constants_table():
    """Write doc/generated/constants.rst, the table of the package's tunable
    constants and their reasons (doc/design/constants.rst includes it)."""
    sys.path.insert(0, str(DOC_DIR / "sphinxext"))
    from constants_table import table

    out = DOC_DIR / "generated"
    out.mkdir(exist_ok=True)
    text = table(Path(sklearn_dof.__file__).parent)
    path = out / "constants.rst"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


_write_constants_table()

# numpydoc prints the type of a parameter or attribute as plain
# reStructuredText, where a word ending in "_" is a hyperlink reference:
# "ndarray of shape (n_components_,)" would point to a missing target.  The
# docstrings read naturally in help(); the type lines are escaped here.
_FIELD = re.compile(r"^(\s*[\w*][\w*, ]* : )(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<![\w`\\])([A-Za-z]\w*)_(?![\w`])")
_LITERAL = re.compile(r"(``.*?``|`[^`]*`)")


def _escape_type_line(line):
    match = _FIELD.match(line)
    if not match:
        return line
    head, rest = match.groups()
    parts = _LITERAL.split(rest)
    for i in range(0, len(parts), 2):  # outside the literals
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\1\\_", parts[i])
    return head + "".join(parts)


def _escape_type_lines(app, what, name, obj, options, lines):
    lines[:] = [_escape_type_line(line) for line in lines]


def _skip_metadata_requests(app, what, name, obj, skip, options):
    # set_fit_request, set_score_request, ...: generated by scikit-learn's
    # metadata routing on every estimator class and documented there.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    # Before numpydoc (priority 500) turns the sections into reST.
    app.connect("autodoc-process-docstring", _escape_type_lines, priority=100)
    app.connect("autodoc-skip-member", _skip_metadata_requests)


# -- Example gallery ----------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": str(REPO_ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "gallery_order.ExampleOrder",
    "doc_module": ("sklearn_dof",),
    "reference_url": {"sklearn_dof": None},
    "backreferences_dir": os.path.join("generated", "backreferences"),
    "inspect_global_variables": False,
    "remove_config_comments": True,
    "show_memory": False,
    # No sg_execution_times.rst pages (one would land in doc/ itself); each
    # example page ends with its own running time.
    "write_computation_times": False,
    "min_reported_time": 1,
    "matplotlib_animations": False,
    "download_all_examples": False,
}

# -- HTML -----------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"sklearn-dof {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc", "sg_download_links", "sg_launcher_links"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "install": [], "changelog": []}
html_context = {"default_mode": "light"}
