"""What a Python source imports, read with ``ast`` (nothing is imported): the repository tests'
layering and house rules share it."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path


def module_name(path: Path, package: Path) -> str:
    """The dotted name of the module at ``path`` in ``package`` (``dexrl/runs/layout.py`` ->
    ``dexrl.runs.layout``; a package's ``__init__.py`` -> the package)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Absolute names the import statements among ``nodes`` import (``from a import b`` counts
    as ``a`` and ``a.b``; relative imports are left out)."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found
