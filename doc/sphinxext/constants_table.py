"""The tunable constants of the package, read from its source.

Every module-level number whose name is in capitals (``PCG_TOL``,
``_ROWS_PER_COLUMN``...) is a choice someone made: the comment right above
it says why.  :func:`constants` reads them all, with that comment, so that
one page lists them (``doc/design/constants.rst``, written by
``doc/conf.py`` at build time) and a test can require the comment
(``tests/test_architecture.py``).
"""

import ast
from pathlib import Path
from typing import NamedTuple


class Constant(NamedTuple):
    module: str
    name: str
    value: object
    reason: str


def _numbers(node):
    """``(name, value)`` of a module-level assignment of numbers to
    capitalised names (one, or a tuple unpacked), else nothing."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return []
    try:
        value = ast.literal_eval(value)
    except ValueError:
        return []
    if isinstance(target, ast.Tuple) and isinstance(value, tuple):
        pairs = [
            (t.id, v)
            for t, v in zip(target.elts, value, strict=False)
            if isinstance(t, ast.Name)
        ]
    elif isinstance(target, ast.Name):
        pairs = [(target.id, value)]
    else:
        return []
    return [
        (name, v)
        for name, v in pairs
        if name.lstrip("_").isupper()
        and isinstance(v, int | float)
        and not isinstance(v, bool)
    ]


def _comment_above(lines, lineno):
    """The comment lines above line ``lineno`` (1-based), joined: right
    above it, or above the assignments it follows without a blank line (a
    comment on a group of constants)."""
    text = []
    i = lineno - 2
    while (
        i >= 0 and (lines[i][:1].isalpha() or lines[i][:1] == "_") and " = " in lines[i]
    ):
        i -= 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        text.append(lines[i].strip().lstrip("#:").strip())
        i -= 1
    return " ".join(reversed(text))


def constants(package):
    """The :class:`Constant` of every private module of ``package`` (a
    directory), in module order."""
    found = []
    for path in sorted(Path(package).glob("_*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.parse(source).body:
            for name, value in _numbers(node):
                reason = _comment_above(lines, node.lineno)
                found.append(Constant(path.stem, name, value, reason))
    return found


def table(package):
    """An RST list-table of :func:`constants`."""
    out = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 18 24 10 48",
        "",
        "   * - Module",
        "     - Constant",
        "     - Value",
        "     - Why (the comment above it)",
    ]
    for c in constants(package):
        reason = c.reason.replace("`", "'") or "--"
        out += [
            f"   * - ``{c.module}``",
            f"     - ``{c.name}``",
            f"     - ``{c.value!r}``",
            f"     - {reason}",
        ]
    return "\n".join(out) + "\n"
