"""The import layering, read from the source with ``ast`` (no module is imported).

Every unit of dexrl (a top-level module or package) has a rank in :data:`RANKS`, and imports go
only to lower ranks; there is no import cycle, and the verbs are leaves. Every import counts,
also those inside functions (see docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.source_imports import imported_names, module_name

ROOT = Path(__file__).resolve().parents[2] / "dexrl"


def _module(path: Path) -> str:
    return module_name(path, ROOT)


def _imports(path: Path) -> set[str]:
    """Absolute names a file imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    return imported_names(ast.walk(ast.parse(path.read_text(), str(path))))


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


# The verbs' shared flag definitions: a module of dexrl.commands that is not a verb.
SHARED_OPTIONS = "dexrl.commands.options"


def command_imports(imports: dict[str, set[str]] = IMPORTS) -> list[str]:
    """``command -> name`` for every import of one command module by another (the shared
    options excepted, which import no verb)."""
    return sorted(f"{module} -> {name}" for module, names in imports.items()
                  if _within(module, "dexrl.commands") and module != "dexrl.commands"
                  for name in names if _within(name, "dexrl.commands")
                  and name != "dexrl.commands" and not _within(name, module)
                  and not _within(name, SHARED_OPTIONS))


def test_no_command_imports_another() -> None:
    """What two verbs share lives in a library module (training, config, hub, downloads, ...);
    their flags, in the shared options module, which imports no verb."""
    assert command_imports() == []
    assert not any(_within(name, "dexrl.commands") and name != "dexrl.commands"
                   for name in IMPORTS[SHARED_OPTIONS])


# Each unit (a top-level module or package of dexrl, or a module or subpackage ranked on its own)
# has a rank; an import may only go to a unit of a lower rank. Units of one rank are siblings and
# import none of each other. A new unit must be placed here (test_every_unit_has_a_rank).
# Checkpoint files (folder layout, weights, RLinf step folders) sit low in the checkpoint home,
# below models and runs that read them; they build on the run folder's names and durable writes.
# Verifying a folder needs the catalog and serves hub and config, so it has a rank of its own.
RANKS: dict[str, int] = {
    "dexrl": 0, "dexrl.errors": 0, "dexrl.units": 0, "dexrl.versions": 0, "dexrl.vec_env": 0,
    "dexrl.console": 0, "dexrl.specs": 0,
    "dexrl.subproc": 1, "dexrl.runs.layout": 1, "dexrl.runs.durable": 1,
    "dexrl.checkpoints.files": 2,
    "dexrl.runs": 3,
    "dexrl.cluster": 4, "dexrl.models": 4,
    "dexrl.plugins": 5, "dexrl.reach": 5,
    "dexrl.catalog": 6,
    "dexrl.checkpoints.verify": 7,
    "dexrl.hub": 8,
    "dexrl.config": 9,
    "dexrl.checkpoints": 10, "dexrl.curves": 10,
    "dexrl.bridge": 11,
    "dexrl.training": 12, "dexrl.evaluation": 12,
    "dexrl.doctor": 13,
    "dexrl.commands": 14,
    "dexrl.cli": 15,
    "dexrl.__main__": 16,
}


def unit(module: str) -> str:
    """The ranked unit a dexrl module belongs to: the longest key of :data:`RANKS` it is within
    (``dexrl.checkpoints.files.steps`` -> ``dexrl.checkpoints.files``), else its top-level module
    or package (``dexrl.runs.state`` -> ``dexrl.runs``; unranked there, the test says so)."""
    keys = [k for k in RANKS if k != "dexrl" and _within(module, k)]
    return max(keys, key=len) if keys else ".".join(module.split(".")[:2])


def _known(name: str, imports: dict[str, set[str]]) -> str | None:
    """The dexrl module ``name`` refers to (``dexrl.a.b.func`` -> ``dexrl.a.b``), if any."""
    while name and name not in imports:
        name = name.rpartition(".")[0]
    return name or None


def upward_imports(imports: dict[str, set[str]] = IMPORTS) -> list[str]:
    """``importer -> imported`` for every import of a unit of the same or a higher rank."""
    found = set()
    for module, names in imports.items():
        for name in names:
            target = _known(name, imports) if _within(name, "dexrl") else None
            if target is None or unit(target) == unit(module):
                continue
            if RANKS[unit(target)] >= RANKS[unit(module)]:
                found.add(f"{module} -> {target}")
    return sorted(found)


def cycles(imports: dict[str, set[str]] = IMPORTS) -> list[list[str]]:
    """Every import cycle among dexrl's modules (strongly connected sets of two or more)."""
    graph = {m: {t for n in names if _within(n, "dexrl") and (t := _known(n, imports))
                 and t != m} for m, names in imports.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_has_a_rank() -> None:
    assert sorted({unit(m) for m in IMPORTS} - set(RANKS)) == []


def test_imports_read_straight_down() -> None:
    assert upward_imports() == []


def test_no_import_cycle() -> None:
    assert cycles() == []


def test_the_rank_check_catches_an_upward_import(tmp_path: Path) -> None:
    """A control: an upward import hidden in a function, and an import of a sibling of the
    same rank, are both reported; a downward one is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("from dexrl.errors import DexrlError\n\n\ndef f():\n"
                   "    from dexrl.commands.train import train\n"
                   "    from dexrl.curves import plot_runs\n")
    imports = {**IMPORTS, "dexrl.models.bad": _imports(bad)}
    assert upward_imports(imports) == ["dexrl.models.bad -> dexrl.commands.train",
                                       "dexrl.models.bad -> dexrl.curves"]


def test_the_cycle_check_catches_a_cycle_through_a_function_import(tmp_path: Path) -> None:
    """A control: ``a -> b`` at the top and ``b -> a`` inside a function make a cycle."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from dexrl.runs.b import g\n")
    b.write_text("def g():\n    from dexrl.runs.a import f\n")
    imports = {**IMPORTS, "dexrl.runs.a": _imports(a), "dexrl.runs.b": _imports(b)}
    assert cycles(imports) == [["dexrl.runs.a", "dexrl.runs.b"]]


def test_a_subpackage_ranked_on_its_own_is_its_own_unit(tmp_path: Path) -> None:
    """A control: the longest key wins, so the checkpoint files rank below models and runs while
    the rest of the checkpoint home ranks above them; an upward import out of the files is
    reported, a downward import into them is not."""
    assert unit("dexrl.checkpoints.files.steps") == "dexrl.checkpoints.files"
    assert unit("dexrl.checkpoints.policy") == "dexrl.checkpoints"
    assert unit("dexrl.runs.layout") == "dexrl.runs.layout"
    assert unit("dexrl.runs.state") == "dexrl.runs"
    up, down = tmp_path / "up.py", tmp_path / "down.py"
    up.write_text("from dexrl.checkpoints.sources import resolve_checkpoint\n")
    down.write_text("from dexrl.checkpoints.files.layout import weight_files\n")
    imports = {**IMPORTS, "dexrl.checkpoints.files.up": _imports(up),
               "dexrl.models.down": _imports(down)}
    assert upward_imports(imports) == ["dexrl.checkpoints.files.up -> dexrl.checkpoints.sources"]
