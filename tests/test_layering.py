"""The import layering, read from the source with ``ast`` (no module is imported).

Data flows ``cli -> commands/<verb> -> library (config, checks, training, evaluation, ...) ->
models or bridge -> RLinf``, and the verbs are leaves: no command imports another. The
declarations (:mod:`dexrl.specs`, :mod:`dexrl.plugins`, :mod:`dexrl.catalog`) and the small
shared modules (:mod:`dexrl.errors`, :mod:`dexrl.vec_env`, :mod:`dexrl.durable`) sit below all of
them.
Every import counts, also those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "dexrl"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names a file imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


IMPORTS = {_module(p): _imports(p) for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations(importer: str, forbidden: tuple[str, ...],
               imports: dict[str, set[str]] = IMPORTS) -> list[str]:
    """``importer -> name`` for every forbidden import of the modules under ``importer``."""
    return sorted(f"{module} -> {name}" for module, names in imports.items()
                  if _within(module, importer) for name in names
                  if any(_within(name, f) for f in forbidden) and not _within(name, importer))


def test_the_walk_sees_the_package() -> None:
    assert "dexrl.bridge.registry" in IMPORTS and "dexrl.cli" in IMPORTS
    assert "rlinf.models" in IMPORTS["dexrl.bridge.registry"]


def test_only_the_bridge_imports_rlinf() -> None:
    found = sorted(f"{m} -> {n}" for m, names in IMPORTS.items() for n in names
                   if _within(n, "rlinf") and not _within(m, "dexrl.bridge"))
    assert found == []


def test_only_the_cli_imports_the_commands() -> None:
    found = [v for v in violations("dexrl", ("dexrl.commands",))
             if not v.startswith(("dexrl.cli ", "dexrl.commands"))]
    assert found == []


def command_imports(imports: dict[str, set[str]] = IMPORTS) -> list[str]:
    """``command -> name`` for every import of one command module by another."""
    return sorted(f"{module} -> {name}" for module, names in imports.items()
                  if _within(module, "dexrl.commands") and module != "dexrl.commands"
                  for name in names if _within(name, "dexrl.commands")
                  and name != "dexrl.commands" and not _within(name, module))


def test_no_command_imports_another() -> None:
    """What two verbs share lives in a library module (training, config, hub, downloads, ...)."""
    assert command_imports() == []


ABOVE_THE_RUN_FOLDER = ("dexrl.commands", "dexrl.cli", "dexrl.bridge", "dexrl.training",
                        "dexrl.evaluation", "dexrl.doctor")


@pytest.mark.parametrize(("importer", "forbidden"), [
    # The models are a library of their own: the catalog's declarations at most.
    ("dexrl.models", ("dexrl.bridge", "dexrl.commands", "dexrl.cli", "dexrl.evaluation",
                      "dexrl.doctor", "dexrl.checks", "dexrl.config", "dexrl.hub", "dexrl.runs",
                      "dexrl.launch_plan")),
    # The bridge serves the library and the verbs, never the other way round.
    ("dexrl.bridge", ("dexrl.commands", "dexrl.cli", "dexrl.evaluation", "dexrl.doctor",
                      "dexrl.checks")),
    ("dexrl.evaluation", ("dexrl.commands", "dexrl.cli", "dexrl.doctor")),
    # The run folder's one definition, read by the sessions and by the bridge's launch.
    ("dexrl.runs", ABOVE_THE_RUN_FOLDER),
    ("dexrl.runstate", ABOVE_THE_RUN_FOLDER),
    ("dexrl.checks", ("dexrl.commands", "dexrl.cli", "dexrl.bridge", "dexrl.evaluation",
                      "dexrl.doctor")),
    # Declarations: specs imports nothing of dexrl, plugins only specs, the catalog both.
    ("dexrl.specs", ("dexrl",)),
    ("dexrl.plugins", ("dexrl.catalog", "dexrl.commands", "dexrl.bridge", "dexrl.models")),
    ("dexrl.catalog", ("dexrl.commands", "dexrl.bridge", "dexrl.models", "dexrl.checks",
                       "dexrl.config", "dexrl.evaluation")),
    ("dexrl.vec_env", ("dexrl",)),
    ("dexrl.errors", ("dexrl",)),
    ("dexrl.durable", ("dexrl",)),
])
def test_layers_read_straight_down(importer: str, forbidden: tuple[str, ...]) -> None:
    assert violations(importer, forbidden) == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """A control: the same walk and rule report an upward import hidden in a function."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from dexrl.commands.train import run\n")
    imports = {**IMPORTS, "dexrl.models.bad": _imports(bad)}
    assert violations("dexrl.models", ("dexrl.commands",), imports) == [
        "dexrl.models.bad -> dexrl.commands.train", "dexrl.models.bad -> dexrl.commands.train.run"]


def test_the_check_catches_a_command_importing_another(tmp_path: Path) -> None:
    """A control: an import of the train command inside a function of another verb is found,
    and a command importing only itself and the library is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("from dexrl.commands.bad import helper\nfrom dexrl import training\n\n\n"
                   "def f():\n    from dexrl.commands import train\n")
    imports = {**IMPORTS, "dexrl.commands.bad": _imports(bad)}
    assert command_imports(imports) == ["dexrl.commands.bad -> dexrl.commands.train"]
