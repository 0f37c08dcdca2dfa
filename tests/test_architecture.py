"""The package's structure: one layer per idea, no import cycles, and
benchmarks that use the public API only (see doc/architecture.rst).

The imports are read from the source with :mod:`ast`, those inside
functions included, so a cycle cannot hide behind a deferred import.
"""

import ast
from pathlib import Path

import pytest

import sklearn_dof

PACKAGE = Path(sklearn_dof.__file__).parent
BENCHMARKS = PACKAGE.parent / "benchmarks"

# Bottom up, as doc/architecture.rst draws them: a module may import only
# from the layers below its own.
LAYERS = [
    ("BLAS by pointer", ["_blas"]),
    (
        "utilities",
        [
            "_version",
            "_config",
            "_parallel",
            "_tiles",
            "_cg",
            "_pcg_operator",
            "_loo",
            "_duplicates",
            "_penalty_walk",
            "_exact_screen",
            "_progress",
        ],
    ),
    ("memory budget", ["_memory"]),
    ("kernel objects", ["_kernel_objects"]),
    ("validation", ["_validation"]),
    ("kernels", ["_kernels"]),
    ("row blocks", ["_blocks"]),
    ("kernel learning", ["_kernel_learning"]),
    ("linear algebra and solvers", ["_linalg", "_newton", "_ridge_solve"]),
    ("column selection", ["_sampling"]),
    ("Dask back-end", ["_dask"]),
    ("degrees of freedom and loss", ["_dof", "_certificate"]),
    ("sampling rules", ["_samplers"]),
    ("estimate and rank rules", ["_estimate", "_rank", "_heldout"]),
    ("landmark block", ["_landmark_block"]),
    ("landmark selection", ["_landmarks"]),
    ("array-API back-end", ["_array_api"]),
    ("transformer", ["_nystroem"]),
    ("estimator base", ["_base"]),
    ("estimators", ["_ridge", "_logistic"]),
    ("data sets", ["datasets._clustered", "datasets._periodic_spline"]),
    ("public API and CLI", ["datasets", "__init__"]),
    ("command line", ["__main__"]),
]


def _module_name(path, root):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imported_modules(path, root, known, package_name):
    """The modules of ``known`` (names relative to the package) that
    ``path`` imports, at any depth of its syntax tree."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    here = parts[:-1]  # the package a relative import starts from
    found = set()

    def add(target, names):
        if target in known:
            found.add(target)
        for alias in names:
            full = f"{target}.{alias.name}" if target else alias.name
            if full in known:
                found.add(full)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module.split(".") if node.module else []
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                add(".".join(base + module), node.names)
            elif module and module[0] == package_name:
                add(".".join(module[1:]), node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package_name + "."):
                    add(alias.name.split(".", 1)[1], [])
    found.discard(_module_name(path, root))
    return found


def _import_graph(root=PACKAGE, package_name="sklearn_dof"):
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    known = set(paths)
    return {
        name: _imported_modules(path, root, known, package_name)
        for name, path in paths.items()
    }


def _find_cycle(graph):
    """A list of modules forming a cycle, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_cycle_detection_finds_a_deferred_import(tmp_path):
    # The reader and the detector themselves: a cycle closed by an import
    # inside a function, and the same package without it.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from ._b import f\n")
    (package / "_a.py").write_text("from . import _b\n")
    (package / "_b.py").write_text("def f():\n    from pkg._a import g\n")
    graph = _import_graph(package, "pkg")
    assert graph == {"__init__": {"_b"}, "_a": {"_b"}, "_b": {"_a"}}
    cycle = _find_cycle(graph)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["_a", "_b"]
    (package / "_b.py").write_text("def f():\n    pass\n")
    assert _find_cycle(_import_graph(package, "pkg")) is None


def test_import_graph_has_no_cycle():
    graph = _import_graph()
    assert len(graph) >= 20, sorted(graph)  # the reader found the modules
    assert "_kernels" in graph["_blocks"]  # and their imports
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_every_module_imports_only_from_lower_layers():
    graph = _import_graph()
    layer_of = {m: i for i, (_, modules) in enumerate(LAYERS) for m in modules}
    assert set(layer_of) == set(graph), "a module outside LAYERS (or a stale entry)"
    upward = [
        f"{module} ({LAYERS[layer_of[module]][0]}) imports {target} "
        f"({LAYERS[layer_of[target]][0]})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of[target] >= layer_of[module]
    ]
    assert not upward, "\n".join(upward)


def _private_imports(path):
    """``sklearn_dof._private`` names imported by a benchmark script."""
    private = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] != "sklearn_dof":
                continue
            if any(p.startswith("_") for p in parts[1:]):
                private.append(node.module)
            private += [
                f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")
            ]
        elif isinstance(node, ast.Import):
            private += [
                a.name
                for a in node.names
                if a.name.startswith("sklearn_dof.")
                and any(p.startswith("_") for p in a.name.split(".")[1:])
            ]
    return private


@pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="no benchmarks/ beside the package")
@pytest.mark.parametrize(
    "script",
    sorted(p.name for p in BENCHMARKS.glob("*.py")) if BENCHMARKS.is_dir() else [],
)
def test_benchmarks_import_no_private_module(script):
    assert _private_imports(BENCHMARKS / script) == []


def test_private_import_reader(tmp_path):
    script = tmp_path / "bench.py"
    script.write_text(
        "import sklearn_dof\n"
        "from sklearn_dof import DoFNystroem, _parallel\n"
        "def f():\n"
        "    from sklearn_dof._sampling import PartialCholesky\n"
        "    import sklearn_dof._kernels\n"
    )
    assert _private_imports(script) == [
        "sklearn_dof._parallel",
        "sklearn_dof._sampling",
        "sklearn_dof._kernels",
    ]


def _private_names_used(path):
    """``(module, name)`` of the private names of other package modules that
    ``path`` imports (``from ._m import _name``) or reads (``_m._name``)."""
    used = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            used += [
                (node.module, a.name)
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id.startswith("_")
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            used.append((node.value.id, node.attr))
    return used


def test_modules_use_each_others_public_names():
    used = [
        f"{path.name} uses {module}.{name}"
        for path in sorted(PACKAGE.glob("_*.py"))
        for module, name in _private_names_used(path)
    ]
    assert not used, "\n".join(used)


def test_private_name_reader_sees_imports_and_attributes(tmp_path):
    module = tmp_path / "_a.py"
    module.write_text(
        "from ._b import _hidden, shown\nfrom . import _c\nx = _c._inner + _c.outer\n"
    )
    assert _private_names_used(module) == [("_b", "_hidden"), ("_c", "_inner")]


SPHINXEXT = PACKAGE.parent / "doc" / "sphinxext"


@pytest.mark.skipif(not SPHINXEXT.is_dir(), reason="no doc/ beside the package")
def test_every_tunable_constant_says_why(tmp_path, monkeypatch):
    # doc/design/constants.rst lists them with the comment above each.
    monkeypatch.syspath_prepend(str(SPHINXEXT))
    from constants_table import constants

    found = constants(PACKAGE)
    assert len(found) >= 40, len(found)  # the reader sees the constants
    silent = [f"{c.module}.{c.name}" for c in found if not c.reason]
    assert not silent, silent
    # and misses a constant without its comment.
    (tmp_path / "_m.py").write_text("# Why.\nA = 1\nB_C, D = 2, 3.0\n\nE = 4\n")
    assert [(c.name, c.reason) for c in constants(tmp_path)] == [
        ("A", "Why."),
        ("B_C", "Why."),
        ("D", "Why."),
        ("E", ""),
    ]
